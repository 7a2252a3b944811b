"""The Compare page (pages/views/compare.py), headless: both models' figures equal the single-model
estimates, one side's failure leaves the other working, class mode refuses a model B off its list
with one message and nothing loaded, and the "Two models disagree" example opens the page."""

from __future__ import annotations

import pytest

from bench.support.apptest import app
from marginal_core import viz
from marginal_core.api.comparison import figures
from marginal_core.estimators.marginalizer import Marginalizer
from pages._app.runtime import server
from tests.app.test_server_policy import class_mode, loads  # noqa: F401 -- fixtures
from tests.app_support import assert_clean, plotly
from tests.conftest import GEMMA, SMOL

TEXT = " Tokyo"


def metric_values(at) -> list[tuple[str, str]]:
    return [(m.label, m.value) for m in at.metric]


def test_both_models_figures_equal_their_single_model_estimates(gemma_model, smollm_model):
    at = app("pages/views/compare.py", model=SMOL, model_b=GEMMA, text=TEXT, context="", dtype="float32")
    assert_clean(at)
    assert "Canonical tokenizations on one byte axis" in [h.value for h in at.subheader]
    at.button(key="run").click().run()
    assert_clean(at)
    shown = metric_values(at)
    for lm in (smollm_model, gemma_model):
        m = Marginalizer(lm, TEXT)
        f = figures(m, {"canonical": m.canonical(), "beam": m.beam()})
        assert ("log p(canonical)", viz.format_log(f.log_p_canonical)) in shown
        sign = "=" if f.exact else "≥"
        assert (f"log p(text) {sign}", viz.format_log(f.log_p_text)) in shown
        assert ("Mass off the canonical", viz.format_small(f.mass_off_canonical, 2, percent=True)) in shown
        assert ("Tokenizations", viz.count_label(f.num_paths)) in shown
    labels = [label for label, _ in shown]
    assert {"By canonical tokenizations", "By marginal (all tokenizations)"} <= set(labels)
    # SmolLM2 puts nearly all its mass on ␣To|kyo, Gemma 3 on ␣Tokyo: marginalizing moves the difference
    assert any("Marginalizing" in i.value for i in at.info)
    figures_shown = plotly(at)
    running = [f for f in figures_shown if "canonical score" in (f.layout.title.text or "")]
    assert running and {t.name for t in running[0].data} >= {SMOL, GEMMA}
    assert any("Where each model puts its mass" == h.value for h in at.subheader)


def test_one_model_failing_leaves_the_other_side_working(gemma_model, smollm_model):
    """U+2581 is a space to Gemma 3's SentencePiece tokenizer (refused) and plain bytes to SmolLM2."""
    at = app("pages/views/compare.py", model=SMOL, model_b=GEMMA, text="\u2581x", context="", dtype="float32")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "U+2581" in error or "▁" in error
    at.button(key="run").click().run()
    assert not at.exception and len(at.error) == 1
    assert "log p(canonical)" in [label for label, _ in metric_values(at)]


def test_the_same_model_in_two_precisions_compares_them(smollm_model):
    at = app("pages/views/compare.py", model=SMOL, model_b=SMOL, dtype_b="bfloat16", text=TEXT, context="", dtype="float32")
    assert_clean(at)
    at.button(key="run").click().run()
    assert_clean(at)
    names = [m.value for m in at.markdown if "(float32)" in m.value or "(bfloat16)" in m.value]
    assert len(names) == 2
    assert len([v for label, v in metric_values(at) if label == "log p(canonical)"]) == 2


@pytest.mark.models
def test_model_b_the_same_as_a_asks_for_another():
    at = app("pages/views/compare.py", model=SMOL, model_b=SMOL, text=TEXT, context="", dtype="float32")
    assert_clean(at)
    assert any("Model B is model A" in i.value for i in at.info)


def test_class_mode_refuses_a_model_b_off_its_list_with_one_message_and_loads_nothing(class_mode, loads,  # noqa: F811
                                                                                       monkeypatch):
    monkeypatch.setenv(server.ALLOWED_MODELS, f"{SMOL},{GEMMA}")
    at = app("pages/views/compare.py", model=SMOL, model_b="meta-llama/Llama-2-7b", text=TEXT, context="")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "does not offer" in error and "Llama-2-7b" in error and "nothing was loaded" in error
    assert "meta-llama/Llama-2-7b" not in loads and not at.get("plotly_chart")


@pytest.mark.models
def test_the_two_models_disagree_example_opens_compare():
    at = app(model=SMOL, text="hello", context="")
    at.sidebar.selectbox(key="example").set_value("Two models disagree").run()
    assert_clean(at)
    assert at.title[0].value == "Two models, one text"
    assert at.session_state["text"] == TEXT
