"""The bfloat16 precision: the decoder's matrix products on bfloat16 units, with float32's
answers (docs/precision.md, "bfloat16").

A model all in bfloat16 moves log p by tenths of a nat. Three roundings do it, each about as much
as the others: the weights' (8 significant bits of 24), the inputs' and each product's output.
So every linear weight of the decoder is kept as two bfloat16 parts, high + low, which together
hold 16 bits; each input is split the same way as it comes; and the output's rounding is taken
back by accumulating the terms against it in one ``addmm`` (oneDNN accumulates in float32): four
bfloat16 products' work in place of one float32 product. The residual stream, the norms,
attention, the keys and the embeddings stay float32; the LM head is the adapter's
(lm/refined_head.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


def make_split_bfloat16(model: PreTrainedModel) -> PreTrainedModel:
    """A float32 model made split-bfloat16, in place: each of the decoder's linear layers keeps
    its weight as split_terms and multiplies with ``split_linear``."""
    import torch

    with torch.no_grad():
        for module in model.get_decoder().modules():
            if isinstance(module, torch.nn.Linear) and module.weight.dtype == torch.float32:
                terms = split_terms(module.weight.detach())
                module.weight = torch.nn.Parameter(terms[:, : module.in_features], requires_grad=False)
                module.register_buffer("weight_terms", terms, persistent=False)
                module.forward = _split_forward(module)  # type: ignore[method-assign, assignment]
    return model


def split_terms(weight: torch.Tensor) -> torch.Tensor:
    """[high | low | high] along the inputs, in bfloat16: weight's rounding, the rounding of what
    it left, and the rounding again (to meet the input's low part)."""
    import torch

    high = weight.to(torch.bfloat16)
    return torch.cat([high, (weight - high.float()).to(torch.bfloat16), high], dim=1)


def split_linear(x: torch.Tensor, terms: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight.T in float32 from bfloat16 products (module docstring): x = x_high + x_low,
    weight = high + low, and x_high.high + x_high.low + x_low.high taken less the bfloat16
    rounding of x_high.high, so that addmm accumulates only what the rounding lost."""
    import torch

    k = terms.shape[1] // 3
    flat = x.reshape(-1, k)
    x_high = flat.to(torch.bfloat16)
    x_low = (flat - x_high).to(torch.bfloat16)
    rounded = x_high @ terms[:, :k].T
    out = torch.addmm(rounded, torch.cat([x_high, x_high, x_low], dim=1), terms.T, beta=-1).float()
    out += rounded
    if bias is not None:
        out += bias
    return out.reshape(*x.shape[:-1], len(terms))


def _split_forward(module: torch.nn.Linear) -> Callable[[torch.Tensor], torch.Tensor]:
    """The linear layer's forward through split_linear."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        return split_linear(x, module.weight_terms, module.bias)  # type: ignore[arg-type]

    return forward
