"""The `marginal` command line: one subcommand per view of a text's tokenizations.

Every subcommand prints a readable summary, or one JSON object with ``--json`` (exact counts as
decimal strings). Errors the user can fix print one line to standard error, never a traceback
(``errors.run_cli``). ``lattice`` and ``sample`` need no model: they import neither torch nor
transformers; ``estimate`` imports the estimators when it runs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from marginal_core.api.comparison import difference, figures, labels, parse_sides, run_methods
from marginal_core.cli.model_commands import add_beam_width, add_device_arguments
from marginal_core.cli.next_command import add_next_command
from marginal_core.cli.surprisal_command import add_command as add_surprisal_command
from marginal_core.cli.task_commands import add_commands as add_task_commands
from marginal_core.cli.task_commands import task_summary
from marginal_core.cli.text_input import read_text
from marginal_core.estimators.beam_width import Round, describe_rounds, parse_width
from marginal_core.estimators.methods import METHODS, Method, parse_methods
from marginal_core.ground.errors import MarginalError, run_cli
from marginal_core.ground.progress import Progress, tqdm_progress
from marginal_core.lattice.graph import DEFAULT_LENGTH_MARGIN, Lattice, lattice_of
from marginal_core.lattice.sampling import lattice_samples, num_candidates
from marginal_core.lattice.vocab import vocabulary
from marginal_core.models import DEFAULT_MODEL, load_text_tokenizer
from marginal_core.search.settings import DEFAULT_TOLERANCE

if TYPE_CHECKING:  # the estimators import torch: only the commands that run a model import them
    from marginal_core.estimators.estimate_options import EstimateOptions
    from marginal_core.estimators.estimate_result import Estimate
    from marginal_core.estimators.marginalizer import Marginalizer


class Timer:
    """Collects named wall-clock durations in seconds."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result = fn()
        self.seconds[name] = round(time.perf_counter() - start, 6)
        return result


def load_lattice(args: argparse.Namespace, timer: Timer) -> Lattice:
    """Tokenizer, vocabulary index and lattice for the command's text, each timed."""
    tokenizer = timer("tokenizer_s", lambda: load_text_tokenizer(args.model))
    timer("index_s", lambda: vocabulary(tokenizer))
    return timer("lattice_s", lambda: lattice_of(read_text(args.text), tokenizer))


def lattice_command(args: argparse.Namespace) -> dict[str, Any]:
    """Sizes and exact counts of the lattice."""
    lat = load_lattice(args, Timer())
    bounded = lat.count(args.max_len) if args.max_len is not None else None
    return {
        "text": lat.text,
        "model": args.model,
        "num_nodes": lat.num_nodes,
        "num_arcs": lat.num_arcs,
        "num_paths": str(lat.count()),
        "max_len": args.max_len,
        "num_paths_max_len": None if bounded is None else str(bounded),
        "canonical": list(lat.canonical),
        "canonical_tokens": lat.pieces(lat.canonical),
        "off_by_one": len(lat.splits),  # one off-by-one path per split
    }


def sample_command(args: argparse.Namespace) -> dict[str, Any]:
    """Algorithm 1's samples: the off-by-one set, then uniform paths of at most L tokens."""
    timer = Timer()
    lat = load_lattice(args, timer)
    max_len = args.max_len if args.max_len is not None else lat.default_max_len()
    samples = timer(
        "sample_s", lambda: lattice_samples(lat, args.samples, max_len=max_len, seed=args.seed)
    )
    return {
        "text": lat.text,
        "model": args.model,
        "max_len": max_len,
        "seed": args.seed,
        "canonical": list(lat.canonical),
        "num_candidates": str(num_candidates(lat, max_len)),
        "samples": [{"ids": list(s.ids), "kind": s.kind} for s in samples],
        "timings": {k: timer.seconds[k] for k in ("index_s", "lattice_s", "sample_s")},
    }


def _options(args: argparse.Namespace) -> EstimateOptions:
    """The estimate options the command's flags give."""
    from marginal_core.estimators.estimate_options import EstimateOptions

    return EstimateOptions(samples=args.samples, max_len=args.max_len, seed=args.seed,
                           beam_width=parse_width(args.beam_width), tolerance=args.tolerance,
                           time_budget=args.time_budget)


def _estimate_json(model: str, marginalizer: Marginalizer, estimates: dict[str, Estimate]) -> dict[str, Any]:
    """What ``estimate --json`` prints for one model's estimates on one text."""
    from marginal_core.models import dtype_name

    return {
        "text": marginalizer.text,
        "context": marginalizer.context,
        "model": model,
        "device": marginalizer.lm.loaded.device,
        "dtype": dtype_name(marginalizer.lm.loaded.dtype),
        "log_p_canonical": marginalizer.canonical_score().log_p,
        "methods": {name: e.summary() for name, e in estimates.items()},
    }


def method_bar(name: str) -> tuple[Progress, Callable[[], None]]:
    """A method's bar on a terminal (progress.tqdm_progress): its samples, or the beam's rounds."""
    return tqdm_progress(name, Method.parse(name).progress_unit)


def estimate_command(args: argparse.Namespace) -> dict[str, Any]:
    """Estimate the marginal with each requested method."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model

    methods = [Method.parse(m.strip()).value for m in args.methods.split(",") if m.strip()]
    lm = load_model(args.model, device=args.device, dtype=args.dtype)
    context = read_text(args.context) if args.context is not None else None
    marginalizer = Marginalizer(lm, read_text(args.text), context)
    return _estimate_json(args.model, marginalizer, run_methods(marginalizer, methods, _options(args), method_bar))


def compare_command(args: argparse.Namespace) -> dict[str, Any]:
    """One text under two or more models, side by side; a model that fails says why in its own
    entry, and the others still run (exit status 2 after the table)."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model

    sides = parse_sides(args.models, args.device, args.dtype)
    names = labels(sides)
    methods = parse_methods(args.methods, allowed=METHODS)
    text, options = read_text(args.text), _options(args)
    context = read_text(args.context) if args.context is not None else None
    models: dict[str, dict[str, Any]] = {}
    found = {}
    for label, side in zip(names, sides):
        try:
            marginalizer = Marginalizer(load_model(side.name, device=side.device, dtype=side.dtype), text, context)
            estimates = run_methods(marginalizer, methods, options, method_bar)
        except MarginalError as err:
            models[label] = {"model": side.name, "error": str(err)}
            continue
        found[label] = figures(marginalizer, estimates)
        models[label] = {**_estimate_json(side.name, marginalizer, estimates), "figures": found[label].as_json()}
    a, b = names[:2]
    diff = difference(a, found[a], b, found[b]).as_json() if a in found and b in found else None
    return {"models": models, "difference": diff}


def _summary(result: dict[str, Any]) -> str:
    """A readable rendering of a command's result for the terminal."""
    if "table" in result:
        return task_summary(result)
    if "difference" in result:
        return _compare_summary(result)
    lines = []
    for key, value in result.items():
        if key == "samples":
            lines.append(f"samples: {len(value)}")
            lines.extend(f"  {s['kind']:<10} {s['ids']}" for s in value[:20])
            if len(value) > 20:
                lines.append(f"  ... {len(value) - 20} more (use --json for all)")
        elif key == "methods":
            lines.append(f"{'method':<10} {'log p(text)':>12} {'log p(non-canon.)':>18} "
                         f"{'samples':>8} {'distinct':>8} {'seconds':>8} {'passes':>7}")
            for name, row in value.items():
                lines.append(
                    f"{name:<10} {_num(row['log_marginal']):>12} {_num(row['log_noncanonical']):>18} "
                    f"{row['num_samples']:>8} {row['num_distinct']:>8} {row['seconds']:>8.2f} "
                    f"{row['forward_passes']:>7}"
                )
            lines.extend(_rounds(name, row["rounds"]) for name, row in value.items() if row.get("rounds"))
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _compare_summary(result: dict[str, Any]) -> str:
    """compare's side-by-side table: a column per model, a row per figure, then the difference."""
    from marginal_core.lattice.readable import show_piece
    from marginal_core.viz.text import count_label

    def bound(f: dict) -> str:
        if f["exact"]:
            return f"= {_num(f['log_p_text'])}"
        gap = f["certified_gap"]
        return f">= {_num(f['log_p_text'])}" + ("" if gap is None else f" (gap <= {gap:.3f})")

    rows = {"canonical tokens": lambda f: str(len(f["canonical_tokens"])),
            "tokenizations": lambda f: count_label(int(f["num_paths"])),
            "log p(canonical)": lambda f: _num(f["log_p_canonical"]),
            "log p(text)": bound,
            "bits per byte": lambda f: "-" if f["bits_per_byte"] is None else f"{f['bits_per_byte']:.4f}",
            "mass off canonical": lambda f: f"{100 * f['mass_off_canonical']:.2f}%",
            "heaviest": lambda f: "|".join(map(show_piece, f["heaviest"]))}
    cells = {title: [cell(m["figures"]) if "figures" in m else "error" for m in result["models"].values()]
             for title, cell in rows.items()}
    widths = [max(len(name), *(len(c[i]) for c in cells.values())) + 2 for i, name in enumerate(result["models"])]
    lines = [" " * 20 + "".join(f"{n:<{w}}" for n, w in zip(result["models"], widths))]
    lines.extend(f"{title:<20}" + "".join(f"{c:<{w}}" for c, w in zip(row, widths)) for title, row in cells.items())
    lines.extend(f"{n}: {m['error']}" for n, m in result["models"].items() if "error" in m)
    if (d := result["difference"]) is not None:
        lines.append(f"log p({d['a']}) - log p({d['b']}): canonical {_num(d['canonical'])}, "
                     f"marginal {_num(d['marginal'])} (moved {_num(d['moved'])})")
        if d["sentence"]:
            lines.append(d["sentence"])
    return "\n".join(lines)


def _rounds(name: str, rounds: list[dict]) -> str:
    """A line on the anytime beam's rounds (their JSON rows): how converged its bound is."""
    def floats(r: dict) -> dict:  # JSON holds null for an infinite mass: none found, or none known
        return {**r, "log_mass": -math.inf if r["log_mass"] is None else r["log_mass"],
                "log_missed": math.inf if r.get("log_missed") is None else r["log_missed"]}

    return f"{name}: " + describe_rounds([Round(**floats(r)) for r in rounds])


def _num(value: float | None) -> str:
    return "-inf" if value is None else f"{value:.4f}"


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", help="the text, or - to read it from standard input")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"embedded name, HF id or folder (default: {DEFAULT_MODEL})")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _add_estimate_options(parser: argparse.ArgumentParser, default_methods: str) -> None:
    """The options of a command that runs estimators: context, methods and their settings, device."""
    parser.add_argument("--context", help="text the tokenizations are conditioned on, or - (default: none)")
    parser.add_argument("--methods", default=default_methods,
                        help=f"comma list of {', '.join(METHODS)} (default: {default_methods})")
    add_beam_width(parser, default="auto")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                        help=f"the anytime beam stops when a widening adds less, in nats (default: {DEFAULT_TOLERANCE})")
    parser.add_argument("--time-budget", type=float, metavar="SECONDS",
                        help="the anytime beam stops after this long, keeping the best bound found (default: none)")
    parser.add_argument("--samples", type=int, default=1000, help="samples per method, k (default: 1000)")
    parser.add_argument("--max-len", type=int,
                        help=f"lattice length bound L (default: canonical length + {DEFAULT_LENGTH_MARGIN})")
    parser.add_argument("--seed", type=int, default=0, help="seed of every sampler (default: 0)")
    add_device_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="marginal", description="Marginalize LLMs over the tokenizations of a text."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    lat = sub.add_parser("lattice", help="count the tokenizations of a text")
    _add_common(lat)
    lat.add_argument("--max-len", type=int, help="also count paths of at most this many tokens (default: no bound)")
    lat.set_defaults(run=lattice_command)
    smp = sub.add_parser("sample", help="draw Algorithm 1's sample of tokenizations")
    _add_common(smp)
    smp.add_argument("--samples", type=int, required=True, help="how many tokenizations (k)")
    smp.add_argument(
        "--max-len",
        type=int,
        help=f"length bound L (default: canonical length + {DEFAULT_LENGTH_MARGIN})",
    )
    smp.add_argument("--seed", type=int, default=0, help="seed of the sampler (default: 0)")
    smp.set_defaults(run=sample_command)
    est = sub.add_parser("estimate", help="estimate the marginal probability of a text")
    _add_common(est)
    _add_estimate_options(est, default_methods="canonical,lattice,proxy")
    est.set_defaults(run=estimate_command)
    cmp = sub.add_parser("compare", help="one text's marginal under two or more models, side by side")
    cmp.add_argument("text", help="the text, or - to read it from standard input")
    cmp.add_argument("--models", required=True,
                     help="comma list of two or more models (embedded name, HF id or folder; name@dtype compares "
                     "one model in two precisions)")
    cmp.add_argument("--json", action="store_true", help="print one JSON object")
    _add_estimate_options(cmp, default_methods="canonical,beam")
    cmp.set_defaults(run=compare_command)
    add_surprisal_command(sub)
    add_next_command(sub)
    add_task_commands(sub)
    sub.add_parser(
        "lm-eval", add_help=False,
        help="run lm-evaluation-harness with the marginal model and offline tasks (lm-eval's own arguments)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `marginal` console script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["lm-eval"]:  # every later argument is lm-eval's own
        from marginal_core.cli.lm_eval_command import lm_eval_main

        return run_cli(lambda: lm_eval_main(argv[1:]), "marginal lm-eval")
    args = build_parser().parse_args(argv)

    def command() -> int | None:
        result = args.run(args)
        if "show" in args:  # a command that renders its own result (surprisal: a table, CSV or JSON)
            print(args.show(args, result))
            return None
        print(json.dumps(result, ensure_ascii=False) if args.json else _summary(result))
        return 2 if any("error" in m for m in result.get("models", {}).values()) else None  # compare: a side failed

    return run_cli(command)


if __name__ == "__main__":
    sys.exit(main())
