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
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from marginal_core.estimators.methods import TASK_METHODS
from marginal_core.ground.errors import MarginalError, run_cli
from marginal_core.ground.jsonsafe import json_float
from marginal_core.tasks import store
from marginal_core.tasks.report_tables import mt_markdown, qa_markdown

NUMERIC = [
    "log_marginal", "log_p_canonical", "log_noncanonical", "num_samples", "num_distinct",
    "seconds", "forward_passes", "num_bytes", "num_tokens_canonical",
]


def load_rows(out: str | Path) -> pd.DataFrame:
    """rows.csv of a results folder with numbers parsed (-inf kept), de-duplicated on its key."""
    path = Path(out) / "rows.csv"
    if not path.is_file():
        raise MarginalError(f"{out} has no rows.csv")
    data = path.read_bytes()  # complete lines: another run may be in the middle of one
    frame = pd.read_csv(io.BytesIO(data[: data.rfind(b"\n") + 1]), dtype=str, keep_default_na=False)
    for col in NUMERIC:
        if col in frame:
            frame[col] = pd.to_numeric(frame[col].replace("", "nan"), errors="coerce")
    for col in ("choice", "gold", "question_index", "sentence_index"):
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Int64")
    return frame.drop_duplicates(["item", "choice", "method"], keep="last").reset_index(drop=True)


def methods_present(rows: pd.DataFrame, methods: Sequence[str] | None) -> list[str]:
    """The methods (in the given order, else the tasks' order) that have rows."""
    have = set(rows["method"]) if len(rows) else set()
    order = list(methods) if methods else list(TASK_METHODS)
    return [m for m in order if m in have]


def complete_items(rows: pd.DataFrame, methods: Sequence[str], items: Sequence[str] | None) -> list[str]:
    """Items that every method scored (rows of an item and method are written together)."""
    if not len(rows) or not methods:
        return []
    per = [set(rows.loc[rows["method"] == m, "item"]) for m in methods]
    common = set.intersection(*per)
    order = list(items) if items is not None else list(dict.fromkeys(rows["item"]))
    return [i for i in order if i in common]


def picks(rows: pd.DataFrame, score: pd.Series | None = None) -> pd.DataFrame:
    """The row each method ranks first for each item: the highest score (default: the log
    marginal), the lowest choice among ties, NaN above all (as numpy's argmax)."""
    score = rows["log_marginal"] if score is None else score
    ranked = rows.assign(_score=score.fillna(np.inf)).sort_values("choice", kind="stable").reset_index(drop=True)
    best = ranked.groupby(["item", "method"], sort=False)["_score"].idxmax()
    return ranked.loc[best.to_numpy()].drop(columns="_score").reset_index(drop=True)


def per_question(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (question, method): the chosen answer by acc and acc_norm and correctness."""
    top = picks(rows)[["item", "method", "gold", "choice"]].rename(columns={"choice": "pick"})
    norm = picks(rows, rows["log_marginal"] / rows["num_bytes"])[["item", "method", "choice"]]
    out = top.merge(norm.rename(columns={"choice": "pick_norm"}), on=["item", "method"])
    out = out.astype({"gold": int, "pick": int, "pick_norm": int})
    out.insert(4, "correct", out["pick"] == out["gold"])
    out["correct_norm"] = out["pick_norm"] == out["gold"]
    return out


def mt_selection(rows: pd.DataFrame, items: Sequence[str], method: str) -> dict[str, int]:
    """The candidate index each method ranks first (highest log marginal), per sentence."""
    part = picks(rows[(rows["method"] == method) & rows["item"].isin(set(items))])
    return dict(zip(part["item"], map(int, part["choice"])))


def changed_picks(rows: pd.DataFrame, items: Sequence[str], methods: Sequence[str]) -> list[dict[str, Any]]:
    """The items whose first-ranked choice differs between methods: each method's pick and its
    margin (nats between its best and second-best choice; None with one choice)."""
    if len(methods) < 2 or not items:
        return []
    part = rows[rows["item"].isin(set(items)) & rows["method"].isin(set(methods))]
    best = picks(part).set_index(["item", "method"])["choice"]
    ranked = part.sort_values("log_marginal", ascending=False, kind="stable").groupby(["item", "method"])
    top2 = ranked["log_marginal"].apply(lambda s: float(s.iloc[0] - s.iloc[1]) if len(s) > 1 else None)
    out = []
    for item in items:
        chosen = {m: int(best[(item, m)]) for m in methods if (item, m) in best.index}
        if len(set(chosen.values())) > 1:
            out.append({"item": item, "picks": chosen,
                        "margins": {m: json_float(top2.get((item, m))) for m in chosen}})
    return out


def qa_accuracy(rows: pd.DataFrame, method: str, items: Sequence[str]) -> dict[str, Any]:
    """acc and acc_norm (per byte) of one method over the given questions."""
    part = rows[(rows["method"] == method) & rows["item"].isin(set(items))]
    if not len(part):
        return {"acc": None, "acc_norm": None, "questions": 0}
    got = per_question(part)
    return {"acc": json_float(got["correct"].mean()), "acc_norm": json_float(got["correct_norm"].mean()),
            "questions": len(got)}


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
        "speedup": json_float(prx_s / lat_s) if lat_s > 0 else None,
        "underestimated": int(under.sum()),
        "ties": int(ties.sum()),
        "underestimation_ratio": json_float(under.mean()),
        "lattice_distinct_mean": json_float(lat["num_distinct"].mean()),
        "proxy_distinct_mean": json_float(prx["num_distinct"].mean()),
    }


def _timing(rows: pd.DataFrame, methods: Sequence[str]) -> dict[str, Any]:
    out = {}
    for m in methods:
        part = rows[rows["method"] == m]
        out[m] = {
            "seconds": round(float(part["seconds"].sum()), 3),
            "mean_seconds": json_float(part["seconds"].mean()) if len(part) else None,
            "forward_passes": int(part["forward_passes"].sum()),
            "rows": int(len(part)),
        }
    return out


def _scope(out: str | Path, items: Sequence[str] | None,
           methods: Sequence[str] | None) -> tuple[dict[str, Any], pd.DataFrame, list[str], list[str]]:
    """A folder's config, its rows of the given items, the methods present and the items every
    method finished (in the given order)."""
    config, rows = store.read_config(out), load_rows(out)
    if items is not None:
        rows = rows[rows["item"].isin(set(items))]
    methods = methods_present(rows, methods)
    return config, rows, methods, complete_items(rows, methods, items)


def task_report(task: str, out: str | Path, config: dict[str, Any], rows: pd.DataFrame, methods: list[str],
            setup: dict[str, Any], figures: dict[str, Any]) -> dict[str, Any]:
    """A report: the setup, the task's figures, then what every task reports (speed, time)."""
    return {
        "task": task, "out": str(out), "dataset": config.get("dataset"), "model": config.get("model"),
        "samples": config.get("samples"), **setup, "seed": config.get("seed"), "methods": methods,
        **figures,
        **speedup_and_underestimation(rows),
        "timing": _timing(rows, methods),
        "wall_seconds": round(sum(s.get("wall_seconds", 0.0) for s in store.read_sessions(out)), 3),
    }


# --------------------------------------------------------------------------------------------
# Q&A


def qa_report(out: str | Path, questions: Sequence[str] | None = None,
              methods: Sequence[str] | None = None) -> dict[str, Any]:
    """The Q&A figures of a results folder (restricted to the given question ids and methods)."""
    config, rows, methods, items = _scope(out, questions, methods)
    rows = rows[rows["item"].isin(set(items))]
    report = task_report("qa", out, config, rows, methods, {}, {
        "questions": len(items),
        "answers": int(rows.drop_duplicates(["item", "choice"]).shape[0]),
        "accuracy": {m: qa_accuracy(rows, m, items) for m in methods},
        "changed_picks": _with_gold(changed_picks(rows, items, methods), rows),
    })
    report["markdown"] = qa_markdown([report])
    return report


def _with_gold(changed: list[dict[str, Any]], rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Changed picks with each question's gold answer index."""
    gold = rows.drop_duplicates("item").set_index("item")["gold"]
    return [{**c, "gold": int(gold[c["item"]])} for c in changed]


# --------------------------------------------------------------------------------------------
# Translation


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


def mt_scores(systems: dict[str, list[str]], sources: list[str], refs: list[str],
              comet: bool) -> dict[str, Any]:
    """Corpus chrF of each system's translations, and COMET-22 while it is available."""
    import sacrebleu

    scores: dict[str, dict[str, Any]] = {}
    comet_ok, note = comet and bool(refs), "COMET-22 not computed"
    for name, hyps in systems.items():
        scores[name] = {"chrf": json_float(sacrebleu.corpus_chrf(hyps, [refs]).score) if refs else None}
        if comet_ok:
            value, note = comet22(sources, hyps, refs)
            comet_ok = value is not None
            scores[name]["comet22"] = value
    return {"scores": scores, "metric": "COMET-22" if comet_ok else "chrF",
            "comet_note": "Unbabel/wmt22-comet-da" if comet_ok else note}


def mt_report(out: str | Path, sentences: Sequence[str] | None = None,
              methods: Sequence[str] | None = None, comet: bool = True) -> dict[str, Any]:
    """The translation figures of a results folder: chrF (and COMET-22) per method."""
    config, rows, methods, items = _scope(out, sentences, methods)
    meta = store.read_items(out)
    items = [i for i in items if i in meta]
    rows = rows[rows["item"].isin(set(items))]
    systems = {}
    for m in methods:
        pick = mt_selection(rows, items, m)
        systems[m] = [meta[i]["candidates"][pick[i]] for i in items]
    if items:
        systems["first candidate"] = [meta[i]["candidates"][0] for i in items]
    agree = None
    if "lattice" in systems and "canonical" in systems and items:
        agree = json_float(np.mean([a == b for a, b in zip(systems["lattice"], systems["canonical"])]))
    report = task_report("mt", out, config, rows, methods, {"candidates": config.get("candidates")}, {
        "sentences": len(items),
        "scored_candidates": int(rows.drop_duplicates(["item", "choice"]).shape[0]),
        **mt_scores(systems, [meta[i]["source"] for i in items], [meta[i]["reference"] for i in items], comet),
        "lattice_canonical_same_pick": agree,
        "changed_picks": changed_picks(rows, items, methods),
    })
    report["markdown"] = mt_markdown([report])
    return report


# --------------------------------------------------------------------------------------------
# Files


def write_report(out: str | Path, report: dict[str, Any]) -> None:
    """report.md and report.json in the results folder."""
    out = Path(out)
    store.write_whole(out / "report.md", lambda tmp: tmp.write_text(report["markdown"], encoding="utf-8"))
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    store.write_whole(out / "report.json", lambda tmp: tmp.write_text(text, encoding="utf-8"))


def report_folder(out: str | Path, comet: bool = True) -> dict[str, Any]:
    """The report of any results folder (Q&A or translation, read from its config)."""
    task = store.read_config(out).get("task")
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


def report_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m marginal_core.tasks.report",
        description="Print the combined tables of eval-qa / eval-mt results folders.",
    )
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--no-comet", action="store_true", help="skip COMET-22 even where available")
    args = parser.parse_args(argv)
    return run_cli(lambda: print(combined_markdown(args.folders, comet=not args.no_comet)))


if __name__ == "__main__":
    sys.exit(report_main())
