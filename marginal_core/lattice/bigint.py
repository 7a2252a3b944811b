"""Exact integers beyond 64 bits as fixed-width numpy limb arrays.

Path counts pass 10^60, yet unranking ten thousand paths must run at numpy speed. Each number
is stored as W limbs of 62 bits, most significant first, in the last axis of an int64 array;
comparison and subtraction then vectorize over samples and arcs.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

LIMB_BITS = 62
_MASK = (1 << LIMB_BITS) - 1


def width(max_value: int) -> int:
    """Number of limbs needed to hold every integer in [0, max_value]."""
    return max(1, -(-max_value.bit_length() // LIMB_BITS))


def to_limbs(values: Iterable[int] | np.ndarray, limbs: int) -> np.ndarray:
    """Non-negative Python ints (any shape) as an int64 array with a trailing limb axis."""
    arr = np.asarray(values, dtype=object)
    if limbs == 1:
        return arr.astype(np.int64)[..., None]
    out = np.empty(arr.shape + (limbs,), dtype=np.int64)
    for w in range(limbs):
        shift = LIMB_BITS * (limbs - 1 - w)
        out[..., w] = ((arr >> shift) & _MASK).astype(np.int64) if arr.size else 0
    return out


def from_limbs(arr: np.ndarray) -> list[int]:
    """Back to Python ints, flattening all but the limb axis."""
    flat = arr.reshape(-1, arr.shape[-1])
    if flat.shape[1] == 1:
        return flat[:, 0].tolist()
    result = [0] * flat.shape[0]
    for w in range(flat.shape[1]):
        column = flat[:, w].tolist()
        result = [(r << LIMB_BITS) | c for r, c in zip(result, column)]
    return result


def less_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise a <= b for broadcastable limb arrays."""
    if a.shape[-1] == 1:
        return a[..., 0] <= b[..., 0]
    decided_less = np.zeros(np.broadcast_shapes(a.shape, b.shape)[:-1], dtype=bool)
    equal = np.ones_like(decided_less)
    for w in range(a.shape[-1]):
        aw, bw = a[..., w], b[..., w]
        decided_less |= equal & (aw < bw)
        equal &= aw == bw
    return decided_less | equal


def subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b for limb arrays of equal shape where a >= b elementwise."""
    if a.shape[-1] == 1:
        return a - b
    out = np.empty_like(a)
    borrow = np.zeros(a.shape[:-1], dtype=np.int64)
    for w in range(a.shape[-1] - 1, -1, -1):
        diff = a[..., w] - b[..., w] - borrow
        borrow = (diff < 0).astype(np.int64)
        out[..., w] = diff + (borrow << LIMB_BITS)
    return out
