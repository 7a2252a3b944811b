"""Surprisal by region: the prefix probabilities against brute-force enumeration (every prefix
path scored by a plain float64 forward, covering tokens found by scanning the vocabulary), the
search's certified intervals after any round, the regions and the canonical row's rule, and bad
input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.errors import (
    ContextWindowError,
    EmptyTextError,
    MarginalError,
    TooManyPathsError,
    UnrepresentableTextError,
)
from marginal_core.lm.adapter import LM
from marginal_core.search.counts import check_exact
from marginal_core.search.rounds import Regions, search_rounds
from marginal_core.search.settings import SearchSettings
from marginal_core.search.surprisal.result import COLUMNS, region_spans
from tests.brute_force import float64_lm, forget_float64, next_token_log_probs, path_log_prob

QUESTION = "Question: What is the capital of France?\nAnswer:"


@pytest.fixture(scope="module", autouse=True)
def _float64_copies_end_with_the_module():
    yield
    forget_float64()
    _BRUTE.clear()


def _prefix_paths(lattice) -> list[tuple[int, tuple[int, ...]]]:
    """Every (node, path from byte 0 to it) with the node before the end, the empty path included."""
    found, stack = [], [(0, ())]
    while stack:
        node, path = stack.pop()
        if node == lattice.end:
            continue
        found.append((node, path))
        arcs = lattice.out_arcs(node)
        stack.extend((int(lattice.arc_end[a]), path + (int(lattice.arc_token[a]),)) for a in arcs)
    return found


@dataclasses.dataclass(frozen=True)
class Brute:
    """What brute force finds at every byte j: log P(s<j) (``prefix``); log P(s<j, next byte c)
    (``next``, j < len); the log mass of the paths to j followed by a token that writes no byte
    (``rest``: end of string, special tokens, byte pieces the text does not take); and the
    canonical prefix probability's log (``canonical_prefix``)."""

    prefix: np.ndarray
    next: np.ndarray
    rest: np.ndarray
    canonical_prefix: np.ndarray


_BRUTE: dict[tuple[str, bytes, tuple[int, ...]], Brute] = {}


def brute_force(lm64: LM, lattice, context: list[int]) -> Brute:
    """Every prefix path to m < len through the float64 model (plain forwards, tests/brute_force.py);
    the tokens that cover bytes m..j (and then byte c) found by scanning the vocabulary's
    surfaces, byte-fallback pieces only where the lattice has them. Kept for the module (two
    tests check rounds against the same text)."""
    key = (lm64.name, bytes(lattice.data), tuple(context))
    if key not in _BRUTE:
        _BRUTE[key] = _brute_force(lm64, lattice, context)
    return _BRUTE[key]


def _brute_force(lm64: LM, lattice, context: list[int]) -> Brute:
    vocab, data, n = lattice.vocab, lattice.data, lattice.end
    byte_ids = {t for t in vocab.byte_tokens if t is not None}
    fallback = {(int(lattice.arc_start[a]), int(lattice.arc_token[a])) for a in range(lattice.num_arcs)
                if int(lattice.arc_token[a]) in byte_ids}
    ordinary = [(v, s) for v, s in enumerate(vocab.surfaces) if s is not None and s and v not in byte_ids]
    covering: dict[tuple[int, int], list[int]] = {}
    then: dict[tuple[int, int], dict[int, list[int]]] = {}  # (m, j) -> next byte c -> the ids
    for m in range(n):
        for j in range(m, n + 1):
            found = [(v, s) for v, s in ordinary if s.startswith(data[m:j])]
            covering[m, j] = [v for v, _ in found] + [t for (at, t) in fallback if at == m and j == m + 1]
            if j < n:
                by_byte: dict[int, list[int]] = {}
                for v, s in found:
                    if len(s) > j - m:
                        by_byte.setdefault(s[j - m], []).append(v)
                by_byte[data[j]] = by_byte.get(data[j], []) + [t for (at, t) in fallback if at == m == j]
                then[m, j] = by_byte
    writes = {u for u, _ in ordinary}
    other = [v for v in range(lm64.vocab) if v not in writes]  # special tokens, byte pieces, empty surfaces
    prefix, nxt = np.full(n + 1, -math.inf), np.full((n, 256), -math.inf)
    rest, canonical = np.full(n, -math.inf), np.full(n + 1, -math.inf)
    prefix[0] = 0.0
    canon, nodes = tuple(lattice.canonical), list(lattice.canonical_nodes)
    prefixes = _prefix_paths(lattice)
    for (m, path), log_probs in zip(prefixes, next_token_log_probs(lm64, context, [p for _, p in prefixes]), strict=True):
        log_p = path_log_prob(log_probs, path)
        last = log_probs[-1].numpy()
        for j in range(m + 1, n + 1):
            prefix[j] = np.logaddexp(prefix[j], log_p + logsumexp(last[covering[m, j]]))
        for j in range(m, n):
            for c, ids_c in then[m, j].items():
                nxt[j, c] = np.logaddexp(nxt[j, c], log_p + logsumexp(last[ids_c]))
        nothing = [v for v in other if (m, v) not in fallback]  # a byte piece the lattice has at m writes data[m]
        rest[m] = np.logaddexp(rest[m], log_p + logsumexp(last[nothing]))
        if path == canon[: len(path)]:  # the canonical path's share of P(s<j) for j up to its next node
            u, v = nodes[len(path)], nodes[len(path) + 1]
            canonical[0] = 0.0
            canonical[u + 1 : v + 1] = [log_p + logsumexp(last[covering[m, j]]) for j in range(u + 1, v + 1)]
    return Brute(prefix, nxt, rest, canonical)


@pytest.mark.parametrize(("text", "context"), [(" Paris", None), (" Paris", QUESTION), ("Né à", None)])
def test_prefix_probabilities_equal_brute_force(lm, text, context):
    """Exact: every byte's log P(s<j), covering tokens included, within 1e-6 of brute force in
    float64; the float32 search within 1e-4 of it (float32 logits). The canonical prefix
    probability at every byte and P(next byte = c | s<j) for every byte j and all 256 c within
    1e-6 too; at every j those sum to 1 less the mass of the tokens that write no byte (end of
    string, special tokens)."""
    lm64 = float64_lm(lm)
    m = Marginalizer(lm64, text, context)
    brute = brute_force(lm64, m.lattice, m.context_ids)
    expected = brute.prefix
    exact = m.surprisal(unit="byte", method="exact")
    assert exact.exact and np.all(np.isfinite(exact.prefix_lower))
    np.testing.assert_allclose(exact.prefix_lower, expected, atol=1e-6, rtol=0)
    offset = exact.offset
    for region in exact.regions:  # a byte region's surprisal is the drop in log P(s<j) across it
        a = 0 if region.index == 0 else region.start_byte + offset
        assert region.surprisal == pytest.approx(expected[a] - expected[region.end_byte + offset], abs=2e-6)
    np.testing.assert_allclose(exact.canonical_prefix, brute.canonical_prefix, atol=1e-6, rtol=0)
    assert exact.next is not None and exact.next.lower is not None
    given = expected[:-1, None]
    np.testing.assert_allclose(np.exp(exact.next.lower - given), np.exp(brute.next - given), atol=1e-6, rtol=0)
    heavy = brute.next - given > math.log(1e-12)
    np.testing.assert_allclose(exact.next.lower[heavy], brute.next[heavy], atol=1e-6, rtol=0)
    total = np.exp(np.logaddexp.reduce(exact.next.lower, axis=1) - given[:, 0]) + np.exp(brute.rest - given[:, 0])
    np.testing.assert_allclose(total, 1.0, atol=1e-9)
    for j in range(len(text.encode())):  # an exact search's certified intervals are points
        for c in exact.expected_bytes(j, k=3):
            assert c.lower == pytest.approx(c.probability, abs=1e-9) == pytest.approx(c.upper, abs=1e-9)
    float32 = Marginalizer(lm, text, context).surprisal(unit="byte", method="exact")
    np.testing.assert_allclose(float32.prefix_lower, expected, atol=1e-4, rtol=0)


def test_text_marginal_and_totals_agree_with_the_exact_estimator(lm, exact_of):
    """The exact search's complete paths are every tokenization: log p(text) is the exact marginal;
    the regions' surprisals sum to -log P(s) as a prefix, which is at least p(text)."""
    s = Marginalizer(lm, " Paris", QUESTION).surprisal(method="exact")
    assert s.log_p_text == pytest.approx(exact_of(lm, " Paris", QUESTION).log_marginal, abs=1e-4)
    assert sum(r.surprisal for r in s.regions) == pytest.approx(s.total, abs=1e-9)
    assert s.log_prefix_probability >= s.log_p_text
    assert s.bits_per_byte == pytest.approx(-s.log_p_text / math.log(2) / len(b" Paris"))
    canonical = Marginalizer(lm, " Paris", QUESTION).canonical_score().log_p
    assert sum(r.surprisal_canonical for r in s.regions) == pytest.approx(-canonical, abs=1e-4)


def _region_truth(expected: np.ndarray, s) -> list[float]:
    """Each region's surprisal from brute-force log P(s<j) (the first region from byte 0: a
    dummy-prefix space is in it)."""
    cuts = [0] + [r.end_byte + s.offset for r in s.regions]
    return [expected[a] - expected[b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


@pytest.mark.parametrize("text", ["rain.", "Né un"])
def test_every_round_certifies_brute_force(lm, text):
    """After every round of the search (round 0 alone, then each round after), every byte's bounds
    hold the brute-force log P(s<j) and every region's interval its surprisal (the coupled lower
    end included); the lower bounds only rise and the upper only fall from round to round."""
    lm64 = float64_lm(lm)
    m = Marginalizer(lm64, text)
    brute = brute_force(lm64, m.lattice, m.context_ids)
    expected = brute.prefix
    from marginal_core.search.surprisal.stream import surprisal_stream

    rounds = list(surprisal_stream(m, "char", tolerance=1e-9))
    assert len(rounds) > 1 and not rounds[0].exact
    following = np.exp(brute.next - expected[:-1, None])
    for before, s in zip([None, *rounds], rounds):
        assert np.all(s.prefix_lower <= expected + 1e-9) and np.all(s.prefix_upper >= expected - 1e-9)
        for j in range(len(following)):  # every next byte's interval holds its probability
            low, high = s.next.intervals(j, s.prefix_lower, s.prefix_upper)
            assert np.all(low - 1e-9 <= following[j]) and np.all(following[j] <= high + 1e-9)
        for r, truth in zip(s.regions, _region_truth(expected, s), strict=True):
            assert r.lower - 1e-9 <= truth <= r.upper + 1e-9
            assert r.lower <= r.surprisal + 1e-12 and r.surprisal <= r.upper + 1e-12
        if before is not None:
            assert np.all(s.prefix_lower >= before.prefix_lower - 1e-12)
            assert np.all(s.prefix_upper <= before.prefix_upper + 1e-9)
    assert rounds[-1].widest < 1e-6  # a tolerance of 1e-9 ends with nothing left that matters


def test_kv_kept_across_rounds_equals_recomputation_bit_for_bit(lm):
    """In float64, every round of the search that keeps its prefixes' KV (a later round feeds only
    the new tokens) gives the bounds of the search that feeds every ancestor again, bit for bit;
    a KV budget that holds a few prefixes only (the rest fed again) too."""
    lm64 = float64_lm(lm)
    m = Marginalizer(lm64, "The cat sat.")
    state = m.context_state()
    fed_again = list(search_rounds(lm64, m.lattice, state, SearchSettings(tolerance=1e-6, kv_bytes=0)))
    for kv_bytes in (256 << 20, 200_000):
        kept = list(search_rounds(lm64, m.lattice, state, SearchSettings(tolerance=1e-6, kv_bytes=kv_bytes)))
        assert [k.scored for k in kept] == [f.scored for f in fed_again] and len(kept) >= 3
        for k, f in zip(kept, fed_again, strict=True):
            assert np.array_equal(k.lower, f.lower) and np.array_equal(k.upper, f.upper)
            assert np.array_equal(k.next_lower, f.next_lower) and k.log_p_text == f.log_p_text
        assert 0 < kept[-1].kv_peak_bytes <= kv_bytes


def test_bounding_heads_keep_the_certificate(lm):
    """Every exit after round 0 through a bounding head (bound_below=1: a few columns, an upper
    bound on each probability): after every round the bounds still hold brute force, the lower
    bounds are round 0's (a bounded prefix adds to the upper only), and the text's marginal too;
    each next byte's probability lies between its scored mass over the upper bound and its scored
    and open mass (the bounded prefixes' included) over the lower."""
    lm64 = float64_lm(lm)
    m = Marginalizer(lm64, "rain.")
    brute = brute_force(lm64, m.lattice, m.context_ids)
    expected, following = brute.prefix, np.exp(brute.next - brute.prefix[:-1, None])
    rounds = list(search_rounds(lm64, m.lattice, m.context_state(), SearchSettings(tolerance=1e-9), Regions(bound_below=1.0)))
    assert len(rounds) > 1
    for r in rounds:
        assert np.all(r.lower <= expected + 1e-9) and np.all(r.upper >= expected - 1e-9)
        np.testing.assert_array_equal(r.lower, rounds[0].lower)
        low = np.exp(r.next_lower - r.upper[:-1, None])
        high = np.exp(np.logaddexp(r.next_lower, r.next_open[:, None]) - r.lower[:-1, None])
        assert np.all(low <= following + 1e-9) and np.all(following <= high + 1e-9)
    exact = Marginalizer(lm64, "rain.").surprisal(method="exact")
    assert rounds[-1].log_p_text <= exact.log_p_text + 1e-9 <= rounds[-1].log_p_text_upper + 2e-9


def test_the_default_search_is_within_its_tolerance(smollm_model):
    """The default search ends with every region within 0.01 nats, and equals exact there."""
    m = Marginalizer(smollm_model, "It rained.")
    exact = m.surprisal(unit="char", method="exact")
    found = m.surprisal(unit="char")
    assert found.widest <= 0.01 and found.rounds >= 2
    for r, e in zip(found.regions, exact.regions, strict=True):
        assert r.lower - 1e-5 <= e.surprisal <= r.upper + 1e-5
    np.testing.assert_allclose(found.prefix_lower, exact.prefix_lower, atol=0.01)


def test_a_stopped_search_keeps_valid_bounds(smollm_model):
    """Stop after the first round: the result says cancelled, and its intervals still hold."""
    m = Marginalizer(smollm_model, "The cat sat.")
    exact = m.surprisal(unit="byte", method="exact")
    polls = iter([False, True])
    stopped = m.surprisal(unit="byte", tolerance=1e-9, should_stop=lambda: next(polls, True))
    assert stopped.cancelled and not stopped.exact and stopped.rounds == 2
    assert np.all(stopped.prefix_lower <= exact.prefix_lower + 1e-5)
    assert np.all(stopped.prefix_upper >= exact.prefix_lower - 1e-5)
    for r, e in zip(stopped.regions, exact.regions, strict=True):
        assert r.lower - 1e-5 <= e.surprisal <= r.upper + 1e-5


def test_a_servers_cap_bounds_every_round_after_round_zero(smollm_model):
    """max_rows (a server's cap on the beam width) bounds the prefixes each round scores after
    round 0; the bounds still certify the exact values."""
    from marginal_core.search.surprisal.stream import surprisal_stream

    m = Marginalizer(smollm_model, "The cat sat.")
    exact = m.surprisal(unit="byte", method="exact")
    rounds = list(surprisal_stream(m, "byte", max_rows=8))
    assert len(rounds) > 2
    assert all(b.scored - a.scored <= 8 for a, b in zip(rounds, rounds[1:]))
    last = rounds[-1]
    assert np.all(last.prefix_lower <= exact.prefix_lower + 1e-4)  # float32: KV kept or fed again round off apart
    assert np.all(last.prefix_upper >= exact.prefix_lower - 1e-4)


def test_the_time_budget_ends_after_round_zero(smollm_model):
    """A spent time budget ends the search after its first round (the canonical tokenization and
    its one-token splits), not cancelled, with valid bounds."""
    m = Marginalizer(smollm_model, "The cat sat.")
    *_, last = search_rounds(smollm_model, m.lattice, m.context_state(), SearchSettings(time_budget=0.0))
    assert last.done and not last.cancelled and last.rounds == 1 and last.exits > 0


def test_the_default_stop_ends_once_the_values_settle_and_names_the_open_words(smollm_model, monkeypatch):
    """time_budget="auto" with no time for the certificate after the values settle (the floor and
    the share at 0) ends on the round that sees them settled: the regions left open keep their
    intervals around their values. An explicit budget replaces the default stop and runs on."""
    from marginal_core.search import clock as search_stop

    monkeypatch.setattr(search_stop, "CERTIFY_FLOOR_S", 0.0)
    monkeypatch.setattr(search_stop, "CERTIFY_SHARE", 0.0)
    m = Marginalizer(smollm_model, "Heavy rain flooded the valley road for most of the afternoon.")
    auto = m.surprisal(time_budget="auto")
    assert auto.ended == "default stop" and auto.settled_at is not None and auto.settled_at < auto.seconds
    assert auto.open_regions and auto.certified == len(auto.regions) - len(auto.open_regions)
    assert all(r.lower <= r.surprisal <= r.upper and r.upper - r.lower > 0.01 for r in auto.open_regions)
    assert auto.progress == f"values settled at {auto.settled_at:.1f} s; certified: {auto.certified} of 11 words"
    longer = m.surprisal(time_budget=3600.0, budget=auto.scored + 100)  # the prefix budget bounds its cost
    assert longer.rounds > auto.rounds and longer.ended in ("prefix budget", "stalled", "certified")


def test_regions_by_unit_and_space():
    text = "  Où est\tla gare ?"
    data = text.encode()
    assert region_spans(text, "byte") == [(i, i + 1) for i in range(len(data))]
    chars = region_spans(text, "char")
    assert len(chars) == len(text) and chars[2] == (2, 3) and chars[3] == (3, 5)  # "ù" is two bytes
    trailing = [data[a:b].decode() for a, b in region_spans(text, "word", "trailing")]
    leading = [data[a:b].decode() for a, b in region_spans(text, "word", "leading")]
    assert trailing == ["  Où ", "est\t", "la ", "gare ", "?"]
    assert leading == ["  Où", " est", "\tla", " gare", " ?"]
    assert region_spans("end. ", "word", "leading") == [(0, 5)]  # whitespace after the last word joins it


@pytest.mark.parametrize(("unit", "space", "message"), [("line", "trailing", "unknown unit"),
                                                        ("word", "before", "unknown space rule")])
def test_unknown_choices_are_one_clear_error(unit, space, message):
    with pytest.raises(MarginalError, match=message):
        region_spans("a b", unit, space)


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_or_blank_text_is_refused(text):
    with pytest.raises(EmptyTextError):
        region_spans(text)


def test_a_lone_surrogate_is_one_clear_error():
    with pytest.raises(UnrepresentableTextError, match="lone surrogate"):
        region_spans("a\udc80b")


def test_the_canonical_row_gives_a_token_to_its_first_word(smollm_model):
    """SmolLM2 cuts " cat" with its space in front: token-level tools give its surprisal to the
    word "cat", so the canonical row does, and " sat." likewise to "sat.", under either space rule."""
    m = Marginalizer(smollm_model, "The cat sat.")
    s = m.surprisal(method="exact")
    canonical = list(m.lattice.canonical)
    pieces = [m.lattice.vocab.surface(t) for t in canonical]
    assert pieces == [b"The", b" cat", b" sat", b"."]
    ids = torch.tensor([list(m.context_ids) + canonical])
    with torch.inference_mode():  # each canonical token's log p straight from transformers
        log_probs = torch.log_softmax(smollm_model.model(ids).logits[0].double(), dim=-1)
    lp = [float(log_probs[len(m.context_ids) - 1 + i, t]) for i, t in enumerate(canonical)]
    for rule in ("trailing", "leading"):
        rows = s.by("word", rule).regions
        assert [r.surprisal_canonical for r in rows] == pytest.approx([-lp[0], -lp[1], -lp[2] - lp[3]], abs=1e-4)
    assert [r.text for r in s.by("word", "leading").regions] == ["The", " cat", " sat."]


def test_the_canonical_prefix_row_takes_the_space_from_the_naive_row(smollm_model):
    """SmolLM2's "The␣": the naive row charges the space to "cat" (8.2 nats against 13.7); the
    canonical prefix row charges it to "The␣", as the marginal does, within 0.01 nats there: the
    gap is the whitespace convention, not other tokenizations. The canonical prefix row sums to
    the canonical path's share of -log P(text as a prefix), at most the marginal's sum."""
    s = Marginalizer(smollm_model, "The cat sat.").surprisal(method="exact")
    the = s.regions[0]
    assert the.surprisal_canonical < the.surprisal - 5
    assert the.surprisal_canonical_prefix == pytest.approx(the.surprisal, abs=0.01)
    total = sum(r.surprisal_canonical_prefix for r in s.regions)
    assert total == pytest.approx(-s.canonical_prefix[-1], abs=1e-9)
    assert s.total <= total <= -s.canonical_log_p.sum()


def test_the_frame_the_json_and_the_notebook_strip(smollm_model):
    s = Marginalizer(smollm_model, "The cat sat.").surprisal()
    frame = s.to_pandas()
    assert tuple(frame.columns) == COLUMNS and len(frame) == 3
    shown = s.to_pandas(next=2)
    assert tuple(shown.columns) == (*COLUMNS, "next_1", "p_next_1", "next_2", "p_next_2")
    assert shown["p_next_1"].ge(shown["p_next_2"]).all() and shown["rank"].ge(1).all()
    assert shown.loc[1, "next_1"] == s.expected_bytes(4, 1)[0].label  # "cat" starts at byte 4
    assert frame["surprisal"].sum() == pytest.approx(s.total)
    assert (s.to_pandas(bits=True)["surprisal"] * math.log(2)).tolist() == pytest.approx(frame["surprisal"].tolist())
    data = s.as_dict()
    assert [r["text"] for r in data["regions"]] == ["The ", "cat ", "sat."] and data["unit"] == "word"
    from marginal_core.viz.surprisal import strip_html  # what a notebook shows (viz.notebook.register_formatters)

    html = strip_html([s])
    assert "cat␣" in html and "bits/byte" in html and "canonical" in html
    assert "Surprisal('The cat sat.', smollm2-135m, 3 word regions" in repr(s)


def test_past_the_window_and_over_the_budget_are_refused_before_any_work(smollm_model, monkeypatch):
    m = Marginalizer(smollm_model, "The cat sat on the mat.")
    with pytest.raises(TooManyPathsError, match="prefixes to score"):
        m.surprisal(method="exact", budget=10)
    assert check_exact(m.lattice, budget=200_000) == 140_580  # every path to a node before the end
    monkeypatch.setattr(smollm_model.config, "max_position_embeddings", 5)
    with pytest.raises(ContextWindowError):
        m.surprisal()


def test_the_one_call_forms_take_a_device_and_a_dtype_with_a_models_name(smollm_model, tmp_path):
    """Every mc.* call that takes a model's name takes --device and --dtype as the CLI does (the
    name is loaded so); with a model loaded already, either is one clear error."""
    import marginal_core as mc

    s = mc.surprisal("The cat sat.", "smollm2-135m", device="cpu", dtype="float32")
    assert (s.dtype, s.device, s.model) == ("float32", "cpu", "smollm2-135m")
    e = mc.estimate(" Paris", model="smollm2-135m", methods="canonical", device="cpu", dtype="float32")
    assert e.source is not None and (e.source.dtype, e.source.device) == ("float32", "cpu")
    assert e.log_p_canonical == pytest.approx(Marginalizer(smollm_model, " Paris").canonical_score().log_p, abs=1e-5)
    m = mc.Marginalizer("smollm2-135m", " Paris", device="cpu", dtype="float32")
    assert m.lm is smollm_model  # the same load (load_model keeps it)
    frame = mc.compare(" Paris", ["smollm2-135m", "gemma3-270m"], methods="canonical", device="cpu", dtype="float32")
    assert frame.loc["smollm2-135m", "log_p_canonical"] == pytest.approx(e.log_p_canonical, abs=1e-5)
    (tmp_path / "texts.txt").write_text(" Paris\n", encoding="utf-8")
    rows = mc.scan(tmp_path / "texts.txt", "smollm2-135m", "canonical", out=tmp_path / "scan", device="cpu",
                   dtype="float32")
    assert (rows["dtype"].iloc[0], rows["log_p_canonical"].iloc[0]) == ("float32", pytest.approx(e.log_p_canonical, abs=1e-5))
    for call in (lambda: mc.surprisal("The cat sat.", smollm_model, dtype="float32"),
                 lambda: mc.estimate(" Paris", smollm_model, device="cpu"),
                 lambda: mc.Marginalizer(smollm_model, " Paris", dtype="float32")):
        with pytest.raises(MarginalError, match="device and dtype go with a model's name"):
            call()
