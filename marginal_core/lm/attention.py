"""Which SDPA kernel the tree-masked passes take on CUDA (docs/design.md, "Precision").

The memory-efficient kernel miscomputed a tree-masked pass whose keys were a stride-0 view
(pytorch/pytorch#191937): transformers' ``repeat_kv`` returns one where a model has a single KV
head. So the passes take the math kernel, which materialises every attention score. With
``MARGINAL_TREE_ATTENTION=efficient`` a model's attention runs through ``contiguous_sdpa`` (keys
and values copied whole before SDPA) and the passes may take the memory-efficient kernel: the
switch a GPU session flips to prove that path on the pinned text (tests/library/test_cuda.py) before it
becomes the default.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from marginal_core.errors import MarginalError

TREE_ATTENTION_ENV = "MARGINAL_TREE_ATTENTION"
KERNELS = ("math", "efficient")
CONTIGUOUS_SDPA = "marginal_contiguous_sdpa"  # the name the function is registered under


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


def use_contiguous_sdpa(model: Any) -> None:
    """Run the model's attention through contiguous_sdpa, registered with transformers under
    CONTIGUOUS_SDPA (a name-to-function entry: registering it again for another model is harmless)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(CONTIGUOUS_SDPA, contiguous_sdpa)
    AttentionMaskInterface.register(CONTIGUOUS_SDPA, sdpa_mask)
    model.set_attn_implementation(CONTIGUOUS_SDPA)
