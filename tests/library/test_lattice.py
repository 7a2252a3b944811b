"""The tokenization lattice (docs/design.md points 3 to 6) against an independent brute force.

Every check runs on real tokenizers: the two embedded ones (Gemma 3: SentencePiece style with
byte fallback and no dummy prefix; SmolLM2: byte-level BPE) and a Llama-2-style SentencePiece
BPE model trained in this session (dummy prefix and byte fallback). ``tests.tokenizer_cases.Reference``
rebuilds each lattice from the vocabulary's surfaces with a dict and plain recursion.

Tokenizer quirks (normalization, the Llama-2-style tokenizer) are in test_lattice_tokenizers.py;
bad input and huge texts in test_lattice_limits.py.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, example, given, settings

from marginal_core.ground.errors import NormalizationError, UnrepresentableTextError
from marginal_core.lattice.graph import lattice_of
from marginal_core.lattice.sampling import sample_uniform
from tests.tokenizer_cases import (
    UNSEEN_CHARACTERS,
    canonical,
    examples,
    expected_data,
    reference,
    spells,
    texts,
)

PROPERTY = settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENUMERATE_UP_TO = 3000  # paths; beyond this the checks unrank a sample of ranks instead



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
            lattice_of(text, tokenizer, byte_fallback=byte_fallback)
        return None
    lat = lattice_of(text, tokenizer, byte_fallback=byte_fallback)
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
    assert lat.count() >= lattice_of(text, embedded_tokenizer).count()
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
    lat = lattice_of(text, embedded_tokenizer)
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

