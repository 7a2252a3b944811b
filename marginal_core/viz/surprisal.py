"""The surprisal strip: a text's regions as chips coloured by surprisal, the canonical row above
and each model's marginal row below, on one byte axis (the regions depend on the text alone, so
two models' rows line up region by region whatever their vocabularies)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from marginal_core.surprisal import Region, Surprisal
from marginal_core.viz.text import show_piece

HEAT = (255, 245, 235), (203, 24, 29)  # white to red: low to high surprisal


def heat(value: float, top: float) -> str:
    """The colour of a surprisal on a scale from 0 to top nats."""
    share = 0.0 if top <= 0 or not math.isfinite(value) else min(max(value / top, 0.0), 1.0)
    lo, hi = HEAT
    return "rgb({},{},{})".format(*(round(a + (b - a) * share) for a, b in zip(lo, hi, strict=True)))


def region_note(region: Region, label: str) -> str:
    """A region's numbers in one line (a chip's hover)."""
    interval = "exact" if region.exact else f"in [{region.lower:.3f}, {region.upper:.3f}]"
    return (f"{label} · bytes {region.start_byte}–{region.end_byte} {region.text!r}: marginal {region.surprisal:.3f} "
            f"nats ({interval}), canonical {region.surprisal_canonical:.3f} nats")


def scale_top(surprisals: Sequence[Surprisal]) -> float:
    """The top of the colour scale: the largest surprisal any row shows."""
    values = [v for s in surprisals for r in s.regions for v in (r.surprisal, r.surprisal_canonical) if math.isfinite(v)]
    return max(values, default=1.0)


def strip_html(surprisals: Sequence[Surprisal], *, font: str = "1em") -> str:
    """The strip of one text under one or more models (same text, unit and space): per region a
    column of chips, the first model's canonical row on top, then each model's marginal row."""
    first = surprisals[0]
    top = scale_top(surprisals)
    chip = "display:block;padding:2px 4px;margin:1px 0;border-radius:4px;white-space:pre;font-family:monospace"
    columns = []
    rows = list(zip(*(s.regions for s in surprisals), strict=True))
    for regions in rows:
        text = html.escape(show_piece(regions[0].text))
        cells = [f"<span style='{chip};background:{heat(regions[0].surprisal_canonical, top)};border-bottom:2px "
                 f"dashed #888' title='{html.escape(region_note(regions[0], 'canonical ' + first.model))}'>{text}</span>"]
        cells += [f"<span style='{chip};background:{heat(r.surprisal, top)}' "
                  f"title='{html.escape(region_note(r, s.model))}'>{text}</span>"
                  for r, s in zip(regions, surprisals, strict=True)]
        columns.append(f"<span style='display:inline-block;vertical-align:top;margin:0 1px'>{''.join(cells)}</span>")
    legend = (f"top row: canonical tokenization of {html.escape(first.model)} (dashed) · below: the marginal of "
              + ", then ".join(html.escape(s.model) for s in surprisals)
              + f" · {first.unit} regions (space {first.space}) · white 0 to red {top:.1f} nats")
    totals = "; ".join(f"{html.escape(s.model)}: −log P(text as a prefix) = {s.total:.3f} nats, "
                       f"log p(text) = {s.log_p_text:.3f}, {s.bits_per_byte:.3f} bits/byte" for s in surprisals)
    return (f"<div style='font-size:{font};line-height:1.2'>{''.join(columns)}"
            f"<div style='font-size:0.8em;color:#555;margin-top:4px'>{legend}<br>{totals}</div></div>")
