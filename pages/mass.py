"""Probability mass: where the marginal sits among the tokenizations found."""

from __future__ import annotations

import math

import streamlit as st

from marginal_core import analysis
from marginal_core import app_state as S
from marginal_core import viz
from pages import _common as C


def main(inp: C.Inputs) -> None:
    st.title("Where the probability mass sits")
    st.markdown(
        "How much of the text's probability is on the canonical tokenization, on its one-token splits "
        "(off-by-one) and on everything else? Shares are of the mass **found**: every tokenization "
        "when the lattice is small enough to enumerate (exact), otherwise the lattice sampler's "
        "samples (a lower bound of the rest)."
    )

    lat = C.require_lattice(inp)
    c = st.columns(4)
    exact = C.exact_toggle(c[0], lat, "Exact (every tokenization)")
    k = c[1].number_input("Lattice samples k", min_value=1, max_value=100_000, value=S.DEFAULT_SAMPLES, step=50,
                          key="k", bind="query-params", disabled=exact)
    L = c[2].number_input("Length bound L", min_value=1, value=lat.default_max_len(), key="L", bind="query-params",
                          disabled=exact)
    seed = c[3].number_input("Seed", min_value=0, value=0, key="seed", bind="query-params", disabled=exact)
    k, L, seed = int(k), int(L), int(seed)

    key = inp.key("exact") if exact else inp.key("lattice", k, L, seed)
    est = C.cached(key)
    if est is None:
        label = "Score every tokenization" if exact else f"Score {k} lattice samples"
        if st.button(label, type="primary", key="compute"):
            m = C.require_marginalizer(inp)
            with C.guard("scoring"):
                stream = (lambda: S.live_stream(m, "exact", budget=S.APP_EXACT_BUDGET)) if exact else (
                    lambda: S.live_stream(m, "lattice", samples=k, max_len=L, seed=seed))
                est = C.run_stream(key, stream, "Scoring")
        else:
            st.caption("Press the button to score the tokenizations with the model.")
            C.stop()

    if est is None:
        C.stop()
    by_kind = analysis.mass_by_kind(lat, est)
    share = dict(zip(by_kind["kind"], by_kind["share"]))
    m = st.columns(4)
    m[0].metric("log p(text)" + (" (exact)" if exact else " ≥"), viz.format_log(est.log_marginal))
    m[1].metric("Canonical share", f"{share.get('canonical', 0):.2%}")
    m[2].metric("Off-by-one share", f"{share.get('off_by_one', 0):.2%}")
    m[3].metric("Rest", f"{share.get('rest', 0):.2%}", help=f"{est.num_distinct:,} non-canonical tokenizations scored")

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


C.run_page(main)
