"""The float16 precision: the decoder's matrix products in float16, everything else in float32
(docs/design.md, "Precision").

Rounding to bfloat16 (8 significant bits) moves a path's log p by tenths of a nat; float16 keeps
11. A model all in float16 overflows (Gemma's residual stream passes 65,504), so only the
decoder's linear layers hold float16 weights and run under autocast: the residual stream, the
norms, the rotary tables, the embeddings and the LM head stay float32.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def make_mixed(model: PreTrainedModel) -> PreTrainedModel:
    """A model loaded in float16 made mixed, in place: float32 for every parameter and buffer but
    the decoder's linear weights, and the decoder's forward under float16 autocast (a fresh
    autocast per call: one shared instance keeps its saved state on itself, which threads race on)."""
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
    device_type = next(decoder.parameters()).device.type
    forward = decoder.forward

    @functools.wraps(forward)
    def mixed_forward(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type, dtype=torch.float16):
            return forward(*args, **kwargs)

    decoder.forward = mixed_forward
    return model
