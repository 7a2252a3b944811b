"""The paper's tables (2, 3 and 4) as markdown, from one or more task reports (see report.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Report = dict[str, Any]

# The methods as the paper's tables name them, in its column order.
METHOD_COLUMNS = {"canonical": "Canon", "proxy": "Proxy", "lattice": "Lattice", "beam": "Beam"}
SETUP = ["model", "dataset", "k"]
SPEEDUP = "speedup (proxy s / lattice s)"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str) -> list[str]:
    """A markdown table's lines; align has one letter per column, 'l' (left) or 'r' (right)."""
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(map(str, row)) + " |" for row in rows)]


def _section(title: str, header: Sequence[str], rows: Iterable[Sequence[Any]], align: str) -> list[str]:
    return [f"### {title}", "", *markdown_table(header, rows, align)]


def _setup(r: Report) -> list[Any]:
    return [r["model"], r["dataset"], r["samples"]]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _speed(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _underestimation_rows(reports: Sequence[Report], distinct: bool) -> list[list[Any]]:
    rows = []
    for r in reports:
        row = [*_setup(r), r["compared"], r["underestimated"], _pct(r.get("underestimation_ratio"))]
        if distinct:
            row.append("-" if r.get("lattice_distinct_mean") is None
                       else f"{r['lattice_distinct_mean']:.1f} / {r['proxy_distinct_mean']:.1f}")
        rows.append(row)
    return rows


def _timing(reports: Sequence[Report]) -> list[str]:
    def row(r: Report) -> list[Any]:
        def get(m: str, key: str) -> str:
            v = r.get("timing", {}).get(m, {}).get(key)
            return "-" if v is None else f"{v:.2f}"

        seconds = [get(m, "seconds") for m in ("canonical", "lattice", "proxy")]
        per_answer = [get(m, "mean_seconds") for m in ("lattice", "proxy")]
        return [*_setup(r), *seconds, *per_answer, f"{r.get('wall_seconds', 0):.0f}"]

    header = [*SETUP, "canonical s", "lattice s", "proxy s", "lattice s / answer", "proxy s / answer", "wall s"]
    return _section("Time (seconds)", header, map(row, reports), "llrrrrrrr")


def qa_markdown(reports: Sequence[Report]) -> str:
    """Table 2 (acc and acc_norm), Table 3 and timings for one or more Q&A reports."""
    accuracy = [
        [*_setup(r), r["questions"], metric,
         *[_pct(r["accuracy"].get(m, {}).get(metric)) for m in METHOD_COLUMNS], _speed(r.get("speedup"))]
        for r in reports for metric in ("acc", "acc_norm")
    ]
    lines = _section("Q&A accuracy (%), Table 2",
                     [*SETUP, "questions", "metric", *METHOD_COLUMNS.values(), SPEEDUP], accuracy, "llrrlrrrr")
    lines += ["", *_section("Proxy underestimation ratio (%), Table 3",
                            [*SETUP, "answers compared", "proxy < lattice", "ratio", "mean distinct (lattice / proxy)"],
                            _underestimation_rows(reports, distinct=True), "llrrrrr")]
    return "\n".join([*lines, "", *_timing(reports)]) + "\n"


def _mt_score(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if metric == "chrf" else f"{100 * value:.1f}"


def mt_markdown(reports: Sequence[Report]) -> str:
    """Table 4 (chrF, COMET-22 where available), Table 3's translation columns and timings."""
    has_comet = any(r["metric"] == "COMET-22" for r in reports)
    lines = ["### Translation reranking, Table 4 (corpus chrF" + (" and COMET-22" if has_comet else "") + ")", ""]
    if not has_comet:
        notes = sorted({r.get("comet_note", "") for r in reports})
        lines += [f"The figures are **chrF** (sacrebleu), not COMET-22: {'; '.join(n for n in notes if n)}.", ""]
    systems = [*METHOD_COLUMNS, "first candidate"]
    scores = [
        [*_setup(r), r["sentences"], metric,
         *[_mt_score(r["scores"].get(m, {}).get(metric), metric) for m in systems], _speed(r.get("speedup"))]
        for r in reports for metric in ["chrf"] + (["comet22"] if r["metric"] == "COMET-22" else [])
    ]
    lines += markdown_table([*SETUP, "sentences", "metric", *METHOD_COLUMNS.values(), "first candidate", SPEEDUP],
                            scores, "llrrlrrrrr")
    lines += ["", *_section("Proxy underestimation ratio over candidates (%), Table 3",
                            [*SETUP, "candidates compared", "proxy < lattice", "ratio"],
                            _underestimation_rows(reports, distinct=False), "llrrrr")]
    return "\n".join([*lines, "", *_timing(reports)]) + "\n"
