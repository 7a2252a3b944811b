"""The app's downstream-task pages, headless (AppTest): Q&A and Translation, their links, captions
and a Q&A run shared with another session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.support.apptest import app
from tests.app_support import SMOL, assert_clean, click

pytestmark = pytest.mark.models  # every page opens with the sidebar's model loading


# --------------------------------------------------------------------------------------------
# Downstream tasks


@pytest.fixture
def task_folders(tmp_path, monkeypatch):
    """The task pages keep their results folders under a temporary root (not the user's cache)."""
    from pages._app.ui import tasks

    monkeypatch.setattr(tasks, "cache_root", lambda: tmp_path)
    return tmp_path


def test_qa_page_is_honest_about_time_and_a_link_keeps_the_chosen_item(task_folders):
    """Issue 13 items 5b, 5h, 5j: the caption promised seconds where a question takes minutes;
    the chosen question, answer and method were not in the URL; tokenizations were cut."""
    import json

    from marginal_core.tasks import qa

    url = dict(model=SMOL, qa_limit="2", qa_k="3", qa_methods=["canonical", "lattice"])
    at = app("pages/tasks/qa.py", **url)
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "questions ×" in c.value]
    assert "expect minutes per question on a CPU" in note and "seconds" not in note, note
    click(at, "qa_run")
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "questions ×" in c.value]
    assert "every question is scored" in note, note
    samples = at.dataframe[-1]
    more = app("pages/tasks/qa.py", **{**url, "qa_limit": "3"})
    (note,) = [c.value for c in more.caption if "questions ×" in c.value]
    assert re.search(r"earlier runs here took \d+ (s|min) per question, so the 1 left take about \d", note), note
    assert json.loads(samples.proto.columns)["tokenization"]["width"] > 0  # wrapped, not cut
    # A link that names the second question, its second answer and the lattice samples shows them.
    second = qa.load_questions(at.selectbox(key="qa_dataset").value, 2)[1]
    at = app("pages/tasks/qa.py", **url, qa_pick=at.selectbox(key="qa_pick").options[1], qa_answer=second.choices[1],
             qa_sample_method="lattice")
    assert_clean(at)
    assert at.selectbox(key="qa_pick").value.id == second.id
    assert at.selectbox(key="qa_answer").value == 1 and at.selectbox(key="qa_sample_method").value == "lattice"
    assert second.question in "".join(m.value for m in at.markdown)
    # the answer's index works too (issue 25: qa_answer=3 was ignored)
    at = app("pages/tasks/qa.py", **url, qa_pick=at.selectbox(key="qa_pick").options[1], qa_answer="1")
    assert_clean(at)
    assert at.selectbox(key="qa_answer").value == 1


def test_a_qa_run_that_another_session_is_writing_is_followed_not_repeated(task_folders, monkeypatch):
    """A class pressing Run on the same Q&A setup: while another run holds the results folder,
    the page's bar follows it (no error), then the page scores what that run left, once."""
    import json
    import threading

    from marginal_core.tasks.writer import RunLock
    from pages._app.runtime import live

    at = app("pages/tasks/qa.py", model=SMOL, qa_limit="1", qa_k="2", qa_methods=["canonical"])
    note = next(c.value for c in at.caption if "results in `" in c.value)
    folder = Path(note.split("results in `")[1].rstrip("`"))
    held, free, shown = threading.Event(), threading.Event(), []
    update = live.Bar.update

    def spy(bar, fraction: float, message: str) -> None:  # what the bar says, read while it waits
        shown.append(message)
        if message.startswith("Another session is running these questions now"):
            free.set()  # the other run ends once this page has shown that it follows it
        update(bar, fraction, message)

    monkeypatch.setattr(live.Bar, "update", spy)

    def other_session() -> None:
        with RunLock.take(folder):
            held.set()
            free.wait(timeout=120)

    other = threading.Thread(target=other_session)
    other.start()
    held.wait(timeout=10)
    click(at, "qa_run")
    other.join()
    assert_clean(at)
    assert "Another session is running these questions now: 0 of 1 done" in shown[0], shown
    sessions = [json.loads(line) for line in (folder / "sessions.jsonl").read_text().splitlines()]
    assert [s["items_done"] for s in sessions] == [1]  # this page scored what the other left


def test_translation_page_is_honest_about_time_and_a_link_keeps_the_chosen_item(task_folders):
    """Issue 13 items 5h and 5j on the translation page: the chosen sentence, candidate and
    method go into the URL; the caption gives minutes, then the time measured here."""
    url = dict(model=SMOL, mt_limit="2", mt_candidates="2", mt_k="3", mt_methods=["canonical", "lattice"])
    at = app("pages/tasks/translation.py", **url)
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "sentences ×" in c.value]
    assert "expect minutes per sentence on a CPU" in note, note
    click(at, "mt_run")
    assert_clean(at)
    more = app("pages/tasks/translation.py", **{**url, "mt_limit": "3"})
    (note,) = [c.value for c in more.caption if "sentences ×" in c.value]
    assert re.search(r"earlier runs here took \d+ (s|min) per sentence, so the 1 left take about \d", note), note
    second = at.selectbox(key="mt_pick").options[1]  # as the URL holds it
    at = app("pages/tasks/translation.py", **url, mt_pick=second, mt_sample_method="lattice")
    assert_clean(at)
    assert at.selectbox(key="mt_pick").value.index == 1
    cands = at.selectbox(key="mt_cand").options
    at = app("pages/tasks/translation.py", **url, mt_pick=second, mt_cand=cands[1], mt_sample_method="lattice")
    assert at.selectbox(key="mt_cand").value == 1 and at.selectbox(key="mt_sample_method").value == "lattice"
