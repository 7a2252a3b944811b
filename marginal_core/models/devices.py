"""Where a model runs and in what precision (docs/design.md, "Precision").

Devices: cuda, then mps, then cpu. Precision: ``float32``; ``float16``, the decoder's matrix
products in float16 with everything else in float32 (``models/mixed.py``); ``bfloat16``, the whole
model in bfloat16. ``auto`` is the fastest choice that keeps log p within a twentieth of a nat of
float32: float16 on CUDA and on a CPU whose float16 matrix products are measurably faster than its
float32 ones (a virtual machine may hide or show the units without the speed, so the CPU is asked
by timing, once per CPU and torch build, and the answer is cached), float32 elsewhere; bfloat16
moves log p too far to be chosen for anyone. ``$MARGINAL_AUTO_DTYPE`` overrides that choice on
every device, so that one setting pins what ``auto`` means for a whole process tree (the test
suite pins float32). torch is imported only when asked.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from typing import TYPE_CHECKING

from marginal_core.cache import cache_root
from marginal_core.errors import MarginalError

if TYPE_CHECKING:
    import torch

__all__ = ["AUTO_DTYPE_ENV", "DTYPES", "auto_dtype", "cpu_float16_speedup", "dtype_name", "resolve_device", "resolve_dtype"]

DTYPES = ("auto", "float32", "float16", "bfloat16")
# The environment variable that, when set, is what ``auto`` resolves to on every device.
AUTO_DTYPE_ENV = "MARGINAL_AUTO_DTYPE"
# float16 is chosen on a CPU whose float16 head-shaped product is at least this much faster than fp32.
FAST_FLOAT16 = 1.5


def resolve_device(device: str | None = None) -> str:
    """The device to run on: the given one, else (None or 'auto') cuda, then mps, then cpu."""
    import torch

    if device and device != "auto":
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


def resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    """The weights' dtype for a choice among DTYPES (None: auto) on a resolved device."""
    import torch

    if isinstance(dtype, torch.dtype):
        if dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise MarginalError(f"dtype {dtype} is not supported: choose one of {', '.join(DTYPES)}")
        return dtype
    choice = dtype or "auto"
    if choice not in DTYPES:
        raise MarginalError(f"unknown dtype {choice!r}: choose one of {', '.join(DTYPES)}")
    return auto_dtype(device) if choice == "auto" else getattr(torch, choice)


def dtype_name(dtype: torch.dtype) -> str:
    """A dtype as the choices name it: 'float32', 'float16', 'bfloat16'."""
    return str(dtype).removeprefix("torch.")


def auto_dtype(device: str) -> torch.dtype:
    """$MARGINAL_AUTO_DTYPE where it is set; else float16 (mixed) on CUDA and on a CPU where its
    products are fast, float32 elsewhere (mps included)."""
    import torch

    forced = os.environ.get(AUTO_DTYPE_ENV, "").strip()
    if forced:
        if forced not in DTYPES[1:]:
            raise MarginalError(f"{AUTO_DTYPE_ENV}={forced!r} is not a dtype: set it to {', '.join(DTYPES[1:])}, or unset it")
        return getattr(torch, forced)
    kind = torch.device(device).type
    if kind == "cuda" or (kind == "cpu" and cpu_float16_speedup() >= FAST_FLOAT16):
        return torch.float16
    return torch.float32


def cpu_float16_speedup() -> float:
    """How much faster this CPU multiplies float16 than float32 matrices, timed once and cached."""
    import torch

    key = f"{platform.machine()}-{_cpu_name()}-torch{torch.__version__}-threads{torch.get_num_threads()}-float16"
    path = cache_root() / "precision.json"
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = _time_float16_speedup()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{time.monotonic_ns()}.tmp")
        tmp.write_text(json.dumps(known, indent=1), encoding="utf-8")
        tmp.replace(path)
    return float(known[key])


def _time_float16_speedup(rows: int = 64, hidden: int = 640, vocab: int = 16384) -> float:
    """fp32 seconds over float16 seconds for an LM-head-shaped product (best of three each)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a, w = torch.randn(rows, hidden, generator=gen), torch.randn(vocab, hidden, generator=gen)
    best = {}
    for dtype in (torch.float32, torch.float16):
        x, y = a.to(dtype), w.to(dtype)
        torch.nn.functional.linear(x, y)  # warm-up: kernels chosen, pages touched
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            torch.nn.functional.linear(x, y)
            times.append(time.perf_counter() - t0)
        best[dtype] = min(times)
    return best[torch.float32] / best[torch.float16]


def _cpu_name() -> str:
    """The CPU's model name and a digest of its flags (Linux: a virtual machine may show the
    same name with other flags), else what platform knows."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                name, _, value = line.partition(":")
                fields.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    if "model name" not in fields:
        return platform.processor() or "unknown"
    flags = hashlib.sha256(fields.get("flags", "").encode()).hexdigest()[:8]
    return f"{fields['model name'].replace(' ', '_')}-{flags}"
