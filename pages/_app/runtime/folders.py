"""Results folders the Results page opens (`marginal scan`, `eval-qa`, `eval-mt`, lm-eval): what
a folder holds, and its rows as the page lists them, each with links to the views of its text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd

from marginal_core.ground.cache_home import cache_root
from marginal_core.ground.errors import MarginalError
from marginal_core.tasks import store

KINDS = {"scan": "a `marginal scan`", "qa": "an `eval-qa` run", "mt": "an `eval-mt` run", "lm-eval": "an lm-eval run"}


@dataclass(frozen=True)
class Folder:
    """A results folder and what wrote it (a key of KINDS)."""

    path: Path
    kind: str


def open_folder(raw: str) -> Folder:
    """The results folder at a path; a MarginalError saying what it lacks otherwise."""
    path = Path(raw.strip()).expanduser()
    if not raw.strip():
        raise MarginalError("give the --out folder of `marginal scan`, `eval-qa` or `eval-mt`, or an lm-eval --output_path")
    if not path.is_dir():
        raise MarginalError(f"there is no folder {path}")
    if (path / "scan.json").is_file():
        return Folder(path, "scan")
    if (path / "config.json").is_file():
        task = store.read_config(path).get("task")
        if task in KINDS:
            return Folder(path, task)
    if any(path.rglob("results_*.json")):
        return Folder(path, "lm-eval")
    raise MarginalError(f"{path} is not a results folder: no scan.json or config.json (written by `marginal scan`, "
                        "`eval-qa`, `eval-mt`) and no lm-eval results_*.json")


def app_folders() -> list[Path]:
    """The results folders the app's own Q&A and translation pages wrote, newest first."""
    runs = cache_root() / "runs"
    found = [p for p in runs.glob("*") if (p / "config.json").is_file()] if runs.is_dir() else []
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def view_link(page: str, text: str, context: str, model: str, **params: str) -> str:
    """A link (relative to the app) to a view of a text with its context under a model."""
    return f"{page}?" + urlencode({"model": model, "text": text, "context": context, **params})


def scan_table(folder: Path) -> pd.DataFrame:
    """A scan's tidy table (a row per text x model x method, with the heaviest tokenization):
    its scan.parquet, or, for a model folder or a scan stopped before its export, built anew."""
    tidy = folder / "scan.parquet"
    if tidy.is_file():
        return pd.read_parquet(tidy)
    from marginal_core.corpus.scan_report import model_folders, paths_table, texts_table, top_tokenizations_table

    parts = model_folders(folder).values()
    return top_tokenizations_table(pd.concat([texts_table(f) for f in parts]), pd.concat([paths_table(f) for f in parts]))


def scan_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Per text and model of a scan's tidy table, the best bound's gain over the canonical, its
    heaviest tokenization and links to the text's mass flow and probability mass; largest gain first."""
    from marginal_core.corpus.gains import best_rows

    best = best_rows(table.rename(columns={"id": "item"}), ("item", "model"))
    return pd.DataFrame({
        "text": best["text"], "model": best["model"], "gain (nats)": best["gain_nats"],
        "off the canonical (%)": 100 * best["share_off_canonical"], "heaviest tokenization": best["top_tokenization"],
        "best method": best["method"],
        "mass flow": [view_link("lattice", r.text, r.context, r.model, arcs_by="mass flow") for r in best.itertuples()],
        "probability mass": [view_link("mass", r.text, r.context, r.model) for r in best.itertuples()],
    })


def surprisal_rows(folder: Path, table: pd.DataFrame) -> pd.DataFrame | None:
    """The regions of a scan's surprisal.csv where the marginal and the canonical surprisal differ
    most, as the page lists them (nats, 3 decimals) with a link to the text on the Surprisal page
    (cut as the scan cut it); None for a scan run without --surprisal."""
    import json

    from marginal_core.corpus.scan_surprisal import differing_regions
    from marginal_core.viz import show_piece

    path = folder / "surprisal.csv"
    if not path.is_file():
        return None
    regions = pd.read_csv(path, dtype={"text_id": str, "region": str}, keep_default_na=False)
    cut = json.loads((folder / "scan.json").read_text(encoding="utf-8")).get("surprisal", {})
    texts = table.drop_duplicates("id").set_index("id")
    top = differing_regions(regions)
    return pd.DataFrame({
        "text id": top["text_id"], "model": top["model"], "region": top["region"].map(show_piece),
        "marginal (nats)": top["surprisal"].round(3), "canonical (nats)": top["surprisal_canonical"].round(3),
        "marginal − canonical": top["difference"].round(3),
        "surprisal": [view_link("surprisal", texts.loc[r.text_id, "text"], texts.loc[r.text_id, "context"], r.model,
                                **cut) if r.text_id in texts.index else None for r in top.itertuples()],
    })


def paired_rows(paired: pd.DataFrame) -> pd.DataFrame:
    """Texts of a comparison of models A and B (scan_compare.paired_table rows) as the page lists
    them: both differences and both gains (nats, 3 decimals), whether it flips, and a link to the
    text on the Compare page."""
    return pd.DataFrame({
        "text": paired["text"], "canonical, A − B": paired["diff_canonical"], "marginal, A − B": paired["diff_marginal"],
        "gain, A": paired["gain_nats_a"], "gain, B": paired["gain_nats_b"], "flips": paired["flips"],
        "compare": [view_link("compare", r.text, r.context, r.model_a, model_b=r.model_b) for r in paired.itertuples()],
    }).round(3)


def changed_rows(folder: Folder) -> pd.DataFrame:
    """The questions (sentences) of an eval-qa (eval-mt) folder whose pick differs by method:
    each method's pick with its margin in nats, and a link to the mass flow of each pick."""
    from marginal_core.tasks.report import mt_report, qa_report

    report = qa_report(folder.path) if folder.kind == "qa" else mt_report(folder.path, comet=False)
    model, texts = report["model"], _continuations(folder)
    rows = []
    for change in report["changed_picks"]:
        item = change["item"]
        row = {"item": item}
        if "gold" in change:
            row["gold"] = texts.get((item, change["gold"]), ("", str(change["gold"])))[1].strip()
        for method, pick in change["picks"].items():
            context, text = texts.get((item, pick), ("", str(pick)))
            margin = change["margins"][method]
            row[method] = text.strip() + ("" if margin is None else f" (+{margin:.2f})")
            row[f"{method}: mass flow"] = view_link("lattice", text, context, model, arcs_by="mass flow")
        rows.append(row)
    return pd.DataFrame(rows)


def _continuations(folder: Folder) -> dict[tuple[str, int], tuple[str, str]]:
    """(context, continuation) of every scored choice of a task folder, by (item, choice)."""
    from marginal_core.tasks.report import load_rows

    rows = load_rows(folder.path)
    if folder.kind == "mt":
        items = store.read_items(folder.path)
        return {(i, int(c)): (items.get(i, {}).get("prompt", ""), " " + cand)
                for i, c, cand in zip(rows["item"], rows["choice"], rows["candidate"])}
    from marginal_core.tasks import qa

    try:
        questions = {q.id: q for q in qa.load_questions(store.read_config(folder.path)["dataset"])}
    except MarginalError:
        questions = {}
    return {(i, int(c)): (questions[i].context if i in questions else "", " " + answer)
            for i, c, answer in zip(rows["item"], rows["choice"], rows["answer"])}
