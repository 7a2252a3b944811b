"""The inputs every page shares (model, device, precision, text, context): sidebar widgets bound to the URL.

app.py draws them on every run, before the page; pages read them back from the session state
with :func:`current` (the widgets' values, keyed as in the URL), so a link reproduces a view. A
text or context too long for a link (MAX_LINKED_CHARS) stays in the session and out of the URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import streamlit as st

from marginal_core.errors import EmptyTextError
from marginal_core.models import DEFAULT_MODEL, DTYPES, EMBEDDED_MODELS, known_models
from pages._app import devices
from pages._app.defaults import DEFAULT_CONTEXT, DEFAULT_TEXT
from pages._app.errors import show_error


# URL characters of a text or context a link carries at most (percent-encoded: a CJK character
# takes nine); the server answers HTTP 400 to a request line past about 128 KB.
MAX_LINKED_CHARS = 50_000


@dataclass(frozen=True)
class Inputs:
    """The shared inputs of one run, with the device and dtype resolved ('auto' -> what it runs on)."""

    model: str
    device: str
    dtype: str
    text: str
    context: str

    def key(self, *more: object) -> tuple:
        """A results-cache key: these inputs and whatever else the result depends on."""
        return (self.model, self.device, self.dtype, self.text, self.context, *more)


def sidebar() -> None:
    """Model, device, precision, text and context widgets in the sidebar, bound to the URL (app.py)."""
    sb = st.sidebar
    sb.markdown("### Input")
    options = known_models()
    chosen = st.session_state.get("model")
    if chosen and chosen not in options:
        options = options + [chosen]
    sb.selectbox(
        "Model", options, index=0, key="model", bind="query-params", accept_new_options=True,
        help="An embedded model (works offline) or any Hugging Face model id or local folder: type it in.",
    )
    sb.selectbox(
        "Device", devices.device_options(), index=0, key="device", bind="query-params",
        help="auto uses the GPU when there is one (cuda, then mps), else the CPU.",
    )
    sb.selectbox(
        "Precision", DTYPES, index=0, key="dtype", bind="query-params",
        help="The weights' dtype. auto: bfloat16 on a GPU and on a CPU measured fast at it, else float32 "
        "(log-softmax and sums stay float32).",
    )
    unlinked = [key for key in ("text", "context") if not _linkable(st.session_state.get(key))]
    sb.text_area(
        "Text", value=DEFAULT_TEXT, key="text", bind=None if "text" in unlinked else "query-params", height=90,
        help="The text whose marginal probability is estimated. It is scored right after the context, "
        "so start it with a space when the context ends with a word or a colon. Ctrl+Enter applies.",
    )
    sb.text_area(
        "Context (optional)", value=DEFAULT_CONTEXT, key="context", height=90,
        bind=None if "context" in unlinked else "query-params",
        help="What the text is conditioned on, e.g. a question. Empty: the text alone, after BOS.",
    )
    for key in unlinked:
        st.query_params.pop(key, None)
    if unlinked:
        sb.caption(f"The {' and the '.join(unlinked)} {'are' if len(unlinked) > 1 else 'is'} too long for a link "
                   f"(links carry up to {MAX_LINKED_CHARS:,} URL characters of each): the page's link leaves "
                   f"{'them' if len(unlinked) > 1 else 'it'} out, and a reload starts from the default. Copy the "
                   "text itself to share it.")
    name = _model_name()
    if name in EMBEDDED_MODELS:
        sb.caption(EMBEDDED_MODELS[name].description)
    try:
        where = devices.resolve(_device_choice())
    except Exception as exc:  # noqa: BLE001 -- e.g. cuda asked for on a machine without it
        with sb:
            show_error(exc)
        where = "cpu"
    sb.caption(f"Runs on: **{devices.device_label(where, devices.resolve_dtype(_dtype_choice(), where))}**")


def _linkable(text: str | None) -> bool:
    """Whether a text fits in a link: the server refuses a URL past about 128 KB (HTTP 400), so a
    longer text stays in the session and out of the URL."""
    return text is None or len(quote(text, safe="")) <= MAX_LINKED_CHARS


def current() -> Inputs:
    """The shared inputs as the sidebar holds them in this run (a device that cannot be used,
    which the sidebar reports, falls back to the CPU)."""
    try:
        device = devices.resolve(_device_choice())
    except Exception:  # noqa: BLE001 -- the sidebar shows why
        device = "cpu"
    state = st.session_state
    dtype = devices.resolve_dtype(_dtype_choice(), device)
    return Inputs(_model_name(), device, dtype, state.get("text") or "", state.get("context") or "")


def _model_name() -> str:
    return (st.session_state.get("model") or DEFAULT_MODEL).strip()


def _device_choice() -> str:
    return st.session_state.get("device") or "auto"


def _dtype_choice() -> str:
    return st.session_state.get("dtype") or "auto"


def require_text(inp: Inputs) -> None:
    """End the page with a friendly message when the text is empty."""
    if not inp.text:
        show_error(EmptyTextError("The text is empty: type a text in the sidebar to see its tokenizations."))
        st.stop()
