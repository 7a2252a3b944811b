"""bench.next_chars' tables: beside genlm-bytes, the speed, the finding and the continuation."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from bench.next_chars.measures import (
    by_first_byte,
    certified_at,
    char_cell,
    char_verdict,
    compared_rows,
    differs,
    fmt,
    healing_wrong,
    settled_at,
    shown,
    top_bytes,
    verdict,
    whole_settled_at,
    width_at,
)
from bench.next_chars.runs import LESSON, TOP, Run
from marginal_core.api.calls import continue_text
from marginal_core.lm.adapter import LM

# (kind, prompt): the lesson's kinds, then sentences of bench/compare_sentences.txt cut mid-word
# or after a space

def summary(run: Run) -> str:
    """A progress line: the prompt, our seconds and top characters, genlm's seconds."""
    last = run.final
    return (f"{run.model} {run.prompt!r}: {last.seconds:.1f} s, done {last.done}, "
            + " ".join(f"{x.character!r}:{x.probability:.3f}" for x in last.rows[:TOP])
            + (f"; genlm {run.peer.seconds:.2f} s" if run.peer else ""))


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
    lines = [f"| model | prompt | bytes | first result s | values within {tol} s | top-5 whole characters within "
             f"{tol} s | certified s | widest top-5 at 1 s | at 10 s | last: s, rounds, scored, done | genlm s "
             f"| genlm / ours (values) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        size = len(run.prompt.encode("utf-8"))
        settled, certified = settled_at(run.results, tol), certified_at(run.results, tol)
        last = run.final
        genlm = run.peer.seconds if run.peer is not None else None
        ratio = genlm / settled if genlm is not None and settled else None
        lines.append(f"| {run.model} | {shown(run.prompt)} | {size} | {run.results[0].seconds:.2f} | {fmt(settled)} | "
                     f"{fmt(whole_settled_at(run.results, tol))} | "
                     f"{fmt(certified) if certified is not None else f'not in {cap:.0f} s'} | "
                     f"{fmt(width_at(run.results, 1.0), 3)} | {fmt(width_at(run.results, 10.0), 3)} | "
                     f"{last.seconds:.1f}, {last.rounds}, {last.scored}, {'yes' if last.done else 'no'} | "
                     f"{fmt(genlm)} | {fmt(ratio, 1)}x |")
    return lines


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
             "healing wrong | top undetermined: canonical, healed |", "|---|---|---|---|---|---|---|"]
    wrong = []
    for model in dict.fromkeys(r.model for r in runs):
        for name, chosen in groups([r for r in runs if r.model == model]):
            if not chosen:
                continue
            tv_c = np.mean([r.final.total_variation["canonical"] for r in chosen])
            tv_h = np.mean([r.final.total_variation["healed"] for r in chosen])
            wrong_c = sum(differs(r.canonical_top, r) is True for r in chosen)
            open_c, open_h = (sum(differs(getattr(r, view), r) is None for r in chosen)
                              for view in ("canonical_top", "healed_top"))
            lines.append(f"| {model} | {name} ({len(chosen)}) | {tv_c:.3f} | {tv_h:.3f} | {wrong_c} | "
                         f"{sum(map(healing_wrong, chosen))} | {open_c}, {open_h} |")
        wrong += [r for r in runs if r.model == model and healing_wrong(r)]
    lines += ["", "The total variation is over the next byte: where the characters a view and the marginal favour "
              "share their first byte (Thai's and Devanagari's characters all begin with 0xE0), it is near 0 while "
              "their top characters differ; the per-prompt table gives each view's probability of the marginal's "
              "top character. A view's top is undetermined where it is the tokens that stop inside a character "
              "(shown as their bytes, e8…) and the marginal's top does not begin with them.", "",
              "Healing wrong (its top is not the marginal's, or its TV passes 0.1):", ""]
    lines += [f"- {r.model} {r.kind} {r.prompt!r}: marginal {char_cell(r.final.rows[0].bytes) if r.final.rows else '—'}"
              f", healed {char_cell(r.healed_top)}, TV healed {r.final.total_variation['healed']:.3f}" for r in wrong]
    lines += ["", "Per prompt (healing wrong marked **):", "",
              "| model | kind | prompt | marginal top (p) | canonical top | healed top | canonical, healed P(marginal's "
              "top) | TV canonical | TV healed | rows' sum |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        top = r.final.rows[0] if r.final.rows else None
        mark = "**" if healing_wrong(r) else ""
        lines.append(f"| {r.model} | {r.kind} | {mark}{shown(r.prompt)}{mark} | "
                     f"{char_cell(top.bytes) if top else '—'} ({top.probability if top else 0:.3f}) | "
                     f"{char_cell(r.canonical_top)} | {char_cell(r.healed_top)} | "
                     f"{f'{top.canonical:.3f}, {top.healed:.3f}' if top else '—'} | "
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
