"""Prefix probabilities of a text at every byte, summed over tokenizations (docs/design.md,
"Surprisal"): the beam's walk over the lattice's nodes, each prefix's whole next-token
distribution summed over the tokens that cover the bytes ahead.

P(s<j), the probability that the model's string begins with the text's first j bytes, is a sum
over the shortest token sequences that reach past j: a path to a node m < j and one last token
whose surface begins with the bytes m..j (it may end at j or run past it, whatever follows). So
every prefix that the walk extends adds, for each j ahead of its node, its log p plus the log
mass of its covering tokens. A prefix the per-node rank leaves out (or a stop leaves unscored)
could add at most its own probability to each P(s<j) past its node, which bounds the mass missed.
"""

from __future__ import annotations

import bisect
import copy
import math
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from marginal_core.errors import TooManyPathsError
from marginal_core.estimators.beam import _Beam, _choose, advance
from marginal_core.estimators.beam_width import AUTO_WIDTHS, DEFAULT_TOLERANCE
from marginal_core.estimators.proxy import Tables
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET, Lattice
from marginal_core.lattice.vocab import Vocabulary
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.progress import Progress, StopCheck, round_hook
from marginal_core.serving import hooks as serving_hooks

Pending = tuple[torch.Tensor, torch.Tensor] | None  # a walk's rows still to score: (states, log p)
SUM_COLUMNS = 1 << 14  # vocabulary columns summed by first byte at a time, in float64


@dataclass(frozen=True)
class PrefixMasses:
    """Bounds on log P(s<j) for every lattice byte j (``lower``, ``upper``: arrays of len + 1),
    and on the text's own marginal (the tokenizations that end exactly at its end).

    ``lower`` sums the prefixes scored; ``upper`` adds what the prefixes left out could hold;
    they are equal where nothing before j was left out. ``widths`` lists the walks finished (the
    exact walk's width is the most prefixes any node has)."""

    lower: np.ndarray
    upper: np.ndarray
    log_p_text: float
    log_p_text_upper: float
    widths: tuple[int, ...]
    steps: int
    scored: int
    seconds: float
    done: bool
    cancelled: bool = False

    @property
    def exact(self) -> np.ndarray:
        """Per byte: whether the bound is exact (nothing before it was left out)."""
        return self.upper <= self.lower

    @property
    def gap(self) -> float:
        """The most nats by which any byte's prefix probability may lie above its lower bound."""
        return float(np.max(self.upper - self.lower))


@dataclass(frozen=True)
class _Cover:
    """What covers the bytes ahead of every state (lattice node m). The byte at m: every ordinary
    token whose surface begins with it (``first[s]``, a class of ``label``: the first byte of
    each ordinary token's surface, 256 for the rest) and the byte-fallback token where the
    lattice has that arc (``fallback[s]``, -1 for none). The bytes after: the tokens matching two
    bytes or more, flat in ``tokens`` (state s's are ``ptr[s]:ptr[s+1]``), each with how many
    bytes of the text it matches, less two (``shell``: it covers every j up to m + shell + 2)."""

    label: torch.Tensor
    first: torch.Tensor
    fallback: torch.Tensor
    tokens: torch.Tensor
    shell: torch.Tensor
    ptr: torch.Tensor
    depth: int  # covering masses per row: the byte at m and the deeper shells


def _node_tables(lattice: Lattice, device: torch.device) -> Tables:
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
class _SortedIds:
    """A vocabulary's ordinary token ids in the order of its sorted surfaces (key k's ids are
    ``ids[ptr[k]:ptr[k+1]]``), and each id's first surface byte (256: special, fallback, empty)."""

    ids: np.ndarray
    ptr: np.ndarray
    first_byte: np.ndarray


_SORTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _sorted_ids(vocab: Vocabulary) -> _SortedIds:
    """The vocabulary's ids in surface order and their first bytes, built once per vocabulary."""
    if vocab not in _SORTED:
        counts = np.array([len(i) for i in vocab._ids], dtype=np.int64)
        flat = np.fromiter((t for ids in vocab._ids for t in ids), dtype=np.int64, count=int(counts.sum()))
        first = np.full(vocab.size, 256, dtype=np.int64)
        first[flat] = np.repeat(np.array([k[0] if k else 256 for k in vocab._keys], dtype=np.int64), counts)
        _SORTED[vocab] = _SortedIds(flat, np.concatenate([[0], np.cumsum(counts)]), first)
    return _SORTED[vocab]


def _key_range(keys: list[bytes], prefix: bytes, lo: int, hi: int) -> tuple[int, int]:
    """The keys within [lo, hi) that begin with prefix (a contiguous range of the sorted keys)."""
    start = bisect.bisect_left(keys, prefix, lo, hi)
    stem = prefix.rstrip(b"\xff")
    if not stem:
        return start, hi
    return start, bisect.bisect_left(keys, stem[:-1] + bytes([stem[-1] + 1]), start, hi)


def _covers(lattice: Lattice, vocab_size: int, device: torch.device) -> _Cover:
    """Each node's covering tokens, found as nested ranges of the vocabulary's sorted surfaces
    (the keys that match d bytes and not d + 1 are shell d - 2), with the byte-fallback token
    where the lattice has that arc (point 3: byte pieces stand only where the tokenizer would)."""
    vocab, data, keys = lattice.vocab, lattice.data, lattice.vocab._keys
    order = _sorted_ids(vocab)
    byte_ids = {t for t in vocab.byte_tokens if t is not None}
    first, fallback, tokens, shells, ptr = [], [], [], [], [0]
    for node in lattice.nodes.tolist():
        found = [np.zeros(0, dtype=np.int64)] * 2
        first.append(data[node] if node < lattice.end else 256)
        arcs = lattice.out_arcs(node)
        fallback.append(next((int(t) for t in lattice.arc_token[arcs.start : arcs.stop] if int(t) in byte_ids), -1))
        if node + 1 < lattice.end:
            outer = _key_range(keys, data[node : node + 2], 0, len(keys))
            shell = np.zeros(outer[1] - outer[0], dtype=np.int64)
            inner, d = outer, 1
            while node + d + 1 < lattice.end and inner[0] < inner[1]:
                inner = _key_range(keys, data[node : node + d + 2], *inner)
                shell[inner[0] - outer[0] : inner[1] - outer[0]] = d
                d += 1
            lo, hi = outer
            found = [order.ids[order.ptr[lo] : order.ptr[hi]], np.repeat(shell, order.ptr[lo + 1 : hi + 1] - order.ptr[lo:hi])]
        tokens.append(found[0])
        shells.append(found[1])
        ptr.append(ptr[-1] + len(found[0]))
    flat_shells = np.concatenate(shells)
    as_long = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.long, device=device)  # noqa: E731
    label = np.full(vocab_size, 256, dtype=np.int64)  # the model's head may have more rows than the tokenizer ids
    label[: min(vocab_size, len(order.first_byte))] = order.first_byte[:vocab_size]
    return _Cover(as_long(label), as_long(first), as_long(fallback), as_long(np.concatenate(tokens)),
                  as_long(flat_shells), as_long(ptr), int(flat_shells.max(initial=-1)) + 2)


def _score_rows(lm: LM, hidden: torch.Tensor, state: torch.Tensor, tables: Tables, cover: _Cover
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's allowed next-token log p [R, A] and its covering masses [R, depth] (log; row
    r's entry d covers byte node + d + 1: the tokens matching d + 1 bytes or more), float64,
    from the head's logits of as many rows at a time as it takes."""
    tok, width = tables.tokens[state], tables.width[state]
    n_rows, n_cols = tok.shape
    allowed = torch.empty((n_rows, n_cols), dtype=torch.float64, device=tok.device)
    covers = torch.full((n_rows, cover.depth), -math.inf, dtype=torch.float64, device=tok.device)
    step = lm.head_rows(n_rows)
    for lo in range(0, n_rows, step):
        with serving_hooks.unit():
            _score_chunk(lm, hidden[lo : lo + step], state[lo : lo + step], tok[lo : lo + step], cover,
                         allowed[lo : lo + step], covers[lo : lo + step])
    pad = torch.arange(n_cols, device=tok.device)[None, :] >= width[:, None]
    return allowed.masked_fill(pad, -math.inf), covers


def _score_chunk(lm: LM, hidden: torch.Tensor, state: torch.Tensor, tok: torch.Tensor, cover: _Cover,
                 allowed: torch.Tensor, covers: torch.Tensor) -> None:
    """One head chunk of rows: the allowed tokens' and deeper covering tokens' log p picked from
    the logits, then each row's mass by first byte (summed over the vocabulary in place)."""
    n, device = len(hidden), hidden.device
    counts = cover.ptr[state + 1] - cover.ptr[state]
    row_of = torch.repeat_interleave(torch.arange(n, device=device), counts)
    where = cover.ptr[state][row_of] + torch.arange(len(row_of), device=device) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts)
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
    norm = probs.sum(dim=-1, dtype=torch.float64).log()  # of the logits less their top
    lse = top[:, 0].to(torch.float64) + norm
    allowed.copy_(picked - lse[:, None])
    first = mass.gather(1, cover.first[state][:, None])[:, 0].log() - norm
    with_fallback = torch.logaddexp(first, torch.where(cover.fallback[state] >= 0, fallback - lse, -math.inf))
    covers[:, 0] = with_fallback
    if cover.depth > 1:
        segment = row_of * (cover.depth - 1) + cover.shell[where]
        shells = torch.full((n * (cover.depth - 1),), -math.inf, dtype=torch.float64, device=device)
        _add_at(shells, segment, deep - lse[row_of])
        covers[:, 1:] = torch.logcumsumexp(shells.reshape(n, cover.depth - 1).flip(1), dim=1).flip(1)


def _add_at(target: torch.Tensor, index: torch.Tensor, log_values: torch.Tensor) -> None:
    """target[i] = log(exp(target[i]) + Σ exp(values at i)), in place."""
    if not len(index):
        return
    top = torch.full_like(target, -math.inf).scatter_reduce(0, index, log_values, "amax")
    safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.zeros_like(target).scatter_add(0, index, (log_values - safe[index]).exp())
    target.copy_(torch.logaddexp(target, safe + total.log()))


def prefix_counts(lattice: Lattice) -> dict[int, int]:
    """The number of paths from byte 0 to each node (exact integers)."""
    counts = dict.fromkeys(lattice.nodes.tolist(), 0)
    counts[0] = 1
    for node in lattice.nodes.tolist():
        arcs = lattice.out_arcs(node)
        for end in lattice.arc_end[arcs.start : arcs.stop].tolist():
            counts[end] += counts[node]
    return counts


def exact_width(lattice: Lattice, budget: int = DEFAULT_ENUMERATION_BUDGET) -> int:
    """A width at which the walk prunes nothing (the most prefixes any node has); TooManyPathsError
    when the prefixes to score pass the budget."""
    counts = prefix_counts(lattice)
    prefixes = sum(c for n, c in counts.items() if n < lattice.end)
    if prefixes > budget:
        raise TooManyPathsError(f"the text has {prefixes:,} prefixes to score, over the budget of {budget:,}; "
                                "use the beam method")
    return max(counts.values())


class _Found:
    """What the walks over one text have found: each scored prefix's contribution to every byte
    ahead of it (counted once, whichever walk scored it), the left-out mass by node of the walk
    under way, and the complete paths. ``memo`` keeps each scored prefix's allowed log p and
    covering masses, so a wider walk runs the head only over prefixes no earlier walk scored."""

    def __init__(self, lattice: Lattice, device: torch.device) -> None:
        self.end, self.device = lattice.end, device
        self.lower = torch.full((self.end + 1,), -math.inf, dtype=torch.float64, device=device)
        self.lower[0] = 0.0
        self.missed = torch.full((self.end + 1,), -math.inf, dtype=torch.float64, device=device)
        self.memo: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        self.complete: dict[tuple[int, ...], float] = {}
        self.node = torch.as_tensor(lattice.nodes, device=device)

    def score(self, lm: LM, hidden: torch.Tensor, beam: _Beam, tables: Tables, cover: _Cover) -> torch.Tensor:
        """This step's rows' allowed log p: the head runs over the prefixes not scored before,
        each of which adds log p + its covering mass to every byte ahead of its node."""
        keys = [tuple(r) for r in beam.tokens.tolist()]
        fresh = [i for i, k in enumerate(keys) if k not in self.memo]
        lp = torch.empty(tables.tokens[beam.state].shape, dtype=torch.float64, device=self.device)
        old = [i for i, k in enumerate(keys) if k in self.memo]
        if old:
            lp[torch.tensor(old, device=self.device)] = torch.stack([self.memo[keys[i]][0] for i in old])
        if not fresh:
            return lp
        idx = torch.tensor(fresh, device=self.device)
        lp[idx], covers = _score_rows(lm, hidden[idx], beam.state[idx], tables, cover)
        self.memo.update(zip((keys[i] for i in fresh), zip(lp[idx], covers, strict=True), strict=True))
        self._add(beam, idx, covers)
        return lp

    def _add(self, beam: _Beam, idx: torch.Tensor, covers: torch.Tensor) -> None:
        """Rows idx (their covering masses ``covers``) add to every byte ahead of their node."""
        target = self.node[beam.state[idx]][:, None] + 1 + torch.arange(covers.shape[1], device=self.device)[None, :]
        values = beam.log_p[idx][:, None] + covers
        keep = (target <= self.end) & torch.isfinite(values)
        _add_at(self.lower, target[keep], values[keep])

    def leave(self, states: torch.Tensor, log_p: torch.Tensor) -> None:
        """Prefixes left unscored at their nodes: each may add its probability past its node."""
        _add_at(self.missed, self.node[states], log_p)

    def finish(self, beam: _Beam, rows: torch.Tensor, last: torch.Tensor, scores: torch.Tensor) -> None:
        """Complete paths (tokenizations of the whole text) found this step."""
        for path, score in zip(torch.cat([beam.tokens[rows], last[:, None]], 1).tolist(), scores.tolist(), strict=True):
            self.complete.setdefault(tuple(path), score)

    def bounds(self, tighter: np.ndarray | None, pending: Pending) -> tuple[np.ndarray, np.ndarray, float, float]:
        """lower and upper log P(s<j) for every byte, and the text's marginal's bounds: the upper
        adds the mass left out at nodes before j and that of the rows still to score
        (``pending``), and is no looser than ``tighter`` (an earlier walk's)."""
        lower, missed = self.lower.cpu().numpy(), self.missed
        if pending is not None:
            missed = missed.clone()
            _add_at(missed, self.node[pending[0]], pending[1])
        reach = np.concatenate([[-math.inf], torch.logcumsumexp(missed, 0).cpu().numpy()[:-1]])
        upper = np.logaddexp(lower, reach)
        if tighter is not None:
            upper = np.maximum(lower, np.minimum(upper, tighter))
        found = np.fromiter(self.complete.values(), float, len(self.complete))
        text = float(np.logaddexp.reduce(found)) if len(found) else -math.inf
        return lower, upper, text, float(np.logaddexp(text, reach[-1]))


def _walk(lm: LM, lattice: Lattice, ctx: ContextState, width: int, found: _Found, tables: Tables, cover: _Cover,
          progress: Progress | None, should_stop: StopCheck) -> Iterator[tuple[int, bool, Pending]]:
    """One walk of ``width`` prefixes per node (the beam's rule, ``beam._choose``), adding to
    ``found``: (steps, stopped, the rows still to score) after every step. A stopped walk leaves
    its unscored rows as left out, so the bounds still hold."""
    best = torch.full((len(lattice.nodes), width), -math.inf, dtype=torch.float64, device=lm.device)
    best[0, 0] = 0.0
    beam = _Beam(torch.tensor([0], device=lm.device), torch.zeros(1, dtype=torch.float64, device=lm.device),
                 torch.zeros((1, 0), dtype=torch.long, device=lm.device))
    cache, hidden, step = copy.deepcopy(ctx.cache), ctx.last_hidden, 0
    with torch.inference_mode():
        while True:
            lp = found.score(lm, hidden, beam, tables, cover)
            (rows, last, scores), (parent, cols, states, values), (left_states, left) = _choose(beam, lp, tables, best, width)
            found.leave(left_states, left)
            found.finish(beam, rows, last, scores)
            step += 1
            if progress is not None:
                progress(step, lattice.end)
            if not len(parent):
                yield step, False, None
                return
            if should_stop():
                found.leave(states, values)
                yield step, True, None
                return
            yield step, False, (states, values)
            beam, hidden = advance(lm, cache, beam, tables.tokens[beam.state], (parent, cols, states, values),
                                   f"a prefix walk of width {width}", step)


def prefix_masses(lm: LM, lattice: Lattice, context: Sequence[int] | ContextState, *,
                  widths: Sequence[int] = AUTO_WIDTHS, tolerance: float = DEFAULT_TOLERANCE,
                  time_budget: float | None = None, progress: Progress | None = None,
                  should_stop: StopCheck | None = None) -> Iterator[PrefixMasses]:
    """The bounds after every step of walks widened round by round (``widths``) until every
    byte's bounds lie within ``tolerance`` nats, a widening raised no lower bound by that much,
    the time budget ran out, or should_stop; the last is final. The rounds share what they
    scored, so each bound is over every prefix any round scored. One width: one walk. progress
    hears each walk's steps, and its round hook (progress.RoundHook) the rounds."""
    started = time.perf_counter()
    deadline = None if time_budget is None else started + time_budget
    found, ctx = _Found(lattice, lm.device), lm.state_of(context)
    tables, cover = _node_tables(lattice, lm.device), _covers(lattice, lm.vocab, lm.device)  # once for every round
    finished: tuple[int, ...] = ()
    upper: np.ndarray | None = None
    steps = 0

    def user_stop() -> bool:
        return should_stop is not None and bool(should_stop())

    def stop() -> bool:
        return (deadline is not None and time.perf_counter() > deadline) or user_stop()

    def masses(steps: int, done: bool, cancelled: bool = False, pending: Pending = None) -> PrefixMasses:
        lower, up, text, text_upper = found.bounds(upper, pending)
        return PrefixMasses(lower, up, text, text_upper, finished, steps, len(found.memo),
                            time.perf_counter() - started, done, cancelled)

    on_round = round_hook(progress)
    gap: float | None = None  # the last finished round's (PrefixMasses.gap)
    for i, width in enumerate(widths):
        if on_round is not None:
            on_round(i, len(widths), width, gap)
        found.missed.fill_(-math.inf)  # a round's own left-out mass bounds what it did not score
        before = found.lower.cpu().numpy()
        stopped = False
        for steps, stopped, pending in _walk(lm, lattice, ctx, width, found, tables, cover, progress, stop):
            if not stopped and pending is not None:
                yield masses(steps, False, pending=pending)
        if stopped:  # Stop or the time budget: what was scored is kept, and the bounds hold
            yield masses(steps, not user_stop(), user_stop())
            return
        finished = finished + (width,)
        last = masses(steps, False)
        upper, gap = last.upper, last.gap
        widened = i > 0 and float(np.max(last.lower[1:] - before[1:])) < tolerance
        if last.gap < tolerance or widened or i == len(widths) - 1 or stop():
            if on_round is not None:
                on_round(len(finished), len(finished), width, gap)
            yield masses(steps, True, user_stop())
            return
