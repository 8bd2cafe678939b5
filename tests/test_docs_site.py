"""The documentation site (mkdocs.yml) builds, strict, with every notebook executed and its
figures rendered into the page (issue 14)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocs_jupyter")

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.notebooks
def test_site_builds_with_executed_notebooks(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # not --quiet: it hides the warnings that --strict turns into a failure (a reviewer found
    # four broken links to examples/ that the quiet build let through)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(tmp_path / "site")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # mkdocs' own warnings ("WARNING -  ..."; a notebook kernel's "[IPKernelApp] WARNING" is
    # not one of them)
    warned = [line for line in done.stderr.splitlines()
              if re.match(r"\s*WARNING\s+-", line)]
    assert not warned, "\n".join(warned)
    site = tmp_path / "site"
    assert (site / "index.html").exists()
    # the sweep pages' figures come with the site (docs/examples links to examples/)
    for figure in ("sweep.png", "whatif.png"):
        assert (site / "examples" / figure).exists(), figure
    for book in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = (site / "notebooks" / book.stem / "index.html").read_text()
        assert "data:image/png" in page, f"{book.name}: no figure in its page"
        assert "Traceback" not in page, f"{book.name}: an error in its page"
