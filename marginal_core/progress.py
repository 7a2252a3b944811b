"""Progress reporting: the callback type the library's long runs take, and its tqdm drawing."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any

Progress = Callable[[float, int], None]
"""Called as progress(done, total) while work goes on; done may be fractional within a chunk."""

StopCheck = Callable[[], bool]
"""Polled between units of work; True asks the run to end, keeping what it finished."""


def _in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (a notebook draws widgets; a terminal IPython does not)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and "IPKernelApp" in shell.config


def tqdm_bar(total: int | None, desc: str, initial: int = 0, leave: bool = True) -> Any:
    """A tqdm bar on standard error (tqdm imported only when a bar is drawn): a widget in a
    notebook with ipywidgets, text elsewhere (tqdm.auto warns in a kernel without ipywidgets)."""
    if _in_kernel() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm(total=total, initial=initial, desc=desc, file=sys.stderr, leave=leave, dynamic_ncols=True)


def tqdm_progress(desc: str) -> tuple[Progress, Callable[[], None]]:
    """A (progress, close) pair that draws progress(done, total) on a tqdm bar, from the first
    report on: a run refused before any work (a budget, the model's window) prints its one line alone."""
    bar: Any = None

    def update(done: float, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm_bar(total, desc, leave=False)
        bar.total = total
        bar.n = int(done)  # whole samples: a chunk's fractional progress is the callback's, not the bar's
        bar.refresh()

    def close() -> None:
        if bar is not None:
            bar.close()

    return update, close
