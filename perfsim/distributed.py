"""Design-space sweeps past one machine: :func:`perfsim.sweep.sweep` in partitions on Dask.

A sweep of 10⁹–10¹⁰ rows (GPU what-ifs × workloads × tile configurations) outgrows one
machine's memory and cores. :func:`dask_sweep` cuts its grid into partitions — one per GPU and
algorithm, and each of those cut along the list-valued workload field with the most values
until a partition holds at most ``rows_per_partition`` rows — runs :func:`perfsim.sweep.sweep`
on each partition on a Dask worker, and writes each partition's rows to its own Parquet file
of one dataset directory::

    OUT/part-00000.parquet ... part-NNNNN.parquet
    OUT/manifest.json          # written last: partitions, rows per file, the config

A partition file is written to a temporary name and renamed, and partitions whose file
already exists are not recomputed, so an interrupted run (a lost worker, Ctrl-C) resumes
where it stopped: run the same command again. ``manifest.json`` records the partitioning, so a
second run with another config or partition size into the same directory is refused.

The rows are those of the single-machine sweep of the same config, value for value (each
partition runs the same code); only their order differs: partition by partition, each in the
single-machine order of its own grid. ``read_dataset`` returns them as one DataFrame.

Scheduler: ``"local"`` starts a ``distributed.LocalCluster`` of ``workers`` single-threaded
worker processes on this machine; any other string is the address of a running scheduler
(``tcp://host:8786``: a cluster started by ``dask-scheduler``/``dask-worker``, dask-jobqueue
or the Dask Kubernetes operator). The workers need perfsim installed and ``OUT`` on a
filesystem they share with the client (or an fsspec URL they can all write: not tested here).
Needs ``dask[distributed]`` and ``pyarrow`` (``pip install 'perfsim[dask]'``).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from perfsim.errors import PerfsimError

#: Rows per partition by default. Measured on the 2-core development machine
#: (benchmarks/bench_dask.py, 10⁶ fa2 rows; docs/sweeps.md "Past one machine"): each task
#: costs ~8 ms beyond its rows (scheduling, one Parquet file), and partitions of 125k-500k rows
#: ran slower per row than 31k-row ones in fresh worker processes (their arrays are new
#: memory, page-faulted in); 31k-row partitions were the fastest, so 50k: tens of ms of work
#: per task and bounded memory per worker.
ROWS_PER_PARTITION = 50_000
#: Workload fields a partition may be cut along (list-valued ones, longest first).
SPLIT_FIELDS = ("seqlen_q", "batch", "heads", "seqlen_k", "kv_heads", "head_dim",
                "head_dim_v", "causal", "dtype", "phase", "dropout_p", "window", "kv_dtype",
                "page_size", "softcap")
MANIFEST = "manifest.json"


def _need_dask():
    try:
        import dask  # noqa: F401
        import distributed
        import pyarrow  # noqa: F401
    except ImportError:
        raise PerfsimError("--dask needs dask[distributed] and pyarrow (pip install "
                           "'perfsim[dask]')") from None
    return distributed


def _values(value) -> list:
    return list(value) if isinstance(value, (list, tuple, range)) else [value]


def count_rows(kwargs: dict) -> int:
    """Rows a :func:`perfsim.sweep.sweep` call with ``kwargs`` returns (the Cartesian product
    of the list-valued fields; ``kv_heads``, ``seqlen_k`` and ``head_dim_v`` left at
    ``None`` follow their partners, and a ``window`` pair is one value)."""
    from perfsim.gpu_catalog import gpus as catalog
    from perfsim.overrides import expand_overrides

    rows = 1
    for field in SPLIT_FIELDS:
        value = kwargs.get(field)
        if value is None:
            continue
        if field == "window" and isinstance(value, (list, tuple)) and value and \
                not isinstance(value[0], (list, tuple, str)):
            continue                                   # one (left, right) pair
        rows *= len(_values(value))
    gpus = kwargs.get("gpus")
    rows *= len(_values(catalog() if gpus is None else gpus))
    algorithms = kwargs.get("algorithms")
    if algorithms is not None:
        rows *= len(_values(algorithms))
    else:
        from perfsim import algorithms as algos
        rows *= len(algos.names())
    return rows * len(expand_overrides(kwargs.get("overrides") or {}))


def partitions(kwargs: dict, rows_per_partition: int = ROWS_PER_PARTITION) -> list[dict]:
    """``kwargs`` of :func:`perfsim.sweep.sweep` cut into partitions: one per GPU and
    algorithm, each cut further along its longest list-valued workload field into equal
    chunks until it holds at most ``rows_per_partition`` rows (a partition may hold more
    when no list is left to cut)."""
    from perfsim import algorithms as algos
    from perfsim.gpu_catalog import gpus as catalog

    if rows_per_partition < 1:
        raise PerfsimError(f"rows_per_partition must be at least 1, got {rows_per_partition}")
    gpus = kwargs.get("gpus")
    algorithms = kwargs.get("algorithms")
    base = []
    for gpu in _values(catalog() if gpus is None else gpus):
        for algo in _values(algos.names() if algorithms is None else algorithms):
            base.append({**kwargs, "gpus": [gpu], "algorithms": [algo]})
    out = []
    for part in base:
        out.extend(_cut(part, rows_per_partition))
    return out


def _cut(part: dict, limit: int) -> list[dict]:
    rows = count_rows(part)
    if rows <= limit:
        return [part]
    lists = [(len(_values(part[f])), f) for f in SPLIT_FIELDS
             if isinstance(part.get(f), (list, tuple, range)) and len(_values(part[f])) > 1
             and not (f == "window" and not isinstance(_values(part[f])[0], (list, tuple,
                                                                                 str)))]
    if not lists:
        return [part]
    n, field = max(lists)
    # kv_heads / seqlen_k / head_dim_v left at None follow heads / seqlen_q / head_dim: they
    # still follow each chunk's values, so cutting the partner keeps the pairing
    chunks = min(n, math.ceil(rows / limit))
    values = _values(part[field])
    size = math.ceil(n / chunks)
    out = []
    for start in range(0, n, size):
        out.extend(_cut({**part, field: values[start:start + size]}, limit))
    return out


def _config_key(kwargs: dict, rows_per_partition: int) -> str:
    """A stable text of the config and partition size (the manifest's identity check)."""
    def plain(value):
        if hasattr(value, "label"):
            return value.label()
        if hasattr(value, "id"):
            return value.id
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in sorted(value.items())}
        if isinstance(value, (list, tuple, range)):
            return [plain(v) for v in value]
        return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)
    return json.dumps({"config": plain(kwargs), "rows_per_partition": rows_per_partition},
                      sort_keys=True, default=str)


def run_partition(part: dict, path: str) -> int:
    """Sweep one partition and write its rows to ``path`` (Parquet, through a temporary
    file renamed over it); returns the row count. Runs on a worker."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from perfsim.files import atomic_write
    from perfsim.sweep import sweep

    df = sweep(**part)
    for column in df.columns:                 # per-partition categories would not align
        if str(df[column].dtype) == "category":
            df[column] = df[column].astype(str)
    with atomic_write(Path(path)) as tmp:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
    return len(df)


def dask_sweep(kwargs: dict, out: str | Path, scheduler: str = "local",
               workers: int | None = None, rows_per_partition: int = ROWS_PER_PARTITION,
               progress=None) -> Path:
    """Run the sweep ``kwargs`` (as :func:`perfsim.sweep.sweep` takes them) on Dask and write
    a partitioned Parquet dataset to the directory ``out`` (module docstring).

    Args:
        kwargs: sweep arguments; ``progress`` and ``max_memory_bytes`` are per partition.
        out: dataset directory (created; partitions already in it are kept and skipped).
        scheduler: ``"local"`` (a ``LocalCluster`` of ``workers`` processes, default: the
            cores of this machine) or a scheduler address.
        rows_per_partition: partition size (:func:`partitions`).
        progress: called as ``progress(partitions_done, partitions_total)``.

    Returns:
        The dataset directory.

    Raises:
        perfsim.PerfsimError: dask or pyarrow missing; ``out`` holds another config's
            partitions; a partition failed (the message names it and its error).
    """
    distributed = _need_dask()
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise PerfsimError(f"{out}: exists and is not a directory (the dataset is a folder of "
                           "Parquet files)")
    out.mkdir(parents=True, exist_ok=True)
    parts = partitions(kwargs, rows_per_partition)
    key = _config_key(kwargs, rows_per_partition)
    marker = out / ".config.json"
    if marker.exists() and marker.read_text() != key:
        raise PerfsimError(f"{out}: holds partitions of another sweep config or partition "
                           "size; choose a new directory or delete it")
    marker.write_text(key)
    paths = [out / f"part-{i:05d}.parquet" for i in range(len(parts))]
    todo = [(p, str(path)) for p, path in zip(parts, paths) if not path.exists()]
    cluster = None
    if scheduler == "local":
        n = workers or os.cpu_count() or 1
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster)
    else:
        client = distributed.Client(scheduler)
    try:
        futures = [client.submit(run_partition, p, path, pure=False) for p, path in todo]
        done = len(parts) - len(todo)
        if progress:
            progress(done, len(parts))
        for future in distributed.as_completed(futures):
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001 - name the partition, keep the rest
                for f in futures:
                    f.cancel()
                raise PerfsimError(f"a sweep partition failed: {type(exc).__name__}: "
                                   f"{exc}".strip()) from None
            done += 1
            if progress:
                progress(done, len(parts))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    import pyarrow.parquet as pq

    manifest = {"partitions": [{"file": path.name, "rows": pq.read_metadata(path).num_rows}
                               for path in paths],
                "rows": 0, "config": json.loads(key)}
    manifest["rows"] = sum(p["rows"] for p in manifest["partitions"])
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return out


def read_dataset(out: str | Path):
    """The rows of a finished :func:`dask_sweep` dataset as one pandas DataFrame, partition
    by partition.

    Raises:
        perfsim.PerfsimError: no ``manifest.json`` (the run did not finish)."""
    import pandas as pd
    import pyarrow.parquet as pq

    out = Path(out)
    if not (out / MANIFEST).exists():
        raise PerfsimError(f"{out}: no {MANIFEST}: the sweep has not finished (run it again "
                           "to resume)")
    manifest = json.loads((out / MANIFEST).read_text())
    frames = [pq.read_table(out / p["file"]).to_pandas() for p in manifest["partitions"]]
    return pd.concat(frames, ignore_index=True)
