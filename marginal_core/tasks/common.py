"""What the Q&A and translation experiments share: scoring one continuation by every method.

Each (context, continuation) pair gets one Marginalizer. Its canonical log p is computed first
and timed on its own, so neither the lattice nor the proxy timing includes it (both add the
same canonical term to their non-canonical estimate).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from marginal_core.errors import MarginalError

if TYPE_CHECKING:
    from marginal_core.tasks.store import ResultStore

T = TypeVar("T")

TASK_METHODS = ("canonical", "lattice", "proxy")

# Columns every row of both experiments has, after the task's own leading columns.
SCORE_COLUMNS = [
    "method",
    "log_marginal",
    "log_p_canonical",
    "log_noncanonical",
    "num_samples",
    "num_distinct",
    "seconds",
    "forward_passes",
    "num_bytes",
    "num_tokens_canonical",
    "num_paths",
]


def parse_methods(value: str | Sequence[str]) -> list[str]:
    """A comma list (or list) of methods, checked, in the order given, without repeats."""
    items = value.split(",") if isinstance(value, str) else list(value)
    methods = list(dict.fromkeys(m.strip().lower() for m in items if m.strip()))
    unknown = [m for m in methods if m not in TASK_METHODS]
    if unknown or not methods:
        raise MarginalError(
            f"unknown method(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(TASK_METHODS)}"
        )
    return methods


def score_continuation(
    lm: Any,
    context: str,
    continuation: str,
    methods: Sequence[str],
    *,
    samples: int,
    seed: int,
    max_len: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows (one per method) and sample records for one continuation given its context.

    Rows hold the SCORE_COLUMNS; sample records hold the distinct paths each method found
    (token ids, kind, log p, log q, draws). Rows lack the task's own key columns.
    """
    from marginal_core.analysis import distinct
    from marginal_core.estimators import Marginalizer

    m = Marginalizer(lm, continuation, context)
    log_p_canonical = m.log_p_canonical
    common = {
        "num_bytes": len(continuation.encode("utf-8")),
        "num_tokens_canonical": len(m.lattice.canonical),
        "num_paths": str(m.lattice.count()),
    }
    rows, records = [], []
    for method in methods:
        est = m.estimate(method, samples=samples, max_len=max_len, seed=seed, should_stop=should_stop)
        if est.cancelled:
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
        table = distinct(est)
        records.append(
            {
                "method": method,
                "ids": [list(map(int, p)) for p in table["ids"]],
                "kinds": [str(k) for k in table["kind"]],
                "log_p": [_json_float(x) for x in table["log_p"]],
                "log_q": None if est.log_q is None else [_json_float(x) for x in table["log_q"]],
                "draws": [int(d) for d in table["draws"]],
            }
        )
    return rows, records


class Cancelled(Exception):
    """should_stop asked the run to end; the unfinished item is not written."""


def _json_float(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def tqdm_bar(total: int, desc: str, initial: int = 0):
    """A tqdm bar on standard error."""
    import sys

    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, file=sys.stderr, dynamic_ncols=True)


def run_items(
    store: ResultStore,
    total: int,
    todo: Sequence[T],
    score: Callable[[T], tuple[list[dict[str, Any]], list[dict[str, Any]]]],
    *,
    label: str,
    started: float,
    progress: Callable[[int, int, T | None], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    show_bar: bool = True,
    max_items: int | None = None,
    **session: Any,
) -> None:
    """Score the unfinished items in order, storing each one whole as soon as it is done.

    A stop (should_stop, max_items, or Cancelled from score) loses only the unfinished item.
    progress(done, total, item) follows every item; the session (with its wall time since
    started) is logged however the run ends.
    """
    done_before, new = total - len(todo), 0
    bar = tqdm_bar(total, label, done_before) if show_bar else None
    if progress:
        progress(done_before, total, None)
    try:
        for item in todo:
            if (should_stop and should_stop()) or (max_items is not None and new >= max_items):
                break
            try:
                rows, records = score(item)
            except Cancelled:
                break
            store.append(rows, records)
            new += 1
            if bar is not None:
                bar.update(1)
            if progress:
                progress(done_before + new, total, item)
    finally:
        if bar is not None:
            bar.close()
        store.log_session(started, new, **session)
