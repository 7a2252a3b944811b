"""`marginal scan --surprisal`: surprisal.csv (a row per text, model and region) beside scan.csv's
bits per byte; each text's regions equal `mc.surprisal`'s, and a rerun cut by another unit walks
nothing again."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from marginal_core.corpus.scan import model_folder
from marginal_core.corpus.scan_surprisal import CSV_COLUMNS as COLUMNS
from marginal_core.corpus.scan_surprisal import FILE, surprisal_of
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.errors import MarginalError
from marginal_core.search.surprisal.result import bits_per_byte
from tests.app.test_scan import run
from tests.conftest import SMOL

TEXTS = ["Hello world", "A cat sat."]
SETUP = ["--models", SMOL, "--methods", "canonical", "--device", "cpu", "--dtype", "float32"]


def test_scan_writes_surprisal_csv_and_a_rerun_recuts_it(smollm_model, tmp_path):
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "scan"
    result = run(["scan", str(tmp_path / "texts.txt"), "--out", str(out), *SETUP, "--surprisal", "word"])
    table = pd.read_csv(out / "surprisal.csv", keep_default_na=False)
    assert list(table.columns) == COLUMNS and result["surprisal_rows"] == len(table) == 2 + 3
    scan = pd.read_csv(out / "scan.csv")
    assert list(table["text_id"].unique()) == list(scan["id"]) and set(table["model"]) == {SMOL}
    for text, (_, rows) in zip(TEXTS, table.groupby("text_id", sort=False), strict=True):
        alone = Marginalizer(smollm_model, text).surprisal()
        assert list(rows["region"]) == [r.text for r in alone.regions]
        assert rows["surprisal"].tolist() == pytest.approx([r.surprisal for r in alone.regions], abs=1e-6)
        assert rows["surprisal_canonical"].tolist() == pytest.approx([r.surprisal_canonical for r in alone.regions])
        assert rows["surprisal_canonical_prefix"].tolist() == pytest.approx(
            [r.surprisal_canonical_prefix for r in alone.regions], abs=1e-6)
        assert rows["entropy"].tolist() == pytest.approx([r.entropy for r in alone.regions], abs=1e-6)
        assert rows["rank"].tolist() == [r.rank for r in alone.regions]
        assert rows["length"].tolist() == [len(r.text.strip()) for r in alone.regions]
    from wordfreq import zipf_frequency  # installed by requirements.txt: the words extra

    assert table["zipf_frequency"].tolist() == [zipf_frequency(w.strip(), "en") for w in table["region"]]
    assert scan["bits_per_byte"].tolist() == [bits_per_byte(lp, t) for lp, t in zip(scan["log_marginal"], scan["text"])]
    report = (out / "report.md").read_text()
    assert "bits per byte" in report and "where marginal and canonical surprisal differ most" in report

    walked = (model_folder(out, SMOL) / FILE).read_text().splitlines()
    stored = [json.loads(line) for line in walked]  # each text's two measures of progress, with its store line
    assert [(r["certified"], r["regions"], r["ended"]) for r in stored] == [(2, 2, "certified"), (3, 3, "certified")]
    assert all(0 < r["settled"] <= r["seconds"] for r in stored)
    again = surprisal_of(stored[1])
    assert (again.settled_at, again.certified, again.tolerance) == (stored[1]["settled"], 3, 0.01)
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(out), *SETUP, "--surprisal", "char"])
    assert (model_folder(out, SMOL) / FILE).read_text().splitlines() == walked  # nothing walked again
    chars = pd.read_csv(out / "surprisal.csv", keep_default_na=False)
    assert len(chars) == sum(map(len, TEXTS))
    sums = chars.groupby("text_id", sort=False)["surprisal"].sum()
    assert sums.tolist() == pytest.approx(table.groupby("text_id", sort=False)["surprisal"].sum().tolist(), abs=1e-9)
    assert json.loads((out / "scan.json").read_text())["surprisal"] == {"unit": "char", "space": "trailing", "bits": False}
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(out), *SETUP])  # without --surprisal: kept, as last cut
    assert len(pd.read_csv(out / "surprisal.csv")) == len(chars) and math.isfinite(chars["upper"].max())


def test_bits_and_without_wordfreq(smollm_model, tmp_path):
    """--bits: surprisal.csv's surprisals and entropy in bits. Without wordfreq (its import
    blocked, in a process of its own) the scan says so once and zipf_frequency is empty."""
    (tmp_path / "texts.txt").write_text(TEXTS[1] + "\n")
    nats, bits = tmp_path / "nats", tmp_path / "bits"
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(nats), *SETUP, "--surprisal", "word"])
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(bits), *SETUP, "--surprisal", "word", "--bits"])
    a, b = pd.read_csv(nats / "surprisal.csv"), pd.read_csv(bits / "surprisal.csv")
    for column in ("surprisal", "surprisal_canonical", "surprisal_canonical_prefix", "entropy"):
        assert (b[column] * math.log(2)).tolist() == pytest.approx(a[column].tolist(), abs=1e-9)
    assert json.loads((bits / "scan.json").read_text())["surprisal"]["bits"] is True
    blocked = ("import sys; sys.modules['wordfreq'] = None; from marginal_core.cli.commands import main; "
               f"sys.exit(main(['scan', {str(tmp_path / 'texts.txt')!r}, '--out', {str(tmp_path / 'none')!r}, "
               f"*{SETUP!r}, '--surprisal', 'word']))")
    proc = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("zipf_frequency stays empty without wordfreq") == 1
    empty = pd.read_csv(tmp_path / "none" / "surprisal.csv")
    assert empty["zipf_frequency"].isna().all() and empty["surprisal"].tolist() == pytest.approx(a["surprisal"].tolist())


def test_an_unknown_unit_is_refused_before_any_work(tmp_path):
    (tmp_path / "texts.txt").write_text("Hello\n")
    with pytest.raises(MarginalError, match="unknown surprisal unit 'line'"):
        run(["scan", str(tmp_path / "texts.txt"), "--out", str(tmp_path / "scan"), *SETUP, "--surprisal", "line"])
    assert not (tmp_path / "scan").exists()
