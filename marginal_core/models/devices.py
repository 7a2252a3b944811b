"""Where a model runs and in what precision (docs/design.md, "Precision").

Devices: cuda, then mps, then cpu. Precision: ``float32``; ``float16``, the decoder's matrix
products in float16 with everything else in float32 (``models/mixed.py``); ``bfloat16``, the
decoder's products and the head's on bfloat16 units with float32's answers (split weights and
inputs, ``models/split_bfloat16.py``; a head refined in float32, ``lm/refined_head.py``).
``auto`` is the fastest choice that keeps log p within a twentieth of a nat of float32: float16
on CUDA and on a CPU whose float16 products are measurably faster than its float32 ones, else
bfloat16 on a CPU where its work is (a virtual machine may hide or show the units without the
speed, so the CPU is asked by timing, once per CPU and torch build, and the answer is cached),
float32 elsewhere. ``$MARGINAL_AUTO_DTYPE`` overrides that choice on every device, so that one
setting pins what ``auto`` means for a whole process tree (the test suite pins float32). torch
is imported only when asked.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from marginal_core.ground.cache_home import cache_root
from marginal_core.ground.errors import MarginalError

if TYPE_CHECKING:
    import torch

__all__ = ["AUTO_DTYPE_ENV", "DTYPES", "auto_dtype", "cpu_speedup", "dtype_name", "resolve_device", "resolve_dtype"]

DTYPES = ("auto", "float32", "float16", "bfloat16")
# The environment variable that, when set, is what ``auto`` resolves to on every device.
AUTO_DTYPE_ENV = "MARGINAL_AUTO_DTYPE"
# A reduced precision is auto's choice on a CPU where its timed work (TIMERS) is at least this much
# faster than float32's.
FAST = {"float16": 1.5, "bfloat16": 1.5}


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
    products are fast, bfloat16 (split) on a CPU where it is fast, float32 elsewhere (mps included)."""
    import torch

    forced = os.environ.get(AUTO_DTYPE_ENV, "").strip()
    if forced:
        if forced not in DTYPES[1:]:
            raise MarginalError(f"{AUTO_DTYPE_ENV}={forced!r} is not a dtype: set it to {', '.join(DTYPES[1:])}, or unset it")
        return getattr(torch, forced)
    kind = torch.device(device).type
    if kind == "cuda" or (kind == "cpu" and cpu_speedup("float16") >= FAST["float16"]):
        return torch.float16
    if kind == "cpu" and cpu_speedup("bfloat16") >= FAST["bfloat16"]:
        return torch.bfloat16
    return torch.float32


def cpu_speedup(dtype: str) -> float:
    """How much faster this CPU runs a model's products in dtype's mode than in float32 (TIMERS),
    timed once per CPU, torch build and thread count, and cached."""
    import torch

    key = f"{platform.machine()}-{_cpu_name()}-torch{torch.__version__}-threads{torch.get_num_threads()}-{dtype}"
    path = cache_root() / "precision.json"
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = TIMERS[dtype]()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{time.monotonic_ns()}.tmp")
        tmp.write_text(json.dumps(known, indent=1), encoding="utf-8")
        tmp.replace(path)
    return float(known[key])


def _best_seconds(run: Callable[[], object], tries: int = 3) -> float:
    """The fastest of a few runs, after one to warm up (kernels chosen, pages touched)."""
    run()
    times = []
    for _ in range(tries):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def _time_float16_speedup(rows: int = 64, hidden: int = 640, vocab: int = 16384) -> float:
    """float32 seconds over float16 seconds for an LM-head-shaped product."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a, w = torch.randn(rows, hidden, generator=gen), torch.randn(vocab, hidden, generator=gen)
    best = {dtype: _best_seconds(functools.partial(torch.nn.functional.linear, a.to(dtype), w.to(dtype)))
            for dtype in (torch.float32, torch.float16)}
    return best[torch.float32] / best[torch.float16]


def _time_bfloat16_speedup(rows: int = 256, hidden: int = 640, inner: int = 2048, vocab: int = 65536) -> float:
    """float32 seconds over split-bfloat16 seconds for what a pass does: a decoder's linear layer
    (models/split_bfloat16.py) and the head's log-softmax (lm/refined_head.py), each at the size
    of a small model's."""
    import torch

    from marginal_core.lm.refined_head import refined_logprobs
    from marginal_core.models.split_bfloat16 import split_linear, split_terms

    gen = torch.Generator().manual_seed(0)
    # logits ~ N(0, 6.3): tens of them within 8 nats of the top, as a model's
    x, head = torch.randn(rows, hidden, generator=gen), torch.randn(vocab, hidden, generator=gen) / 4
    layer = torch.randn(inner, hidden, generator=gen) / 25
    terms, low_head = split_terms(layer), head.to(torch.bfloat16)
    targets, every = torch.zeros(rows, dtype=torch.long), torch.arange(rows)
    full = _best_seconds(lambda: (torch.nn.functional.linear(x, layer), torch.log_softmax(x @ head.T, dim=-1)))
    split = _best_seconds(lambda: (split_linear(x, terms), refined_logprobs(x, head, low_head, every, targets, None)))
    return full / split


TIMERS: dict[str, Callable[[], float]] = {"float16": _time_float16_speedup, "bfloat16": _time_bfloat16_speedup}


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
