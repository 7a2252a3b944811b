"""A resumable results folder shared by the Q&A and translation experiments.

Layout of an ``--out`` folder:

    config.json     the run's identity (task, dataset, model, k, seed, ...); a rerun with a
                    different identity is refused, so results of two setups never mix
    rows.csv        one row per (item, choice, method), appended item by item as items finish
    samples.jsonl   the distinct samples behind each row (token ids, log p, log q, draws)
    items.jsonl     per-item extras (translation: the prompt, reference and candidates)
    surprisal.jsonl a scan's prefix bounds per text (``marginal scan --surprisal``: tasks.scan_surprisal)
    sessions.jsonl  one line per run of the command: when, how long, how many items it did
    report.md, report.json   the tables, rewritten at the end of every run

Rows are written only after every method of an item finished, then flushed and fsynced, so an
interrupted run loses at most the item it was working on. A torn last line (a kill mid-write)
is cut by the next writer. A run opens the store while it holds the folder's run lock, and every
write holds the folder's append lock (``marginal_core.tasks.writer``). Rows are keyed by (item
id, choice index, method): a rerun skips the keys it finds and computes only what is missing
(more items, another method).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from marginal_core.ground.errors import MarginalError
from marginal_core.tasks.writer import appending

FORMAT = 1
# Identity keys a folder leaves out when they hold their default (float32 folders predate dtype).
IMPLIED = {"dtype": "float32"}
DTYPE_HINT = (" (--dtype auto is float16 on CUDA and on a CPU with fast float16, float32 elsewhere: "
              "pass --dtype float32, float16 or bfloat16 to resume a folder from another machine)")


def append_durably(path: Path, text: str) -> None:
    """Append text to a file of a results folder and make it durable before returning, in the
    folder's append lock (first cutting a line that a killed writer left without its newline)."""
    with appending(path.parent):
        _drop_torn_tail(path)
        _write_durably(path, text)


def _write_durably(path: Path, text: str) -> None:
    """Append text to a file and make it durable before returning (the append lock held)."""
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """Write a file whole: write(a temporary path), then rename it over path, so that a reader,
    or another run writing the same file at that moment (shards finishing together), never
    meets it half written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def _drop_torn_tail(path: Path) -> None:
    """Cut a partial last line (no trailing newline) left by a kill in the middle of a write (the
    append lock held: no live writer is in the middle of one). It reads the last byte, and the
    whole file only when that is not a newline (it runs before every append)."""
    if not path.is_file():
        return
    with open(path, "r+b") as fh:
        if fh.seek(0, os.SEEK_END) == 0:
            return
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) != b"\n":
            fh.seek(0)
            fh.truncate(fh.read().rfind(b"\n") + 1)


def _cell(value: Any) -> str:
    """A CSV cell: floats round-trip exactly (repr), -inf/inf/nan as words, None as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


class ResultStore:
    """The results folder of one experiment run (see the module docstring)."""

    def __init__(self, out: str | os.PathLike, identity: dict[str, Any], columns: Sequence[str]) -> None:
        self.dir = Path(out)
        self.columns = list(columns)
        self.identity = {"format": FORMAT, **identity}
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise MarginalError(f"cannot create the output folder {self.dir}: {err}") from err
        self._check_identity()
        self.rows_path = self.dir / "rows.csv"
        self.samples_path = self.dir / "samples.jsonl"
        self.items_path = self.dir / "items.jsonl"
        self.sessions_path = self.dir / "sessions.jsonl"
        with appending(self.dir):
            for path in (self.rows_path, self.samples_path, self.items_path):
                _drop_torn_tail(path)
            if not self.rows_path.is_file() or self.rows_path.stat().st_size == 0:
                _write_durably(self.rows_path, self._line(self.columns))
        with open(self.rows_path, encoding="utf-8", newline="") as fh:
            header = next(csv.reader(fh), [])
        if header != self.columns:
            raise MarginalError(f"{self.rows_path} has other columns than this version writes; use a new --out folder")
        self.done = done_keys(self.dir)

    def _check_identity(self) -> None:
        path = self.dir / "config.json"
        if path.is_file():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as err:
                raise MarginalError(f"{path} is not valid JSON ({err}); use a new --out folder") from err
            if old != self.identity:
                diff = sorted(k for k in set(old) | set(self.identity) if old.get(k) != self.identity.get(k))
                shown = ", ".join(f"{k}: {_value(old, k)!r} there, {_value(self.identity, k)!r} now" for k in diff)
                hint = DTYPE_HINT if "dtype" in diff else ""
                raise MarginalError(
                    f"{self.dir} holds results of another setup ({shown}); "
                    f"use a new --out folder or the same options{hint}"
                )
        else:
            write_whole(path, lambda tmp: tmp.write_text(json.dumps(self.identity, indent=2) + "\n", encoding="utf-8"))

    @staticmethod
    def _line(values: Iterable[Any]) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([_cell(v) for v in values])
        return buf.getvalue()

    def append(self, rows: list[dict[str, Any]], samples: list[dict[str, Any]] | None = None) -> None:
        """Record one finished item: its samples first, then its rows (the commit record)."""
        if samples:
            append_durably(self.samples_path, "".join(json.dumps(s) + "\n" for s in samples))
        if rows:
            append_durably(self.rows_path, "".join(self._line(r.get(c) for c in self.columns) for r in rows))
        self.done.update((r["item"], int(r["choice"]), r["method"]) for r in rows)

    def absorb(self, other: str | os.PathLike) -> int:
        """Append the rows (and their samples) of another folder of the same setup that this one
        lacks, as a merge of shards run elsewhere; returns how many rows it took."""
        config = read_config(other)
        if any(_value(config, k) != _value(self.identity, k) for k in set(config) | set(self.identity)):
            raise MarginalError(f"{other} holds results of another setup than {self.dir}; only folders of the "
                                "same command and options merge")
        rows = [r for r in read_rows(other)
                if (r["item"], int(r["choice"]), r["method"]) not in self.done]
        keys = {(r["item"], int(r["choice"]), r["method"]) for r in rows}
        samples = [s for key, s in read_samples(other).items() if key in keys]
        self.append(rows, samples)
        return len(rows)

    def put_item(self, record: dict[str, Any]) -> None:
        """Record per-item extras (keyed by record["item"]; the last copy wins on reading)."""
        append_durably(self.items_path, json.dumps(record, ensure_ascii=False) + "\n")

    def log_session(self, started: float, items_done: int, **extra: Any) -> None:
        """Append this run's wall time and what it did."""
        record = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
            "wall_seconds": round(time.time() - started, 3),
            "items_done": items_done,
            **extra,
        }
        append_durably(self.sessions_path, json.dumps(record) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file of a results folder (none if it is missing; a torn line skipped)."""
    if not path.is_file():
        return []
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a torn line from a killed run
    return out


def read_rows(out: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a results folder as strings, de-duplicated on their key (the last copy wins);
    a last line still being written by a run is left out."""
    path = Path(out) / "rows.csv"
    if not path.is_file():
        return []
    data = path.read_bytes()
    rows = csv.DictReader(io.StringIO(data[: data.rfind(b"\n") + 1].decode("utf-8"), newline=""))
    return list({(r["item"], r["choice"], r["method"]): r for r in rows}.values())


def done_keys(out: str | os.PathLike) -> set[tuple[str, int, str]]:
    """The (item, choice, method) keys a results folder holds rows for."""
    return {(r["item"], int(r["choice"]), r["method"]) for r in read_rows(out)}


def read_samples(out: str | os.PathLike, item: str | None = None) -> dict[tuple[str, int, str], dict[str, Any]]:
    """The stored samples of a results folder, keyed by (item, choice, method)."""
    records = read_jsonl(Path(out) / "samples.jsonl")
    return {
        (r["item"], int(r["choice"]), r["method"]): r
        for r in records
        if item is None or r["item"] == item
    }


def read_items(out: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The per-item records of a results folder (items.jsonl), keyed by item id (last copy wins)."""
    return {r["item"]: r for r in read_jsonl(Path(out) / "items.jsonl")}


def read_sessions(out: str | os.PathLike) -> list[dict[str, Any]]:
    return read_jsonl(Path(out) / "sessions.jsonl")


def read_config(out: str | os.PathLike) -> dict[str, Any]:
    path = Path(out) / "config.json"
    if not path.is_file():
        raise MarginalError(f"{out} is not a results folder (no config.json)")
    return json.loads(path.read_text(encoding="utf-8"))


def _value(identity: dict[str, Any], key: str) -> Any:
    """An identity's value for key, the implied default where the folder leaves it out."""
    return identity.get(key, IMPLIED.get(key))
