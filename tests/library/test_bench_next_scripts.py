"""Issue 65's bench inputs, pure (no model): bench/next_scripts.tsv parses into at least 24
prompts in at least 6 scripts, and bench.support.scripts' generator yields every kind the crash
bench needs (mixed scripts, emoji sequences, strings that end inside a grapheme cluster), seeded
and within 1 to 6 code points."""

from __future__ import annotations

import unicodedata
from collections import Counter

import pytest

from bench.support.scripts import KINDS, MAX_CHARS, RLM, ZWJ, fuzz_strings, script_prompts


def test_the_prompt_file_parses():
    prompts = script_prompts()
    scripts = Counter(s for s, _ in prompts)
    assert len(prompts) >= 24 and len(scripts) >= 6
    assert {"Chinese", "Japanese", "Korean", "Hindi", "Arabic", "Russian", "Greek", "Thai", "emoji"} <= set(scripts)
    assert len({p for _, p in prompts}) == len(prompts)  # no prompt twice
    assert ("Korean", "서울은 한국의 ") in prompts  # a JSON-quoted prompt keeps its trailing space
    assert all(p and "\t" not in p and p.encode("utf-8").decode("utf-8") == p for _, p in prompts)
    # most end inside a word or right after a space
    assert sum(p.endswith(" ") or unicodedata.category(p[-1])[0] == "L" for _, p in prompts) > len(prompts) / 2


def test_a_malformed_line_is_refused(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("# comment\n\nGreek\t\"Καλημέρα \"\nno tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=":4: not script<TAB>prompt"):
        script_prompts(path)
    path.write_text("Greek\t\"Καλημέρα \"\n", encoding="utf-8")
    assert script_prompts(path) == [("Greek", "Καλημέρα ")]


def blocks(text: str) -> set[str]:
    """Rough script names of a string's code points."""
    out = set()
    for c in text:
        o = ord(c)
        out |= {name for name, (lo, hi) in {
            "han": (0x4E00, 0x9FFF), "kana": (0x3041, 0x30FF), "hangul": (0xAC00, 0xD7A3),
            "arabic": (0x0600, 0x06FF), "devanagari": (0x0900, 0x097F), "thai": (0x0E00, 0x0E7F),
            "cyrillic": (0x0400, 0x04FF), "greek": (0x0370, 0x03FF), "combining": (0x0300, 0x036F),
            "skin": (0x1F3FB, 0x1F3FF), "regional": (0x1F1E6, 0x1F1FF)}.items() if lo <= o <= hi}
    return out


def mark(c: str) -> bool:
    """A combining mark (Mn, Mc, Me)."""
    return unicodedata.category(c).startswith("M")


def test_the_generator_yields_every_kind():
    strings = fuzz_strings(1000, seed=0)
    assert strings == fuzz_strings(1000, seed=0) and strings != fuzz_strings(1000, seed=1)
    assert Counter(k for k, _ in strings).keys() == KINDS.keys()
    assert all(1 <= len(s) <= MAX_CHARS for _, s in strings)
    by_kind: dict[str, list[str]] = {}
    for kind, s in strings:
        by_kind.setdefault(kind, []).append(s)
    seen = set().union(*(blocks(s) for _, s in strings))
    assert {"han", "kana", "hangul", "arabic", "devanagari", "thai", "cyrillic", "greek", "combining", "skin",
            "regional"} <= seen
    assert all(RLM in s for s in by_kind["Arabic + RLM"])
    assert any(mark(c) for s in by_kind["Devanagari + signs"] for c in s)
    assert all(ZWJ in s for s in by_kind["emoji ZWJ"])
    assert all(blocks(s) & {"skin"} for s in by_kind["emoji skin tone"])
    assert any(mark(c) for s in by_kind["combining accents"] for c in s)
    assert all(s.isascii() for s in by_kind["ASCII"])
    # strings that end inside a grapheme cluster
    assert all(s.endswith(ZWJ) for s in by_kind["ends after ZWJ"])
    assert all(not mark(s[-1]) or (len(s) > 1 and not mark(s[-2]))  # a base, or a stack's first mark after it
               for s in by_kind["ends before a combining mark"])
    assert all(unicodedata.category(s[-1])[0] in "LM" for s in by_kind["ends before a combining mark"])
    assert all(0x1F1E6 <= ord(s[-1]) <= 0x1F1FF for s in by_kind["ends on a lone regional indicator"])
    assert any(s.endswith("\ufe0f") for s in by_kind["ends inside an emoji sequence"])
    assert any(mark(s[0]) for _, s in strings)  # a string that begins with a mark


def next_char(character: str, b: bytes, p: float, lower: float, upper: float):
    """A NextChar (with a status where the class has one)."""
    from dataclasses import fields

    from marginal_core.search.next.results import NextChar

    extra = {"status": "certified"} if "status" in {f.name for f in fields(NextChar)} else {}
    return NextChar(character, b, p, lower, upper, 0.0, 0.0, **extra)


def test_whole_characters_and_the_views_top_against_a_range():
    from bench.next_chars.measures import char_verdict, compared_rows, differs, whole_character
    from bench.next_chars.runs import Run
    from marginal_core.search.next.results import END, NextCharacters

    assert whole_character("学".encode()) and whole_character(b"a") and not whole_character(b"")
    assert not whole_character(b"\xe5") and not whole_character("学a".encode())
    rows = (next_char("学", "学".encode(), 0.4, 0.395, 0.404), next_char("怀…濿", b"\xe6", 0.2, 0.1, 0.3),
            next_char(END, b"", 0.1, 0.1, 0.1), next_char("a", b"a", 0.05, 0.0, 1.0))
    found = NextCharacters("大", "m", None, rows, (), {"canonical": 0.5, "healed": 0.1}, 1.0, 1, 1, False)
    run = Run("Chinese", "大", "m", [found], "学".encode(), b"\xe5", None)
    assert compared_rows(run) == ([rows[0], rows[3]], 1, 1)  # whole, end rows, skipped ranges
    assert not differs("学".encode(), run) and not differs(b"\xe5", run)  # a token that stops inside 学
    assert differs(b"\xe6", run) is None and differs("字".encode(), run) is True  # a group of other characters: open
    assert char_verdict(rows[0], 0.41, 0.01, 0.02) == "yes" and char_verdict(rows[0], 0.43, 0.01, 0.02) == "no"
    assert char_verdict(rows[3], 0.05, 0.01, 0.02) == "open"


def test_the_fuzz_bench_gives_every_kind_all_three_calls():
    from bench.next_fuzz import full

    strings = fuzz_strings(1000, seed=0)
    chosen = [k for i, (k, _) in enumerate(strings) if full(i, 10)]
    assert set(chosen) == set(KINDS) and 80 <= len(chosen) <= 120
