"""Errors as users see them: one friendly paragraph, never a traceback (nor, in class mode, a
server path)."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator

import streamlit as st

from marginal_core.ground.errors import ContextWindowError, MarginalError, UnknownModelError, is_oom
from marginal_core.serving.turns import TurnCancelled
from pages._app.runtime import server

_log = logging.getLogger(__name__)
# An absolute or home-relative path (/srv/x, ~/x, ./x, C:\x), not an id like org/name nor a URL's //host.
_PATH = re.compile(r"(?:(?<![\w:/.~-])(?:~|\.{1,2})?/|\b[A-Za-z]:\\)[^\s'\"`()\[\]{}<>,;]+")


def describe_error(exc: BaseException, doing: str = "") -> tuple[str, str]:
    """("error" or "warning", a one-paragraph message) for an exception shown to a user.

    Library errors keep their own message; out-of-memory errors and a missing graphviz binary
    get advice; anything else gets its type and first line, never a traceback. Where the server
    hides its paths (class mode, server.py), a model that fails to load gets no cause (it names
    folders) and any other path is masked; the server's log keeps the whole message.
    """
    level, message = _describe(exc, doing)
    if server.policy().shows_server_paths:
        return level, message
    if isinstance(exc, UnknownModelError):
        shown = "This server could not load the model; whoever runs it can see why in its log."
    else:
        shown = _PATH.sub("[server path]", message)
    if shown != message:
        _log.warning("shown to a visitor without server paths: %s", message)
    return level, shown


def _describe(exc: BaseException, doing: str) -> tuple[str, str]:
    """describe_error's message, paths and all."""
    where = f" while {doing}" if doing else ""
    if isinstance(exc, ContextWindowError):
        return "error", (
            f"Too long for the model: {exc}. Nothing was scored. The Lattice page and the samplers' "
            "uniform samples need no model and still work."
        )
    if isinstance(exc, MarginalError):
        return "error", str(exc)
    if is_oom(exc):
        return "error", (
            f"Out of memory{where}. Try fewer samples, a shorter text or context, a smaller model, "
            "or another device."
        )
    if type(exc).__name__ == "ExecutableNotFound":
        return "warning", (
            "Graphviz's `dot` program is not installed, so the drawing cannot be rendered to SVG "
            "(install the `graphviz` system package; the DOT source is still available)."
        )
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return "error", (
        f"Something went wrong{where}: {type(exc).__name__}" + (f": {first}" if first else "")
        + ". Try another text or setting; if it persists, please report it."
    )


def show_error(exc: BaseException, doing: str = "") -> None:
    """A friendly st.error / st.warning for an exception (never a traceback); a run stopped
    while it waited for the machine just ends (its session's newer run shows what was kept)."""
    if isinstance(exc, TurnCancelled):
        st.stop()
    level, message = describe_error(exc, doing)
    (st.warning if level == "warning" else st.error)(
        message, icon=":material/warning:" if level == "warning" else ":material/error:"
    )


@contextlib.contextmanager
def guard(doing: str = "") -> Iterator[None]:
    """Show any exception raised inside as a friendly message and carry on with the page.

    Streamlit's own control flow (reruns, stops) derives from BaseException and passes through.
    """
    try:
        yield
    except Exception as exc:  # noqa: BLE001 -- the whole point: no traceback for users
        show_error(exc, doing)
