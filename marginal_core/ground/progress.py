"""Progress reporting: the callback types the library's long runs take, and their tqdm drawing."""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from collections.abc import Callable
from typing import Any

Progress = Callable[[float, int], None]
"""Called as progress(done, total) while work goes on; done may be fractional within a chunk."""

StopCheck = Callable[[], bool]
"""Polled between units of work; True asks the run to end, keeping what it finished."""

RoundHook = Callable[[int, int, int, "float | None"], None]
"""Called as on_round(done, planned, width, gap) by a run in rounds of widening walks (the beam,
the surprisal's prefix walks): as each round starts (``done`` rounds finished of ``planned``, the
new round's ``width``, ``gap`` the certified gap in nats after the last finished round, None
before the first), and once as the run ends after a finished round, with done == planned (no
more are planned). Progress then hears each walk's steps, from 1 again in every round."""

# Seconds between redraws of a bar's postfix (tqdm's own update is throttled the same way).
REDRAW_S = 0.1
COUNT_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}{postfix}]"
ROUND_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}{postfix}]"  # rounds grow: no estimate left


def round_hook(progress: Progress | None) -> RoundHook | None:
    """A progress callback's round hook, its ``on_round``, where it has one (tqdm_progress's bars
    do; a plain function, such as the app's bars, has none and hears the walks' steps only)."""
    return getattr(progress, "on_round", None)


def steps_only(progress: Progress | None) -> Progress | None:
    """The callback without its round hook: for the walks of a run that reports its rounds itself."""
    return None if progress is None else (lambda done, total: progress(done, total))


def _in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (a notebook draws widgets; a terminal IPython does not)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and "IPKernelApp" in shell.config


def draws_bars() -> bool:
    """Whether bars are drawn: on a terminal's standard error and in a notebook, not to a pipe or a file."""
    isatty = getattr(sys.stderr, "isatty", None)
    return _in_kernel() or bool(isatty is not None and isatty())


def tqdm_bar(total: int | None, desc: str, initial: int = 0, leave: bool = True, **options: Any) -> Any:
    """A tqdm bar on standard error (tqdm imported only when a bar is made): a widget in a notebook
    with ipywidgets, text on a terminal (tqdm.auto warns in a kernel without ipywidgets), and
    nothing elsewhere (a disabled bar: its updates do nothing). options go to tqdm."""
    if _in_kernel() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm(total=total, initial=initial, desc=desc, file=sys.stderr, leave=leave, dynamic_ncols=True,
                disable=not draws_bars(), **options)


def describe_gap(gap: float | None) -> str:
    """A certified gap in a bar's words ('' before the first round, 'exact', 'gap 0.003 nats')."""
    if gap is None:
        return ""
    if gap == 0:
        return "exact"
    return f"gap {gap:.2g} nats" if math.isfinite(gap) else "gap unknown"


def _set_total(bar: Any, total: int) -> None:
    """A new total for a drawn bar (a notebook's widget keeps its own: its bar's max)."""
    if bar.total != total:
        bar.total = total
        if (container := getattr(bar, "container", None)) is not None:
            container.children[1].max = total


class _Bar:
    """progress(done, total) drawn in whole units (``unit``, plural) on a tqdm bar from the first
    report on; a run in rounds (on_round) turns it into a bar of rounds, its postfix the round's
    width, the walk's step and the certified gap after the last finished round."""

    def __init__(self, desc: str, unit: str) -> None:
        self.desc, self.unit = desc, unit
        self.bar: Any = None
        self.shown = unit  # the unit the bar counts (a disabled tqdm keeps none)
        self.width: int | None = None  # the round walking, once the run has said it goes in rounds
        self.gap, self.step, self.drawn = "", "", 0.0

    def _open(self, total: int, unit: str, bar_format: str, postfix: str = "") -> Any:
        if self.bar is None:
            self.bar = tqdm_bar(total, self.desc, leave=False, unit=unit, bar_format=bar_format, postfix=postfix)
        elif self.shown != unit:  # a count (the canonical pass's) turned into rounds
            self.bar.unit, self.bar.bar_format, self.bar.postfix = unit, bar_format, postfix
            self.bar.reset(total=total)
        self.shown = unit
        return self.bar

    def __call__(self, done: float, total: int) -> None:
        if self.width is not None:  # a walk's step within the round
            self.step = f"step {int(done)}/{total}"
            self._postfix(force=False)
            return
        bar = self._open(total, self.unit, COUNT_FORMAT)
        _set_total(bar, total)
        bar.update(int(done) - bar.n)  # whole units (a chunk's fractional progress is the callback's)
        if bar.n == total:
            bar.refresh()  # the last count is drawn, however soon after the one before

    def on_round(self, done: int, planned: int, width: int, gap: float | None) -> None:
        self.width, self.gap, self.step = width, describe_gap(gap), ""
        bar = self._open(planned, "rounds", ROUND_FORMAT, self._words())
        _set_total(bar, planned)
        bar.n = min(done, planned)
        self._postfix(force=True)

    def _words(self) -> str:
        return ", ".join(s for s in (f"width {self.width}", self.step, self.gap) if s)

    def _postfix(self, force: bool) -> None:
        now = time.perf_counter()
        self.bar.set_postfix_str(self._words(), refresh=False)
        if force or now - self.drawn >= REDRAW_S:
            self.drawn = now
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def tqdm_progress(desc: str, unit: str = "samples") -> tuple[Progress, Callable[[], None]]:
    """A (progress, close) pair that draws progress(done, total) on a tqdm bar in whole ``unit``,
    from the first report on (a run refused before any work prints its one line alone); a run in
    rounds draws its rounds (see RoundHook). Nothing is drawn where bars are not (draws_bars)."""
    bar = _Bar(desc, unit)
    return bar, bar.close
