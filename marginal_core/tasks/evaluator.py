"""The one resumable evaluator loop every downstream task runs through.

:func:`evaluate` opens the task's results folder (refusing another setup), skips the items it
already holds, loads the model only when something is left, scores each item's requests by
every method and stores the item whole as soon as it is done, then writes the report.

Each request gets one Marginalizer. Its canonical log p is computed first and timed on its own,
so neither the lattice nor the proxy timing includes it (both add the same canonical term to
their non-canonical estimate).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH
from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.jsonsafe import json_float
from marginal_core.ground.progress import StopCheck, tqdm_bar
from marginal_core.tasks.options import EvalOptions
from marginal_core.tasks.store import ResultStore, done_keys, read_items
from marginal_core.tasks.task import SCORE_COLUMNS, Item, Request, Task
from marginal_core.tasks.writer import FolderBusy, RunLock

if TYPE_CHECKING:
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.lm.adapter import LM

ItemProgress = Callable[[int, int, Any], None]
"""Called as progress(done, total, item) after every item (item None at the start)."""

Following = Callable[[int, int, str], None]
"""Called as following(done, total, holder) while another run writes the folder (holder: which)."""

# How often a run that follows another's looks at the folder again.
FOLLOW_POLL_S = 0.5

Rows = list[dict[str, Any]]


class Cancelled(Exception):
    """should_stop asked the run to end; the unfinished item is not written."""


def score_continuation(
    m: Marginalizer,
    methods: Sequence[str],
    *,
    samples: int,
    seed: int,
    max_len: int | None = None,
    beam_width: int | None = DEFAULT_BEAM_WIDTH,
    should_stop: StopCheck | None = None,
) -> tuple[Rows, Rows]:
    """Rows (one per method) and sample records for one continuation given its context (m).

    Rows hold the SCORE_COLUMNS; sample records hold the distinct paths each method found
    (token ids, kind, log p, log q, draws). Neither holds the task's own columns.
    """
    log_p_canonical = m.canonical_score().log_p
    common = {
        "num_bytes": len(m.text.encode("utf-8")),
        "num_tokens_canonical": len(m.lattice.canonical),
        "num_paths": str(m.lattice.count()),
    }
    rows, records = [], []
    for method in methods:
        est = m.estimate(method, samples=samples, max_len=max_len, seed=seed, beam_width=beam_width,
                         should_stop=should_stop)
        if est.run.cancelled:
            raise Cancelled()
        rows.append(
            {
                "method": method,
                "log_marginal": est.log_marginal,
                "log_p_canonical": log_p_canonical,
                "log_noncanonical": est.log_noncanonical,
                "num_samples": est.num_samples,
                "num_distinct": est.num_distinct,
                "seconds": est.seconds,
                "forward_passes": est.forward_passes,
                **common,
            }
        )
        table = est.distinct_paths()
        records.append(
            {
                "method": method,
                "ids": [list(map(int, p)) for p in table["ids"]],
                "kinds": [str(k) for k in table["kind"]],
                "log_p": [json_float(x) for x in table["log_p"]],
                "log_q": None if est.log_q is None else [json_float(x) for x in table["log_q"]],
                "draws": [int(d) for d in table["draws"]],
            }
        )
    return rows, records


def score_requests(
    lm: LM,
    item: Item,
    requests: Sequence[Request],
    options: EvalOptions,
    *,
    skip: Callable[[int, str], bool] | None = None,
    should_stop: StopCheck | None = None,
) -> tuple[Rows, Rows]:
    """Rows and sample records of an item's requests by every method (skip(choice, method) to omit),
    in request order; requests that share a context share its prefill."""
    from marginal_core.estimators.marginalizer import by_context

    todo = [(req, [m for m in options.methods if not (skip and skip(req.choice, m))]) for req in requests]
    todo = [(req, methods) for req, methods in todo if methods]
    scored = {}
    for i, m in by_context(lm, [(req.context, req.continuation) for req, _ in todo]):
        scored[i] = score_continuation(m, todo[i][1], samples=options.samples, seed=options.seed,
                                       max_len=options.max_len, beam_width=options.beam_width,
                                       should_stop=should_stop)
    rows, records = [], []
    for i, (req, _) in enumerate(todo):
        key = {"item": item.id, "choice": req.choice, **req.columns}
        rows += [{**key, **row} for row in scored[i][0]]
        records += [{"item": item.id, "choice": req.choice, **rec} for rec in scored[i][1]]
    return rows, records


class _Run:
    """One evaluation of a task into a results folder (see evaluate)."""

    def __init__(self, task: Task, out: str | Path, options: EvalOptions, lm: LM | None) -> None:
        from marginal_core.models import DEFAULT_MODEL

        self.task, self.options, self.lm = task, options, lm
        self.items = task.load(options)
        self.model = lm.name if lm is not None else (options.model or DEFAULT_MODEL)
        self.device, self.dtype = self.placement()
        identity = {**task.identity(options, self.model), **({} if self.dtype == "float32" else {"dtype": self.dtype})}
        if "beam" in options.methods:  # runs without the beam keep the identity they had before it
            identity["beam_width"] = "auto" if options.beam_width is None else options.beam_width
        self.out, self.identity = Path(out), identity
        self.store: ResultStore | None = None  # opened once this run holds the folder's run lock
        self.done: set[tuple[str, int, str]] = set()
        self.records: dict[str, dict[str, Any]] = {}

    def open(self) -> None:
        """Open the results folder for writing (refusing another setup); the run lock is held."""
        self.store = ResultStore(self.out, self.identity, [*self.task.columns, *SCORE_COLUMNS])
        self.done = self.store.done
        self.records = self._stored_records()

    def opened(self) -> ResultStore:
        """The results folder's store, which open() makes."""
        if self.store is None:
            raise RuntimeError("the results folder is not open: call open() first")
        return self.store

    def _stored_records(self) -> dict[str, dict[str, Any]]:
        """The item records the folder holds, where the task keeps them."""
        return read_items(self.out) if self.task.keeps_records else {}

    @contextlib.contextmanager
    def writing(self, following: Following | None, should_stop: StopCheck | None) -> Iterator[bool]:
        """Hold the folder's run lock (for the task's part of its items) for the with-block,
        entered as True. If another run holds it: without ``following``, FolderBusy; with it,
        wait for that run to end, telling following how far it got, and enter as False (the lock
        not taken) if should_stop() ends the wait."""
        lock = self._take(following, should_stop)
        if lock is None:
            yield False
            return
        with lock:
            yield True

    def _take(self, following: Following | None, should_stop: StopCheck | None) -> RunLock | None:
        """The run lock, once free (see writing); None if the wait was stopped. A run that
        takes turns on a device gives its place to others while it waits (serving_hooks.aside)."""
        try:
            return RunLock.take(self.out, self.task.part)
        except FolderBusy as busy:
            if following is None:
                raise
            holder = busy.holder
        with serving_hooks.aside():
            while True:
                self.done = done_keys(self.out)
                self.records = self._stored_records()
                following(sum(map(self.finished, self.items)), len(self.items), holder)
                if should_stop and should_stop():
                    return None
                time.sleep(FOLLOW_POLL_S)
                try:
                    return RunLock.take(self.out, self.task.part)
                except FolderBusy as busy:
                    holder = busy.holder

    def placement(self) -> tuple[str, str]:
        """(device, dtype name) the run scores on: the model's, or what the options resolve to
        on this machine (``auto`` may differ between machines). The identity records a dtype
        other than float32 only: folders written before precision was an option hold float32
        runs and stay resumable."""
        from marginal_core.models import dtype_name, resolve_device, resolve_dtype

        if self.lm is not None:
            return self.lm.loaded.device, dtype_name(self.lm.dtype)
        device = resolve_device(self.options.device)
        return device, dtype_name(resolve_dtype(self.options.dtype, device))

    def finished(self, item: Item) -> bool:
        record = self.records.get(item.id)
        if self.task.keeps_records and record is None:
            return False
        return all(
            (item.id, req.choice, m) in self.done
            for req in self.task.requests(item, record)
            for m in self.options.methods
        )

    def loaded(self) -> LM:
        """The model, loaded on first use."""
        if self.lm is None:
            from marginal_core.models import load_model

            self.lm = load_model(self.model, device=self.options.device, dtype=self.options.dtype)
        return self.lm

    def score(self, item: Item, should_stop: StopCheck | None) -> tuple[Rows, Rows]:
        """An item's missing rows, its record made and stored first where it has none."""
        record = self.records.get(item.id)
        if self.task.keeps_records and record is None:
            record = self.records[item.id] = self.task.prepare(item, self.loaded(), self.options)
            self.opened().put_item(record)
        return score_requests(
            self.loaded(), item, self.task.requests(item, record), self.options,
            skip=lambda c, m: (item.id, c, m) in self.done, should_stop=should_stop,
        )

    def loop(self, started: float, progress: ItemProgress | None, should_stop: StopCheck | None) -> None:
        """Score the unfinished items in order, storing each one whole as soon as it is done.

        A stop (should_stop, max_items, or Cancelled while scoring) loses only the unfinished
        item; the session (with its wall time since started) is logged however the run ends.
        """
        todo = [item for item in self.items if not self.finished(item)]
        if not todo:
            return
        self.loaded()  # before the bar and the session: a model that fails to load logs no session
        total, max_items = len(self.items), self.options.max_items
        done_before, new = total - len(todo), 0
        label = f"{Path(str(self.task.dataset)).name} {self.model}"
        bar = tqdm_bar(total, label, done_before) if self.options.show_bar else None
        if progress:
            progress(done_before, total, None)
        try:
            for item in todo:
                if (should_stop and should_stop()) or (max_items is not None and new >= max_items):
                    break
                try:
                    rows, records = self.score(item, should_stop)
                except Cancelled:
                    break
                self.opened().append(rows, records)
                new += 1
                if bar is not None:
                    bar.update(1)
                if progress:
                    progress(done_before + new, total, item)
        finally:
            if bar is not None:
                bar.close()
            self.opened().log_session(started, new, methods=list(self.options.methods), limit=self.options.limit)


def evaluate(
    task: Task,
    out: str | Path,
    options: EvalOptions,
    *,
    lm: LM | None = None,
    progress: ItemProgress | None = None,
    should_stop: StopCheck | None = None,
    following: Following | None = None,
) -> dict[str, Any]:
    """Evaluate a task into a resumable results folder and return (and write) its report.

    Pass a loaded model as ``lm``, or name one in options.model (loaded only when an item is
    left to score). progress(done, total, item) follows every item; should_stop() ends the run
    between samples (the unfinished item is not written). While another run writes the folder,
    this one raises FolderBusy, or with ``following`` waits for it (following(done, total, holder)
    says how far it got) and then scores what it left; a stop while waiting returns the folder's
    report as it stands, unwritten.
    """
    from marginal_core.tasks.report import write_report

    started = time.time()
    run = _Run(task, out, options, lm)
    with run.writing(following, should_stop) as held:
        if held:
            run.open()
            run.loop(started, progress, should_stop)
        report = task.report(run.out, [item.id for item in run.items], options.methods)
        report.update(model=run.model, device=run.device, dtype=run.dtype)
        if held:
            write_report(run.out, report)
    return report
