"""Figures and tables of lattices and estimates: graphviz drawings, plotly charts, pandas tables.

Plain Python, so the app, notebooks and tests use the same figures; nothing here runs a model
(callers pass lattices and :class:`~marginal_core.estimators.Estimate` objects in). graphviz,
plotly and pandas are imported by the functions that need them, so ``import marginal_core.viz``
works without them.

Colours are fixed so that every view tells the same story: the canonical tokenization is blue,
the off-by-one set orange, uniform lattice samples green, proxy samples purple, beam paths
brown, exact grey. A mass-flow drawing colours arcs by their share of the mass instead.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from marginal_core.beam_width import Round
from marginal_core.errors import MarginalError
from marginal_core.lattice import Lattice, Path, format_count
from marginal_core.mass_flow import MassFlow

if TYPE_CHECKING:
    import graphviz
    import pandas as pd
    import plotly.graph_objects as go

    from marginal_core.estimators import Estimate

__all__ = [
    "COLORS",
    "MAX_DRAW_ARCS",
    "TooLargeToDrawError",
    "RenderError",
    "show_piece",
    "code_span",
    "count_label",
    "format_log",
    "format_small",
    "segmented",
    "chips_html",
    "arc_roles",
    "arcs_in_bound",
    "arcs_frame",
    "token_window",
    "window_arcs",
    "window_nodes",
    "fit_window",
    "flow_color",
    "lattice_graph",
    "lattice_dot",
    "dot_to_svg",
    "samples_frame",
    "length_histogram",
    "mass_bar",
    "top_n_figure",
    "rank_scatter",
    "RunTrace",
    "running_figure",
]

COLORS = {
    "canonical": "#1f77b4",
    "off_by_one": "#ff7f0e",
    "uniform": "#2ca02c",
    "lattice": "#2ca02c",
    "proxy": "#9467bd",
    "beam": "#8c564b",
    "exact": "#444444",
    "rest": "#8c8c8c",
    "other": "#4d4d4d",
    "greyed": "#d0d0d0",
}
KIND_LABELS = {
    "canonical": "canonical",
    "off_by_one": "off-by-one",
    "uniform": "uniform (length ≤ L)",
    "rest": "rest",
    "proxy": "proxy (constrained LM)",
    "beam": "beam",
    "exact": "exact",
}
# Chip backgrounds for consecutive tokens (pastel, readable with dark text).
CHIP_COLORS = ("#cfe3f7", "#fde2c8", "#d5f0d0", "#f6d3d8", "#e3d9f2", "#f7efc4", "#d2eeee")
# Beyond this many arcs a drawing is an unreadable wall: callers draw a window instead.
MAX_DRAW_ARCS = 250
# Wider than this many nodes, a drawing scaled to a page's width has unreadable labels: the app
# draws a window of the text by default.
READABLE_NODES = 16


class TooLargeToDrawError(MarginalError):
    """The lattice (or window of it) has too many arcs to draw legibly."""


class RenderError(MarginalError):
    """graphviz's ``dot`` rejected a drawing's DOT source (a bug: labels are escaped to prevent it)."""


# --------------------------------------------------------------------------------------------
# Text helpers


# Characters a label shows as an escape (\x07, \u200b, \ud800) instead of as themselves: control
# and format characters (bidi overrides, zero-width joiners), line and paragraph separators, lone
# surrogates and noncharacters. They are invisible, reorder or break lines, and are not allowed in
# XML (SVG); combining marks, emoji and every script are shown as they are.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHOWN_AS = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def _visible(char: str) -> str:
    if char in _SHOWN_AS:
        return _SHOWN_AS[char]
    code = ord(char)
    noncharacter = 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE
    if unicodedata.category(char) in _HIDDEN_CATEGORIES or noncharacter:
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return char


def show_piece(text: str) -> str:
    r"""A token's text with invisible characters made visible: space ␣, newline ↵, tab ⇥, CR ␍, and
    any other control, format or separator character, lone surrogate or noncharacter as a Python
    escape (``\x07``, ``\u200d``)."""
    if text.isprintable():  # the common case, fast: nothing to escape but spaces
        return text.replace(" ", "␣")
    return "".join(map(_visible, text))


def code_span(text: str) -> str:
    """Text as a Markdown inline code span that shows it literally, backticks in it included
    (a fence one backtick longer than its longest run), so no text turns into markup or math."""
    longest = max(map(len, re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}" if longest else f"`{text}`"


def segmented(lattice: Lattice, path: Path, sep: str = "|") -> str:
    """A tokenization as one string with its token boundaries marked: ``␣The|␣cap|ital``."""
    return sep.join(show_piece(p) for p in lattice.pieces(path))


def chips_html(lattice: Lattice, path: Path | None = None, *, show_ids: bool = True) -> str:
    """The tokens of a path (default: canonical) as coloured chips, one per token.

    Each chip shows the token's text (spaces as ␣) and, below it, its id; hovering shows the
    byte span. The result is self-contained HTML for ``st.html`` or a notebook.
    """
    path = lattice.canonical if path is None else path
    chips, at = [], 0
    for n, (token, piece) in enumerate(zip(path, lattice.pieces(path))):
        width = len(lattice.vocab.surface(token))
        color = CHIP_COLORS[n % len(CHIP_COLORS)]
        label = html.escape(show_piece(piece))
        sub = f'<span style="display:block;font-size:0.65em;color:#666">{token}</span>' if show_ids else ""
        chips.append(
            f'<span title="token {n + 1}: id {token}, bytes {at}–{at + width}" '
            f'style="display:inline-block;background:{color};border:1px solid #9aa;'
            f"border-radius:6px;padding:2px 6px;margin:2px 1px;font-family:monospace;"
            f'font-size:1.05em;text-align:center;line-height:1.2">{label}{sub}</span>'
        )
        at += width
    return '<div style="line-height:2.2">' + "".join(chips) + "</div>"


def count_label(n: int) -> str:
    """A count as a page shows it: digits with separators below a billion, else "1.23 × 10^13"
    (lattice.format_count, typeset)."""
    mantissa, _, exponent = format_count(n, exact_below=10**9).partition("e")
    return f"{mantissa} × 10^{exponent}" if exponent else mantissa


def format_log(x: float, digits: int = 3) -> str:
    """A natural log for display ('−inf' where no mass was found)."""
    return f"{x:.{digits}f}" if math.isfinite(x) else "−inf"


def format_small(x: float, digits: int = 3, *, percent: bool = False, signed: bool = False) -> str:
    """A number that may be tiny, for display: ``digits`` decimals ("0.125", "12.50%"), or two
    significant digits in scientific notation where those decimals would hide it ("4.7e-05",
    "4.7e-03%"); a share just short of 100% keeps the digits that show the gap ("99.99969%");
    signed adds "+" to positive numbers (a gain)."""
    value = 100 * x if percent else x
    sign = "+" if signed else ""
    gap = 100 - value  # a share just short of all of it ("99.99969%", never a rounded "100.00%")
    if value != 0 and math.isfinite(value) and abs(value) < 10**-digits:
        text = f"{value:{sign}.1e}"
    elif percent and 0 < gap < 10**-digits:
        text = f"{value:{sign}.{min(12, math.ceil(-math.log10(gap)) + 1)}f}"
    else:
        text = f"{value:{sign}.{digits}f}"
    return text + ("%" if percent else "")


def _node_label(data: bytes, node: int) -> str:
    """A node's label: its byte offset, and the characters either side of it (``e|P``)."""
    before = data[max(0, node - 4) : node].decode("utf-8", "ignore")[-1:]
    after = data[node : node + 4].decode("utf-8", "ignore")[:1]
    inside = node < len(data) and (data[node] & 0xC0) == 0x80
    mark = "·" if inside else "|"  # a boundary inside a multi-byte character (byte fallback)
    return _dot_text(str(node), f"{show_piece(before)}{mark}{show_piece(after)}")


def _dot_text(*lines: str) -> str:
    r"""Lines of text as one DOT label, shown literally: backslashes doubled (DOT reads ``\n``,
    ``\N``, ``\"`` as escapes), joined by DOT's line break, never read as an HTML-like ``<label>``
    (graphviz.quote escapes the double quotes). Callers pass text through show_piece first, so no
    control character reaches ``dot`` (NUL ends its input; SVG, which is XML, forbids the rest)."""
    import graphviz

    return graphviz.nohtml("\\n".join(line.replace("\\", "\\\\") for line in lines))


# --------------------------------------------------------------------------------------------
# Arcs


def arc_roles(lattice: Lattice) -> np.ndarray:
    """Per arc: "canonical", "off_by_one" (an arc of a one-token split) or "other"."""
    roles = np.full(lattice.num_arcs, "other", dtype=object)
    for _, first, second in lattice.splits:
        roles[first] = roles[second] = "off_by_one"
    node = 0
    for token in lattice.canonical:
        for arc in lattice.out_arcs(node):
            if int(lattice.arc_token[arc]) == token:
                roles[arc] = "canonical"
                node = int(lattice.arc_end[arc])
                break
    return roles


def arcs_in_bound(lattice: Lattice, max_len: int | None) -> np.ndarray:
    """Per arc: whether it lies on some path of at most max_len tokens (all True for None).

    An arc i→j is on such a path iff the fewest tokens to reach i, plus one, plus the fewest
    tokens from j to the end is at most max_len.
    """
    if max_len is None:
        return np.ones(lattice.num_arcs, dtype=bool)
    prefix, suffix = lattice.shortest
    return prefix[lattice.arc_start] + 1 + suffix[lattice.arc_end] <= max_len


def arcs_frame(lattice: Lattice, max_len: int | None = None) -> pd.DataFrame:
    """Every arc as a table row: byte span, token id, piece, role and whether it fits in L."""
    import pandas as pd

    roles = arc_roles(lattice)
    ok = arcs_in_bound(lattice, max_len)
    prefix, suffix = lattice.shortest
    return pd.DataFrame(
        {
            "start": lattice.arc_start,
            "end": lattice.arc_end,
            "token_id": lattice.arc_token,
            "piece": [show_piece(p) for p in lattice.pieces(tuple(lattice.arc_token.tolist()))],
            "role": roles,
            "fewest_tokens_through": prefix[lattice.arc_start] + 1 + suffix[lattice.arc_end],
            "within_L": ok,
        }
    )


# --------------------------------------------------------------------------------------------
# Windows over long texts


def token_window(lattice: Lattice, first: int, count: int) -> tuple[int, int]:
    """The byte span of canonical tokens first .. first + count - 1 (clamped to the text)."""
    nodes = lattice.canonical_nodes
    first = max(0, min(first, len(nodes) - 2))
    last = max(first + 1, min(first + count, len(nodes) - 1))
    return nodes[first], nodes[last]


def window_arcs(lattice: Lattice, window: tuple[int, int] | None) -> np.ndarray:
    """Per arc: whether it lies inside the byte window [start, end] (all True for None)."""
    if window is None:
        return np.ones(lattice.num_arcs, dtype=bool)
    lo, hi = window
    return (lattice.arc_start >= lo) & (lattice.arc_end <= hi)


def window_nodes(lattice: Lattice, window: tuple[int, int] | None) -> int:
    """How many lattice nodes lie inside the byte window (all of them for None)."""
    if window is None:
        return lattice.num_nodes
    nodes = lattice.nodes
    return int(((nodes >= window[0]) & (nodes <= window[1])).sum())


def fit_window(
    lattice: Lattice, max_arcs: int = MAX_DRAW_ARCS, first: int = 0, max_nodes: int | None = None
) -> int:
    """How many canonical tokens from token ``first`` on fit in one drawing.

    A drawing fits when it has at most max_arcs arcs and (if given) at most max_nodes nodes.
    Always at least one token (a single token can still be drawn when its span holds more arcs;
    the caller then gets TooLargeToDrawError from lattice_graph).
    """
    total = len(lattice.canonical)
    count = 1
    while first + count < total:
        window = token_window(lattice, first, count + 1)
        if int(window_arcs(lattice, window).sum()) > max_arcs:
            break
        if max_nodes is not None and window_nodes(lattice, window) > max_nodes:
            break
        count += 1
    return count


# --------------------------------------------------------------------------------------------
# Arc colours of a mass-flow drawing, by the log10 of the share: FLOW_COLORS[0] at FLOW_FLOOR and
# below, FLOW_COLORS[-1] at 1, interpolated between.
FLOW_COLORS = ("#e3e3e3", "#fdae61", "#d7191c")
FLOW_FLOOR = 1e-6


def flow_color(share: float) -> str:
    """An arc's colour in a mass-flow drawing, by the order of magnitude of its share."""
    t = 1 - min(1.0, max(0.0, math.log10(max(share, FLOW_FLOOR)) / math.log10(FLOW_FLOOR)))
    x = t * (len(FLOW_COLORS) - 1)
    i = min(int(x), len(FLOW_COLORS) - 2)
    a, b = (np.array([int(c[k : k + 2], 16) for k in (1, 3, 5)]) for c in FLOW_COLORS[i : i + 2])
    rgb = np.rint(a + (b - a) * (x - i)).astype(int)
    return "#" + "".join(f"{v:02x}" for v in rgb)


def _flow_attrs(lattice: Lattice, flow: MassFlow, arc: int, piece: str, what: str) -> dict[str, str]:
    """An arc's look in a mass-flow drawing: width and colour by its share, hover naming the
    share and the best path through it."""
    if flow.best[arc] is None:
        return {"color": COLORS["greyed"], "fontcolor": COLORS["greyed"], "style": "dashed", "penwidth": "1",
                "tooltip": _dot_text(what, "on no scored path")}
    share = float(flow.share[arc])
    shown = format_small(share, 1, percent=True)
    of = "of the marginal" if not flow.lower_bound else f"of the mass the {flow.source} found (a lower bound)"
    return {
        "color": flow_color(share),
        "fontcolor": "#333333",
        "penwidth": f"{0.8 + 7 * share:.2f}",
        "label": _dot_text(piece, shown),
        "tooltip": _dot_text(what, f"{shown} {of}",
                             f"best path: {segmented(lattice, flow.best[arc])} (log p {flow.best_log_p[arc]:.3f})"),
    }


# --------------------------------------------------------------------------------------------
# The lattice drawing


def lattice_graph(
    lattice: Lattice,
    *,
    max_len: int | None = None,
    window: tuple[int, int] | None = None,
    max_arcs: int = MAX_DRAW_ARCS,
    flow: MassFlow | None = None,
) -> graphviz.Digraph:
    """The lattice as a left-to-right graphviz drawing.

    Nodes are byte offsets labelled with the text around them; arcs are labelled with their
    token's piece. Canonical arcs are thick and blue, off-by-one split arcs orange, other arcs
    dark grey. With ``max_len`` arcs on no path of at most that many tokens are greyed and
    dashed. With a ``flow`` (:func:`mass_flow`) arcs are instead as wide and as red as their
    share of the mass, labelled with it, their hover naming it and the best path through them
    (arcs on no scored path dashed). ``window`` (byte start, byte end) draws only the arcs
    inside that span. Raises TooLargeToDrawError when more than ``max_arcs`` arcs would be drawn.
    """
    import graphviz

    inside = window_arcs(lattice, window)
    shown = int(inside.sum())
    if shown > max_arcs:
        raise TooLargeToDrawError(
            f"the lattice {'window ' if window else ''}has {shown:,} arcs, more than the "
            f"{max_arcs:,} that can be drawn legibly; draw a smaller window of the text"
        )
    roles, ok = arc_roles(lattice), arcs_in_bound(lattice, max_len)
    canonical_nodes = set(lattice.canonical_nodes)
    dot = graphviz.Digraph("lattice", graph_attr={"rankdir": "LR", "nodesep": "0.15", "ranksep": "0.35"})
    dot.attr("node", shape="circle", fontname="Helvetica", fontsize="10", width="0.45", fixedsize="false", margin="0.02")
    dot.attr("edge", fontname="Courier", fontsize="11", arrowsize="0.5")
    arcs = np.flatnonzero(inside)
    nodes = sorted(set(lattice.arc_start[arcs].tolist()) | set(lattice.arc_end[arcs].tolist()))
    # An invisible chain through the nodes in byte order keeps them on one line, left to right,
    # like a ruler under the text; arcs then bend over and under it.
    for a, b in zip(nodes, nodes[1:]):
        dot.edge(f"n{a}", f"n{b}", style="invis", weight="100")
    for node in nodes:
        canonical = node in canonical_nodes
        dot.node(
            f"n{node}",
            _node_label(lattice.data, node),
            color=COLORS["canonical"] if canonical else "#777777",
            penwidth="2" if canonical else "1",
            shape="doublecircle" if node in (0, lattice.end) else "circle",
        )
    for arc in arcs.tolist():
        start, end, token = int(lattice.arc_start[arc]), int(lattice.arc_end[arc]), int(lattice.arc_token[arc])
        role = roles[arc]
        piece = show_piece(lattice.vocab.surface(token).decode("utf-8", "backslashreplace"))
        attrs = {
            "label": _dot_text(piece),
            "tooltip": _dot_text(f"token {token} “{piece}”, bytes {start}–{end}, {role.replace('_', '-')}"),
            "color": COLORS[role],
            "fontcolor": COLORS[role],
            "penwidth": {"canonical": "3", "off_by_one": "1.8"}.get(role, "1"),
            "class": role,
        }
        attrs["weight"] = "0"  # only the invisible chain decides the node order
        if flow is not None:
            attrs.update(_flow_attrs(lattice, flow, arc, piece, f"token {token} “{piece}”, bytes {start}–{end}"))
        elif not ok[arc]:
            attrs["style"] = "dashed"
            attrs["class"] = f"{role} greyed"
            if role != "canonical":
                attrs["color"] = attrs["fontcolor"] = COLORS["greyed"]
        dot.edge(f"n{start}", f"n{end}", **attrs)
    return dot


def lattice_dot(lattice: Lattice, **kwargs) -> str:
    """The DOT source of :func:`lattice_graph` (same keyword arguments)."""
    return lattice_graph(lattice, **kwargs).source


def dot_to_svg(dot: str) -> bytes:
    """Render DOT to SVG with the graphviz ``dot`` binary (graphviz.ExecutableNotFound without it;
    RenderError, with what ``dot`` said, when it rejects the source)."""
    import subprocess

    import graphviz

    try:
        return graphviz.Source(dot).pipe(format="svg")
    except (subprocess.CalledProcessError, UnicodeEncodeError) as exc:
        said = getattr(exc, "stderr", None) or b""
        said = (said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)).strip()
        raise RenderError(
            "graphviz's dot could not render the drawing" + (f" ({said.splitlines()[0]})" if said else f" ({exc})")
            + "; the DOT source can still be downloaded"
        ) from exc


# --------------------------------------------------------------------------------------------
# Samples as tables


def samples_frame(
    lattice: Lattice,
    estimate: Estimate | None = None,
    *,
    paths: Sequence[Path] | None = None,
    kinds: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per distinct tokenization: its segmented text, length and scores.

    From an Estimate: log p, log q (proxy only) and how often it was drawn, in order of first
    draw. From bare ``paths`` (unscored samples): only the text and the length.
    """
    import pandas as pd

    if estimate is not None:
        from marginal_core.analysis import distinct

        rows = distinct(estimate)
        frame = pd.DataFrame(
            {
                "tokenization": [segmented(lattice, p) for p in rows["ids"]],
                "tokens": rows["ids"].map(len).to_numpy(),
                "kind": rows["kind"].to_numpy(),
                "log_p": rows["log_p"].to_numpy(),
            }
        )
        if estimate.log_q is not None:
            frame["log_q"] = rows["log_q"].to_numpy()
            frame["draws"] = rows["draws"].to_numpy()
        return frame
    paths = list(paths or [])
    frame = pd.DataFrame({"tokenization": [segmented(lattice, p) for p in paths], "tokens": [len(p) for p in paths]})
    if kinds is not None:
        frame["kind"] = list(kinds)
    return frame


# --------------------------------------------------------------------------------------------
# Plotly figures


def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 360) -> go.Figure:
    fig.update_layout(
        title=title,
        xaxis_title=x,
        yaxis_title=y,
        height=height,
        margin=dict(l=10, r=10, t=50, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1),
    )
    return fig


def length_histogram(groups: Mapping[str, Sequence[int]], canonical_len: int | None = None) -> go.Figure:
    """Bars of how many samples of each group have each number of tokens (one trace a group).

    Group names that are sample kinds (off_by_one, uniform, proxy, ...) get their colours.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, lengths in groups.items():
        values, counts = np.unique(np.asarray(list(lengths), dtype=int), return_counts=True)
        fig.add_trace(
            go.Bar(
                x=values, y=counts, name=KIND_LABELS.get(name, name), marker_color=COLORS.get(name),
                opacity=0.75,
            )
        )
    if canonical_len is not None:
        fig.add_vline(x=canonical_len, line_dash="dot", line_color=COLORS["canonical"],
                      annotation_text="canonical", annotation_position="top")
    fig.update_layout(barmode="group")
    return _layout(fig, "Lengths of the samples", "tokens", "samples")


def mass_bar(frame: pd.DataFrame, group: str, title: str, log_y: bool = False) -> go.Figure:
    """Share of the found probability mass per group (a frame from analysis.mass_by_*).

    Bars are labelled with the share and hover shows the log mass and number of paths. With
    log_y the shares are on a log axis, where shares of 1e-40 next to 99.99% stay visible.
    """
    import plotly.graph_objects as go

    labels = [KIND_LABELS.get(str(g), str(g)) for g in frame[group]]
    colors = [COLORS.get(str(g), COLORS["canonical"] if group == "kind" else "#5b8fc9") for g in frame[group]]
    percent = 100 * frame["share"].to_numpy(dtype=float)
    fig = go.Figure(
        go.Bar(
            x=labels if group == "kind" else frame[group],
            y=percent,
            marker_color=colors,
            text=[format_small(s, 1, percent=True) for s in frame["share"]],
            textposition="outside",
            customdata=np.stack([frame["log_mass"], frame["paths"]], axis=1),
            hovertemplate="%{x}<br>share %{y:.3g}%<br>log mass %{customdata[0]:.3f}<br>%{customdata[1]} paths<extra></extra>",
            name="share",
        )
    )
    if log_y:
        _decades_only(fig, percent[percent > 0], "y")
    else:
        fig.update_yaxes(ticksuffix="%", rangemode="tozero")
    x_title = {"kind": "", "tokens": "tokens in the tokenization", "splits": "splits from the canonical"}
    return _layout(fig, title, x_title.get(group, group), "share of found mass (%)")


def _decades_only(fig: go.Figure, values: np.ndarray, axis: str) -> None:
    """A log axis labelled at powers of ten only (at most about eight labels), never at the
    2s and 5s between them, which read as stray numbers."""
    low, high = (float(np.log10(values.min())), float(np.log10(values.max()))) if len(values) else (0.0, 2.0)
    step = max(1, math.ceil((high - low) / 8))
    update = fig.update_yaxes if axis == "y" else fig.update_xaxes
    update(type="log", dtick=step, exponentformat="power", minor=dict(showgrid=False))


def top_n_figure(frame: pd.DataFrame) -> go.Figure:
    """Cumulative share of the found mass held by the n most probable tokenizations."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=frame["n"], y=frame["cumulative_share"], mode="lines+markers",
                               name="top n", marker=dict(size=4)))
    if len(frame) > 30:
        _decades_only(fig, frame["n"].to_numpy(dtype=float), "x")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05])
    return _layout(fig, "Cumulative mass of the n most probable tokenizations", "n", "share of found mass (%)")


def rank_scatter(estimate: Estimate, rho: float | None = None) -> go.Figure:
    """log p against log q for the distinct proxy samples, with Spearman's rho in the title."""
    import plotly.graph_objects as go

    from marginal_core.analysis import distinct, spearman

    if estimate.log_q is None:
        raise ValueError("a rank scatter needs proxy samples (with log q)")
    rows = distinct(estimate)
    if rho is None:
        rho, _ = spearman(estimate)
    fig = go.Figure(
        go.Scatter(
            x=rows["log_q"], y=rows["log_p"], mode="markers", name="distinct samples",
            marker=dict(color=COLORS["proxy"], size=np.clip(4 + 2 * np.log2(rows["draws"]), 4, 16), opacity=0.7),
            customdata=rows["draws"],
            hovertemplate="log q %{x:.3f}<br>log p %{y:.3f}<br>drawn %{customdata}×<extra></extra>",
        )
    )
    rho_text = "n/a (fewer than 3 distinct samples)" if rho is None or math.isnan(rho) else f"{rho:.3f}"
    return _layout(fig, f"log p against log q — Spearman ρ = {rho_text} (n = {len(rows)})",
                   "log q (constrained LM)", "log p (language model)")


@dataclass(frozen=True)
class RunTrace:
    """One estimator's run for the running-estimate plots.

    ``checkpoints`` are (samples done, seconds since the start) pairs, one per scored chunk;
    ``running`` is the full log marginal after each sample and ``noncanonical`` the log of the
    non-canonical part alone (what the estimators actually estimate).
    """

    label: str
    running: np.ndarray
    checkpoints: Sequence[tuple[int, float]]
    color: str | None = None
    noncanonical: np.ndarray | None = None
    rounds: Sequence[Round] = ()  # an anytime beam's finished rounds, marked on the plots

    @classmethod
    def of(cls, estimate: Estimate, label: str | None = None) -> RunTrace:
        """From an Estimate (its checkpoints, or one point at its end)."""
        return cls(
            label or estimate.method,
            estimate.running_marginal(),
            list(estimate.run.checkpoints) or [(estimate.num_samples, estimate.seconds)],
            COLORS.get(estimate.method),
            np.asarray(estimate.running, dtype=float),
            estimate.run.rounds,
        )


RUNNING_Y = {"marginal": "log p(text) (nats)", "noncanonical": "log non-canonical mass (nats)"}
# The narrowest y range of a running plot, in nats: estimates that differ from the canonical by
# less (often 1e-5 nats) sit on its line instead of stretching the axis to 14-decimal ticks;
# the non-canonical mass view shows such differences.
MIN_Y_SPAN = 0.01


def _readable_y(fig: go.Figure, ys: Sequence[float]) -> None:
    """A y axis of at least MIN_Y_SPAN with ticks of at most three decimals (hover keeps six)."""
    if not ys:
        return
    low, high = min(ys), max(ys)
    span = max(high - low, MIN_Y_SPAN)
    if high - low < MIN_Y_SPAN:
        middle = (low + high) / 2
        pad = 0.1 * span
        fig.update_yaxes(range=[middle - span / 2 - pad, middle + span / 2 + pad])
    decimals = min(3, max(0, math.ceil(-math.log10(span / 5))))
    fig.update_yaxes(tickformat=f",.{decimals}f", hoverformat=".6f")


def running_figure(
    traces: Sequence[RunTrace],
    *,
    log_p_canonical: float,
    log_exact: float | None = None,
    x: str = "samples",
    y: str = "marginal",
) -> go.Figure:
    """Running estimates against the number of samples or against seconds.

    ``y="marginal"``: log p(text), with the canonical log probability (and the exact marginal
    where known) as horizontal lines. ``y="noncanonical"``: the log of the non-canonical mass
    alone, where the estimators differ visibly; ``log_exact`` is then the exact non-canonical
    log mass. Points with no mass found yet (-inf) are left out.
    """
    import plotly.graph_objects as go

    if x not in ("samples", "seconds"):
        raise ValueError("x must be 'samples' or 'seconds'")
    if y not in RUNNING_Y:
        raise ValueError(f"y must be one of {', '.join(RUNNING_Y)}")
    fig = go.Figure()
    shown: list[float] = []  # every y value drawn, for the axis range and its tick format
    for trace in traces:
        values = trace.running if y == "marginal" else trace.noncanonical
        if x == "samples":
            xs, ys = np.arange(1, len(values) + 1), np.asarray(values, dtype=float)
        else:
            points = [(s, n) for n, s in trace.checkpoints if 0 < n <= len(values)]
            start = [(0.0, log_p_canonical)] if y == "marginal" else []
            xs = np.array([p[0] for p in start] + [s for s, _ in points], dtype=float)
            ys = np.array([p[1] for p in start] + [values[n - 1] for _, n in points], dtype=float)
        keep = np.isfinite(ys)
        shown.extend(ys[keep].tolist())
        fig.add_trace(
            go.Scatter(x=xs[keep], y=ys[keep], mode="lines+markers", name=trace.label,
                       line=dict(color=trace.color, width=2.5), opacity=0.85,
                       marker=dict(size=6, maxdisplayed=0 if x == "seconds" else 30))
        )
    for trace in traces:  # where each round of an anytime beam ended, with the width it reached
        for r in trace.rounds:
            fig.add_vline(x=r.seconds if x == "seconds" else r.paths, line_dash="dot", line_width=1,
                          line_color=trace.color or "grey", annotation_text=f"W={r.width}",
                          annotation_position="top left", annotation_font_size=11)
    # The reference lines go under the traces: an estimate equal to the canonical stays visible.
    if y == "marginal":
        shown.append(log_p_canonical)
        fig.add_hline(y=log_p_canonical, line_dash="dot", line_color=COLORS["canonical"], layer="below",
                      annotation_text="canonical", annotation_position="bottom right")
    has_exact = log_exact is not None and math.isfinite(log_exact)
    if has_exact:
        shown.append(log_exact)
        fig.add_hline(y=log_exact, line_dash="dash", line_color=COLORS["exact"], layer="below",
                      annotation_text="exact", annotation_position="top right")
    _readable_y(fig, shown)
    # Invisible traces so that the reference lines appear in the legend too.
    if y == "marginal":
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="canonical",
                                 line=dict(color=COLORS["canonical"], dash="dot")))
    if has_exact:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="exact",
                                 line=dict(color=COLORS["exact"], dash="dash")))
    what = "log p(text)" if y == "marginal" else "Non-canonical mass"
    title = f"{what} estimate vs. " + ("samples" if x == "samples" else "seconds")
    return _layout(fig, title, "samples" if x == "samples" else "seconds", RUNNING_Y[y])
