"""How long scoring candidates takes beside the next characters alone (issue 67's speed target):
per model and prompt (at most 80 bytes), four candidates of at most 12 bytes each.

For each prompt, after a warm-up: the next characters alone (``mc.prefix(prompt).next_characters(5)``
under the default stop, a fresh state); the four candidates on a fresh state under the default
stop (``score_continuations``), and the seconds until every candidate's value is within --near
nats of the long run's (the same four under --long seconds); the ratio of the candidates' seconds
to the next characters' alone. float32 on the CPU.

Run: .venv/bin/python -m bench.candidates [--models gemma3-270m,smollm2-135m] [--long 30] [--near 0.01]
"""

from __future__ import annotations

import argparse
import time

from bench.surprisal import machine
from marginal_core.api.calls import prefix
from marginal_core.models import load_model

# (prompt, four candidates): the lesson's kinds of prompt boundary
CASES = [
    ("The capital of France is", (" Paris", " Lyon", " Rome", " a city")),
    ("The capital of England is Lon", ("don", "don.", " Angeles", "g")),
    ("She plays the vio", ("lin", "la", "lent", "l")),
    ("def add(a, b):\n    ", ("return", "pass", "print", "#")),
]


def seconds_to_near(p_stream: list[tuple[float, list[float]]], reference: list[float], near: float) -> float | None:
    """The first time (seconds) at which every candidate scored so far is within ``near`` of its
    reference and all are scored (None: never)."""
    for seconds, values in p_stream:
        if len(values) == len(reference) and all(abs(a - b) <= near for a, b in zip(values, reference, strict=True)):
            return seconds
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--long", type=float, default=30.0, help="seconds of the long run's searches")
    parser.add_argument("--near", type=float, default=0.01, help="nats: a value this close to the long run's counts")
    args = parser.parse_args()
    print(f"# bench.candidates — {machine()}\n")
    rows = []
    for name in args.models.split(","):
        lm = load_model(name, dtype="float32")
        prefix("Hello", lm, time_budget=1).next_characters(3)  # warm-up
        for text, candidates in CASES:
            started = time.perf_counter()
            prefix(text, lm, time_budget="auto").next_characters(5)
            alone = time.perf_counter() - started
            long = prefix(text, lm, time_budget=args.long).score_continuations(candidates)
            reference = [r.logprob for r in long.rows]
            seen: list[tuple[float, list[float]]] = []
            started = time.perf_counter()
            for scores in prefix(text, lm, time_budget="auto").score_continuations_stream(candidates):
                seen.append((time.perf_counter() - started, [r.logprob for r in scores.rows]))
            total = seen[-1][0]
            near = seconds_to_near(seen, reference, args.near)
            worst = max(abs(a - b) for a, b in zip(seen[-1][1], reference, strict=True))
            rows.append((name, text, alone, total, near, worst, long.rankings_differ))
            print(f"{name} {text!r}: next characters {alone:.2f} s, candidates {total:.2f} s", flush=True)
    print("\n| model | prompt | next characters alone s | 4 candidates s | ratio | all within "
          f"{args.near} of the long run at s | largest difference, nats | rankings differ from lm-eval's |")
    print("|---|---|---|---|---|---|---|---|")
    for name, text, alone, total, near, worst, differ in rows:
        shown = text.replace(" ", "␣").replace("\n", "↵")
        print(f"| {name} | `{shown}` | {alone:.2f} | {total:.2f} | {total / alone:.2f} | "
              f"{'-' if near is None else f'{near:.2f}'} | {worst:.4f} | {'yes' if differ else 'no'} |")


if __name__ == "__main__":
    main()
