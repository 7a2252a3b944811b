"""The paper tables' runs: sizes, results folders, time log and the plan of resumable parts.

Table 1 is the ranking task over ARC question texts, Tables 2-4 are eval-qa and eval-mt runs;
bench.paper_tables runs the plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODELS = ("smollm2-135m", "gemma3-270m")
QA_SETS = {"openbookqa": "Book", "medmcqa": "Med", "arc-challenge": "Arc"}
MT_SETS = {"en-de": "En→De", "en-cs": "En→Cs"}
LENGTHS = (50, 100, 300)
SENTENCE_SOURCE = "arc-challenge"  # Table 1's sentences: ARC-Challenge test question texts
METHODS = ("canonical", "proxy", "lattice", "beam")


# ------------------------------------------------------------------------------------------
# Sizes and parts


@dataclass(frozen=True)
class Sizes:
    """How much each table runs: sentences and k (Table 1), questions and k (Tables 2-3),
    sentences, candidates and k (Table 4), the beam width, and the translation models."""

    t1_sentences: int
    t1_samples: int
    qa_questions: int
    qa_samples: int
    mt_sentences: int
    mt_samples: int
    candidates: int
    beam_width: int
    mt_data: str  # "packaged" (30 sentences in tasks/data) or "wmt24pp" (needs the hub)


DEFAULT = Sizes(t1_sentences=2, t1_samples=50, qa_questions=5, qa_samples=100,
                mt_sentences=2, mt_samples=50, candidates=4, beam_width=32, mt_data="packaged")
FULL = Sizes(t1_sentences=15, t1_samples=1000, qa_questions=250, qa_samples=1000,
             mt_sentences=150, mt_samples=1000, candidates=4, beam_width=32, mt_data="wmt24pp")

# CPU seconds (one thread) per unit at k = 100, per model: one Table 1 sentence by length, one
# Q&A question (four answers by all methods), one translation sentence (its candidates generated,
# then all methods). Measured on this machine's AMD EPYC (the "Time of each part" table of
# docs/results.md) where a part finished, otherwise extrapolated (Gemma 3 about twice SmolLM2:
# its 262k-token softmax). Scaled linearly with k for the plan.
UNIT_SECONDS = {
    "smollm2-135m": {"t1": {50: 30.0, 100: 50.0, 300: 300.0}, "qa": 38.0, "mt": 250.0},
    "gemma3-270m": {"t1": {50: 60.0, 100: 100.0, 300: 600.0}, "qa": 75.0, "mt": 500.0},
}


def unit_seconds(model: str) -> dict[str, Any]:
    """The measured unit costs of a model (an unmeasured model counts as the slowest one)."""
    return UNIT_SECONDS.get(model, UNIT_SECONDS["gemma3-270m"])


@dataclass(frozen=True)
class Part:
    """One resumable run: a table's work for one model and data set, with its estimated time."""

    table: str
    model: str
    dataset: str
    out: Path
    todo: int
    total: int
    seconds: float
    run: Callable[[Any], None]


def _k_scale(samples: int) -> float:
    return samples / 100


# ------------------------------------------------------------------------------------------
# Table 1: its sentences and its part


def table1_sentences(n: int) -> dict[int, list[tuple[str, str]]]:
    """(id, text) of n real sentences per target length: ARC-Challenge test question texts,
    the first n in file order within 10% of the length."""
    from marginal_core.tasks.options import EvalOptions
    from marginal_core.tasks.qa import QATask

    questions = QATask(SENTENCE_SOURCE).load(EvalOptions())
    return {
        target: [(q.id, q.question) for q in questions if abs(len(q.question) - target) <= 0.1 * target][:n]
        for target in LENGTHS
    }


def t1_out(out: Path, model: str, samples: int) -> Path:
    return out / "table1" / f"{SENTENCE_SOURCE}-{model}-k{samples}"


def table1_task(sizes: Sizes) -> Any:
    """Table 1's task (marginal_core.tasks.rank) over the bench's sentences."""
    from marginal_core.tasks.rank import RankTask, sentences_by_length

    return RankTask(SENTENCE_SOURCE, sentences_by_length(table1_sentences(sizes.t1_sentences)))


def table1_part(out: Path, model: str, sizes: Sizes) -> Part:
    """The Table 1 sentences of one model not yet in its results folder, as one resumable part."""
    from marginal_core.tasks.evaluator import evaluate
    from marginal_core.tasks.rank import rank_options

    task, folder = table1_task(sizes), t1_out(out, model, sizes.t1_samples)
    done = done_items(folder, ("proxy",))
    todo = [s for s in task.sentences if s.id not in done]
    seconds = sum(unit_seconds(model)["t1"][s.length] for s in todo) * _k_scale(sizes.t1_samples)
    options = rank_options(sizes.t1_samples, model=model, dtype="float32")

    def run(lm: Any) -> None:
        evaluate(task, folder, options, lm=lm)

    return Part("1", model, SENTENCE_SOURCE, folder, len(todo), len(task.sentences), seconds, run)


def times_file(out: Path) -> Path:
    return out / "times.json"


def time_key(table: str, model: str, folder: Path) -> str:
    return f"{table} {model} {folder.name}"


def log_time(out: Path, part: Part, wall: float, cpu: float) -> None:
    """Add a session's wall and CPU seconds (this process, every thread) to its part's totals."""
    path = times_file(out)
    times = json.loads(path.read_text()) if path.is_file() else {}
    old = times.get(time_key(part.table, part.model, part.out), {"wall": 0.0, "cpu": 0.0})
    times[time_key(part.table, part.model, part.out)] = {"wall": round(old["wall"] + wall, 1),
                                                         "cpu": round(old["cpu"] + cpu, 1)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(times, indent=1) + "\n")


# ------------------------------------------------------------------------------------------
# Tables 2-4: the task folders


def qa_out(out: Path, model: str, dataset: str, sizes: Sizes) -> Path:
    return out / "qa" / f"{dataset}-{model}-k{sizes.qa_samples}"


def mt_dataset(direction: str, sizes: Sizes) -> str:
    return direction if sizes.mt_data == "packaged" else f"wmt24pp:{direction}"


def mt_out(out: Path, model: str, direction: str, sizes: Sizes) -> Path:
    return out / "mt" / f"{sizes.mt_data}-{direction}-{model}-k{sizes.mt_samples}-c{sizes.candidates}"


def done_items(folder: Path, methods: Sequence[str] = METHODS) -> set[str]:
    """Items a results folder holds every method for (rows are written an item at a time)."""
    from marginal_core.tasks.report import complete_items, load_rows

    if not (folder / "rows.csv").is_file():
        return set()
    return set(complete_items(load_rows(folder), methods, None))


def task_part(table: str, model: str, dataset: str, folder: Path, sizes: Sizes) -> Part:
    """One eval-qa / eval-mt run (resumable through its results folder)."""
    from marginal_core.tasks.evaluator import evaluate
    from marginal_core.tasks.mt import MTTask
    from marginal_core.tasks.options import EvalOptions
    from marginal_core.tasks.qa import QATask

    qa = table == "2"
    n = sizes.qa_questions if qa else sizes.mt_sentences
    samples = sizes.qa_samples if qa else sizes.mt_samples
    todo = max(0, n - len(done_items(folder)))
    seconds = todo * unit_seconds(model)["qa" if qa else "mt"] * _k_scale(samples)
    options = EvalOptions(model=model, samples=samples, methods=METHODS, seed=0, limit=n,
                          dtype="float32", beam_width=sizes.beam_width)

    def run(lm: Any) -> None:
        task = QATask(dataset, shuffle=True) if qa else MTTask(dataset, sizes.candidates, comet=False)
        evaluate(task, folder, options, lm=lm)

    return Part(table, model, dataset, folder, todo, n, seconds, run)


# ------------------------------------------------------------------------------------------
# The plan


def plan(out: Path, models: Sequence[str], mt_models: Sequence[str], sizes: Sizes, tables: set[str]) -> list[Part]:
    """Every part, in run order: Q&A first (the cheapest), then Table 1, then translation."""
    parts = []
    if "2" in tables:
        parts += [task_part("2", m, d, qa_out(out, m, d, sizes), sizes) for m in models for d in QA_SETS]
    if "1" in tables:
        parts += [table1_part(out, m, sizes) for m in models]
    if "4" in tables:
        parts += [task_part("4", m, mt_dataset(d, sizes), mt_out(out, m, d, sizes), sizes)
                  for m in mt_models for d in MT_SETS]
    return parts

