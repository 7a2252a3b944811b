"""Every page of the Streamlit app, driven headless with streamlit.testing.v1.AppTest.

The pages run with the embedded SmolLM2 135M (fast) and tiny sample sizes set through the URL,
as a shared link would; the home page also runs once with the default Gemma 3 270M. Each test
checks that numbers and figures appear and that nothing raised. Models are loaded once per
process (Streamlit's resource cache and the library's own memo), so only the first test pays.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from marginal_core import viz

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SMOL = "smollm2-135m"
SHORT = " Paris."  # 30 tokenizations under SmolLM2: small enough for exact


def app(page: str | None = None, **params: str) -> AppTest:
    """An AppTest of app.py opened on a page with URL parameters, as a shared link opens it."""
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in params.items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    return at.run()


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

    at = app(k="8")
    assert_clean(at)
    assert at.sidebar.selectbox(key="model").value == "gemma3-270m"
    m = Marginalizer(load_model("gemma3-270m"), defaults.DEFAULT_TEXT, defaults.DEFAULT_CONTEXT)
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


def test_home_bad_inputs_give_friendly_messages():
    at = app(model=SMOL, text="")
    assert not at.exception
    assert any("text is empty" in e.value for e in at.error)
    at = app(model="no-such-org/no-such-model-xyz", text="hello")
    assert not at.exception
    assert any("cannot load model" in e.value for e in at.error)
    assert "Tokenizations" not in metrics(at)


def test_home_shows_the_exact_count_of_a_20000_character_text(monkeypatch):
    """Issue 13 item 2: counts pass Python's 4,300-digit int-to-str limit; the app lifts it at
    import (as the CLI does) and shows the count abbreviated, every digit in an expander to copy
    or download. The canonical score is stubbed: scoring 3,435 tokens is not what this tests."""
    import subprocess
    import sys
    import time

    from marginal_core.estimators import CanonicalScore, Marginalizer
    from marginal_core.lattice import build_lattice
    from marginal_core.models import load_tokenizer

    monkeypatch.setattr(Marginalizer, "canonical_score", lambda self: CanonicalScore(-1.0, 0.0))
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
    at = app(model=SMOL, text=text)
    print(f"home of a 20,000-character text in {time.perf_counter() - started:.1f} s", flush=True)
    assert_clean(at)
    digits = str(count)
    assert len(digits) > 4300
    assert metrics(at)["Tokenizations"] == viz.count_label(count)
    (box,) = [e for e in at.expander if e.label.startswith("The exact number of tokenizations")]
    assert f"({len(digits):,} digits)" in box.label
    assert [c.value for c in at.code] == [digits]
    assert any(b.proto.label == f"Download the {len(digits):,} digits" for b in at.get("download_button"))
    # A small count shows every digit in the metric and needs no expander.
    at = app(model=SMOL, text=SHORT)
    assert metrics(at)["Tokenizations"] == "30" and not at.code


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


def test_samplers_page_shows_three_samplers_scored():
    at = app("pages/samplers.py", model=SMOL, text=SHORT, k="12", pk="10")
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
    assert [t.name for t in plotly(at)[0].data][-1] == "proxy (constrained LM)"
    assert "Proxy re-draws" in metrics(at)


def test_mass_page_exact_on_a_short_text():
    at = app("pages/mass.py", model=SMOL, text=SHORT)
    assert_clean(at)
    assert at.toggle(key="exact").value
    click(at, "compute")
    assert_clean(at)
    shown = metrics(at)
    shares = [float(shown[k].rstrip("%")) for k in ("Canonical share", "Off-by-one share", "Rest")]
    assert math.isclose(sum(shares), 100, abs_tol=0.05)
    figures = plotly(at)
    assert len(figures) == 4
    assert set(figures[0].data[0].x) <= {"canonical", "off-by-one", "rest"}


def test_rank_page_scatter_and_table():
    at = app("pages/rank.py", model=SMOL, text=" Paris is the capital of France.", pk="20",
             lengths="50", per="1", tk="6")
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


def test_running_page_plots_lattice_proxy_and_exact():
    at = app("pages/running.py", model=SMOL, text=SHORT, k="15", seed="3")
    assert_clean(at)
    click(at, "run")
    assert_clean(at)
    by_samples, by_seconds = plotly(at)
    names = [t.name for t in by_samples.data]
    assert names == ["lattice", "proxy", "canonical", "exact"]
    assert len(values(by_samples.data[0].x)) <= 15 and values(by_samples.data[1].x) == list(range(1, 16))
    assert by_seconds.layout.xaxis.title.text == "seconds"
    table = at.dataframe[0].value
    assert set(table["method"]) == {"lattice", "proxy", "exact"}
    exact = table.set_index("method").loc["exact", "log_marginal"]
    lattice = table.set_index("method").loc["lattice", "log_marginal"]
    assert lattice <= exact + 1e-4


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
    live = list(live.live_stream(m, "proxy", samples=120))
    assert [p.num_samples for p in live] == [50, 100, 120]
    seen: list = []
    for est in m.stream("lattice", samples=30, chunk=7, should_stop=lambda: len(seen) >= 2):
        seen.append(est)
    assert [p.num_samples for p in seen] == [7, 14, 14]
    assert seen[-1].run.cancelled and not seen[-1].run.done and seen[-1].run.requested == 30


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
    assert scoring.wait(timeout=600)  # the first chunk of 500 samples is being scored
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
