"""Two models of a scan compared text by text: the paired table, Spearman's rho of the gains and the
flips on a constructed corpus whose figures are worked out by hand, then on a real two-model scan
(its compare.csv, report.md and report.json)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from marginal_core.api.comparison import Difference
from marginal_core.corpus.scan_compare import Comparison, differ_most, gain_rho
from tests.app.test_scan import COMMON, run

# (id, model, method, log p(canonical), log marginal): the best bound of each text and model is the
# highest log marginal; t5 is A's alone; A's lattice on t3 is below its beam.
CONSTRUCTED = [
    ("t1", "A", "beam", -10.0, -9.0), ("t1", "B", "beam", -9.5, -9.5),      # canonical -0.5, marginal +0.5: flips
    ("t2", "A", "beam", -20.0, -19.95), ("t2", "B", "beam", -21.0, -20.0),  # +1 -> +0.05: same sign, moved
    ("t3", "A", "lattice", -5.0, -4.0), ("t3", "A", "beam", -5.0, -3.0),
    ("t3", "B", "beam", -4.0, -3.5),                                          # -1 -> +0.5: flips
    ("t4", "A", "beam", -8.0, -7.7), ("t4", "B", "beam", -9.0, -8.75),      # +1 -> +1.05: not moved
    ("t5", "A", "beam", -3.0, -2.0),
    ("t6", "A", "beam", -12.0, -11.6), ("t6", "B", "beam", -11.0, -11.0),   # -1 -> -0.6: moved
    ("t7", "A", "beam", -6.0, -5.0), ("t7", "B", "beam", -5.0, -5.0),       # -1 -> 0: no flip (a tie)
]


def constructed_table() -> pd.DataFrame:
    """The tidy table (scan.parquet's columns that matter) of the constructed corpus."""
    rows = pd.DataFrame(CONSTRUCTED, columns=["id", "model", "method", "log_p_canonical", "log_marginal"])
    canonical = rows.drop_duplicates(["id", "model"]).assign(method="canonical", log_marginal=lambda f: f["log_p_canonical"])
    table = pd.concat([canonical, rows], ignore_index=True)
    return table.assign(text=lambda f: "text " + f["id"], context="",
                        gain_nats=lambda f: (f["log_marginal"] - f["log_p_canonical"]).clip(lower=0))


def test_constructed_corpus_by_hand():
    comparison = Comparison.of(constructed_table(), "A", "B")
    paired = comparison.paired.set_index("id")
    assert list(paired.index) == ["t1", "t2", "t3", "t4", "t6", "t7"]  # the scan's order, t5 (A's alone) left out
    assert paired.loc["t3", "log_p_text_a"] == -3.0 and paired.loc["t3", "method_a"] == "beam"
    assert paired["diff_canonical"].tolist() == pytest.approx([-0.5, 1.0, -1.0, 1.0, -1.0, -1.0])
    assert paired["diff_marginal"].tolist() == pytest.approx([0.5, 0.05, 0.5, 1.05, -0.6, 0.0])
    assert paired["gain_diff"].tolist() == pytest.approx([1.0, -0.95, 1.5, 0.05, 0.4, 1.0])
    assert list(comparison.flips["id"]) == ["t1", "t3"]
    assert list(paired.index[paired["moved"]]) == ["t1", "t2", "t3", "t6", "t7"]
    # gains A (1, .05, 2, .3, .4, 1) rank 4.5 1 6 2 3 4.5; gains B (0, 1, .5, .25, 0, 0) rank 2 6 5 4 2 2:
    # the ranks' deviations from 3.5 give sum of products -5.5, sums of squares 17 and 15.5
    assert comparison.rho == pytest.approx(-5.5 / math.sqrt(17 * 15.5))
    assert list(differ_most(comparison.paired, "marginal", 2)["id"]) == ["t4", "t6"]
    assert list(differ_most(comparison.paired, "gain", 1)["id"]) == ["t3"]
    # one text reads as the Compare page reads it
    for r in comparison.paired.itertuples():
        assert r.flips == Difference("A", "B", r.diff_canonical, r.diff_marginal).flips
    figures = comparison.as_json()
    assert (figures["texts"], figures["flips"], figures["moved"]) == (6, 2, 5)
    assert [f["id"] for f in figures["flip_list"]] == ["t1", "t3"]
    md = comparison.markdown()
    assert "Spearman's rho of the gains: -0.339" in md and "on 2 of 6 texts" in md and "#### The 2 texts that flip" in md


def test_rho_needs_three_texts_that_vary():
    paired = Comparison.of(constructed_table(), "A", "B").paired
    assert gain_rho(paired.head(2)) is None
    assert gain_rho(paired.assign(gain_nats_b=0.0)) is None
    assert gain_rho(paired.iloc[:0]) is None
    assert "n/a" in Comparison("A", "B", paired.head(2)).markdown()


def test_real_two_model_scan(smollm_model, gemma_model, tmp_path):
    texts = ["Entschuldigung", "unbelievably", "The powerhouse of the cell is the mitochondria.", "Tokyo"]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "scan"
    run(["scan", str(tmp_path / "texts.txt"), "--out", str(out), "--models", "gemma3-270m,smollm2-135m", *COMMON])
    table = pd.read_parquet(out / "scan.parquet")
    paired = pd.read_csv(out / "compare.csv", keep_default_na=False)
    assert list(paired["text"]) == texts and set(paired["model_a"]) == {"gemma3-270m"}
    for r in paired.itertuples():  # each model's best bound of the text, and the differences between them
        best = {m: table[(table["text"] == r.text) & (table["model"] == m)]["log_marginal"].max()
                for m in ("gemma3-270m", "smollm2-135m")}
        assert r.log_p_text_a == pytest.approx(best["gemma3-270m"]) and r.log_p_text_b == pytest.approx(best["smollm2-135m"])
        assert r.diff_marginal == pytest.approx(r.log_p_text_a - r.log_p_text_b)
        assert r.flips == Difference("a", "b", r.diff_canonical, r.diff_marginal).flips
    # SmolLM2's best tokenization of the German word is far from its canonical one: its gain leads
    german = paired.set_index("text").loc["Entschuldigung"]
    assert german["gain_nats_b"] > 10 and german["gain_diff"] < -10 and german["moved"]
    report = json.loads((out / "report.json").read_text())
    [pair] = report["comparisons"]
    assert (pair["a"], pair["b"], pair["texts"], pair["flips"]) == ("gemma3-270m", "smollm2-135m", 4, int(paired["flips"].sum()))
    assert pair["gain_rho"] == pytest.approx(gain_rho(paired))
    assert set(report["by_model"]) == {"gemma3-270m", "smollm2-135m"}
    md = (out / "report.md").read_text()
    assert "### gemma3-270m against smollm2-135m: 4 texts scored by both" in md and "Spearman's rho of the gains" in md
