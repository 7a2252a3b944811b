"""Samplers: the off-by-one set, uniform lattice samples, proxy samples and the beam's paths side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from marginal_core import lattice_samples, viz
from pages._app.runtime import loaders, shared_results
from pages._app.ui import bounds, inputs, live_page, widgets, words, wrapped_tables
from pages._app.ui.error_messages import guard

if TYPE_CHECKING:  # the estimators import torch: not before a page needs the model
    from marginal_core import Estimate, Lattice

# Pixels of the tokenization column: with the numbers it fills half the page on a laptop (two
# tables a row; the proxy's numbers take PROXY_NUMBERS_PX more), and is stretched on wider
# screens; its cells wrap, so every split stays in view.
TOKENIZATION_PX = 280
PROXY_NUMBERS_PX = 96
COLUMNS = {
    "tokens": st.column_config.NumberColumn("len", width=34, help="Number of tokens"),
    "log_p": st.column_config.NumberColumn("log p", format="%.2f", width=52),
    "log_q": st.column_config.NumberColumn("log q", format="%.2f", width=52),
    "draws": st.column_config.NumberColumn("draws", width=44, help="How often the proxy drew it"),
}
# Numbers first, so they stay in view in narrow columns; the tokenization wraps onto more lines.
ORDER = ("log_p", "log_q", "draws", "tokens", "tokenization")


def show_table(frame: pd.DataFrame) -> None:
    """One sampler's table, its tokenizations whole (wrapped)."""
    width = TOKENIZATION_PX - (PROXY_NUMBERS_PX if "log_q" in frame.columns else 0)
    config = {**COLUMNS, "tokenization": st.column_config.TextColumn(
        "tokenization", width=width, help="Tokens separated by |, spaces shown as ␣")}
    wrapped_tables.wrapped_dataframe(frame, {"tokenization": width}, column_config=config, height=360,
                             column_order=[c for c in ORDER if c in frame.columns])


ABOUT = (
    "**Algorithm 1** (the lattice sampler) needs no model to *choose* tokenizations: first the "
    "**off-by-one** set (the canonical tokenization with one token split in two), then distinct "
    "paths drawn **uniformly** among those of at most *L* tokens. The **proxy** baseline instead "
    "*generates* tokenizations with the model constrained to the lattice (canonical excluded), "
    "one forward pass per token, and often draws the same ones again. The **beam** walks the same way but "
    "keeps the W most probable prefixes per lattice state instead of drawing, and keeps every path it completes."
)


def page() -> None:
    """The samplers page."""
    inp = live_page.open_page("What each sampler draws", ABOUT)
    lat = loaders.require_lattice(inp)
    c = live_page.settings_row(5)
    k = widgets.samples_k(c[0])
    L = widgets.length_bound(c[1], lat)
    seed = widgets.seed(c[2])
    pk = widgets.proxy_samples(c[3])
    W = widgets.beam_width(c[4])

    samples = None
    with guard("sampling the lattice"):
        samples = lattice_samples(lat, k, max_len=L, seed=seed)
    if samples is None:
        return  # the guard said why

    keys = (inp.key("lattice", k, L, seed), inp.key("proxy", pk, seed), inp.key("beam", W))
    jobs = [live_page.estimate_job(inp, "scoring", keys[0], "lattice", "Scoring lattice samples", samples=k, max_len=L,
                                   seed=seed),
            live_page.estimate_job(inp, "the proxy", keys[1], "proxy", "Drawing proxy samples", samples=pk, seed=seed),
            live_page.estimate_job(inp, "the beam", keys[2], "beam", f"Running the beam (W = {bounds.width_label(W)})",
                                   beam_width=W)]
    found = live_page.run_on_press(
        "Score with the model, draw proxy samples, run the beam", "score", jobs, widths=[3, 1, 4], doing="scoring",
        idle="The lattice samples below are drawn without the model; press the button to score them (log p), to draw "
        "proxy samples and to run the beam (which need the model).")
    scored, proxy, beam = (found.get(job.name) for job in jobs)
    if scored is not None and (proxy is not None or beam is not None):
        proxy, beam = _one_score(inp, scored, proxy, beam, keys)
    _tables(inp, lat, (samples.kinds.tolist(), samples.paths.tolist()), L, W, scored, proxy, beam)
    if scored is not None and proxy is not None and beam is not None:
        _metrics(scored, proxy, beam)


def _tables(inp: inputs.Inputs, lat: Lattice, samples: tuple[list[str], list[list[int]]], L: int, W: int | None,
            scored: Estimate | None, proxy: Estimate | None, beam: Estimate | None) -> None:
    """Each sampler's table (scored once the model has run), the canonical tokenization and the
    histogram of the paths' lengths; samples: the lattice samples' kinds and paths."""
    kinds, paths = samples
    top, bottom = st.columns(2), st.columns(2)
    columns = [*top, *bottom]
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
            ptable = viz.samples_frame(lat, proxy).drop(columns="kind")
            st.markdown(f"#### Proxy ({proxy.num_distinct:,} distinct / {proxy.num_samples:,})")
            show_table(ptable.sort_values("draws", ascending=False))
        else:
            st.markdown("#### Proxy (constrained LM)")
            st.info("Proxy samples need the model: press the button above.")
    with columns[3]:
        if beam is not None:
            st.markdown(f"#### Beam, W = {bounds.width_label(W)} ({beam.num_samples:,} paths)")
            show_table(viz.samples_frame(lat, beam).drop(columns="kind").sort_values("log_p", ascending=False))
            bounds.say(inp, beam, f"beam (W = {bounds.width_label(W)})")
        else:
            st.markdown(f"#### Beam, W = {bounds.width_label(W)}")
            st.info("The beam needs the model: press the button above.")

    st.caption(f"Canonical: {viz.code_span(viz.segmented(lat, lat.canonical))} ({len(lat.canonical)} tokens). "
               f"{words.NATS} “draws” counts how often the proxy drew a tokenization; the beam's paths are "
               "distinct, most probable first. A tokenization in several tables has one log p: every path on the "
               f"page is scored once, by the lattice sampler's scorer. {words.precision(inp)}")

    groups = {"off_by_one": [len(p) for p, t in zip(paths, kinds) if t == "off_by_one"],
              "uniform": [len(p) for p, t in zip(paths, kinds) if t == "uniform"]}
    if proxy is not None:
        groups["proxy"] = proxy.paths.lengths.tolist()
    if beam is not None:
        groups["beam"] = beam.paths.lengths.tolist()
    st.plotly_chart(viz.length_histogram(groups, canonical_len=len(lat.canonical)), key="lengths")


def _metrics(s: Estimate, p: Estimate, beam: Estimate) -> None:
    """The three estimates side by side, with how often the proxy drew again and the passes each took."""
    m = st.columns(5)
    m[0].metric("Lattice: log p(text) ≥", viz.format_log(s.log_marginal), help=f"{s.seconds:.1f} s")
    m[1].metric("Proxy: log p(text) ≈", viz.format_log(p.log_marginal), help=f"{p.seconds:.1f} s")
    m[2].metric("Beam: log p(text) ≥", viz.format_log(beam.log_marginal), help=f"{beam.seconds:.1f} s")
    m[3].metric("Proxy re-draws", f"{1 - p.num_distinct / max(p.num_samples, 1):.0%}",
                help="Share of proxy draws that repeat an earlier tokenization.")
    m[4].metric("Forward passes (lattice / proxy / beam)",
                f"{s.forward_passes} / {p.forward_passes} / {beam.forward_passes}")
    st.caption(words.PROXY_MAY_EXCEED)


def _one_score(inp: inputs.Inputs, scored: Estimate, proxy: Estimate | None, beam: Estimate | None,
               keys: tuple) -> tuple[Estimate | None, Estimate | None]:
    """The proxy's and the beam's estimates with their paths' log p from the lattice's scorer
    (one log p per tokenization on the page; cached with the three results)."""
    from marginal_core import on_one_scorer

    key = ("one scorer", *keys, proxy is not None and proxy.run.done, beam is not None and beam.run.done)
    pair = shared_results.cached(key)
    if pair is None:
        m = loaders.require_marginalizer(inp)
        with guard("scoring every path on the page once"):
            others = on_one_scorer(m, scored, [e for e in (proxy, beam) if e is not None])
            pair = (others.pop(0) if proxy is not None else None, others.pop(0) if beam is not None else None)
            shared_results.store(key, pair)
    return pair if pair is not None else (proxy, beam)

