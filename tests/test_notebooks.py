"""The notebooks in notebooks/ are committed without outputs (``nbstripout --verify``), open
with a markdown cell, import only perfsim, and draw a figure. nbmake executes them (each is a
test item of its own, tests/conftest.py); the documentation site test renders them with their
figures (tests/test_docs_site.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_notebooks_are_committed_stripped():
    pytest.importorskip("nbstripout")
    done = subprocess.run([sys.executable, "-m", "nbstripout", "--verify",
                           *map(str, NOTEBOOKS)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, ("strip the notebooks before committing (nbstripout "
                                  f"notebooks/*.ipynb):\n{done.stdout}{done.stderr}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_shape(path):
    book = nbformat.read(path, as_version=4)
    assert book.cells[0].cell_type == "markdown"
    code = "\n".join(c.source for c in book.cells if c.cell_type == "code")
    assert "plot" in code or "savefig" in code, f"{path.name} draws no figure"
    for line in code.splitlines():
        if line.startswith(("import ", "from ")):
            module = line.split()[1]
            assert module.split(".")[0] == "perfsim", f"{path.name}: {line}"
