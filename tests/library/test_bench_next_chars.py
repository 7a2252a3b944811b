"""bench/next_chars/measures.py: the pure helpers: when a stream's values settle and certify, the widths it
reached by a time, and how a disagreement with genlm-bytes is told by our certificate."""

from __future__ import annotations

from pytest import approx

from bench.next_chars.measures import (
    by_first_byte,
    certified_at,
    settled_at,
    top_bytes,
    verdict,
    whole_settled_at,
    width_at,
)
from marginal_core.search.next.results import CERTIFIED, END, NextChar, NextCharacters


def result(seconds: float, rows: list[tuple[bytes, float, float, float]]) -> NextCharacters:
    """A stream's result at ``seconds`` with rows (bytes, point, lower, upper)."""
    chars = tuple(NextChar(b.decode() if b else END, b, p, lo, up, 0.0, 0.0, CERTIFIED) for b, p, lo, up in rows)
    return NextCharacters("pi is 3.1", "m", None, chars, (), {"canonical": 0.5, "healed": 0.1}, seconds, 1, 1, False)


STREAM = [
    result(0.5, [(b"4", 0.80, 0.10, 1.00), (b"5", 0.05, 0.01, 1.00)]),
    result(2.0, [(b"4", 0.905, 0.50, 0.95), (b"5", 0.04, 0.03, 0.40)]),
    result(12.0, [(b"4", 0.90, 0.897, 0.903), (b"5", 0.041, 0.040, 0.045), (b"", 0.01, 0.009, 0.011)]),
]


def test_settled_certified_and_widths():
    assert top_bytes(STREAM[-1]) == [ord("4"), ord("5"), 256]
    assert settled_at(STREAM, 0.01) == 2.0  # "4" within 0.01 of 0.90, "5" of 0.041, end's 0.01 counts 0 there
    assert certified_at(STREAM, 0.01) == 12.0
    assert certified_at(STREAM[:2], 0.01) is None
    assert width_at(STREAM, 1.0) == approx(0.99) and width_at(STREAM, 10.0) == approx(0.45)
    assert width_at(STREAM, 0.1) is None


def test_a_first_byte_shared_by_two_characters_sums_them():
    found = result(1.0, [("é".encode(), 0.3, 0.29, 0.31), ("è".encode(), 0.2, 0.19, 0.21), (b"a", 0.1, 0.1, 0.1)])
    assert by_first_byte(found)[0xC3] == approx((0.5, 0.48, 0.52))
    assert top_bytes(found) == [0xC3, ord("a")]


def test_the_verdict_is_told_by_the_interval():
    assert verdict((0.5, 0.495, 0.503), 0.491, 0.01) == "agree"
    assert verdict((0.5, 0.3, 0.7), 0.1, 0.01) == "ours wider than tol"
    assert "below our lower bound" in verdict((0.5, 0.495, 0.503), 0.45, 0.01)
    assert "above our upper bound" in verdict((0.5, 0.495, 0.503), 0.55, 0.01)


def test_whole_characters_settle_when_the_last_top_five_are_whole_and_near():
    """issue 65's speed: the first result listing the last result's top characters, whole, each
    within tol of its last value."""
    xue = "学".encode()
    stream = [result(0.3, [(b"", 0.9, 0.0, 1.0), (xue, 0.05, 0.0, 1.0)]), result(1.1, [(xue, 0.41, 0.0, 1.0)]),
              result(2.0, [(xue, 0.423, 0.42, 0.43)])]
    assert whole_settled_at(stream, 0.02) == 1.1 and whole_settled_at(stream, 0.001) == 2.0
