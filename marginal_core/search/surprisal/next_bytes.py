"""What the model expected next at every byte of a text, summed over tokenizations (docs/design.md,
"Next character"). No torch: the prefix search's sums of P(s<j, next byte c) and the bounds on
P(s<j) give P(next byte = c | s<j) for all 256 bytes c, tokenizer-independent, so two models'
expectations compare on one axis. A character of several UTF-8 bytes is counted by its first
byte's mass (every character that begins with that byte), and labelled as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marginal_core.ground.errors import MarginalError

GLTR_BINS: tuple[int, ...] = (1, 3, 10)  # GLTR's rank bins: top 1, top 3, top 10, the rest


@dataclass(frozen=True)
class ExpectedByte:
    """One candidate for the byte at j of a text, as its Surprisal expected it: the byte, the
    character it is or begins (``label``), its probability given s<j from what the search scored
    (``probability``) and the interval the search certifies for it."""

    byte: int
    label: str
    probability: float
    lower: float
    upper: float


@dataclass(frozen=True)
class NextBytes:
    """At each byte j of the lattice's bytes ``data``: ``entropy`` (nats) of the next byte, the
    rest (end of string, special tokens, and what the search left unscored) as one outcome, and
    ``rank``, 1 for the most probable, of the byte that came (0 where j is not reached yet).
    ``lower[j, c]``: log P(s<j, next byte c) from the exactly scored prefixes and ``open[j]`` the
    log mass that may add to it; None where only entropy and rank were kept (a scan's store)."""

    data: bytes
    entropy: np.ndarray
    rank: np.ndarray
    lower: np.ndarray | None = None
    open: np.ndarray | None = None

    @classmethod
    def of(cls, data: bytes, lower: np.ndarray, open_mass: np.ndarray, prefix_lower: np.ndarray) -> NextBytes:
        """Entropy and rank from the sums (``prefix_lower``: the bounds' lower ends on log P(s<j))."""
        p = point(lower, prefix_lower[: len(lower)])
        rest = np.clip(1.0 - p.sum(axis=1), 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(p > 0, -p * np.log(p), 0.0).sum(axis=1) + np.where(rest > 0, -rest * np.log(rest), 0.0)
            came = p[np.arange(len(p)), np.frombuffer(data[: len(p)], dtype=np.uint8)]
            rank = 1 + (p > came[:, None]).sum(axis=1)
        reached = np.isfinite(prefix_lower[: len(lower)])
        return cls(data, np.where(reached, terms, np.nan), np.where(reached, rank, 0), lower, open_mass)

    def expected(self, j: int, prefix_lower: np.ndarray, prefix_upper: np.ndarray, k: int = 5) -> list[ExpectedByte]:
        """The k most probable next bytes at lattice byte j, most probable first, each with the
        interval [its scored mass over upper P(s<j), its mass with all that is open over lower P(s<j)]."""
        if self.lower is None or self.open is None:
            raise MarginalError("this surprisal keeps the entropy and rank at each byte, not the next-character "
                                "distribution (a scan's store): compute it again with mc.surprisal")
        if not 0 <= j < len(self.lower):
            raise MarginalError(f"byte {j} is outside the text's {len(self.lower)} bytes")
        p = point(self.lower[j : j + 1], prefix_lower[j : j + 1])[0]
        order = np.argsort(-p, kind="stable")[:k]
        low, high = self.intervals(j, prefix_lower, prefix_upper)
        return [ExpectedByte(int(c), label(self.data, j, int(c)), float(p[c]), float(low[c]), float(high[c]))
                for c in order.tolist() if p[c] > 0]


    def intervals(self, j: int, prefix_lower: np.ndarray, prefix_upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For all 256 bytes c, the interval P(next byte = c | s<j) lies in: the scored mass over
        the upper bound on P(s<j), and the scored and open mass over its lower bound (at most 1)."""
        assert self.lower is not None and self.open is not None  # expected() checked
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            low = np.nan_to_num(np.exp(self.lower[j] - prefix_upper[j]), nan=0.0)
            high = np.minimum(np.exp(np.logaddexp(self.lower[j], self.open[j]) - prefix_lower[j]), 1.0)
        return low, np.nan_to_num(high, nan=1.0)


def point(lower: np.ndarray, prefix_lower: np.ndarray) -> np.ndarray:
    """P(next byte = c | s<j) from what was scored: the sums over the lower bound on P(s<j) (0
    where j is not reached)."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(lower - prefix_lower[:, None])
    return np.where(np.isfinite(prefix_lower)[:, None], np.nan_to_num(p, nan=0.0), 0.0)


def label(data: bytes, j: int, c: int) -> str:
    """What byte c at j would write: the character it completes with the bytes of the text's
    unfinished character before j, or, a lead byte, the range of characters it begins ("À…ÿ"), or
    the byte in hex where no character can."""
    i = j
    while i > 0 and j - i < 3 and 0x80 <= data[i - 1] < 0xC0:
        i -= 1
    pending = data[i - 1 : j] if i > 0 and data[i - 1] >= 0xC0 else b""
    if pending and len(pending) >= _length(pending[0]):
        pending = b""  # the character before j is complete
    head = pending + bytes([c])
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError:
        pass
    need = _length(head[0])
    if need > len(head):
        lo = _first_valid(head, need, range(0x80, 0xC0), 0x80)
        hi = _first_valid(head, need, range(0xBF, 0x7F, -1), 0xBF)
        if lo is not None and hi is not None:
            return f"{lo}…{hi}"
    return f"\\x{c:02x}"


def _first_valid(head: bytes, need: int, seconds: range, fill: int) -> str | None:
    """The first character of ``need`` bytes that begins with head, filled with ``fill`` after
    its second byte, trying each of ``seconds`` there (the lead bytes E0, ED, F0 and F4 narrow it)."""
    for second in seconds if len(head) == 1 else range(1):
        body = head + (bytes([second]) if len(head) == 1 else b"")
        try:
            return (body + bytes([fill]) * (need - len(body))).decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _length(lead: int) -> int:
    """How many bytes the UTF-8 character a lead byte begins has (1 for one that begins none)."""
    return 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 1


def gltr_bin(rank: int) -> int:
    """GLTR's bin of a rank: 0 top 1, 1 top 3, 2 top 10, 3 the rest (and -1 not reached)."""
    if rank <= 0:
        return -1
    return next((i for i, top in enumerate(GLTR_BINS) if rank <= top), len(GLTR_BINS))

