"""Streamlit glue shared by the pages: cached loaders, the shared inputs, errors, live runs.

The inputs every view shares (model, device, text, context) are widgets in the sidebar, drawn by
app.py on every page and bound to the URL, so a link reproduces a view. Everything the pages show
is computed by marginal_core; this module only caches it and draws progress.
"""

from __future__ import annotations

import contextlib
import hashlib
import runpy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from marginal_core import app_state as S
from marginal_core import viz
from marginal_core.errors import EmptyTextError
from marginal_core.estimators import Estimate
from marginal_core.models import DEFAULT_MODEL, EMBEDDED_MODELS, known_models

APP_PATH = Path(__file__).resolve().parent.parent / "app.py"

# --------------------------------------------------------------------------------------------
# Errors


def show_error(exc: BaseException, doing: str = "") -> None:
    """A friendly st.error / st.warning for an exception (never a traceback)."""
    level, message = S.describe_error(exc, doing)
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


def stop() -> None:
    """End the page here (after a message); Streamlit's st.stop, which no guard catches."""
    st.stop()


_RUN = threading.local()


def run_page(body: Callable[[Inputs], None]) -> None:
    """Run a page's body with the shared inputs, showing any error as a friendly message.

    The router (app.py) draws the inputs before it runs the page. A page run on its own (the
    first run of a fresh server whose first request is a subpage runs it in Streamlit's older
    pages/ mode, and tests may run a page directly) draws them itself.
    """
    inp = getattr(_RUN, "inputs", None)
    if inp is None:
        if _route_through_app():
            return
        inp = sidebar_inputs()
    try:
        body(inp)
    except Exception as exc:  # noqa: BLE001 -- no tracebacks for users
        show_error(exc)


def _route_through_app() -> bool:
    """Route this run through app.py when Streamlit ran this page file directly; True if so.

    Because a pages/ folder exists, Streamlit runs the very first request of a fresh server in
    its older pages/ mode: a subpage URL (a shared link) then runs the page file directly,
    without app.py's navigation, layout and inputs. app.py's st.navigation switches that mode
    off for later runs. In a server, a rerun then routes this request through app.py (same page,
    same URL). Streamlit's AppTest resets the mode before every run, where a rerun would drop a
    button click: there app.py is executed here instead.
    """
    try:
        from streamlit import config
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without the old mode
        return False
    if not PagesManager.uses_pages_directory:
        return False
    PagesManager.uses_pages_directory = False
    if config.get_option("global.appTest"):
        runpy.run_path(str(APP_PATH), run_name="__main__")
        return True
    st.rerun()
    return True  # not reached: st.rerun raises


@contextlib.contextmanager
def routed(inp: Inputs) -> Iterator[None]:
    """Within this block (the router's page.run()), pages use these inputs."""
    _RUN.inputs = inp
    try:
        yield
    finally:
        _RUN.inputs = None


# --------------------------------------------------------------------------------------------
# Cached resources: models, tokenizers, vocabulary indexes, lattices, marginalizers


def _device_arg(device: str) -> str | None:
    return None if device in ("", "auto") else device


@st.cache_resource(show_spinner=False, max_entries=6)
def tokenizer(name: str):
    """The tokenizer of a model, once per server process."""
    from marginal_core.models import load_tokenizer

    return load_tokenizer(name)


@st.cache_resource(show_spinner=False, max_entries=6)
def vocabulary(name: str):
    """The vocabulary index (token surfaces, prefix index) of a model's tokenizer."""
    from marginal_core.vocab import vocabulary as build

    return build(tokenizer(name))


@st.cache_resource(show_spinner=False, max_entries=3)
def _model(name: str, device: str):
    from marginal_core.models import load_model

    return load_model(name, device=_device_arg(device))


@st.cache_resource(show_spinner=False)
def _loaded() -> set:
    """(model, device) pairs already loaded in this process (their load shows no status box)."""
    return set()


def model(name: str, device: str):
    """The LoadedModel, with a status box showing the load steps the first time."""
    key = (name, device)
    if key in _loaded():
        return _model(name, device)
    with st.status(f"Loading model **{name}**…", expanded=True) as status:
        try:
            t0 = time.perf_counter()
            st.write("Tokenizer and vocabulary index…")
            vocabulary(name)
            t1 = time.perf_counter()
            st.write(f"Tokenizer ready ({t1 - t0:.1f} s). Weights (the first load ever converts them, up to a minute)…")
            lm = _model(name, device)
            t2 = time.perf_counter()
        except Exception:
            status.update(label=f"Could not load **{name}**", state="error", expanded=False)
            raise
        status.update(
            label=f"Loaded **{name}** in {t2 - t0:.1f} s on {S.device_label(lm.device, lm.dtype)}",
            state="complete", expanded=False,
        )
    _loaded().add(key)
    return lm


@st.cache_resource(show_spinner=False, max_entries=32)
def lattice(name: str, text: str):
    """The tokenization lattice of a text (no model needed, only its tokenizer)."""
    from marginal_core.lattice import build_lattice

    vocabulary(name)
    return build_lattice(text, tokenizer(name))


@st.cache_resource(show_spinner=False, max_entries=16)
def marginalizer_for(name: str, device: str, text: str, context: str):
    from marginal_core.estimators import Marginalizer

    return Marginalizer(_model(name, device), text, context or None)


def marginalizer(inp: Inputs):
    """The Marginalizer of the current inputs (loading the model with a status box if needed)."""
    model(inp.model, inp.device)
    return marginalizer_for(inp.model, inp.device, inp.text, inp.context)


@st.cache_resource(show_spinner=False)
def _results() -> OrderedDict:
    """Finished results shared by every page and session: key -> value (LRU, 64 entries)."""
    return OrderedDict()


def cached(key: tuple):
    """A finished result stored under key, or None."""
    store = _results()
    if key in store:
        store.move_to_end(key)
        return store[key]
    return None


def store(key: tuple, value) -> None:
    items = _results()
    items[key] = value
    items.move_to_end(key)
    while len(items) > 64:
        items.popitem(last=False)


# --------------------------------------------------------------------------------------------
# Shared inputs (drawn in the sidebar by app.py)


@dataclass(frozen=True)
class Inputs:
    model: str
    device: str
    text: str
    context: str

    def key(self, *more) -> tuple:
        return (self.model, self.device, self.text, self.context, *more)


def sidebar_inputs() -> Inputs:
    """Model, device, text and context widgets in the sidebar, bound to the URL."""
    sb = st.sidebar
    sb.markdown("### Input")
    options = known_models()
    current = st.session_state.get("model")
    if current and current not in options:
        options = options + [current]
    name = sb.selectbox(
        "Model", options, index=0, key="model", bind="query-params", accept_new_options=True,
        help="An embedded model (works offline) or any Hugging Face model id or local folder: type it in.",
    )
    device = sb.selectbox(
        "Device", S.device_options(), index=0, key="device", bind="query-params",
        help="auto uses the GPU when there is one (cuda, then mps), else the CPU.",
    )
    text = sb.text_area(
        "Text", value=S.DEFAULT_TEXT, key="text", bind="query-params", height=90,
        help="The text whose marginal probability is estimated. It is scored right after the context, "
        "so start it with a space when the context ends with a word or a colon. Ctrl+Enter applies.",
    )
    context = sb.text_area(
        "Context (optional)", value=S.DEFAULT_CONTEXT, key="context", bind="query-params", height=90,
        help="What the text is conditioned on, e.g. a question. Empty: the text alone, after BOS.",
    )
    name = (name or DEFAULT_MODEL).strip()
    if name in EMBEDDED_MODELS:
        sb.caption(EMBEDDED_MODELS[name].description)
    try:
        resolved = _resolve_device(device or "auto")
    except Exception as exc:  # noqa: BLE001 -- e.g. cuda asked for on a machine without it
        with sb:
            show_error(exc)
        resolved = "cpu"
    sb.caption(f"Runs on: **{S.device_label(resolved)}**")
    return Inputs(name, resolved, text or "", context or "")


def _resolve_device(device: str) -> str:
    from marginal_core.models import resolve_device

    return resolve_device(_device_arg(device))




def require_text(inp: Inputs) -> None:
    """Stop the page with a friendly message when the text is empty."""
    if not inp.text:
        show_error(EmptyTextError("The text is empty: type a text in the sidebar to see its tokenizations."))
        stop()


def require_lattice(inp: Inputs):
    """The lattice of the current text, or a friendly message and Halt."""
    require_text(inp)
    try:
        with st.spinner("Building the tokenization lattice…"):
            return lattice(inp.model, inp.text)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "building the lattice")
        stop()


def require_marginalizer(inp: Inputs):
    require_text(inp)
    try:
        return marginalizer(inp)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, f"loading {inp.model}")
        stop()


# --------------------------------------------------------------------------------------------
# Live runs with progress and a stop button


def _partials() -> dict:
    return st.session_state.setdefault("_partials", {})


def partial(key: tuple):
    """What a stopped run of key had scored before it stopped, or None."""
    return _partials().get(key)


def run_stream(
    key: tuple,
    make: Callable[[], Iterator[Estimate]],
    label: str,
    on_update: Callable[[Estimate], None] | None = None,
) -> Estimate:
    """Run a stream with a progress bar, keeping each partial result in the session.

    A click on any widget (the Stop button included) makes Streamlit stop this script at its
    next progress update and rerun: the partial result then survives in the session and the
    page shows it as stopped. A finished result is stored for every page and session.
    """
    done = cached(key)
    if done is not None:
        return done
    bar = st.progress(0.0, text=f"{label}…")
    result = None
    for result in make():
        _partials()[key] = result
        bar.progress(
            result.fraction,
            text=f"{label}: {result.num_samples:,} of {result.requested:,} samples scored in {result.seconds:.1f} s",
        )
        if on_update is not None:
            on_update(result)
    bar.empty()
    _partials().pop(key, None)
    store(key, result)
    return result


def param_hash(*parts) -> str:
    """A short stable id for a set of parameters (for widget keys)."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:10]


def stop_button(where=None) -> bool:
    """A Stop button; clicking it stops the running computation (a rerun) and keeps partials."""
    return (where or st).button("Stop", icon=":material/stop:", key="stop",
                                help="Stop scoring and keep what is done so far.")


def exact_toggle(where, lat, label: str) -> bool:
    """A toggle for exact enumeration, on by default and offered only while the lattice is small."""
    count = lat.count()
    feasible = S.exact_feasible(count)
    on = where.toggle(label, value=feasible, disabled=not feasible, key="exact",
                      help=f"Offered up to {S.APP_EXACT_BUDGET:,} tokenizations; this text has {viz.format_count(count)}.")
    return bool(on) and feasible


# --------------------------------------------------------------------------------------------
# Downstream task pages


def run_task(run: Callable[..., object], unit: str, doing: str, describe: Callable[[object], str]) -> None:
    """Run a task (run(progress=...)) under a progress bar that counts items and names the last."""
    bar = st.progress(0.0, text=f"{doing.capitalize()}…")

    def progress(done: int, total: int, item: object | None) -> None:
        last = f" · last: {describe(item)[:80]}" if item is not None else ""
        bar.progress(done / max(total, 1), text=f"{done} of {total} {unit} done{last}")

    with guard(doing):
        run(progress=progress)
    bar.empty()


def speed_metrics(report: dict, left, right, unit: str) -> None:
    """The lattice-over-proxy speedup and the proxy underestimation ratio of a task report."""
    if report.get("speedup"):
        left.metric("lattice speedup", f"{report['speedup']:.2f}×", help="total proxy seconds / total lattice seconds")
    if report.get("underestimation_ratio") is not None:
        right.metric("proxy < lattice", f"{100 * report['underestimation_ratio']:.1f}%",
                     help=f"Share of {unit} where proxy's non-canonical estimate is below the lattice lower bound.")
