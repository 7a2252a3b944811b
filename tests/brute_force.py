"""The float64 reference the estimator and surprisal tests compare with: a copy of a model in
float64, and plain transformers forwards over context + path (no trie, no KV sharing, no
library scoring), many paths in one left-padded batch."""

from __future__ import annotations

import copy
import dataclasses

import torch

from marginal_core.lm.adapter import LM

# Paths per padded forward: the rows' logits over the vocabulary stay within a few hundred MB.
BATCH = 16

_FLOAT64: dict[str, LM] = {}


def float64_lm(lm: LM) -> LM:
    """The same model in float64, as an LM (kept until :func:`forget_float64`): a search or an
    estimator run on it computes what the brute force does, so a comparison measures the
    algorithm, not float32's rounding in two orders."""
    if lm.name not in _FLOAT64:
        loaded = dataclasses.replace(lm.loaded, model=copy.deepcopy(lm.model).double(), dtype=torch.float64)
        _FLOAT64[lm.name] = LM(loaded)
    return _FLOAT64[lm.name]


def forget_float64() -> None:
    """Free the float64 copies (3.2 GB for both models), as each test module that used them ends."""
    _FLOAT64.clear()


def next_token_log_probs(lm64: LM, context: list[int], paths: list[tuple[int, ...]]) -> list[torch.Tensor]:
    """For each path, log p(next token | context + path[:i]) for i = 0 .. len(path): a (len(path)
    + 1, vocab) float64 tensor from a plain forward over context + path. Paths go in batches of
    BATCH, left-padded under an attention mask with their own positions, so that every row reads
    only its own tokens and the last len(path) + 1 positions are each path's."""
    rows: list[torch.Tensor] = []
    for start in range(0, len(paths), BATCH):
        group = [list(context) + list(p) for p in paths[start : start + BATCH]]
        width = max(map(len, group))
        ids = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for i, seq in enumerate(group):
            ids[i, width - len(seq) :] = torch.tensor(seq)
            mask[i, width - len(seq) :] = 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        keep = max(len(p) for p in paths[start : start + BATCH]) + 1
        with torch.inference_mode():  # the head's rows from the context's last position on (Gemma's softcap too)
            logits = lm64.model(ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits.double()
        log_probs = torch.log_softmax(logits, dim=-1)
        rows += [log_probs[i, keep - len(p) - 1 :] for i, p in enumerate(paths[start : start + BATCH])]
    return rows


def path_log_prob(rows: torch.Tensor, path: tuple[int, ...]) -> float:
    """log p(path | context) from its next_token_log_probs rows."""
    return sum(float(rows[i, t]) for i, t in enumerate(path))


def lattice_paths(lattice) -> list[tuple[int, tuple[int, ...]]]:
    """Every (node, path from byte 0 to it), the empty path and the complete paths included."""
    found, stack = [], [(0, ())]
    while stack:
        node, path = stack.pop()
        found.append((node, path))
        if node < lattice.end:
            arcs = lattice.out_arcs(node)
            stack.extend((int(lattice.arc_end[a]), path + (int(lattice.arc_token[a]),)) for a in arcs)
    return found


def ordinary_tokens(lattice) -> tuple[list[tuple[int, bytes]], set[tuple[int, int]]]:
    """The (id, surface) of every token that writes bytes (byte pieces aside), and the lattice's
    byte-fallback arcs as (start, id)."""
    vocab = lattice.vocab
    pieces = {t for t in vocab.byte_tokens if t is not None}
    ordinary = [(v, s) for v, s in enumerate(vocab.surfaces) if s and v not in pieces]
    fallback = {(int(lattice.arc_start[a]), int(lattice.arc_token[a])) for a in range(lattice.num_arcs)
                if int(lattice.arc_token[a]) in pieces}
    return ordinary, fallback


def covering_tokens(lattice, ordinary: list[tuple[int, bytes]], fallback: set[tuple[int, int]]) -> dict[int, list[int]]:
    """Node m < end -> the tokens that begin with the bytes from m to the end (docs/design.md point
    13's covering tokens; the byte-fallback piece where the lattice has it at the last byte)."""
    data, n = lattice.data, lattice.end
    return {m: [v for v, s in ordinary if s.startswith(data[m:])] + [t for at, t in fallback if at == m == n - 1]
            for m in range(n)}


def brute_prefix_log_prob(lm64: LM, lattice, context: list[int]) -> float:
    """log P(the lattice's bytes as a prefix) by enumeration (point 13): every path to a node m
    before the end, times the mass of the tokens that cover the bytes from m to the end."""
    covering = covering_tokens(lattice, *ordinary_tokens(lattice))
    heads = [(m, path) for m, path in lattice_paths(lattice) if m < lattice.end]
    terms = [path_log_prob(rows, path) + float(torch.logsumexp(rows[-1, covering[m]], 0))
             for (m, path), rows in zip(heads, next_token_log_probs(lm64, context, [p for _, p in heads]), strict=True)]
    return float(torch.logsumexp(torch.tensor(terms, dtype=torch.float64), 0))
