"""The house's layout: no import cycle among marginal_core's modules, counting every import
statement (lazy ones inside functions and TYPE_CHECKING ones too: either way two modules that
import each other know each other's insides), and no Python module of the project over 450
lines (one idea a module: a longer one holds several), and no module named like a public name.
The tree shows the pipeline: at most 16 modules at the top of marginal_core (a stage package
counts once), each name defined in one module and imported from that module, and no package
importing one later in docs/design.md's order of the stages."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "marginal_core"
MAX_LINES = 450
MAX_TOP_LEVEL = 16


def modules(folder: str = PACKAGE) -> dict[str, Path]:
    """Every module under a top-level folder by dotted name (a package by its own name)."""
    out = {}
    for path in (ROOT / folder).rglob("*.py"):
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
    """None in marginal_core, and none through the app: app.py imports the pages, which never import it."""
    mods = {**modules(), **modules("pages"), "app": ROOT / "app.py"}
    graph = {name: imports(name, path, set(mods)) for name, path in mods.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as err:
        raise AssertionError(f"import cycle: {' -> '.join(err.args[1])}") from None


def test_no_page_file_sits_at_the_top_of_pages():
    """A .py file at the top of pages/ is what a fresh Streamlit server runs as a script, without
    the router, in its legacy pages/ mode (app.py): the pages live in pages/views/ and pages/tasks/."""
    assert sorted(p.name for p in (ROOT / "pages").glob("*.py")) == ["__init__.py"]


def test_no_module_is_over_450_lines():
    folders = [ROOT / PACKAGE, ROOT / "pages", ROOT / "tests", ROOT / "bench"]
    paths = [ROOT / "app.py", *(p for folder in folders for p in folder.rglob("*.py"))]
    long = {str(p.relative_to(ROOT)): n for p in paths if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


@pytest.mark.parametrize("package", ["marginal_core", "marginal_core.models", "marginal_core.tasks", "marginal_core.viz"])
def test_every_name_in_a_packages_all_exists(package):
    """`from package import *` works: each name of __all__ is an attribute or a submodule."""
    import importlib.util

    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)
               and importlib.util.find_spec(f"{package}.{name}") is None]
    assert not missing, f"{package}.__all__ names {missing}, which do not exist"


def test_no_public_name_is_shadowed_by_a_module():
    """``mc.surprisal`` or ``mc.compare`` must stay the function once some code has imported the
    package's modules: a submodule of the same name would replace the package's attribute."""
    import marginal_core

    names = set(marginal_core._LAZY)
    shadowed = sorted(n for n in names if (ROOT / PACKAGE / f"{n}.py").exists() or (ROOT / PACKAGE / n).is_dir())
    assert not shadowed, f"modules named like public names: {shadowed}"


def test_the_top_level_holds_at_most_16_modules():
    """The stages are folders (lattice, scoring, estimators, serving, ...); what stays beside them is
    the public API, its errors and the few pieces every stage shares."""
    top = sorted(p.name for p in (ROOT / PACKAGE).iterdir()
                 if p.suffix == ".py" or (p / "__init__.py").is_file())
    assert len(top) <= MAX_TOP_LEVEL, top


def definitions(path: Path, private: bool = False) -> set[str]:
    """The names a module defines at its top level (functions, classes, constants; the public ones
    unless ``private``), looking into its top-level if/try blocks; type variables are local to
    their module and not counted."""
    found: set[str] = set()
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.If, ast.Try)):
            body += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "TypeVar":
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
    return {n for n in found if private or not n.startswith("_")}


def test_no_name_is_defined_twice():
    homes = defaultdict(list)
    for name, path in modules().items():
        for defined in definitions(path):
            homes[defined].append(name)
    twice = {n: sorted(m) for n, m in homes.items() if len(m) > 1}
    assert not twice, twice


def test_names_are_imported_from_the_module_that_defines_them():
    """``from marginal_core.a.b import n`` names the module that defines n (or its submodule n):
    no module re-exports another's names, so each name is imported from one place. A package's
    ``__init__`` may be a public face (``marginal_core``, ``viz``, ``models``): imports from it pass."""
    mods = modules()
    folders = [ROOT / PACKAGE, ROOT / "pages", ROOT / "tests", ROOT / "bench"]
    wrong = []
    for path in [ROOT / "app.py", *(p for folder in folders for p in folder.rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and not node.level and node.module in mods):
                continue
            source = mods[node.module]
            if source.name == "__init__.py":
                continue
            wrong += [f"{path.relative_to(ROOT)}: {a.name} from {node.module}" for a in node.names
                      if a.name not in definitions(source, private=True) and f"{node.module}.{a.name}" not in mods]
    assert not wrong, wrong


def test_every_test_file_sits_on_one_side():
    """`make test`'s two processes are the two folders (tests/conftest.py groups by folder): a test
    file elsewhere would make a third group."""
    stray = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                   if p.parent.name not in ("app", "library") or p.parent.parent != ROOT / "tests")
    assert not stray, stray


# What the app (app.py and pages/) may import of the library: its public names (``marginal_core``),
# the errors and progress types, and the stages whose modules are the app's to use.
PAGE_IMPORTS = ("marginal_core", "marginal_core.ground.errors", "marginal_core.ground.progress",
                "marginal_core.ground.cache_home")
PAGE_STAGES = ("marginal_core.viz", "marginal_core.tasks", "marginal_core.corpus", "marginal_core.api",
               "marginal_core.serving", "marginal_core.models",
               "marginal_core.harness")


def test_the_pages_use_the_library_through_its_public_names():
    """The app reads the lattice, scoring and estimator stages only through ``mc.*`` names (the
    package's lazy public API), so those stages can change inside without touching a page."""
    wrong = []
    for path in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            wrong += [f"{path.relative_to(ROOT)}: {m}" for m in named if m.split(".")[0] == PACKAGE
                      and m not in PAGE_IMPORTS and not any(m == s or m.startswith(f"{s}.") for s in PAGE_STAGES)]
    assert not wrong, wrong


def test_no_two_library_modules_share_a_file_name():
    """A module's file name says what it holds, once: `graph.py` in two stages would be two ideas
    under one name (packages' __init__ and __main__ aside)."""
    names = defaultdict(list)
    for path in (ROOT / PACKAGE).rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            names[path.name].append(str(path.relative_to(ROOT)))
    shared = {n: p for n, p in names.items() if len(p) > 1}
    assert not shared, shared


# ---------------------------------------------------------------- the order of the stages


def stage_rows(design: str) -> dict[str, int]:
    """docs/design.md's order of the stages: each package's row (its table under that heading)."""
    section = design.split("### The order of the stages", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        if (match := re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)):
            rows.update((name, int(match.group(1))) for name in re.findall(r"`(\w+)`", match.group(2)))
    return rows


def package_of(module: str) -> str:
    """A module's package in the order: its stage folder; the package face and every ``__main__``
    (entry points: commands) count as ``cli``."""
    parts = module.split(".")
    return "cli" if len(parts) == 1 or parts[-1] == "__main__" or parts[1] == "__main__" else parts[1]


def package_imports(mods: dict[str, Path]) -> dict[tuple[str, str], list[str]]:
    """Each (importer, imported) pair of distinct packages, with the module imports behind it."""
    found = defaultdict(list)
    for name, path in mods.items():
        for imported in sorted(imports(name, path, set(mods))):
            if (pair := (package_of(name), package_of(imported)))[0] != pair[1]:
                found[pair].append(f"{name} -> {imported}")
    return dict(found)


def order_violations(mods: dict[str, Path], rows: dict[str, int]) -> list[str]:
    """The imports against the order: a package importing one of its own row or a later one, or a
    package the table does not place."""
    wrong = [f"{p} has no row in the order" for p in sorted({package_of(m) for m in mods} - set(rows))]
    for (a, b), lines in package_imports(mods).items():
        if a in rows and b in rows and rows[b] >= rows[a]:
            wrong += [f"{line}  ({a}, row {rows[a]}, may not import {b}, row {rows[b]})" for line in lines]
    return wrong


def import_table(mods: dict[str, Path], rows: dict[str, int]) -> str:
    """The packages in the order's rows, each with the packages it imports."""
    pairs = package_imports(mods)
    lines = []
    for package in sorted(rows, key=lambda p: (rows[p], p)):
        used = sorted({b for a, b in pairs if a == package}, key=lambda p: (rows.get(p, 99), p))
        lines.append(f"{rows[package]:>3}  {package:<11} imports {', '.join(used) or '-'}")
    return "\n".join(lines)


def test_the_stages_import_in_order():
    """No package imports one of its own row or below in docs/design.md's order (every import
    statement counts: module level, in a function, under TYPE_CHECKING)."""
    rows = stage_rows((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    mods = modules()
    print(import_table(mods, rows))  # the package import table (pytest -s shows it)
    wrong = order_violations(mods, rows)
    assert not wrong, "\n".join(["imports against the order of the stages:", *wrong, "", import_table(mods, rows)])


def test_the_order_test_fails_on_a_planted_import(tmp_path):
    """A lattice module that imports the models (the stage-1-on-stage-3 import the order forbids) is
    caught, whether the import sits at the top, in a function or under TYPE_CHECKING."""
    rows = stage_rows((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    for body in ("from marginal_core.models import caches\n",
                 "def f():\n    from marginal_core.models.caches import model_cache_dir\n",
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import marginal_core.models.loading\n"):
        planted = tmp_path / "planted.py"
        planted.write_text(body, encoding="utf-8")
        wrong = order_violations({**modules(), "marginal_core.lattice.planted": planted}, rows)
        assert [w for w in wrong if w.startswith("marginal_core.lattice.planted -> marginal_core.models")], body
