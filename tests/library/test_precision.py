"""Precision as an option: the dtype choices, auto's measured check on both kinds of CPU, float16
(auto on a GPU) against float32 and through every command and the app, and bfloat16 (split
products, a refined head) against float32."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from marginal_core.cli.commands import main as cli_main
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.errors import MarginalError
from marginal_core.models import devices, load_model, resolve_dtype
from marginal_core.scoring.trie_scoring import score_paths
from marginal_core.tasks.evaluator import _Run
from marginal_core.tasks.options import EvalOptions
from marginal_core.tasks.qa import QATask


def test_dtype_choices_resolve_and_unknown_ones_name_the_choices():
    assert resolve_dtype("float32", "cpu") == torch.float32
    assert resolve_dtype("float16", "cpu") == resolve_dtype(torch.float16, "cpu") == torch.float16
    assert resolve_dtype("bfloat16", "cpu") == resolve_dtype(torch.bfloat16, "cpu") == torch.bfloat16
    with pytest.raises(MarginalError, match="auto, float32, float16, bfloat16"):
        resolve_dtype("half", "cpu")
    with pytest.raises(MarginalError, match="not supported"):
        resolve_dtype(torch.float64, "cpu")


def test_auto_on_the_cpu_is_measured_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MARGINAL_CACHE", str(tmp_path))
    monkeypatch.delenv(devices.AUTO_DTYPE_ENV)  # the machine's own choice, unpinned
    speedups = {name: devices.cpu_speedup(name) for name in ("float16", "bfloat16")}
    cached = json.loads((tmp_path / "precision.json").read_text())
    assert sorted(cached.values()) == sorted(speedups.values()) and min(speedups.values()) > 0
    for name in speedups:
        monkeypatch.setitem(devices.TIMERS, name, lambda: pytest.fail("measured twice"))
    assert {name: devices.cpu_speedup(name) for name in speedups} == speedups
    want = (torch.float16 if speedups["float16"] >= devices.FAST["float16"]
            else torch.bfloat16 if speedups["bfloat16"] >= devices.FAST["bfloat16"] else torch.float32)
    assert resolve_dtype("auto", "cpu") == resolve_dtype(None, "cpu") == want


def test_the_cli_refuses_an_unknown_dtype_before_loading(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli_main(["estimate", "hi", "--dtype", "float8"])
    assert exit_.value.code == 2
    assert "invalid choice: 'float8'" in capsys.readouterr().err


def test_a_bfloat16_run_gets_its_own_results_identity(tmp_path):
    task = QATask("arc_easy")
    f32 = _Run(task, tmp_path / "a", EvalOptions(model="smollm2-135m", dtype="float32", limit=1), None)
    b16 = _Run(task, tmp_path / "b", EvalOptions(model="smollm2-135m", dtype="bfloat16", limit=1), None)
    assert "dtype" not in f32.identity  # float32 folders from before the option still resume
    assert b16.identity["dtype"] == "bfloat16"


def test_a_split_bfloat16_product_is_float32s_where_a_bfloat16_one_is_not():
    from marginal_core.models.split_bfloat16 import split_linear, split_terms

    gen = torch.Generator().manual_seed(0)
    x, weight, bias = torch.randn(3, 5, 640, generator=gen), torch.randn(300, 640, generator=gen) / 25, torch.randn(300)
    exact = x.double() @ weight.double().T + bias.double()
    split = split_linear(x, split_terms(weight), bias)
    plain = torch.nn.functional.linear(x.bfloat16(), weight.bfloat16(), bias.bfloat16())
    assert split.dtype == torch.float32 and split.shape == (3, 5, 300)
    assert (split.double() - exact).abs().max() < 1e-4 < (plain.double() - exact).abs().max() / 100


def test_the_refined_head_gives_float32s_log_softmax_where_a_bfloat16_head_does_not(smollm_model):
    from marginal_core.lm.refined_head import refined_logprobs

    ids = smollm_model.tokenizer(" The committee postponed its decision until the spring.")["input_ids"]
    with torch.inference_mode():
        hidden = smollm_model.model.get_decoder()(input_ids=torch.tensor([ids])).last_hidden_state[0, :-1]
        weight = smollm_model.model.get_output_embeddings().weight
        rows, tokens = torch.arange(len(ids) - 1), torch.tensor(ids[1:])
        exact = torch.log_softmax(hidden.double() @ weight.double().T, dim=-1)[rows, tokens]
        refined = refined_logprobs(hidden, weight, weight.bfloat16(), rows, tokens, None)
        plain = torch.log_softmax((hidden.bfloat16() @ weight.bfloat16().T).double(), dim=-1)[rows, tokens]
    assert (refined.double() - exact).abs().max() < 0.01 < (plain - exact).abs().max()


@pytest.mark.models
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_bfloat16_keeps_log_p_within_a_fiftieth_of_a_nat_and_the_bounds(name, request):
    """bfloat16 is split: the decoder's linear weights as bfloat16 [high | low | high] terms, the
    head's log-softmax refined in float32; the residual stream, norms, attention, keys and
    embeddings float32. Over the canonical path and lattice samples of a question's answer its
    |d log p| against float32 stays within a fiftieth of a nat, and exact enumeration keeps the
    bounds in order."""
    from marginal_core.lattice.sampling import lattice_samples

    f32 = request.getfixturevalue("smollm_model" if name == "smollm2-135m" else "gemma_model")
    b16 = load_model(name, device="cpu", dtype="bfloat16")
    assert b16.dtype == torch.bfloat16 and b16.head_low is not None
    linear = {m.weight_terms.dtype for m in b16.model.get_decoder().modules() if isinstance(m, torch.nn.Linear)}
    assert linear == {torch.bfloat16} and b16.model.get_output_embeddings().weight.dtype == torch.float32
    cached = b16.prefill([1, 2, 3]).cache.layers[0]
    assert cached.keys.dtype == cached.values.dtype == torch.float32
    text, context = " The committee postponed its decision.", "Question: What happened next?\nAnswer:"
    m32, m16 = Marginalizer(f32, text, context), Marginalizer(b16, text, context)
    paths = [m32.lattice.canonical, *lattice_samples(m32.lattice, 40, seed=0).paths.tolist()]
    d = np.abs(score_paths(b16, paths, m16.context_state()) - score_paths(f32, paths, m32.context_state()))
    assert d.max() <= 0.02, (d.mean(), d.max())
    exact = Marginalizer(b16, " Paris").exact()
    assert exact.log_p.dtype == np.float64
    assert exact.log_marginal >= Marginalizer(b16, " Paris").canonical().log_marginal


@pytest.mark.models
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_float16_runs_its_products_in_float16_and_keeps_log_p_within_a_twentieth_of_a_nat(name, request):
    """float16 is mixed: the decoder's linear weights and the KV cache float16, the norms,
    embeddings, rotary angles and head float32. Over the canonical path and lattice samples of a question's answer its mean
    |d log p| against float32 stays within auto's accuracy target, and exact enumeration keeps the
    bounds in order."""
    from marginal_core.lattice.sampling import lattice_samples

    f32 = request.getfixturevalue("smollm_model" if name == "smollm2-135m" else "gemma_model")
    f16 = load_model(name, device="cpu", dtype="float16")
    assert f16.dtype == torch.float16
    linear = {p.dtype for m in f16.model.get_decoder().modules() if isinstance(m, torch.nn.Linear) for p in m.parameters()}
    others = {p.dtype for n, p in f16.model.named_parameters() if "proj" not in n}
    assert linear == {torch.float16} and others == {torch.float32}
    assert f16.model.get_output_embeddings().weight.dtype == torch.float32
    cached = f16.prefill([1, 2, 3]).cache.layers[0]
    assert cached.keys.dtype == cached.values.dtype == torch.float16  # rotary tables hand over float16
    text, context = " The committee postponed its decision.", "Question: What happened next?\nAnswer:"
    m32, m16 = Marginalizer(f32, text, context), Marginalizer(f16, text, context)
    paths = [m32.lattice.canonical, *lattice_samples(m32.lattice, 40, seed=0).paths.tolist()]
    d = np.abs(score_paths(f16, paths, m16.context_state()) - score_paths(f32, paths, m32.context_state()))
    assert d.mean() <= 0.05 and np.isfinite(d).all(), (d.mean(), d.max())
    exact = Marginalizer(f16, " Paris").exact()
    assert exact.log_marginal >= Marginalizer(f16, " Paris").canonical().log_marginal


def test_float16_scores_the_same_from_threads_at_once(smollm_model):
    """Each decoder call enters its own autocast (autocast's state is per thread; one shared
    instance would keep the state it restores on itself), so threads scoring together get what
    each gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    f16 = load_model("smollm2-135m", device="cpu", dtype="float16")
    texts = [" Paris is lovely", " unbelievably", " The cat sat."]
    alone = [Marginalizer(f16, t).canonical().log_marginal for t in texts]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(lambda t: Marginalizer(f16, t).canonical().log_marginal, texts * 3))
    assert together == alone * 3


# --------------------------------------------------------------------------------------------
# The switch (MARGINAL_AUTO_DTYPE), and what a user whose auto is float16 (CUDA, a CPU fast at it) gets


@pytest.mark.parametrize("float16", [1.06, 4.9])  # a CPU without fast float16 products, and one with them
@pytest.mark.parametrize("bfloat16", [0.24, 2.9])  # bf16 units hidden (or absent), and shown
def test_the_switch_decides_auto_over_the_measurement(float16, bfloat16, tmp_path, monkeypatch):
    monkeypatch.setenv("MARGINAL_CACHE", str(tmp_path))
    monkeypatch.setitem(devices.TIMERS, "float16", lambda: float16)
    monkeypatch.setitem(devices.TIMERS, "bfloat16", lambda: bfloat16)
    monkeypatch.delenv(devices.AUTO_DTYPE_ENV)
    want = torch.float16 if float16 >= 1.5 else torch.bfloat16 if bfloat16 >= 1.5 else torch.float32
    assert resolve_dtype("auto", "cpu") == want
    for forced in ("float32", "float16", "bfloat16"):
        monkeypatch.setenv(devices.AUTO_DTYPE_ENV, forced)
        assert resolve_dtype("auto", "cpu") == resolve_dtype(None, "cpu") == getattr(torch, forced)
        assert resolve_dtype("float32", "cpu") == torch.float32  # an explicit dtype is never overridden
    monkeypatch.setenv(devices.AUTO_DTYPE_ENV, "fp16")
    with pytest.raises(MarginalError, match="MARGINAL_AUTO_DTYPE='fp16' is not a dtype"):
        resolve_dtype("auto", "cpu")


def test_under_auto_float16_the_model_cache_gives_the_float16_instance(auto_float16, smollm_model):
    auto = load_model("smollm2-135m", device="cpu")
    assert auto is load_model("smollm2-135m", device="cpu", dtype="float16")
    assert auto.dtype == torch.float16 and auto is not smollm_model


@pytest.mark.models
def test_under_auto_float16_the_cli_says_so_and_agrees_with_the_library(auto_float16, capsys):
    text, context = " Paris is lovely", "Question: Where?\nAnswer:"
    argv = ["estimate", text, "--context", context, "--model", "smollm2-135m", "--device", "cpu",
            "--methods", "canonical,lattice", "--samples", "12"]
    assert cli_main([*argv, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["dtype"] == "float16"
    m = Marginalizer(load_model("smollm2-135m", device="cpu", dtype="float16"), text, context)
    assert got["log_p_canonical"] == pytest.approx(m.canonical_score().log_p, abs=1e-6)
    assert got["methods"]["lattice"]["log_marginal"] == pytest.approx(m.lattice_estimate(12).log_marginal, abs=1e-6)
    assert cli_main(argv) == 0
    assert "dtype: float16" in capsys.readouterr().out


@pytest.mark.models
def test_under_auto_float16_a_text_past_the_window_is_refused_as_in_float32(auto_float16, monkeypatch, capsys):
    from marginal_core.ground.errors import ContextWindowError

    f16 = load_model("smollm2-135m", device="cpu", dtype="float16")
    monkeypatch.setattr(f16.config, "max_position_embeddings", 4)
    with pytest.raises(ContextWindowError):
        Marginalizer(f16, " The committee postponed its decision.").estimate("lattice", samples=2)
    assert cli_main(["estimate", " The committee postponed its decision.", "--model", "smollm2-135m",
                     "--device", "cpu", "--methods", "lattice", "--samples", "2"]) == 2
    assert "context window of 4 tokens" in capsys.readouterr().err


def test_a_folder_started_in_one_dtype_refuses_to_resume_in_another(tmp_path, monkeypatch):
    """auto resolving to another dtype (another machine) is caught like an explicit change."""
    task, out = QATask("arc_easy"), tmp_path / "run"
    _Run(task, out, EvalOptions(model="smollm2-135m", dtype="auto", limit=1), None).open()  # float32 here (pinned)
    monkeypatch.setenv(devices.AUTO_DTYPE_ENV, "bfloat16")
    for dtype in ("auto", "bfloat16"):
        with pytest.raises(MarginalError, match=r"dtype: 'float32' there, 'bfloat16' now.*pass --dtype float32"):
            _Run(task, out, EvalOptions(model="smollm2-135m", dtype=dtype, limit=1), None).open()
    again = _Run(task, out, EvalOptions(model="smollm2-135m", dtype="float32", limit=1), None)
    again.open()
    assert (again.device, again.dtype) == ("cpu", "float32")


@pytest.mark.models
def test_under_auto_float16_eval_qa_reports_its_dtype(auto_float16, tmp_path, capsys):
    from marginal_core.cli.task_commands import tasks_main

    out = tmp_path / "qa"
    argv = ["eval-qa", "--dataset", "arc-easy", "--model", "smollm2-135m", "--device", "cpu", "--limit", "1",
            "--methods", "canonical", "--out", str(out)]
    assert tasks_main(argv) == 0
    assert capsys.readouterr().out.startswith("smollm2-135m on cpu in float16\n")
    report = json.loads((out / "report.json").read_text())
    assert (report["dtype"], report["device"]) == ("float16", "cpu")
    assert json.loads((out / "config.json").read_text())["dtype"] == "float16"


@pytest.mark.models
def test_under_auto_float16_the_lm_eval_backend_records_its_dtype(auto_float16, capsys):
    from marginal_core.harness.backend import MarginalLM

    lm = MarginalLM(model="smollm2-135m", device="cpu")
    assert lm.get_model_info()["model_dtype"] == "float16"
    assert "smollm2-135m on cpu in float16 (dtype=auto)" in capsys.readouterr().err


@pytest.mark.models
def test_under_auto_float16_the_app_runs_float16_and_matches_the_library(auto_float16):
    """The sidebar names the dtype auto chose, and the Running estimates page's live lattice run
    gives the library's float16 estimate for the same chunks."""
    from bench.support.apptest import app
    from pages._app.runtime import live

    at = app("pages/views/running.py", model="smollm2-135m", text=" Paris.", context="", k="15", seed="3")
    assert "Runs on: **CPU (float16," in " ".join(c.value for c in at.sidebar.caption)
    at.button(key="run").click().run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value.set_index("method")
    m = Marginalizer(load_model("smollm2-135m", device="cpu", dtype="float16"), " Paris.", None)
    *_, want = live.live_stream(m, "lattice", samples=15, seed=3)  # the page's own run, in the library
    assert table.loc["lattice", "log p(text)"] == pytest.approx(want.log_marginal, abs=1e-6)


@pytest.mark.models
def test_under_auto_bfloat16_a_samplers_page_shows_one_log_p_per_tokenization(monkeypatch):
    """Issue 24: the lattice sampler's trie scorer and the beam's and proxy's step-by-step scores
    differ in bfloat16 (␣un|belie|v|ably read -22.81 in one column, -23.02 in another); every path
    on the page now shows the one score of one scorer, so the beam's bound is comparable."""
    from bench.support.apptest import app

    monkeypatch.setenv("MARGINAL_AUTO_DTYPE", "bfloat16")

    at = app("pages/views/samplers.py", model="smollm2-135m", text=" unbelievably", context="", k="20", pk="20", W="4")
    at.button(key="score").click().run()
    assert not at.exception and not at.error
    seen: dict[str, set[float]] = {}
    for table in at.dataframe[:4]:
        for row in table.value.itertuples():
            seen.setdefault(row.tokenization, set()).add(round(row.log_p, 6))
    shared = [t for t, scores in seen.items() if len(scores) >= 1 and sum(
        t in set(table.value["tokenization"]) for table in at.dataframe[:4]) >= 2]
    assert shared, "no tokenization appears in two columns"
    assert all(len(seen[t]) == 1 for t in shared), {t: seen[t] for t in shared if len(seen[t]) > 1}
