"""Token ids <-> surface bytes, and an index that finds every token matching at a position.

A token's *surface* is the bytes it detokenizes to (docs/design.md, point 2). Two families
exist, told apart by the tokenizer's decoder: byte-level BPE (GPT-2 byte<->unicode table) and
SentencePiece style (U+2581 is a space, ``<0xXX>`` byte-fallback pieces are one byte).
Building the table for a large vocabulary takes a noticeable fraction of a second, so it is
cached in memory per tokenizer and on disk (under the cache root) per tokenizer fingerprint.
"""

from __future__ import annotations

import bisect
import os
import pickle
import re
import weakref
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from marginal_core.ground.cache_home import cache_root
from marginal_core.lattice.tokenizer import TokenizerLike, text_tokenizer

Family = Literal["byte_level", "sentencepiece"]
ByteFallback = Literal["unknown_chars", "everywhere"]

SPACE_PIECE = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_CACHE_VERSION = 1


@cache
def _gpt2_unicode_to_byte() -> dict[str, int]:
    """The inverse of GPT-2's byte->unicode table used by byte-level BPE."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\xa1"), ord("\xac") + 1))
        + list(range(ord("\xae"), ord("\xff") + 1))
    )
    codes = printable[:]
    shift = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + shift)
            shift += 1
    return {chr(c): b for b, c in zip(printable, codes)}


def _decoder_types(decoder: dict | None) -> set[str]:
    """All decoder step types, flattening Sequence decoders."""
    if not decoder:
        return set()
    if decoder.get("type") == "Sequence":
        return set().union(*(_decoder_types(d) for d in decoder["decoders"]))
    kinds = {decoder["type"]}
    if decoder["type"] == "Replace" and decoder.get("pattern", {}).get("String") == SPACE_PIECE:
        kinds.add("SpaceReplace")
    return kinds


def detect_family(decoder: dict | None) -> tuple[Family, bool]:
    """The tokenizer family and whether byte-fallback pieces exist, read from its decoder."""
    kinds = _decoder_types(decoder)
    if "ByteLevel" in kinds:
        return "byte_level", False
    if kinds & {"Metaspace", "SpaceReplace"}:
        return "sentencepiece", "ByteFallback" in kinds
    raise ValueError(
        f"unsupported tokenizer decoder {sorted(kinds) or 'none'}: marginal understands byte-level "
        "BPE (ByteLevel decoder) and SentencePiece-style tokenizers (Metaspace or U+2581 replace)"
    )


def fingerprint(tokenizer: TokenizerLike) -> str:
    """A key that changes whenever the tokenizer does (it names the vocabulary's disk cache)."""
    return text_tokenizer(tokenizer).fingerprint


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Every ordinary token's surface bytes, with a sorted index for prefix matching.

    ``surfaces[id]`` is None for excluded ids (special tokens, unk). Byte-fallback pieces are
    kept apart in ``byte_tokens`` because they only stand where the tokenizer would use them.
    """

    family: Family
    surfaces: tuple[bytes | None, ...]
    byte_tokens: tuple[int | None, ...]
    dummy_prefix: bool
    fingerprint: str
    _keys: list[bytes] = field(repr=False)
    _ids: list[tuple[int, ...]] = field(repr=False)

    @property
    def size(self) -> int:
        """Number of token ids in the tokenizer, excluded ones included."""
        return len(self.surfaces)

    @property
    def has_byte_fallback(self) -> bool:
        return any(t is not None for t in self.byte_tokens)

    def surface(self, token_id: int) -> bytes:
        """The bytes a token detokenizes to; KeyError for an excluded id."""
        s = self.surfaces[token_id]
        if s is None:
            raise KeyError(f"token {token_id} is special or unk and has no surface")
        return s

    def is_piece(self, surface: bytes) -> bool:
        """Whether some ordinary (non byte-fallback) token has exactly this surface."""
        i = bisect.bisect_left(self._keys, surface)
        return i < len(self._keys) and self._keys[i] == surface

    def matches(self, data: bytes, start: int) -> list[tuple[int, int]]:
        """(end, token id) for every ordinary token whose surface equals data[start:end]."""
        keys, lo = self._keys, 0
        found: list[tuple[int, int]] = []
        for end in range(start + 1, len(data) + 1):
            prefix = data[start:end]
            lo = bisect.bisect_left(keys, prefix, lo)
            if lo == len(keys) or not keys[lo].startswith(prefix):
                break
            if keys[lo] == prefix:
                found.extend((end, t) for t in self._ids[lo])
        return found

    def ids_beginning(self, prefix: bytes) -> list[int]:
        """Every ordinary token whose surface begins with prefix (a range of the sorted surfaces)."""
        lo, hi = key_range(self._keys, prefix, 0, len(self._keys))
        return [t for ids in self._ids[lo:hi] for t in ids]

    @classmethod
    def build(cls, tokenizer: TokenizerLike) -> Vocabulary:
        """Read every token's surface from a tokenizer (no caching)."""
        view = text_tokenizer(tokenizer)
        family, byte_fallback = detect_family(view.decoder)
        excluded = view.special.excluded
        added = view.added_ids
        table = _gpt2_unicode_to_byte()
        surfaces: list[bytes | None] = []
        byte_tokens: list[int | None] = [None] * 256
        ordinary: dict[bytes, list[int]] = {}
        for token_id, piece in enumerate(view.pieces()):
            if token_id in excluded or piece is None:
                surfaces.append(None)
                continue
            byte_match = _BYTE_PIECE.fullmatch(piece) if byte_fallback else None
            if byte_match:
                value = int(byte_match.group(1), 16)
                byte_tokens[value] = token_id
                surfaces.append(bytes([value]))
                continue
            if token_id in added:
                surface = piece.encode()
            elif family == "byte_level":
                surface = bytes(table[c] for c in piece)
            else:
                surface = piece.replace(SPACE_PIECE, " ").encode()
            surfaces.append(surface)
            ordinary.setdefault(surface, []).append(token_id)
        keys = sorted(ordinary)
        dummy = b"".join(surfaces[i] or b"" for i in view.encode("a")) == b" a"
        return cls(
            family=family,
            surfaces=tuple(surfaces),
            byte_tokens=tuple(byte_tokens),
            dummy_prefix=dummy,
            fingerprint=view.fingerprint,
            _keys=keys,
            _ids=[tuple(ordinary[k]) for k in keys],
        )


def load_vocabulary(tokenizer: TokenizerLike) -> Vocabulary:
    """The vocabulary from the disk cache, building and storing it on a miss (a file pickled
    before its classes moved fails to import and is rebuilt over)."""
    path = cache_root() / "vocab" / f"{fingerprint(tokenizer)}.v{_CACHE_VERSION}.pkl"
    try:
        return pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass
    vocab = Vocabulary.build(tokenizer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(pickle.dumps(vocab, protocol=pickle.HIGHEST_PROTOCOL))
    tmp.replace(path)
    return vocab


_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def vocabulary(tokenizer: TokenizerLike) -> Vocabulary:
    """The vocabulary of a tokenizer, built once and cached in memory and on disk."""
    if tokenizer not in _MEMORY:
        _MEMORY[tokenizer] = load_vocabulary(tokenizer)
    return _MEMORY[tokenizer]


def key_range(keys: list[bytes], prefix: bytes, lo: int, hi: int) -> tuple[int, int]:
    """The keys within [lo, hi) of sorted keys that begin with prefix (a contiguous range)."""
    start = bisect.bisect_left(keys, prefix, lo, hi)
    stem = prefix.rstrip(b"\xff")
    if not stem:
        return start, hi
    return start, bisect.bisect_left(keys, stem[:-1] + bytes([stem[-1] + 1]), start, hi)
