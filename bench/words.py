"""Word surprisal beside minicons, and what the naive canonical row's gap to the marginal is made
of, per model over the sentences of bench/compare_sentences.txt.

Per sentence: our ``Marginalizer.surprisal(unit="word", space="trailing")`` (the prefix search,
at most --time-budget seconds a text) and minicons 0.3.39's ``IncrementalLMScorer.word_score_tokenized(
bow_correction=True)`` over the whitespace words (bench/peers/minicons_peer.py: its own virtualenv,
the same converted model folder, float32 on the CPU). Two tables:

(a) minicons against our canonical prefix row (``surprisal_canonical_prefix``, Pimentel & Meister's
word probability on the canonical tokenization): words compared, words whose split is ours, the
max and mean |minicons - ours| and how many are within 1e-3 nats; then every word past 1e-3 (or
split otherwise) with its reason. A difference is explained where it equals, within 1e-3, the terms
by which minicons' bow correction and our cut differ: after the last word minicons adds
-log P(next token starts a word | the whole text) where our last region ends at the text's end
(the runner returns that term from minicons' own logits).

(b) the naive canonical row's gap to the marginal, ``surprisal_canonical - surprisal``, split into
the whitespace confound (naive - canonical prefix) and the other tokenizations' part (canonical
prefix - marginal), over every word: mean, mean absolute and the largest of each.
Run: .venv/bin/python -m bench.words [--models gemma3-270m,smollm2-135m] [--limit N]
     [--time-budget SECONDS | none] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.peers.minicons_peer import MiniconsPeer, PeerWords
from bench.surprisal import label, machine
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.lm.adapter import LM
from marginal_core.models import load_model
from marginal_core.search.settings import DEFAULT_TOLERANCE

SENTENCES = Path(__file__).with_name("compare_sentences.txt")
MATCH = 1e-3  # nats: the target for minicons against our canonical prefix row
PARTS = (("naive - marginal", "canonical", "surprisal"),
         ("whitespace confound: naive - canonical prefix", "canonical", "canonical_prefix"),
         ("other tokenizations: canonical prefix - marginal", "canonical_prefix", "surprisal"))


def first_lines(path: Path, limit: int | None) -> list[str]:
    """The file's non-empty lines in file order, the first limit."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:limit]


def offsets(text: str, words: Sequence[str]) -> list[tuple[int, int] | None]:
    """Each word's character span in text, found in order (None: not found after the one before)."""
    spans: list[tuple[int, int] | None] = []
    at = 0
    for word in words:
        start = text.find(word, at) if word else -1
        spans.append(None if start < 0 else (start, start + len(word)))
        at = start + len(word) if start >= 0 else at
    return spans


def cut_terms(peer: PeerWords) -> list[float]:
    """Per word, how far minicons' log probability at the cut after it lies above our canonical
    prefix's: log P(bow | text) after the last word (ours ends there), else 0."""
    last = len(peer.words) - 1
    return [a if i == last else 0.0 for i, a in enumerate(peer.bow_after)]


def reason(peer: PeerWords, i: int, context: list[int], expected: float, residual: float) -> str:
    """Why minicons' word i differs from our canonical prefix row, from what the runner reported."""
    word = peer.words[i]
    if peer.context != context:
        return f"minicons conditions on token ids {peer.context}, ours on {context}"
    if peer.pieces[i] != (" " + word if i else word):
        return f"minicons' token span (the word re-tokenized alone) decodes to {peer.pieces[i]!r}"
    if not peer.bow_correction:
        return "minicons applied no bow correction (its tokenizer has no beginning-of-word symbol)"
    parts = []
    if i == len(peer.words) - 1:
        parts.append(f"last word: minicons adds -log P(bow | whole text) = {-peer.bow_after[i]:.4f}; our last region "
                     "ends at the text's end")
    if abs(residual) > MATCH:
        parts.append(f"unexplained: {residual:+.2e} nats beside the terms' {expected:+.4f}")
    return "; ".join(parts)


def compare(lm: LM, peer: MiniconsPeer, index: int, text: str, time_budget: float | None) -> list[dict]:
    """One row per word of ours, with minicons' value where its word has the same span."""
    m = Marginalizer(lm, text)
    started = time.perf_counter()
    frame = m.surprisal(unit="word", space="trailing", time_budget=time_budget).to_pandas()
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    theirs = peer.words(text)
    peer_s = time.perf_counter() - started
    ours = [t.strip() for t in frame["text"]]
    at = {span: j for j, span in enumerate(offsets(text, theirs.words)) if span is not None}
    terms = cut_terms(theirs)
    rows = []
    for word, span, r in zip(ours, offsets(text, ours), frame.itertuples()):
        row = {"model": lm.name, "sentence": index, "text": text, "word": word, "surprisal": r.surprisal,
               "canonical": r.surprisal_canonical, "canonical_prefix": r.surprisal_canonical_prefix,
               "lower": r.lower, "upper": r.upper, "minicons_word": None, "minicons": None, "diff": None,
               "expected": None, "reason": "", "ours_s": ours_s, "peer_s": peer_s}
        j = at.get(span) if span is not None else None
        if j is None:
            row["reason"] = "minicons' word split differs: no minicons word has this span"
        else:
            diff = theirs.surprisal[j] - r.surprisal_canonical_prefix
            expected = (terms[j - 1] if j else 0.0) - terms[j]
            row |= {"minicons_word": theirs.words[j], "minicons": theirs.surprisal[j], "diff": diff,
                    "expected": expected}
            if abs(diff) > MATCH:
                row["reason"] = reason(theirs, j, list(m.context_ids), expected, diff - expected)
        rows.append(row)
    return rows


def minicons_table(rows: list[dict]) -> str:
    """Table (a): per model, minicons against our canonical prefix row on the words split alike."""
    lines = [f"| model | words | same split | within {MATCH:g} | max abs diff | mean abs diff "
             f"| within {MATCH:g} after the cut terms | max abs residual |", "|" + "---|" * 8]
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        same = [r for r in mine if r["diff"] is not None]
        diff = np.abs([r["diff"] for r in same])
        residual = np.abs([r["diff"] - r["expected"] for r in same])
        lines.append(f"| {model} | {len(mine)} | {len(same)} | {int(np.sum(diff <= MATCH))} | {diff.max():.2e} "
                     f"| {diff.mean():.2e} | {int(np.sum(residual <= MATCH))} | {residual.max():.2e} |")
    return "\n".join(lines)


def differing_table(rows: list[dict]) -> str:
    """Every word past MATCH or split otherwise, with both values and the reason."""
    lines = ["| model | sentence | word | minicons | canonical prefix | diff | cut terms | reason |", "|" + "---|" * 8]
    for r in rows:
        if r["reason"]:
            values = ("-", "-", "-") if r["diff"] is None else (
                f"{r['minicons']:.4f}", f"{r['diff']:+.4f}", f"{r['expected']:+.4f}")
            lines.append(f"| {r['model']} | {r['sentence']} | {r['word']} | {values[0]} | {r['canonical_prefix']:.4f} "
                         f"| {values[1]} | {values[2]} | {r['reason']} |")
    return "\n".join(lines)


def finding_table(rows: list[dict]) -> str:
    """Table (b): per model, the naive row's gap to the marginal and its two parts over every word."""
    lines = ["| model | part | mean | mean abs | largest | word | sentence |", "|" + "---|" * 7]
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        for name, a, b in PARTS:
            gap = np.array([r[a] - r[b] for r in mine])
            k = int(np.argmax(np.abs(gap)))
            lines.append(f"| {model} | {name} | {gap.mean():+.4f} | {np.abs(gap).mean():.4f} | {gap[k]:+.4f} "
                         f"| {mine[k]['word']} | {mine[k]['sentence']}: {label(mine[k]['text'])} |")
    return "\n".join(lines)


def certified_line(model: str, rows: list[dict], time_budget: float | None) -> str:
    """How many of the model's marginal word values the search certified, and the seconds spent."""
    mine = [r for r in rows if r["model"] == model]
    widths = np.array([r["upper"] - r["lower"] for r in mine])
    seconds = {r["sentence"]: (r["ours_s"], r["peer_s"]) for r in mine}  # one entry a sentence
    budget = "none" if time_budget is None else f"{time_budget:g} s a text"
    return (f"{model}: {int(np.sum(widths <= DEFAULT_TOLERANCE))} of {len(mine)} words certified within "
            f"{DEFAULT_TOLERANCE} nats (time budget {budget}; widest {widths.max():.3g}); ours "
            f"{sum(o for o, _ in seconds.values()):.0f} s, minicons {sum(p for _, p in seconds.values()):.1f} s")


def budget(value: str) -> float | None:
    """The --time-budget argument: seconds, or none for the search's own stop."""
    return None if value == "none" else float(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--sentences", type=Path, default=SENTENCES, help="one text a line")
    parser.add_argument("--limit", type=int, help="the first N lines of the file (default: all)")
    parser.add_argument("--time-budget", type=budget, default=60.0,
                        help="seconds of search a text, or none (the canonical prefix row does not depend on it)")
    parser.add_argument("--json", type=Path, help="write the per-word rows here")
    args = parser.parse_args()
    texts = first_lines(args.sentences, args.limit)
    print(f"{machine()}\n", flush=True)
    rows: list[dict] = []
    for model in args.models.split(","):
        lm = load_model(model, device="cpu", dtype="float32")
        with MiniconsPeer(model) as peer:
            for index, text in enumerate(texts, 1):
                rows += compare(lm, peer, index, text, args.time_budget)
                print(f"{model} {index}/{len(texts)} {label(text)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"\n(a) minicons word_score_tokenized(bow_correction=True) against surprisal_canonical_prefix, nats\n\n"
          f"{minicons_table(rows)}\n\n{differing_table(rows)}")
    print(f"\n(b) the naive canonical row's gap to the marginal, nats\n\n{finding_table(rows)}\n")
    for model in dict.fromkeys(r["model"] for r in rows):
        print(certified_line(model, rows, args.time_budget))


if __name__ == "__main__":
    main()
