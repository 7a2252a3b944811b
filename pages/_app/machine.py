"""Every session's model work takes turns on the server's machine (marginal_core.turns): one
Turns per server process, one run per script run, and the message a waiting session sees.

One Turns serves the whole process (all its sessions and pages): a class of 30 shares one CPU or
GPU, and a unit of work with the whole machine to itself finishes sooner than 30 units fighting
for the cores. ``$MARGINAL_MAX_RUNS`` (pages/_app/server.py) caps the runs admitted at once;
the others wait in arrival order and say where they stand.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core.progress import StopCheck
from marginal_core.turns import Place, Turns
from pages._app.server import policy

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator


@st.cache_resource(show_spinner=False)
def server_turns() -> Turns:
    """The server process's one Turns, admitting the policy's max_runs at once."""
    return Turns(max_runs=policy().max_runs)


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

    with server_turns().run(_session(), should_stop=stop, waiting=waiting):
        yield

