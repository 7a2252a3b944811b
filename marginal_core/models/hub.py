"""Hugging Face names: a local folder, the local Hugging Face cache, and the hub only when it
answers, so an unknown name fails fast on an offline machine."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

__all__ = ["from_hf", "hub_reachable"]


def hub_reachable(timeout: float = 3.0) -> bool:
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


def from_hf(name: str, loader: Callable[..., object], **kwargs: object) -> object:
    """Call a from_pretrained-style loader on a local folder, the local HF cache, then the hub."""
    path = Path(name)
    if path.is_dir():
        try:
            return loader(name, **kwargs)
        except Exception as exc:
            if not (path / "config.json").is_file():
                raise OSError(f"the folder {path} has no config.json, so it holds no Hugging Face model") from exc
            raise
    try:
        return loader(name, local_files_only=True, **kwargs)
    except Exception as local_exc:
        if not hub_reachable():
            raise OSError(
                f"no folder {name!r} here, not in the local Hugging Face cache, and the hub is not "
                f"reachable ({' '.join(str(local_exc).split())})"
            ) from local_exc
    return loader(name, **kwargs)
