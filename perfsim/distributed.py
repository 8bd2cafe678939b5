"""Design-space sweeps past one machine: :func:`perfsim.sweep.sweep` in partitions on Dask.

A sweep of 10⁹–10¹⁰ rows (GPU what-ifs × workloads × tile configurations) outgrows one
machine's memory and cores. :func:`dask_sweep` cuts its grid into partitions — one per GPU and
algorithm, and each of those cut along the list-valued workload field with the most values
until a partition holds at most ``rows_per_partition`` rows — runs :func:`perfsim.sweep.sweep`
on each partition on a Dask worker, and writes each partition's rows to its own Parquet file
of one dataset directory::

    OUT/part-00000.parquet ... part-NNNNN.parquet
    OUT/_manifest.json         # written last: partitions, rows per file, the config's key

A partition file is written to a temporary name and renamed, and partitions whose file
already exists are not recomputed, so an interrupted run (a lost worker, Ctrl-C) resumes
where it stopped: run the same command again. ``_manifest.json`` (and, from the first
partition on, the hidden ``.config.json``) records the dataset's identity: the config with its
GPUs and algorithms resolved to their full specs, the perfsim version, the digest of the
model's code and catalog (:func:`perfsim.sweep.rows_key`) and the partition size. A second run
into the same directory with any of them changed is refused, naming what differs, so one
dataset never mixes rows of two models (datasets written before 2026-12-06 recorded only the
config and partition size, and are refused as another model).

The rows are those of the single-machine sweep of the same config, value for value (each
partition runs the same code); only their order differs: partition by partition, each in the
single-machine order of its own grid. ``read_dataset`` returns them as one DataFrame.

Scheduler: ``"local"`` starts a ``distributed.LocalCluster`` of ``workers`` single-threaded
worker processes on this machine; any other string is the address of a running scheduler
(``tcp://host:8786``: a cluster started by ``dask-scheduler``/``dask-worker``, dask-jobqueue
or the Dask Kubernetes operator). The workers need perfsim installed and ``OUT`` on a
filesystem they share with the client (or an fsspec URL they can all write: not tested here).
Needs ``dask[distributed]`` and ``pyarrow`` (``pip install 'perfsim[dask]'``).

Length: partitioning, the dataset's identity and resume rules, the cluster connection with its
deadline and the one-line errors are one feature; each part is short, and they share the
dataset layout above.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from perfsim.errors import PerfsimError
from perfsim.files import PART_GLOB, check_output_folder, write_text_atomic
from perfsim.sweep import _windows, none_word, rows_key
from perfsim.sweep import count_rows as sweep_rows

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
MANIFEST = "_manifest.json"
#: the name datasets written before 2026-12-03 carry (read, never written): Parquet readers
#: (pyarrow.dataset, pandas.read_parquet, Spark, DuckDB) skip files whose names start with "_"
#: or ".", so the folder now reads as a dataset as it is
OLD_MANIFEST = "manifest.json"


def _manifest_path(out: Path) -> Path:
    """The dataset's manifest (its current name, else the old one where only that exists)."""
    new, old = out / MANIFEST, out / OLD_MANIFEST
    return old if old.exists() and not new.exists() else new


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


def _field_values(field: str, value) -> list:
    """The values a config field crosses (a window as its list of pairs)."""
    if field == "window":
        return _windows(value)
    return _values(value)


def count_rows(kwargs: dict) -> int:
    """Rows :func:`perfsim.sweep.sweep` returns for ``kwargs`` (``perfsim.sweep.count_rows``:
    the same validation, no prediction).

    Raises:
        perfsim.PerfsimError: a bad or empty value, as the sweep says it."""
    return sweep_rows(**kwargs)


def partitions(kwargs: dict, rows_per_partition: int = ROWS_PER_PARTITION) -> list[dict]:
    """``kwargs`` of :func:`perfsim.sweep.sweep` cut into partitions: one per GPU and
    algorithm, each cut further along its longest list-valued workload field into equal
    chunks until it holds at most ``rows_per_partition`` rows (a partition may hold more
    when no list is left to cut)."""
    from perfsim import algorithms as algos
    from perfsim.gpu_catalog import gpus as catalog

    if rows_per_partition < 1:
        raise PerfsimError(f"rows_per_partition must be at least 1, got {rows_per_partition}")
    count_rows(kwargs)                     # an empty list is refused before any partition
    kwargs = _checked_columns(kwargs)
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


def _checked_columns(kwargs: dict) -> dict:
    """``kwargs`` with its ``columns`` (if any) checked and in the table's order
    (:func:`perfsim.sweep.check_columns`), so a dataset's identity does not depend on the
    order they were given in.

    Raises:
        perfsim.PerfsimError: as ``check_columns``."""
    if kwargs.get("columns") is None:
        return kwargs
    from perfsim.sweep import check_columns

    return {**kwargs, "columns": list(check_columns(kwargs["columns"]))}


#: Fields whose "none" entry follows another field (``seqlen_k`` = ``seqlen_q``, ...): the
#: local sweep merges that entry's rows with an explicit equal value of the same list.
FOLLOWERS = ("seqlen_k", "kv_heads", "head_dim_v", "kv_dtype")


def _follows_in_list(field: str, values: list) -> bool:
    """Whether ``field``'s list holds a following entry (``None`` or ``"none"``) beside
    others: cut apart, the following entry and an explicit value equal to its partner's
    would each give the same row in two partitions (the local sweep gives it once), so such
    a list is never cut."""
    return field in FOLLOWERS and any(map(none_word, values))


def _cut(part: dict, limit: int) -> list[dict]:
    rows = count_rows(part)
    if rows <= limit:
        return [part]
    given = {f: _field_values(f, part[f]) for f in SPLIT_FIELDS if part.get(f) is not None}
    lists = [(len(values), f) for f, values in given.items()
             if len(values) > 1 and not _follows_in_list(f, values)]
    if not lists:
        return [part]
    n, field = max(lists)
    # kv_heads / seqlen_k / head_dim_v left at None follow heads / seqlen_q / head_dim: they
    # still follow each chunk's values, so cutting the partner keeps the pairing
    chunks = min(n, math.ceil(rows / limit))
    values = given[field]
    size = math.ceil(n / chunks)
    out = []
    for start in range(0, n, size):
        chunk = values[start:start + size]
        if field == "window":
            chunk = [list(w) for w in chunk]
        out.extend(_cut({**part, field: chunk}, limit))
    return out


def run_partition(part: dict, path: str, engine: str = "auto") -> tuple[int, dict, list]:
    """Sweep one partition (with ``engine``, :func:`perfsim.sweep.sweep`) and write its rows
    to ``path`` (Parquet, through a temporary file renamed over it). Runs on a worker.

    Returns:
        ``(rows, over, texts)``: the row count; the power-limit counts of the sweep's
        :class:`perfsim.sweep.PowerLimitWarning` (GPU id → (rows, largest power / limit),
        empty if none), which the client adds up into one warning; and the text of any other
        warning, which the client shows once. The worker prints none of them (they had
        reached its stderr in Python's raw two-line format)."""
    import warnings

    import pyarrow as pa
    import pyarrow.parquet as pq

    from perfsim.files import atomic_write
    from perfsim.sweep import PowerLimitWarning, sweep

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = sweep(**part, engine=engine)
    over, texts = {}, []
    for w in caught:
        if isinstance(w.message, PowerLimitWarning):
            _add_over(over, w.message.over)
        else:
            texts.append(str(w.message))
    for column in df.columns:                 # per-partition categories would not align
        if str(df[column].dtype) == "category":
            df[column] = df[column].astype(str)
    with atomic_write(Path(path)) as tmp:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
    return len(df), over, texts


def _add_over(total: dict, over: dict) -> None:
    """Add power-limit counts ``over`` (GPU id → (rows, largest ratio)) into ``total``."""
    for gpu, (rows, worst) in over.items():
        had_rows, had_worst = total.get(gpu, (0, 0.0))
        total[gpu] = (had_rows + rows, max(had_worst, worst))


#: Seconds between looks at the partitions' futures (a partition takes seconds).
POLL_S = 0.1
#: Seconds the client and a local cluster get to close.
CLOSE_TIMEOUT_S = 10


def _quietly(fn, *args, **kwargs) -> None:
    """``fn(*args, **kwargs)``, its errors ignored: closing after an interrupt or a failure,
    whose own error is the one to report."""
    try:
        fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a close that fails must not hide the first error
        pass


def _readable(path: Path) -> bool:
    """Whether a partition file is a complete Parquet file (a resumed run recomputes others)."""
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
        return True
    except Exception:  # noqa: BLE001 - truncated, empty or foreign: recompute it
        return False


def _client(distributed, scheduler: str, workers: int | None):
    """``(client, cluster or None)`` for ``scheduler`` (module docstring), or one clear error
    within :data:`CONNECT_TIMEOUT_S` seconds."""
    import logging

    if scheduler == "local":
        import signal
        import threading

        n = workers or os.cpu_count() or 1
        # the worker processes start with Ctrl-C ignored (an ignored signal stays ignored in
        # a child): the interrupt reaches this process alone, which closes the cluster, and
        # no worker prints a KeyboardInterrupt traceback of its own. A Ctrl-C in the second
        # the cluster takes to start is therefore lost (README): blocking SIGINT there
        # instead keeps it pending in this thread, but a native thread started earlier
        # (numpy's BLAS pool) takes the process's signal while it is ignored, and a worker
        # started without SIG_IGN prints tracebacks on every later Ctrl-C (tried, not kept)
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1,
                                               processes=True, dashboard_address=":0",
                                               silence_logs=logging.CRITICAL)
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        return distributed.Client(cluster), cluster
    if "://" not in scheduler or not scheduler.rsplit(":", 1)[-1].isdigit():
        raise PerfsimError(f"--dask {scheduler!r}: give 'local' or a scheduler address such as "
                           "tcp://HOST:8786")
    if not 0 < int(scheduler.rsplit(":", 1)[-1]) < 65536:
        raise PerfsimError(f"--dask {scheduler!r}: the port must be 1 to 65535")
    _reachable(scheduler)
    # in a daemon thread with a deadline: a listener that is not a Dask scheduler accepts the
    # connection and never answers, and the client's own timeout does not cover that
    import threading

    got: dict = {}

    def connect():
        try:
            got["client"] = distributed.Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
        except Exception as exc:  # noqa: BLE001 - OSError, TimeoutError, comm errors
            got["error"] = exc

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S + 5)
    if "client" in got:
        return got["client"], None
    if "error" in got:
        exc = got["error"]
        text = " ".join(str(exc).split())[:160]
        if isinstance(exc, TimeoutError) or "timed out" in text.lower():
            raise PerfsimError(f"--dask {scheduler}: no Dask scheduler answered within "
                               f"{CONNECT_TIMEOUT_S} s ({type(exc).__name__})")
        if isinstance(exc, MemoryError):
            # Dask's protocol read another server's greeting as a frame length (a fresh
            # user's report: "Unable to allocate 2.82 EiB ..." from an SSH server)
            raise PerfsimError(f"--dask {scheduler}: something answered there, but not a "
                               "Dask scheduler (its reply was not Dask's protocol)")
        raise PerfsimError(f"--dask {scheduler}: could not connect to a Dask scheduler "
                           f"({type(exc).__name__}{': ' + text if text else ''})")
    raise PerfsimError(f"--dask {scheduler}: no Dask scheduler answered within "
                       f"{CONNECT_TIMEOUT_S} s (the connection was accepted, then nothing "
                       f"came back; given up after {CONNECT_TIMEOUT_S + 5} s)")


def _reachable(scheduler: str) -> None:
    """One TCP connection to a ``tcp://`` scheduler's host and port, so a refused or
    unresolvable address is said at once (the Dask client retries it until its timeout).

    Raises:
        perfsim.PerfsimError: the connection is refused or the host unknown."""
    import socket
    from urllib.parse import urlsplit

    if not scheduler.startswith("tcp://"):
        return                  # tls://, ucx://, ...: the client's own path
    where = urlsplit(scheduler)
    try:
        with socket.create_connection((where.hostname, where.port), timeout=CONNECT_TIMEOUT_S):
            pass
    except (ConnectionRefusedError, socket.gaierror) as exc:
        why = "connection refused" if isinstance(exc, ConnectionRefusedError) else \
            "unknown host"
        raise PerfsimError(f"--dask {scheduler}: no Dask scheduler there ({why})") from None
    except OSError:
        return                  # a timeout or another error: the client's path says it


#: Seconds to wait for a remote scheduler before giving up.
CONNECT_TIMEOUT_S = 20
#: Most local worker processes per core of this machine (``workers`` of a ``"local"``
#: cluster): each worker is one single-threaded process of ~100 MB holding its partition, so
#: past one per core they only share the cores; a few per core leave room for partitions
#: that wait on their Parquet writes, and more is no sweep but a request to start millions
#: of processes.
MAX_WORKERS_PER_CORE = 4


def max_local_workers() -> int:
    """The most worker processes a ``"local"`` cluster may start here:
    :data:`MAX_WORKERS_PER_CORE` per core (``os.cpu_count()``; 1 core where unknown)."""
    return MAX_WORKERS_PER_CORE * (os.cpu_count() or 1)


def check_workers(workers, flag: str = "workers") -> None:
    """``workers`` is None (one per core) or an integer from 1 to :func:`max_local_workers`.

    Raises:
        perfsim.PerfsimError: naming ``flag``, the range and why it ends there."""
    if workers is None:
        return
    top = max_local_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= top:
        raise PerfsimError(f"{flag} must be at least 1 and at most {top} ({MAX_WORKERS_PER_CORE} "
                           f"per core of the {os.cpu_count() or 1} here: more processes only "
                           f"share the cores), got {workers!r}")


def _what_differs(recorded: set, key: str) -> str:
    """``: FIELDS differ`` naming which parts of a dataset's recorded identity differ from
    ``key`` (:func:`perfsim.sweep.rows_key`'s fields); ``: ...`` saying so where a record
    cannot be read, or was written before the identity held the perfsim version and the
    model's digest (2026-12-06; its config was also recorded unresolved, so it is not
    compared)."""
    names = {"config": "the config (grid, GPUs, algorithms or columns)",
             "perfsim": "the perfsim version",
             "model": "the model (a digest of perfsim's code and catalog)",
             "rows_per_partition": "the partition size"}
    if not recorded:
        return ": no record in it says which"
    want = json.loads(key)
    differ: list[str] = []
    for text in recorded:
        try:
            got = json.loads(text)
        except (TypeError, ValueError):
            got = None
        if not isinstance(got, dict) or "config" not in got:
            return ": its record cannot be read"
        if "model" not in got:
            return (": it was written by a perfsim before 2026-12-06, which did not record "
                    "the perfsim version and model its rows came from")
        fields = [*names, *(k for k in want if k not in names and k != "frame_rows")]
        differ += [names.get(k, k) for k in fields
                   if got.get(k) != want.get(k) and names.get(k, k) not in differ]
    if not differ:
        return ": its record cannot be read"
    listed = differ[0] if len(differ) == 1 else ", ".join(differ[:-1]) + " and " + differ[-1]
    return f": {listed} {'differs' if len(differ) == 1 else 'differ'}"


def dask_sweep(kwargs: dict, out: str | Path, scheduler: str = "local",
               workers: int | None = None, rows_per_partition: int = ROWS_PER_PARTITION,
               progress=None, engine: str = "auto") -> Path:
    """Run the sweep ``kwargs`` (as :func:`perfsim.sweep.sweep` takes them) on Dask and write
    a partitioned Parquet dataset to the directory ``out`` (module docstring).

    Args:
        kwargs: sweep arguments; ``progress`` and ``max_memory_bytes`` are per partition.
        out: dataset directory (created; complete partitions of the same config already in
            it are kept and skipped, damaged ones recomputed).
        scheduler: ``"local"`` (a ``LocalCluster`` of ``workers`` processes, default: the
            cores of this machine, at most :func:`max_local_workers`) or a scheduler address
            (``tcp://HOST:PORT``).
        rows_per_partition: partition size (:func:`partitions`).
        progress: called as ``progress(partitions_done, partitions_total)``.
        engine: each partition's evaluation engine (``perfsim.sweep.sweep``'s ``engine``;
            the rows do not depend on it, so a dataset resumes under another).

    Returns:
        The dataset directory.

    Raises:
        perfsim.PerfsimError: dask or pyarrow missing; an empty list in the config;
            ``workers`` below 1 or above :func:`max_local_workers`; ``out`` a file, a new
            folder whose parent is missing or not writable
            (:func:`perfsim.files.check_output_folder`), or a folder holding another sweep's
            partitions; no scheduler at the address; a partition failed (the first error, in
            one line; the other partitions are cancelled).
    """
    distributed = _need_dask()
    check_workers(workers)
    # before any cluster: a folder that cannot be created or written costs no work
    out = check_output_folder(out, "dataset folder")
    # absolute here: a remote worker's working directory is not this one, and it writes the
    # partitions by the path it is given (the folder must be on a filesystem both see)
    out = Path(os.path.abspath(out))
    kwargs = _checked_columns(kwargs)
    parts = partitions(kwargs, rows_per_partition)       # config errors before any cluster
    # the dataset's identity: the rows (the config with its GPUs and algorithms resolved, the
    # perfsim version and the model's digest, as a streamed file's) and the partition size
    key = rows_key(kwargs, frame_rows=None, rows_per_partition=rows_per_partition)
    marker = out / ".config.json"
    if out.exists():
        recorded = set()
        for path, field in ((marker, None), (_manifest_path(out), "key")):
            if not (path.exists() or path.is_symlink()):
                continue
            try:
                text = path.read_text(encoding="utf-8")
                value = json.loads(text)[field] if field else text
            except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError):
                value = "unknown"       # unreadable, not UTF-8, a folder, not the record
            recorded.add(value if isinstance(value, str) else "unknown")
        stray = any(out.glob(PART_GLOB))
        if recorded - {key} or (stray and not recorded):
            raise PerfsimError(f"{out}: holds partitions of another sweep"
                               f"{_what_differs(recorded - {key}, key)}; choose a new "
                               "directory or delete it")
    paths = [out / f"part-{i:05d}.parquet" for i in range(len(parts))]
    client, cluster = _client(distributed, scheduler, workers)
    futures: list = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        # whole or not at all (a full disk once left a truncated record that a later run
        # took for another sweep's)
        write_text_atomic(marker, key)
        todo = [(p, str(path)) for p, path in zip(parts, paths) if not _readable(path)]
        futures = [client.submit(run_partition, p, path, engine, pure=False)
                   for p, path in todo]
        done = len(parts) - len(todo)
        if progress:
            progress(done, len(parts))
        # polled (each future's state, then a short sleep) rather than through
        # distributed.as_completed: a Ctrl-C then lands in this loop's sleep, not inside
        # as_completed's lock handling, where it surfaced as "RuntimeError: cannot release
        # un-acquired lock" (a traceback, exit status 1) about once in 25 interrupts
        pending = list(futures)
        over: dict = {}             # the partitions' power-limit counts, one warning at the end
        texts: dict = {}            # their other warnings' texts, each shown once
        while pending:
            waiting = []
            for future in pending:
                if future.status in ("error", "cancelled"):
                    try:
                        future.result()
                    except Exception as exc:  # noqa: BLE001 - name the error, stop the rest
                        client.cancel(futures)
                        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                        raise PerfsimError(f"a sweep partition failed: {type(exc).__name__}: "
                                           f"{text}".strip()) from None
                if future.status == "finished":
                    _rows, part_over, part_texts = future.result()
                    _add_over(over, part_over)
                    texts.update(dict.fromkeys(part_texts))
                    done += 1
                    if progress:
                        progress(done, len(parts))
                else:
                    waiting.append(future)
            pending = waiting
            if pending:
                time.sleep(POLL_S)
    except BaseException:
        # interrupted or failed: no more partitions start (those written stay, to resume)
        _quietly(client.cancel, futures)
        raise
    finally:
        # bounded: an interrupted client's own close (and its __del__ later) waited 60 s
        _quietly(client.close, timeout=CLOSE_TIMEOUT_S)
        if cluster is not None:
            _quietly(cluster.close, timeout=CLOSE_TIMEOUT_S)
    import pyarrow.parquet as pq

    missing = [path.name for path in paths if not path.is_file()]
    if missing:
        raise PerfsimError(f"{out}: the workers reported {len(missing)} partition(s) written "
                           f"that are not there (e.g. {missing[0]}): the workers and this "
                           "machine must see the folder on one shared filesystem")
    manifest = {"partitions": [{"file": path.name, "rows": pq.read_metadata(path).num_rows}
                               for path in paths],
                "rows": 0, "key": key}
    manifest["rows"] = sum(p["rows"] for p in manifest["partitions"])
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    import warnings

    from perfsim.sweep import _warn_over_power

    for text in texts:
        warnings.warn(text, UserWarning, stacklevel=2)
    _warn_over_power(over, "sweep" if len(todo) == len(parts) else
                     "sweep (the partitions computed in this run; those kept from an earlier "
                     "run are not counted here)")
    return out


def read_dataset(out: str | Path):
    """The rows of a finished :func:`dask_sweep` dataset as one pandas DataFrame, partition
    by partition.

    Raises:
        perfsim.PerfsimError: ``out`` is no folder, or has no ``manifest.json`` (the run did
            not finish)."""
    import pandas as pd
    import pyarrow.parquet as pq

    out = Path(out)
    if not out.is_dir():
        raise PerfsimError(f"{out}: {'not a folder' if out.exists() else 'no such folder'} "
                           "(give the --out folder of a perfsim sweep --dask run)")
    if not _manifest_path(out).exists():
        raise PerfsimError(f"{out}: no {MANIFEST}: the sweep has not finished (run it again "
                           "to resume)")
    manifest = json.loads(_manifest_path(out).read_text())
    frames = []
    for p in manifest["partitions"]:
        try:
            frames.append(pq.read_table(out / p["file"]).to_pandas())
        except Exception as exc:  # noqa: BLE001 - missing or damaged file: one line
            raise PerfsimError(f"{out / p['file']}: cannot be read ({type(exc).__name__}); "
                               "run the sweep again to recompute it") from None
    if not frames:
        raise PerfsimError(f"{out}: the dataset has no partitions")
    return pd.concat(frames, ignore_index=True)
