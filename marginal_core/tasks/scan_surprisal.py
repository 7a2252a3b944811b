"""A scan's surprisal by region (``marginal scan FILE --surprisal word``): where in each text the
marginal and the canonical tokenization part (docs/design.md, "Surprisal: where in the text").

Each model folder keeps, per text, what the prefix search found at every byte and the canonical
tokens' log p (``surprisal.jsonl``, a line per text appended as soon as its search ends, so a
stopped scan loses only the text it was searching and a rerun searches only the texts it lacks).
The regions are cut from those bounds at the export, so ``surprisal.csv`` (a row per text, model
and region) takes the unit and space rule last asked for without searching again. The search
stops on the word regions' tolerance: a recut by byte or character keeps its bounds, which may
be wider there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from marginal_core.estimators.jsonsafe import json_float
from marginal_core.estimators.surprisal_result import Surprisal
from marginal_core.progress import tqdm_bar
from marginal_core.tasks import markdown, store
from marginal_core.tasks.gains import short_text
from marginal_core.tasks.writer import RunLock

if TYPE_CHECKING:
    from marginal_core.lm.adapter import LM

FILE = "surprisal.jsonl"
REGIONS_SHOWN = 10  # regions listed in report.md and on the Results page (surprisal.csv holds them all)
CSV_COLUMNS = ["text_id", "model", "index", "start_byte", "end_byte", "region", "surprisal", "surprisal_canonical",
           "lower", "upper"]


class ScanText(Protocol):
    """A text of a scan (scan.Text): its id, its context ('' for none) and itself."""

    @property
    def id(self) -> str: ...

    @property
    def context(self) -> str: ...

    @property
    def text(self) -> str: ...


def record(text_id: str, s: Surprisal) -> dict[str, Any]:
    """A searched text as its line of surprisal.jsonl: the bounds at every byte, the canonical tokens."""
    def floats(values: np.ndarray) -> list[float | None]:
        return [json_float(float(v)) for v in values]

    return {"item": text_id, "text": s.text, "context": s.context, "model": s.model, "dtype": s.dtype,
            "device": s.device, "method": s.method, "offset": s.offset, "prefix_lower": floats(s.prefix_lower),
            "prefix_upper": floats(s.prefix_upper), "canonical_spans": [list(span) for span in s.canonical_spans],
            "canonical_log_p": floats(s.canonical_log_p), "log_p_text": json_float(s.log_p_text),
            "seconds": s.seconds, "rounds": s.rounds, "scored": s.scored}


def surprisal_of(rec: dict[str, Any], unit: str = "word", space: str = "trailing") -> Surprisal:
    """The Surprisal a line of surprisal.jsonl holds, cut into unit's regions (null: no mass,
    -inf; an upper bound's null: none known, inf)."""
    def array(values: list[float | None], missing: float) -> np.ndarray:
        return np.array([missing if v is None else v for v in values], dtype=np.float64)

    return Surprisal(rec["text"], rec["model"], rec["context"], rec["dtype"], rec["device"], rec["method"], unit,
                     space, rec["offset"], array(rec["prefix_lower"], -np.inf), array(rec["prefix_upper"], np.inf),
                     tuple((u, v) for u, v in rec["canonical_spans"]), array(rec["canonical_log_p"], -np.inf),
                     -np.inf if rec["log_p_text"] is None else rec["log_p_text"], rec["seconds"], rec.get("rounds", 0),
                     rec.get("scored", 0))


def searched(folder: Path) -> set[str]:
    """The ids of the texts a model folder holds the surprisal of."""
    return {r["item"] for r in store.read_jsonl(folder / FILE)}


def search_texts(folder: Path, texts: Sequence[ScanText], load: Callable[[], LM], *, part: str | None = None,
                 show_bar: bool = True) -> int:
    """Search the prefixes of each text the folder lacks the surprisal of, under the model ``load()``
    gives (called only when one is left), appending each as it ends; returns how many it searched."""
    from marginal_core.estimators.marginalizer import by_context

    with RunLock.take(folder, part):
        todo = [t for t in texts if t.id not in searched(folder)]
        if not todo:
            return 0
        lm = load()
        bar = tqdm_bar(len(texts), f"{lm.name} surprisal", len(texts) - len(todo)) if show_bar else None
        try:
            for i, m in by_context(lm, [(t.context, t.text) for t in todo]):
                s = m.surprisal()
                store.append_durably(folder / FILE, json.dumps(record(todo[i].id, s), ensure_ascii=False) + "\n")
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
    return len(todo)


def absorb(folder: Path, source: Path) -> int:
    """Append the surprisal lines of another folder of the same setup (a shard run elsewhere) that
    folder lacks; returns how many it took."""
    have = searched(folder)
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in store.read_jsonl(source / FILE) if r["item"] not in have]
    if lines:
        store.append_durably(folder / FILE, "".join(lines))
    return len(lines)


def surprisal_table(folders: dict[str, Path], unit: str = "word", space: str = "trailing") -> pd.DataFrame:
    """surprisal.csv's rows (CSV_COLUMNS): per model folder, each searched text cut into unit's regions
    (a text searched twice, e.g. by two shards: its last line)."""
    parts = []
    for model, folder in folders.items():
        records = {r["item"]: r for r in store.read_jsonl(folder / FILE)}
        for text_id, rec in records.items():
            frame = surprisal_of(rec, unit, space).to_pandas().drop(columns="exact").rename(columns={"text": "region"})
            parts.append(frame.assign(text_id=text_id, model=model))
    return pd.concat(parts, ignore_index=True)[CSV_COLUMNS] if parts else pd.DataFrame(columns=CSV_COLUMNS)


def differing_regions(table: pd.DataFrame, n: int = REGIONS_SHOWN) -> pd.DataFrame:
    """The n regions of a surprisal table where the marginal and the canonical surprisal differ
    most (by their absolute difference), largest first, with that difference; a region that
    recurs with the same figures (a sentence-initial "The␣" in every text) is listed once."""
    gap = table["surprisal"] - table["surprisal_canonical"]
    ranked = table.assign(difference=gap).loc[gap.abs().sort_values(ascending=False, kind="stable").index]
    same = ranked[["model", "region"]].assign(s=ranked["surprisal"].round(3), c=ranked["surprisal_canonical"].round(3))
    return ranked[~same.duplicated()].head(n).reset_index(drop=True)


def surprisal_markdown(table: pd.DataFrame, unit: str, space: str) -> str:
    """report.md's section: the regions where marginal and canonical surprisal differ most."""
    from marginal_core.viz.text import show_piece

    top = differing_regions(table)
    rows = [[r.text_id, r.model, short_text(show_piece(r.region)), f"{r.surprisal:.3f}", f"{r.surprisal_canonical:.3f}",
             f"{r.difference:+.3f}"] for r in top.itertuples()]
    header = ["text", "model", "region", "marginal (nats)", "canonical (nats)", "marginal − canonical"]
    return "\n".join([f"### The {len(top)} {unit} regions (space {space}) where marginal and canonical surprisal "
                      "differ most", "", *markdown.table(header, rows), ""])
