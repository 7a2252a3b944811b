"""Drill-down tables of the downstream task pages, read from a results folder.

One row per question or sentence (each method's pick), one row per answer or candidate of an
item (each method's scores), and the distinct samples behind one score.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from marginal_core import TASK_METHODS
from marginal_core.tasks.report import complete_items, load_rows, methods_present, mt_selection, per_question, picks
from marginal_core.tasks.store import read_items


def choices_table(rows: pd.DataFrame, item: str) -> pd.DataFrame:
    """One row per answer / candidate of an item: each method's log marginal and per-byte score,
    the non-canonical estimates, distinct samples and seconds; '*' marks each method's pick."""
    part = rows[rows["item"] == item]
    if not len(part):
        return pd.DataFrame()
    text_col = "answer" if "answer" in part else "candidate"
    base = part.drop_duplicates("choice").set_index("choice")[[text_col, "num_bytes", "num_tokens_canonical", "num_paths"]]
    if "gold" in part:
        base.insert(1, "gold", part.drop_duplicates("choice").set_index("choice")["gold"] == base.index)
    best = dict(zip(*(picks(part)[col] for col in ("method", "choice"))))
    for method in [m for m in TASK_METHODS if m in set(part["method"])]:
        m = part[part["method"] == method].set_index("choice")
        base[f"{method} log p"] = m["log_marginal"]
        if method != "canonical":
            base[f"{method} log p non-canon."] = m["log_noncanonical"]
            base[f"{method} distinct"] = m["num_distinct"]
        base[f"{method} s"] = m["seconds"]
        base[f"{method} pick"] = ["*" if c == best[method] else "" for c in base.index]
    return base.reset_index()


# Pixel widths of samples_table's text columns: they wrap (pages/_app/ui/wrapped_tables.py), so a long
# tokenization is read whole, not cut at the column's edge.
SAMPLE_TEXT_WIDTHS = {"tokenization": 420, "ids": 240}


def samples_table(record: dict[str, Any] | None, vocab: Any = None) -> pd.DataFrame:
    """The distinct samples of one stored (item, choice, method) record, most probable first,
    with their tokens shown as pieces where a Vocabulary is given."""
    if not record:
        return pd.DataFrame()
    frame = pd.DataFrame({
        "kind": record["kinds"],
        "tokens": [len(ids) for ids in record["ids"]],
        "log p": [np.nan if x is None else x for x in record["log_p"]],
        "log q": [np.nan if x is None else x for x in (record["log_q"] or [None] * len(record["ids"]))],
        "draws": record["draws"],
        "ids": [" ".join(map(str, ids)) for ids in record["ids"]],
    })
    if vocab is not None:
        def pieces(ids: list[int]) -> str:
            return " | ".join(vocab.surface(i).decode("utf-8", errors="replace") for i in ids)
        frame.insert(1, "tokenization", [pieces(ids) for ids in record["ids"]])
    if record["log_q"] is None:
        frame = frame.drop(columns=["log q"])
    return frame.sort_values("log p", ascending=False).reset_index(drop=True)


def mt_sentences_table(out: str | Path, sentences: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per scored sentence: source, reference, and each method's pick with its chrF."""
    import sacrebleu

    rows, meta = load_rows(out), read_items(out)
    methods = methods_present(rows, None)
    items = [i for i in complete_items(rows, methods, sentences) if i in meta]
    table = []
    for item in items:
        rec = meta[item]
        entry = {"item": item, "source": rec["source"], "reference": rec["reference"],
                 "candidates": len(rec["candidates"])}
        for m in methods:
            pick = mt_selection(rows, [item], m)[item]
            hyp = rec["candidates"][pick]
            entry[f"{m} pick"] = hyp
            entry[f"{m} chrF"] = sacrebleu.sentence_chrf(hyp, [rec["reference"]]).score
        table.append(entry)
    return pd.DataFrame(table)


def qa_questions_table(out: str | Path, questions: Sequence[Any] | None = None) -> pd.DataFrame:
    """One row per scored question: its text, gold answer and each method's pick (acc and
    acc_norm) with correctness. ``questions`` are qa.Question objects (for their text)."""
    rows = load_rows(out)
    methods = methods_present(rows, None)
    ids = None if questions is None else [q.id for q in questions]
    items = complete_items(rows, methods, ids)
    picks = per_question(rows[rows["item"].isin(set(items))])
    text = {q.id: q.question for q in questions} if questions is not None else {}
    table = []
    for item in items:
        part = rows[rows["item"] == item].drop_duplicates("choice").sort_values("choice")
        gold = int(part["gold"].iloc[0])
        entry = {"item": item, "question": text.get(item, ""),
                 "gold": part.loc[part["choice"] == gold, "answer"].iloc[0]}
        for m in methods:
            p = picks[(picks["item"] == item) & (picks["method"] == m)].iloc[0]
            entry[f"{m} pick"] = part.loc[part["choice"] == p["pick"], "answer"].iloc[0]
            entry[f"{m} ✓"] = bool(p["correct"])
            entry[f"{m} ✓ norm"] = bool(p["correct_norm"])
        table.append(entry)
    return pd.DataFrame(table)
