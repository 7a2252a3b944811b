"""marginal: decoding-free marginalization of causal LMs over tokenizations.

    import marginal_core as mc

    mc.build_lattice(text, "gemma3-270m")      # the tokenization lattice (a model name or a tokenizer)
    mc.estimate(text, model="gemma3-270m")     # an Estimate (the anytime beam); methods="canonical,lattice" etc.
    mc.Marginalizer("gemma3-270m", text, context=None)  # every method on one text, streams and all
    mc.compare(text, models=["gemma3-270m", "smollm2-135m"])  # one text under two models: a DataFrame
    mc.scan("texts.txt", models="gemma3-270m,smollm2-135m")  # a file of texts: the tidy DataFrame
    mc.surprisal(text, "gemma3-270m", unit="word")  # where in the text: surprisal by region, marginal and canonical
    mc.next_characters("The capital of Fra", "gemma3-270m")  # what comes next: over every tokenization, certified
    p = mc.prefix("The capital of", "gemma3-270m")  # a text as a prefix: p.logp_next(), p + " Fra", p.log_prob()
    mc.score_continuations("The capital of France is", [" Paris", " Lyon"])  # each candidate beside lm-eval's score
    mc.load_model(name, device=None, dtype="auto")  # a loaded model, kept for later calls
    mc.Method, mc.EstimateOptions, mc.Estimate, mc.Lattice, mc.MarginalError and the other errors

The package is the pipeline's stages as folders: ``lattice/`` (no model), ``scoring/`` (batched
passes), ``search/`` (the prefix search: a text as a prefix, its surprisal, what comes next),
``estimators/`` (the marginal by each method) and ``serving/`` (a room on one machine),
beside ``models/``, ``lm/``, ``viz/``, ``tasks/``, ``harness/`` and ``cli/`` (docs/design.md,
"Architecture"). The names below are the public ones, the app's pages included.

Importing the package is cheap (no torch): each name is imported on first use. In a Jupyter kernel
it also has the kernel draw Lattices and Estimates (``viz.notebook.register_formatters``).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from marginal_core.ground.errors import (
    EmptyTextError,
    MarginalError,
    NormalizationError,
    TooManyPathsError,
    UnknownModelError,
    UnrepresentableTextError,
)

__version__ = "0.1.0"

# name -> the module that defines it, imported when the name is first read; by stage
_LAZY = {
    # the lattice: a text's tokenizations, counted and sampled without a model
    "build_lattice": "marginal_core.api.calls",
    "Lattice": "marginal_core.lattice.graph",
    "lattice_samples": "marginal_core.lattice.sampling",
    "vocabulary": "marginal_core.lattice.vocab",
    "Vocabulary": "marginal_core.lattice.vocab",
    "TextTokenizer": "marginal_core.lattice.tokenizer",
    # models and the one model contract the algorithms use
    "load_model": "marginal_core.models",
    "LM": "marginal_core.lm.adapter",
    # the estimators
    "Marginalizer": "marginal_core.estimators.marginalizer",
    "Estimate": "marginal_core.estimators.estimate_result",
    "EstimateOptions": "marginal_core.estimators.estimate_options",
    "Method": "marginal_core.estimators.methods",
    "TASK_METHODS": "marginal_core.estimators.methods",
    "DEFAULT_BEAM_WIDTH": "marginal_core.estimators.beam_width",
    "MAX_BEAM_WIDTH": "marginal_core.estimators.beam_width",
    "DEFAULT_TOLERANCE": "marginal_core.search.settings",
    "auto_widths": "marginal_core.estimators.beam_width",
    "describe_rounds": "marginal_core.estimators.beam_width",
    "PROXY_BATCH_SIZE": "marginal_core.estimators.proxy",
    "on_one_scorer": "marginal_core.estimators.shared_scores",
    # where in the text
    "Surprisal": "marginal_core.search.surprisal.result",
    "Region": "marginal_core.search.surprisal.result",
    "UNITS": "marginal_core.search.surprisal.result",
    "SPACES": "marginal_core.search.surprisal.result",
    "SURPRISAL_METHODS": "marginal_core.search.surprisal.result",
    "region_spans": "marginal_core.search.surprisal.result",
    "surprisal_stream": "marginal_core.search.surprisal.stream",
    # what comes next
    "NextCharacters": "marginal_core.search.next.results",
    "Continuations": "marginal_core.search.next.results",
    "next_characters_stream": "marginal_core.search.prefix",
    "Prefix": "marginal_core.search.prefix",
    "ByteLogProbs": "marginal_core.search.prefix",
    "LogProb": "marginal_core.search.prefix",
    "SearchSettings": "marginal_core.search.settings",
    "Ended": "marginal_core.search.ending",
    "continuations_stream": "marginal_core.search.prefix",
    "ContinuationScores": "marginal_core.search.next.candidate_table",
    "ContinuationScore": "marginal_core.search.next.candidate_table",
    "MAX_CANDIDATES": "marginal_core.search.next.candidate_table",
    # one call each
    "estimate": "marginal_core.api.calls",
    "scan": "marginal_core.api.calls",
    "surprisal": "marginal_core.api.calls",
    "next_characters": "marginal_core.api.calls",
    "prefix": "marginal_core.api.calls",
    "continue_text": "marginal_core.api.calls",
    "score_continuations": "marginal_core.api.calls",
    "compare": "marginal_core.api.comparison",
}

__all__ = [
    "__version__",
    *_LAZY,
    "MarginalError",
    "UnknownModelError",
    "EmptyTextError",
    "UnrepresentableTextError",
    "NormalizationError",
    "TooManyPathsError",
]


def __getattr__(name: str) -> Any:
    """The public names, each imported on first use (so ``import marginal_core`` loads no torch) and
    read from its defining module at every use, never copied here: ``mc.X`` is always that
    module's ``X``, also when a test patches it there."""
    if name not in _LAZY:
        raise AttributeError(f"module 'marginal_core' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _show_in_notebook() -> None:
    """In an IPython shell, its HTML formatter draws Lattices and Estimates (viz.notebook.register_formatters)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is not None:
        from marginal_core.viz.notebook import register_formatters

        register_formatters(shell)


_show_in_notebook()
