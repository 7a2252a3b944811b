"""Every page of the Streamlit app, driven headless with streamlit.testing.v1.AppTest.

The pages run with the embedded SmolLM2 135M (fast) and tiny sample sizes set through the URL,
as a shared link would; the home page also runs once with the default Gemma 3 270M. Each test
checks that numbers and figures appear and that nothing raised. Models are loaded once per
process (Streamlit's resource cache and the library's own memo), so only the first test pays.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bench.support.apptest import APP, app
from marginal_core import viz

pytestmark = pytest.mark.models  # every page opens with the sidebar's model loading
SMOL = "smollm2-135m"
SHORT = " Paris."  # 30 tokenizations under SmolLM2: small enough for exact


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def assert_clean(at: AppTest) -> None:
    """No exception element and no error message on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def plotly(at: AppTest) -> list:
    """The plotly figures on the page, as plotly Figure objects."""
    import plotly.io

    return [plotly.io.from_json(e.proto.spec) for e in at.get("plotly_chart")]


def values(array) -> list:
    """A plotly data array as a list (Streamlit sends numeric arrays base64-encoded)."""
    if isinstance(array, dict) and "bdata" in array:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    return at


# --------------------------------------------------------------------------------------------
# Home


def test_home_with_the_default_model_counts_scores_and_estimates():
    from marginal_core.estimators import Marginalizer
    from marginal_core.models import load_model
    from pages._app import defaults

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
    from marginal_core.estimators import Marginalizer
    from marginal_core.models import load_model, resolve_dtype
    from pages._app import loaders

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

    from marginal_core.lattice import build_lattice
    from marginal_core.models import load_tokenizer

    sentence = "The committee postponed its decision until the next meeting, citing the need for further analysis. "
    text = (sentence * 200)[:20_000]
    lifted = subprocess.run(  # a fresh interpreter: importing the app's helpers lifts the limit
        [sys.executable, "-c", "import sys; d = sys.get_int_max_str_digits(); import pages._app; "
         "print(d, sys.get_int_max_str_digits())"],
        cwd=Path(APP).parent, capture_output=True, text=True, check=True,
    )
    assert lifted.stdout.split() == ["4300", "0"]
    count = build_lattice(text, load_tokenizer(SMOL)).count()
    started = time.perf_counter()
    at = app("pages/lattice.py", model=SMOL, text=text)
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
    at = app("pages/lattice.py", model=SMOL, text=SHORT)
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
    at = app("pages/running.py", model=SMOL, text=text, context="", k="5", methods="lattice")
    click(at, "run")
    assert not at.exception and any("context window of 6 tokens" in e.value for e in at.error)
    at.run()  # e.g. a Stop click: a refused run is not a stopped one
    assert not any("Stopped" in w.value for w in at.warning)
    assert lm.prefills == before  # nothing was scored, not even the context
    at = app("pages/lattice.py", model=SMOL, text=text, context="")
    assert_clean(at)
    assert at.get("graphviz_chart")


def test_home_ends_a_long_canonical_score_when_a_newer_run_starts(monkeypatch):
    """Issue 13 item 0: Home scores the canonical tokenization as soon as it opens; for a long
    text that takes minutes, so it reports progress in tokens and a newer run of the session (a
    new text, a page switch) ends it at its next forward pass instead of leaving it computing."""
    import streamlit as st

    from pages._app import live

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
    from pages._app.defaults import HOME_MAX_SAMPLES

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

    from pages._app.inputs import MAX_LINKED_CHARS

    text = ("漢字かな交じり文の例です。" * 2000)[:15_000]
    assert len(quote(text)) > MAX_LINKED_CHARS
    at = app("pages/lattice.py", model=SMOL, text=" Paris.")
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
    at = app("pages/lattice.py", model=SMOL, text=SHORT)
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
    at = app("pages/lattice.py", model=SMOL, text=SHORT, dtype="float32", arcs_by="mass flow")
    assert_clean(at)
    if any(b.key == "flow_score" for b in at.button):  # not there when an earlier test scored it exactly
        click(at, "flow_score")
    assert_clean(at)
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "of the marginal" in dot and "best path:" in dot and "lower bound" not in dot
    arcs = at.dataframe[0].value
    assert arcs["mass_share"].between(0, 1).all() and arcs["best_path"].notna().all()
    long_text = " The capital of France is Paris."  # past the exact budget under SmolLM2
    at = app("pages/lattice.py", model=SMOL, text=long_text, dtype="float32", arcs_by="mass flow", W="1", Wauto="false")
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
    from marginal_core.lattice import build_lattice
    from marginal_core.models import load_tokenizer

    long_text = (" The committee postponed its decision until the next meeting." * 10)[:600]
    short, long = (build_lattice(t, load_tokenizer(SMOL)) for t in (SHORT, long_text))
    at = app("pages/lattice.py", model=SMOL, text=SHORT)
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
    at = app("pages/lattice.py", model=SMOL, text=long_text, L="5")
    assert at.number_input(key="L").value == 5 and any("No tokenization" in w.value for w in at.warning)


def test_lattice_page_windows_a_long_text():
    text = " ".join(["The committee postponed its decision until the next meeting."] * 5)
    at = app("pages/lattice.py", model=SMOL, text=text)
    assert_clean(at)
    assert at.toggle(key="whole").disabled  # too many arcs for a whole drawing
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "n0 " in dot
    at.number_input(key="first").set_value(5).run()
    assert_clean(at)
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "n0 " not in dot and "class=canonical" in dot


# --------------------------------------------------------------------------------------------
# Samplers, mass, rank correlation, running estimates


def test_samplers_page_shows_four_samplers_scored():
    """Off-by-one, uniform, proxy and (issue 11 item 1) the beam's complete paths with their log p."""
    at = app("pages/samplers.py", model=SMOL, text=SHORT, k="12", pk="10", W="2", dtype="float32", Wauto="false")
    assert_clean(at)
    off, uni = at.dataframe[0].value, at.dataframe[1].value
    assert len(off) == 4 and (off["tokens"] == 3).all()  # " Paris." has 4 one-token splits
    assert len(off) + len(uni) == 12
    assert [t.name for t in plotly(at)[0].data] == ["off-by-one", "uniform (length ≤ L)"]
    click(at, "score")
    assert_clean(at)
    off, uni, proxy = (d.value for d in at.dataframe[:3])
    assert off["log_p"].notna().all() and uni["log_p"].notna().all()
    assert {"log_q", "draws"} <= set(proxy.columns) and proxy["draws"].sum() == 10
    beam = at.dataframe[3].value
    assert "log_q" not in beam.columns and beam["log_p"].notna().all() and len(beam) >= 1
    assert beam["log_p"].is_monotonic_decreasing and beam["tokenization"].is_unique
    assert [t.name for t in plotly(at)[0].data][-2:] == ["proxy (constrained LM)", "beam"]
    shown = metrics(at)
    assert "Proxy re-draws" in shown and math.isfinite(float(shown["Beam: log p(text) ≥"]))
    assert any(m.value.startswith(f"#### Beam, W = 2 ({len(beam)} paths") for m in at.markdown)


def test_sample_tables_show_long_tokenizations_whole():
    """Issue 13 item 5b: tokenizations were cut at about 25 characters; their column now wraps,
    in rows tall enough for the longest one."""
    import json

    from pages._app import wrapped_tables

    at = app("pages/samplers.py", model=SMOL, text=" The committee postponed its decision until the next meeting.",
             k="12")
    assert_clean(at)
    off = at.dataframe[0]
    width = json.loads(off.proto.columns)["tokenization"]["width"]
    longest = off.value["tokenization"].map(len).max()
    assert longest > 60 and off.proto.row_height >= wrapped_tables.WRAP_FROM_PX  # Streamlit wraps only rows over 4rem
    lines = (off.proto.row_height - wrapped_tables.PAD_PX) // wrapped_tables.LINE_PX
    assert lines * width / wrapped_tables.CHAR_PX >= longest
    at = app("pages/samplers.py", model=SMOL, text=SHORT, k="12")
    assert at.dataframe[0].proto.row_height == 0  # one line holds " Paris." whole: default rows


@pytest.mark.parametrize("bad", [dict(k="-5"), dict(k="abc"), dict(k="1e8", L="0"), dict(L="inf"), dict(seed="-inf")])
def test_a_link_with_numbers_a_page_cannot_take_says_which_and_what_it_uses(bad):
    """Issue 13 item 5g: k=-5, k=abc, k=1e8 and L=0 silently became defaults, and an infinite
    number raised OverflowError inside Streamlit before any page code ran."""
    at = app("pages/samplers.py", model=SMOL, text=SHORT, **bad)
    assert_clean(at)
    (warning,) = [w.value for w in at.warning if "The link holds numbers" in w.value]
    for key, text in bad.items():
        assert f"`{key}={text}` (using {key} = {at.session_state[key]:,})" in warning, warning
    at.run()  # the widgets rule from now on: no more word about the link
    assert not [w.value for w in at.warning if "The link holds numbers" in w.value]
    at = app("pages/samplers.py", model=SMOL, text=SHORT, k="12", L="0")
    (warning,) = [w.value for w in at.warning if "The link holds numbers" in w.value]
    assert "`L=0`" in warning and "k=" not in warning and at.session_state["k"] == 12


def test_mass_page_exact_on_a_short_text():
    at = app("pages/mass.py", model=SMOL, text=SHORT)
    assert_clean(at)
    assert at.toggle(key="exact").value
    if any(b.key == "compute" for b in at.button):  # not there when an earlier test scored these paths
        click(at, "compute")
    assert_clean(at)
    shown = metrics(at)
    shares = [float(shown[k].rstrip("%")) for k in ("Canonical share", "Off-by-one share", "Rest")]
    assert math.isclose(sum(shares), 100, abs_tol=0.05)
    figures = plotly(at)
    assert len(figures) == 4
    assert set(figures[0].data[0].x) <= {"canonical", "off-by-one", "rest"}


def test_mass_page_shares_of_the_beams_paths():
    """Issue 11 item 1: the mass found by the beam, beside the exact mass once both are known."""
    at = app("pages/mass.py", model=SMOL, text=SHORT, dtype="float32", exact="false", source="beam", W="2", Wauto="false")
    assert_clean(at)
    assert at.number_input(key="k").disabled and not at.number_input(key="W").disabled
    if any(b.key == "compute" for b in at.button):  # not there when an earlier test ran this beam
        click(at, "compute")
    assert_clean(at)
    shown = metrics(at)
    shares = [float(shown[k].rstrip("%")) for k in ("Canonical share", "Off-by-one share", "Rest")]
    assert math.isclose(sum(shares), 100, abs_tol=0.05) and "log p(text) ≥" in shown
    at.toggle(key="exact").set_value(True).run()
    if any(b.key == "compute" for b in at.button):
        click(at, "compute")
    assert_clean(at)
    (found,) = [c.value for c in at.caption if c.value.startswith("Non-canonical mass found")]
    assert "exact" in found and "beam (W = 2)" in found


def test_a_link_keeps_the_exact_toggle_and_the_arcs_filter():
    """Issue 13 item 5h: the mass page's Exact toggle and the lattice page's "only arcs inside
    the window" were not in the URL, so a shared link showed another view."""
    at = app("pages/mass.py", model=SMOL, text=SHORT, exact="false")
    assert_clean(at)
    assert not at.toggle(key="exact").value and not at.number_input(key="k").disabled  # sampled, not exact
    text = " ".join(["The committee postponed its decision until the next meeting."] * 5)
    at = app("pages/lattice.py", model=SMOL, text=text)
    inside = len(at.dataframe[0].value)
    at = app("pages/lattice.py", model=SMOL, text=text, only_window="false")
    assert_clean(at)
    assert not at.toggle(key="only_window").value and len(at.dataframe[0].value) > inside


def test_rank_page_scatter_and_table():
    at = app("pages/rank.py", model=SMOL, text=" Paris is the capital of France.", pk="20",
             lengths="50", per="1", tk="6", dtype="float32")
    assert_clean(at)
    if any(b.key == "draw" for b in at.button):  # not there when an earlier test drew them
        click(at, "draw")
    assert_clean(at)
    assert "Spearman ρ" in metrics(at)
    (scatter,) = plotly(at)
    assert scatter.data[0].mode == "markers"
    click(at, "table")
    assert_clean(at)
    summary, rows = at.dataframe[0].value, at.dataframe[1].value
    assert summary["sentences"].tolist() == [1] and len(rows) == 1 and rows["draws"].tolist() == [6]
    # Table 1's task (the evaluator's stored samples) gives the rho of the library's own proxy run
    from marginal_core.analysis import spearman
    from marginal_core.estimators import Marginalizer
    from marginal_core.models import load_model
    from pages._app.table1 import RANK_SENTENCES

    est = Marginalizer(load_model(SMOL, dtype="float32", device="cpu"), RANK_SENTENCES[50][0]).proxy(6, seed=0)
    rho, n = spearman(est)
    assert rows["distinct"].tolist() == [n] and (rows["rho"].isna().all() if rho != rho
                                                 else rows["rho"].tolist() == [pytest.approx(rho, abs=1e-9)])


def test_running_page_plots_lattice_proxy_and_exact():
    at = app("pages/running.py", model=SMOL, text=SHORT, k="15", seed="3", y="log p(text)")
    assert_clean(at)
    before = plotly(at)  # the axes before Run (the exact line if another page computed it): the browser
    assert len(before) == 2 and before[1].layout.xaxis.title.text == "seconds"  # loads its plotting code early
    assert not {"lattice", "proxy"} & {t.name for f in before for t in f.data}
    click(at, "run")
    assert_clean(at)
    by_samples, by_seconds = plotly(at)
    names = [t.name for t in by_samples.data]
    assert names == ["lattice", "proxy", "canonical", "exact"]
    assert len(values(by_samples.data[0].x)) <= 15 and values(by_samples.data[1].x) == list(range(1, 16))
    assert by_seconds.layout.xaxis.title.text == "seconds"
    table = at.dataframe[0].value
    assert set(table["method"]) == {"lattice", "proxy", "exact"}
    exact = table.set_index("method").loc["exact", "log p(text)"]
    lattice = table.set_index("method").loc["lattice", "log p(text)"]
    assert lattice <= exact + 1e-4


def test_running_page_opens_on_the_non_canonical_mass_where_the_marginal_is_flat_and_says_so():
    """Issue 24: with nothing known the page opens on the non-canonical mass and says why; once a
    finished result shows most of the mass off the canonical (" Tokyo" under SmolLM2: 99%), a
    page opened on that text shows log p(text). The table speaks in words, not field names."""
    at = app("pages/running.py", model=SMOL, text=" Tokyo", context="", dtype="float32", k="8", methods="lattice")
    assert_clean(at)
    assert at.segmented_control(key="y").value == "non-canonical mass"
    assert any(c.value.startswith("Opened on the non-canonical mass") for c in at.caption)
    click(at, "run")
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table.columns)[:3] == ["method", "log p(text)", "log p(canonical)"]
    assert {"distinct paths", "seconds", "mass off the canonical"} <= set(table.columns)
    assert "log_marginal" not in table.columns and "None" not in table.astype(str).to_numpy()
    at.run()
    assert at.segmented_control(key="y").value == "non-canonical mass"  # a run does not move the view
    # Results are shared by every session: a link opened now knows 99% of the mass is off the canonical.
    fresh = app("pages/running.py", model=SMOL, text=" Tokyo", context="", dtype="float32", k="8", methods="lattice")
    assert fresh.segmented_control(key="y").value == "log p(text)"
    assert not any(c.value.startswith("Opened on the non-canonical mass") for c in fresh.caption)


def test_running_page_plots_the_beam_beside_exact():
    """Issue 11 item 1: the beam on the running page, keyed by its width (URL key W), its points
    the paths completed, a row in the summary table, a lower bound of the exact marginal."""
    at = app("pages/running.py", model=SMOL, text=SHORT, dtype="float32", methods="beam", W="2", y="log p(text)", Wauto="false")
    assert_clean(at)
    assert at.number_input(key="W").value == 2 and at.multiselect(key="methods").value == ["beam"]
    click(at, "run")
    assert_clean(at)
    by_samples, by_seconds = plotly(at)
    assert [t.name for t in by_samples.data] == ["beam (W = 2)", "canonical", "exact"]
    table = at.dataframe[0].value.set_index("method")
    assert set(table.index) == {"beam", "exact"} and table.loc["beam", "done"] == "yes"
    paths = int(table.loc["beam", "samples"])
    assert values(by_samples.data[0].x) == list(range(1, paths + 1))  # one point per completed path
    seconds = values(by_seconds.data[0].x)
    assert seconds[0] == 0 and all(a <= b for a, b in zip(seconds, seconds[1:]))
    assert table.loc["beam", "log p(text)"] <= table.loc["exact", "log p(text)"] + 1e-4


def test_the_anytime_beam_draws_its_rounds_and_a_far_lower_bound_is_warned_about():
    """Issue 21: Auto W (the default) widens the beam; the plots mark each round with its width, a
    caption says how converged the bound is (on "Donaudampfschiff" a second round is needed), and
    the lattice sampler's bound at k = 4, some 10 nats below the exact value on "Entschuldigung"
    (where what W = 16 pruned cannot hold 0.01 nats more: one round), comes with a warning naming
    exact, the best there is (on this page and on the mass page)."""
    widened = app("pages/running.py", model=SMOL, text="Donaudampfschiff", dtype="float32", methods=["beam"])
    assert widened.toggle(key="Wauto").value and widened.number_input(key="W").disabled
    click(widened, "run")
    assert_clean(widened)
    _, by_seconds = plotly(widened)
    marks = [a.text for a in by_seconds.layout.annotations]
    assert "W=16" in marks and "W=64" in marks
    assert any(c.value.startswith("Anytime beam: widths 16 → 64; what it pruned could hold at most")
               for c in widened.caption)
    text = "Entschuldigung"
    at = app("pages/running.py", model=SMOL, text=text, dtype="float32", methods=["lattice", "beam"], k="4")
    click(at, "run")
    assert_clean(at)
    assert any(c.value.startswith("Anytime beam: width 16; what it pruned could hold at most") for c in at.caption)
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith("The lattice bound is") and "nats below the best bound found for this text, exact:" in warning
    mass = app("pages/mass.py", model=SMOL, text=text, dtype="float32", exact="false", source="lattice", k="4")
    assert_clean(mass)
    assert any("nats below the best bound found for this text" in w.value for w in mass.warning)


def test_a_bound_is_compared_only_with_bounds():
    from marginal_core.estimators import Marginalizer
    from marginal_core.models import load_model
    from pages._app.bounds import shortfall

    m = Marginalizer(load_model(SMOL, dtype="float32", device="cpu"), "Entschuldigung")
    beam, lattice, proxy = m.beam(), m.lattice_estimate(4), m.proxy(4)
    best = ("beam (W = auto)", beam)
    assert "misses at least 99" in shortfall(lattice, "lattice (k = 4)", best)
    assert shortfall(beam, "beam (W = auto)", best) is None  # the best itself
    assert shortfall(proxy, "proxy (k = 4)", best) is None  # an estimate, not a bound
    assert shortfall(lattice, "lattice (k = 4)", None) is None  # nothing to compare with


def test_live_streams_match_the_library_estimators():
    """The app's chunked runs give the library's numbers, and a stopped run keeps its chunks."""
    from marginal_core.estimators import Marginalizer
    from marginal_core.models import load_model
    from pages._app import live

    m = Marginalizer(load_model(SMOL), " Paris is the capital", None)
    parts = list(m.stream("lattice", samples=30, chunk=7))
    assert [p.num_samples for p in parts] == [7, 14, 21, 28, 30]
    assert [p.run.done for p in parts] == [False] * 4 + [True]
    assert [n for n, _ in parts[-1].run.checkpoints] == [7, 14, 21, 28, 30]
    assert all(a[1] <= b[1] for a, b in zip(parts[-1].run.checkpoints, parts[-1].run.checkpoints[1:]))
    whole = m.lattice_estimate(30)
    assert parts[-1].paths.tolist() == whole.paths.tolist()
    assert parts[-1].log_noncanonical == pytest.approx(whole.log_noncanonical, abs=1e-3)
    proxy = list(m.stream("proxy", samples=12, chunk=5))
    assert [p.num_samples for p in proxy] == [5, 10, 12]
    assert [p.run.fraction for p in proxy] == pytest.approx([5 / 12, 10 / 12, 1.0])
    first = m.proxy(5, chunk=5)
    assert proxy[-1].paths.tolist()[:5] == first.paths.tolist()
    assert math.isfinite(proxy[-1].log_marginal)
    live = list(live.live_stream(m, "proxy", samples=120))  # batches of a quarter of k, at least 100
    assert [p.num_samples for p in live] == [100, 120]
    seen: list = []
    for est in m.stream("lattice", samples=30, chunk=7, should_stop=lambda: len(seen) >= 2):
        seen.append(est)
    assert [p.num_samples for p in seen] == [7, 14, 14]
    assert seen[-1].run.cancelled and not seen[-1].run.done and seen[-1].run.requested == 30


def test_the_first_live_update_of_a_large_run_comes_after_a_few_samples(monkeypatch):
    """Issue 13 item 4: whatever k, a live run's first chunk is live.FIRST_CHUNK samples (then
    chunks double), so the first partial estimate of k = 5,000 comes within seconds. The run is
    stopped right after that first update, and the page says what was kept."""
    import time

    import streamlit as st

    from pages._app import live

    updates: list[tuple[int, float]] = []
    real = live.live_stream

    def first_update_then_stop(*args, **kwargs):
        started = time.monotonic()
        for est in real(*args, **kwargs):
            updates.append((est.num_samples, time.monotonic() - started))
            yield est
            st.session_state["_run_token"].set()  # as a Stop click would: ends the run at its next check

    monkeypatch.setattr(live, "live_stream", first_update_then_stop)
    text = " ".join(["The committee postponed its decision until the next meeting."] * 2)
    at = app("pages/running.py", model=SMOL, text=text, k="5000", methods="lattice")
    click(at, "run")
    print(f"first update after {updates[0][1]:.1f} s", flush=True)
    assert updates[0][0] == live.FIRST_CHUNK
    at.run()
    assert_clean(at)
    assert any(w.value.startswith(f"Stopped: lattice after {live.FIRST_CHUNK} of 5,000 samples") for w in at.warning)


def test_stop_ends_a_live_run_within_a_forward_pass_and_says_so(monkeypatch):
    """A newer run of the session (what a Stop click or a widget change starts) ends a live run
    mid-chunk, at its next forward pass; the next view says it was stopped."""
    import threading
    import time

    from pages._app import live

    passes: list[float] = []  # when each forward pass of the run reported progress
    scoring = threading.Event()
    report = live.Bar.progress

    def spy(self, done: float, total: int) -> None:
        passes.append(time.monotonic())
        scoring.set()
        report(self, done, total)

    monkeypatch.setattr(live.Bar, "progress", spy)
    text = " ".join(["The committee postponed its decision until the next meeting."] * 2)
    at = app("pages/running.py", model=SMOL, text=text, k="5000", methods="lattice")
    assert_clean(at)
    assert not at.toggle(key="exact").value  # too many tokenizations: lattice only
    at.button(key="run").click()
    worker = threading.Thread(target=at.run, daemon=True)
    worker.start()
    assert scoring.wait(timeout=600)  # the first chunk is being scored
    stopped_at = time.monotonic()
    at.session_state["_run_token"].set()  # what the next script run of this session does first
    worker.join(timeout=600)
    assert not worker.is_alive()
    print(f"stopped {time.monotonic() - stopped_at:.1f} s after the request", flush=True)
    assert len([t for t in passes if t >= stopped_at]) <= 1  # it ended at the next forward pass
    ((run,),) = [list(at.session_state["_unfinished_runs"].values())]
    at.run()
    assert_clean(at)
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("Stopped: lattice ") for w in warnings), warnings
    if run.estimate is None:
        assert any("before its first chunk" in w for w in warnings), warnings
    assert not any("Press Run to start scoring" in c.value for c in at.caption)


# --------------------------------------------------------------------------------------------
# Downstream tasks


@pytest.fixture
def task_folders(tmp_path, monkeypatch):
    """The task pages keep their results folders under a temporary root (not the user's cache)."""
    from pages._app import tasks

    monkeypatch.setattr(tasks, "cache_root", lambda: tmp_path)
    return tmp_path


def test_qa_page_is_honest_about_time_and_a_link_keeps_the_chosen_item(task_folders):
    """Issue 13 items 5b, 5h, 5j: the caption promised seconds where a question takes minutes;
    the chosen question, answer and method were not in the URL; tokenizations were cut."""
    import json

    from marginal_core.tasks import qa

    url = dict(model=SMOL, qa_limit="2", qa_k="3", qa_methods=["canonical", "lattice"])
    at = app("pages/qa.py", **url)
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "questions ×" in c.value]
    assert "expect minutes per question on a CPU" in note and "seconds" not in note, note
    click(at, "qa_run")
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "questions ×" in c.value]
    assert "every question is scored" in note, note
    samples = at.dataframe[-1]
    more = app("pages/qa.py", **{**url, "qa_limit": "3"})
    (note,) = [c.value for c in more.caption if "questions ×" in c.value]
    assert re.search(r"earlier runs here took \d+ (s|min) per question, so the 1 left take about \d", note), note
    assert json.loads(samples.proto.columns)["tokenization"]["width"] > 0  # wrapped, not cut
    # A link that names the second question, its second answer and the lattice samples shows them.
    second = qa.load_questions(at.selectbox(key="qa_dataset").value, 2)[1]
    at = app("pages/qa.py", **url, qa_pick=at.selectbox(key="qa_pick").options[1], qa_answer=second.choices[1],
             qa_sample_method="lattice")
    assert_clean(at)
    assert at.selectbox(key="qa_pick").value.id == second.id
    assert at.selectbox(key="qa_answer").value == 1 and at.selectbox(key="qa_sample_method").value == "lattice"
    assert second.question in "".join(m.value for m in at.markdown)
    # the answer's index works too (issue 25: qa_answer=3 was ignored)
    at = app("pages/qa.py", **url, qa_pick=at.selectbox(key="qa_pick").options[1], qa_answer="1")
    assert_clean(at)
    assert at.selectbox(key="qa_answer").value == 1


def test_a_qa_run_that_another_session_is_writing_is_followed_not_repeated(task_folders, monkeypatch):
    """A class pressing Run on the same Q&A setup: while another run holds the results folder,
    the page's bar follows it (no error), then the page scores what that run left, once."""
    import json
    import threading

    from marginal_core.tasks.writer import RunLock
    from pages._app import live

    at = app("pages/qa.py", model=SMOL, qa_limit="1", qa_k="2", qa_methods=["canonical"])
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
    at = app("pages/translation.py", **url)
    assert_clean(at)
    (note,) = [c.value for c in at.caption if "sentences ×" in c.value]
    assert "expect minutes per sentence on a CPU" in note, note
    click(at, "mt_run")
    assert_clean(at)
    more = app("pages/translation.py", **{**url, "mt_limit": "3"})
    (note,) = [c.value for c in more.caption if "sentences ×" in c.value]
    assert re.search(r"earlier runs here took \d+ (s|min) per sentence, so the 1 left take about \d", note), note
    second = at.selectbox(key="mt_pick").options[1]  # as the URL holds it
    at = app("pages/translation.py", **url, mt_pick=second, mt_sample_method="lattice")
    assert_clean(at)
    assert at.selectbox(key="mt_pick").value.index == 1
    cands = at.selectbox(key="mt_cand").options
    at = app("pages/translation.py", **url, mt_pick=second, mt_cand=cands[1], mt_sample_method="lattice")
    assert at.selectbox(key="mt_cand").value == 1 and at.selectbox(key="mt_sample_method").value == "lattice"
