"""Speedups keep every prediction identical (issue 13): a seeded sample of workloads
(dense, decode, sliding window, varlen; fwd/bwd/fwd_bwd) × catalog GPUs × algorithms and
presets, compared against ``tests/data/speed_golden.json`` written by the code before the
speedups (``python -m tests.speed_cases``). Relative tolerance 1e-12; refusals must stay
refusals. No timings here: speed targets live in ``docs/performance.md`` and
``benchmarks/bench_predict.py``."""

from __future__ import annotations

import json
import math

import pytest

from tests.speed_cases import GOLDEN, N_CASES, cases, outcome

REL = 1e-12


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def _golden() -> list[dict]:
    return json.loads(GOLDEN.read_text())


def test_golden_matches_the_sample():
    rows = _golden()
    assert len(rows) == N_CASES
    assert [(r["workload"], r["gpu"], r["algorithm"]) for r in rows] == [
        (json.loads(json.dumps(w)), g, a) for w, g, a in cases()]
    assert sum("error" not in r["expected"] for r in rows) >= 250


def workload_of(row: dict) -> dict:
    """A golden row's workload fields (JSON lists back to tuples)."""
    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in row["workload"].items()}


def check_row(row: dict, got: dict) -> None:
    """``got`` (``outcome`` of the row's case) against the row's pinned outcome."""
    want = row["expected"]
    where = f"{row['gpu']} {row['algorithm']} {workload_of(row)}"
    assert ("error" in got) == ("error" in want), where
    if "error" in want:
        assert got["error"] == want["error"], where
        return
    assert got["bound"] == want["bound"], where
    assert got["kernels"] == want["kernels"], where
    for key in ("seconds", "tflops", "clock_hz", "power_w", "memory_bytes",
                "bound_max_seconds"):
        assert _close(got[key], want[key]), (where, key, got[key], want[key])
    for key, value in want["counts"].items():
        assert _close(got["counts"][key], value), (where, key, got["counts"][key], value)


@pytest.mark.parametrize("chunk", range(10))
def test_predictions_identical(chunk):
    for row in _golden()[chunk::10]:
        check_row(row, outcome(workload_of(row), row["gpu"], row["algorithm"]))
