"""Shared fixtures: the two embedded models and their tokenizers, loaded once per session.

MARGINAL_CACHE is set only when unset, to the library's own default, so the converted
tokenizers and dequantized weights that `make setup` warmed are reused (and subprocesses that
tests start see the same cache).

MARGINAL_AUTO_DTYPE is pinned to float32 for the whole session, whatever the shell says: every
test, CLI subprocess and app page then runs `auto` as float32, the precision the references are
compared in, on any CPU (one with fast float16 products would otherwise pick float16). Tests of
the path auto takes on a GPU set it to float16 themselves (the `auto_float16` fixture).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MARGINAL_CACHE", str(Path.home() / ".cache" / "marginal"))
os.environ["MARGINAL_AUTO_DTYPE"] = "float32"

GEMMA = "gemma3-270m"
SMOL = "smollm2-135m"


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
    """Gemma 3 270M on the CPU in fp32 (a LoadedModel: .model, .tokenizer, .device, .dtype)."""
    from marginal_core.models import load_model

    return load_model(GEMMA, device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def smollm_model():
    """SmolLM2 135M on the CPU in fp32 (a LoadedModel)."""
    from marginal_core.models import load_model

    return load_model(SMOL, device="cpu", dtype="float32")


@pytest.fixture(scope="module", params=[SMOL, GEMMA])
def lm(request):
    """Each embedded model in turn, on the CPU in fp32 (the test runs once per model)."""
    return request.getfixturevalue("smollm_model" if request.param == SMOL else "gemma_model")
