"""The paper's Tables 1-4 regenerated on the embedded models, beside the paper's figures.

`make paper-tables` (or `python -m bench.paper_tables`) runs what its results folders lack,
then rewrites the section of docs/results.md between the paper-tables markers:

* Table 1: Spearman's rho of log p and log q over the distinct proxy samples of each sentence,
  mean and standard deviation by sentence length (about 50, 100 and 300 characters);
* Tables 2 and 3: the Q&A runs of `marginal eval-qa` (canonical, proxy, lattice and beam) on
  OpenBookQA, MedMCQA and ARC-Challenge: accuracy, speedup, proxy underestimation;
* Tables 4 and 3: the translation runs of `marginal eval-mt` (en-de, en-cs): chrF, speedup,
  proxy underestimation over the candidates.

Every run resumes (the task folders keep finished items, Table 1 keeps finished sentences in a
JSON-lines file), so Ctrl-C keeps what is done and a rerun only adds what is missing. The
default sizes take about an hour of one-thread CPU time (--dry-run prints the plan); --full
takes the paper's sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import date
from pathlib import Path
from typing import Any

from bench.paper_tables.runs import DEFAULT, FULL, MODELS, Part, Sizes, log_time, plan
from bench.paper_tables.section import RESULTS, section, write_section
from marginal_core.ground.cache_home import cache_root


def print_plan(parts: Sequence[Part], sizes: Sizes) -> None:
    print(f"sizes: {json.dumps(asdict(sizes))}")
    for p in parts:
        print(f"  table {p.table:<2} {p.model:<14} {p.dataset:<14} {p.todo:>4} of {p.total:<4} to run, "
              f"about {p.seconds / 60:5.1f} min")
    print(f"estimated: {sum(p.seconds for p in parts) / 60:.0f} min of one-thread CPU time, about the wall time "
          f"on a quiet machine (load now {os.getloadavg()[0]:.1f})", flush=True)


def run_parts(out: Path, parts: Sequence[Part], loads: list[float]) -> bool:
    """Run the parts that have work left, each model loaded once, noting the load average after
    each; False when stopped."""
    from marginal_core.models import load_model

    loaded: dict[str, Any] = {}
    try:
        for p in parts:
            if not p.todo:
                continue
            if p.model not in loaded:  # both embedded models fit in memory together
                loaded[p.model] = load_model(p.model, dtype="float32")
            print(f"table {p.table} {p.model} {p.dataset}: {p.todo} to run", file=sys.stderr, flush=True)
            wall, cpu = time.time(), time.process_time()
            try:
                p.run(loaded[p.model])
            finally:
                log_time(out, p, time.time() - wall, time.process_time() - cpu)
            loads.append(os.getloadavg()[0])
    except KeyboardInterrupt:
        print("\nstopped: the finished items are kept; writing the tables from them", file=sys.stderr)
        return False
    return True


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.paper_tables", description=__doc__.split("\n")[0])
    p.add_argument("--full", action="store_true", help="the paper's sizes (days on a CPU)")
    p.add_argument("--models", default=",".join(MODELS), help="models of Tables 1-3 (default: both embedded)")
    p.add_argument("--mt-models", default="gemma3-270m", help="models of Table 4 (default: gemma3-270m, as the paper)")
    p.add_argument("--tables", default="1,2,4", help="tables to run: 1, 2 (with 3), 4 (with 3) (default: all)")
    p.add_argument("--out", type=Path, default=cache_root() / "runs" / "paper-tables",
                   help="results folders (default: $MARGINAL_CACHE/runs/paper-tables)")
    p.add_argument("--results", type=Path, default=RESULTS, help="the markdown file with the markers")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--render-only", action="store_true", help="write the tables from what exists, run nothing")
    for field in ("t1_sentences", "t1_samples", "qa_questions", "qa_samples", "mt_sentences", "mt_samples"):
        p.add_argument("--" + field.replace("_", "-"), type=int, help=f"override the size {field}")
    return p.parse_args(argv)


def _torch_threads() -> str:
    """Torch's intra-op threads, in words ('not loaded' when nothing ran)."""
    torch = sys.modules.get("torch")
    return "torch not loaded" if torch is None else f"{torch.get_num_threads()} torch threads"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # a kill stops like Ctrl-C: the tables are still written
    sizes = FULL if args.full else DEFAULT
    sizes = replace(sizes, **{f: getattr(args, f) for f in ("t1_sentences", "t1_samples", "qa_questions",
                                                             "qa_samples", "mt_sentences", "mt_samples")
                              if getattr(args, f) is not None})
    models = [m for m in args.models.split(",") if m]
    mt_models = [m for m in args.mt_models.split(",") if m]
    tables = set(args.tables.split(","))
    command = "python -m bench.paper_tables" + ("" if argv is None and len(sys.argv) == 1 else
                                                " " + " ".join(sys.argv[1:] if argv is None else argv))
    started, load_start = time.time(), os.getloadavg()[0]
    parts = plan(args.out, models, mt_models, sizes, tables)
    print_plan(parts, sizes)
    if args.dry_run:
        return 0
    loads = [load_start]
    if not args.render_only:
        run_parts(args.out, parts, loads)
    loads.append(os.getloadavg()[0])
    info = {"threads": _torch_threads(), "render_only": args.render_only, "command": command,
            "date": date.today().isoformat(), "load_start": load_start, "load_end": loads[-1], "load_max": max(loads),
            "wall": time.time() - started}
    parts = plan(args.out, models, mt_models, sizes, tables)  # again, for what is now done
    write_section(section(args.out, models, mt_models, sizes, info, parts), args.results)
    print(f"wrote the paper-tables section of {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
