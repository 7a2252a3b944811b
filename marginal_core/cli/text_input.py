"""The text arguments of the `marginal` commands: the value itself, or standard input for '-'."""

from __future__ import annotations

import sys

from marginal_core.ground.errors import MarginalError


def read_text(value: str, exact: bool = False) -> str:
    """The text argument, or standard input when it is '-' (one trailing newline dropped, unless
    ``exact``: a prompt's trailing whitespace is part of it); invalid UTF-8 is one clear error."""
    if value != "-":
        return value
    text = decoded(sys.stdin.buffer.read(), "standard input")
    return text if exact or not text.endswith("\n") else text[:-1]


def decoded(data: bytes, what: str) -> str:
    """Bytes a command reads as UTF-8 text, or one clear error naming ``what`` they came from."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MarginalError(f"{what} is not UTF-8: byte {data[err.start]:#04x} at offset {err.start} "
                            "does not decode") from None
