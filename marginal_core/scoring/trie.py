"""The prefix trie of a batch of tokenizations and the plan of the passes that feed it to a model
(pure numpy: planned, counted and tested without torch).

Nodes are the distinct prefixes, numbered in depth-first order. A token's log-probability comes
from its parent's hidden state, so only internal nodes (those with a child) go through the model,
each once. They are cut into a few contiguous pieces, one per batch row; a row feeds its piece
over several passes, a segment at a time, after the KV states of the context and of the segment's
ancestors outside it, under a tree attention mask: each node sees the context, its ancestors and
itself, at the position its depth gives (as speculative decoding verifies token trees). In
depth-first order the outside ancestors of a segment are exactly those of its first node, so a
row carries their KV states from one pass to the next; only the first segment of a piece feeds
its ancestors once more, and pieces are cut at shallow nodes to keep that small.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from marginal_core.lattice.paths import Path, PathBatch

ActivationBytes = Callable[[int, int, int], int]
"""Estimated peak memory of a forward pass of (rows, queries, keys)."""


class RowState(Protocol):
    """What planning reads of a batch row: its fed indices [start, stop) and carried ancestors."""

    start: int
    stop: int
    chain: frozenset[int]


def as_paths(paths: PathBatch | Sequence[Path]) -> list[Path]:
    """Paths as tuples of ints, whatever container they came in."""
    return paths.tolist() if isinstance(paths, PathBatch) else [tuple(map(int, p)) for p in paths]


@dataclass(frozen=True, eq=False)
class Trie:
    """The distinct prefixes of some paths; node ids are in depth-first (preorder) order.

    ``fed`` lists the nodes with a child, the only ones the model must see. The hidden state that
    predicts node n's token is row ``parent_row[n]``: 0 for the context's last token, 1 + i for
    ``fed[i]``. ``end[i]`` is path i's last node (-1 for an empty path). ``last[n]`` is the last
    node of n's subtree, so a is an ancestor of (or is) b exactly when a <= b <= last[a].
    """

    token: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    end: np.ndarray
    fed: np.ndarray
    parent_row: np.ndarray
    last: np.ndarray

    def ancestors(self, node: int) -> list[int]:
        """The proper ancestors of a node, root side first."""
        chain = []
        node = int(self.parent[node])
        while node >= 0:
            chain.append(node)
            node = int(self.parent[node])
        return chain[::-1]


def build_trie(paths: list[Path], every_node: bool = False) -> Trie:
    """The prefix trie of the paths; inserting them in sorted order numbers nodes in preorder.
    ``every_node`` feeds every node, leaves too (a caller that wants every prefix's own head)."""
    token: list[int] = []
    parent: list[int] = []
    end = np.full(len(paths), -1, dtype=np.int64)
    prev: Path = ()
    stack: list[int] = []
    for i in sorted(range(len(paths)), key=paths.__getitem__):
        path = paths[i]
        shared = next((j for j, (a, b) in enumerate(zip(path, prev)) if a != b), min(len(path), len(prev)))
        del stack[shared:]
        for t in path[shared:]:
            parent.append(stack[-1] if stack else -1)
            stack.append(len(token))
            token.append(t)
        end[i] = stack[-1] if stack else -1
        prev = path
    parents = np.array(parent, dtype=np.int64)
    depth = np.ones(len(token), dtype=np.int64)
    for n, p in enumerate(parent):
        if p >= 0:
            depth[n] = depth[p] + 1
    last = np.arange(len(token), dtype=np.int64)
    for n in range(len(token) - 1, -1, -1):  # children come after their parent in preorder
        if parent[n] >= 0:
            last[parent[n]] = max(last[parent[n]], last[n])
    has_child = np.full(len(token), every_node)
    has_child[parents[parents >= 0]] = True
    fed = np.flatnonzero(has_child)
    row_of = np.zeros(len(token), dtype=np.int64)
    row_of[fed] = np.arange(1, len(fed) + 1)
    parent_row = np.where(parents >= 0, row_of[np.maximum(parents, 0)], 0)
    return Trie(np.array(token, dtype=np.int64), parents, depth, end, fed, parent_row, last)


def path_sums(trie: Trie, node_lp: np.ndarray) -> np.ndarray:
    """Each path's summed log-probability, accumulated root to leaf in float64."""
    cum = node_lp.astype(np.float64)
    for d in range(2, int(trie.depth.max(initial=0)) + 1):
        at = np.flatnonzero(trie.depth == d)
        cum[at] += cum[trie.parent[at]]
    total = np.zeros(len(trie.end), dtype=np.float64)
    total[trie.end >= 0] = cum[trie.end[trie.end >= 0]]
    return total


def distinct_prefixes(paths: PathBatch | Sequence[Path]) -> int:
    """How many path tokens the trie scorer feeds to the model for these paths (without the model):
    the distinct prefixes that some path extends. Pieces cut mid-trie may feed a few again."""
    return len(build_trie(as_paths(paths)).fed)


@dataclass(frozen=True)
class Pass:
    """One forward pass: per row, the ancestors whose KV states it carries, and what it feeds.

    The key columns of row r are the context, then ``carried[r]`` padded to the widest row,
    then ``queries[r]`` padded likewise; the last ``owned[r]`` queries are the row's segment.
    """

    carried: list[list[int]]
    queries: list[list[int]]
    owned: list[int]
    ctx_len: int

    @property
    def widths(self) -> tuple[int, int]:
        """(padded carried length, padded query length)."""
        return max(map(len, self.carried)), max(map(len, self.queries))

    def columns(self, r: int) -> dict[int, int]:
        """Trie node -> key column, for row r."""
        col = {n: self.ctx_len + i for i, n in enumerate(self.carried[r])}
        first_query = self.ctx_len + self.widths[0]
        col.update({n: first_query + i for i, n in enumerate(self.queries[r])})
        return col


def plan_pass(trie: Trie, rows: Sequence[RowState], passes_left: int, row_tokens: int, ctx_len: int) -> Pass:
    """Each row's next segment (its share of what is left, or row_tokens after the planned
    passes), after any ancestors whose KV states it does not hold."""
    carried, queries, owned = [], [], []
    for row in rows:
        left = row.stop - row.start
        count = -(-left // passes_left) if passes_left > 0 else min(left, row_tokens)
        ancestors = trie.ancestors(int(trie.fed[row.start]))
        carried.append([a for a in ancestors if a in row.chain])
        missing = [a for a in ancestors if a not in row.chain]
        queries.append(missing + trie.fed[row.start : row.start + count].tolist())
        owned.append(count)
    return Pass(carried, queries, owned, ctx_len)


FAR = 1 << 40  # beyond any node id or position


@dataclass(frozen=True)
class TreeLayout:
    """What the tree mask reads of each query and key column of a pass, per row [rows, columns].

    A key column holds a node and the last node of its subtree; a query column holds a node.
    The context's keys are a root above every node (node -1, last FAR); padding keys are no
    one's ancestor (node FAR), and padding queries are node -1, so they see the context only.
    Positions are those the model is given; padding keys sit FAR back.
    """

    query_node: np.ndarray
    query_pos: np.ndarray
    key_node: np.ndarray
    key_last: np.ndarray
    key_pos: np.ndarray


def tree_layout(trie: Trie, plan: Pass) -> TreeLayout:
    """The columns of a pass: the context, each row's carried ancestors, then its queries."""
    ctx_len, (width_c, width_q) = plan.ctx_len, plan.widths
    n_rows, n_keys = len(plan.queries), ctx_len + width_c + width_q
    query_node = np.full((n_rows, width_q), -1, dtype=np.int64)
    query_pos = np.full((n_rows, width_q), ctx_len, dtype=np.int64)
    key_node = np.full((n_rows, n_keys), FAR, dtype=np.int64)
    key_last = np.full((n_rows, n_keys), -FAR, dtype=np.int64)
    key_pos = np.full((n_rows, n_keys), -FAR, dtype=np.int64)
    key_node[:, :ctx_len], key_last[:, :ctx_len], key_pos[:, :ctx_len] = -1, FAR, np.arange(ctx_len)
    for r, queries in enumerate(plan.queries):
        col = plan.columns(r)
        nodes, cols = np.fromiter(col.keys(), np.int64, len(col)), np.fromiter(col.values(), np.int64, len(col))
        key_node[r, cols], key_last[r, cols] = nodes, trie.last[nodes]
        key_pos[r, cols] = ctx_len - 1 + trie.depth[nodes]
        query_node[r, : len(queries)] = queries
        query_pos[r, : len(queries)] = ctx_len - 1 + trie.depth[queries]
    return TreeLayout(query_node, query_pos, key_node, key_last, key_pos)


def sees(query_node: Any, query_pos: Any, key_node: Any, key_last: Any, key_pos: Any, window: int | None) -> Any:
    """The tree rule, for numpy arrays or torch tensors that broadcast: a query sees a key whose
    node is its ancestor or itself (in preorder, a <= b <= last[a]), within the window if any."""
    seen = (key_node <= query_node) & (query_node <= key_last)
    return seen if window is None else seen & (query_pos - key_pos < window)


def tree_allowed(trie: Trie, plan: Pass, window: int | None) -> dict[str, np.ndarray]:
    """Boolean masks [rows, queries, keys] per attention type: what each query may see (the
    tree rule over the pass's layout; sliding-window layers also hide keys window or more back)."""
    lay = tree_layout(trie, plan)
    q = (lay.query_node[:, :, None], lay.query_pos[:, :, None])
    k = (lay.key_node[:, None, :], lay.key_last[:, None, :], lay.key_pos[:, None, :])
    allowed = sees(*q, *k, None)
    return {"full_attention": allowed,
            "sliding_attention": allowed if window is None else sees(*q, *k, window)}


@dataclass(frozen=True)
class Shape:
    """How to feed some trie nodes: rows per pass, nodes per row per pass, and passes."""

    rows: int
    per_row: int
    passes: int


def plan_shape(
    size: int, budget: int, row_tokens: int, extra_keys: int, max_bytes: int, activation_bytes: ActivationBytes,
    max_pairs: int | None = None,
) -> Shape:
    """The shape for size nodes under a token budget, the memory estimate and a cap on a pass's
    (query, key) pairs (the attention work, which grows with a long text's depth: it keeps a
    pass short enough to stop between), evened out so that rows are about equally long and no
    pass is padded much."""
    while True:
        per_row = max(1, min(row_tokens, budget))
        rows = max(1, budget // per_row)
        keys = extra_keys + per_row
        fits = activation_bytes(rows, per_row, keys) <= max_bytes
        if budget <= 1 or (fits and (max_pairs is None or rows * per_row * keys <= max_pairs)):
            break
        budget //= 2
    passes = -(-size // (rows * per_row))
    per_row = -(-size // (rows * passes))
    return Shape(-(-size // (per_row * passes)), per_row, passes)


def cut(trie: Trie, spans: list[tuple[int, int]], piece: int, slack: int) -> list[tuple[int, int]]:
    """Cut spans of fed indices into pieces of about piece nodes, each cut moved (by at most
    slack) to the shallowest node nearby, whose ancestors a row must feed again. A cut whose
    ancestors would outnumber a quarter of a piece is not made (a long text's one path stays
    one row, fed in passes, instead of rows that each feed thousands of ancestors again)."""
    pieces = []
    for start, stop in spans:
        count, prev = -(-(stop - start) // piece), start
        for j in range(1, count):
            ideal = start + round(j * (stop - start) / count)
            lo, hi = max(ideal - slack, prev + 1), min(ideal + slack + 1, stop)
            if lo >= hi:
                continue
            at = lo + int(np.argmin(trie.depth[trie.fed[lo:hi]]))
            if trie.depth[trie.fed[at]] - 1 > piece // 4:
                continue
            pieces.append((prev, at))
            prev = at
        pieces.append((prev, stop))
    return pieces


