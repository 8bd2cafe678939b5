"""``perfsim.sweep``: what-if grids of workloads, GPUs, algorithms and GPU overrides.

Every combination is one row of a pandas DataFrame. The rows are the Cartesian product of the
values given, except that ``kv_heads``, ``seqlen_k`` and ``head_dim_v`` left at ``None``
follow ``heads``, ``seqlen_q`` and ``head_dim`` (paired, not crossed).

Vectorised: rows are grouped by the fields an algorithm may branch on (algorithm, GPU variant,
``causal``, ``dtype``, ``phase``, ``dropout_p``, ``head_dim``, ``head_dim_v`` and the
inference fields ``window``, ``kv_dtype``, ``page_size``, ``softcap``). Inside a group
``batch``, ``heads``, ``kv_heads``, ``seqlen_q`` and ``seqlen_k`` are broadcastable numpy int64
arrays (blocks of about :data:`CHUNK_ROWS` rows, small enough to stay in cache) that go through
the very code :func:`perfsim.predict` runs — ``Algorithm.kernels(Dims(...), gpu)``,
:func:`perfsim.timing.time_kernel`, :func:`perfsim.predict.aggregate`. No per-row Python loop.

Length: the sweep functions (:func:`sweep`, :func:`sweep_frames`, :func:`count_rows`,
:func:`bytes_per_row`, :func:`single_split`, ...) and their vectorised machinery (grid, blocks,
group evaluation, the preallocated result table, size checks); the parts only make sense
together and none is used elsewhere.
"""

from __future__ import annotations

import collections.abc
import contextvars
import functools
import hashlib
import inspect
import itertools
import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # pandas: imported when a sweep builds its frame, not by `import perfsim`
    import pandas as pd

from perfsim import algorithms as algos
from perfsim.algorithms.base import (
    collect_infeasible,
    effective_mask,
    mask_kinds,
    structure_keys,
)
from perfsim.errors import InfeasibleError, PerfsimError, outside_perfsim, short_repr
from perfsim.frozen import replace
from perfsim.gpu import BYTES_PER_ELEMENT, GPUSpec
from perfsim.gpu_catalog import gpus as catalog
from perfsim.gpu_catalog import load_gpu
from perfsim.implementations import algorithm_group, resolve, with_fixed_choice
from perfsim.kernel import UNITS
from perfsim.mathops import INT64_SAFE, asarray
from perfsim.power import LIMIT_TOLERANCE
from perfsim.predict import BOUNDS, evaluate
from perfsim.prediction import Counts, convention_flops, credited_flops
from perfsim.software import DEFAULT_SOFTWARE
from perfsim.timing import TimingParams, check_timing
from perfsim.whatif import parse_overrides, what_if
from perfsim.workload import MAX_SIZE, MAX_TENSOR_BYTES, AttentionWorkload, _name

#: Workload columns, in ``AttentionWorkload`` order.
WORKLOAD_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
                   "head_dim_v", "causal", "dtype", "phase", "dropout_p", "window", "kv_dtype",
                   "page_size", "softcap")
#: Group-level fields beyond the classic ones; their columns: ``window`` as ``"LEFT,RIGHT"``
#: (``""`` for none, ``none`` for an unbounded side), ``kv_dtype``, ``page_size`` (0 for
#: contiguous K/V), ``softcap``.
INFERENCE_FIELDS = ("window", "kv_dtype", "page_size", "softcap")
#: Fields evaluated as arrays inside a group.
ARRAY_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k")
#: Count columns (totals over kernels, as ``Prediction.counts``).
COUNT_COLUMNS = ("flops", "tensor_flops", "fp32_flops", "exp_ops", "emulated_exp_ops",
                 "hbm_bytes", "smem_bytes")
#: Rows evaluated at once (numpy arrays of 32 Ki elements stay in the CPU caches).
CHUNK_ROWS = 1 << 15
#: Result columns, after the workload, GPU, algorithm and override columns.
RESULT_COLUMNS = ("seconds", "tflops", "bound", "clock_hz", "power_w",
                  *(f"{u}_seconds" for u in UNITS), "model_flops",
                  *COUNT_COLUMNS, "memory_bytes", "fits_memory")

Progress = Callable[[int, int], None]
#: Peak memory per result row while a sweep is built (the result columns, the DataFrame made
#: from them, the workload columns and categorical codes), measured about 400 B; with margin.
BYTES_PER_ROW = 512


def available_memory_bytes() -> int | None:
    """Memory available to a new allocation now (bytes): the least of what the machine has
    (Linux's ``MemAvailable``: free memory plus reclaimable caches; else the free physical
    pages), what this process's cgroup still allows (``memory.max`` less
    ``memory.current``, or cgroup v1's limit less usage: a container's or a batch job's
    limit) and what its address-space limit leaves (``ulimit -v``: ``RLIMIT_AS`` less the
    process's ``VmSize``); None where none is known."""
    found = [n for n in (_machine_available(), _cgroup_available(), _rlimit_available())
             if n is not None]
    return max(min(found), 0) if found else None


def _machine_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _read_int(path: str) -> int | None:
    """The whole number a cgroup file holds, or None (missing, unreadable, ``max``)."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
        return int(text)
    except (OSError, ValueError):
        return None


def _cgroup_available(cgroup_file: str = "/proc/self/cgroup",
                      v2_root: str = "/sys/fs/cgroup",
                      v1_root: str = "/sys/fs/cgroup/memory") -> int | None:
    """What the process's cgroup still allows (v2, else v1's memory controller), or None
    without a limit: the least headroom of its cgroup and every cgroup above it (a batch
    job's limit sits on a parent: ``/job_42`` over ``/job_42/step_0``), each limit less the
    usage without the page cache the kernel can reclaim (``inactive_file``: a container that
    has read large files sits near its limit)."""
    try:
        with open(cgroup_file, encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:            # v2: "0::/path"
            root, files = v2_root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):             # v1: "4:memory:/path"
            root, files = v1_root, ("memory.limit_in_bytes", "memory.usage_in_bytes",
                                    "total_inactive_file")
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            folder = "/".join([root, *parts[:depth]])
            limit = _read_int(f"{folder}/{files[0]}")
            if limit is None or limit >= 2**60:             # "max"; v1 reads ~2^63 for none
                continue
            used = _read_int(f"{folder}/{files[1]}") or 0
            found.append(limit - max(used - _stat_value(f"{folder}/memory.stat", files[2]), 0))
    return min(found) if found else None


def _stat_value(path: str, key: str) -> int:
    """One counter of a cgroup's ``memory.stat`` (0 where missing)."""
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _rlimit_available() -> int | None:
    """``RLIMIT_AS`` (``ulimit -v``) less the address space the process already maps, or
    None without a limit."""
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return soft - int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return soft


#: Implementation presets whose configurations have no ``num_splits`` / ``pack_gqa``
#: (they run ``Standard``: ``perfsim.implementations.IMPLEMENTATIONS``); every other preset
#: runs FA2, FA3 or FA4.
UNSPLIT_PRESETS = ("sdpa-math", "eager")


def as_swept(algorithm: str | algos.Algorithm) -> algos.Algorithm:
    """The configuration a sweep evaluates for ``algorithm``: ``algorithm`` itself. A sweep
    makes the split-KV and GQA-packing choices (``"auto"``) and an implementation preset's
    per-shape pick (sdpa-cudnn's decode kernel, FA4's one-Q-tile launch) per row, as
    :func:`perfsim.predict` makes them, so a row equals ``predict`` of the same
    configuration. Kept for callers written when sweeps took ``"auto"`` as one split; for
    that configuration (what the closed forms of :mod:`perfsim.symbolic` assume) use
    :func:`single_split`."""
    return resolve(algorithm)


def single_split(algorithm: str | algos.Algorithm) -> algos.Algorithm:
    """``algorithm`` with ``num_splits="auto"`` / ``pack_gqa="auto"`` fixed to one split and
    no packing (explicit options kept); an implementation preset running FA2, FA3 or FA4
    (every one but :data:`UNSPLIT_PRESETS`) gets them as ``options``. The configuration the
    closed forms of :mod:`perfsim.symbolic` describe."""
    from perfsim.implementations import Implementation

    algo = resolve(algorithm)
    if isinstance(algo, Implementation):
        if algo.preset in UNSPLIT_PRESETS:
            return algo
        opts = algo.options
        return algo.model_copy(update={"options": {
            **opts, "num_splits": 1 if opts.get("num_splits", "auto") == "auto"
            else opts["num_splits"],
            "pack_gqa": False if opts.get("pack_gqa", "auto") == "auto" else opts["pack_gqa"]}})
    fields = type(algo).model_fields
    if "num_splits" in fields and "pack_gqa" in fields:
        return type(algo)(**{**algo.model_dump(),
                             "num_splits": 1 if algo.num_splits == "auto" else algo.num_splits,
                             "pack_gqa": False if algo.pack_gqa == "auto" else algo.pack_gqa})
    return algo


def _clear_arguments(fn):
    """``fn`` with a call's unknown or missing keyword arguments refused by one
    :class:`PerfsimError` naming them and the fields a sweep takes (not Python's
    ``TypeError``)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            known = list(signature.parameters)
            unknown = [k for k in kwargs if k not in signature.parameters]
            missing = [k for k, p in signature.parameters.items()
                       if p.default is inspect.Parameter.empty and k not in kwargs]
            why = []
            if args:
                why.append("takes keyword arguments only")
            if unknown:
                varlen = [k for k in unknown if k in ("seqlens_q", "seqlens_k")]
                why.append(f"unknown field{'s' * (len(unknown) > 1)} {', '.join(unknown)}"
                           + (" (variable-length batches are perfsim.predict-only: sweeps "
                              "evaluate fixed-length rows)" if varlen else ""))
            if missing:
                why.append(f"needs {', '.join(missing)}")
            raise PerfsimError(f"{fn.__name__}: {'; '.join(why)}; fields: "
                               f"{', '.join(known)}") from None
        return fn(*args, **kwargs)

    return wrapper


@_clear_arguments
def sweep(*, batch, heads, seqlen_q, head_dim, kv_heads=None, seqlen_k=None,
          head_dim_v=None, causal=False, dtype="bf16", phase="fwd", dropout_p=0.0,
          window=None, kv_dtype=None, page_size=None, softcap=0.0,
          gpus: Iterable[str | GPUSpec] | str | GPUSpec | None = None,
          algorithms: Iterable[str | algos.Algorithm] | str | None = None,
          overrides: dict | None = None, timing: TimingParams | dict | None = None,
          progress: Progress | None = None,
          max_memory_bytes: int | None = None, engine: str = "auto",
          columns: Iterable[str] | str | None = None) -> pd.DataFrame:
    """Predict every combination of the values given; one DataFrame row each.

    Each row is what :func:`perfsim.predict` gives for its shape. Rows are evaluated as
    numpy arrays, one kernel structure per set of rows: the choices ``predict`` makes per
    shape — the split-KV and GQA-packing heuristics (``num_splits="auto"``,
    ``pack_gqa="auto"`` or ``True`` of ``FA2``/``FA3``/``FA4`` and the presets running them),
    ``sdpa-cudnn``'s one-query-token decode kernel on Hopper, ``FA4``'s one Q tile per CTA
    for query rows that fit a 128-row tile — are made for every row
    (:func:`perfsim.algorithms.splits.choice_arrays`), and the rows of each choice are
    evaluated together. A grid of many small shapes (decode, short sequences, few heads)
    holds many choices and runs slower than one of large shapes. Windows, paged or narrower
    K/V caches and softcap sweep like any field; only variable-length batches
    (``seqlens_q``/``seqlens_k``) are ``predict``-only.

    Args:
        batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal, dtype,
            phase, dropout_p: ``AttentionWorkload`` fields, each a value or a list of values.
        window, kv_dtype, page_size, softcap: the same (``page_size`` 0 or ``"none"``:
            contiguous K/V, as the column writes it; ``window`` one ``(left, right)`` pair
            or a list of pairs, a pair also as the CSV column's ``"LEFT,RIGHT"`` string,
            ``"none"`` for an unbounded side; ``None`` = no window / ``kv_dtype`` = ``dtype``
            / contiguous K/V).
        gpus: catalog ids, ``.toml`` paths or ``GPUSpec`` objects; default every catalog GPU.
        algorithms: names (defaults) or configs such as ``FA2(block_m=64)``; ``"all"`` or
            the default: every ``perfsim.algorithms.names()``; ``"presets"``: every
            implementation preset (as on the command line).
        overrides: GPU what-ifs, crossed with each other and with ``gpus``:
            ``{field: [values]}`` sets a ``GPUSpec`` field, ``{field: {"scale": [factors]}}``
            multiplies it (every entry of a per-dtype table; integers are rounded); a dotted
            ``field.key`` addresses one table entry (``tensor_flops_per_clk_per_sm.bf16``).
        timing: a :class:`TimingParams` used for every group, or a dict of its fields set on
            each (GPU, algorithm)'s defaults (``{"host_floor_fwd_s": 0,
            "host_floor_bwd_s": 0}``: kernel time alone; ``{"clock": "boost"}``); default
            ``TimingParams.for_gpu`` of each GPU under each algorithm's software profile.
        progress: called as ``progress(rows_done, rows_total)`` after each block.
        max_memory_bytes: refuse a sweep whose result needs more (about
            :data:`BYTES_PER_ROW` per row, less with fewer ``columns``:
            :func:`bytes_per_row`); default: half the memory available now.
        engine: how rows are evaluated (:data:`ENGINES`; the rows agree to 1e-12 relative):
            ``"numpy"`` — the model's code on numpy arrays; ``"compiled"`` — that code
            traced once per kernel structure and compiled to a native loop
            (:mod:`perfsim.compiled`, needs ``perfsim[fast]``; structures it cannot trace,
            and blocks a trace's guard refuses, run on numpy); ``"auto"`` (default) —
            compiled for sweeps of at least :data:`AUTO_MIN_ROWS` rows whose groups have at
            least :data:`AUTO_MIN_GROUP_ROWS` rows each, when numba and llvmlite are
            installed, else numpy.
        columns: the result columns to keep (names of :data:`RESULT_COLUMNS`, kept in that
            order; default all of them). The workload, group, ``infeasible`` and
            ``stand_in`` columns are always there. Fewer columns take less memory and
            time: the compiled kernels then compute and write only what the kept columns
            need (``columns=["seconds", "bound"]``: ~100 B per row against ~240 for all).

    Returns:
        DataFrame with the workload columns, ``gpu`` (base catalog id), ``algorithm`` (label),
        ``overrides`` (label, "" for none) and one column per override field (the value, or
        ``FIELD_scale`` the factor); ``seconds``; ``tflops`` (FlashAttention convention,
        ``perfsim.prediction.model_flops``); ``bound``; ``{unit}_seconds`` per unit (each
        unit alone, summed over kernels); ``model_flops``; the counts of
        :data:`COUNT_COLUMNS`; ``memory_bytes`` (peak HBM footprint); ``fits_memory``
        (footprint ≤ GPU memory; a nullable boolean, ``<NA>`` on infeasible rows);
        ``infeasible`` (the reason, "" if feasible — such rows have NaN results);
        ``stand_in`` (an implementation preset's note where perfsim times a kernel in place
        of one it has no model of — the first of ``Prediction.notes()`` —, "" elsewhere).

    Raises:
        perfsim.PerfsimError: a bad value (the message names the field), an empty ``gpus``
            or ``algorithms`` list, an unknown GPU,
            algorithm or override field; an unknown ``engine``, or ``"compiled"`` without
            numba and llvmlite; sizes whose largest combination would exceed
            :data:`perfsim.workload.MAX_TENSOR_BYTES` per tensor; a sweep too large for the
            memory (checked before any work: the message gives rows and bytes); ``timing``
            neither a ``TimingParams`` nor a dict of its fields; ``progress`` not callable;
            an unknown or repeated name in ``columns``, or none.
    """
    _check_timing(timing)
    _check_progress(progress)
    check_engine(engine)
    kept = check_columns(columns)
    tables: list = []
    grid, groups, evaluated = _evaluated_blocks(
        batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal, dtype,
        phase, dropout_p, window, kv_dtype, page_size, softcap, gpus, algorithms, overrides,
        timing, max_memory_bytes, check_memory=True, engine=engine, tables=tables,
        columns=kept)
    out = _Table(grid, len(groups), kept)
    out.groups.extend(groups)
    out.start_frame()
    tables.append(out)              # the blocks' compiled kernels write into it
    for _group, block, results, reasons in evaluated():
        out.add(block, results, reasons)
        if progress:
            progress(out.rows, len(out))
    return out.frame()


@_clear_arguments
def sweep_frames(*, batch, heads, seqlen_q, head_dim, kv_heads=None, seqlen_k=None,
                 head_dim_v=None, causal=False, dtype="bf16", phase="fwd", dropout_p=0.0,
                 window=None, kv_dtype=None, page_size=None, softcap=0.0,
                 gpus: Iterable[str | GPUSpec] | str | GPUSpec | None = None,
                 algorithms: Iterable[str | algos.Algorithm] | str | None = None,
                 overrides: dict | None = None, timing: TimingParams | dict | None = None,
                 progress: Progress | None = None,
                 engine: str = "auto",
                 columns: Iterable[str] | str | None = None,
                 skip_rows: int = 0) -> Iterator[pd.DataFrame]:
    """:func:`sweep`'s rows as a stream of DataFrames, one per evaluated block (at most
    :data:`CHUNK_ROWS` rows each), in :func:`sweep`'s row order and with its columns: memory
    stays bounded by one block however many rows the grid has (no ``max_memory_bytes``
    check), for writing a result larger than memory (``perfsim sweep --out``). Every frame
    has the same columns (a group without an override column gets ``None`` there); string
    columns are categoricals of that frame's values (``pd.concat`` of frames turns them into
    plain strings). A frame holds one block of one group (GPU, algorithm, what-if, scalar
    fields), or, where the grid is smaller than a block, several whole groups (up to
    :data:`CHUNK_ROWS` rows), so a sweep of many small groups does not pay for one frame per
    group.

    Args: as :func:`sweep` (less ``max_memory_bytes``; ``engine`` and ``columns`` included);
        ``progress(rows_done, rows_total)`` after each frame is produced (and, with
        ``skip_rows``, once before the first, with ``rows_done = skip_rows``).
        skip_rows: rows to leave out at the start, an int ending a frame: the frames
            they make are passed over without evaluating any of their blocks (the rows of a
            stream interrupted after them are elsewhere already: ``perfsim sweep --stream``
            resumes so); the frames after them are the ones the whole stream gives. 0
            (default) to the sweep's row count (then no frame is left).

    Raises:
        perfsim.PerfsimError: as :func:`sweep`, when called (every value is checked before
            the iterator is returned); ``skip_rows`` not an int (6.0 and True are not)
            from 0 to the sweep's rows, or not at the end of a frame (the message names the
            frame ends nearest to it); a GPU what-if is checked when its rows are reached
            (an invalid one gives infeasible rows, as in :func:`sweep`).
    """
    _check_timing(timing)
    _check_progress(progress)
    check_engine(engine)
    kept = check_columns(columns)
    grid, groups, evaluated = _evaluated_blocks(
        batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal, dtype,
        phase, dropout_p, window, kv_dtype, page_size, softcap, gpus, algorithms, overrides,
        timing, None, check_memory=False, engine=engine, columns=kept)
    skip_groups, skip_blocks = _skipped(grid, len(groups), skip_rows)
    return _frames(grid, groups, evaluated(skip_groups, skip_blocks), progress, kept,
                   skip_rows)


def _groups_per_frame(grid: _Grid) -> int:
    """Whole groups per frame of :func:`sweep_frames`: several where a group's grid is at
    most half a block (:data:`CHUNK_ROWS`, read when called), else 1 (a frame per block)."""
    return max(1, CHUNK_ROWS // grid.size)


def _skipped(grid: _Grid, n_groups: int, skip_rows) -> tuple[int, int]:
    """``(groups, blocks)``: the whole groups, then the blocks of the next group, that the
    first ``skip_rows`` rows of :func:`sweep_frames` fill.

    Raises:
        perfsim.PerfsimError: ``skip_rows`` not an int (a bool or a float such as 6.0
            included), not from 0 to the sweep's rows, or not at the end of a frame."""
    total = grid.size * n_groups
    if isinstance(skip_rows, bool) or not isinstance(skip_rows, (int, np.integer)):
        raise PerfsimError(f"skip_rows must be an int (a count of rows, from 0 to the sweep's "
                           f"{total:,}), got {skip_rows!r}, a {type(skip_rows).__name__}")
    if not 0 <= skip_rows <= total:
        raise PerfsimError(f"skip_rows must be from 0 to the sweep's {total:,} rows, got "
                           f"{skip_rows:,}")
    skip_rows = int(skip_rows)
    per_frame = _groups_per_frame(grid)
    if per_frame > 1:               # frames of per_frame whole groups (the last one fewer)
        step = per_frame * grid.size
        below = skip_rows - skip_rows % step
        if skip_rows not in (below, total):
            raise _not_at_a_frame_end(skip_rows, below, min(below + step, total))
        return skip_rows // grid.size, 0
    # a frame per block: a group's blocks end at these rows of it
    groups, rest = divmod(skip_rows, grid.size)
    ends = np.cumsum(grid.block_rows())
    blocks = int(np.searchsorted(ends, rest, side="right"))
    if rest and ends[blocks - 1:blocks].tolist() != [rest]:
        start = groups * grid.size
        raise _not_at_a_frame_end(skip_rows,
                                  start + (int(ends[blocks - 1]) if blocks else 0),
                                  start + int(ends[blocks]))
    return groups, blocks


def _not_at_a_frame_end(rows: int, below: int, above: int) -> PerfsimError:
    """The error of a ``skip_rows`` between the frame ends ``below`` and ``above``."""
    return PerfsimError(f"skip_rows: {rows:,} is not at the end of a frame of this sweep "
                        f"(the nearest frames end at rows {below:,} and {above:,}): only "
                        "whole frames can be skipped")


def _frames(grid, groups, evaluated, progress, columns=RESULT_COLUMNS, skip_rows=0):
    """:func:`sweep_frames`' iterator (its checks done by the caller); ``evaluated`` starts
    after the first ``skip_rows`` rows (:func:`_skipped`, a frame end)."""
    keys = list(dict.fromkeys(k for g in groups for k in g))
    # a group column's dtype as the whole sweep's column has it: 1 and 0.5 make a float
    # column there, "wgmma" and 3 a string one, so a frame of one of those groups writes
    # them as the sweep does
    dtypes = {}
    for key in keys:
        values = [g.get(key) for g in groups]
        if not all(isinstance(v, str) for v in values):
            kind = np.asarray(values).dtype
            if kind.kind in "biufU":
                dtypes[key] = kind
    total, done = grid.size * len(groups), skip_rows
    per_frame = _groups_per_frame(grid)             # whole groups per frame (small grids)
    table, batched = None, skip_rows // grid.size    # groups put in frames so far
    if skip_rows and progress:
        progress(done, total)

    def finish(table):
        frame = table.frame()
        for key, kind in dtypes.items():
            if kind.kind == "U":
                if frame[key].dtype != object:         # a categorical or a number column
                    frame[key] = frame[key].astype(str).astype(object)
            elif frame[key].dtype != kind:
                frame[key] = frame[key].astype(kind)
        return frame

    for group, block, results, reasons in evaluated:
        if per_frame > 1:                   # the grid is one block: batch whole groups
            if table is None:
                table = _Table(grid, min(per_frame, len(groups) - batched), columns)
            table.groups.append({k: group.get(k) for k in keys})
            batched += 1
            table.add(block, results, reasons)
            if table.rows < len(table):
                continue
            frame, table = finish(table), None
        else:
            one = _Table(_BlockGrid(block), 1, columns)
            one.groups.append({k: group.get(k) for k in keys})
            one.add(block, results, reasons)
            frame = finish(one)
        done += len(frame)
        if progress:
            progress(done, total)
        yield frame


def _evaluated_blocks(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v,
                      causal, dtype, phase, dropout_p, window, kv_dtype, page_size, softcap,
                      gpus, algorithms, overrides, timing, max_memory_bytes, check_memory,
                      engine="auto", tables=None, columns=RESULT_COLUMNS):
    """``(grid, group dicts, evaluated)``: every value checked (and the result's memory where
    ``check_memory``) first; ``evaluated(skip_groups=0, skip_blocks=0)`` returns an iterator
    of ``(group, block, results, reasons)`` that evaluates one block of one group per step,
    in row order, after passing over (unevaluated: no what-if GPU built, no kernel timed) the
    first ``skip_groups`` groups and the first ``skip_blocks`` blocks of the next.
    ``tables``: a list the caller puts its :class:`_Table` in before the first step (a
    :func:`sweep`), whose rows the compiled kernels then write; empty or None, they write
    their own arrays.
    ``columns``: the result columns the blocks' results hold (:func:`check_columns`)."""
    # a generator or other one-pass iterator of values, read once here (it is read again
    # below for the grid): as a list, the values it gave, in its order
    (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal, dtype, phase,
     dropout_p, window, kv_dtype, page_size, softcap) = (
        list(v) if isinstance(v, collections.abc.Iterator) else v
        for v in (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal,
                  dtype, phase, dropout_p, window, kv_dtype, page_size, softcap))
    scalars, specs, configs, variants, grid_rows = _plan(
        batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal, dtype,
        phase, dropout_p, window, kv_dtype, page_size, softcap, gpus, algorithms, overrides)
    n_groups = len(specs) * len(variants) * len(configs) * len(scalars)
    if check_memory:
        # before any array is built
        check_size(grid_rows * n_groups, max_memory_bytes, per_row=bytes_per_row(columns))
    grid = _Grid(batch, heads, kv_heads, seqlen_q, seqlen_k)
    _check_tensor_sizes(grid, scalars)
    plan, groups = [], []
    for spec, ovs in itertools.product(specs, variants):
        for algo, scalar in itertools.product(configs, scalars):
            groups.append({"gpu": spec.id, "algorithm": algo.label(),
                           "overrides": ", ".join(o.label() for o in ovs),
                           **{override_column(o): o.column_value() for o in ovs},
                           **{k: v for k, v in scalar.items() if not k.startswith("_")}})
            plan.append((spec, ovs, algo, scalar))

    def evaluated(skip_groups=0, skip_blocks=0):
        whatifs, over = {}, {}
        for index, (group, (spec, ovs, algo, scalar)) in enumerate(zip(groups, plan)):
            if index < skip_groups:
                continue
            key = (id(spec), tuple(id(o) for o in ovs))
            if key not in whatifs:
                whatifs[key] = what_if(spec, ovs)
            gpu, why = whatifs[key]
            params = _params(timing, gpu or spec, algo)
            unpacked = _unpacked(algo)
            blocks = grid.blocks()
            if index == skip_groups and skip_blocks:
                blocks = itertools.islice(blocks, skip_blocks, None)
            for block in blocks:
                # pack_gqa=True changes nothing where H == H_kv: evaluate unpacked there (the
                # vectorised path refuses packing); elsewhere the refusal stands
                run = (unpacked if unpacked is not None
                       and np.array_equal(block["heads"], block["kv_heads"]) else algo)
                # (the table of this sweep only: a stream run inside another sweep's
                # progress callback has none, and never writes into that sweep's table)
                table = tables[0] if tables else None
                tokens = (_ENGINE.set(engine), _SWEEP_ROWS.set(grid.size * len(plan)),
                          _GROUP_ROWS.set(grid.size),
                          _DESTINATION.set(None if table is None else (table, block)),
                          _COLUMNS.set(columns))
                try:
                    evaluated_block = _evaluate(run, gpu, params, scalar, block, why)
                finally:
                    _ENGINE.reset(tokens[0])
                    _SWEEP_ROWS.reset(tokens[1])
                    _GROUP_ROWS.reset(tokens[2])
                    _DESTINATION.reset(tokens[3])
                    _COLUMNS.reset(tokens[4])
                _count_over_power(over, gpu, params, group, evaluated_block[0])
                yield (group, block, *evaluated_block)
        # a resumed stream (sweep_frames' skip_rows) evaluates only the rows after those
        # another run wrote: the warning counts these and says so
        _warn_over_power(over, "sweep" if not (skip_groups or skip_blocks) else
                         "sweep (the rows computed in this run; the rows resumed from an "
                         "interrupted run are not counted here)")

    return grid, groups, evaluated


def _count_over_power(over: dict, gpu: GPUSpec | None, params, group: dict, results) -> None:
    """Add to ``over`` (by GPU id: rows, their largest power over the limit) the rows of a
    block whose modelled board power stays over the GPU's limit at the sustained clock:
    ``Prediction.notes`` says of such a call that even the power model's floor clock does not
    bring it under, so its time is optimistic. Rows of a clock taken regardless of power
    (``boost``, ``datasheet``, a lock) are left out: there the excess is the clock asked
    for. Without a ``power_w`` column (``columns=``) nothing is counted."""
    if (not results or "power_w" not in results or gpu is None or gpu.power is None
            or getattr(params, "clock", None) != "sustained"):
        return
    ratio = np.asarray(results["power_w"], dtype=float) / gpu.power.tdp_w
    hot = ratio > 1 + LIMIT_TOLERANCE
    if hot.any():
        rows, worst = over.get(group["gpu"], (0, 0.0))
        over[group["gpu"]] = (rows + int(np.count_nonzero(hot)),
                              max(worst, float(ratio[hot].max())))


class PowerLimitWarning(UserWarning):
    """:func:`_warn_over_power`'s warning; ``over`` holds its counts (GPU id → (rows, largest
    power / limit)), so that partitions swept apart (``perfsim.distributed``) add up to one
    warning."""

    def __init__(self, text: str, over: dict | None = None):
        super().__init__(text)
        self.over = dict(over or {})


def _warn_over_power(over: dict, what: str = "sweep") -> None:
    """One warning for the rows :func:`_count_over_power` counted, by GPU."""
    if over:
        each = "; ".join(f"{gpu}: {rows:,} row{'s' if rows != 1 else ''}, up to "
                         f"{worst:.2f}x its limit" for gpu, (rows, worst) in over.items())
        warnings.warn(PowerLimitWarning(
            f"{what}: modelled board power stays over the GPU's limit even at the power "
            f"model's floor clock ({each}); those rows' times are optimistic (their power_w "
            "column says by how much; perfsim predict notes it per call)", over),
            stacklevel=outside_perfsim())


class _BlockGrid:
    """One block of a :class:`_Grid` seen as a grid of its own (``size``, ``columns``), for a
    :class:`_Table` of that block alone (:func:`sweep_frames`)."""

    def __init__(self, block: dict):
        shape = np.broadcast_shapes(*(v.shape for v in block.values()))
        self.size = int(np.prod(shape))
        self._flat = {k: np.broadcast_to(v, shape).ravel() for k, v in block.items()}

    def columns(self, times: int = 1) -> dict:
        """The block's rows as flat columns, repeated ``times`` times (one per group)."""
        return {k: v if times == 1 else _spread(v, 1, times) for k, v in self._flat.items()}


def override_column(override) -> str:
    """The column of an override's value: the field's name (``<field>_scale`` for a scale),
    ``gpu_<name>`` where that name is already a column of the rows (``clock_hz``,
    ``hbm_bytes``: the row's sustained clock and HBM traffic)."""
    name = override.column()
    taken = {*WORKLOAD_FIELDS, *RESULT_COLUMNS, "gpu", "algorithm", "overrides", "infeasible",
             "stand_in"}
    return f"gpu_{name}" if name in taken else name


def _plan(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal, dtype,
          phase, dropout_p, window, kv_dtype, page_size, softcap, gpus, algorithms,
          overrides):
    """``(scalar combos, GPU specs, algorithm configs, override variants, grid rows)`` of a
    sweep, every value validated (one clear error for a bad or empty one)."""
    scalars = _scalar_combos(head_dim, head_dim_v, causal, dtype, phase, dropout_p, window,
                             kv_dtype, page_size, softcap)
    given_gpus = _listify(catalog() if gpus is None else gpus)
    specs = [load_gpu(g) for g in given_gpus]
    configs = _configs(algorithms)
    for name, chosen, labels in (("gpus", specs, [s.id for s in specs]),
                                 ("algorithms", configs, [c.label() for c in configs])):
        if not chosen:
            raise PerfsimError(f"{name}: an empty list; give at least one, or leave it out "
                               f"for all")
        twice = sorted(_repeated(labels))
        if twice:
            # the rows of a repeated entry would be indistinguishable copies
            hint = ""
            if name == "gpus":
                entries = [f"GPUSpec {g.id!r}" if isinstance(g, GPUSpec) else str(g)
                           for g, spec in zip(given_gpus, specs) if spec.id in twice]
                hint = (f" (given as {', '.join(entries)}: give each GPU file its own `id`, "
                        "or name what-if GPUSpec objects with .replace(id=...))")
            raise PerfsimError(f"{name}: {', '.join(map(repr, twice))} given more than once: "
                               f"its rows could not be told apart; give each once{hint}")
    _ints("batch", batch)
    grid_rows = (len(_listify(batch)) * len(_pairs("heads", heads, "kv_heads", kv_heads))
                 * len(_pairs("seqlen_q", seqlen_q, "seqlen_k", seqlen_k)))
    _refuse_repeats(batch=batch, heads=heads, kv_heads=kv_heads, seqlen_q=seqlen_q,
                    seqlen_k=seqlen_k, head_dim=head_dim, head_dim_v=head_dim_v, causal=causal,
                    dtype=dtype, phase=phase, dropout_p=dropout_p, window=window,
                    kv_dtype=kv_dtype, page_size=page_size, softcap=softcap)
    options = parse_overrides(overrides or {})
    # each override applied to each GPU now, and scale factors that round alike refused
    for spec in specs:
        _check_overrides(spec, options)
    return scalars, specs, configs, list(itertools.product(*options)), grid_rows


def _check_overrides(spec: GPUSpec, options: list) -> None:
    """Apply every override to ``spec`` (a table entry the GPU lacks is a bad grid, found
    now, not when its rows are evaluated), and refuse scale factors of one integer field that
    round ``spec``'s value to the same number (``sm_count`` × 1 and × 1.003 are both 132 SMs
    on an H100): their rows would be copies under different labels. Not refused: a field the
    GPU has at 0 (an H100's ``tmem_bytes_per_sm``: every factor keeps it 0, and a sweep over
    several GPUs scales it for the others), and factors that round it to 0 (an invalid
    what-if: its rows are infeasible, with the reason).

    Raises:
        perfsim.PerfsimError: an override the GPU cannot take; the two factors, the GPU and
            the value they share."""
    own_data = spec.model_dump()
    for option in options:
        seen: dict = {}
        for override in option:
            data = spec.model_dump()
            override.apply(data)
            if not override.scale:
                continue
            key = override.field.split(".")[-1]
            own, value = own_data[override.top], data[override.top]
            if "." in override.field:
                own, value = own.get(key), value[key]
            if not own or not value:
                continue
            if repr(value) in seen:
                raise PerfsimError(
                    f"GPU override {override.field!r}: {seen[repr(value)]} and "
                    f"{override.label()} give {spec.id} the same value ({value}; an integer "
                    "field is rounded), so their rows could not be told apart; give factors "
                    "that differ after rounding")
            seen[repr(value)] = override.label()


def _configs(algorithms) -> list[algos.Algorithm]:
    """The configurations a sweep's ``algorithms`` name: ``"all"`` and ``"presets"`` (any
    case) as on the command line (:mod:`perfsim.cli.predict_cmd`), alone or as items of a
    list (``["presets", FA2(block_m=64)]``), None as ``"all"``."""
    out = []
    for a in _listify(algos.names() if algorithms is None else algorithms):
        group = algorithm_group(a)
        if group is None:
            out.append(resolve(a))
        else:
            out.extend(resolve(name) for name in group)
    return out


def count_rows(*, batch, heads, seqlen_q, head_dim, kv_heads=None, seqlen_k=None,
               head_dim_v=None, causal=False, dtype="bf16", phase="fwd", dropout_p=0.0,
               window=None, kv_dtype=None, page_size=None, softcap=0.0, gpus=None,
               algorithms=None, overrides=None, **_) -> int:
    """Rows :func:`sweep` returns for these arguments, with every value validated as
    ``sweep`` validates it and no prediction made (other keyword arguments are ignored).

    Raises:
        perfsim.PerfsimError: as :func:`sweep` for a bad or empty value.
    """
    scalars, specs, configs, variants, grid_rows = _plan(
        batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal, dtype,
        phase, dropout_p, window, kv_dtype, page_size, softcap, gpus, algorithms, overrides)
    return grid_rows * len(specs) * len(variants) * len(configs) * len(scalars)


def config_key(kwargs: dict, **extra) -> str:
    """A stable text of the sweep arguments ``kwargs`` and the ``extra`` fields beside them
    (JSON, keys sorted): GPU specs, algorithms and timing objects by their full content, not
    their labels (two what-if GPUs share a label); other values as they are. The identity a
    Dask dataset (:mod:`perfsim.distributed`, with its partition size) and a streamed file's
    partial rows (:func:`rows_key`) are checked by."""
    def plain(value):
        if hasattr(value, "model_dump"):
            return {"type": type(value).__name__, **plain(value.model_dump(mode="json"))}
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in sorted(value.items())}
        if isinstance(value, (list, tuple, range)):
            return [plain(v) for v in value]
        return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)
    return json.dumps({"config": plain(kwargs), **extra}, sort_keys=True, default=str)


#: Sweep arguments that leave the rows as they are, left out of :func:`rows_key` (the
#: engines' rows agree to 1e-12).
NOT_IN_ROWS_KEY = ("engine", "progress", "max_memory_bytes", "skip_rows")


def rows_key(kwargs: dict, **extra) -> str:
    """The identity of the rows :func:`sweep_frames` gives for the sweep arguments
    ``kwargs``, frame by frame (:func:`config_key`'s text): a stream interrupted under one key
    may resume under the same key (``perfsim sweep --stream``), never under another. It
    holds the package version (``perfsim``) and :func:`model_digest` (``model``: the version
    does not change with the model), :data:`CHUNK_ROWS` (``frame_rows``: where frames end)
    and the arguments (``config``) with the GPUs as their full specs (a profile file edited
    between two runs is another sweep; the default: every catalog GPU), the algorithms as
    their configurations (``"all"``, ``"presets"`` and the default expanded) and the kept
    columns in table order; not :data:`NOT_IN_ROWS_KEY`. ``extra`` replaces or adds fields
    beside them (a Dask dataset, :mod:`perfsim.distributed`, records its partition size in
    place of ``frame_rows``: its partitions are not the stream's frames).

    Raises:
        perfsim.PerfsimError: as :func:`count_rows` for a bad or empty value, and an
            unknown or repeated column.
    """
    from perfsim import __version__

    given = {k: v for k, v in kwargs.items() if k not in NOT_IN_ROWS_KEY}
    count_rows(**given)                         # every value checked as the sweep checks it
    # an argument given at its default is the same sweep as one left out (the CLI passes
    # overrides=None, a Python call may not pass it at all)
    defaults = _sweep_defaults()
    given = {k: v for k, v in given.items()
             if not (k in defaults and _is_default(v, defaults[k]))}
    gpus = given.get("gpus")
    resolved = {**given,
                "gpus": [load_gpu(g) for g in _listify(catalog() if gpus is None else gpus)],
                "algorithms": _configs(given.get("algorithms")),
                "columns": list(check_columns(given.get("columns")))}
    return config_key(resolved, **{"perfsim": __version__, "model": model_digest(),
                                   "frame_rows": CHUNK_ROWS, **extra})


@functools.cache
def _sweep_defaults() -> dict:
    """:func:`sweep_frames`' keyword defaults (name -> value)."""
    return {name: p.default for name, p in inspect.signature(sweep_frames).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _is_default(value, default) -> bool:
    """Whether a sweep argument equals its default: ``None`` only as ``None``; a number, text
    or bool as the same type and value (``False`` is not ``0.0``)."""
    if default is None or value is None:
        return value is None and default is None
    return type(value) is type(default) and value == default


@functools.cache
def model_digest() -> str:
    """SHA-256 (hex) of the model's code and data as installed: every ``.py`` file of the
    perfsim package and every ``.toml`` file of its GPU and software catalog
    (``perfsim.catalog``), by path and content; any edit to them changes it.

    Raises:
        OSError: a file that cannot be read.
    """
    from importlib import resources

    digest = hashlib.sha256()
    for root, pattern in ((Path(__file__).parent, "*.py"),
                          (Path(str(resources.files("perfsim.catalog"))), "*.toml")):
        for path in sorted(root.rglob(pattern)):
            data = path.read_bytes()
            digest.update(f"{root.name}/{path.relative_to(root).as_posix()} {len(data)}\n"
                          .encode())
            digest.update(data)
    return digest.hexdigest()


def _unpacked(algo: algos.Algorithm) -> algos.Algorithm | None:
    """``algo`` with ``pack_gqa=True`` (its own or an implementation preset's option) set to
    False; None when it does not ask for packing."""
    from perfsim.implementations import Implementation

    if isinstance(algo, Implementation):
        if algo.options.get("pack_gqa") is True:
            return algo.model_copy(update={"options": {**algo.options, "pack_gqa": False}})
        return None
    if getattr(algo, "pack_gqa", None) is True:
        return algo.model_copy(update={"pack_gqa": False})
    return None


def memory_budget_bytes() -> int:
    """The memory a held sweep may take by default: half the memory available now (16 GiB
    where the OS does not say). The one rule :func:`check_size` refuses by and ``perfsim
    sweep --out`` streams by."""
    free = available_memory_bytes()
    return free // 2 if free is not None else 2**34


#: Bytes a row's result columns take in the frame (float64 8, ``bound``'s codes 1,
#: ``fits_memory``'s value and mask 2): what :func:`bytes_per_row` takes off for a column left
#: out, twice (the estimate's margin, as :data:`BYTES_PER_ROW` has over the ~252 B measured).
_COLUMN_BYTES = {c: {"bound": 1, "fits_memory": 2}.get(c, 8) for c in RESULT_COLUMNS}


def bytes_per_row(columns=RESULT_COLUMNS) -> int:
    """The memory estimate per row of a sweep keeping ``columns`` (:func:`check_columns`'
    tuple; None, as ``sweep(columns=None)``: every column): :data:`BYTES_PER_ROW` less twice
    each left-out column's bytes (``seconds`` and ``bound`` alone: 236, against ~108 measured
    at the peak)."""
    if columns is None:
        columns = RESULT_COLUMNS
    return BYTES_PER_ROW - 2 * sum(w for c, w in _COLUMN_BYTES.items() if c not in columns)


def check_size(rows: int, max_memory_bytes: int | None = None, what: str = "sweep",
               per_row: int = BYTES_PER_ROW) -> None:
    """Refuse a sweep (``what``: or ``"predict_rows"``) of ``rows`` rows that would need more
    than ``max_memory_bytes`` (default: half the memory available now), at ``per_row`` bytes
    a row (:func:`bytes_per_row`).

    Raises:
        perfsim.PerfsimError: with the row count, the estimate and the limit.
    """
    given = max_memory_bytes is not None
    if max_memory_bytes is None:
        max_memory_bytes = memory_budget_bytes()
    elif not isinstance(max_memory_bytes, (int, np.integer)) or max_memory_bytes <= 0:
        raise PerfsimError(f"max_memory_bytes must be a positive number of bytes, got "
                           f"{max_memory_bytes!r}")
    need = rows * per_row
    if need > max_memory_bytes:
        limit = "max_memory_bytes" if given else "half the memory available now"
        head = (f"{rows:,} rows need about {need / 2**30:.3g} GiB ({per_row} B per row), "
                f"more than the {max_memory_bytes / 2**30:.3g} GiB allowed ({limit})")
        if what == "predict_rows":
            raise PerfsimError(f"predict_rows: {head}; give the rows in parts")
        raise PerfsimError(
            f"sweep: {head}; write the rows to a file instead, which streams them in "
            "bounded memory (perfsim sweep CONFIG --out FILE, without --plot or --json; "
            "perfsim.sweep_frames in Python), or split the sweep into several configs with "
            "fewer values per list")


def _check_tensor_sizes(grid: _Grid, scalars: list[dict]) -> None:
    """Every combination's Q, K, V, O within :data:`MAX_TENSOR_BYTES` (checked on the largest
    value of each size, which bounds every combination)."""
    e = max(BYTES_PER_ELEMENT[s["dtype"]] for s in scalars)
    # K and V in their own dtype (a narrower cache: kv_dtype, default the dtype)
    e_kv = max(BYTES_PER_ELEMENT[s.get("kv_dtype") or s["dtype"]] for s in scalars)
    d = max(max(s["head_dim"], s["head_dim_v"]) for s in scalars)
    b = int(grid.batch.max())
    for heads, seqlen, label, width in ((grid.heads[:, 0], grid.seqlens[:, 0], "Q/O", e),
                                        (grid.heads[:, 1], grid.seqlens[:, 1], "K/V", e_kv)):
        size = b * int(heads.max()) * int(seqlen.max()) * d * width
        if size > MAX_TENSOR_BYTES:
            raise PerfsimError(
                f"sweep: the largest {label} tensor would hold {size:.3g} bytes; at most "
                f"2**45 = {MAX_TENSOR_BYTES} bytes (32 TiB) per tensor, far beyond any GPU's "
                "memory (checked on the largest value of each size field)")


def _evaluate(algo, gpu: GPUSpec | None, params, scalar: dict, block: dict, why: str):
    """One block of one group: ``(results, reasons)`` (:func:`_evaluate_masks`), with the
    ``stand_in`` note of each row where an implementation preset times a kernel in place of
    one perfsim has no model of (:func:`_stand_in`)."""
    results, reasons = _evaluate_masks(algo, gpu, params, scalar, block, why)
    if results:
        notes = _stand_in(algo, gpu, scalar, block)
        if notes is not None:
            results = {**results, "stand_in": notes}
    return results, reasons


def _stand_in(algo, gpu: GPUSpec | None, scalar: dict, block: dict):
    """Per row of a block, what ``Prediction.notes()`` says first for a preset that times a
    stand-in kernel (``ImplementationPreset.stand_in_note``: FlexAttention's decoding template
    under 128 query rows, cuDNN's explicit mask or its kernels off Hopper), ``""`` where it
    says nothing; ``None`` for an algorithm that is not a preset. The notes depend on the
    GPU, the phase, the mask and, of the sequence lengths, only on whether there are fewer
    query rows than FlexAttention's decoding threshold, fewer than keys, or one (the last
    two decide cuDNN's explicit mask), and whether the query length is a multiple of
    ``TUTORIAL_EXACT_MULTIPLE`` (the tutorial's forward): the rows fall into at most sixteen
    classes, and one row of each is asked."""
    note_of = getattr(algo, "stand_in_note", None)
    if note_of is None or gpu is None:
        return None
    from perfsim.implementations import FLEX_DECODING_BELOW, TUTORIAL_EXACT_MULTIPLE
    from perfsim.workload import AttentionWorkload

    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    n_q = np.broadcast_to(block["seqlen_q"], shape).ravel()
    n_k = np.broadcast_to(block["seqlen_k"], shape).ravel()
    kind = ((n_q % TUTORIAL_EXACT_MULTIPLE != 0).astype(np.int8) * 8
            + (n_q < FLEX_DECODING_BELOW).astype(np.int8) * 4 + (n_q < n_k).astype(np.int8) * 2
            + (n_q == 1))
    _, first, inverse = np.unique(kind, return_index=True, return_inverse=True)
    causal, window = scalar.get("_given_mask") or (scalar["causal"], tuple(scalar["_window"]))
    notes = [note_of(gpu, AttentionWorkload(
        batch=1, heads=1, seqlen_q=int(n_q[i]), seqlen_k=int(n_k[i]),
        head_dim=scalar["head_dim"], head_dim_v=scalar["head_dim_v"], causal=bool(causal),
        window=tuple(window), dtype=scalar["dtype"], phase=scalar["phase"])) or ""
        for i in first]
    return np.array(notes, dtype=object)[inverse.reshape(-1)].reshape(shape)


def _evaluate_masks(algo, gpu: GPUSpec | None, params, scalar: dict, block: dict, why: str):
    """One block of one group: ``(results, reasons)`` (:func:`_evaluate_mask`), the sequence
    lengths split by the mask the kernels see. A window side that hides nothing is dropped and
    a right edge of 0 is the causal mask (``perfsim.algorithms.base.effective_mask``, as
    ``predict`` applies it), which depends on each row's lengths: the columns of the block
    with one effective mask are evaluated together, with that mask."""
    masks = _effective_masks(scalar, block)
    if len(masks) == 1:
        ((*eff, _), _), = masks.items()
        return _evaluate_choices(algo, gpu, params, _with_mask(scalar, eff), block, why)
    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    # the axis the sequence lengths vary along: the last in a grid's block, the middle in a
    # list of rows laid out as _sub_block lays them (perfsim.rows)
    axis = 2 if block["seqlen_q"].shape[2] > 1 or block["seqlen_k"].shape[2] > 1 else 1
    at = (slice(None),) * axis
    merged, reasons = {}, np.full(shape, "", dtype=object)
    for (*eff, _), cols in masks.items():
        sub = {k: v[(*at, cols)] if v.shape[axis] > 1 else v for k, v in block.items()}
        part, why_not = _evaluate_choices(algo, gpu, params, _with_mask(scalar, eff), sub,
                                          why)
        sub_shape = np.broadcast_shapes(*(v.shape for v in sub.values()))
        reasons[(*at, cols)] = np.broadcast_to(why_not, sub_shape)
        for key, value in part.items():
            value = np.broadcast_to(np.asarray(value), sub_shape)
            if key not in merged:
                fill = np.nan if value.dtype.kind == "f" else ("" if value.dtype.kind in "US"
                                                               else 0)
                merged[key] = np.full(shape, fill, dtype=value.dtype if value.dtype.kind
                                      not in "US" else object)
            merged[key][(*at, cols)] = value
    return merged, reasons


def _effective_masks(scalar: dict, block: dict) -> dict:
    """``{(causal, window, one_row): column indices}``: the block's sequence-length columns
    grouped by the mask the kernels see (one group, all columns, without a mask). Which
    window sides a row drops depends only on its lengths, and a causal row with one query
    row is apart (flash-attn 2's forward launches its unmasked kernel there:
    ``FA2.launch_causal``), so the rows fall into at most eight groups; each is named by
    ``effective_mask`` on one of its rows."""
    causal, window = scalar["causal"], tuple(scalar["_window"])
    if window == (None, None) and not causal:
        return {(causal, window, False): slice(None)}
    n_q, n_k = block["seqlen_q"].ravel(), block["seqlen_k"].ravel()
    kind = mask_kinds(causal, window, n_q, n_k)
    one_row = n_q == 1
    groups = {}
    for value in np.unique(kind):
        cols = np.flatnonzero(kind == value)
        first = cols[0]
        key = (*effective_mask(causal, window, int(n_q[first]), int(n_k[first])),
               bool(one_row[first]))
        groups[key] = np.sort(np.concatenate([groups[key], cols])) if key in groups else cols
    if len(groups) == 1:
        return {next(iter(groups)): slice(None)}
    return groups


def _with_mask(scalar: dict, eff: tuple) -> dict:
    """``scalar`` with the effective ``(causal, window)`` for the kernels (the row labels keep
    the mask the sweep was given)."""
    causal, window = eff
    return {**scalar, "causal": causal, "_window": window, "_given_mask": (
        scalar.get("_given_mask") or (scalar["causal"], tuple(scalar["_window"])))}


def _evaluate_choices(algo, gpu: GPUSpec | None, params, scalar: dict, block: dict,
                      why: str):
    """One block of one group with one mask, the split-KV and GQA-packing choices
    (``num_splits="auto"``, ``pack_gqa="auto"`` or ``True``) made per element as
    :func:`perfsim.predict` makes them (:func:`_choice_parts`): the elements of each kernel
    structure are evaluated together and put back in place. ``(results, reasons)`` as
    :func:`_evaluate_mask`."""
    parts = None if why or gpu is None else _choice_parts(algo, gpu, scalar, block)
    if parts is None:
        return _evaluate_mask(algo, gpu, params, scalar, block, why)
    if len(parts) == 1:
        # one structure for the whole block, its choice fixed: the same rows without the
        # per-element choice (and a configuration perfsim.compiled can trace)
        try:
            return _evaluate_mask(parts[0][2], gpu, params, scalar, block, why)
        except PerfsimError:
            return _evaluate_mask(algo, gpu, params, scalar, block, why)
    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    size = int(np.prod(shape))
    flat = {k: np.broadcast_to(v, shape).ravel() for k, v in block.items()}
    merged, reasons = {}, np.full(size, "", dtype=object)
    # the most common choice on the whole block as it is (its broadcast layout is the
    # cheap one), then the other choices' elements on their own, written over theirs;
    # where the common choice refuses the whole block, every choice on its own elements
    parts = sorted(parts, key=lambda part: -len(part[1]))
    common = {}
    if parts[0][2] is not None:     # a configuration that holds for its elements anywhere
        try:
            common, why_not = _evaluate_mask(parts[0][2], gpu, params, scalar, block, why)
        except PerfsimError:
            pass
    if common:
        reasons[:] = np.broadcast_to(why_not, shape).ravel()
        for key, value in common.items():
            value = np.asarray(value)
            merged[key] = np.array(np.broadcast_to(value, shape).ravel(),
                                   dtype=_merged_dtype(value.dtype))
        parts = parts[1:]
    for run, index, _ in parts:
        sub = _sub_block(flat, index)
        part, why_not = _evaluate_mask(run, gpu, params, scalar, sub, why)
        reasons[index] = np.broadcast_to(why_not, (1, len(index), 1)).ravel()
        for key, value in part.items():
            value = np.broadcast_to(np.asarray(value), (1, len(index), 1)).ravel()
            if key not in merged:
                kind = _merged_dtype(value.dtype).kind
                merged[key] = np.full(size, np.nan if kind == "f" else (
                    "" if kind == "O" else 0), dtype=_merged_dtype(value.dtype))
            merged[key][index] = value
    return {k: v.reshape(shape) for k, v in merged.items()}, reasons.reshape(shape)


def _sub_block(flat: dict, index) -> dict:
    """The elements ``index`` of a flattened block, laid out along the heads axis as a block
    of their own (``(1, n, 1)``: :func:`_evaluate_mask` reads the head pairs on that axis)."""
    return {k: v[index].reshape(1, -1, 1) for k, v in flat.items()}


def _merged_dtype(dtype) -> np.dtype:
    """The type of a result column put together from parts: text as objects, flags as bools,
    codes as int8, every other number as float64 (one part's counts may be int64 and
    another's floats past 2^63, as the sweep's own columns hold them)."""
    if dtype.kind in "USO":
        return np.dtype(object)
    if dtype == np.int8:
        return dtype                    # codes (``bound``: :data:`BOUND_CODES`)
    return np.dtype(bool) if dtype.kind == "b" else np.dtype(np.float64)


def _choice_parts(algo, gpu: GPUSpec, scalar: dict, block: dict):
    """``[(configuration, flat element indices, whole-block configuration or None), ...]``
    (:func:`_split_parts`): the block's elements grouped by the kernel structure
    :func:`perfsim.predict` runs each with — an implementation preset's per-element pick
    (``Implementation.element_keys``: sdpa-cudnn's decode kernel), then the split-KV and
    packing structure (``split_choices`` of FA2/FA3/FA4). One part when one structure serves
    the whole block and a configuration fixes its choice; None when one structure serves it
    and none does (a backward alone, an algorithm without the options, options that fix one
    choice), or when the configuration refuses the block (the evaluation then says why)."""
    from perfsim.implementations import Implementation

    if scalar["phase"] == "bwd":
        return None
    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    every = np.arange(int(np.prod(shape)))
    groups = [(every, block)]
    if isinstance(algo, Implementation):
        try:
            keys = algo.element_keys(_block_dims(scalar, block), gpu)
        except PerfsimError:
            return None
        if keys is not None:
            keys = np.broadcast_to(np.asarray(keys), shape).ravel()
            if len(np.unique(keys)) > 1:
                flat = {k: np.broadcast_to(v, shape).ravel() for k, v in block.items()}
                groups = [(index, _sub_block(flat, index))
                          for index in (np.flatnonzero(keys == key) for key in np.unique(keys))]
    parts = []
    for index, sub in groups:
        chosen = _split_parts(algo, gpu, scalar, sub)
        if chosen is None:
            parts.append((algo, index, None))
        else:
            parts.extend((run, index[local], whole if len(groups) == 1 else None)
                         for run, local, whole in chosen)
    if len(parts) == 1 and parts[0][2] is None:
        return None
    return parts


def _split_parts(algo, gpu: GPUSpec, scalar: dict, block: dict):
    """``[(configuration, flat indices of the block's elements, whole-block configuration or
    None), ...]``: the block's elements grouped by kernel structure — split or not, packing
    group, the algorithm's further key (``split_choices``) — or None (nothing to choose, or
    the configuration refuses the block). Each group runs the configuration itself: on arrays
    :func:`perfsim.algorithms.splits.decide` makes every element's choice, its split count
    included (it may differ by element within a group). A group of unsplit, unpacked or
    uniformly packed elements without the further key also gets a configuration with that
    choice fixed, which gives its elements the same on the whole block (the cheap broadcast
    layout)."""
    from perfsim.implementations import Implementation

    dims = replace(_block_dims(scalar, block), phase="fwd")     # the choices are the forward's
    try:
        inner = algo.config(dims, gpu) if isinstance(algo, Implementation) else algo
        choose = getattr(inner, "split_choices", None)
        chosen = choose(dims, gpu) if choose is not None else None
    except PerfsimError:            # InfeasibleError included: the evaluation reports it
        return None
    if chosen is None:
        return None
    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    splits, group, extra = (np.broadcast_to(np.asarray(c, dtype=np.int64), shape).ravel()
                            for c in chosen)
    # one integer key per structure: split or not (1 bit), the extra key (0/1), the group
    key = structure_keys(splits, group, extra)
    low, high = int(key.min()), int(key.max())
    if low == high:             # one structure (most blocks): every element, no grouping
        whole = with_fixed_choice(algo, inner, low // 4) if low % 4 == 0 else None
        return [(algo, np.arange(key.size), whole)]
    if low >= 0 and high < 1 << 16:
        # small keys (a packing group is at most the heads per KV head): counted, no sort
        values = np.flatnonzero(np.bincount(key, minlength=high + 1))
        position = np.zeros(high + 1, np.int64)
        position[values] = np.arange(len(values))
        inverse = position[key]
    else:
        values, inverse = np.unique(key, return_inverse=True)
        inverse = inverse.ravel()
    parts = []
    for j, value in enumerate(values):
        whole = None
        if value % 4 == 0:          # unsplit, no extra key: fixed, it holds on any block
            whole = with_fixed_choice(algo, inner, value // 4)
        parts.append((algo, np.flatnonzero(inverse == j), whole))
    return parts


def _evaluate_mask(algo, gpu: GPUSpec | None, params, scalar: dict, block: dict, why: str):
    """One block of one group with one mask: ``(results, reasons)``. ``results``:
    broadcastable arrays (empty if the whole block is infeasible); ``reasons``: an object
    array broadcastable to the block, "" where feasible (an invalid workload first, then the
    group's reason, then the element's own: e.g. a tile that fits in shared memory for one
    sequence length and not for another, :func:`perfsim.algorithms.base.collect_infeasible`)."""
    pairs = zip(block["heads"].ravel(), block["kv_heads"].ravel())
    reasons = np.array([f"kv_heads ({k}) must divide heads ({h})" if h % k else why
                        for h, k in pairs], dtype=object)[None, :, None]
    if why:
        return {}, reasons
    failed = None
    try:
        with collect_infeasible() as partial:
            results = _predict_arrays(algo, gpu, params, scalar, block)
    except InfeasibleError as exc:
        # a check every row fails; the rows an earlier check refused keep that check's reason,
        # the one predict meets first
        failed, results = str(exc), {}
    if not partial and failed is None:
        return results, reasons         # one reason per head pair (broadcastable)
    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    reasons = np.broadcast_to(reasons, shape).copy()
    reword = getattr(algo, "reason", None)      # a preset words its rows' refusals as predict
    dims = _block_dims(scalar, block) if partial and reword is not None else None
    for mask, reason in partial:
        mask = np.broadcast_to(mask, shape)
        if dims is not None:
            reason = reword(reason, dims, gpu)
        reasons[mask & (reasons == "")] = reason
    if failed is not None:
        reasons[reasons == ""] = failed
    return results, reasons


#: Sweep evaluation engines (``sweep(engine=...)``).
ENGINES = ("auto", "numpy", "compiled")


def check_columns(columns) -> tuple:
    """``columns`` of :func:`sweep` as the kept result columns in :data:`RESULT_COLUMNS`'
    order (None: all of them).

    Raises:
        PerfsimError: a name that is not a result column, one given twice, or none."""
    if columns is None:
        return RESULT_COLUMNS
    given = [columns] if isinstance(columns, str) else columns
    if isinstance(given, (bytes, dict)) or not hasattr(given, "__iter__"):
        raise PerfsimError(f"columns: a list of result column names, got {columns!r}")
    given = list(given)
    if not all(isinstance(c, str) for c in given):
        raise PerfsimError(f"columns: a list of result column names (strings), got "
                           f"{columns!r}")
    allowed = ", ".join(RESULT_COLUMNS)
    unknown = [c for c in given if c not in RESULT_COLUMNS]
    if unknown:
        what = "is not a result column" if len(unknown) == 1 else "are not result columns"
        raise PerfsimError(f"columns: {', '.join(map(repr, unknown))} {what}; choose from "
                           f"{allowed} (the workload, group, infeasible and stand_in columns "
                           "are always kept)")
    repeated = sorted({c for c in given if given.count(c) > 1})
    if repeated:
        raise PerfsimError(f"columns: {', '.join(repeated)} given more than once")
    if not given:
        raise PerfsimError(f"columns: give at least one of {allowed}")
    kept = tuple(c for c in RESULT_COLUMNS if c in given)
    # (every column named: the same object as no selection, so the kernels are the same)
    return RESULT_COLUMNS if kept == RESULT_COLUMNS else kept


def check_engine(engine) -> None:
    """Raises PerfsimError for an engine not in :data:`ENGINES`, or ``"compiled"`` without
    numba and llvmlite or with a bad ``PERFSIM_THREADS`` (:func:`perfsim.compiled.threads`;
    under ``"auto"`` that error comes when a sweep first compiles)."""
    if engine not in ENGINES:
        raise PerfsimError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    if engine != "compiled":
        return          # auto: PERFSIM_THREADS is read (and refused) only if it compiles
    from perfsim.compiled import available, threads
    if not available():
        raise PerfsimError("the compiled engine needs numba and llvmlite: pip install "
                           "'perfsim[fast]', or use the numpy engine (engine='numpy'; "
                           "on the command line --engine numpy)")
    threads()                               # a bad PERFSIM_THREADS, before any work


def _check_progress(progress) -> None:
    """``progress`` of a sweep: ``None`` or a callable ``progress(rows_done, rows_total)``.

    Raises:
        perfsim.PerfsimError: anything else (``progress=5`` failed deep inside the first
            block with "'int' object is not callable")."""
    if progress is not None and not callable(progress):
        raise PerfsimError(f"progress must be None or a callable progress(rows_done, "
                           f"rows_total), got {type(progress).__name__} "
                           f"{short_repr(progress)}")


def _check_timing(timing) -> None:
    """``timing`` of a sweep: ``None``, a :class:`TimingParams` or a dict of its fields.

    Raises:
        perfsim.PerfsimError: anything else, or a dict a TimingParams refuses."""
    if isinstance(timing, dict):
        TimingParams(**timing)          # one clear error for a bad field, before any work
        return
    check_timing(timing)


def _params(timing, gpu: GPUSpec, algo) -> TimingParams:
    """The timing of one (GPU, algorithm) group: ``timing`` itself, or the GPU's defaults under
    the algorithm's software profile with ``timing``'s fields (a dict) set on them."""
    if isinstance(timing, TimingParams):
        return timing
    return TimingParams.for_gpu(gpu, getattr(algo, "software", DEFAULT_SOFTWARE),
                                **(timing or {}))


def _wide(scalar: dict, block: dict):
    """The integer type of a block's batch and heads: int64, or float64 where a count could
    overflow int64 (:data:`INT64_SAFE`)."""
    worst = float(np.prod([np.max(block[k]) for k in ("batch", "heads", "seqlen_q",
                                                      "seqlen_k")],
                          dtype=float)) * (scalar["head_dim"] + scalar["head_dim_v"])
    return np.float64 if worst >= INT64_SAFE else np.int64


def _block_dims(scalar: dict, block: dict, wide=None) -> algos.Dims:
    """The array ``Dims`` of one block of one group (what the kernels see)."""
    wide = wide or _wide(scalar, block)
    given_causal, given_window = scalar.get("_given_mask") or (scalar["causal"],
                                                                tuple(scalar["_window"]))
    # sequence lengths as wide as batch and heads: N_q·N_k alone passes int64 past ~3e9 keys
    seqlen_q, seqlen_k = block["seqlen_q"], block["seqlen_k"]
    if wide is np.float64:
        seqlen_q, seqlen_k = seqlen_q.astype(wide), seqlen_k.astype(wide)
    return algos.Dims(block["batch"].astype(wide), block["heads"].astype(wide),
                      block["kv_heads"].astype(wide), seqlen_q, seqlen_k,
                      scalar["head_dim"], scalar["head_dim_v"], scalar["causal"],
                      scalar["dtype"], scalar["phase"], scalar["dropout_p"],
                      window=scalar["_window"], softcap=scalar["softcap"],
                      kv_dtype=(scalar["kv_dtype"] if scalar["kv_dtype"] != scalar["dtype"]
                                else None),
                      page_size=scalar["page_size"] or None,
                      mask_given=bool(given_causal) or tuple(given_window) != (None, None),
                      window_given=tuple(given_window))


def _predict_arrays(algo, gpu: GPUSpec, params, scalar: dict, block: dict) -> dict:
    """``perfsim.predict`` on arrays: the same kernels, timing and aggregation — compiled
    (:mod:`perfsim.compiled`) where the sweep's engine allows it and the block's structure
    compiles, else numpy."""
    engine = _ENGINE.get()
    if engine != "numpy":
        results = _compiled_results(algo, gpu, params, scalar, block, engine)
        if results is not None:
            return results              # ``bound`` as codes already
    results = _results(algo, gpu, params, scalar, block, _block_dims(scalar, block))
    kept = _COLUMNS.get()
    if kept is not RESULT_COLUMNS:
        results = {k: v for k, v in results.items() if k in kept}
    if "bound" in results:
        # ``bound`` as the table's codes on both engines, so parts of a block evaluated by
        # each merge as numbers
        results["bound"] = bound_codes(results["bound"])
    return results


def _results(algo, gpu: GPUSpec, params, scalar: dict, block: dict, dims) -> dict:
    """:func:`_predict_arrays` with numpy (arrays of ``block``, or traced ones)."""
    given_causal, given_window = scalar.get("_given_mask") or (scalar["causal"],
                                                                tuple(scalar["_window"]))
    kernels, seconds, unit_seconds, _, bound, clock_hz, power_w = evaluate(algo, dims, gpu,
                                                                           params)
    counts = Counts.total(kernels)
    flops = convention_flops(block["batch"].astype(float), block["heads"], block["seqlen_q"],
                             block["seqlen_k"], scalar["head_dim"], scalar["head_dim_v"],
                             given_causal, given_window, scalar["phase"])
    memory = algo.memory_bytes(dims, gpu)
    credited = credited_flops(flops, counts.tensor_flops, counts.flops)
    return {"seconds": seconds, "tflops": credited / seconds / 1e12, "bound": bound,
            "clock_hz": clock_hz, "power_w": np.nan if power_w is None else power_w,
            **{f"{u}_seconds": unit_seconds[u] for u in UNITS}, "model_flops": flops,
            **{c: getattr(counts, c) for c in COUNT_COLUMNS},
            "memory_bytes": memory, "fits_memory": asarray(memory) <= gpu.hbm_bytes}


#: The sweep's evaluation engine (``sweep(engine=...)``) and its rows (all groups), for
#: :func:`_compiled_results`.
_ENGINE: contextvars.ContextVar[str] = contextvars.ContextVar("perfsim_sweep_engine",
                                                              default="numpy")
_SWEEP_ROWS: contextvars.ContextVar[int] = contextvars.ContextVar("perfsim_sweep_rows",
                                                                  default=0)
_GROUP_ROWS: contextvars.ContextVar[int] = contextvars.ContextVar("perfsim_group_rows",
                                                                  default=0)
#: The result columns the sweep keeps (:func:`check_columns`): the compiled kernels compute
#: and write only what those need, and numpy's results are cut to them.
_COLUMNS: contextvars.ContextVar[tuple] = contextvars.ContextVar("perfsim_sweep_columns",
                                                                 default=RESULT_COLUMNS)
#: ``(table, block)``: the :class:`_Table` a :func:`sweep` fills and the block being evaluated
#: for it (None: a stream of frames): a compiled kernel that evaluates that very block writes
#: its numeric columns into the table (:meth:`_Table.destination`).
_DESTINATION: contextvars.ContextVar = contextvars.ContextVar("perfsim_sweep_destination",
                                                              default=None)
#: ``engine="auto"`` leaves sweeps under this many rows to numpy. A process's first compiled
#: structure costs about 1.5 s (numba's start-up for the primitives, ~0.6 s, then LLVM's
#: vectorised loop, ~0.9 s), each new structure ~1 s and each traced group ~0.03 s plus its
#: check, against ~0.4 s saved per 10⁶ rows (0.55-0.62 s on numpy, 0.14-0.19 s compiled;
#: docs/performance.md): with the two structures of a typical group, below about 6 × 10⁶ rows
#: compiling does not pay.
AUTO_MIN_ROWS = 1 << 23
#: ... nor groups (one GPU, algorithm, what-if and scalar fields) under this many rows: a
#: sweep of many small groups meets many structures, each compiled for few rows (a new
#: structure's ~1 s against ~0.45 s saved per 10⁶ rows).
AUTO_MIN_GROUP_ROWS = 1 << 21
#: Traced structures by (algorithm configuration, GPU, timing, scalar fields, integer type):
#: the trace (or None: numpy), its programs per binding, and the objects the key's ids
#: belong to (kept alive, so an id is not reused while its entry exists).
_PROGRAMS: dict = {}
_PROGRAMS_MAX = 512
_TRACE_TRIES = 3


def _compiled_results(algo, gpu: GPUSpec, params, scalar: dict, block: dict, engine: str):
    """:func:`_predict_arrays` through a compiled kernel, or None (numpy then): the structure
    does not trace, ``engine="auto"`` and the group is small, or a row of this block fails
    one of the trace's guards."""
    from perfsim import compiled

    if engine == "auto" and (_SWEEP_ROWS.get() < AUTO_MIN_ROWS
                             or _GROUP_ROWS.get() < AUTO_MIN_GROUP_ROWS
                             or not compiled.available()):
        return None
    compiled.threads()          # a bad PERFSIM_THREADS: auto's error, once it compiles
    wide = _wide(scalar, block)
    # the configuration by content: the sweep builds a fixed-choice copy per block
    key = (type(algo).__name__, repr(algo.model_dump()), id(gpu), id(params),
           repr(sorted((k, v) for k, v in scalar.items())), np.dtype(wide).str)
    entry = _PROGRAMS.get(key)
    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    if entry is None or (entry["trace"] is None and entry["tries"] < _TRACE_TRIES
                         and entry["retry"]):
        flat = {k: np.broadcast_to(block[k], shape).ravel() for k in ARRAY_FIELDS}
        tries = 0 if entry is None else entry["tries"]
        tr, retry = _trace_block(algo, gpu, params, scalar, flat, wide)
        if len(_PROGRAMS) >= _PROGRAMS_MAX:
            _PROGRAMS.clear()
        entry = _PROGRAMS[key] = {"trace": tr, "programs": {}, "tries": tries + 1,
                                  "retry": retry, "keep": (algo, gpu, params)}
    if entry["trace"] is None:
        return None
    grid = _grid_axes(block)
    kept = _COLUMNS.get()
    binding = ("grid" if grid else "flat", kept)
    program = entry["programs"].get(binding)
    if program is None:
        tr = entry["trace"]
        if kept is not RESULT_COLUMNS:
            # the kept columns' outputs alone: the kernel computes what they and the
            # guards need (compiled._needed) and writes nothing else
            tr = compiled.Trace(tr.graph, tr.inputs,
                                {k: v for k, v in tr.outputs.items() if k in kept},
                                {k: v for k, v in tr.sampled.items() if k in kept})
        try:
            program = compiled.generate(tr, grid)
        except compiled.Untraceable:
            program = False
        except Exception as exc:    # noqa: BLE001 - an emitter failure: numpy has the rows
            compiled.warn_failed(f"{algo.label()} on {gpu.id}", exc)
            program = False
        entry["programs"][binding] = program
    if program is False:
        return None
    try:
        if not program.checked:
            problem, compared = _check_program(program, algo, gpu, params, scalar, block,
                                               wide, grid)
            if problem:
                compiled.warn_disagree(f"{algo.label()} on {gpu.id}", problem)
                entry["programs"][binding] = False
                return None
            program.checked = compared      # else checked again on the next block
        destination = _DESTINATION.get()
        into = (destination[0].destination(shape) if destination is not None
                and destination[1] is block else None)
        results = _run_program(program, block, grid, shape, {"bound": BOUND_CODES}, into)
    except _NumpyFailed:
        return None             # numpy evaluates the block and raises (or says) what it does
    except PerfsimError:
        raise
    except Exception as exc:    # noqa: BLE001 - a compiler failure: numpy has the rows
        compiled.warn_failed(f"{algo.label()} on {gpu.id}", exc)
        entry["programs"][binding] = False
        return None
    if results is None:
        return None
    return {k: (v.reshape(shape) if isinstance(v, np.ndarray) else v)
            for k, v in results.items()}


#: The axis of each array field in ``_Grid.blocks`` (batch, heads, sequence lengths).
_AXES = {"batch": 0, "heads": 1, "kv_heads": 1, "seqlen_q": 2, "seqlen_k": 2}


def _grid_axes(block: dict) -> dict | None:
    """:data:`_AXES` where every field of ``block`` varies along its own axis alone (a
    ``_Grid`` block), else None (a list of rows: evaluated flat)."""
    for name, axis in _AXES.items():
        shape = np.shape(block[name])
        if len(shape) != 3 or any(n != 1 for a, n in enumerate(shape) if a != axis):
            return None
    return dict(_AXES)


def _run_program(program, block: dict, grid, shape, codes: dict | None = None,
                 into: dict | None = None):
    from perfsim import compiled

    if grid:
        return compiled.run(program, {k: np.ravel(block[k]) for k in ARRAY_FIELDS},
                            (shape[0], shape[1], shape[2]), codes, into)
    return compiled.run(program, {k: np.broadcast_to(block[k], shape).ravel()
                                  for k in ARRAY_FIELDS}, codes=codes,
                        into=None if into is None else {k: v.reshape(-1)
                                                        for k, v in into.items()})


#: The ``bound`` column's codes (the table's int8 column; 0: none, an infeasible row).
BOUND_CODES = {name: code for code, name in enumerate(("", *BOUNDS))}
_SORTED_BOUNDS = np.array(sorted(BOUND_CODES))
_SORTED_BOUND_CODES = np.array([BOUND_CODES[b] for b in _SORTED_BOUNDS], np.int8)


def bound_codes(values) -> np.ndarray:
    """``bound`` labels (strings, any shape) as :data:`BOUND_CODES` (int8; an unknown label:
    0), by binary search in the sorted labels (one string comparison per step, not one
    pass per label)."""
    values = np.asarray(values)
    if values.dtype.kind == "O":
        values = values.astype(str)
    at = np.minimum(np.searchsorted(_SORTED_BOUNDS, values), len(_SORTED_BOUNDS) - 1)
    return np.where(_SORTED_BOUNDS[at] == values, _SORTED_BOUND_CODES[at],
                    np.int8(0)).astype(np.int8)


def _traced_fn(algo, gpu, params, scalar, wide):
    def fn(t):
        dims = _block_dims(scalar, t, wide)
        return _results(algo, gpu, params, scalar, t, dims)
    return fn


def _sample(flat: dict, offset: int) -> dict:
    n = len(flat["batch"])
    from perfsim.compiled import SAMPLE_ROWS
    index = np.unique((np.linspace(0, n - 1, SAMPLE_ROWS) + offset).astype(np.int64) % n)
    return {k: v[index] for k, v in flat.items()}


def _trace_block(algo, gpu, params, scalar, flat: dict, wide):
    """``(Trace or None, whether another block may trace)`` for a block's structure."""
    from perfsim import compiled

    try:
        return compiled.trace(_traced_fn(algo, gpu, params, scalar, wide),
                              _sample(flat, 0)), False
    except compiled.Untraceable as exc:
        # sampled rows that differ on a decision may agree in another block
        return None, "sampled rows differ" in str(exc)
    except Exception:           # noqa: BLE001 - numpy evaluates the block and says what
        return None, False


class _NumpyFailed(Exception):
    """The numpy reference of a kernel check raised: the block goes to numpy, whose own
    evaluation raises the error (it is not the compiled kernel's)."""


def _check_program(program, algo, gpu, params, scalar, block: dict, wide, grid):
    """``(what differs or None, whether anything was compared)`` between ``program`` and
    numpy on parts of the block: two samples of its rows (flat), or a sub-grid of its axes
    (grid). A part where a guard fails or a row is infeasible is not compared."""
    from perfsim import compiled

    shape = np.broadcast_shapes(*(v.shape for v in block.values()))
    if grid:
        picks = [np.unique(np.linspace(0, n - 1, m).astype(np.int64))
                 for n, m in zip(shape, (3, 4, 12))]
        parts = [{k: np.asarray(block[k])[tuple(
            picks[a] if a == _AXES[k] else slice(None) for a in range(3))]
            for k in ARRAY_FIELDS}]
    else:
        flat = {k: np.broadcast_to(block[k], shape).ravel() for k in ARRAY_FIELDS}
        parts = [_sample(flat, 0), _sample(flat, 7)]
    compared = False
    for part in parts:
        sub_shape = np.broadcast_shapes(*(v.shape for v in part.values()))
        try:
            with collect_infeasible() as partial:
                reference = _results(algo, gpu, params, scalar, part,
                                     _block_dims(scalar, part, wide))
        except Exception as exc:    # noqa: BLE001 - numpy's error, not the kernel's
            raise _NumpyFailed from exc
        got = _run_program(program, part, grid, sub_shape)
        if got is None or partial:
            continue                # a guard fails on this part: nothing to compare
        got = {k: (v.reshape(sub_shape) if isinstance(v, np.ndarray) else v)
               for k, v in got.items()}
        # (a program of some columns: those columns' outputs)
        problem = compiled.same(got, {k: v for k, v in reference.items()
                                      if k in program.plan})
        if problem:
            return problem, True
        compared = True
    return None, compared


#: Tables of at least this many rows build their workload columns in the background
#: (:meth:`_Table.start_frame`); below it the thread's hand-off costs more than it hides.
BACKGROUND_ROWS = 1 << 18
_BACKGROUND: ThreadPoolExecutor | None = None
_BACKGROUND_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child inherits the executor but not its thread: it starts its own."""
    global _BACKGROUND, _BACKGROUND_LOCK
    _BACKGROUND, _BACKGROUND_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Table:
    """The result columns, preallocated and filled block by block (no concatenation);
    strings become categoricals."""

    def __init__(self, grid: _Grid, groups: int, columns: tuple = RESULT_COLUMNS):
        self.grid = grid
        self.groups: list[dict] = []
        total = grid.size * groups
        self.columns = {k: np.empty(total) for k in columns}
        if "bound" in self.columns:
            self.columns["bound"] = np.zeros(total, np.int8)        # codes of ("", *BOUNDS)
        if "fits_memory" in self.columns:
            self.columns["fits_memory"] = np.zeros(total, bool)
        self.reason_codes = np.zeros(total, np.int32)
        self.reasons: dict[str, int] = {"": 0}
        self.stand_in_codes = np.zeros(total, np.int32)
        self.stand_ins: dict[str, int] = {"": 0}
        self.rows = 0
        self._workload = None           # :meth:`start_frame`'s future

    def __len__(self) -> int:
        return len(self.reason_codes)

    @staticmethod
    def _codes(values, categories: dict) -> np.ndarray:
        """``values`` (strings, any shape) as codes of ``categories`` (``{text: code}``,
        extended with the texts it lacks): a string column stored as a categorical's codes."""
        values = np.asarray(values, dtype=object)
        if not values.any():        # every text empty (most blocks): no string conversion
            return np.full(values.shape, categories.setdefault("", len(categories)), np.int32)
        unique, inverse = np.unique(values.astype(str), return_inverse=True)
        codes = [categories.setdefault(str(v), len(categories)) for v in unique]
        return np.array(codes, dtype=np.int32)[inverse].reshape(values.shape)

    def destination(self, shape) -> dict:
        """The table's float and boolean result columns for the rows of the next block (of
        ``shape``, the rows :meth:`add` will store it in), as C-order arrays of that shape: a
        compiled kernel writes its columns there, and :meth:`add` then finds them in place."""
        rows = slice(self.rows, self.rows + int(np.prod(shape)))
        return {key: column[rows].reshape(shape) for key, column in self.columns.items()
                if key != "bound"}

    def add(self, block: dict, results: dict, reasons) -> None:
        shape = np.broadcast_shapes(*(v.shape for v in block.values()))
        rows = slice(self.rows, self.rows + int(np.prod(shape)))
        self.rows = rows.stop
        np.copyto(self.reason_codes[rows].reshape(shape), self._codes(reasons, self.reasons))
        for key, column in self.columns.items():
            if key == "bound" and results:
                values = results[key]
                if np.asarray(values).dtype.kind in "USO":        # labels (perfsim.rows)
                    values = bound_codes(values)
            elif not results:
                values = np.nan if column.dtype.kind == "f" else 0
            else:
                values = results[key]
            target = column[rows].reshape(shape)
            if _same_array(values, target):
                continue            # written in place (:meth:`destination`)
            np.copyto(target, values, casting="unsafe")
        if results and "stand_in" in results:
            np.copyto(self.stand_in_codes[rows].reshape(shape),
                      self._codes(results["stand_in"], self.stand_ins))
        bad = self.reason_codes[rows] != 0
        self.stand_in_codes[rows][bad] = 0
        if results and bad.any():
            for column in self.columns.values():
                column[rows][bad] = column.dtype.type(np.nan if column.dtype.kind == "f" else 0)

    def start_frame(self) -> None:
        """Build the frame's workload and group columns (:meth:`frame`; the groups must all
        be in :attr:`groups`) in a background thread while the rows are evaluated, for a
        table of at least :data:`BACKGROUND_ROWS` rows: numpy's copies run outside the GIL,
        on a core the evaluation's Python leaves idle between its compiled kernels."""
        if len(self) < BACKGROUND_ROWS:
            return
        global _BACKGROUND
        try:
            with _BACKGROUND_LOCK:
                if _BACKGROUND is None:
                    _BACKGROUND = ThreadPoolExecutor(1, thread_name_prefix="perfsim-frame")
                self._workload = _BACKGROUND.submit(self._workload_columns)
        except RuntimeError:        # the interpreter shutting down: built by :meth:`frame`
            self._workload = None

    def _workload_columns(self) -> dict:
        """The workload and group columns of the frame, in its order."""
        n, groups = self.grid.size, len(self.groups)
        data = {}
        flat = self.grid.columns(groups)        # (built for this frame, once per group)
        for key in WORKLOAD_FIELDS:
            if key in ARRAY_FIELDS:
                data[key] = flat[key]
            else:
                data[key] = _constant([g[key] for g in self.groups], n)
        for key in dict.fromkeys(k for g in self.groups for k in g):
            if key not in WORKLOAD_FIELDS:
                data[key] = _constant([g.get(key) for g in self.groups], n)
        return data

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        data = (self._workload.result() if self._workload is not None
                else self._workload_columns())
        data.update(self.columns)
        if "bound" in data:
            data["bound"] = pd.Categorical.from_codes(self.columns["bound"], ("", *BOUNDS))
        if "fits_memory" in data:
            # an infeasible row has no footprint: its fits_memory is missing (pandas'
            # nullable boolean), not False
            data["fits_memory"] = pd.arrays.BooleanArray(self.columns["fits_memory"],
                                                         self.reason_codes != 0)
        data["infeasible"] = pd.Categorical.from_codes(self.reason_codes, list(self.reasons))
        data["stand_in"] = pd.Categorical.from_codes(self.stand_in_codes, list(self.stand_ins))
        return pd.DataFrame(data, copy=False)


def _same_array(a, b: np.ndarray) -> bool:
    """Whether ``a`` is an array over exactly ``b``'s memory (same start, shape, strides and
    dtype)."""
    return (isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
            and a.strides == b.strides
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def _constant(values: list, n: int):
    """A column holding ``values[i]`` on the ``n`` rows of group ``i`` (a categorical where
    every value is a string). A column of zeros — one group's codes, a dropout or softcap of
    0 — is allocated zeroed (the OS's zero pages, no write pass)."""
    if all(isinstance(v, str) for v in values):
        import pandas as pd

        categories = list(dict.fromkeys(values))
        # the codes' dtype pandas keeps for this many categories (int8 below 128)
        codes = np.array([categories.index(v) for v in values], dtype=np.int8
                         if len(categories) < 128 else np.int32)
        column = (np.zeros(n * len(values), codes.dtype) if not codes.any()
                  else _spread(codes, n))
        return pd.Categorical.from_codes(column, categories)
    values = np.asarray(values)
    if values.dtype.kind in "biuf" and not values.any():
        return np.zeros(n * len(values), values.dtype)
    return _spread(values, n)


def _spread(values, inner: int, outer: int = 1) -> np.ndarray:
    """``np.tile(np.repeat(values, inner), outer)`` (a one-dimensional ``values``), written
    by one broadcast copy into a new array, where ``tile`` of a ``repeat`` makes two passes
    and a second array."""
    values = np.asarray(values)
    out = np.empty(outer * len(values) * inner, values.dtype)
    np.copyto(out.reshape(outer, len(values), inner), values[None, :, None])
    return out


# ------------------------------------------------------------------ grid construction
def _listify(value) -> list:
    if isinstance(value, (list, tuple, range, np.ndarray)):
        return list(value)
    return [value]


def none_word(value) -> bool:
    """Whether a config value means "none": ``None``, or ``"none"`` in any case (TOML has no
    null)."""
    return value is None or isinstance(value, str) and value.strip().lower() == "none"


def _none(value):
    """``value`` with a "none" word (:func:`none_word`) read as ``None``."""
    return None if none_word(value) else value


def _windows(window) -> list:
    """``None``, one ``(left, right)`` pair or a list of pairs -> a list of pairs (``"none"``
    for an unbounded side, as TOML has no null); a pair may also be the CSV column's
    ``"LEFT,RIGHT"`` string (``""`` for no window)."""
    bound = _none

    def side(v) -> bool:          # one side of a pair (not a pair, nor a "LEFT,RIGHT" string)
        return none_word(v) or isinstance(v, (int, float, np.number))

    def bad(w):
        return PerfsimError(f"sweep: window must be [left, right], a \"LEFT,RIGHT\" string "
                            f"or a list of such (left/right an integer >= 0 or \"none\"), "
                            f"got {w!r}")

    def pair(w):
        if w is None or (isinstance(w, str) and w.strip().lower() in ("", "none")):
            return (None, None)
        if isinstance(w, str):
            parts = w.split(",")
            if len(parts) != 2:
                raise bad(w)
            try:
                return tuple(bound(v) if side(v) else int(v) for v in parts)
            except ValueError:
                raise bad(w) from None
        if not isinstance(w, (list, tuple)) or len(w) != 2:
            raise bad(w)
        return tuple(bound(v) for v in w)
    if window is None:
        return [(None, None)]
    if isinstance(window, (list, tuple)) and len(window) == 2 and all(map(side, window)):
        return [pair(window)]
    if (isinstance(window, (list, tuple)) and window and all(map(side, window))
            and not all(map(none_word, window))):
        raise bad(window)        # a flat list of sides that is no pair, e.g. [1, 2, 3]
    # (a list whose every entry is "no window" — [None], ["none"] — is that many no-windows,
    # as "none" reads beside pairs in a list)
    return [pair(w) for w in _listify(window)]


def _window_label(window) -> str:
    if window == (None, None):
        return ""
    return ",".join("none" if v is None else str(v) for v in window)


def _scalar_combos(head_dim, head_dim_v, causal, dtype, phase, dropout_p, window=None,
                   kv_dtype=None, page_size=None, softcap=0.0) -> list[dict]:
    """One dict per group-level combination, each validated by ``AttentionWorkload``."""
    for name, value in (("head_dim", head_dim), ("head_dim_v", head_dim_v),
                        ("causal", causal), ("dtype", dtype), ("phase", phase),
                        ("dropout_p", dropout_p), ("softcap", softcap), ("window", window),
                        ("kv_dtype", kv_dtype), ("page_size", page_size)):
        if value is not None and not _listify(value):
            raise PerfsimError(f"sweep: {name} is an empty list; give at least one value")
    def follow(values):             # "none" (any case; TOML has no null) is None: follow
        return [_none(v) for v in values]

    dims = [(d, d) for d in _listify(head_dim)] if head_dim_v is None else [
        (d, d if dv is None else dv)
        for d, dv in itertools.product(_listify(head_dim), follow(_listify(head_dim_v)))]
    kv_dtypes = [None] if kv_dtype is None else follow(_listify(kv_dtype))
    # 0 or "none" reads "contiguous K/V", as the page_size column writes it (so a TOML file,
    # which has no null, can sweep contiguous against paged)
    pages = [None] if page_size is None else [
        None if pg == 0 else _none(pg) for pg in _listify(page_size)]
    combos = []
    for (d, dv), c, t, p, q, win, kvt, pg, cap in itertools.product(
            dims, _listify(causal), _listify(dtype), _listify(phase), _listify(dropout_p),
            _windows(window), kv_dtypes, pages, _listify(softcap)):
        try:
            w = AttentionWorkload(batch=1, heads=1, seqlen_q=1, head_dim=d, head_dim_v=dv,
                                  causal=c, dtype=t, phase=p, dropout_p=q, window=win,
                                  kv_dtype=kvt, page_size=pg, softcap=cap)
        except PerfsimError as exc:
            raise PerfsimError(f"sweep: {exc}") from None
        combo = {"head_dim": w.head_dim, "head_dim_v": w.head_dim_v, "causal": w.causal,
                 "dtype": w.dtype, "phase": w.phase, "dropout_p": w.dropout_p,
                 "window": _window_label(w.window), "kv_dtype": w.kv_dtype,
                 "page_size": w.page_size or 0, "softcap": w.softcap, "_window": w.window}
        # a follower given beside the value it follows (head_dim_v=[None, 64] with
        # head_dim=64) is one combination, kept once, as kv_heads and seqlen_k pairs are
        if combo not in combos:
            combos.append(combo)
    return combos


def _refuse_repeats(**fields) -> None:
    """Refuse a list that holds one value twice, as ``gpus`` and ``algorithms`` are refused:
    its rows would be copies no column tells apart. Values are compared as the sweep reads
    them (``"none"`` as None, a ``page_size`` of 0 as contiguous K/V, a window's
    ``"LEFT,RIGHT"`` string as its pair, 1 as 1.0, a dtype or phase in any case with its
    spaces trimmed); the fields are validated before.

    Raises:
        perfsim.PerfsimError: naming the field and the repeated value(s)."""
    none = _none

    for name, value in fields.items():
        if not isinstance(value, (list, tuple, range, np.ndarray)):
            continue
        if name == "window":
            values = _windows(value)
        else:
            values = [v.item() if isinstance(v, np.generic) else v for v in _listify(value)]
            if name in ("kv_heads", "seqlen_k", "page_size"):
                values = [none(v) for v in values]
            if name == "page_size":
                values = [None if v == 0 else v for v in values]
            if name in ("dtype", "kv_dtype", "phase"):      # as the workload reads them
                values = [_name(v) if isinstance(v, str) else v for v in values]
        twice = _repeated([tuple(v) if isinstance(v, list) else v for v in values])
        if twice:
            if name == "window":        # as its column and a config write it
                shown = ", ".join(f"{_window_label(w)!r}" + (" (no window)" if w == (None, None)
                                                              else "") for w in twice)
                same = " (\"\", \"none\" and None all mean no window)" if (None, None) in twice \
                    else ""
            else:
                shown, same = ", ".join(map(repr, twice)), ""
            raise PerfsimError(f"sweep: {name}: {shown} given more than once{same}: its rows "
                               "could not be told apart; give each once")


def _repeated(values) -> list:
    """The values that occur more than once in ``values`` (hashable), each once, in order."""
    seen, twice = set(), []
    for v in values:
        if v in seen and v not in twice:
            twice.append(v)
        seen.add(v)
    return twice


def _ints(name: str, value) -> np.ndarray:
    values = _listify(value)
    if not values:
        raise PerfsimError(f"sweep: {name} is an empty list; give at least one value")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                             and 1 <= v <= MAX_SIZE for v in values):
        shown = repr(value) if len(repr(value)) < 80 else repr(value)[:77] + "..."
        raise PerfsimError(f"sweep: {name} must be integers in [1, 2**45] (sizes are bounded "
                           f"by what any GPU could hold; got {shown})")
    return np.asarray(values, dtype=np.int64)


def _pairs(first: str, a, second: str, b) -> np.ndarray:
    """``(n, 2)`` pairs: ``a`` with itself when ``b`` is None, else ``a × b``, where a ``None``
    (or ``"none"``, TOML's spelling) entry of a list ``b`` pairs each ``a`` with itself
    (``kv_heads=[None, 2]``: every head count as multi-head attention and with 2 K/V heads); a
    pair given twice is kept once."""
    a = _ints(first, a)
    if b is None:
        return np.stack([a, a], axis=1)
    # "none" (any case) is None, as TOML, which has no null, writes it
    listed = [_none(v) for v in _listify(b)]
    if not listed:
        raise PerfsimError(f"{second}: an empty list; give at least one value (None or "
                           f"\"none\" to follow {first}), or leave it out")
    numbers = [v for v in listed if v is not None]
    checked = iter(_ints(second, numbers).tolist() if numbers else [])
    b = [None if v is None else next(checked) for v in listed]
    pairs = dict.fromkeys((int(x), int(x) if y is None else y)
                          for x, y in itertools.product(a.tolist(), b))
    return np.array(list(pairs), dtype=np.int64).reshape(-1, 2)


class _Grid:
    """``batch × (heads, kv_heads) × (seqlen_q, seqlen_k)``: three axes, rows in C order.

    :meth:`blocks` cuts it into sub-grids of about :data:`CHUNK_ROWS` rows whose fields are
    broadcastable arrays (shapes ``(b, 1, 1)``, ``(1, h, 1)``, ``(1, 1, s)``), so work that
    depends on the sequence lengths only (tile counts) is done once per length, not per row.
    """

    def __init__(self, batch, heads, kv_heads, seqlen_q, seqlen_k):
        self.batch = _ints("batch", batch)
        self.heads = _pairs("heads", heads, "kv_heads", kv_heads)
        self.seqlens = _pairs("seqlen_q", seqlen_q, "seqlen_k", seqlen_k)
        self.shape = (len(self.batch), len(self.heads), len(self.seqlens))
        self.size = int(np.prod(self.shape))

    def columns(self, times: int = 1) -> dict:
        """The grid's rows as flat columns in C order (new arrays, built when the frame
        is): each axis' values repeated over the axes after it, tiled over those before;
        the whole grid repeated ``times`` times (one per group)."""
        nb, nh, ns = self.shape
        return {"batch": _spread(self.batch, nh * ns, times),
                "heads": _spread(self.heads[:, 0], ns, nb * times),
                "kv_heads": _spread(self.heads[:, 1], ns, nb * times),
                "seqlen_q": _spread(self.seqlens[:, 0], 1, nb * nh * times),
                "seqlen_k": _spread(self.seqlens[:, 1], 1, nb * nh * times)}

    def _cuts(self) -> list[tuple[slice, slice, slice]]:
        """The blocks' slices of the three axes, in row order (:data:`CHUNK_ROWS` read when
        called)."""
        nb, nh, ns = self.shape
        if nh * ns <= CHUNK_ROWS:
            step = CHUNK_ROWS // (nh * ns)
            return [(slice(i, i + step), slice(None), slice(None)) for i in range(0, nb, step)]
        if ns <= CHUNK_ROWS:
            step = CHUNK_ROWS // ns
            return [(slice(b, b + 1), slice(i, i + step), slice(None))
                    for b in range(nb) for i in range(0, nh, step)]
        return [(slice(b, b + 1), slice(h, h + 1), slice(i, i + CHUNK_ROWS))
                for b in range(nb) for h in range(nh) for i in range(0, ns, CHUNK_ROWS)]

    def block_rows(self) -> list[int]:
        """The rows of each block of :meth:`blocks`, in order (nothing is built)."""
        return [math.prod(len(range(*cut.indices(n))) for cut, n in zip(cuts, self.shape))
                for cuts in self._cuts()]

    def blocks(self):
        """Sub-grids in row order, as dicts of broadcastable int64 arrays."""
        for sb, sh, ss in self._cuts():
            yield {"batch": self.batch[sb, None, None],
                   "heads": self.heads[sh, 0][None, :, None],
                   "kv_heads": self.heads[sh, 1][None, :, None],
                   "seqlen_q": self.seqlens[ss, 0][None, None, :],
                   "seqlen_k": self.seqlens[ss, 1][None, None, :]}
