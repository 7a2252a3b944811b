"""How likely each candidate continuation is after a prompt (``mc.score_continuations``): the
marginal log P(candidate | prompt) against brute-force enumeration in float64 (every tokenization
of prompt + candidate and every token covering its end, each through a plain forward), the lm_eval
column against lm-eval's own ``hf`` model on the same pairs, the table's ranks and views, and bad
input."""

from __future__ import annotations

import json
import math
import os

import pytest

from marginal_core.api.calls import score_continuations
from marginal_core.cli.commands import main as cli_main
from marginal_core.ground.errors import ContextWindowError, MarginalError, NormalizationError
from marginal_core.lattice.conditioning import context_ids, harness_pair
from marginal_core.lattice.graph import lattice_of
from marginal_core.search.next.candidate_table import (
    MAX_CANDIDATES,
    ContinuationScore,
    ContinuationScores,
    check_candidates,
    ranked,
)
from marginal_core.search.prefix import Prefix
from marginal_core.search.settings import SearchSettings
from tests.brute_force import brute_prefix_log_prob, float64_lm, forget_float64
from tests.library.test_lm_eval import OFFLINE, TOL

EXACT = 1e-6  # nats: float64 search against float64 enumeration
# (prompt, candidates): mid-word joins ("un" + "like", "Fr" + "ance", where a token of the joined
# text crosses the seam), a prompt with a trailing space and a candidate that begins with one
PAIRS = [("un", ("like",)), ("Fr", ("ance",)), ("is ", ("a",)), ("is", (" a", "a"))]


@pytest.fixture(scope="module", autouse=True)
def _float64_copies_end_with_the_module():
    yield
    forget_float64()


@pytest.mark.parametrize(("prompt", "candidates"), PAIRS)
def test_the_marginal_conditional_equals_brute_force(lm, prompt, candidates):
    """In float64, log P(candidate | prompt) = log P(prompt + candidate as a prefix) − log P(prompt
    as a prefix) equals enumeration within 1e-6 and lies in its interval; the candidates extend the
    prompt's own state (its bounds are the ones kept on it)."""
    lm64 = float64_lm(lm)
    context = context_ids(lm64.text_tokenizer, None)
    p = Prefix.of(lm64, prompt, None, SearchSettings(tolerance=1e-12))
    found = p.score_continuations(list(candidates))
    assert p.kept_bounds is not None and found.done and [r.text for r in found.rows] == list(candidates)
    before = brute_prefix_log_prob(lm64, lattice_of(prompt, lm64.text_tokenizer), context)
    assert found.prompt_lower == pytest.approx(before, abs=EXACT)
    for row in found.rows:
        truth = brute_prefix_log_prob(lm64, lattice_of(prompt + row.text, lm64.text_tokenizer), context) - before
        assert row.logprob == pytest.approx(truth, abs=EXACT), (prompt, row.text)
        # bounding heads (Gemma 3) leave about 1e-7 open, past the 1e-12 tolerance
        assert row.lower - 1e-9 <= truth <= row.upper + 1e-9 and row.upper - row.lower < 1e-6


# lm-eval hf's own log-likelihoods on pairs where its split leaves continuation tokens: the
# whitespace moved from the prompt, a token across the seam ("The ca" + "t sat": lm-eval scores
# " sat"), an empty prompt (its prefix token alone)
HF_PAIRS = [("The capital of France is", " Paris"), ("The capital of France is ", "Paris"), ("The ca", "t sat"),
            ("", "Hello")]


@pytest.fixture(scope="module")
def hf_model(lm):
    """lm-eval's ``hf`` model on the model's converted folder (float32, CPU), the hub switched off."""
    saved = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    from lm_eval.models.huggingface import HFLM

    from marginal_core.models import model_cache_dir

    folder = model_cache_dir(lm.name)
    yield HFLM(pretrained=str(folder / "model"), tokenizer=str(folder / "tokenizer"), dtype="float32", device="cpu",
               batch_size=4)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _hf_loglikelihoods(hf, pairs):
    from lm_eval.api.instance import Instance

    requests = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    return [value for value, _ in hf.loglikelihood(requests, disable_tqdm=True)]


def test_the_lm_eval_column_equals_lm_evals_hf_model(hf_model, lm):
    """The lm_eval column is lm-eval hf's log-likelihood of the pair within 1e-3 where its split
    gives continuation tokens; where it gives none, the column is None and lm-eval's own
    assertion fails on the pair."""
    theirs = _hf_loglikelihoods(hf_model, HF_PAIRS)
    for (prompt, candidate), value in zip(HF_PAIRS, theirs, strict=True):
        (row,) = score_continuations(prompt, [candidate], lm, time_budget=0).rows
        assert row.lm_eval == pytest.approx(value, abs=TOL), (prompt, candidate)
    crossing = score_continuations("The ca", ["t sat", "r"], lm, time_budget=0)
    assert crossing.rows[0].crosses and "lm-eval scores ␣sat" in crossing.rows[0].seam
    assert crossing.rows[1].lm_eval is None and crossing.rows[1].lm_eval_rank is None
    assert "no continuation tokens" in crossing.rows[1].seam
    with pytest.raises(AssertionError):
        _hf_loglikelihoods(hf_model, [("The ca", "r")])


def test_lm_evals_encoding_of_a_pair(smollm_model, gemma_model):
    """harness_pair is lm-eval's _encode_pair: the trailing whitespace moves to the continuation,
    the whole encoding is cut at the context's length, BOS where the tokenizer adds one."""
    smol, gemma = smollm_model.text_tokenizer, gemma_model.text_tokenizer
    pair = harness_pair(smol, "Fr", "ance")
    assert pair.continuation == () and pair.crosses and pair.own == tuple(smol.encode("ance"))
    pair = harness_pair(smol, "is ", "a")
    assert pair.context == tuple(smol.encode("is")) and pair.own == tuple(smol.encode(" a")) and not pair.crosses
    bos = gemma.special.bos_id
    pair = harness_pair(gemma, "is ", "a")
    assert pair.context == (bos, *gemma.encode("is")) and pair.continuation == tuple(gemma.encode(" a"))
    assert harness_pair(gemma, "", "Hi").context == (bos,)
    assert harness_pair(gemma, "is", " a", start=[bos, 7]).context == (bos, 7, *gemma.encode("is"))


def _row(text: str, logprob: float, lm_eval: float | None, crosses: bool = False) -> ContinuationScore:
    return ContinuationScore(text, logprob, logprob - 0.001, logprob, True, lm_eval,
                             (b" s", b"at") if lm_eval is not None else (), (b"t", b" sat"), crosses)


def test_the_table_ranks_both_scores_and_shows_itself():
    rows = ranked([_row("a", -1.0, -3.0), _row(" b", -2.0, -1.0, crosses=True), _row("c", -0.5, None, crosses=True)])
    assert [(r.rank, r.lm_eval_rank) for r in rows] == [(2, 2), (3, 1), (1, None)]
    table = ContinuationScores("x", "m", None, rows, -4.0, -3.9, 1.0, 0.01, True)
    assert table.rankings_differ and [r.rank_changed for r in rows] == [False, True, True]
    assert "lm-eval scores ␣s|at" in rows[1].seam and "no continuation tokens" in rows[2].seam and rows[0].seam == ""
    frame = table.to_pandas()
    assert list(frame["text"]) == ["a", " b", "c"] and frame["lm_eval"].isna().tolist() == [False, False, True]
    out = table.to_json()
    assert [c["text"] for c in out["candidates"]] == ["a", " b", "c"] and out["candidates"][2]["lm_eval"] is None
    assert {"text", "logprob", "lower", "upper", "lm_eval"} <= set(out["candidates"][0])
    shown = table._repr_html_()
    assert "␣b" in shown and "≠" in shown and "lm-eval" in shown
    assert "“c” is the most probable" in table.sentence() and "“␣b” first" in table.sentence()
    assert math.isclose(rows[2].probability, math.exp(-0.5))


@pytest.mark.parametrize(("candidates", "message"), [
    (["a", ""], "candidate 2 is empty"),
    (["a"] * (MAX_CANDIDATES + 1), f"101 candidates is more than {MAX_CANDIDATES}"),
    ([], "no candidates"),
    ("Paris", "a list of texts, not one text"),
])
def test_bad_candidates_are_one_clear_error_before_the_model_loads(candidates, message):
    with pytest.raises(MarginalError, match=message) as err:
        score_continuations("The capital is", candidates, "no-such-model")
    assert "\n" not in str(err.value)
    assert check_candidates([" a", "b "]) == (" a", "b ")


def test_a_candidate_past_the_window_is_named(smollm_model, monkeypatch):
    monkeypatch.setattr(smollm_model.config, "max_position_embeddings", 8)
    with pytest.raises(ContextWindowError, match=r"candidate 2 \(' one two three four five'\)"):
        score_continuations("Hi", ["!", " one two three four five"], smollm_model)


def test_a_candidate_the_tokenizer_rewrites_is_named(gemma_model):
    with pytest.raises(NormalizationError, match="candidate 1 \\('a\u2581b'\\)"):
        score_continuations("Hi", ["a\u2581b"], gemma_model, time_budget=0)


SETUP = ["--model", "smollm2-135m", "--device", "cpu", "--dtype", "float32"]


def test_the_cli_scores_candidates_beside_the_next_characters(smollm_model, tmp_path, capsys):
    """`marginal next PROMPT --candidate A --candidates FILE --json`: the next characters, then
    ``candidates`` in the order given (the flags' first, then the file's lines, whitespace kept),
    each with its marginal log P, interval and lm-eval's score; the table marks a rank that differs."""
    file = tmp_path / "candidates.txt"
    file.write_text(" Paris\n Lyon\n", encoding="utf-8")
    argv = ["next", "The capital of France is", *SETUP, "--k", "2", "--time-budget", "5"]
    assert cli_main([*argv, "--candidate", " Rome", "--candidates", str(file), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["text"] for c in out["candidates"]] == [" Rome", " Paris", " Lyon"] and out["next"]
    for c in out["candidates"]:
        assert c["lower"] - 1e-9 <= c["logprob"] <= c["upper"] + 1e-9 <= 1e-9 and c["lm_eval"] is not None
    assert max(out["candidates"], key=lambda c: c["logprob"])["text"] == " Paris"
    assert cli_main([*argv, "--candidate", " Paris", "--candidate", " Lyon"]) == 0
    table = capsys.readouterr().out
    assert "lm-eval rank" in table and "␣Paris" in table and "over every tokenization" in table


@pytest.mark.parametrize(("extra", "content", "message"), [
    (["--candidate", ""], None, "candidate 1 is empty"),
    ([], b"\xff\xfe oops\n", "is not UTF-8"),
    ([], "".join(f"c{i}\n" for i in range(MAX_CANDIDATES + 1)).encode(), f"more than {MAX_CANDIDATES}"),
])
def test_bad_cli_candidates_are_one_line_and_exit_status_2(extra, content, message, tmp_path, capsys):
    """Refused before the model loads: one line on standard error, exit status 2."""
    argv = ["next", "Hi", *extra]
    if content is not None:
        (tmp_path / "c.txt").write_bytes(content)
        argv += ["--candidates", str(tmp_path / "c.txt")]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
