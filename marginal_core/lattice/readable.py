"""A tokenization as readable text: token pieces with invisible characters made visible, and a
path as one string with its token boundaries marked. Below the figures (``viz``) because tables
of estimates use them too."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marginal_core.lattice.graph import Lattice
    from marginal_core.lattice.paths import Path

# Characters a label shows as an escape (\x07, \u200b, \ud800) instead of as themselves: control
# and format characters (bidi overrides, zero-width joiners), line and paragraph separators, lone
# surrogates and noncharacters. They are invisible, reorder or break lines, and are not allowed in
# XML (SVG); combining marks, emoji and every script are shown as they are.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

_SHOWN_AS = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def _visible(char: str) -> str:
    if char in _SHOWN_AS:
        return _SHOWN_AS[char]
    code = ord(char)
    noncharacter = 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE
    if unicodedata.category(char) in _HIDDEN_CATEGORIES or noncharacter:
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return char


def show_piece(text: str) -> str:
    r"""A token's text with invisible characters made visible: space ␣, newline ↵, tab ⇥, CR ␍, and
    any other control, format or separator character, lone surrogate or noncharacter as a Python
    escape (``\x07``, ``\u200d``)."""
    if text.isprintable():  # the common case, fast: nothing to escape but spaces
        return text.replace(" ", "␣")
    return "".join(map(_visible, text))


def segmented(lattice: Lattice, path: Path, sep: str = "|") -> str:
    """A tokenization as one string with its token boundaries marked: ``␣The|␣cap|ital``."""
    return sep.join(show_piece(p) for p in lattice.pieces(path))
