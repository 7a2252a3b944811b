"""How lattices, estimates and the viz figures show themselves in a notebook, with the embedded models
(float32 on the CPU): the lattice's inline drawing and its fallback, short reprs, an Estimate's
card and table, whose figures are those the library computes (compare.figures, analysis)."""

from __future__ import annotations

import math
import re

import pytest

from marginal_core import viz
from marginal_core.api.comparison import figures
from marginal_core.estimators.beam_width import describe_rounds
from marginal_core.estimators.estimate_result import Estimate
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.graph import format_count, lattice_of
from marginal_core.viz import analysis

QUESTION = "Question: What is the capital of France?\nAnswer:"
LONG = "A sentence long enough to have very many tokenizations indeed, and then some more words."
COLUMNS = ["tokenization", "tokens", "log_p", "kind", "share"]


@pytest.fixture(scope="module")
def paris(smollm_model):
    """ " Paris" after a question (30 tokenizations): every method runs, exact included."""
    m = Marginalizer(smollm_model, " Paris", QUESTION)
    runs = {"exact": m.exact(), "beam": m.beam(), "lattice": m.lattice_estimate(3), "proxy": m.proxy(4),
            "canonical": m.canonical()}
    return m, runs


def short_repr(obj: object) -> str:
    text = repr(obj)
    assert len(text) < 300 and "array(" not in text and "\n" not in text, text
    return text


def drawn_nodes(svg: str) -> list[int]:
    """The byte offsets of the nodes an SVG drawing of the lattice shows."""
    return sorted(int(n) for n in re.findall(r"<title>n(\d+)</title>", svg))


# --------------------------------------------------------------------------------------------
# Lattice


def test_a_short_lattice_is_drawn_whole_with_canonical_arcs_blue_and_splits_orange(smollm_tokenizer):
    lat = lattice_of(" Paris", smollm_tokenizer)
    shown = viz.lattice_html(lat)
    assert "<svg" in shown and "<?xml" not in shown and "Window" not in shown
    assert f'stroke="{viz.COLORS["canonical"]}"' in shown and f'stroke="{viz.COLORS["off_by_one"]}"' in shown
    assert drawn_nodes(shown) == lat.nodes.tolist()
    assert short_repr(lat) == (f"Lattice(' Paris', 6 bytes, {lat.num_arcs} arcs, {format_count(lat.count())} "
                               "tokenizations, 1 canonical token)")


def test_a_long_lattice_is_drawn_as_the_window_the_app_draws(gemma_tokenizer):
    lat = lattice_of(LONG, gemma_tokenizer)
    window = viz.token_window(lat, 0, viz.fit_window(lat, max_nodes=viz.READABLE_NODES))
    assert lat.num_nodes > viz.READABLE_NODES and viz.default_window(lat) == window
    shown = viz.lattice_html(lat)
    nodes = drawn_nodes(shown)
    assert (nodes[0], nodes[-1]) == window and len(nodes) <= viz.READABLE_NODES
    assert f"Window: bytes {window[0]}–{window[1]}" in shown and f'stroke="{viz.COLORS["canonical"]}"' in shown
    text = short_repr(lattice_of(LONG * 40, gemma_tokenizer))  # 3,560 characters: shortened
    assert "…" in text and re.search(r" \d\.\d\de\d+ tokenizations", text)  # the count shortened too


def test_a_lattice_that_cannot_be_drawn_says_why_in_one_line(smollm_tokenizer, monkeypatch):
    lat = lattice_of(LONG, smollm_tokenizer)
    assert lat.num_arcs > viz.MAX_DRAW_ARCS
    monkeypatch.setattr("marginal_core.viz.notebook.default_window", lambda lattice: None)  # the whole of it
    shown = viz.lattice_html(lat)
    assert shown.startswith("<pre>") and "<svg" not in shown and f"{lat.num_arcs:,} arcs, more than the" in shown
    monkeypatch.undo()
    monkeypatch.setenv("PATH", "/nonexistent")  # no dot binary
    shown = viz.lattice_html(lat)
    assert shown.startswith("<pre>") and "not drawn:" in shown and "Graphviz" in shown


# --------------------------------------------------------------------------------------------
# Estimate


def test_reprs_are_one_short_line_without_arrays(paris):
    m, runs = paris
    for est in runs.values():
        assert short_repr(est).startswith(f"Estimate({est.method.value}:")
    assert short_repr(m.source) == "Source(smollm2-135m, float32, cpu)"
    assert runs["beam"].source is m.source and runs["beam"].source.lattice is m.lattice  # shared, not copied


def test_to_pandas_has_every_tokenization_found_with_its_own_score_and_share(paris):
    m, runs = paris
    lat = m.lattice
    for name, est in runs.items():
        frame = est.to_pandas()
        assert list(frame.columns) == COLUMNS, name
        assert frame["share"].sum() == pytest.approx(1.0)
        assert frame["log_p"].is_monotonic_decreasing
        found = dict(zip(est.paths.tolist(), est.log_p.tolist())) | {lat.canonical: est.log_p_canonical}
        assert len(frame) == len(found)
        rows = dict(zip(frame["tokenization"], frame["log_p"]))
        assert rows == {"|".join(viz.show_piece(p) for p in lat.pieces(path)): lp for path, lp in found.items()}
        assert (frame["kind"] == "canonical").sum() == 1
        assert frame.loc[frame["kind"] == "canonical", "log_p"].item() == est.log_p_canonical
        assert (frame["tokens"] == [len(t.split("|")) for t in frame["tokenization"]]).all()
    assert len(runs["exact"].to_pandas()) == lat.count()


def test_the_card_shows_the_figures_the_library_computes(paris):
    m, runs = paris
    for name, est in runs.items():
        card = viz.estimate_html(est)
        # the comparison's figures take the best bound (the canonical score where none ran): not the proxy's
        mass_off = figures(m, {name: est}).mass_off_canonical if est.method.is_bound else \
            -math.expm1(est.log_p_canonical - est.log_marginal)
        for shown in ("smollm2-135m", "float32", viz.format_log(est.log_p_canonical),
                      viz.format_small(mass_off + 0.0, 2, percent=True), f"{est.seconds:.2f}",
                      f"{est.num_distinct:,} of {viz.count_label(m.lattice.count())}"):
            assert shown in card, (name, shown)
        top = analysis.top_tokenizations(m.lattice, est, 5)
        for ids, share in zip(top["ids"], top["share"]):
            assert viz.segmented(m.lattice, ids) in card and viz.format_small(share, 2, percent=True) in card
        assert card.count("<code") == len(top)


def test_log_p_text_is_equal_where_exact_at_least_for_a_bound_and_about_for_the_proxy(paris):
    m, runs = paris
    signs = {}
    for name, est in runs.items():
        signs[name] = viz.notebook.log_p_text(est)[0]
        assert f"{signs[name]} {viz.format_log(est.log_marginal)}" in viz.estimate_html(est)
        if est.method.is_bound:  # the comparison's figures decide exactness the same way
            assert (signs[name] == "=") == figures(m, {name: est}).exact, name
    # exact finished; the anytime beam's last round pruned nothing; 3 lattice samples of 29; the
    # canonical path alone; the proxy's importance-sampling mean
    assert signs == {"exact": "=", "beam": "=", "lattice": "≥", "canonical": "≥", "proxy": "≈"}


def test_a_beam_card_lists_its_rounds_and_a_bound_with_its_certified_gap(smollm_model):
    est = Marginalizer(smollm_model, " a thermometer", QUESTION).beam()
    (first,) = est.rounds
    frame = est.rounds_frame()
    assert list(frame.columns) == ["width", "log_mass", "pruned", "certified_gap", "seconds", "paths"]
    assert frame.iloc[0].tolist() == pytest.approx([first.width, first.log_mass, first.pruned,
                                                    first.certified_gap, first.seconds, first.paths])
    gap = est.certified_gap()
    assert 0 < gap == first.certified_gap < math.inf
    card = viz.estimate_html(est)
    assert f"≥ {viz.format_log(est.log_marginal)} (at most {viz.format_small(gap)} nats below)" in card
    assert describe_rounds(est.rounds) in card and f"{first.pruned:,}" in card
    assert len(Marginalizer(smollm_model, " a thermometer").canonical().rounds_frame()) == 0


def test_a_gemma_card_and_table(gemma_model):
    m = Marginalizer(gemma_model, " Paris is")
    est = m.lattice_estimate(4)
    frame = est.to_pandas()
    assert frame["share"].sum() == pytest.approx(1.0) and list(frame.columns) == COLUMNS
    card = viz.estimate_html(est)
    assert "gemma3-270m" in card and viz.format_log(est.log_marginal) in card
    assert viz.segmented(m.lattice, m.lattice.canonical) in card


def test_an_estimate_made_by_hand_shows_itself_and_takes_its_lattice_as_an_argument(paris):
    m, runs = paris
    est = runs["lattice"]
    bare = Estimate(method="lattice", log_p_canonical=est.log_p_canonical, log_noncanonical=est.log_noncanonical,
                    paths=est.paths, kinds=est.kinds, log_p=est.log_p, log_q=None, running=est.running,
                    seconds=est.seconds, forward_passes=est.forward_passes, run=est.run)
    card = viz.estimate_html(bare)
    assert viz.format_log(bare.log_marginal) in card and "model" not in card
    with pytest.raises(MarginalError, match="lattice="):
        bare.to_pandas()
    assert bare.to_pandas(m.lattice).equals(est.to_pandas())


# --------------------------------------------------------------------------------------------
# The viz functions' figures


def test_the_viz_figures_carry_their_own_notebook_displays(paris):
    """graphviz drawings and plotly figures display inline as they are: nothing wraps them."""
    import plotly.io as pio

    m, runs = paris
    bundle = viz.lattice_graph(m.lattice)._repr_mimebundle_()
    assert "<svg" in bundle["image/svg+xml"]
    fig = viz.top_n_figure(analysis.top_n_mass(m.lattice, runs["exact"]))
    mime = pio.renderers._build_mime_bundle(fig.to_dict(), "plotly_mimetype")  # what a Jupyter kernel picks
    assert mime["application/vnd.plotly.v1+json"]["layout"]["title"]["text"] == fig.layout.title.text
    assert "plotly" in fig._repr_html_()


def test_ctrl_c_keeps_the_chunks_that_finished_as_interrupted(smollm_model):
    """A KeyboardInterrupt (Ctrl-C, a notebook's interrupt) after the first chunk: it propagates,
    and the estimate of the chunks that finished is kept on the Marginalizer, marked cancelled."""
    import marginal_core as mc

    m = mc.Marginalizer(smollm_model, "The committee postponed its decision.")
    progress_calls = []

    def progress(done: float, total: int) -> None:
        progress_calls.append(done)
        if done >= 20:  # the second chunk is under way
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        m.estimate("lattice", samples=60, chunk=10, progress=progress)
    kept = m.interrupted
    assert kept is not None and kept.run.cancelled and 10 <= kept.num_samples < 60
    alone = mc.Marginalizer(smollm_model, "The committee postponed its decision.").estimate(
        "lattice", samples=60, chunk=10)
    assert list(kept.log_p) == pytest.approx(list(alone.log_p[: kept.num_samples]), abs=1e-4)


def test_an_ipython_shell_draws_lattices_and_estimates_once_registered(smollm_model):
    """The display is the viz layer's, registered with IPython's HTML formatter by class name
    (what `import marginal_core` does in a kernel): the core's classes import no viz."""
    from IPython.core.interactiveshell import InteractiveShell

    from marginal_core.viz.notebook import register_formatters as register

    shell = InteractiveShell.instance()
    register(shell)
    m = Marginalizer(smollm_model, " Paris")
    est = m.lattice_estimate(5)
    lattice_shown, _ = shell.display_formatter.format(m.lattice)
    estimate_shown, _ = shell.display_formatter.format(est)
    assert "<svg" in lattice_shown["text/html"] and lattice_shown["text/plain"] == repr(m.lattice)
    assert estimate_shown["text/html"] == viz.estimate_html(est)
