"""The paper's tables (2, 3 and 4) as markdown, from one or more task reports (see report.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from marginal_core.tasks import markdown

Report = dict[str, Any]

# The methods as the paper's tables name them, in its column order.
METHOD_COLUMNS = {"canonical": "Canon", "proxy": "Proxy", "lattice": "Lattice", "beam": "Beam"}
SETUP = ["model", "dataset", "k"]
SPEEDUP = "speedup (proxy s / lattice s)"


def _section(title: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    return [f"### {title}", "", *markdown.table(header, rows)]


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


def _timing(reports: Sequence[Report], unit: str) -> list[str]:
    """Seconds of every method any report ran (and per scored text, the canonical pass aside)."""
    ran = {m for r in reports for m in r.get("timing", {})}
    methods = [m for m in METHOD_COLUMNS if m in ran]
    each = [m for m in methods if m != "canonical"]

    def get(r: Report, m: str, key: str) -> str:
        v = r.get("timing", {}).get(m, {}).get(key)
        return "-" if v is None else f"{v:.2f}"

    rows = [[*_setup(r), *(get(r, m, "seconds") for m in methods), *(get(r, m, "mean_seconds") for m in each),
             f"{r.get('wall_seconds', 0):.0f}"] for r in reports]
    header = [*SETUP, *(f"{m} s" for m in methods), *(f"{m} s / {unit}" for m in each), "wall s"]
    return _section("Time (seconds)", header, rows)


SHOWN_CHANGES = 30  # rows of the changed-picks table in report.md (report.json lists them all)


def _changed(reports: Sequence[Report], unit: str) -> list[str]:
    """The items whose pick differs between methods: each method's pick and its margin in nats."""
    changed = [(r, c) for r in reports for c in r.get("changed_picks", [])]
    methods = [m for m in METHOD_COLUMNS if any(m in c["picks"] for _, c in changed)]
    gold = any("gold" in c for _, c in changed)

    def pick(c: dict[str, Any], m: str) -> str:
        if m not in c["picks"]:
            return "-"
        margin = c["margins"].get(m)
        return str(c["picks"][m]) + ("" if margin is None else f" (+{margin:.2f})")

    rows = [[r["model"], r["dataset"], c["item"], *([c.get("gold", "-")] if gold else []),
             *(pick(c, m) for m in methods)] for r, c in changed[:SHOWN_CHANGES]]
    title = f"### {unit.capitalize()}s whose pick differs by method: {len(changed)}"
    if not changed:
        return [title]
    note = "Each method's pick (choice index) and, in brackets, its margin in nats over its second choice."
    header = ["model", "dataset", unit, *(["gold"] if gold else []), *(METHOD_COLUMNS[m] for m in methods)]
    more = len(changed) - SHOWN_CHANGES
    return [title, "", note, "", *markdown.table(header, rows),
            *(["", f"... and {more} more in report.json"] if more > 0 else [])]


def qa_markdown(reports: Sequence[Report]) -> str:
    """Table 2 (acc and acc_norm), Table 3 and timings for one or more Q&A reports."""
    accuracy = [
        [*_setup(r), r["questions"], metric,
         *[_pct(r["accuracy"].get(m, {}).get(metric)) for m in METHOD_COLUMNS], _speed(r.get("speedup"))]
        for r in reports for metric in ("acc", "acc_norm")
    ]
    lines = _section("Q&A accuracy (%), Table 2",
                     [*SETUP, "questions", "metric", *METHOD_COLUMNS.values(), SPEEDUP], accuracy)
    lines += ["", *_section("Proxy underestimation ratio (%), Table 3",
                            [*SETUP, "answers compared", "proxy < lattice", "ratio", "mean distinct (lattice / proxy)"],
                            _underestimation_rows(reports, distinct=True))]
    return "\n".join([*lines, "", *_changed(reports, "question"), "", *_timing(reports, "answer")]) + "\n"


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
    lines += markdown.table([*SETUP, "sentences", "metric", *METHOD_COLUMNS.values(), "first candidate", SPEEDUP],
                            scores)
    lines += ["", *_section("Proxy underestimation ratio over candidates (%), Table 3",
                            [*SETUP, "candidates compared", "proxy < lattice", "ratio"],
                            _underestimation_rows(reports, distinct=False))]
    return "\n".join([*lines, "", *_changed(reports, "sentence"), "", *_timing(reports, "candidate")]) + "\n"
