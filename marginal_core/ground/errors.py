"""Exceptions raised by marginal_core.

Every error the library raises on purpose derives from :class:`MarginalError`, so the CLI and the
app can catch that one class and show its message (one line, no traceback) to the user.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = [
    "MarginalError",
    "UnknownModelError",
    "EmptyTextError",
    "UnrepresentableTextError",
    "NormalizationError",
    "TooManyPathsError",
    "ContextWindowError",
    "run_cli",
]


class MarginalError(Exception):
    """Base class of every error marginal_core raises on purpose; its message is user-facing."""


class UnknownModelError(MarginalError):
    """A model name is neither an embedded model nor a loadable Hugging Face id or local folder."""


class EmptyTextError(MarginalError):
    """The text to score is empty, so it has no tokenization to marginalize over."""


class UnrepresentableTextError(MarginalError):
    """The text cannot be written as a sequence of tokens of the vocabulary (no lattice path)."""

    @classmethod
    def check_unicode(cls, text: str, what: str = "text") -> None:
        """Refuse a text holding lone surrogates (U+D800-U+DFFF): no encoding, so no tokenizer,
        can represent them (Python reads bytes that are not UTF-8 from a command line as such)."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise cls(
                f"the {what} is not valid Unicode: character {exc.start + 1} is a lone surrogate "
                f"U+{ord(text[exc.start]):04X} (often a byte that is not UTF-8); fix the {what}'s encoding or remove it"
            ) from None


class NormalizationError(MarginalError):
    """The tokenizer changes the text (lowercasing, NFKC, ...), so no honest lattice can be built."""


class TooManyPathsError(MarginalError):
    """The lattice has more paths than the requested operation's budget allows (e.g. exact)."""


class ContextWindowError(MarginalError):
    """A tokenization to score, after its context, has more tokens than the model's context
    window (its config's max_position_embeddings): refused before any scoring, since positions
    beyond the window give meaningless scores and unbounded memory."""

    def __init__(self, message: str, *, tokens: int = 0, context: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.tokens, self.context, self.limit = tokens, context, limit

    @classmethod
    def of(cls, what: str, tokens: int, context: int, limit: int, model: str, hint: str = "") -> ContextWindowError:
        """The error for `what` (e.g. "the text's canonical tokenization") of tokens tokens."""
        return cls(
            f"{what} has {tokens:,} tokens ({tokens + context:,} with the context), more than {model}'s context "
            f"window of {limit:,} tokens, so the model cannot score it; {hint or 'shorten the text or the context'}",
            tokens=tokens, context=context, limit=limit,
        )


class OutOfMemory(MarginalError):
    """Even the smallest unit of work does not fit in memory on this device."""


def is_oom(err: BaseException) -> bool:
    """Whether an exception is an allocation failure (CUDA, MPS or the CPU allocator)."""
    if isinstance(err, MemoryError):
        return True
    try:
        import torch
    except ImportError:  # no torch, so no torch allocation failure
        return False
    if isinstance(err, torch.OutOfMemoryError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def run_cli(command: Callable[[], int | None], prog: str = "marginal") -> int:
    """Run a command-line entry point under the one error policy of every `marginal` command:
    an error the user can fix is one line on standard error and exit status 2; Ctrl-C exits with 130."""
    sys.set_int_max_str_digits(0)  # exact counts of long texts pass Python's 4,300-digit default
    try:
        return command() or 0
    except MarginalError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: a word, not a traceback (results folders keep finished items)
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
