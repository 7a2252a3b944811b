"""Where a model runs and in what precision: cuda, then mps, then cpu; fp32 on a CPU, bf16 on
an accelerator (torch is imported only when asked)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from marginal_core.errors import MarginalError

if TYPE_CHECKING:
    import torch

__all__ = ["default_dtype", "resolve_device"]


def resolve_device(device: str | None = None) -> str:
    """The device to run on: the given one, else cuda, then mps, then cpu."""
    import torch

    if device:
        dev = torch.device(device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise MarginalError(f"device {device!r} was asked for but CUDA is not available")
        if dev.type == "mps" and not torch.backends.mps.is_available():
            raise MarginalError(f"device {device!r} was asked for but MPS is not available")
        return str(dev)
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def default_dtype(device: str) -> torch.dtype:
    """fp32 on CPU (exact, and fast enough for small models); bf16 on an accelerator."""
    import torch

    return torch.float32 if torch.device(device).type == "cpu" else torch.bfloat16
