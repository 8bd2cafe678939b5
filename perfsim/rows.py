"""Many arbitrary workloads predicted at once: :func:`predict_rows`.

:func:`perfsim.predict` answers one call in a few hundred microseconds, most of it Python
building and timing the call's kernels. A tool that asks about many shapes at a time — an
autotuner ranking candidate launches, a scheduler pricing every request in a batch, a
replay of a production trace — wants them evaluated together. :func:`perfsim.sweep` does
that for a cartesian grid; :func:`predict_rows` does it for a list of workloads that form
no grid (each row its own batch, heads, lengths and options).

The rows are evaluated by the sweep's own vectorised path (:mod:`perfsim.sweep`): rows that
share the group-level fields (head dims, mask, dtypes, phase, dropout, paged K/V, softcap)
form one group, each group is cut into blocks of :data:`perfsim.sweep.CHUNK_ROWS` rows laid
out as the sweep lays out rows it evaluates apart, and every per-row choice ``predict``
makes (split-KV, GQA packing, a preset's per-shape kernel, the effective mask) is made per
row. So a row equals ``perfsim.predict`` of its workload (``tests/test_rows.py`` checks it
on random rows to 1e-9), and the output has the sweep's result columns.

Length: most of the module reads the three input forms (DataFrame, mapping of columns, list
of workloads) into columns and checks them, vectorised, with errors that name the row; the
evaluation itself is the sweep's.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.gpu import BYTES_PER_ELEMENT, GPUSpec
from perfsim.gpu_catalog import load_gpu
from perfsim.implementations import resolve
from perfsim.kernel import UNITS
from perfsim.predict import BOUNDS, predict
from perfsim.sweep import (
    _ENGINE,
    _GROUP_ROWS,
    _SWEEP_ROWS,
    ARRAY_FIELDS,
    CHUNK_ROWS,
    COUNT_COLUMNS,
    _check_timing,
    _count_over_power,
    _evaluate,
    _params,
    _scalar_combos,
    _Table,
    _unpacked,
    _warn_over_power,
    _windows,
    check_engine,
    check_size,
)
from perfsim.timing import TimingParams
from perfsim.whatif import what_if
from perfsim.workload import MAX_SIZE, MAX_TENSOR_BYTES, AttentionWorkload

if TYPE_CHECKING:
    import pandas as pd

#: Columns a row may give; ``batch``, ``heads``, ``seqlen_q`` and ``head_dim`` are needed,
#: the rest default as :class:`perfsim.AttentionWorkload` defaults them.
ROW_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim", "head_dim_v",
              "causal", "dtype", "phase", "dropout_p", "window", "kv_dtype", "page_size",
              "softcap")
REQUIRED_FIELDS = ("batch", "heads", "seqlen_q", "head_dim")
#: Fields shared by every row of a group (the rest vary inside a block).
_GROUP_FIELDS = ("head_dim", "head_dim_v", "causal", "dtype", "phase", "dropout_p", "window",
                 "kv_dtype", "page_size", "softcap")
#: What a missing value of a group field takes (``None``: the follower's source, or no
#: window / contiguous K/V), as ``AttentionWorkload`` defaults it.
_DEFAULTS = {"head_dim_v": None, "causal": False, "dtype": "bf16", "phase": "fwd",
             "dropout_p": 0.0, "window": None, "kv_dtype": None, "page_size": None,
             "softcap": 0.0}


def check_row_columns(columns, where: str, reader: str, advice: str) -> None:
    """Refuse column names that are not :data:`ROW_FIELDS`: one line that starts with
    ``where`` (a call or a file), names them and what ``reader`` reads, and ends with
    ``advice``.

    Raises:
        perfsim.PerfsimError: an unknown column (variable-length fields: predict only)."""
    unknown = [str(k) for k in columns if k not in ROW_FIELDS]
    if unknown:
        hint = ("; variable-length batches are perfsim predict-only"
                if {"seqlens_q", "seqlens_k"} & set(unknown) else "")
        raise PerfsimError(f"{where}: unknown column{'s' * (len(unknown) > 1)} "
                           f"{', '.join(map(repr, unknown))}{hint}; {reader} reads "
                           f"{', '.join(ROW_FIELDS)} ({advice})")


def predict_rows(rows, *, gpu: str | GPUSpec = "h100-sxm5", algorithm="fa2",
                 timing: TimingParams | dict | None = None, engine: str = "auto",
                 max_memory_bytes: int | None = None) -> pd.DataFrame:
    """Predict each of many workloads on one GPU and algorithm; one DataFrame row each.

    Args:
        rows: the workloads, one per row, in any of three forms:
            a ``pandas.DataFrame`` whose columns are workload fields;
            a mapping of field name to a sequence of values (all of one length);
            an iterable of :class:`perfsim.AttentionWorkload`.
            Fields are those of :data:`ROW_FIELDS`. ``batch``, ``heads``, ``seqlen_q`` and
            ``head_dim`` are needed; the rest default as in ``AttentionWorkload``. A missing
            value (``None``, NaN, pandas' NA) in any of the others takes the default too:
            ``kv_heads`` → ``heads``, ``seqlen_k`` → ``seqlen_q``, ``head_dim_v`` →
            ``head_dim``, ``kv_dtype`` → ``dtype``, ``page_size`` → contiguous K/V,
            ``window`` → none, ``causal`` → False, ``dtype`` → bf16, ``phase`` → fwd,
            ``dropout_p`` and ``softcap`` → 0. A ``window`` is a ``(left, right)`` pair or the sweep
            column's ``"LEFT,RIGHT"`` string (``"none"`` for an unbounded side). A size
            written as a whole float (``4096.0``, ``1e5``: a table column that holds a NaN
            is read as floats) counts as that integer, unlike ``AttentionWorkload``'s own
            fields, which take integers only; a fractional size is refused.
            Variable-length batches (``seqlens_q``/``seqlens_k``) are ``predict``-only.
        gpu: a catalog id, a GPU file path or a :class:`GPUSpec` (a what-if through
            ``GPUSpec.replace``).
        algorithm: an algorithm or implementation-preset name, or a configuration object.
        timing: ``None`` (the GPU's defaults under the algorithm's software profile), a
            dict of :class:`TimingParams` fields set on those, or a ``TimingParams``.
        engine: ``"auto"``, ``"numpy"`` or ``"compiled"``, as for :func:`perfsim.sweep`.
        max_memory_bytes: refuse more rows than this many bytes of result hold (default:
            half the memory available), as :func:`perfsim.sweep` does.

    Returns:
        A DataFrame with the input's index (a DataFrame's, else 0..n-1), in the input's
        order: the workload columns as the rows were read (defaults filled in), ``gpu``,
        ``algorithm``, then :func:`perfsim.sweep`'s result columns (``seconds``, ``tflops``,
        ``bound``, ``clock_hz``, ``power_w``, per-unit seconds, counts, ``memory_bytes``,
        ``fits_memory``, ``infeasible`` — the reason, with NaN results, for a row the model
        refuses —, ``stand_in``).

    Raises:
        perfsim.PerfsimError: an empty input; an unknown or missing column; columns of
            different lengths; a value a workload refuses (the message names the row); a
            tensor past :data:`perfsim.workload.MAX_TENSOR_BYTES`; more rows than the memory
            allows; an unknown GPU, algorithm or engine; a bad ``timing``.
    """
    _check_timing(timing)
    check_engine(engine)
    spec = load_gpu(gpu)
    algo = resolve(algorithm)
    columns, index = _columns(rows)
    n = len(columns["batch"])
    check_size(n, max_memory_bytes, what="predict_rows")
    arrays = _array_fields(columns, n, index)
    labels, groups = _groups(columns, n)
    scalars = [_scalar(columns, int(members[0]), index) for members in groups]
    _check_tensor_sizes(arrays, scalars, groups, index)

    target, why = what_if(spec, ())
    params = _params(timing, target or spec, algo)
    unpacked = _unpacked(algo)
    table = _Table(_Rows(n), 1)
    order = np.empty(n, dtype=np.int64)
    placed = 0
    for members, scalar in zip(groups, scalars):
        if len(members) <= SMALL_GROUP_ROWS:
            # a group of a few rows: predict() each (~0.3-1 ms a row) rather than pay a
            # vectorised block's fixed ~2 ms; a row a workload refuses goes on below
            kept = []
            for i in members:
                one = _predicted(i, arrays, scalar, target, algo, params)
                if one is None:
                    kept.append(i)
                    continue
                block = {k: arrays[k][i:i + 1].reshape(1, 1, 1) for k in ARRAY_FIELDS}
                table.add(block, *one)
                order[placed] = i
                placed += 1
            if not kept:
                continue
            members = np.array(kept, dtype=np.int64)
        parts = [members]
        if unpacked is not None:        # pack_gqa=True changes nothing where H == H_kv
            same = arrays["heads"][members] == arrays["kv_heads"][members]
            parts = [members[same], members[~same]]
        for part, run in zip(parts, (unpacked, algo) if unpacked is not None else (algo,)):
            for start in range(0, len(part), CHUNK_ROWS):
                chunk = part[start:start + CHUNK_ROWS]
                if not len(chunk):
                    continue
                block = {k: arrays[k][chunk].reshape(1, -1, 1) for k in ARRAY_FIELDS}
                tokens = (_ENGINE.set(engine), _SWEEP_ROWS.set(n),
                          _GROUP_ROWS.set(len(members)))
                try:
                    results, reasons = _evaluate(run, target, params, scalar, block, why)
                finally:
                    _ENGINE.reset(tokens[0])
                    _SWEEP_ROWS.reset(tokens[1])
                    _GROUP_ROWS.reset(tokens[2])
                table.add(block, results, reasons)
                order[placed:placed + len(chunk)] = chunk
                placed += len(chunk)
    frame = _frame(table, order, labels, scalars, arrays, spec, algo, index)
    if "power_w" in frame and target is not None:
        over: dict = {}
        _count_over_power(over, target, params, {"gpu": target.id},
                          {"power_w": frame["power_w"].to_numpy()})
        _warn_over_power(over, "predict_rows")
    return frame


#: Groups of at most this many rows are evaluated one ``predict`` call per row: a vectorised
#: block costs about 2 ms however few rows it holds, a call 0.3-1 ms (docs/sweeps.md).
SMALL_GROUP_ROWS = 4


def _predicted(i: int, arrays: dict, scalar: dict, gpu: GPUSpec, algo, params):
    """Row ``i`` through :func:`perfsim.predict`, as ``(results, reasons)`` in the form
    :meth:`perfsim.sweep._Table.add` takes for a one-row block, or None where its workload
    is refused (the vectorised path then words the reason as a sweep does)."""
    try:
        w = AttentionWorkload(
            batch=int(arrays["batch"][i]), heads=int(arrays["heads"][i]),
            kv_heads=int(arrays["kv_heads"][i]), seqlen_q=int(arrays["seqlen_q"][i]),
            seqlen_k=int(arrays["seqlen_k"][i]), head_dim=scalar["head_dim"],
            head_dim_v=scalar["head_dim_v"], causal=scalar["causal"],
            window=scalar["_window"], dtype=scalar["dtype"], phase=scalar["phase"],
            dropout_p=scalar["dropout_p"], kv_dtype=scalar["kv_dtype"],
            page_size=scalar["page_size"] or None, softcap=scalar["softcap"])
    except PerfsimError:
        return None
    one = np.ones((1, 1, 1))
    try:
        p = predict(w, gpu=gpu, algorithm=algo, timing=params)
    except InfeasibleError as exc:
        return {}, np.array([[[str(exc)]]], dtype=object)
    results = {"seconds": p.seconds, "tflops": p.tflops, "bound": p.bound,
               "clock_hz": p.clock_hz, "power_w": np.nan if p.power_w is None else p.power_w,
               **{f"{u}_seconds": p.unit_seconds[u] for u in UNITS},
               "model_flops": p.model_flops,
               **{c: float(getattr(p.counts, c)) for c in COUNT_COLUMNS},
               "memory_bytes": float(p.memory_bytes), "fits_memory": p.fits_memory}
    note_of = getattr(algo, "stand_in_note", None)
    if note_of is not None:
        results["stand_in"] = note_of(gpu, w) or ""
    return ({k: (np.array([[[v]]], dtype=object) if isinstance(v, str) else v * one)
             for k, v in results.items()}, np.array([[[""]]], dtype=object))


class _Rows:
    """What :class:`perfsim.sweep._Table` reads of a grid: its number of rows."""

    def __init__(self, n: int):
        self.size = n


def _columns(rows) -> tuple[dict, object]:
    """``(field -> list or array of n values, index)`` of the three input forms."""
    import pandas as pd

    if isinstance(rows, AttentionWorkload):
        rows = [rows]
    if isinstance(rows, pd.DataFrame):
        given, index = {str(k): rows[k].to_numpy() for k in rows.columns}, rows.index
        if len(set(given)) != len(rows.columns):
            raise PerfsimError("predict_rows: the DataFrame repeats a column name")
    elif isinstance(rows, Mapping):
        given, index = {str(k): v for k, v in rows.items()}, None
        for name, values in given.items():
            if (isinstance(values, (str, bytes, Mapping, set, frozenset))
                    or not isinstance(values, Iterable)):
                raise PerfsimError(f"predict_rows: column {name!r} must be a sequence of "
                                   f"values in row order (a list, tuple or array), got "
                                   f"{type(values).__name__}")
            given[name] = values if isinstance(values, np.ndarray) else list(values)
    elif isinstance(rows, Iterable) and not isinstance(rows, (str, bytes)):
        given, index = _from_workloads(list(rows)), None
    else:
        raise PerfsimError("predict_rows: give a pandas DataFrame, a mapping of field name "
                           "to values, or an iterable of AttentionWorkload; got "
                           f"{type(rows).__name__}")
    check_row_columns(given, "predict_rows", "predict_rows", "select them before the call")
    missing = [k for k in REQUIRED_FIELDS if k not in given]
    if missing:
        raise PerfsimError(f"predict_rows: needs column{'s' * (len(missing) > 1)} "
                           f"{', '.join(missing)}")
    lengths = {k: len(v) for k, v in given.items()}
    if len(set(lengths.values())) > 1:
        raise PerfsimError("predict_rows: columns of different lengths: "
                           + ", ".join(f"{k} {v}" for k, v in lengths.items()))
    n = lengths["batch"]
    if n == 0:
        raise PerfsimError("predict_rows: no rows; give at least one workload")
    # a column not given is None: every row takes the default
    columns = {k: given.get(k) for k in ROW_FIELDS}
    return columns, index


def _from_workloads(workloads: list) -> dict:
    """The columns of a list of :class:`AttentionWorkload`."""
    for i, w in enumerate(workloads):
        if not isinstance(w, AttentionWorkload):
            raise PerfsimError(f"predict_rows: row {i} is a {type(w).__name__}, not an "
                               "AttentionWorkload (or give a DataFrame or a mapping of "
                               "columns)")
        if w.seqlens_q is not None or w.seqlens_k is not None:
            raise PerfsimError(f"predict_rows: row {i} is a variable-length batch "
                               "(seqlens_q/seqlens_k): perfsim.predict-only")
    return {k: [getattr(w, k) for w in workloads] for k in ROW_FIELDS}


def _missing(v) -> bool:
    """None, NaN, or pandas' NA (a nullable column's gap)."""
    return (v is None or (isinstance(v, (float, np.floating)) and math.isnan(v))
            or type(v).__name__ in ("NAType", "NaTType"))


def _int_column(name: str, values, n: int, index, follow=None) -> np.ndarray:
    """``values`` as int64, each an integer in [1, MAX_SIZE]; a missing value (None, NaN)
    takes ``follow``'s (a field that may be left out), else is refused."""
    if values is None:
        return follow
    a = _array(values)
    if a.dtype.kind in "iu":
        out = a.astype(np.int64, copy=False)
        bad = (out < 1) | (out > MAX_SIZE)
        missing = np.zeros(n, bool)
    elif a.dtype.kind == "f":
        missing = np.isnan(a)
        ok = np.isfinite(a) & (a == np.floor(a)) & (a >= 1) & (a <= MAX_SIZE)
        bad = ~ok & ~missing
        out = np.where(ok, a, 1).astype(np.int64)
    else:
        values = list(values)
        missing = np.array([_missing(v) for v in values], bool)
        good = [isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                and 1 <= v <= MAX_SIZE for v in values]
        bad = ~np.array(good, bool) & ~missing
        out = np.array([int(v) if g else 1 for v, g in zip(values, good)], dtype=np.int64)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PerfsimError(f"predict_rows: {_label(index, i)}: {name} must be an integer "
                           f"in [1, 2**45], got {_shown(values, i)}")
    if missing.any():
        if follow is None:
            i = int(np.flatnonzero(missing)[0])
            raise PerfsimError(f"predict_rows: {_label(index, i)}: {name} is missing (an empty "
                               "cell, NA or NaN); it has no default")
        out = np.where(missing, follow, out)
    return out


def _array(values) -> np.ndarray:
    """``values`` as a one-dimensional array (objects where numpy would make more
    dimensions or refuse a ragged list)."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values
    try:
        a = np.asarray(values)
    except ValueError:
        a = None
    if a is None or a.ndim != 1:
        a = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            a[i] = v
    return a


def _shown(values, i: int) -> str:
    v = values[i]
    return repr(v.item() if isinstance(v, np.generic) else v)


def _array_fields(columns: dict, n: int, index) -> dict:
    """The per-row integer fields (:data:`perfsim.sweep.ARRAY_FIELDS`)."""
    batch = _int_column("batch", columns["batch"], n, index)
    heads = _int_column("heads", columns["heads"], n, index)
    seqlen_q = _int_column("seqlen_q", columns["seqlen_q"], n, index)
    return {"batch": batch, "heads": heads,
            "kv_heads": _int_column("kv_heads", columns["kv_heads"], n, index, follow=heads),
            "seqlen_q": seqlen_q,
            "seqlen_k": _int_column("seqlen_k", columns["seqlen_k"], n, index,
                                    follow=seqlen_q)}


def _hashable(v):
    """``v`` as a group key: a missing value as None, numpy scalars as Python ones, a list or
    array (a window pair, as a Parquet list column reads) as a tuple."""
    if _missing(v):
        return None
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, np.ndarray)):
        return tuple(x.item() if isinstance(x, np.generic) else x for x in v)
    return v


def _groups(columns: dict, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(group of each row, row indices of each group)``: the rows grouped by their
    group-level fields, groups in order of first appearance."""
    import pandas as pd

    codes = np.zeros(n, dtype=np.int64)
    for name in _GROUP_FIELDS:
        values = columns[name]
        if values is None:
            continue
        a = _array(values)
        if not isinstance(values, np.ndarray) and len({type(v) for v in values}) > 1:
            a = np.empty(n, dtype=object)       # numpy would make [True, 1] two ones
            a[:] = list(values)
        if a.dtype.kind == "O":
            # keyed with their type: True, 1 and 1.0 are equal (and hash alike) but a
            # workload takes only the first as a flag, so each is checked on its own
            keys = [None if k is None else (type(k).__name__, k)
                    for k in map(_hashable, a)]
            a = np.empty(len(keys), dtype=object)
            a[:] = keys
        field_codes, uniques = pd.factorize(a, use_na_sentinel=False)
        codes = codes * max(len(uniques), 1) + field_codes
        if codes.max(initial=0) > 2 ** 40:      # keep the combined code small
            codes = pd.factorize(codes)[0].astype(np.int64)
    labels = pd.factorize(codes)[0].astype(np.int64)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return labels, np.split(order, bounds)


def _scalar(columns: dict, row: int, index) -> dict:
    """The sweep's group dict of one row's group-level fields, validated as a workload."""
    values = {k: (None if columns[k] is None else _hashable(columns[k][row]))
              for k in _GROUP_FIELDS}
    for name, value in values.items():      # a missing value takes the field's default
        if value is None and name != "head_dim":
            values[name] = _DEFAULTS[name]
    if values["head_dim"] is None:
        raise PerfsimError(f"predict_rows: {_label(index, row)}: head_dim is missing; "
                           "it has no default")
    for name in ("head_dim", "head_dim_v", "page_size"):
        v = values[name]
        if isinstance(v, float) and v.is_integer():
            values[name] = int(v)
    window = values["window"]
    if isinstance(window, str) and not window.strip():
        window = None
    try:
        windows = _windows(window)
        if len(windows) != 1:
            raise PerfsimError(f"window must be one (left, right) pair, got {window!r}")
        (scalar,) = _scalar_combos(values["head_dim"], values["head_dim_v"],
                                      values["causal"], values["dtype"], values["phase"],
                                      values["dropout_p"], [windows[0]], values["kv_dtype"],
                                      values["page_size"], values["softcap"])
    except PerfsimError as exc:
        text = str(exc)
        text = text[len("sweep: "):] if text.startswith("sweep: ") else text
        raise PerfsimError(f"predict_rows: {_label(index, row)}: {text}") from None
    return scalar


def _label(index, row: int) -> str:
    """``row N`` (position, or the caller's index label), or ``line N`` for a rows file read
    by ``perfsim rows`` (its index holds file lines)."""
    if index is None:
        return f"row {row}"
    if getattr(index, "name", None) == "line":
        return f"line {index[row]}"
    return f"row {index[row]!r}"


def _check_tensor_sizes(arrays: dict, scalars: list, groups: list, index) -> None:
    """Each row's Q/O and K/V within :data:`MAX_TENSOR_BYTES`, as a workload checks them."""
    for members, s in zip(groups, scalars):
        e = BYTES_PER_ELEMENT[s["dtype"]]
        e_kv = BYTES_PER_ELEMENT[s.get("kv_dtype") or s["dtype"]]
        d = max(s["head_dim"], s["head_dim_v"])
        b = arrays["batch"][members].astype(float)
        for label, heads, seqlen, width in (("Q/O", "heads", "seqlen_q", e),
                                            ("K/V", "kv_heads", "seqlen_k", e_kv)):
            size = b * arrays[heads][members] * arrays[seqlen][members] * float(d * width)
            over = size > MAX_TENSOR_BYTES
            if over.any():
                row = int(members[np.flatnonzero(over)[0]])
                raise PerfsimError(
                    f"predict_rows: {_label(index, row)}: the {label} tensor would hold "
                    f"{size[over][0]:.3g} bytes; at most 2**45 = {MAX_TENSOR_BYTES} bytes "
                    "(32 TiB) per tensor")


def _frame(table, order, labels, scalars: list, arrays: dict, spec: GPUSpec, algo, index):
    """The result DataFrame in the input's order: the workload columns as the sweep writes
    them (each group's fields as its validated workload has them: ``head_dim_v`` and
    ``kv_dtype`` filled in, ``window`` as ``"LEFT,RIGHT"`` or ``""``, ``page_size`` 0 for
    contiguous K/V), then the results."""
    import pandas as pd

    back = np.empty_like(order)
    back[order] = np.arange(len(order))            # input row i was evaluated at back[i]
    n = len(order)
    data = {}
    for key in ROW_FIELDS:
        if key in arrays:
            data[key] = arrays[key]
            continue
        per_group = [s[key] for s in scalars]
        if all(isinstance(v, str) for v in per_group):
            categories = list(dict.fromkeys(per_group))
            codes = np.array([categories.index(v) for v in per_group], dtype=np.int32)
            data[key] = pd.Categorical.from_codes(codes[labels], categories)
        else:
            data[key] = np.asarray(per_group)[labels]
    data["gpu"] = pd.Categorical.from_codes(np.zeros(n, np.int8), [spec.id])
    data["algorithm"] = pd.Categorical.from_codes(np.zeros(n, np.int8), [algo.label()])
    for key, column in table.columns.items():
        data[key] = column[back]
    data["bound"] = pd.Categorical.from_codes(table.columns["bound"][back],
                                              ("", *BOUNDS))
    reasons = table.reason_codes[back]
    data["fits_memory"] = pd.arrays.BooleanArray(table.columns["fits_memory"][back],
                                                 reasons != 0)
    data["infeasible"] = pd.Categorical.from_codes(reasons, list(table.reasons))
    data["stand_in"] = pd.Categorical.from_codes(table.stand_in_codes[back],
                                                 list(table.stand_ins))
    frame = pd.DataFrame(data, copy=False)
    if index is not None:
        frame.index = index
    return frame
