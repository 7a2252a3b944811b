"""Tokenizers and independent reference implementations shared by the core tests.

* The two embedded tokenizers, loaded once per session through ``marginal_core.models``.
* A Llama-2-style tokenizer (SentencePiece BPE with a dummy prefix and byte fallback) trained
  here in a fraction of a second and converted to a fast Hugging Face tokenizer, plus a variant
  without byte fallback (it needs ``<unk>`` for unseen characters).
* :class:`Reference`, a deliberately naive lattice written from docs/design.md points 3 and 4 alone:
  a dict from surface bytes to token ids and a recursive enumerator. The library's lattice is
  checked against it, so it shares no code with ``marginal_core.lattice.graph``.
* Hypothesis strategies for awkward Unicode text.

This module is imported as ``tests.tokenizer_cases`` (it was tests/tokenizers.py, whose name
shadowed the Hugging Face ``tokenizers`` package).
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from hypothesis import strategies as st

GEMMA = "gemma3-270m"
SMOL = "smollm2-135m"
EMBEDDED = (GEMMA, SMOL)
SPACE_PIECE = "\u2581"


# --------------------------------------------------------------------------------------------
# Tokenizers


@functools.cache
def embedded(name: str):
    """One of the two embedded tokenizers, loaded the way the app loads it."""
    from marginal_core.models import load_tokenizer

    return load_tokenizer(name)


_TRAINING_WORDS = (
    "the quick brown fox jumps over the lazy dog . a tokenizer splits text into pieces ; every "
    "piece has an id . marginal probabilities sum over all tokenizations of a string . she "
    "sells sea shells by the sea shore , and the shells she sells are surely sea shells . "
    "lattice paths count 0123456789 tokens bytes fallback unknown characters"
).split()

# Characters that never occur in the training text, so the trained tokenizers have no piece for
# them: the byte-fallback tokenizer spells them with <0xXX> pieces, the other one with <unk>.
UNSEEN_CHARACTERS = "HQZé日本☃🎉\n\t"


def _training_text() -> str:
    rng = random.Random(0)
    lines = [" ".join(rng.choice(_TRAINING_WORDS) for _ in range(14)) for _ in range(300)]
    return "\n".join(lines) + "\n"  # about 30 KB of lowercase ASCII words


@functools.cache
def _trained_folder(byte_fallback: bool) -> Path:
    """Train a small SentencePiece BPE model (Llama 2 settings) into a fresh folder."""
    import sentencepiece as spm

    folder = Path(tempfile.mkdtemp(prefix=f"marginal-spm-{int(byte_fallback)}-"))
    (folder / "corpus.txt").write_text(_training_text(), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(folder / "corpus.txt"),
        model_prefix=str(folder / "spm"),
        model_type="bpe",
        vocab_size=400 if byte_fallback else 150,
        byte_fallback=byte_fallback,
        add_dummy_prefix=True,
        character_coverage=1.0,
        split_digits=True,
        # Llama 2 keeps whitespace as written: no collapsing, no Unicode normalization.
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        allow_whitespace_only_pieces=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        minloglevel=2,
        num_threads=1,
    )
    hf = folder / "hf"
    hf.mkdir()
    shutil.copy(folder / "spm.model", hf / "tokenizer.model")
    return hf


@functools.cache
def llama_style(byte_fallback: bool = True, legacy: bool = False):
    """A fast Llama-2-style tokenizer converted from a SentencePiece model trained here.

    transformers 5 converts ``tokenizer.model`` into a BPE model with byte fallback, no
    normalizer, a Metaspace pre-tokenizer that prepends U+2581 (the dummy prefix) and a decoder
    that maps U+2581 back to a space and strips the first one.
    """
    from transformers import LlamaTokenizer

    return LlamaTokenizer.from_pretrained(str(_trained_folder(byte_fallback)), legacy=legacy)


@functools.cache
def llama_with_unk():
    """The no-byte-fallback model as SentencePiece itself runs it: unseen characters -> <unk>.

    transformers' conversion of that model (``llama_style(byte_fallback=False)``) gives its BPE
    no unk token and keeps ``byte_fallback=True`` with no ``<0xXX>`` pieces to fall back to, so
    it silently *drops* unseen characters ("the Hat" -> "▁the ▁a t"), whereas
    ``sentencepiece`` encodes them as ``<unk>`` ("▁the ▁ <unk> at"). This rebuilds the same
    vocabulary and merges with the unk token set, which reproduces SentencePiece's output.
    """
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    spec = json.loads(llama_style(byte_fallback=False).backend_tokenizer.to_str())
    spec["model"]["unk_token"] = "<unk>"
    spec["model"]["byte_fallback"] = False
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )


def canonical(tokenizer, text: str) -> tuple[int, ...]:
    """The tokenizer's own tokenization, special-token strings read as plain text."""
    return tuple(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


# --------------------------------------------------------------------------------------------
# Reference lattice


class Reference:
    """A brute-force tokenization lattice built from docs/design.md points 3 and 4 only.

    Ordinary tokens match anywhere their surface equals a byte span; a byte-fallback token
    ``<0xXX>`` matches byte XX only inside a character that is not itself a piece (or
    everywhere with ``byte_fallback="everywhere"``).
    """

    def __init__(self, vocab) -> None:
        byte_ids = {t for t in vocab.byte_tokens if t is not None}
        self.pieces: dict[bytes, list[int]] = defaultdict(list)
        for token, surface in enumerate(vocab.surfaces):
            if surface is not None and token not in byte_ids:
                self.pieces[surface].append(token)
        self.byte_id = {b: t for b, t in enumerate(vocab.byte_tokens) if t is not None}
        self.longest = max(map(len, self.pieces))
        self.surfaces = vocab.surfaces
        self.dummy_prefix = vocab.dummy_prefix

    def arcs(self, data: bytes, byte_fallback: str = "unknown_chars") -> dict[int, list[tuple[int, int]]]:
        """start -> [(end, token)] for every token matching data[start:end] (untrimmed)."""
        out: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for i in range(len(data)):
            for j in range(i + 1, min(len(data), i + self.longest) + 1):
                out[i].extend((j, t) for t in self.pieces.get(data[i:j], ()))
        pos = 0
        for char in data.decode("utf-8"):
            encoded = char.encode("utf-8")
            if byte_fallback == "everywhere" or encoded not in self.pieces:
                for k, b in enumerate(encoded):
                    if b in self.byte_id:
                        out[pos + k].append((pos + k + 1, self.byte_id[b]))
            pos += len(encoded)
        return out

    def length_counts(self, data: bytes, byte_fallback: str = "unknown_chars") -> Counter:
        """{number of tokens: number of paths} by dynamic programming from the end."""
        arcs = self.arcs(data, byte_fallback)
        suffix: list[Counter] = [Counter() for _ in range(len(data) + 1)]
        suffix[len(data)][0] = 1
        for i in range(len(data) - 1, -1, -1):
            for j, _ in arcs.get(i, ()):
                for length, n in suffix[j].items():
                    suffix[i][length + 1] += n
        return suffix[0]

    def suffix_counts(self, data: bytes, byte_fallback: str = "unknown_chars") -> list[int]:
        """Number of paths from each byte offset to the end (unbounded)."""
        arcs = self.arcs(data, byte_fallback)
        suffix = [0] * len(data) + [1]
        for i in range(len(data) - 1, -1, -1):
            suffix[i] = sum(suffix[j] for j, _ in arcs.get(i, ()))
        return suffix

    def count(self, data: bytes, max_len: int | None = None, byte_fallback: str = "unknown_chars") -> int:
        counts = self.length_counts(data, byte_fallback)
        return sum(n for length, n in counts.items() if max_len is None or length <= max_len)

    def paths(self, data: bytes, byte_fallback: str = "unknown_chars") -> set[tuple[int, ...]]:
        """Every path, by plain recursion (keep the text short)."""
        arcs = self.arcs(data, byte_fallback)

        @functools.cache
        def from_(i: int) -> tuple[tuple[int, ...], ...]:
            if i == len(data):
                return ((),)
            return tuple((t,) + rest for j, t in arcs.get(i, ()) for rest in from_(j))

        return set(from_(0))

    def split_pairs(self, data: bytes, start: int, stop: int, byte_fallback: str = "unknown_chars") -> int:
        """How many two-token spellings of data[start:stop] the lattice rules allow."""
        arcs = self.arcs(data, byte_fallback)
        return sum(
            1
            for middle, _ in arcs.get(start, ())
            if middle < stop
            for end, _ in arcs.get(middle, ())
            if end == stop
        )


@functools.cache
def reference(tokenizer) -> Reference:
    from marginal_core.lattice.vocab import vocabulary

    return Reference(vocabulary(tokenizer))


def seen_bytes(tokenizer, text: str) -> bytes | None:
    """What the tokenizer's own tokenization spells (None where it uses unk or specials)."""
    surfaces = [reference(tokenizer).surfaces[t] for t in canonical(tokenizer, text)]
    return None if None in surfaces else b"".join(surfaces)


def expected_data(tokenizer, text: str) -> bytes:
    """The text's UTF-8 bytes as a faithful tokenizer sees them.

    A dummy-prefix tokenizer adds one space in front, except where the text already starts with
    one: the converted Llama tokenizer's Metaspace pre-tokenizer only prepends U+2581 to a
    string that does not already start with it. (SentencePiece itself adds it anyway: " a" is
    "▁ ▁a" there but "▁a" in the fast tokenizer; lattices follow the fast tokenizer the app
    uses, so the data of " a" is b" a".)
    """
    raw = text.encode("utf-8")
    if reference(tokenizer).dummy_prefix and not text.startswith(" "):
        return b" " + raw
    return raw


def spells(tokenizer, text: str) -> bool:
    """Whether the tokenizer's own tokenization spells the text exactly (as it sees it).

    Not always: SmolLM2 has no token for bytes 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1,
    0xF1, 0xF2 and 0xF5-0xFF, and its BPE (no unk, no byte fallback) silently drops them.
    """
    return seen_bytes(tokenizer, text) == expected_data(tokenizer, text)


# --------------------------------------------------------------------------------------------
# Text strategies


def examples(n: int) -> int:
    """n Hypothesis examples, times $MARGINAL_TEST_SCALE (default 1) for a deeper run."""
    return max(1, round(n * float(os.environ.get("MARGINAL_TEST_SCALE", "1"))))

# Fragments that stress the lattice: whitespace runs (Gemma has added tokens for runs of tabs
# and newlines), emoji with joiners and variation selectors, CJK, combining marks, RTL text,
# control characters, NUL, zero-width characters and the literal strings of special tokens.
AWKWARD = [
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000",
    "🎉", "👍🏽", "👩\u200d👩\u200d👧", "🇯🇵", "❤\ufe0f", "☃",
    "日本語", "漢字", "한국어", "ไทย", "עברית", "العربية", "Ωμέγα", "Привет",
    "e\u0301", "a\u0308\u0304", "\u0301", "n\u0303",
    "\x00", "\x07", "\x1b", "\u200b", "\u200d", "\ufeff", "\U0010fffd",
    "<s>", "</s>", "<bos>", "<eos>", "<|endoftext|>", "<table>",
    "the", " the", "The", "ing", "Hello", " world", ".", ",", "!?", "123", "$",
]

# Any Unicode scalar value except surrogates (not encodable) and U+2581, which SentencePiece
# tokenizers read as a space (tested separately: NormalizationError).
ANY_CHAR = st.characters(codec="utf-8", exclude_characters=SPACE_PIECE)


def texts(max_chars: int = 8) -> st.SearchStrategy[str]:
    """Non-empty texts of at most max_chars characters: arbitrary Unicode and awkward mixes."""
    arbitrary = st.text(ANY_CHAR, min_size=1, max_size=max_chars)
    fragments = st.lists(st.sampled_from(AWKWARD) | st.text(ANY_CHAR, min_size=1, max_size=2), min_size=1, max_size=4)
    mixed = fragments.map("".join).filter(lambda s: len(s) <= max_chars)
    return arbitrary | mixed
