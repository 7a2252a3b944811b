"""Precision as an option: the dtype choices, auto's measured check, and the bfloat16 path on the
CPU (slow on a CPU without bf16 units, so it is kept small)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from marginal_core.cli import main as cli_main
from marginal_core.errors import MarginalError
from marginal_core.estimators import Marginalizer
from marginal_core.models import load_model, resolve_dtype
from marginal_core.models import devices
from marginal_core.scoring import score_paths
from marginal_core.tasks.evaluator import EvalOptions, _Run
from marginal_core.tasks.qa import QATask


def test_dtype_choices_resolve_and_unknown_ones_name_the_choices():
    assert resolve_dtype("float32", "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    assert resolve_dtype(torch.bfloat16, "cpu") == torch.bfloat16
    with pytest.raises(MarginalError, match="auto, float32, bfloat16"):
        resolve_dtype("half", "cpu")
    with pytest.raises(MarginalError, match="not supported"):
        resolve_dtype(torch.float16, "cpu")


def test_auto_on_the_cpu_is_measured_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MARGINAL_CACHE", str(tmp_path))
    speedup = devices.cpu_bf16_speedup()
    cached = json.loads((tmp_path / "precision.json").read_text())
    assert list(cached.values()) == [speedup] and speedup > 0
    monkeypatch.setattr(devices, "_time_bf16_speedup", lambda: pytest.fail("measured twice"))
    assert devices.cpu_bf16_speedup() == speedup
    want = torch.bfloat16 if speedup >= devices.FAST_BF16 else torch.float32
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
    assert "dtype" not in f32.store.identity  # float32 folders from before the option still resume
    assert b16.store.identity["dtype"] == "bfloat16"


def test_bfloat16_on_the_cpu_scores_near_float32_and_keeps_the_bound(smollm_model):
    b16 = load_model("smollm2-135m", device="cpu", dtype="bfloat16")
    assert b16.model.dtype == torch.bfloat16
    m32, m16 = Marginalizer(smollm_model, " Paris"), Marginalizer(b16, " Paris")
    exact32, exact16 = m32.exact(), m16.exact()
    assert exact16.log_p.dtype == np.float64
    assert np.abs(exact16.log_p - exact32.log_p).mean() < 1.0
    assert exact16.log_marginal >= m16.canonical().log_marginal
    paths = exact32.paths.tolist()
    assert np.array_equal(score_paths(b16, paths, m16.context_state()), exact16.log_p)
