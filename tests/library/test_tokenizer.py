"""The tokenizer protocol and the light path's snapshot (no transformers at run time).

A :class:`TokenizerSnapshot` must be indistinguishable from the transformers tokenizer it was
taken from: the same pieces, special tokens, fingerprint and vocabulary, the same canonical
tokenization of any text, and so the same lattice or the same error. The transformers path is
what the brute-force tests in test_lattice.py and test_vocab.py judge; this file ties the
snapshot to it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings

from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import canonical_ids, lattice_of
from marginal_core.lattice.tokenizer import TransformersTokenizer, text_tokenizer
from marginal_core.lattice.tokenizer_snapshot import TokenizerSnapshot
from marginal_core.lattice.vocab import Vocabulary, fingerprint, vocabulary
from marginal_core.models import load_text_tokenizer
from tests.tokenizer_cases import (
    AWKWARD,
    EMBEDDED,
    SPACE_PIECE,
    UNSEEN_CHARACTERS,
    embedded,
    examples,
    llama_style,
    llama_with_unk,
    texts,
)

PROPERTY = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIXED_TEXTS = [
    "The old lighthouse keeper",
    " leading space and  two   spaces",
    "line one\nline two\n\n\tindented\r\nwindows",
    "<bos> <eos> <|im_start|> <|endoftext|> <table>x</table> look like special tokens",
    "emoji 🙂👍🏽 and a family 👨\u200d👩\u200d👧, 日本語のテキスト",
    "Ünïcödé ﬁ ligature, combining e\u0301, NBSP\u00a0here",
    f"a {SPACE_PIECE}piece",
    UNSEEN_CHARACTERS,
    "x" * 200 + " " * 40 + "\t" * 12,
    "".join(AWKWARD),
]


def light(name: str) -> TokenizerSnapshot:
    snapshot = load_text_tokenizer(name)
    assert isinstance(snapshot, TokenizerSnapshot), type(snapshot)
    return snapshot


def same_outcome(a, b, text: str) -> None:
    """build_lattice gives the same lattice through both tokenizers, or the same error."""
    try:
        expected = lattice_of(text, a)
    except MarginalError as err:
        with pytest.raises(type(err)) as info:
            lattice_of(text, b)
        assert str(info.value) == str(err)
        return
    got = lattice_of(text, b)
    assert got.data == expected.data and got.canonical == expected.canonical
    assert got.arcs == expected.arcs


# --------------------------------------------------------------------------------------------
# The embedded tokenizers through the light loader


@pytest.mark.parametrize("name", EMBEDDED)
def test_snapshot_has_the_facts_of_the_transformers_tokenizer(name):
    snapshot, full = light(name), TransformersTokenizer(embedded(name))
    assert snapshot.fingerprint == full.fingerprint == fingerprint(embedded(name))
    assert snapshot.size == full.size
    assert snapshot.decoder == full.decoder
    assert snapshot.special == full.special
    assert snapshot.added_ids == full.added_ids
    assert snapshot.pieces() == full.pieces()
    assert [snapshot.piece(i) for i in (0, 1, 2, 100, snapshot.size - 1)] == [
        full.piece(i) for i in (0, 1, 2, 100, snapshot.size - 1)
    ]


@pytest.mark.parametrize("name", EMBEDDED)
def test_snapshot_builds_the_same_vocabulary_and_shares_its_disk_cache(name):
    snapshot, tok = light(name), embedded(name)
    built, cached = Vocabulary.build(snapshot), vocabulary(tok)
    assert (built.family, built.surfaces, built.byte_tokens, built.dummy_prefix, built.fingerprint) == (
        cached.family, cached.surfaces, cached.byte_tokens, cached.dummy_prefix, cached.fingerprint
    )
    assert vocabulary(snapshot).fingerprint == cached.fingerprint


@pytest.mark.parametrize("name", EMBEDDED)
@pytest.mark.parametrize("text", FIXED_TEXTS)
def test_snapshot_encodes_and_builds_like_transformers_on_fixed_texts(name, text):
    snapshot, tok = light(name), embedded(name)
    assert canonical_ids(snapshot, text) == canonical_ids(tok, text)
    assert context_ids(snapshot, text) == context_ids(tok, text)
    assert context_ids(snapshot) == context_ids(tok)
    same_outcome(tok, snapshot, text)


@pytest.mark.parametrize("name", EMBEDDED)
@PROPERTY
@given(text=texts(max_chars=12))
@example(text="Hello world")
@example(text="\x00<|endoftext|><bos>")
@example(text=f"{SPACE_PIECE}the")
def test_snapshot_encodes_and_builds_like_transformers(name, text):
    snapshot, tok = light(name), embedded(name)
    assert canonical_ids(snapshot, text) == canonical_ids(tok, text)
    same_outcome(tok, snapshot, text)


# --------------------------------------------------------------------------------------------
# Other BPE tokenizers: dummy prefix, unk, dropped characters


@pytest.mark.parametrize(
    "make",
    [llama_style, lambda: llama_style(legacy=True), lambda: llama_style(byte_fallback=False), llama_with_unk],
    ids=["llama", "llama-legacy", "llama-drops-characters", "llama-unk"],
)
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts(max_chars=10))
@example(text="the Hat")
@example(text=" leading space")
@example(text="<s>Hello</s>")
@example(text=UNSEEN_CHARACTERS)
def test_snapshots_of_trained_tokenizers_encode_like_them(make, text):
    tok = make()
    snapshot = TokenizerSnapshot.take(tok)
    assert snapshot is not None
    assert snapshot.special == TransformersTokenizer(tok).special
    assert snapshot.encode(text) == TransformersTokenizer(tok).encode(text)


def test_snapshot_survives_saving(tmp_path):
    tok = llama_style()
    snapshot = TokenizerSnapshot.take(tok)
    snapshot.save(tmp_path / "snapshot.pkl")
    again = TokenizerSnapshot.load(tmp_path / "snapshot.pkl")
    assert again is not None and again is not snapshot
    assert again.special == snapshot.special and again.pieces() == snapshot.pieces()
    assert again.encode("the Hat 日本") == snapshot.encode("the Hat 日本")
    (tmp_path / "damaged.pkl").write_bytes(b"not a pickle")
    assert TokenizerSnapshot.load(tmp_path / "damaged.pkl") is None
    assert TokenizerSnapshot.load(tmp_path / "missing.pkl") is None


def test_a_tokenizer_the_snapshot_cannot_reproduce_gets_none():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[UNK]", "hello", "world", "##s"]
    backend = Tokenizer(models.WordPiece({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece()
    assert TokenizerSnapshot.take(PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")) is None


def test_either_kind_of_tokenizer_is_accepted():
    tok = llama_style()
    view = text_tokenizer(tok)
    assert isinstance(view, TransformersTokenizer) and view.tokenizer is tok
    snapshot = TokenizerSnapshot.take(tok)
    assert text_tokenizer(snapshot) is snapshot and text_tokenizer(view) is view
