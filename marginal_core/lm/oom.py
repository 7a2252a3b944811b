"""The one out-of-memory policy: recognise an allocation failure, free the accelerator's cache,
halve the work and retry; a clear error when a single row does not fit."""

from __future__ import annotations

from marginal_core.errors import MarginalError


class OutOfMemory(MarginalError):
    """Even the smallest unit of work does not fit in memory on this device."""


def is_oom(err: BaseException) -> bool:
    """Whether an exception is an allocation failure (CUDA, MPS or the CPU allocator)."""
    if isinstance(err, MemoryError):
        return True
    try:
        import torch
    except ImportError:  # no torch, so no torch allocation failure
        return False
    if isinstance(err, torch.OutOfMemoryError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def free_accelerator_cache(device_type: str) -> None:
    """Give cached accelerator memory back after an allocation failure (no-op on the CPU)."""
    import torch

    if device_type == "cuda":
        torch.cuda.empty_cache()
    elif device_type == "mps":
        torch.mps.empty_cache()


def halved(budget: int, err: BaseException, device_type: str) -> int:
    """The work budget after an exception: half of it after an allocation failure (the
    accelerator's cache freed first); anything else, or a budget of one, is raised."""
    if not is_oom(err):
        raise err
    if budget <= 1:
        raise OutOfMemory(f"out of memory on {device_type} even one unit of work at a time") from err
    free_accelerator_cache(device_type)
    return budget // 2
