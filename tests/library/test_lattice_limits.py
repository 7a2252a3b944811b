"""The lattice at its limits: input it refuses (empty text, lone surrogates, unknown models, non-paths)
and huge texts, whose counts stay exact and whose enumeration is refused with the count and budget."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

import pytest

from marginal_core.ground.errors import EmptyTextError, TooManyPathsError, UnknownModelError, UnrepresentableTextError
from marginal_core.lattice.graph import format_count, lattice_of
from tests.tokenizer_cases import EMBEDDED, GEMMA, SMOL, embedded, reference

# --------------------------------------------------------------------------------------------
# Bad input and huge texts


@pytest.mark.parametrize("name", EMBEDDED)
def test_empty_text_is_refused(name):
    with pytest.raises(EmptyTextError):
        lattice_of("", embedded(name))


@pytest.mark.parametrize("name", EMBEDDED)
def test_lone_surrogates_are_refused_with_a_message(name):
    """A command line's bytes that are not UTF-8 reach Python as lone surrogates: a clear error
    for the text and the context, not the tokenizer's TypeError (issue 13, hostile input)."""
    from marginal_core.lattice.conditioning import context_ids

    with pytest.raises(UnrepresentableTextError, match="character 2 is a lone surrogate U[+]DCFF"):
        lattice_of("a\udcffb", embedded(name))
    with pytest.raises(UnrepresentableTextError, match="context is not valid Unicode"):
        context_ids(embedded(name), "Question:\ud800")


def test_unknown_model_names_the_known_ones():
    from marginal_core.models import load_tokenizer

    with pytest.raises(UnknownModelError) as err:
        load_tokenizer("no-such-model-here")
    message = str(err.value)
    assert "no-such-model-here" in message
    assert GEMMA in message and SMOL in message


@pytest.mark.parametrize("name", EMBEDDED)
def test_rank_refuses_what_is_not_a_path(name):
    lat = lattice_of("Hello world", embedded(name))
    canon = lat.canonical
    with pytest.raises(ValueError):
        lat.rank(canon[:-1])  # stops early
    with pytest.raises(ValueError):
        lat.rank(canon[::-1])  # wrong order
    with pytest.raises(ValueError):
        lat.rank(canon, max_len=len(canon) - 1)  # too long for the bound
    assert lat.count(max_len=lat.min_len - 1) == 0 and lat.enumerate(max_len=lat.min_len - 1) == []


# A separator that every path must cut at: its only byte, 0x07 (BEL), is no part of any longer
# token surface in either vocabulary (checked below), so every path has nodes right before and
# after each separator and the count of (block + separator) * m is (count(block) * arcs(sep))^m.
SEPARATOR = "\x07"
BLOCK = "Hello, wörld! 日本 🎉 e\u0301"


def truncated_power(poly: list[int], m: int, degree: int) -> list[int]:
    """The first degree + 1 coefficients of poly(x)^m."""

    def mul(a, b):
        out = [0] * (degree + 1)
        for i, x in enumerate(a):
            for j, y in enumerate(b[: degree + 1 - i]):
                out[i + j] += x * y
        return out

    result, base = [1] + [0] * degree, poly[: degree + 1]
    while m:
        if m & 1:
            result = mul(result, base)
        base, m = mul(base, base), m >> 1
    return result


@contextmanager
def unlimited_int_digits():
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(old)


@pytest.fixture(scope="module")
def huge():
    """A 100,000-character Gemma lattice, built and counted once (a few seconds)."""
    tok = embedded(GEMMA)
    unit = BLOCK + SEPARATOR
    repeats = 100_000 // len(unit)
    text = (unit * (repeats + 1))[:100_000]
    assert len(text) == 100_000 and text.endswith(BLOCK[: 100_000 - repeats * len(unit)])
    started = time.perf_counter()
    lat = lattice_of(text, tok)
    count = lat.count()
    return tok, text, unit, repeats, lat, count, time.perf_counter() - started


def test_huge_text_count_is_exact(huge):
    tok, text, unit, repeats, lat, count, seconds = huge
    ref = reference(tok)
    sep = SEPARATOR.encode()
    assert all(s == sep for s in ref.pieces if sep in s)  # no longer token contains the byte
    sep_arcs = len(ref.arcs(sep)[0])
    tail = text[repeats * len(unit) :]
    expected = (ref.count(BLOCK.encode()) * sep_arcs) ** repeats * ref.count(tail.encode())
    assert count == expected
    assert count > 10**10_000
    assert seconds < 30, f"building and counting took {seconds:.1f} s"  # ~4 s on an idle machine

    # Under a length bound a little above the shortest, by the same cut argument on polynomials:
    # the generating function of path lengths is (P_block(x) * arcs * x)^m * P_tail(x).
    def poly(data):
        lengths = ref.length_counts(data)
        return [lengths.get(d, 0) for d in range(max(lengths) + 1)]

    unit_poly = [0] + [c * sep_arcs for c in poly(BLOCK.encode())]
    tail_poly = poly(tail.encode())
    unit_low = min(d for d, c in enumerate(unit_poly) if c)
    tail_low = min(d for d, c in enumerate(tail_poly) if c)
    assert lat.min_len == unit_low * repeats + tail_low
    slack = 2  # tokens allowed beyond the shortest path
    bound = lat.min_len + slack
    series = truncated_power(unit_poly[unit_low:], repeats, slack)  # x^(unit_low * repeats) factored out
    tail_series = tail_poly[tail_low:]
    expected_bounded = sum(
        series[i] * tail_series[j]
        for i in range(slack + 1)
        for j in range(len(tail_series))
        if i + j <= slack
    )
    assert lat.count(max_len=bound) == expected_bounded > 0


def test_huge_text_enumeration_is_refused(huge):
    *_, lat, count, _ = huge
    with pytest.raises(TooManyPathsError) as err:
        lat.enumerate()
    message = str(err.value)
    assert "100,000" in message  # the budget
    with unlimited_int_digits():
        digits = len(str(count))
    # The count, in full or by its order of magnitude.
    shown = (f"{count:,}" if digits < 5000 else "", digits - 1, f"{digits - 1:,}", f"{digits:,}")
    assert any(str(x) in message for x in shown if x)


@pytest.mark.parametrize("name", EMBEDDED)
def test_enumeration_refusal_names_count_and_budget(name):
    lat = lattice_of("Marginal probabilities sum over all tokenizations. " * 8, embedded(name))
    count = lat.count()
    assert count > 10**60  # docs/design.md point 6: counts pass 10^60 on a few hundred characters
    with pytest.raises(TooManyPathsError) as err:
        lat.enumerate(budget=1000)
    assert format_count(count) in str(err.value) and "1,000" in str(err.value)
    bound = len(lat.canonical) + 1
    assert lat.count(bound) > len(lat.off_by_one())
    with pytest.raises(TooManyPathsError) as err:
        lat.enumerate(max_len=bound, budget=len(lat.off_by_one()))
    assert format_count(lat.count(bound)) in str(err.value)
    assert f"at most {bound} tokens" in str(err.value)


def test_long_text_counts_and_ranks_stay_exact_across_limbs():
    """A 300-character text: counts beyond 2^64 (several 62-bit limbs), checked exactly."""
    tok = embedded(GEMMA)
    text = ("The lattice of a sentence: tokens 日本語 and émoji 🎉 all count. " * 5)[:300]
    lat = lattice_of(text, tok)
    ref = reference(tok)
    count = lat.count()
    assert count == ref.count(lat.data) > 2**124
    bound = len(lat.canonical) + 15
    assert lat.count(bound) == ref.count(lat.data, max_len=bound) > 2**64
    ranks = [0, 1, 2**62 - 1, 2**62, 2**64 + 12345, count // 3, count - 2, count - 1]
    for rank, path in zip(ranks, lat.unrank(ranks)):
        assert lat.path_bytes(path) == lat.data
        assert lat.rank(path) == rank


@pytest.mark.parametrize(
    "mantissa, base, power, text",
    [(0, 10, 0, "0"), (12345, 10, 0, "12,345"), (1, 10, 29, f"{10**29:,}"),
     (1, 10, 30, "1.00e30"), (123456789, 10, 40, "1.23e48"), (1, 2, 60000, "6.30e18061")],
)
def test_format_count_is_exact_to_three_digits_at_any_size(mantissa, base, power, text):
    assert format_count(mantissa * base**power) == text
