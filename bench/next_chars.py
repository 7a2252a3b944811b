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
* **finding**: each view's total variation from the marginal over the next byte
  (``NextCharacters.total_variation``) per model, and the prompts where token healing is wrong
  (its most probable next character is not the marginal's, or its total variation passes 0.1).

Run: .venv/bin/python -m bench.next_chars [--models gemma3-270m,smollm2-135m]
     [--parts genlm,speed,continue] [--cap 20] [--peer-width 16] [--chars 20] [--limit N]
     [--device cpu] [--dtype float32]
bench/gpu.sh next runs the continuation on CUDA (--parts continue --device cuda).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.peers.genlm_peer import GenlmPeer, PeerNext
from bench.surprisal import machine
from marginal_core.api.calls import continue_text
from marginal_core.estimators.next_chars import END, NextCharacters, healed_masses, key_groups, key_masses
from marginal_core.estimators.next_search import next_characters_stream
from marginal_core.estimators.token_views import token_views
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import lattice_of
from marginal_core.lattice.readable import show_piece
from marginal_core.lattice.vocab import vocabulary
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model

# (kind, prompt): the lesson's kinds, then sentences of bench/compare_sentences.txt cut mid-word
# or after a space
PROMPTS: list[tuple[str, str]] = [
    ("space", "The capital of France is "),
    ("space", "My favourite colour is "),
    ("mid-word", "The capital of Fra"),
    ("mid-word", "She plays the vio"),
    ("URL", "Visit https:"),
    ("URL", "See http://www."),
    ("code", "def add(a, b):\n    "),
    ("code", "for i in range(10):\n    "),
    ("number", "pi is 3.14"),
    ("number", "The year was 19"),
    ("non-English", "Die Hauptstadt von Deutschland ist "),
    ("non-English", "Né à Pa"),
    ("non-English", "La capitale de l'Ita"),
    ("bench, mid-word", "Visit https://example.org/docs/getting-sta"),
    ("bench, space", "Dr. Nakamura's 2019 paper on CRISPR-Cas9 off-target effects was cited "),
    ("bench, mid-word", "The invoice #INV-20931 totals $4,375.60, payable to Mül"),
    ("bench, mid-word", "Run pip install --upgrade numpy==1.26.4 before calling np.linalg.ei"),
    ("bench, space", "Tchaikovsky's Piano Concerto No. 1 in B-flat minor, Op. "),
]
LESSON = {"space", "mid-word", "URL", "code", "number", "non-English"}
SHORT = 30  # bytes: the prompts that should certify within a second
TOP = 5
WARM_UP = "A warm-up prompt "


@dataclass(frozen=True)
class Run:
    """One prompt under one model: the stream's results (each with its seconds), the token views'
    most probable next characters, and genlm's next byte (None without the peer)."""

    kind: str
    prompt: str
    model: str
    results: list[NextCharacters]
    canonical_top: bytes
    healed_top: bytes
    peer: PeerNext | None

    @property
    def final(self) -> NextCharacters:
        return self.results[-1]


def shown(prompt: str) -> str:
    """A prompt in a table cell: quoted, its whitespace visible (␣, ↵), pipes escaped."""
    return "`" + show_piece(prompt).replace("|", "\\|").replace("`", "'") + "`"


def char_cell(b: bytes) -> str:
    """A next character (its bytes) in a table cell."""
    if not b:
        return END
    return "`" + show_piece(b.decode("utf-8", errors="replace")).replace("|", "\\|").replace("`", "'") + "`"


def by_first_byte(found: NextCharacters) -> dict[int, tuple[float, float, float]]:
    """The rows' (point, lower, upper) summed by first byte (256: no byte); a first byte that
    several listed characters share sums their bounds (its lower bound; an upper bound only
    where every character it begins is listed)."""
    out: dict[int, tuple[float, float, float]] = {}
    for r in found.rows:
        key = r.bytes[0] if r.bytes else 256
        p, lo, up = out.get(key, (0.0, 0.0, 0.0))
        out[key] = (p + r.probability, lo + r.lower, min(1.0, up + r.upper))
    return out


def top_bytes(found: NextCharacters, k: int = TOP) -> list[int]:
    """The first bytes of the k most probable rows, in order, each once."""
    return list(dict.fromkeys(r.bytes[0] if r.bytes else 256 for r in found.rows))[:k]


def settled_at(results: Sequence[NextCharacters], tol: float) -> float | None:
    """The seconds of the first result whose values for the last result's top first bytes are
    within tol of the last's (a byte missing from a result counts as 0 there)."""
    last = by_first_byte(results[-1])
    keys = top_bytes(results[-1])
    for r in results:
        values = by_first_byte(r)
        if all(abs(values.get(b, (0.0,))[0] - last[b][0]) <= tol for b in keys):
            return r.seconds
    return None


def widest(found: NextCharacters, k: int = TOP) -> float:
    """The widest certified interval among the k most probable characters."""
    return max((r.upper - r.lower for r in found.rows[:k]), default=1.0)


def certified_at(results: Sequence[NextCharacters], tol: float) -> float | None:
    """The seconds of the first result whose top-5 intervals are all within tol wide."""
    return next((r.seconds for r in results if r.rows and widest(r) <= tol), None)


def width_at(results: Sequence[NextCharacters], seconds: float) -> float | None:
    """The widest top-5 interval of the last result by the given seconds (None: none yet)."""
    before = [r for r in results if r.seconds <= seconds]
    return widest(before[-1]) if before else None


def verdict(ours: tuple[float, float, float], theirs: float, tol: float) -> str:
    """Whether genlm's probability agrees with ours within tol, told by our certificate."""
    point, lower, upper = ours
    if upper - lower > tol:
        return "ours wider than tol"
    if abs(point - theirs) <= tol:
        return "agree"
    if theirs < lower:
        return "DISAGREE: genlm below our lower bound (its beam lost mass that reaches this byte)"
    if theirs > upper:
        return "DISAGREE: genlm above our upper bound (its beam lost mass elsewhere and renormalized)"
    return "DISAGREE: genlm inside our interval"


def view_tops(lm: LM, prompt: str) -> tuple[bytes, bytes]:
    """The most probable next character under the canonical tokens and under token healing (b"": none)."""
    vocab = vocabulary(lm.text_tokenizer)
    state = lm.context(context_ids(lm.text_tokenizer, None))
    views = token_views(lm, state, lattice_of(prompt, lm.text_tokenizer).canonical, vocab)
    groups = key_groups(vocab, lm.vocab)
    canonical = key_masses(views.canonical, groups)
    healed = healed_masses(vocab, groups, views.tail, views.before, views.heads)
    return canonical.top(), healed.top()


def run_prompt(lm: LM, kind: str, prompt: str, cap: float) -> Run:
    """The stream over one prompt (capped) and its token views' tops."""
    results = list(next_characters_stream(lm, prompt, k=10, time_budget=cap))
    canonical_top, healed_top = view_tops(lm, prompt)
    return Run(kind, prompt, lm.name, results, canonical_top, healed_top, None)


class PeerCache:
    """genlm's next bytes by (model, prompt, K), kept in a JSON-lines file that several bench
    processes share (one may run genlm on the long prompts while another runs ours), the peer
    started only when a prompt is missing."""

    def __init__(self, path: Path | None, lm: LM, width: int) -> None:
        self.path, self.lm, self.width = path, lm, width
        self.peer: GenlmPeer | None = None

    def found(self) -> dict[str, PeerNext]:
        """The file's results for this model and width, by prompt."""
        if self.path is None or not self.path.exists():
            return {}
        lines = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return {x["prompt"]: PeerNext(x["width"], x["seconds"], np.array(x["p"]), x["states"]) for x in lines
                if x["model"] == self.lm.name and x["width"] == self.width}

    def next_byte(self, prompt: str) -> PeerNext:
        """genlm's next byte after the prompt: from the file, else run (and kept in the file)."""
        if prompt in (known := self.found()):
            return known[prompt]
        if self.peer is None:
            self.peer = GenlmPeer(self.lm.name, self.lm.text_tokenizer)
        tok = self.lm.text_tokenizer
        out = self.peer.next_byte(lattice_of(prompt, tok), context_ids(tok, None), self.width)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"model": self.lm.name, "prompt": prompt, "width": out.width,
                                    "seconds": out.seconds, "p": out.p.tolist(), "states": out.states}) + "\n")
        return out

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()


def summary(run: Run) -> str:
    """A progress line: the prompt, our seconds and top characters, genlm's seconds."""
    last = run.final
    return (f"{run.model} {run.prompt!r}: {last.seconds:.1f} s, done {last.done}, "
            + " ".join(f"{x.character!r}:{x.probability:.3f}" for x in last.rows[:TOP])
            + (f"; genlm {run.peer.seconds:.2f} s" if run.peer else ""))


def fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def genlm_table(runs: Sequence[Run], tol: float) -> list[str]:
    """Per prompt and model, our top-5 characters beside genlm's probability of their first byte."""
    lines = [f"| model | prompt | next | ours [interval] | genlm K | genlm | |ours − genlm| | verdict (tol {tol}) |",
             "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        if run.peer is None:
            continue
        ours = by_first_byte(run.final)
        for b in top_bytes(run.final):
            rows = [r for r in run.final.rows if (r.bytes[0] if r.bytes else 256) == b]
            label = " ".join(char_cell(r.bytes) for r in rows)
            if b == 256:  # our "end" (end of string, special tokens, byte pieces): genlm's EOS is another outcome
                lines.append(f"| {run.model} | {shown(run.prompt)} | {label} | {ours[b][0]:.4f} "
                             f"[{ours[b][1]:.4f}, {ours[b][2]:.4f}] | {run.peer.width} | — | — | not compared (end) |")
                continue
            theirs = float(run.peer.p[b])
            lines.append(f"| {run.model} | {shown(run.prompt)} | {label} | {ours[b][0]:.4f} [{ours[b][1]:.4f}, "
                         f"{ours[b][2]:.4f}] | {run.peer.width} | {theirs:.4f} | {abs(ours[b][0] - theirs):.4f} | "
                         f"{verdict(ours[b], theirs, tol)} |")
    return lines


def genlm_summary(runs: Sequence[Run], tol: float) -> str:
    """How many compared bytes were checkable (our interval within tol) and how many agreed."""
    verdicts = []
    for run in runs:
        if run.peer is None:
            continue
        ours = by_first_byte(run.final)
        verdicts += [verdict(ours[b], float(run.peer.p[b]), tol) for b in top_bytes(run.final) if b != 256]
    checked = [v for v in verdicts if v != "ours wider than tol"]
    agreed = sum(v == "agree" for v in checked)
    return (f"{len(verdicts)} bytes compared; {len(checked)} with our interval within {tol} wide, of which "
            f"{agreed} agree within {tol} and {len(checked) - agreed} disagree.")


def speed_table(runs: Sequence[Run], tol: float, cap: float) -> list[str]:
    """Per prompt and model: seconds to settled values, to certified, widths at 1 s and 10 s, genlm's seconds."""
    lines = [f"| model | prompt | bytes | first result s | values within {tol} s | certified s "
             f"| widest top-5 at 1 s | at 10 s | last: s, rounds, scored, done | genlm s | genlm / ours (values) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        size = len(run.prompt.encode("utf-8"))
        settled, certified = settled_at(run.results, tol), certified_at(run.results, tol)
        last = run.final
        genlm = run.peer.seconds if run.peer is not None else None
        ratio = genlm / settled if genlm is not None and settled else None
        lines.append(f"| {run.model} | {shown(run.prompt)} | {size} | {run.results[0].seconds:.2f} | {fmt(settled)} | "
                     f"{fmt(certified) if certified is not None else f'not in {cap:.0f} s'} | "
                     f"{fmt(width_at(run.results, 1.0), 3)} | {fmt(width_at(run.results, 10.0), 3)} | "
                     f"{last.seconds:.1f}, {last.rounds}, {last.scored}, {'yes' if last.done else 'no'} | "
                     f"{fmt(genlm)} | {fmt(ratio, 1)}x |")
    return lines


def healing_wrong(run: Run) -> bool:
    """Token healing's most probable next character is not the marginal's, or its total variation passes 0.1."""
    top = run.final.rows[0].bytes if run.final.rows else b""
    return run.healed_top != top or run.final.total_variation["healed"] > 0.1


def finding(runs: Sequence[Run]) -> list[str]:
    """Mean total variation of each view from the marginal per model (lesson's, bench's, all), and healing's failures."""
    lines = ["| model | prompts | TV canonical (mean) | TV healed (mean) | canonical top ≠ marginal's | "
             "healing wrong |", "|---|---|---|---|---|---|"]
    for model in dict.fromkeys(r.model for r in runs):
        for name, keep in (("lesson's", lambda r: r.kind in LESSON), ("bench's", lambda r: r.kind not in LESSON),
                           ("all", lambda r: True)):
            chosen = [r for r in runs if r.model == model and keep(r)]
            if not chosen:
                continue
            tv_c = np.mean([r.final.total_variation["canonical"] for r in chosen])
            tv_h = np.mean([r.final.total_variation["healed"] for r in chosen])
            wrong_c = sum(r.canonical_top != (r.final.rows[0].bytes if r.final.rows else b"") for r in chosen)
            lines.append(f"| {model} | {name} ({len(chosen)}) | {tv_c:.3f} | {tv_h:.3f} | {wrong_c} | "
                         f"{sum(map(healing_wrong, chosen))} |")
    lines += ["", "Per prompt (healing wrong marked **):", "",
              "| model | prompt | marginal top (p) | canonical top | healed top | TV canonical | TV healed |",
              "|---|---|---|---|---|---|---|"]
    for r in runs:
        top = r.final.rows[0] if r.final.rows else None
        mark = "**" if healing_wrong(r) else ""
        lines.append(f"| {r.model} | {mark}{shown(r.prompt)}{mark} | "
                     f"{char_cell(top.bytes) if top else '—'} ({top.probability if top else 0:.3f}) | "
                     f"{char_cell(r.canonical_top)} | {char_cell(r.healed_top)} | "
                     f"{r.final.total_variation['canonical']:.3f} | {r.final.total_variation['healed']:.3f} |")
    return lines


CONTINUATION_HEAD = ["| model | prompt | chars | seconds | chars/s | marginal | canonical (generate) | healed |",
                     "|---|---|---|---|---|---|---|---|"]


def continuation_rows(lm: LM, prompts: Sequence[str], chars: int, cap: float) -> list[str]:
    """Per prompt, the greedy continuation of ``chars`` characters (the marginal's capped at cap
    seconds): seconds (all three views), characters/s of the marginal's, the three texts."""
    lines = []
    for prompt in prompts:
        started = time.perf_counter()
        out = continue_text(prompt, lm, chars=chars, time_budget=cap)
        seconds = time.perf_counter() - started
        n = len(out.marginal.text)
        lines.append(f"| {lm.name} | {shown(prompt)} | {n}{' (end)' if out.marginal.ended else ''} | {seconds:.2f} | "
                     f"{n / seconds:.2f} | {shown(out.marginal.text)} | {shown(out.canonical.text)} | "
                     f"{shown(out.healed.text)} |")
        print(lines[-1], flush=True)
    return lines


def cpu_model() -> str:
    """lscpu's model name."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "unknown")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--parts", default="genlm,speed,continue",
                        help="speed (and the finding), genlm (genlm-bytes beside ours, after speed), continue; "
                             "peer: genlm alone into --peer-cache")
    parser.add_argument("--cap", type=float, default=20.0, help="seconds each prompt's search may run")
    parser.add_argument("--peer-width", type=int, default=16, help="genlm-bytes' beam width K")
    parser.add_argument("--peer-cache", type=Path, help="a JSON-lines file of genlm's results that processes share")
    parser.add_argument("--tol", type=float, default=0.01)
    parser.add_argument("--chars", type=int, default=20, help="the continuation's characters")
    parser.add_argument("--limit", type=int, help="the first N prompts only")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    prompts = PROMPTS[: args.limit]
    print(f"# bench.next_chars — {machine()}\n\nCPU: {cpu_model()}; device {args.device}, {args.dtype}; "
          f"parts {','.join(sorted(parts))}; cap {args.cap:.0f} s; K={args.peer_width}\n\n`uptime` at the start: "
          f"{uptime()}\n", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):  # a bench started in the background ignores SIGINT otherwise
        signal.signal(sig, signal.default_int_handler)
    runs: list[Run] = []
    continuations: list[str] = []
    try:  # Ctrl-C (SIGINT) or SIGTERM stops and prints the tables of what finished
        for name in args.models.split(","):
            lm = load_model(name, device=args.device, dtype=args.dtype)
            list(next_characters_stream(lm, WARM_UP, k=3, time_budget=5.0))  # the first pass's one-off costs
            if parts & {"genlm", "speed"}:
                for kind, prompt in prompts:
                    runs.append(run_prompt(lm, kind, prompt, args.cap))
                    print(summary(runs[-1]), flush=True)
            if parts & {"genlm", "peer"}:  # the lesson's prompts, shortest first (--parts peer: longest first)
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
                continuations += continuation_rows(lm, [p for kind, p in prompts if kind in LESSON], args.chars,
                                                   3 * args.cap)
    except KeyboardInterrupt:
        print("\n(stopped: the tables hold what finished)", flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the tables are printed whatever comes next
    if runs and "genlm" in parts:
        print("\n## Beside genlm-bytes\n\n" + genlm_summary(runs, args.tol) + "\n\n" + "\n".join(genlm_table(runs, args.tol)))
    if runs:
        print("\n## Speed\n\n" + "\n".join(speed_table(runs, args.tol, args.cap)))
        print("\n## The finding: the token views against the marginal\n\n" + "\n".join(finding(runs)))
    if continuations:
        print(f"\n## Continuation ({args.chars} characters, greedy)\n\n" + "\n".join(CONTINUATION_HEAD + continuations))
    print(f"\n`uptime` at the end: {uptime()}")


if __name__ == "__main__":
    main()
