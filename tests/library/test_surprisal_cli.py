"""`marginal surprisal`: its JSON (the keys, regions that sum to -log P(text as a prefix)), its
CSV (in bits with --bits), its summary, and every bad input as one line and exit status 2."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from marginal_core.cli.commands import main as cli_main
from marginal_core.search.surprisal.result import COLUMNS, bits_per_byte
from tests.conftest import SMOL

TEXT = "The cat sat on the mat."
SETUP = ["--model", SMOL, "--device", "cpu", "--dtype", "float32"]
KEYS = {"text", "model", "context", "unit", "space", "method", "dtype", "device", "regions", "log_prefix_probability",
        "log_p_text", "bits_per_byte", "exact", "seconds", "tolerance", "settled", "certified", "open", "ended"}


@pytest.fixture(scope="module")
def as_json(smollm_model) -> dict:
    """The command's JSON for TEXT under SmolLM2 (word regions, the search)."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdout", out)
        assert cli_main(["surprisal", TEXT, *SETUP, "--json"]) == 0
    return json.loads(out.getvalue())


def test_json_keys_and_regions_sum_to_the_prefix_probability(as_json):
    assert set(as_json) == KEYS
    assert (as_json["text"], as_json["model"], as_json["unit"], as_json["space"]) == (TEXT, SMOL, "word", "trailing")
    regions = as_json["regions"]
    assert [r["text"] for r in regions] == ["The ", "cat ", "sat ", "on ", "the ", "mat."]
    assert all(set(r) == set(COLUMNS) for r in regions)
    assert sum(r["surprisal"] for r in regions) == pytest.approx(-as_json["log_prefix_probability"], abs=1e-9)
    assert as_json["log_prefix_probability"] >= as_json["log_p_text"]  # the prefix also counts tokens past the end
    assert as_json["bits_per_byte"] == bits_per_byte(as_json["log_p_text"], TEXT)
    assert all(r["lower"] <= r["surprisal"] + 1e-9 and r["surprisal"] <= r["upper"] + 1e-9 for r in regions)
    # the two measures of progress: certified to the tolerance (so the values settled), nothing open
    assert as_json["certified"] == len(regions) and as_json["open"] == [] and as_json["ended"] == "certified"
    assert 0 < as_json["settled"] <= as_json["seconds"] and as_json["tolerance"] == 0.01


def test_a_spent_time_budget_names_the_open_words(smollm_model, capsys):
    """--time-budget 0 ends after round 0: the JSON lists the open words with their intervals, and
    the summary names them and says why the search ended."""
    assert cli_main(["surprisal", TEXT, *SETUP, "--json", "--time-budget", "0"]) == 0
    found = json.loads(capsys.readouterr().out)
    regions = {r["index"]: r for r in found["regions"]}
    assert found["ended"] == "time budget" and found["open"] and found["settled"] is None
    assert found["certified"] == len(regions) - len(found["open"])
    for word in found["open"]:
        region = regions[word["index"]]
        assert (word["text"], word["lower"], word["upper"]) == (region["text"], region["lower"], region["upper"])
        assert region["upper"] - region["lower"] > 0.01
    assert cli_main(["surprisal", TEXT, *SETUP, "--time-budget", "0"]) == 0
    out = capsys.readouterr().out
    assert f"values settling; certified: {found['certified']} of 6 words within 0.01 nats" in out
    assert "ended: the time budget spent" in out and "left open: " in out
    assert all(f"[{w['lower']:.3f}, {w['upper']:.3f}]" in out.split("left open: ")[1] for w in found["open"])


def test_next_characters_in_the_json_the_csv_and_the_table(smollm_model, capsys):
    """--next 3: each region's three most probable next characters at its first byte, most
    probable first, in the JSON (with their intervals), the CSV's next_k columns and the table."""
    assert cli_main(["surprisal", TEXT, *SETUP, "--json", "--next", "3"]) == 0
    regions = json.loads(capsys.readouterr().out)["regions"]
    assert all(len(r["next"]) == 3 for r in regions)
    for r in regions:
        chances = [c["probability"] for c in r["next"]]
        assert chances == sorted(chances, reverse=True)
        assert all(c["lower"] - 1e-9 <= c["probability"] <= c["upper"] + 1e-9 for c in r["next"])
        assert 1 <= r["rank"] and r["entropy"] > 0
    came = regions[1]["text"][0]  # "cat": the rank of "c" is where it stands among the candidates, if there
    if came in [c["character"] for c in regions[1]["next"]]:
        assert [c["character"] for c in regions[1]["next"]].index(came) + 1 == regions[1]["rank"]
    assert cli_main(["surprisal", TEXT, *SETUP, "--csv", "--next", "2"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False)
    assert list(frame.columns) == [*COLUMNS, "next_1", "p_next_1", "next_2", "p_next_2"]
    assert frame["next_1"].tolist() == [r["next"][0]["character"] for r in regions]
    assert cli_main(["surprisal", TEXT, *SETUP, "--next", "2"]) == 0
    out = capsys.readouterr().out
    assert "canon.pre" in out and "naive" in out and "whitespace convention" in out


def test_csv_in_bits_and_the_summary(as_json, capsys):
    assert cli_main(["surprisal", TEXT, *SETUP, "--csv", "--bits"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 6
    nats = [r["surprisal"] for r in as_json["regions"]]
    assert frame["surprisal"].tolist() == pytest.approx([n / math.log(2) for n in nats], abs=1e-6)
    assert cli_main(["surprisal", TEXT, *SETUP]) == 0
    out = capsys.readouterr().out
    assert "mat." in out and "sum of regions, -log P(text as a prefix)" in out and "bits per byte" in out
    assert f"{as_json['bits_per_byte']:.3f}" in out and "runs on past the end" in out


@pytest.mark.parametrize("argv, message", [
    (["   "], "empty or only whitespace"),
    (["a b", "--unit", "words"], "unknown unit 'words'"),
    (["a b", "--space", "before"], "unknown space rule"),
    (["a b", "--method", "lattice"], "unknown surprisal method"),
    (["a b", "--tolerance", "0"], "tolerance is a positive number"),
    (["a b", "--next", "many"], "a whole number of characters"),
    (["a b", "--time-budget", "soon"], "--time-budget takes a number of seconds"),
    (["a\udc80b"], "not valid Unicode"),
    (["ab " * 3000], "context window"),
    (["The quick brown fox jumps over the lazy dog by the river.", "--method", "exact"], "over the budget"),
])
def test_bad_input_is_one_line_and_status_2(smollm_model, capsys, argv, message):
    assert cli_main(["surprisal", *argv, *SETUP]) == 2
    captured = capsys.readouterr()  # a refusal comes before the progress bar's first report: no bar
    assert message in captured.err and captured.err.startswith("marginal: ") and captured.err.count("\n") == 1
    assert captured.out == "" and "Traceback" not in captured.err


def test_bad_input_in_a_process():
    """No model loads before the text and the choices are checked: a mistyped unit fails at once."""
    for argv, message in ((["", "--model", SMOL], "empty"), (["a", "--unit", "line"], "unknown unit")):
        proc = subprocess.run([sys.executable, "-m", "marginal_core", "surprisal", *argv],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
