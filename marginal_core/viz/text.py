"""Text for display: code spans, token chips, counts, logs and tiny shares (pieces with invisible
characters made visible, and segmented tokenizations, are ``lattice.readable``'s)."""

from __future__ import annotations

import html
import math
import re
import unicodedata

from marginal_core.lattice.graph import Lattice, format_count
from marginal_core.lattice.paths import Path
from marginal_core.lattice.readable import show_piece
from marginal_core.viz.style import CHIP_COLORS, MONO_FONTS


def code_span(text: str) -> str:
    """Text as a Markdown inline code span that shows it literally, backticks in it included
    (a fence one backtick longer than its longest run), so no text turns into markup or math."""
    longest = max(map(len, re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}" if longest else f"`{text}`"


def chips_html(lattice: Lattice, path: Path | None = None, *, show_ids: bool = True, marked: str = "") -> str:
    """The tokens of a path (default: canonical) as coloured chips, one per token.

    Each chip shows the token's text (spaces as ␣) and, below it, its id; hovering shows the
    byte span. ``marked``: a note for the last chip, drawn with a red border (the boundary a
    prompt's canonical tokens end on). The row runs in the text's direction (right to left for
    Arabic or Hebrew: the chips in reading order) and each chip is isolated, its own text in its own
    direction. The result is self-contained HTML for ``st.html`` or a notebook.
    """
    path = lattice.canonical if path is None else path
    chips, at = [], 0
    for n, (token, piece) in enumerate(zip(path, lattice.pieces(path))):
        width = len(lattice.vocab.surface(token))
        color = CHIP_COLORS[n % len(CHIP_COLORS)]
        label = html.escape(show_piece(piece))
        sub = f'<span style="display:block;font-size:0.65em;color:#666">{token}</span>' if show_ids else ""
        last = marked and n == len(path) - 1
        note = f" · {html.escape(marked)}" if last else ""
        border = "3px solid #d62728" if last else "1px solid #9aa"
        chips.append(
            f'<span title="token {n + 1}: id {token}, bytes {at}–{at + width}{note}" '
            f'dir="auto" style="display:inline-block;unicode-bidi:isolate;background:{color};border:{border};'
            f"border-radius:6px;padding:2px 6px;margin:2px 1px;font-family:{MONO_FONTS};"
            f'font-size:1.05em;text-align:center;line-height:1.2">{label}{sub}</span>'
        )
        at += width
    return f'<div dir="{direction(lattice.text)}" style="line-height:2.2">' + "".join(chips) + "</div>"


def direction(text: str) -> str:
    """The direction a text reads in, as HTML's dir: "rtl" where its first strongly directional
    character is right to left (Arabic, Hebrew, Syriac, Thaana, N'Ko), else "ltr" (also for a text
    with no such character). What dir="auto" decides in a browser, decided here so that a row of
    chips (each isolated, which dir="auto" on the row would skip) follows its text."""
    for char in text:
        kind = unicodedata.bidirectional(char)
        if kind in ("R", "AL"):
            return "rtl"
        if kind == "L":
            return "ltr"
    return "ltr"


DOTTED_CIRCLE = "\u25cc"


def with_base(label: str) -> str:
    """A character's label for display: one that begins with a combining mark (a Thai vowel, a
    Devanagari vowel sign, an accent) drawn on a dotted circle, as Unicode's charts show a mark
    alone; otherwise as it is (a mark alone after a quote sits on the quote)."""
    return DOTTED_CIRCLE + label if label and unicodedata.category(label[0]) in ("Mn", "Mc", "Me") else label


def isolate_rtl(text: str) -> str:
    """Text for a left-to-right line with each stretch of right-to-left text (Arabic, Hebrew: from
    a right-to-left character to the last one before the next left-to-right character or line end,
    with their marks) between Unicode's isolates (RLI ... PDI), so that a quoted character does not
    pull the quotes and numbers beside it into its direction ("“ل” (0.690)" keeps that order)."""
    kinds = [unicodedata.bidirectional(c) for c in text]
    out, i = [], 0
    while i < len(text):
        if kinds[i] not in ("R", "AL"):
            out.append(text[i])
            i += 1
            continue
        end = j = i  # the stretch runs to its last right-to-left character (or mark after one)
        while j < len(text) and kinds[j] != "L" and text[j] not in "\n\r":
            if kinds[j] in ("R", "AL") or (kinds[j] == "NSM" and end == j - 1):
                end = j
            j += 1
        out.append("\u2067" + text[i:end + 1] + "\u2069")
        i = end + 1
    return "".join(out)


def count_label(n: int) -> str:
    """A count as a page shows it: digits with separators below a billion, else "1.23 × 10^13"
    (lattice.format_count, typeset)."""
    mantissa, _, exponent = format_count(n, exact_below=10**9).partition("e")
    return f"{mantissa} × 10^{exponent}" if exponent else mantissa


def format_log(x: float, digits: int = 3) -> str:
    """A natural log for display ('−inf' where no mass was found)."""
    return f"{x:.{digits}f}" if math.isfinite(x) else "−inf"


def format_small(x: float, digits: int = 3, *, percent: bool = False, signed: bool = False) -> str:
    """A number that may be tiny, for display: ``digits`` decimals ("0.125", "12.50%"), or two
    significant digits in scientific notation where those decimals would hide it ("4.7e-05",
    "4.7e-03%"); a share just short of 100% keeps the digits that show the gap ("99.99969%");
    signed adds "+" to positive numbers (a gain)."""
    value = 100 * x if percent else x
    sign = "+" if signed else ""
    gap = 100 - value  # a share just short of all of it ("99.99969%", never a rounded "100.00%")
    if value != 0 and math.isfinite(value) and abs(value) < 10**-digits:
        text = f"{value:{sign}.1e}"
    elif percent and 0 < gap < 10**-digits:
        text = f"{value:{sign}.{min(12, math.ceil(-math.log10(gap)) + 1)}f}"
    else:
        text = f"{value:{sign}.{digits}f}"
    return text + ("%" if percent else "")
