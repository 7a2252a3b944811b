"""The Results folders page on an eval-qa folder (the questions whose pick differs by method), on
a folder that is no results folder, and on a class server (only the app's own folders)."""

from __future__ import annotations

from marginal_core.tasks.qa import QATask
from tests.apptest import app
from tests.test_reports import hand_made_folder


def test_qa_folder_lists_changed_picks_with_links(tmp_path):
    folder = hand_made_folder(tmp_path / "qa", QATask("x"), ("canonical", "lattice"),
                     lambda item, c: {"question_index": 0, "gold": 0, "answer": f"answer {c}"})
    at = app("pages/results.py", folder=str(folder))
    assert not at.exception and not at.error
    assert [s.value for s in at.subheader] == ["1 questions whose pick differs by method"]
    row = at.dataframe[0].value.iloc[0]
    assert (row["item"], row["gold"], row["canonical"], row["lattice"]) == ("a", "answer 0", "answer 0 (+1.00)",
                                                                          "answer 1 (+0.80)")
    assert row["lattice: mass flow"].startswith("lattice?model=m&text=+answer+1")


def test_not_a_results_folder_is_one_message(tmp_path):
    at = app("pages/results.py", folder=str(tmp_path))
    assert not at.exception
    assert "is not a results folder" in at.error[0].value


def test_class_server_offers_only_its_own_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("MARGINAL_SERVE", "class")
    monkeypatch.setenv("MARGINAL_CACHE", str(tmp_path))
    at = app("pages/results.py", folder="/etc")
    assert not at.exception and not at.error and not at.text_input
    assert "No results here yet" in at.info[0].value
