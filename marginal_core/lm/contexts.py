"""A context's prefilled state, and the states a model keeps for reuse across Marginalizers and
sessions, within a byte bound (docs/design.md, "Turns").

A class typing texts with no context all condition on BOS, and a class on one Q&A question on
that question: each model keeps the states it prefilled last, so the next Marginalizer with the
same context starts at its paths (and the shared passes of ``marginal_core.serving.batching`` can carry
it with the others). States are never mutated, so one serves any number of readers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache

# What one model keeps of prefilled contexts (their KV caches): thousands of short contexts,
# a few long ones; a state larger than this is used once and not kept.
KEPT_CONTEXT_BYTES = 64 << 20


@dataclass(frozen=True, eq=False)
class ContextState:
    """A context's KV cache (batch 1) and the hidden state after its last token.

    Shared by every consumer of one context and never mutated: they read its tensors or copy it.
    ``passes`` is the forward passes its prefill took.
    """

    ids: tuple[int, ...]
    cache: DynamicCache
    last_hidden: torch.Tensor
    passes: int

    def __len__(self) -> int:
        return len(self.ids)


def state_bytes(state: ContextState) -> int:
    """Bytes of a state's KV cache (every layer's keys and values)."""
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in state.cache.layers)  # type: ignore[union-attr, misc]


class KeptContexts:
    """Context states by their ids, the least recently used dropped first beyond max_bytes."""

    def __init__(self, max_bytes: int = KEPT_CONTEXT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._states: OrderedDict[tuple[int, ...], tuple[ContextState, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, ids: tuple[int, ...]) -> ContextState | None:
        """The kept state of these ids, if any (now the most recently used)."""
        with self._lock:
            held = self._states.get(ids)
            if held is None:
                return None
            self._states.move_to_end(ids)
            return held[0]

    def put(self, state: ContextState) -> None:
        """Keep a state (unless it alone passes the bound), dropping the least recently used."""
        size = state_bytes(state)
        if size > self.max_bytes:
            return
        with self._lock:
            if state.ids in self._states:
                return
            self._states[state.ids] = (state, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._states.popitem(last=False)
                self._bytes -= dropped

    def held_bytes(self) -> int:
        """Bytes of the states kept now."""
        with self._lock:
            return self._bytes
