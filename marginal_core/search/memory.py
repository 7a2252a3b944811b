"""What the searches of texts that extend one another keep for each other (docs/design.md, "What
comes next: the prompt boundary"): a continuation's steps, and a character's byte steps, search a
text and then the same text with bytes after it, under one model and context. A prefix (a token
path) has the same keys and values, hidden state and log p in both. Its head's values (its arcs'
log p, covering and next-byte masses) are the same too where it is *closed*: no token begins with
the whole rest of the text after its node, so no byte after the text reaches them. The next
search takes the closed prefixes' heads as they are, runs the head alone on the others' kept
hidden states, and feeds the model only new tokens, on the kept KV.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from marginal_core.lattice.paths import Path
from marginal_core.search.kv import KeptKV
from marginal_core.search.settings import KV_BYTES

HEAD_BYTES = 32 << 20  # what one memory keeps of heads and hidden states (a head: a few KB of next-byte masses)
HeadOut = tuple[np.ndarray, np.ndarray, np.ndarray | None]  # a prefix's arc log p, covering and next-byte masses


@dataclass(frozen=True)
class KeptHead:
    """A closed prefix's head on the text ``seen``: its values hold for every text that begins with it."""

    seen: bytes
    tokens: np.ndarray  # its node's arcs' tokens, in the lattice's column order
    out: HeadOut

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.tokens, *self.out) if a is not None)


class PrefixMemory:
    """Per prefix path: the KV of its last token (``kv``), its last hidden state, and its head
    where closed; each within its byte budget, kept in the order scored (parents first). The
    paths a caller names in ``wanted`` also keep their whole next-token distribution (``whole``:
    the token views read them off the search's own heads)."""

    def __init__(self, kv_bytes: int = KV_BYTES, head_bytes: int = HEAD_BYTES) -> None:
        self.kv = KeptKV(kv_bytes)
        self.head_bytes = head_bytes
        self.held = 0
        self.heads: dict[Path, KeptHead] = {}
        self.hidden: dict[Path, torch.Tensor] = {}
        self.wanted: set[Path] = set()
        self.whole: dict[Path, np.ndarray] = {}

    def paths(self) -> list[Path]:
        """Every path with a head or hidden state kept, parents before children."""
        return sorted({*self.heads, *self.hidden}, key=len)

    def keep(self, path: Path, data: bytes, node: int, tokens: np.ndarray, out: HeadOut, hidden: torch.Tensor) -> None:
        """An exactly scored prefix at ``node`` of the text ``data``: its hidden state, and its head
        if closed; nothing past the budget, or kept already. The hidden state serves a later text
        that does not begin with ``data`` (a character's sibling byte steps): the head alone
        then, no feed of the decoder."""
        if path not in self.hidden and self.held + hidden.nbytes <= self.head_bytes:
            self.hidden[path] = hidden.detach().clone()
            self.held += hidden.nbytes
        rest = len(data) - node - 1  # the cover index of the tokens that begin with the whole rest
        if path not in self.heads and node < len(data) and (rest >= len(out[1]) or not np.isfinite(out[1][rest])):
            head = KeptHead(data, tokens.copy(), (out[0].copy(), out[1].copy(), None if out[2] is None else out[2].copy()))
            if self.held + head.nbytes <= self.head_bytes:
                self.heads[path] = head
                self.held += head.nbytes

    def take_whole(self, distributions: dict[Path, np.ndarray]) -> None:
        """The whole next-token distributions of wanted paths, as a search's heads found them."""
        self.whole.update(distributions)

    def head(self, path: Path, data: bytes, tokens: np.ndarray) -> HeadOut | None:
        """A kept closed head that holds for the text ``data`` with the arcs ``tokens``, or None."""
        kept = self.heads.get(path)
        if kept is None or not data.startswith(kept.seen) or not np.array_equal(kept.tokens, tokens):
            return None
        return kept.out
