"""What the anytime beam's stopping rule leaves: one more round, measured.

For each text (the estimator benchmark's sentences and Q&A answers after their question), the
anytime beam (``m.beam()``: widths 16, 64, 256, 1,024 until a round's certified gap or a
widening's gain is under 0.01 nats) runs as the library runs it; then the beam one width further
(four times its last round's, skipped where that round pruned nothing or was the widest), alone.
Reported: the anytime bound (log non-canonical mass), its rounds, seconds and last certified gap,
and what the further round adds to it (the union of both walks' paths) and costs. The further
round runs without the anytime beam's memo, so its seconds bound what a real next round costs.
Run: .venv/bin/python -m bench.beam_stop [--models a,b] [--sentences 5] [--answers 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from bench.estimators import text_sets
from marginal_core.estimators.beam_width import MAX_BEAM_WIDTH
from marginal_core.estimators.estimate_result import Estimate
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.models import load_model
from marginal_core.tasks.markdown import table


def union_gain(auto: Estimate, wider: Estimate) -> float:
    """Nats the union of both walks' paths holds above the anytime beam's own bound."""
    scores = dict(zip(map(tuple, auto.paths.tolist()), auto.log_p))
    scores.update(zip(map(tuple, wider.paths.tolist()), wider.log_p))
    return float(np.logaddexp.reduce(np.fromiter(scores.values(), float))) - auto.log_noncanonical if scores else 0.0


def measure(m: Marginalizer) -> list[str]:
    """One text's cells: the anytime beam, and one more round."""
    m.canonical_score()  # outside every clock
    auto = m.beam()
    rounds = auto.run.rounds
    last = rounds[-1] if rounds else None
    cells = [f"{auto.log_noncanonical:.3f}", ",".join(str(r.width) for r in rounds), f"{auto.seconds:.1f}",
             "-" if last is None else f"{last.certified_gap:.3g}"]
    if last is None or last.pruned == 0 or last.width >= MAX_BEAM_WIDTH:
        return cells + ["-", "-", "-"]
    width = min(4 * last.width, MAX_BEAM_WIDTH)
    started = time.perf_counter()
    wider = m.beam(width)
    return cells + [str(width), f"{union_gain(auto, wider):.4f}", f"{time.perf_counter() - started:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--sentences", type=int, default=5)
    parser.add_argument("--answers", type=int, default=5)
    args = parser.parse_args()
    sets = text_sets()
    pairs = sets["sentences"][: args.sentences] + sets["qa"][: args.answers]
    header = ["model", "text", "anytime bound", "rounds", "s", "certified gap", "next W", "next round adds (nats)",
              "next round s"]
    print(f"float32, cpu, {torch.get_num_threads()} threads, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M')}\n")
    print("\n".join(table(header, [])[:2]), flush=True)
    for model in args.models.split(","):
        lm = load_model(model, device="cpu", dtype="float32")
        Marginalizer(lm, " warm up").beam(4)
        for context, text in pairs:
            row = [model, text[:40] + ("…" if len(text) > 40 else ""), *measure(Marginalizer(lm, text, context))]
            print(table(header, [row])[2], flush=True)


if __name__ == "__main__":
    main()
