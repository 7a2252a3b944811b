"""bench/ runs as a package of modules (`python -m bench.NAME`): nothing in it edits sys.path or
imports from tests/ (what the benches and the tests share is bench/support/), a bench names a
sibling by its full name (bench.estimators, never a bare `estimators` that works only from a
script's folder), and every bench module imports from the repository root."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(BENCH.rglob("*.py"))}


def test_no_bench_module_edits_sys_path_or_imports_tests():
    siblings = {p.stem for p in BENCH.glob("*.py")} | {p.name for p in BENCH.iterdir() if p.is_dir()}
    wrong = []
    for path, tree in sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                    and node.value.id == "sys":
                wrong.append(f"{path}:{node.lineno}: sys.path")
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top == "tests" or top in siblings - {"bench"}:
                    wrong.append(f"{path}:{node.lineno}: import {name}")
    assert not wrong, "\n".join(wrong)


def test_every_bench_imports_as_a_module():
    mods = [f"bench.{p.stem}" for p in sorted(BENCH.glob("*.py")) if p.stem != "__init__"]
    mods += [f"bench.support.{p.stem}" for p in sorted((BENCH / "support").glob("*.py")) if p.stem != "__init__"]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    out = subprocess.run([sys.executable, "-c", code, *mods], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
