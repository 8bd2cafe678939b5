"""``ruff check .`` passes with the pinned ruff (the ``dev`` extra)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed (dev extra)")
def test_ruff_check_passes():
    proc = subprocess.run(["ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
