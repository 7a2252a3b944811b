"""What comes next after a prompt: the search past the end against brute-force enumeration (every
tokenization of the prompt and every token that covers its end, each run by a plain float64
forward), the canonical column against transformers' next-token distribution folded by first
character, the healed column against a direct computation of the healing rule, continuations
beside generate, and bad input."""

from __future__ import annotations

import io
import json
import math
import sys
from collections import deque

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from marginal_core.api.calls import continue_text, next_characters
from marginal_core.cli.commands import main as cli_main
from marginal_core.ground.errors import ContextWindowError, EmptyTextError, MarginalError
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import extended, lattice_of
from marginal_core.search.char_keys import first_key
from marginal_core.search.masses import ByteStep
from marginal_core.search.memory import HEAD_BYTES, PrefixMemory
from marginal_core.search.next.results import END
from marginal_core.search.prefix import Prefix, next_characters_stream
from marginal_core.search.rounds import NextByte, search_rounds
from marginal_core.search.settings import SearchSettings
from marginal_core.search.state import PrefixState
from tests.brute_force import (
    covering_tokens,
    float64_lm,
    forget_float64,
    lattice_paths,
    next_token_log_probs,
    ordinary_tokens,
    path_log_prob,
)

PROMPTS = ["is ", "Fra", "3.1", "Né"]


@pytest.fixture(scope="module", autouse=True)
def _float64_copies_end_with_the_module():
    yield
    forget_float64()


def brute_next_bytes(lm64, lattice, context: list[int]) -> np.ndarray:
    """P(next byte = c | the lattice's bytes) for c = 0..255 and no byte (256), by enumeration: a
    path to m < len adds the tokens that begin with the bytes from m to the end and then c (the
    byte-fallback piece where the lattice has it only covers); a complete path adds its next
    token by first byte (byte pieces and special tokens write none)."""
    data, n = lattice.data, lattice.end
    ordinary, fallback = ordinary_tokens(lattice)
    nodes_paths = lattice_paths(lattice)
    found = np.full(257, -math.inf)
    total = -math.inf
    by_first: dict[int, list[int]] = {}
    for v, s in ordinary:
        by_first.setdefault(s[0], []).append(v)
    writes = {v for v, _ in ordinary}
    nothing = [v for v in range(lm64.vocab) if v not in writes]
    covering = covering_tokens(lattice, ordinary, fallback)
    then: dict[int, dict[int, list[int]]] = {}  # node m -> byte c -> the covering tokens that go on with c
    for m in range(n):
        rest = data[m:]
        then[m] = {}
        for v, s in ordinary:
            if len(s) > len(rest) and s.startswith(rest):
                then[m].setdefault(s[len(rest)], []).append(v)
    for (m, path), rows in zip(nodes_paths, next_token_log_probs(lm64, context, [p for _, p in nodes_paths]),
                               strict=True):
        log_p, last = path_log_prob(rows, path), rows[-1].numpy()
        if m == n:
            for c, ids in by_first.items():
                found[c] = np.logaddexp(found[c], log_p + logsumexp(last[ids]))
            found[256] = np.logaddexp(found[256], log_p + logsumexp(last[nothing]))
            continue
        total = np.logaddexp(total, log_p + logsumexp(last[covering[m]]))
        for c, ids in then[m].items():
            found[c] = np.logaddexp(found[c], log_p + logsumexp(last[ids]))
    return np.exp(found - total)


def _exact_step(lm64, lattice, context):
    state = lm64.context(context)
    *_, masses = search_rounds(lm64, lattice, state, SearchSettings(), NextByte(exact=True))
    return ByteStep.past_end(masses)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_next_bytes_past_the_end_equal_brute_force(lm, prompt):
    """Exact, in float64: every next-byte probability after the prompt (and the outcome of no
    byte) within 1e-6 of enumeration; the default search's certified intervals hold it."""
    lm64 = float64_lm(lm)
    lattice = lattice_of(prompt, lm64.text_tokenizer)
    context = context_ids(lm64.text_tokenizer, None)
    expected = brute_next_bytes(lm64, lattice, context)
    step = _exact_step(lm64, lattice, context)
    np.testing.assert_allclose(step.point, expected, atol=1e-6, rtol=0)
    assert step.point.sum() == pytest.approx(1.0, abs=1e-9)
    found = next_characters(prompt, lm64, k=5)
    for row in found.rows:
        truth = expected[256] if row.character == END else None
        if row.bytes and len(row.bytes) == 1:
            truth = expected[row.bytes[0]]
        if truth is not None:
            assert row.lower - 1e-9 <= truth <= row.upper + 1e-9


def test_a_character_of_several_bytes_takes_one_more_exact_step(smollm_model):
    """The byte after a lead byte, on the prompt's lattice extended by it, equals enumeration
    over that lattice (byte-level BPE: tokens that stop inside the character included)."""
    lm64 = float64_lm(smollm_model)
    base = lattice_of("N", lm64.text_tokenizer)
    lattice = extended(base, b"\xc3", base.vocab)
    assert lattice.data == b"N\xc3" and list(lattice.canonical[: len(base.canonical)]) == list(base.canonical)
    context = context_ids(lm64.text_tokenizer, None)
    np.testing.assert_allclose(_exact_step(lm64, lattice, context).point, brute_next_bytes(lm64, lattice, context),
                               atol=1e-6, rtol=0)


def _fed_tokens(lm) -> tuple[list[int], object]:
    """A counter of the tokens the decoder is fed (a forward pre-hook on it), and its handle."""
    fed = [0]

    def count(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        fed[0] += 0 if ids is None else ids.numel()

    return fed, lm.decoder.register_forward_pre_hook(count, with_kwargs=True)


@pytest.mark.parametrize(("prompt", "more"), [("is", " "), ("Fr", "a"), ("N", "\u00e9")])
def test_a_search_on_what_a_shorter_texts_search_kept_equals_brute_force(lm, prompt, more):
    """A continuation's step: the exact search of prompt + more, beginning with what the exact
    search of prompt kept (``PrefixMemory``), equals enumeration in float64 within 1e-6, and the
    model is fed fewer tokens than by a search without it; the character's byte step (the lattice
    extended by a lead byte) too."""
    lm64 = float64_lm(lm)
    context = context_ids(lm64.text_tokenizer, None)
    state = lm64.context(context)
    memory = PrefixMemory()
    shorter = lattice_of(prompt, lm64.text_tokenizer)
    deque(search_rounds(lm64, shorter, state, SearchSettings(), NextByte(exact=True), memory), maxlen=0)
    assert memory.heads or memory.hidden
    longer = lattice_of(prompt + more, lm64.text_tokenizer)
    expected = brute_next_bytes(lm64, longer, context)
    fed, hook = _fed_tokens(lm64)
    try:
        *_, kept = search_rounds(lm64, longer, state, SearchSettings(), NextByte(exact=True), memory)
        with_memory = fed[0]
        *_, fresh = search_rounds(lm64, longer, state, SearchSettings(), NextByte(exact=True))
        without = fed[0] - with_memory
    finally:
        hook.remove()
    np.testing.assert_allclose(ByteStep.past_end(kept).point, expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(ByteStep.past_end(kept).point, ByteStep.past_end(fresh).point, atol=1e-12, rtol=0)
    assert with_memory < without
    *_, searched = search_rounds(lm64, longer, state, SearchSettings(), NextByte(), memory)  # the default search, its ways on
    bounds = ByteStep.past_end(searched)
    assert np.all(bounds.lower <= expected + 1e-9) and np.all(expected <= bounds.upper + 1e-9)
    if len(more.encode()) > 1:  # the byte step after the lead byte, on what both searches kept
        lead = extended(lattice_of(prompt, lm64.text_tokenizer), more.encode()[:1], longer.vocab)
        *_, step = search_rounds(lm64, lead, state, SearchSettings(), NextByte(exact=True), memory)
        np.testing.assert_allclose(ByteStep.past_end(step).point, brute_next_bytes(lm64, lead, context), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("prompt", "first", "second", "head_bytes"), [
    ("首", b"\xe5\x9b", b"\xe5\x9c", HEAD_BYTES), ("首", b"\xe5\x9b", b"\xe5\x9c", 0), ("Я", b"\xd0", b"\xd1", HEAD_BYTES)])
def test_sibling_byte_steps_on_one_memory_equal_brute_force(lm, prompt, first, second, head_bytes):
    """Two characters' byte steps after one prompt extend it by different bytes, so a prefix the
    first closed (its head kept for the first's text) is open again in the second: the second
    runs the head on its kept hidden state, or, where the memory kept none (``head_bytes`` 0),
    feeds it again on its kept KV for its head (it was skipped: a KeyError on CJK, Cyrillic and
    Greek prompts); either equals enumeration in float64 within 1e-6."""
    lm64 = float64_lm(lm)
    context = context_ids(lm64.text_tokenizer, None)
    state, memory = lm64.context(context), PrefixMemory(head_bytes=head_bytes)
    base = lattice_of(prompt, lm64.text_tokenizer)
    for tail in (b"", first, second):
        lattice = extended(base, tail, base.vocab) if tail else base
        *_, masses = search_rounds(lm64, lattice, state, SearchSettings(), NextByte(exact=True), memory)
        np.testing.assert_allclose(ByteStep.past_end(masses).point, brute_next_bytes(lm64, lattice, context), atol=1e-6, rtol=0)


def _folded(probs: np.ndarray, vocab, prefix: bytes) -> float:
    """The brute-force fold: the ids whose surface's first character begins with prefix (b"":
    none), scanning the surfaces."""
    pieces = {t for t in vocab.byte_tokens if t is not None}
    total = 0.0
    for v in range(len(probs)):
        s = vocab.surfaces[v] if v < vocab.size and v not in pieces else None
        key = first_key(s)
        if (not prefix and not key) or (prefix and key.startswith(prefix)):
            total += probs[v]
    return total


def _next_probs(lm64, ids: list[int]) -> np.ndarray:
    with torch.inference_mode():
        logits = lm64.model(torch.tensor([ids])).logits[0, -1].double()
    return torch.softmax(logits, dim=-1).numpy()


@pytest.mark.parametrize("prompt", ["is ", "Fra"])
def test_the_canonical_and_healed_columns_equal_transformers(lm, prompt):
    """The canonical column is transformers' next-token distribution after the canonical ids,
    folded by first character; the healed one backs off the last token and constrains the next to
    begin with its bytes (a token that spells them exactly goes on with the token after it)."""
    lm64 = float64_lm(lm)
    vocab = lattice_of(prompt, lm64.text_tokenizer).vocab
    context = context_ids(lm64.text_tokenizer, None)
    canonical = list(lattice_of(prompt, lm64.text_tokenizer).canonical)
    after = _next_probs(lm64, context + canonical)
    before = _next_probs(lm64, context + canonical[:-1])
    tail = vocab.surface(canonical[-1])
    allowed = [v for v, s in enumerate(vocab.surfaces) if s and s.startswith(tail) and v not in vocab.byte_tokens]
    found = next_characters(prompt, lm64, k=6)
    for row in found.rows:
        assert row.canonical == pytest.approx(_folded(after, vocab, row.bytes), abs=1e-6)
        healed = 0.0
        for v in allowed:
            rest = vocab.surfaces[v][len(tail) :]
            if not rest:
                healed += before[v] * _folded(_next_probs(lm64, context + canonical[:-1] + [v]), vocab, row.bytes)
            elif row.bytes and first_key(rest).startswith(row.bytes):
                healed += before[v]
        assert row.healed == pytest.approx(healed / before[allowed].sum(), abs=1e-6)


def test_the_trailing_space_example_reads_as_the_issue_says(smollm_model):
    """Under SmolLM2 "The capital of France is " goes on with "P" over every tokenization, which
    the canonical tokens (a lone space token last) all but rule out; healing finds it."""
    found = next_characters("The capital of France is ", smollm_model, k=5)
    top = found.rows[0]
    assert top.character == "P" and top.probability > 0.7 and top.canonical < 0.01 and top.healed > 0.7
    assert top.lower <= top.probability <= top.upper and top.upper - top.lower <= 0.02
    assert found.boundary == (24, 25) and found.tokens[-1] == b" "
    assert found.total_variation["canonical"] > 0.9 and "0.7" in found.sentence()
    table = found.to_pandas()
    assert list(table.columns) == ["character", "bytes", "probability", "lower", "upper", "canonical", "healed",
                                   "status"]
    assert table["bytes"][0] == [80]


def test_an_empty_prompt_gives_the_first_character(smollm_model):
    """No tokens: the context's own next token, every view the same, exact."""
    found = next_characters("", smollm_model, k=3)
    assert len(found.rows) == 3 and found.tokens == ()
    for row in found.rows:
        assert row.lower == row.probability == row.upper == pytest.approx(row.canonical) == pytest.approx(row.healed)


def test_stop_keeps_the_rounds_found(smollm_model):
    """Stop after the first round: the stream's last result has the rows found, marked cancelled."""
    rounds = []

    def stop() -> bool:
        return len(rounds) >= 1

    for found in next_characters_stream(smollm_model, "The capital of France is ", k=3, should_stop=stop):
        rounds.append(found)
    last = rounds[-1]
    assert last.cancelled and not last.done and last.rows and last.rows[0].character == "P"


@pytest.mark.parametrize(("k", "message"), [(0, "k must be"), (257, "k must be")])
def test_bad_k_is_one_clear_error(smollm_model, k, message):
    with pytest.raises(MarginalError, match=message):
        next_characters("Hi", smollm_model, k=k)


def test_a_prompt_past_the_window_is_refused_before_any_work(smollm_model, monkeypatch):
    monkeypatch.setattr(smollm_model.config, "max_position_embeddings", 8)
    with pytest.raises(ContextWindowError, match="window"):
        next_characters("one two three four five six seven eight nine", smollm_model, k=3)


def test_continuations_beside_generate(smollm_model):
    """Greedy: the marginal's characters are each the most probable; the canonical continuation
    is transformers' greedy generate from the canonical ids; every character has a probability."""
    found = continue_text("The capital of France is ", smollm_model, chars=4, how="greedy")
    assert found.marginal.text.startswith("P") and len(found.marginal.text) == 4
    assert len(found.marginal.probabilities) == 4 and all(0 < p <= 1 for p in found.marginal.probabilities)
    prompt = PrefixState.of(smollm_model, "The capital of France is ", None)
    ids = [*prompt.state.ids, *prompt.lattice.canonical]
    new = smollm_model.generate(ids, do_sample=False, max_new_tokens=14, repetition_penalty=1.0)[0]
    spelled = b"".join(prompt.vocab.surfaces[t] or b"" for t in new).decode("utf-8", errors="replace")
    assert found.canonical.text == spelled[:4]
    assert found.healed.text and len(found.healed.probabilities) == len(found.healed.text)
    sampled = continue_text("The capital of France is ", smollm_model, chars=2, how="sample", seed=1)
    again = continue_text("The capital of France is ", smollm_model, chars=2, how="sample", seed=1)
    assert sampled.marginal == again.marginal and sampled.canonical == again.canonical


def test_bad_continuations_are_one_clear_error(smollm_model):
    with pytest.raises(MarginalError, match="how must be"):
        continue_text("Hi", smollm_model, how="beam")
    with pytest.raises(MarginalError, match="0 or more"):
        continue_text("Hi", smollm_model, chars=-1)
    with pytest.raises(EmptyTextError):
        lattice_of("", smollm_model.text_tokenizer)


SETUP = ["--model", "smollm2-135m", "--device", "cpu", "--dtype", "float32"]


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_the_cli_json_keeps_the_prompts_trailing_space_from_standard_input(smollm_model, monkeypatch, capsys):
    """`marginal next - --json --continue 3`: the prompt exactly as piped (its trailing space), the
    characters most probable first with bytes and intervals, and the three continuations."""
    _stdin(monkeypatch, b"The capital of France is ")
    assert cli_main(["next", "-", *SETUP, "--k", "3", "--continue", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prompt"] == "The capital of France is " and out["model"] == "smollm2-135m" and out["seconds"] > 0
    first = out["next"][0]
    assert set(first) == {"character", "bytes", "probability", "lower", "upper", "status", "canonical", "healed"}
    assert (first["character"], first["bytes"]) == ("P", [80]) and first["lower"] <= first["probability"]
    assert first["status"] in ("certified", "settled", "moving") and out["rest"] == []
    assert (first["status"] == "certified") == (first["upper"] - first["lower"] <= out["tolerance"])
    assert [r["probability"] for r in out["next"]] == sorted((r["probability"] for r in out["next"]), reverse=True)
    assert set(out["continuation"]) == {"marginal", "canonical", "healed"} and out["continuation"]["marginal"][0] == "P"
    assert cli_main(["next", "pi is 3.14", *SETUP, "--k", "2"]) == 0
    table = capsys.readouterr().out
    assert "canonical tokens:" in table and "[" in table and "healed" in table


@pytest.mark.parametrize(("argv", "stdin", "message"), [
    (["next", "Hi", "--k", "0"], None, "--k takes a whole number from 1 to 256"),
    (["next", "Hi", "--k", "257"], None, "--k takes a whole number from 1 to 256"),
    (["next", "Hi", "--continue", "-1"], None, "--continue takes a whole number 0 or more"),
    (["next", "-"], b"caf\xe9 ", "standard input is not UTF-8"),
])
def test_bad_cli_input_is_one_line_and_exit_status_2(argv, stdin, message, monkeypatch, capsys):
    """Refused before the model loads: one line on standard error, exit status 2."""
    if stdin is not None:
        _stdin(monkeypatch, stdin)
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_healing_after_a_byte_piece_backs_off_to_the_piece_itself(gemma_model):
    """Gemma 3 spells the rare 轞 in three byte pieces, and no ordinary token begins with its last
    byte: healing's constraint is then the piece itself, so the healed view is the canonical one
    and generate's healed continuation runs (an empty constraint crashed it: issue 65's fuzz)."""
    found = next_characters("ど轞", gemma_model, k=3, time_budget=1.0)
    assert found.tokens[-1] == b"\x9e"
    assert found.total_variation["healed"] == pytest.approx(found.total_variation["canonical"], abs=1e-9)
    more = continue_text("ど轞", gemma_model, chars=2, time_budget=1.0)
    assert more.healed.text == more.canonical.text or more.healed.ended


@pytest.mark.parametrize(("prompt", "more"), [("Fr", "a"), ("N", "\u00e9")])
def test_a_prefix_state_and_its_extension_equal_brute_force_and_a_fresh_search(lm, prompt, more):
    """``mc.prefix``'s state: ``logp_next()`` of the text and of ``p + more`` equal enumeration in
    float64 within 1e-6 (257 values, each inside its interval); ``p + more`` equals a fresh state of
    the longer text within 1e-12 while feeding the model fewer tokens; ``log_prob()`` is the
    exact search's P(text as a prefix)."""
    lm64 = float64_lm(lm)
    context = context_ids(lm64.text_tokenizer, None)
    settings = SearchSettings(tolerance=1e-12)
    p = Prefix.of(lm64, prompt, None, settings)
    longer = p + more
    fresh = Prefix.of(lm64, prompt + more, None, settings)
    for state in (p, longer):
        lp = state.logp_next()
        assert len(lp) == 257 and lp.EOS == 256
        expected = brute_next_bytes(lm64, state.lattice, context)
        np.testing.assert_allclose(np.exp(np.asarray(lp)), expected, atol=1e-6, rtol=0)
        assert np.all(lp.lower <= lp.logp + 1e-12) and np.all(lp.logp <= lp.upper + 1e-12)
    np.testing.assert_allclose(np.exp(longer.logp_next().logp), np.exp(fresh.logp_next().logp), atol=1e-12, rtol=0)
    assert longer.last_step()[1].fed < fresh.last_step()[1].fed
    *_, exact = search_rounds(lm64, fresh.lattice, fresh.state, SearchSettings(), NextByte(exact=True))
    assert fresh.log_prob().value == pytest.approx(float(exact.lower[-1]), abs=1e-9)
    assert fresh.log_prob().lower <= fresh.log_prob().upper + 1e-12
