"""The notebooks in notebooks/ run from top to bottom without errors (nbclient)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path):
    book = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in book.cells if cell.cell_type == "code"), \
        "commit notebooks with outputs stripped"
    assert book.cells[0].cell_type == "markdown"
    client = nbclient.NotebookClient(book, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in book.cells:
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"{path.name}: {out.get('evalue')}"
    images = [o for c in book.cells for o in c.get("outputs", []) if "image/png" in
              o.get("data", {})]
    assert images, f"{path.name} drew no figure"


def test_notebooks_import_only_perfsim():
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        for cell in book.cells:
            if cell.cell_type != "code":
                continue
            for line in cell.source.splitlines():
                if line.startswith(("import ", "from ")):
                    module = line.split()[1]
                    assert module.split(".")[0] == "perfsim", f"{path.name}: {line}"
