"""How a task is evaluated: the options every task takes, checked once (apart from the evaluator,
so that a task declares what it reads without importing the loop that runs it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH, check_width
from marginal_core.estimators.methods import DEFAULT_TASK_METHODS, parse_methods
from marginal_core.ground.errors import MarginalError


@dataclass(frozen=True)
class EvalOptions:
    """How to evaluate, for every task: the model, k, the methods and how far to go.

    ``model`` is a model name (None: the default model, or the name of the model passed to
    evaluate). ``limit`` keeps the first N items; ``max_items`` stops after that many newly
    scored items (an interruption, for tests). ``methods`` may be a comma list; it is stored
    as a checked tuple.
    """

    model: str | None = None
    samples: int = 100
    methods: str | Sequence[str] = DEFAULT_TASK_METHODS
    seed: int = 0
    max_len: int | None = None
    limit: int | None = None
    device: str | None = None
    dtype: str = "auto"
    beam_width: int | None = DEFAULT_BEAM_WIDTH  # None: the anytime beam
    show_bar: bool = True
    max_items: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", tuple(parse_methods(self.methods)))
        if self.samples < 1:
            raise MarginalError("--samples must be at least 1")
        if self.limit is not None and self.limit < 0:
            raise MarginalError("--limit must be at least 0")
        if self.beam_width is not None:
            check_width(self.beam_width)
