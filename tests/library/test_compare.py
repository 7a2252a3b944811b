"""One text under two models (marginal_core.api.comparison, `marginal compare`): every figure equals the
single-model estimate for the same model, text, context, method and seed; the difference and its
sentence; a side that fails says why while the other still runs."""

from __future__ import annotations

import json
import math

import pytest

from marginal_core.api.comparison import Difference, Side, compare, difference, figures, labels, parse_sides
from marginal_core.cli.commands import main as cli_main
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.errors import MarginalError
from marginal_core.search.surprisal.result import bits_per_byte
from tests.conftest import GEMMA, SMOL

TEXT = " flooded roads"
CONTEXT = "After the storm:"


def _without_seconds(value):
    """A JSON value with every timing left out (two runs agree on everything else)."""
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


def test_sides_parse_names_and_precisions():
    assert Side.parse("smollm2-135m@bfloat16") == Side("smollm2-135m", "auto", "bfloat16")
    assert Side.parse(" gemma3-270m ", dtype="float32") == Side("gemma3-270m", "auto", "float32")
    sides = parse_sides("smollm2-135m@float32,smollm2-135m@bfloat16,gemma3-270m")
    assert labels(sides) == ["smollm2-135m@float32", "smollm2-135m@bfloat16", "gemma3-270m"]
    with pytest.raises(MarginalError, match="two models or more"):
        labels(parse_sides("gemma3-270m"))
    with pytest.raises(MarginalError, match="same model, device and precision"):
        labels(parse_sides("gemma3-270m,gemma3-270m"))


def test_difference_flips_and_moves():
    flip = Difference("A", "B", canonical=0.3, marginal=-0.2)
    assert flip.flips and "changes which model" in flip.sentence() and "B over all" in flip.sentence()
    moved = Difference("A", "B", canonical=-2.0, marginal=-1.85)
    assert not moved.flips and moved.moved == pytest.approx(0.15) and "moves the difference by +0.150" in moved.sentence()
    still = Difference("A", "B", canonical=-2.0, marginal=-1.95)
    assert not still.flips and still.sentence() is None


def test_figures_are_exact_where_every_path_is_scored(smollm_model):
    m = Marginalizer(smollm_model, " road", CONTEXT)
    exact = m.exact()
    f = figures(m, {"exact": exact})
    assert f.exact and f.certified_gap == 0.0 and f.num_paths == m.lattice.count()
    assert f.log_p_text == exact.log_marginal
    assert f.mass_off_canonical == pytest.approx(-math.expm1(f.log_p_canonical - exact.log_marginal))
    assert f.bits_per_byte == pytest.approx(-exact.log_marginal / math.log(2) / len(" road"))
    best = max([(exact.log_p_canonical, m.lattice.canonical), *zip(exact.log_p, exact.paths.tolist())])
    assert f.heaviest == tuple(m.lattice.pieces(best[1])) and f.heaviest_log_p == best[0]
    beam = figures(m, {"beam": m.beam()})  # the anytime beam on a short text prunes nothing: exact too
    assert beam.exact and beam.log_p_text == pytest.approx(exact.log_marginal, abs=1e-5)  # float32 passes of another shape


def test_library_compare_equals_each_single_model_estimate(gemma_model, smollm_model):
    frame = compare(TEXT, [f"{SMOL}@float32", f"{GEMMA}@float32"], CONTEXT, methods="canonical,beam",
                    options=None, device="cpu")
    assert list(frame.index) == [f"{SMOL}", f"{GEMMA}"] and list(frame["dtype"]) == ["float32", "float32"]
    for label, lm in ((SMOL, smollm_model), (GEMMA, gemma_model)):
        m = Marginalizer(lm, TEXT, CONTEXT)
        alone = {name: m.estimate(name) for name in ("canonical", "beam")}
        row = frame.loc[label]
        assert row["log_p_canonical"] == pytest.approx(m.canonical_score().log_p, abs=1e-6)
        assert row["log_p_text"] == pytest.approx(max(e.log_marginal for e in alone.values()), abs=1e-6)
        assert row["bits_per_byte"] == bits_per_byte(row["log_p_text"], TEXT)
        assert row["num_paths"] == m.lattice.count() and row["canonical_tokens"] == len(m.lattice.canonical)
        for name, est in alone.items():
            assert row["estimates"][name].log_marginal == pytest.approx(est.log_marginal, abs=1e-6)
    diff = frame.attrs["difference"]
    assert diff["canonical"] == pytest.approx(frame["log_p_canonical"].iloc[0] - frame["log_p_canonical"].iloc[1])
    assert diff["marginal"] == pytest.approx(frame["log_p_text"].iloc[0] - frame["log_p_text"].iloc[1])
    assert len(repr(frame)) < 2000  # Estimates show as one short line each, not as their arrays


def test_cli_compare_json_equals_two_estimate_runs(gemma_model, smollm_model, capsys):
    common = ["--context", CONTEXT, "--methods", "canonical,beam", "--device", "cpu", "--dtype", "float32", "--json"]
    assert cli_main(["compare", TEXT, "--models", f"{SMOL},{GEMMA}", *common]) == 0
    both = json.loads(capsys.readouterr().out)
    assert list(both["models"]) == [SMOL, GEMMA]
    found = {}
    for name in (SMOL, GEMMA):
        assert cli_main(["estimate", TEXT, "--model", name, *common]) == 0
        alone = json.loads(capsys.readouterr().out)
        side = dict(both["models"][name])
        found[name] = side.pop("figures")
        assert _without_seconds(side) == _without_seconds(alone)
        assert found[name]["log_p_canonical"] == alone["log_p_canonical"]
        assert found[name]["log_p_text"] == max(r["log_marginal"] for r in alone["methods"].values())
        assert found[name]["bits_per_byte"] == bits_per_byte(found[name]["log_p_text"], TEXT)
    assert both["difference"]["a"] == SMOL and both["difference"]["marginal"] == pytest.approx(
        found[SMOL]["log_p_text"] - found[GEMMA]["log_p_text"], abs=1e-9)


def test_cli_compare_keeps_the_side_that_works(smollm_model, capsys):
    code = cli_main(["compare", TEXT, "--models", f"{SMOL},no-such-model-here", "--methods", "canonical",
                     "--device", "cpu", "--dtype", "float32"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "no-such-model-here: cannot load model" in out and "Traceback" not in out + err
    assert "log p(canonical)" in out and "-" in out.split("log p(canonical)")[1].split()[0]
    assert "bits per byte" in out


def test_a_text_one_model_cannot_represent_fails_that_side_only(gemma_model, smollm_model):
    text = "\u2581x"  # U+2581: a space to a SentencePiece tokenizer (Gemma), plain bytes to SmolLM2
    m = Marginalizer(smollm_model, text)
    a = figures(m, {"canonical": m.canonical()})
    with pytest.raises(MarginalError):
        Marginalizer(gemma_model, text)
    assert math.isfinite(a.log_p_canonical)
    assert difference("a", a, "b", a).canonical == 0.0
