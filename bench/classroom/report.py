"""The classroom bench's report: a markdown table with a row per size, and a line of notes each.

The notes: the clicks' spread, the browsers' niceness, load, CPU seconds, the first queue
message and the first error.
"""

from __future__ import annotations

import argparse
import statistics

from bench.classroom.measure import Size
from bench.classroom.sessions import OUTPUT, SEED


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
              f"last end: server {size.server_cpu:.1f} ({size.server_cpu / size.serial_cpu:.2f}x the serial "
              f"estimates' {size.serial_cpu:.1f}), browsers {size.browser_cpu:.1f}; first queue message: {queue}"
              + (f"; first error: {errors[0]!r}" if errors else ""))
    print("load average (1/5/15 min): before " + " / ".join(f"{x:.2f}" for x in load_before)
          + ", after " + " / ".join(f"{x:.2f}" for x in load_after) + f"; screenshots in {OUTPUT}")
