"""The Results folders page on an eval-qa folder (the questions whose pick differs by method), on
a scan of two and of three models (their comparison), on a folder that is no results folder, and
on a class server (only the app's own folders)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from bench.support.apptest import app
from marginal_core.tasks.qa import QATask
from tests.library.test_reports import hand_made_folder
from tests.library.test_scan_compare import constructed_table

pytestmark = pytest.mark.models  # the sidebar loads the default model (all but one test)


def test_qa_folder_lists_changed_picks_with_links(tmp_path):
    folder = hand_made_folder(tmp_path / "qa", QATask("x"), ("canonical", "lattice"),
                     lambda item, c: {"question_index": 0, "gold": 0, "answer": f"answer {c}"})
    at = app("pages/tasks/results.py", folder=str(folder))
    assert not at.exception and not at.error
    assert [s.value for s in at.subheader] == ["1 questions whose pick differs by method"]
    row = at.dataframe[0].value.iloc[0]
    assert (row["item"], row["gold"], row["canonical"], row["lattice"]) == ("a", "answer 0", "answer 0 (+1.00)",
                                                                          "answer 1 (+0.80)")
    assert row["lattice: mass flow"].startswith("lattice?model=m&text=+answer+1")


def test_not_a_results_folder_is_one_message(tmp_path):
    at = app("pages/tasks/results.py", folder=str(tmp_path))
    assert not at.exception
    assert "is not a results folder" in at.error[0].value


def test_class_server_offers_only_its_own_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("MARGINAL_SERVE", "class")
    monkeypatch.setenv("MARGINAL_CACHE", str(tmp_path))
    at = app("pages/tasks/results.py", folder="/etc")
    assert not at.exception and not at.error and not at.text_input
    assert "No results here yet" in at.info[0].value


def scan_folder(path, table: pd.DataFrame):
    """A scan folder as `marginal scan` exports it, holding the given tidy table."""
    path.mkdir()
    (path / "scan.json").write_text(json.dumps({"task": "scan", "dataset": "x.txt",
                                                "models": {m: m for m in dict.fromkeys(table["model"])}}))
    table.assign(share_off_canonical=-(-table["gain_nats"]).map(math.expm1), top_tokenization="x").to_parquet(
        path / "scan.parquet")
    return path


def test_two_model_scan_compares_them(tmp_path):
    """The constructed corpus of test_scan_compare: rho -0.339 by hand, t1 and t3 flip."""
    at = app("pages/tasks/results.py", folder=str(scan_folder(tmp_path / "scan", constructed_table())))
    assert not at.exception and not at.error
    assert [s.value for s in at.subheader] == ["7 texts, largest gain first", "Compare models"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Spearman's ρ of the gains": "-0.339", "Texts that flip": "2 of 6",
                       "Difference moved ≥ 0.1 nats": "5 of 6"}
    flips = at.dataframe[1].value
    assert list(flips["text"]) == ["text t1", "text t3"]
    assert list(flips["marginal, A − B"]) == [0.5, 0.5] and list(flips["canonical, A − B"]) == [-0.5, -1.0]
    assert flips["compare"].iloc[0] == "compare?model=A&text=text+t1&context=&model_b=B"
    assert list(at.dataframe[2].value["text"])[:2] == ["text t4", "text t6"]  # by |log p(text) difference|
    assert len(at.get("plotly_chart")) == 2
    csv = at.get("download_button")[0].proto
    assert csv.label == "Download the paired table (CSV)"
    at.radio(key="differ_by").set_value("gain").run()
    assert not at.exception and at.dataframe[2].value["text"].iloc[0] == "text t3"


def test_three_model_scan_compares_the_chosen_pair(tmp_path):
    table = constructed_table()
    table = pd.concat([table, table[table["model"] == "A"].assign(model="C")], ignore_index=True)
    at = app("pages/tasks/results.py", folder=str(scan_folder(tmp_path / "scan", table)))
    assert not at.exception and not at.error
    assert at.selectbox(key="scan_a").value == "A" and at.selectbox(key="scan_b").value == "B"
    assert {m.label: m.value for m in at.metric}["Texts that flip"] == "2 of 6"
    at.selectbox(key="scan_b").set_value("C").run()  # C is A again: no text flips, the gains agree
    metrics = {m.label: m.value for m in at.metric}
    assert not at.exception and metrics["Texts that flip"] == "0 of 7" and metrics["Spearman's ρ of the gains"] == "1.000"
    assert "on none of these texts" in at.success[0].value


def test_scan_with_surprisal_lists_the_regions_that_differ_most(tmp_path):
    """surprisal.csv of 12 regions: the 10 whose marginal and canonical surprisal differ most, largest first."""
    folder = scan_folder(tmp_path / "scan", constructed_table())
    index = json.loads((folder / "scan.json").read_text())
    (folder / "scan.json").write_text(json.dumps({**index, "surprisal": {"unit": "word", "space": "leading"}}))
    gaps = [0.5, -3.0, 1.0, 0.0, 2.0, -0.25, 0.75, 1.5, -2.5, 0.1, 0.2, 4.0]
    pd.DataFrame({"text_id": "t1", "model": "A", "index": range(12), "start_byte": range(12),
                  "end_byte": range(1, 13), "region": [f"w{i} " for i in range(12)], "surprisal": 5.0,
                  "surprisal_canonical": [5.0 - g for g in gaps], "lower": 5.0, "upper": 5.0}).to_csv(
        folder / "surprisal.csv", index=False)
    at = app("pages/tasks/results.py", folder=str(folder))
    assert not at.exception and not at.error
    assert "Where marginal and canonical surprisal differ most" in [s.value for s in at.subheader]
    shown = at.dataframe[1].value
    assert list(shown.columns) == ["text id", "model", "region", "marginal (nats)", "canonical (nats)",
                                   "marginal − canonical", "surprisal"]
    assert shown["marginal − canonical"].tolist() == [4.0, -3.0, -2.5, 2.0, 1.5, 1.0, 0.75, 0.5, -0.25, 0.2]
    assert shown["region"].iloc[0] == "w11␣" and shown["text id"].iloc[0] == "t1"
    assert shown["surprisal"].iloc[0] == "surprisal?model=A&text=text+t1&context=&unit=word&space=leading"
