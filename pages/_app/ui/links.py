"""The numbers a shared link carries, checked around the page: a number a widget cannot take
(k=-5, k=abc, k=1e8, L=0, or past the server's cap: server.py) is named with the value used
instead, where Streamlit drops it silently; an infinite one is dropped before the widgets read it
(they raise OverflowError)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import streamlit as st

from marginal_core.viz import code_span
from pages._app.runtime import server

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

# Every number input bound to the URL, by its URL key (pages/_app/ui/widgets.py and the pages).
NUMBER_KEYS = ("k", "pk", "W", "L", "seed", "first", "span", "per", "tk", "qa_limit", "qa_k", "qa_seed", "mt_limit",
               "mt_candidates", "mt_k", "mt_seed")
# The numbers of samples a server caps (MARGINAL_MAX_SAMPLES), by URL key; W is capped apart.
SAMPLE_KEYS = ("k", "pk", "tk", "qa_k", "mt_k")
_LINKED = "_linked_numbers"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _forget(key: str) -> None:
    """Drop a URL parameter before its widget reads it. Streamlit 1.67 seeds a widget from the
    URL as the page was loaded (a private copy), and int(inf) there raises OverflowError."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    try:
        del st.query_params[key]
    except Exception:  # noqa: BLE001 -- bound to a widget already: that widget keeps its value
        return
    ctx = get_script_run_ctx()
    with ctx.session_state.query_params() as params:
        getattr(params, "_initial_query_params", {}).pop(key, None)


def take_numbers() -> None:
    """Before the page's first run in a session (a link opened): note the numbers the URL
    holds, and drop those that are not finite. Later runs follow the widgets, not a link."""
    if st.session_state.get(_LINKED) is not None:
        return
    linked = {key: st.query_params[key] for key in NUMBER_KEYS if key in st.query_params}
    for key, text in linked.items():
        value = _number(text)
        if value is not None and not math.isfinite(value):
            _forget(key)
    st.session_state[_LINKED] = linked


def report_numbers(where: DeltaGenerator) -> None:
    """After the page ran: a message for each linked number its widget did not take."""
    bad = []
    linked, st.session_state[_LINKED] = st.session_state.get(_LINKED) or {}, {}
    for key, text in linked.items():
        if key not in st.session_state:  # no widget of that name on this page
            continue
        used, value = st.session_state[key], _number(text)
        if value is None or not math.isclose(value, float(used)):
            cap = _server_cap(key)
            beyond = cap is not None and value is not None and value > cap
            over = f"; this server takes {key} up to {cap:,}" if beyond else ""
            bad.append(f"{code_span(f'{key}={text[:40]}')} (using {key} = {used:,}{over})")
    if bad:
        where.warning("The link holds numbers this page cannot take: " + "; ".join(bad) + ".",
                      icon=":material/link_off:")


def _server_cap(key: str) -> int | None:
    """The server's cap on a linked number (server.py), None where it sets none."""
    rules = server.policy()
    return rules.max_samples if key in SAMPLE_KEYS else rules.max_beam_width if key == "W" else None
