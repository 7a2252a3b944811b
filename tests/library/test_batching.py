"""Shared passes (marginal_core.serving.batching): fake work first (gathering, keys, limits, a failing
request, Stop, where a waiting request stands, the charge), then real models: concurrent runs'
estimates against the same runs alone."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.serving import turns
from marginal_core.serving.batching import Batcher
from marginal_core.serving.turns import Place, TurnCancelled, Turns

WORK_S = 0.05


def _batched() -> tuple[Turns, Batcher, list[list[object]]]:
    t = Turns()
    return t, Batcher(t), []


def _doubling(batches: list[list[object]]):
    """A batch function that records each batch, takes a while, and fails on the payload 'bad'."""
    def run(payloads: list[object]) -> list[object]:
        batches.append(list(payloads))
        time.sleep(WORK_S)
        if "bad" in payloads:
            raise ValueError("bad payload")
        return [2 * p for p in payloads]

    return run


def _submit_all(t: Turns, b: Batcher, requests: list[tuple[object, object, int, int]], run, **hooks):
    """Each request (key, payload, size, limit) from its own run at about the same moment; the
    results or errors, in order."""
    out: list[object] = [None] * len(requests)
    go = threading.Barrier(len(requests))

    def one(i: int) -> None:
        key, payload, size, limit = requests[i]
        with t.run(f"run {i}", **hooks.get(i, {})):
            go.wait()
            try:
                out[i] = b.submit(key, payload, size, limit, run)
            except Exception as err:  # noqa: BLE001 - the test reads it
                out[i] = err

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return out


def test_requests_that_come_together_run_in_one_batch():
    t, b, batches = _batched()
    out = _submit_all(t, b, [("k", i, 1, 100) for i in range(6)], _doubling(batches))
    assert out == [0, 2, 4, 6, 8, 10]
    assert len(batches) == 1 and sorted(batches[0]) == list(range(6))
    assert (b.batches, b.requests) == (1, 6)
    assert t.status() == {"admitted": 0, "queued": 0, "busy": 0}


def test_a_batch_holds_one_key_within_its_limit():
    t, b, batches = _batched()
    requests = [("a", 1, 2, 5), ("b", 10, 1, 5), ("a", 2, 2, 5), ("a", 3, 2, 5), ("b", 20, 1, 5)]
    out = _submit_all(t, b, requests, _doubling(batches))
    assert out == [2, 20, 4, 6, 40]
    for batch in batches:
        assert len({isinstance(p, int) and p >= 10 for p in batch}) == 1  # one key
        assert len([p for p in batch if p < 10]) <= 2  # two of size 2 fit in 5, three do not
    assert sorted(p for batch in batches for p in batch) == [1, 2, 3, 10, 20]


@pytest.mark.parametrize("shown", [False, True])
def test_first_requests_share_a_quarter_of_a_pass_and_later_ones_all_of_it(shown):
    """Runs that have shown nothing yet go in batches of at most FIRST_SHARE of the limit (a
    class's first estimates come in a few small passes, the first ones early); runs past their
    first estimate (a checkpoint) fill the whole limit."""
    from marginal_core.serving.batching import FIRST_SHARE

    t, b, batches = _batched()
    out: list[object] = [None] * 8
    go = threading.Barrier(8)

    def one(i: int) -> None:
        with t.run(f"run {i}") as entry:
            if shown:
                t.pause(entry)
            go.wait()
            out[i] = b.submit("k", i, 1, 8, _doubling(batches))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert out == [2 * i for i in range(8)]
    widest = max(map(len, batches))
    assert widest > 8 * FIRST_SHARE if shown else widest == 8 * FIRST_SHARE


def test_a_failing_request_fails_only_its_own_run():
    t, b, batches = _batched()
    out = _submit_all(t, b, [("k", 1, 1, 100), ("k", "bad", 1, 100), ("k", 3, 1, 100)], _doubling(batches))
    assert out[0] == 2 and out[2] == 6
    assert isinstance(out[1], ValueError)
    assert len(batches[0]) == 3 and sorted(map(len, batches[1:])) == [1, 1, 1]  # rerun one at a time


def test_outside_a_run_a_request_runs_alone():
    b, batches = Batcher(Turns()), []
    assert b.submit("k", 4, 1, 100, _doubling(batches)) == 8
    assert batches == [[4]]


def test_stop_takes_a_waiting_request_out_and_it_hears_where_it_stands():
    """A request waits while another key's batch runs: it is told where it stands, and Stop
    ends its wait at once, before any batch carried it."""
    t, b, batches = _batched()
    release, stop, places = threading.Event(), threading.Event(), []

    def slow(payloads: list[object]) -> list[object]:
        batches.append(list(payloads))
        release.wait(10)
        return payloads

    holder = threading.Thread(target=lambda: _submit_all(t, b, [("slow", 1, 1, 100)], slow))
    holder.start()
    deadline = time.monotonic() + 5
    while not batches:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    errors: list[BaseException] = []

    def waiter() -> None:
        with t.run("waiter", should_stop=stop.is_set, waiting=places.append):
            try:
                b.submit("fast", 2, 1, 100, slow)
            except TurnCancelled as err:
                errors.append(err)

    thread = threading.Thread(target=waiter)
    thread.start()
    while not places:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert isinstance(places[0], Place) and places[0].ahead == 1
    stopped = time.monotonic()
    stop.set()
    thread.join(5)
    assert time.monotonic() - stopped < 3 * turns.POLL_S and len(errors) == 1
    release.set()
    holder.join(5)
    assert batches == [[1]]  # the stopped request was never run


def test_a_batchs_runs_are_charged_their_shares():
    t, b, batches = _batched()
    served: dict[str, float] = {}
    go = threading.Barrier(2)

    def one(name: str, size: int) -> None:
        with t.run(name) as run:
            go.wait()
            b.submit("k", size, size, 100, _doubling(batches))
        served[name] = run.served  # the leader's turn has ended

    threads = [threading.Thread(target=one, args=(n, s)) for n, s in (("small", 1), ("large", 3))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(batches) == 1
    assert served["large"] > served["small"] > 0  # the follower pays its share; the leader the rest


def test_a_model_keeps_contexts_within_its_byte_bound():
    """Kept contexts (marginal_core.lm.contexts): the least recently used go first once the
    states pass the bound, and a state larger than the bound is not kept."""
    import torch
    from transformers import DynamicCache

    from marginal_core.lm.contexts import ContextState, KeptContexts, state_bytes

    def state(ids: tuple[int, ...], tokens: int) -> ContextState:
        kv = torch.zeros(1, 1, tokens, 4)  # 16 bytes a token, keys and values each
        return ContextState(ids, DynamicCache([(kv, kv.clone())]), torch.zeros(1, 4), 1)

    a, b, c = state((1,), 8), state((2,), 8), state((3,), 8)
    kept = KeptContexts(max_bytes=2 * state_bytes(a))
    kept.put(a)
    kept.put(b)
    assert kept.get((1,)) is a  # now the most recently used
    kept.put(c)
    assert kept.get((2,)) is None and kept.get((1,)) is a and kept.get((3,)) is c
    assert kept.held_bytes() == 2 * state_bytes(a) <= kept.max_bytes
    kept.put(state((4,), 64))
    assert kept.get((4,)) is None and kept.held_bytes() == 2 * state_bytes(a)


# --------------------------------------------------------------------------------------------
# Real models


TEXTS = [" The old lighthouse keeper climbed the stairs.", " A small bakery sells bread before sunrise.",
         " Children were playing football after school."]


def _estimates(model, shared: bool) -> tuple[list[tuple[float, float]], Batcher | None]:
    """Three live-chunked lattice runs at once on one Turns (in shared passes or not): each run's
    canonical log p and bound, and the Batcher."""
    t = Turns()
    batcher = Batcher(t) if shared else None
    out: list[tuple[float, float]] = [(0.0, 0.0)] * len(TEXTS)
    go = threading.Barrier(len(TEXTS))

    def one(i: int) -> None:
        with t.run(i):
            m = Marginalizer(model, TEXTS[i])
            go.wait()
            *_, last = m.stream("lattice", samples=12, seed=0, chunk=4, first_chunk=2)
            out[i] = (last.log_p_canonical, last.log_noncanonical)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(TEXTS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return out, batcher


@pytest.mark.parametrize("fixture", ["gemma_model", "smollm_model"])
def test_concurrent_runs_equal_the_same_runs_alone(fixture, request):
    """Taking turns, concurrent runs give the estimates of the same runs alone, bit for bit in
    float32; in shared passes, the same within float32's rounding of a larger pass, and the
    passes were shared."""
    model = request.getfixturevalue(fixture)
    alone = []
    for text in TEXTS:
        *_, last = Marginalizer(model, text).stream("lattice", samples=12, seed=0, chunk=4, first_chunk=2)
        alone.append((last.log_p_canonical, last.log_noncanonical))
    taking_turns, _ = _estimates(model, shared=False)
    assert taking_turns == alone
    shared, batcher = _estimates(model, shared=True)
    np.testing.assert_allclose(shared, alone, rtol=0, atol=2e-4)
    assert batcher is not None and batcher.requests > batcher.batches
