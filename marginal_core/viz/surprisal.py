"""The surprisal strip and bars: a text's regions as chips coloured by surprisal, the canonical
tokenization's two rows above (naive, then canonical prefix) and each model's marginal row below,
on one byte axis (the regions depend on the text alone, so two models' rows line up region by
region whatever their vocabularies), and the same numbers as bars with the search's interval as
error bars. A marginal chip's hover says what the model expected at the region's first character;
the marginal rows can be coloured instead by the rank of the character that came (GLTR's bins)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from marginal_core.lattice.readable import show_piece
from marginal_core.search.surprisal.next_bytes import gltr_bin
from marginal_core.search.surprisal.result import Region, Surprisal
from marginal_core.viz.style import COLORS, MODEL_COLORS, MONO_FONTS, TEXT_FONTS
from marginal_core.viz.text import direction

if TYPE_CHECKING:
    import plotly.graph_objects as go

HEAT = (255, 245, 235), (203, 24, 29)  # white to red: low to high surprisal
UNREACHED = "#e6e6e6"  # a region no round has reached yet
# GLTR's colours for the rank of what came: top 1, top 3, top 10, the rest
RANK_COLOURS = ("#b8e3a3", "#fde68a", "#fca5a5", "#d8b4fe")
RANK_NAMES = ("top 1", "top 3", "top 10", "below")
COLOURINGS: tuple[str, ...] = ("surprisal", "rank")
DIFFERENCES = ("naive − canonical prefix is the whitespace convention (which word a closing space is charged to); "
               "canonical prefix − marginal is what the other tokenizations add")


def heat(value: float, top: float) -> str:
    """The colour of a surprisal on a scale from 0 to top nats."""
    share = 0.0 if top <= 0 or not math.isfinite(value) else min(max(value / top, 0.0), 1.0)
    lo, hi = HEAT
    return "rgb({},{},{})".format(*(round(a + (b - a) * share) for a, b in zip(lo, hi, strict=True)))


def region_note(region: Region, label: str) -> str:
    """A region's numbers in one line (a chip's hover): the marginal, its interval, both canonical
    rows and what separates them."""
    where = f"{label} · bytes {region.start_byte}–{region.end_byte} {region.text!r}"
    rows = (f"canonical prefix {region.surprisal_canonical_prefix:.3f}, naive canonical "
            f"{region.surprisal_canonical:.3f} nats")
    if not math.isfinite(region.surprisal):
        return f"{where}: not reached yet ({rows})"
    interval = "exact" if region.exact else f"in [{region.lower:.3f}, {region.upper:.3f}]"
    return (f"{where}: marginal {region.surprisal:.3f} nats ({interval}), {rows}; whitespace convention "
            f"{region.surprisal_canonical - region.surprisal_canonical_prefix:+.3f}, other tokenizations "
            f"{region.surprisal_canonical_prefix - region.surprisal:+.3f}")


def expected_note(s: Surprisal, region: Region, k: int = 5) -> str:
    """What the model expected at the region's first character: the k most probable next
    characters, the rank of the one that came and the entropy (empty without the sums)."""
    if s.next is None or s.next.lower is None or region.rank <= 0:
        return ""
    found = s.expected_bytes(region.start_byte, k)
    came = show_piece(region.text[:1])
    listed = ", ".join(f"{show_piece(c.label)} {c.probability:.3f}" for c in found)
    byte = " (a character of several bytes: by its first byte)" if region.text[:1] and ord(region.text[0]) > 127 else ""
    return (f"next character expected: {listed}; {came} came at rank {region.rank}{byte}; "
            f"entropy {region.entropy:.3f} nats")


def scale_top(surprisals: Sequence[Surprisal]) -> float:
    """The top of the colour scale: the largest surprisal any row shows."""
    values = [v for s in surprisals for r in s.regions
              for v in (r.surprisal, r.surprisal_canonical, r.surprisal_canonical_prefix) if math.isfinite(v)]
    return max(values, default=1.0)


def strip_html(surprisals: Sequence[Surprisal], *, font: str = "1em", links: Sequence[str] | None = None,
               colour: str = "surprisal") -> str:
    """The strip of one text under one or more models (same text, unit and space): per region a
    column of chips, each with its surprisal under the text, the first model's naive canonical
    row (dashed) and canonical prefix row (dotted) on top, then each model's marginal row, the
    rows named on the left; ``colour`` "rank" colours the marginal rows by the rank of the
    character that came at the region's start (GLTR's bins); ``links``, one a region, makes each
    column a link (the app's: that stretch of the lattice)."""
    first = surprisals[0]
    top = scale_top(surprisals)
    chip = ("display:block;padding:2px 4px;margin:1px 0;border-radius:4px;white-space:pre;unicode-bidi:isolate;"
            f"font-family:{MONO_FONTS}")
    names = [f"naive canonical, {first.model}", f"canonical prefix, {first.model}",
             *(f"marginal, {s.model}" for s in surprisals)]
    columns = ["<span dir='ltr' style='display:inline-block;vertical-align:top;margin-right:4px;text-align:right'>"
               + "".join(f"<span style='{chip};font-family:inherit;color:#555'>{html.escape(n)}<br>"
                         f"<span style='font-size:0.7em'>nats</span></span>" for n in names) + "</span>"]
    rows = list(zip(*(s.regions for s in surprisals), strict=True))
    for i, regions in enumerate(rows):
        text = html.escape(show_piece(regions[0].text))
        head = regions[0]
        note = region_note(head, first.model)
        cells = [_chip(chip + ";border-bottom:2px dashed #888", heat(head.surprisal_canonical, top),
                       "naive canonical · " + note, text, head.surprisal_canonical),
                 _chip(chip + ";border-bottom:2px dotted #888", heat(head.surprisal_canonical_prefix, top),
                       "canonical prefix · " + note, text, head.surprisal_canonical_prefix)]
        cells += [_chip(chip, _marginal_colour(r, top, colour),
                        "\n".join(filter(None, [region_note(r, s.model), expected_note(s, r)])), text, r.surprisal)
                  for r, s in zip(regions, surprisals, strict=True)]
        column = f"<span class='region' style='display:inline-block;vertical-align:top;margin:0 1px'>{''.join(cells)}</span>"
        if links is not None:
            column = (f"<a href='{html.escape(links[i])}' target='_self' style='text-decoration:none;color:inherit'>"
                      f"{column}</a>")
        columns.append(column)
    legend = (f"top rows: the canonical tokenization of {html.escape(first.model)}, naive (dashed: each token in the "
              "region of its first non-space byte, as token tools give it) and canonical prefix (dotted: its prefix "
              "probability cut at the regions) · below: the marginal of "
              + ", then ".join(html.escape(s.model) for s in surprisals)
              + f" · {first.unit} regions (space {first.space}) · {html.escape(DIFFERENCES)} · ")
    legend += (_rank_legend() if colour == "rank" else f"white 0 to red {top:.1f} nats")
    totals = "; ".join(f"{html.escape(s.model)}: −log P(text as a prefix) = {s.total:.3f} nats, "
                       f"log p(text) = {s.log_p_text:.3f}, {s.bits_per_byte:.3f} bits/byte" for s in surprisals)
    return (f"<div class='surprisal-strip' dir='{direction(first.text)}' style='font-size:{font};line-height:1.2'>"
            f"{''.join(columns)}<div dir='ltr' style='font-size:0.8em;color:#555;margin-top:4px;text-align:left'>"
            f"{legend}<br>{totals}</div></div>")


def _rank_legend() -> str:
    """The rank colours' key: the marginal rows coloured by where the region's first character
    ranked among the model's next-character expectations."""
    keys = "".join(f"<span style='background:{c};padding:0 4px;border-radius:3px;margin:0 2px'>{n}</span>"
                   for c, n in zip(RANK_COLOURS, RANK_NAMES, strict=True))
    return f"marginal rows by the rank of the region's first character among the model's next characters: {keys}"


def _chip(style: str, colour: str, note: str, text: str, value: float) -> str:
    """One chip: the region's text over its surprisal (… where not reached yet), the note as its hover."""
    shown = f"{value:.1f}" if math.isfinite(value) else "…"
    return (f"<span dir='auto' style='{style};background:{colour}' title='{html.escape(note)}'>{text}<br>"
            f"<span style='font-size:0.7em'>{shown}</span></span>")


def _marginal_colour(region: Region, top: float, colour: str = "surprisal") -> str:
    """A marginal chip's colour: by surprisal, or by the rank bin of what came."""
    if not math.isfinite(region.surprisal) or (colour == "rank" and region.rank <= 0):
        return UNREACHED
    return RANK_COLOURS[gltr_bin(region.rank)] if colour == "rank" else heat(region.surprisal, top)


def bars_figure(surprisals: Sequence[Surprisal], *, projector: bool = False) -> go.Figure:
    """Per region, the first model's naive canonical and canonical prefix bars and each model's marginal bar, the marginal's
    certified interval as its error bar (none where exact; a region not reached yet has no bar).
    No surprisal: the empty axes (a page draws them before its run, so the browser loads plotly)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    if surprisals:
        regions = surprisals[0].regions
        x = [r.index for r in regions]
        for name, values, opacity in (("naive canonical", [r.surprisal_canonical for r in regions], 0.35),
                                      ("canonical prefix", [r.surprisal_canonical_prefix for r in regions], 0.7)):
            fig.add_trace(go.Bar(x=x, y=values, name=f"{name} ({surprisals[0].model})",
                                 marker=dict(color=COLORS["canonical"], opacity=opacity),
                                 customdata=[repr(r.text) for r in regions],
                                 hovertemplate=f"%{{customdata}}: {name} %{{y:.3f}} nats<extra></extra>"))
        for s, colour in zip(surprisals, MODEL_COLORS * len(surprisals)):
            fig.add_trace(_marginal_bars(s, colour))
        fig.update_xaxes(tickmode="array", tickvals=x, ticktext=[show_piece(r.text) for r in regions],
                         autorange="reversed" if direction(surprisals[0].text) == "rtl" else True)
    font = 20 if projector else 13
    fig.update_layout(barmode="group", height=460 if projector else 360, font=dict(size=font, family=TEXT_FONTS),
                      title="Surprisal by region: the canonical tokenization's two rows and the marginal",
                      yaxis_title="surprisal, nats", xaxis_title=None, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1))
    return fig


def _marginal_bars(s: Surprisal, colour: str) -> go.Bar:
    """One model's marginal bars, with the interval each region's value lies in."""
    import plotly.graph_objects as go

    regions = s.regions
    shown = [r.surprisal if math.isfinite(r.surprisal) else None for r in regions]
    above = [r.upper - r.surprisal if math.isfinite(r.upper) and v is not None else 0.0 for r, v in zip(regions, shown)]
    below = [r.surprisal - r.lower if v is not None else 0.0 for r, v in zip(regions, shown)]
    notes = [region_note(r, s.model) for r in regions]
    return go.Bar(x=[r.index for r in regions], y=shown, name=f"marginal ({s.model})", marker_color=colour,
                  error_y=dict(type="data", array=above, arrayminus=below, visible=True), customdata=notes,
                  hovertemplate="%{customdata}<extra></extra>")


def difference_sentence(s: Surprisal) -> str:
    """What differs between the regions' sum (-log P of the text as a prefix) and -log p(text)."""
    if not math.isfinite(s.log_p_text):
        return "log p(text) comes once the search reaches the text's end."
    gap = -s.log_p_text - s.total
    return (f"The regions sum to −log P(the string begins with the text) = {s.total:.3f} nats; −log p(text) = "
            f"{-s.log_p_text:.3f} counts only the tokenizations that end exactly at the text's end, so it is "
            f"{gap:.3g} nats higher: the prefix also counts a last token that runs on past the end.")
