"""What comes next (issue 58): the next characters after a prompt over every tokenization, beside
genlm-bytes, how fast they settle and certify, how fast a continuation runs, and how far the
canonical tokens' view and token healing are from the marginal.

Per prompt (the lesson's kinds: a trailing space, mid-word, a URL, code indentation, a number,
non-English; and sentences of bench/compare_sentences.txt cut mid-word or after a space) and model,
float32 on the CPU unless --device and --dtype say otherwise:

* **genlm** (``--parts genlm``): our top-5 characters, compared on their first byte, with our
  probability and certified interval, beside genlm-bytes' ``logp_next`` for the same byte after
  ``ByteBeamState.prefill`` of the prompt's bytes at K = --peer-width (bench/peers/genlm_peer.py,
  its own virtualenv, the same converted model folder). They agree when within --tol; the check
  counts where our interval is within --tol wide. A disagreement is told by the certificate: genlm
  below our lower bound lost mass that reaches the byte (pruned tokenizations); above our upper
  bound, its beam lost mass elsewhere and renormalized over what it kept.
* **speed** (``--parts speed``): one ``next_characters_stream`` per prompt, capped at --cap
  seconds: the seconds to the first result whose top-5 first-byte values are within --tol of the
  run's last (certified where it finished), to the first whose top-5 intervals are all within
  --tol wide (prompts of at most 30 bytes), the widest top-5 interval at 1 s and at 10 s, against
  genlm's prefill plus logp_next.
* **continue** (``--parts continue``): ``mc.continue_text(chars=--chars)`` (greedy) on the lesson's
  prompts: seconds and characters/s (the marginal's continuation, with generate's two beside it).
* **finding** (printed with any part that searches; ``--parts finding`` alone): each view's
  total variation from the marginal over the next byte (``NextCharacters.total_variation``) per
  model and kind of prompt, and the prompts where token healing is wrong (its most probable next
  character is not the marginal's, or its total variation passes 0.1).

``--prompts scripts`` (issue 65) takes the prompts of bench/next_scripts.tsv instead (Chinese,
Japanese, Korean, Hindi, Arabic, Russian, Greek, Thai, emoji, Latin with accents; read by
bench.support.scripts), each searched with k = 5 (``next_characters(prompt, model, k=5)``'s
rows, capped at --cap seconds). Its **genlm** part compares **whole characters**: each of our
top-5 rows that is one whole UTF-8 character (not "end", not a lead byte's range: those are
counted as skipped) beside genlm-bytes' log P(prompt + character) − log P(prompt) at K =
--peer-width (the prompt prefilled, then ``logp_next`` chained over the character's bytes), agreeing
within --agree (0.02) where our interval is within --tol (0.01) wide. Its finding is per script.

Run: .venv/bin/python -m bench.next_chars [--models gemma3-270m,smollm2-135m]
     [--parts genlm,speed,continue,finding] [--prompts lesson|scripts|FILE.tsv] [--cap 20]
     [--peer-width 16] [--tol 0.01] [--agree 0.02] [--chars 20] [--limit N] [--device cpu] [--dtype float32]
bench/gpu.sh next runs the continuation on CUDA (--parts continue --device cuda).
"""

from __future__ import annotations

import argparse
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.next_chars.measures import compared_rows
from bench.next_chars.runs import LESSON, TOP, WARM_UP, PeerCache, Run, chosen_prompts, cpu_model, run_prompt, uptime
from bench.next_chars.tables import (
    CONTINUATION_HEAD,
    chars_summary,
    chars_table,
    continuation_rows,
    finding,
    genlm_summary,
    genlm_table,
    lesson_groups,
    script_groups,
    speed_table,
    summary,
)
from bench.surprisal import machine
from marginal_core.models import load_model
from marginal_core.search.prefix import next_characters_stream

# (kind, prompt): the lesson's kinds, then sentences of bench/compare_sentences.txt cut mid-word
# or after a space

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--parts", default="genlm,speed,continue",
                        help="speed (and the finding), genlm (genlm-bytes beside ours, after speed), continue, "
                             "finding (alone); peer: genlm alone into --peer-cache (the lesson's prompts)")
    parser.add_argument("--prompts", default="lesson",
                        help="lesson (the lesson's kinds and the bench's sentences), scripts (bench/next_scripts.tsv: "
                             "whole characters beside genlm, the finding per script) or a file script<TAB>prompt")
    parser.add_argument("--cap", type=float, default=20.0, help="seconds each prompt's search may run")
    parser.add_argument("--peer-width", type=int, default=16, help="genlm-bytes' beam width K")
    parser.add_argument("--peer-cache", type=Path, help="a JSON-lines file of genlm's results that processes share")
    parser.add_argument("--tol", type=float, default=0.01, help="the interval width a comparison needs (and, "
                        "on the lesson's prompts, the agreement)")
    parser.add_argument("--agree", type=float, default=0.02, help="the agreement of a whole character with genlm "
                        "(--prompts other than lesson)")
    parser.add_argument("--chars", type=int, default=20, help="the continuation's characters")
    parser.add_argument("--limit", type=int, help="the first N prompts only")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    scripts = args.prompts != "lesson"  # whole characters beside genlm, k = 5, the finding per script
    prompts = chosen_prompts(args.prompts)[: args.limit]
    print(f"# bench.next_chars — {machine()}\n\nCPU: {cpu_model()}; device {args.device}, {args.dtype}; "
          f"parts {','.join(sorted(parts))}; prompts {args.prompts} ({len(prompts)}); cap {args.cap:.0f} s; "
          f"K={args.peer_width}\n\n`uptime` at the start: {uptime()}\n", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):  # a bench started in the background ignores SIGINT otherwise
        signal.signal(sig, signal.default_int_handler)
    runs: list[Run] = []
    continuations: list[str] = []
    try:  # Ctrl-C (SIGINT) or SIGTERM stops and prints the tables of what finished
        for name in args.models.split(","):
            lm = load_model(name, device=args.device, dtype=args.dtype)
            list(next_characters_stream(lm, WARM_UP, k=3, time_budget=5.0))  # the first pass's one-off costs
            if parts & {"genlm", "speed", "finding"}:
                for kind, prompt in prompts:
                    runs.append(run_prompt(lm, kind, prompt, args.cap, k=TOP if scripts else 10))
                    print(summary(runs[-1]), flush=True)
            if "genlm" in parts and scripts:  # whole characters, shortest prompt first
                cache = PeerCache(args.peer_cache, lm, args.peer_width)
                try:
                    for run in sorted((r for r in runs if r.model == name), key=lambda r: len(r.prompt.encode())):
                        whole, _, _ = compared_rows(run)
                        theirs = cache.chars(run.prompt, [r.bytes for r in whole]) if whole else {}
                        print(f"{name} {run.prompt!r}: genlm " + " ".join(
                            f"{c.decode()!r}:{np.exp(v):.4f}" for c, v in theirs.items()), flush=True)
                        runs = [replace(r, peer_chars=theirs) if r is run else r for r in runs]
                finally:
                    cache.close()
            elif parts & {"genlm", "peer"}:  # the lesson's prompts, shortest first (--parts peer: longest first)
                lesson = sorted({p for kind, p in prompts if kind in LESSON}, key=lambda p: len(p.encode("utf-8")),
                                reverse="genlm" not in parts)
                cache = PeerCache(args.peer_cache, lm, args.peer_width)
                try:
                    for prompt in lesson:
                        theirs = cache.next_byte(prompt)
                        print(f"{name} {prompt!r}: genlm {theirs.seconds:.2f} s", flush=True)
                        runs = [replace(r, peer=theirs) if (r.model, r.prompt) == (name, prompt) else r for r in runs]
                finally:
                    cache.close()
            if "continue" in parts:
                continuations += continuation_rows(lm, [p for kind, p in prompts if scripts or kind in LESSON],
                                                   args.chars, 3 * args.cap)
    except KeyboardInterrupt:
        print("\n(stopped: the tables hold what finished)", flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the tables are printed whatever comes next
    if runs and "genlm" in parts and scripts:
        print(f"\n## Beside genlm-bytes, whole characters (K={args.peer_width})\n\n"
              + "\n".join(chars_summary(runs, args.tol, args.agree)) + "\n\n"
              + "\n".join(chars_table(runs, args.tol, args.agree)))
    elif runs and "genlm" in parts:
        print("\n## Beside genlm-bytes\n\n" + genlm_summary(runs, args.tol) + "\n\n" + "\n".join(genlm_table(runs, args.tol)))
    if runs and ("speed" in parts or not scripts):
        print("\n## Speed\n\n" + "\n".join(speed_table(runs, args.tol, args.cap)))
    if runs:
        print("\n## The finding: the token views against the marginal\n\n"
              + "\n".join(finding(runs, script_groups if scripts else lesson_groups)))
    if continuations:
        print(f"\n## Continuation ({args.chars} characters, greedy)\n\n" + "\n".join(CONTINUATION_HEAD + continuations))
    print(f"\n`uptime` at the end: {uptime()}")


if __name__ == "__main__":
    main()
