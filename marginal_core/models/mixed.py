"""The float16 precision: the decoder's matrix products in float16, everything else in float32
(docs/design.md, "Precision").

Rounding to bfloat16 (8 significant bits) moves a path's log p by tenths of a nat; float16 keeps
11. A model all in float16 overflows (Gemma's residual stream passes 65,504), so only the
decoder's linear layers hold float16 weights and run under autocast: the residual stream, the
norms, the embeddings and the LM head stay float32. The rotary angles are computed in float32
and their cosines and sines handed over in float16, so that the rotated keys, and the KV cache,
are float16 too (in float32 they would double the keys' memory and be cast on every call).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def make_mixed(model: PreTrainedModel) -> PreTrainedModel:
    """A model loaded in float16 made mixed, in place: float32 for every parameter and buffer but
    the decoder's linear weights, the rotary tables' outputs in float16, and the decoder's
    forward under float16 autocast."""
    import torch

    decoder = model.get_decoder()
    products = {id(m.weight) for m in decoder.modules() if isinstance(m, torch.nn.Linear)}
    with torch.no_grad():
        for module in model.modules():
            for param in module.parameters(recurse=False):
                if id(param) not in products and param.is_floating_point():
                    param.data = param.data.float()
            for name, buf in module.named_buffers(recurse=False):
                if buf.is_floating_point():
                    setattr(module, name, buf.float())
    for module in decoder.modules():
        if type(module).__name__.endswith("RotaryEmbedding"):
            module.forward = _in_float16(module.forward)
    device_type = next(decoder.parameters()).device.type
    decoder.forward = _under_autocast(decoder.forward, device_type)
    return model


def _under_autocast(forward: Callable[..., Any], device_type: str) -> Callable[..., Any]:
    """forward under float16 autocast, entered afresh on each call (one shared autocast instance
    keeps the state it restores on itself, which threads would race on)."""
    import torch

    @functools.wraps(forward)
    def mixed_forward(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type, dtype=torch.float16):
            return forward(*args, **kwargs)

    return mixed_forward


def _in_float16(forward: Callable[..., Any]) -> Callable[..., Any]:
    """A rotary table's forward whose (cos, sin) come back in float16."""
    import torch

    @functools.wraps(forward)
    def float16_forward(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        return tuple(t.to(torch.float16) for t in forward(*args, **kwargs))

    return float16_forward
