"""Helpers the Streamlit app needs that are not about figures and not about Streamlit.

* Chunk sizes for live runs: :func:`live_stream` runs an estimator's stream in chunks small
  enough for a plot to grow about ten times, so that a stopped run keeps what it has.
* The defaults of the app (text, context, sample sizes) and the sentence sets of the rank
  correlation table (the paper's Table 1, kept small for a CPU).
* Friendly messages for errors, and device descriptions.

Nothing here imports Streamlit, so all of it is tested without a browser.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pandas as pd

from marginal_core.errors import MarginalError
from marginal_core.estimators import Estimate, Marginalizer

__all__ = [
    "DEFAULT_TEXT",
    "DEFAULT_CONTEXT",
    "DEFAULT_SAMPLES",
    "live_chunk",
    "live_stream",
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


def live_chunk(k: int) -> int:
    """Samples per chunk of a live run of k: about 10 updates, of 50 to 500 samples each.

    Smaller chunks update a live plot more often but share fewer prefixes, so they cost more.
    """
    return int(min(500, max(50, math.ceil(k / 10))))


def live_stream(m: Marginalizer, method: str, *, samples: int = DEFAULT_SAMPLES, **options) -> Iterator[Estimate]:
    """``m.stream`` in chunks sized for a live plot (about ten updates); same samples as
    ``m.estimate`` with the same options."""
    chunk = live_chunk(m.lattice.count() - 1 if method == "exact" else samples)
    return m.stream(method, samples=samples, chunk=chunk, **options)


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
