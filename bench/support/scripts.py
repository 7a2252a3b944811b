"""Text in many scripts for the benches and the tests (issue 65): the prompt set of
bench/next_scripts.tsv, and a seeded generator of short strings from mixed scripts that the crash
bench (bench.next_fuzz) feeds to the library. Pure: no model, no torch.

The generator's kinds are the issue's: CJK, Hangul, Arabic with right-to-left marks, Devanagari
with combining signs, Thai, Cyrillic, Greek, emoji with ZWJ sequences and with skin tones,
combining accents, ASCII, a mix of them all, and strings that end inside a grapheme cluster
(after a ZWJ, before a combining mark, inside an emoji sequence, on a lone regional indicator).
Every string has 1 to ``MAX_CHARS`` code points.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

SCRIPT_PROMPTS = Path(__file__).resolve().parents[1] / "next_scripts.tsv"
MAX_CHARS = 6

ZWJ, RLM, LRM, VS16, KEYCAP = "\u200d", "\u200f", "\u200e", "\ufe0f", "\u20e3"


def script_prompts(path: Path = SCRIPT_PROMPTS) -> list[tuple[str, str]]:
    """The (script, prompt) pairs of a prompt file: script<TAB>prompt a line, the prompt the rest
    of the line exactly, or a JSON string where it begins or ends with whitespace; lines that begin
    with # and blank lines skipped."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip() or line.startswith("#"):
            continue
        script, sep, prompt = line.partition("\t")
        if not sep or not script.strip() or not prompt:
            raise ValueError(f"{path}:{number}: not script<TAB>prompt: {line!r}")
        if prompt.startswith('"') and prompt.endswith('"') and len(prompt) > 1:
            prompt = json.loads(prompt)
        out.append((script.strip(), prompt))
    return out


# ------------------------------------------------------------------ the alphabets

def span(first: int, last: int) -> list[str]:
    """The characters U+first..U+last."""
    return [chr(c) for c in range(first, last + 1)]


HAN = list("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年日本首都学京北东西南") + span(0x4E00, 0x9FFF)
KANA = span(0x3041, 0x3096) + span(0x30A1, 0x30FA) + list("。、ー")
HANGUL = span(0xAC00, 0xD7A3)
ARABIC_LETTERS = span(0x0621, 0x063A) + span(0x0641, 0x064A)
ARABIC_MARKS = span(0x064B, 0x0652)  # harakat: combining
DEVANAGARI_BASES = span(0x0905, 0x0914) + span(0x0915, 0x0939)
DEVANAGARI_SIGNS = span(0x093E, 0x094C) + ["\u0901", "\u0902", "\u0903", "\u093c", "\u094d"]  # matras, bindu, nukta, virama
THAI_BASES = span(0x0E01, 0x0E2E) + ["\u0e40", "\u0e41", "\u0e42", "\u0e30", "\u0e32"]
THAI_MARKS = ["\u0e31", *span(0x0E34, 0x0E3A), *span(0x0E47, 0x0E4E)]  # above/below vowels, tone marks
CYRILLIC = span(0x0410, 0x044F) + ["ё", "Ё"]
GREEK = span(0x0391, 0x03A1) + span(0x03A3, 0x03A9) + span(0x03B1, 0x03C9) + list("άέήίόύώΐΰ")
LATIN = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
COMBINING = span(0x0300, 0x036F)
ASCII = [chr(c) for c in range(0x20, 0x7F)] + ["\n", "\t"]
EMOJI = list("😀😂🥲😍🤔🙃🍕🍔🍟🎂🎉🔥⭐🌍🚀🐱🐶🌈💻📚")
PEOPLE = list("👩👨🧑👧👦")
HANDS = list("👍👋🙌👏✋🤝💪")
SKIN = span(0x1F3FB, 0x1F3FF)
ZWJ_TAILS = list("💻🔬🚀🎨🍳🏫⚕🌾") + ["❤\ufe0f", "👩", "👨", "👧"]
REGIONAL = span(0x1F1E6, 0x1F1FF)
FLAGS = ["🇫🇷", "🇯🇵", "🇰🇷", "🇮🇳", "🇺🇸", "🇩🇪"]


def pick(rng: random.Random, alphabet: list[str], n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def length(rng: random.Random, low: int = 1, high: int = MAX_CHARS) -> int:
    return rng.randint(low, high)


# ------------------------------------------------------------------ the kinds

def cjk(rng: random.Random) -> str:
    return "".join(rng.choice(HAN if rng.random() < 0.6 else KANA) for _ in range(length(rng)))


def hangul(rng: random.Random) -> str:
    return "".join(" " if rng.random() < 0.15 else rng.choice(HANGUL) for _ in range(length(rng)))


def arabic_rtl(rng: random.Random) -> str:
    """Arabic letters (some with a haraka) with at least one right-to-left mark U+200F."""
    n = length(rng, 2)
    chars = [rng.choice(ARABIC_MARKS) if i and rng.random() < 0.25 else rng.choice(ARABIC_LETTERS) for i in range(n - 1)]
    chars.insert(rng.randint(0, len(chars)), RLM)
    return "".join(chars)


def devanagari(rng: random.Random) -> str:
    """Devanagari consonants each followed, often, by a combining sign (a matra, virama, bindu)."""
    out = ""
    while len(out) < MAX_CHARS:
        out += rng.choice(DEVANAGARI_BASES)
        if rng.random() < 0.6 and len(out) < MAX_CHARS:
            out += rng.choice(DEVANAGARI_SIGNS)
        if rng.random() < 0.3:
            break
    return out


def thai(rng: random.Random) -> str:
    out = ""
    while len(out) < MAX_CHARS:
        out += rng.choice(THAI_BASES)
        if rng.random() < 0.4 and len(out) < MAX_CHARS:
            out += rng.choice(THAI_MARKS)
        if rng.random() < 0.3:
            break
    return out


def cyrillic(rng: random.Random) -> str:
    return "".join(" " if rng.random() < 0.15 else rng.choice(CYRILLIC) for _ in range(length(rng)))


def greek(rng: random.Random) -> str:
    return "".join(" " if rng.random() < 0.15 else rng.choice(GREEK) for _ in range(length(rng)))


def zwj_sequence(rng: random.Random) -> str:
    """A person joined by ZWJ to an object or to others (👩‍💻, 👨‍👩‍👧), 3 to 5 code points."""
    seq = rng.choice(PEOPLE) + ZWJ + rng.choice(ZWJ_TAILS)
    if len(seq) == 3 and rng.random() < 0.4:
        seq += ZWJ + rng.choice(PEOPLE)
    return seq


def emoji_zwj(rng: random.Random) -> str:
    seq = zwj_sequence(rng)
    room = MAX_CHARS - len(seq)
    before = pick(rng, EMOJI + [" "] + LATIN, rng.randint(0, room))
    return before + seq


def emoji_skin(rng: random.Random) -> str:
    """Hands or people with a skin tone modifier (👍🏽), now and then one ZWJ-joined (👩🏾‍💻)."""
    out = ""
    while len(out) <= MAX_CHARS - 2:
        base = rng.choice(HANDS + PEOPLE)
        out += base + rng.choice(SKIN)
        if base in PEOPLE and len(out) <= MAX_CHARS - 2 and rng.random() < 0.3:
            out += ZWJ + rng.choice(ZWJ_TAILS[:8])
        if rng.random() < 0.5:
            break
    return out


def combining(rng: random.Random) -> str:
    """Latin letters with one or two combining accents (e + U+0301); now and then a string that
    begins with a mark."""
    out = rng.choice(COMBINING) if rng.random() < 0.1 else ""
    while len(out) < MAX_CHARS:
        out += rng.choice(LATIN)
        for _ in range(rng.choice((0, 1, 1, 2))):
            if len(out) < MAX_CHARS:
                out += rng.choice(COMBINING)
        if rng.random() < 0.3:
            break
    return out


def ascii_text(rng: random.Random) -> str:
    return pick(rng, ASCII, length(rng))


ALPHABETS = [HAN, KANA, HANGUL, ARABIC_LETTERS, ARABIC_MARKS, DEVANAGARI_BASES, DEVANAGARI_SIGNS, THAI_BASES,
             THAI_MARKS, CYRILLIC, GREEK, LATIN, COMBINING, ASCII, EMOJI, SKIN, REGIONAL, [ZWJ, RLM, LRM, VS16]]


def mixed(rng: random.Random) -> str:
    """Each code point from any alphabet above (marks, joiners and modifiers anywhere)."""
    return "".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(length(rng)))


def cut_after_zwj(rng: random.Random) -> str:
    """Ends on a ZWJ: an emoji (with a skin tone, or a sequence so far) before the joiner that the
    rest of the sequence would follow (👩‍, 👩🏽‍, 👨‍👩‍)."""
    head = rng.choice(PEOPLE + HANDS)
    if rng.random() < 0.3:
        head += rng.choice(SKIN)
    elif rng.random() < 0.3:
        head += ZWJ + rng.choice(PEOPLE)
    before = pick(rng, EMOJI + LATIN + [" "], rng.randint(0, MAX_CHARS - len(head) - 1))
    return before + head + ZWJ


def cut_before_combining(rng: random.Random) -> str:
    """Ends where a combining mark would follow: a base letter whose mark is cut off (Latin before
    an accent, Devanagari before a matra or virama, Thai before a tone mark, Arabic before a
    haraka), or between two stacked marks (e + U+0301, before U+0323)."""
    bases, marks = rng.choice([(LATIN, COMBINING), (DEVANAGARI_BASES, DEVANAGARI_SIGNS),
                               (THAI_BASES, THAI_MARKS), (ARABIC_LETTERS, ARABIC_MARKS)])
    out = ""
    for _ in range(rng.randint(0, 2)):  # whole clusters first
        out += rng.choice(bases) + (rng.choice(marks) if rng.random() < 0.5 else "")
    out = out[: MAX_CHARS - 2] + rng.choice(bases)
    if rng.random() < 0.3:  # inside a stack of marks: one mark of two
        out += rng.choice(marks)
    return out


def cut_inside_emoji(rng: random.Random) -> str:
    """Ends inside an emoji sequence elsewhere than a ZWJ: before a skin tone (a bare hand), after
    a variation selector before its ZWJ (🏳️), a keycap's digit and selector before U+20E3, a
    flag's first regional indicator, a family cut after a person."""
    tail = rng.choice([rng.choice(HANDS), "🏳" + VS16, rng.choice("0123456789#*") + VS16, rng.choice(REGIONAL),
                       rng.choice(PEOPLE) + ZWJ + rng.choice(PEOPLE), "❤" + VS16])
    return pick(rng, EMOJI + LATIN + [" "], rng.randint(0, MAX_CHARS - len(tail))) + tail


def lone_regional_indicator(rng: random.Random) -> str:
    """A lone regional indicator at the end: alone, after text, or after a whole flag (🇫🇷🇯)."""
    before = rng.choice(["", rng.choice(FLAGS), pick(rng, LATIN + [" "], rng.randint(1, 3))])
    return before + rng.choice(REGIONAL)


KINDS: dict[str, Callable[[random.Random], str]] = {
    "CJK": cjk,
    "Hangul": hangul,
    "Arabic + RLM": arabic_rtl,
    "Devanagari + signs": devanagari,
    "Thai": thai,
    "Cyrillic": cyrillic,
    "Greek": greek,
    "emoji ZWJ": emoji_zwj,
    "emoji skin tone": emoji_skin,
    "combining accents": combining,
    "ASCII": ascii_text,
    "mixed": mixed,
    "ends after ZWJ": cut_after_zwj,
    "ends before a combining mark": cut_before_combining,
    "ends inside an emoji sequence": cut_inside_emoji,
    "ends on a lone regional indicator": lone_regional_indicator,
}


def fuzz_strings(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n (kind, string) pairs: the kinds in turn (each one among any n ≥ len(KINDS)), each string
    drawn by its kind from a generator seeded by ``seed`` (the same n and seed give the same
    strings); 1 to MAX_CHARS code points each."""
    rng = random.Random(seed)
    names = list(KINDS)
    out = []
    for i in range(n):
        kind = names[i % len(names)]
        text = KINDS[kind](rng)
        assert 1 <= len(text) <= MAX_CHARS, (kind, text)
        out.append((kind, text))
    return out
