"""The lattice as a graphviz drawing (by arc role, or by each arc's share of the mass: a mass
flow), its DOT source and its SVG."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.readable import segmented, show_piece
from marginal_core.viz.arcs import MAX_DRAW_ARCS, arc_roles, arcs_in_bound, window_arcs
from marginal_core.viz.mass_flow import MassFlow
from marginal_core.viz.style import COLORS
from marginal_core.viz.text import format_small

if TYPE_CHECKING:
    import graphviz


class TooLargeToDrawError(MarginalError):
    """The lattice (or window of it) has too many arcs to draw legibly."""



class RenderError(MarginalError):
    """graphviz's ``dot`` rejected a drawing's DOT source (a bug: labels are escaped to prevent it)."""



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
    best = flow.best[arc]
    if best is None:
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
                             f"best path: {segmented(lattice, best)} (log p {flow.best_log_p[arc]:.3f})"),
    }



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
