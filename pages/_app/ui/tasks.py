"""What the downstream task pages share: where the app keeps their results folders, the Run row
(running a task under a progress bar with Stop, how long the items left will take), the speed
figures of a task report, and the samples behind one score."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streamlit as st

from marginal_core import TASK_METHODS
from marginal_core.ground.cache_home import cache_root
from marginal_core.tasks.report import complete_items, load_rows
from marginal_core.tasks.store import read_samples, read_sessions
from pages._app.runtime import loaders, server
from pages._app.runtime.live import Bar, stop_button
from pages._app.ui import wrapped_tables
from pages._app.ui.error_messages import guard
from pages._app.ui.task_tables import SAMPLE_TEXT_WIDTHS, samples_table

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator


def app_folder(task: str, **identity: Any) -> Path:
    """A results folder for the app, one per setup, under $MARGINAL_CACHE/runs (so runs resume
    and accumulate across sessions: a larger limit or another method only adds rows)."""
    digest = hashlib.sha1(json.dumps({"task": task, **identity}, sort_keys=True).encode()).hexdigest()[:12]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(identity.get("dataset", "")))[-40:]
    return cache_root() / "runs" / f"{task}-{name}-{digest}"


def run_task(run: Callable[..., object], unit: str, doing: str, describe: Callable[[Any], str]) -> None:
    """Run a task (run(progress=..., should_stop=..., following=...)) under a progress bar that
    counts items and names the last; a Stop ends it after the item in progress (finished items
    stay on disk). While another session runs the same setup, the bar follows that run, and this
    one scores only what it leaves (one run per results folder: marginal_core.tasks.writer)."""
    bar = Bar(doing.capitalize())

    def progress(done: int, total: int, item: object | None) -> None:
        last = f" · last: {describe(item)[:80]}" if item is not None else ""
        bar.update(done / max(total, 1), f"{done} of {total} {unit} done{last}")

    def following(done: int, total: int, holder: str) -> None:
        bar.update(done / max(total, 1), f"Another session is running these {unit} now: {done} of {total} done. "
                                         "This page shows them as they finish and goes on with any it leaves.")

    with guard(doing):
        run(progress=progress, should_stop=bar.should_stop, following=following)
    if bar.token.is_set():
        st.stop()
    bar.empty()


def run_row(key: str, folder: Path, ids: list[str], methods: list[str], size: str, unit: str, prior: str,
            start: Callable[[], None]) -> None:
    """The Run and Stop buttons, with the run's size, the time its items left will take and its
    folder beside them; Run calls start() and then refreshes that note."""
    b = st.columns([1, 1, 6])
    run = b[0].button("▶ Run", type="primary", key=f"{key}_run")
    stop_button(b[1])
    note = b[2].empty()

    where = f" · results in `{folder}`" if server.policy().shows_server_paths else ""  # class mode: no server path

    def describe() -> None:
        done = len(complete_items(load_rows(folder), methods, ids)) if (folder / "rows.csv").is_file() else 0
        note.caption(f"{size}: {time_note(folder, len(ids) - done, unit, prior)}{where}")

    describe()
    if run:
        start()
        describe()


def samples_view(folder: Path, item: str, label: str, choices: list[str], methods: list[str],
                 keys: tuple[str, str], model: str) -> None:
    """Pick one choice of an item and a method; the distinct tokenizations that method scored for
    it (proxy: with log q and how often each was drawn), most probable first. ``keys`` name the
    two pickers in the URL."""
    _choice_from_url(keys[0], choices)
    d = st.columns(2)
    choice = d[0].selectbox(label, range(len(choices)), format_func=lambda i: choices[i], key=keys[0],
                            bind="query-params")
    method = d[1].selectbox("Samples of", methods, key=keys[1], bind="query-params")
    record = read_samples(folder, item).get((item, choice, method))
    st.caption("The distinct tokenizations the method scored for this choice (proxy: with log q and how often "
               "each was drawn), most probable first.")
    wrapped_tables.wrapped_dataframe(samples_table(record, loaders.vocabulary(model)), SAMPLE_TEXT_WIDTHS)


def _choice_from_url(key: str, choices: list[str]) -> None:
    """Honour a choice's index in the URL (``qa_answer=3``): the bound selectbox itself reads
    only its label there. A label equal to the number wins (an answer that reads "3")."""
    raw = st.query_params.get(key, "")
    if key not in st.session_state and raw.isdigit() and raw not in choices and int(raw) < len(choices):
        st.session_state[key] = int(raw)


def scoring_settings(cells: Sequence[DeltaGenerator], prefix: str, help_k: str | None = None) -> tuple[int, int, list[str]]:
    """A task page's samples k (capped by the server), seed and methods in three cells, bound to
    the URL as PREFIX_k, PREFIX_seed and PREFIX_methods; no method picked stops the page."""
    top = server.policy().cap_samples(10_000)
    k = int(cells[0].number_input("Samples k", min_value=1, max_value=top, value=min(32, top), key=f"{prefix}_k",
                                  bind="query-params", help=help_k))
    seed = int(cells[1].number_input("Seed", min_value=0, value=0, key=f"{prefix}_seed", bind="query-params"))
    methods = cells[2].multiselect("Methods", list(TASK_METHODS), default=list(TASK_METHODS), key=f"{prefix}_methods",
                                   bind="query-params")
    if not methods:
        st.info("Pick at least one method.")
        st.stop()
    return k, seed, methods


def duration(seconds: float) -> str:
    """A duration for people: '40 s', '12 min', '3.5 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def time_note(folder: Path, left: int, unit: str, prior: str) -> str:
    """How long the items left will take: measured per item in this folder's earlier runs (their
    wall time over the items they finished), else ``prior``, a plain statement of the scale."""
    if left <= 0:
        return f"every {unit} is scored"
    sessions = [s for s in read_sessions(folder) if s.get("items_done")] if folder.is_dir() else []
    done = sum(int(s["items_done"]) for s in sessions)
    if not done:
        return prior
    per = sum(float(s.get("wall_seconds", 0.0)) for s in sessions) / done
    return (f"earlier runs here took {duration(per)} per {unit}, so the {left} left take about "
            f"{duration(per * left)}")


def speed_metrics(report: dict[str, Any], left: DeltaGenerator, right: DeltaGenerator, unit: str) -> None:
    """The lattice-over-proxy speedup and the proxy underestimation ratio of a task report."""
    if report.get("speedup"):
        left.metric("lattice speedup", f"{report['speedup']:.2f}×", help="total proxy seconds / total lattice seconds")
    if report.get("underestimation_ratio") is not None:
        right.metric("proxy < lattice", f"{100 * report['underestimation_ratio']:.1f}%",
                     help=f"Share of {unit} where proxy's non-canonical estimate is below the lattice lower bound.")
