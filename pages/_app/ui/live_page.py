"""The skeleton every live page shares, defined once: its title and introduction, its settings
row, the Run and Stop row, the loop that runs each wanted job live and redraws the page after every
chunk (fresh element keys per redraw), the finished, stopped and never-run status, and the guard.
A page keeps what is its own: its widgets, its result keys and what it draws.

A page with a plot that grows (Running estimates, Surprisal, Compare) takes a :class:`LiveRow`
and calls its :meth:`LiveRow.run`; a page that shows its results once they are in (Samplers,
Probability mass, the Lattice's mass flow, Rank, Home) calls :func:`run_on_press`, whose button
shows only while a result is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import streamlit as st

from pages._app.runtime import live, loaders, shared_results
from pages._app.ui import inputs, projector
from pages._app.ui.error_messages import guard

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

    from marginal_core import Estimate

T = TypeVar("T")
PLAY = ":material/play_arrow:"


def open_page(title: str, about: str, **markdown: object) -> inputs.Inputs:
    """The shared inputs, under the page's title and introduction (folded in projector mode)."""
    inp = inputs.current()
    st.title(title)
    projector.about(about, **markdown)
    return inp


def settings_row(spec: int | Sequence[float]) -> list[DeltaGenerator]:
    """The columns of the page's settings row (folded in projector mode)."""
    return projector.settings().columns(spec)


@dataclass(frozen=True)
class Job(Generic[T]):
    """One live run a page may start: the name the page and its status give it, the key its
    finished result is shared under, how to run it (``run(update)`` passes each partial result to
    update and returns the last, or None after an error it said itself), what a stopped run of it
    kept, and how far that run got in words (None: it was not stopped)."""

    name: str
    key: Hashable
    run: Callable[[Callable[[T], None]], T | None]
    kept: T | None = None
    stopped: str | None = None


def estimate_job(inp: inputs.Inputs, name: str, key: Hashable, method: str, label: str, *, said: str | None = None,
                 **options: Any) -> Job[Estimate]:
    """An estimator's live run (live.run_live under a bar labelled label; options as it takes),
    its stopped run said as '{said} after 100 of 600 samples' (said: the name by default)."""
    stopped = live.unfinished(key)

    def run(update: Callable[[Estimate], None]) -> Estimate:
        return live.run_live(key, loaders.require_marginalizer(inp), method, label, on_update=update, **options)

    phrase = None if stopped is None else f"{name if said is None else said} {stopped.describe()}".strip()
    return Job(name, key, run, None if stopped is None else stopped.estimate, phrase)


def _finished(jobs: Sequence[Job[T]]) -> dict[str, T]:
    """The jobs' results that are finished (shared by every page and session), by name."""
    return {job.name: r for job in jobs if (r := shared_results.cached(job.key)) is not None}


class LiveRow:
    """A page's Run and Stop buttons, its status line under them and its redraws: each redraw
    gets element keys of its own (:meth:`key`), as Streamlit needs within one script run."""

    def __init__(self, label: str = "Run", *, key: str = "run", widths: Sequence[float] = (1, 1, 6),
                 where: Sequence[DeltaGenerator] | None = None, status: DeltaGenerator | None = None,
                 help: str | None = None, disabled: bool = False, icon: str | None = PLAY) -> None:
        """The buttons in where's two cells, or in a new row of widths; the status in status, or in
        a new line under the row."""
        cells = list(where) if where is not None else st.columns(list(widths), vertical_alignment="center")
        self.clicked = cells[0].button(label, icon=icon, type="primary", key=key, help=help, disabled=disabled)
        live.stop_button(cells[1])
        self.status = status if status is not None else st.empty()
        self.drawn = 0

    def key(self, name: str) -> str:
        """An element key of this redraw (name_1, name_2, ...)."""
        return f"{name}_{self.drawn}"

    def run(self, jobs: Sequence[Job[T]], draw: Callable[[dict[str, T]], None], *, doing: str, idle: str,
            again: str = "Press Run to start again.") -> None:
        """Run the jobs not finished yet, one after the other, when Run was pressed: draw the results
        so far before, after every partial result and after, and say 'Done' with each one's seconds
        (a job that failed shows nothing, or, where its result has a ``failed`` message, what its
        steps before found, said as 'Ended'). Else draw what is finished or what a stopped run kept,
        under the stopped runs (then ``again``) or idle."""
        done = _finished(jobs)
        shown: dict[str, T | None] = {job.name: done.get(job.name, job.kept) for job in jobs}
        if self.clicked:
            self._draw(draw, shown)  # what is known stays on screen while the first chunk is scored
            with guard(doing):
                for job in jobs:
                    if job.name in done:
                        continue

                    def update(partial: T, name: str = job.name) -> None:
                        self._draw(draw, {**shown, name: partial})

                    try:
                        with self.status.container():
                            shown[job.name] = job.run(update)
                    except Exception:  # the guard says it; what an earlier stopped run kept is gone too
                        shown[job.name] = None
                        raise
                if results := {name: r for name, r in shown.items() if r is not None}:
                    failed = {name for name, r in results.items() if getattr(r, "failed", "")}
                    said = ", ".join(f"{n} {r.seconds:.1f} s" + (" (failed: what it found before is shown)"
                                                                  if n in failed else "") for n, r in results.items())
                    (self.status.warning if failed else self.status.success)(("Ended: " if failed else "Done: ") + said)
        elif stopped := list(dict.fromkeys(j.stopped for j in jobs if j.name not in done and j.stopped is not None)):
            self.status.warning("Stopped: " + ", ".join(stopped) + f". {again}")
        elif any(job.name not in done for job in jobs):
            self.status.caption(idle)
        self._draw(draw, shown)

    def _draw(self, draw: Callable[[dict[str, T]], None], shown: Mapping[str, T | None]) -> None:
        """One redraw of the results there are, with fresh element keys."""
        self.drawn += 1
        draw({name: r for name, r in shown.items() if r is not None})


def run_on_press(label: str, key: str, jobs: Sequence[Job[T]], *, doing: str, idle: str | None,
                 widths: Sequence[float] = (2, 1, 5), where: Sequence[DeltaGenerator] | None = None,
                 disabled: bool = False, partial: bool = False,
                 again: str = "Press the button to start again.") -> dict[str, T]:
    """The jobs' results, by name: while one is missing, a button (label, key) and Stop; pressed,
    it runs the missing jobs one after the other under a progress bar; else the stopped runs are
    said (then ``again``) and idle under them. With partial, a stopped run's result is returned
    too, said as partial. A result missing after an error (said) or before a run is left out."""
    done = _finished(jobs)
    if len(done) == len(jobs):
        return done
    row = LiveRow(label, key=key, widths=widths, where=where, disabled=disabled, icon=None)
    if row.clicked:
        with guard(doing):
            for job in jobs:
                if job.name not in done and (r := job.run(lambda _: None)) is not None:
                    done[job.name] = r
        return done
    kept = {j.name: j.kept for j in jobs if partial and j.name not in done and j.kept is not None}
    if stopped := [j.stopped for j in jobs if j.name not in done and j.stopped is not None]:
        row.status.warning("Stopped " + "; ".join(stopped) + ("; the numbers below are partial" if kept else "")
                           + "." + (f" {again}" if again else ""))
    if idle:
        st.caption(idle)
    return {**done, **kept}
