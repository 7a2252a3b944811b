"""Surprisal at every byte (issue 49): the word strip's prefix search beside the prefix walk it
replaced (6008ecc, run from a git worktree of that commit in its own process) and genlm-bytes' byte
beam, per text and model: seconds, and how tight each certifies the words.

Per text (the --limit shortest lines of the sentence file, then each --extra file as one text),
after canonical_score() has warmed the context: the seconds of ``Marginalizer.surprisal(unit="word")``
(the search), the walk's over the same text, their ratio, and how many words each certifies within
--tight-word nats (and the widest word interval). With --peer genlm, genlm-bytes' beam at K =
--peer-width (bench/peers/genlm_peer.py, its own virtualenv) over the same lattice bytes: its
seconds, and its log P(s<j) against our lower bounds where both are within --tight nats.
float32 on the CPU unless --device and --dtype say otherwise (bench/gpu.sh surprisal: the paragraph
on a GPU).
Run: .venv/bin/python -m bench.surprisal [--models gemma3-270m,smollm2-135m] [--limit N]
     [--extra bench/paragraph.txt] [--walk 6008ecc | --walk none] [--peer genlm [--peer-width 16] [--peer-chars 199]]
     [--time-budget SECONDS] [--kv-before]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.peers.genlm_peer import GenlmPeer
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model
from marginal_core.search.masses import intervals
from marginal_core.search.settings import KV_BYTES
from marginal_core.search.surprisal.stream import surprisal_stream

SENTENCES = Path(__file__).with_name("compare_sentences.txt")
WALK_RUNNER = Path(__file__).parent / "peers" / "walk_runner.py"
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


class Walk:
    """The walk of a past commit in its own process: a worktree of the commit (made once, under
    the temporary folder) on PYTHONPATH, one model loaded, a text per request."""

    def __init__(self, rev: str, model: str) -> None:
        tree = Path(tempfile.gettempdir()) / f"marginal-walk-{rev}"
        if not tree.exists():
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], check=True, capture_output=True)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen([sys.executable, str(WALK_RUNNER), model], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)

    def strip(self, text: str) -> dict:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(text) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        return {"seconds": reply["seconds"], "lower": np.array(reply["lower"]), "upper": np.array(reply["upper"])}

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def word_widths(cuts: np.ndarray, lower: np.ndarray, upper: np.ndarray, coupled: bool) -> np.ndarray:
    """Each region's interval width (regions between ``cuts``, lattice bytes) from bounds on
    log P(s<j): ours (coupled ends, surprisal_result.intervals) or the walk's own at 6008ecc
    ([lo_a - up_c, up_a - lo_c])."""
    a, c = cuts[:-1], cuts[1:]
    if coupled:
        bottom, top = intervals(lower, upper, a, c)
    else:
        bottom, top = np.maximum(lower[a] - upper[c], 0.0), upper[a] - lower[c]
    return top - bottom


def run_text(lm: LM, text: str, walk: Walk | None, peer: GenlmPeer | None, width: int, tight_word: float,
             budget: float | None = None, context: str | None = None, kv_bytes: int = KV_BYTES) -> dict:
    """One text (after ``context``, if any): our word strip (timed alone after the context is
    warm; ``budget``: its time budget), with the words certified within ``tight_word`` after each
    round; the walk's strip (no context); genlm's beam."""
    m = Marginalizer(lm, text, context)
    m.canonical_score()
    started, rounds = time.perf_counter(), []
    for strip in surprisal_stream(m, "word", time_budget=budget, kv_bytes=kv_bytes):
        widths = word_widths(strip.cuts, strip.prefix_lower, strip.prefix_upper, True)
        rounds.append((time.perf_counter() - started, int(np.sum(widths <= tight_word))))
    row = {"text": text, "kind": "", "bytes": len(m.lattice.data), "search_s": rounds[-1][0], "rounds": strip.rounds,
           "scored": strip.scored, "ended": strip.ended, "settled": strip.settled_at,
           "lower": strip.prefix_lower, "upper": strip.prefix_upper, "widths": widths,
           "first_s": rounds[0][0], "by_round": rounds}
    if walk is not None:
        theirs = walk.strip(text)
        row |= {"walk_s": theirs["seconds"], "walk_lower": theirs["lower"],
                "walk_widths": word_widths(strip.cuts, theirs["lower"], theirs["upper"], False)}
    if peer is not None:
        prefix = peer.prefix(m, width)
        row |= {"genlm_s": prefix.seconds, "genlm": prefix.log_z}
    return row


def label(text: str) -> str:
    return repr(text if len(text) <= 28 else text[:27] + "…")


def ratio(a: float | None, b: float) -> str:
    return "-" if a is None else f"{a / b:.1f}x"


def speed_line(model: str, r: dict) -> str:
    """One row of the speed table: seconds of each, and the walk's and genlm's over ours."""
    walk, genlm = r.get("walk_s"), r.get("genlm_s")
    settled = "-" if r["settled"] is None else f"{r['settled']:.1f}"
    return (f"| {model} | {label(r['text'])} | {r['bytes']} | {r['search_s']:.1f} | {r['ended']} | {settled} "
            f"| {r['rounds']} | {r['scored']:,} "
            f"| {'-' if walk is None else f'{walk:.1f}'} | {ratio(walk, r['search_s'])} "
            f"| {'-' if genlm is None else f'{genlm:.1f}'} | {ratio(genlm, r['search_s'])} "
            f"| {r['bytes'] / r['search_s']:.1f} |")


def tight_line(model: str, r: dict, tight: float) -> str:
    """One row of the tightness table: words within ``tight`` nats and the widest, ours after its
    first round, at the walk's seconds (its last round finished by then) and at its end, and the walk's."""
    words = len(r["widths"])
    first = f"{r['by_round'][0][1]}/{words} ({r['first_s']:.1f} s)"
    if "walk_widths" in r:
        done = [n for seconds, n in r["by_round"] if seconds <= r["walk_s"]]
        equal = f"{done[-1] if done else 0}/{words}"
        walk = f"{int(np.sum(r['walk_widths'] <= tight))}/{words} | {float(np.max(r['walk_widths'])):.3g}"
    else:
        equal, walk = "-", "- | -"
    return (f"| {model} | {label(r['text'])} | {first} | {equal} | {int(np.sum(r['widths'] <= tight))}/{words} "
            f"| {float(np.max(r['widths'])):.3g} | {walk} |")


def agree_line(model: str, r: dict, tight: float) -> str:
    """One row of the agreement table, over the bytes where both are within ``tight`` nats: the
    largest abs(our lower - the walk's lower), and abs(genlm - our lower) where ours is."""
    lower, sure = r["lower"], r["upper"] - r["lower"] < tight
    walk = "-"
    if "walk_lower" in r:
        both = sure & (r["upper"] - r["walk_lower"] < tight)  # the walk's lower bound within tight of the truth
        walk = f"{float(np.max(np.abs(r['walk_lower'][both] - lower[both]), initial=0.0)):.1e} ({int(both.sum())})"
    genlm = "-"
    if "genlm" in r:
        genlm = f"{float(np.max(np.abs(r['genlm'][sure] - lower[sure]), initial=0.0)):.1e} ({int(sure.sum())})"
    return f"| {model} | {label(r['text'])} | {walk} | {genlm} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--sentences", type=Path, default=SENTENCES, help="one text a line")
    parser.add_argument("--limit", type=int, help="the shortest N lines of the file (default: all)")
    parser.add_argument("--extra", type=Path, action="append", default=[], help="a file read as one more text")
    parser.add_argument("--kinds", type=Path, help="a TSV of kind, context (\\n for a newline; empty: none) and "
                                                   "text per line, in place of the sentences (bench/surprisal_kinds.tsv)")
    parser.add_argument("--walk", default="6008ecc", help="the commit whose word strip runs beside ours (6008ecc: "
                                                          "the walk; 3a2ee44: the search before the next "
                                                          "characters and the canonical prefix row), or none")
    parser.add_argument("--peer", choices=["genlm"], help="genlm-bytes' beam beside ours (own venv, built once)")
    parser.add_argument("--peer-width", type=int, default=16, help="the peer's beam width K")
    parser.add_argument("--peer-chars", type=int, default=199,
                        help="the peer runs on texts of at most this many characters (a paragraph takes it minutes)")
    parser.add_argument("--tight", type=float, default=0.02, help="nats: a byte's bounds count as exact within this")
    parser.add_argument("--tight-word", type=float, default=0.05, help="nats: a word counts as certified within this")
    parser.add_argument("--time-budget", type=float, help="seconds: the search's time budget (default: none)")
    parser.add_argument("--kv-before", action="store_true",
                        help="also each text by the search that keeps no KV across rounds (issue 59's before), first")
    parser.add_argument("--device", default="cpu", help="ours on this device (the walk and genlm stay on the CPU)")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    texts = [("", None, t) for t in shortest(args.sentences, args.limit) if args.kinds is None]
    if args.kinds is not None:
        for line in args.kinds.read_text(encoding="utf-8").splitlines():
            kind, context, text = line.split("\t")
            texts.append((kind, context.replace("\\n", "\n") or None, text))
    texts += [("paragraph", None, p.read_text(encoding="utf-8").strip()) for p in args.extra]
    print(f"{machine()}\n", flush=True)
    rows: dict[str, list[dict]] = {}
    for model in args.models.split(","):
        lm = load_model(model, device=args.device, dtype=args.dtype)
        walk = Walk(args.walk, model) if args.walk != "none" else None
        peer = GenlmPeer(model, lm.tokenizer) if args.peer else None
        run_text(lm, WARM_UP, walk, peer, args.peer_width, args.tight_word)  # kernels and caches, ours and the peers'
        rows[model] = []
        for kind, context, text in texts:
            if args.kv_before:  # the search that feeds every ancestor again, in the same run: the ratio holds under load
                before = run_text(lm, text, None, None, args.peer_width, args.tight_word, args.time_budget, context, 0)
                print(speed_line(f"{model} (no KV kept)", before), flush=True)
                rows.setdefault(f"{model} (no KV kept)", []).append(before | {"kind": kind})
            rows[model].append(run_text(lm, text, walk if context is None else None,
                                        peer if len(text) <= args.peer_chars else None, args.peer_width, args.tight_word,
                                        args.time_budget, context) | {"kind": kind})
            print(speed_line(model, rows[model][-1]), flush=True)
        for other in (walk, peer):
            if other is not None:
                other.close()
    print("\n| model | text | bytes | search s | ended | values settled s | rounds | prefixes | walk s "
          "| walk / search | genlm s | genlm / search | search bytes/s |")
    print("|" + "---|" * 13)
    print("\n".join(speed_line(model, r) for model, rs in rows.items() for r in rs))
    print(f"\n| model | text | search: words within {args.tight_word} after round 0 | at the walk's seconds "
          f"| at its end | widest | walk: words within {args.tight_word} | widest |")
    print("|" + "---|" * 8)
    print("\n".join(tight_line(model, r, args.tight_word) for model, rs in rows.items() for r in rs))
    for model, rs in rows.items():
        ours = np.concatenate([r["widths"] for r in rs])
        line = f"{model}: search {np.mean(ours <= args.tight_word):.0%} of {len(ours)} words within {args.tight_word}"
        if all("walk_widths" in r for r in rs):
            theirs = np.concatenate([r["walk_widths"] for r in rs])
            line += f", walk {np.mean(theirs <= args.tight_word):.0%}"
        print(line)
    print("\n| model | kind | text | bytes | search s | word interval widths (nats) | genlm K s |")
    print("|" + "---|" * 7)
    for model, rs in rows.items():
        for r in rs:
            widths = ", ".join(f"{w:.2g}" for w in r["widths"])
            genlm = f"{r['genlm_s']:.1f}" if "genlm_s" in r else "-"
            print(f"| {model} | {r['kind']} | {label(r['text'])} | {r['bytes']} | {r['search_s']:.1f} | {widths} "
                  f"| {genlm} |")
    print(f"\n| model | text | max abs(search - walk) lower, bytes both within {args.tight} (n) "
          f"| max abs(genlm K={args.peer_width} - search), bytes ours within {args.tight} (n) |")
    print("|" + "---|" * 4)
    print("\n".join(agree_line(model, r, args.tight) for model, rs in rows.items() for r in rs))
    print(f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
