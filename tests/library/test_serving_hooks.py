"""The one seam between a server and the library (marginal_core.ground.hooks): the library asks
only it about runs, and outside a run it changes nothing: the same scores, bit for bit, as the
library with the seam taken out, and no Turns or Batcher touched."""

from __future__ import annotations

import ast
import contextlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from marginal_core.ground import hooks as serving_hooks
from marginal_core.serving.batching import Batcher
from marginal_core.serving.turns import Turns

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ("unit", "aside", "checkpoint", "head_scratch", "batcher")
QUESTION = "Question: What is the capital of France?\nAnswer:"


class SpyTurns(Turns):
    """A Turns that counts what is asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def unit(self, entry, eager=False):
        self.calls["unit"] += 1
        return super().unit(entry, eager)

    def pause(self, entry) -> None:
        self.calls["pause"] += 1
        super().pause(entry)

    def aside(self, entry):
        self.calls["aside"] += 1
        return super().aside(entry)

    def scratch(self):
        self.calls["scratch"] += 1
        return super().scratch()


class SpyBatcher(Batcher):
    """A Batcher that counts its requests."""

    def __init__(self, turns: Turns) -> None:
        super().__init__(turns)
        self.submitted = 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return super().submit(*args, **kwargs)


def _imports(path: Path) -> set[str]:
    """The modules a file imports, by dotted name (``from a import b`` counts a.b and a)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_library_meets_the_server_only_through_the_seam():
    """No module of the library imports turns or batching (the server's machinery) but batching
    itself, the seam imports neither, and no other module keeps a context variable."""
    package = ROOT / "marginal_core"
    server = {"marginal_core.serving.turns", "marginal_core.serving.batching"}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if name in server:
            continue
        assert not _imports(path) & server, f"{name} reaches the server's machinery past serving_hooks"
        if name != "marginal_core.ground.hooks":
            assert "ContextVar(" not in path.read_text(encoding="utf-8"), f"{name} keeps ambient state"
    assert not {m for m in _imports(package / "ground" / "hooks.py") if m.startswith("marginal_core")}


def test_outside_a_run_the_hooks_do_nothing():
    """With a Turns and its Batcher in the process but no run entered, every hook is inert."""
    turns = SpyTurns()
    batcher = SpyBatcher(turns)
    own: dict[str, object] = {}
    with serving_hooks.unit(), serving_hooks.aside():
        serving_hooks.checkpoint()
        assert serving_hooks.head_scratch(own) is own
        assert serving_hooks.batcher() is None and serving_hooks.held() is None
    assert not turns.calls and batcher.submitted == 0
    with turns.run("r"):
        assert serving_hooks.batcher() is batcher  # the same hooks, inside a run
        assert serving_hooks.head_scratch(own) is turns.scratch()
        with serving_hooks.unit():
            assert serving_hooks.batcher() is None  # a unit's own work is never handed on
    assert turns.calls["unit"] == 1 and turns.status() == {"admitted": 0, "queued": 0, "busy": 0}


def _everything(model) -> dict[str, np.ndarray]:
    """Every number the library's model paths give on one text: the prefill, the canonical score,
    lattice samples scored in chunks (the trie scorer), proxy draws (the decoder step the beam
    shares, the allowed tokens' head), and a greedy check."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.lattice.conditioning import context_ids

    lm = model
    state = lm.prefill(context_ids(lm.text_tokenizer, QUESTION))  # fresh, not the model's kept one
    m = Marginalizer(model, " Paris", QUESTION, state=state)
    lattice = m.estimate("lattice", samples=6, seed=0, chunk=3, first_chunk=2)
    proxy = m.estimate("proxy", samples=4, seed=0, chunk=2)
    out = {"prefill": state.last_hidden.numpy().copy(), "canonical": np.array([m.canonical_score().log_p]),
           "greedy": np.array([lm.is_greedy(state, m.lattice.canonical)])}
    for name, estimate in (("lattice", lattice), ("proxy", proxy)):
        out[f"{name} paths"] = estimate.paths.ids.copy()
        out[f"{name} log p"] = estimate.log_p
        out[f"{name} running"] = estimate.running
    out["proxy log q"] = proxy.log_q
    return out


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key  # bit for bit


def test_the_library_outside_a_run_computes_exactly_what_it_did(smollm_model, monkeypatch):
    """The same numbers, bit for bit, (1) with the seam's hooks taken out (the library as it was
    before any server), (2) with them consulted outside a run, where no Turns or Batcher is
    touched, and (3) inside a lone run on a Turns with shared passes, where they are."""
    originals = {name: getattr(serving_hooks, name) for name in HOOKS}
    inert = {"unit": contextlib.nullcontext, "aside": contextlib.nullcontext, "checkpoint": lambda: None,
             "head_scratch": lambda own: own, "batcher": lambda: None}
    with monkeypatch.context() as patch:
        for name, stand_in in inert.items():
            patch.setattr(serving_hooks, name, stand_in)
        without_seam = _everything(smollm_model)

    asked: Counter[str] = Counter()

    def counted(name: str):
        def hook(*args):
            asked[name] += 1
            return originals[name](*args)
        return hook

    for name in HOOKS:
        monkeypatch.setattr(serving_hooks, name, counted(name))
    turns = SpyTurns()
    batcher = SpyBatcher(turns)
    outside = _everything(smollm_model)
    _same(outside, without_seam)
    assert all(asked[name] for name in ("unit", "checkpoint", "head_scratch", "batcher")), asked  # consulted
    assert not turns.calls and batcher.submitted == 0  # and nothing of a server's touched

    with turns.run("alone"):
        inside = _everything(smollm_model)
    _same(inside, without_seam)
    assert turns.calls["unit"] and turns.calls["pause"] and turns.calls["scratch"] and batcher.submitted


@pytest.mark.parametrize("hook", ["unit", "aside"])
def test_a_hook_outside_a_run_lets_errors_through_untouched(hook):
    with pytest.raises(KeyError, match="boom"), getattr(serving_hooks, hook)():
        raise KeyError("boom")
