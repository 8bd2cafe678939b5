"""pytest-benchmark targets of issue 13: one ``predict`` per algorithm and phase, a 10⁶-row
sweep and its Parquet write. Targets and measured figures live in docs/performance.md, not in
assertions: these check only that each call returns a result.

    python -m pytest benchmarks --benchmark-enable [--benchmark-only]

(``benchmarks/`` is outside the default ``testpaths``; the default ``addopts`` disable the
timing, so a plain ``python -m pytest benchmarks`` runs each target once as a smoke test.)
"""

from __future__ import annotations

import itertools

import pytest

import perfsim
from perfsim import AttentionWorkload
from perfsim.cli.sweep import write_rows

#: The workload of docs/performance.md's per-call table (B = 4, H = 16, N = 4096, d = 128,
#: causal, bf16), per phase.
WORKLOAD = dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True, dtype="bf16")
#: A GPU each algorithm runs on (FA3 needs Hopper, FA4 Blackwell).
GPU = {"standard": "h100-sxm5", "fa1": "h100-sxm5", "fa2": "h100-sxm5", "fa3": "h100-sxm5",
       "fa4": "b200"}
#: 10⁶ rows: 100 batches x 5 head counts x 500 lengths x 4 head dims, FA2 causal forward, H100.
SWEEP = dict(batch=list(range(1, 101)), heads=[8, 16, 32, 64, 96],
             seqlen_q=list(range(256, 256 * 501, 256)), head_dim=[64, 96, 128, 256],
             causal=True, gpus="h100-sxm5", algorithms="fa2")


@pytest.mark.parametrize("phase", ["fwd", "bwd", "fwd_bwd"])
@pytest.mark.parametrize("algorithm", list(GPU))
def test_predict(benchmark, algorithm, phase, monkeypatch):
    """The interpreted path (``PERFSIM_PREDICT_ENGINE=python``), the same workload each call."""
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "python")
    w = AttentionWorkload(**WORKLOAD, phase=phase)
    perfsim.predict(w, gpu=GPU[algorithm], algorithm=algorithm)      # warm the caches
    p = benchmark(perfsim.predict, w, gpu=GPU[algorithm], algorithm=algorithm)
    assert p.seconds > 0


@pytest.mark.parametrize("phase", ["fwd", "bwd", "fwd_bwd"])
@pytest.mark.parametrize("algorithm", list(GPU))
def test_predict_compiled(benchmark, algorithm, phase, monkeypatch):
    """The compiled path (``perfsim.fastpath``) once the structure has its program: each call
    on the next of 60 workloads of the structure (batch, heads and length varied), its
    ``seconds`` read."""
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "compiled")
    ws = [AttentionWorkload(**{**WORKLOAD, "batch": b, "heads": h, "seqlen_q": n},
                            phase=phase)
          for b, h, n in itertools.product((1, 2, 4, 8, 16), (16, 32, 64), (2048, 4096, 8192,
                                                                            16384))]
    gpu = GPU[algorithm]
    for w in (*ws, *ws):            # each structure built, then checked (a split count or
        perfsim.predict(w, gpu=gpu, algorithm=algorithm)    # packing group is one of its own)
    rows = itertools.cycle(ws)
    seconds = benchmark(lambda: perfsim.predict(next(rows), gpu=gpu,
                                                algorithm=algorithm).seconds)
    assert seconds > 0


@pytest.fixture(scope="module")
def rows():
    return perfsim.sweep(**SWEEP)


def test_sweep_million_rows(benchmark):
    df = benchmark.pedantic(perfsim.sweep, kwargs=SWEEP, rounds=3, iterations=1)
    benchmark.extra_info["rows"] = len(df)
    assert len(df) == 10**6


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_sweep_million_rows_by_engine(benchmark, engine):
    """The same 10⁶ rows through each engine (perfsim.compiled: traced, compiled to native
    loops; the first round pays for tracing and compiling, the minimum is the warm rate)."""
    if engine == "compiled":
        pytest.importorskip("llvmlite")
        pytest.importorskip("numba")
    df = benchmark.pedantic(perfsim.sweep, kwargs={**SWEEP, "engine": engine}, rounds=3,
                            iterations=1)
    assert len(df) == 10**6


@pytest.mark.parametrize("columns", [None, ("seconds", "bound")], ids=["all", "times"])
def test_sweep_million_rows_compiled_by_columns(benchmark, columns):
    """The compiled 10⁶ rows with every result column and with the times alone
    (``columns=``: the kernel computes and writes only those); 7 rounds, the first pays for
    compiling."""
    pytest.importorskip("llvmlite")
    pytest.importorskip("numba")
    df = benchmark.pedantic(perfsim.sweep, kwargs={**SWEEP, "engine": "compiled",
                                                   "columns": columns},
                            rounds=7, iterations=1)
    benchmark.extra_info["bytes_per_row"] = int(df.memory_usage(deep=True).sum()) // len(df)
    assert len(df) == 10**6


def test_parquet_write(benchmark, rows, tmp_path):
    pytest.importorskip("pyarrow")
    out = tmp_path / "rows.parquet"
    benchmark.pedantic(write_rows, args=(rows, out), rounds=3, iterations=1)
    assert out.stat().st_size > 0


def test_streamed_sweep_to_parquet(benchmark, tmp_path):
    """The same 10⁶ rows evaluated and written block by block (``perfsim sweep --stream``):
    bounded memory, at the price of a frame and an Arrow table per block (docs/sweeps.md)."""
    pytest.importorskip("pyarrow")
    from perfsim.cli.sweep import write_frames

    out = tmp_path / "streamed.parquet"
    benchmark.pedantic(lambda: write_frames(perfsim.sweep_frames(**SWEEP), out), rounds=1,
                       iterations=1)
    assert out.stat().st_size > 0
