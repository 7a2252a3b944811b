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
    the page it opens (URL path; '' stays on the page it was picked on), and what to look for on
    the Surprisal page ('' for nothing particular)."""

    name: str
    text: str
    context: str
    look_for: str
    opens: str = ""
    on_surprisal: str = ""


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
)
DEFAULT = PRESETS[0]


def matching(text: str, context: str) -> Preset | None:
    """The example whose text and context these are, None for a text of one's own."""
    return next((p for p in PRESETS if p.text == text and p.context.strip() == context.strip()), None)
