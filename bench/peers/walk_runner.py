"""A past commit's word strip, run from a worktree of that commit (bench.surprisal's baseline: the
prefix walk at 6008ecc, or the search before the next characters at 3a2ee44): started with
PYTHONPATH at the worktree, it loads one model (argv[1]) and answers each line of standard input
(a JSON text) with one JSON line: the word strip's seconds (after the context is warm) and its
bounds at every byte."""

from __future__ import annotations

import json
import sys
import time

from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.models import load_model


def main() -> None:
    lm = load_model(sys.argv[1], device="cpu", dtype="float32")
    for line in sys.stdin:
        m = Marginalizer(lm, json.loads(line))
        m.canonical_score()
        started = time.perf_counter()
        s = m.surprisal(unit="word")
        seconds = time.perf_counter() - started
        print(json.dumps({"seconds": seconds, "lower": s.prefix_lower.tolist(), "upper": s.prefix_upper.tolist()}),
              flush=True)


if __name__ == "__main__":
    main()
