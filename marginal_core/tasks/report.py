"""Tables of the downstream experiments (paper Tables 2, 3 and 4) from results folders.

* Q&A (Table 2): accuracy of each method (argmax of the log marginal, ``acc``; and of the log
  marginal per UTF-8 byte of the answer continuation, ``acc_norm``), and the speedup of lattice
  over proxy = total proxy seconds / total lattice seconds over the answers scored by both.
* Translation (Table 4): corpus chrF (sacrebleu) of the candidate each method ranks first, and
  COMET-22 when ``unbabel-comet`` and its model are available; the same speedup.
* Underestimation (Table 3): the share of answers / candidates whose proxy estimate of the
  non-canonical marginal lies strictly below the lattice lower bound (same k for both).

Only questions (sentences) that every requested method finished count, so all methods are
compared on the same items. ``python -m marginal_core.tasks.report DIR [DIR ...]`` prints the
combined tables of several folders (one row per model and dataset).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from marginal_core.errors import MarginalError
from marginal_core.tasks.common import TASK_METHODS
from marginal_core.tasks.store import read_config, read_sessions

NUMERIC = [
    "log_marginal", "log_p_canonical", "log_noncanonical", "num_samples", "num_distinct",
    "seconds", "forward_passes", "num_bytes", "num_tokens_canonical",
]
LABELS = {"canonical": "Canon", "proxy": "Proxy", "lattice": "Lattice"}


def load_rows(out: str | Path) -> pd.DataFrame:
    """rows.csv of a results folder with numbers parsed (-inf kept), de-duplicated on its key."""
    path = Path(out) / "rows.csv"
    if not path.is_file():
        raise MarginalError(f"{out} has no rows.csv")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in NUMERIC:
        if col in frame:
            frame[col] = pd.to_numeric(frame[col].replace("", "nan"), errors="coerce")
    for col in ("choice", "gold", "question_index", "sentence_index"):
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Int64")
    return frame.drop_duplicates(["item", "choice", "method"], keep="last").reset_index(drop=True)


def _f(x: Any) -> float | None:
    """A JSON-able float (None for NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else (None if math.isnan(x) else x)


def _methods_present(rows: pd.DataFrame, methods: Sequence[str] | None) -> list[str]:
    have = set(rows["method"]) if len(rows) else set()
    order = list(methods) if methods else list(TASK_METHODS)
    return [m for m in order if m in have]


def _complete_items(rows: pd.DataFrame, methods: Sequence[str], items: Sequence[str] | None) -> list[str]:
    """Items that every method scored (rows of an item and method are written together)."""
    if not len(rows) or not methods:
        return []
    per = [set(rows.loc[rows["method"] == m, "item"]) for m in methods]
    common = set.intersection(*per)
    order = list(items) if items is not None else list(dict.fromkeys(rows["item"]))
    return [i for i in order if i in common]


def speedup_and_underestimation(rows: pd.DataFrame) -> dict[str, Any]:
    """Lattice-over-proxy speedup and the proxy underestimation ratio over the shared choices."""
    lat = rows[rows["method"] == "lattice"].set_index(["item", "choice"])
    prx = rows[rows["method"] == "proxy"].set_index(["item", "choice"])
    both = lat.index.intersection(prx.index)
    out: dict[str, Any] = {"compared": int(len(both))}
    if not len(both):
        return {**out, "speedup": None, "underestimated": 0, "underestimation_ratio": None,
                "lattice_seconds": None, "proxy_seconds": None, "ties": 0}
    lat, prx = lat.loc[both], prx.loc[both]
    lat_s, prx_s = float(lat["seconds"].sum()), float(prx["seconds"].sum())
    under = prx["log_noncanonical"].to_numpy() < lat["log_noncanonical"].to_numpy()
    ties = prx["log_noncanonical"].to_numpy() == lat["log_noncanonical"].to_numpy()
    return {
        **out,
        "lattice_seconds": round(lat_s, 3),
        "proxy_seconds": round(prx_s, 3),
        "speedup": _f(prx_s / lat_s) if lat_s > 0 else None,
        "underestimated": int(under.sum()),
        "ties": int(ties.sum()),
        "underestimation_ratio": _f(under.mean()),
        "lattice_distinct_mean": _f(lat["num_distinct"].mean()),
        "proxy_distinct_mean": _f(prx["num_distinct"].mean()),
    }


def _timing(rows: pd.DataFrame, methods: Sequence[str]) -> dict[str, Any]:
    out = {}
    for m in methods:
        part = rows[rows["method"] == m]
        out[m] = {
            "seconds": round(float(part["seconds"].sum()), 3),
            "mean_seconds": _f(part["seconds"].mean()) if len(part) else None,
            "forward_passes": int(part["forward_passes"].sum()),
            "rows": int(len(part)),
        }
    return out


def _wall(out: str | Path) -> float:
    return round(sum(s.get("wall_seconds", 0.0) for s in read_sessions(out)), 3)


# --------------------------------------------------------------------------------------------
# Q&A


def qa_accuracy(rows: pd.DataFrame, method: str, items: Sequence[str]) -> dict[str, Any]:
    """acc and acc_norm (per byte) of one method over the given questions."""
    part = rows[(rows["method"] == method) & rows["item"].isin(set(items))]
    if not len(part):
        return {"acc": None, "acc_norm": None, "questions": 0}
    part = part.assign(per_byte=part["log_marginal"] / part["num_bytes"])
    acc, acc_norm = [], []
    for _, group in part.sort_values("choice").groupby("item", sort=False):
        gold = int(group["gold"].iloc[0])
        choices = group["choice"].to_numpy()
        acc.append(int(choices[int(np.argmax(group["log_marginal"].to_numpy()))]) == gold)
        acc_norm.append(int(choices[int(np.argmax(group["per_byte"].to_numpy()))]) == gold)
    return {"acc": _f(np.mean(acc)), "acc_norm": _f(np.mean(acc_norm)), "questions": len(acc)}


def per_question(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (question, method): the chosen answer by acc and acc_norm and correctness."""
    out = []
    for (item, method), group in rows.sort_values("choice").groupby(["item", "method"], sort=False):
        choices = group["choice"].to_numpy()
        pick = int(choices[int(np.argmax(group["log_marginal"].to_numpy()))])
        pick_norm = int(choices[int(np.argmax((group["log_marginal"] / group["num_bytes"]).to_numpy()))])
        gold = int(group["gold"].iloc[0])
        out.append({"item": item, "method": method, "gold": gold, "pick": pick, "correct": pick == gold,
                    "pick_norm": pick_norm, "correct_norm": pick_norm == gold})
    return pd.DataFrame(out)


def qa_report(out: str | Path, questions: Sequence[str] | None = None,
              methods: Sequence[str] | None = None) -> dict[str, Any]:
    """The Q&A figures of a results folder (restricted to the given question ids and methods)."""
    config = read_config(out)
    rows = load_rows(out)
    if questions is not None:
        rows = rows[rows["item"].isin(set(questions))]
    methods = _methods_present(rows, methods)
    items = _complete_items(rows, methods, questions)
    rows = rows[rows["item"].isin(set(items))]
    report = {
        "task": "qa",
        "out": str(out),
        "dataset": config.get("dataset"),
        "model": config.get("model"),
        "samples": config.get("samples"),
        "seed": config.get("seed"),
        "methods": methods,
        "questions": len(items),
        "answers": int(rows.drop_duplicates(["item", "choice"]).shape[0]),
        "accuracy": {m: qa_accuracy(rows, m, items) for m in methods},
        **speedup_and_underestimation(rows),
        "timing": _timing(rows, methods),
        "wall_seconds": _wall(out),
    }
    report["markdown"] = qa_markdown([report])
    return report


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _speed(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def qa_markdown(reports: Sequence[dict[str, Any]]) -> str:
    """Table 2 (acc and acc_norm), Table 3 and timings for one or more Q&A reports."""
    lines = ["### Q&A accuracy (%), Table 2", "",
             "| model | dataset | k | questions | metric | Canon | Proxy | Lattice | speedup (proxy s / lattice s) |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in reports:
        for metric in ("acc", "acc_norm"):
            vals = [_pct(r["accuracy"].get(m, {}).get(metric)) for m in ("canonical", "proxy", "lattice")]
            lines.append(f"| {r['model']} | {r['dataset']} | {r['samples']} | {r['questions']} | {metric} | "
                         + " | ".join(vals) + f" | {_speed(r.get('speedup'))} |")
    lines += ["", "### Proxy underestimation ratio (%), Table 3", "",
              "| model | dataset | k | answers compared | proxy < lattice | ratio | mean distinct (lattice / proxy) |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for r in reports:
        distinct = "-" if r.get("lattice_distinct_mean") is None else (
            f"{r['lattice_distinct_mean']:.1f} / {r['proxy_distinct_mean']:.1f}")
        lines.append(f"| {r['model']} | {r['dataset']} | {r['samples']} | {r['compared']} | "
                     f"{r['underestimated']} | {_pct(r.get('underestimation_ratio'))} | {distinct} |")
    lines += _timing_markdown(reports)
    return "\n".join(lines) + "\n"


def _timing_markdown(reports: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["", "### Time (seconds)", "",
             "| model | dataset | k | canonical s | lattice s | proxy s | lattice s / answer | proxy s / answer | wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in reports:
        t = r.get("timing", {})
        def get(m: str, key: str) -> str:
            v = t.get(m, {}).get(key)
            return "-" if v is None else f"{v:.2f}"
        lines.append(f"| {r['model']} | {r['dataset']} | {r['samples']} | {get('canonical', 'seconds')} | "
                     f"{get('lattice', 'seconds')} | {get('proxy', 'seconds')} | {get('lattice', 'mean_seconds')} | "
                     f"{get('proxy', 'mean_seconds')} | {r.get('wall_seconds', 0):.0f} |")
    return lines


# --------------------------------------------------------------------------------------------
# Translation


def mt_selection(rows: pd.DataFrame, items: Sequence[str], method: str) -> dict[str, int]:
    """The candidate index each method ranks first (highest log marginal), per sentence."""
    part = rows[(rows["method"] == method) & rows["item"].isin(set(items))].sort_values("choice")
    return {item: int(g["choice"].to_numpy()[int(np.argmax(g["log_marginal"].to_numpy()))])
            for item, g in part.groupby("item", sort=False)}


@functools.lru_cache(maxsize=1)
def _comet_model():  # pragma: no cover - needs unbabel-comet and its model
    from comet import download_model, load_from_checkpoint

    return load_from_checkpoint(download_model("Unbabel/wmt22-comet-da"))


def comet22(sources: list[str], hyps: list[str], refs: list[str]) -> tuple[float | None, str]:
    """COMET-22 system score, or None and why not (unbabel-comet or its model missing)."""
    import importlib.util

    if importlib.util.find_spec("comet") is None:
        return None, "unbabel-comet is not installed"
    try:  # pragma: no cover - needs the package and the model
        model = _comet_model()
        data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(sources, hyps, refs)]
        result = model.predict(data, batch_size=8, gpus=0, progress_bar=False)
        return float(result.system_score), "Unbabel/wmt22-comet-da"
    except Exception as err:  # pragma: no cover
        return None, f"COMET-22 model unavailable ({' '.join(str(err).split())[:160]})"


def mt_report(out: str | Path, sentences: Sequence[str] | None = None,
              methods: Sequence[str] | None = None, comet: bool = True) -> dict[str, Any]:
    """The translation figures of a results folder: chrF (and COMET-22) per method."""
    import sacrebleu

    from marginal_core.tasks.store import ResultStore  # noqa: F401  (folder layout documented there)

    config = read_config(out)
    rows = load_rows(out)
    items_meta = {}
    items_path = Path(out) / "items.jsonl"
    if items_path.is_file():
        for line in items_path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            items_meta[rec["item"]] = rec
    if sentences is not None:
        rows = rows[rows["item"].isin(set(sentences))]
    methods = _methods_present(rows, methods)
    items = [i for i in _complete_items(rows, methods, sentences) if i in items_meta]
    rows = rows[rows["item"].isin(set(items))]
    refs = [items_meta[i]["reference"] for i in items]
    srcs = [items_meta[i]["source"] for i in items]
    systems: dict[str, list[str]] = {}
    for m in methods:
        pick = mt_selection(rows, items, m)
        systems[m] = [items_meta[i]["candidates"][pick[i]] for i in items]
    if items:
        systems["first candidate"] = [items_meta[i]["candidates"][0] for i in items]
    scores: dict[str, dict[str, Any]] = {}
    comet_note = "COMET-22 not computed"
    use_comet = comet and bool(items)
    comet_ok = use_comet
    for name, hyps in systems.items():
        chrf = sacrebleu.corpus_chrf(hyps, [refs]).score if items else None
        entry = {"chrf": _f(chrf)}
        if comet_ok:
            value, comet_note = comet22(srcs, hyps, refs)
            comet_ok = value is not None
            entry["comet22"] = value
        scores[name] = entry
    agree = None
    if "lattice" in systems and "canonical" in systems and items:
        agree = _f(np.mean([a == b for a, b in zip(systems["lattice"], systems["canonical"])]))
    report = {
        "task": "mt",
        "out": str(out),
        "dataset": config.get("dataset"),
        "model": config.get("model"),
        "samples": config.get("samples"),
        "candidates": config.get("candidates"),
        "seed": config.get("seed"),
        "methods": methods,
        "sentences": len(items),
        "scored_candidates": int(rows.drop_duplicates(["item", "choice"]).shape[0]),
        "scores": scores,
        "metric": "COMET-22" if comet_ok and use_comet else "chrF",
        "comet_note": comet_note if not (comet_ok and use_comet) else "Unbabel/wmt22-comet-da",
        "lattice_canonical_same_pick": agree,
        **speedup_and_underestimation(rows),
        "timing": _timing(rows, methods),
        "wall_seconds": _wall(out),
    }
    report["markdown"] = mt_markdown([report])
    return report


def mt_markdown(reports: Sequence[dict[str, Any]]) -> str:
    """Table 4 (chrF, COMET-22 where available), Table 3's translation columns and timings."""
    has_comet = any(r["metric"] == "COMET-22" for r in reports)
    lines = ["### Translation reranking, Table 4 (corpus chrF" + (" and COMET-22" if has_comet else "") + ")", ""]
    if not has_comet:
        notes = sorted({r.get("comet_note", "") for r in reports})
        lines += [f"The figures are **chrF** (sacrebleu), not COMET-22: {'; '.join(n for n in notes if n)}.", ""]
    lines += ["| model | dataset | k | sentences | metric | Canon | Proxy | Lattice | first candidate | speedup (proxy s / lattice s) |",
              "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in reports:
        metrics = ["chrf"] + (["comet22"] if r["metric"] == "COMET-22" else [])
        for metric in metrics:
            vals = []
            for m in ("canonical", "proxy", "lattice", "first candidate"):
                v = r["scores"].get(m, {}).get(metric)
                vals.append("-" if v is None else (f"{v:.2f}" if metric == "chrf" else f"{100 * v:.1f}"))
            lines.append(f"| {r['model']} | {r['dataset']} | {r['samples']} | {r['sentences']} | {metric} | "
                         + " | ".join(vals) + f" | {_speed(r.get('speedup'))} |")
    lines += ["", "### Proxy underestimation ratio over candidates (%), Table 3", "",
              "| model | dataset | k | candidates compared | proxy < lattice | ratio |",
              "|---|---|---:|---:|---:|---:|"]
    for r in reports:
        lines.append(f"| {r['model']} | {r['dataset']} | {r['samples']} | {r['compared']} | "
                     f"{r['underestimated']} | {_pct(r.get('underestimation_ratio'))} |")
    lines += _timing_markdown(reports)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Files


def write_report(out: str | Path, report: dict[str, Any]) -> None:
    """report.md and report.json in the results folder."""
    out = Path(out)
    (out / "report.md").write_text(report["markdown"], encoding="utf-8")
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def report_folder(out: str | Path, comet: bool = True) -> dict[str, Any]:
    """The report of any results folder (Q&A or translation, read from its config)."""
    task = read_config(out).get("task")
    if task == "qa":
        return qa_report(out)
    if task == "mt":
        return mt_report(out, comet=comet)
    raise MarginalError(f"{out}: unknown task {task!r} in config.json")


def combined_markdown(folders: Sequence[str | Path], comet: bool = True) -> str:
    """The tables of several results folders side by side (Q&A first, then translation)."""
    reports = [report_folder(f, comet=comet) for f in folders]
    qa = [r for r in reports if r["task"] == "qa"]
    mt = [r for r in reports if r["task"] == "mt"]
    parts = ([qa_markdown(qa)] if qa else []) + ([mt_markdown(mt)] if mt else [])
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m marginal_core.tasks.report",
        description="Print the combined tables of eval-qa / eval-mt results folders.",
    )
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--no-comet", action="store_true", help="skip COMET-22 even where available")
    args = parser.parse_args(argv)
    try:
        print(combined_markdown(args.folders, comet=not args.no_comet))
    except MarginalError as err:
        print(f"marginal: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
