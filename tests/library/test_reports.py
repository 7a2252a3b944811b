"""Reports that render: every markdown table of every report kind, with every set of methods, has
a header, a rule and rows of one width; the time table lists every method run; the changed picks
are listed."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from marginal_core.estimators.methods import TASK_METHODS
from marginal_core.tasks import markdown
from marginal_core.tasks.mt import MTTask
from marginal_core.tasks.qa import QATask
from marginal_core.tasks.report import mt_report, qa_report
from marginal_core.tasks.store import ResultStore
from marginal_core.tasks.task import SCORE_COLUMNS

METHOD_SETS = [s for n in range(1, len(TASK_METHODS) + 1) for s in itertools.combinations(TASK_METHODS, n)]

# Per method, the log marginal of choices 0 and 1 of item "a" (the lattice and beam prefer 1)
# and of item "b" (every method prefers 0).
SCORES = {"canonical": ((-10.0, -11.0), (-5.0, -9.0)), "lattice": ((-9.8, -9.0), (-4.9, -8.0)),
          "proxy": ((-9.9, -10.5), (-4.95, -8.5)), "beam": ((-9.7, -8.9), (-4.8, -7.9))}


def table_widths(md: str) -> list[tuple[int, ...]]:
    """The cell count of every line of every markdown table in md, one tuple per table."""
    tables, current = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            current.append(len(re.split(r"(?<!\\)\|", line.strip())) - 2)
        elif current:
            tables.append(tuple(current))
            current = []
    return tables


def hand_made_folder(tmp_path, task, methods, extra):
    """A results folder of two items, two choices each, with SCORES for the given methods."""
    store = ResultStore(tmp_path, {"task": task.name, "dataset": "hand-made", "model": "m", "samples": 4},
                        [*task.columns, *SCORE_COLUMNS])
    for item, idx in (("a", 0), ("b", 1)):
        store.append([{"item": item, "choice": c, "method": m, "log_marginal": SCORES[m][idx][c],
                       "log_p_canonical": SCORES["canonical"][idx][c], "log_noncanonical": -12.0,
                       "num_samples": 4, "num_distinct": 3, "seconds": 0.5, "forward_passes": 1,
                       "num_bytes": 5, **extra(item, c)} for m in methods for c in (0, 1)])
    return tmp_path


@pytest.mark.parametrize("methods", METHOD_SETS, ids="+".join)
def test_qa_and_mt_reports_render(methods, tmp_path):
    qa = qa_report(hand_made_folder(tmp_path / "qa", QATask("x"), methods,
                           lambda item, c: {"question_index": 0, "gold": 0, "answer": f"answer {c}"}))
    (tmp_path / "mt").mkdir()
    (tmp_path / "mt" / "items.jsonl").write_text("".join(
        json.dumps({"item": i, "source": "Hi.", "reference": "Hallo.", "candidates": ["Hallo.", "Hi."]}) + "\n"
        for i in ("a", "b")))
    mt = mt_report(hand_made_folder(tmp_path / "mt", MTTask("x", 2, "German", comet=False), methods,
                           lambda item, c: {"sentence_index": 0, "candidate": "Hallo."}), comet=False)
    for report in (qa, mt):
        widths = table_widths(report["markdown"])
        assert widths and all(len(set(w)) == 1 for w in widths), report["markdown"]
        time_table = report["markdown"].split("### Time (seconds)")[1]
        assert all(f"{m} s" in time_table for m in methods)
        changed = [c["item"] for c in report["changed_picks"]]
        assert changed == (["a"] if {"canonical", "proxy"} & set(methods) and {"lattice", "beam"} & set(methods)
                           else [])
    if qa["changed_picks"]:
        first = qa["changed_picks"][0]
        assert first["gold"] == 0 and first["picks"].get("lattice", first["picks"].get("beam")) == 1
        assert "whose pick differs by method: 1" in qa["markdown"]


def test_markdown_table_refuses_ragged_rows():
    assert markdown.table(["a", "n"], [["x", "1.5"], ["y", "-"]])[1] == "|---|---:|"
    with pytest.raises(ValueError, match="3 cells, its header 2"):
        markdown.table(["a", "n"], [["x", "1", "2"]])
    assert markdown.table(["a|b"], [["c|d"]])[0] == "| a\\|b |"
