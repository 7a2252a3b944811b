"""Compare: the sidebar's text and context under two models, side by side, on one byte axis."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import viz
from marginal_core.api.comparison import Figures, difference, figures
from marginal_core.models import DTYPES, EMBEDDED_MODELS, known_models
from marginal_core.viz.compare import byte_axis_chips_html, flows_figure
from marginal_core.viz.style import MODEL_COLORS
from pages._app.runtime import device_choices, live, loaders, server, shared_results
from pages._app.ui import bounds, inputs, live_page, projector, widgets, words
from pages._app.ui.error_messages import show_error

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

    from marginal_core import Estimate, Lattice, Marginalizer

AS_A = "as model A"  # model B's precision box: the sidebar's precision


@dataclass
class Side:
    """One model of the page: its inputs, label, colour, and what it got so far (an error ends it)."""

    inp: inputs.Inputs
    label: str
    color: str
    lattice: Lattice | None = None
    marginalizer: Marginalizer | None = None
    canonical: Estimate | None = None
    beam: Estimate | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


ABOUT = (
    "Two models cut a text into different tokens, so their scores of *their own* canonical tokenizations miss "
    "different shares of their mass. **log p(text)**, the marginal over every tokenization, is a probability of "
    "the string itself: it compares fairly across vocabularies. Below, both canonical tokenizations on one byte "
    "axis, each model's figures, the difference by canonical and by marginal, and where each puts its mass."
)


def page() -> None:
    """The Compare page."""
    inp = live_page.open_page("Two models, one text", ABOUT)
    inputs.require_text(inp)
    c = live_page.settings_row([2, 1, 1, 1])
    name_b = _model_b(c[0], inp, server.policy())
    dtype_b = c[1].selectbox("Precision of B", [AS_A, *DTYPES], index=0, key="dtype_b", bind="query-params",
                             help="The same model in two precisions compares the precisions.")
    W = widgets.beam_width(c[2])
    if name_b is None or (sides := _sides(inp, name_b, dtype_b)) is None:
        return
    if any(s.ok for s in sides):
        st.subheader("Canonical tokenizations on one byte axis")
        st.html(byte_axis_chips_html([(s.label, s.lattice, None) for s in sides if s.ok]))

    row = live_page.LiveRow(help="Score both canonical tokenizations and run the anytime beam under each model, one "
                            "after the other.")
    cells = [col.empty() for col in st.columns(2)]
    diff_spot, plot_spot, flow_spot = st.empty(), st.empty(), st.empty()

    def draw(shown: dict[str, Estimate]) -> None:
        """Each model's column, the difference and the running plot for the beams so far."""
        for side in sides:
            side.beam = shown.get(side.label, side.beam)
        found = [_figures(side) for side in sides]  # once per redraw: the columns and the difference
        for side, f, cell in zip(sides, found, cells):
            with cell.container():
                _side_figures(side, f)
        _difference(diff_spot, sides, found)
        _running(plot_spot, sides, row.key("running"))

    jobs = [_job(side, W) for side in sides if side.ok]
    for side, job in zip([s for s in sides if s.ok], jobs):
        side.beam = shared_results.cached(job.key) or job.kept
        _canonical_if_loaded(side)
    row.run(jobs, draw, doing="comparing the models", again="Press Run to go on.",
            idle="Press Run to score both models; the plot grows as each model's beam completes paths.")
    _flows(flow_spot, sides)
    st.caption(f"{words.NATS} {words.precision(inp)}")


def _model_b(where: DeltaGenerator, inp: inputs.Inputs, policy: server.ServerPolicy) -> str | None:
    """Model B's box (URL key model_b), opening on another model than A; None, with one message and
    nothing loaded, where the link asks for a model this server does not offer."""
    linked = st.query_params.get("model_b")
    if linked is not None and not policy.allows(linked):
        where.error(f"This server offers only these models: {', '.join(policy.models or ())}. It does not offer "
                    f"{viz.code_span(linked[:100])} as model B, so nothing was loaded: choose model B here.",
                    icon=":material/block:")
        st.query_params.pop("model_b")
        return None
    options = list(policy.models) if policy.models is not None else known_models()
    others = [m for m in options if m != inp.model] or options
    name = inputs.model_box(where, policy, "Model B", "model_b", index=options.index(others[0]))
    if name in EMBEDDED_MODELS:
        where.caption(EMBEDDED_MODELS[name].description)
    return (name or others[0]).strip()


def _sides(inp: inputs.Inputs, name_b: str, dtype_b: str) -> list[Side] | None:
    """Models A and B with their lattices (or each one's error); None, said, where B is A."""
    inp_b = replace(inp, model=name_b, dtype=inp.dtype if dtype_b == AS_A else device_choices.resolve_dtype(dtype_b, inp.device))
    if inp_b == inp:
        st.info("Model B is model A: choose another model, or another precision for B, to compare.",
                icon=":material/compare_arrows:")
        return None
    twins = inp.model == inp_b.model
    sides = [Side(i, i.model + (f" ({i.dtype})" if twins else ""), color) for i, color in zip((inp, inp_b), MODEL_COLORS)]
    for side in sides:
        _lattice(side)
    return sides


def _lattice(side: Side) -> None:
    """The side's lattice, or its error (the other side goes on)."""
    try:
        side.lattice = loaders.lattice(side.inp.model, side.inp.text)
    except Exception as exc:  # noqa: BLE001 -- shown in that side's column
        side.error = exc


def _load(side: Side) -> Marginalizer | None:
    """The side's Marginalizer (loading its model with a status box), or None with its error kept."""
    if side.ok and side.marginalizer is None:
        try:
            side.marginalizer = loaders.marginalizer(side.inp)
        except Exception as exc:  # noqa: BLE001 -- shown in that side's column
            side.error = exc
    return side.marginalizer


def _canonical_if_loaded(side: Side) -> None:
    """Without Run, the canonical score of a side whose beam already ran (cached: no model work)."""
    if side.ok and side.beam is not None:
        _canonical(side)


def _canonical(side: Side) -> None:
    """The side's canonical score (one pass, kept by its Marginalizer), or its error."""
    if (m := _load(side)) is None:
        return
    try:
        side.canonical = m.estimate("canonical")
    except Exception as exc:  # noqa: BLE001 -- e.g. past one model's context window
        side.error = exc


def _job(side: Side, W: int | None) -> live_page.Job[Estimate]:
    """One side's canonical score and anytime beam (or beam of width W), live: the page redraws
    after each step that completed a path. A refusal (e.g. past the context window) ends this side
    only, said in its column."""
    key = side.inp.key("beam", W)
    stopped = live.unfinished(key)

    def run(update: Callable[[Estimate], None]) -> Estimate | None:
        _canonical(side)
        if not side.ok:
            return None
        try:
            return live.run_live(key, side.marginalizer, "beam", f"{side.label}: beam", on_update=update, beam_width=W)
        except Exception as exc:  # noqa: BLE001 -- shown in that side's column
            side.error = exc
            return None

    return live_page.Job(side.label, key, run, None if stopped is None else stopped.estimate,
                         None if stopped is None else f"{side.label} kept what it finished")


def _figures(side: Side) -> Figures | None:
    if not side.ok or side.marginalizer is None or side.canonical is None:
        return None
    return figures(side.marginalizer, {"canonical": side.canonical, **({"beam": side.beam} if side.beam else {})})


def _side_figures(side: Side, f: Figures | None) -> None:
    """One model's column: its name, then its figures (None: not scored yet) or its error."""
    st.markdown(f'<span style="color:{side.color};font-weight:700;font-size:1.2em">{side.label}</span>',
                unsafe_allow_html=True)
    if not side.ok:
        show_error(side.error, f"working on {side.inp.model}")
        return
    lat = side.lattice
    m = st.columns(2)
    m[0].metric("Canonical tokens", len(lat.canonical))
    m[1].metric("Tokenizations", viz.count_label(lat.count()), help="Exact count of the lattice's paths.")
    if f is None:
        st.caption("Press Run to score this model.")
        return
    m = st.columns(4)
    m[0].metric("log p(canonical)", viz.format_log(f.log_p_canonical))
    sign = "=" if f.exact else "≥"
    m[1].metric(f"log p(text) {sign}", viz.format_log(f.log_p_text),
                delta=f"{viz.format_small(f.log_p_text - f.log_p_canonical, signed=True)} nats vs canonical",
                help="Exact: the beam pruned nothing." if sign == "=" else (
                    f"A lower bound; the exact value is at most {viz.format_small(f.certified_gap)} nats above it."
                    if math.isfinite(f.certified_gap) else "A lower bound (the beam is still running or was stopped)."))
    m[2].metric("Mass off the canonical", viz.format_small(f.mass_off_canonical, 2, percent=True))
    m[3].metric("Bits per byte", f"{f.bits_per_byte:.3f}",
                help="−log₂ p(text) over the text's bytes: a scale on which models of different vocabularies compare.")
    st.markdown("**Heaviest tokenization found:** " + viz.code_span("|".join(map(viz.show_piece, f.heaviest)))
                + f" (log p {viz.format_log(f.heaviest_log_p)})")
    if side.beam is not None and side.beam.run.done:
        bounds.say(side.inp, side.beam, "beam")


def _difference(spot: DeltaGenerator, sides: list[Side], found: list[Figures | None]) -> None:
    """log p_A − log p_B by canonical and by marginal, and the sentence when marginalizing matters."""
    if None in found:
        spot.empty()
        return
    d = difference(sides[0].label, found[0], sides[1].label, found[1])
    with spot.container():
        st.subheader(f"log p({d.a}) − log p({d.b})")
        c = st.columns(3)
        c[0].metric("By canonical tokenizations", viz.format_log(d.canonical))
        c[1].metric("By marginal (all tokenizations)", viz.format_log(d.marginal))
        c[2].metric("Moved by marginalizing", viz.format_small(d.moved, signed=True))
        if (sentence := d.sentence()) is not None:
            st.info(sentence, icon=":material/swap_vert:")


def _running(spot: DeltaGenerator, sides: list[Side], key: str) -> None:
    """Both models' running gains over their canonical scores on one plot against seconds."""
    traces = [viz.RunTrace(s.label, s.beam.running_marginal() - s.beam.log_p_canonical,
                           list(s.beam.run.checkpoints) or [(s.beam.num_samples, s.beam.seconds)], s.color,
                           rounds=s.beam.rounds)
              for s in sides if s.ok and s.beam is not None]
    if not traces:
        spot.empty()
        return
    fig = viz.running_figure(traces, log_p_canonical=0.0, x="seconds", y="marginal")
    fig.update_layout(title_text="Each model's marginal above its canonical score, as the beam finds paths",
                      yaxis_title_text="log p(text) − log p(canonical), nats")
    spot.plotly_chart(fig, key=key)


def _flows(spot: DeltaGenerator, sides: list[Side]) -> None:
    """Both mass flows on one byte axis: model A above the text, model B below."""
    from marginal_core.viz.mass_flow import flow_of

    shown = [s for s in sides if s.ok and s.beam is not None]
    if len(shown) < 2:
        return
    with spot.container():
        st.subheader("Where each model puts its mass")
        st.caption("Each arc is a token; its thickness is its share of the mass found. "
                   f"{shown[0].label} above the text, {shown[1].label} below.")
        fig = flows_figure([(s.label, s.lattice, flow_of(s.lattice, s.beam)) for s in shown],
                               projector=projector.on())
        st.plotly_chart(fig, key="flows")

