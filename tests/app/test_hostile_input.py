"""Every page under hostile input: arbitrary Unicode, malformed URL numbers and choices, unknown
models (issue 13). Driven headless with AppTest, as a shared link opens a page, and hypothesis.

Whatever the input, a page shows no exception element, no "Traceback" and no generic "Something
went wrong", and it renders: a drawing, a number or table, its main button, or a specific message
that says what to change. The views that need no scoring are the point (SmolLM2, no Run pressed),
plus one small scored run; examples are few, so the file runs in a few minutes on a CPU.

Lone surrogates cannot travel in a URL (a percent-encoded one arrives as U+FFFD, which the texts
here hold) nor from a browser; the library's refusal of them is tested in test_lattice_limits.py.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from bench.support.apptest import APP

pytestmark = pytest.mark.models  # the pages load the sidebar's model (all but two tests)
SMOL = "smollm2-135m"
ROOT = Path(APP).parent
PAGES = ("home", "lattice", "samplers", "mass", "rank", "running", "qa", "translation")
# What shows that a page rendered, besides a specific message: element kinds, or its main button.
RENDERS = {
    "home": ("metric",),
    "lattice": ("graphviz_chart", "html"),  # the whole lattice is an SVG image in a scroll box
    "samplers": ("plotly_chart",),
    "mass": ("button:compute", "plotly_chart"),
    "rank": ("button:draw", "plotly_chart"),
    "running": ("button:run",),
    "qa": ("button:qa_run",),
    "translation": ("button:mt_run",),
}
# The numbers each page reads from its URL (pages/_app/ui/widgets.py and the pages' own widgets).
NUMBERS = {
    "home": ("k",),
    "lattice": ("L", "first", "span"),
    "samplers": ("k", "L", "seed", "pk"),
    "mass": ("k", "L", "seed"),
    "rank": ("pk", "seed", "per", "tk"),
    "running": ("k", "L", "seed"),
    "qa": ("qa_limit", "qa_k", "qa_seed"),
    "translation": ("mt_limit", "mt_k", "mt_seed", "mt_candidates"),
}
# Choices in the URL, each given a value that is not one of its options.
CHOICES = {"device": "cuda:99", "y": "nonsense", "methods": "lattice,bogus", "lengths": "7", "whole": "maybe",
           "logy": "2", "qa_dataset": "../../etc/passwd", "qa_methods": "exact", "mt_dataset": "xx-yy",
           "mt_methods": "none"}

# Pieces of text that have broken parsers, drawings or layouts: every C0 control, DEL and C1
# controls, quotes, backslashes and DOT's escapes, markup, separators, zero-width and bidi
# characters, combining marks, emoji sequences, right-to-left and CJK text, a BOM, noncharacters,
# U+FFFD (what a URL's percent-encoded lone surrogate arrives as), special-token strings, markdown.
HOSTILE = [
    *map(chr, range(0x20)), "\x7f", "\x85", "\x9b", '"', "'", "\\", "\\n", "\\N", " end\\", "<b>", "</svg>", "&amp;",
    "{|}", "[label=x];", "\u2028", "\u2029", "\u200b", "\u200c", "\u200d", "\u202e", "\u2066", "\u200f",
    "e\u0301\u0323", "\u0915\u094d\u0937", "👨\u200d👩\u200d👧", "🏳️\u200d🌈", "שלום עולם", "مرحبا بالعالم",
    "漢字かな交じり", "\ufeff", "\ufffe", "\uffff", "\ufdd0", "\U0010ffff", "\ufffd", "<bos>", "<eos>",
    "<|endoftext|>", "<start_of_turn>", "$x^2$", ":material/home:", "**bold**", "`code`", " ", "  ", "\n\n",
]
TEXTS = st.one_of(
    st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=8).map("".join),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=24),  # any character a URL can carry
    st.tuples(st.sampled_from(HOSTILE), st.integers(1, 400)).map(lambda p: p[0] * p[1]),  # long runs
)
SHORT_TEXTS = st.one_of(
    st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=6).map("".join),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=16),
)
MALFORMED_NUMBERS = st.one_of(
    st.sampled_from(["-5", "abc", "1e8", "0", "", "1.5", "nan", "NaN", "inf", "-inf", "Infinity", "1e999",
                     "99999999999999999999999", "0x10", "１２", "٣", " 7", "+3", "1_000", "-0", "1e-9",
                     "2147483648", "-9223372036854775809"]),
    st.integers().map(str),
    st.text(max_size=6),
)
# Model names that are neither embedded models nor loadable, none of them a Hugging Face id that
# could exist (no test downloads anything).
UNKNOWN_MODELS = st.one_of(
    st.sampled_from(["no-such-org-marginal-test/none", "../../etc", "/", "   ", "smollm2-135m\x00", "gemma3",
                     "x" * 300, "C:\\models\\x", "~/nothing-here", "hf:no/such", "שלום", "a b c"]),
    st.text(st.characters(codec="utf-8"), max_size=12).map(lambda s: f"no such model! {s}"),
)
HYPOTHESIS = settings(max_examples=12, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def open_page(page: str, **params: str) -> AppTest:
    """An AppTest of app.py opened on a page with URL parameters, as a shared link opens it."""
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in params.items():
        at.query_params[key] = value
    if page != "home":
        at.switch_page(next(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob(f"*/{page}.py")))
    return at.run()


def shown_text(at: AppTest) -> str:
    """Everything a user reads on the page: messages, markdown, captions, code, metrics."""
    parts = [e.value for kind in ("exception", "error", "warning", "info", "success", "markdown", "caption",
                                  "code", "text", "title", "subheader") for e in getattr(at, kind)]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    return "\n".join(str(p) for p in parts)


def assert_sane(at: AppTest, page: str) -> None:
    """No exception, no traceback, no generic error, and the page rendered something useful."""
    assert not at.exception, [e.value for e in at.exception]
    text = shown_text(at)
    assert "Traceback" not in text, text[:2000]
    messages = [e.value for kind in ("error", "warning") for e in getattr(at, kind)]
    assert not [m for m in messages if "Something went wrong" in m], messages
    errors = [e.value for e in at.error]  # a message that stops the page says what to change
    assert renders(at, page) or errors, f"{page} rendered neither its view nor an error message:\n{text[:2000]}"


def renders(at: AppTest, page: str) -> bool:
    """Whether the page shows what it is for (RENDERS)."""
    keys = {b.key for b in at.button}
    return any(what.removeprefix("button:") in keys if what.startswith("button:") else bool(at.get(what))
               for what in RENDERS[page])


@given(page=st.sampled_from(PAGES), data=st.data())
@HYPOTHESIS
def test_every_page_takes_any_text(page, data):
    text = data.draw(SHORT_TEXTS if page == "home" else TEXTS, label="text")  # Home scores the text at once
    assert_sane(open_page(page, model=SMOL, text=text), page)


def test_a_very_long_text_is_drawn_and_refused_for_scoring_with_a_message():
    text = ("The committee postponed its decision until the next meeting. " * 1000)[:60_000]
    at = open_page("lattice", model=SMOL, text=text)
    assert_sane(at, "lattice")
    assert at.get("graphviz_chart") and "window" in shown_text(at)
    at = open_page("home", model=SMOL, text=text)  # past SmolLM2's 8,192 tokens: refused before scoring
    assert_sane(at, "home")
    assert any("Too long for the model" in e.value for e in at.error), [e.value for e in at.error]


def test_a_small_scored_run_on_a_hostile_text():
    text = "bell\x07 tab\t \u202eשלום\u200d 👨\u200d👩\u200d👧 e\u0301 <b>\\"
    context = "Question: is $5 more than $10, or `x`? **Bold**\u202e\nAnswer:"
    at = open_page("home", model=SMOL, text=text, context=context, k="4")
    assert_sane(at, "home")
    # The context is shown as typed: one code span, so no $...$ turns into math.
    assert [c.value for c in at.caption if c.value.startswith("Conditioned")] == [
        f"Conditioned on the context: `` {context} ``"]
    at.button(key="estimate").click().run()
    assert_sane(at, "home")
    assert "log p(text) ≥" in {m.label for m in at.metric}


@given(page=st.sampled_from(PAGES), data=st.data())
@HYPOTHESIS
def test_every_page_takes_malformed_numbers_in_its_url(page, data):
    params = {key: data.draw(MALFORMED_NUMBERS, label=key) for key in NUMBERS[page]}
    assert_sane(open_page(page, model=SMOL, text=" Paris.", **params), page)


@given(page=st.sampled_from(PAGES), model=UNKNOWN_MODELS)
@example(page="lattice", model="x" * 300)  # once "File name too long" from the file system, unexplained
@settings(HYPOTHESIS, max_examples=8)
def test_every_page_names_an_unknown_model(page, model):
    at = open_page(page, model=model, text="hello")
    assert_sane(at, page)
    if page not in ("qa", "translation"):  # those load the model only when Run is pressed
        assert any("cannot load model" in e.value for e in at.error), [e.value for e in at.error]


def test_the_whole_lattice_of_a_hostile_text_is_a_well_formed_svg():
    """Issue 13 item 1, where the whole lattice is drawn: the SVG image of a text with control
    characters, markup and separators is well-formed XML (a bell or NUL once broke it)."""
    text = "a\x00b\x07c`d` \\N <b>&amp;</b> \u2028\u202e\ufffe$x$"
    at = open_page("lattice", model=SMOL, text=text, whole="true")
    assert_sane(at, "lattice")
    (box,) = [e.proto.body for e in at.get("html") if "lattice-scroll" in e.proto.body]
    svg = base64.b64decode(re.search(r"data:image/svg\+xml;base64,([^\"]+)", box).group(1))
    drawn = "".join(ET.fromstring(svg).itertext())
    assert all(shown in drawn for shown in ("\\x00", "\\x07", "\\u2028", "\\u202e", "\\ufffe", "<", "&", "$"))
    assert not [m for m in (e.value for e in at.markdown) if m.startswith("Window:")]  # the whole lattice
    # A window's text is one code span, its backticks and markup kept literal.
    at = open_page("lattice", model=SMOL, text=text)
    (window,) = [m for m in (e.value for e in at.markdown) if m.startswith("Window:")]
    assert "`` a\\x00b\\x07c`d`␣\\N" in window and window.endswith(" ``")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_takes_choices_that_are_not_options(page):
    assert_sane(open_page(page, model=SMOL, text=" Paris.", **CHOICES), page)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_takes_infinite_numbers_in_its_url(page):
    """inf once raised OverflowError inside Streamlit's number_input, before any page code ran."""
    assert_sane(open_page(page, model=SMOL, text=" Paris.", **dict.fromkeys(NUMBERS[page], "inf")), page)
