"""The inputs every page shares (model, device, precision, text, context): sidebar widgets bound to the URL.

app.py draws them on every run, before the page; pages read them back from the session state
with :func:`current` (the widgets' values, keyed as in the URL), so a link reproduces a view. A
text or context too long for a link (MAX_LINKED_CHARS) stays in the session and out of the URL.
On a server that limits what visitors may ask (server.py), the sidebar offers only its models and
its text length, and a link asking for more is answered above the page before anything loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

import streamlit as st

from marginal_core.ground.errors import EmptyTextError
from marginal_core.models import DEFAULT_MODEL, DTYPES, EMBEDDED_MODELS, known_models
from marginal_core.viz import code_span
from pages._app.runtime import device_choices, server
from pages._app.ui import presets, projector
from pages._app.ui.defaults import DEFAULT_CONTEXT, DEFAULT_TEXT
from pages._app.ui.error_messages import show_error

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator


# URL characters of a text or context a link carries at most (percent-encoded: a CJK character
# takes nine); the server answers HTTP 400 to a request line past about 128 KB.
MAX_LINKED_CHARS = 50_000
_LINK_CHECKED = "_link_checked_against_server"  # set once the session's first run checked its link
_OPEN = "_example_opens"  # the page an example picked in the menu opens on the next run


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
    """Model, device, precision, text and context widgets in the sidebar, bound to the URL (app.py).

    The run ends here, with one message, on a bad server setting or a model the server does not offer.
    """
    sb = st.sidebar
    try:
        policy = server.policy()
    except server.PolicyError as exc:
        st.error(f"This server is misconfigured: {exc}.", icon=":material/error:")
        st.stop()
    linked_model, long_texts = _link_beyond(policy)
    projector.switch(sb)
    sb.markdown("### Input")
    _model_box(sb, policy)
    sb.selectbox(
        "Device", device_choices.device_options(), index=0, key="device", bind="query-params",
        help="auto uses the GPU when there is one (cuda, then mps), else the CPU.",
    )
    sb.selectbox(
        "Precision", DTYPES, index=0, key="dtype", bind="query-params",
        help="float16: the decoder's matrix products in float16, the rest float32 (log p within hundredths "
        "of a nat of float32). bfloat16: the decoder's products on bfloat16 units, split into high + low parts "
        "(within thousandths of a nat of float32). auto: float16 on a GPU and on "
        "a CPU measured fast at it, bfloat16 on a CPU measured fast at that, else float32. Log-softmax and sums "
        "stay float32.",
    )
    held = _example_menu(sb)
    unlinked = [key for key in ("text", "context") if not _linkable(st.session_state.get(key))]
    sb.text_area(
        "Text", value=DEFAULT_TEXT, key="text", bind=None if "text" in unlinked else "query-params", height=90,
        max_chars=policy.max_text_chars,
        help="The text whose marginal probability is estimated. It is scored right after the context, "
        "so start it with a space when the context ends with a word or a colon. Ctrl+Enter applies.",
    )
    sb.text_area(
        "Context (optional)", value=DEFAULT_CONTEXT, key="context", height=90, max_chars=policy.max_text_chars,
        bind=None if "context" in unlinked else "query-params",
        help="What the text is conditioned on, e.g. a question. Empty: the text alone, after BOS.",
    )
    if held is not None:
        sb.caption(f"**Look for:** {held.look_for}")
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
        where = device_choices.resolve(_device_choice())
    except Exception as exc:  # noqa: BLE001 -- e.g. cuda asked for on a machine without it
        with sb:
            show_error(exc)
        where = "cpu"
    sb.caption(f"Runs on: **{device_choices.device_label(where, device_choices.resolve_dtype(_dtype_choice(), where))}**")
    if offer := policy.offer():
        sb.caption(offer, help=policy.help())
    for key, length in long_texts.items():
        st.warning(f"The link's {key} has {length:,} characters; this server takes up to {policy.max_text_chars:,}, "
                   f"so the page uses its first {policy.max_text_chars:,}.", icon=":material/link_off:")
    refused = linked_model or (None if policy.allows(name) else name)
    if refused is not None:
        st.error(f"This server offers only these models: {', '.join(policy.models or ())}. It does not offer "
                 f"{code_span(refused[:100])}, so nothing was loaded: choose a model in the sidebar.",
                 icon=":material/block:")
        st.stop()


def _example_menu(sb: DeltaGenerator) -> presets.Preset | None:
    """The Example menu above the text: choosing one puts its text and context in the inputs. It
    shows the example the inputs hold (a link's included), and returns it."""
    state, linked = st.session_state, st.query_params
    text = state["text"] if "text" in state else linked.get("text", DEFAULT_TEXT)
    context = state["context"] if "context" in state else linked.get("context", DEFAULT_CONTEXT)
    held = presets.matching(text, context)
    state["example"] = held.name if held else None
    sb.selectbox("Example", [p.name for p in presets.PRESETS], index=None, key="example",
                 placeholder="a text of your own", on_change=_take_example,
                 help="Texts chosen for a lesson, each with what to look for: picking one sets the text and the "
                 "context; the model stays as it is.")
    return held


def _take_example() -> None:
    chosen = next((p for p in presets.PRESETS if p.name == st.session_state.get("example")), None)
    if chosen is not None:
        st.session_state["text"], st.session_state["context"] = chosen.text, chosen.context
        if chosen.candidates:
            st.session_state["candidates"] = "\n".join(chosen.candidates)
        if chosen.opens:
            st.session_state[_OPEN] = chosen.opens


def page_to_open() -> str | None:
    """The URL path of the page an example just picked opens (once), else None."""
    return st.session_state.pop(_OPEN, None)


def _model_box(sb: DeltaGenerator, policy: server.ServerPolicy) -> None:
    """The sidebar's model box (URL key model)."""
    model_box(sb, policy, "Model", "model")


def model_box(where: DeltaGenerator, policy: server.ServerPolicy, label: str, key: str,
              index: int | None = 0) -> str | None:
    """A model box bound to the URL key ``key``: the server's models only, or (the local default)
    any id or folder typed in; option ``index`` until one is chosen (None: empty until then, and
    it may be cleared). Returns the model chosen, or None."""
    if policy.models is not None:
        return where.selectbox(label, list(policy.models), index=index, key=key, bind="query-params",
                               help="The models this server offers.")
    options = known_models()
    chosen = st.session_state.get(key)
    if chosen and chosen not in options:
        options = options + [chosen]
    return where.selectbox(
        label, options, index=index, key=key, bind="query-params", accept_new_options=True,
        help="An embedded model (works offline) or any Hugging Face model id or local folder: type it in.",
    )


def _link_beyond(policy: server.ServerPolicy) -> tuple[str | None, dict[str, int]]:
    """On the session's first run (a link opened), before the widgets correct it: the link's model
    when the server does not offer it, and the lengths of its text and context past the server's
    cap (the widgets then keep the first characters). Later runs follow the widgets."""
    if st.session_state.get(_LINK_CHECKED):
        return None, {}
    st.session_state[_LINK_CHECKED] = True
    params, cap = st.query_params, policy.max_text_chars
    model = params.get("model")
    long_texts = {key: len(params[key]) for key in ("text", "context")
                  if cap is not None and key in params and len(params[key]) > cap}
    return (None if model is None or policy.allows(model) else model), long_texts


def _linkable(text: str | None) -> bool:
    """Whether a text fits in a link: the server refuses a URL past about 128 KB (HTTP 400), so a
    longer text stays in the session and out of the URL."""
    return text is None or len(quote(text, safe="")) <= MAX_LINKED_CHARS


def current() -> Inputs:
    """The shared inputs as the sidebar holds them in this run (a device that cannot be used,
    which the sidebar reports, falls back to the CPU)."""
    try:
        device = device_choices.resolve(_device_choice())
    except Exception:  # noqa: BLE001 -- the sidebar shows why
        device = "cpu"
    state = st.session_state
    dtype = device_choices.resolve_dtype(_dtype_choice(), device)
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
