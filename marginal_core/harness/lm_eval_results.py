"""Reading an lm-eval results folder (``--output_path`` with ``--log_samples``) for the app.

lm-eval writes, under the output path and one folder per model, ``results_<time>.json`` (the
metrics and the run's configuration) and, per task, ``samples_<task>_<time>.jsonl`` (one line per
document: its requests' arguments, the responses, the per-document metrics). A run is one
timestamp. Only multiple-choice documents (loglikelihood requests sharing one context) are read
into questions; any other task is listed with its metrics only. Needs neither lm-eval nor torch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marginal_core.ground.errors import MarginalError

_RESULTS = re.compile(r"^results_(.+)\.json$")


@dataclass(frozen=True)
class Choice:
    """One answer of a question: its continuation and lm-eval's log-likelihood of it."""

    continuation: str
    loglikelihood: float

    @property
    def per_char(self) -> float:
        """lm-eval's acc_norm score: the log-likelihood per character of the answer (no delimiter)."""
        return self.loglikelihood / max(1, len(self.continuation.lstrip()))


@dataclass(frozen=True)
class HarnessQuestion:
    """One multiple-choice document of a run: its context, choices, gold index and metrics."""

    doc_id: int
    context: str
    choices: tuple[Choice, ...]
    gold: int | None
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def pick(self) -> int:
        return max(range(len(self.choices)), key=lambda i: self.choices[i].loglikelihood)

    @property
    def pick_norm(self) -> int:
        return max(range(len(self.choices)), key=lambda i: self.choices[i].per_char)


@dataclass(frozen=True)
class HarnessRun:
    """One lm-eval run (one results file) and the samples files beside it."""

    results_file: Path
    stamp: str
    model: str
    model_args: dict[str, Any]
    metrics: dict[str, dict[str, float]]
    samples: dict[str, Path]

    @property
    def label(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.model_args.items())
        return f"{self.stamp} · {self.model} {args} · {', '.join(self.metrics)}"


def find_runs(folder: str | Path) -> list[HarnessRun]:
    """Every run under an lm-eval output folder, newest first; a MarginalError that says what is
    wrong for a folder that is missing or holds no lm-eval results."""
    root = Path(str(folder).strip()).expanduser()
    if not str(folder).strip():
        raise MarginalError("give the folder lm-eval wrote (its --output_path)")
    if not root.exists():
        raise MarginalError(f"no such folder: {root}")
    if root.is_file():  # a results or samples file: its folder
        root = root.parent
    files = sorted(root.rglob("results_*.json"))
    runs = [_run(f) for f in files if _RESULTS.match(f.name)]
    if not runs:
        raise MarginalError(f"{root} holds no lm-eval results (results_*.json); run lm-eval with --output_path {root}")
    return sorted(runs, key=lambda r: r.stamp, reverse=True)


def _run(path: Path) -> HarnessRun:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        results = data["results"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise MarginalError(f"{path} is not an lm-eval results file ({type(err).__name__}: {err})") from None
    stamp = _RESULTS.match(path.name).group(1)  # type: ignore[union-attr]
    config = data.get("config") or {}
    model_args = config.get("model_args") or {}
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    metrics = {
        task: {k.split(",")[0]: v for k, v in values.items() if isinstance(v, (int, float)) and "," in k}
        for task, values in results.items()
    }
    samples = {task: f for task in results for f in path.parent.glob(f"samples_{task}_{stamp}.jsonl")}
    return HarnessRun(path, stamp, str(config.get("model", "?")), dict(model_args), metrics, samples)


def read_questions(run: HarnessRun, task: str) -> list[HarnessQuestion]:
    """The multiple-choice documents of one task of a run, in doc_id order (a MarginalError when
    the run logged no samples for it or they are not multiple-choice log-likelihoods)."""
    path = run.samples.get(task)
    if path is None:
        raise MarginalError(f"the run {run.stamp} logged no samples for {task}: rerun lm-eval with --log_samples")
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                out.append(_question(json.loads(line), f"{path.name} line {n}"))
    return sorted(out, key=lambda q: q.doc_id)


def _question(sample: dict[str, Any], where: str) -> HarnessQuestion:
    try:
        args = [a for _, a in sorted(sample["arguments"].items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))]
        contexts = {a["arg_0"] for a in args}
        resps = sample["filtered_resps"]
        lls = [float(r[0] if isinstance(r, (list, tuple)) else r) for r in resps]
        continuations = [a["arg_1"] for a in args]
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise MarginalError(f"{where}: not a multiple-choice log-likelihood sample ({type(err).__name__}: {err})") from None
    if len(contexts) != 1 or not all(isinstance(c, str) for c in continuations) or len(lls) != len(continuations):
        raise MarginalError(f"{where}: not a multiple-choice sample (one context, one response per choice)")
    target = sample.get("target")
    gold = int(target) if isinstance(target, (int, str)) and str(target).lstrip("-").isdigit() else None
    metrics = {k: float(sample[k]) for k in ("acc", "acc_norm") if isinstance(sample.get(k), (int, float))}
    choices = tuple(Choice(c, v) for c, v in zip(continuations, lls))
    return HarnessQuestion(int(sample["doc_id"]), contexts.pop(), choices, gold, metrics)


def question_rows(questions: list[HarnessQuestion]) -> list[dict[str, Any]]:
    """One row per question: its context, gold answer and what acc and acc_norm picked."""
    return [
        {
            "doc_id": q.doc_id,
            "question": q.context,
            "gold": None if q.gold is None else q.choices[q.gold].continuation.strip(),
            "acc pick": q.choices[q.pick].continuation.strip(),
            "acc_norm pick": q.choices[q.pick_norm].continuation.strip(),
            **q.metrics,
        }
        for q in questions
    ]


def choice_rows(q: HarnessQuestion) -> list[dict[str, Any]]:
    """One row per answer of a question: its log-likelihood, per character, and the marks."""
    return [
        {
            "answer": c.continuation,
            "log-likelihood": c.loglikelihood,
            "per char": c.per_char,
            "gold": i == q.gold,
            "acc pick": i == q.pick,
            "acc_norm pick": i == q.pick_norm,
        }
        for i, c in enumerate(q.choices)
    ]
