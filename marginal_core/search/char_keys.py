"""The token views folded by the first character their tokens write (docs/design.md, "What comes
next"): the canonical and healed columns beside the marginal's, and the next byte of an empty
text. No torch.
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from marginal_core.lattice.vocab import Vocabulary
from marginal_core.search.masses import NO_BYTE


def char_length(lead: int) -> int:
    """How many bytes the UTF-8 character a lead byte begins has (1 for ASCII and invalid leads)."""
    return 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 1


_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def first_key(surface: bytes | None) -> bytes:
    """The first character a surface writes (its bytes; the rest of the surface where it stops
    inside one), or b"" for none."""
    if not surface:
        return b""
    return surface[: char_length(surface[0])]


@dataclass(frozen=True)
class KeyGroups:
    """A head's ids by the first character they write: the characters, sorted (b"": none), and
    each id's index among them."""

    keys: tuple[bytes, ...]
    label: np.ndarray


@dataclass(frozen=True)
class KeyMasses:
    """A distribution over first characters: the characters, sorted, and their masses."""

    keys: tuple[bytes, ...]
    masses: np.ndarray

    @classmethod
    def of(cls, masses: dict[bytes, float]) -> KeyMasses:
        keys = tuple(sorted(masses))
        return cls(keys, np.array([masses[k] for k in keys], dtype=np.float64))

    def mass_of(self, prefix: bytes) -> float:
        """The mass of the first characters that begin with prefix (b"": of no byte); they are
        neighbours in sorted order (a character has at most four bytes)."""
        lo = bisect.bisect_left(self.keys, prefix)
        if not prefix:
            return float(self.masses[0]) if self.keys and self.keys[0] == b"" else 0.0
        return float(self.masses[lo : bisect.bisect_right(self.keys, prefix + b"\xff" * 4)].sum())

    def top(self) -> bytes:
        """The most probable first character (b"": none)."""
        return self.keys[int(np.argmax(self.masses))]

    def by_byte(self) -> np.ndarray:
        """The mass by first byte (256: no byte)."""
        first = np.array([k[0] if k else NO_BYTE for k in self.keys], dtype=np.int64)
        return np.bincount(first, weights=self.masses, minlength=257)


def key_groups(vocab: Vocabulary, size: int) -> KeyGroups:
    """A head of ``size`` rows' ids by the first character they write (b"": none: special tokens,
    byte pieces, empty surfaces, ids past the tokenizer), built once per vocabulary."""
    cache = _KEYS.setdefault(vocab, {})
    if size not in cache:
        pieces = {t for t in vocab.byte_tokens if t is not None}
        first = [b"" if v in pieces or v >= vocab.size else first_key(vocab.surfaces[v]) for v in range(size)]
        keys = tuple(sorted(set(first)))
        index = {k: i for i, k in enumerate(keys)}
        cache[size] = KeyGroups(keys, np.array([index[k] for k in first], dtype=np.int64))
    return cache[size]  # type: ignore[no-any-return]


def key_masses(probs: np.ndarray, groups: KeyGroups) -> KeyMasses:
    """A next-token distribution as the mass of each first character."""
    return KeyMasses(groups.keys, np.bincount(groups.label, weights=probs[: len(groups.label)],
                                              minlength=len(groups.keys)))


def healed_masses(vocab: Vocabulary, groups: KeyGroups, tail: bytes, before: np.ndarray,
                  heads: dict[int, np.ndarray]) -> KeyMasses:
    """Token healing as the mass of each first character after the tail: the next token after the
    backed-off one's predecessors, constrained to begin with its bytes ``tail``, renormalized; a
    token that spells the tail exactly goes on by the next token after it (``heads``)."""
    if not tail:
        return key_masses(before, groups)
    allowed = healing_ids(vocab, tail, heads)
    total = float(before[allowed].sum())
    out: dict[bytes, float] = {}
    exact = np.zeros(len(groups.keys))
    for v in allowed:
        rest = (vocab.surfaces[v] or b"")[len(tail) :]
        if rest:
            key = first_key(rest)
            out[key] = out.get(key, 0.0) + float(before[v]) / total
        else:
            exact += float(before[v]) / total * key_masses(heads[v], groups).masses
    for key, mass in zip(groups.keys, exact.tolist(), strict=True):
        if mass:
            out[key] = out.get(key, 0.0) + mass
    return KeyMasses.of(out)


def healing_ids(vocab: Vocabulary, tail: bytes, spelling: Iterable[int]) -> list[int]:
    """The tokens token healing lets follow the backed-off token's predecessors: every ordinary
    token that begins with its bytes ``tail``, and the tokens that spell it exactly (``spelling``:
    the backed-off token itself among them, a byte piece included: after a CJK character Gemma
    spells in byte pieces no ordinary token begins with its last byte)."""
    return sorted({*vocab.ids_beginning(tail), *spelling})


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """Half the L1 distance between two distributions over the same outcomes."""
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())
