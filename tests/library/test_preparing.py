"""A GGUF model's caches prepared once per process, in steps others watch (issue 60, point 3;
marginal_core/models/preparing.py). The empty-cache first visit in a browser is
tests/app/test_server_starts.py's; here the cached case and the bookkeeping."""

from __future__ import annotations

from marginal_core.models import preparing

SMOL = "smollm2-135m"


def test_a_cached_model_needs_no_preparation_and_an_empty_cache_does(monkeypatch, tmp_path):
    assert not preparing.needs_preparing(SMOL)  # the suite's cache is warm (make setup)
    assert not preparing.needs_preparing("no-such/model-anywhere")  # its load says why, not this
    monkeypatch.setenv("MARGINAL_CACHE", str(tmp_path))
    assert preparing.needs_preparing(SMOL) and preparing.needs_preparing("SmolLM2-135M")


def test_one_preparation_is_shared_and_says_its_steps():
    first = preparing.prepare(SMOL)
    assert first.wait(120) and first.error is None
    assert first.converted == [False, False, False] and len(first.seconds) == len(preparing.STEPS)
    assert first.fraction() == 1.0
    assert first.describe().startswith("tokenizer cached in ") and "weights cached in" in first.describe()
    again = preparing.prepare(SMOL)  # a finished one is forgotten: the registry holds only those under way
    assert again is not first and again.wait(120)
