"""Samplers: the off-by-one set, uniform lattice samples and proxy samples side by side."""

from __future__ import annotations

import streamlit as st

from marginal_core import app_state as S
from marginal_core import viz
from marginal_core.sampling import lattice_samples
from pages import _common as C


COLUMNS = {
    "tokenization": st.column_config.TextColumn("tokenization", width="medium",
                                                help="Tokens separated by |, spaces shown as ␣"),
    "tokens": st.column_config.NumberColumn("len", width=40, help="Number of tokens"),
    "log_p": st.column_config.NumberColumn("log p", format="%.2f", width=60),
    "log_q": st.column_config.NumberColumn("log q", format="%.2f", width=60),
    "draws": st.column_config.NumberColumn("draws", width=50, help="How often the proxy drew it"),
}
# Numbers first, so they stay in view in narrow columns; hover a tokenization to read it whole.
ORDER = ("log_p", "log_q", "draws", "tokens", "tokenization")


def show_table(frame) -> None:
    st.dataframe(frame, hide_index=True, height=360, column_config=COLUMNS,
                 column_order=[c for c in ORDER if c in frame.columns])


def main(inp: C.Inputs) -> None:
    st.title("What each sampler draws")
    st.markdown(
        "**Algorithm 1** (the lattice sampler) needs no model to *choose* tokenizations: first the "
        "**off-by-one** set (the canonical tokenization with one token split in two), then distinct "
        "paths drawn **uniformly** among those of at most *L* tokens. The **proxy** baseline instead "
        "*generates* tokenizations with the model constrained to the lattice (canonical excluded), "
        "one forward pass per token, and often draws the same ones again."
    )

    lat = C.require_lattice(inp)
    c = st.columns(4)
    k = c[0].number_input("Lattice samples k", min_value=1, max_value=100_000, value=S.DEFAULT_SAMPLES, step=50,
                          key="k", bind="query-params", help="Algorithm 1's budget: off-by-one first, then uniform.")
    L = c[1].number_input("Length bound L", min_value=1, value=lat.default_max_len(), key="L", bind="query-params")
    seed = c[2].number_input("Seed", min_value=0, value=0, key="seed", bind="query-params")
    pk = c[3].number_input("Proxy samples", min_value=1, max_value=100_000, value=S.DEFAULT_SAMPLES, step=50,
                           key="pk", bind="query-params")
    k, L, seed, pk = int(k), int(L), int(seed), int(pk)

    samples = None
    with C.guard("sampling the lattice"):
        samples = lattice_samples(lat, k, max_len=L, seed=seed)
    if samples is None:
        C.stop()

    lat_key, proxy_key = inp.key("lattice", k, L, seed), inp.key("proxy", pk, seed)
    scored, proxy = C.cached(lat_key), C.cached(proxy_key)
    if scored is None or proxy is None:
        if st.button("Score with the model and draw proxy samples", type="primary", key="score"):
            m = C.require_marginalizer(inp)
            with C.guard("scoring"):
                scored = C.run_stream(lat_key, lambda: S.live_stream(m, "lattice", samples=k, max_len=L, seed=seed), "Scoring lattice samples")
                proxy = C.run_stream(proxy_key, lambda: S.live_stream(m, "proxy", samples=pk, seed=seed), "Drawing proxy samples")
        else:
            st.caption("The lattice samples below are drawn without the model; press the button to score them "
                       "(log p) and to draw proxy samples (which needs the model).")

    kinds = samples.kinds
    paths = samples.paths.tolist()
    columns = st.columns(3)
    if scored is not None:
        table = viz.samples_frame(lat, scored)
        off = table[table["kind"] == "off_by_one"].drop(columns="kind")
        uni = table[table["kind"] == "uniform"].drop(columns="kind")
    else:
        off = viz.samples_frame(lat, paths=[p for p, t in zip(paths, kinds) if t == "off_by_one"])
        uni = viz.samples_frame(lat, paths=[p for p, t in zip(paths, kinds) if t == "uniform"])
    with columns[0]:
        st.markdown(f"#### Off-by-one ({len(off):,} of |O| = {len(lat.splits):,})")
        show_table(off)
    with columns[1]:
        st.markdown(f"#### Uniform, ≤ {L} tokens ({len(uni):,})")
        show_table(uni)
    with columns[2]:
        if proxy is not None:
            est = proxy
            ptable = viz.samples_frame(lat, est).drop(columns="kind")
            st.markdown(f"#### Proxy ({est.num_distinct:,} distinct / {est.num_samples:,})")
            show_table(ptable.sort_values("draws", ascending=False))
        else:
            st.markdown("#### Proxy (constrained LM)")
            st.info("Proxy samples need the model: press the button above.")

    st.caption(f"Canonical: `{viz.segmented(lat, lat.canonical)}` ({len(lat.canonical)} tokens). "
               "log p and log q are natural logs; “draws” counts how often the proxy drew a tokenization.")

    groups = {"off_by_one": [len(p) for p, t in zip(paths, kinds) if t == "off_by_one"],
              "uniform": [len(p) for p, t in zip(paths, kinds) if t == "uniform"]}
    if proxy is not None:
        groups["proxy"] = proxy.paths.lengths.tolist()
    st.plotly_chart(viz.length_histogram(groups, canonical_len=len(lat.canonical)), key="lengths")

    if scored is not None and proxy is not None:
        s, p = scored, proxy
        m = st.columns(4)
        m[0].metric("Lattice: log p(text) ≥", viz.format_log(s.log_marginal), help=f"{s.seconds:.1f} s")
        m[1].metric("Proxy: log p(text) ≈", viz.format_log(p.log_marginal), help=f"{p.seconds:.1f} s")
        m[2].metric("Proxy re-draws", f"{1 - p.num_distinct / max(p.num_samples, 1):.0%}",
                    help="Share of proxy draws that repeat an earlier tokenization.")
        m[3].metric("Forward passes (lattice / proxy)", f"{s.forward_passes} / {p.forward_passes}")


C.run_page(main)
