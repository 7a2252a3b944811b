"""How far an estimator's run got, beside its result (``Estimate.run``): a sampling stream's
:class:`RunState`, a beam's :class:`BeamRun`; each says its own share covered and describes it
(docs/design.md, "The estimators"); no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from marginal_core.beam_width import Round

Checkpoints = tuple[tuple[int, float], ...]
"""(samples or paths, seconds) after each chunk of a run."""


@dataclass(frozen=True)
class RunState:
    """How far a sampling stream got: the samples asked for, (samples, seconds) after each
    chunk, and whether it finished (``done``) or was stopped (``cancelled``, keeping what it
    finished). A beam's run is a :class:`BeamRun`: each kind says its own progress."""

    requested: int
    checkpoints: Checkpoints = ()
    done: bool = True
    cancelled: bool = False

    @property
    def completed(self) -> int:
        """Samples scored (a beam: paths completed) by the last checkpoint."""
        return self.checkpoints[-1][0] if self.checkpoints else 0

    @property
    def covered(self) -> int:
        """The units of ``requested`` done: samples scored."""
        return self.completed

    @property
    def fraction(self) -> float:
        """Share of the requested work covered (1.0 once done)."""
        if self.done or not self.requested:
            return 1.0
        return min(1.0, self.covered / self.requested)

    def describe(self) -> str:
        """How far it got, in words: '100 of 600 samples scored'."""
        return f"{self.completed:,} of {self.requested:,} samples scored"


@dataclass(frozen=True)
class BeamRun(RunState):
    """A beam's run: it asks for no number of samples, so ``requested`` is the walk's most steps
    and ``steps`` those done, while its checkpoints count the paths it completed; an anytime
    beam's finished ``rounds`` too."""

    steps: int = 0
    rounds: tuple[Round, ...] = ()

    @property
    def covered(self) -> int:
        """The units of ``requested`` done: the walk's steps."""
        return self.steps

    def describe(self) -> str:
        """'48 paths completed, step 7 of 14'."""
        return f"{self.completed:,} paths completed, step {self.steps:,} of {self.requested:,}"
