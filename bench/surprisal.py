"""Surprisal at every byte (issue 42): the word strip's prefix walk against the anytime beam on
the same text, and its prefix probabilities log P(s<j) beside genlm-bytes' byte beam.

Per text (the --limit shortest lines of the sentence file), after canonical_score() has warmed
the context: the seconds of ``Marginalizer.surprisal(unit="word")`` (the anytime walk) and of
``estimate("beam", beam_width=None)``, their ratio and the walk's bytes per second. With --peer
genlm, genlm-bytes' beam at K = --peer-width (bench/peers/genlm_peer.py, its own virtualenv) runs
over the same lattice bytes, its ``logZ`` after each byte compared with our bounds where ours are
within --tight nats. float32 on the CPU.
Run: .venv/bin/python -m bench.surprisal [--models gemma3-270m,smollm2-135m] [--limit N]
     [--peer genlm [--peer-width 16]] [--sentences bench/compare_sentences.txt] [--tight 0.02]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from bench.peers.genlm_peer import GenlmPeer
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model

SENTENCES = Path(__file__).with_name("compare_sentences.txt")
WARM_UP = "A warm-up text."


def shortest(path: Path, limit: int | None) -> list[str]:
    """The file's non-empty lines, shortest in UTF-8 bytes first (ties in file order), the first limit."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(lines, key=lambda line: len(line.encode("utf-8")))[:limit]


def machine() -> str:
    """The header line: date, CPU, its bf16 flags (lscpu), cores and the load average now."""
    try:
        flags = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        flags = ""
    bf16 = sorted({f for f in flags.split() if "bf16" in f or f.startswith("amx")}) or ["none"]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, bf16 flags: {' '.join(bf16)}; load average {load}")


def run_text(lm: LM, text: str, peer: GenlmPeer | None, width: int) -> dict:
    """One text: the word strip and the anytime beam, each timed alone after the context is warm,
    then genlm's beam at width K over the same bytes."""
    m = Marginalizer(lm, text)
    m.canonical_score()
    started = time.perf_counter()
    strip = m.surprisal(unit="word")
    strip_s = time.perf_counter() - started
    started = time.perf_counter()
    beam = m.estimate("beam", beam_width=None)
    beam_s = time.perf_counter() - started
    row = {"text": text, "bytes": len(m.lattice.data), "strip_s": strip_s, "beam_s": beam_s, "widths": strip.widths,
           "beam_widths": tuple(r.width for r in beam.rounds), "lower": strip.prefix_lower, "upper": strip.prefix_upper}
    if peer is not None:
        theirs = peer.prefix(m, width)
        row |= {"genlm_s": theirs.seconds, "genlm": theirs.log_z}
    return row


def label(text: str) -> str:
    return repr(text if len(text) <= 28 else text[:27] + "…")


def speed_line(model: str, r: dict) -> str:
    """One row of the speed table."""
    return (f"| {model} | {label(r['text'])} | {r['bytes']} | {r['strip_s']:.1f} | {r['beam_s']:.1f} "
            f"| {r['strip_s'] / r['beam_s']:.2f}x | {r['bytes'] / r['strip_s']:.1f} "
            f"| {','.join(map(str, r['widths']))} | {','.join(map(str, r['beam_widths']))} |")


def peer_line(model: str, r: dict, tight: float) -> str:
    """One row of the peer table over the prefixes j = 0..len: where our interval is within
    ``tight`` nats, the largest abs(genlm - ours) there; over every j, the largest abs(genlm - our
    lower bound), how often and how far genlm falls below it, and how far it rises above our upper
    bound (a lower bound should not); seconds and bytes per second of each."""
    lower, upper, genlm = r["lower"], r["upper"], r["genlm"]
    sure = upper - lower < tight
    worst = float(np.max(np.abs(genlm[sure] - lower[sure]), initial=0.0))
    below = lower - genlm
    return (f"| {model} | {label(r['text'])} | {r['bytes']} | {int(sure.sum())}/{len(sure)} | {worst:.1e} "
            f"| {float(np.max(np.abs(below))):.1e} | {int(np.sum(below > tight))} (max {float(below.max()):+.1e}) "
            f"| {float(np.max(genlm - upper)):+.1e} | {r['strip_s']:.1f} | {r['genlm_s']:.1f} "
            f"| {r['bytes'] / r['strip_s']:.1f} | {r['bytes'] / r['genlm_s']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--sentences", type=Path, default=SENTENCES, help="one text a line")
    parser.add_argument("--limit", type=int, default=3, help="the shortest N lines of the file")
    parser.add_argument("--peer", choices=["genlm"], help="genlm-bytes' beam beside ours (own venv, built once)")
    parser.add_argument("--peer-width", type=int, default=16, help="the peer's beam width K")
    parser.add_argument("--tight", type=float, default=0.02, help="nats: our interval counts as exact within this")
    args = parser.parse_args()
    texts = shortest(args.sentences, args.limit)
    print(f"{machine()}\n", flush=True)
    rows: dict[str, list[dict]] = {}
    for model in args.models.split(","):
        lm = load_model(model, device="cpu", dtype="float32")
        peer = GenlmPeer(model, lm.tokenizer) if args.peer else None
        run_text(lm, WARM_UP, peer, args.peer_width)  # kernels and caches, ours and the peer's
        rows[model] = []
        for text in texts:
            rows[model].append(run_text(lm, text, peer, args.peer_width))
            print(speed_line(model, rows[model][-1]), flush=True)
        if peer:
            peer.close()
    print("\n| model | text | bytes | word strip s | anytime beam s | strip / beam | strip bytes/s "
          "| strip widths | beam widths |")
    print("|" + "---|" * 9)
    print("\n".join(speed_line(model, r) for model, rs in rows.items() for r in rs))
    if args.peer:
        print(f"\n| model | text | bytes | prefixes where ours is within {args.tight} | max abs(genlm - ours) there "
              f"| max abs(genlm - our lower), every prefix | prefixes where genlm K={args.peer_width} is below our lower "
              f"by > {args.tight} (max nats) | genlm above our upper (max nats) | ours s | genlm s | ours bytes/s "
              "| genlm bytes/s |")
        print("|" + "---|" * 12)
        print("\n".join(peer_line(model, r, args.tight) for model, rs in rows.items() for r in rs))
    print(f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
