"""Live runs: an estimator's stream drawn as it goes, with a Stop that stops the work.

A lattice or exact run goes in a first chunk of a few samples and then chunks of about a tenth
of k, grown to about CHUNK_S seconds of work where the device is fast (a GPU then takes a run
of k = 1,000 in about three passes, not ten), so its first estimate comes within a second
whatever k is, its plots grow, and a stopped run keeps the chunks it finished (in the
session; a finished result is kept for every session). A proxy run goes in a few large batches:
each batch costs one sweep of sequential passes almost whatever its size, so a small first batch
would not come sooner, only add a sweep.

How a run learns that it must stop: app.py calls :func:`begin_script_run` at the top of every
script run, which sets the previous run's token. A Stop click, a widget change or a page switch
starts a new script run at once (Streamlit's fast reruns) while the old one may still be
computing in its own thread; the old run's stop check (polled by the library between chunks
and between the proxy's passes) then answers True, and its progress callback (called after
every forward pass) ends the old script run there. Every redraw of a progress bar is also a
point where Streamlit itself ends a script run whose session asked for a stop (a closed tab).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

from marginal_core import MAX_BEAM_WIDTH, Method
from marginal_core.ground.progress import Progress, StopCheck, describe_gap
from marginal_core.serving.turns import TurnCancelled
from pages._app.runtime import machine, server, shared_results
from pages._app.ui.defaults import DEFAULT_SAMPLES

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

    from marginal_core import Estimate, Marginalizer

T = TypeVar("T")
_TOKEN = "_run_token"
_UNFINISHED = "_unfinished_runs"
# Seconds between redraws of a progress bar from within a chunk (each redraw is sent to the
# browser, and is where Streamlit can end a script run). Each redraw also costs the browser and
# the server's script thread a share of a small machine's cores, which the estimate then lacks
# (the Running page against the CLI at 0.25 s and 0.5 s: docs/history/2026-11-27-fast-from-the-first-click.md).
REDRAW_S = 0.5
# Samples in a live lattice or exact run's first chunk; later chunks are live_chunk(k), grown to
# hold about CHUNK_S seconds of work at the rate of the chunk before (the library's chunk_seconds).
FIRST_CHUNK = 2
CHUNK_S = 1.0
# A live proxy run's batches: a quarter of k, at least PROXY_BATCH (one batch for the default k)
# and at most the library's default batch.
PROXY_BATCH = 100


def live_chunk(k: int) -> int:
    """The largest chunk of a live run of k: about a tenth of k, 50 to 500 samples.

    Smaller chunks update a live plot more often but share fewer prefixes, so they cost more.
    """
    return int(min(500, max(50, math.ceil(k / 10))))


def proxy_batch(k: int) -> int:
    """The samples of each batch of a live proxy run of k: a quarter of k, 100 to 1,024."""
    from marginal_core import PROXY_BATCH_SIZE

    return int(min(PROXY_BATCH_SIZE, max(PROXY_BATCH, math.ceil(k / 4))))


def _requested(m: Marginalizer, method: str, samples: int) -> int:
    """The samples a live run of method asks for (exact: every non-canonical path)."""
    return m.lattice.count() - 1 if method == "exact" else samples


def live_stream(
    m: Marginalizer,
    method: str,
    *,
    samples: int = DEFAULT_SAMPLES,
    should_stop: StopCheck | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> Iterator[Estimate]:
    """``m.stream`` in chunks sized for a live plot (FIRST_CHUNK samples, the canonical path in their
    trie, then chunks of :func:`live_chunk` grown to CHUNK_S seconds of work; the proxy in batches
    of :func:`proxy_batch`; chunk and first_chunk in options override these), the anytime beam's
    widest round the server's cap; same samples as ``m.estimate`` with the same options."""
    k = _requested(m, method, samples)
    chunks = ({"chunk": proxy_batch(k)} if method == "proxy" else
              {"chunk": live_chunk(k), "first_chunk": FIRST_CHUNK, "chunk_seconds": CHUNK_S,
               "canonical_in_first_chunk": True})
    widest = {"max_beam_width": server.policy().cap_beam_width(MAX_BEAM_WIDTH)}  # the anytime beam's, on this server
    return m.stream(method, samples=samples, should_stop=should_stop, progress=progress, **{**chunks, **widest, **options})


def begin_script_run() -> None:
    """Start a script run of this session: the session's previous run, if it is still
    computing, stops at its next check."""
    previous = st.session_state.get(_TOKEN)
    if previous is not None:
        previous.set()
    st.session_state[_TOKEN] = threading.Event()


def stop_check() -> StopCheck:
    """The stop check of this script run: True once a newer run of the session has started."""
    return st.session_state.setdefault(_TOKEN, threading.Event()).is_set


class Bar:
    """A progress bar for a long computation, with the stop check and progress callback the
    library takes. Superseded by a newer run of the session, it ends this script run.

    It counts ``unit`` (samples, or tokens for a canonical score); with ``now=False`` it shows
    only once the computation has taken REDRAW_S (a quick one shows nothing). Passed as the
    progress callback itself, it hears a run's rounds too (the anytime beam's): it then counts
    rounds, each walk's steps moving it within one, and says the width and the certified gap.
    """

    def __init__(self, label: str, unit: str = "samples", *, now: bool = True) -> None:
        self.label, self.unit = label, unit
        self.round: tuple[int, int, int, float | None] | None = None  # (done, planned, width, gap)
        self.token: threading.Event = st.session_state.setdefault(_TOKEN, threading.Event())
        self.started = self.drawn = time.perf_counter()
        self.fraction, self.message = 0.0, f"{label}…"
        self._bar = st.empty()
        if now:
            self._bar.progress(0.0, text=self.message)

    def update(self, fraction: float, message: str) -> None:
        """Show a new state (and end this script run here if a newer one has started)."""
        self.fraction, self.message = min(1.0, max(0.0, fraction)), message
        self._draw(message)

    def progress(self, done: float, total: int) -> None:
        """The library's progress callback (units done, of total), redrawn a few times a second."""
        if self.token.is_set() or time.perf_counter() - self.drawn >= REDRAW_S:
            seconds = time.perf_counter() - self.started
            if self.round is None:
                self.update(done / max(total, 1),
                            f"{self.label}: {int(done):,} of {total:,} {self.unit} scored in {seconds:.1f} s")
                return
            finished, planned, width, gap = self.round
            said = ", ".join(w for w in (f"width {width}", describe_gap(gap)) if w)
            self.update((finished + done / max(total, 1)) / max(planned, 1),
                        f"{self.label}: round {finished + 1} of {planned} ({said}), step {int(done)} of {total} "
                        f"in {seconds:.1f} s")

    def __call__(self, done: float, total: int) -> None:
        """The bar itself is a progress callback, with a round hook (on_round)."""
        self.progress(done, total)

    def on_round(self, done: int, planned: int, width: int, gap: float | None) -> None:
        """The library's round hook (progress.RoundHook): a round starts, or the run ends."""
        self.round = (min(done, planned - 1), planned, width, gap)

    def should_stop(self) -> bool:
        """The library's stop check; it also keeps the bar's clock going while nothing finishes."""
        if not self.token.is_set() and time.perf_counter() - self.drawn >= REDRAW_S:
            self._draw(f"{self.message} · {time.perf_counter() - self.started:.0f} s")
        return self.token.is_set()

    def _draw(self, text: str) -> None:
        if self.token.is_set():
            st.stop()  # a newer run of this session has started: end this one here
        self.drawn = time.perf_counter()
        self._bar.progress(self.fraction, text=text)

    def empty(self) -> None:
        self._bar.empty()


@dataclass(frozen=True)
class Unfinished:
    """A live run that did not reach its end: the samples it was asked for, and its last
    estimate (None before its first chunk)."""

    requested: int
    estimate: Estimate | None = None
    unit: str = "samples"  # what the run counts: Method.progress_unit

    def describe(self) -> str:
        """'after 100 of 600 samples scored', or that nothing had been scored yet."""
        e = self.estimate
        if self.unit == "steps":  # a beam: steps, and the paths completed
            if e is None:
                return "before the beam's first step (nothing was kept)"
            return f"after {e.run.describe()}" + ("" if e.num_samples else " (no path was complete yet)")
        if e is None or not e.num_samples:
            return f"before its first chunk was scored, of {self.requested:,} samples asked for (nothing was kept)"
        return f"after {e.num_samples:,} of {e.run.requested or self.requested:,} samples"


def _unfinished_runs() -> dict[Hashable, Unfinished]:
    return st.session_state.setdefault(_UNFINISHED, {})


def unfinished(key: Hashable) -> Unfinished | None:
    """This session's run of key that was stopped before its end, or None."""
    return _unfinished_runs().get(key)


def run_live(
    key: Hashable,
    m: Marginalizer,
    method: str,
    label: str,
    *,
    on_update: Callable[[Estimate], None] | None = None,
    **options: Any,
) -> Estimate:
    """One method's live stream (options as for :func:`live_stream`) under a progress bar.

    Each chunk's estimate is kept in the session (see :func:`unfinished`) and passed to
    on_update; the finished estimate is stored for every page and session and returned. A run
    that is stopped ends the script run: the newer run shows what was kept.
    """
    done = shared_results.cached(key)
    if done is not None:
        return done
    runs = _unfinished_runs()
    requested = _requested(m, method, options.get("samples", DEFAULT_SAMPLES))
    unit = Method.parse(method).progress_unit
    runs[key] = Unfinished(requested, unit=unit)
    bar = Bar(label, unit)

    def show(est: Estimate) -> None:
        bar.update(est.run.fraction, f"{label}: {est.run.describe()} in {est.seconds:.1f} s")
        if on_update is not None:
            on_update(est)

    def keep(est: Estimate | None) -> None:
        if est is None:
            runs.pop(key, None)
        else:
            runs[key] = Unfinished(requested, est, unit)

    stream = live_stream(m, method, should_stop=bar.should_stop, progress=bar, **options)
    return follow(key, stream, bar, show, keep, lambda est: est.run.cancelled)


def follow(key: Hashable, items: Iterable[T], bar: Bar, show: Callable[[T], None], keep: Callable[[T | None], None],
           cancelled: Callable[[T], bool]) -> T:
    """A live stream to its end under bar: each item is kept in the session (``keep``; keep(None)
    forgets it once the stream finished or failed) and shown; the last is stored for every page
    and session and returned. A stop ends the script run: the newer run shows what was kept."""
    last = None
    try:
        for last in items:
            keep(last)
            show(last)
            machine.shown_result()
    except TurnCancelled:  # stopped at its next unit of work: keeps what it finished
        st.stop()
    except Exception:  # refused (e.g. a text past the context window) or failed: not a stopped run
        keep(None)
        bar.empty()
        raise
    if last is None or cancelled(last):
        st.stop()
    bar.empty()
    keep(None)
    shared_results.store(key, last)
    return last


def stop_button(where: DeltaGenerator | None = None) -> bool:
    """A Stop button: its click starts a new script run, which stops the computation and shows
    what it kept."""
    return (where or st).button("Stop", icon=":material/stop:", key="stop",
                                help="Stop scoring and keep what is done so far.")


class Kept:
    """A page's last stopped run in the session, in one slot (a session never holds more than one
    per page): the run's key and its latest result."""

    def __init__(self, slot: str) -> None:
        self.slot = slot

    def keep(self, key: Hashable, value: Any | None) -> None:
        """Keep a run's latest result (None: forget this key's)."""
        held = st.session_state.get(self.slot)
        if value is not None:
            st.session_state[self.slot] = (key, value)
        elif held is not None and held[0] == key:
            del st.session_state[self.slot]

    def get(self, key: Hashable) -> Any | None:
        """This session's stopped run of key (its latest result), or None."""
        held = st.session_state.get(self.slot)
        return held[1] if held is not None and held[0] == key else None
