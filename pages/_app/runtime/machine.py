"""Every session's model work takes turns on the server's machine (marginal_core.serving.turns): one
Turns per server process, one run per script run, and the message a waiting session sees.

One Turns serves the whole process (all its sessions and pages): a class of 30 shares one CPU or
GPU, and a unit of work with the whole machine to itself finishes sooner than 30 units fighting
for the cores. ``$MARGINAL_MAX_RUNS`` (pages/_app/runtime/server.py) caps the runs admitted at once;
the others wait in arrival order and say where they stand. Sessions' scoring after the same
context (a class's texts, all after BOS) goes in shared passes (marginal_core.serving.batching) unless
``$MARGINAL_SHARED_PASSES=off``.

Each script run that shows a live result logs, on the server's log, when it first showed one
and when it ended (seconds after the click that started it, epoch time too): what a class's
server operator reads, and what bench/classroom/ times on the server's side.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import streamlit as st
from streamlit.logger import get_logger

from marginal_core.ground.progress import StopCheck
from marginal_core.serving.batching import Batcher
from marginal_core.serving.turns import Place, Run, Turns
from pages._app.runtime.server import policy

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator


_LOG = get_logger("marginal.runs")


@dataclass
class _ScriptRun:
    """A script run's start (epoch seconds) and whether it has shown a live result yet."""

    started: float = field(default_factory=time.time)
    showed: bool = False
    run: Run | None = None  # its run on the server's Turns


_SCRIPT_RUN: ContextVar[_ScriptRun | None] = ContextVar("marginal_script_run", default=None)


@st.cache_resource(show_spinner=False)
def server_turns() -> Turns:
    """The server process's one Turns, admitting the policy's max_runs at once, with shared
    passes unless the policy turns them off."""
    rules = policy()
    turns = Turns(max_runs=rules.max_runs)
    if rules.shared_passes:
        Batcher(turns)
    return turns


def _session() -> str:
    """This browser session's id (the runs of one tab are one owner)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "script"


def waiting_message(place: Place) -> str:
    """What a waiting session reads."""
    return f"Waiting for the machine: {place.describe()}. Your run starts by itself; Stop leaves the queue."


@contextlib.contextmanager
def taking_turns(where: DeltaGenerator, stop: StopCheck) -> Iterator[None]:
    """This script run's model work takes turns with every other session's; while it waits,
    ``where`` says where it stands."""
    box = where.empty()

    def waiting(place: Place | None) -> None:
        if place is None:
            box.empty()
        else:
            box.info(waiting_message(place), icon=":material/hourglass_top:")

    this = _ScriptRun()
    token = _SCRIPT_RUN.set(this)
    try:
        with server_turns().run(_session(), should_stop=stop, waiting=waiting) as this.run:
            yield
    finally:
        _SCRIPT_RUN.reset(token)
        if this.showed:
            _log("ended", this.started)


def shown_result() -> None:
    """Log this script run's first live result (once per run): how long after the click it showed."""
    this = _SCRIPT_RUN.get()
    if this is not None and not this.showed:
        this.showed = True
        _log("first result", this.started, this.run)


def _log(event: str, started: float, run: Run | None = None) -> None:
    now = time.time()
    first = run.first_turn() if run is not None else None
    turn = "" if first is None else f"; asked for the machine at {first[0]:.2f} s, its first turn at {first[1]:.2f} s"
    _LOG.info("run %s: %s %.2f s after its start (at=%.3f started=%.3f)%s", _session()[:8], event, now - started,
              now, started, turn)

