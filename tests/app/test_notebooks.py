"""The notebooks in docs/notebooks/, executed by a real Jupyter kernel (nbclient): every cell runs
and no output is an error. Their committed outputs are what `python -m tests.app.test_notebooks`
writes back (each shows the library's own values: the cells call it, nothing is copied)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.models]  # each kernel loads the models again
NOTEBOOKS = Path(__file__).resolve().parents[2] / "docs" / "notebooks"
NAMES = ("quickstart", "error_analysis", "compare")


def execute(path: Path, kernel: str = "python3", timeout: int = 600) -> tuple[object, float]:
    """The notebook at path executed in a fresh kernel in its own folder, and the seconds it took;
    nbclient raises CellExecutionError on a cell that raises."""
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(book, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": str(path.parent)}}).execute()
    return book, time.perf_counter() - started


def errors(book) -> list[str]:
    """Every error output and every line on standard error that reads like a warning or a traceback."""
    found = []
    for cell in book.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"{out['ename']}: {out['evalue']}")
            elif out.get("name") == "stderr" and any(w in out["text"] for w in ("Traceback", "Warning", "Error")):
                found.append(out["text"][:300])
    return found


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_runs_in_a_kernel_without_errors(name):
    book, seconds = execute(NOTEBOOKS / f"{name}.ipynb")
    print(f"{name}.ipynb: {seconds:.1f} s", flush=True)
    assert not errors(book), errors(book)
    shown = [o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") in ("execute_result",
                                                                                             "display_data")]
    assert shown, "the notebook shows nothing"


if __name__ == "__main__":  # refresh the committed outputs: python -m tests.app.test_notebooks [names]
    import nbformat

    for name in sys.argv[1:] or NAMES:
        book, seconds = execute(NOTEBOOKS / f"{name}.ipynb")
        assert not errors(book), errors(book)
        nbformat.write(book, NOTEBOOKS / f"{name}.ipynb")
        print(f"{name}.ipynb: executed in {seconds:.1f} s and written", flush=True)
