"""Benchmark of everything before the LM: vocabulary index, lattice, counts, Algorithm 1.

Prints one table per text (a 300-character sentence and a 2,000-character paragraph) with the
median of several runs of each step, wall-clock and CPU time (CPU time is steadier on a shared
machine). Run: .venv/bin/python -m bench.sampler [--model gemma3-270m] [--runs 7] [--samples 10000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from marginal_core.lattice.graph import DEFAULT_LENGTH_MARGIN, format_count, lattice_of
from marginal_core.lattice.sampling import lattice_samples
from marginal_core.lattice.vocab import Vocabulary, load_vocabulary
from marginal_core.models import load_tokenizer

SENTENCE = (
    "The old lighthouse keeper climbed the spiral stairs each evening at dusk, carrying a "
    "brass lantern and a thermos of black coffee, while the fishing boats returned to the "
    "harbour and the gulls circled above the breakwater, calling to one another over the steady "
    "roar of the incoming tide on the rocks."
)
PARAGRAPH_SOURCE = (
    "Tokenizers split text into pieces drawn from a fixed vocabulary, and although a tokenizer "
    "always returns one canonical segmentation, the same characters can be spelled by many other "
    "sequences of tokens. A language model assigns each of those sequences a probability, so the "
    "probability of the text itself is a sum over an astronomically large set. Researchers who "
    "study this sum have found that most of the mass sits on the canonical segmentation, but that "
    "a surprising share lies on sequences that differ from it only slightly: one token split into "
    "two, or two short tokens where one long token would do. Estimating the remainder by sampling "
    "from a constrained model is slow, because every sample needs as many forward passes as it has "
    "tokens, and the estimates tend to fall short of the truth. Enumerating the close neighbours of "
    "the canonical segmentation and drawing the rest uniformly at random, then scoring everything "
    "in a few batched passes, gives a lower bound that is both fast and honest. "
)


def exactly(text: str, length: int) -> str:
    """The text repeated or cut to exactly length characters."""
    return (text * (length // len(text) + 1))[:length]


def measure(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of fn over runs calls."""
    wall, cpu = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def bench_text(name: str, text: str, tokenizer, runs: int, samples: int) -> list[tuple[str, str]]:
    """Rows (label, value) for one text."""
    lat = lattice_of(text, tokenizer)
    bound = len(lat.canonical) + DEFAULT_LENGTH_MARGIN
    total, bounded = lat.count(), lat.count(bound)
    drawn = lattice_samples(lat, samples, max_len=bound, seed=0)
    assert len(set(drawn.paths.tolist())) == len(drawn), "samples must be distinct"

    def fresh():
        return lattice_of(text, tokenizer)

    rows = [
        ("text", f"{name}: {len(text)} chars, {len(lat.data)} bytes"),
        ("canonical tokens / L", f"{len(lat.canonical)} / {bound}"),
        ("nodes / arcs", f"{lat.num_nodes} / {lat.num_arcs}"),
        ("paths (exact)", f"{format_count(total)} ({total.bit_length()} bits)"),
        ("paths <= L", f"{format_count(bounded)} ({bounded.bit_length()} bits)"),
        ("off-by-one set", str(len(lat.off_by_one()))),
        ("distinct samples drawn", str(len(drawn))),
    ]
    timed = {
        "lattice build": lambda: fresh(),
        "count (unbounded)": lambda: fresh().count(),
        "count (<= L)": lambda: fresh().count(bound),
    }
    for label, fn in timed.items():
        rows.append((label + " ms (wall/cpu)", "%.1f / %.1f" % measure(fn, runs)))
    lattice_samples(lat, samples, max_len=bound, seed=1)  # warm the ranking tables
    seeds = iter(range(100, 100 + runs))
    wall, cpu = measure(lambda: lattice_samples(lat, samples, max_len=bound, seed=next(seeds)), runs)
    rows.append((f"Algorithm 1, {samples:,} samples ms (wall/cpu)", f"{wall:.1f} / {cpu:.1f}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--samples", type=int, default=10_000)
    args = parser.parse_args()
    tokenizer = load_tokenizer(args.model)
    load_vocabulary(tokenizer)
    cold = measure(lambda: Vocabulary.build(tokenizer), max(1, args.runs // 2))
    cached = measure(lambda: load_vocabulary(tokenizer), args.runs)
    print(f"model {args.model}: vocabulary index ms (wall/cpu): cold build "
          f"{cold[0]:.0f} / {cold[1]:.0f}, from disk cache {cached[0]:.0f} / {cached[1]:.0f}")
    texts = {"sentence": exactly(SENTENCE, 300), "paragraph": exactly(PARAGRAPH_SOURCE, 2000)}
    tables = [bench_text(name, text, tokenizer, args.runs, args.samples) for name, text in texts.items()]
    width = max(len(label) for table in tables for label, _ in table)
    print(f"| {'':<{width}} | " + " | ".join(texts) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (len(n) + 2) for n in texts) + "|")
    for i, (label, _) in enumerate(tables[0]):
        print(f"| {label:<{width}} | " + " | ".join(t[i][1] for t in tables) + " |")


if __name__ == "__main__":
    main()
