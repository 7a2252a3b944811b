"""Benchmark of reduced precision against float32: how far the scores and each estimator move, and the time.

For each model, the same texts as the estimator benchmark (20 short answers after their question,
10 sentences) are run in float32 and in each reduced mode on one device: ``float16`` (the
library's: float16 weights and products in the decoder's linear layers, the rest float32),
``bfloat16`` (weights and activations),
``autocast`` (float32 weights, residual stream, norms and softmax, with bfloat16 matrix products:
torch.autocast) and, on CUDA, ``tf32`` (float32 with TF32 matrix products). Per path
(the canonical tokenization and k Algorithm-1 samples of every text, scored by both): mean and
largest |d log p| and Spearman's rank correlation. Per estimator (same seed and k): mean and
largest |d| over the texts of what it estimates, log p(canonical) for the canonical method and the
log non-canonical mass for the lattice and the proxy (the log marginal hides their differences
where the canonical path carries most of the mass). And the seconds each dtype took.
Run: .venv/bin/python -m bench.precision [--models a,b] [--samples K] [--device cuda] [--quick]
     [--modes float16,bfloat16,autocast,tf32]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from bench.estimators import text_sets  # bench/estimators.py: the same texts as the estimator benchmark
from marginal_core.estimators.estimate_options import EstimateOptions
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.estimators.methods import Method
from marginal_core.lattice.sampling import lattice_samples
from marginal_core.models import load_model
from marginal_core.scoring.trie_scoring import score_paths

MODES = ("float16", "bfloat16", "autocast", "tf32")  # each against float32; tf32 on CUDA only
METHODS = (Method.CANONICAL, Method.LATTICE, Method.PROXY)


def estimated(estimate) -> float:
    """What an estimator adds: log p(canonical) for the canonical method, else the log
    non-canonical mass (-inf where it found none)."""
    if estimate.method == Method.CANONICAL.value:
        return estimate.log_marginal
    return estimate.log_noncanonical


@contextlib.contextmanager
def precision(mode: str, device_type: str) -> Iterator[None]:
    """The numerics a mode runs its float32 or bfloat16 model under."""
    import torch

    if mode == "autocast":
        with torch.autocast(device_type, dtype=torch.bfloat16):
            yield
    elif mode == "tf32":
        before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    else:
        yield


def run_text(lms: dict, context: str | None, text: str, options: EstimateOptions) -> dict:
    """Every mode's path scores and estimates for one text, with their seconds."""
    out: dict = {"paths": {}, "estimates": {}, "seconds": {}}
    for mode, lm in lms.items():
        started = time.perf_counter()
        with precision(mode, lm.device.type):
            m = Marginalizer(lm, text, context)
            paths = [m.lattice.canonical, *lattice_samples(m.lattice, options.samples, seed=options.seed).paths.tolist()]
            out["paths"][mode] = score_paths(lm, paths, m.context_state())
            out["estimates"][mode] = {meth: estimated(m.estimate(meth, options)) for meth in METHODS}
        out["seconds"][mode] = time.perf_counter() - started
    return out


def table_row(model: str, device: str, mode: str, runs: list[dict]) -> str:
    """One markdown row: a mode's path-score error, each estimator's error, seconds against float32."""
    f32 = np.concatenate([r["paths"]["float32"] for r in runs])
    low = np.concatenate([r["paths"][mode] for r in runs])
    diff = np.abs(low - f32)
    cells = [model, device, mode, str(len(runs)), str(len(f32)), f"{diff.mean():.3f}", f"{diff.max():.2f}",
             f"{spearmanr(f32, low)[0]:.4f}"]
    for meth in METHODS:
        pairs = [(r["estimates"][mode][meth], r["estimates"]["float32"][meth]) for r in runs]
        d = [abs(a - b) for a, b in pairs if np.isfinite(a) and np.isfinite(b)]  # texts where both found mass
        cells.append(f"{np.mean(d):.3f} / {np.max(d):.2f} ({len(d)})" if d else "n/a")
    seconds = {m: sum(r["seconds"][m] for r in runs) for m in ("float32", mode)}
    cells += [f"{seconds['float32']:.1f}", f"{seconds[mode]:.1f}", f"{seconds['float32'] / seconds[mode]:.2f}x"]
    return "| " + " | ".join(cells) + " |"


def load_modes(model: str, device: str | None, modes: list[str]) -> dict[str, Any]:
    """float32 and each mode's model (autocast and tf32 share the float32 weights)."""
    f32 = load_model(model, device=device, dtype="float32")
    lms = {"float32": f32}
    for mode in modes:
        lms[mode] = load_model(model, device=device, dtype=mode) if mode in ("float16", "bfloat16") else f32
    return lms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--samples", type=int, default=100, help="k for the lattice and proxy (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument("--quick", action="store_true", help="3 answers, 2 sentences, k = 16")
    parser.add_argument("--modes", default="float16,bfloat16,autocast", help=f"of {', '.join(MODES)} (tf32: CUDA only)")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= set(MODES):
        parser.error(f"--modes takes {', '.join(MODES)}")
    sets = text_sets()
    pairs = [*sets["qa"][:3], *sets["sentences"][:2]] if args.quick else [*sets["qa"], *sets["sentences"]]
    options = EstimateOptions(samples=16 if args.quick else args.samples, seed=args.seed)
    print(f"k = {options.samples}, seed {options.seed}; |d| = |mode - float32| in nats, mean / largest; "
          "estimators: canonical log p, lattice and proxy log non-canonical mass (texts where both found some)")
    print("| model | device | mode | texts | paths | mean abs d log p | max abs d log p | Spearman "
          "| canonical | lattice | proxy | float32 s | mode s | speed-up |")
    print("|" + "---|" * 14)
    for model in args.models.split(","):
        lms = load_modes(model, args.device, modes)
        if lms["float32"].device.type != "cuda":
            lms.pop("tf32", None)  # TF32 is a CUDA matmul mode
        for mode, lm in lms.items():  # warm-up outside the timings
            with precision(mode, lm.device.type):
                score_paths(lm, [(1,)], [1])
        runs = [run_text(lms, context, text, options) for context, text in pairs]
        for mode in (m for m in lms if m != "float32"):
            print(table_row(model, str(lms["float32"].device), mode, runs), flush=True)


if __name__ == "__main__":
    main()
