"""The paper-tables section of docs/results.md: Tables 1-4 from the results folders, beside the paper's.

With how and where they were made, written between the section's markers.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.paper_tables.figures import PAPER_T1, PAPER_T2, PAPER_T3, PAPER_T4
from bench.paper_tables.runs import (
    LENGTHS,
    METHODS,
    MODELS,
    MT_SETS,
    QA_SETS,
    Part,
    Sizes,
    done_items,
    mt_out,
    qa_out,
    t1_out,
    table1_task,
    time_key,
    times_file,
)
from marginal_core.tasks.markdown import table as markdown_table

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results.md"
TEMPLATE = Path(__file__).with_name("section.md")  # the section's prose, with the tables' places
START, END = "<!-- paper-tables:start", "<!-- paper-tables:end -->"


# ------------------------------------------------------------------------------------------
# Table 1: Spearman's rho of log p and log q by sentence length


def table1_rows(out: Path, models: Sequence[str], sizes: Sizes) -> list[list[str]]:
    """Ours: mean ± sd of rho per length (n sentences with a rho), then the paper's rows."""
    from marginal_core.tasks.rank import RANK_METHODS

    task, rows = table1_task(sizes), []
    for model in models:
        folder = t1_out(out, model, sizes.t1_samples)
        done = done_items(folder, RANK_METHODS)
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
# Tables 2-4: accuracy, underestimation, chrF


def reports(models: Sequence[str], sets: Sequence[str], folder_of: Callable[[str, str], Path],
            report: Callable[[Path], dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, set) -> the report of each results folder that has finished items."""
    return {(model, name): report(folder_of(model, name)) for model in models for name in sets
            if done_items(folder_of(model, name))}


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
        t = times.get(time_key(p.table, p.model, p.out))
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

