"""The house's layout: no import cycle among marginal_core's modules, counting every import
statement (lazy ones inside functions and TYPE_CHECKING ones too: either way two modules that
import each other know each other's insides), and no Python module of the project over 450
lines (one idea a module: a longer one holds several), and no module named like a public name."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "marginal_core"
MAX_LINES = 450


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that one module imports (``from a import b`` counts a.b when b is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return {m for m in found if m in known and m != name}


def test_no_import_cycle():
    mods = modules()
    graph = {name: imports(name, path, set(mods)) for name, path in mods.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as err:
        raise AssertionError(f"import cycle in {PACKAGE}: {' -> '.join(err.args[1])}") from None


def test_no_module_is_over_450_lines():
    folders = [ROOT / PACKAGE, ROOT / "pages", ROOT / "tests", ROOT / "bench"]
    paths = [ROOT / "app.py", *(p for folder in folders for p in folder.rglob("*.py"))]
    long = {str(p.relative_to(ROOT)): n for p in paths if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_no_public_name_is_shadowed_by_a_module():
    """``mc.surprisal`` or ``mc.compare`` must stay the function once some code has imported the
    package's modules: a submodule of the same name would replace the package's attribute."""
    import marginal_core

    names = set(marginal_core._LAZY)
    shadowed = sorted(n for n in names if (ROOT / PACKAGE / f"{n}.py").exists() or (ROOT / PACKAGE / n).is_dir())
    assert not shadowed, f"modules named like public names: {shadowed}"
