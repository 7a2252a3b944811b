"""What the lattice, the vocabulary index and the context need from a tokenizer, as one protocol.

Two kinds of object satisfy it: a Hugging Face fast tokenizer, seen through
:class:`TransformersTokenizer`, and a :class:`~marginal_core.lattice.tokenizer_snapshot.TokenizerSnapshot`,
which reproduces the same facts without importing transformers (the light path of
``marginal lattice``). Every function that takes a tokenizer accepts either kind and calls
:func:`text_tokenizer` to get the protocol's view of it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Union, cast

if TYPE_CHECKING:  # transformers takes seconds to import: annotations only
    from transformers import PreTrainedTokenizerBase

__all__ = ["SpecialTokens", "TextTokenizer", "TokenizerLike", "TransformersTokenizer", "text_tokenizer"]


@dataclass(frozen=True)
class SpecialTokens:
    """The special-token facts the vocabulary and the context use (docs/design.md, meanings 1 and 8).

    ``excluded`` holds the ids outside the lattice's vocabulary: special added tokens, the named
    special tokens and the unk token. ``adds_bos`` says whether encoding with special tokens puts
    BOS in front.
    """

    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    excluded: frozenset[int]
    adds_bos: bool


class TextTokenizer(Protocol):
    """A tokenizer as the lattice sees it: pieces by id, special tokens, canonical encoding."""

    @property
    def fingerprint(self) -> str:
        """A key that changes whenever the tokenizer does (names the vocabulary's disk cache)."""

    @property
    def size(self) -> int:
        """Number of token ids, added tokens included."""

    @property
    def decoder(self) -> dict[str, Any] | None:
        """The decoder's JSON description (it tells the tokenizer family)."""

    @property
    def special(self) -> SpecialTokens:
        """The special-token facts."""

    @property
    def added_ids(self) -> frozenset[int]:
        """Ids of added tokens, special or not (a non-special one's surface is its content)."""

    def pieces(self) -> list[str | None]:
        """Every id's piece, as the tokenizer writes it (``▁the``, ``Ġthe``, ``<0x41>``)."""

    def piece(self, token_id: int) -> str | None:
        """One id's piece."""

    def encode(self, text: str) -> list[int]:
        """The canonical tokenization: no special tokens added, special-token strings read as text."""


TokenizerLike = Union[TextTokenizer, "PreTrainedTokenizerBase"]
"""What the library's functions accept: either kind of tokenizer."""


_SPECIAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class TransformersTokenizer:
    """A Hugging Face tokenizer seen through :class:`TextTokenizer` (a thin view)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer

    @property
    def fingerprint(self) -> str:
        """Keyed by the tokenizer.json it was loaded from (path, size, mtime: cheap) when there is
        one, else by a hash of its full serialization (slow for a vocabulary as large as Gemma 3's)."""
        tok = self.tokenizer
        given = tok.init_kwargs.get("tokenizer_file")
        file = Path(given) if given else Path(str(tok.name_or_path)) / "tokenizer.json"
        if file.is_file():
            return file_fingerprint(file, len(tok))
        return hashlib.sha256(self._backend().to_str().encode()).hexdigest()[:32]

    @property
    def size(self) -> int:
        return len(self.tokenizer)

    @property
    def decoder(self) -> dict[str, Any] | None:
        decoder = self._backend().decoder
        return json.loads(decoder.__getstate__()) if decoder else None

    @property
    def special(self) -> SpecialTokens:
        """Read once per tokenizer object (Gemma 3 has thousands of added tokens to go through),
        which, like the vocabulary's memory cache, treats a loaded tokenizer as read-only."""
        tok = self.tokenizer
        if tok not in _SPECIAL:
            excluded = {i for i, t in tok.added_tokens_decoder.items() if t.special}
            excluded.update(i for i in tok.all_special_ids if i is not None)
            if tok.unk_token_id is not None:
                excluded.add(tok.unk_token_id)
            bos = tok.bos_token_id
            _SPECIAL[tok] = SpecialTokens(
                bos_id=bos,
                eos_id=tok.eos_token_id,
                unk_id=tok.unk_token_id,
                excluded=frozenset(excluded),
                adds_bos=bos is not None and tok("a")["input_ids"][:1] == [bos],
            )
        return _SPECIAL[tok]

    @property
    def added_ids(self) -> frozenset[int]:
        return frozenset(self.tokenizer.added_tokens_decoder)

    def pieces(self) -> list[str | None]:
        return self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))  # type: ignore[return-value]

    def piece(self, token_id: int) -> str | None:
        return self.tokenizer.convert_ids_to_tokens(token_id)  # type: ignore[return-value]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]

    def _backend(self) -> Any:
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise TypeError("marginal needs a fast (Rust-backed) Hugging Face tokenizer")
        return backend


def file_fingerprint(file: Path, size: int) -> str:
    """The fingerprint of a tokenizer loaded from a tokenizer.json with `size` ids."""
    stat = file.stat()
    key = f"{file.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{size}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


_MISSING = object()
_MEMBERS = ("fingerprint", "size", "decoder", "special", "added_ids", "pieces", "piece", "encode")


def text_tokenizer(tokenizer: TokenizerLike) -> TextTokenizer:
    """The protocol's view of either kind of tokenizer.

    An object with every member of the protocol is returned as it is (looked up statically, so
    no property runs); anything else is taken for a Hugging Face tokenizer.
    """
    if all(inspect.getattr_static(tokenizer, name, _MISSING) is not _MISSING for name in _MEMBERS):
        return tokenizer
    return TransformersTokenizer(cast("PreTrainedTokenizerBase", tokenizer))
