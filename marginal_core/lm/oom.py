"""The one out-of-memory policy: free the accelerator's cache, halve the work and retry after an
allocation failure (``errors.is_oom`` recognises one); a clear error when a single row does not fit."""

from __future__ import annotations

from marginal_core.ground.errors import OutOfMemory, is_oom


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
