"""The text arguments of the `marginal` commands: the value itself, or standard input for '-'."""

from __future__ import annotations

import sys


def read_text(value: str) -> str:
    """The text argument, or standard input when it is '-' (one trailing newline dropped)."""
    if value != "-":
        return value
    text = sys.stdin.read()
    return text[:-1] if text.endswith("\n") else text
