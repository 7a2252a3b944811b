"""How large one forward pass may be on a model's device: its tokens, (query, key) pairs and
estimated activation bytes (docs/design.md, "Where the time goes"). Scoring plans its passes
within these, and an out-of-memory error still halves a pass.
"""

from __future__ import annotations

import torch

from marginal_core.lm.adapter import LM

DEFAULT_MAX_BATCH_TOKENS = 1024
# On a GPU a pass of a small model costs mostly its kernel launches: larger passes, fewer launches.
CUDA_MAX_BATCH_TOKENS = 8192
# A pass attends over at most this many (query, key) pairs: short texts never reach it, a long
# text's passes get fewer tokens as its depth grows, so each stays short (a stop is heard
# between passes).
DEFAULT_MAX_PASS_PAIRS = 1 << 22
CUDA_MAX_PASS_PAIRS = 1 << 26
DEFAULT_ROW_TOKENS = 256
DEFAULT_MAX_BATCH_BYTES = 1 << 30
# On CUDA a pass's estimated activations may take this share of the memory the weights leave.
CUDA_PASS_SHARE = 0.25


def pass_pairs(lm: LM) -> int:
    """The most (query, key) pairs one pass may attend over on the model's device."""
    return CUDA_MAX_PASS_PAIRS if lm.device.type == "cuda" else DEFAULT_MAX_PASS_PAIRS


def pass_tokens(lm: LM, asked: int | None = None) -> int:
    """Tokens per forward pass: the ones asked for, else the device's default."""
    if asked is not None:
        return asked
    return CUDA_MAX_BATCH_TOKENS if lm.device.type == "cuda" else DEFAULT_MAX_BATCH_TOKENS


def pass_bytes(lm: LM, asked: int | None = None) -> int:
    """Estimated activation bytes per forward pass: the ones asked for, else on CUDA a share of
    the device memory the model's weights leave (a 27B model's passes would not fit a fixed GiB,
    a small model's could take more), elsewhere DEFAULT_MAX_BATCH_BYTES. It depends on the device
    and the model only, so every run of a model plans alike (shared passes key on it); an
    out-of-memory error still halves the pass."""
    if asked is not None:
        return asked
    if lm.device.type != "cuda":
        return DEFAULT_MAX_BATCH_BYTES
    total = torch.cuda.get_device_properties(lm.device).total_memory
    return max(DEFAULT_MAX_BATCH_BYTES, int((total - lm.weight_bytes) * CUDA_PASS_SHARE))
