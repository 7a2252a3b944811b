"""Issue 65, the app's side without a model: the font stack every view names (defined once, in
marginal_core/viz/style.py, naming a font for CJK, Devanagari, Arabic, Hebrew, Thai and emoji),
the direction a right-to-left text's chips run in, the isolates that keep a quoted Arabic
character in its place in a sentence, and which texts the Surprisal page offers to cut by
characters. In Chromium: tests/app/test_scripts_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from marginal_core.viz import style
from marginal_core.viz.text import chips_html, direction, isolate_rtl

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*(ROOT / "marginal_core" / "viz").glob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py"]


def test_the_font_stacks_name_a_font_for_every_script_and_are_defined_once():
    for family in ("Noto Sans CJK SC", "Noto Sans Devanagari", "Noto Sans Arabic", "Noto Sans Hebrew",
                   "Noto Sans Thai", "Noto Color Emoji"):
        assert family in style.MONO_FONTS and family in style.TEXT_FONTS
    assert style.MONO_FONTS.startswith("monospace, Noto Sans Mono CJK SC")
    for stack in (style.MONO_FONTS, style.TEXT_FONTS, style.CODE_FONTS):
        assert not re.search("[\"']", stack)  # goes into a style attribute quoted either way
    defined = [p.relative_to(ROOT).as_posix() for p in SOURCES if "Noto Sans" in p.read_text(encoding="utf-8")]
    assert defined == ["marginal_core/viz/style.py"]
    bare = [p.relative_to(ROOT).as_posix() for p in SOURCES
            if re.search(r"font-family:\s*monospace\b|family=\"monospace\"", p.read_text(encoding="utf-8"))]
    assert not bare, f"a view names monospace alone (no glyphs for other scripts): {bare}"


def test_the_app_style_gives_streamlit_text_the_stack():
    from pages._app.ui import fonts

    assert f"font-family: {style.TEXT_FONTS}" in fonts.STYLE and f"font-family: {style.CODE_FONTS}" in fonts.STYLE
    assert "textarea" in fonts.STYLE and "stCaptionContainer" in fonts.STYLE


@pytest.mark.parametrize(("text", "expected"), [
    ("مرحبا بالعالم", "rtl"), ("שלום", "rtl"), ("123 שלום", "rtl"), ("日本の首", "ltr"), ("abc مرحبا", "ltr"),
    ("", "ltr"), ("123 !", "ltr"),
])
def test_direction_is_the_first_strong_characters(text, expected):
    assert direction(text) == expected


def test_isolates_keep_a_quoted_right_to_left_character_in_its_place():
    assert isolate_rtl("most likely “ل” (0.690); then “مرحبا بالعالم”.") == (
        "most likely “\u2067ل\u2069” (0.690); then “\u2067مرحبا بالعالم\u2069”.")
    assert isolate_rtl("a “بِ” b") == "a “\u2067بِ\u2069” b"  # its mark with it
    assert isolate_rtl("日本の首 (0.922)") == "日本の首 (0.922)"


def test_an_arabic_prompts_chips_run_right_to_left_each_in_its_own_direction(gemma_tokenizer):
    from marginal_core.lattice.graph import lattice_of

    html = chips_html(lattice_of("مرحبا بالعالم", gemma_tokenizer), marked="the boundary")
    assert html.startswith('<div dir="rtl"')
    chips = re.findall(r'<span title="token[^>]*>', html)
    assert len(chips) >= 2 and all('dir="auto"' in c and "unicode-bidi:isolate" in c for c in chips)
    assert all(f"font-family:{style.MONO_FONTS};" in c for c in chips)
    assert chips_html(lattice_of("日本の首", gemma_tokenizer)).startswith('<div dir="ltr"')


@pytest.mark.parametrize(("text", "expected"), [
    ("我们今天去北京大学", True), ("日本の首都は東京です", True), ("ผมชอบกินข้าว", True), ("The capital of France", False),
    ("대한민국의 수도는 서울", False), ("भारत की राजधानी", False), ("東京 is big", False), ("I ❤️ 🍕", False),
])
def test_the_surprisal_page_offers_characters_for_texts_without_spaces(text, expected):
    from pages.views.surprisal import unspaced

    assert unspaced(text) is expected


def test_a_mark_alone_is_shown_on_a_dotted_circle():
    from marginal_core.viz.text import with_base

    assert [with_base(c) for c in ("ั", "ि", "\u0301", "a", "ल", "")] == ["◌ั", "◌ि", "◌\u0301", "a", "ल", ""]
