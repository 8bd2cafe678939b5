"""Scaling of ``perfsim sweep --dask`` on this machine (docs/sweeps.md "Past one machine").

    python benchmarks/bench_dask.py [--rows 1000000] [--out /tmp/bench-dask]

Times, for one fa2 forward grid of about ``--rows`` rows on one GPU: the single-machine sweep
(``perfsim.sweep.sweep``, then a Parquet write) and ``perfsim.distributed.dask_sweep`` with a
LocalCluster of 1 and 2 worker processes at three partition sizes (cluster start-up
included, and reported apart). Prints one line per run: seconds, rows/s, partitions.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path


def grid(rows: int) -> dict:
    seqlens = max(1, rows // (64 * 8 * 2))
    return {"gpus": ["h100-sxm5"], "algorithms": ["fa2"], "batch": list(range(1, 65)),
            "heads": [4, 8, 12, 16, 24, 32, 40, 64], "head_dim": [64, 128],
            "seqlen_q": [64 + 16 * i for i in range(seqlens)]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-dask"))
    args = parser.parse_args()

    import distributed
    import pyarrow as pa
    import pyarrow.parquet as pq

    from perfsim.distributed import count_rows, dask_sweep, partitions
    from perfsim.sweep import sweep

    kwargs = grid(args.rows)
    n = count_rows(kwargs)
    start = time.perf_counter()
    df = sweep(**kwargs)
    mid = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), args.out / "local.parquet")
    end = time.perf_counter()
    print(f"local: {n} rows, sweep {mid - start:.2f} s ({n / (mid - start):.3g} rows/s), "
          f"Parquet write {end - mid:.2f} s")
    for workers in (1, 2):
        start = time.perf_counter()
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, dashboard_address=None)
        cluster.close()
        startup = time.perf_counter() - start
        for size in (n // 2, n // 8, n // 32, n // 128):
            target = args.out / f"dask-{workers}-{size}"
            shutil.rmtree(target, ignore_errors=True)
            start = time.perf_counter()
            dask_sweep(kwargs, target, "local", workers=workers, rows_per_partition=size)
            seconds = time.perf_counter() - start
            print(f"dask local, {workers} worker(s), {len(partitions(kwargs, size))} "
                  f"partitions of <= {size} rows: {seconds:.2f} s ({n / seconds:.3g} rows/s; "
                  f"cluster start and stop alone {startup:.2f} s)")


if __name__ == "__main__":
    main()
