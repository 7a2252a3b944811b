"""A snapshot of a BPE tokenizer that encodes exactly as it does, loaded without transformers.

Parsing a large tokenizer.json (Gemma 3: 262,144 pieces and about half a million merges) costs
more than the whole `marginal lattice` command may take. A snapshot keeps the pieces and the
merges as arrays, and encodes a text with a ``tokenizers.Tokenizer`` built for that text: the
same normalizer, pre-tokenizer, model options and added tokens, but only the pieces and merges
that can occur in it. BPE only ever forms symbols that are substrings of the words it is given,
and applies merges by rank, so the reduced tokenizer gives the same ids as the full one (the
tests compare both on awkward text). Tokenizers outside what that argument covers get no
snapshot (:meth:`TokenizerSnapshot.take` returns None) and are used through transformers.
"""

from __future__ import annotations

import bisect
import json
import os
import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from marginal_core.lattice.tokenizer import SpecialTokens, TransformersTokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerBase

__all__ = ["TokenizerSnapshot"]

_FORMAT = 1
# Normalizers and pre-tokenizers whose output words are substrings of the whole text's output,
# up to a prefix they may put in front of each segment (see _prefixes).
_NORMALIZERS = {"Replace", "Prepend", "Sequence"}
_PRE_TOKENIZERS = {
    "ByteLevel", "Metaspace", "Split", "Whitespace", "WhitespaceSplit", "Punctuation", "Digits",
    "UnicodeScripts", "CharDelimiterSplit", "Sequence",
}


@dataclass(frozen=True, eq=False)
class TokenizerSnapshot:
    """A :class:`~marginal_core.lattice.tokenizer.TextTokenizer` for a BPE tokenizer, without transformers.

    ``skeleton`` is the tokenizer's JSON without pieces, merges and added tokens. The pieces are
    kept sorted (``sorted_ids[k]`` is the id of ``sorted_pieces[k]``, ``positions`` the inverse),
    so looking one up needs no dictionary of the whole vocabulary; merges are stored as
    ``left * size + right`` keys, sorted, with their ranks beside them.
    """

    fingerprint: str
    size: int
    decoder: dict[str, Any] | None
    special: SpecialTokens
    added_ids: frozenset[int]
    skeleton: str = field(repr=False)
    sorted_pieces: tuple[str, ...] = field(repr=False)
    sorted_ids: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)
    merge_keys: np.ndarray = field(repr=False)
    merge_ranks: np.ndarray = field(repr=False)
    added: tuple[dict[str, Any], ...] = field(repr=False)
    prefixes: tuple[str, ...] = field(repr=False)
    always: tuple[str, ...] = field(repr=False)
    longest: int = field(repr=False)

    # ----------------------------------------------------------------------------------------
    # The protocol

    def pieces(self) -> list[str | None]:
        return [self.sorted_pieces[k] for k in self.positions.tolist()]

    def piece(self, token_id: int) -> str:
        return self.sorted_pieces[self.positions[token_id]]

    def encode(self, text: str) -> list[int]:
        """The canonical tokenization, from a tokenizer holding only what this text can use."""
        base = self._base
        normalized = base.normalizer.normalize_str(text) if base.normalizer else text
        words = base.pre_tokenizer.pre_tokenize_str(normalized) if base.pre_tokenizer else [(normalized, ())]
        flat = "".join(word for word, _ in words)
        sources = [flat]
        if self._drops_unknown:  # dropped characters bring their neighbours together
            sources.append("".join(c for c in flat if self._known(c)))
        vocab = self._substring_pieces(sources)
        merges = self._merges_among(vocab)
        ids: dict[str, int | None] = dict(vocab)
        ids.update((p, self._id(p)) for pair in merges for p in pair)
        ids.update((p, self._id(p)) for p in self.always)
        added = [a for a in self.added if a["content"] in text or a["content"] in normalized]
        ids.update((a["content"], a["id"]) for a in added)
        spec = json.loads(self.skeleton)
        spec["model"].update(vocab=ids, merges=merges)
        spec["added_tokens"] = added
        from tokenizers import Tokenizer

        reduced = Tokenizer.from_str(json.dumps(spec))
        reduced.encode_special_tokens = True
        return reduced.encode(text, add_special_tokens=False).ids

    # ----------------------------------------------------------------------------------------
    # Encoding

    def _id(self, piece: str) -> int | None:
        """The id of a piece, or None."""
        at = bisect.bisect_left(self.sorted_pieces, piece)
        if at < len(self.sorted_pieces) and self.sorted_pieces[at] == piece:
            return int(self.sorted_ids[at])
        return None

    @cached_property
    def _base(self) -> Tokenizer:
        """The skeleton as a tokenizer: its normalizer and pre-tokenizer give the model's words."""
        from tokenizers import Tokenizer

        return Tokenizer.from_str(self.skeleton)

    @cached_property
    def _model(self) -> dict[str, Any]:
        return json.loads(self.skeleton)["model"]

    @property
    def _drops_unknown(self) -> bool:
        """Whether BPE silently drops a character it has neither a piece nor unk for."""
        return not self._model.get("unk_token")

    def _known(self, char: str) -> bool:
        """Whether BPE has a piece (or byte-fallback pieces) for a character."""
        if self._id(char) is not None:
            return True
        return bool(self._model.get("byte_fallback")) and all(
            self._id(f"<0x{b:02X}>") is not None for b in char.encode("utf-8")
        )

    def _substring_pieces(self, sources: Iterable[str]) -> dict[str, int]:
        """Every piece that is a substring of a source, or a prefix followed by one."""
        pieces, ids, longest, found = self.sorted_pieces, self.sorted_ids, self.longest, {}
        for source in sources:
            starts = [source[i : i + longest] for i in range(len(source))]
            starts += [p + source[i : i + longest] for p in self.prefixes for i in range(len(source))]
            for start in starts:
                at = 0
                for end in range(1, min(len(start), longest) + 1):
                    head = start[:end]
                    at = bisect.bisect_left(pieces, head, at)
                    if at == len(pieces) or not pieces[at].startswith(head):
                        break  # no piece goes on like this
                    if pieces[at] == head:
                        found[head] = int(ids[at])
        return found

    def _merges_among(self, vocab: dict[str, int]) -> list[list[str]]:
        """The merges that build a piece of vocab from two pieces, in rank order."""
        size, keys = self.size, []
        for piece in vocab:
            for cut in range(1, len(piece)):
                left, right = self._id(piece[:cut]), self._id(piece[cut:])
                if left is not None and right is not None:
                    keys.append(left * size + right)
        if not keys:
            return []
        wanted = np.asarray(keys, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.merge_keys, wanted), len(self.merge_keys) - 1)
        hit = self.merge_keys[at] == wanted
        ranks, chosen = self.merge_ranks[at[hit]], wanted[hit]
        return [[self.piece(k // size), self.piece(k % size)] for k in chosen[np.argsort(ranks)].tolist()]

    # ----------------------------------------------------------------------------------------
    # Taking, saving and loading

    @classmethod
    def take(cls, tokenizer: PreTrainedTokenizerBase) -> TokenizerSnapshot | None:
        """The snapshot of a fast Hugging Face tokenizer, or None where BPE's substring argument
        does not cover it (another model type, a normalizer that rewrites across characters,
        added tokens outside the model's pieces, merges of unk or byte-fallback pieces)."""
        view = TransformersTokenizer(tokenizer)
        spec = json.loads(view._backend().to_str())
        model = dict(spec["model"])
        pieces, merges = model.pop("vocab", None), model.pop("merges", None)
        if not _plain_bpe(model, spec) or not isinstance(pieces, dict):
            return None
        size = len(tokenizer)
        by_id = sorted(pieces, key=pieces.__getitem__)
        if sorted(pieces.values()) != list(range(size)) or view.pieces() != by_id:
            return None
        if any(pieces.get(a["content"]) != a["id"] for a in spec["added_tokens"]):
            return None
        pairs = [m.split(" ", 1) if isinstance(m, str) else m for m in merges]
        if model.get("unk_token") and model["unk_token"] not in pieces:
            return None
        always = [model["unk_token"]] if model.get("unk_token") else []
        if model.get("byte_fallback"):
            always += [p for p in (f"<0x{b:02X}>" for b in range(256)) if p in pieces]
        if set(always) & {p for pair in pairs for p in pair}:
            return None  # unk or byte pieces that merge: symbols beyond the text's substrings
        keys = np.array([pieces[a] * size + pieces[b] for a, b in pairs], dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        alphabetical = sorted(pieces)
        sorted_ids = np.array([pieces[p] for p in alphabetical], dtype=np.int64)
        positions = np.empty(size, dtype=np.int64)
        positions[sorted_ids] = np.arange(size)
        skeleton = {
            "version": spec.get("version", "1.0"), "truncation": None, "padding": None,
            "added_tokens": [], "normalizer": spec.get("normalizer"),
            "pre_tokenizer": spec.get("pre_tokenizer"), "post_processor": None, "decoder": None,
            "model": {**model, "vocab": {}, "merges": []},
        }
        return cls(
            fingerprint=view.fingerprint,
            size=size,
            decoder=view.decoder,
            special=view.special,
            added_ids=view.added_ids,
            skeleton=json.dumps(skeleton),
            sorted_pieces=tuple(alphabetical),
            sorted_ids=sorted_ids,
            positions=positions,
            merge_keys=keys[order],
            merge_ranks=order.astype(np.int64),
            added=tuple(spec["added_tokens"]),
            prefixes=tuple(_prefixes(spec.get("normalizer")) + _prefixes(spec.get("pre_tokenizer"))),
            always=tuple(always),
            longest=max(map(len, pieces)),
        )

    def save(self, path: Path) -> None:
        """Write the snapshot atomically (a reader never sees half a file)."""
        state = {name: getattr(self, name) for name in self.__dataclass_fields__}
        state["special"] = vars(self.special)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        tmp.write_bytes(pickle.dumps({"format": _FORMAT, **state}, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> TokenizerSnapshot | None:
        """A saved snapshot, or None when the file is missing, damaged or of another format."""
        try:
            state = pickle.loads(path.read_bytes())
            if state.pop("format") != _FORMAT:
                return None
            state["special"] = SpecialTokens(**state["special"])
            return cls(**state)
        except Exception:  # a missing or damaged cache file is rebuilt, never trusted
            return None


def _plain_bpe(model: dict[str, Any], spec: dict[str, Any]) -> bool:
    """Whether a BPE model and its text pipeline are ones the substring argument covers."""
    if model.get("type") != "BPE" or model.get("dropout"):
        return False
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return False
    return _steps_within(spec.get("normalizer"), _NORMALIZERS) and _steps_within(
        spec.get("pre_tokenizer"), _PRE_TOKENIZERS
    )


def _steps_within(step: dict[str, Any] | None, allowed: set[str]) -> bool:
    """Whether a normalizer or pre-tokenizer (or every step of a sequence) is of an allowed type;
    a Replace must map one character to a string, so it acts on each character alone."""
    if step is None:
        return True
    kind = step.get("type")
    if kind == "Sequence":
        steps = step.get("normalizers") or step.get("pretokenizers") or []
        return all(_steps_within(s, allowed) for s in steps)
    if kind == "Replace":
        pattern = step.get("pattern", {})
        return "String" in pattern and len(pattern["String"]) == 1
    return kind in allowed


def _prefixes(step: dict[str, Any] | None) -> list[str]:
    """What a normalizer or pre-tokenizer may put in front of each segment of the text."""
    if step is None:
        return []
    kind = step.get("type")
    if kind == "Sequence":
        steps = step.get("normalizers") or step.get("pretokenizers") or []
        return [p for s in steps for p in _prefixes(s)]
    if kind == "Metaspace" and step.get("prepend_scheme", "always") != "never":
        return [step.get("replacement", "\u2581")]
    if kind == "ByteLevel" and step.get("add_prefix_space"):
        return ["\u0120"]  # a space, as the GPT-2 byte table writes it
    if kind == "Prepend":
        return [step["prepend"]]
    return []
