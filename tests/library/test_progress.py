"""The command line's bars (progress.tqdm_progress): whole samples for the samplers, rounds for the
beam (its width, the walk's step and the certified gap after them), drawn on a terminal and in a
notebook only, never to a pipe or a file (issue 44)."""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys

import pytest

from marginal_core.cli.commands import main as cli_main
from marginal_core.estimators.beam import anytime_beam
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.estimators.methods import Method
from marginal_core.ground import progress as progress_module
from marginal_core.ground.progress import tqdm_bar, tqdm_progress
from tests.conftest import SMOL

COUNT = re.compile(r"(\d+(?:\.\d+)?)/(\d+) (samples|steps|rounds)")


class Terminal(io.StringIO):
    """Standard error as a terminal would be: a bar is drawn on it."""

    def isatty(self) -> bool:
        return True


def frames(written: str, desc: str) -> list[str]:
    """The bar's frames for desc, in the order drawn (tqdm redraws a line after a carriage return)."""
    return [f.strip() for f in re.split(r"[\r\n]", written) if f.strip().startswith(f"{desc}:")]


def counts(frames_of: list[str]) -> list[tuple[str, int, str]]:
    """(done as drawn, total, unit) of each frame."""
    return [(m[1], int(m[2]), m[3]) for f in frames_of if (m := COUNT.search(f))]


def test_a_bar_counts_whole_samples(monkeypatch):
    monkeypatch.setattr(sys, "stderr", out := Terminal())
    progress, close = tqdm_progress("lattice")
    for done in (0, 0.4, 2.5, 7.9, 10):  # a chunk's fractional progress, as the lattice reports it
        progress(done, 10)
    close()
    drawn = counts(frames(out.getvalue(), "lattice"))
    assert drawn and all(done.isdigit() for done, _, _ in drawn), drawn
    assert drawn[-1] == ("10", 10, "samples") and "it/s" not in out.getvalue()


def test_a_run_in_rounds_draws_its_rounds_its_width_and_gap(monkeypatch):
    monkeypatch.setattr(sys, "stderr", out := Terminal())
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)  # every step drawn, however quick
    progress, close = tqdm_progress("beam", "steps")
    progress(0, 9)  # the canonical pass, before the first round: a count of steps
    hook = progress.on_round  # type: ignore[attr-defined]
    for i, (width, gap) in enumerate([(16, None), (64, 0.25)]):
        hook(i, 4, width, gap)
        for step in range(1, 10):  # every round walks from its first step again
            progress(step, 9)
    hook(2, 2, 64, 1e-3)  # converged after two of the four rounds planned: no more are
    close()
    drawn = frames(out.getvalue(), "beam")
    rounds = [c for c in counts(drawn) if c[2] == "rounds"]
    assert rounds and all(int(done) <= total for done, total, _ in rounds)
    assert [int(done) for done, _, _ in rounds] == sorted(int(done) for done, _, _ in rounds)  # never restarts
    assert rounds[-1] == ("2", 2, "rounds") and drawn[-1].endswith("width 64, gap 0.001 nats]")
    assert any("width 16, step" in f for f in drawn) and any("width 64, step 9/9, gap 0.25 nats" in f for f in drawn)


def test_nothing_is_drawn_off_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", out := io.StringIO())  # a pipe or a file
    progress, close = tqdm_progress("beam", "steps")
    progress(0.5, 9)
    progress.on_round(0, 4, 16, None)  # type: ignore[attr-defined]
    progress(3, 9)
    progress.on_round(1, 1, 16, 0.0)  # type: ignore[attr-defined]
    close()
    bar = tqdm_bar(5, "items")  # the evaluator's and the scan's bars
    bar.update(2)
    bar.set_postfix(item=3)
    bar.close()
    assert out.getvalue() == ""


class Tee:
    """A progress callback with a round hook that records what it hears and passes it to a bar."""

    def __init__(self, bar=None) -> None:
        self.bar, self.steps, self.rounds = bar, [], []

    def __call__(self, done: float, total: int) -> None:
        self.steps.append((done, total))
        if self.bar is not None:
            self.bar(done, total)

    def on_round(self, done: int, planned: int, width: int, gap: float | None) -> None:
        self.rounds.append((done, planned, width, gap))
        if self.bar is not None:
            self.bar.on_round(done, planned, width, gap)


def test_the_anytime_beam_reports_its_rounds(smollm_model, monkeypatch):
    monkeypatch.setattr(sys, "stderr", out := Terminal())
    m = Marginalizer(smollm_model, " eight legs")
    bar, close = tqdm_progress("beam", "steps")
    heard = Tee(bar)
    *_, last = anytime_beam(smollm_model, m.lattice, m.context_state(), widths=(1, 2, 4), tolerance=1e-9,
                            progress=heard)
    close()
    rounds = last.rounds
    assert len(rounds) >= 2  # widened at least once, so the steps restarted
    starts = [(i, 3, w, rounds[i - 1].certified_gap if i else None) for i, w in enumerate((1, 2, 4)[:len(rounds)])]
    assert heard.rounds == [*starts, (len(rounds), len(rounds), rounds[-1].width, rounds[-1].certified_gap)]
    assert sum(1 for done, _ in heard.steps if done == 1) == len(rounds)  # each round's walk from step 1
    drawn = counts(frames(out.getvalue(), "beam"))
    assert all(int(done) <= total for done, total, unit in drawn if unit == "rounds")
    assert drawn[-1] == (str(len(rounds)), len(rounds), "rounds")
    # One walk of a fixed width is one round: planned, then finished with its certified gap.
    fixed = Tee()
    m.estimate(Method.BEAM, beam_width=2, progress=fixed)
    assert [r[:3] for r in fixed.rounds] == [(0, 1, 2), (1, 1, 2)] and fixed.rounds[0][3] is None
    assert 0 < fixed.rounds[-1][3] < math.inf  # width 2 prunes some prefixes of " eight legs"


@pytest.mark.models
def test_the_command_lines_bars_on_a_terminal(monkeypatch, capsys):
    """`marginal estimate` on a terminal: the lattice's bar counts whole samples up to k, the
    beam's counts rounds, never past its total, with the width and the certified gap."""
    monkeypatch.setattr(sys, "stderr", out := Terminal())
    assert cli_main(["estimate", " Paris", "--model", SMOL, "--device", "cpu", "--dtype", "float32",
                     "--methods", "lattice,beam", "--samples", "20"]) == 0
    written = out.getvalue()
    lattice = counts(frames(written, "lattice"))
    assert lattice and all(done.isdigit() and unit == "samples" for done, _, unit in lattice), lattice
    assert lattice[-1] == ("20", 20, "samples")  # k = 20 of the 29 tokenizations
    beam = frames(written, "beam")
    rounds = [c for c in counts(beam) if c[2] == "rounds"]
    assert rounds and all(int(done) <= total for done, total, _ in rounds)
    assert rounds[-1][0] == str(rounds[-1][1]) and "width 16" in beam[-1] and ("gap" in beam[-1] or "exact" in beam[-1])
    assert "beam" in capsys.readouterr().out


@pytest.mark.models
def test_no_bar_goes_to_a_pipe():
    """Standard error piped (a log, a script): the model's one line and nothing of the bars."""
    proc = subprocess.run([sys.executable, "-m", "marginal_core", "estimate", " Paris", "--model", SMOL,
                           "--device", "cpu", "--methods", "lattice,beam", "--samples", "20"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"marginal: loaded {SMOL}") and proc.stderr.count("\n") == 1, proc.stderr
    assert "\r" not in proc.stderr and "lattice" in proc.stdout and "beam" in proc.stdout
