"""Every script, every character (issue 65): property tests over short strings drawn from mixed
scripts (CJK, Hangul, Arabic with its right-to-left mark, Devanagari with combining signs, Thai,
Cyrillic, emoji with ZWJ sequences and skin tones, combining accents), many of them ending inside
a grapheme cluster, under both models. The search past the end equals brute-force enumeration in
float64; next_characters, continue_text and surprisal answer every such string without a crash,
the characters whole and the intervals holding the values; and the bad inputs get a clear error
or a defined answer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from marginal_core.api.calls import continue_text, next_characters, surprisal
from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import extended, lattice_of
from marginal_core.search.next.results import END, REST, finished
from tests.brute_force import float64_lm, forget_float64, lattice_paths
from tests.library.test_next_characters import _exact_step, brute_next_bytes

# Single code points, so that a drawn string may end anywhere inside a grapheme cluster: after a
# ZWJ, before a skin tone or a combining sign, on one regional indicator.
ATOMS = [*"中华人民共和国日本の首都東京", *"대한민국의수", *"مرحبا", "\u200f", *"नमसत", "\u094d", "\u0947", "\u093f",
         *"ไทยป", "\u0e31", *"Столица", *"Ελλά", "👩", "💻", "👍", "\u200d", "\U0001f3fd", "\U0001f1ef", "\U0001f1f5",
         "e", "\u0301", "\u0308", " ", "a", "N"]
TEXTS = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=4).map("".join)
MOST_PATHS = 120  # brute force runs every tokenization alone: keep the drawn prompts' lattices small
SLOW = settings(max_examples=5, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])


@pytest.fixture(scope="module", autouse=True)
def _float64_copies_end_with_the_module():
    yield
    forget_float64()


@SLOW
@given(text=TEXTS)
def test_the_next_byte_after_any_script_equals_brute_force(lm, text):
    """In float64 the exact search past the end of a drawn string gives every next byte's
    probability within 1e-6 of enumeration, summing to 1; so does the byte step after its most
    probable lead byte (the lattice extended by it)."""
    lm64 = float64_lm(lm)
    lattice = lattice_of(text, lm64.text_tokenizer)
    assume(len(lattice_paths(lattice)) <= MOST_PATHS)
    context = context_ids(lm64.text_tokenizer, None)
    step = _exact_step(lm64, lattice, context)
    np.testing.assert_allclose(step.point, brute_next_bytes(lm64, lattice, context), atol=1e-6, rtol=0)
    assert step.point.sum() == pytest.approx(1.0, abs=1e-9)
    lead = max(range(0xC2, 0xF5), key=lambda c: step.point[c])
    after = extended(lattice, bytes([lead]), lattice.vocab)
    if len(lattice_paths(after)) <= MOST_PATHS:
        np.testing.assert_allclose(_exact_step(lm64, after, context).point, brute_next_bytes(lm64, after, context),
                                   atol=1e-6, rtol=0)


@SLOW
@given(text=TEXTS)
def test_any_script_gets_whole_characters_and_intervals_that_hold(lm, text):
    """next_characters on a drawn string: every row is a whole character or end (a range only as a
    remainder row), each value inside its interval, the values summing to at most 1 and the
    intervals' lower ends too; the continuation writes whole characters; surprisal's regions
    sum to the text's prefix surprisal. None of them raises."""
    found = next_characters(text, lm, k=3, time_budget=1.0)
    assert found.rows and all(r.character == END or finished(r.bytes) for r in found.rows)
    assert all(r.status == REST and not finished(r.bytes) for r in found.rest)
    for r in found.rows + found.rest:
        assert r.lower - 1e-9 <= r.probability <= r.upper + 1e-9
        assert (r.status == "certified") == (r.upper - r.lower <= found.tolerance) or r.status == REST
    assert sum(r.probability for r in found.rows + found.rest) <= 1 + 1e-6
    more = continue_text(text, lm, chars=2, time_budget=1.0)
    assert "\ufffd" not in more.marginal.text and len(more.marginal.text) == len(more.marginal.probabilities)
    s = surprisal(text, lm, time_budget=1.0)
    assert s.regions and sum(r.surprisal for r in s.regions) == pytest.approx(s.total, abs=1e-6)


@pytest.mark.parametrize("text", ["\u0301\u0301", "👩\u200d", "👩\u200d💻", "\u200fمرحبا"])
def test_prompts_inside_a_cluster_get_a_defined_answer(smollm_model, text):
    """A prompt of combining marks only, one that ends inside an emoji sequence, and one that
    begins with a right-to-left mark each get next characters over their bytes."""
    found = next_characters(text, smollm_model, k=3, time_budget=0.5)
    assert found.prompt == text and found.rows


@pytest.mark.parametrize("call", [next_characters, continue_text, surprisal])
def test_a_lone_surrogate_is_one_clear_error(smollm_model, call):
    with pytest.raises(MarginalError, match="lone surrogate U\\+D800"):
        call("ab\ud800", smollm_model)
