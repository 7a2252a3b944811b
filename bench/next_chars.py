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
import json
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.peers.genlm_peer import GenlmPeer, PeerNext
from bench.support.scripts import script_prompts
from bench.surprisal import machine
from marginal_core.api.calls import continue_text
from marginal_core.estimators.next_chars import END, NextChar, NextCharacters, healed_masses, key_groups, key_masses
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
    peer_chars: dict[bytes, float] | None = None  # genlm's log P(character | prompt), whole characters

    @property
    def final(self) -> NextCharacters:
        return self.results[-1]


def shown(prompt: str) -> str:
    """A prompt in a table cell: quoted, its whitespace visible (␣, ↵), pipes escaped."""
    return "`" + show_piece(prompt).replace("|", "\\|").replace("`", "'") + "`"


def char_cell(b: bytes) -> str:
    """A next character (its bytes) in a table cell; bytes that are no whole character as hex (``e5…``)."""
    if not b:
        return END
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        return "`" + b.hex() + "…`"
    return "`" + show_piece(text).replace("|", "\\|").replace("`", "'") + "`"


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


def run_prompt(lm: LM, kind: str, prompt: str, cap: float, k: int = 10) -> Run:
    """The stream over one prompt (capped; its last result is ``next_characters(prompt, lm, k=k)``'s)
    and its token views' tops."""
    results = list(next_characters_stream(lm, prompt, k=k, time_budget=cap))
    canonical_top, healed_top = view_tops(lm, prompt)
    return Run(kind, prompt, lm.name, results, canonical_top, healed_top, None)


class PeerCache:
    """genlm's next bytes by (model, prompt, K), kept in a JSON-lines file that several bench
    processes share (one may run genlm on the long prompts while another runs ours), the peer
    started only when a prompt is missing."""

    def __init__(self, path: Path | None, lm: LM, width: int) -> None:
        self.path, self.lm, self.width = path, lm, width
        self.peer: GenlmPeer | None = None

    def lines(self) -> list[dict]:
        """The file's lines for this model and width."""
        if self.path is None or not self.path.exists():
            return []
        lines = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [x for x in lines if x["model"] == self.lm.name and x["width"] == self.width]

    def found(self) -> dict[str, PeerNext]:
        """The file's next-byte results for this model and width, by prompt."""
        return {x["prompt"]: PeerNext(x["width"], x["seconds"], np.array(x["p"]), x["states"])
                for x in self.lines() if "p" in x}

    def _peer(self) -> GenlmPeer:
        if self.peer is None:
            self.peer = GenlmPeer(self.lm.name, self.lm.text_tokenizer)
        return self.peer

    def chars(self, prompt: str, chars: Sequence[bytes]) -> dict[bytes, float]:
        """genlm's log P(c | prompt) for each character c (its bytes): from the file, else run (the
        missing ones, kept in the file); byte pieces reachable where the prompt or c needs them."""
        known: dict[bytes, float] = {}
        for x in self.lines():
            if x.get("prompt") == prompt and "chars" in x:
                known |= {bytes.fromhex(c): float(v) for c, v in x["chars"].items()}
        missing = [c for c in dict.fromkeys(chars) if c not in known]
        if missing:
            tok = self.lm.text_tokenizer
            pieces = {t for t in lattice_of(prompt, tok).vocab.byte_tokens if t is not None}
            needed = {int(t) for c in missing for t in lattice_of(prompt + c.decode("utf-8"), tok).arc_token} & pieces
            out = self._peer().next_chars(lattice_of(prompt, tok), context_ids(tok, None), self.width, missing,
                                          sorted(needed))
            known |= out.log_p
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"model": self.lm.name, "prompt": prompt, "width": out.width,
                                        "seconds": out.seconds, "states": out.states,
                                        "chars": {c.hex(): v for c, v in out.log_p.items()}}) + "\n")
        return {c: known[c] for c in chars}

    def next_byte(self, prompt: str) -> PeerNext:
        """genlm's next byte after the prompt: from the file, else run (and kept in the file)."""
        if prompt in (known := self.found()):
            return known[prompt]
        tok = self.lm.text_tokenizer
        out = self._peer().next_byte(lattice_of(prompt, tok), context_ids(tok, None), self.width)
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


def whole_character(b: bytes) -> bool:
    """Whether bytes are one whole UTF-8 character (not "end", not a lead byte's range)."""
    try:
        return len(b.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


def compared_rows(run: Run, k: int = TOP) -> tuple[list[NextChar], int, int]:
    """Among the run's top k rows: those that are whole characters, how many are "end", and how
    many are neither (a lead byte's range or bytes that are no character: skipped)."""
    rows = run.final.rows[:k]
    whole = [r for r in rows if whole_character(r.bytes)]
    ends = sum(not r.bytes for r in rows)
    return whole, ends, len(rows) - len(whole) - ends


def char_verdict(row: NextChar, theirs: float, tol: float, agree: float) -> str:
    """"yes"/"no" where our interval is within tol wide (agreement within ``agree``), else "open"."""
    if row.upper - row.lower > tol:
        return "open"
    return "yes" if abs(row.probability - theirs) <= agree else "no"


def chars_table(runs: Sequence[Run], tol: float, agree: float) -> list[str]:
    """Per model, prompt and whole character among our top 5: ours, our interval, genlm's log
    P(prompt + c) − log P(prompt) as a probability, the difference and the verdict."""
    lines = [f"| model | script | prompt | character | ours | [lower, upper] | status | genlm | |diff| | "
             f"agree (within {agree} where interval ≤ {tol}) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        if run.peer_chars is None:
            continue
        whole, _, _ = compared_rows(run)
        for r in whole:
            theirs = float(np.exp(run.peer_chars[r.bytes]))
            lines.append(f"| {run.model} | {run.kind} | {shown(run.prompt)} | {char_cell(r.bytes)} | "
                         f"{r.probability:.4f} | [{r.lower:.4f}, {r.upper:.4f}] | {getattr(r, 'status', '—')} | "
                         f"{theirs:.4f} | "
                         f"{abs(r.probability - theirs):.4f} | {char_verdict(r, theirs, tol, agree)} |")
    return lines


def chars_summary(runs: Sequence[Run], tol: float, agree: float) -> list[str]:
    """Per model: the whole characters compared, those with our interval within tol, how many
    agree, the rows skipped (ranges) and "end" rows; the prompts (and their scripts) where every
    checked character agrees, and the disagreements."""
    lines = [f"| model | prompts | top-5 rows | whole characters | end rows | skipped (not a whole character) | "
             f"interval ≤ {tol} | agree within {agree} | disagree | prompts all checked agree (scripts) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for model in dict.fromkeys(r.model for r in runs if r.peer_chars is not None):
        chosen = [r for r in runs if r.model == model and r.peer_chars is not None]
        rows = ends = skipped = whole_n = checked = agreed = 0
        good: list[Run] = []
        for run in chosen:
            whole, e, sk = compared_rows(run)
            rows, ends, skipped, whole_n = rows + len(run.final.rows[:TOP]), ends + e, skipped + sk, whole_n + len(whole)
            verdicts = [char_verdict(r, float(np.exp(run.peer_chars[r.bytes])), tol, agree) for r in whole]
            c = [v for v in verdicts if v != "open"]
            checked, agreed = checked + len(c), agreed + c.count("yes")
            if c and all(v == "yes" for v in c):
                good.append(run)
            for r, v in zip(whole, verdicts):
                if v == "no":
                    notes.append(f"- {model} {run.kind} {run.prompt!r} {r.character!r}: ours {r.probability:.4f} "
                                 f"[{r.lower:.4f}, {r.upper:.4f}], genlm {np.exp(run.peer_chars[r.bytes]):.4f}")
        scripts = sorted({r.kind for r in good})
        lines.append(f"| {model} | {len(chosen)} | {rows} | {whole_n} | {ends} | {skipped} | {checked} | {agreed} | "
                     f"{checked - agreed} | {len(good)} ({len(scripts)}: {', '.join(scripts)}) |")
    return lines + ([f"\nDisagreements (|diff| > {agree} with our interval within {tol}):", *notes] if notes else [])


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


def differs(view_top: bytes, run: Run) -> bool:
    """Whether a view's most probable next character is not the marginal's: where either is only the
    first bytes of a character (the marginal's a lead byte's range, the view's a token that stops
    inside the character), whether the other does not begin with them."""
    top = run.final.rows[0].bytes if run.final.rows else b""
    if top and not whole_character(top) and len(top) < len(view_top):
        return not view_top.startswith(top)
    if view_top and not whole_character(view_top) and len(view_top) < len(top):  # a token that stops inside it
        return not top.startswith(view_top)
    return view_top != top


def healing_wrong(run: Run) -> bool:
    """Token healing's most probable next character is not the marginal's, or its total variation passes 0.1."""
    return differs(run.healed_top, run) or run.final.total_variation["healed"] > 0.1


def lesson_groups(runs: Sequence[Run]) -> list[tuple[str, list[Run]]]:
    """The lesson's prompts, the bench's, all."""
    return [("lesson's", [r for r in runs if r.kind in LESSON]), ("bench's", [r for r in runs if r.kind not in LESSON]),
            ("all", list(runs))]


def script_groups(runs: Sequence[Run]) -> list[tuple[str, list[Run]]]:
    """Each script (the prompt's kind), then all."""
    return [(k, [r for r in runs if r.kind == k]) for k in dict.fromkeys(r.kind for r in runs)] + [("all", list(runs))]


def finding(runs: Sequence[Run], groups: Callable[[Sequence[Run]], list[tuple[str, list[Run]]]] = lesson_groups
            ) -> list[str]:
    """Mean total variation of each view from the marginal per model and group of prompts (the
    lesson's, the bench's, all; or each script, all), and healing's failures."""
    lines = ["| model | prompts | TV canonical (mean) | TV healed (mean) | canonical top ≠ marginal's | "
             "healing wrong |", "|---|---|---|---|---|---|"]
    wrong = []
    for model in dict.fromkeys(r.model for r in runs):
        for name, chosen in groups([r for r in runs if r.model == model]):
            if not chosen:
                continue
            tv_c = np.mean([r.final.total_variation["canonical"] for r in chosen])
            tv_h = np.mean([r.final.total_variation["healed"] for r in chosen])
            wrong_c = sum(differs(r.canonical_top, r) for r in chosen)
            lines.append(f"| {model} | {name} ({len(chosen)}) | {tv_c:.3f} | {tv_h:.3f} | {wrong_c} | "
                         f"{sum(map(healing_wrong, chosen))} |")
        wrong += [r for r in runs if r.model == model and healing_wrong(r)]
    lines += ["", "Healing wrong (its top is not the marginal's, or its TV passes 0.1):", ""]
    lines += [f"- {r.model} {r.kind} {r.prompt!r}: marginal {char_cell(r.final.rows[0].bytes) if r.final.rows else '—'}"
              f", healed {char_cell(r.healed_top)}, TV healed {r.final.total_variation['healed']:.3f}" for r in wrong]
    lines += ["", "Per prompt (healing wrong marked **):", "",
              "| model | kind | prompt | marginal top (p) | canonical top | healed top | TV canonical | TV healed "
              "| rows' sum |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        top = r.final.rows[0] if r.final.rows else None
        mark = "**" if healing_wrong(r) else ""
        lines.append(f"| {r.model} | {r.kind} | {mark}{shown(r.prompt)}{mark} | "
                     f"{char_cell(top.bytes) if top else '—'} ({top.probability if top else 0:.3f}) | "
                     f"{char_cell(r.canonical_top)} | {char_cell(r.healed_top)} | "
                     f"{r.final.total_variation['canonical']:.3f} | {r.final.total_variation['healed']:.3f} | "
                     f"{sum(x.probability for x in r.final.rows):.3f} |")
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


def chosen_prompts(which: str) -> list[tuple[str, str]]:
    """The (kind, prompt) pairs: the lesson's and the bench's (lesson), bench/next_scripts.tsv's
    (scripts, the kind a script), or a file of the same form."""
    if which == "lesson":
        return PROMPTS
    return script_prompts() if which == "scripts" else script_prompts(Path(which))


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
