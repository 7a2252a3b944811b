"""How far a run got: :class:`Completion`, the one record of work asked for, finished or
stopped that every run's result holds (an Estimate's run, a ProxyResult, a BeamResult); beside an
Estimate (``Estimate.run``) a sampling stream's :class:`RunState` or a beam's :class:`BeamRun`,
each saying its own share covered and describing it (docs/design.md, "The estimators"); no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from marginal_core.estimators.beam_width import Round

Checkpoints = tuple[tuple[int, float], ...]
"""(samples or paths, seconds) after each chunk of a run."""


@dataclass(frozen=True)
class Completion:
    """The work a run was asked for (``requested``: samples, or a beam walk's most steps), whether
    it finished (``done``; False for a stream's results before its last) and whether a stop ended
    it (``cancelled``: what it finished is kept)."""

    requested: int
    done: bool = True
    cancelled: bool = False


@dataclass(frozen=True)
class RunState:
    """How far a sampling stream got: its :class:`Completion` and (samples, seconds) after each
    chunk. A beam's run is a :class:`BeamRun`: each kind says its own progress."""

    completion: Completion
    checkpoints: Checkpoints = ()

    @property
    def requested(self) -> int:
        """The samples asked for (a beam: the walk's most steps)."""
        return self.completion.requested

    @property
    def done(self) -> bool:
        """Whether the run finished."""
        return self.completion.done

    @property
    def cancelled(self) -> bool:
        """Whether a stop ended the run (what it finished is kept)."""
        return self.completion.cancelled

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
    """A beam's run: it asks for no number of samples, so its completion's ``requested`` is the
    walk's most steps and ``steps`` those done, while its checkpoints count the paths it completed; an anytime
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
