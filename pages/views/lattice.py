"""Lattice: every tokenization of the text as a path through a graph over its bytes."""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import viz
from marginal_core.viz.mass_flow import MassFlow, flow_of
from pages._app.runtime import loaders
from pages._app.ui import bounds, counts, inputs, live_page, projector, widgets
from pages._app.ui.defaults import APP_EXACT_BUDGET, exact_feasible
from pages._app.ui.error_messages import guard, show_error

if TYPE_CHECKING:
    from marginal_core import Lattice


# The smallest scale a drawing is shown at: arc labels (11 pt, 17 CSS pixels high at natural
# size) stay at least 12 pixels high.
MIN_SCALE = 0.78


@st.cache_data(show_spinner=False, max_entries=32)
def _svg(dot: str) -> bytes:
    return viz.dot_to_svg(dot)


def _scroll_box(dot: str) -> None:
    """A drawing wider than the page at its natural size, in a box that scrolls both ways (scaled
    to the page's width, its labels were 4 pixels high); graphviz_chart where dot is missing.

    The SVG goes in as an image (st.html keeps no inline SVG, and an image runs nothing)."""
    try:
        svg = _svg(dot)
    except Exception:  # noqa: BLE001 -- no dot binary: the browser renders it, scaled
        st.graphviz_chart(dot, width="content")
        return
    source = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
    st.html(f'<div class="lattice-scroll" style="overflow:auto;max-height:75vh;border:1px solid #ddd;'
            f'border-radius:6px;padding:4px"><img src="{source}" alt="the whole lattice" '
            'style="max-width:none;height:auto;display:block"></div>')
    st.caption("Scroll the drawing both ways; Download SVG opens it in a viewer that zooms.")


def _readable_chart(dot: str) -> None:
    """The drawing fitted to the page's width, but never below MIN_SCALE of its natural size: a
    wider drawing scrolls sideways (fitted, the labels of a 16-node window were 8 pixels high at
    1280 pixels, 5 at a projector's 150% zoom). Projector mode shows it at its natural size."""
    st.graphviz_chart(dot, width="content")
    try:
        natural = re.search(rb'<svg width="([\d.]+)pt"', _svg(dot))
    except Exception:  # noqa: BLE001 -- no dot binary: fitted as the browser renders it
        return
    if natural is not None:
        st.html(f'<style>[data-testid="stGraphVizChart"] {{ overflow-x: auto; }} [data-testid="stGraphVizChart"] svg '
                f'{{ min-width: {float(natural.group(1)) * MIN_SCALE:.0f}pt; }}</style>')


def _mass_flow(inp: inputs.Inputs, lat: Lattice, L: int) -> MassFlow | None:
    """The mass flow to draw: exact while the lattice has at most APP_EXACT_BUDGET paths, else
    the paths a chosen method found (a lower bound); None until scored (a button scores it)."""
    count = lat.count()
    c = st.columns([1.3, 1, 1, 1, 2])
    exact = exact_feasible(count)
    source = c[0].segmented_control(
        "Mass from", ["lattice", "beam"], default="beam", key="flow_source", bind="query-params", disabled=exact,
        help=f"Exact (every tokenization scored) up to {APP_EXACT_BUDGET:,} tokenizations; beyond, the paths the "
        "lattice sampler or the beam found.")
    method = "exact" if exact else (source or "beam")
    k = widgets.samples_k(c[1], disabled=method != "lattice")
    seed = widgets.seed(c[2], disabled=method != "lattice")
    W = widgets.beam_width(c[3], disabled=method != "beam")
    key = {"exact": inp.key("exact"), "lattice": inp.key("lattice", k, L, seed), "beam": inp.key("beam", W)}[method]
    what = {"exact": "Score every tokenization", "lattice": f"Score {k} lattice samples",
            "beam": f"Run the beam (W = {bounds.width_label(W)})"}[method]
    job = live_page.estimate_job(inp, method, key, method, "Scoring", said="", samples=k, max_len=L, seed=seed,
                                 budget=APP_EXACT_BUDGET, beam_width=W)
    est = live_page.run_on_press(what, "flow_score", [job], doing="scoring for the mass flow",
                                 idle="Press the button to score the tokenizations with the model; until then the "
                                 "arcs are coloured by role.").get(method)
    if est is None:
        return None
    flow = flow_of(lat, est)
    if flow.lower_bound:
        said = (f"the share of the mass the {method} found on the tokenizations through it ({flow.num_paths:,} "
                f"distinct paths, canonical included; log p(text) ≥ {viz.format_log(flow.log_total)}, a lower "
                "bound). Dashed: arcs on no path found.")
    else:
        said = (f"its share of p(text), exact: all {flow.num_paths:,} tokenizations scored "
                f"(log p(text) = {viz.format_log(flow.log_total)}).")
    st.caption(f"Arc width and colour (grey ≤ {viz.FLOW_FLOOR:.0e}, orange about 1e-3, red all of it): " + said
               + " Hover an arc for its share and the most probable tokenization through it.")
    label = {"exact": "exact", "lattice": f"lattice (k = {k})", "beam": f"beam (W = {bounds.width_label(W)})"}[method]
    bounds.say(inp, est, label)
    return flow


ABOUT = (
    "Nodes are **byte offsets** of the text (labelled with the characters either side, `e|P`); an "
    "arc from one offset to another is a **token** whose text is exactly that span. Every path from "
    "the first node to the last spells the text, so every path is one tokenization. "
    f"<span style='color:{viz.COLORS['canonical']}'>**Blue**</span>: the canonical tokenization; "
    f"<span style='color:{viz.COLORS['off_by_one']}'>**orange**</span>: arcs of the off-by-one splits "
    "(one canonical token cut in two); grey dashed: arcs on no path of at most *L* tokens."
)


def page() -> None:
    """The lattice page."""
    inp = live_page.open_page("The tokenization lattice", ABOUT, unsafe_allow_html=True)
    lat = loaders.require_lattice(inp)
    figure, settings = projector.figure_first()
    with settings:
        L = _counts(lat)
        arcs_by = st.segmented_control(
            "Arcs by", ["role", "mass flow"], default="role", key="arcs_by", bind="query-params",
            help="Mass flow: each arc as wide and as red as the share of the text's probability on the tokenizations "
            "through it (needs the model).")
        flow = _mass_flow(inp, lat, L) if arcs_by == "mass flow" else None
        window = _window(lat)
    with figure:
        _figure(lat, L, window, flow)

    st.subheader("Arcs")
    frame = viz.arcs_frame(lat, L)
    if flow is not None:
        frame["mass_share"] = flow.share
        frame["best_path"] = [None if p is None else viz.segmented(lat, p) for p in flow.best]
    if window is not None and st.toggle("Only arcs inside the window", value=True, key="only_window",
                                        bind="query-params"):
        frame = frame[(frame["start"] >= window[0]) & (frame["end"] <= window[1])]
    st.dataframe(frame, hide_index=True, height=320)


def _counts(lat: Lattice) -> int:
    """The length bound L, beside the lattice's nodes, arcs and tokenizations (all, and of at most L tokens)."""
    c = st.columns(3)
    L = widgets.length_bound(c[0], lat)
    c[1].metric("Nodes", lat.num_nodes)
    c[2].metric("Arcs", lat.num_arcs)
    wide = st.columns(2)  # counts of long texts ("3.73 × 10^4696") need half a row
    wide[0].metric("Tokenizations", viz.count_label(lat.count()))
    counts.exact_count("number of tokenizations", lat.count(), key="tokenizations", where=wide[0])
    with guard("counting paths of at most L tokens"):
        wide[1].metric(f"… of ≤ {L} tokens", viz.count_label(lat.count(L)))
        counts.exact_count(f"number of tokenizations of at most {L} tokens", lat.count(L), key="bounded",
                           where=wide[1])
    if lat.min_len <= L < len(lat.canonical):  # below min_len, the L widget says so
        st.info(f"The canonical tokenization has {len(lat.canonical)} tokens, more than L = {L}: its arcs are dashed.")
    return L


def _window(lat: Lattice) -> tuple[int, int] | None:
    """The window of the text to draw (byte offsets), chosen with the controls, where the whole
    lattice is too large to draw legibly (or not asked for); None: the whole lattice."""
    too_big = lat.num_arcs > viz.MAX_DRAW_ARCS
    if not too_big and lat.num_nodes <= viz.READABLE_NODES:
        return None
    whole = st.toggle(
        "Draw the whole lattice", value=False, disabled=too_big, key="whole", bind="query-params",
        help=f"Up to {viz.MAX_DRAW_ARCS} arcs, drawn at full size in a box that scrolls both ways.",
    )
    if not too_big and whole:
        return None
    st.caption(
        f"The whole lattice is {lat.num_nodes:,} nodes and {lat.num_arcs:,} arcs"
        + (" — too many to draw legibly" if too_big else "")
        + ", so a window of the text is drawn. Move it along the text with the controls "
        "(arcs crossing its edges are left out)."
    )
    w = st.columns(2)
    n = len(lat.canonical)
    for name in ("first", "span"):  # a value kept from a longer text
        if int(st.session_state.get(name) or 1) > n:
            st.session_state[name] = 1 if name == "first" else n
    first = w[0].number_input("First canonical token", min_value=1, max_value=n, value=1, key="first",
                              bind="query-params")
    fit = viz.fit_window(lat, first=int(first) - 1, max_nodes=viz.READABLE_NODES)
    span = w[1].number_input("Canonical tokens shown", min_value=1, max_value=n, value=fit, key="span",
                             bind="query-params", help=f"{fit} fit in a readable drawing from here.")
    window = viz.token_window(lat, int(first) - 1, int(span))
    shown = lat.data[window[0]:window[1]].decode("utf-8", "replace")
    st.markdown(f"Window: bytes {window[0]}–{window[1]}, {viz.code_span(viz.show_piece(shown))}")
    return window


def _figure(lat: Lattice, L: int, window: tuple[int, int] | None, flow: MassFlow | None) -> None:
    """The drawing (whole, in a box that scrolls, or the window, readable) and its downloads."""
    dot = None
    try:
        dot = viz.lattice_dot(lat, max_len=L, window=window, flow=flow)
    except viz.TooLargeToDrawError as exc:
        st.warning(f"{exc}.")
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "drawing the lattice")
    if dot is None:
        return
    with guard("drawing the lattice"):
        if window is None and lat.num_nodes > viz.READABLE_NODES:
            _scroll_box(dot)
        else:
            _readable_chart(dot)
    d = st.columns([1, 1, 2])  # room for the labels at a projector's 853 CSS pixels
    d[0].download_button("Download DOT", dot, file_name="lattice.dot", mime="text/vnd.graphviz", key="dl_dot")
    try:
        d[1].download_button("Download SVG", _svg(dot), file_name="lattice.svg", mime="image/svg+xml", key="dl_svg")
    except Exception as exc:  # noqa: BLE001 -- no dot binary: DOT only
        with d[1]:
            show_error(exc, "rendering SVG")
