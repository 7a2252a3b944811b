"""Which attention kernel the tree-masked passes take (docs/design.md, "Precision" and "Where the
time goes").

The memory-efficient kernel miscomputed a tree-masked pass whose keys were a stride-0 view
(pytorch/pytorch#191937): transformers' ``repeat_kv`` returns one where a model has a single KV
head. So the passes take the math kernel, which materialises every attention score. With
``MARGINAL_TREE_ATTENTION=efficient`` a model's attention runs through ``contiguous_sdpa`` (keys
and values copied whole before SDPA) and the passes may take the memory-efficient kernel: the
switch a GPU session flips to prove that path on the pinned text (tests/library/test_cuda.py) before it
becomes the default.

``MARGINAL_TREE_ATTENTION=flex`` runs the passes through PyTorch's FlexAttention instead, on any
device: the trie scorer hands each layer a ``BlockMask`` built from the tree rule (no dense mask,
no materialised scores, and blocks no query sees are skipped), which ``flex_or_sdpa`` sends to
``flex_attention``, compiled on CUDA; every other call (prefill, generation, plain scoring) stays on
transformers' SDPA.
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any

import torch

from marginal_core.ground.errors import MarginalError

TREE_ATTENTION_ENV = "MARGINAL_TREE_ATTENTION"
KERNELS = ("math", "efficient", "flex")
CONTIGUOUS_SDPA = "marginal_contiguous_sdpa"  # the names the functions are registered under
FLEX_OR_SDPA = "marginal_flex_or_sdpa"


def tree_kernel() -> str:
    """The kernel the switch asks for (math unless set)."""
    kernel = os.environ.get(TREE_ATTENTION_ENV, "").strip() or "math"
    if kernel not in KERNELS:
        raise MarginalError(f"{TREE_ATTENTION_ENV}={kernel!r}: set it to {' or '.join(KERNELS)}, or unset it")
    return kernel


def contiguous_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, except that under a mask the keys and values are repeated
    per query head into contiguous copies, never a stride-0 view."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    if attention_mask is None or groups == 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    key, value = repeat_kv(key, groups).contiguous(), repeat_kv(value, groups).contiguous()
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=False
    )
    return out.transpose(1, 2).contiguous(), None


@functools.cache
def flex_kernel(device_type: str) -> Any:
    """flex_attention as a device runs it: compiled once per process on CUDA (shapes that change
    from pass to pass compile as dynamic); unfused elsewhere, since inductor's CPU template fails
    to compile once a pass's batch changes (torch 2.13: a C++ compile error), which makes the CPU
    path a check of the masks rather than a fast one."""
    from torch.nn.attention.flex_attention import flex_attention

    if device_type == "cuda":
        return torch.compile(flex_attention)
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    return flex_attention


@functools.cache
def soft_capped(cap: float | None) -> Any:
    """FlexAttention's score_mod for a model that soft-caps its attention logits (None: none); one
    function per cap, since the compiled kernel recompiles for a score_mod it has not seen."""
    if not cap:
        return None
    return lambda score, *_: cap * torch.tanh(score / cap)


def flex_or_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """FlexAttention under a ``BlockMask`` (the trie scorer's passes), transformers' SDPA under
    anything else. Grouped-query heads are shared by the kernel, not repeated."""
    from torch.nn.attention.flex_attention import BlockMask
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not isinstance(attention_mask, BlockMask):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    out = flex_kernel(query.device.type)(query, key, value, block_mask=attention_mask, scale=scaling,
                                         score_mod=soft_capped(kwargs.get("softcap")),
                                         enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None


def use_tree_attention(model: Any, kernel: str) -> None:
    """Run the model's attention through the function the kernel needs (contiguous_sdpa for
    efficient, flex_or_sdpa for flex, transformers' SDPA for math), registered with transformers
    under its name (a name-to-function entry: registering it again for another model is harmless)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    ours = {"efficient": (CONTIGUOUS_SDPA, contiguous_sdpa), "flex": (FLEX_OR_SDPA, flex_or_sdpa)}
    if kernel not in ours:  # math: SDPA, unless an adapter made earlier over this model switched it
        if model.config._attn_implementation in (CONTIGUOUS_SDPA, FLEX_OR_SDPA):
            model.set_attn_implementation("sdpa")
        return
    name, function = ours[kernel]
    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, sdpa_mask)
    model.set_attn_implementation(name)
