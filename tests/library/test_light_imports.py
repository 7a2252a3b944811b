"""Paths that need no model stay light: importing the core, `marginal lattice` and `marginal
sample` import neither torch nor transformers (each checked in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tokenizer_cases import EMBEDDED, GEMMA, SMOL

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers")
TEXT = "The old lighthouse keeper"


def run_fresh(code: str) -> dict:
    """Run a snippet in a new interpreter; it ends by printing one JSON object, returned here."""
    report = f"""
import json as _json, sys as _sys
_heavy = sorted(m for m in _sys.modules if m.split(".")[0] in {HEAVY!r})
print(_json.dumps({{"heavy": _heavy, **result}}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + report],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module",
    [
        "marginal_core",
        "marginal_core.lattice.graph",
        "marginal_core.cli.commands",
        "marginal_core.models",
        "marginal_core.lattice.sampling",
        "marginal_core.lattice.conditioning",
        "marginal_core.lattice.tokenizer_snapshot",
        "marginal_core.search.surprisal.result",
        "marginal_core.search.next.candidate_table",
        "marginal_core.viz.surprisal",
    ],
)
def test_importing_the_core_imports_neither_torch_nor_transformers(module):
    out = run_fresh(f"import {module}\nresult = {{}}")
    assert out["heavy"] == [], f"import {module} imported {out['heavy'][:5]}"


@pytest.fixture(scope="module")
def snapshots():
    """The light loader's snapshots exist (taking one imports transformers, in this process)."""
    from marginal_core.models import load_text_tokenizer

    return {name: load_text_tokenizer(name) for name in EMBEDDED}


@pytest.mark.parametrize(
    "argv",
    [
        ["lattice", TEXT, "--json"],
        ["lattice", TEXT, "--model", SMOL, "--max-len", "6", "--json"],
        ["sample", TEXT, "--samples", "30", "--seed", "1", "--json"],
        ["sample", TEXT, "--model", SMOL, "--samples", "30", "--json"],
    ],
    ids=["lattice-gemma", "lattice-smollm", "sample-gemma", "sample-smollm"],
)
def test_lattice_and_sample_commands_import_neither_torch_nor_transformers(snapshots, argv):
    out = run_fresh(
        f"""
        import contextlib, io, json
        from marginal_core.cli.commands import main
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main({argv!r})
        result = {{"code": code, "answer": json.loads(buffer.getvalue())}}
        """
    )
    assert out["code"] == 0
    assert out["heavy"] == [], f"marginal {argv[0]} imported {out['heavy'][:5]}"
    assert out["answer"]["model"] == (SMOL if SMOL in argv else GEMMA)
    assert out["answer"]["canonical"]
