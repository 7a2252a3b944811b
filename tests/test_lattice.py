"""The tokenization lattice (docs/design.md points 3 to 6) against an independent brute force.

Every check runs on real tokenizers: the two embedded ones (Gemma 3: SentencePiece style with
byte fallback and no dummy prefix; SmolLM2: byte-level BPE) and a Llama-2-style SentencePiece
BPE model trained in this session (dummy prefix and byte fallback). ``tests.tokenizer_cases.Reference``
rebuilds each lattice from the vocabulary's surfaces with a dict and plain recursion.
"""

from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from marginal_core.errors import (
    EmptyTextError,
    NormalizationError,
    TooManyPathsError,
    UnknownModelError,
    UnrepresentableTextError,
)
from marginal_core.lattice import build_lattice, format_count
from marginal_core.sampling import sample_uniform
from tests.tokenizer_cases import (
    EMBEDDED,
    GEMMA,
    SMOL,
    SPACE_PIECE,
    UNSEEN_CHARACTERS,
    canonical,
    embedded,
    examples,
    expected_data,
    llama_style,
    llama_with_unk,
    reference,
    spells,
    texts,
)

PROPERTY = settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENUMERATE_UP_TO = 3000  # paths; beyond this the checks unrank a sample of ranks instead


@pytest.fixture(scope="module")
def llama():
    return llama_style()


def path_arcs(lat, path):
    """(start, end, token) of each token of a path."""
    arcs, node = [], 0
    for token in path:
        end = node + len(lat.vocab.surface(token))
        arcs.append((node, end, token))
        node = end
    return arcs


def check_against_reference(tokenizer, text: str, byte_fallback: str = "unknown_chars"):
    """Every lattice invariant, checked against the reference on one text.

    Returns None where the tokenizer itself cannot spell the text (SmolLM2 has no token for
    some bytes and silently drops them); build_lattice must refuse such a text.
    """
    ref = reference(tokenizer)
    if not spells(tokenizer, text):
        with pytest.raises((UnrepresentableTextError, NormalizationError)):
            build_lattice(text, tokenizer, byte_fallback=byte_fallback)
        return None
    lat = build_lattice(text, tokenizer, byte_fallback=byte_fallback)
    assert lat.text == text
    assert lat.data == expected_data(tokenizer, text)

    # The canonical tokenization is the tokenizer's own and a path of the lattice.
    assert lat.canonical == canonical(tokenizer, text)
    assert lat.path_bytes(lat.canonical) == lat.data
    total = lat.count()
    r = lat.rank(lat.canonical)
    assert 0 <= r < total and lat.unrank([r]) == [lat.canonical]

    # Exact counts, unbounded and for length bounds around the interesting values.
    lengths = ref.length_counts(lat.data, byte_fallback)
    assert total == sum(lengths.values())
    assert lat.min_len == min(lengths)
    n = len(lat.canonical)
    for bound in {0, lat.min_len - 1, lat.min_len, n - 1, n, n + 1, lat.default_max_len(), max(lengths)}:
        assert lat.count(bound) == sum(c for length, c in lengths.items() if length <= bound), bound
    assert lat.default_max_len() == n + 10

    if total <= ENUMERATE_UP_TO:
        paths = lat.enumerate()
        assert len(paths) == total == len(set(paths))
        assert set(paths) == ref.paths(lat.data, byte_fallback)
        assert all(lat.path_bytes(p) == lat.data for p in paths)
        # Enumeration is in rank order, and rank/unrank are inverse bijections onto range(count).
        assert [lat.rank(p) for p in paths] == list(range(total))
        assert lat.unrank(list(range(total))) == paths
        # Only arcs on some path are kept, and the nodes are exactly the offsets paths visit.
        used = {arc for p in paths for arc in path_arcs(lat, p)}
        assert set(lat.arcs) == used and len(lat.arcs) == lat.num_arcs
        assert lat.num_nodes == len({x for a in used for x in a[:2]})
        # The same under a length bound: the canonical length keeps some paths and drops others.
        bounded = lat.enumerate(max_len=n)
        assert set(bounded) == {p for p in paths if len(p) <= n}
        assert [lat.rank(p, max_len=n) for p in bounded] == list(range(len(bounded)))
        assert lat.unrank(list(range(len(bounded))), max_len=n) == bounded
    else:
        step = total // 97 + 1
        ranks = list(range(0, total, step)) + [total - 1]
        for rank, path in zip(ranks, lat.unrank(ranks)):
            assert lat.path_bytes(path) == lat.data
            assert lat.rank(path) == rank
    assert lat.arcs == sorted(lat.arcs)
    return lat


# --------------------------------------------------------------------------------------------
# Properties over arbitrary Unicode


@PROPERTY
@given(text=texts(max_chars=8))
@example(text="Hello world")
@example(text="  \t\n\n x")
@example(text="日本語 🎉 é")
@example(text="e\u0301\u0301")
@example(text="👩\u200d👩\u200d👧")
@example(text="\x00<|endoftext|><bos>")
def test_lattice_matches_brute_force(embedded_tokenizer, text):
    check_against_reference(embedded_tokenizer, text)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts(max_chars=6))
@example(text="Hello 日本")
def test_byte_fallback_everywhere_matches_brute_force(embedded_tokenizer, text):
    lat = check_against_reference(embedded_tokenizer, text, byte_fallback="everywhere")
    assume(lat is not None)
    assert lat.count() >= build_lattice(text, embedded_tokenizer).count()
    vocab = lat.vocab
    if vocab.has_byte_fallback:
        # A byte-fallback arc on every byte: the all-bytes spelling is always a path.
        all_bytes = tuple(vocab.byte_tokens[b] for b in lat.data)
        assert lat.path_bytes(all_bytes) == lat.data
        lat.rank(all_bytes)


@PROPERTY
@given(text=texts(max_chars=8))
@example(text="the Hat")
@example(text=" leading space")
@example(text="  two")
@example(text="<s>x</s>")
@example(text=UNSEEN_CHARACTERS)
def test_llama_style_lattice_matches_brute_force(llama, text):
    check_against_reference(llama, text)


@PROPERTY
@given(text=texts(max_chars=12))
def test_every_sampled_path_spells_the_text(embedded_tokenizer, text):
    """Longer texts than the brute force handles: sampled paths still spell the bytes."""
    assume(spells(embedded_tokenizer, text))
    lat = build_lattice(text, embedded_tokenizer)
    assert lat.data == text.encode("utf-8")
    assert lat.path_bytes(lat.canonical) == lat.data
    for bound in (None, len(lat.canonical)):
        batch = sample_uniform(lat, 20, max_len=bound, seed=1)
        paths = batch.tolist()
        assert len(paths) == min(20, lat.count(bound)) == len(set(paths))
        for path in paths:
            assert lat.path_bytes(path) == lat.data
            assert bound is None or len(path) <= bound
            assert lat.unrank([lat.rank(path, max_len=bound)], max_len=bound) == [path]


# --------------------------------------------------------------------------------------------
# Normalization (docs/design.md point 4)


@given(prefix=texts(max_chars=4), suffix=st.text(max_size=3).filter(lambda s: SPACE_PIECE not in s))
@settings(max_examples=examples(15), deadline=None)
def test_u2581_is_rejected_by_sentencepiece_tokenizers(prefix, suffix):
    """Gemma maps U+2581 to a space before tokenizing: no lattice over the written text exists."""
    text = prefix + SPACE_PIECE + suffix
    with pytest.raises(NormalizationError) as err:
        build_lattice(text, embedded(GEMMA))
    message = str(err.value)
    assert "U+2581" in message and "normaliz" in message
    assert f"byte {len(prefix.encode())}" in message  # where the rewrite happens
    # A byte-level tokenizer reads U+2581 as three ordinary bytes.
    if spells(embedded(SMOL), text):
        lat = build_lattice(text, embedded(SMOL))
        assert lat.data == text.encode("utf-8") and lat.path_bytes(lat.canonical) == lat.data


def test_u2581_in_a_dummy_prefix_tokenizer_is_rejected(llama):
    with pytest.raises(NormalizationError, match="U\\+2581"):
        build_lattice("ab" + SPACE_PIECE + "c", llama)
    with pytest.raises(NormalizationError, match="U\\+2581"):
        build_lattice(SPACE_PIECE, llama)


def test_normalization_error_points_at_the_rewrite_with_a_dummy_prefix(llama):
    with pytest.raises(NormalizationError) as err:
        build_lattice("ab" + SPACE_PIECE + "c", llama)
    # The rewrite is at byte 2 of the text (byte 3 of the tokenizer's view), not at byte 0.
    assert re.search(r"byte [23]\b", str(err.value)), str(err.value)


# --------------------------------------------------------------------------------------------
# The Llama-2-style tokenizer (dummy prefix, byte fallback)


def test_llama_style_vocabulary_and_dummy_prefix(llama):
    lat = build_lattice("the shells", llama)
    assert lat.vocab.family == "sentencepiece"
    assert lat.vocab.dummy_prefix is True
    assert lat.vocab.has_byte_fallback
    assert lat.data == b" the shells" and lat.data.startswith(b" ")
    assert lat.path_bytes(lat.canonical) == lat.data
    assert lat.pieces(lat.canonical)[0].startswith(" ")
    assert lat.count() == reference(llama).count(lat.data)


def test_legacy_and_non_legacy_conversions_give_the_same_lattices():
    """legacy only changes Metaspace's prepend_scheme ("always" vs "first"), which differs only
    after a special token splits the input. Lattices read special-token strings as text
    (split_special_tokens=True), so both conversions tokenize, and build lattices, identically."""
    legacy, modern = llama_style(legacy=True), llama_style(legacy=False)
    for text in ["the Hat", " a  b", "x</s> the", "<s>", "日本\n"]:
        a, b = build_lattice(text, legacy), build_lattice(text, modern)
        assert (a.data, a.canonical, a.arcs) == (b.data, b.canonical, b.arcs)


@pytest.mark.parametrize("char", list(UNSEEN_CHARACTERS))
def test_unseen_characters_get_byte_fallback_arcs_only_inside_themselves(llama, char):
    text = f"the{char}sea shells"
    lat = build_lattice(text, llama)
    vocab = lat.vocab
    byte_ids = {t for t in vocab.byte_tokens if t is not None}
    start = len(b" the")
    stop = start + len(char.encode())
    assert not vocab.is_piece(char.encode())
    fallback = [(s, e, t) for s, e, t in lat.arcs if t in byte_ids]
    # One arc per byte of the unseen character, spelling exactly that byte, and nowhere else.
    assert fallback == [(p, p + 1, vocab.byte_tokens[lat.data[p]]) for p in range(start, stop)]
    # The tokenizer itself spells the character with those bytes.
    assert [t for t in lat.canonical if t in byte_ids] == [a[2] for a in fallback]
    # Seen characters get byte arcs only when asked for everywhere.
    everywhere = build_lattice(text, llama, byte_fallback="everywhere")
    assert {s for s, _, t in everywhere.arcs if t in byte_ids} == set(range(len(lat.data)))
    assert everywhere.count() > lat.count() == reference(llama).count(lat.data)


def test_unknown_characters_without_byte_fallback_are_unrepresentable():
    tok = llama_with_unk()
    assert build_lattice("the hat", tok).count() == reference(tok).count(b" the hat")
    with pytest.raises(UnrepresentableTextError, match="<unk>"):
        build_lattice("the Hat", tok)


@pytest.mark.parametrize(
    "which, text",
    [
        # transformers' conversion of a SentencePiece model without byte fallback: "H" vanishes.
        ("llama-no-fallback", "the Hat"),
        # SmolLM2 has no token for the bytes 0x04 (a control character) and 0xF1 (the lead byte
        # of U+40000..U+7FFFF); its BPE has no unk and drops them.
        (SMOL, "a\x04b"),
        (SMOL, "x\U00040000y"),
    ],
)
def test_a_tokenizer_that_drops_characters_is_reported_as_unrepresentable(which, text):
    tok = llama_style(byte_fallback=False) if which == "llama-no-fallback" else embedded(which)
    assert not spells(tok, text)
    with pytest.raises(UnrepresentableTextError):
        build_lattice(text, tok)


# --------------------------------------------------------------------------------------------
# Bad input and huge texts


@pytest.mark.parametrize("name", EMBEDDED)
def test_empty_text_is_refused(name):
    with pytest.raises(EmptyTextError):
        build_lattice("", embedded(name))


@pytest.mark.parametrize("name", EMBEDDED)
def test_lone_surrogates_are_refused_with_a_message(name):
    """A command line's bytes that are not UTF-8 reach Python as lone surrogates: a clear error
    for the text and the context, not the tokenizer's TypeError (issue 13, hostile input)."""
    from marginal_core.context import context_ids

    with pytest.raises(UnrepresentableTextError, match="character 2 is a lone surrogate U[+]DCFF"):
        build_lattice("a\udcffb", embedded(name))
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
    lat = build_lattice("Hello world", embedded(name))
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
    lat = build_lattice(text, tok)
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
    lat = build_lattice("Marginal probabilities sum over all tokenizations. " * 8, embedded(name))
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
    lat = build_lattice(text, tok)
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
