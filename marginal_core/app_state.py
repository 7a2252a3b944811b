"""Helpers the Streamlit app needs that are not about figures and not about Streamlit.

* Runs that report partial results: the estimators of :mod:`marginal_core.estimators` return
  one Estimate at the end; the app wants an Estimate after every scored chunk so that a plot can
  grow live and a stopped run keeps what it has. :func:`stream_lattice`, :func:`stream_exact` and
  :func:`stream_proxy` yield a :class:`Partial` after each chunk; the last one is the result.
* The defaults of the app (text, context, sample sizes) and the sentence sets of the rank
  correlation table (the paper's Table 1, kept small for a CPU).
* Friendly messages for errors, and device descriptions.

Nothing here imports Streamlit, so all of it is tested without a browser.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from marginal_core.errors import MarginalError
from marginal_core.estimators import Estimate, Marginalizer
from marginal_core.lattice import DEFAULT_ENUMERATION_BUDGET, PathBatch
from marginal_core.sampling import lattice_samples
from marginal_core.scoring import ScoreStats, score_paths

__all__ = [
    "DEFAULT_TEXT",
    "DEFAULT_CONTEXT",
    "DEFAULT_SAMPLES",
    "PROXY_CHUNK",
    "Partial",
    "lattice_chunk",
    "stream_lattice",
    "stream_exact",
    "stream_proxy",
    "last",
    "exact_feasible",
    "RANK_SENTENCES",
    "rank_table",
    "describe_error",
    "device_options",
    "device_label",
]

DEFAULT_CONTEXT = "Question: What is the capital of France?\nAnswer:"
DEFAULT_TEXT = " Paris is the capital of France."
DEFAULT_SAMPLES = 100
# Exact enumeration is offered in the app up to this many paths (each path is scored).
APP_EXACT_BUDGET = 2_000
# Proxy samples are drawn in chunks of this many, chunk i with seed derived from (seed, i), so a
# run with k samples is a prefix of a run with more: the running plot of k=100 is the start of
# the running plot of k=1000, and results are the same on every page.
PROXY_CHUNK = 50


@dataclass(frozen=True, eq=False)
class Partial:
    """An estimate after some of the requested samples, with its timing checkpoints.

    ``checkpoints`` holds one (samples so far, seconds since the start) pair per finished chunk.
    ``estimate.cancelled`` is True until the last chunk is in.
    """

    estimate: Estimate
    checkpoints: tuple[tuple[int, float], ...]
    total: int

    @property
    def done(self) -> bool:
        return not self.estimate.cancelled

    @property
    def fraction(self) -> float:
        return 1.0 if self.total == 0 else min(1.0, self.estimate.num_samples / self.total)


def lattice_chunk(k: int) -> int:
    """Samples scored per chunk for a run of k: about 10 updates, 50 to 500 samples each.

    Smaller chunks update a live plot more often but share fewer prefixes when scored.
    """
    return int(min(500, max(50, math.ceil(k / 10))))


def _estimate(
    method: str,
    m: Marginalizer,
    paths: PathBatch,
    kinds: np.ndarray,
    log_p: np.ndarray,
    log_q: np.ndarray | None,
    running: np.ndarray,
    seconds: float,
    passes: int,
    done: bool,
    num_paths: int | None = None,
) -> Estimate:
    return Estimate(
        method=method,
        log_p_canonical=m.log_p_canonical,
        log_noncanonical=float(running[-1]) if len(running) else -math.inf,
        paths=paths,
        kinds=kinds,
        log_p=log_p,
        log_q=log_q,
        running=running,
        seconds=seconds,
        forward_passes=passes,
        num_paths=num_paths,
        cancelled=not done,
    )


def _prefix(paths: PathBatch, n: int) -> PathBatch:
    return PathBatch(paths.ids[: paths.offsets[n]], paths.offsets[: n + 1])


def _stream_scored(
    method: str, m: Marginalizer, paths: PathBatch, kinds: np.ndarray, chunk: int, started: float,
    num_paths: int | None = None,
) -> Iterator[Partial]:
    """Score paths chunk by chunk, yielding the lower-bound estimate after each chunk."""
    total, stats, scores, checkpoints = len(paths), ScoreStats(), [], []
    if total == 0:
        empty = np.zeros(0)
        yield Partial(
            _estimate(method, m, paths, kinds[:0], empty, None, empty, time.perf_counter() - started, 0, True, num_paths),
            ((0, time.perf_counter() - started),), 0,
        )
        return
    for start in range(0, total, chunk):
        stop = min(start + chunk, total)
        part = PathBatch(paths.ids[paths.offsets[start] : paths.offsets[stop]],
                         paths.offsets[start : stop + 1] - paths.offsets[start])
        scores.append(score_paths(m.lm, part, m.context_ids, stats=stats))
        log_p = np.concatenate(scores)
        running = np.logaddexp.accumulate(log_p)
        seconds = time.perf_counter() - started
        checkpoints.append((stop, seconds))
        yield Partial(
            _estimate(method, m, _prefix(paths, stop), kinds[:stop], log_p, None, running, seconds,
                      stats.forward_passes, stop == total, num_paths),
            tuple(checkpoints), total,
        )


def stream_lattice(
    m: Marginalizer, k: int, *, max_len: int | None = None, seed: int | None = 0, chunk: int | None = None
) -> Iterator[Partial]:
    """Algorithm 1 with k samples, scored chunk by chunk (same samples as lattice_estimate).

    The canonical score is computed first and not timed (every method needs it).
    """
    m.log_p_canonical  # noqa: B018 -- one forward pass, cached, outside the timing
    started = time.perf_counter()
    samples = lattice_samples(m.lattice, k, max_len=max_len, seed=seed)
    yield from _stream_scored("lattice", m, samples.paths, samples.kinds, chunk or lattice_chunk(k), started)


def stream_exact(
    m: Marginalizer, *, budget: int = DEFAULT_ENUMERATION_BUDGET, chunk: int | None = None
) -> Iterator[Partial]:
    """Every non-canonical path scored chunk by chunk (TooManyPathsError beyond budget)."""
    m.log_p_canonical  # noqa: B018
    started = time.perf_counter()
    paths = [p for p in m.lattice.enumerate(budget=budget) if p != m.lattice.canonical]
    batch = PathBatch.from_paths(paths)
    yield from _stream_scored(
        "exact", m, batch, np.full(len(paths), "exact"), chunk or lattice_chunk(len(paths)), started,
        num_paths=m.lattice.count(),
    )


def _chunk_seed(seed: int | None, index: int) -> int | None:
    if seed is None:
        return None
    return int(np.random.SeedSequence([int(seed), index]).generate_state(1)[0])


def stream_proxy(m: Marginalizer, k: int, *, seed: int | None = 0, chunk: int = PROXY_CHUNK) -> Iterator[Partial]:
    """Proxy importance sampling (non-canonical) in chunks of ``chunk`` samples.

    Chunk i uses a seed derived from (seed, i), so the samples are i.i.d. from the proposal and
    the first n of a run do not depend on k. The estimate after each chunk is the importance
    sampling estimate over every sample so far.
    """
    m.log_p_canonical  # noqa: B018
    started = time.perf_counter()
    parts: list[Estimate] = []
    checkpoints: list[tuple[int, float]] = []
    done, passes = 0, 0
    while done < k or not parts:
        size = min(chunk, k - done)
        part = m.proxy(size, seed=_chunk_seed(seed, len(parts))) if size > 0 else None
        if part is not None:
            parts.append(part)
            passes += part.forward_passes
        got = sum(p.num_samples for p in parts)
        finished = part is None or part.num_samples < size or got >= k
        paths = PathBatch.concat([p.paths for p in parts]) if parts else PathBatch(np.zeros(0, np.int64), np.zeros(1, np.int64))
        log_p = np.concatenate([p.log_p for p in parts]) if parts else np.zeros(0)
        log_q = np.concatenate([p.log_q for p in parts]) if parts else np.zeros(0)
        w = log_p - log_q
        running = np.logaddexp.accumulate(w) - np.log(np.arange(1, len(w) + 1)) if len(w) else w
        seconds = time.perf_counter() - started
        checkpoints.append((got, seconds))
        yield Partial(
            _estimate("proxy", m, paths, np.full(len(log_p), "proxy"), log_p, log_q, running, seconds,
                      passes, finished),
            tuple(checkpoints), k if not finished or got >= k else got,
        )
        if finished:
            return
        done = got


def last(stream: Iterator[Partial]) -> Partial:
    """Run a stream to its end and return the final result."""
    result = None
    for result in stream:
        pass
    if result is None:
        raise RuntimeError("the stream yielded nothing")
    return result


def exact_feasible(count: int, budget: int = APP_EXACT_BUDGET) -> bool:
    """Whether exact enumeration of a lattice with count paths is offered (canonical excluded)."""
    return count - 1 <= budget


# --------------------------------------------------------------------------------------------
# The rank correlation table (the paper's Table 1, small)

# Sentences of about 50, 100 and 300 characters (the paper uses 15 per length and 1000 unique
# tokenizations each; the app's defaults take the first few and k = 50).
RANK_SENTENCES: dict[int, list[str]] = {
    50: [
        "The quick brown fox jumps over the lazy dog again.",
        "She sells sea shells by the sea shore every day.",
        "A journey of a thousand miles begins with a step.",
        "Rainbows appear when sunlight passes through rain.",
        "The library opens at nine and closes at six today.",
    ],
    100: [
        "The committee postponed its decision until the next meeting, citing the need for further analysis.",
        "Photosynthesis converts light energy into chemical energy that plants store in the form of sugars.",
        "After the storm passed, the villagers gathered in the square to assess the damage to their homes.",
        "Many programming languages support anonymous functions, which are useful for short callbacks.",
        "The museum's new exhibition traces the history of navigation from ancient stars to satellites.",
    ],
    300: [
        "In the early twentieth century the small coastal town lived on fishing, but the railway "
        "changed everything: merchants from the capital opened shops along the harbour, tourists "
        "filled the guesthouses each summer, and the old fishermen watched with mixed feelings as "
        "their quiet world slowly disappeared.",
        "Researchers studying sleep have found that the brain stays remarkably active at night, "
        "replaying the day, strengthening some memories while discarding others, and clearing away "
        "waste that builds up during waking hours, which may explain why poor sleep affects both "
        "mood and memory.",
        "The recipe calls for two cups of flour, a pinch of salt, three eggs, and enough milk to make a "
        "smooth batter; let it rest for half an hour, then heat a heavy pan until a drop of water dances "
        "on its surface, pour in a thin layer, and cook each pancake until the edges turn golden brown.",
    ],
}


def rank_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of Spearman's rho per text length, as in the paper's Table 1.

    ``rows`` has one row per sentence with columns ``length`` (the nominal length in
    characters) and ``rho`` (NaN where fewer than three distinct samples were drawn, which is
    left out of the mean and counted apart).
    """
    out = []
    for length, group in rows.groupby("length", sort=True):
        rho = group["rho"].dropna()
        mean = float(rho.mean()) if len(rho) else math.nan
        std = float(rho.std(ddof=0)) if len(rho) else math.nan
        out.append(
            {
                "length ≈ (chars)": int(length),
                "sentences": len(group),
                "with ρ": len(rho),
                "mean ρ": mean,
                "std ρ": std,
                "ρ": "n/a" if math.isnan(mean) else f"{mean:.2f} ± {std:.2f}",
            }
        )
    return pd.DataFrame(out)


# --------------------------------------------------------------------------------------------
# Errors and devices


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, torch.OutOfMemoryError):
            return True
    except (ImportError, AttributeError):
        pass
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def describe_error(exc: BaseException, doing: str = "") -> tuple[str, str]:
    """("error" or "warning", a one-paragraph message) for an exception shown to a user.

    Library errors keep their own message; out-of-memory errors and a missing graphviz binary
    get advice; anything else gets its type and first line, never a traceback.
    """
    where = f" while {doing}" if doing else ""
    if isinstance(exc, MarginalError):
        return "error", str(exc)
    if _is_oom(exc):
        return "error", (
            f"Out of memory{where}. Try fewer samples, a shorter text or context, a smaller model, "
            "or another device."
        )
    if type(exc).__name__ == "ExecutableNotFound":
        return "warning", (
            "Graphviz's `dot` program is not installed, so the drawing cannot be rendered to SVG "
            "(install the `graphviz` system package; the DOT source is still available)."
        )
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return "error", (
        f"Something went wrong{where}: {type(exc).__name__}" + (f": {first}" if first else "")
        + ". Try another text or setting; if it persists, please report it."
    )


def device_options() -> list[str]:
    """Devices to offer: auto (GPU when there is one), cpu, and the accelerators present."""
    import torch

    options = ["auto", "cpu"]
    if torch.cuda.is_available():
        options += ["cuda"] + [f"cuda:{i}" for i in range(1, torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        options.append("mps")
    return options


def device_label(device: str, dtype: object | None = None) -> str:
    """A human description of where a model runs: 'GPU (NVIDIA H100, cuda, bfloat16)' or 'CPU'."""
    import torch

    dev = torch.device(device)
    kind = str(dtype).replace("torch.", "") if dtype is not None else None
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        return f"GPU ({name}, {device}" + (f", {kind})" if kind else ")")
    if dev.type == "mps":
        return "GPU (Apple MPS" + (f", {kind})" if kind else ")")
    return "CPU" + (f" ({kind}, {torch.get_num_threads()} threads)" if kind else "")
