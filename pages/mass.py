"""Probability mass: where the marginal sits among the tokenizations found."""

from __future__ import annotations

import math

import streamlit as st

from marginal_core import viz
from pages._app import inputs, live, loaders, results, widgets
from pages._app.defaults import APP_EXACT_BUDGET
from pages._app.errors import guard


def page() -> None:
    """The probability mass page."""
    from marginal_core import analysis  # scipy: imported when this page is opened, not at start

    inp = inputs.current()
    st.title("Where the probability mass sits")
    st.markdown(
        "How much of the text's probability is on the canonical tokenization, on its one-token splits "
        "(off-by-one) and on everything else? Shares are of the mass **found**: every tokenization "
        "when the lattice is small enough to enumerate (exact), otherwise the lattice sampler's "
        "samples (a lower bound of the rest)."
    )

    lat = loaders.require_lattice(inp)
    c = st.columns(4)
    exact = widgets.exact_toggle(c[0], lat, "Exact (every tokenization)")
    k = widgets.samples_k(c[1], disabled=exact)
    L = widgets.length_bound(c[2], lat, disabled=exact)
    seed = widgets.seed(c[3], disabled=exact)

    key = inp.key("exact") if exact else inp.key("lattice", k, L, seed)
    est = results.cached(key)
    if est is None:
        b = st.columns([2, 1, 5])
        compute = b[0].button("Score every tokenization" if exact else f"Score {k} lattice samples", type="primary",
                              key="compute")
        live.stop_button(b[1])
        if not compute:
            if (stopped := live.unfinished(key)) is not None:
                st.warning(f"Stopped {stopped.describe()}. Press the button to start again.")
            st.caption("Press the button to score the tokenizations with the model.")
            st.stop()
        m = loaders.require_marginalizer(inp)
        with guard("scoring"):
            if exact:
                est = live.run_live(key, m, "exact", "Scoring", budget=APP_EXACT_BUDGET)
            else:
                est = live.run_live(key, m, "lattice", "Scoring", samples=k, max_len=L, seed=seed)

    if est is None:
        st.stop()
    by_kind = analysis.mass_by_kind(lat, est)
    share = dict(zip(by_kind["kind"], by_kind["share"]))
    m = st.columns(4)
    m[0].metric("log p(text)" + (" (exact)" if exact else " ≥"), viz.format_log(est.log_marginal))
    m[1].metric("Canonical share", viz.format_small(share.get("canonical", 0), 2, percent=True))
    m[2].metric("Off-by-one share", viz.format_small(share.get("off_by_one", 0), 2, percent=True))
    m[3].metric("Rest", viz.format_small(share.get("rest", 0), 2, percent=True),
                help=f"{est.num_distinct:,} non-canonical tokenizations scored")

    log_y = st.toggle("Log scale", value=True, key="logy", bind="query-params",
                      help="Shares on a log axis: tiny shares (1e-40) stay visible next to the canonical one.")
    a, b = st.columns(2)
    a.plotly_chart(viz.mass_bar(by_kind, "kind", "Canonical, off-by-one and the rest", log_y), key="kind")
    b.plotly_chart(viz.top_n_figure(analysis.top_n_mass(lat, est)), key="topn")
    a, b = st.columns(2)
    a.plotly_chart(viz.mass_bar(analysis.mass_by_length(lat, est), "tokens", "Mass by length", log_y), key="length")
    b.plotly_chart(viz.mass_bar(analysis.mass_by_splits(lat, est), "splits", "Mass by splits from the canonical",
                                log_y), key="splits")
    if not exact and math.isfinite(est.log_noncanonical):
        st.caption("Sampled shares over-weight the canonical path: the rest of the lattice holds more mass than the "
                   "samples found. Switch to exact on a short text to see the true shares.")


if __name__ == "__main__":  # a fresh server's first request, in Streamlit's legacy pages/ mode (see app.py)
    from app import main

    main()
