"""bench/ runs as a package of modules (`python -m bench.NAME`): nothing in it edits sys.path or
imports from tests/ (what the benches and the tests share is bench/support/), a bench names a
sibling by its full name (bench.estimators, never a bare `estimators` that works only from a
script's folder), and every bench module imports from the repository root. The commands (what
`make bench` runs) are the modules at the top of bench/ and the packages with a __main__.py."""

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


SHARED = {"support", "peers"}  # the packages of shared pieces: no command of their own


def has_main_block(tree: ast.Module) -> bool:
    """Whether the module has, at its top level, an `if __name__ == "__main__":` block."""
    return any(isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
               and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
               and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators)
               for node in tree.body)


def command_packages() -> list[Path]:
    return sorted(p.parent for p in BENCH.glob("*/__main__.py"))


def test_the_commands_are_the_top_modules_and_the_packages_with_a_main():
    """`make bench` runs bench/NAME.py and bench/NAME/__main__.py as `python -m bench.NAME`: every
    module at the top of bench/ is a command (a __main__ block), so is every package's __main__.py
    (and no other module of its package: make bench would not find it), and the packages without
    one are those of the shared pieces. A piece that is no command goes to bench/support/ or into
    the package of the bench that uses it."""
    wrong = []
    for path in sorted(BENCH.glob("*.py")):
        if path.stem != "__init__" and not has_main_block(ast.parse(path.read_text(encoding="utf-8"))):
            wrong.append(f"{path.relative_to(ROOT)}: no __main__ block, yet at the top of bench/")
    for package in command_packages():
        if not (package / "__init__.py").exists():
            wrong.append(f"{package.relative_to(ROOT)}: a command package without __init__.py")
        for path in sorted(package.rglob("*.py")):
            main = has_main_block(ast.parse(path.read_text(encoding="utf-8")))
            if main != (path == package / "__main__.py"):
                wrong.append(f"{path.relative_to(ROOT)}: " + ("a __main__ block outside __main__.py" if main
                                                             else "__main__.py without a __main__ block"))
    packages = {p.name for p in BENCH.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    shared = packages - {p.name for p in command_packages()}
    if shared != SHARED:
        wrong.append(f"packages without __main__.py: {sorted(shared)}, expected {sorted(SHARED)}")
    assert not wrong, "\n".join(wrong)


def test_every_command_package_imports_as_a_module():
    """Each module of a command package imports (its __main__ as bench.NAME.__main__, which runs nothing)."""
    mods = [".".join(p.relative_to(ROOT).with_suffix("").parts)
            for package in command_packages() for p in sorted(package.rglob("*.py")) if p.stem != "__init__"]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    out = subprocess.run([sys.executable, "-c", code, *mods], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert mods and out.returncode == 0, out.stderr[-3000:]
