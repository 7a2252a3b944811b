"""The app's estimate pages, headless (AppTest): Samplers, Mass, Rank correlation and Running
estimates, with the live runs behind them (chunked streams, Stop, the anytime beam)."""

from __future__ import annotations

import math

import pytest

from bench.support.apptest import app
from tests.app_support import SHORT, SMOL, assert_clean, click, metrics, plotly, values

pytestmark = pytest.mark.models  # every page opens with the sidebar's model loading


# --------------------------------------------------------------------------------------------
# Samplers, mass, rank correlation, running estimates


def test_a_model_loaded_in_the_background_shows_no_load_status_at_run():
    """A class's Run drew a "Loading model" status box in every session although the page's
    background load had finished (the box shows until the run's first estimate replaces it): the
    background load now marks the model loaded, so ``loaders.model`` draws no box for it."""
    from pages._app.runtime import loaders

    loaders._loaded.clear()
    loaders._preloads.clear()
    at = app("pages/views/running.py", model=SMOL, text=SHORT, k="4", methods="lattice", exact="false",
             dtype="float32")  # the page needs no model before Run: it only starts the background load
    assert_clean(at)
    assert [key[0] for key in loaders._preloads()] == [SMOL]
    for thread in loaders._preloads().values():
        thread.join()
    assert set(loaders._preloads()) <= loaders._loaded()
    click(at, "run")
    assert_clean(at)
    assert len(plotly(at)[0].data) >= 1  # the run drew its estimate


def test_samplers_page_shows_four_samplers_scored():
    """Off-by-one, uniform, proxy and (issue 11 item 1) the beam's complete paths with their log p."""
    at = app("pages/views/samplers.py", model=SMOL, text=SHORT, k="12", pk="10", W="2", dtype="float32", Wauto="false")
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

    from pages._app.ui import wrapped_tables

    at = app("pages/views/samplers.py", model=SMOL, text=" The committee postponed its decision until the next meeting.",
             k="12")
    assert_clean(at)
    off = at.dataframe[0]
    width = json.loads(off.proto.columns)["tokenization"]["width"]
    longest = off.value["tokenization"].map(len).max()
    assert longest > 60 and off.proto.row_height >= wrapped_tables.WRAP_FROM_PX  # Streamlit wraps only rows over 4rem
    lines = (off.proto.row_height - wrapped_tables.PAD_PX) // wrapped_tables.LINE_PX
    assert lines * width / wrapped_tables.CHAR_PX >= longest
    at = app("pages/views/samplers.py", model=SMOL, text=SHORT, k="12")
    assert at.dataframe[0].proto.row_height == 0  # one line holds " Paris." whole: default rows


@pytest.mark.parametrize("bad", [dict(k="-5"), dict(k="abc"), dict(k="1e8", L="0"), dict(L="inf"), dict(seed="-inf")])
def test_a_link_with_numbers_a_page_cannot_take_says_which_and_what_it_uses(bad):
    """Issue 13 item 5g: k=-5, k=abc, k=1e8 and L=0 silently became defaults, and an infinite
    number raised OverflowError inside Streamlit before any page code ran."""
    at = app("pages/views/samplers.py", model=SMOL, text=SHORT, **bad)
    assert_clean(at)
    (warning,) = [w.value for w in at.warning if "The link holds numbers" in w.value]
    for key, text in bad.items():
        assert f"`{key}={text}` (using {key} = {at.session_state[key]:,})" in warning, warning
    at.run()  # the widgets rule from now on: no more word about the link
    assert not [w.value for w in at.warning if "The link holds numbers" in w.value]
    at = app("pages/views/samplers.py", model=SMOL, text=SHORT, k="12", L="0")
    (warning,) = [w.value for w in at.warning if "The link holds numbers" in w.value]
    assert "`L=0`" in warning and "k=" not in warning and at.session_state["k"] == 12


def test_mass_page_exact_on_a_short_text():
    at = app("pages/views/mass.py", model=SMOL, text=SHORT)
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
    at = app("pages/views/mass.py", model=SMOL, text=SHORT, dtype="float32", exact="false", source="beam", W="2", Wauto="false")
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
    at = app("pages/views/mass.py", model=SMOL, text=SHORT, exact="false")
    assert_clean(at)
    assert not at.toggle(key="exact").value and not at.number_input(key="k").disabled  # sampled, not exact
    text = " ".join(["The committee postponed its decision until the next meeting."] * 5)
    at = app("pages/views/lattice.py", model=SMOL, text=text)
    inside = len(at.dataframe[0].value)
    at = app("pages/views/lattice.py", model=SMOL, text=text, only_window="false")
    assert_clean(at)
    assert not at.toggle(key="only_window").value and len(at.dataframe[0].value) > inside


def test_rank_page_scatter_and_table():
    at = app("pages/views/rank.py", model=SMOL, text=" Paris is the capital of France.", pk="20",
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
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model
    from marginal_core.viz.analysis import spearman
    from pages.views.table1 import RANK_SENTENCES

    est = Marginalizer(load_model(SMOL, dtype="float32", device="cpu"), RANK_SENTENCES[50][0]).proxy(6, seed=0)
    rho, n = spearman(est)
    assert rows["distinct"].tolist() == [n] and (rows["rho"].isna().all() if rho != rho
                                                 else rows["rho"].tolist() == [pytest.approx(rho, abs=1e-9)])


def test_running_page_plots_lattice_proxy_and_exact():
    at = app("pages/views/running.py", model=SMOL, text=SHORT, k="15", seed="3", y="log p(text)")
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
    at = app("pages/views/running.py", model=SMOL, text=" Tokyo", context="", dtype="float32", k="8", methods="lattice")
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
    fresh = app("pages/views/running.py", model=SMOL, text=" Tokyo", context="", dtype="float32", k="8", methods="lattice")
    assert fresh.segmented_control(key="y").value == "log p(text)"
    assert not any(c.value.startswith("Opened on the non-canonical mass") for c in fresh.caption)


def test_running_page_plots_the_beam_beside_exact():
    """Issue 11 item 1: the beam on the running page, keyed by its width (URL key W), its points
    the paths completed, a row in the summary table, a lower bound of the exact marginal."""
    at = app("pages/views/running.py", model=SMOL, text=SHORT, dtype="float32", methods="beam", W="2", y="log p(text)",
             Wauto="false")
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
    widened = app("pages/views/running.py", model=SMOL, text="Donaudampfschiff", dtype="float32", methods=["beam"])
    assert widened.toggle(key="Wauto").value and widened.number_input(key="W").disabled
    click(widened, "run")
    assert_clean(widened)
    _, by_seconds = plotly(widened)
    marks = [a.text for a in by_seconds.layout.annotations]
    assert "W=16" in marks and "W=64" in marks
    assert any(c.value.startswith("Anytime beam: widths 16 → 64; what it pruned could hold at most")
               for c in widened.caption)
    text = "Entschuldigung"
    at = app("pages/views/running.py", model=SMOL, text=text, dtype="float32", methods=["lattice", "beam"], k="4")
    click(at, "run")
    assert_clean(at)
    assert any(c.value.startswith("Anytime beam: width 16; what it pruned could hold at most") for c in at.caption)
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith("The lattice bound is") and "nats below the best bound found for this text, exact:" in warning
    mass = app("pages/views/mass.py", model=SMOL, text=text, dtype="float32", exact="false", source="lattice", k="4")
    assert_clean(mass)
    assert any("nats below the best bound found for this text" in w.value for w in mass.warning)


def test_a_bound_is_compared_only_with_bounds():
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model
    from pages._app.ui.bounds import shortfall

    m = Marginalizer(load_model(SMOL, dtype="float32", device="cpu"), "Entschuldigung")
    beam, lattice, proxy = m.beam(), m.lattice_estimate(4), m.proxy(4)
    best = ("beam (W = auto)", beam)
    assert "misses at least 99" in shortfall(lattice, "lattice (k = 4)", best)
    assert shortfall(beam, "beam (W = auto)", best) is None  # the best itself
    assert shortfall(proxy, "proxy (k = 4)", best) is None  # an estimate, not a bound
    assert shortfall(lattice, "lattice (k = 4)", None) is None  # nothing to compare with


def test_live_streams_match_the_library_estimators():
    """The app's chunked runs give the library's numbers, and a stopped run keeps its chunks."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model
    from pages._app.runtime import live

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

    from pages._app.runtime import live

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
    at = app("pages/views/running.py", model=SMOL, text=text, k="5000", methods="lattice")
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

    from pages._app.runtime import live

    passes: list[float] = []  # when each forward pass of the run reported progress
    scoring = threading.Event()
    report = live.Bar.progress

    def spy(self, done: float, total: int) -> None:
        passes.append(time.monotonic())
        scoring.set()
        report(self, done, total)

    monkeypatch.setattr(live.Bar, "progress", spy)
    text = " ".join(["The committee postponed its decision until the next meeting."] * 2)
    at = app("pages/views/running.py", model=SMOL, text=text, k="5000", methods="lattice")
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
