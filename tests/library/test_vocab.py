"""Vocabulary: token ids <-> surface bytes, the family, and the caches (docs/design.md points 1-2).

Surfaces are checked against the tokenizer's own decoder, not against the library's reading of
the pieces: a token's surface is what it detokenizes to.
"""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marginal_core.lattice.vocab import Vocabulary, detect_family, fingerprint, load_vocabulary, vocabulary
from tests.tokenizer_cases import GEMMA, SMOL, embedded, examples, llama_style, texts


def gpt2_byte_table() -> dict[str, int]:
    """GPT-2's bytes_to_unicode (openai/gpt-2 encoder.py), inverted: character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def excluded_ids(tokenizer) -> set[int]:
    """Special added tokens and unk (docs/design.md point 1)."""
    ids = {i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    return ids | {tokenizer.unk_token_id} - {None}


# --------------------------------------------------------------------------------------------
# Family, byte fallback, dummy prefix


def test_gemma_is_sentencepiece_with_byte_fallback():
    tok = embedded(GEMMA)
    vocab = vocabulary(tok)
    assert vocab.family == "sentencepiece"
    assert vocab.dummy_prefix is False
    assert vocab.size == len(tok) == 262_144
    pieces = tok.convert_ids_to_tokens([t for t in vocab.byte_tokens])
    assert pieces == [f"<0x{b:02X}>" for b in range(256)]
    assert [vocab.surfaces[t] for t in vocab.byte_tokens] == [bytes([b]) for b in range(256)]
    # Byte-fallback pieces are not ordinary pieces: "A" is a piece by itself, <0x41> is not.
    assert vocab.is_piece(b"A") and vocab.byte_tokens[0x41] not in [t for _, t in vocab.matches(b"A", 0)]


def test_smollm_is_byte_level_without_byte_fallback():
    tok = embedded(SMOL)
    vocab = vocabulary(tok)
    assert vocab.family == "byte_level"
    assert vocab.dummy_prefix is False
    assert vocab.size == len(tok) == 49_152
    assert vocab.byte_tokens == (None,) * 256 and not vocab.has_byte_fallback


def test_llama_style_has_a_dummy_prefix_and_byte_fallback():
    tok = llama_style()
    vocab = vocabulary(tok)
    assert vocab.family == "sentencepiece"
    assert vocab.dummy_prefix is True
    assert all(t is not None for t in vocab.byte_tokens)
    assert tok.convert_ids_to_tokens(list(vocab.byte_tokens)) == [f"<0x{b:02X}>" for b in range(256)]


def test_family_comes_from_the_decoder():
    assert detect_family({"type": "ByteLevel"}) == ("byte_level", False)
    assert detect_family({"type": "Metaspace", "replacement": "▁"}) == ("sentencepiece", False)
    sequence = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ],
    }
    assert detect_family(sequence) == ("sentencepiece", True)
    with pytest.raises(ValueError, match="WordPiece"):
        detect_family({"type": "WordPiece", "prefix": "##"})
    with pytest.raises(ValueError, match="none"):
        detect_family(None)


def test_a_wordpiece_tokenizer_is_refused_with_its_decoder_named():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[UNK]", "[CLS]", "[SEP]", "hello", "world", "##s", "h", "##ello"]
    backend = Tokenizer(models.WordPiece({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    assert tok("hello worlds", add_special_tokens=False)["input_ids"] == [3, 4, 5]
    with pytest.raises(ValueError, match="WordPiece"):
        Vocabulary.build(tok)


# --------------------------------------------------------------------------------------------
# Surfaces against the tokenizer's own decoder


def test_gemma_surfaces_are_what_tokens_decode_to():
    tok = embedded(GEMMA)
    vocab = vocabulary(tok)
    excluded = excluded_ids(tok)
    assert {i for i, s in enumerate(vocab.surfaces) if s is None} == excluded
    assert {0, 1, 2, 3, 4} <= excluded  # pad, eos, bos, unk, mask
    ids = [i for i in range(vocab.size) if i not in excluded]
    decoded = tok.backend_tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)
    byte_ids = set(vocab.byte_tokens)
    for i, text in zip(ids, decoded):
        if i in byte_ids and vocab.surfaces[i][0] >= 0x80:
            assert text == "\ufffd"  # a lone non-ASCII byte: checked by its piece name above
        else:
            assert text.encode("utf-8") == vocab.surfaces[i], i
    # U+2581 reads as a space.
    assert vocab.surfaces[tok.convert_tokens_to_ids("▁the")] == b" the"


def test_gemma_non_special_added_tokens_are_ordinary():
    tok = embedded(GEMMA)
    vocab = vocabulary(tok)
    added = {i: t.content for i, t in tok.added_tokens_decoder.items() if not t.special}
    assert len(added) > 100
    for i, content in added.items():
        assert vocab.surfaces[i] == content.encode("utf-8")
        assert vocab.is_piece(content.encode("utf-8"))
    table, newline, tabs = (tok.convert_tokens_to_ids(x) for x in ("<table>", "\n", "\t\t"))
    assert vocab.surfaces[table] == b"<table>" and vocab.surfaces[newline] == b"\n"
    assert vocab.surfaces[tabs] == b"\t\t"


def test_smollm_surfaces_are_what_tokens_decode_to():
    tok = embedded(SMOL)
    vocab = vocabulary(tok)
    excluded = excluded_ids(tok)
    assert {i for i, s in enumerate(vocab.surfaces) if s is None} == excluded
    assert excluded == set(range(17))  # <|endoftext|> ... <empty_output>, all special
    ids = [i for i in range(vocab.size) if i not in excluded]
    decoded = tok.backend_tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)
    table = gpt2_byte_table()
    invalid = 0
    for i, text, piece in zip(ids, decoded, tok.convert_ids_to_tokens(ids)):
        surface = vocab.surfaces[i]
        assert surface == bytes(table[c] for c in piece), i
        try:
            assert text == surface.decode("utf-8"), i
        except UnicodeDecodeError:
            invalid += 1  # part of a multi-byte character: the decoder shows U+FFFD
            assert "\ufffd" in text
    assert 0 < invalid < 1000
    assert vocab.surfaces[tok.convert_tokens_to_ids("Ġthe")] == b" the"


def test_llama_style_surfaces_are_what_tokens_decode_to():
    """The decoder strips one leading space, so decode after a token without one ("a")."""
    tok = llama_style()
    vocab = vocabulary(tok)
    assert {i for i, s in enumerate(vocab.surfaces) if s is None} == excluded_ids(tok) == {0, 1, 2}
    a = tok.convert_tokens_to_ids("a")
    assert vocab.surfaces[a] == b"a"
    byte_ids = set(vocab.byte_tokens)
    for i in range(3, vocab.size):
        if i in byte_ids and vocab.surfaces[i][0] >= 0x80:
            continue
        text = tok.decode([a, i])
        assert text.encode("utf-8") == b"a" + vocab.surfaces[i], i
    assert sum(s.startswith(b" ") for s in vocab.surfaces if s) > 20


# --------------------------------------------------------------------------------------------
# The prefix index


def brute_matches(vocab, data: bytes, start: int) -> list[tuple[int, int]]:
    byte_ids = set(vocab.byte_tokens)
    return sorted(
        (end, t)
        for t, s in enumerate(vocab.surfaces)
        if s is not None and t not in byte_ids and data.startswith(s, start)
        for end in [start + len(s)]
    )


@pytest.fixture(scope="module")
def surface_sets():
    """Every ordinary surface of each embedded vocabulary, for membership checks."""
    out = {}
    for name in (GEMMA, SMOL):
        vocab = vocabulary(embedded(name))
        byte_ids = set(vocab.byte_tokens)
        out[name] = {s for t, s in enumerate(vocab.surfaces) if s is not None and t not in byte_ids}
    return out


@settings(max_examples=examples(30), deadline=None)
@given(name=st.sampled_from([GEMMA, SMOL]), text=texts(max_chars=10), data=st.data())
def test_matches_and_is_piece_agree_with_a_scan(surface_sets, name, text, data):
    vocab = vocabulary(embedded(name))
    raw = text.encode("utf-8")
    start = data.draw(st.integers(0, len(raw) - 1), label="start")
    found = sorted(vocab.matches(raw, start))
    assert all(raw[start:end] == vocab.surface(t) for end, t in found)
    ends = {end for end, _ in found}
    expected_ends = {e for e in range(start + 1, len(raw) + 1) if raw[start:e] in surface_sets[name]}
    assert ends == expected_ends
    for end in range(start + 1, len(raw) + 1):
        assert vocab.is_piece(raw[start:end]) == (raw[start:end] in surface_sets[name])


def test_matches_lists_every_token_on_a_fixed_text():
    vocab = vocabulary(embedded(SMOL))
    data = b"Hello world, tokenization!"
    for start in (0, 5, 6, 13):
        assert sorted(vocab.matches(data, start)) == brute_matches(vocab, data, start)


def test_surface_of_an_excluded_id_raises():
    vocab = vocabulary(embedded(GEMMA))
    assert vocab.surface(9259) == vocab.surfaces[9259]
    with pytest.raises(KeyError):
        vocab.surface(2)  # <bos>


# --------------------------------------------------------------------------------------------
# Caching


def test_memory_cache_returns_the_same_object():
    tok = embedded(SMOL)
    assert vocabulary(tok) is vocabulary(tok)


def same_vocab(a: Vocabulary, b: Vocabulary) -> bool:
    return (a.family, a.surfaces, a.byte_tokens, a.dummy_prefix, a.fingerprint) == (
        b.family,
        b.surfaces,
        b.byte_tokens,
        b.dummy_prefix,
        b.fingerprint,
    )


def test_build_equals_the_cached_vocabulary():
    tok = embedded(SMOL)
    built = Vocabulary.build(tok)
    assert same_vocab(built, vocabulary(tok))
    assert same_vocab(pickle.loads(pickle.dumps(built)), built)


def fresh_copy(folder: Path):
    """A new tokenizer object loaded from a saved copy of SmolLM2's tokenizer."""
    from transformers import AutoTokenizer

    if not (folder / "tokenizer.json").exists():
        embedded(SMOL).save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def test_disk_cache_is_written_reused_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("MARGINAL_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "tok"
    first = fresh_copy(folder)
    vocab = vocabulary(first)
    files = list((tmp_path / "cache" / "vocab").glob("*.pkl"))
    assert [f.name for f in files] == [f"{fingerprint(first)}.v1.pkl"]
    stamp = files[0].stat().st_mtime_ns

    # A miss in memory reads the file instead of building again.
    loaded = load_vocabulary(first)
    assert loaded is not vocab and same_vocab(loaded, vocab)
    assert files[0].stat().st_mtime_ns == stamp

    # A damaged cache file is rebuilt, not trusted.
    files[0].write_bytes(b"not a pickle")
    assert same_vocab(load_vocabulary(first), vocab)
    assert pickle.loads(files[0].read_bytes()).surfaces == vocab.surfaces

    # A changed tokenizer gets another key: add a token to tokenizer.json.
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    spec["added_tokens"].append(
        {"id": 49152, "content": "<extra>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": False}
    )
    (folder / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    changed = fresh_copy(folder)
    assert len(changed) == 49153
    assert fingerprint(changed) != fingerprint(first)
    grown = vocabulary(changed)
    assert grown.size == 49153 and grown.surfaces[49152] == b"<extra>"
    assert len(list((tmp_path / "cache" / "vocab").glob("*.pkl"))) == 2
    assert not [p for p in (tmp_path / "cache" / "vocab").iterdir() if re.search(r"\.tmp\d+$", p.name)]
    assert os.environ["MARGINAL_CACHE"] == str(tmp_path / "cache")


def test_an_empty_cache_variable_means_the_default_cache_root(tmp_path, monkeypatch):
    """MARGINAL_CACHE="" is unset (marginal_core.models.caches.cache_root): never the current directory."""
    monkeypatch.setenv("MARGINAL_CACHE", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    tok = llama_style()
    load_vocabulary(tok)
    assert list((tmp_path / "cwd").iterdir()) == []
    assert (tmp_path / "home" / ".cache" / "marginal" / "vocab" / f"{fingerprint(tok)}.v1.pkl").is_file()
