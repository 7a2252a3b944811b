"""Probability mass: where the marginal sits among the tokenizations found."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import viz
from pages._app.runtime import loaders, shared_results
from pages._app.ui import bounds, inputs, live_page, widgets, words
from pages._app.ui.defaults import APP_EXACT_BUDGET
from pages._app.ui.top import top_table

if TYPE_CHECKING:  # the estimators import torch: not before a page needs the model
    from marginal_core import Estimate, Lattice


ABOUT = (
    "How much of the text's probability is on the canonical tokenization, on its one-token splits "
    "(off-by-one) and on everything else? Shares are of the mass **found**: every tokenization "
    "when the lattice is small enough to enumerate (exact), otherwise the paths a method found: the "
    "lattice sampler's samples or the beam's complete paths (each a lower bound of the rest)."
)
BUTTONS = {"exact": "Score every tokenization", "lattice": "Score {k} lattice samples",
           "beam": "Run the beam (W = {W})"}


def page() -> None:
    """The probability mass page."""
    inp = live_page.open_page("Where the probability mass sits", ABOUT)
    lat = loaders.require_lattice(inp)
    c = live_page.settings_row([1.3, 1.2, 1, 1, 1, 1])
    exact = widgets.exact_toggle(c[0], lat, "Exact (every tokenization)")
    source = c[1].segmented_control("Found by", ["lattice", "beam"], default="lattice", key="source",
                                    bind="query-params", disabled=exact,
                                    help="Without exact: the lattice sampler's samples or the beam's complete paths.")
    method = "exact" if exact else (source or "lattice")
    k = widgets.samples_k(c[2], disabled=method != "lattice")
    L = widgets.length_bound(c[3], lat, disabled=method != "lattice")
    seed = widgets.seed(c[4], disabled=method != "lattice")
    W = widgets.beam_width(c[5], disabled=method != "beam")

    keys = {"exact": inp.key("exact"), "lattice": inp.key("lattice", k, L, seed), "beam": inp.key("beam", W)}
    job = live_page.estimate_job(inp, method, keys[method], method, "Scoring", said="", samples=k, max_len=L,
                                 seed=seed, budget=APP_EXACT_BUDGET, beam_width=W)
    est = live_page.run_on_press(BUTTONS[method].format(k=k, W=bounds.width_label(W)), "compute", [job],
                                 doing="scoring", idle="Press the button to score the tokenizations with the model."
                                 ).get(method)
    if est is None:
        return  # not st.stop(): the page still ends with the lesson's next link (app.py)
    labels = {"exact": "exact", "lattice": f"lattice (k = {k}, L = {L})", "beam": f"beam (W = {bounds.width_label(W)})"}
    _show(inp, lat, est, exact, method, labels)
    found = {name: r for name, k_ in keys.items() if (r := shared_results.cached(k_)) is not None}
    if len(found) > 1:
        st.caption("Non-canonical mass found, log: " + "; ".join(
            f"{labels[name]} {viz.format_log(r.log_noncanonical)} ({r.num_distinct:,} paths, {r.seconds:.1f} s)"
            for name, r in found.items()) + ".")
    st.caption(f"{words.NATS} {words.precision(inp)}")


def _show(inp: inputs.Inputs, lat: Lattice, est: Estimate, exact: bool, method: str, labels: dict[str, str]) -> None:
    """The shares of the mass found (canonical, off-by-one, the rest), the heaviest tokenizations,
    and the mass by kind, by the top n, by length and by splits."""
    from marginal_core.viz import analysis  # scipy: imported when this page is opened, not at start

    by_kind = analysis.mass_by_kind(lat, est)
    share = dict(zip(by_kind["kind"], by_kind["share"]))
    m = st.columns(4)
    m[0].metric("log p(text)" + (" (exact)" if exact else " ≥"), viz.format_log(est.log_marginal),
                help=f"Exact: all {lat.count():,} tokenizations scored." if exact else "A lower bound: the mass found.")
    m[1].metric("Canonical share", viz.format_small(share.get("canonical", 0), 2, percent=True))
    m[2].metric("Off-by-one share", viz.format_small(share.get("off_by_one", 0), 2, percent=True))
    m[3].metric("Rest", viz.format_small(share.get("rest", 0), 2, percent=True),
                help=f"{est.num_distinct:,} non-canonical tokenizations scored")
    if exact:
        st.caption(f"Exact (all {lat.count():,} tokenizations scored).")
    bounds.say(inp, est, labels[method])
    st.markdown("**Which tokenizations carry the mass** (the five most probable found):")
    top_table(lat, est)

    log_y = st.toggle("Log scale", value=True, key="logy", bind="query-params",
                      help="Shares on a log axis: tiny shares (1e-38%) stay visible next to the canonical one.")
    a, b = st.columns(2)
    a.plotly_chart(viz.mass_bar(by_kind, "kind", "Canonical, off-by-one and the rest", log_y), key="kind")
    b.plotly_chart(viz.top_n_figure(analysis.top_n_mass(lat, est)), key="topn")
    a, b = st.columns(2)
    a.plotly_chart(viz.mass_bar(analysis.mass_by_length(lat, est), "tokens", "Mass by length", log_y), key="length")
    b.plotly_chart(viz.mass_bar(analysis.mass_by_splits(lat, est), "splits", "Mass by splits from the canonical",
                                log_y), key="splits")
    if not exact and math.isfinite(est.log_noncanonical):
        st.caption("Sampled shares over-weight the canonical path: the rest of the lattice holds more mass than the "
                   f"{'samples' if method == 'lattice' else 'beam'} found. Switch to exact on a short text to see the "
                   "true shares.")
