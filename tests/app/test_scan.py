"""`marginal scan`: reading a file of texts, scoring it under two models into a resumable folder,
the tidy exports with decoded tokenizations, shards, Ctrl-C and the rerun that continues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from bench.support.apptest import app
from marginal_core.cli.commands import build_parser
from marginal_core.corpus.scan import load_texts, model_folder, parse_shard, text_id
from marginal_core.ground.errors import MarginalError
from marginal_core.tasks.report import load_rows

TEXTS = ["Entschuldigung", " Tokyo", "unbelievably"]
SETUP = ["--samples", "6", "--beam-width", "4", "--device", "cpu", "--dtype", "float32"]
COMMON = [*SETUP, "--methods", "canonical,lattice,beam"]


def run(argv: list[str]) -> dict:
    """A `marginal` command run in this process (the session's models stay loaded)."""
    args = build_parser().parse_args(argv)
    return args.run(args)


def test_text_files(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\n two\none\n")
    assert [(t.text, t.index) for t in load_texts(tmp_path / "a.txt")] == [("one", 0), (" two", 1)]
    (tmp_path / "b.jsonl").write_text('{"text": "x", "id": "q1"}\n{"text": "y", "context": "Say:"}\n')
    b = load_texts(tmp_path / "b.jsonl")
    assert [(t.id, t.context) for t in b] == [("q1", ""), (text_id("y", "Say:"), "Say:")]
    (tmp_path / "c.csv").write_text("id,context,text\nr1,,hello\nr2,Q:,\" world\"\n")
    assert [(t.id, t.context, t.text) for t in load_texts(tmp_path / "c.csv")] == [("r1", "", "hello"), ("r2", "Q:", " world")]
    for name, body, message in [("d.txt", "\n\n", "holds no texts"), ("e.md", "x", "reads .txt"),
                                ("f.jsonl", '{"txt": 1}\n', "record 1 has no text"),
                                ("g.csv", "words\nx\n", "\"text\" column"),
                                ("h.jsonl", '{"text": "a", "id": "1"}\n{"text": "b", "id": "1"}\n', "used twice")]:
        (tmp_path / name).write_text(body)
        with pytest.raises(MarginalError, match=message):
            load_texts(tmp_path / name)
    assert parse_shard("2/3") == (2, 3)
    with pytest.raises(MarginalError, match="i must be from 1 to n"):
        parse_shard("4/3")


def test_scan_two_models_exports_and_equals_estimate(smollm_model, gemma_model, tmp_path, capsys):
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "scan"
    result = run(["scan", str(tmp_path / "texts.txt"), "--out", str(out), "--models", "smollm2-135m,gemma3-270m", *COMMON])
    assert "1 of 3 texts start with a space and have no context" in capsys.readouterr().err
    assert result["texts"] == 3 and result["rows"] == 3 * 2 * 3 and not result["stopped"]
    table = pd.read_parquet(out / "scan.parquet")
    flat = pd.read_csv(out / "scan.csv")
    assert list(flat.columns) == list(table.columns) and (flat["log_marginal"] == table["log_marginal"]).all()
    assert set(table["model"]) == {"smollm2-135m", "gemma3-270m"} and set(table["dtype"]) == {"float32"}
    assert (table["gain_nats"] >= 0).all() and table["share_off_canonical"].between(0, 1).all()
    # the scan's figures are `marginal estimate`'s for the same text, method, seed and dtype
    for model in ("smollm2-135m", "gemma3-270m"):
        est = run(["estimate", "Entschuldigung", "--model", model, "--methods", "lattice,beam", *SETUP])
        got = table[(table["model"] == model) & (table["text"] == "Entschuldigung")].set_index("method")
        for method in ("lattice", "beam"):
            assert got.loc[method, "log_marginal"] == pytest.approx(est["methods"][method]["log_marginal"], abs=1e-6)
        assert got.loc["canonical", "log_marginal"] == pytest.approx(est["log_p_canonical"], abs=1e-6)
    # SmolLM2's best tokenization of the German word is not its canonical one (the issue's finding)
    smol = table[(table["model"] == "smollm2-135m") & (table["text"] == "Entschuldigung") & (table["method"] == "beam")]
    assert smol["gain_nats"].item() > 10 and smol["top_tokenization"].item() != "Ent|sch|uld|igung"
    paths = pd.read_parquet(out / "paths.parquet")
    for row in paths.itertuples():  # every decoded tokenization spells its text
        text = table.loc[table["id"] == row.id, "text"].iloc[0]
        assert "".join(json.loads(row.tokens)) == text and row.num_tokens == len(json.loads(row.tokens))
    canon = paths[paths["kind"] == "canonical"]
    assert len(canon) and (canon["splits_from_canonical"] == 0).all()
    assert (paths["share_of_estimate"] <= 1 + 1e-9).all()
    report = (out / "report.md").read_text()
    assert "Texts ranked by their largest gain under any model" in report and "Entschuldigung" in report
    # the app's Results page lists the texts, largest gain first, linked to their mass flow
    at = app("pages/tasks/results.py", folder=str(out))
    assert not at.exception and not at.error
    listed = at.dataframe[0].value
    assert list(listed["gain (nats)"]) == sorted(listed["gain (nats)"], reverse=True) and len(listed) == 6
    top = listed.iloc[0]
    assert (top["text"], top["model"]) == ("Entschuldigung", "smollm2-135m")
    assert top["mass flow"] == "lattice?model=smollm2-135m&text=Entschuldigung&context=&arcs_by=mass+flow"


def test_shards_and_resume_equal_one_run(smollm_model, tmp_path):
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    whole, shared = tmp_path / "whole", tmp_path / "shared"
    args = ["--models", "smollm2-135m", *COMMON]
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(whole), *args])
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(shared), "--shard", "2/2", *args])
    assert len(load_rows(model_folder(shared, "smollm2-135m"))) == 3  # one text, three methods
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(shared), "--shard", "1/2", *args])
    # a shard run elsewhere, merged into a folder that holds the other shard: nothing is recomputed
    elsewhere, merged = tmp_path / "elsewhere", tmp_path / "merged"
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(elsewhere), "--shard", "1/2", *args])
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(merged), "--shard", "2/2", *args])
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(merged), "--merge", str(elsewhere), *args])
    sessions = (model_folder(merged, "smollm2-135m") / "sessions.jsonl").read_text().splitlines()
    assert len(sessions) == 1  # the merging run scored nothing (an idle run logs no session)
    key = ["id", "method"]
    a = pd.read_csv(whole / "scan.csv").sort_values(key).reset_index(drop=True)
    for folder in (shared, merged):
        b = pd.read_csv(folder / "scan.csv").sort_values(key).reset_index(drop=True)
        assert list(a["id"]) == list(b["id"]) and (a["log_marginal"] - b["log_marginal"]).abs().max() < 1e-6


def test_shards_share_a_folder_at_once_while_a_shard_runs_once(smollm_model, tmp_path):
    """Each shard holds the run lock of its own texts: while shard 1/2 runs, shard 2/2 writes the
    same folder, and a second shard 1/2 is refused (tasks/writer.py)."""
    from marginal_core.corpus.scan import ScanTask
    from marginal_core.tasks.evaluator import evaluate
    from marginal_core.tasks.options import EvalOptions
    from marginal_core.tasks.writer import FolderBusy, RunLock

    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    folder, options = tmp_path / "scan", EvalOptions(samples=2, methods=("canonical",), show_bar=False)
    shard = {i: ScanTask(str(tmp_path / "texts.txt"), (i, 2)) for i in (1, 2)}
    with RunLock.take(folder, shard[1].part):  # shard 1/2 is running
        evaluate(shard[2], folder, options, lm=smollm_model)
        with pytest.raises(FolderBusy):
            evaluate(shard[1], folder, options, lm=smollm_model)
    evaluate(shard[1], folder, options, lm=smollm_model)
    assert sorted(load_rows(folder)["text_index"].astype(int)) == [0, 1, 2]


@pytest.mark.models
def test_ctrl_c_keeps_finished_texts_and_rerun_continues(tmp_path):
    """A real SIGINT after the first text: the command says what it kept; the rerun scores only the rest.
    (Sentences, not words, after the first: each takes seconds, so the interrupt lands mid-run.)"""
    texts = ["Paris is the capital of France.", "Rome is the capital of Italy.", "Madrid is the capital of Spain.",
             "Vienna is the capital of Austria."]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "scan"
    argv = [sys.executable, "-m", "marginal_core", "scan", str(tmp_path / "texts.txt"), "--out", str(out),
            "--models", "smollm2-135m", "--samples", "200", "--methods", "canonical,lattice", "--device", "cpu",
            "--dtype", "float32"]
    # Ctrl-C as a terminal sends it: a runner that ignores SIGINT (a library in an earlier test can
    # leave it so) would pass that on to the child, whose Python would then never hear it.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    rows = model_folder(out, "smollm2-135m") / "rows.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (rows.is_file() and len(rows.read_text().splitlines()) > 1):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr and "stopped; what finished is kept" in stderr
    done = set(load_rows(model_folder(out, "smollm2-135m"))["item"])
    assert 1 <= len(done) < 4 and "results:" in stdout
    again = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(again.stdout)["texts"] == 4
    sessions = (model_folder(out, "smollm2-135m") / "sessions.jsonl").read_text().splitlines()
    assert json.loads(sessions[-1])["items_done"] == 4 - len(done)  # the finished texts were not recomputed
