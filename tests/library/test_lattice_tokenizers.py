"""The lattice under tokenizer quirks: SentencePiece normalization of U+2581, the Llama-2-style
tokenizer's dummy prefix and byte fallback, and tokenizers that silently drop characters."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marginal_core.ground.errors import NormalizationError, UnrepresentableTextError
from marginal_core.lattice.graph import lattice_of
from tests.tokenizer_cases import (
    GEMMA,
    SMOL,
    SPACE_PIECE,
    UNSEEN_CHARACTERS,
    embedded,
    examples,
    llama_style,
    llama_with_unk,
    reference,
    spells,
    texts,
)

# --------------------------------------------------------------------------------------------
# Normalization (docs/design.md point 4)


@given(prefix=texts(max_chars=4), suffix=st.text(max_size=3).filter(lambda s: SPACE_PIECE not in s))
@settings(max_examples=examples(15), deadline=None)
def test_u2581_is_rejected_by_sentencepiece_tokenizers(prefix, suffix):
    """Gemma maps U+2581 to a space before tokenizing: no lattice over the written text exists."""
    text = prefix + SPACE_PIECE + suffix
    with pytest.raises(NormalizationError) as err:
        lattice_of(text, embedded(GEMMA))
    message = str(err.value)
    assert "U+2581" in message and "normaliz" in message
    assert f"byte {len(prefix.encode())}" in message  # where the rewrite happens
    # A byte-level tokenizer reads U+2581 as three ordinary bytes.
    if spells(embedded(SMOL), text):
        lat = lattice_of(text, embedded(SMOL))
        assert lat.data == text.encode("utf-8") and lat.path_bytes(lat.canonical) == lat.data


def test_u2581_in_a_dummy_prefix_tokenizer_is_rejected(llama):
    with pytest.raises(NormalizationError, match="U\\+2581"):
        lattice_of("ab" + SPACE_PIECE + "c", llama)
    with pytest.raises(NormalizationError, match="U\\+2581"):
        lattice_of(SPACE_PIECE, llama)


def test_normalization_error_points_at_the_rewrite_with_a_dummy_prefix(llama):
    with pytest.raises(NormalizationError) as err:
        lattice_of("ab" + SPACE_PIECE + "c", llama)
    # The rewrite is at byte 2 of the text (byte 3 of the tokenizer's view), not at byte 0.
    assert re.search(r"byte [23]\b", str(err.value)), str(err.value)


# --------------------------------------------------------------------------------------------
# The Llama-2-style tokenizer (dummy prefix, byte fallback)


def test_llama_style_vocabulary_and_dummy_prefix(llama):
    lat = lattice_of("the shells", llama)
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
        a, b = lattice_of(text, legacy), lattice_of(text, modern)
        assert (a.data, a.canonical, a.arcs) == (b.data, b.canonical, b.arcs)


@pytest.mark.parametrize("char", list(UNSEEN_CHARACTERS))
def test_unseen_characters_get_byte_fallback_arcs_only_inside_themselves(llama, char):
    text = f"the{char}sea shells"
    lat = lattice_of(text, llama)
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
    everywhere = lattice_of(text, llama, byte_fallback="everywhere")
    assert {s for s, _, t in everywhere.arcs if t in byte_ids} == set(range(len(lat.data)))
    assert everywhere.count() > lat.count() == reference(llama).count(lat.data)


def test_unknown_characters_without_byte_fallback_are_unrepresentable():
    tok = llama_with_unk()
    assert lattice_of("the hat", tok).count() == reference(tok).count(b" the hat")
    with pytest.raises(UnrepresentableTextError, match="<unk>"):
        lattice_of("the Hat", tok)


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
        lattice_of(text, tok)

