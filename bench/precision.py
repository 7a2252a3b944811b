"""Benchmark of bfloat16 against float32: how far the scores and each estimator move, and the time.

For each model, the same texts as the estimator benchmark (20 short answers after their question,
10 sentences) are run through a float32 and a bfloat16 copy of the model on one device. Per path
(the canonical tokenization and k Algorithm-1 samples of every text, scored by both): mean and
largest |d log p| and Spearman's rank correlation. Per estimator (same seed and k): mean and
largest |d| over the texts of what it estimates, log p(canonical) for the canonical method and the
log non-canonical mass for the lattice and the proxy (the log marginal hides their differences
where the canonical path carries most of the mass). And the seconds each dtype took.
Run: .venv/bin/python bench/precision.py [--models a,b] [--samples K] [--device cuda] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from estimators import text_sets  # bench/estimators.py: the same texts as the estimator benchmark
from scipy.stats import spearmanr

from marginal_core.estimators import EstimateOptions, Marginalizer
from marginal_core.methods import Method
from marginal_core.models import load_model
from marginal_core.sampling import lattice_samples
from marginal_core.scoring import score_paths

DTYPES = ("float32", "bfloat16")
METHODS = (Method.CANONICAL, Method.LATTICE, Method.PROXY)


def estimated(estimate) -> float:
    """What an estimator adds: log p(canonical) for the canonical method, else the log
    non-canonical mass (-inf where it found none)."""
    if estimate.method == Method.CANONICAL.value:
        return estimate.log_marginal
    return estimate.log_noncanonical


def run_text(lms: dict, context: str | None, text: str, options: EstimateOptions) -> dict:
    """Both dtypes' path scores and estimates for one text, with their seconds."""
    out: dict = {"paths": {}, "estimates": {}, "seconds": {}}
    for dtype, lm in lms.items():
        started = time.perf_counter()
        m = Marginalizer(lm, text, context)
        paths = [m.lattice.canonical, *lattice_samples(m.lattice, options.samples, seed=options.seed).paths.tolist()]
        out["paths"][dtype] = score_paths(lm, paths, m.context_state())
        out["estimates"][dtype] = {meth: estimated(m.estimate(meth, options)) for meth in METHODS}
        out["seconds"][dtype] = time.perf_counter() - started
    return out


def table_row(model: str, device: str, runs: list[dict]) -> str:
    """One markdown row: path-score error, each estimator's error, seconds per dtype."""
    f32 = np.concatenate([r["paths"]["float32"] for r in runs])
    b16 = np.concatenate([r["paths"]["bfloat16"] for r in runs])
    diff = np.abs(b16 - f32)
    cells = [model, device, str(len(runs)), str(len(f32)), f"{diff.mean():.3f}", f"{diff.max():.2f}",
             f"{spearmanr(f32, b16)[0]:.4f}"]
    for meth in METHODS:
        pairs = [(r["estimates"]["bfloat16"][meth], r["estimates"]["float32"][meth]) for r in runs]
        d = [abs(a - b) for a, b in pairs if np.isfinite(a) and np.isfinite(b)]  # texts where both found mass
        cells.append(f"{np.mean(d):.3f} / {np.max(d):.2f} ({len(d)})" if d else "n/a")
    seconds = {dtype: sum(r["seconds"][dtype] for r in runs) for dtype in DTYPES}
    cells += [f"{seconds['float32']:.1f}", f"{seconds['bfloat16']:.1f}", f"{seconds['float32'] / seconds['bfloat16']:.2f}x"]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--samples", type=int, default=100, help="k for the lattice and proxy (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument("--quick", action="store_true", help="3 answers, 2 sentences, k = 16")
    args = parser.parse_args()
    sets = text_sets()
    pairs = [*sets["qa"][:3], *sets["sentences"][:2]] if args.quick else [*sets["qa"], *sets["sentences"]]
    options = EstimateOptions(samples=16 if args.quick else args.samples, seed=args.seed)
    print(f"k = {options.samples}, seed {options.seed}; |d| = |bfloat16 - float32| in nats, mean / largest; "
          "estimators: canonical log p, lattice and proxy log non-canonical mass (texts where both found some)")
    print("| model | device | texts | paths | mean abs d log p | max abs d log p | Spearman "
          "| canonical | lattice | proxy | float32 s | bfloat16 s | speed-up |")
    print("|" + "---|" * 13)
    for model in args.models.split(","):
        lms = {dtype: load_model(model, device=args.device, dtype=dtype) for dtype in DTYPES}
        for lm in lms.values():  # warm-up outside the timings
            score_paths(lm, [(1,)], [1])
        runs = [run_text(lms, context, text, options) for context, text in pairs]
        print(table_row(model, str(lms["float32"].device), runs), flush=True)


if __name__ == "__main__":
    main()
