"""Home: the text's canonical tokenization, how many tokenizations it has, and its marginal."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import viz
from pages._app.runtime import live, loaders, server, shared_results
from pages._app.ui import counts, inputs, live_page, presets, widgets, words
from pages._app.ui.defaults import HOME_MAX_SAMPLES
from pages._app.ui.error_messages import guard
from pages._app.ui.top import top_table

if TYPE_CHECKING:  # the estimators import torch: not before a page needs the model
    from marginal_core import Estimate, Lattice


ABOUT = (
    "A language model never sees text, only **tokens**. The tokenizer picks one way of cutting the "
    "text into tokens (the *canonical* tokenization), but almost every text can be cut in a huge "
    "number of other ways, and the model gives each of them some probability. The probability of "
    "the **text** is the *marginal* over all of them:"
)
HOW = (
    "- All tokenizations of a text form a **lattice**: a graph over the text's bytes whose arcs "
    "are vocabulary tokens; every path from start to end is one tokenization (see *Lattice*).\n"
    "- The paths can be **counted exactly** and **sampled uniformly** without the model.\n"
    "- The **lattice estimator** (Algorithm 1 of the paper) takes the canonical tokenization "
    "with one token split in two (the *off-by-one* set), then distinct paths drawn uniformly "
    "from those of at most *L* tokens, and only **scores** them with the model in batched "
    "passes. Their summed probability is a lower bound that only grows with more samples.\n"
    "- The **proxy** baseline instead *generates* tokenizations with the model constrained to "
    "the lattice and reweights them (importance sampling): one forward pass per token.\n\n"
    "The other pages show the lattice, the samples, where the mass sits, how well the "
    "constrained model ranks tokenizations, and how the estimates converge."
)


def page() -> None:
    """The home page."""
    inp = live_page.open_page("How likely is a text — over *all* its tokenizations?", ABOUT)
    st.latex(r"p(s) \;=\; \sum_{t \,:\, \text{tokens } t \text{ spell } s} p(t) \;\ge\; p(t_{\text{canonical}})")
    with st.expander("How is that sum estimated without decoding?", expanded=False):
        st.markdown(HOW)
    lat = loaders.require_lattice(inp)
    if (example := presets.matching(inp.text, inp.context)) is not None:
        st.info(f"**{example.name}.** {example.look_for}", icon=":material/visibility:")
    _canonical(inp, lat)

    st.subheader("Probability under the model")
    m = loaders.require_marginalizer(inp)
    with guard("scoring the canonical tokenization"):
        bar = live.Bar("Scoring the canonical tokenization", "tokens", now=False)  # a newer run ends it
        lpc = m.canonical_score(progress=bar.progress).log_p
        bar.empty()
        c1, c2 = st.columns(2)
        c1.metric("log p(canonical)", viz.format_log(lpc), help="Natural log of the canonical tokenization's probability.")
        c2.metric("p(canonical)", f"{math.exp(lpc):.3g}")

        row = st.columns([1, 1, 1, 2], vertical_alignment="bottom")
        most = server.policy().cap_samples(HOME_MAX_SAMPLES)
        k = widgets.samples_k(row[0], help="Lattice samples: off-by-one first, then uniform paths of at most L "
                              f"tokens. Here at most {most:,}; more on *Running estimates*.")
        key = inp.key("lattice", k, lat.default_max_len(), 0)
        if k > most and shared_results.cached(key) is None:
            st.info(f"The estimate here takes at most {most:,} samples (minutes on a CPU; the time "
                    f"grows with k). Lower k, or run k = {k:,} on *Running estimates*, which plots the estimate "
                    "as it grows and can be stopped.", icon=":material/timer:")
        # No plot to grow here: full chunks from the start (each extra chunk shares fewer prefixes).
        job = live_page.estimate_job(inp, "lattice", key, "lattice", "Scoring lattice samples", said="", samples=k,
                                     max_len=lat.default_max_len(), seed=0, first_chunk=None)
        est = live_page.run_on_press("Estimate the marginal", "estimate", [job], where=row[1:3], disabled=k > most,
                                     doing="scoring lattice samples", idle=None, partial=True, again="").get("lattice")
        if est is not None:
            _estimate(inp, lat, est, lpc)


def _canonical(inp: inputs.Inputs, lat: Lattice) -> None:
    """The canonical tokenization as chips, and the lattice's counts."""
    st.subheader("Canonical tokenization")
    if inp.context:
        st.caption(f"Conditioned on the context: {viz.code_span(inp.context.strip())}")  # $, * and ` as typed
    st.html(viz.chips_html(lat))
    count = lat.count()
    cols = st.columns([1, 1, 2, 1])  # a long text's count ("3.73 × 10^4696") needs the room
    cols[0].metric("Canonical tokens", len(lat.canonical), help="How many tokens the tokenizer uses.")
    cols[1].metric("Bytes (UTF-8)", len(lat.data))
    cols[2].metric("Tokenizations", viz.count_label(count), help="Paths through the lattice"
                   + (" (every digit below)." if count >= counts.ABBREVIATED_FROM else "."))
    cols[3].metric("Off-by-one", f"{len(lat.splits):,}", help="Canonical tokenization with one token split into two.")
    counts.exact_count("number of tokenizations", count, key="tokenizations")


def _estimate(inp: inputs.Inputs, lat: Lattice, est: Estimate, lpc: float) -> None:
    """The lattice estimate against the canonical score, and the tokenizations that carry the mass."""
    count = lat.count()
    gain = est.log_marginal - lpc
    outside = -math.expm1(-gain) if math.isfinite(gain) else 0.0
    every = est.num_distinct + 1 == count  # every tokenization scored: the estimate is the marginal
    c = st.columns(4)
    c[0].metric("log p(text) =" if every else "log p(text) ≥", viz.format_log(est.log_marginal),
                delta=f"{viz.format_small(gain, signed=True)} nats vs canonical",
                help=f"Exact: all {count:,} tokenizations scored." if every else
                "Lattice estimate: canonical plus every non-canonical path found (a lower bound).")
    c[1].metric("Mass off the canonical", viz.format_small(outside, 2, percent=True),
                help="Share of the estimated marginal not on the canonical path.")
    c[2].metric("Distinct paths scored", f"{est.num_distinct:,}", help="Non-canonical tokenizations scored.")
    c[3].metric("Seconds", f"{est.seconds:.1f}", help=f"{est.forward_passes} forward passes")
    if every:
        st.caption(f"Exact (all {count:,} tokenizations scored).")
    st.markdown("**Which tokenizations carry the mass** (the five most probable found):")
    top_table(lat, est)
    st.caption(f"{words.NATS} {words.precision(inp)} Compare with the proxy baseline and the exact value on "
               "*Running estimates*.")
