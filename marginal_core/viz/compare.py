"""One text under several tokenizers on one byte axis: token chips row by row (HTML) and each
model's mass flow as arcs above and below the text (plotly), for the Compare page.

Both figures place everything at the *text's* byte offsets. A tokenizer with a dummy prefix
(docs/design.md, point 4) spells one extra leading space: its lattice offsets are shifted back by
one, so that space sits at byte −1, a column of its own before the text's first byte.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import Path
from marginal_core.lattice.readable import show_piece
from marginal_core.viz.arcs import arc_roles
from marginal_core.viz.charts import _layout
from marginal_core.viz.drawing import flow_color
from marginal_core.viz.mass_flow import MassFlow
from marginal_core.viz.style import CHIP_COLORS, COLORS, MONO_FONTS
from marginal_core.viz.text import format_small

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Where two tokenizations cut differently: a line across all rows of the chips.
CUT_MARK = "#d62728"

# Arcs with a smaller share of the mass found are left out of the flows figure (canonical arcs
# are always drawn): a long text's lattice has thousands of arcs, nearly all of them with a
# negligible share; drawing only those that carry the mass keeps plotly responsive.
MIN_FLOW_SHARE = 1e-3

# How many bytes of the text the flows figure shows at first; pan along the rest.
FLOW_WINDOW_BYTES = 64

# Upper share edges of the flows figure's line classes (one plotly trace each, however many arcs).
_FLOW_EDGES = (0.01, 0.1, 0.5)

# Half the height of the band the text's characters sit in, in units of the tallest arc.
_LIFT = 0.22



def prefix_shift(lattice: Lattice) -> int:
    """How many bytes the tokenizer spells before the text: 1 with a dummy-prefix space, else 0."""
    return len(lattice.data) - len(lattice.text.encode("utf-8"))



def _text_of(sides: Sequence[tuple]) -> str:
    """The one text every side's lattice spells (ValueError when they differ or there are none)."""
    texts = {side[1].text for side in sides}
    if len(texts) != 1:
        raise ValueError("the figures compare one text: pass one lattice per model, all of the same text")
    return texts.pop()



def _char_spans(text: str) -> list[tuple[int, int, str]]:
    """(byte start, byte end, character) for each character of the text."""
    spans, at = [], 0
    for char in text:
        width = len(char.encode("utf-8"))
        spans.append((at, at + width, char))
        at += width
    return spans



def _bounds(lattice: Lattice, path: Path) -> list[int]:
    """A path's token boundaries as the text's byte offsets (−1 for a dummy-prefix start)."""
    shift = prefix_shift(lattice)
    return [b - shift for b in lattice.nodes_of(path)]



def differing_cuts(sides: Sequence[tuple[str, Lattice, Path | None]]) -> list[int]:
    """Byte offsets inside the text where some of the given paths (None: canonical) cut and
    others do not, ascending."""
    end = len(_text_of(sides).encode("utf-8"))
    cuts = [
        {b for b in _bounds(lat, lat.canonical if path is None else path) if 0 < b < end} for _, lat, path in sides
    ]
    return sorted(set[int].union(*cuts) - set[int].intersection(*cuts))



def _span_text(start: int, end: int) -> str:
    """A byte span for a hover, naming a dummy-prefix space at byte −1."""
    return f"the dummy-prefix space and bytes 0–{end}" if start < 0 else f"bytes {start}–{end}"



def byte_axis_chips_html(sides: Sequence[tuple[str, Lattice, Path | None]]) -> str:
    """Each model's tokens (path None: canonical) as a row of chips under the text, every chip
    as wide as its bytes on one shared byte axis, with a line where the rows cut differently.

    One CSS grid column per byte of the text (plus one at the left for a dummy-prefix space), so
    chips line up whatever the tokenizer; a long text scrolls sideways, the row labels staying
    in view. Hovers give each chip's id and byte span. Self-contained HTML for ``st.html``.
    """
    text = _text_of(sides)
    size = len(text.encode("utf-8"))
    pre = max(prefix_shift(lat) for _, lat, _ in sides)

    def column(byte: int) -> int:  # the grid line where a byte's column starts (labels are column 1)
        return byte + pre + 2

    cells = ['<div style="grid-column:1;grid-row:1;position:sticky;left:0;z-index:3;background:#fff;'
             'padding-right:0.6em;color:#555;font-family:sans-serif">text</div>']
    if pre:
        cells.append(f'<div title="dummy-prefix space (spelled by the tokenizer, not in the text)" '
                     f'style="grid-column:{column(-1)}/{column(0)};grid-row:1;text-align:center;color:#aaa">␣</div>')
    for start, end, char in _char_spans(text):
        cells.append(
            f'<div title="bytes {start}–{end}: U+{ord(char):04X}" style="grid-column:{column(start)}/'
            f'{column(end)};grid-row:1;text-align:center;color:#555">{html.escape(show_piece(char))}</div>'
        )
    for row, (label, lattice, path) in enumerate(sides, start=2):
        path = lattice.canonical if path is None else path
        cells.append(
            f'<div style="grid-column:1;grid-row:{row};position:sticky;left:0;z-index:3;background:#fff;'
            f'padding-right:0.6em;font-family:sans-serif;font-weight:600;align-self:center">{html.escape(label)}</div>'
        )
        bounds = _bounds(lattice, path)
        for n, (token, piece) in enumerate(zip(path, lattice.pieces(path))):
            start, end = bounds[n], bounds[n + 1]
            cells.append(
                f'<div class="chip" title="{html.escape(label)}, token {n + 1}: id {token}, '
                f'{_span_text(start, end)}" style="grid-column:{column(start)}/{column(end)};grid-row:{row};'
                f"background:{CHIP_COLORS[n % len(CHIP_COLORS)]};border:1px solid #9aa;border-radius:6px;"
                f'margin:0 1px;padding:0.15em 0.2em;text-align:center;white-space:pre;line-height:1.3">'
                f"{html.escape(show_piece(piece))}</div>"
            )
    for cut in differing_cuts(sides):
        cells.append(
            f'<div class="cut" title="the tokenizations cut differently at byte {cut}" style="grid-column:'
            f"{column(cut)}/span 1;grid-row:1/-1;border-left:3px solid {CUT_MARK};margin-left:-2px;"
            f'z-index:2;opacity:0.75"></div>'
        )
    grid = (
        f'<div style="display:grid;grid-template-columns:max-content repeat({size + pre},minmax(0.75em,max-content));'
        f"grid-template-rows:repeat({len(sides) + 1},auto);row-gap:0.35em;width:max-content;"
        f'font-family:{MONO_FONTS};font-size:1.05em">{"".join(cells)}</div>'
    )
    return f'<div style="overflow-x:auto;max-width:100%;padding:0.3em 0 0.6em 0">{grid}</div>'



def _flow_classes(min_share: float) -> list[tuple[float, float, str]]:
    """The flows figure's line classes as (lowest share, highest share, legend name), thinnest
    first; the first holds canonical arcs under ``min_share``, drawn anyway."""
    edges = [0.0, min_share, *(e for e in _FLOW_EDGES if e > min_share), 1.0]

    def pct(x: float) -> str:
        return format_small(x, 1 if x < 0.01 else 0, percent=True)

    names = [f"under {pct(min_share)} (canonical only)"]
    names += [f"{pct(lo)}–{pct(hi)}" for lo, hi in zip(edges[1:-2], edges[2:-1])] + [f"≥ {pct(edges[-2])}"]
    return [(lo, hi, name) for lo, hi, name in zip(edges, edges[1:], names)]



def _arc_points(start: float, end: float, lift: float, height: float, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """A half-ellipse from byte ``start`` to ``end``, ``height`` above (sign 1) or below (−1) a
    band of ``lift`` around the text."""
    u = np.linspace(0.0, 1.0, 13)
    return start + (end - start) * u, sign * (lift + height * np.sin(np.pi * u))



def _drawn_arcs(lattice: Lattice, flow: MassFlow, min_share: float, classes: list) -> tuple[np.ndarray, ...]:
    """The arcs the flows figure draws (share at least ``min_share``, or canonical), their line
    class and whether each is canonical."""
    canonical = arc_roles(lattice) == "canonical"
    keep = np.flatnonzero((flow.share >= min_share) | canonical)
    level = np.searchsorted([lo for lo, _, _ in classes[1:]], flow.share[keep], side="right")
    return keep, level, canonical[keep]



def _side_traces(
    label: str, lattice: Lattice, flow: MassFlow, drawn: tuple[np.ndarray, ...], classes: list, *,
    sign: int, height: Callable[[int], float], scale: float,
) -> list[go.Scatter]:
    """One model's arcs as a few traces: a blue halo under the canonical ones, then one trace
    per line class (arcs separated by gaps; each point's hover names its arc, customdata its index)."""
    import plotly.graph_objects as go

    keep, level, canonical = drawn
    shift, lift = prefix_shift(lattice), _LIFT
    of = f"of the mass the {flow.source} found" if flow.lower_bound else "of the marginal"
    traces = []
    for halo in (True, False):
        for cls, (lo, hi, name) in enumerate(classes):
            chosen = keep[(level == cls) & canonical] if halo else keep[level == cls]
            if not len(chosen):
                continue
            xs, ys, hover, ids = [], [], [], []
            for arc in chosen.tolist():
                start, end = int(lattice.arc_start[arc]) - shift, int(lattice.arc_end[arc]) - shift
                x, y = _arc_points(start, end, lift, height(end - start), sign)
                token = int(lattice.arc_token[arc])
                piece = show_piece(lattice.vocab.surface(token).decode("utf-8", "backslashreplace"))
                tip = (f"{html.escape(label)}: “{html.escape(piece)}” (id {token})<br>{_span_text(start, end)}<br>"
                       f"{format_small(float(flow.share[arc]), 1, percent=True)} {of}")
                xs += [*x.tolist(), None]
                ys += [*y.tolist(), None]
                hover += [tip] * len(x) + [None]
                ids += [arc] * len(x) + [None]
            width = scale * (1 + 1.6 * cls)
            traces.append(go.Scatter(
                x=xs, y=ys, mode="lines", hovertext=hover, hoverinfo="skip" if halo else "text", customdata=ids,
                name="canonical tokenization" if halo else name, legendgroup="canonical" if halo else name,
                line=dict(color=COLORS["canonical"] if halo else flow_color(math.sqrt(max(lo, 1e-9) * hi)),
                          width=width + 4 * scale if halo else width),
                opacity=0.9 if halo else 0.55 + 0.45 * cls / (len(classes) - 1),
                meta=dict(side=label, above=sign > 0, halo=halo, level=cls),
            ))
    return traces



def _text_trace(text: str, prefix: bool, size: int) -> go.Scatter:
    """The text's characters along the middle of the flows figure, each at the middle of its
    bytes; a grey ␣ at byte −1 when some tokenizer spells a dummy-prefix space."""
    import plotly.graph_objects as go

    marks = [((a + b) / 2, html.escape(show_piece(c)), f"bytes {a}–{b}: U+{ord(c):04X}", "#222222")
             for a, b, c in _char_spans(text)]
    if prefix:
        marks.insert(0, (-0.5, "␣", "the dummy-prefix space (spelled by the tokenizer, not in the text)", "#aaaaaa"))
    x, shown, hover, color = zip(*marks)
    return go.Scatter(x=x, y=[0.0] * len(x), mode="text", text=shown, hovertext=hover, hoverinfo="text",
                      textfont=dict(size=size, family=MONO_FONTS, color=list(color)), showlegend=False,
                      meta=dict(side="text"))



def flows_figure(
    sides: Sequence[tuple[str, Lattice, MassFlow]],
    *,
    min_share: float = MIN_FLOW_SHARE,
    projector: bool = False,
) -> go.Figure:
    """Where each model's mass flows, on the text's byte axis: the first model's lattice arcs
    above the text, the second's below, as wide and as red as their share of the mass.

    Arcs under ``min_share`` are left out (the axis says how many); canonical arcs are always
    drawn, with a blue halo. Hover on an arc: token, id, bytes, share. The view opens on the
    first FLOW_WINDOW_BYTES bytes (pan for the rest); ``projector`` uses big fonts.
    """
    import plotly.graph_objects as go

    if not 1 <= len(sides) <= 2:
        raise ValueError("the flows figure draws one model above the text and at most one below")
    text = _text_of(sides)
    scale = 1.6 if projector else 1.0
    font = 22 if projector else 13
    classes = _flow_classes(min_share)
    drawn = [_drawn_arcs(lat, flow, min_share, classes) for _, lat, flow in sides]
    longest = max((int((lat.arc_end[d[0]] - lat.arc_start[d[0]]).max(initial=1)) for (_, lat, _), d in zip(sides, drawn)))

    def height(span: int) -> float:  # taller for longer tokens, the longest at 1
        return 0.15 + 0.85 * (span / longest) ** 0.75

    fig = go.Figure()
    for sign, (label, lattice, flow), arcs in zip((1, -1), sides, drawn):
        fig.add_traces(_side_traces(label, lattice, flow, arcs, classes, sign=sign, height=height, scale=scale))
    seen: set[str] = set()
    for trace in fig.data:  # one legend entry per line class
        trace.showlegend = trace.legendgroup not in seen
        seen.add(trace.legendgroup)
    prefix = any(prefix_shift(lat) for _, lat, _ in sides)
    fig.add_trace(_text_trace(text, prefix, 30 if projector else 18))
    size = len(text.encode("utf-8"))
    fig.update_xaxes(range=[-1.5 if prefix else -0.5, min(size, FLOW_WINDOW_BYTES // (2 if projector else 1)) + 0.5],
                     zeroline=False, showgrid=False)
    labels = [f"<b>{html.escape(label)}</b><br><sup>{len(flow.share) - len(keep):,} of {len(flow.share):,} "
              "arcs left out</sup>" for (label, _, flow), (keep, _, _) in zip(sides, drawn)]
    fig.update_yaxes(range=[-(_LIFT + 1.1), _LIFT + 1.1] if len(sides) == 2 else [-_LIFT - 0.1, _LIFT + 1.1],
                     tickvals=[_LIFT + 0.6, -(_LIFT + 0.6)][: len(sides)], ticktext=labels,
                     showgrid=False, zeroline=False, fixedrange=True, tickfont=dict(size=round(font * 1.2)))
    title = (f"Where the mass flows: {html.escape(sides[0][0])} above the text"
             + (f", {html.escape(sides[1][0])} below" if len(sides) == 2 else "")
             + f"<br><sup>arcs under {format_small(min_share, 1, percent=True)} of the mass left out; "
             "canonical arcs have a blue halo</sup>")
    _layout(fig, title, "byte offset in the text", "", height=round(440 * scale))
    fig.update_layout(font=dict(size=font), dragmode="pan", hovermode="closest", plot_bgcolor="#ffffff",
                      margin=dict(l=10, r=10, t=round(90 * scale), b=10),
                      legend=dict(y=1.0, yanchor="bottom", font=dict(size=font)))
    return fig
