"""The Surprisal page's live walk: a model's prefix walk under a progress bar (live.follow: in the
server's turns, with Stop, each finished walk shared by every page and session per inputs), and
the session's last stopped walk, kept in one slot (a session never holds more than one)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core import MAX_BEAM_WIDTH
from pages._app import live, server, shared_results
from pages._app.defaults import APP_EXACT_BUDGET

if TYPE_CHECKING:
    from marginal_core import Marginalizer, Surprisal

_STOPPED = "_surprisal_stopped"  # (key, Surprisal) of the session's last stopped walk


def walk(key: Hashable, m: Marginalizer, method: str, width: int | None, label: str,
         on_update: Callable[[Surprisal], None]) -> Surprisal:
    """The text's surprisal under m (the beam's anytime walk, or one of ``width``; or exact, up to
    APP_EXACT_BUDGET prefixes), each step passed to on_update; a finished walk is cached."""
    from marginal_core import surprisal_stream

    done = shared_results.cached(key)
    if done is not None:
        return done
    bar = live.Bar(label, "bytes")
    widest = server.policy().cap_beam_width(MAX_BEAM_WIDTH)  # the anytime walk's widest round, on this server
    stream = surprisal_stream(m, method=method, width=width, max_width=widest, budget=APP_EXACT_BUDGET,
                              should_stop=bar.should_stop, progress=bar)
    return live.follow(key, stream, bar, on_update, lambda s: _keep(key, s), lambda s: s.cancelled)


def _keep(key: Hashable, s: Surprisal | None) -> None:
    """Keep a walk's latest step in the session's one slot (None: forget this key's)."""
    slot = st.session_state.get(_STOPPED)
    if s is not None:
        st.session_state[_STOPPED] = (key, s)
    elif slot is not None and slot[0] == key:
        del st.session_state[_STOPPED]


def stopped(key: Hashable) -> Surprisal | None:
    """This session's stopped walk of key (its last step), or None."""
    slot = st.session_state.get(_STOPPED)
    return slot[1] if slot is not None and slot[0] == key else None
