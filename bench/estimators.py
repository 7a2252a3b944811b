"""Benchmark of the estimators: lattice (Algorithm 1) against proxy importance sampling.

For each model and text set, at equal k: wall time of each method and their ratio (measured
in the same run), the estimate each reaches at equal wall time (the proxy's running estimate
after the share of its samples it had drawn when the lattice method finished), each estimate's
gap to exact where exact is feasible, and the share of texts where the proxy underestimates.
With --peer genlm, a second table puts genlm-bytes' beam (bench/peers/genlm_peer.py, in its own
virtualenv) beside them: each method's mean bound and total seconds, at each --peer-widths K.
The study of every method at several settings, against exact and the peer, is bench/study/.
Run: .venv/bin/python -m bench.estimators [--samples 1000] [--models gemma3-270m,smollm2-135m]
     [--device cuda] [--dtype auto] [--limit N] [--peer genlm [--peer-widths 4,16]]
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from bench.peers.genlm_peer import GenlmPeer
from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.errors import TooManyPathsError
from marginal_core.models import load_model

QUESTION = "Question: {q}\nAnswer:"
QA = [
    ("What is the capital of France?", " Paris"),
    ("Which planet is known as the red planet?", " Mars"),
    ("What do bees make?", " honey"),
    ("Who wrote Romeo and Juliet?", " William Shakespeare"),
    ("What is frozen water called?", " ice"),
    ("How many legs does a spider have?", " eight legs"),
    ("What gas do plants absorb from the air?", " carbon dioxide"),
    ("What is the largest ocean on Earth?", " the Pacific Ocean"),
    ("Which organ pumps blood through the body?", " the heart"),
    ("What force keeps us on the ground?", " gravity"),
    ("What is the boiling point of water at sea level?", " one hundred degrees Celsius"),
    ("Which animal is known for its black and white stripes?", " the zebra"),
    ("What instrument measures temperature?", " a thermometer"),
    ("What is the main language spoken in Brazil?", " Portuguese"),
    ("Which metal is liquid at room temperature?", " mercury"),
    ("What do caterpillars turn into?", " butterflies or moths"),
    ("Where do penguins mostly live?", " in the Southern Hemisphere"),
    ("What causes tides in the ocean?", " the pull of the Moon"),
    ("What is the hardest natural substance?", " diamond"),
    ("Why do we see lightning before thunder?", " light travels faster than sound"),
]
SENTENCES = [
    "The library opens at nine and closes at six on weekdays.",
    "She folded the letter twice and slipped it into her coat pocket.",
    "Heavy rain flooded the valley road for most of the afternoon.",
    "Our neighbours adopted a grey kitten from the animal shelter.",
    "The committee postponed its decision until the spring meeting.",
    "He repaired the bicycle chain with a borrowed set of pliers.",
    "Fresh bread from the corner bakery sells out before eight o'clock.",
    "The orchestra rehearsed the second movement until it sounded right.",
    "A narrow wooden bridge crosses the stream behind the old mill.",
    "Volunteers planted two hundred oak saplings along the riverbank.",
]


def text_sets() -> dict[str, list[tuple[str | None, str]]]:
    """(context, text) pairs: Q&A answers after their question, and plain sentences."""
    return {
        "qa": [(QUESTION.format(q=q), a) for q, a in QA],
        "sentences": [(None, s) for s in SENTENCES],
    }


def run_case(
    lm, context: str | None, text: str, k: int, seed: int, exact_budget: int,
    beams: tuple[int, ...] = (), peer: GenlmPeer | None = None, widths: tuple[int, ...] = (),
) -> dict:
    """One text: lattice and proxy at equal k, our beam at each width, exact where feasible, the
    peer at each of its widths."""
    m = Marginalizer(lm, text, context)
    m.canonical_score()  # scored once, outside both methods' timings
    lattice = m.lattice_estimate(k, seed=seed)
    proxy = m.proxy(k, seed=seed)
    drawn = max(1, min(len(proxy.running), round(len(proxy.running) * lattice.seconds / proxy.seconds)))
    try:
        exact = m.exact(budget=exact_budget).log_noncanonical
    except TooManyPathsError:
        exact = math.nan
    peers: dict = {"text": text}
    for w in beams:
        beam = m.beam(w)
        peers[f"beam{w}"], peers[f"beam{w}_s"] = beam.log_noncanonical, beam.seconds
    for run in peer.run(m, widths) if peer else []:
        peers[f"genlm{run.width}"] = run.bound
        peers[f"genlm{run.width}_s"] = run.seconds
        # genlm's own float32 trie sums against our float64 scores of the same paths
        peers[f"genlm{run.width}_f32"] = float(np.abs(run.genlm_log_w - run.log_p).max(initial=0.0))
    return peers | {
        "lattice_s": lattice.seconds,
        "proxy_s": proxy.seconds,
        "lattice": lattice.log_noncanonical,
        "proxy": proxy.log_noncanonical,
        "proxy_same_time": float(proxy.running[drawn - 1]),
        "exact": exact,
        "underestimates": proxy.log_noncanonical < lattice.log_noncanonical,
        "lattice_passes": lattice.forward_passes,
        "proxy_passes": proxy.forward_passes,
    }


def _mean(values: list[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    return f"{statistics.mean(finite):.3f}" if finite else "n/a"


def summarize(model: str, name: str, rows: list[dict], k: int) -> list[str]:
    """Markdown table rows for one model and text set."""
    speedups = [r["proxy_s"] / r["lattice_s"] for r in rows]
    gap = lambda key: [r[key] - r["exact"] for r in rows if math.isfinite(r["exact"])]  # noqa: E731
    exact_n = sum(math.isfinite(r["exact"]) for r in rows)
    return [
        f"| {model} | {name} | {len(rows)} | {k} "
        f"| {sum(r['lattice_s'] for r in rows):.1f} | {sum(r['proxy_s'] for r in rows):.1f} "
        f"| {statistics.median(speedups):.1f}x ({min(speedups):.1f}-{max(speedups):.1f}) "
        f"| {_mean([r['lattice'] for r in rows])} | {_mean([r['proxy_same_time'] for r in rows])} "
        f"| {_mean([r['proxy'] for r in rows])} "
        f"| {_mean(gap('lattice'))} / {_mean(gap('proxy'))} ({exact_n}) "
        f"| {100 * np.mean([r['underestimates'] for r in rows]):.0f}% |"
    ]


def bound_columns(k: int, beams: tuple[int, ...], widths: tuple[int, ...]) -> list[tuple[str, str]]:
    """(heading, row key) of each method in the bounds table, ours first, then the peer's."""
    return (
        [(f"lattice k={k}", "lattice"), (f"proxy k={k}", "proxy")]
        + [(f"beam W={w}", f"beam{w}") for w in beams]
        + [(f"genlm K={w}", f"genlm{w}") for w in widths]
    )


def _versus(columns: list[tuple[str, str]]) -> tuple[tuple[str, str], tuple[str, str]] | None:
    """Our widest beam (else the lattice) and the peer's widest beam, when there is a peer."""
    ours = [c for c in columns if c[1].startswith("beam")] or [columns[0]]
    peer = [c for c in columns if c[1].startswith("genlm")]
    return (ours[-1], peer[-1]) if peer else None


def bounds_table(columns: list[tuple[str, str]]) -> list[str]:
    """The heading of the bounds table."""
    heads = " | ".join(f"{h}: log p~ (s)" for h, _ in columns)
    versus = _versus(columns)
    extra = f" | {versus[0][0]} vs {versus[1][0]}: bound >= (worst gap, nats) / seconds <= (texts)" \
        " | genlm float32 shift (max nats)" \
        if versus else ""
    return [
        f"| model | texts | n | {heads} | exact log p (n){extra} |",
        "|" + "---|" * (len(columns) + 4 + 2 * bool(versus)),
    ]


def bounds_row(model: str, name: str, rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """One model and text set: each method's mean estimate and total seconds; with a peer, on how
    many texts our widest beam's bound reaches the peer's widest and in no more time, and how far
    genlm's own float32 weights are from our float64 scores."""
    cells = [f"{_mean([r[key] for r in rows])} ({sum(r[key + '_s'] for r in rows):.1f})" for _, key in columns]
    exact_n = sum(math.isfinite(r["exact"]) for r in rows)
    exact = f"{_mean([r['exact'] for r in rows])} ({exact_n})"
    line = f"| {model} | {name} | {len(rows)} | " + " | ".join(cells) + f" | {exact}"
    versus = _versus(columns)
    if versus:
        (_, ours), (_, theirs) = versus
        gaps = [r[ours] - r[theirs] for r in rows]
        reach = sum(g >= -1e-9 for g in gaps)
        quicker = sum(r[ours + "_s"] <= r[theirs + "_s"] for r in rows)
        shift = max(r[key + "_f32"] for r in rows for _, key in columns if key.startswith("genlm"))
        line += f" | {reach}/{len(rows)} (worst {min(gaps):+.1e}) / {quicker}/{len(rows)} | {shift:.1e}"
    return line + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=1000, help="k for both methods")
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--sets", default="qa,sentences")
    parser.add_argument("--limit", type=int, default=None, help="texts per set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exact-budget", type=int, default=2000)
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument("--dtype", default="auto", help="auto, float32, float16 or bfloat16 (default auto)")
    parser.add_argument("--peer", choices=["genlm"], help="run genlm-bytes' beam beside ours (own venv, built once)")
    parser.add_argument("--peer-widths", default="4,16", help="the peer's beam widths K")
    parser.add_argument("--beam-widths", default=f"{DEFAULT_BEAM_WIDTH},16",
                        help=f"our beam's widths W (default: the default {DEFAULT_BEAM_WIDTH} and 16; 0 for none)")
    parser.add_argument("--per-text", action="store_true", help="the bounds table gets a row per text too")
    args = parser.parse_args()
    widths = tuple(int(w) for w in args.peer_widths.split(",")) if args.peer else ()
    beams = tuple(sorted({int(w) for w in args.beam_widths.split(",")} - {0}))
    columns = bound_columns(args.samples, beams, widths)
    bounds: list[str] = []
    print(
        "| model | texts | n | k | lattice s | proxy s | proxy/lattice time (median, range) "
        "| lattice log p~ | proxy log p~ at lattice's time | proxy log p~ at k "
        "| gap to exact: lattice / proxy (n exact) | proxy underestimates |"
    )
    print("|" + "---|" * 12)
    for model in args.models.split(","):
        lm = load_model(model, device=args.device, dtype=args.dtype)
        print(f"{model}: {lm.loaded.device}, {str(lm.dtype).removeprefix('torch.')}", flush=True)
        peer = GenlmPeer(model, lm.tokenizer) if args.peer else None
        # kernels and caches (ours and the peer's), outside the timings
        run_case(lm, None, "A warm-up text.", 8, args.seed, 1, beams[:1], peer, widths[:1])
        for name in args.sets.split(","):
            cases = text_sets()[name][: args.limit]
            rows = [
                run_case(lm, c, t, args.samples, args.seed, args.exact_budget, beams, peer, widths) for c, t in cases
            ]
            print("\n".join(summarize(model, name, rows, args.samples)), flush=True)
            if args.per_text:
                bounds.extend(bounds_row(model, repr(r["text"][:28]), [r], columns) for r in rows)
            bounds.append(bounds_row(model, name, rows, columns))
        if peer:
            peer.close()
    print("log p~ = mean log non-canonical marginal estimate; gaps are estimate minus exact (nats).")
    print("\n" + "\n".join(bounds_table(columns) + bounds))
    print(
        "Each cell: the mean log non-canonical estimate over the texts (every method but the proxy is a "
        "lower bound) and the total seconds, canonical path excluded (it is scored once, outside every clock)."
        + (" genlm's bound is the logsumexp of the distinct complete tokenizations its beam ends with (each "
           "surviving state's final token committed), rescored with our float64 scorer; the shift is genlm's "
           "own float32 trie weight of a path minus our score of it." if args.peer else "")
    )


if __name__ == "__main__":
    main()
