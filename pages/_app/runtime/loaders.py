"""Models, tokenizers, vocabulary indexes, lattices and Marginalizers, cached once per server
process (shared by every page and session), and the page helpers that load them or explain why
they cannot."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import streamlit as st

from pages._app.runtime import device_choices
from pages._app.ui.error_messages import show_error
from pages._app.ui.inputs import Inputs, require_text

if TYPE_CHECKING:
    from marginal_core import LM, Lattice, Marginalizer, TextTokenizer, Vocabulary

PREPARING_REDRAW_S = 0.25  # how often a waiting page redraws a model's preparation


@st.cache_resource(show_spinner=False, max_entries=6)
def tokenizer(name: str) -> TextTokenizer:
    """What the lattice needs from a model's tokenizer, once per server process: for an embedded
    model a snapshot that loads without importing transformers (the model's own tokenizer comes
    with the model)."""
    from marginal_core.models import load_text_tokenizer

    return load_text_tokenizer(name)


@st.cache_resource(show_spinner=False, max_entries=6)
def vocabulary(name: str) -> Vocabulary:
    """The vocabulary index (token surfaces, prefix index) of a model's tokenizer."""
    from marginal_core import vocabulary as build

    return build(tokenizer(name))


def _model(name: str, device: str, dtype: str) -> LM:
    """The library's loaded model: ``load_model`` owns the loaded models (a bounded LRU per
    process), so the app keeps no second cache of its own."""
    from marginal_core.models import load_model

    return load_model(name, device=device_choices.device_arg(device), dtype=dtype)


@st.cache_resource(show_spinner=False)
def _loaded() -> set:
    """(model, device, dtype) triples already loaded in this process (their load shows no status box)."""
    return set()


@st.cache_resource(show_spinner=False)
def _preloads() -> dict[tuple[str, str, str], threading.Thread]:
    """Background loads started in this process, by (model, device, dtype)."""
    return {}


def prepared(name: str) -> None:
    """An embedded model whose caches are not on disk yet (a fresh server's first visitor): its
    preparation as a progress bar with its steps, one preparation shared by every session that
    waits on it (marginal_core.models.preparing); nothing once its caches are there. A failure is
    left to the page's own load to report."""
    from marginal_core.models import EMBEDDED_MODELS
    from marginal_core.models.preparing import needs_preparing, prepare

    if name not in EMBEDDED_MODELS or name in _ready():
        return
    if not needs_preparing(name):
        _ready().add(name)  # at most the embedded models
        return
    preparation, bar = prepare(name), st.empty()
    while not preparation.wait(PREPARING_REDRAW_S):
        bar.progress(preparation.fraction(), text=f"Preparing **{name}** for its first use on this server (once, up to a "
                     f"minute; every visitor waits on the same one): {preparation.describe()}")
    bar.empty()


@st.cache_resource(show_spinner=False)
def _ready() -> set[str]:
    """Embedded models whose caches this process has found on disk (checked once each)."""
    return set()


def preload(inp: Inputs) -> None:
    """Start loading an embedded model in the background (once per process), so that a page
    which needs it finds it loaded or loading while it draws what needs no model (Home's
    canonical tokenization, the lattice). Once loaded, pages show no load status for it (a
    class's Run would otherwise draw twelve "Loading model" boxes for a model in memory). A
    failure is left to the page's own load to report."""
    from marginal_core.models import EMBEDDED_MODELS, load_model

    key, loaded = (inp.model, inp.device, inp.dtype), _loaded()
    if inp.model not in EMBEDDED_MODELS or key in _preloads() or key in loaded:
        return
    vocabulary(inp.model)  # first: the model's load holds the tokenizer lock while it reads its own tokenizer

    def load() -> None:
        try:
            load_model(inp.model, device=device_choices.device_arg(inp.device), dtype=inp.dtype)
        except Exception:  # noqa: BLE001,S110 -- the page's own load shows the error
            return
        loaded.add(key)

    _preloads()[key] = thread = threading.Thread(target=load, name=f"preload {inp.model}", daemon=True)
    thread.start()


def model(name: str, device: str, dtype: str) -> LM:
    """The loaded model (dtype a resolved name, as Inputs.dtype), with a status box showing the
    load steps the first time."""
    key = (name, device, dtype)
    if key in _loaded():
        return _model(name, device, dtype)
    with st.status(f"Loading model **{name}**…", expanded=True) as status:
        try:
            t0 = time.perf_counter()
            st.write("Tokenizer and vocabulary index…")
            vocabulary(name)
            t1 = time.perf_counter()
            st.write(f"Tokenizer ready ({t1 - t0:.1f} s). Weights (the first load ever converts them, up to a minute)…")
            lm = _model(name, device, dtype)
            t2 = time.perf_counter()
        except Exception:
            status.update(label=f"Could not load **{name}**", state="error", expanded=False)
            raise
        status.update(
            label=f"Loaded **{name}** in {t2 - t0:.1f} s on {device_choices.device_label(lm.loaded.device, lm.dtype)}",
            state="complete", expanded=False,
        )
    _loaded().add(key)
    return lm


@st.cache_resource(show_spinner=False, max_entries=32)
def lattice(name: str, text: str) -> Lattice:
    """The tokenization lattice of a text (no model needed, only its tokenizer)."""
    from marginal_core import build_lattice

    vocabulary(name)
    return build_lattice(text, tokenizer(name))


@st.cache_resource(show_spinner=False, max_entries=16)
def marginalizer_for(name: str, device: str, dtype: str, text: str, context: str) -> Marginalizer:
    """The Marginalizer of a text and context under a model already loaded."""
    from marginal_core import Marginalizer

    return Marginalizer(_model(name, device, dtype), text, context or None)


def marginalizer(inp: Inputs) -> Marginalizer:
    """The Marginalizer of the current inputs (loading the model with a status box if needed)."""
    model(inp.model, inp.device, inp.dtype)
    return marginalizer_for(inp.model, inp.device, inp.dtype, inp.text, inp.context)


def require_lattice(inp: Inputs) -> Lattice:
    """The lattice of the current text, or a friendly message and the end of the page."""
    require_text(inp)
    try:
        with st.spinner("Building the tokenization lattice…"):
            return lattice(inp.model, inp.text)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, "building the lattice")
        st.stop()


def require_marginalizer(inp: Inputs) -> Marginalizer:
    """The Marginalizer of the current inputs, or a friendly message and the end of the page."""
    require_text(inp)
    try:
        return marginalizer(inp)
    except Exception as exc:  # noqa: BLE001
        show_error(exc, f"loading {inp.model}")
        st.stop()
