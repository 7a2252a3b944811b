"""The one place marginal keeps what it builds once (converted tokenizers, models, vocabulary
indexes, the app's results): the cache root, ``$MARGINAL_CACHE`` or ``~/.cache/marginal`` when
unset or empty. Under it, the models' caches: one folder per model, written into a private
scratch folder, marked complete last and moved into place atomically.

A folder's name holds what invalidates it: for GGUF sources the file's size and mtime, and
the transformers version (its conversion is what is cached), so a changed file or library
gets a fresh cache.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any, TypeVar

from marginal_core.ground.cache_home import cache_root
from marginal_core.models.registry import is_embedded, resolve

__all__ = ["DONE_FILE", "cached", "is_done", "model_cache_dir", "publish", "scratch"]

T = TypeVar("T")

# Bump when the on-disk layout of the caches changes, so old caches are ignored.
_CACHE_FORMAT = 1
DONE_FILE = "marginal-cache.json"


def _slug(text: str) -> str:
    """A file-name-safe version of a model name."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in text.strip("/"))
    return safe[-80:] or "model"


def model_cache_dir(name: str) -> Path:
    """The cache folder for one model (its converted tokenizer and weights live inside)."""
    src = resolve(name)
    tf = dist_version("transformers")
    if src.gguf is not None:
        st = src.gguf.stat()
        base = src.name if is_embedded(src.name) else f"gguf-{_slug(str(src.gguf))}"
        key = f"{base}--{st.st_size}-{st.st_mtime_ns}--tf{tf}--v{_CACHE_FORMAT}"
    else:
        key = f"hf-{_slug(src.name)}--tf{tf}--v{_CACHE_FORMAT}"
    return cache_root() / "models" / key


def is_done(folder: Path) -> bool:
    """Whether a cache folder was written completely (the marker is written last)."""
    return (folder / DONE_FILE).is_file()


def scratch(final: Path) -> Path:
    """A private folder next to `final` to write a cache into before publishing it."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def publish(tmp: Path, final: Path, meta: dict[str, Any]) -> None:
    """Mark a freshly written cache folder complete and move it into place atomically."""
    (tmp / DONE_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not is_done(final):
        shutil.rmtree(final, ignore_errors=True)  # a leftover of a crashed writer
    try:
        os.rename(tmp, final)
    except OSError:  # another process published first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)


def cached(folder: Path, ensure: Callable[[], object], load: Callable[[Path], T]) -> T:
    """Load from a cache folder, building it first when missing and once more when damaged."""
    ensure()
    try:
        return load(folder)
    except Exception:  # a damaged cache: rebuild it once
        shutil.rmtree(folder, ignore_errors=True)
        ensure()
        return load(folder)
