"""A surprisal region's link to the Lattice page, opened on the window of canonical tokens that
cover the region's bytes (the page's URL keys first and span)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pages._app.runtime.folders import view_link
from pages._app.ui import projector

if TYPE_CHECKING:
    from marginal_core import Region, Surprisal
    from pages._app.ui.inputs import Inputs


def window_of(s: Surprisal, region: Region) -> tuple[int, int]:
    """(first, span): the first canonical token (1-based) overlapping the region's bytes, and how many do."""
    a, b = region.start_byte + s.offset, region.end_byte + s.offset  # in the lattice's bytes
    touching = [i for i, (u, v) in enumerate(s.canonical_spans) if u < b and v > a]
    return touching[0] + 1, len(touching)


def lattice_links(inp: Inputs, s: Surprisal) -> list[str]:
    """Per region of s, a link to the Lattice page on its stretch (projector mode kept)."""
    kept = {"projector": "true"} if projector.on() else {}
    links = []
    for region in s.regions:
        first, span = window_of(s, region)
        links.append(view_link("lattice", inp.text, inp.context, inp.model, first=str(first), span=str(span), **kept))
    return links
