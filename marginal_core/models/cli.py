"""`python -m marginal_core.models`: warm the model caches or list the embedded models; and the
--device/--dtype arguments every `marginal` command that runs a model takes."""

from __future__ import annotations

import argparse
import time

from marginal_core.beam_width import DEFAULT_BEAM_WIDTH, MAX_BEAM_WIDTH
from marginal_core.cache import cache_root
from marginal_core.errors import run_cli
from marginal_core.models.caches import is_done, model_cache_dir
from marginal_core.models.devices import DTYPES
from marginal_core.models.loading import warm
from marginal_core.models.registry import DEFAULT_MODEL, EMBEDDED_MODELS, known_models

__all__ = ["add_beam_width", "add_device_arguments", "main"]

PROG = "python -m marginal_core.models"


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """--device and --dtype, for every command that runs a model."""
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument(
        "--dtype", choices=DTYPES, default="auto",
        help="precision (float16: the decoder's products in float16, the rest float32; bfloat16: the whole model; "
        "default auto: float16 on CUDA and on CPUs with fast float16 products, else float32)",
    )


def add_beam_width(parser: argparse.ArgumentParser, default: str = str(DEFAULT_BEAM_WIDTH)) -> None:
    """--beam-width, for every command that may run the beam."""
    parser.add_argument("--beam-width", type=str, default=default,
                        help=f"the beam's prefixes per lattice state, 1 to {MAX_BEAM_WIDTH}, or auto: widths 16, 64, "
                             f"256, 1024 until a widening adds less than the tolerance (default {default})")


def _list() -> None:
    """One line per embedded model: what it is and whether its caches are complete."""
    for name in known_models():
        folder = model_cache_dir(name)
        state = "cached" if is_done(folder / "tokenizer") and is_done(folder / "model") else "not cached"
        default = " (default)" if name == DEFAULT_MODEL else ""
        print(f"{name}{default}: {EMBEDDED_MODELS[name].description}; {state} in {folder}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: --list and/or --warm [names...]; errors are one line on stderr, exit 2."""
    parser = argparse.ArgumentParser(prog=PROG, description="Embedded models and their caches.")
    parser.add_argument("names", nargs="*", help="models to warm (default: all embedded)")
    parser.add_argument("--warm", action="store_true", help="convert and cache tokenizers and weights")
    parser.add_argument("--list", action="store_true", help="list embedded models and cache state")
    args = parser.parse_args(argv)
    if not args.warm and not args.list:
        parser.print_help()
        return 0

    def command() -> None:
        if args.list:
            _list()
        if args.warm:
            t0 = time.perf_counter()
            warm(args.names or None)
            print(f"caches warm in {time.perf_counter() - t0:.1f} s (cache root {cache_root()})")

    return run_cli(command, PROG)
