"""What a downstream task declares, in lm-evaluation-harness's shape.

A task says how to load its items, which (context, continuation) requests an item makes, and how
its metrics are read off a results folder; :func:`marginal_core.tasks.evaluator.evaluate` does
the rest (the results folder, resuming, the model, the loop) the same way for every task.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from marginal_core.lm.adapter import LM
    from marginal_core.tasks.options import EvalOptions

# Columns every row of every task has, after the task's own leading columns.
SCORE_COLUMNS = [
    "method",
    "log_marginal",
    "log_p_canonical",
    "log_noncanonical",
    "num_samples",
    "num_distinct",
    "seconds",
    "forward_passes",
    "num_bytes",
    "num_tokens_canonical",
    "num_paths",
]


class Item(Protocol):
    """One unit of a task (a question, a sentence): resumed and reported by its id."""

    @property
    def id(self) -> str: ...

    @property
    def index(self) -> int: ...


@dataclass(frozen=True)
class Request:
    """One text to score: the continuation after its context, as choice ``choice`` of an item.

    ``columns`` holds the task's own row columns besides item and choice (the gold index, the
    answer's text, ...).
    """

    choice: int
    context: str
    continuation: str
    columns: dict[str, Any] = field(default_factory=dict)


class Task(ABC):
    """A downstream task: its data, its requests and its metrics (see the module docstring)."""

    name: ClassVar[str]
    """The task's name in config.json ('qa', 'mt')."""
    unit: ClassVar[str]
    """What an item is, in the plural ('questions', 'sentences')."""
    columns: ClassVar[list[str]]
    """rows.csv's leading columns (item and choice among them); SCORE_COLUMNS follow."""
    keeps_records: ClassVar[bool] = False
    """True where an item needs a stored record (items.jsonl) before it has requests."""

    def __init__(self, dataset: str) -> None:
        self.dataset = dataset

    @abstractmethod
    def load(self, options: EvalOptions) -> Sequence[Item]:
        """The items to evaluate, in order, cut to options.limit."""

    @abstractmethod
    def identity(self, options: EvalOptions, model: str) -> dict[str, Any]:
        """What makes two runs comparable (config.json): a folder refuses another identity."""

    @property
    def part(self) -> str | None:
        """Which part of a folder's items a run scores, for its run lock (tasks/writer.py): None,
        all of them; runs of disjoint parts may write one folder at once."""
        return None

    @abstractmethod
    def requests(self, item: Any, record: dict[str, Any] | None) -> list[Request]:
        """The requests of an item (record: its stored record, where the task keeps one)."""

    def prepare(self, item: Any, lm: LM, options: EvalOptions) -> dict[str, Any]:
        """The record of an item that has none yet (only where keeps_records is True)."""
        raise NotImplementedError(f"the {self.name} task keeps no item records")

    @abstractmethod
    def report(self, out: Path, items: Sequence[str], methods: Sequence[str]) -> dict[str, Any]:
        """The task's metrics over the given items of a results folder (its report)."""
