"""The Home and Lattice pages of the Streamlit app, driven headless with streamlit.testing.v1.AppTest.

The pages run with the embedded SmolLM2 135M (fast) and tiny sample sizes set through the URL,
as a shared link would; the home page also runs once with the default Gemma 3 270M. Each test
checks that numbers and figures appear and that nothing raised. Models are loaded once per
process (Streamlit's resource cache and the library's own memo), so only the first test pays.
The other pages' tests are in tests/app/test_app_estimates.py and tests/app/test_app_tasks.py; the
helpers they share are in tests/app_support.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.support.apptest import APP, app
from marginal_core import viz
from tests.app_support import SHORT, SMOL, assert_clean, click, metrics

pytestmark = pytest.mark.models  # every page opens with the sidebar's model loading


# --------------------------------------------------------------------------------------------
# Home


def test_home_with_the_default_model_counts_scores_and_estimates():
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model
    from pages._app.ui import defaults

    at = app(k="8", dtype="float32")  # pinned: auto is bfloat16 on a CPU fast at it
    assert_clean(at)
    assert at.sidebar.selectbox(key="model").value == "gemma3-270m"
    m = Marginalizer(load_model("gemma3-270m", dtype="float32"), defaults.DEFAULT_TEXT, defaults.DEFAULT_CONTEXT)
    shown = metrics(at)
    assert shown["Tokenizations"] == viz.count_label(m.lattice.count())
    assert shown["Canonical tokens"] == str(len(m.lattice.canonical))
    assert shown["log p(canonical)"] == viz.format_log(m.canonical_score().log_p)
    html = "".join(e.proto.body for e in at.get("html"))
    assert html.count("<span title=") == len(m.lattice.canonical)
    click(at, "estimate")
    assert_clean(at)
    shown = metrics(at)
    estimate = float(shown["log p(text) ≥"])
    assert estimate >= m.canonical_score().log_p - 1e-3
    assert shown["Distinct paths scored"] == "8"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_precision_control_loads_the_model_in_that_dtype_and_says_so(dtype):
    """The sidebar's Precision (URL key dtype) goes to the loader: the model is loaded in that
    dtype, the sidebar and the load box name it beside the device, and the scores are that
    model's; auto shows what it resolves to on this machine."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model, resolve_dtype
    from pages._app.runtime import loaders

    loaders._loaded.clear()  # the load box shows on a process's first load of a model: an earlier test's is forgotten
    at = app(model=SMOL, text=SHORT, context="", dtype=dtype)
    assert_clean(at)
    assert at.sidebar.selectbox(key="dtype").value == dtype
    assert f"Runs on: **CPU ({dtype}," in " ".join(c.value for c in at.sidebar.caption)
    assert any(f"on CPU ({dtype}," in s.label for s in at.get("status"))
    m = Marginalizer(load_model(SMOL, device="cpu", dtype=dtype), SHORT, None)
    assert metrics(at)["log p(canonical)"] == viz.format_log(m.canonical_score().log_p)
    at = app(model=SMOL, text=SHORT, context="")
    auto = str(resolve_dtype("auto", "cpu")).removeprefix("torch.")
    assert at.sidebar.selectbox(key="dtype").value == "auto"
    assert f"Runs on: **CPU ({auto}," in " ".join(c.value for c in at.sidebar.caption)


def test_home_bad_inputs_give_friendly_messages():
    at = app(model=SMOL, text="")
    assert not at.exception
    assert any("text is empty" in e.value for e in at.error)
    at = app(model="no-such-org/no-such-model-xyz", text="hello")
    assert not at.exception
    assert any("cannot load model" in e.value for e in at.error)
    assert "Tokenizations" not in metrics(at)


def test_the_exact_count_of_a_20000_character_text_is_shown():
    """Issue 13 item 2: counts pass Python's 4,300-digit int-to-str limit; the app lifts it at
    import (as the CLI does) and shows the count abbreviated, every digit in an expander to copy
    or download. Shown on the Lattice page, which needs no model pass (Home shows the same count
    through the same helper, but also scores the 3,435 canonical tokens, which takes minutes)."""
    import subprocess
    import sys
    import time

    from marginal_core.lattice.graph import lattice_of
    from marginal_core.models import load_tokenizer

    sentence = "The committee postponed its decision until the next meeting, citing the need for further analysis. "
    text = (sentence * 200)[:20_000]
    lifted = subprocess.run(  # a fresh interpreter: importing the app's helpers lifts the limit
        [sys.executable, "-c", "import sys; d = sys.get_int_max_str_digits(); import pages._app; "
         "print(d, sys.get_int_max_str_digits())"],
        cwd=Path(APP).parent, capture_output=True, text=True, check=True,
    )
    assert lifted.stdout.split() == ["4300", "0"]
    count = lattice_of(text, load_tokenizer(SMOL)).count()
    started = time.perf_counter()
    at = app("pages/views/lattice.py", model=SMOL, text=text)
    print(f"lattice page of a 20,000-character text in {time.perf_counter() - started:.1f} s", flush=True)
    assert_clean(at)
    digits = str(count)
    assert len(digits) > 4300
    assert metrics(at)["Tokenizations"] == viz.count_label(count)
    (box,) = [e for e in at.expander if e.label.startswith("The exact number of tokenizations:")]
    assert f"({len(digits):,} digits)" in box.label
    assert digits in [c.value for c in at.code]
    assert any(b.proto.label == f"Download the {len(digits):,} digits" for b in at.get("download_button"))
    # A small count shows every digit in the metric and needs no expander.
    at = app("pages/views/lattice.py", model=SMOL, text=SHORT)
    assert metrics(at)["Tokenizations"] == "30" and not at.code


def test_texts_beyond_the_context_window_get_a_message_before_any_scoring(monkeypatch):
    """Issue 13 item 0: a text whose canonical tokenization passes the model's context window is
    refused with its token count and the model's limit before any forward pass; the lattice
    views still work. The window is shrunk here, so a short text stands in for a 100,000-character one."""
    from marginal_core.models import load_model

    lm = load_model(SMOL, device="cpu")  # the object the app's loader caches
    monkeypatch.setattr(lm.config, "max_position_embeddings", 6)
    before = lm.prefills
    text = " Paris is the capital of France."
    at = app(model=SMOL, text=text, context="")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert error.startswith("Too long for the model: the text's canonical tokenization has")
    assert "context window of 6 tokens" in error and "Lattice page" in error
    assert "Something went wrong" not in error
    assert "Tokenizations" in metrics(at) and "log p(canonical)" not in metrics(at)
    at = app("pages/views/running.py", model=SMOL, text=text, context="", k="5", methods="lattice")
    click(at, "run")
    assert not at.exception and any("context window of 6 tokens" in e.value for e in at.error)
    at.run()  # e.g. a Stop click: a refused run is not a stopped one
    assert not any("Stopped" in w.value for w in at.warning)
    assert lm.prefills == before  # nothing was scored, not even the context
    at = app("pages/views/lattice.py", model=SMOL, text=text, context="")
    assert_clean(at)
    assert at.get("graphviz_chart")


def test_home_ends_a_long_canonical_score_when_a_newer_run_starts(monkeypatch):
    """Issue 13 item 0: Home scores the canonical tokenization as soon as it opens; for a long
    text that takes minutes, so it reports progress in tokens and a newer run of the session (a
    new text, a page switch) ends it at its next forward pass instead of leaving it computing."""
    import streamlit as st

    from pages._app.runtime import live

    calls: list[tuple[float, int]] = []
    real = live.Bar.progress

    def newer_run_after_the_first_pass(self, done: float, total: int) -> None:
        calls.append((done, total))
        st.session_state["_run_token"].set()  # what the session's next script run does first
        real(self, done, total)

    monkeypatch.setattr(live.Bar, "progress", newer_run_after_the_first_pass)
    text = (" The committee postponed its decision until the next meeting." * 110)[:6_600]  # > 1,024 tokens: 2 passes
    at = app(model=SMOL, text=text)
    assert not at.exception
    assert len(calls) == 1 and calls[0][0] < calls[0][1]  # ended after its first pass, not at its end
    assert "log p(canonical)" not in metrics(at)


def test_home_caps_k_for_its_one_click_estimate():
    """Issue 13 item 0: Home's estimate takes at most HOME_MAX_SAMPLES; a larger k says where it runs."""
    from pages._app.ui.defaults import HOME_MAX_SAMPLES

    at = app(model=SMOL, text=SHORT, k=str(HOME_MAX_SAMPLES + 1))
    assert_clean(at)
    assert at.button(key="estimate").disabled
    assert any(f"at most {HOME_MAX_SAMPLES:,} samples" in i.value and "Running estimates" in i.value for i in at.info)
    at.number_input(key="k").set_value(HOME_MAX_SAMPLES).run()
    assert not at.button(key="estimate").disabled and not at.info


def test_home_headline_shows_a_tiny_gain_in_scientific_notation():
    """Issue 13 item 5c: "+0.000 nats vs canonical, mass off the canonical 0.00%" hid a gain of
    about 2e-05 nats (SmolLM2 puts almost all of " Hello world" on its canonical path)."""
    at = app(model=SMOL, text=" Hello world", context="Question: What is the capital of France?\nAnswer:", k="8")
    click(at, "estimate")
    assert_clean(at)
    (headline,) = [m for m in at.metric if m.label == "log p(text) ≥"]
    assert re.fullmatch(r"\+\d\.\de-0[4-6] nats vs canonical", headline.delta), headline.delta
    assert re.fullmatch(r"\d\.\de-0[2-4]%", metrics(at)["Mass off the canonical"])


def test_a_text_too_long_for_a_link_stays_in_the_session_and_out_of_the_url():
    """Issue 13 item 5a: a URL past about 128 KB (15,000 CJK characters) made the server answer
    HTTP 400, so the page could not be reloaded or shared; such a text now stays out of the URL
    and the sidebar says so."""
    from urllib.parse import quote

    from pages._app.ui.inputs import MAX_LINKED_CHARS

    text = ("漢字かな交じり文の例です。" * 2000)[:15_000]
    assert len(quote(text)) > MAX_LINKED_CHARS
    at = app("pages/views/lattice.py", model=SMOL, text=" Paris.")
    assert at.query_params["text"] == " Paris."
    at.sidebar.text_area(key="text").input(text).run()
    assert_clean(at)
    assert "text" not in at.query_params and at.session_state["text"] == text
    assert any("too long for a link" in c.value for c in at.sidebar.caption)
    assert "Tokenizations" in metrics(at)  # the page works on it all the same
    at.sidebar.text_area(key="text").input(" Paris.").run()
    assert not any("too long for a link" in c.value for c in at.sidebar.caption)


# --------------------------------------------------------------------------------------------
# Lattice


def test_lattice_page_draws_the_lattice_with_downloads_and_arcs():
    at = app("pages/views/lattice.py", model=SMOL, text=SHORT)
    assert_clean(at)
    (chart,) = at.get("graphviz_chart")
    dot = chart.proto.spec
    assert dot.startswith("digraph") and "class=canonical" in dot and "off_by_one" in dot
    assert metrics(at)["Tokenizations"] == "30"
    assert len(at.get("download_button")) == 2
    (arcs,) = at.dataframe
    assert len(arcs.value) == int(metrics(at)["Arcs"])
    # A small length bound greys arcs out and says so.
    at.number_input(key="L").set_value(2).run()
    assert_clean(at)
    assert "greyed" in at.get("graphviz_chart")[0].proto.spec
    assert not at.dataframe[0].value["within_L"].all()


def test_lattice_page_mass_flow_mode():
    """Issue 11 item 5: arcs drawn by their share of the mass: exact on a small lattice, the
    beam's paths (a lower bound) on one past the exact budget."""
    at = app("pages/views/lattice.py", model=SMOL, text=SHORT, dtype="float32", arcs_by="mass flow")
    assert_clean(at)
    if any(b.key == "flow_score" for b in at.button):  # not there when an earlier test scored it exactly
        click(at, "flow_score")
    assert_clean(at)
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "of the marginal" in dot and "best path:" in dot and "lower bound" not in dot
    arcs = at.dataframe[0].value
    assert arcs["mass_share"].between(0, 1).all() and arcs["best_path"].notna().all()
    long_text = " The capital of France is Paris."  # past the exact budget under SmolLM2
    at = app("pages/views/lattice.py", model=SMOL, text=long_text, dtype="float32", arcs_by="mass flow", W="1", Wauto="false")
    assert_clean(at)
    assert at.segmented_control(key="flow_source").value == "beam"
    if any(b.key == "flow_score" for b in at.button):
        click(at, "flow_score")
    assert_clean(at)
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "of the mass the beam found (a lower bound)" in dot
    assert any("a lower bound" in c.value for c in at.caption)


def test_the_length_bound_follows_the_text_unless_set_by_hand():
    """Issue 13 item 3: a new text gets its own default L (canonical length + 10); an L set by
    hand stays, and one below the shortest tokenization says so and offers the smallest feasible L."""
    from marginal_core.lattice.graph import lattice_of
    from marginal_core.models import load_tokenizer

    long_text = (" The committee postponed its decision until the next meeting." * 10)[:600]
    short, long = (lattice_of(t, load_tokenizer(SMOL)) for t in (SHORT, long_text))
    at = app("pages/views/lattice.py", model=SMOL, text=SHORT)
    assert_clean(at)
    assert at.number_input(key="L").value == short.default_max_len()
    at.sidebar.text_area(key="text").set_value(long_text).run()
    assert_clean(at)
    assert at.number_input(key="L").value == long.default_max_len()
    assert not any("No tokenization" in w.value for w in at.warning)
    # Set by hand below the shortest tokenization: said plainly, with the smallest feasible L.
    at.number_input(key="L").set_value(5).run()
    (warning,) = [w.value for w in at.warning if "No tokenization" in w.value]
    assert f"the shortest has {long.min_len:,}" in warning and f"at least {long.min_len:,}" in warning
    click(at, "L_feasible")
    assert_clean(at)
    assert at.number_input(key="L").value == long.min_len
    assert not any("No tokenization" in w.value for w in at.warning)
    # A hand-set L survives a change of text.
    at.sidebar.text_area(key="text").set_value(SHORT).run()
    assert at.number_input(key="L").value == long.min_len
    # A shared link's L is kept as well.
    at = app("pages/views/lattice.py", model=SMOL, text=long_text, L="5")
    assert at.number_input(key="L").value == 5 and any("No tokenization" in w.value for w in at.warning)


def test_lattice_page_windows_a_long_text():
    text = " ".join(["The committee postponed its decision until the next meeting."] * 5)
    at = app("pages/views/lattice.py", model=SMOL, text=text)
    assert_clean(at)
    assert at.toggle(key="whole").disabled  # too many arcs for a whole drawing
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "n0 " in dot
    at.number_input(key="first").set_value(5).run()
    assert_clean(at)
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "n0 " not in dot and "class=canonical" in dot
