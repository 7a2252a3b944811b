"""The devices the sidebar offers, the dtype a choice resolves to, and how the app names where a model runs."""

from __future__ import annotations

import os
from functools import cache


def device_options() -> list[str]:
    """Devices to offer: auto (GPU when there is one), cpu, and the accelerators present."""
    import torch

    options = ["auto", "cpu"]
    if torch.cuda.is_available():
        options += ["cuda"] + [f"cuda:{i}" for i in range(1, torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        options.append("mps")
    return options


def device_arg(device: str) -> str | None:
    """The library's device argument for a sidebar choice (None: pick automatically)."""
    return None if device in ("", "auto") else device


@cache
def resolve(device: str) -> str:
    """The device a sidebar choice runs on ('auto' -> 'cuda', 'mps' or 'cpu')."""
    from marginal_core.models import resolve_device

    return resolve_device(device_arg(device))


def resolve_dtype(choice: str, device: str) -> str:
    """The dtype name a sidebar choice runs on a resolved device ('auto' -> 'float32' or
    'float16'; $MARGINAL_AUTO_DTYPE, where set, decides auto)."""
    from marginal_core.models.devices import AUTO_DTYPE_ENV

    return _resolved_dtype(choice, device, os.environ.get(AUTO_DTYPE_ENV, ""))


@cache
def _resolved_dtype(choice: str, device: str, switch: str) -> str:
    """resolve_dtype, once per (choice, device, switch): auto on a CPU reads the measured ratio."""
    from marginal_core.models import dtype_name
    from marginal_core.models import resolve_dtype as resolve_torch_dtype

    return dtype_name(resolve_torch_dtype(choice, device))


def device_label(device: str, dtype: object | None = None) -> str:
    """A human description of where a model runs: 'GPU (NVIDIA H100, cuda, float16)' or 'CPU'."""
    import torch

    from marginal_core.models import dtype_name

    dev = torch.device(device)
    kind = dtype if isinstance(dtype, str) or dtype is None else dtype_name(dtype)
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        return f"GPU ({name}, {device}" + (f", {kind})" if kind else ")")
    if dev.type == "mps":
        return "GPU (Apple MPS" + (f", {kind})" if kind else ")")
    return "CPU" + (f" ({kind}, {torch.get_num_threads()} threads)" if kind else "")
