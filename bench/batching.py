"""Shared passes across sessions (marginal_core.serving.batching): N runs at once on one device, each a
live lattice run (the app's chunks) on its own sentence, taking turns with and without a
Batcher, beside the same N runs one after another.

No browser and no server: what the device does for a class, apart from the pages. Prints per
mode the makespan (and its ratio to the serial sum), click→first estimate min/median/max, the
batches and the requests they carried, and the largest |d log p| of any final estimate against
the serial run.

    .venv/bin/python -m bench.batching --sessions 16 [--device cuda --dtype float16]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from bench.classroom.sentences import SENTENCES
from marginal_core.estimators.estimate_result import Estimate
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.models import load_model
from marginal_core.scoring.pass_budget import pass_tokens
from marginal_core.serving.batching import Batcher
from marginal_core.serving.turns import Turns
from pages._app.runtime.live import FIRST_CHUNK, live_chunk, live_stream

SEED = 0
T = TypeVar("T")


def one_run(lm: object, text: str, samples: int) -> tuple[float | None, Estimate]:
    """Seconds to its first estimate, and its last estimate."""
    started, first, last = time.perf_counter(), None, None
    m = Marginalizer(lm, text)
    for est in live_stream(m, "lattice", samples=samples, seed=SEED):  # the app's live run
        first = first if first is not None else time.perf_counter() - started
        last = est
    assert last is not None
    return first, last


def at_once(turns: Turns, jobs: list[Callable[[], T]]) -> tuple[float, list[T], list[float]]:
    """Start the jobs together, each a session's run on turns: the makespan, their results, and
    each one's seconds to done."""
    results: list[T | None] = [None] * len(jobs)
    done: list[float] = [0.0] * len(jobs)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with turns.run(f"session {i}"):
                results[i] = jobs[i]()
            done[i] = time.perf_counter() - started
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started, results, done  # type: ignore[return-value]


def concurrent(lm: object, texts: list[str], samples: int, turns: Turns) -> tuple[float, list[float], list[Estimate]]:
    """The makespan, first-estimate seconds and last estimates of the runs started together."""
    makespan, runs, _ = at_once(turns, [partial(one_run, lm, text, samples) for text in texts])
    return makespan, [first for first, _ in runs], [last for _, last in runs]


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f} s"


def largest_gap(a: list[Estimate], b: list[Estimate]) -> float:
    """The largest |d log p| over the runs' canonical scores and bounds."""
    return max(max(abs(x.log_p_canonical - y.log_p_canonical), abs(x.log_noncanonical - y.log_noncanonical))
               for x, y in zip(a, b, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sessions", default="16", help="comma-separated N, e.g. 1,8,16")
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    lm = load_model(args.model, dtype=args.dtype, device=args.device)
    one_run(lm, SENTENCES[-1], 8)  # warm-up
    print(f"model {args.model}, {args.dtype} on {args.device}, lattice k = {args.samples}, chunks "
          f"{FIRST_CHUNK} (with the canonical path) then {live_chunk(args.samples)}, grown by time; "
          f"shared passes up to {pass_tokens(lm)} path tokens")
    print("| sessions | mode | makespan | / serial | first estimate min / median / max | batches (requests) "
          "| max abs d log p vs serial |")
    print("|---|---|---:|---:|---|---|---:|")
    for n in [int(x) for x in args.sessions.split(",")]:
        texts = SENTENCES[:n]
        started = time.perf_counter()
        serial = [one_run(lm, text, args.samples) for text in texts]
        serial_s = time.perf_counter() - started
        print(f"| {n} | serial | {serial_s:.1f} s | 1.00x | {spread([f for f, _ in serial])} | - | 0 |", flush=True)
        for mode in ("turns", "shared passes"):
            turns = Turns(max_runs=max(n, 1))
            batcher = Batcher(turns) if mode == "shared passes" else None
            span, firsts, lasts = concurrent(lm, texts, args.samples, turns)
            batches = f"{batcher.batches} ({batcher.requests})" if batcher else "-"
            print(f"| {n} | {mode} | {span:.1f} s | {span / serial_s:.2f}x | {spread(firsts)} | {batches} "
                  f"| {largest_gap([e for _, e in serial], lasts):.1e} |", flush=True)


if __name__ == "__main__":
    main()
