"""The Compare page's figures (marginal_core.viz.compare) on the real embedded tokenizers: chips of
two tokenizers on one byte axis, and two mass flows above and below the text.

Mass flows come from hand-chosen scores (no model): the canonical path and its off-by-one set.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from marginal_core import viz
from marginal_core.lattice.graph import lattice_of
from marginal_core.models import load_text_tokenizer
from marginal_core.viz.mass_flow import mass_flow
from tests.tokenizer_cases import GEMMA, SMOL, llama_style

TEXTS = ("naïve café 東京", "hi 🦜 there", " Paris is the capital of France.", "<b>&amp;</b> x")

CHIP = re.compile(r'<div class="chip" title="([^"]*)" style="grid-column:(\d+)/(\d+);grid-row:(\d+);[^"]*">([^<]*)</div>')
CUT = re.compile(r'<div class="cut" [^>]*grid-column:(\d+)/span 1;grid-row:1/-1')


@pytest.fixture(scope="module")
def tokenizers():
    return {name: load_text_tokenizer(name) for name in (GEMMA, SMOL)}


def sides_of(text, tokenizers):
    return [(name, lattice_of(text, tok), None) for name, tok in tokenizers.items()]


def token_spans(lattice, path=None):
    """(start, end) of each token in the text's bytes, from the surfaces alone (−1: a dummy prefix)."""
    shift = len(lattice.data) - len(lattice.text.encode())
    ends = np.cumsum([len(lattice.vocab.surface(t)) for t in (path or lattice.canonical)]) - shift
    return list(zip([-shift, *ends[:-1].tolist()], ends.tolist()))


def chips(page: str) -> dict[int, list[tuple[int, int, str, str]]]:
    """Row number -> (first grid line, last grid line, title, label) of its chips, in order."""
    rows: dict[int, list] = {}
    for title, start, end, row, label in CHIP.findall(page):
        rows.setdefault(int(row), []).append((int(start), int(end), html.unescape(title), html.unescape(label)))
    return rows


# --------------------------------------------------------------------------------------------
# Chips on one byte axis


@pytest.mark.parametrize("text", TEXTS)
def test_each_row_of_chips_covers_every_byte_column_once_in_order(text, tokenizers):
    sides = sides_of(text, tokenizers)
    rows = chips(viz.byte_axis_chips_html(sides))
    size = len(text.encode())
    assert sorted(rows) == [2, 3]  # row 1 is the text itself
    for (name, lattice, _), row in zip(sides, (2, 3)):
        found = rows[row]
        spans = token_spans(lattice)
        assert [(s + 2, e + 2) for s, e in spans] == [(a, b) for a, b, _, _ in found]  # line of byte b: b + 2
        assert found[0][0] == 2 and found[-1][1] == size + 2
        assert all(a[1] == b[0] for a, b in zip(found, found[1:]))  # contiguous: each column once, in order
        assert [label for *_, label in found] == [viz.show_piece(p) for p in lattice.pieces(lattice.canonical)]
        for (start, end), (*_, title, _), token in zip(spans, found, lattice.canonical):
            assert title.startswith(f"{name}, ") and f"id {token}, bytes {start}–{end}" in title


def test_a_split_character_renders_and_the_differing_cuts_are_marked(tokenizers):
    # Gemma cuts na|ï|ve|␣café|␣東京 at bytes 2 4 6 12; SmolLM2 cuts na|ïve|␣café|␣\xe6|\x9d|\xb1|\xe4\xba|\xac
    # at 2 6 12 14 15 16 18 (東 is bytes 13-16, 京 16-19)
    sides = sides_of("naïve café 東京", tokenizers)
    page = viz.byte_axis_chips_html(sides)
    assert viz.differing_cuts(sides) == [4, 14, 15, 16, 18]
    assert sorted(int(c) - 2 for c in CUT.findall(page)) == [4, 14, 15, 16, 18]
    labels = [label for *_, label in chips(page)[3]]
    assert labels[-5:] == ["␣\\xe6", "\\x9d", "\\xb1", "\\xe4\\xba", "\\xac"]
    assert "東" in page and "京" in page  # the text row shows whole characters over their bytes
    same = sides_of(" Paris is the capital", tokenizers)
    assert viz.differing_cuts(same) == [] and not CUT.findall(viz.byte_axis_chips_html(same))


def test_a_dummy_prefix_space_gets_its_own_column_before_the_text(tokenizers):
    text = "the quick brown fox é"
    llama = lattice_of(text, llama_style())
    assert llama.vocab.dummy_prefix and llama.data == b" " + text.encode()
    sides = [("llama", llama, None), (SMOL, lattice_of(text, tokenizers[SMOL]), None)]
    page = viz.byte_axis_chips_html(sides)
    rows = chips(page)
    size = len(text.encode())
    # byte b starts at grid line b + 3; byte −1 (the prefix space) at line 2
    assert rows[2][0][:2] == (2, 6) and "the dummy-prefix space and bytes 0–3" in rows[2][0][2]
    assert rows[3][0][0] == 3 and rows[2][-1][1] == rows[3][-1][1] == size + 3
    assert [(a, b) for a, b, *_ in rows[2]] == [(s + 3, e + 3) for s, e in token_spans(llama)]
    assert "grid-column:2/3;grid-row:1" in page  # the grey ␣ over the prefix column of the text row
    # " f|o|x" against " fox", and llama's " |\xc3|\xa9" against " é", in the text's bytes
    assert viz.differing_cuts(sides) == [17, 18, 20, 21]


def test_chips_escape_the_text_and_refuse_different_texts(tokenizers):
    page = viz.byte_axis_chips_html(sides_of("<b>&amp;</b> x", tokenizers))
    assert "<b>" not in page and "&lt;b&gt;" in page
    a, b = sides_of("one", tokenizers)
    with pytest.raises(ValueError, match="one text"):
        viz.byte_axis_chips_html([a, (b[0], lattice_of("two", tokenizers[SMOL]), None)])


# --------------------------------------------------------------------------------------------
# Mass flows above and below the text


def hand_flow(lattice):
    """Scores for the canonical path (best) and its off-by-one set, falling by one nat each."""
    paths = [lattice.canonical, *lattice.off_by_one()]
    return mass_flow(lattice, paths, [-float(i) for i in range(len(paths))])


def arc_segments(fig, side):
    """(arc, xs, ys, line width, halo) for every arc a side's traces draw."""
    found = []
    for trace in fig.data:
        if trace.meta.get("side") != side:
            continue
        cut = [i for i, x in enumerate(trace.x) if x is None]
        for lo, hi in zip([-1, *cut[:-1]], cut):
            arcs = set(trace.customdata[lo + 1 : hi])
            assert len(arcs) == 1
            found.append((arcs.pop(), trace.x[lo + 1 : hi], trace.y[lo + 1 : hi], trace.line.width, trace.meta["halo"]))
    return found


@pytest.mark.parametrize("text", ["naïve café 東京", "hi 🦜 there"])
def test_flows_put_each_arc_at_its_bytes_a_above_and_b_below(text, tokenizers):
    sides = [(name, lat, hand_flow(lat)) for name, lat, _ in sides_of(text, tokenizers)]
    min_share = 0.01
    fig = viz.flows_figure(sides, min_share=min_share)
    for (name, lat, flow), above in zip(sides, (True, False)):
        canonical = viz.arc_roles(lat) == "canonical"
        segments = arc_segments(fig, name)
        lines = [s for s in segments if not s[4]]
        drawn = sorted(arc for arc, *_ in lines)
        assert drawn == np.flatnonzero((flow.share >= min_share) | canonical).tolist()  # each arc once
        assert sorted(arc for arc, *_, halo in segments if halo) == np.flatnonzero(canonical).tolist()
        for arc, xs, ys, _, _ in segments:
            assert (xs[0], xs[-1]) == (lat.arc_start[arc], lat.arc_end[arc])
            assert all((y > 0) == above and y != 0 for y in ys)
        by_share = sorted(lines, key=lambda s: flow.share[s[0]])
        assert [s[3] for s in by_share] == sorted(s[3] for s in by_share)  # wider for a bigger share
        left_out = lat.num_arcs - len(drawn)
        assert left_out > 0 and f"{left_out:,} of {lat.num_arcs:,} arcs left out" in " ".join(fig.layout.yaxis.ticktext)
    text_trace = next(t for t in fig.data if t.meta["side"] == "text")
    starts = np.cumsum([0] + [len(c.encode()) for c in text])
    assert list(text_trace.x) == ((starts[:-1] + starts[1:]) / 2).tolist()
    assert "".join(text_trace.text) == viz.show_piece(text)


def test_flow_hover_names_token_bytes_and_share_and_projector_enlarges(tokenizers):
    name, lat, _ = sides_of("naïve café", tokenizers)[0]
    flow = hand_flow(lat)
    fig = viz.flows_figure([(name, lat, flow)], min_share=0.0)
    arc = int(np.argmax(flow.share))
    trace = next(t for t in fig.data if not t.meta.get("halo", True) and arc in t.customdata)
    tip = trace.hovertext[list(trace.customdata).index(arc)]
    piece = viz.show_piece(lat.vocab.surface(int(lat.arc_token[arc])).decode())
    assert f"“{piece}” (id {lat.arc_token[arc]})" in tip and f"bytes {lat.arc_start[arc]}–{lat.arc_end[arc]}" in tip
    assert viz.format_small(float(flow.share[arc]), 1, percent=True) in tip
    big = viz.flows_figure([(name, lat, flow)], min_share=0.0, projector=True)
    assert big.layout.font.size > fig.layout.font.size and big.layout.height > fig.layout.height
    with pytest.raises(ValueError):
        viz.flows_figure([(name, lat, flow)] * 3)


def test_flows_shift_a_dummy_prefix_to_byte_minus_one(tokenizers):
    text = "the quick brown fox é"
    llama = lattice_of(text, llama_style())
    smol = lattice_of(text, tokenizers[SMOL])
    fig = viz.flows_figure([("llama", llama, hand_flow(llama)), (SMOL, smol, hand_flow(smol))])
    firsts = {xs[0] for _, xs, *_ in arc_segments(fig, "llama")}
    assert min(firsts) == -1 and min(xs[0] for _, xs, *_ in arc_segments(fig, SMOL)) == 0
    assert max(xs[-1] for _, xs, *_ in arc_segments(fig, "llama")) == len(text.encode())
    text_trace = next(t for t in fig.data if t.meta["side"] == "text")
    assert text_trace.x[0] == -0.5 and text_trace.text[0] == "␣"
