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


class NormalizationError(MarginalError):
    """The tokenizer changes the text (lowercasing, NFKC, ...), so no honest lattice can be built."""


class TooManyPathsError(MarginalError):
    """The lattice has more paths than the requested operation's budget allows (e.g. exact)."""


def run_cli(command: Callable[[], int | None], prog: str = "marginal") -> int:
    """Run a command-line entry point under the one error policy of every `marginal` command:
    an error the user can fix is one line on standard error and exit status 2."""
    sys.set_int_max_str_digits(0)  # exact counts of long texts pass Python's 4,300-digit default
    try:
        return command() or 0
    except MarginalError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
