"""Scanning a file of texts: each text (after its optional context) scored by the chosen methods.

A text file is read as one text per line (``.txt``), JSON lines with ``text`` and optional
``context`` and ``id`` (``.jsonl``), or a CSV with those columns (``.csv``). A text without an
``id`` is named by a hash of its context and text, so a file edited or extended between runs
keeps the results of the texts it still holds, and a text listed twice is scored once.

``--shard i/n`` keeps every n-th text (the i-th of each n): n processes can share one results
folder on one disk, or write folders of their own that :func:`merge` joins afterwards. Under a
launcher of several processes (torchrun, accelerate launch) the ranks are the shards, found in the
process group (scan_ranks.py): each scores its texts into the one folder, rank 0 writes the tables.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marginal_core.corpus.scan_ranks import Ranks, join
from marginal_core.ground.errors import MarginalError
from marginal_core.search.settings import TimeBudget, check_time_budget
from marginal_core.tasks.datafiles import dataset_file, read_json_records
from marginal_core.tasks.options import EvalOptions
from marginal_core.tasks.task import Request, Task

if TYPE_CHECKING:
    from marginal_core.corpus.scan_surprisal import Cut

SUFFIXES = (".txt", ".jsonl", ".csv")


@dataclass(frozen=True)
class Text:
    """One text of a scan, with the context it is conditioned on ('' for none)."""

    id: str
    text: str
    context: str = ""
    index: int = 0  # its position among the file's texts


def text_id(text: str, context: str) -> str:
    """The id of a text the file names no id for: a hash of its context and text."""
    return "t" + hashlib.sha1(f"{context}\0{text}".encode()).hexdigest()[:10]


def _records(path: Path) -> list[dict[str, Any]]:
    """The file's records as {text, context?, id?} dicts, by its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".txt":
        lines = path.read_text(encoding="utf-8").splitlines()
        return [{"text": line} for line in lines if line.strip()]
    if suffix == ".jsonl":
        records = read_json_records(path)
        if not all(isinstance(r, dict) for r in records):
            raise MarginalError(f"{path}: every line must be a JSON object with a \"text\"")
        return records
    if suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            if "text" not in (reader.fieldnames or []):
                raise MarginalError(f"{path}: the CSV needs a header with a \"text\" column (and optionally context, id)")
            return list(reader)
    raise MarginalError(f"{path}: a scan reads {', '.join(SUFFIXES)} files (one text per line, or records with \"text\")")


def load_texts(path: str | Path) -> list[Text]:
    """The distinct texts of a file, in file order (see the module docstring for the formats)."""
    path = dataset_file(path)
    texts: dict[str, Text] = {}
    for n, record in enumerate(_records(path), start=1):
        text, context = record.get("text"), record.get("context") or ""
        if not isinstance(text, str) or not text:
            raise MarginalError(f"{path}: record {n} has no text")
        given = str(record.get("id") or "").strip()
        key = given or text_id(text, str(context))
        if given and given in texts:
            raise MarginalError(f"{path}: the id {given!r} is used twice (record {n} repeats it)")
        texts.setdefault(key, Text(key, text, str(context), len(texts)))
    if not texts:
        raise MarginalError(f"{path} holds no texts")
    return list(texts.values())


def parse_shard(value: str | None) -> tuple[int, int] | None:
    """'i/n' as (i, n) with 1 <= i <= n, or None for the whole file."""
    if not value:
        return None
    try:
        i, n = (int(part) for part in value.split("/"))
    except ValueError:
        raise MarginalError(f"--shard {value!r}: expected i/n, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise MarginalError(f"--shard {value!r}: i must be from 1 to n")
    return i, n


def bare_leading_space(texts: Sequence[Text]) -> list[Text]:
    """Texts that start with a space and have no context (see LEADING_SPACE)."""
    return [t for t in texts if not t.context and t.text[:1].isspace()]


LEADING_SPACE = (
    "start with a space and have no context: with nothing before it, a text's space has no word "
    "to join, and tokenizations that give the space a token of its own (' ' + word) can carry much "
    "of the mass; give each a context, or drop the space"
)


class ScanTask(Task):
    """A file of texts, one request each (its text after its context); report: scan_report."""

    name, unit, columns = "scan", "texts", ["item", "text_index", "choice", "context", "text"]

    def __init__(self, dataset: str, shard: tuple[int, int] | None = None) -> None:
        super().__init__(dataset)
        self.shard = shard

    def load(self, options: EvalOptions) -> list[Text]:
        """The file's texts (its first ``options.limit``), then this shard's of them: n shards of
        a limited scan hold the texts the whole scan does."""
        texts = load_texts(self.dataset)
        texts = texts[: options.limit] if options.limit is not None else texts
        if self.shard is not None:
            i, n = self.shard
            texts = [t for t in texts if t.index % n == i - 1]
        return texts

    @property
    def part(self) -> str | None:
        """A shard's own texts: n shard processes may share one folder."""
        return None if self.shard is None else "shard-{}-of-{}".format(*self.shard)

    def identity(self, options: EvalOptions, model: str) -> dict[str, Any]:
        return {"task": self.name, "dataset": Path(self.dataset).name, "model": model,
                "samples": options.samples, "seed": options.seed, "max_len": options.max_len}

    def requests(self, item: Text, record: dict[str, Any] | None = None) -> list[Request]:
        return [Request(0, item.context, item.text, {"text_index": item.index, "context": item.context,
                                                     "text": item.text})]

    def report(self, out: Path, items: Sequence[str], methods: Sequence[str]) -> dict[str, Any]:
        from marginal_core.corpus.scan_report import scan_report

        return scan_report(out, items, methods)


def model_folder(out: str | Path, model: str) -> Path:
    """Where a scan keeps one model's results: a folder named for the model inside out."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in model.strip("/"))[-80:]
    return Path(out) / name


def parse_models(value: str) -> list[str]:
    """A comma list of model names, without repeats."""
    models = list(dict.fromkeys(m.strip() for m in value.split(",") if m.strip()))
    if not models:
        raise MarginalError("--models: give at least one model name")
    return models


def write_index(out: str | Path, dataset: str, models: Sequence[str], surprisal: Cut | None = None) -> None:
    """scan.json: the file scanned, each model's folder, so that readers find the parts, and how
    surprisal.csv is cut (unit, space rule, bits), once a run asked for the surprisal (kept after)."""
    path = Path(out) / "scan.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise MarginalError(f"cannot create the output folder {path.parent}: {err}") from err
    known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    folders = {**known.get("models", {}), **{m: model_folder(out, m).name for m in models}}
    index = {"task": "scan", "dataset": Path(dataset).name, "models": folders}
    cut = surprisal.as_json() if surprisal is not None else known.get("surprisal")
    if cut is not None:
        index["surprisal"] = cut
    path.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")


def merge(out: str | Path, sources: Sequence[str | Path]) -> int:
    """Take into out the finished texts of other scan folders of the same file and options (shards
    run elsewhere), their surprisal too; returns how many rows it took. What out already holds is kept."""
    from marginal_core.corpus import scan_surprisal
    from marginal_core.corpus.scan_report import model_folders
    from marginal_core.tasks.store import ResultStore, read_config
    from marginal_core.tasks.writer import RunLock

    taken = 0
    for source in sources:
        for model, folder in model_folders(source).items():
            config = read_config(folder)
            identity = {k: v for k, v in config.items() if k != "format"}
            with RunLock.take(model_folder(out, model)):
                taken += ResultStore(model_folder(out, model), identity, _columns(folder)).absorb(folder)
                scan_surprisal.absorb(model_folder(out, model), folder)
            write_index(out, config["dataset"], [model])
    return taken


def _columns(folder: Path) -> list[str]:
    """The columns of a results folder's rows.csv."""
    with open(Path(folder) / "rows.csv", encoding="utf-8", newline="") as fh:
        return next(csv.reader(fh))


def run_scan(file: str | Path, out: str | Path, models: Sequence[str], options: EvalOptions, *,
             shard: tuple[int, int] | None = None, merge_from: Sequence[str | Path] = (),
             surprisal: Cut | None = None, time_budget: TimeBudget = None) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """`marginal scan`: every text of the file under each model, into out (resumable), with
    ``surprisal`` (how surprisal.csv is cut) each text's surprisal by region too (each search
    within ``time_budget``: seconds, "auto" or None, ``search_stop``), then the exports; Ctrl-C
    stops it and keeps what finished. Returns (the export's figures, the last model's report,
    whether it was stopped). Notes go to standard error.

    Launched as one of several processes (torchrun, accelerate launch: scan_ranks.py), each rank
    scores its share of the texts into out; once all have, rank 0 writes each model's report over
    every text and the exports, and the others wait for them. Rank 0 returns the export's figures,
    the others their own (``rank_figures``); both with ``rank`` and ``ranks``."""
    ranks = join()
    try:
        if ranks is not None and shard is not None:
            raise MarginalError("--shard: under torchrun or accelerate launch the ranks are the shards; drop --shard")
        return _scan(file, out, models, options, ranks, shard=shard, merge_from=merge_from, surprisal=surprisal,
                     time_budget=check_time_budget(time_budget))
    finally:
        if ranks is not None:
            ranks.leave()


def _scan(file: str | Path, out: str | Path, models: Sequence[str], options: EvalOptions, ranks: Ranks | None, *,
          shard: tuple[int, int] | None, merge_from: Sequence[str | Path],
          surprisal: Cut | None, time_budget: TimeBudget) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """run_scan in this process: alone (ranks None), or as one rank of a job."""
    from dataclasses import replace

    from marginal_core.corpus.scan_report import export
    from marginal_core.corpus.scan_surprisal import NO_WORDFREQ, has_wordfreq, search_texts
    from marginal_core.models import load_model
    from marginal_core.tasks.evaluator import evaluate

    if ranks is not None:
        shard, options = ranks.shard, replace(options, device=ranks.device(options.device))
    lead = ranks is None or ranks.lead
    if lead and surprisal is not None and surprisal.unit == "word" and not has_wordfreq():
        print(f"marginal scan: note: {NO_WORDFREQ}", file=sys.stderr)
    task = ScanTask(str(file), shard)
    texts = task.load(options)
    every = texts if ranks is None or not lead else ScanTask(str(file)).load(options)  # rank 0 reports on all
    if lead:
        if bare := bare_leading_space(every):
            print(f"marginal scan: warning: {len(bare)} of {len(every)} texts {LEADING_SPACE}", file=sys.stderr)
        write_index(out, str(file), models, surprisal)
        if merge_from:
            taken = merge(out, merge_from)
            print(f"marginal scan: took {taken} finished rows from {len(merge_from)} folder(s)", file=sys.stderr)
    if ranks is not None:
        ranks.barrier()  # scan.json and the merged rows are in place before any rank scores
    reports: dict[str, dict[str, Any]] = {}
    stopped = False
    try:
        for model in models:
            reports[model] = evaluate(task, model_folder(out, model), replace(options, model=model))
            if surprisal is not None:
                search_texts(model_folder(out, model), texts, partial(load_model, model, options.device, options.dtype),
                             part=task.part, show_bar=options.show_bar, time_budget=time_budget)
    except KeyboardInterrupt:
        stopped = True
        print(f"marginal scan: stopped; what finished is kept in {out}: run it again to continue", file=sys.stderr)
    report = reports[models[-1]] if models and models[-1] in reports else {}
    if ranks is None:
        return export(out), report, stopped
    ranks.barrier()  # every rank's texts are stored (or it stopped)
    if ranks.lead:
        report = _whole_reports(out, [t.id for t in every], options, reports) or report
        found = export(out)
    else:
        found = rank_figures(out, ranks, models, texts)
    ranks.barrier()  # the tables are written: each rank returns with them in place
    return {**found, "rank": ranks.rank, "ranks": ranks.size}, report, stopped


def rank_figures(out: str | Path, ranks: Ranks, models: Sequence[str], texts: Sequence[Text]) -> dict[str, Any]:
    """What a rank other than 0 says of its part: its texts, and where rank 0 wrote the tables."""
    line = (f"rank {ranks.rank} of {ranks.size}: its {len(texts)} texts are in {out}; "
            f"rank 0 wrote the tables (scan.csv, report.md)")
    return {"texts": len(texts), "models": list(models), "rows": None, "paths": None, "markdown": line,
            "out": str(out)}


def _whole_reports(out: str | Path, ids: Sequence[str], options: EvalOptions,
                   reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Rank 0, once every rank is done: each model folder's report over all the file's texts (ids;
    a rank's own covers its share), a note where some have no rows; returns the last model's."""
    from marginal_core.corpus.scan_report import scan_report
    from marginal_core.tasks.report import write_report

    report: dict[str, Any] = {}
    for model, own in reports.items():
        folder = model_folder(out, model)
        report = {**scan_report(folder, ids, options.methods), "model": own["model"], "device": own["device"],
                  "dtype": own["dtype"]}
        write_report(folder, report)
        if missing := len(ids) - report["texts"]:
            print(f"marginal scan: note: {missing} of {len(ids)} texts have no rows in {folder}: a rank stopped, "
                  f"or the nodes do not share {out}; run it again to score them (or --merge the nodes' folders)",
                  file=sys.stderr)
    return report
