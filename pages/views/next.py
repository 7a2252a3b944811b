"""What comes next: the next characters after the sidebar's text as a prompt (its trailing space or
newline kept), over every tokenization and certified, beside the canonical tokens' view (what
``generate`` samples from) and token healing's, a second model's marginal on the same axis, the
prompt continued by each view, every character coloured by its probability, and the candidates
typed in scored after the prompt, beside lm-eval's score."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import viz
from marginal_core.viz.next_figure import next_figure
from marginal_core.viz.style import MONO_FONTS
from pages._app.runtime import live, loaders, server, shared_results
from pages._app.ui import inputs, live_page, presets, projector
from pages._app.ui.defaults import APP_KV_BYTES, APP_NEXT_MAX_K, APP_NEXT_SECONDS, APP_SEARCH_BUDGET
from pages._app.ui.error_messages import describe_error, show_error

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from streamlit.delta_generator import DeltaGenerator

    from marginal_core import Continuations, ContinuationScores, NextCharacters

ABOUT = (
    "A prompt that ends with a space, inside a word or inside a URL ends on a **token boundary the text does not "
    "have**: `generate` conditions on the prompt's canonical tokens, and after a lone space token the model expects "
    "what rarely follows one. Summed over **every tokenization** of the prompt and every token that runs past its "
    "end, the model's next character is what the text itself makes likely. The **marginal** bars are that sum, "
    "with the interval the search certifies; **canonical** is the next token after the canonical tokens, by its "
    "first character; **healed** backs off the last canonical token and lets the next token begin with its bytes "
    "(token healing, as Guidance does). The red chip is the last canonical token: the boundary. Characters are the "
    "one axis every vocabulary shares, so a second model's marginal compares bar for bar."
)
_KEPT = live.Kept("_next_stopped")  # the session's last stopped run of this page


@dataclass(frozen=True)
class NextView:
    """One model's run of the page: its next characters and, for the first model, the continuations;
    ``failed``: the message of the error that ended the run after these (what the steps before it
    found), "" for a run that did not fail."""

    found: NextCharacters
    more: Continuations | None = None
    scores: ContinuationScores | None = None
    failed: str = ""

    @property
    def seconds(self) -> float:
        return self.found.seconds + sum(x.seconds for x in (self.more, self.scores) if x is not None)

    @property
    def cancelled(self) -> bool:
        return self.found.cancelled or any(x.cancelled for x in (self.more, self.scores) if x is not None)


def page() -> None:
    """The What comes next page."""
    inp = live_page.open_page("What comes next?", ABOUT)
    figure, settings = projector.figure_first()
    with settings:
        k, chars, how, seed, name_b = _settings()
        candidates = _candidates()
    sides = [inp, *_second(inp, name_b)]
    with figure:
        _chips(inp)
        if (example := presets.matching(inp.text, inp.context)) is not None and example.opens == "next":
            st.info(f"**What to look for.** {example.look_for}", icon=":material/visibility:")
        row = live_page.LiveRow(help="Search what comes next under each model (one after the other), then "
                                     "continue the prompt.")
        errors = st.container()
        failed_spot, sentence_spot, chart_spot, more_spot, scores_spot = (st.empty() for _ in range(5))

    def draw(shown: dict[str, NextView]) -> None:
        """The sentence, the bars and the continuations of the runs so far; beside them, why a run
        that failed ended (what its steps before found stays drawn)."""
        views = [shown[s.model] for s in sides if s.model in shown]
        if failed := [(s.model, shown[s.model]) for s in sides if s.model in shown and shown[s.model].failed]:
            with failed_spot.container():
                for model, view in failed:
                    st.error(f"{view.failed} Drawn below: what the search under {model} had found before "
                             f"({_found_so_far(view)}).", icon=":material/error:")
        else:
            failed_spot.empty()
        if views:
            sentence_spot.markdown(f"{_sentence(views[0].found)}\n\n<small>{views[0].found.standing()}</small>",
                                   unsafe_allow_html=True)
        else:
            sentence_spot.empty()  # no sentence over empty bars
        chart_spot.plotly_chart(next_figure([v.found for v in views], projector=projector.on()), key=row.key("bars"))
        if views and views[0].more is not None:
            more_spot.html(views[0].more.table(MONO_FONTS))
        else:
            more_spot.empty()
        if views and views[0].scores is not None:
            scores_spot.html(views[0].scores._repr_html_())
        else:
            scores_spot.empty()

    jobs = [_job(side, k, chars if i == 0 else 0, how, seed, candidates if i == 0 else (), errors)
            for i, side in enumerate(sides)]
    row.run(jobs, draw, doing="searching what comes next",
            idle="Press Run to search what comes next after the text; the bars are drawn after every round.")
    st.caption("The prompt is the sidebar's text exactly, a trailing space or newline included; an empty text asks "
               "for the first character. The search stops once every next byte's interval is within 0.01, or by "
               "itself once the values have settled and the certificate had its share of time; the continuation "
               f"takes each character once its values settle, for at most {APP_NEXT_SECONDS:g} s.")


def _settings() -> tuple[int, int, str, int, str | None]:
    """The page's settings row: how many characters, the continuation's length and how it is
    chosen, the seed, and the second model."""
    c = st.columns([1.2, 1.4, 1.6, 1.0, 2.4])
    k = c[0].number_input("Characters", 1, APP_NEXT_MAX_K, 8, key="k", bind="query-params",
                          help="How many of the most probable next characters to show.")
    chars = c[1].number_input("Continue by", 0, 40, 20, key="chars", bind="query-params",
                              help="How many characters each view continues the prompt by (0: none).")
    how = c[2].segmented_control("Continue", ("greedy", "sample"), default="greedy", key="how",
                                 bind="query-params", required=True,
                                 help="greedy: the most probable character each time; sample: drawn at random with "
                                      "the seed, by all three views with the same settings.")
    seed = c[3].number_input("Seed", 0, 2**31 - 1, 0, key="seed", bind="query-params")
    name_b = inputs.model_box(c[4], server.policy(), "Second model (optional)", "model_b", index=None)
    return int(k), int(chars), str(how), int(seed), name_b


def _candidates() -> tuple[str, ...]:
    """The Candidates box: continuations to score after the prompt, one a line, kept exactly (a
    leading space is part of a candidate); blank lines are skipped, and past MAX_CANDIDATES the
    rest are left out, said in a line."""
    from marginal_core import MAX_CANDIDATES

    box = st.text_area("Candidates (one per line)", key="candidates", bind="query-params", height=90,
                       help="Continuations to score after the prompt, each over every tokenization of the prompt "
                            "and it joined, beside lm-eval's score of the pair. A leading space is part of a "
                            "candidate (shown as ␣ in the table).")
    lines = tuple(line for line in (box or "").split("\n") if line.strip())
    if len(lines) > MAX_CANDIDATES:
        st.caption(f"The first {MAX_CANDIDATES} candidates are scored; the other {len(lines) - MAX_CANDIDATES} are left out.")
    return lines[:MAX_CANDIDATES]


def _chips(inp: inputs.Inputs) -> None:
    """The prompt's canonical tokens, the last one marked: the boundary the canonical view conditions on."""
    if not inp.text:
        st.caption("The text is empty: what comes next is the first character after the context.")
        return
    lattice = loaders.require_lattice(inp)
    st.html(viz.chips_html(lattice, marked="the last canonical token: the boundary generate conditions on"))
    last = lattice.vocab.surface(lattice.canonical[-1]).decode("utf-8", errors="replace")
    st.caption(f"The canonical tokens end on {viz.code_span(viz.show_piece(last))} (red): `generate` conditions on that "
               "boundary; the marginal does not.")


def _second(inp: inputs.Inputs, name: str | None) -> list[inputs.Inputs]:
    """The second model's inputs ([] for none, the same model, or one the server does not offer)."""
    if not name or name.strip() == inp.model:
        return []
    if not server.policy().allows(name.strip()):
        st.warning(f"This server does not offer {viz.code_span(name.strip()[:100])} as the second model.",
                   icon=":material/block:")
        return []
    return [replace(inp, model=name.strip())]


def _sentence(found: NextCharacters) -> str:
    """The search's sentence for the page: a mark alone on a dotted circle (“◌ั”, not on the quote)
    and a right-to-left character isolated (“ل” (0.690), in that order)."""
    said = found.sentence()
    for row in found.rows:
        if (shown := viz.with_base(row.shown)) != row.shown:
            said = said.replace(f"“{row.shown}”", f"“{shown}”")
    return viz.isolate_rtl(said)


def _found_so_far(view: NextView) -> str:
    """How far a run got, in words: its rounds and prefixes, and the continuation's characters."""
    rounds = view.found.rounds
    said = f"{rounds} round{'s' if rounds != 1 else ''}, {view.found.scored:,} prefixes"
    if view.more is not None:
        said += f"; the continuation's first {len(view.more.marginal.text)} characters"
    return said


def _job(side: inputs.Inputs, k: int, chars: int, how: str, seed: int, candidates: tuple[str, ...],
         errors: DeltaGenerator) -> live_page.Job[NextView]:
    """One model's run, live; what a stopped run, or one that failed, kept still shows."""
    key = side.key("next", k, chars, how, seed, candidates)
    kept: NextView | None = _KEPT.get(key)
    said = (None if kept is None else f"{side.model}: the search failed after {_found_so_far(kept)}" if kept.failed
            else "the search kept the characters and continuation it had found")
    return live_page.Job(side.model, key, lambda update: _run(side, key, (k, chars, how, seed, candidates), update,
                                                              errors), kept, said)


def _run(side: inputs.Inputs, key: tuple, asked: tuple[int, int, str, int, tuple[str, ...]],
         update: Callable[[NextView], None], errors: DeltaGenerator) -> NextView | None:
    """The search under a bar that says each round, then the continuations character by character,
    then the candidates (``asked``: k, the continuation's length, how, the seed, the candidates).
    A step that fails ends the run with what the steps before found, its error kept with it (drawn
    beside it, and kept in the session as a stopped run is, never shared as finished); an error
    before any step said in one message in errors (the other model's row still shows)."""
    done = shared_results.cached(key)
    if done is not None:
        return done  # type: ignore[no-any-return]
    seen: list[NextView] = []  # the last view the steps yielded

    def show(view: NextView) -> None:
        seen[:] = [view]
        update(view)

    try:
        lm = loaders.model(side.model, side.device, side.dtype)  # the search's modules import once it is loaded
        from marginal_core import continuations_stream, prefix

        k, chars, how, seed, candidates = asked
        bar = live.Bar(f"{side.model}: what comes next", "rounds")
        cap = server.policy().cap_beam_width(1024)
        settings = dict(max_rows=cap, budget=APP_SEARCH_BUDGET, kv_bytes=APP_KV_BYTES, should_stop=bar.should_stop)
        context = side.context or None
        p = prefix(side.text, lm, context, time_budget="auto", **settings)  # the candidates' searches begin with it

        def steps() -> Iterator[NextView]:
            more = None
            for found in p.next_characters_stream(k):
                bar.update(0.5 if chars or candidates else 0.9, f"{side.model}: round {found.rounds}, "
                           f"{found.scored:,} prefixes in {found.seconds:.1f} s")
                yield NextView(found)
            for more in continuations_stream(lm, side.text, context, chars, how, seed, time_budget=APP_NEXT_SECONDS,
                                             **settings) if chars else ():
                bar.update(0.5 + 0.3 * len(more.marginal.text) / max(chars, 1),
                           f"{side.model}: continuing, {len(more.marginal.text)} of {chars} characters")
                yield NextView(found, more)
            for scores in p.score_continuations_stream(candidates) if candidates else ():
                bar.update(0.8 + 0.2 * len(scores.rows) / len(candidates),
                           f"{side.model}: candidate {len(scores.rows)} of {len(candidates)}")
                yield NextView(found, more, scores)

        return live.follow(key, steps(), bar, show, lambda v: _KEPT.keep(key, v), lambda v: v.cancelled)
    except Exception as exc:  # noqa: BLE001 -- the other model's row still shows
        doing = f"searching what comes next under {side.model}"
        if not seen:
            with errors:
                show_error(exc, doing)
            return None
        _, message = describe_error(exc, doing)
        kept = replace(seen[-1], failed=message)
        _KEPT.keep(key, kept)  # a later run of the page draws it too, with its reason, as a stopped run's
        return kept
