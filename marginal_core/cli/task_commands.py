"""The `eval-qa`, `eval-mt` and `scan` subcommands of `marginal` (registered by add_commands).

Each writes a resumable results folder (``--out``): rows.csv, samples.jsonl, report.md,
report.json (see marginal_core.tasks.store). Rerunning the same command continues where an
interrupted run stopped. ``python -m marginal_core.cli.task_commands eval-qa ...`` works on its own too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from marginal_core.cli.model_commands import add_beam_width, add_device_arguments
from marginal_core.cli.surprisal_command import add_time_budget
from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH, parse_width
from marginal_core.estimators.methods import TASK_METHODS
from marginal_core.ground.errors import run_cli
from marginal_core.lattice.graph import DEFAULT_LENGTH_MARGIN
from marginal_core.models import DEFAULT_MODEL
from marginal_core.tasks.evaluator import evaluate
from marginal_core.tasks.options import EvalOptions

_SUMMARY_DROP = ("markdown", "timing", "out", "methods")


def _result(report: dict[str, Any]) -> dict[str, Any]:
    """The command's JSON-able result: the report's figures, the table last."""
    out = {"report": f"{report['out']}/report.md", "out": report["out"]}
    out.update({k: v for k, v in report.items() if k not in _SUMMARY_DROP})
    out["table"] = "\n" + report["markdown"]
    return out


def task_summary(result: dict[str, Any]) -> str:
    """A results folder's command result for the terminal: where it ran, the table, the folder."""
    return (f"{result['model']} on {result['device']} in {result['dtype']}\n\n"
            f"{result['table'].strip()}\n\nresults: {result['out']}")


def _options(args: argparse.Namespace) -> EvalOptions:
    return EvalOptions(model=getattr(args, "model", None), samples=args.samples, methods=args.methods, seed=args.seed,
                       max_len=args.max_len, limit=args.limit, device=args.device, dtype=args.dtype,
                       beam_width=parse_width(args.beam_width))


def eval_qa_command(args: argparse.Namespace) -> dict[str, Any]:
    """Score a multiple-choice dataset by canonical, lattice and proxy (Tables 2 and 3)."""
    from marginal_core.tasks.qa import QATask

    return _result(evaluate(QATask(args.dataset, shuffle=args.shuffle), args.out, _options(args)))


def eval_mt_command(args: argparse.Namespace) -> dict[str, Any]:
    """Rerank sampled translations by canonical, lattice and proxy (Tables 4 and 3)."""
    from marginal_core.tasks.mt import MTTask

    task = MTTask(args.dataset, args.candidates, args.target_language, comet=not args.no_comet)
    return _result(evaluate(task, args.out, _options(args)))


def scan_command(args: argparse.Namespace) -> dict[str, Any]:
    """Score every text of a file under each model; export the tidy tables (Ctrl-C keeps what is done)."""
    from marginal_core.corpus.scan import parse_models, parse_shard, run_scan
    from marginal_core.corpus.scan_surprisal import Cut
    from marginal_core.search.settings import parse_time_budget

    cut = Cut(args.surprisal, args.space, args.bits) if args.surprisal else None  # checked before any work
    found, report, stopped = run_scan(args.file, args.out, parse_models(args.models), _options(args),
                                      shard=parse_shard(args.shard), merge_from=args.merge or (), surprisal=cut,
                                      time_budget=parse_time_budget(args.time_budget))
    return {"report": f"{args.out}/report.md", "out": args.out, "model": ", ".join(found["models"]),
            "device": report.get("device", "-"), "dtype": report.get("dtype", "-"), "texts": found["texts"],
            "rows": found["rows"], "paths": found["paths"], "surprisal_rows": found.get("surprisal_rows"),
            "stopped": stopped, **{k: found[k] for k in ("rank", "ranks") if k in found},
            "table": "\n" + found["markdown"]}


def _common(p: argparse.ArgumentParser, default_samples: int) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"embedded name, HF id or folder (default: {DEFAULT_MODEL})")
    _options_arguments(p, default_samples, "canonical,lattice,proxy")


def _options_arguments(p: argparse.ArgumentParser, default_samples: int, methods: str,
                       width: str = str(DEFAULT_BEAM_WIDTH)) -> None:
    """Every option of a results-folder command but the model."""
    p.add_argument("--limit", type=int, help="only the first N items (default: all)")
    p.add_argument("--samples", type=int, default=default_samples,
                   help=f"k: lattice samples and proxy samples per scored text (default: {default_samples})")
    p.add_argument("--methods", default=methods, help=f"comma list of {', '.join(TASK_METHODS)} (default: {methods})")
    add_beam_width(p, width)
    p.add_argument("--seed", type=int, default=0, help="seed of every sampler (default: 0)")
    p.add_argument("--max-len", type=int, help=f"lattice length bound L (default: canonical length + {DEFAULT_LENGTH_MARGIN})")
    add_device_arguments(p)
    p.add_argument("--out", required=True, help="results folder (created; rerun to resume)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_commands(subparsers: Any) -> None:
    """Add `eval-qa`, `eval-mt` and `scan` to a `marginal` subparsers object."""
    qa = subparsers.add_parser(
        "eval-qa",
        help="multiple-choice Q&A accuracy by canonical / lattice / proxy (paper Tables 2-3)",
        description="Score every answer as ' {answer}' after 'Question: {q}\\nAnswer:' with each method; "
                    "write per-answer rows, accuracy, speedup and the underestimation ratio to --out.",
    )
    qa.add_argument("--dataset", required=True,
                    help="arc-challenge, arc-easy, openbookqa, medmcqa (NAME:validation for the validation "
                         "split), a .jsonl/.csv file, or hf:ID[:CONFIG][:SPLIT]")
    qa.add_argument("--shuffle", action="store_true", help="shuffle questions with --seed before --limit")
    _common(qa, 100)
    qa.set_defaults(run=eval_qa_command)

    mt = subparsers.add_parser(
        "eval-mt",
        help="translation reranking by canonical / lattice / proxy (paper Tables 3-4)",
        description="Sample distinct candidate translations with the model, score each with each method "
                    "and keep the best; write chrF (COMET-22 where available), speedup and the "
                    "underestimation ratio to --out.",
    )
    mt.add_argument("--dataset", required=True,
                    help="en-de, en-cs (packaged sets), a .tsv/.jsonl file, or wmt24pp:en-de (needs datasets)")
    mt.add_argument("--candidates", type=int, default=4, help="distinct candidate translations per sentence (default: 4)")
    mt.add_argument("--target-language", help="target language name for the prompt (default: from the dataset)")
    mt.add_argument("--no-comet", action="store_true", help="do not try COMET-22")
    _common(mt, 100)
    mt.set_defaults(run=eval_mt_command)

    scan = subparsers.add_parser(
        "scan",
        help="score every text of a file under one or more models; tidy CSV/Parquet tables of the gains",
        description="Score each text of FILE (.txt: one per line; .jsonl or .csv: text, optional context and id) "
                    "by each method under each model, into a resumable --out folder (a folder per model); "
                    "write scan.csv/.parquet (a row per text x model x method), paths.csv/.parquet (the decoded "
                    "tokenizations behind each estimate), with two models or more compare.csv (per text and pair of "
                    "models: log p_A - log p_B by canonical and by marginal, and whether marginalizing flips it), "
                    "and report.md/report.json. Ctrl-C keeps what finished; rerun to continue. Under torchrun or "
                    "accelerate launch (-m marginal_core scan ...) each rank scores its share into --out and rank 0 "
                    "writes the tables.",
    )
    scan.add_argument("file", help="the texts: a .txt, .jsonl or .csv file")
    scan.add_argument("--models", default=DEFAULT_MODEL,
                      help=f"one model or a comma list, each loaded once (default: {DEFAULT_MODEL})")
    scan.add_argument("--shard", help="i/n: only every n-th text, the i-th of each n (n processes, one folder each or "
                                      "one shared; default: every text; under torchrun or accelerate launch the "
                                      "ranks are the shards)")
    scan.add_argument("--merge", nargs="+", metavar="DIR", help="first take the finished texts of these scan folders "
                                                               "(shards run elsewhere); then score what is missing")
    scan.add_argument("--surprisal", metavar="UNIT",
                      help="also search each text's prefixes and write surprisal.csv: a row per text, model and region "
                           "(byte, char or word): the marginal surprisal, the naive canonical and canonical prefix "
                           "rows, the next character's entropy and rank at the region's start, its length and "
                           "zipf_frequency (with wordfreq: pip install 'marginal[words]') (default: none)")
    scan.add_argument("--space", default="trailing",
                      help="with --surprisal word: trailing or leading, where the whitespace after a word goes "
                           "(default: trailing)")
    scan.add_argument("--bits", action="store_true",
                      help="with --surprisal: surprisal.csv's surprisals and entropy in bits (default: nats)")
    add_time_budget(scan, when="with --surprisal: each text's search: ")
    _options_arguments(scan, 100, "canonical,beam", width="auto")  # a new command: the anytime beam
    scan.set_defaults(run=scan_command)


def tasks_main(argv: list[str] | None = None) -> int:
    """Stand-alone entry: python -m marginal_core.cli.task_commands eval-qa|eval-mt ..."""
    parser = argparse.ArgumentParser(prog="marginal")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)

    def command() -> None:
        result = args.run(args)
        print(json.dumps(result, ensure_ascii=False) if args.json else task_summary(result))

    return run_cli(command)


if __name__ == "__main__":
    sys.exit(tasks_main())
