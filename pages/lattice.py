"""Lattice: every tokenization of the text as a path through a graph over its bytes."""

from __future__ import annotations

import base64

import streamlit as st

from marginal_core import viz
from pages._app import counts, inputs, loaders, widgets
from pages._app.errors import guard, show_error


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


def page() -> None:
    """The lattice page."""
    inp = inputs.current()
    st.title("The tokenization lattice")
    st.markdown(
        "Nodes are **byte offsets** of the text (labelled with the characters either side, `e|P`); an "
        "arc from one offset to another is a **token** whose text is exactly that span. Every path from "
        "the first node to the last spells the text, so every path is one tokenization. "
        f"<span style='color:{viz.COLORS['canonical']}'>**Blue**</span>: the canonical tokenization; "
        f"<span style='color:{viz.COLORS['off_by_one']}'>**orange**</span>: arcs of the off-by-one splits "
        "(one canonical token cut in two); grey dashed: arcs on no path of at most *L* tokens.",
        unsafe_allow_html=True,
    )

    lat = loaders.require_lattice(inp)
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

    window = None
    too_big = lat.num_arcs > viz.MAX_DRAW_ARCS
    if too_big or lat.num_nodes > viz.READABLE_NODES:
        whole = st.toggle(
            "Draw the whole lattice", value=False, disabled=too_big, key="whole", bind="query-params",
            help=f"Up to {viz.MAX_DRAW_ARCS} arcs, drawn at full size in a box that scrolls both ways.",
        )
        if too_big or not whole:
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

    dot = None
    try:
        dot = viz.lattice_dot(lat, max_len=L, window=window)
    except viz.TooLargeToDrawError as exc:
        st.warning(f"{exc}.")
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "drawing the lattice")
    if dot is not None:
        with guard("drawing the lattice"):
            if window is None and lat.num_nodes > viz.READABLE_NODES:
                _scroll_box(dot)
            else:
                st.graphviz_chart(dot, width="content")
        d = st.columns([1, 1, 5])
        d[0].download_button("Download DOT", dot, file_name="lattice.dot", mime="text/vnd.graphviz", key="dl_dot")
        try:
            d[1].download_button("Download SVG", _svg(dot), file_name="lattice.svg", mime="image/svg+xml", key="dl_svg")
        except Exception as exc:  # noqa: BLE001 -- no dot binary: DOT only
            with d[1]:
                show_error(exc, "rendering SVG")

    st.subheader("Arcs")
    frame = viz.arcs_frame(lat, L)
    if window is not None and st.toggle("Only arcs inside the window", value=True, key="only_window",
                                        bind="query-params"):
        frame = frame[(frame["start"] >= window[0]) & (frame["end"] <= window[1])]
    st.dataframe(frame, hide_index=True, height=320)


if __name__ == "__main__":  # a fresh server's first request, in Streamlit's legacy pages/ mode (see app.py)
    from app import main

    main()
