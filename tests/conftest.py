"""Shared fixtures: the two embedded models and their tokenizers, loaded once per session.

MARGINAL_CACHE is set only when unset, to the library's own default, so the converted
tokenizers and dequantized weights that `make setup` warmed are reused (and subprocesses that
tests start see the same cache).

MARGINAL_AUTO_DTYPE is pinned to float32 for the whole session, whatever the shell says: every
test, CLI subprocess and app page then runs `auto` as float32, the precision the references are
compared in, on any CPU (one with fast float16 products would otherwise pick float16). Tests of
the path auto takes on a GPU set it to float16 themselves (the `auto_float16` fixture).

Tiers (markers registered in pyproject.toml; `make test-fast` runs `-m "not browser and not models
and not slow"`, `make test` runs everything):
  * models: the test loads a real model. Given here to every test that uses a model fixture
    (MODEL_FIXTURES, directly or through another fixture); a test that loads one otherwise (an
    AppTest page that scores, a CLI command run in process or as a subprocess, load_model) carries
    the marker itself, by its file's pytestmark or a decorator.
  * browser: the app in Chromium under Playwright, with its own server (the files' pytestmark).
  * slow: torchrun, model conversion, notebooks, and tests that take about 30 s or more; given
    here to every test that uses a SLOW_FIXTURES fixture, otherwise by a decorator.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MARGINAL_CACHE", str(Path.home() / ".cache" / "marginal"))
os.environ["MARGINAL_AUTO_DTYPE"] = "float32"
# Before torch is imported (it reads this once): torch's OpenMP threads sleep instead of spinning
# while they wait, as the app's server has them do (pages/_app/__init__.py). The suite runs beside
# the servers, browsers and CLI processes it starts; spinning threads then stall one another (one
# beam test took 21 to 39 s spinning against 9 s sleeping, with other processes on the 2 cores).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Room in load_model's memo for both models in float32, float16 and bfloat16 at once, so that a
# test loading another precision does not evict the float32 models the fixtures hold (a later
# load_model of those would load them again, a second copy).
os.environ.setdefault("MARGINAL_MAX_MODELS", "8")
# Under `make test` (pytest-xdist, two processes on the two cores) each process and what it
# starts computes on one thread: two threads each would only contend for the same two cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

GEMMA = "gemma3-270m"
SMOL = "smollm2-135m"

MODEL_FIXTURES = {"gemma_model", "smollm_model", "lm"}
SLOW_FIXTURES = {"two_processes"}  # test_lm_eval: lm-eval under torchrun with two processes
# `make test` runs the suite in two processes (pytest-xdist, -n 2 --dist loadscope), one per side:
# tests/app/ (AppTest pages, the servers and Chromium, the notebooks' kernels and the scan CLI: mostly
# waiting on other processes) with the library files in ON_THE_APP_SIDE (they wait on torchrun's ranks),
# and tests/library/ (models in this process). Two fixed groups keep a file's module fixtures in one
# process, the app's tests in one order, and bound the memory (the float64 references and the GGUF
# conversions on one side, the servers on the other); each side takes about 11 minutes.
ON_THE_APP_SIDE = {"tests/library/test_scan_distributed.py", "tests/library/test_lm_eval.py"}


def pytest_xdist_make_scheduler(config, log):
    """Under `make test` (-n 2 --dist loadscope) a scope is a side, tests/app/ (with ON_THE_APP_SIDE)
    or tests/library/, so each process runs one side. (xdist_group marks cannot say it: pytest
    9.2's structured node ids drop the group suffix that --dist loadgroup reads,
    pytest-dev/pytest-xdist#1386, and the tests were spread over both processes.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class BySide(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]  # tests/<side>/test_x.py::test_y
            return "app" if path in ON_THE_APP_SIDE else path.split("/", 2)[1]

    return BySide(config, log)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the derived markers count there
def pytest_collection_modifyitems(config, items):
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)  # a model fixture named by a parameter (request.getfixturevalue)
        used |= {v for v in (callspec.params.values() if callspec else ()) if isinstance(v, str)}
        if used & MODEL_FIXTURES:
            item.add_marker(pytest.mark.models)
        if used & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def auto_float16(monkeypatch):
    """`auto` resolves to float16 in this test and the processes it starts, as on CUDA or on a
    CPU whose float16 products are fast."""
    monkeypatch.setenv("MARGINAL_AUTO_DTYPE", "float16")


@pytest.fixture(scope="session")
def gemma_tokenizer():
    """The Gemma 3 tokenizer (the default model's), as load_tokenizer gives it."""
    from marginal_core.models import load_tokenizer

    return load_tokenizer(GEMMA)


@pytest.fixture(scope="module")
def llama():
    """A Llama-2-style SentencePiece tokenizer (dummy prefix, byte fallback: tests/tokenizer_cases.py)."""
    from tests.tokenizer_cases import llama_style

    return llama_style()


@pytest.fixture(scope="module")
def qa(gemma_tokenizer):
    """The lattice of tests/viz_cases.QA_TEXT under Gemma 3's tokenizer."""
    from marginal_core.lattice.graph import lattice_of
    from tests.viz_cases import QA_TEXT

    return lattice_of(QA_TEXT, gemma_tokenizer)


@pytest.fixture(scope="session")
def smollm_tokenizer():
    """The SmolLM2 tokenizer (byte-level BPE), as load_tokenizer gives it."""
    from marginal_core.models import load_tokenizer

    return load_tokenizer(SMOL)


@pytest.fixture(scope="session", params=[GEMMA, SMOL])
def embedded_tokenizer(request):
    """Each embedded tokenizer in turn (the test runs once per model)."""
    from marginal_core.models import load_tokenizer

    return load_tokenizer(request.param)


@pytest.fixture(scope="session")
def gemma_model():
    """Gemma 3 270M on the CPU in fp32 (the LM load_model returns: .model, .tokenizer, .device, .dtype)."""
    from marginal_core.models import load_model

    return load_model(GEMMA, device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def smollm_model():
    """SmolLM2 135M on the CPU in fp32 (the LM load_model returns)."""
    from marginal_core.models import load_model

    return load_model(SMOL, device="cpu", dtype="float32")


@pytest.fixture(scope="module", params=[SMOL, GEMMA])
def lm(request):
    """Each embedded model in turn, on the CPU in fp32 (the test runs once per model)."""
    return request.getfixturevalue("smollm_model" if request.param == SMOL else "gemma_model")


@pytest.fixture(scope="session")
def exact_of():
    """exact_of(model, text, context=None): Marginalizer(model, text, context).exact(), enumerated
    once per session for each model, text and context (several tests compare with the same one)."""
    from marginal_core.estimators.marginalizer import Marginalizer

    done: dict = {}

    def exact(model, text: str, context: str | None = None):
        key = (id(model), text, context)  # the model fixtures live for the session
        if key not in done:
            done[key] = Marginalizer(model, text, context).exact()
        return done[key]

    return exact
