"""The tokenization lattice of a text: a DAG over its UTF-8 bytes whose arcs are token ids.

Every path from byte 0 to the last byte spells the text exactly (DESIGN.md points 3 and 4).
Paths are counted exactly with Python integers, optionally limited to at most L tokens, and
are ranked and unranked in a fixed order (arcs sorted by start, end, token id) so that samplers
can draw distinct integers and turn them into distinct paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from transformers import PreTrainedTokenizerBase

from marginal_core import bigint
from marginal_core.errors import (
    EmptyTextError,
    MarginalError,
    NormalizationError,
    TooManyPathsError,
    UnrepresentableTextError,
)
from marginal_core.vocab import SPACE_PIECE, ByteFallback, Vocabulary, vocabulary

Path = tuple[int, ...]
DEFAULT_LENGTH_MARGIN = 10
DEFAULT_ENUMERATION_BUDGET = 100_000
MAX_TABLE_CELLS = 20_000_000


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
        offsets = [0]
        for token in self.canonical:
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
        cache = self.__dict__.setdefault("_indexes", {})
        if max_len not in cache:
            cache[max_len] = PathIndex(self, max_len)
        return cache[max_len]

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
        bounds, found = self.canonical_nodes, []
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
        """The canonical path with exactly one token replaced by two (DESIGN.md point 7)."""
        return self.off_by_one_batch().tolist()

    def off_by_one_batch(self) -> PathBatch:
        """The off-by-one set as one array, built without a Python loop over tokens."""
        width = len(self.canonical) + 1
        split = np.array(self.splits, dtype=np.int64).reshape(-1, 3)
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


class PathIndex:
    """Path counts and cumulative arc tables of a lattice for one length bound.

    A state is (node, budget): the paths from the node to the end with at most ``budget``
    tokens. Only budgets that some path can reach with some path left are stored (a band per
    node), which keeps the table small for bounds near the canonical length. The unbounded index
    has one budget per node and never spends it.
    """

    def __init__(self, lattice: Lattice, max_len: int | None) -> None:
        self.lattice, self.max_len = lattice, max_len
        self.bounded = max_len is not None
        self._dec = 1 if self.bounded else 0
        self.min_prefix, self.min_suffix = lattice.shortest
        self._build_tables()

    def _band(self, node: int) -> tuple[int, int]:
        if not self.bounded:
            return 0, 0
        return int(self.min_suffix[node]), self.max_len - int(self.min_prefix[node])

    def _build_tables(self) -> None:
        lat = self.lattice
        cells = sum(
            max(0, hi - lo + 1) * len(lat.out_arcs(int(n)))
            for n in lat.nodes
            for lo, hi in [self._band(int(n))]
        )
        if cells > MAX_TABLE_CELLS:
            raise TooManyPathsError(
                f"counting paths of at most {self.max_len} tokens needs {cells:,} table cells "
                f"(limit {MAX_TABLE_CELLS:,}); use a shorter text or a bound nearer the canonical length"
            )
        self.lo: dict[int, int] = {}
        self.counts: dict[int, np.ndarray] = {}
        self.cum: dict[int, np.ndarray] = {}
        end_lo, end_hi = self._band(lat.end)
        self.lo[lat.end] = end_lo
        self.counts[lat.end] = np.array([1] * max(0, end_hi - end_lo + 1), dtype=object)
        for node in lat.nodes[::-1].tolist():
            if node == lat.end:
                continue
            lo, hi = self._band(node)
            arcs = lat.out_arcs(node)
            budgets = np.arange(lo, hi + 1)
            contrib = np.zeros((len(budgets), len(arcs)), dtype=object)
            for col, arc in enumerate(arcs):
                target = int(lat.arc_end[arc])
                rows = budgets - self._dec - self.lo[target]
                ok = rows >= 0
                contrib[ok, col] = self.counts[target][rows[ok]]
            cum = np.zeros_like(contrib)
            if len(arcs) > 1:
                cum[:, 1:] = np.cumsum(contrib[:, :-1], axis=1)
            self.lo[node] = lo
            self.cum[node] = cum
            self.counts[node] = cum[:, -1] + contrib[:, -1] if len(budgets) else contrib[:, 0]
        top = self.max_len if self.bounded else 0
        row = top - self.lo[0]
        self.total = int(self.counts[0][row]) if 0 <= row < len(self.counts[0]) else 0
        self.limbs = bigint.width(max(self.total, 1))

    @cached_property
    def _plan(self) -> list[tuple[int, int, int, np.ndarray | None]]:
        """Per node with out arcs: (node, first arc, band start, cumulative limb table or None).

        Nodes with a single arc need no comparison: their table is None.
        """
        lat, plan = self.lattice, []
        for node in lat.nodes.tolist():
            if node == lat.end:
                continue
            arcs = lat.out_arcs(node)
            table = bigint.to_limbs(self.cum[node], self.limbs) if len(arcs) > 1 else None
            plan.append((node, arcs.start, self.lo[node], table))
        return plan

    @cached_property
    def _steps(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(node, token id) -> (column in the node's table, next node), for ranking."""
        lat = self.lattice
        ptr = lat.out_ptr.tolist()
        return {
            (s, t): (a - ptr[s], e)
            for a, (s, e, t) in enumerate(
                zip(lat.arc_start.tolist(), lat.arc_end.tolist(), lat.arc_token.tolist())
            )
        }

    @cached_property
    def _cum_rows(self) -> dict[int, list[list[int]]]:
        """The cumulative tables as nested Python lists: fast scalar access for ranking."""
        return {node: table.tolist() for node, table in self.cum.items()}

    def rank(self, path: Path) -> int:
        """The rank of a path; ValueError if it is not a path within the bound."""
        lat, steps, rows = self.lattice, self._steps, self._cum_rows
        node, depth, rank = 0, 0, 0
        for token in path:
            step = steps.get((node, token))
            row = self._row(node, depth) if step is not None else -1
            if not 0 <= row < len(rows.get(node, ())):
                raise ValueError(f"{path} is not a path of this lattice within the bound")
            rank += rows[node][row][step[0]]
            node, depth = step[1], depth + 1
        if node != lat.end:
            raise ValueError(f"{path} stops at byte {node}, before the end {lat.end}")
        return rank

    def off_by_one_ranks(self) -> list[int]:
        """Ranks of ``lattice.off_by_one()`` paths, in order, in O(1) each.

        A split path shares the canonical prefix (at its own depth) and the canonical suffix
        (one token deeper), so prefix and suffix sums of the canonical arcs' table entries give
        every rank. Only valid when the bound admits the split paths (canonical length + 1).
        """
        lat, steps, rows = self.lattice, self._steps, self._cum_rows
        nodes, canon = lat.canonical_nodes, lat.canonical
        if self.bounded and len(canon) + 1 > self.max_len:
            raise ValueError("off-by-one paths are longer than the length bound")

        def entry(node: int, depth: int, column: int) -> int:
            return rows[node][self._row(node, depth)][column]

        columns = [steps[(node, token)][0] for node, token in zip(nodes, canon)]
        before = [0]
        for q, (node, col) in enumerate(zip(nodes, columns)):
            before.append(before[-1] + entry(node, q, col))
        after = [0]
        for q in range(len(canon) - 1, -1, -1):
            after.append(after[-1] + entry(nodes[q], q + 1, columns[q]))
        after.reverse()
        ptr = lat.out_ptr.tolist()
        ranks = []
        for pos, first, second in lat.splits:
            middle = int(lat.arc_end[first])
            ranks.append(
                before[pos]
                + entry(nodes[pos], pos, first - ptr[nodes[pos]])
                + entry(middle, pos + 1, second - ptr[middle])
                + after[pos + 1]
            )
        return ranks

    def _row(self, node: int, depth: int) -> int:
        """The table row of a node for a path that has used depth tokens so far."""
        return self.max_len - depth - self.lo[node] if self.bounded else 0

    def unrank(self, ranks: np.ndarray) -> PathBatch:
        """Paths for an array of ranks in limb form, all at once.

        One sweep over the nodes in byte order moves every sample sitting at a node along the
        arc its remaining rank selects, then the chosen arcs are scattered into place.
        """
        lat, k = self.lattice, len(ranks)
        at = np.zeros(k, dtype=np.int64)
        depth = np.zeros(k, dtype=np.int64)
        rest = ranks.copy()
        visits, steps, chosen = [], [], []
        for node, first, lo, table in self._plan:
            idx = np.flatnonzero(at == node)
            if not idx.size:
                continue
            step = depth[idx]
            if table is None:
                arcs = np.full(idx.size, first)
            else:
                rows = table[self.max_len - lo - step] if self.bounded else table[np.zeros_like(step)]
                left = rest[idx]
                choice = np.zeros(idx.size, dtype=np.int64)
                for col in range(1, rows.shape[1]):
                    choice += bigint.less_equal(rows[:, col], left)
                rest[idx] = bigint.subtract(left, rows[np.arange(idx.size), choice])
                arcs = first + choice
            visits.append(idx)
            steps.append(step)
            chosen.append(arcs)
            depth[idx] = step + 1
            at[idx] = lat.arc_end[arcs]
        offsets = np.concatenate([[0], np.cumsum(depth)])
        ids = np.empty(int(offsets[-1]), dtype=np.int64)
        if visits:
            where = offsets[np.concatenate(visits)] + np.concatenate(steps)
            ids[where] = lat.arc_token[np.concatenate(chosen)]
        return PathBatch(ids, offsets)


@dataclass(frozen=True, eq=False)
class PathBatch:
    """Many paths in one flat array: path i is ``ids[offsets[i]:offsets[i + 1]]``."""

    ids: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> Path:
        return tuple(self.ids[self.offsets[i] : self.offsets[i + 1]].tolist())

    def tolist(self) -> list[Path]:
        """The paths as tuples of token ids."""
        flat, bounds = self.ids.tolist(), self.offsets.tolist()
        return [tuple(flat[a:b]) for a, b in zip(bounds, bounds[1:])]

    @classmethod
    def concat(cls, batches: list[PathBatch]) -> PathBatch:
        """One batch holding the paths of several, in order."""
        ids = np.concatenate([b.ids for b in batches])
        lengths = np.concatenate([b.lengths for b in batches])
        return cls(ids, np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]))

    @classmethod
    def from_paths(cls, paths: list[Path]) -> PathBatch:
        lengths = [len(p) for p in paths]
        ids = np.fromiter((t for p in paths for t in p), dtype=np.int64, count=sum(lengths))
        return cls(ids, np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]))


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
                    (p, p + 1, vocab.byte_tokens[data[p]])
                    for p in range(start, stop)
                    if vocab.byte_tokens[data[p]] is not None
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


def canonical_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """The tokenizer's own tokenization of a text, with special-token strings read as text."""
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def build_lattice(
    text: str,
    tokenizer: PreTrainedTokenizerBase,
    *,
    byte_fallback: ByteFallback = "unknown_chars",
) -> Lattice:
    """Build and check the lattice of a text (DESIGN.md points 3 and 4)."""
    if not text:
        raise EmptyTextError("the text is empty: type at least one character")
    vocab = vocabulary(tokenizer)
    canonical = tuple(canonical_ids(tokenizer, text))
    unknown = [t for t in canonical if vocab.surfaces[t] is None]
    if unknown:
        raise UnrepresentableTextError(
            f"the tokenizer cannot represent this text: it maps part of it to "
            f"{tokenizer.convert_ids_to_tokens(unknown[:3])} (unknown or special tokens)"
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
