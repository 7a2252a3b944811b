"""Seconds the Results folders page takes on a scan folder of two models, and its comparison's figures.

Each of --runs runs opens the page headless (streamlit.testing AppTest, a fresh script run as a
shared link opens it: the router, the folder's scan.parquet read, the texts table and the "Compare
models" section with both scatters). It prints the comparison's figures (Spearman's rho of the
gains, texts that flip and that move by 0.1 nats or more), the median and worst seconds of a page
run, and the seconds of the comparison alone (table read, paired table, rho, both figures).

With --browser, it also times the page in Chromium (the app's server, as `make app` starts it): a
fresh page load to both scatters drawn, each of --runs times in a new session.

Run: .venv/bin/python -m bench.compare_render DIR [--runs 5] [--browser]
     (DIR: the --out of `marginal scan FILE --models a,b --out DIR`)
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench.support.apptest import app
from marginal_core.corpus.scan_compare import comparisons
from marginal_core.viz.charts import paired_scatter
from pages._app.runtime.folders import scan_table

ROOT = Path(__file__).resolve().parent.parent


def comparison_seconds(folder: Path) -> float:
    """Seconds of the comparison alone: the tidy table read, the first pair's table, rho, both figures."""
    start = time.perf_counter()
    comparison = comparisons(scan_table(folder))[0]
    _ = comparison.rho, comparison.flips
    for value in ("gain_nats", "log_p_text"):
        paired_scatter(comparison.paired, comparison.a, comparison.b, value, value, value).to_json()
    return time.perf_counter() - start


def browser_seconds(folder: Path, runs: int) -> list[tuple[float, float]]:
    """Seconds from opening the Results folders page on folder (a new session each time) to its
    title, and to both scatters of its comparison drawn, in Chromium."""
    from urllib.parse import quote

    from bench.support.browser import chromium, new_page, settle, streamlit_server

    (ROOT / "test-output" / "browser").mkdir(parents=True, exist_ok=True)  # the server's log
    seconds = []
    with chromium() as browser, streamlit_server() as server:
        for _ in range(runs + 1):  # the first warms the server's imports
            page = new_page(browser, 1400, 2400)
            start = time.perf_counter()
            page.goto(f"{server.url}/results?folder={quote(str(folder.resolve()))}")
            page.locator("h1").first.wait_for()
            title = time.perf_counter() - start
            page.get_by_text("Spearman").first.wait_for()
            page.locator("[data-testid=stPlotlyChart] .scatterlayer .trace").nth(1).wait_for()
            seconds.append((title, time.perf_counter() - start))
            settle(page)
            page.context.close()
    return seconds[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also time the page in Chromium")
    args = parser.parse_args()
    first = comparisons(scan_table(args.folder))[0]
    figures = first.as_json()
    rho = "n/a" if figures["gain_rho"] is None else f"{figures['gain_rho']:.3f}"
    print(f"{figures['a']} against {figures['b']}: {figures['texts']} texts, Spearman's rho of the gains {rho}, "
          f"{figures['flips']} flip, {figures['moved']} move >= 0.1 nats")
    page = []
    for _ in range(args.runs):
        start = time.perf_counter()
        at = app("pages/tasks/results.py", folder=str(args.folder))
        page.append(time.perf_counter() - start)
        if at.exception or at.error or "Compare models" not in [s.value for s in at.subheader]:
            raise SystemExit(f"the page did not show the comparison: {at.exception or at.error}")
    alone = [comparison_seconds(args.folder) for _ in range(args.runs)]
    print(f"page run (AppTest, {args.runs} runs): median {statistics.median(page):.2f} s, worst {max(page):.2f} s "
          f"(the first {page[0]:.2f} s); the comparison alone: median {statistics.median(alone):.3f} s")
    if args.browser:
        shown = browser_seconds(args.folder, args.runs)
        drawn = [d for _, d in shown]
        print(f"in Chromium ({args.runs} sessions), page load to its title: median "
              f"{statistics.median(t for t, _ in shown):.2f} s; to both scatters drawn: median "
              f"{statistics.median(drawn):.2f} s, worst {max(drawn):.2f} s")


if __name__ == "__main__":
    main()
