"""Loading tokenizers and models: converted once from GGUF, cached on disk and memoized in the
process.

transformers reads a GGUF file by converting its tokenizer and dequantizing its weights, both
slow; the results are cached as a tokenizer.json and as safetensors, so a later load in a new
process takes about a second. The lattice's light path reads a :class:`TokenizerSnapshot` kept
beside the cached tokenizer.json instead, and never imports transformers.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.tokenizer import TextTokenizer, TransformersTokenizer, file_fingerprint
from marginal_core.lattice.tokenizer_snapshot import TokenizerSnapshot
from marginal_core.models.caches import DONE_FILE, cached, is_done, model_cache_dir, publish, scratch
from marginal_core.models.devices import resolve_device, resolve_dtype
from marginal_core.models.hub import from_hf
from marginal_core.models.mixed import make_mixed
from marginal_core.models.random_weights import random_model, random_weights_folder
from marginal_core.models.registry import DEFAULT_MODEL, canonical_name, resolve, unknown_model
from marginal_core.models.split_bfloat16 import make_split_bfloat16

if TYPE_CHECKING:  # torch and transformers take seconds to import: only the loaders need them
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

    from marginal_core.lm.adapter import LM

__all__ = ["LoadedModel", "load_model", "load_text_tokenizer", "load_tokenizer"]

SNAPSHOT_FILE = "lattice-snapshot.pkl"
# The models (per name, device, dtype) and tokenizers kept loaded in a process, least recently
# used first out: a server whose visitors name many models holds at most this many of each.
MAX_MODELS = int(os.environ.get("MARGINAL_MAX_MODELS", "4") or 4)
VERBOSE_ENV = "MARGINAL_VERBOSE"  # set: transformers' own load bars and notices, and no one-line summary
_LOCK = threading.RLock()
# Tokenizers load under a lock of their own (taken after _LOCK where both are held), so that a
# page asking for a text's tokens does not wait for another thread's whole model load.
_TOKENIZER_LOCK = threading.RLock()


# --------------------------------------------------------------------------------------------
# Tokenizers


def _save_tokenizer_cache(tok: PreTrainedTokenizerFast, folder: Path, source: str) -> None:
    """Write a converted tokenizer into the cache (atomically) with what is needed to rebuild it."""
    tmp = scratch(folder)
    tok.save_pretrained(tmp)
    meta = {"source": source, "padding_side": tok.padding_side, "class": type(tok).__name__}
    publish(tmp, folder, meta)


def _load_tokenizer_cache(folder: Path) -> PreTrainedTokenizerFast:
    """Rebuild a cached tokenizer straight from its tokenizer.json.

    AutoTokenizer.from_pretrained would parse the large JSON in Python as well and rebuild the
    BPE model from it; tokenization is identical (tested). name_or_path is the cache folder
    (the vocabulary's fingerprint keys on its tokenizer.json), and local_files_only stops
    transformers asking the hub whether a 100k+ vocabulary is Mistral's.
    """
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    meta = json.loads((folder / DONE_FILE).read_text(encoding="utf-8"))
    for key in ("tokenizer_class", "auto_map", "name_or_path", "is_local", "local_files_only"):
        config.pop(key, None)
    config["padding_side"] = meta.get("padding_side", "right")
    tok = TokenizersBackend(
        tokenizer_file=str(folder / "tokenizer.json"),
        name_or_path=str(folder),
        local_files_only=True,
        **config,
    )
    template = folder / "chat_template.jinja"
    if template.is_file() and not getattr(tok, "chat_template", None):
        tok.chat_template = template.read_text(encoding="utf-8")
    return tok


def _convert_gguf_tokenizer(gguf: Path) -> PreTrainedTokenizerFast:
    """Convert the tokenizer stored in a GGUF file (slow)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)  # type: ignore[return-value]


def _ensure_tokenizer_cache(gguf: Path, folder: Path) -> bool:
    """Convert and cache a GGUF tokenizer unless cached; True when it had to convert."""
    tok_dir = folder / "tokenizer"
    if is_done(tok_dir):
        return False
    fresh = _convert_gguf_tokenizer(gguf)
    _save_tokenizer_cache(fresh, tok_dir, str(gguf))
    return True


@functools.lru_cache(maxsize=MAX_MODELS)
def _load_tokenizer_memo(canonical: str) -> PreTrainedTokenizerFast:
    """load_tokenizer's body, memoized on the canonical model name."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    src = resolve(canonical)
    gguf = src.gguf
    if gguf is not None:
        folder = model_cache_dir(canonical)
        try:
            return cached(folder / "tokenizer", lambda: _ensure_tokenizer_cache(gguf, folder), _load_tokenizer_cache)
        except MarginalError:
            raise
        except Exception as exc:
            raise unknown_model(canonical, f"cannot read the tokenizer of {src.gguf}: {exc}") from exc
    try:
        tok = from_hf(cast(str, src.hf), AutoTokenizer.from_pretrained)  # a ModelSource without gguf has hf
    except Exception as exc:
        raise unknown_model(canonical, exc) from exc
    if not isinstance(tok, PreTrainedTokenizerFast):
        raise MarginalError(
            f"model {canonical!r} has no fast (Rust-backed) tokenizer, which marginal needs "
            f"(got {type(tok).__name__})"
        )
    return tok


def load_tokenizer(name: str = DEFAULT_MODEL) -> PreTrainedTokenizerFast:
    """The fast tokenizer of a model, converted once from GGUF and cached on disk and in memory.

    The same object is returned on every call in a process: treat it as read-only.
    """
    with _TOKENIZER_LOCK:
        return _load_tokenizer_memo(canonical_name(name))


def _fresh_snapshot(folder: Path) -> TokenizerSnapshot | None:
    """The snapshot beside a cached tokenizer.json, if it was taken from that very file."""
    if not is_done(folder):
        return None
    snapshot = TokenizerSnapshot.load(folder / SNAPSHOT_FILE)
    try:
        fresh = snapshot is not None and snapshot.fingerprint == file_fingerprint(folder / "tokenizer.json", snapshot.size)
    except OSError:
        return None
    return snapshot if fresh else None


@functools.lru_cache(maxsize=MAX_MODELS)
def _load_text_tokenizer_memo(canonical: str) -> TextTokenizer:
    """load_text_tokenizer's body, memoized on the canonical model name."""
    if resolve(canonical).gguf is None:
        return TransformersTokenizer(_load_tokenizer_memo(canonical))
    folder = model_cache_dir(canonical) / "tokenizer"
    snapshot = _fresh_snapshot(folder)
    if snapshot is not None:
        return snapshot
    tok = _load_tokenizer_memo(canonical)  # converts or repairs the cache where needed
    snapshot = TokenizerSnapshot.take(tok)
    if snapshot is None:
        return TransformersTokenizer(tok)
    snapshot.save(folder / SNAPSHOT_FILE)
    return snapshot


def load_text_tokenizer(name: str = DEFAULT_MODEL) -> TextTokenizer:
    """What the lattice needs from a model's tokenizer, without importing transformers once cached.

    For a GGUF model: a snapshot kept beside its cached tokenizer.json (taken through
    transformers the first time); for a Hugging Face name: the transformers tokenizer's view.
    Canonical tokenizations are the same as :func:`load_tokenizer`'s.
    """
    with _TOKENIZER_LOCK:
        return _load_text_tokenizer_memo(canonical_name(name))


# --------------------------------------------------------------------------------------------
# Models


@dataclass
class LoadedModel:
    """What load_model loaded: a causal LM in eval mode, on `device`, in `dtype`, with its tokenizers.

    The library passes the LM adapter load_model returns, which holds this record as ``loaded``.
    Its transformers tokenizer is loaded on first use (generation and the harness read it; parsing
    Gemma 3's takes about a second), the lattice and the contexts use ``text_tokenizer``.
    """

    name: str
    model: PreTrainedModel
    device: str
    dtype: torch.dtype
    random_weights: bool = False  # an architecture without trained weights (timing only, see RANDOM_WEIGHTS)

    @functools.cached_property
    def tokenizer(self) -> PreTrainedTokenizerFast:
        """The model's transformers tokenizer (load_tokenizer's, shared)."""
        return load_tokenizer(self.name)

    @functools.cached_property
    def text_tokenizer(self) -> TextTokenizer:
        """What the lattice and the contexts need of the tokenizer (load_text_tokenizer's, shared)."""
        return load_text_tokenizer(self.name)


def _dequantize_gguf(gguf: Path) -> PreTrainedModel:
    """Load a GGUF model through transformers, dequantized to fp32 (slow)."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)


def _save_model_cache(model: PreTrainedModel, folder: Path, source: str) -> None:
    """Save a GGUF-loaded model as safetensors (transformers refuses to save it directly).

    A fresh model is built from the config without its GGUF quantization_config, the weights are
    copied in, and it is saved; tied weights (Gemma's lm_head = embed_tokens) stay tied.
    """
    import torch
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(model.state_dict(), strict=True)
    if getattr(config, "tie_word_embeddings", False):
        out, inp = fresh.get_output_embeddings(), fresh.get_input_embeddings()
        if out is not None and out.weight.data_ptr() != inp.weight.data_ptr():
            raise MarginalError(f"tied embeddings came apart while caching {source}")
    tmp = scratch(folder)
    fresh.save_pretrained(tmp, safe_serialization=True)
    publish(tmp, folder, {"source": source, "class": type(fresh).__name__})


def _ensure_model_cache(gguf: Path, folder: Path) -> bool:
    """Dequantize and cache a GGUF model unless cached; True when it had to convert."""
    model_dir = folder / "model"
    if is_done(model_dir):
        return False
    model = _dequantize_gguf(gguf)
    _save_model_cache(model, model_dir, str(gguf))
    del model
    return True


@functools.lru_cache(maxsize=MAX_MODELS)
def _load_model_memo(
    canonical: str, device: str, dtype: torch.dtype, attn_implementation: str | None
) -> LM:
    """load_model's body, memoized on its resolved arguments."""
    import torch
    from transformers import AutoModelForCausalLM

    from marginal_core.lm.adapter import LM

    src = resolve(canonical)
    kwargs: dict[str, object] = {"dtype": torch.float32 if dtype == torch.bfloat16 else dtype}  # split from float32
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    random = random_weights_folder(canonical)
    if random is not None:
        model = _precision(random_model(random, device, kwargs), dtype)
        return LM(LoadedModel(name=canonical, model=model, device=device, dtype=dtype, random_weights=True))
    gguf = src.gguf
    if gguf is not None:
        folder = model_cache_dir(canonical)
        try:
            model = cached(
                folder / "model", lambda: _ensure_model_cache(gguf, folder),
                lambda path: AutoModelForCausalLM.from_pretrained(str(path), **kwargs),
            )
        except MarginalError:
            raise
        except Exception as exc:
            raise unknown_model(canonical, f"cannot load the weights of {src.gguf}: {exc}") from exc
    else:
        try:
            model = cast("PreTrainedModel", from_hf(cast(str, src.hf), AutoModelForCausalLM.from_pretrained, **kwargs))
        except Exception as exc:
            raise unknown_model(canonical, exc) from exc
    model = _precision(model.to(device).eval(), dtype)  # type: ignore[arg-type]  # transformers types .to by its wrapper
    _make_resident(model)
    return LM(LoadedModel(name=canonical, model=model, device=device, dtype=dtype))


def _precision(model: PreTrainedModel, dtype: torch.dtype) -> PreTrainedModel:
    """The loaded model in its precision: a float16 load becomes mixed (models/mixed.py), a
    bfloat16 one split (models/split_bfloat16.py)."""
    import torch

    if dtype == torch.float16:
        return make_mixed(model)
    return make_split_bfloat16(model) if dtype == torch.bfloat16 else model


def _make_resident(model: PreTrainedModel) -> None:
    """Read every page of the weights once. Loaded from safetensors they are mapped from the
    file and read in by the first forward passes: the first estimate would pay for it, and a
    server's memory would seem to grow with its first run by the model's size."""
    import torch

    with torch.inference_mode():
        for param in model.parameters():
            if param.device.type == "cpu" and param.numel():
                param.detach().reshape(-1)[:: max(1, 4096 // param.element_size())].sum()


def load_model(
    name: str = DEFAULT_MODEL,
    device: str | None = None,
    dtype: str | torch.dtype | None = "auto",
    attn_implementation: str | None = None,
    allow_random_weights: bool = False,
) -> LM:
    """A causal LM and its tokenizer, loaded once per (name, device, dtype) and cached, as the LM
    adapter the library takes (what was loaded is its ``loaded``: a LoadedModel).

    device: None picks cuda, then mps, then cpu. dtype: "auto" (or None), "float32", "float16"
    (float16 products, the rest float32), "bfloat16" or a torch dtype; auto is float16 on CUDA
    and on CPUs fast at it, else float32.
    GGUF models are dequantized once and cached as safetensors. The model is in eval mode;
    wrapping calls in torch.inference_mode() is the caller's job. A folder that holds an
    architecture without weights (RANDOM_WEIGHTS, for timing: bench/scale.py) is refused unless
    ``allow_random_weights``: its numbers mean nothing.
    """
    if not allow_random_weights and random_weights_folder(name) is not None:
        raise MarginalError(f"{name} holds an architecture with random weights (for timing only: its "
                            "probabilities mean nothing); bench/scale.py loads it with allow_random_weights=True")
    dev = resolve_device(device)
    with _LOCK:
        misses, started = _load_model_memo.cache_info().misses, time.perf_counter()
        with _quiet_transformers():
            lm = _load_model_memo(canonical_name(name), dev, resolve_dtype(dtype, dev), attn_implementation)
        loaded = lm.loaded
        if _load_model_memo.cache_info().misses > misses and not os.environ.get(VERBOSE_ENV):
            print(f"marginal: loaded {loaded.name} on {loaded.device} in {str(loaded.dtype).removeprefix('torch.')} "
                  f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
        return lm


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' own progress bars and notices off while a model loads (one line says it
    loaded instead), unless $MARGINAL_VERBOSE asks for everything."""
    from transformers.utils import logging as hf_logging

    if os.environ.get(VERBOSE_ENV) or not hf_logging.is_progress_bar_enabled():
        yield
        return
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.enable_progress_bar()
        hf_logging.set_verbosity(level)
