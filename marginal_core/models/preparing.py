"""Preparing a GGUF model's caches on its first use, once per process, in steps others can watch.

A GGUF model's first load converts its tokenizer, takes the lattice's snapshot of it and
dequantizes its weights (about a minute for Gemma 3 on two cores); later loads read the caches in
seconds. :func:`prepare` runs those steps in one thread per model, and every caller (the app
server's warm thread, each session that needs the model, :func:`warm`) watches or waits on the
same :class:`Preparation`.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from marginal_core.models.caches import is_done, model_cache_dir
from marginal_core.models.loading import (
    _LOCK,
    _TOKENIZER_LOCK,
    SNAPSHOT_FILE,
    _ensure_model_cache,
    _ensure_tokenizer_cache,
    load_model,
    load_text_tokenizer,
)
from marginal_core.models.registry import canonical_name, known_models, resolve

__all__ = ["STEPS", "Preparation", "needs_preparing", "prepare", "warm"]

STEPS = ("tokenizer", "lattice snapshot", "weights")
# Each step's share of the bar, and the seconds it is expected to take (Gemma 3 on two cores):
# within a step the bar moves towards its end as 1 - exp(-elapsed / expected), never past it.
SHARES = (0.08, 0.04, 0.88)
EXPECTED_S = (3.0, 2.0, 40.0)

_PREPARING: dict[str, Preparation] = {}  # under way in this process, by canonical name
_REGISTRY = threading.Lock()


@dataclass
class Preparation:
    """One model's preparation: the steps finished (their seconds, and whether each had work to
    do), the error that ended it, and an event set when it ends."""

    name: str
    seconds: list[float] = field(default_factory=list)
    converted: list[bool] = field(default_factory=list)
    error: BaseException | None = None
    started: float = field(default_factory=time.perf_counter)
    ended: threading.Event = field(default_factory=threading.Event)
    step_started: float = field(default_factory=time.perf_counter)

    @property
    def step(self) -> int:
        """The index of the step under way (len(STEPS) once all are done)."""
        return len(self.seconds)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until it ends (at most timeout seconds); whether it has."""
        return self.ended.wait(timeout)

    def fraction(self) -> float:
        """How far along it is, from 0 to 1, for a progress bar."""
        if self.step >= len(STEPS):
            return 1.0
        within = 1 - math.exp(-(time.perf_counter() - self.step_started) / EXPECTED_S[self.step])
        return sum(SHARES[: self.step]) + SHARES[self.step] * min(within, 0.95)

    def describe(self) -> str:
        """Where it stands, in words: the step under way and what the finished ones took."""
        said = [f"{STEPS[i]} {'built' if self.converted[i] else 'cached'} in {s:.1f} s"
                for i, s in enumerate(self.seconds)]
        if self.step < len(STEPS):
            now = f"step {self.step + 1} of {len(STEPS)}: {STEPS[self.step]} ({time.perf_counter() - self.step_started:.0f} s)"
            return now + (f"; {', '.join(said)}" if said else "")
        return ", ".join(said)


def needs_preparing(name: str) -> bool:
    """Whether a model is a GGUF one whose caches are not all on disk (False for any other name,
    or one that does not resolve: its own load says why)."""
    try:
        src = resolve(canonical_name(name))
    except Exception:  # noqa: BLE001 -- the model's load reports an unknown name
        return False
    if src.gguf is None:
        return False
    folder = model_cache_dir(src.name)
    return not (is_done(folder / "tokenizer") and (folder / "tokenizer" / SNAPSHOT_FILE).is_file()
                and is_done(folder / "model"))


def prepare(name: str) -> Preparation:
    """The preparation of a GGUF model's caches: the one under way in this process, or a new one
    started in a thread of its own (a finished one is forgotten, so the registry stays small)."""
    canonical = canonical_name(name)
    with _REGISTRY:
        prep = _PREPARING.get(canonical)
        if prep is None:
            prep = _PREPARING[canonical] = Preparation(canonical)
            threading.Thread(target=_run, args=(prep,), name=f"prepare {canonical}", daemon=True).start()
    return prep


def _run(prep: Preparation) -> None:
    """Run the steps, recording each; always ends the preparation and forgets it."""
    src = resolve(prep.name)
    gguf, folder = src.gguf, model_cache_dir(src.name)
    assert gguf is not None  # prepare is for GGUF models (needs_preparing)
    snapshot = folder / "tokenizer" / SNAPSHOT_FILE

    def tokenizer() -> bool:
        with _LOCK, _TOKENIZER_LOCK:
            return _ensure_tokenizer_cache(gguf, folder)

    def lattice_snapshot() -> bool:
        taken = not snapshot.is_file()
        load_text_tokenizer(prep.name)  # takes the snapshot once
        return taken

    def weights() -> bool:
        with _LOCK:
            return _ensure_model_cache(gguf, folder)

    steps: tuple[Callable[[], bool], ...] = (tokenizer, lattice_snapshot, weights)
    try:
        for run in steps:
            prep.step_started = time.perf_counter()
            prep.converted.append(run())
            prep.seconds.append(time.perf_counter() - prep.step_started)
        if any(prep.converted):  # the operator's log: what a first start costs
            print(f"marginal: prepared {prep.name} in {time.perf_counter() - prep.started:.1f} s: {prep.describe()}",
                  file=sys.stderr, flush=True)
    except BaseException as exc:  # noqa: BLE001 -- kept for every watcher; the model's load reports it
        prep.error = exc
    finally:
        with _REGISTRY:
            _PREPARING.pop(prep.name, None)
        prep.ended.set()


def warm(names: list[str] | None = None, log: Callable[[str], None] = print) -> dict[str, dict[str, float]]:
    """Build the on-disk caches of the given models (default: all embedded); returns timings.

    Already cached parts are only checked, not loaded, so a warm run on a warm cache is quick.
    """
    timings: dict[str, dict[str, float]] = {}
    for name in names or known_models():
        src = resolve(name)
        if src.gguf is None:
            t0 = time.perf_counter()
            load_model(name)
            timings[src.name] = {"load_s": time.perf_counter() - t0}
            log(f"{src.name}: loaded through Hugging Face in {timings[src.name]['load_s']:.1f} s")
            continue
        prep = prepare(src.name)
        prep.wait()
        if prep.error is not None:
            raise prep.error
        tok_s, model_s = prep.seconds[0] + prep.seconds[1], prep.seconds[2]
        timings[src.name] = {"tokenizer_s": tok_s, "model_s": model_s}
        log(f"{src.name}: tokenizer {'converted' if prep.converted[0] else 'cached'} ({tok_s:.1f} s), "
            f"model {'converted' if prep.converted[2] else 'cached'} ({model_s:.1f} s) in {model_cache_dir(src.name)}")
    return timings
