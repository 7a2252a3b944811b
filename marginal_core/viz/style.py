"""The colours every view shares: the canonical tokenization blue, the off-by-one set orange,
uniform lattice samples green, proxy samples purple, beam paths brown, exact grey; chips pastel."""

from __future__ import annotations

COLORS = {
    "canonical": "#1f77b4",
    "off_by_one": "#ff7f0e",
    "uniform": "#2ca02c",
    "lattice": "#2ca02c",
    "proxy": "#9467bd",
    "beam": "#8c564b",
    "exact": "#444444",
    "rest": "#8c8c8c",
    "other": "#4d4d4d",
    "greyed": "#d0d0d0",
}

# Two models side by side (Compare): the first model's colour, the second's.
MODEL_COLORS = ("#0b6e4f", "#b5179e")

KIND_LABELS = {
    "canonical": "canonical",
    "off_by_one": "off-by-one",
    "uniform": "uniform (length ≤ L)",
    "rest": "rest",
    "proxy": "proxy (constrained LM)",
    "beam": "beam",
    "exact": "exact",
}

# Chip backgrounds for consecutive tokens (pastel, readable with dark text).
CHIP_COLORS = ("#cfe3f7", "#fde2c8", "#d5f0d0", "#f6d3d8", "#e3d9f2", "#f7efc4", "#d2eeee")

# The fonts every view names, so that chips, strips, bars and continuations in every script show
# their glyphs, not empty boxes ("tofu"): after the view's own family, a font per script with
# glyphs of its own (Debian's fonts-noto-cjk, fonts-noto-core and fonts-noto-color-emoji, which
# `make setup` installs), then the generic fallback. The names are unquoted (valid CSS: a family
# name may be a sequence of identifiers), so the stack goes as it is into a style attribute quoted
# either way. Where a font is missing the browser tries the next, then its own fallback.
SCRIPT_FONTS = ("Noto Sans CJK SC, Noto Sans CJK JP, Noto Sans CJK KR, Noto Sans Devanagari, Noto Sans Arabic, "
                "Noto Sans Hebrew, Noto Sans Thai, Noto Color Emoji")
# Token chips, strips, a continuation: monospace first (Latin pieces keep their widths), then the
# CJK monospace font, then the scripts' fonts.
MONO_FONTS = f"monospace, Noto Sans Mono CJK SC, {SCRIPT_FONTS}, sans-serif"
# Running text (the app's sentences, captions, tables and text boxes) and code spans: Streamlit's own
# fonts first.
TEXT_FONTS = f"Source Sans, Source Sans Pro, {SCRIPT_FONTS}, sans-serif"
CODE_FONTS = f"Source Code Pro, {MONO_FONTS}"
