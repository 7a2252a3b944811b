"""The classroom bench's measurement of one size N: the server's side and the serial reference.

N sessions press Run at once on a fresh server (its memory sampled, its log read for when each
run first showed a result and ended, its and the browsers' CPU seconds), then the same N
estimates run one after another in this process.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

import pages._app  # noqa: F401 -- the app's process settings (OMP_WAIT_POLICY), for the serial reference too
from bench.classroom.sentences import SENTENCES
from bench.classroom.sessions import (
    SEED,
    Session,
    browser_cpu_seconds,
    browser_niceness,
    click_all,
    low_priority_chromium,
    open_sessions,
    screenshot_ends,
    wait_for_ends,
)
from bench.support.browser import cpu_seconds, streamlit_server, wait_until_idle


@dataclass
class Size:
    """One size's measurements."""

    sessions: list[Session]
    memory_before: float  # GiB
    memory_peak: float
    load_before: float  # 1-minute load average, before the server starts and after it stops
    load_after: float
    browser_nice: set[int]  # the niceness of the browser's threads
    screenshots: list[str]
    serial: float  # seconds for the same estimates in one process, one after another
    serial_cpu: float  # ... and the CPU seconds that process used for them
    server_first: list[float]  # epoch seconds at which the server's runs first showed a result
    server_ended: list[float]  # ... and at which those runs ended
    server_cpu: float  # CPU seconds the server used from the clicks to the last end
    browser_cpu: float  # ... and the browsers

    @property
    def click_spread(self) -> float:
        """Seconds between the first and the last click."""
        clicks = [s.clicked for s in self.sessions if s.clicked is not None]
        return max(clicks) - min(clicks) if clicks else float("nan")

    @property
    def makespan(self) -> float | None:
        """Seconds from the first click to the last session's end (None: some never ended)."""
        if any(s.ended is None for s in self.sessions):
            return None
        return max(s.clicked + s.ended for s in self.sessions) - min(s.clicked for s in self.sessions)

    def since_clicks(self, moments: list[float]) -> list[float]:
        """Epoch moments as seconds after the first click."""
        first_click = min(s.clicked for s in self.sessions if s.clicked is not None)
        return [t - first_click for t in moments]


RUN_LOG = re.compile(r"run \S+: (first result|ended) .*\(at=([0-9.]+) ")


def server_moments(log: Path) -> dict[str, list[float]]:
    """The epoch moments the server logged for its runs, by event ('first result', 'ended')."""
    moments: dict[str, list[float]] = {"first result": [], "ended": []}
    for event, at in RUN_LOG.findall(log.read_text(encoding="utf-8", errors="replace")):
        moments[event].append(float(at))
    return moments


class ServerMemory:
    """Resident memory (GiB) of a process and its children: at the start, and its peak while
    a background thread samples it every `every` seconds (inside the `with`)."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.process = psutil.Process(pid)
        self.every = every
        self.before = self.peak = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="server memory", daemon=True)

    def rss(self) -> float:
        total = 0
        with contextlib.suppress(psutil.NoSuchProcess):
            for proc in [self.process, *self.process.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    total += proc.memory_info().rss
        return total / 2**30

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> ServerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_size(n: int, args: argparse.Namespace) -> Size:
    """N sessions against a fresh server, then the same N estimates in one process."""
    texts = SENTENCES[:n]
    sessions = [Session(text) for text in texts]
    load_before = os.getloadavg()[0]
    with streamlit_server(preload=None) as server, low_priority_chromium() as browser:
        pages = open_sessions(browser, server.url, args, texts)
        wait_until_idle(server.pid, timeout=args.timeout)
        nice = browser_niceness()
        with ServerMemory(server.pid) as memory:
            cpu = cpu_seconds(server.pid), browser_cpu_seconds()
            click_all(pages)
            wait_for_ends(pages, sessions, args.timeout)
            cpu = cpu_seconds(server.pid) - cpu[0], browser_cpu_seconds() - cpu[1]
        shots = screenshot_ends(pages)
    load_after = os.getloadavg()[0]
    logged = server_moments(server.log)
    return Size(sessions, memory.before, memory.peak, load_before, load_after, nice, shots, *serial_seconds(args, texts),
                logged["first result"], logged["ended"], *cpu)


def serial_seconds(args: argparse.Namespace, texts: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of the same lattice estimates (canonical score included) one after
    another, with the model loaded once beforehand (not counted)."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model

    lm = load_model(args.model, dtype=args.dtype)
    started, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        Marginalizer(lm, text).estimate("lattice", samples=args.samples, seed=SEED)
    return time.perf_counter() - started, time.process_time() - cpu
