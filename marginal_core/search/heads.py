"""What one prefix's head says about the bytes ahead (docs/design.md, "Surprisal"): the log p of
the lattice's arcs from its node (to extend it), its covering masses (the tokens whose surface
begins with the bytes from its node to each byte ahead) and its next-byte masses (those that
begin with the bytes up to a byte ahead and then any other byte). The search scores prefixes
through these: exactly (the whole vocabulary), or, for prefixes too light to matter but to the
certificate, as upper bounds from a bounding head over a few columns.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.vocab import Vocabulary, key_range
from marginal_core.lm.adapter import LM
from marginal_core.scoring.tables import Tables

SUM_COLUMNS = 1 << 14  # vocabulary columns summed by first byte at a time, in float64
TOP_TOKENS = 16  # a full head's most probable ids, which bounding heads read beside the text's tokens


@dataclass(frozen=True)
class Cover:
    """What covers the bytes ahead of every state (lattice node m). The byte at m: every ordinary
    token whose surface begins with it (``first[s]``, a class of ``label``: the first byte of
    each ordinary token's surface, 256 for the rest) and the byte-fallback token where the
    lattice has that arc (``fallback[s]``, -1 for none). The bytes after: the tokens matching two
    bytes or more, flat in ``tokens`` (state s's are ``ptr[s]:ptr[s+1]``), each with how many
    bytes of the text it matches, less two (``shell``: it covers every j up to m + shell + 2),
    and its byte after those (``after``, 256 where it ends there). ``ahead[s, d]``: the text's byte
    m + d (256 past the end). ``order``: the vocabulary in surface order, for the second bytes."""

    label: torch.Tensor
    first: torch.Tensor
    fallback: torch.Tensor
    tokens: torch.Tensor
    shell: torch.Tensor
    after: torch.Tensor
    ptr: torch.Tensor
    ahead: torch.Tensor
    order: SortedIds
    depth: int  # covering masses per row: the byte at m and the deeper shells


def node_tables(lattice: Lattice, device: torch.device) -> Tables:
    """The lattice as an automaton of its nodes: state s is lattice.nodes[s], its tokens the arcs."""
    nodes = lattice.nodes.tolist()
    state = {n: s for s, n in enumerate(nodes)}
    width = np.array([len(lattice.out_arcs(n)) for n in nodes], dtype=np.int64)
    tokens = np.zeros((len(nodes), max(1, int(width.max()))), dtype=np.int64)
    nxt = np.full(tokens.shape, -1, dtype=np.int64)
    for s, node in enumerate(nodes):
        arcs = lattice.out_arcs(node)
        tokens[s, : len(arcs)] = lattice.arc_token[arcs.start : arcs.stop]
        nxt[s, : len(arcs)] = [state[int(e)] for e in lattice.arc_end[arcs.start : arcs.stop]]
    final = np.array([n == lattice.end for n in nodes])
    t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
    return Tables(t(tokens), t(nxt), t(width), t(final))


@dataclass(frozen=True, eq=False)
class SortedIds:
    """A vocabulary's ordinary token ids in the order of its sorted surfaces (key k's ids are
    ``ids[ptr[k]:ptr[k+1]]``), and each id's first surface byte (256: special, fallback, empty).
    The ids that begin with byte b are ``ids[lead[b]:lead[b+1]]``, ``second`` their next byte
    (256: the surface is that one byte), on the model's device where ``on`` put them."""

    ids: np.ndarray
    ptr: np.ndarray
    first_byte: np.ndarray
    lead: np.ndarray
    second: np.ndarray
    device_ids: torch.Tensor | None = None
    device_second: torch.Tensor | None = None

    def on(self, device: torch.device) -> SortedIds:
        """The same ids with ``ids`` and ``second`` as tensors on device too."""
        as_long = lambda a: torch.as_tensor(a, dtype=torch.long, device=device)  # noqa: E731
        return SortedIds(self.ids, self.ptr, self.first_byte, self.lead, self.second, as_long(self.ids),
                         as_long(self.second))


_SORTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _sorted_ids(vocab: Vocabulary) -> SortedIds:
    """The vocabulary's ids in surface order and their first bytes, built once per vocabulary."""
    if vocab not in _SORTED:
        counts = np.array([len(i) for i in vocab._ids], dtype=np.int64)
        flat = np.fromiter((t for ids in vocab._ids for t in ids), dtype=np.int64, count=int(counts.sum()))
        lead = np.repeat(np.array([k[0] if k else -1 for k in vocab._keys], dtype=np.int64), counts)
        second = np.repeat(np.array([k[1] if len(k) > 1 else 256 for k in vocab._keys], dtype=np.int64), counts)
        first = np.full(vocab.size, 256, dtype=np.int64)
        first[flat] = np.where(lead < 0, 256, lead)
        _SORTED[vocab] = SortedIds(flat, np.concatenate([[0], np.cumsum(counts)]), first,
                                   np.searchsorted(lead, np.arange(257)), second)
    return _SORTED[vocab]


def covers(lattice: Lattice, vocab_size: int, device: torch.device) -> Cover:
    """Each node's covering tokens, found as nested ranges of the vocabulary's sorted surfaces
    (the keys that match d bytes and not d + 1 are shell d - 2), with the byte-fallback token
    where the lattice has that arc (point 3: byte pieces stand only where the tokenizer would)."""
    vocab, data, keys = lattice.vocab, lattice.data, lattice.vocab._keys
    order = _sorted_ids(vocab)
    byte_ids = {t for t in vocab.byte_tokens if t is not None}
    first, fallback, tokens, shells, afters, ptr = [], [], [], [], [], [0]
    for node in lattice.nodes.tolist():
        found = [np.zeros(0, dtype=np.int64)] * 3
        first.append(data[node] if node < lattice.end else 256)
        arcs = lattice.out_arcs(node)
        fallback.append(next((int(t) for t in lattice.arc_token[arcs.start : arcs.stop] if int(t) in byte_ids), -1))
        if node + 1 < lattice.end:
            outer = key_range(keys, data[node : node + 2], 0, len(keys))
            shell = np.zeros(outer[1] - outer[0], dtype=np.int64)
            inner, d = outer, 1
            while node + d + 1 < lattice.end and inner[0] < inner[1]:
                inner = key_range(keys, data[node : node + d + 2], *inner)
                shell[inner[0] - outer[0] : inner[1] - outer[0]] = d
                d += 1
            lo, hi = outer
            after = [k[s + 2] if len(k) > s + 2 else 256 for k, s in zip(keys[lo:hi], shell.tolist(), strict=True)]
            repeat = order.ptr[lo + 1 : hi + 1] - order.ptr[lo:hi]
            found = [order.ids[order.ptr[lo] : order.ptr[hi]], np.repeat(shell, repeat), np.repeat(after, repeat)]
        tokens.append(found[0])
        shells.append(found[1])
        afters.append(found[2])
        ptr.append(ptr[-1] + len(found[0]))
    flat_shells = np.concatenate(shells)
    depth = int(flat_shells.max(initial=-1)) + 2
    ahead = np.full((len(first), depth + 1), 256, dtype=np.int64)
    for s, node in enumerate(lattice.nodes.tolist()):
        ahead[s, : max(0, min(depth + 1, lattice.end - node))] = list(data[node : node + depth + 1])
    as_long = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.long, device=device)  # noqa: E731
    label = np.full(vocab_size, 256, dtype=np.int64)  # the model's head may have more rows than the tokenizer ids
    label[: min(vocab_size, len(order.first_byte))] = order.first_byte[:vocab_size]
    return Cover(as_long(label), as_long(first), as_long(fallback), as_long(np.concatenate(tokens)),
                 as_long(flat_shells), as_long(np.concatenate(afters)), as_long(ptr), as_long(ahead), order.on(device),
                 depth)


@dataclass(frozen=True)
class HeadBuffers:
    """Where a chunk of full heads writes: its rows' arcs' log p (``allowed``), covering masses
    (``covers``) and next-byte masses (``levels``)."""

    allowed: torch.Tensor
    covers: torch.Tensor
    levels: torch.Tensor


def score_chunk(lm: LM, hidden: torch.Tensor, state: torch.Tensor, tok: torch.Tensor, cover: Cover, out: HeadBuffers,
                whole: Sequence[int] = ()) -> tuple[torch.Tensor, dict[int, np.ndarray]]:
    """One head chunk of rows, exactly: the allowed tokens' and deeper covering tokens' log p
    picked from the logits, then each row's mass by first byte (summed over the vocabulary in
    place) and its next-byte masses (``levels``, see :func:`next_levels`). Returns each row's
    TOP_TOKENS most probable ids (what a bounding head reads), and the rows ``whole`` asks for
    as whole next-token distributions (float64, on the CPU)."""
    allowed, covers = out.allowed, out.covers
    n, device = len(hidden), hidden.device
    row_of, where = _deep(state, cover)
    logits = lm.head_logits(hidden, {})
    picked = logits.gather(1, tok).to(torch.float64)
    deep = logits[row_of, cover.tokens[where]].to(torch.float64)
    safe = cover.fallback[state].clamp(min=0)
    fallback = logits.gather(1, safe[:, None])[:, 0].to(torch.float64)
    top = logits.amax(dim=-1, keepdim=True)
    probs = logits.sub_(top).exp_()
    mass = torch.zeros((n, 257), dtype=torch.float64, device=device)
    for lo in range(0, probs.shape[1], SUM_COLUMNS):  # float64 sums (a class holds 100k tokens), a block at a time
        mass.index_add_(1, cover.label[lo : lo + SUM_COLUMNS], probs[:, lo : lo + SUM_COLUMNS].to(torch.float64))
    norm = mass.sum(dim=1).log()  # of the logits less their top: every class, the rest's included
    distributions = {r: (probs[r].to(torch.float64) / norm[r].exp()).cpu().numpy() for r in whole}
    lse = top[:, 0].to(torch.float64) + norm
    allowed.copy_(picked - lse[:, None])
    first = mass.gather(1, cover.first[state][:, None])[:, 0].log() - norm
    covers[:, 0] = torch.logaddexp(first, torch.where(cover.fallback[state] >= 0, fallback - lse, -math.inf))
    _shells(cover, row_of, where, deep - lse[row_of], covers)
    seconds = _second_bytes(probs, cover, cover.first[state])
    next_levels(cover, state, mass.log() - norm[:, None], seconds.log() - norm[:, None], (row_of, where),
                deep - lse[row_of], out)
    return probs.topk(min(TOP_TOKENS, probs.shape[1]), dim=1).indices, distributions


def _second_bytes(probs: torch.Tensor, cover: Cover, first: torch.Tensor) -> torch.Tensor:
    """Per row, the mass of the tokens that begin with its byte ``first`` by their second byte
    (256: the surface is that byte alone), in float64: the rows of one first byte at a time,
    their class's columns a block at a time."""
    order = cover.order
    assert order.device_ids is not None and order.device_second is not None  # covers() put them on the device
    out = torch.zeros((len(probs), 257), dtype=torch.float64, device=probs.device)
    for b in first.unique().tolist():
        if b > 255:
            continue
        rows = torch.nonzero(first == b)[:, 0]
        for lo in range(int(order.lead[b]), int(order.lead[b + 1]), SUM_COLUMNS):
            hi = min(lo + SUM_COLUMNS, int(order.lead[b + 1]))
            block = probs[rows[:, None], order.device_ids[lo:hi]].to(torch.float64)
            out[rows] = out[rows].index_add_(1, order.device_second[lo:hi], block)
    return out


def next_levels(cover: Cover, state: torch.Tensor, first: torch.Tensor, second: torch.Tensor,
                deep_at: tuple[torch.Tensor, torch.Tensor], deep: torch.Tensor, out: HeadBuffers) -> None:
    """levels[r, d, c]: the log p of the tokens whose surface begins with the text's bytes m..m+d
    and then byte c, for the row at node m (column 256 and bytes past the text are scratch). At the
    byte the text has there it is the covering mass to m + d + 1, as the prefix bounds count it;
    elsewhere: d = 0 the first-byte classes, d = 1 the second bytes, deeper the deep covering
    tokens whose match stops at d (``deep_at``: their rows and places, ``_deep``)."""
    (row_of, where), covers, levels = deep_at, out.covers, out.levels
    levels.fill_(-math.inf)
    ahead = cover.ahead[state]
    levels[:, 0] = first
    if levels.shape[1] > 1:
        levels[:, 1] = second
    stops = (cover.shell[where] + 2 < levels.shape[1]) & (cover.after[where] < 256)
    segment = (row_of * levels.shape[1] + cover.shell[where] + 2) * 257 + cover.after[where]
    add_at(levels.view(-1), segment[stops], deep[stops])
    for d in range(min(cover.depth, levels.shape[1])):
        levels[:, d].scatter_(1, ahead[:, d : d + 1], covers[:, d : d + 1])


def bound_chunk(lm: LM, hidden: torch.Tensor, state: torch.Tensor, tok: torch.Tensor, cover: Cover,
                columns: Columns, allowed: torch.Tensor, covers: torch.Tensor) -> None:
    """One chunk of rows through a bounding head: the logits of a few columns only (``columns``:
    every arc and deep covering token of the text, and tokens that full heads found probable).
    Their own sum bounds the normaliser from below, so each token's probability over it bounds
    its probability from above; the byte at the node is bounded by 1 (its class is not read)."""
    row_of, where = _deep(state, cover)
    logits = (hidden.to(columns.weight.dtype) @ columns.weight.T).to(torch.float64)
    if columns.bias is not None:
        logits += columns.bias
    if lm.softcap:
        logits = logits.div(lm.softcap).tanh().mul(lm.softcap)
    low = torch.logsumexp(logits, dim=1)
    allowed.copy_(logits.gather(1, columns.place[tok].clamp(min=0)) - low[:, None])
    covers[:, 0] = 0.0
    _shells(cover, row_of, where, logits[row_of, columns.place[cover.tokens[where]]] - low[row_of], covers)


@dataclass(frozen=True)
class Columns:
    """The vocabulary columns a bounding head reads: their ids' head weights and, per id, its
    column (-1 for an id not read)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    place: torch.Tensor

    @classmethod
    def of(cls, lm: LM, ids: np.ndarray) -> Columns:
        at = torch.as_tensor(np.unique(ids), device=lm.device)
        place = torch.full((lm.vocab,), -1, dtype=torch.long, device=lm.device)
        place[at] = torch.arange(len(at), device=lm.device)
        weight: torch.Tensor = lm.head.weight  # type: ignore[assignment]  # a linear head's [vocab, hidden]
        bias = getattr(lm.head, "bias", None)
        return cls(weight[at].to(lm.logit_dtype), None if bias is None else bias[at].to(torch.float64), place)


def _deep(state: torch.Tensor, cover: Cover) -> tuple[torch.Tensor, torch.Tensor]:
    """For rows at node states ``state``: each deep covering token's row, and its index into
    cover.tokens."""
    counts = cover.ptr[state + 1] - cover.ptr[state]
    row_of = torch.repeat_interleave(torch.arange(len(state), device=state.device), counts)
    where = cover.ptr[state][row_of] + torch.arange(len(row_of), device=state.device) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts)
    return row_of, where


def _shells(cover: Cover, row_of: torch.Tensor, where: torch.Tensor, deep: torch.Tensor, covers: torch.Tensor) -> None:
    """covers[:, 1:]: per row, the log mass of the tokens matching d + 1 bytes or more (``deep``:
    each deep covering token's log p), summed shell by shell from the deepest."""
    if cover.depth > 1:
        n = len(covers)
        segment = row_of * (cover.depth - 1) + cover.shell[where]
        shells = torch.full((n * (cover.depth - 1),), -math.inf, dtype=torch.float64, device=covers.device)
        add_at(shells, segment, deep)
        covers[:, 1:] = torch.logcumsumexp(shells.reshape(n, cover.depth - 1).flip(1), dim=1).flip(1)


def add_at(target: torch.Tensor, index: torch.Tensor, log_values: torch.Tensor) -> None:
    """target[i] = log(exp(target[i]) + Σ exp(values at i)), in place."""
    if not len(index):
        return
    top = torch.full_like(target, -math.inf).scatter_reduce(0, index, log_values, "amax")
    safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.zeros_like(target).scatter_add(0, index, (log_values - safe[index]).exp())
    target.copy_(torch.logaddexp(target, safe + total.log()))
