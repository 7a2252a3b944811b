"""What a scan found: per model, the texts ranked by how much the marginal gains over the canonical
tokenization; across models, one tidy table (a row per text x model x method) and the decoded
tokenizations behind every estimate.

The gain of a method on a text is log marginal - log p(canonical) in nats (>= 0 for a bound), and
its share off the canonical is 1 - exp(-gain): the part of the text's probability that the
canonical tokenization misses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from marginal_core.corpus.gains import TOP, best_rows, gains, short_text
from marginal_core.corpus.scan_compare import comparisons
from marginal_core.corpus.scan_surprisal import Cut, surprisal_markdown, surprisal_table
from marginal_core.search.surprisal.result import bits_per_byte
from marginal_core.tasks import markdown, store
from marginal_core.tasks.report import complete_items, load_rows, methods_present, task_report


def scan_report(out: str | Path, items: Sequence[str] | None = None,
                methods: Sequence[str] | None = None) -> dict[str, Any]:
    """A scan folder's figures: per method the mean gain and how many texts gain more than 0.1
    and 1 nat, and the texts ranked by their best gain."""
    config, rows = store.read_config(out), load_rows(out)
    methods = methods_present(rows, methods)
    done = complete_items(rows, methods, items)
    rows = gains(rows[rows["item"].isin(set(done))])
    per_method = {}
    for m in methods:
        part = rows[rows["method"] == m]
        per_method[m] = {"mean_gain_nats": float(part["gain_nats"].mean()), "max_gain_nats": float(part["gain_nats"].max()),
                         "over_0.1_nats": int((part["gain_nats"] > 0.1).sum()), "over_1_nat": int((part["gain_nats"] > 1).sum())}
    best = best_rows(rows) if len(rows) else rows
    ranked = [{"item": r.item, "text": r.text, "context": r.context, "method": r.method, "gain_nats": float(r.gain_nats),
               "share_off_canonical": float(r.share_off_canonical), "log_p_canonical": float(r.log_p_canonical),
               "log_marginal": float(r.log_marginal), "bits_per_byte": bits_per_byte(r.log_marginal, r.text)}
              for r in best.itertuples()]
    report = task_report("scan", out, config, rows, methods, {}, {"texts": len(done), "by_method": per_method,
                                                              "ranked": ranked})
    report["markdown"] = scan_markdown(report)
    return report


def scan_markdown(report: dict[str, Any]) -> str:
    """One model's scan as markdown: the methods' gains, the top texts, the time per method."""
    head = f"### Scan of {report['dataset']}: {report['texts']} texts, {report['model']}, k = {report['samples']}"
    methods = markdown.table(
        ["method", "texts", "mean gain (nats)", "max gain (nats)", "gain > 0.1 nats", "gain > 1 nat", "seconds"],
        [[m, report["texts"], f"{f['mean_gain_nats']:.3f}", f"{f['max_gain_nats']:.3f}", f["over_0.1_nats"],
          f["over_1_nat"], f"{report['timing'][m]['seconds']:.2f}"] for m, f in report["by_method"].items()])
    top = markdown.table(
        ["text", "id", "best method", "log p(canonical)", "log p(text)", "bits per byte", "gain (nats)",
         "off the canonical"],
        [[short_text(r["text"]), r["item"], r["method"], f"{r['log_p_canonical']:.3f}", f"{r['log_marginal']:.3f}",
          f"{r['bits_per_byte']:.3f}", f"{r['gain_nats']:.3f}", f"{100 * r['share_off_canonical']:.1f}%"]
         for r in report["ranked"][:TOP]])
    return "\n".join([head, "", *methods, "", f"#### The {min(TOP, report['texts'])} texts that gain most", "",
                      *top, ""])


# --------------------------------------------------------------------------------------------
# Exports across the models of a scan


def model_folders(out: str | Path) -> dict[str, Path]:
    """A scan folder's model folders by model name (scan.json's list; or out itself when it is
    one model's folder)."""
    out = Path(out)
    index = out / "scan.json"
    if index.is_file():
        models = json.loads(index.read_text(encoding="utf-8"))["models"]
        return {m: out / name for m, name in models.items() if (out / name / "config.json").is_file()}
    return {store.read_config(out)["model"]: out}


def texts_table(folder: Path) -> pd.DataFrame:
    """One model folder's rows as the tidy table's rows (before the decoded top tokenization)."""
    config, rows = store.read_config(folder), load_rows(folder)
    rows = gains(rows)
    return pd.DataFrame({
        "id": rows["item"], "text": rows["text"], "context": rows["context"], "model": config["model"],
        "method": rows["method"], "dtype": config.get("dtype", store.IMPLIED["dtype"]),
        "log_p_canonical": rows["log_p_canonical"], "log_marginal": rows["log_marginal"],
        "bits_per_byte": [bits_per_byte(lp, text) for lp, text in zip(rows["log_marginal"], rows["text"])],
        "gain_nats": rows["gain_nats"], "share_off_canonical": rows["share_off_canonical"],
        "paths_scored": rows["num_distinct"].astype("Int64"), "num_paths": rows["num_paths"],
        "seconds": rows["seconds"], "samples": config["samples"], "seed": config["seed"],
    })


def paths_table(folder: Path) -> pd.DataFrame:
    """The stored tokenizations of one model folder, decoded: token strings, log p, share of the
    method's estimate, kind, splits from the canonical and draws."""
    from marginal_core.lattice.graph import Lattice, lattice_of
    from marginal_core.models import load_text_tokenizer
    from marginal_core.viz.analysis import splits_from_canonical

    config, rows = store.read_config(folder), load_rows(folder)
    tokenizer = load_text_tokenizer(config["model"])
    texts = dict(zip(rows["item"], rows["text"]))
    totals = {(r.item, r.method): r.log_marginal for r in rows.itertuples()}
    out: list[dict[str, Any]] = []
    lattices: dict[Any, Lattice] = {}
    for (item, _, method), rec in store.read_samples(folder).items():
        if (item, method) not in totals:
            continue  # samples of an item whose rows a kill cut off
        lattice = lattices.get(item) or lattices.setdefault(item, lattice_of(texts[item], tokenizer))
        for ids, kind, log_p, draws in zip(rec["ids"], rec["kinds"], rec["log_p"], rec["draws"]):
            pieces = lattice.pieces(ids)
            log_p = float(log_p) if log_p is not None else float("nan")
            out.append({"id": item, "model": config["model"], "method": method, "tokenization": "|".join(pieces),
                        "tokens": json.dumps(pieces, ensure_ascii=False), "num_tokens": len(ids), "log_p": log_p,
                        "share_of_estimate": float(np.exp(log_p - totals[(item, method)])), "kind": kind,
                        "splits_from_canonical": splits_from_canonical(lattice, ids), "draws": draws})
    return pd.DataFrame(out)


def top_tokenizations_table(texts: pd.DataFrame, paths: pd.DataFrame) -> pd.DataFrame:
    """The tidy table with each estimate's heaviest tokenization and its share."""
    if not len(paths):
        return texts.assign(top_tokenization=None, top_share=np.nan)
    top = (paths.sort_values("log_p", ascending=False, kind="stable").drop_duplicates(["id", "model", "method"])
           [["id", "model", "method", "tokenization", "share_of_estimate"]]
           .rename(columns={"tokenization": "top_tokenization", "share_of_estimate": "top_share"}))
    return texts.merge(top, on=["id", "model", "method"], how="left")


def export(out: str | Path) -> dict[str, Any]:
    """scan.csv/.parquet (a row per text x model x method), paths.csv/.parquet (the decoded
    tokenizations), compare.csv (a row per text x pair of models), surprisal.csv (a row per text x
    model x region, once a run asked for the surprisal) and report.md across the scan's models, in
    out, with report.json beside them in a scan folder; returns the figures."""

    out = Path(out)
    folders = model_folders(out)
    texts = pd.concat([texts_table(f) for f in folders.values()], ignore_index=True)
    paths = pd.concat([paths_table(f) for f in folders.values()], ignore_index=True)
    texts = top_tokenizations_table(texts, paths)
    for name, frame in (("scan", texts), ("paths", paths)):
        store.write_whole(out / f"{name}.csv", partial(frame.to_csv, index=False))
        store.write_whole(out / f"{name}.parquet", partial(frame.to_parquet, index=False))
    reports = [scan_report(f) for f in folders.values()]
    parts = [r["markdown"] for r in reports]
    pairs = comparisons(texts, list(folders))
    if pairs:
        paired = pd.concat([c.paired for c in pairs], ignore_index=True)
        store.write_whole(out / "compare.csv", partial(paired.to_csv, index=False))
        parts += [across_models(texts), *(c.markdown() for c in pairs)]
    figures = {"texts": int(texts["id"].nunique()), "models": list(folders), "rows": len(texts), "paths": len(paths),
               "comparisons": [c.as_json() for c in pairs]}
    if (cut := _surprisal_cut(out)) is not None:
        regions = surprisal_table(folders, cut)
        store.write_whole(out / "surprisal.csv", partial(regions.to_csv, index=False))
        figures["surprisal_rows"] = len(regions)
        if len(regions):
            parts.append(surprisal_markdown(regions, cut))
    store.write_whole(out / "report.md", lambda tmp: tmp.write_text("\n".join(parts), encoding="utf-8"))
    if (out / "scan.json").is_file():  # not one model's folder, whose report.json is its run's
        body = {**figures, "by_model": {m: {k: v for k, v in r.items() if k != "markdown"}
                                        for m, r in zip(folders, reports)}}
        text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
        store.write_whole(out / "report.json", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return {**figures, "markdown": "\n".join(parts), "out": str(out)}


def _surprisal_cut(out: Path) -> Cut | None:
    """How a scan folder's surprisal.csv is cut (scan.json's), or None."""
    index = out / "scan.json"
    cut = json.loads(index.read_text(encoding="utf-8")).get("surprisal") if index.is_file() else None
    return None if cut is None else Cut.of(cut)


def across_models(texts: pd.DataFrame) -> str:
    """The texts ranked by their largest gain under any model, with each model's best gain and
    heaviest tokenization."""
    best = best_rows(texts.rename(columns={"id": "item"}), ("item", "model")).rename(columns={"item": "id"})
    wide = best.pivot(index="id", columns="model", values=["gain_nats", "top_tokenization"])
    models = list(dict.fromkeys(best["model"]))
    order = wide["gain_nats"].max(axis=1).sort_values(ascending=False).index[:TOP]
    text_of = dict(zip(best["id"], best["text"]))
    rows = [[short_text(text_of[i]), *(f"{wide.loc[i, ('gain_nats', m)]:.3f}" for m in models),
             *(str(wide.loc[i, ("top_tokenization", m)]) for m in models)] for i in order]
    header = ["text", *(f"gain, {m}" for m in models), *(f"top tokenization, {m}" for m in models)]
    return "\n".join([f"### Texts ranked by their largest gain under any model (top {len(order)})", "",
                      *markdown.table(header, rows), ""])
