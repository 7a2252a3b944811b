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
