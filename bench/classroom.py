"""Benchmark of the app serving a class: N browser sessions press Run at once on one server.

For each size N (`--sessions 1,8,16,32` runs each in turn, each against a fresh server):

- one `streamlit run app.py` (bench/support/browser.py's server; `--env KEY=VALUE` adds to its
  environment) and one headless Chromium at `nice -n 19`, every process and thread of it, so the
  browsers get what is left, as on the students' own machines; each session is a browser
  context of its own;
- each session opens Running estimates with a different sentence, no context, the lattice
  method alone (no exact line), k samples and the page's default seed 0; once every page has
  settled and the server is idle (the model loaded in the background), every session clicks
  Run at the same moment (a click scheduled in each page);
- per session, timed in the page itself: seconds from its click to the first estimate plotted
  and to "Done:", the first error or exception shown, and the first queue message seen while
  it waited (an element saying "ahead of yours" or "in the queue");
- the same two moments on the server's side, from its log (pages/_app/machine.py logs when each
  run first showed a result and when it ended): the browsers at nice 19 on the server's cores
  draw late while the server is busy, which a student's own machine would not, so the server's
  times are what a class sees, less its own browser's drawing;
- the server's memory (RSS of the streamlit process and its children, every 0.2 s): just
  before the clicks and the peak until every session has ended;
- the CPU seconds the server and the browsers used from the clicks to the last end (the
  browsers, drawing every session's page on the server's own cores, take what would be the
  students' machines' work);
- the serial reference, after the server has stopped: the same N estimates one after another
  in this process with the model loaded once (the library's ``Marginalizer(lm, text).estimate``
  in one chunk, which scores the canonical path too, as the app's run does), summed wall
  seconds, under the server's environment and the app's thread settings (OMP_WAIT_POLICY=PASSIVE;
  with OpenMP's default, at a load of 3 to 4, one SmolLM2 estimate took 14 s instead of 3.7 s).
  The CLI (`marginal estimate`) is not run: it would load the model once per estimate.

One markdown table with a row per N. Screenshots of the first and last session go to
test-output/bench-classroom/, the server's log to test-output/streamlit-PORT.log.

Run: .venv/bin/python -m bench.classroom [--sessions 1,8,16,32] [--model gemma3-270m]
     [--dtype float32] [--samples 100] [--timeout 900] [--env KEY=VALUE ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

import psutil

import pages._app  # noqa: F401 -- the app's process settings (OMP_WAIT_POLICY), for the serial reference too
from bench.support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    cpu_seconds,
    new_page,
    settle,
    streamlit_server,
    wait_until_idle,
)

ROOT = Path(__file__).resolve().parent.parent

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

OUTPUT = ROOT / "test-output" / "bench-classroom"
SEED = 0  # the running-estimates page's default seed
POLL_S = 1.0  # how often the bench asks the pages whether their runs have ended
PLOT = "[data-testid=stPlotlyChart] .scatterlayer .trace"  # an estimate plotted (the empty axes have none)

# One per session, all different (a shared text would share its cached result).
SENTENCES = [
    " The old lighthouse keeper climbed the stairs every evening.",
    " My neighbour grows tomatoes and beans in her small garden.",
    " The train to the coast was delayed by almost an hour today.",
    " We watched the children build a sandcastle near the water.",
    " He forgot his umbrella on the bus and got soaked on the way home.",
    " The library closes early on Sundays during the summer months.",
    " A small bakery on the corner sells the best bread in town.",
    " She practised the piano for two hours before the concert.",
    " The committee postponed its decision until the next meeting.",
    " Our teacher asked us to read the first three chapters by Friday.",
    " The cat slept on the warm windowsill all afternoon.",
    " They hiked up the hill to watch the sunrise over the valley.",
    " The museum opened a new exhibition about ancient maps.",
    " I usually drink a cup of tea before I start working.",
    " The farmer checked the fences after the storm last night.",
    " A gentle breeze carried the smell of pine through the forest.",
    " The students cheered when the results were finally announced.",
    " My grandfather still writes letters by hand to his old friends.",
    " The river rose quickly after three days of heavy rain.",
    " We painted the kitchen a pale shade of green last weekend.",
    " The pilot announced that we would land twenty minutes early.",
    " Fresh snow covered the village streets on Christmas morning.",
    " The shop assistant helped me find a jacket in my size.",
    " Every spring the swallows return to nest under our roof.",
    " The orchestra tuned their instruments before the curtain rose.",
    " He fixed the broken chair with some glue and a few nails.",
    " The doctor told him to rest and drink plenty of water.",
    " A long queue formed outside the cinema for the premiere.",
    " The fishermen set out before dawn to reach the deep water.",
    " She wrote her name carefully at the top of the exam paper.",
    " The bridge was closed for repairs throughout the month of May.",
    " Our dog waits by the door every day when the children come home.",
    " The chef tasted the soup and added a pinch of salt.",
    " Thousands of people gathered in the square to hear the speech.",
    " The garden looked beautiful after the gardener trimmed the hedges.",
    " He carried the heavy boxes up to the third floor without help.",
    " The clock in the hall stopped at exactly half past seven.",
    " We found an old photograph of our grandparents in the attic.",
    " The volunteers cleaned the beach and collected bags of plastic.",
    " A quiet street runs between the church and the primary school.",
]

# Installed in every page before the click: records, in seconds from the click, when the first
# estimate is plotted, when "Done:" shows, the first error, and the first queue message seen
# before Done; then clicks Run at the epoch millisecond `at` (the same for every session).
MONITOR_JS = """([at, plot]) => {
  const s = window.__classroom = {clicked: null, first: null, done: null, done_text: null, error: null,
                                  error_at: null, queue: null, queue_at: null};
  const since = () => Date.now() / 1000 - s.clicked;
  const phrases = ["ahead of yours", "in the queue"];
  const shown = el => ["SCRIPT", "STYLE", "NOSCRIPT"].includes(el.tagName) ? "" : (el.innerText ?? "").toLowerCase();
  const deepest = (phrase) => {  // the innermost element whose visible text holds the phrase
    let el = document.body;
    for (;;) {
      const child = [...el.children].find(c => shown(c).includes(phrase));
      if (!child) return el;
      el = child;
    }
  };
  const check = () => {
    if (s.first === null && document.querySelector(plot)) s.first = since();
    const done = [...document.querySelectorAll("[data-testid=stAlertContentSuccess]")]
      .find(e => e.textContent.includes("Done:"));
    if (done && s.done === null) { s.done = since(); s.done_text = done.textContent.trim(); }
    const error = document.querySelector("[data-testid=stException], [data-testid=stAlertContentError]");
    if (error && s.error === null) { s.error_at = since(); s.error = error.textContent.trim().slice(0, 300); }
    if (s.queue === null && !done) {
      const body = shown(document.body);
      const phrase = phrases.find(p => body.includes(p));
      if (phrase) { s.queue_at = since(); s.queue = deepest(phrase).innerText.trim().slice(0, 300); }
    }
    if (done || error) clearInterval(timer);
  };
  let timer = null;
  setTimeout(() => {
    s.clicked = Date.now() / 1000;
    document.querySelector(".st-key-run button").click();
    timer = setInterval(check, 100);
  }, Math.max(0, at - Date.now()));
}"""


@dataclass
class Session:
    """One browser session's run: times in seconds from its click (None: not seen)."""

    text: str
    clicked: float | None = None  # epoch seconds of the click
    first: float | None = None  # the first estimate plotted
    done: float | None = None  # "Done:" shown
    done_text: str | None = None
    error: str | None = None  # the first error or exception shown
    error_at: float | None = None
    queue: str | None = None  # the first queue message seen before Done
    queue_at: float | None = None

    @property
    def ended(self) -> float | None:
        """Seconds from the click to Done or to an error, whichever came."""
        return self.done if self.done is not None else self.error_at


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


@contextlib.contextmanager
def low_priority_chromium() -> Iterator[Browser]:
    """Debian's Chromium under Playwright, headless, started through a wrapper at nice 19. As
    root it also runs without CAP_SYS_NICE: Chromium would otherwise set its processes back to 0
    (-8 for its display threads)."""
    from playwright.sync_api import sync_playwright

    keep_low = "setpriv --bounding-set -sys_nice " if os.geteuid() == 0 else ""
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        wrapper = Path(tmp) / "chromium"
        wrapper.write_text(f'#!/bin/sh\nexec {keep_low}nice -n 19 {CHROMIUM} "$@"\n')
        wrapper.chmod(0o755)
        browser = p.chromium.launch(executable_path=str(wrapper), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def browser_cpu_seconds() -> float:
    """CPU seconds (user and system) used so far by the Chromium processes started by this one."""
    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.name().startswith("chrom"):
                times = proc.cpu_times()
                total += times.user + times.system
    return total


def browser_niceness() -> set[int]:
    """The niceness of the threads of the Chromium processes started by this one (through
    Playwright's driver)."""
    procs = [p for p in psutil.Process().children(recursive=True) if p.name().startswith("chrom")]
    return {os.getpriority(os.PRIO_PROCESS, t.id) for p in procs for t in p.threads()}


def running_url(base: str, args: argparse.Namespace, text: str) -> str:
    """Running estimates for text alone (no context): the lattice method, k samples, the default seed."""
    query = {"model": args.model, "dtype": args.dtype, "text": text, "context": "", "k": args.samples,
             "seed": SEED, "methods": "lattice", "exact": "false"}
    return f"{base}/running?{urlencode(query, quote_via=quote)}"


def open_sessions(browser: Browser, base: str, args: argparse.Namespace, texts: list[str]) -> list[Page]:
    """One context per text on Running estimates, each settled, with its text and no context."""
    pages = [new_page(browser, 1400, 1000) for _ in texts]
    for page, text in zip(pages, texts):
        page.goto(running_url(base, args, text))
    for page, text in zip(pages, texts):
        page.get_by_text("Press Run to start scoring").wait_for()
        settle(page)
        shown = (page.get_by_label("Text", exact=True).input_value(),
                 page.get_by_label("Context (optional)", exact=True).input_value())
        if shown != (text, ""):
            raise RuntimeError(f"the page shows text and context {shown!r}, not {(text, '')!r}")
    return pages


def click_all(pages: list[Page]) -> None:
    """Install the monitor in every page and have each click Run at the same moment (the
    scheduling takes a round trip per page, so the moment is set that far ahead)."""
    at = (time.time() + 1.0 + 0.1 * len(pages)) * 1000
    for page in pages:
        page.evaluate(MONITOR_JS, [at, PLOT])


def wait_for_ends(pages: list[Page], sessions: list[Session], timeout: float) -> None:
    """Poll the pages' records into sessions until every session has ended (Done or an error)
    or timeout seconds have passed."""
    deadline = time.monotonic() + timeout
    pending = dict(enumerate(pages))
    while pending and time.monotonic() < deadline:
        time.sleep(POLL_S)
        for i, page in list(pending.items()):
            sessions[i] = replace(sessions[i], **page.evaluate("() => window.__classroom"))
            if sessions[i].ended is not None:
                del pending[i]


def screenshot_ends(pages: list[Page]) -> list[str]:
    """Screenshots of the first and the last session; their paths."""
    paths = []
    for i in sorted({0, len(pages) - 1}):
        paths.append(str(OUTPUT / f"n{len(pages)}-session{i + 1}.png"))
        pages[i].screenshot(path=paths[-1])
    return paths


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
    return Size(sessions, memory.before, memory.peak, load_before, load_after, nice, shots, serial_seconds(args, texts),
                logged["first result"], logged["ended"], *cpu)


def serial_seconds(args: argparse.Namespace, texts: list[str]) -> float:
    """Wall seconds of the same lattice estimates (canonical score included) one after another,
    with the model loaded once beforehand (not counted)."""
    from marginal_core.estimators import Marginalizer
    from marginal_core.models import load_model

    lm = load_model(args.model, dtype=args.dtype)
    started = time.perf_counter()
    for text in texts:
        Marginalizer(lm, text).estimate("lattice", samples=args.samples, seed=SEED)
    return time.perf_counter() - started


def spread(values: list[float]) -> str:
    """min / median / max seconds, or - when there are none."""
    if not values:
        return "-"
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f} s"


def table_row(n: int, size: Size, timeout: float) -> str:
    """The table's row for size n."""
    s = size.sessions
    makespan = size.makespan
    span = f"{makespan:.1f} s" if makespan is not None else f"> {timeout:.0f} s (not all ended)"
    ratio = f"{makespan / size.serial:.2f}x" if makespan is not None else "-"
    queued = sum(x.queue is not None for x in s)
    ended = size.since_clicks(size.server_ended)
    server_span = f"{max(ended):.1f} s ({max(ended) / size.serial:.2f}x)" if len(ended) == n else f"{len(ended)} of {n} ended"
    return (f"| {n} | {sum(x.done is not None for x in s)} | {sum(x.error is not None for x in s)} "
            f"| {spread([x.first for x in s if x.first is not None])} "
            f"| {spread([x.done for x in s if x.done is not None])} | {span} | {size.serial:.1f} s | {ratio} "
            f"| {spread(size.since_clicks(size.server_first))} | {spread(ended)} | {server_span} "
            f"| {size.memory_before:.2f} → {size.memory_peak:.2f} | {queued or '-'} |")


def print_report(args: argparse.Namespace, sizes: dict[int, Size], load_before: tuple[float, float, float],
                 load_after: tuple[float, float, float]) -> None:
    print(f"\nmodel {args.model}, dtype {args.dtype}, lattice k = {args.samples}, seed {SEED}, no context; "
          f"server env: {' '.join(args.env) or 'none'}")
    print("| sessions | finished | errors | click→first estimate min/median/max | click→Done min/median/max "
          "| makespan | serial (same N estimates, one process) | makespan / serial "
          "| server: first result min/median/max | server: run ended min/median/max | server: makespan (/ serial) "
          "| server memory before Run → peak (GiB) | queue message seen (sessions) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, size in sizes.items():
        print(table_row(n, size, args.timeout))
    for n, size in sizes.items():
        queue = next((f"{x.queue!r} at {x.queue_at:.1f} s" for x in size.sessions if x.queue), "-")
        errors = [x.error for x in size.sessions if x.error]
        print(f"N = {n}: clicks within {size.click_spread:.2f} s; browser threads at nice {sorted(size.browser_nice)}"
              f"; load (1 min) {size.load_before:.2f} → {size.load_after:.2f}; CPU seconds from the clicks to the "
              f"last end: server {size.server_cpu:.1f}, browsers {size.browser_cpu:.1f}; first queue message: {queue}"
              + (f"; first error: {errors[0]!r}" if errors else ""))
    print("load average (1/5/15 min): before " + " / ".join(f"{x:.2f}" for x in load_before)
          + ", after " + " / ".join(f"{x:.2f}" for x in load_after) + f"; screenshots in {OUTPUT}")


def sizes(text: str) -> list[int]:
    """--sessions: comma-separated sizes, each 1 to len(SENTENCES)."""
    try:
        values = [int(n) for n in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated numbers: {text!r}") from None
    if not all(1 <= n <= len(SENTENCES) for n in values):
        raise argparse.ArgumentTypeError(f"each size must be 1 to {len(SENTENCES)}: {text!r}")
    return values


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", dest="sizes", type=sizes, default="8", metavar="N[,N...]",
                        help=f"Sizes N, comma-separated (e.g. 1,8,16,32), each 1 to {len(SENTENCES)}.")
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--dtype", default="float32", choices=("auto", "float32", "bfloat16"))
    parser.add_argument("--samples", type=int, default=100, help="Lattice samples k per session.")
    parser.add_argument("--timeout", type=float, default=900.0, help="Seconds each size may take after the clicks.")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="An environment variable for the server and the serial reference (repeatable).")
    parser.add_argument("--json", type=Path, help="Write every session's numbers here.")
    args = parser.parse_args()
    if not all("=" in kv for kv in args.env):
        parser.error("--env takes KEY=VALUE")
    return args


def main() -> None:
    args = parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    os.environ.update(env)  # the server copies this environment; the serial reference runs in it
    OUTPUT.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    sizes = {}
    for n in args.sizes:
        print(f"N = {n}…", file=sys.stderr, flush=True)
        sizes[n] = run_size(n, args)
    print_report(args, sizes, load_before, os.getloadavg())
    if args.json:
        dump = {"model": args.model, "dtype": args.dtype, "samples": args.samples, "seed": SEED, "env": env,
                "sizes": {n: {**asdict(s), "browser_nice": sorted(s.browser_nice), "makespan": s.makespan,
                              "click_spread": s.click_spread}
                          for n, s in sizes.items()}}
        args.json.write_text(json.dumps(dump, indent=2))


if __name__ == "__main__":
    main()
