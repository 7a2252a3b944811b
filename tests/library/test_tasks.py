"""Downstream experiments: data loaders on the real packaged files, Q&A and translation end to
end with the embedded models (small k), resuming, and the report's arithmetic."""

from __future__ import annotations

import argparse
import gzip
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from marginal_core.cli.task_commands import add_commands
from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.vocab import vocabulary
from marginal_core.tasks import mt, qa
from marginal_core.tasks.report import load_rows, qa_accuracy, speedup_and_underestimation
from marginal_core.tasks.store import ResultStore, read_samples

# Questions (docs) in the packaged request files, counted from the raw files once by hand.
PACKAGED_COUNTS = {
    "arc-challenge": 1172,
    "arc-challenge:validation": 299,
    "arc-easy": 2376,
    "openbookqa": 500,
    "medmcqa": 4183,
}


def _raw_doc_ids(path: Path) -> tuple[set[int], int]:
    """Distinct question doc ids (< 1,000,000) and the number of answer-only lines in a file."""
    ids, answer_only = set(), 0
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            doc_id = json.loads(line)["doc_id"]
            if doc_id >= qa.UNCONDITIONAL_OFFSET:
                answer_only += 1
            else:
                ids.add(doc_id)
    return ids, answer_only


# --------------------------------------------------------------------------------------------
# Loaders


@pytest.mark.parametrize("name", list(PACKAGED_COUNTS))
def test_packaged_qa_loaders(name):
    questions = qa.load_questions(name)
    assert len(questions) == PACKAGED_COUNTS[name]
    doc_ids, answer_only = _raw_doc_ids(qa.packaged_file(name))
    assert answer_only > 0  # the file has answer-only duplicates, and they are skipped
    assert len(questions) == len(doc_ids)
    assert len({q.id for q in questions}) == len(questions)
    for q in questions:
        assert not q.question.startswith("Question:") and not q.question.endswith("Answer:")
        assert q.question and "\nAnswer:" not in q.question
        assert 0 <= q.gold < len(q.choices) and len(q.choices) >= 2
        assert all(c and c == c.strip() for c in q.choices)
    first = questions[0]
    assert first.context == f"Question: {first.question}\nAnswer:"
    assert first.continuation(0) == " " + first.choices[0]


def test_known_first_question():
    q = qa.load_questions("arc-challenge:validation", limit=1)[0]
    assert q.question.startswith("Juan and LaKeisha roll a few objects down a ramp.")
    assert q.choices[3] == "Record the details of the investigation." and q.gold == 3


def test_limit_and_shuffle():
    first = qa.load_questions("openbookqa", limit=5)
    assert [q.index for q in first] == [0, 1, 2, 3, 4]
    shuffled = qa.load_questions("openbookqa", limit=5, shuffle_seed=1)
    assert shuffled == qa.load_questions("openbookqa", limit=5, shuffle_seed=1)
    assert [q.index for q in shuffled] != [0, 1, 2, 3, 4]


def test_local_files(tmp_path):
    jl = tmp_path / "q.jsonl"
    jl.write_text(
        json.dumps({"question": "2+2?", "choices": ["3", "4"], "answer": 1}) + "\n"
        + json.dumps({"question": "Sky?", "choices": ["blue", "green", "red"], "answer": "A", "id": "s"}) + "\n",
        encoding="utf-8",
    )
    got = qa.load_questions(str(jl))
    assert [(q.id, q.question, q.choices, q.gold) for q in got] == [
        ("0", "2+2?", ("3", "4"), 1), ("s", "Sky?", ("blue", "green", "red"), 0)]
    cs = tmp_path / "q.csv"
    pd.DataFrame({"question": ["Cold?"], "A": ["ice"], "B": ["fire"], "answer": ["0"]}).to_csv(cs, index=False)
    assert qa.load_questions(str(cs))[0].choices == ("ice", "fire")
    cs2 = tmp_path / "q2.csv"
    pd.DataFrame({"question": ["Cold?"], "choices": ['["ice", "fire"]'], "answer": [1]}).to_csv(cs2, index=False)
    assert qa.load_questions(str(cs2))[0].gold == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "x", "choices": ["a", "b"], "answer": 5}) + "\n", encoding="utf-8")
    with pytest.raises(MarginalError, match="outside"):
        qa.load_questions(str(bad))


def test_bad_names():
    with pytest.raises(MarginalError, match="unknown dataset"):
        qa.load_questions("arc-hard")
    with pytest.raises(MarginalError, match="no 'test' split"):
        qa.load_questions("medmcqa:test")
    with pytest.raises(MarginalError, match="unknown dataset"):
        mt.load_pairs("en-xx-missing.tsv")
    with pytest.raises(MarginalError, match="unknown method"):
        qa.run_qa("arc-easy", "/nonexistent", methods="canonical,exact")


def test_packaged_translation_sets():
    for name in ("en-de", "en-cs"):
        pairs, langs = mt.load_pairs(name)
        assert len(pairs) == 30 and langs == ("en", name[-2:])
        assert len({p.id for p in pairs}) == 30
        assert all(p.source and p.reference and p.source != p.reference for p in pairs)
    de, _ = mt.load_pairs("en-de")
    cs, _ = mt.load_pairs("en-cs")
    assert [p.source for p in de] == [p.source for p in cs]
    assert mt.languages_for("en-cs", ("en", "cs"), None) == ("English", "Czech")
    with pytest.raises(MarginalError, match="target-language"):
        mt.languages_for("mine.tsv", None, None)
    assert mt.make_prompt("Hi.", "German") == "Translate the following sentence from English to German.\nEnglish: Hi.\nGerman:"


# --------------------------------------------------------------------------------------------
# Report arithmetic on hand-made rows


def test_report_arithmetic():
    rows = pd.DataFrame([
        # question a: gold 1; canonical picks 0, lattice picks 1; per byte picks 1 for canonical
        dict(item="a", choice=0, gold=1, method="canonical", log_marginal=-10.0, num_bytes=2, seconds=0.1,
             log_noncanonical=-math.inf),
        dict(item="a", choice=1, gold=1, method="canonical", log_marginal=-12.0, num_bytes=10, seconds=0.1,
             log_noncanonical=-math.inf),
        dict(item="a", choice=0, gold=1, method="lattice", log_marginal=-9.0, num_bytes=2, seconds=1.0, log_noncanonical=-11.0),
        dict(item="a", choice=1, gold=1, method="lattice", log_marginal=-8.0, num_bytes=10, seconds=1.0, log_noncanonical=-9.0),
        dict(item="a", choice=0, gold=1, method="proxy", log_marginal=-9.5, num_bytes=2, seconds=3.0, log_noncanonical=-12.0),
        dict(item="a", choice=1, gold=1, method="proxy", log_marginal=-8.0, num_bytes=10, seconds=5.0, log_noncanonical=-9.0),
    ])
    assert qa_accuracy(rows, "canonical", ["a"]) == {"acc": 0.0, "acc_norm": 1.0, "questions": 1}
    assert qa_accuracy(rows, "lattice", ["a"])["acc"] == 1.0
    rows["num_distinct"] = 1
    figures = speedup_and_underestimation(rows)
    assert figures["compared"] == 2 and figures["underestimated"] == 1 and figures["ties"] == 1
    assert figures["underestimation_ratio"] == 0.5 and figures["speedup"] == pytest.approx(4.0)


# --------------------------------------------------------------------------------------------
# End to end (SmolLM2, small k)


def _run_cli(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="marginal")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result = args.run(args)
    json.dumps(result)  # JSON-able
    return result


# The proxy generates token by token (the slow part), so it runs on the two datasets of the
# paper's figures; the other two check the data path with canonical and lattice.
@pytest.mark.parametrize("dataset,methods", [
    ("arc-challenge", ("canonical", "lattice", "proxy")),
    ("openbookqa", ("canonical", "lattice", "proxy")),
    ("arc-easy", ("canonical", "lattice")),
    ("medmcqa", ("canonical", "lattice")),
])
def test_qa_end_to_end(dataset, methods, smollm_model, tmp_path):
    report = qa.run_qa(dataset, tmp_path, lm=smollm_model, limit=1, samples=8, methods=methods, show_bar=False)
    questions = qa.load_questions(dataset, limit=1)
    n_answers = len(questions[0].choices)
    rows = load_rows(tmp_path)
    assert len(rows) == len(methods) * n_answers and report["questions"] == 1 and report["answers"] == n_answers
    for method in methods:
        part = rows[rows["method"] == method]
        assert list(part["choice"]) == list(range(n_answers))
        assert report["accuracy"][method]["acc"] in (0.0, 1.0)
    canon = rows[rows["method"] == "canonical"].set_index("choice")
    for method in methods[1:]:
        part = rows[rows["method"] == method].set_index("choice")
        # same canonical term; a marginal is never below the canonical probability
        assert (part["log_p_canonical"] == canon["log_marginal"]).all()
        assert (part["log_marginal"] >= canon["log_marginal"] - 1e-9).all()
        assert (part["num_samples"] <= 8).all()
    assert (rows[rows["method"] == "lattice"]["num_distinct"] == rows[rows["method"] == "lattice"]["num_samples"]).all()
    if "proxy" in methods:
        assert 0 <= report["underestimation_ratio"] <= 1 and report["speedup"] > 0
    samples = read_samples(tmp_path)
    assert len(samples) == len(rows)
    lattice0 = samples[(questions[0].id, 0, "lattice")]
    assert len(lattice0["ids"]) == len(lattice0["log_p"]) == len(lattice0["draws"]) <= 8
    vocab = vocabulary(smollm_model.tokenizer)
    text = questions[0].continuation(0).encode("utf-8")
    for ids in lattice0["ids"]:
        assert b"".join(vocab.surface(i) for i in ids) == text
    assert (tmp_path / "report.md").read_text().startswith("### Q&A accuracy")


def test_qa_cli_and_resume(smollm_model, tmp_path):
    """Interrupt after one question (and tear the CSV's last line), rerun: nothing lost or repeated."""
    full = tmp_path / "full"
    once = _run_cli(["eval-qa", "--dataset", "openbookqa", "--model", "smollm2-135m", "--limit", "2",
                     "--samples", "4", "--methods", "canonical,lattice", "--out", str(full)])
    assert once["questions"] == 2 and "Table 2" in once["table"]

    part = tmp_path / "part"
    kwargs = dict(lm=smollm_model, limit=2, samples=4, methods="canonical,lattice", show_bar=False)
    qa.run_qa("openbookqa", part, max_items=1, **kwargs)
    assert len(load_rows(part)) == 8
    with open(part / "rows.csv", "a", encoding="utf-8") as fh:
        fh.write("torn,0,0,1,half a ro")  # a kill in the middle of a write
    again = qa.run_qa("openbookqa", part, **kwargs)
    rows = pd.read_csv(part / "rows.csv")
    assert len(rows) == 16 and not rows.duplicated(["item", "choice", "method"]).any()
    assert "torn" not in set(rows["item"])
    ref = load_rows(full).sort_values(["item", "choice", "method"]).reset_index(drop=True)
    got = load_rows(part).sort_values(["item", "choice", "method"]).reset_index(drop=True)
    assert list(ref["item"]) == list(got["item"])
    assert ref["log_marginal"].to_numpy() == pytest.approx(got["log_marginal"].to_numpy(), abs=1e-5)
    assert again["accuracy"] == {k: v for k, v in once["accuracy"].items()}
    assert again["underestimated"] == once["underestimated"]
    # a third run has nothing to do and changes nothing
    qa.run_qa("openbookqa", part, **kwargs)
    assert len(pd.read_csv(part / "rows.csv")) == 16
    # another setup in the same folder is refused
    with pytest.raises(MarginalError, match="another setup"):
        qa.run_qa("openbookqa", part, **{**kwargs, "samples": 8})


def test_one_run_writes_a_folder_and_a_second_follows_it_then_scores_what_it_left(smollm_model, tmp_path):
    """Two runs of one setup on one folder (a class pressing Run on the same Q&A): the second
    is refused at once without ``following``; with it, it waits, told how far the first got and
    by whom, and scores only the items left. Every row is written once."""
    import threading

    from marginal_core.tasks.writer import FolderBusy, RunLock

    kwargs = dict(lm=smollm_model, limit=3, samples=2, methods=("canonical", "lattice"), show_bar=False)
    qa.run_qa("arc-easy", tmp_path, **{**kwargs, "limit": 1})  # the first question, scored before
    told: list[tuple[int, int, str]] = []
    with RunLock.take(tmp_path):  # another run holds the folder
        with pytest.raises(FolderBusy, match="being written by another run .process \\d+ on "):
            qa.run_qa("arc-easy", tmp_path, **kwargs)
        follower = threading.Thread(target=lambda: told.append(qa.run_qa(
            "arc-easy", tmp_path, **kwargs, following=lambda *state: told.append(state))))
        follower.start()
        follower.join(timeout=3)
        assert follower.is_alive() and told, "the follower waits while the folder is held"
        assert {state[:2] for state in told} == {(1, 3)} and "process" in told[0][2]
    follower.join(timeout=120)
    report = told[-1]
    assert report["questions"] == 3
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert len(rows) == len(rows.drop_duplicates(["item", "choice", "method"]))  # each row once
    sessions = [json.loads(line) for line in (tmp_path / "sessions.jsonl").read_text().splitlines()]
    assert [s["items_done"] for s in sessions] == [1, 2]


def test_a_stop_while_following_writes_nothing(smollm_model, tmp_path):
    from marginal_core.tasks.writer import RunLock

    kwargs = dict(lm=smollm_model, limit=2, samples=2, methods=("canonical",), show_bar=False)
    qa.run_qa("arc-easy", tmp_path, **{**kwargs, "limit": 1})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with RunLock.take(tmp_path):
        report = qa.run_qa("arc-easy", tmp_path, **kwargs, should_stop=lambda: True, following=lambda *state: None)
    assert report["questions"] == 1  # the folder as it stands
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert {k: v for k, v in after.items() if k != ".writer.lock"} == \
        {k: v for k, v in before.items() if k != ".writer.lock"}


def test_a_reader_leaves_out_a_line_still_being_written(tmp_path):
    from marginal_core.tasks.store import done_keys

    store = ResultStore(tmp_path, {"task": "qa"}, ["item", "choice", "method", "x"])
    store.append([{"item": "a", "choice": 0, "method": "canonical", "x": 1.5}])
    with open(tmp_path / "rows.csv", "a") as fh:
        fh.write("b,0,can")
    assert done_keys(tmp_path) == {("a", 0, "canonical")}
    assert (tmp_path / "rows.csv").read_text().endswith("b,0,can")  # a reader cuts nothing


def test_store_drops_torn_tail(tmp_path):
    store = ResultStore(tmp_path, {"task": "qa"}, ["item", "choice", "method", "x"])
    store.append([{"item": "a", "choice": 0, "method": "canonical", "x": -math.inf}])
    with open(tmp_path / "rows.csv", "a") as fh:
        fh.write("b,0,can")
    again = ResultStore(tmp_path, {"task": "qa"}, ["item", "choice", "method", "x"])
    assert again.done == {("a", 0, "canonical")}
    assert (tmp_path / "rows.csv").read_text() == "item,choice,method,x\na,0,canonical,-inf\n"
    with open(tmp_path / "rows.csv", "a") as fh:  # killed again, with this store open
        fh.write("c,0,can")
    again.append([{"item": "d", "choice": 0, "method": "canonical", "x": 2.0}])  # the next writer cuts it
    assert (tmp_path / "rows.csv").read_text() == "item,choice,method,x\na,0,canonical,-inf\nd,0,canonical,2.0\n"


# --------------------------------------------------------------------------------------------
# Translation (SmolLM2 135M: the cheaper embedded model; Gemma works the same way)


def test_generate_candidates(smollm_model):
    prompt = mt.make_prompt("The cat is sleeping.", "German")
    cands = mt.generate_candidates(smollm_model, prompt, 2, seed=1, max_new_tokens=12)
    assert 1 <= len(cands) <= 2 and len(set(cands)) == len(cands)
    assert all(c and "\n" not in c and c == c.strip() for c in cands)
    assert cands == mt.generate_candidates(smollm_model, prompt, 2, seed=1, max_new_tokens=12)


def test_mt_end_to_end_and_resume(smollm_model, tmp_path):
    kwargs = dict(lm=smollm_model, candidates=2, samples=2, show_bar=False, max_new_tokens=16, comet=False)
    first = mt.run_mt("en-cs", tmp_path, limit=2, max_items=1, **kwargs)  # interrupted after one
    assert first["sentences"] == 1
    report = mt.run_mt("en-cs", tmp_path, limit=2, **kwargs)
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert [i["item"] for i in items] == ["en-cs-001", "en-cs-002"]  # candidates generated once each
    rows = load_rows(tmp_path)
    n_cands = sum(len(i["candidates"]) for i in items)
    assert len(rows) == 3 * n_cands and not rows.duplicated(["item", "choice", "method"]).any()
    assert report["sentences"] == 2 and report["metric"] == "chrF"
    for method in ("canonical", "lattice", "proxy", "first candidate"):
        assert 0 <= report["scores"][method]["chrf"] <= 100
    assert report["compared"] == n_cands
    assert "chrF" in (tmp_path / "report.md").read_text()


def test_table_1_is_a_task_whose_rho_is_the_librarys(smollm_model, tmp_path):
    """Table 1 (tasks.rank) through the one evaluator: each sentence's rho is Spearman's rho of the
    library's own proxy run; a sentence with fewer than three distinct draws has none; a rerun
    scores nothing again."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.tasks.evaluator import evaluate
    from marginal_core.tasks.rank import RANK_METHODS as METHODS
    from marginal_core.tasks.rank import RankTask, rank_options, sentences_by_length
    from marginal_core.viz.analysis import spearman

    texts = {50: [("a", "She sells sea shells by the sea shore every day."), ("b", "Hi")]}
    task = RankTask("test", sentences_by_length(texts))
    options = rank_options(8, show_bar=False, dtype="float32")
    report = evaluate(task, tmp_path, options, lm=smollm_model)
    rows = {r["item"]: r for r in report["rows"]}
    rho, n = spearman(Marginalizer(smollm_model, texts[50][0][1]).proxy(8, seed=0))
    assert rows["a"]["rho"] == pytest.approx(rho, abs=1e-9) and rows["a"]["distinct"] == n >= 3
    assert math.isnan(rows["b"]["rho"]) and rows["b"]["distinct"] < 3
    (summary,) = report["by_length"]
    assert (summary["sentences"], summary["with_rho"], summary["rho"]) == (2, 1, f"{rho:.2f}")
    assert "## Table 1" in (tmp_path / "report.md").read_text()
    again = evaluate(task, tmp_path, options, lm=smollm_model)
    assert again["rows"] == report["rows"] and list(METHODS) == ["proxy"]
    assert len(pd.read_csv(tmp_path / "rows.csv")) == 2  # nothing scored twice
