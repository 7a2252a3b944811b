"""What a student sees with each of the app's examples (pages/_app/ui/presets.py), per model: the
number of tokenizations, the share of the mass off the canonical tokenization and the most
probable non-canonical tokenization with its share. Exact where the app enumerates (at most APP_EXACT_BUDGET
paths), else Home's estimate (the lattice sampler, k = 100, L = canonical + 10, seed 0) and the
beam (W = 32), both lower bounds of the share off the canonical.
Run: .venv/bin/python -m bench.presets [--models gemma3-270m,smollm2-135m] [--dtype float32]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from marginal_core import viz
from marginal_core.estimators.estimate_result import Estimate
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.models import load_model
from pages._app.ui.defaults import APP_EXACT_BUDGET, DEFAULT_SAMPLES, exact_feasible
from pages._app.ui.presets import PRESETS


def pct(share: float) -> str:
    return viz.format_small(share, 2, percent=True)


def off_canonical(est: Estimate) -> float:
    """Share of the found mass not on the canonical path."""
    return -math.expm1(est.log_p_canonical - est.log_marginal)


def best(m: Marginalizer, est: Estimate) -> str:
    """The most probable non-canonical tokenization found and its share of the found mass."""
    if not len(est.log_p):
        return "none"
    i = int(np.argmax(est.log_p))
    share = viz.format_small(math.exp(est.log_p[i] - est.log_marginal), 2, percent=True)
    return f"`{viz.segmented(m.lattice, est.paths.tolist()[i])}` {share}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    print("| example | model | tokenizations | canonical | off the canonical | most probable non-canonical found | s |")
    print("|---|---|---:|---|---|---|---:|")
    for model in args.models.split(","):
        lm = load_model(model, dtype=args.dtype)
        for preset in PRESETS:
            started = time.perf_counter()
            m = Marginalizer(lm, preset.text, preset.context or None)
            count = m.lattice.count()
            if exact_feasible(count, APP_EXACT_BUDGET):
                est = m.exact(budget=APP_EXACT_BUDGET)
                shares = f"{pct(off_canonical(est))} exact"
            else:
                lattice = m.lattice_estimate(DEFAULT_SAMPLES, max_len=m.lattice.default_max_len(), seed=0)
                est = m.beam(32)
                shares = f"≥ {pct(off_canonical(lattice))} (lattice k = 100), ≥ {pct(off_canonical(est))} (beam W = 32)"
                est = est if est.log_marginal >= lattice.log_marginal else lattice
            print(f"| {preset.name} | {model} | {viz.count_label(count)} | `{viz.segmented(m.lattice, m.lattice.canonical)}` "
                  f"| {shares} | {best(m, est)} | {time.perf_counter() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
