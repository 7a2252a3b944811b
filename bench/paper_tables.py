"""The paper's Tables 1-4 regenerated on the embedded models, beside the paper's figures.

`make paper-tables` (or `python -m bench.paper_tables`) runs what its results folders lack,
then rewrites the section of docs/results.md between the paper-tables markers:

* Table 1: Spearman's rho of log p and log q over the distinct proxy samples of each sentence,
  mean and standard deviation by sentence length (about 50, 100 and 300 characters);
* Tables 2 and 3: the Q&A runs of `marginal eval-qa` (canonical, proxy, lattice and beam) on
  OpenBookQA, MedMCQA and ARC-Challenge: accuracy, speedup, proxy underestimation;
* Tables 4 and 3: the translation runs of `marginal eval-mt` (en-de, en-cs): chrF, speedup,
  proxy underestimation over the candidates.

Every run resumes (the task folders keep finished items, Table 1 keeps finished sentences in a
JSON-lines file), so Ctrl-C keeps what is done and a rerun only adds what is missing. The
default sizes take about an hour of one-thread CPU time (--dry-run prints the plan); --full
takes the paper's sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from marginal_core.cache import cache_root
from marginal_core.markdown import table as markdown_table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results.md"
TEMPLATE = Path(__file__).with_suffix(".md")  # the section's prose, with the tables' places
START, END = "<!-- paper-tables:start", "<!-- paper-tables:end -->"
MODELS = ("smollm2-135m", "gemma3-270m")
QA_SETS = {"openbookqa": "Book", "medmcqa": "Med", "arc-challenge": "Arc"}
MT_SETS = {"en-de": "En→De", "en-cs": "En→Cs"}
LENGTHS = (50, 100, 300)
SENTENCE_SOURCE = "arc-challenge"  # Table 1's sentences: ARC-Challenge test question texts
METHODS = ("canonical", "proxy", "lattice", "beam")

# ------------------------------------------------------------------------------------------
# The paper's figures (decoding-free-marginalization.tex, Tables 1-4)

PAPER_T1 = {  # model -> (mean, sd) of rho at |s| ~ 50, 100, 300
    "Llama2-7b": ((0.70, 0.16), (0.66, 0.10), (0.75, 0.11)),
    "Llama2-13b": ((0.64, 0.15), (0.68, 0.11), (0.76, 0.09)),
    "Gemma3-1b": ((0.69, 0.17), (0.63, 0.14), (0.65, 0.12)),
    "Gemma3-4b": ((0.71, 0.19), (0.58, 0.13), (0.58, 0.11)),
    "Gemma3-12b": ((0.80, 0.13), (0.70, 0.12), (0.64, 0.09)),
}
PAPER_T2 = {  # (model, dataset) -> (canon, proxy, lattice, speedup)
    ("Llama2-7b", "Book"): (49.8, 48.1, 47.3, 3.8), ("Llama2-7b", "Med"): (29.0, 31.7, 31.3, 4.8),
    ("Llama2-7b", "Arc"): (51.5, 49.0, 47.1, 4.5), ("Llama2-13b", "Book"): (63.7, 61.6, 59.6, 8.4),
    ("Llama2-13b", "Med"): (36.6, 40.7, 39.0, 8.6), ("Llama2-13b", "Arc"): (68.6, 65.3, 61.9, 5.4),
    ("Gemma3-1b", "Book"): (38.8, 32.4, 42.4, 3.3), ("Gemma3-1b", "Med"): (32.4, 29.8, 31.9, 2.4),
    ("Gemma3-1b", "Arc"): (47.7, 36.9, 38.2, 1.4), ("Gemma3-4b", "Book"): (67.8, 32.2, 52.9, 6.2),
    ("Gemma3-4b", "Med"): (46.4, 29.9, 37.3, 7.6), ("Gemma3-4b", "Arc"): (78.3, 39.5, 61.5, 7.5),
    ("Gemma3-27b", "Book"): (84.0, 46.0, 67.5, 36.5), ("Gemma3-27b", "Med"): (67.9, 43.4, 51.9, 30.2),
    ("Gemma3-27b", "Arc"): (93.4, 52.8, 81.1, 22.9),
}
PAPER_T3 = {  # model -> underestimation ratio (%) on Book, Med, Arc, En→De, En→Cs
    "Llama2-7b": (72.3, 76.7, 74.2, None, None), "Llama2-13b": (74.8, 69.1, 72.2, None, None),
    "Gemma3-1b": (76.3, 73.3, 82.8, 52.2, 62.3), "Gemma3-4b": (76.0, 78.8, 82.8, 72.4, 58.3),
    "Gemma3-27b": (76.4, 78.5, 78.1, 72.4, 74.0),
}
PAPER_T4 = {  # (model, direction) -> COMET-22 (canon, proxy, lattice, speedup)
    ("Gemma3-1b", "En→De"): (73.0, 72.7, 73.0, 2.1), ("Gemma3-4b", "En→De"): (80.8, 81.3, 81.2, 2.9),
    ("Gemma3-27b", "En→De"): (84.0, 84.3, 84.0, 9.8), ("Gemma3-1b", "En→Cs"): (65.8, 66.1, 66.8, 2.2),
    ("Gemma3-4b", "En→Cs"): (86.3, 86.2, 86.3, 3.1), ("Gemma3-27b", "En→Cs"): (88.3, 88.1, 88.2, 10.0),
}


# ------------------------------------------------------------------------------------------
# Sizes and the plan


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
# Table 1: Spearman's rho of log p and log q by sentence length


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
    done = _done_items(folder, ("proxy",))
    todo = [s for s in task.sentences if s.id not in done]
    seconds = sum(unit_seconds(model)["t1"][s.length] for s in todo) * _k_scale(sizes.t1_samples)
    options = rank_options(sizes.t1_samples, model=model, dtype="float32")

    def run(lm: Any) -> None:
        evaluate(task, folder, options, lm=lm)

    return Part("1", model, SENTENCE_SOURCE, folder, len(todo), len(task.sentences), seconds, run)


def times_file(out: Path) -> Path:
    return out / "times.json"


def _key(table: str, model: str, folder: Path) -> str:
    return f"{table} {model} {folder.name}"


def log_time(out: Path, part: Part, wall: float, cpu: float) -> None:
    """Add a session's wall and CPU seconds (this process, every thread) to its part's totals."""
    path = times_file(out)
    times = json.loads(path.read_text()) if path.is_file() else {}
    old = times.get(_key(part.table, part.model, part.out), {"wall": 0.0, "cpu": 0.0})
    times[_key(part.table, part.model, part.out)] = {"wall": round(old["wall"] + wall, 1),
                                                     "cpu": round(old["cpu"] + cpu, 1)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(times, indent=1) + "\n")


def table1_rows(out: Path, models: Sequence[str], sizes: Sizes) -> list[list[str]]:
    """Ours: mean ± sd of rho per length (n sentences with a rho), then the paper's rows."""
    from marginal_core.tasks.rank import METHODS as RANK_METHODS

    task, rows = table1_task(sizes), []
    for model in models:
        folder = t1_out(out, model, sizes.t1_samples)
        done = _done_items(folder, RANK_METHODS)
        if not done:
            continue
        by_length = {r["length"]: r for r in task.report(folder, sorted(done), RANK_METHODS)["by_length"]}
        cells = ["-" if target not in by_length or not by_length[target]["with_rho"] else
                 f"{by_length[target]['rho']} (n={by_length[target]['with_rho']}, "
                 f"{by_length[target]['distinct']:.0f} distinct)" for target in LENGTHS]
        rows.append([f"**{model}** (ours, k={sizes.t1_samples})", *cells])
    rows += [[f"{m} (paper, 1000 distinct)", *(f"{a:.2f} ± {b:.2f}" for a, b in v)] for m, v in PAPER_T1.items()]
    return rows


# ------------------------------------------------------------------------------------------
# Tables 2-4: the task folders


def qa_out(out: Path, model: str, dataset: str, sizes: Sizes) -> Path:
    return out / "qa" / f"{dataset}-{model}-k{sizes.qa_samples}"


def mt_dataset(direction: str, sizes: Sizes) -> str:
    return direction if sizes.mt_data == "packaged" else f"wmt24pp:{direction}"


def mt_out(out: Path, model: str, direction: str, sizes: Sizes) -> Path:
    return out / "mt" / f"{sizes.mt_data}-{direction}-{model}-k{sizes.mt_samples}-c{sizes.candidates}"


def _done_items(folder: Path, methods: Sequence[str] = METHODS) -> set[str]:
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
    todo = max(0, n - len(_done_items(folder)))
    seconds = todo * unit_seconds(model)["qa" if qa else "mt"] * _k_scale(samples)
    options = EvalOptions(model=model, samples=samples, methods=METHODS, seed=0, limit=n,
                          dtype="float32", beam_width=sizes.beam_width)

    def run(lm: Any) -> None:
        task = QATask(dataset, shuffle=True) if qa else MTTask(dataset, sizes.candidates, comet=False)
        evaluate(task, folder, options, lm=lm)

    return Part(table, model, dataset, folder, todo, n, seconds, run)


def reports(models: Sequence[str], sets: Sequence[str], folder_of: Callable[[str, str], Path],
            report: Callable[[Path], dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, set) -> the report of each results folder that has finished items."""
    return {(model, name): report(folder_of(model, name)) for model in models for name in sets
            if _done_items(folder_of(model, name))}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}×"


def _bold_best(cells: list[str], among: Sequence[int]) -> list[str]:
    """Bold the highest of the cells at the given positions (the paper bolds proxy vs lattice)."""
    values = {i: float(cells[i]) for i in among if cells[i] not in ("-", "")}
    if len(values) < 2:
        return cells
    best = max(values.values())
    return [f"**{c}**" if i in values and values[i] == best else c for i, c in enumerate(cells)]


def table2_rows(reports: dict[tuple[str, str], dict[str, Any]]) -> list[list[str]]:
    rows = []
    for (model, dataset), r in reports.items():
        acc = r["accuracy"]
        cells = [_pct(acc.get(m, {}).get("acc")) for m in METHODS]
        cells = _bold_best(cells, (1, 2))
        rows.append([f"**{model}** (ours)", QA_SETS[dataset], str(r["questions"]), *cells, _x(r.get("speedup"))])
    for (model, dataset), (c, p, lat, s) in PAPER_T2.items():
        cells = _bold_best([f"{c:.1f}", f"{p:.1f}", f"{lat:.1f}", "-"], (1, 2))
        rows.append([f"{model} (paper)", dataset, "250", *cells, _x(s)])
    return rows


def table3_rows(qa: dict[tuple[str, str], dict[str, Any]], mt: dict[tuple[str, str], dict[str, Any]],
                models: Sequence[str]) -> list[list[str]]:
    rows = []
    for model in models:
        cells = []
        for dataset in QA_SETS:
            r = qa.get((model, dataset))
            cells.append("-" if r is None else f"{_pct(r.get('underestimation_ratio'))} ({r['compared']})")
        for direction in MT_SETS:
            r = mt.get((model, direction))
            cells.append("-" if r is None else f"{_pct(r.get('underestimation_ratio'))} ({r['compared']})")
        if any(c != "-" for c in cells):
            rows.append([f"**{model}** (ours)", *cells])
    rows += [[f"{m} (paper)", *("-" if v is None else f"{v:.1f}" for v in vals)] for m, vals in PAPER_T3.items()]
    return rows


def table4_rows(reports: dict[tuple[str, str], dict[str, Any]]) -> list[list[str]]:
    rows = []
    for direction, label in MT_SETS.items():
        for (model, d), r in reports.items():
            if d != direction:
                continue
            scores = r["scores"]
            cells = [("-" if scores.get(m, {}).get("chrf") is None else f"{scores[m]['chrf']:.1f}") for m in METHODS]
            cells = _bold_best(cells, (1, 2))
            first = scores.get("first candidate", {}).get("chrf")
            rows.append([label, f"**{model}** (ours)", "chrF", str(r["sentences"]), *cells,
                         "-" if first is None else f"{first:.1f}", _x(r.get("speedup"))])
        for (model, d), (c, p, lat, s) in PAPER_T4.items():
            if d == label:
                cells = _bold_best([f"{c:.1f}", f"{p:.1f}", f"{lat:.1f}", "-"], (1, 2))
                rows.append([label, f"{model} (paper)", "COMET-22", "150", *cells, "-", _x(s)])
    return rows


# ------------------------------------------------------------------------------------------
# The section


def machine() -> str:
    """CPU model, cores and memory of this machine, in words."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(x.split()[1]) for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal"))
        memory = f", {mem / 2**20:.0f} GiB"
    except (OSError, StopIteration):
        memory = ""
    return f"{cpu}, {os.cpu_count()} cores{memory}"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def walls(out: Path, parts: Sequence[Part]) -> list[list[str]]:
    """Wall and CPU time of each part, summed over every session that worked on it."""
    path = times_file(out)
    times = json.loads(path.read_text()) if path.is_file() else {}
    rows = []
    for p in parts:
        t = times.get(_key(p.table, p.model, p.out))
        if t:
            rows.append([p.table, p.model, p.dataset, f"{p.total - p.todo} of {p.total}",
                         _minutes(t["wall"]), _minutes(t["cpu"])])
    return rows


def section(out: Path, models: Sequence[str], mt_models: Sequence[str], sizes: Sizes, run_info: dict[str, Any],
            parts: Sequence[Part]) -> str:
    """The markdown between the markers: how it was made, then Tables 1-4 beside the paper."""
    from marginal_core.tasks.report import mt_report, qa_report

    qa = reports(models, QA_SETS, lambda m, d: qa_out(out, m, d, sizes), lambda f: qa_report(f, methods=METHODS))
    mt = reports(mt_models, MT_SETS, lambda m, d: mt_out(out, m, d, sizes),
                 lambda f: mt_report(f, methods=METHODS, comet=False))
    header = (("Rendered from the results folders by" if run_info["render_only"] else "Command:")
              + f" `{run_info['command']}` (commit {commit()}), on {machine()}, {run_info['threads']}, "
              f"{run_info['date']}; load average {run_info['load_start']:.1f} at the start, "
              f"{run_info['load_end']:.1f} at the end and {run_info['load_max']:.1f} at most between parts (the "
              f"machine was shared with other work); this invocation took {run_info['wall'] / 60:.1f} min."
              + _unfinished(parts))
    mt_data = ("Data: the packaged en-de / en-cs sets (30 general-domain English sentences with references written "
               "for this project, not WMT24++), the first ones in file order." if sizes.mt_data == "packaged"
               else "Data: WMT24++ through Hugging Face `datasets`.")
    return TEMPLATE.read_text(encoding="utf-8").format(
        header=header, mt_data=mt_data, folders=_shown(out), point=f"{100 / max(1, sizes.qa_questions):.0f}",
        t1_sentences=sizes.t1_sentences, t1_samples=sizes.t1_samples, qa_questions=sizes.qa_questions,
        qa_samples=sizes.qa_samples, mt_sentences=sizes.mt_sentences, candidates=sizes.candidates,
        mt_samples=sizes.mt_samples, beam_width=sizes.beam_width,
        table1="\n".join(markdown_table(["model", "≈ 50 characters", "≈ 100 characters", "≈ 300 characters"],
                                        table1_rows(out, models, sizes))),
        table2="\n".join(markdown_table(["model", "dataset", "questions", "Canon", "Proxy", "Lattice", "Beam",
                                         "speedup"], table2_rows(qa))),
        table3="\n".join(markdown_table(["model", "Book", "Med", "Arc", "En→De", "En→Cs"],
                                        table3_rows(qa, mt, sorted(set(models) | set(mt_models),
                                                                   key=list(MODELS).index)))),
        table4="\n".join(markdown_table(["direction", "model", "metric", "sentences", "Canon", "Proxy", "Lattice",
                                         "Beam", "first", "speedup"], table4_rows(mt))),
        times="\n".join(markdown_table(["table", "model", "data", "done", "wall", "CPU"], walls(out, parts))),
    ).rstrip("\n")


def _unfinished(parts: Sequence[Part]) -> str:
    """A sentence saying how much of the plan is missing, if any."""
    left, total = sum(p.todo for p in parts), sum(p.total for p in parts)
    return "" if not left else (f" **Unfinished:** {total - left} of {total} planned items are done; the tables "
                                "show those (rerun the command to finish).")


def _shown(out: Path) -> str:
    home = str(Path.home())
    return str(out).replace(home, "~", 1) if str(out).startswith(home) else str(out)


def write_section(body: str, path: Path = RESULTS) -> None:
    """Replace what lies between the paper-tables markers of docs/results.md (nothing else)."""
    text = path.read_text(encoding="utf-8")
    start = text.find(START)
    end = text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{path} lacks the paper-tables markers")
    head = text[: text.index("\n", start) + 1]
    path.write_text(head + body.strip() + "\n" + text[end:], encoding="utf-8")


# ------------------------------------------------------------------------------------------
# The run


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


def print_plan(parts: Sequence[Part], sizes: Sizes) -> None:
    print(f"sizes: {json.dumps(asdict(sizes))}")
    for p in parts:
        print(f"  table {p.table:<2} {p.model:<14} {p.dataset:<14} {p.todo:>4} of {p.total:<4} to run, "
              f"about {p.seconds / 60:5.1f} min")
    print(f"estimated: {sum(p.seconds for p in parts) / 60:.0f} min of one-thread CPU time, about the wall time "
          f"on a quiet machine (load now {os.getloadavg()[0]:.1f})", flush=True)


def run_parts(out: Path, parts: Sequence[Part], loads: list[float]) -> bool:
    """Run the parts that have work left, each model loaded once, noting the load average after
    each; False when stopped."""
    from marginal_core.models import load_model

    loaded: dict[str, Any] = {}
    try:
        for p in parts:
            if not p.todo:
                continue
            if p.model not in loaded:  # both embedded models fit in memory together
                loaded[p.model] = load_model(p.model, dtype="float32")
            print(f"table {p.table} {p.model} {p.dataset}: {p.todo} to run", file=sys.stderr, flush=True)
            wall, cpu = time.time(), time.process_time()
            try:
                p.run(loaded[p.model])
            finally:
                log_time(out, p, time.time() - wall, time.process_time() - cpu)
            loads.append(os.getloadavg()[0])
    except KeyboardInterrupt:
        print("\nstopped: the finished items are kept; writing the tables from them", file=sys.stderr)
        return False
    return True


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--full", action="store_true", help="the paper's sizes (days on a CPU)")
    p.add_argument("--models", default=",".join(MODELS), help="models of Tables 1-3 (default: both embedded)")
    p.add_argument("--mt-models", default="gemma3-270m", help="models of Table 4 (default: gemma3-270m, as the paper)")
    p.add_argument("--tables", default="1,2,4", help="tables to run: 1, 2 (with 3), 4 (with 3) (default: all)")
    p.add_argument("--out", type=Path, default=cache_root() / "runs" / "paper-tables",
                   help="results folders (default: $MARGINAL_CACHE/runs/paper-tables)")
    p.add_argument("--results", type=Path, default=RESULTS, help="the markdown file with the markers")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--render-only", action="store_true", help="write the tables from what exists, run nothing")
    for field in ("t1_sentences", "t1_samples", "qa_questions", "qa_samples", "mt_sentences", "mt_samples"):
        p.add_argument("--" + field.replace("_", "-"), type=int, help=f"override the size {field}")
    return p.parse_args(argv)


def _torch_threads() -> str:
    """Torch's intra-op threads, in words ('not loaded' when nothing ran)."""
    torch = sys.modules.get("torch")
    return "torch not loaded" if torch is None else f"{torch.get_num_threads()} torch threads"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # a kill stops like Ctrl-C: the tables are still written
    sizes = FULL if args.full else DEFAULT
    sizes = replace(sizes, **{f: getattr(args, f) for f in ("t1_sentences", "t1_samples", "qa_questions",
                                                             "qa_samples", "mt_sentences", "mt_samples")
                              if getattr(args, f) is not None})
    models = [m for m in args.models.split(",") if m]
    mt_models = [m for m in args.mt_models.split(",") if m]
    tables = set(args.tables.split(","))
    command = "python -m bench.paper_tables" + ("" if argv is None and len(sys.argv) == 1 else
                                                " " + " ".join(sys.argv[1:] if argv is None else argv))
    started, load_start = time.time(), os.getloadavg()[0]
    parts = plan(args.out, models, mt_models, sizes, tables)
    print_plan(parts, sizes)
    if args.dry_run:
        return 0
    loads = [load_start]
    if not args.render_only:
        run_parts(args.out, parts, loads)
    loads.append(os.getloadavg()[0])
    info = {"threads": _torch_threads(), "render_only": args.render_only, "command": command,
            "date": date.today().isoformat(), "load_start": load_start, "load_end": loads[-1], "load_max": max(loads),
            "wall": time.time() - started}
    parts = plan(args.out, models, mt_models, sizes, tables)  # again, for what is now done
    write_section(section(args.out, models, mt_models, sizes, info, parts), args.results)
    print(f"wrote the paper-tables section of {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
