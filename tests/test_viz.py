"""Figures, DOT drawings and app helpers from marginal_core.viz and pages._app, on real lattices.

Estimates are built from real lattice samples with made-up scores, except for the mass flow,
which needs real ones: " Paris" scored exactly by SmolLM2 (a few seconds).
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil

import numpy as np
import pytest

from marginal_core import analysis, viz
from marginal_core.errors import MarginalError
from marginal_core.estimators import BeamRun, Completion, Estimate, RunState
from marginal_core.lattice import build_lattice
from marginal_core.mass_flow import flow_of, mass_flow
from marginal_core.sampling import lattice_samples
from pages._app import defaults, error_messages, live, table1

QA_TEXT = " Paris is the capital of France."


@pytest.fixture(scope="module")
def qa(gemma_tokenizer):
    return build_lattice(QA_TEXT, gemma_tokenizer)


@pytest.fixture(scope="module")
def small(gemma_tokenizer):
    return build_lattice(" Paris is", gemma_tokenizer)


def fake_estimate(lat, k=40, method="lattice", with_q=False, seed=0):
    """An Estimate over real lattice samples with deterministic made-up scores."""
    samples = lattice_samples(lat, k, seed=seed)
    n = len(samples)
    rng = np.random.default_rng(seed)
    log_p = -10.0 - samples.paths.lengths + rng.normal(0, 0.5, n)
    log_q = log_p + rng.normal(0, 1.0, n) if with_q else None
    running = np.logaddexp.accumulate(log_p)
    return Estimate(
        method=method, log_p_canonical=-5.0, log_noncanonical=float(running[-1]), paths=samples.paths,
        kinds=samples.kinds if not with_q else np.full(n, "proxy"), log_p=log_p, log_q=log_q,
        running=running, seconds=1.0, forward_passes=2, run=RunState(Completion(n)),
    )


def edges(dot: str) -> list[tuple[int, int, str]]:
    """(start, end, attribute text) of every visible edge of a DOT source."""
    found = []
    for a, b, attrs in re.findall(r"\bn(\d+) -> n(\d+) \[(.*?)\]\s*$", dot, flags=re.M):
        if "invis" not in attrs:
            found.append((int(a), int(b), attrs))
    return found


# --------------------------------------------------------------------------------------------
# Text helpers


def test_segmented_and_chips_show_every_canonical_token(qa, gemma_tokenizer):
    assert viz.segmented(qa, qa.canonical) == "␣Paris|␣is|␣the|␣capital|␣of|␣France|."
    html = viz.chips_html(qa)
    assert html.count("<span title=") == len(qa.canonical)
    for piece in qa.pieces(qa.canonical):
        assert viz.show_piece(piece) in html
    assert "<script" not in viz.chips_html(build_lattice("<script>", gemma_tokenizer))


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
    lat = build_lattice(text, gemma_tokenizer)
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

    lat = build_lattice(text, gemma_tokenizer)  # byte fallback: every character has a token
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


# --------------------------------------------------------------------------------------------
# Plotly figures and tables


def test_samples_frame_segments_paths_and_keeps_scores(qa):
    est = fake_estimate(qa)
    frame = viz.samples_frame(qa, est)
    assert list(frame.columns) == ["tokenization", "tokens", "kind", "log_p"]
    assert len(frame) == est.num_distinct
    assert all(t.replace("|", "").replace("␣", " ") == QA_TEXT for t in frame["tokenization"])
    proxy = fake_estimate(qa, with_q=True, method="proxy")
    assert {"log_q", "draws"} <= set(viz.samples_frame(qa, proxy).columns)
    bare = viz.samples_frame(qa, paths=qa.off_by_one()[:3])
    assert bare["tokens"].tolist() == [len(qa.canonical) + 1] * 3


def test_length_histogram_has_one_bar_trace_per_group(qa):
    samples = lattice_samples(qa, 60, seed=1)
    groups = {kind: [len(p) for p, k in zip(samples.paths.tolist(), samples.kinds) if k == kind]
              for kind in ("off_by_one", "uniform")}
    fig = viz.length_histogram(groups, canonical_len=len(qa.canonical))
    assert [t.type for t in fig.data] == ["bar", "bar"]
    assert [t.name for t in fig.data] == ["off-by-one", "uniform (length ≤ L)"]
    assert sum(fig.data[0].y) == len(groups["off_by_one"])
    assert list(fig.data[0].x) == [len(qa.canonical) + 1]


def test_mass_figures_from_the_analyses(qa):
    est = fake_estimate(qa, k=80)
    by_kind = analysis.mass_by_kind(qa, est)
    fig = viz.mass_bar(by_kind, "kind", "t")
    assert len(fig.data) == 1 and fig.data[0].type == "bar"
    assert set(fig.data[0].x) == {"canonical", "off-by-one", "rest"}
    assert math.isclose(sum(fig.data[0].y), 100.0)  # in %, as the bars' labels and every share on a page
    assert all(t.endswith("%") for t in fig.data[0].text)
    fig = viz.mass_bar(analysis.mass_by_splits(qa, est), "splits", "t", log_y=True)
    assert 0 in set(fig.data[0].x) and 1 in set(fig.data[0].x)
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.dtick >= 1  # labels at powers of ten only
    top = analysis.top_tokenizations(qa, est, 3)
    assert len(top) == 3 and top["log_p"].is_monotonic_decreasing and top["share"].sum() <= 1 + 1e-12
    assert top["canonical"].sum() <= 1
    top = viz.top_n_figure(analysis.top_n_mass(qa, est))
    assert top.data[0].type == "scatter" and math.isclose(top.data[0].y[-1], 1.0)


def test_rank_scatter_plots_distinct_samples_with_rho(qa):
    est = fake_estimate(qa, with_q=True, method="proxy")
    rho, n = analysis.spearman(est)
    fig = viz.rank_scatter(est)
    assert fig.data[0].mode == "markers" and len(fig.data[0].x) == n
    assert f"{rho:.3f}" in fig.layout.title.text
    with pytest.raises(ValueError):
        viz.rank_scatter(fake_estimate(qa))


def test_running_figure_against_samples_and_seconds(qa):
    est = fake_estimate(qa)
    est = dataclasses.replace(est, run=RunState(Completion(est.num_samples), checkpoints=((10, 0.5), (est.num_samples, 1.0))))
    trace = viz.RunTrace.of(est)
    fig = viz.running_figure([trace], log_p_canonical=-5.0, log_exact=-4.0, x="samples")
    names = [t.name for t in fig.data]
    assert names == ["lattice", "canonical", "exact"]
    assert len(fig.data[0].x) == est.num_samples
    assert np.allclose(fig.data[0].y, est.running_marginal())
    assert len(fig.layout.shapes) == 2  # canonical and exact lines
    fig = viz.running_figure([trace], log_p_canonical=-5.0, x="seconds")
    assert list(fig.data[0].x) == [0.0, 0.5, 1.0]
    assert fig.data[0].y[1] == pytest.approx(est.running_marginal()[9])
    assert [t.name for t in fig.data] == ["lattice", "canonical"]


def test_running_figure_keeps_a_trace_on_the_canonical_line_visible_with_short_ticks(qa):
    """Issue 13 item 5i: an estimate within 1e-12 nats of the canonical made 14-decimal y ticks,
    and the canonical line hid the proxy trace under it."""
    est = fake_estimate(qa, method="proxy", with_q=True)
    flat = np.full(est.num_samples, -5.0 + 1e-12)
    est = dataclasses.replace(est, running=flat, log_noncanonical=-40.0)
    trace = viz.RunTrace(label="proxy", running=flat, checkpoints=[(est.num_samples, 1.0)],
                         color=viz.COLORS["proxy"], noncanonical=np.full(est.num_samples, -40.0))
    fig = viz.running_figure([trace], log_p_canonical=-5.0, log_exact=-5.0 + 2e-12, x="samples")
    assert all(shape.layer == "below" for shape in fig.layout.shapes)  # reference lines under the traces
    assert fig.data[0].name == "proxy" and "markers" in fig.data[0].mode
    low, high = fig.layout.yaxis.range
    assert high - low >= viz.MIN_Y_SPAN and low < -5.0 < high
    assert re.fullmatch(r",\.[0-3]f", fig.layout.yaxis.tickformat)
    wide = viz.running_figure([viz.RunTrace.of(fake_estimate(qa))], log_p_canonical=-40.0, x="samples")
    assert wide.layout.yaxis.range is None and wide.layout.yaxis.tickformat == ",.0f"  # autorange, whole nats


# --------------------------------------------------------------------------------------------
# App helpers that need no model


def test_rank_table_reports_mean_and_std_per_length():
    from marginal_core.tasks.rank import by_length

    rows = [{"length": n, "rho": rho, "distinct": 5} for n, rho in ((50, 0.5), (50, 0.7), (100, 0.9), (100, math.nan))]
    table = by_length(rows)
    assert [r["rho"] for r in table] == ["0.60 ± 0.10", "0.90"]  # one rho: its value, no spread
    assert [r["with_rho"] for r in table] == [2, 1] and [r["sentences"] for r in table] == [2, 2]
    for length, sentences in table1.RANK_SENTENCES.items():
        assert all(abs(len(s) - length) <= length * 0.15 for s in sentences), length


def test_describe_error_is_friendly():
    level, message = error_messages.describe_error(MarginalError("the text is empty"))
    assert (level, message) == ("error", "the text is empty")
    level, message = error_messages.describe_error(RuntimeError("CUDA out of memory. Tried to allocate"), "scoring")
    assert level == "error" and message.startswith("Out of memory while scoring")
    level, message = error_messages.describe_error(ValueError("bad value\nTraceback (most recent call last)"))
    assert "ValueError: bad value" in message and "Traceback" not in message
    assert defaults.exact_feasible(defaults.APP_EXACT_BUDGET + 1)
    assert not defaults.exact_feasible(defaults.APP_EXACT_BUDGET + 2)
    assert live.live_chunk(100) == 50 and live.live_chunk(100_000) == 500


def test_a_stopped_live_run_says_how_far_it_got_in_its_own_unit(qa):
    """Samples for the lattice; for the beam, steps and paths completed (it asks for no samples)."""
    est = fake_estimate(qa, k=10)
    est = dataclasses.replace(est, run=RunState(Completion(40, done=False, cancelled=True), ((10, 1.0),)))
    assert live.Unfinished(40, est).describe() == "after 10 of 40 samples"
    assert live.Unfinished(40, unit="steps").describe() == "before the beam's first step (nothing was kept)"
    beam = dataclasses.replace(est, method="beam", run=BeamRun(Completion(7, done=False, cancelled=True), ((10, 1.0),), steps=3))
    assert live.Unfinished(40, beam, unit="steps").describe() == "after 10 paths completed, step 3 of 7"


def test_running_figure_of_the_noncanonical_mass(qa):
    est = fake_estimate(qa)
    est = dataclasses.replace(est, run=RunState(Completion(est.num_samples), checkpoints=((est.num_samples, 1.0),)))
    trace = viz.RunTrace.of(est)
    fig = viz.running_figure([trace], log_p_canonical=-5.0, log_exact=-9.0, x="samples", y="noncanonical")
    assert [t.name for t in fig.data] == ["lattice", "exact"]  # no canonical line on this scale
    assert np.allclose(fig.data[0].y, est.running)
    assert fig.layout.yaxis.title.text == viz.RUNNING_Y["noncanonical"]
    fig = viz.running_figure([trace], log_p_canonical=-5.0, x="seconds", y="noncanonical")
    assert list(fig.data[0].x) == [1.0] and fig.data[0].y[0] == pytest.approx(est.running[-1])
    with pytest.raises(ValueError):
        viz.running_figure([trace], log_p_canonical=-5.0, y="bogus")


# --------------------------------------------------------------------------------------------
# Where the mass flows (with a real model: the exact scores of " Paris" under SmolLM2)


@pytest.fixture(scope="module")
def paris(smollm_model):
    """The exact estimate of " Paris" after the capital-of-France question, and a beam's."""
    from marginal_core.estimators import Marginalizer

    m = Marginalizer(smollm_model, " Paris", "Question: What is the capital of France?\nAnswer:")
    return m.lattice, m.exact(), m.beam(2)


def cut_sums(lat, flow) -> list[float]:
    """The shares of the arcs crossing each node's byte offset (every path takes one of them)."""
    return [float(flow.share[(lat.arc_start <= b) & (lat.arc_end > b)].sum()) for b in lat.nodes[:-1].tolist()]


def test_mass_flow_shares_sum_to_one_over_every_cut_and_name_the_best_path(paris):
    lat, exact, beam = paris
    flow = flow_of(lat, exact)
    assert flow.num_paths == lat.count() and not flow.lower_bound
    assert flow.log_total == pytest.approx(exact.log_marginal, abs=1e-9)
    assert np.allclose(cut_sums(lat, flow), 1.0, rtol=0, atol=1e-9)
    scores = {lat.canonical: exact.log_p_canonical, **dict(zip(exact.paths.tolist(), exact.log_p.tolist()))}
    for arc, (start, _, token) in enumerate(lat.arcs):  # brute force: every path through each arc
        through = {p: lp for p, lp in scores.items() if _uses(lat, p, start, token)}
        assert flow.share[arc] == pytest.approx(np.exp(np.logaddexp.reduce(list(through.values())) - flow.log_total))
        assert flow.best[arc] == max(through, key=through.get)
    # A method's samples: shares of the mass it found (a lower bound), still 1 over every cut.
    found = flow_of(lat, beam)
    assert found.lower_bound and found.source == "beam" and found.num_paths == beam.num_distinct + 1
    assert np.allclose(cut_sums(lat, found), 1.0, rtol=0, atol=1e-9)
    assert found.log_total <= flow.log_total + 1e-9


def _uses(lat, path, start: int, token: int) -> bool:
    at = 0
    for t in path:
        if at == start and t == token:
            return True
        at += len(lat.vocab.surface(t))
    return False


def test_mass_flow_drawing_sizes_colours_and_names_each_arc(paris):
    lat, exact, beam = paris
    flow = flow_of(lat, exact)
    drawn = edges(viz.lattice_dot(lat, flow=flow))
    assert len(drawn) == lat.num_arcs
    canonical = [attrs for a, b, attrs in drawn if (a, b) == (0, lat.end)]
    (attrs,) = canonical
    assert f'color="{viz.flow_color(1.0)}"' in attrs and "best path: ␣Paris (log p" in attrs
    assert "of the marginal" in attrs
    widths = [float(re.search(r"penwidth=([\d.]+)", attrs).group(1)) for _, _, attrs in drawn]
    assert max(widths) == pytest.approx(0.8 + 7 * flow.share.max(), abs=0.01)
    found = viz.lattice_dot(lat, flow=flow_of(lat, beam))
    assert "of the mass the beam found (a lower bound)" in found
    assert ("on no scored path" in found) == (flow_of(lat, beam).num_paths < lat.count())
    with pytest.raises(ValueError):
        mass_flow(lat, [lat.canonical + lat.canonical], [0.0])  # " Paris Paris": not this text
