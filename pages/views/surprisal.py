"""Surprisal: where in the text the model is surprised, region by region, by the canonical
tokenization's two rows (naive, canonical prefix) and by the marginal over every tokenization (and
a second model's marginal), with what the model expected at each region's first character."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import SPACES, SURPRISAL_METHODS, UNITS, region_spans, viz
from marginal_core.viz.surprisal import COLOURINGS, bars_figure, difference_sentence, strip_html
from pages._app.runtime import loaders, server
from pages._app.ui import inputs, live_page, presets, projector, words
from pages._app.ui.error_messages import show_error
from pages.views import region_links, surprisal_search

if TYPE_CHECKING:
    from collections.abc import Callable

    from streamlit.delta_generator import DeltaGenerator

    from marginal_core import Surprisal


ABOUT = (
    "A region's **marginal surprisal** is log P(s<a) − log P(s<b): P(s<j) is the probability, summed over "
    "every tokenization, that the model's string begins with the text's first j bytes, and the region runs "
    "from byte a to byte b. The regions sum to −log P(text as a prefix). Two rows of the canonical tokenization "
    "stand on top. The **naive** row (dashed) gives each canonical token's surprisal wholly to the region of its "
    "first non-whitespace byte, as token-level tools do: with tokens that carry a leading space it charges a "
    "word's closing space to the next word. The **canonical prefix** row (dotted) cuts the canonical "
    "tokenization's own prefix probability at the same boundaries (Pimentel & Meister's word probability, "
    "minicons' bow correction). Naive − canonical prefix is that whitespace convention; canonical prefix − "
    "marginal is what the other tokenizations add. Hover a marginal region for its numbers, the interval the "
    "search certifies and the characters the model expected at its start (summed over tokenizations, so two "
    "models compare on one axis); colour by rank to see where the one that came stood (GLTR's bins). Click a "
    "region to open the Lattice page on that stretch."
)


def page() -> None:
    """The Surprisal page."""
    inp = live_page.open_page("Where in the text is the surprise?", ABOUT)
    loaders.require_lattice(inp)  # a text the tokenizer cannot represent is refused here
    figure, settings = projector.figure_first()
    with settings:
        unit, space, method, colour, name_b = _settings()
    try:
        region_spans(inp.text, unit, space)
    except Exception as exc:  # noqa: BLE001 -- e.g. a text of whitespace alone
        show_error(exc)
        st.stop()
    sides = [inp, *_second(inp, name_b)]

    with figure:
        if (example := presets.matching(inp.text, inp.context)) is not None and example.on_surprisal:
            st.info(f"**What to look for.** {example.on_surprisal}", icon=":material/visibility:")
        if unit == "word" and unspaced(inp.text):
            _by_characters()
        row = live_page.LiveRow(help="Search the prefixes of the text under each model (one after the other).")
        errors = st.container()
        strip_spot, totals_spot, bars_spot = st.empty(), st.empty(), st.empty()

    def draw(shown: dict[str, Surprisal]) -> None:
        """The strip, the totals and the bars of the searches so far."""
        by = [s.by(unit, space) for s in shown.values()]
        if by:
            strip_spot.html(strip_html(by, font="1.6em" if projector.on() else "1.1em",
                                       links=region_links.lattice_links(inp, by[0]), colour=colour))
            with totals_spot.container():
                _totals(by)
        bars_spot.plotly_chart(bars_figure(by, projector=projector.on()), key=row.key("bars"))

    row.run([_job(side, method, errors) for side in sides], draw, doing="searching the prefixes",
            idle="Press Run to search the text's prefixes under the model; the strip is drawn after every round.")
    st.caption("Click a region to open the Lattice page on its stretch of the text. "
               f"{words.NATS} {words.precision(inp)}")


def _settings() -> tuple[str, str, str, str, str | None]:
    """The page's settings row: regions, where spaces go, method, colouring, and the second model."""
    c = st.columns([1.7, 1.5, 1.4, 1.4, 2.4])
    unit = c[0].segmented_control("Regions", UNITS, default="word", key="unit", bind="query-params", required=True,
                                  help="Cut the text into bytes, characters or whitespace-delimited words.")
    space = c[1].segmented_control("Spaces go", SPACES, default="trailing", key="space", bind="query-params",
                                   required=True, help="A word's region takes the whitespace after it "
                                   "(trailing) or before it (leading).")
    method = c[2].segmented_control("Method", SURPRISAL_METHODS, default="search", key="method",
                                    bind="query-params", required=True, help="search: rounds of batched passes "
                                    "over the heaviest prefixes, with a certified interval per region; exact: "
                                    "every prefix (short texts).")
    colour = c[3].segmented_control("Colour by", COLOURINGS, default="surprisal", key="colour",
                                    bind="query-params", required=True, help="The marginal rows coloured by "
                                    "surprisal, or by the rank of each region's first character among the "
                                    "characters the model expected there: top 1, top 3, top 10, below.")
    name_b = inputs.model_box(c[4], server.policy(), "Second model (optional)", "model_b", index=None)
    return unit, space, method, colour, name_b


# Scripts written without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan), as
# ranges of code points: a word region there is a whole run of the text.
UNSPACED = ((0x0E00, 0x0EFF), (0x0F00, 0x0FFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x30FF), (0x31F0, 0x31FF),
            (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x3134F))


def unspaced(text: str, run: int = 4) -> bool:
    """Whether a whitespace-delimited word of the text holds at least ``run`` characters of a
    script written without spaces between words (Chinese, Japanese, Thai, ...)."""
    return any(sum(any(a <= ord(c) <= b for a, b in UNSPACED) for c in word) >= run for word in text.split())


def _by_characters() -> None:
    """A note for a text written without spaces between words, with a button that cuts it by characters."""
    note, button = st.columns([5, 1.3], vertical_alignment="center")
    note.info("This text is written without spaces between words (as Chinese, Japanese and Thai are), so a word "
              "region holds a whole run of it. Cut it by characters to see where in the run the surprise is.",
              icon=":material/translate:")
    button.button("Cut by characters", key="by_char", on_click=_cut_by_characters)


def _cut_by_characters() -> None:
    st.session_state["unit"] = "char"


def _job(side: inputs.Inputs, method: str, errors: DeltaGenerator) -> live_page.Job[Surprisal]:
    """One model's search of the prefixes, live; what a stopped search kept still holds."""
    key = side.key("surprisal", method)
    kept = surprisal_search.stopped(key)
    return live_page.Job(side.model, key, lambda update: _search(side, key, method, update, errors), kept,
                         None if kept is None else "the search kept every round it finished; its intervals still hold")


def _second(inp: inputs.Inputs, name: str | None) -> list[inputs.Inputs]:
    """The second model's inputs ([] for none, the first model again, or one the server does not
    offer or whose tokenizer cannot spell the text: said, and left out)."""
    if not name or name.strip() == inp.model:
        return []
    name = name.strip()
    if not server.policy().allows(name):
        st.warning(f"This server does not offer {viz.code_span(name[:100])} as the second model.",
                   icon=":material/block:")
        return []
    try:
        loaders.lattice(name, inp.text)
    except Exception as exc:  # noqa: BLE001 -- the first model's row still shows
        show_error(exc, f"building {name}'s lattice")
        return []
    return [replace(inp, model=name)]


def _search(side: inputs.Inputs, key: tuple, method: str, update: Callable[[Surprisal], None],
            errors: DeltaGenerator) -> Surprisal | None:
    """One model's search, live under the row's status; its error (the window passed, too many
    prefixes for exact) said in one message in errors, where the next model's progress does not
    replace it."""
    try:
        m = loaders.marginalizer(side)
        return surprisal_search.search(key, m, method, f"{side.model}: searching the prefixes", update)
    except Exception as exc:  # noqa: BLE001 -- the other model's row still shows
        with errors:
            show_error(exc, f"searching the prefixes under {side.model}")
        return None


def _totals(shown: list[Surprisal]) -> None:
    """Per model the regions' sum, log p(text) and bits per byte, and the sentence on what differs."""
    for s in shown:
        c = st.columns([2, 1, 1, 1, 1, 1])
        c[0].markdown(f"**{s.model}**")
        c[1].metric("Σ marginal row", _nats(s.total), help="The marginal row's regions summed: −log P(text as a "
                    "prefix), the probability that the model's string begins with the text.")
        prefix = -float(s.canonical_prefix[-1]) if s.canonical_prefix is not None else math.nan
        c[2].metric("Σ canonical prefix row", _nats(prefix), help="The canonical prefix row's regions summed: the "
                    "canonical tokenization's share of −log P(text as a prefix) (its last token may run on).")
        c[3].metric("Σ naive row", _nats(-float(s.canonical_log_p.sum())),
                    help="−log p(canonical): the naive row's regions summed.")
        c[4].metric("log p(text)", _nats(s.log_p_text), help="The tokenizations that end exactly at the text's end.")
        c[5].metric("bits per byte", f"{s.bits_per_byte:.3f}" if math.isfinite(s.bits_per_byte) else "—",
                    help="−log2 p(text) per byte of the text: comparable across vocabularies.")
    st.caption(difference_sentence(shown[0]))
    for s in shown:
        st.caption(_measures(s))


def _measures(s: Surprisal) -> str:
    """The search's two measures of progress and why it ended, with the regions left open."""
    line = f"{s.model}: {s.progress} within {s.tolerance:g} nats"
    if s.ended:
        line += f"; ended after {s.seconds:.1f} s: {s.ended_reason}"
    if s.ended and s.open_regions:
        line += f"; left open: {len(s.open_regions)} (their intervals on the strip)"
    return line


def _nats(value: float) -> str:
    return viz.format_log(value) if math.isfinite(value) else "—"

