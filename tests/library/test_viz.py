"""How marginal_core.viz shows a lattice: pieces and numbers as text, and the DOT drawing (arc roles,
length bounds, windows, labels escaped for hostile characters, rendering with graphviz's dot).

Figures are in test_viz_figures.py, the app's helpers in test_viz_app_helpers.py, and the mass flow
(with a real model) in test_viz_mass_flow.py.
"""

from __future__ import annotations

import math
import re
import shutil

import pytest

from marginal_core import viz
from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.graph import lattice_of
from tests.viz_cases import edges


@pytest.fixture(scope="module")
def small(gemma_tokenizer):
    return lattice_of(" Paris is", gemma_tokenizer)


# --------------------------------------------------------------------------------------------
# Text helpers


def test_segmented_and_chips_show_every_canonical_token(qa, gemma_tokenizer):
    assert viz.segmented(qa, qa.canonical) == "␣Paris|␣is|␣the|␣capital|␣of|␣France|."
    html = viz.chips_html(qa)
    assert html.count("<span title=") == len(qa.canonical)
    for piece in qa.pieces(qa.canonical):
        assert viz.show_piece(piece) in html
    assert "<script" not in viz.chips_html(lattice_of("<script>", gemma_tokenizer))


def test_count_label_is_exact_below_a_billion_and_scientific_above():
    assert viz.count_label(29_767_936) == "29,767,936"
    assert viz.count_label(12345678901234) == "1.23 × 10^13"
    assert viz.format_log(-math.inf) == "−inf"


# --------------------------------------------------------------------------------------------
# Arcs and the DOT drawing


def test_format_small_keeps_tiny_gains_visible():
    """Issue 13 item 5c: a gain of 4.7e-05 nats read "+0.000", a share of 4.7e-05 "0.00%"."""
    assert viz.format_small(4.7e-05, signed=True) == "+4.7e-05"
    assert viz.format_small(4.7e-05, 2, percent=True) == "4.7e-03%"
    assert viz.format_small(0.125, signed=True) == "+0.125"
    assert viz.format_small(0.5, 2, percent=True) == "50.00%"
    assert viz.format_small(1 - 3.1e-06, 2, percent=True) == "99.99969%"  # not "100.00%" beside 3.1e-04% off
    assert viz.format_small(1.0, 2, percent=True) == "100.00%"
    assert viz.format_small(0.0, signed=True) == "+0.000"  # nothing found is zero, not 0.0e+00
    assert viz.format_small(-2e-09) == "-2.0e-09"


def test_arc_roles_mark_the_canonical_path_and_the_split_arcs(qa):
    roles = viz.arc_roles(qa)
    canonical = [a for a in range(qa.num_arcs) if roles[a] == "canonical"]
    assert [int(qa.arc_token[a]) for a in canonical] == list(qa.canonical)
    split_arcs = {a for _, first, second in qa.splits for a in (first, second)}
    assert {a for a in range(qa.num_arcs) if roles[a] == "off_by_one"} == split_arcs


def test_dot_highlights_the_canonical_arcs(qa):
    dot = viz.lattice_dot(qa)
    canon = [e for e in edges(dot) if "class=canonical" in e[2]]
    assert len(canon) == len(qa.canonical)
    assert all(viz.COLORS["canonical"] in attrs and "penwidth=3" in attrs for _, _, attrs in canon)
    assert [(a, b) for a, b, _ in canon] == list(zip(qa.canonical_nodes, qa.canonical_nodes[1:]))
    assert "label=\"␣Paris\"" in dot or "label=␣Paris" in dot
    off = [e for e in edges(dot) if "class=off_by_one" in e[2]]
    assert len(off) == len({a for _, f, s in qa.splits for a in (f, s)})
    assert len(edges(dot)) == qa.num_arcs
    assert "greyed" not in dot  # no bound: nothing greyed


def test_small_bound_greys_exactly_the_arcs_on_no_short_path(small):
    L = len(small.canonical) + 1
    on_short = {
        (a, b, t)
        for path in small.enumerate()
        if len(path) <= L
        for a, b, t in _arcs_of(small, path)
    }
    ok = viz.arcs_in_bound(small, L)
    expected = [(s, e, t) in on_short for s, e, t in small.arcs]
    assert ok.tolist() == expected
    assert 0 < ok.sum() < small.num_arcs
    dot = viz.lattice_dot(small, max_len=L)
    greyed = [e for e in edges(dot) if "greyed" in e[2]]
    assert len(greyed) == int((~ok).sum())
    assert all("dashed" in attrs and viz.COLORS["greyed"] in attrs for _, _, attrs in greyed)
    frame = viz.arcs_frame(small, L)
    assert frame["within_L"].tolist() == expected
    assert (frame["fewest_tokens_through"] <= L).tolist() == expected


def _arcs_of(lat, path):
    at, out = 0, []
    for token in path:
        end = at + len(lat.vocab.surface(token))
        out.append((at, end, token))
        at = end
    return out


def test_window_draws_only_the_arcs_inside_it(qa):
    window = viz.token_window(qa, 1, 2)  # " is the"
    assert qa.data[window[0] : window[1]] == b" is the"
    dot = viz.lattice_dot(qa, window=window)
    drawn = edges(dot)
    assert drawn and all(window[0] <= a and b <= window[1] for a, b, _ in drawn)
    assert len(drawn) == int(viz.window_arcs(qa, window).sum())
    nodes = set(map(int, re.findall(r"^\s*n(\d+) \[", dot, flags=re.M)))
    assert nodes == {int(n) for n in qa.nodes if window[0] <= n <= window[1]}
    assert len(nodes) == viz.window_nodes(qa, window)


def test_fit_window_respects_the_limits_and_long_texts_refuse_to_draw(gemma_tokenizer):
    text = " ".join(["The committee postponed its decision until the next meeting."] * 4)
    lat = lattice_of(text, gemma_tokenizer)
    assert lat.num_arcs > viz.MAX_DRAW_ARCS
    with pytest.raises(viz.TooLargeToDrawError) as err:
        viz.lattice_graph(lat)
    assert isinstance(err.value, MarginalError) and "window" in str(err.value)
    count = viz.fit_window(lat, first=3, max_nodes=viz.READABLE_NODES)
    window = viz.token_window(lat, 3, count)
    assert viz.window_nodes(lat, window) <= viz.READABLE_NODES
    assert viz.window_nodes(lat, viz.token_window(lat, 3, count + 1)) > viz.READABLE_NODES
    assert "n0 " not in viz.lattice_dot(lat, window=window)


def test_node_labels_show_the_text_around_each_offset(qa):
    dot = viz.lattice_dot(qa, window=viz.token_window(qa, 0, 1))
    assert "6\ns|␣" in dot or "6\\ns|␣" in dot  # between " Paris" and " is"


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot binary is not installed")
def test_svg_renders_with_the_dot_binary(small):
    svg = viz.dot_to_svg(viz.lattice_dot(small, max_len=3))
    assert svg.lstrip().startswith(b"<?xml") and b"<svg" in svg and "␣Paris".encode() in svg


# Every C0 and C1 control character, DEL, and what DOT, HTML-like labels, record labels and XML
# read specially: quotes, backslashes (a trailing one, DOT's own escapes \n \N \G \l \"), angle
# brackets, ampersands, braces and bars, DOT's keywords and punctuation, separators U+2028 and
# U+2029, zero-width and bidi format characters, a BOM, noncharacters, combining marks, an emoji
# ZWJ sequence and right-to-left text.
CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)]))
HOSTILE_TEXTS = [
    "bell\x07 and tab\there",
    CONTROLS[:32],
    CONTROLS[32:],
    'say "hi" \\ end\\',
    '\\n \\N \\G \\E \\T \\H \\L \\l \\r \\" \\\\" x\\',
    "<b>bold</b> <> <<x>> &amp; & &#0; ]]> <!-- -->",
    "{a|b} |x| {} [label=x]; -> -- digraph } node edge",
    "line\u2028para\u2029zw\u200b\u200c\u200djoin rlo\u202eolr\u202c bom\ufeff \ufffe\uffff\ufdd0 \U0010ffff",
    "e\u0301 a\u0308\u0323 👨\u200d👩\u200d👧 שלום عربي <bos><eos>",
]


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot binary is not installed")
@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
def test_hostile_characters_render_through_dot_as_visible_labels(text, gemma_tokenizer):
    """Issue 13 item 1: labels are escaped for every character a text can hold, so `dot` renders
    every node and arc into well-formed SVG, and invisible characters show as escapes."""
    import xml.etree.ElementTree as ET

    lat = lattice_of(text, gemma_tokenizer)  # byte fallback: every character has a token
    dot = viz.lattice_dot(lat, max_arcs=100_000)
    assert not any(ord(c) < 0x20 and c not in "\t\n" or 0x7F <= ord(c) < 0xA0 for c in dot)
    svg = viz.dot_to_svg(dot)
    root = ET.fromstring(svg)  # well-formed XML: no control character reached the SVG
    svg_ns = "{http://www.w3.org/2000/svg}"

    def texts(kind: str) -> list[str]:
        return sorted("".join(t.text or "" for t in g.iter(f"{svg_ns}text"))
                      for g in root.iter(f"{svg_ns}g") if (g.get("class") or "").split()[:1] == [kind])

    # Every arc is drawn, labelled with exactly its visible piece; every node with its offset.
    assert texts("edge") == sorted(viz.show_piece(p) for p in lat.pieces(tuple(lat.arc_token.tolist())))
    assert len(texts("node")) == lat.num_nodes
    if "\x07" in text:
        assert "\\x07" in "".join(texts("edge"))


def test_show_piece_makes_every_invisible_character_visible():
    import unicodedata

    shown = viz.show_piece(CONTROLS + "\u2028\u2029\u200d\u202e\ufeff\ufffe\ud800\udfff \u00a0")
    assert shown.startswith("\\x00\\x01") and "\\x07" in shown and "\\x9f" in shown
    assert "\\u2028" in shown and "\\u202e" in shown and "\\ud800" in shown and "\\ufffe" in shown
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in shown)
    assert viz.show_piece(" a\n\t\r") == "␣a↵⇥␍"
    assert viz.show_piece("e\u0301 漢字 👍 שלום") == "e\u0301␣漢字␣👍␣שלום"  # shown as they are


def test_code_span_shows_backticks_and_markup_literally():
    assert viz.code_span("␣Paris|.") == "`␣Paris|.`"
    # A text's backticks cannot end the span early and let the rest render as Markdown or math.
    assert viz.code_span("`c`|$x$|**b**") == "`` `c`|$x$|**b** ``"
    assert viz.code_span("a```b") == "```` a```b ````"


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot binary is not installed")
def test_dot_the_binary_rejects_is_a_render_error_not_a_crash():
    with pytest.raises(viz.RenderError) as err:
        viz.dot_to_svg("digraph { a -> }")
    assert isinstance(err.value, MarginalError) and "syntax error" in str(err.value)
    assert "DOT source can still be downloaded" in str(err.value)

