"""A scan's surprisal by region (``marginal scan FILE --surprisal word``): where in each text the
marginal and the canonical tokenization part (docs/design.md, "Surprisal: where in the text").

Each model folder keeps, per text, what the prefix search found at every byte: the bounds, the
canonical tokens' log p and the canonical prefix row, and the next character's entropy and the
rank of the one that came (not the whole next-character distribution: 256 numbers a byte)
(``surprisal.jsonl``, a line per text appended as soon as its search ends, so a stopped scan loses
only the text it was searching and a rerun searches only the texts it lacks). The regions are cut
at the export, so ``surprisal.csv`` (a row per text, model and region) takes the unit, space rule
and scale last asked for without searching again. The search stops on the word regions'
tolerance: a recut by byte or character keeps its bounds, which may be wider there.

For reading-time studies each row also has the region's ``length`` (characters, whitespace not
counted) and its word frequency, ``zipf_frequency`` (wordfreq's Zipf scale for English: the
baseline every reading-time regression includes; 0 for a word wordfreq does not know). wordfreq is
an optional extra (``pip install 'marginal[words]'``): without it the column is empty.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from marginal_core.corpus.gains import short_text
from marginal_core.ground.jsonsafe import json_float
from marginal_core.ground.progress import tqdm_bar
from marginal_core.search.ending import Ended
from marginal_core.search.settings import DEFAULT_TOLERANCE, TimeBudget
from marginal_core.search.surprisal.next_bytes import NextBytes
from marginal_core.search.surprisal.result import SPACES, UNITS, Surprisal, check_choice
from marginal_core.tasks import markdown, store
from marginal_core.tasks.writer import RunLock

if TYPE_CHECKING:
    from marginal_core.lm.adapter import LM

FILE = "surprisal.jsonl"
REGIONS_SHOWN = 10  # regions listed in report.md and on the Results page (surprisal.csv holds them all)
CSV_COLUMNS = ["text_id", "model", "index", "start_byte", "end_byte", "region", "surprisal", "surprisal_canonical",
               "surprisal_canonical_prefix", "lower", "upper", "entropy", "rank", "length", "zipf_frequency"]
WORDFREQ_LANGUAGE = "en"
NO_WORDFREQ = "zipf_frequency stays empty without wordfreq: pip install 'marginal[words]'"


@dataclass(frozen=True)
class Cut:
    """How surprisal.csv is cut: the unit, the space rule, and bits (else nats) for the surprisals
    and the entropy."""

    unit: str = "word"
    space: str = "trailing"
    bits: bool = False

    def __post_init__(self) -> None:
        check_choice(self.unit, UNITS, "surprisal unit")
        check_choice(self.space, SPACES, "space rule")

    def as_json(self) -> dict[str, Any]:
        return {"unit": self.unit, "space": self.space, "bits": self.bits}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Cut:
        """A cut from scan.json (older folders: no bits, nats)."""
        return cls(data["unit"], data["space"], bool(data.get("bits", False)))


class ScanText(Protocol):
    """A text of a scan (scan.Text): its id, its context ('' for none) and itself."""

    @property
    def id(self) -> str: ...

    @property
    def context(self) -> str: ...

    @property
    def text(self) -> str: ...


def record(text_id: str, s: Surprisal) -> dict[str, Any]:
    """A searched text as its line of surprisal.jsonl: the bounds at every byte, the canonical tokens,
    and the search's two measures of progress (the seconds at which its values settled, and its
    regions certified of all: the regions it searched for, whose tolerance it stopped on)."""
    def floats(values: np.ndarray) -> list[float | None]:
        return [json_float(float(v)) for v in values]

    assert s.canonical_prefix is not None and s.next is not None  # a search's result has both
    return {"item": text_id, "text": s.text, "context": s.context, "model": s.model, "dtype": s.dtype,
            "device": s.device, "method": s.method, "offset": s.offset, "prefix_lower": floats(s.prefix_lower),
            "prefix_upper": floats(s.prefix_upper), "canonical_spans": [list(span) for span in s.canonical_spans],
            "canonical_log_p": floats(s.canonical_log_p), "canonical_prefix": floats(s.canonical_prefix),
            "next_entropy": floats(s.next.entropy), "next_rank": s.next.rank.tolist(),
            "log_p_text": json_float(s.log_p_text), "seconds": s.seconds, "rounds": s.rounds, "scored": s.scored,
            "tolerance": s.tolerance, "settled": s.settled_at, "certified": s.certified, "regions": len(s.regions),
            "ended": s.ended or ""}


def surprisal_of(rec: dict[str, Any], unit: str = "word", space: str = "trailing") -> Surprisal:
    """The Surprisal a line of surprisal.jsonl holds, cut into unit's regions (null: no mass,
    -inf; an upper bound's null: none known, inf; an entropy's: not reached, nan). A line from
    before the canonical prefix row and the next characters has neither (their columns empty)."""
    def array(values: list[float | None], missing: float) -> np.ndarray:
        return np.array([missing if v is None else v for v in values], dtype=np.float64)

    prefix = array(rec["canonical_prefix"], -np.inf) if "canonical_prefix" in rec else None
    nxt = (NextBytes(b"", array(rec["next_entropy"], np.nan), np.array(rec["next_rank"], dtype=np.int64))
           if "next_entropy" in rec else None)
    return Surprisal(rec["text"], rec["model"], rec["context"], rec["dtype"], rec["device"], rec["method"], unit,
                     space, rec["offset"], array(rec["prefix_lower"], -np.inf), array(rec["prefix_upper"], np.inf),
                     tuple((u, v) for u, v in rec["canonical_spans"]), array(rec["canonical_log_p"], -np.inf),
                     -np.inf if rec["log_p_text"] is None else rec["log_p_text"], rec["seconds"], prefix, nxt,
                     rec.get("rounds", 0), rec.get("scored", 0), tolerance=rec.get("tolerance", DEFAULT_TOLERANCE),
                     settled_at=rec.get("settled"), ended=Ended(rec["ended"]) if rec.get("ended") else None)


def searched(folder: Path) -> set[str]:
    """The ids of the texts a model folder holds the surprisal of."""
    return {r["item"] for r in store.read_jsonl(folder / FILE)}


def search_texts(folder: Path, texts: Sequence[ScanText], load: Callable[[], LM], *, part: str | None = None,
                 show_bar: bool = True, time_budget: TimeBudget = None) -> int:
    """Search the prefixes of each text the folder lacks the surprisal of, under the model ``load()``
    gives (called only when one is left), each within ``time_budget``, appending each as it ends;
    returns how many it searched."""
    from marginal_core.estimators.marginalizer import by_context

    with RunLock.take(folder, part):
        todo = [t for t in texts if t.id not in searched(folder)]
        if not todo:
            return 0
        lm = load()
        bar = tqdm_bar(len(texts), f"{lm.name} surprisal", len(texts) - len(todo)) if show_bar else None
        try:
            for i, m in by_context(lm, [(t.context, t.text) for t in todo]):
                s = m.surprisal(time_budget=time_budget)
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


def surprisal_table(folders: dict[str, Path], cut: Cut = Cut()) -> pd.DataFrame:
    """surprisal.csv's rows (CSV_COLUMNS): per model folder, each searched text cut into the cut's
    regions (a text searched twice, e.g. by two shards: its last line), with each region's length
    and word frequency."""
    parts = []
    for model, folder in folders.items():
        records = {r["item"]: r for r in store.read_jsonl(folder / FILE)}
        for text_id, rec in records.items():
            frame = surprisal_of(rec, cut.unit, cut.space).to_pandas(bits=cut.bits).rename(columns={"text": "region"})
            parts.append(frame.assign(text_id=text_id, model=model))
    if not parts:
        return pd.DataFrame(columns=CSV_COLUMNS)
    table = pd.concat(parts, ignore_index=True)
    words = table["region"].str.strip()
    return table.assign(length=words.str.len(), zipf_frequency=zipf_frequencies(words.tolist()))[CSV_COLUMNS]


def zipf_frequencies(words: list[str]) -> list[float]:
    """Each word's Zipf frequency in English by wordfreq (which drops its punctuation itself); nan
    for all without wordfreq."""
    try:
        from wordfreq import zipf_frequency
    except ImportError:
        return [math.nan] * len(words)
    known: dict[str, float] = {}
    return [known.setdefault(w, zipf_frequency(w, WORDFREQ_LANGUAGE)) for w in words]


def has_wordfreq() -> bool:
    """Whether wordfreq is installed (the zipf_frequency column is filled)."""
    import importlib.util

    return importlib.util.find_spec("wordfreq") is not None


def differing_regions(table: pd.DataFrame, n: int = REGIONS_SHOWN) -> pd.DataFrame:
    """The n regions of a surprisal table where the marginal and the canonical surprisal differ
    most (by their absolute difference), largest first, with that difference; a region that
    recurs with the same figures (a sentence-initial "The␣" in every text) is listed once."""
    gap = table["surprisal"] - table["surprisal_canonical"]
    ranked = table.assign(difference=gap).loc[gap.abs().sort_values(ascending=False, kind="stable").index]
    same = ranked[["model", "region"]].assign(s=ranked["surprisal"].round(3), c=ranked["surprisal_canonical"].round(3))
    return ranked[~same.duplicated()].head(n).reset_index(drop=True)


def surprisal_markdown(table: pd.DataFrame, cut: Cut) -> str:
    """report.md's section: the regions where marginal and canonical surprisal differ most."""
    from marginal_core.lattice.readable import show_piece

    top = differing_regions(table)
    rows = [[r.text_id, r.model, short_text(show_piece(r.region)), f"{r.surprisal:.3f}", f"{r.surprisal_canonical:.3f}",
             f"{r.surprisal_canonical_prefix:.3f}", f"{r.difference:+.3f}"] for r in top.itertuples()]
    scale = "bits" if cut.bits else "nats"
    header = ["text", "model", "region", f"marginal ({scale})", f"canonical ({scale})", f"canonical prefix ({scale})",
              "marginal − canonical"]
    return "\n".join([f"### The {len(top)} {cut.unit} regions (space {cut.space}) where marginal and canonical "
                      "surprisal differ most", "", *markdown.table(header, rows), ""])
