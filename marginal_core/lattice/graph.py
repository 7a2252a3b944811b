"""The tokenization lattice of a text: a DAG over its UTF-8 bytes whose arcs are token ids.

Every path from byte 0 to the last byte spells the text exactly (docs/design.md, points 3 and
4). Counting, ranking and unranking paths (exactly, optionally with at most L tokens) live in
:mod:`marginal_core.lattice.paths`; this module builds and checks the lattice and offers them on it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

import numpy as np

from marginal_core.ground.errors import (
    EmptyTextError,
    MarginalError,
    NormalizationError,
    TooManyPathsError,
    UnrepresentableTextError,
)
from marginal_core.lattice import bigint
from marginal_core.lattice.paths import Path, PathBatch, PathIndex
from marginal_core.lattice.tokenizer import TokenizerLike, text_tokenizer
from marginal_core.lattice.vocab import SPACE_PIECE, ByteFallback, Vocabulary, vocabulary

__all__ = ["DEFAULT_ENUMERATION_BUDGET", "DEFAULT_LENGTH_MARGIN", "Lattice", "canonical_ids", "format_count", "lattice_of"]

DEFAULT_LENGTH_MARGIN = 10
T = TypeVar("T")
DEFAULT_ENUMERATION_BUDGET = 100_000


@dataclass(frozen=True, eq=False)
class Lattice:
    """All tokenizations of one text under one vocabulary, trimmed to arcs on some path.

    Nodes are byte offsets into ``data`` (the text as the tokenizer sees it). Arc ``a`` runs
    from ``arc_start[a]`` to ``arc_end[a]`` with token ``arc_token[a]``; the arcs leaving byte
    ``i`` are ``out_ptr[i]:out_ptr[i + 1]``.
    """

    text: str
    data: bytes
    vocab: Vocabulary = field(repr=False)
    arc_start: np.ndarray = field(repr=False)
    arc_end: np.ndarray = field(repr=False)
    arc_token: np.ndarray = field(repr=False)
    out_ptr: np.ndarray = field(repr=False)
    canonical: Path

    def __repr__(self) -> str:
        """One short line: the text (shortened), its bytes, arcs, tokenizations and canonical tokens."""
        text = repr(self.text)
        text = text if len(text) <= 60 else text[:57] + "…" + text[-1]
        return (f"Lattice({text}, {len(self.data):,} bytes, {self.num_arcs:,} arcs, "
                f"{format_count(self.count())} tokenizations, {len(self.canonical):,} canonical "
                f"token{'s' if len(self.canonical) != 1 else ''})")

    @property
    def end(self) -> int:
        """The final node: one past the last byte."""
        return len(self.data)

    @cached_property
    def nodes(self) -> np.ndarray:
        """Byte offsets that lie on at least one path, ascending."""
        return np.union1d(self.arc_start, self.arc_end) if len(self.arc_start) else np.array([0])

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_arcs(self) -> int:
        return len(self.arc_token)

    @property
    def arcs(self) -> list[tuple[int, int, int]]:
        """(start, end, token id) for every arc, in rank order."""
        return list(zip(self.arc_start.tolist(), self.arc_end.tolist(), self.arc_token.tolist()))

    def out_arcs(self, node: int) -> range:
        """Indices of the arcs leaving a node."""
        return range(int(self.out_ptr[node]), int(self.out_ptr[node + 1]))

    @cached_property
    def canonical_nodes(self) -> tuple[int, ...]:
        """Byte offsets where canonical tokens start, plus the end."""
        return self.nodes_of(self.canonical)

    def nodes_of(self, path: Path) -> tuple[int, ...]:
        """Byte offsets where the path's tokens start, plus the end (offsets into ``data``)."""
        offsets = [0]
        for token in path:
            offsets.append(offsets[-1] + len(self.vocab.surface(token)))
        return tuple(offsets)

    def pieces(self, path: Path) -> list[str]:
        """Each token's surface as readable text (invalid UTF-8 bytes shown as escapes)."""
        return [self.vocab.surface(t).decode("utf-8", "backslashreplace") for t in path]

    def count(self, max_len: int | None = None) -> int:
        """Exact number of paths, optionally of at most max_len tokens."""
        return self.index(max_len).total

    def index(self, max_len: int | None = None) -> PathIndex:
        """The counting/ranking tables for one length bound, built once per bound."""
        return self.memo(("index", max_len), lambda: PathIndex(self, max_len))

    def memo(self, key: Hashable, build: Callable[[], T]) -> T:
        """A value derived from this lattice, built once on first use and kept with it (the
        lattice never changes, so it never goes stale): path indexes, proposal automata."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]

    @cached_property
    def shortest(self) -> tuple[np.ndarray, np.ndarray]:
        """Fewest tokens from the start to each byte offset, and from each offset to the end."""
        return _shortest(self)

    @property
    def min_len(self) -> int:
        """The fewest tokens any path uses."""
        return int(self.shortest[1][0])

    def default_max_len(self) -> int:
        """The length bound used when none is given: canonical length plus a margin."""
        return len(self.canonical) + DEFAULT_LENGTH_MARGIN

    @cached_property
    def splits(self) -> tuple[tuple[int, int, int], ...]:
        """(canonical position, first arc, second arc) for every split of one canonical token."""
        bounds = self.canonical_nodes
        found: list[tuple[int, int, int]] = []
        for pos, (start, stop) in enumerate(zip(bounds, bounds[1:])):
            for first in self.out_arcs(start):
                middle = int(self.arc_end[first])
                if middle < stop:
                    found.extend(
                        (pos, first, second)
                        for second in self.out_arcs(middle)
                        if self.arc_end[second] == stop
                    )
        return tuple(found)

    def off_by_one(self) -> list[Path]:
        """The canonical path with exactly one token replaced by two (docs/design.md, point 7)."""
        return self.off_by_one_batch().tolist()

    def off_by_one_batch(self, start: int = 0, stop: int | None = None) -> PathBatch:
        """The off-by-one set's paths [start, stop) as one array, built without a Python loop over
        tokens (the whole set holds splits x (canonical length + 1) ids: build only what is used)."""
        width = len(self.canonical) + 1
        split = np.array(self.splits[start:stop], dtype=np.int64).reshape(-1, 3)
        pos = split[:, :1]
        canon = np.array(self.canonical, dtype=np.int64)
        col = np.arange(width)
        ids = np.where(col < pos, canon[np.minimum(col, width - 2)], canon[np.maximum(col - 1, 0)])
        rows = np.arange(len(split))
        ids[rows, split[:, 0]] = self.arc_token[split[:, 1]]
        ids[rows, split[:, 0] + 1] = self.arc_token[split[:, 2]]
        return PathBatch(ids.ravel(), np.arange(len(split) + 1, dtype=np.int64) * width)

    def rank(self, path: Path, max_len: int | None = None) -> int:
        """The position of a path in the rank order of paths with at most max_len tokens."""
        return self.index(max_len).rank(path)

    def unrank(self, ranks: list[int], max_len: int | None = None) -> list[Path]:
        """The paths at the given ranks (inverse of rank)."""
        index = self.index(max_len)
        return index.unrank(bigint.to_limbs(ranks, index.limbs)).tolist()

    def enumerate(
        self, max_len: int | None = None, budget: int = DEFAULT_ENUMERATION_BUDGET
    ) -> list[Path]:
        """Every path (of at most max_len tokens), refusing when there are more than budget."""
        index = self.index(max_len)
        if index.total > budget:
            raise TooManyPathsError(
                f"this text has {format_count(index.total)} tokenizations"
                + (f" of at most {max_len} tokens" if max_len is not None else "")
                + f", more than the enumeration budget of {budget:,}; "
                "use a shorter text, a smaller length bound, or sampling"
            )
        return index.unrank(bigint.to_limbs(range(index.total), index.limbs)).tolist()

    def path_bytes(self, path: Path) -> bytes:
        """The concatenated surfaces of a path."""
        return b"".join(self.vocab.surface(t) for t in path)


def _shortest(lat: Lattice) -> tuple[np.ndarray, np.ndarray]:
    """Fewest tokens from the start to each node, and from each node to the end."""
    inf = np.iinfo(np.int64).max // 4
    prefix = np.full(lat.end + 1, inf, dtype=np.int64)
    suffix = np.full(lat.end + 1, inf, dtype=np.int64)
    prefix[0], suffix[lat.end] = 0, 0
    nodes = lat.nodes.tolist()
    for node in nodes:
        arcs = lat.out_arcs(node)
        if arcs:
            ends = lat.arc_end[arcs.start : arcs.stop]
            np.minimum.at(prefix, ends, prefix[node] + 1)
    for node in reversed(nodes):
        arcs = lat.out_arcs(node)
        if arcs:
            suffix[node] = 1 + suffix[lat.arc_end[arcs.start : arcs.stop]].min()
    return prefix, suffix


def _char_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each UTF-8 character."""
    starts = [i for i, b in enumerate(data) if b & 0xC0 != 0x80]
    return list(zip(starts, starts[1:] + [len(data)]))


def _raw_arcs(data: bytes, vocab: Vocabulary, byte_fallback: ByteFallback) -> list[tuple[int, int, int]]:
    """Every (start, end, token) whose surface equals data[start:end], before trimming."""
    arcs = [(i, end, t) for i in range(len(data)) for end, t in vocab.matches(data, i)]
    if vocab.has_byte_fallback:
        for start, stop in _char_spans(data):
            if byte_fallback == "everywhere" or not vocab.is_piece(data[start:stop]):
                arcs.extend(
                    (p, p + 1, token)
                    for p in range(start, stop)
                    if (token := vocab.byte_tokens[data[p]]) is not None
                )
    return sorted(set(arcs))


def _trim(arcs: list[tuple[int, int, int]], end: int) -> list[tuple[int, int, int]]:
    """Keep only arcs that lie on some path from byte 0 to the end."""
    reach = {0}
    for start, stop, _ in arcs:
        if start in reach:
            reach.add(stop)
    coreach = {end}
    for start, stop, _ in reversed(arcs):
        if stop in coreach:
            coreach.add(start)
    return [a for a in arcs if a[0] in reach and a[1] in coreach]


def _quote(data: bytes, at: int, chars: int = 8) -> str:
    """A few characters of data from the character holding byte ``at``."""
    at = min(at, len(data))
    while 0 < at < len(data) and data[at] & 0xC0 == 0x80:
        at -= 1
    return repr(data[at : at + 4 * chars].decode("utf-8", "replace")[:chars])


def _dropped(expected: bytes, seen: bytes) -> list[int] | None:
    """Byte offsets of expected that seen leaves out, if seen is expected minus some bytes."""
    dropped, j = [], 0
    for i, byte in enumerate(expected):
        if j < len(seen) and seen[j] == byte:
            j += 1
        else:
            dropped.append(i)
    return dropped if j == len(seen) else None


def _view_error(vocab: Vocabulary, expected: bytes, seen: bytes) -> MarginalError:
    """Why the tokenizer's view of a text differs from it: dropped characters or normalization."""
    space_piece = SPACE_PIECE.encode()
    if vocab.family == "sentencepiece" and space_piece in expected:
        return NormalizationError(
            f"the text has U+2581 ('{SPACE_PIECE}') at byte {expected.find(space_piece)}, which "
            "this SentencePiece-style tokenizer normalizes to a space, so no lattice over the "
            "text as written exists; replace the character to go on"
        )
    dropped = _dropped(expected, seen)
    if dropped:
        chars = sorted({_quote(expected, at, 1) for at in dropped})
        return UnrepresentableTextError(
            f"the tokenizer cannot represent {', '.join(chars)}: it has no token for "
            f"{'it' if len(chars) == 1 else 'them'} and silently drops {'it' if len(chars) == 1 else 'them'}"
        )
    at = next((i for i, (a, b) in enumerate(zip(expected, seen)) if a != b), min(len(expected), len(seen)))
    return NormalizationError(
        f"the tokenizer rewrites the text at byte {at} ({_quote(expected, at)} becomes "
        f"{_quote(seen, at)}); it normalizes its input (lowercasing, Unicode normalization, or "
        "mapping U+2581 to a space), so no lattice over the text as written would contain its "
        "canonical tokenization"
    )


def format_count(n: int, exact_below: int = 10**30) -> str:
    """An exact count for people: grouped digits below exact_below, else three significant
    digits in scientific notation ("1.23e477").

    Works beyond Python's 4,300-digit limit on int-to-str conversion.
    """
    if n < exact_below:
        return f"{n:,}"
    digits = n.bit_length() * 0.30103
    exponent = int(digits) - 2
    while n >= 10 ** (exponent + 3):
        exponent += 1
    while n < 10 ** (exponent + 2):
        exponent -= 1
    head = n // 10**exponent
    return f"{head // 100}.{head % 100:02d}e{exponent + 2}"


def canonical_ids(tokenizer: TokenizerLike, text: str) -> list[int]:
    """The tokenizer's own tokenization of a text, with special-token strings read as text."""
    return text_tokenizer(tokenizer).encode(text)


def lattice_of(
    text: str,
    tokenizer: TokenizerLike,
    *,
    byte_fallback: ByteFallback = "unknown_chars",
) -> Lattice:
    """Build and check the lattice of a text under a tokenizer (docs/design.md, points 3 and 4;
    ``mc.build_lattice`` also takes a model's name)."""
    if not text:
        raise EmptyTextError("the text is empty: type at least one character")
    UnrepresentableTextError.check_unicode(text)
    view = text_tokenizer(tokenizer)
    vocab = vocabulary(tokenizer)
    canonical = tuple(view.encode(text))
    unknown = [t for t in canonical if vocab.surfaces[t] is None]
    if unknown:
        raise UnrepresentableTextError(
            f"the tokenizer cannot represent this text: it maps part of it to "
            f"{[view.piece(t) for t in unknown[:3]]} (unknown or special tokens)"
        )
    raw = text.encode("utf-8")
    seen = b"".join(vocab.surface(t) for t in canonical)
    expected = b" " + raw if vocab.dummy_prefix and not raw.startswith(b" ") else raw
    if seen not in (raw, b" " + raw if vocab.dummy_prefix else raw):
        raise _view_error(vocab, expected, seen)
    data = seen
    arcs = _trim(_raw_arcs(data, vocab, byte_fallback), len(data))
    start, end, token = (np.array(col, dtype=np.int64) for col in zip(*arcs))
    out_ptr = np.searchsorted(start, np.arange(len(data) + 2))
    lattice = Lattice(text, data, vocab, start, end, token, out_ptr, canonical)
    _check_canonical(lattice)
    return lattice


def extended(lattice: Lattice | None, tail: bytes, vocab: Vocabulary) -> Lattice:
    """The lattice of a lattice's bytes (none: an empty prompt) followed by ``tail``, the first bytes
    of a character still unfinished (what comes next is asked one byte at a time): its bytes take
    the one-byte arcs (byte pieces, point 3, where the vocabulary has them), and the canonical path
    goes on with them."""
    head = lattice.data if lattice is not None else b""
    data = head + tail
    arcs = _trim(_raw_arcs(data, vocab, "unknown_chars"), len(data))
    one_byte = {s: t for s, e, t in reversed(arcs) if e == s + 1 and s >= len(head)}
    missing = [i for i in range(len(head), len(data)) if i not in one_byte]
    if missing:
        raise UnrepresentableTextError(f"the vocabulary has no token for the byte {data[missing[0]]:#04x}")
    start, end, token = (np.array(col, dtype=np.int64) for col in zip(*arcs))
    out_ptr = np.searchsorted(start, np.arange(len(data) + 2))
    canonical = (lattice.canonical if lattice is not None else ()) + tuple(one_byte[i] for i in range(len(head), len(data)))
    text = (lattice.text if lattice is not None else "") + tail.decode("utf-8", errors="replace")
    return Lattice(text, data, vocab, start, end, token, out_ptr, canonical)


def _check_canonical(lat: Lattice) -> None:
    """The canonical tokenization must be a path; anything else is a bug worth a clear error."""
    node = 0
    for token in lat.canonical:
        nxt = [int(lat.arc_end[a]) for a in lat.out_arcs(node) if lat.arc_token[a] == token]
        if not nxt:
            raise UnrepresentableTextError(
                f"the canonical token {token} ({lat.vocab.surface(token)!r}) at byte {node} is "
                "not an arc of the lattice; the tokenizer uses a piece the lattice rules exclude"
            )
        node = nxt[0]
