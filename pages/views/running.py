"""Running estimates: each estimator against the number of samples and against time, live."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from marginal_core import viz
from pages._app.runtime import loaders, shared_results
from pages._app.ui import bounds, inputs, live_page, projector, widgets, words
from pages._app.ui.defaults import APP_EXACT_BUDGET

if TYPE_CHECKING:  # the estimators import torch: not before a page needs the model
    from streamlit.delta_generator import DeltaGenerator

    from marginal_core import Estimate

VIEWS = {"log p(text)": "marginal", "non-canonical mass": "noncanonical"}
# Below this share of the mass off the canonical, every line of the log p(text) view lies within
# 0.1 nats of the canonical line (flat at the plots' scale): the page opens on the non-canonical mass.
FLAT_SHARE = 0.10
_OPENED = "_running_opened_on"  # the view the page opened on, per inputs, and why


ABOUT = (
    "Each estimate of log p(text) as samples come in. The **lattice** estimate (Algorithm 1) is a "
    "sum over distinct scored tokenizations, so it only grows; the **proxy** estimate is an "
    "importance-sampling average, unbiased but noisy: it may land above the exact value as well as below, "
    "and each of its samples is generated token by token (compare the seconds in the table). The **beam** "
    "keeps the most probable prefixes (W per lattice state) and scores each path it completes exactly, so "
    "it is a lower bound too; its points are the paths completed so far. Dotted: the canonical tokenization "
    "alone; dashed: the exact marginal, where the lattice is small enough to enumerate."
)


def page() -> None:
    """The running estimates page."""
    inp = live_page.open_page("Running estimates", ABOUT)
    lat = loaders.require_lattice(inp)
    c = live_page.settings_row([1, 1, 1, 1, 2, 1])
    k = widgets.samples_k(c[0], help="Samples for the lattice and the proxy.")
    L = widgets.length_bound(c[1], lat)
    seed = widgets.seed(c[2])
    W = widgets.beam_width(c[3])
    methods = c[4].multiselect("Methods", ["lattice", "proxy", "beam"], default=["lattice", "proxy"], key="methods",
                               bind="query-params")
    exact = widgets.exact_toggle(c[5], lat, "Exact line")

    keys = {"lattice": inp.key("lattice", k, L, seed), "proxy": inp.key("proxy", k, seed), "beam": inp.key("beam", W),
            "exact": inp.key("exact")}
    labels = {"beam": f"beam (W = {bounds.width_label(W)})"}
    wanted = list(methods) + (["exact"] if exact else [])

    b = st.columns([1, 1, 3, 3], vertical_alignment="center")
    opened, why = _opening_view(inp, [keys[name] for name in ("exact", "lattice", "beam")])
    y = b[3].segmented_control(
        "Plot", list(VIEWS), default=opened, key="y", bind="query-params",
        help="The non-canonical mass is the part the estimators estimate; on the log p(text) scale it is often "
        "too small to see.",
    )
    y = VIEWS.get(y or opened, "noncanonical")
    if y == "noncanonical" and why:
        st.caption(why)
    row = live_page.LiveRow(where=b[:2], status=st.empty(), disabled=not wanted)
    plots = [column.empty() for column in st.columns(2)]
    spots = (*plots, st.empty(), st.empty())
    st.caption(f"{words.NATS} {words.PROXY_MAY_EXCEED} {words.precision(inp)}")
    jobs = [live_page.estimate_job(inp, name, keys[name], name, f"Scoring: {name}", samples=k, seed=seed, max_len=L,
                                   budget=APP_EXACT_BUDGET, beam_width=W) for name in wanted]
    row.run(jobs, lambda shown: _draw(inp, row, spots, shown, labels, y), doing="running the estimators",
            idle="Press Run to start scoring; the plots grow as chunks of samples are scored.")


def _draw(inp: inputs.Inputs, row: live_page.LiveRow, spots: tuple[DeltaGenerator, ...], shown: dict[str, Estimate],
          labels: dict[str, str], y: str) -> None:
    """Both plots (against samples and seconds), the summary table and what each finished bound
    says, for the results so far; the plots' empty axes before any."""
    plot_samples, plot_seconds, table_spot, said_spot = spots
    log_p_canonical = next(iter(shown.values())).log_p_canonical if shown else 0.0
    traces = [viz.RunTrace.of(r, label=labels.get(name, name)) for name, r in shown.items() if name != "exact"]
    log_exact = None
    if "exact" in shown and shown["exact"].run.done:
        e = shown["exact"]
        log_exact = e.log_marginal if y == "marginal" else e.log_noncanonical
    for spot, x in ((plot_samples, "samples"), (plot_seconds, "seconds")):
        if shown:
            fig = viz.running_figure(traces, log_p_canonical=log_p_canonical, log_exact=log_exact, x=x, y=y)
        else:  # the axes before any result: the browser loads its plotting code with the page, not after Run
            fig = viz.running_figure([], log_p_canonical=0.0, x=x, y="noncanonical")
            what = "log p(text)" if y == "marginal" else "Non-canonical mass"
            fig.update_layout(title_text=f"{what} estimate vs. {x}", yaxis_title_text=viz.RUNNING_Y[y])
        spot.plotly_chart(fig, key=row.key(f"by_{x}"))
    if not shown:
        return
    rows = pd.DataFrame([_row(name, r) for name, r in shown.items()])
    if projector.on():  # HTML, in the projector's larger text
        table_spot.table(rows, hide_index=True)
    else:
        table_spot.dataframe(rows, hide_index=True)
    with said_spot.container():
        for name, r in shown.items():
            if r.run.done:
                bounds.say(inp, r, labels.get(name, name))


def _row(name: str, r: Estimate) -> dict[str, object]:
    """One method's line of the table, in words a student reads."""
    return {
        "method": name,
        "log p(text)": r.log_marginal,
        "log p(canonical)": r.log_p_canonical,
        "mass off the canonical": viz.format_small(-math.expm1(r.log_p_canonical - r.log_marginal), 2, percent=True),
        "samples": r.num_samples,
        "distinct paths": r.num_distinct,
        "seconds": round(r.seconds, 2),
        "forward passes": r.forward_passes,
        "done": "yes" if r.run.done else f"{'stopped' if r.run.cancelled else 'running'}: {r.run.describe()}",
    }


def _opening_view(inp: inputs.Inputs, keys: list[tuple]) -> tuple[str, str]:
    """The view the page opens on for these inputs, and why when it is the non-canonical mass:
    log p(text) only where a finished result (exact first) shows FLAT_SHARE of the mass or more
    off the canonical; else every line would lie flat on the canonical line. Decided once per
    inputs, so a run does not move the view under the student."""
    opened = st.session_state.setdefault(_OPENED, {})
    if inp.key() not in opened:
        known = next((r for key in keys if (r := shared_results.cached(key)) is not None), None)
        if known is None:
            opened[inp.key()] = ("non-canonical mass", "Opened on the non-canonical mass, the part the estimators "
                                 "estimate: where the canonical tokenization holds nearly all of the mass, every line "
                                 "of the log p(text) view lies flat on the canonical line.")
        else:
            share = -math.expm1(known.log_p_canonical - known.log_marginal)
            opened[inp.key()] = (("log p(text)", "") if share >= FLAT_SHARE else (
                "non-canonical mass", f"Opened on the non-canonical mass: {known.method} found "
                f"{viz.format_small(share, 2, percent=True)} of the mass off the canonical, so on the log p(text) "
                f"scale every line lies within {viz.format_small(known.log_marginal - known.log_p_canonical)} nats "
                "of the canonical line."))
    return opened[inp.key()]

