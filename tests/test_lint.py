"""``ruff check`` passes with the pinned ruff (the ``dev`` extra) on the project's files:
those git tracks, where the checkout is a git repository (a user's untracked scratch
scripts in the folder are not the project's), else the whole folder."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed (dev extra)")
def test_ruff_check_passes():
    files = ["."]
    if shutil.which("git") and (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "*.py", "*.ipynb"], cwd=ROOT,
                                capture_output=True, text=True)
        if listed.returncode == 0 and listed.stdout.split():
            files = [f for f in listed.stdout.split() if (ROOT / f).exists()]
    proc = subprocess.run(["ruff", "check", "--force-exclude", *files], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
