"""Finished results shared by every page and session (an estimate is computed once per setup).

Every session runs its script in its own thread, so the store is a small LRU behind a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import streamlit as st

CAPACITY = 64


class SharedResults:
    """A thread-safe LRU mapping of result keys to finished results."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity

    def get(self, key: Hashable) -> Any | None:
        """The result stored under key (now the most recently used), or None."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def under(self, prefix: tuple) -> list[tuple[tuple, Any]]:
        """The (key, result) pairs whose tuple key starts with prefix (e.g. every result of one
        text, by any page or session), most recently used last."""
        with self._lock:
            return [(k, v) for k, v in self._items.items() if isinstance(k, tuple) and k[: len(prefix)] == prefix]

    def put(self, key: Hashable, value: Any) -> None:
        """Store a result, dropping the least recently used beyond the capacity."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


@st.cache_resource(show_spinner=False)
def _store() -> SharedResults:
    return SharedResults()


def cached(key: Hashable) -> Any | None:
    """A finished result stored under key by any page or session, or None."""
    return _store().get(key)


def under(prefix: tuple) -> list[tuple[tuple, Any]]:
    """Every stored (key, result) whose key starts with prefix."""
    return _store().under(prefix)


def store(key: Hashable, value: Any) -> None:
    """Keep a finished result for every page and session."""
    _store().put(key, value)
