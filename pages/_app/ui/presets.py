"""The lesson's examples: texts chosen by measurement on both embedded models (bench/presets.py
prints each one's share of the mass off the canonical tokenization), each with what to look for.

The first is the text a first visit shows. The sidebar's Example menu puts one's text and
context in the inputs; the sidebar names the example whose text and context the inputs hold.
"""

from __future__ import annotations

from dataclasses import dataclass

QUESTION = "Question: {q}\nAnswer:"


@dataclass(frozen=True)
class Preset:
    """One example: its menu name, text, context ('' for none), what a student should look for,
    the page it opens (URL path; '' stays on the page it was picked on), what to look for on
    the Surprisal page ('' for nothing particular), and the candidates What comes next scores
    after it (none: the box keeps what it holds)."""

    name: str
    text: str
    context: str
    look_for: str
    opens: str = ""
    on_surprisal: str = ""
    candidates: tuple[str, ...] = ()


PRESETS: tuple[Preset, ...] = (
    Preset(
        "A word split in two",
        "The powerhouse of the cell is the mitochondria.",
        "",
        "The tokenizer keeps ␣powerhouse whole, yet Gemma 3 puts nearly all of the sentence's mass on "
        "␣power|house: the marginal is far above the canonical score. SmolLM2 keeps most of it on the canonical.",
        on_surprisal="The two canonical rows part two effects. Other tokenizations: under Gemma 3 both canonical rows "
        "give powerhouse about 16.5 nats and the marginal 13.6, since Gemma puts 99.6% of the mass on "
        "␣power|house, a cut the canonical tokenization never takes. The whitespace convention: choose SmolLM2 and "
        "the naive row gives The␣ 8.2 nats and powerhouse␣ 19.5, the canonical prefix row 13.7 and 14.4, the "
        "marginal 13.7 and 14.3: the 5 nats the naive row moves are the closing space, charged to the next word, "
        "not other tokenizations. Click the word to see both cuts on the Lattice page.",
    ),
    Preset(
        "Two models disagree",
        " Tokyo",
        "",
        "Side by side: Gemma 3 keeps almost all the mass on the canonical ␣Tokyo, SmolLM2 puts almost all "
        "of it on ␣To|kyo, a tokenization its own tokenizer never produces.",
        opens="compare",
    ),
    Preset(
        "Many splits",
        " unbelievably",
        "",
        "Over a thousand tokenizations, few enough to score them all: under SmolLM2 nearly all the mass sits "
        "off the canonical ␣unbelie|v|ably, on ␣un|belie|v|ably; under Gemma 3 the canonical keeps it.",
    ),
    Preset(
        "Too long to enumerate",
        "The old lighthouse keeper climbed the winding stairs every evening to light the lamp, while the "
        "storm outside grew louder and the waves crashed against the rocks below.",
        "",
        "Far too many tokenizations (about 10^40) to score them all: exact is off; the lattice sampler and the "
        "beam give lower bounds, the proxy a noisy estimate. SmolLM2 puts nearly all the mass found on T|he "
        "(the canonical with its first word split), Gemma 3 keeps it on the canonical.",
    ),
    Preset(
        "An answer to a question",
        " Tokyo",
        QUESTION.format(q="What is the capital of Japan?"),
        "The same word after a question: the canonical ␣Tokyo gains, SmolLM2's share off the canonical falls from "
        "almost all to about a tenth, Gemma 3's to almost nothing. The context changes where the mass sits.",
    ),
    # What comes next (the page's prompts: the text as it is, a trailing space or newline kept)
    Preset(
        "Next: a trailing space",
        "The capital of France is ",
        "",
        "The canonical tokens end on a lone space token (red): under SmolLM2 the next character is P 0.76 over "
        "every tokenization, but 0.0007 by the canonical tokens, whose next token rarely begins a word. Token "
        "healing backs the space off and finds P 0.76 again.",
        opens="next",
    ),
    Preset(
        "Next: inside a word",
        "The capital of Fra",
        "",
        "The prompt stops inside a word, and so does the canonical tokenization: over every tokenization n (of "
        "France) has 0.995 under SmolLM2 and 0.998 under Gemma 3; after the canonical Fra token, 0.0001 and 0.0004.",
        opens="next",
    ),
    Preset(
        "Next: a URL",
        "Visit https:",
        "",
        "After https: Gemma 3 expects / with 0.999 over every tokenization but 0.027 by the canonical tokens. Under "
        "SmolLM2 healing goes wrong: backing off the : token, it gives / 0.001 where the marginal gives 0.54.",
        opens="next",
    ),
    Preset(
        "Next: code indentation",
        "def add(a, b):\n    ",
        "",
        "Four spaces of indentation: under SmolLM2 the marginal expects r (of return) 0.38, the canonical tokens and "
        "healing all but nothing (whitespace tokens cut where code does not). Under Gemma 3 all three agree.",
        opens="next",
    ),
    Preset(
        "Next: a number",
        "pi is 3.14",
        "",
        "A control: the canonical tokens end where digits end, and all three views agree to 1e-6 under both "
        "models (SmolLM2: , 0.231 . 0.230 ␣ 0.199 1 0.148).",
        opens="next",
    ),
    Preset(
        "Next: in French",
        "Il est né à Pa",
        "",
        "Inside a French word: r (of Paris) 0.73 under SmolLM2 and 0.95 under Gemma 3 over every tokenization, "
        "0.0015 and 0.004 by the canonical tokens, which expect u (Pau?) instead.",
        opens="next",
    ),
    Preset(
        "Next: in Japanese",
        "日本の首",
        "",
        "Under Gemma 3 the canonical tokens end on 首 (red), a token that rarely comes before 都: after it 都 (of 首都, "
        "capital) has 0.0002, over every tokenization 0.92. Healing backs 首 off and finds 都 again. SmolLM2 spells "
        "日 and 首 in byte tokens (�) and expects を.",
        opens="next",
    ),
    Preset(
        "Next: in Hindi",
        "भारत की राजधानी नई दिल्",
        "",
        "The prompt stops after the virama of दिल् (Delhi), inside a cluster of characters: under Gemma 3 ल (of "
        "दिल्ली) has 0.996 over every tokenization, 0.53 by the canonical tokens, and token healing goes wrong "
        "with 0.39. Under SmolLM2 all three views agree.",
        opens="next",
    ),
    Preset(
        "Candidates: across the seam",
        "The capital of England is Lon",
        "",
        "Two candidates after a prompt that stops inside a word. lm-eval's split encodes prompt and candidate "
        "joined and cuts at the prompt's token count: ␣London crosses the seam, so it scores “, of course.” after "
        "“Lon” and, under SmolLM2, puts “␣Angeles.” first (log p −13.4 against −14.4). Over every tokenization of "
        "the two joined, “don, of course.” is far ahead (−11.2 against −27.4).",
        opens="next",
        candidates=("don, of course.", " Angeles."),
    ),
)
DEFAULT = PRESETS[0]


def matching(text: str, context: str) -> Preset | None:
    """The example whose text and context these are, None for a text of one's own."""
    return next((p for p in PRESETS if p.text == text and p.context.strip() == context.strip()), None)
