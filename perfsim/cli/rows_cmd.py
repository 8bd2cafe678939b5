"""``perfsim rows FILE``: predict every workload of a CSV, Parquet or JSON-lines file
(:func:`perfsim.predict_rows`), one output row per input row.

Length: the command and its file reading — CSV, Parquet and JSON lines, each cell checked and a
bad one named by its line and column (numbers, ``causal`` words, NaN and infinities, repeated
or unknown columns) — which only make sense together."""

from __future__ import annotations

import io
import json
import math
import os
import time
import warnings

from perfsim import algorithms
from perfsim.cli.common import (
    DefaultsFormatter,
    _algorithm_from_args,
    path_arg,
    print_table,
    seconds_text,
    tflops_text,
    timing_fields,
)
from perfsim.errors import PerfsimError
from perfsim.files import check_output

#: Input formats, by extension.
IN_EXTENSIONS = (".csv", ".parquet", ".jsonl")
#: Rows the table on the terminal shows (the rest: --out).
SHOWN_ROWS = 20


def read_rows(path: str):
    """The workloads of ``path`` as a DataFrame: CSV (an empty cell is a missing value,
    which takes the field's default), Parquet, or JSON lines (one object per line).

    Raises:
        perfsim.PerfsimError: a missing, unreadable or empty file, or another extension."""
    from pathlib import Path

    import pandas as pd

    p = Path(path)
    ext = p.suffix.lower()
    if ext not in IN_EXTENSIONS:
        raise PerfsimError(f"rows file {path}: give a {', '.join(IN_EXTENSIONS)} file")
    if not p.exists():
        raise PerfsimError(f"rows file {path}: no such file")
    if not p.is_file():
        raise PerfsimError(f"rows file {path}: not a regular file")
    try:
        if ext == ".csv":
            # an empty cell (or NA, null, ...) is a missing value, which takes the default,
            # but not "nan" (a number that is not one: refused by _typed_columns);
            # index_col=False: a line with more fields than the header is refused below,
            # not read with its first field as the index and the rest shifted left
            with warnings.catch_warnings():
                warnings.simplefilter("error", pd.errors.ParserWarning)
                try:
                    frame = pd.read_csv(p, index_col=False, encoding="utf-8-sig",
                                        keep_default_na=False, na_values=MISSING_WORDS)
                except pd.errors.ParserWarning:
                    raise PerfsimError(f"rows file {path}: a line has more fields than the "
                                       "header row (a trailing comma?)") from None
            _no_repeated_columns(p, path)
            # "batch, heads": a space after a comma is not part of the next column's name
            frame.columns = [str(c).strip() for c in frame.columns]
            frame.index = _csv_lines(p, len(frame))
            return _typed_columns(frame, path)
        if ext == ".parquet":
            from perfsim.cli.sweep import _pyarrow

            _pyarrow(f"rows file {path}", "or give a .csv or .jsonl file")
            return _causal_flags(pd.read_parquet(p), path)
        text = p.read_text(encoding="utf-8-sig")
        if not text.strip():
            raise pd.errors.EmptyDataError
        if text.lstrip().startswith("["):
            raise PerfsimError(f"rows file {path}: a .jsonl file holds one JSON object per "
                               "line, not one array")
        lines = _json_lines(text, path)
        frame = pd.read_json(io.StringIO(text), lines=True, dtype=False)
        if len(frame) == len(lines):
            frame.index = pd.Index(lines, name="line")
        return _causal_flags(frame, path)
    except PerfsimError:
        raise
    except pd.errors.EmptyDataError:
        what = ("one JSON object per line, one per workload" if ext == ".jsonl" else
                "a header row of workload fields and one row per workload")
        raise PerfsimError(f"rows file {path}: empty (give {what})") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        text = " ".join(str(exc).split())
        raise PerfsimError(f"rows file {path}: cannot be read as {ext[1:]} ({text})") from None
    except Exception as exc:        # noqa: BLE001 - pyarrow's and pandas' own parse errors
        text = " ".join(str(exc).split())
        raise PerfsimError(f"rows file {path}: cannot be read as {ext[1:]} "
                           f"({type(exc).__name__}: {text})") from None


def _csv_lines(p, rows: int):
    """The file line of each data row of the CSV at ``p`` (the header is line 1; blank lines
    skipped and quoted line breaks counted, as the reader reads them), as a ``line`` index,
    so errors and the table name the line; a plain 0-based index where they do not agree."""
    import csv

    import pandas as pd

    with p.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        next(reader, None)
        lines = []
        start = reader.line_num + 1
        for record in reader:
            if any(cell.strip() for cell in record):
                lines.append(start)
            start = reader.line_num + 1
    return pd.Index(lines, name="line") if len(lines) == rows else pd.RangeIndex(rows)


class _Repeated(Exception):
    """A JSON object that names a key twice (``json`` itself keeps the last silently)."""


def _one_each(pairs):
    """``json.loads``' object hook: the object of ``pairs``, refusing a repeated key."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _Repeated(key)
        out[key] = value
    return out


def _json_lines(text: str, path: str) -> list[int]:
    """The line of each JSON object of a .jsonl text (blank lines skipped).

    Raises:
        PerfsimError: the first line that is not a JSON object, by its line number."""
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line, object_pairs_hook=_one_each)
        except _Repeated as exc:
            raise PerfsimError(f"rows file {path}: line {number} names {exc.args[0]!r} more "
                               "than once; give each field once") from None
        except ValueError as exc:
            raise PerfsimError(f"rows file {path}: line {number} is not JSON ({exc.msg}, "
                               f"column {exc.colno})") from None
        if not isinstance(value, dict):
            raise PerfsimError(f"rows file {path}: line {number} is a JSON "
                               f"{type(value).__name__}, not an object of workload fields")
        for name, field in value.items():
            if isinstance(field, float) and not math.isfinite(field):
                raise PerfsimError(f"rows file {path}: line {number}, field {name}: {field} "
                                   "is not a finite number (leave the field out, or write "
                                   "null, for its default)")
        lines.append(number)
    return lines


def _no_repeated_columns(p, path) -> None:
    """Refuse a CSV header (``p``, a Path) that names a column twice (pandas reads the second as
    ``batch.1``, then refused as an unknown field).

    Raises:
        PerfsimError: the repeated names."""
    import csv

    with p.open(encoding="utf-8-sig", newline="") as f:
        header = [name.strip() for name in next(csv.reader(f), [])]
    repeated = sorted({n for n in header if n and header.count(n) > 1})
    if repeated:
        raise PerfsimError(f"rows file {path}: the header names {', '.join(map(repr, repeated))} "
                           "more than once; give each column once")


#: What a CSV cell may hold for a missing value (the field's default): pandas' words for one
#: less its spellings of NaN, which as a number is refused (a typo'd or computed NaN is not a
#: gap).
MISSING_WORDS = ["", "#N/A", "#N/A N/A", "#NA", "<NA>", "N/A", "NA", "NULL", "None", "n/a",
                 "null"]

#: The workload fields a rows file gives as numbers.
NUMBER_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
                 "head_dim_v", "dropout_p", "softcap")


def _typed_columns(frame, path: str):
    """A CSV's number columns as numbers and its ``causal`` column as booleans (1/0,
    true/false, yes/no; an empty cell is missing). One cell that is not a number makes
    pandas read its whole column as text; that cell is named (row and column), not the
    column's first.

    Raises:
        perfsim.PerfsimError: a cell of a number column that is not a number, a ``causal``
            cell that is not one of those words."""
    import numpy as np
    import pandas as pd

    for name in NUMBER_FIELDS:
        if name not in frame:
            continue
        if frame[name].dtype.kind in "iufb":    # (text: object, or pandas' string dtype)
            infinite = np.isinf(frame[name].to_numpy(dtype=float, na_value=np.nan))
            if infinite.any():
                row = frame.index[int(np.argmax(infinite))]
                raise PerfsimError(f"rows file {path}: {_where(frame, row)}, column {name}: "
                                   f"{float(frame[name][row])} is not a finite number "
                                   "(leave the cell empty for the field's default)")
            continue
        column = frame[name]
        numbers = pd.to_numeric(column, errors="coerce")
        bad = (numbers.isna() | numbers.isin([np.inf, -np.inf])) & column.notna()
        if bad.any():
            row = bad.idxmax()
            word = str(column[row]).strip().lower().lstrip("+-")
            what = ("is not a finite number (leave the cell empty for the field's default)"
                    if word in ("nan", "inf", "infinity") else "is not a number")
            raise PerfsimError(f"rows file {path}: {_where(frame, row)}, column {name}: "
                               f"{column[row]!r} {what}")
        frame[name] = numbers
    return _causal_flags(frame, path)


def _causal_flags(frame, path: str):
    """``frame`` with its ``causal`` column as booleans where it is not: 1/0, true/false,
    yes/no in any case (a CSV's words, or a JSON line's ``1``/``0``), missing as missing.

    Raises:
        perfsim.PerfsimError: a ``causal`` value that is none of those, by row or line."""
    import pandas as pd

    if "causal" in frame and frame["causal"].dtype.kind != "b":
        column, flags = frame["causal"], []
        for row, value in column.items():
            word = str(value).strip().lower()
            if pd.isna(value) or word == "":
                flags.append(None)                          # missing: the default
            elif word in _TRUE or word in _FALSE:
                flags.append(word in _TRUE)
            else:
                raise PerfsimError(f"rows file {path}: {_where(frame, row)}, column causal: "
                                   f"{value!r} is not true or false (1/0, true/false, yes/no)")
        frame["causal"] = pd.array(flags, dtype="boolean")
    return frame


def _where(frame, row) -> str:
    """``line N`` where the frame's index holds file lines, else ``row N``."""
    return f"{'line' if frame.index.name == 'line' else 'row'} {row}"


#: How a rows file may write ``causal`` (any case; 1.0 as pandas reads a column with a gap).
_TRUE, _FALSE = ("1", "1.0", "true", "yes"), ("0", "0.0", "false", "no")


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file (the same inode where both exist, else the
    same absolute path once links are resolved)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _cmd_rows(args) -> int:
    from perfsim.cli.sweep import OUT_EXTENSIONS, _pyarrow, json_records, write_rows
    from perfsim.gpu_catalog import load_gpu
    from perfsim.rows import check_row_columns, predict_rows
    from perfsim.sweep import check_engine

    check_engine(args.engine)
    if args.quiet and not args.out and not args.json:
        raise PerfsimError("--quiet without --out or --json would compute the rows and show "
                           "none: give --out FILE.csv or FILE.parquet to keep them")
    if args.out:        # before the work: a bad path must not cost the computation
        if args.out.strip().lower().endswith((".json", ".jsonl")):
            raise PerfsimError(f"--out {args.out!r}: --out writes .csv or .parquet; for JSON "
                               "the --json flag prints the rows (perfsim rows FILE ... --json "
                               "> rows.json)")
        check_output(args.out, OUT_EXTENSIONS, "--out")
        if _same_file(args.out, args.file):
            raise PerfsimError(f"--out {args.out!r} is the rows file itself: writing there "
                               "would replace the workloads with the results (which perfsim "
                               "rows cannot read back); give --out another file")
        if args.out.lower().endswith(".parquet"):
            _pyarrow()
    if args.algorithm.strip().lower() in ("all", "presets"):
        raise PerfsimError(f"--algorithm {args.algorithm}: perfsim rows predicts with one "
                           "algorithm or preset; run it once per algorithm")
    algo = _algorithm_from_args(args.algorithm, args.set)     # before reading the file
    gpu = load_gpu(args.gpu)
    frame = read_rows(args.file)
    check_row_columns(frame.columns, f"rows file {args.file}", "perfsim rows",
                      "remove the others from the file")
    timing = timing_fields(args)
    start = time.perf_counter()
    out = predict_rows(frame, gpu=gpu, algorithm=algo, timing=timing or None,
                       engine=args.engine)
    seconds = time.perf_counter() - start
    if args.out:
        write_rows(out, args.out)
    if args.json:
        print(json.dumps(json_records(out), indent=1, default=str))
        return 0
    if args.quiet:
        return 0
    shown = out.head(SHOWN_ROWS)
    extras = [_extras(row) for row in shown.itertuples()]
    cells = []
    for row, extra in zip(shown.itertuples(), extras):
        done = row.infeasible == ""
        cells.append([str(row.Index), str(row.batch), f"{row.heads}/{row.kv_heads}",
                      f"{row.seqlen_q}/{row.seqlen_k}", _head_dims(row), str(row.dtype),
                      _mask(row), str(row.phase)] + ([extra] if any(extras) else []) + [
                      seconds_text(row.seconds) if done else "-",
                      tflops_text(row.tflops) if done else "-",
                      str(row.bound) if done else f"infeasible: {row.infeasible}"])
    bad = int((out.infeasible != "").sum())
    print_table(f"{out.gpu.iloc[0]}, {out.algorithm.iloc[0]}: {len(out)} rows "
                f"({bad} infeasible) in {seconds:.2f} s",
                ["line" if out.index.name == "line" else "row", "B", "H/H_kv", "N_q/N_k", "d",
                 "dtype", "mask", "phase"] + (["also"] if any(extras) else [])
                + ["time", "TFLOP/s", "bound"], cells)
    if len(out) > SHOWN_ROWS:
        print(f"first {SHOWN_ROWS} of {len(out)} rows"
              + ("" if args.out else "; --out FILE.csv or FILE.parquet writes them all"))
    if args.out:
        print(f"wrote rows to {args.out}")
    return 0


def _head_dims(row) -> str:
    """The table's head-dim cell: ``d``, or ``d/d_v`` when V's head dim differs."""
    return str(row.head_dim) if row.head_dim_v == row.head_dim \
        else f"{row.head_dim}/{row.head_dim_v}"


def _extras(row) -> str:
    """The table's ``also`` cell: the row's fields away from their defaults that the other
    cells do not show (dropout, a K/V cache dtype other than ``dtype``, a paged cache's page
    size, a logit softcap), or nothing."""
    parts = []
    if row.dropout_p:
        parts.append(f"dropout {row.dropout_p:g}")
    if str(row.kv_dtype) != str(row.dtype):
        parts.append(f"K/V {row.kv_dtype}")
    if row.page_size:
        parts.append(f"page {row.page_size}")
    if row.softcap:
        parts.append(f"softcap {row.softcap:g}")
    return ", ".join(parts)


def _mask(row) -> str:
    """The table's mask cell: ``causal``, ``window L,R`` (both when both), or nothing."""
    parts = (["causal"] if row.causal else []) + ([f"window {row.window}"] if row.window
                                                  else [])
    return ", ".join(parts)


def register(sub) -> None:
    """Add ``perfsim rows`` to the ``perfsim`` parser."""
    from perfsim.implementations import implementations

    p = sub.add_parser(
        "rows", help="predict every workload of a CSV/Parquet/JSON-lines file",
        formatter_class=DefaultsFormatter,
        description="One prediction per row of FILE (perfsim.predict_rows): columns are "
        "workload fields (batch, heads, seqlen_q and head_dim needed; kv_heads, seqlen_k, "
        "head_dim_v, causal, dtype, phase, dropout_p, window as \"LEFT,RIGHT\", kv_dtype, "
        "page_size, softcap optional; an empty cell takes the default). Output: the rows "
        "with the sweep's result columns, in the file's order.")
    p.add_argument("file", type=path_arg, help="the workloads: .csv, .parquet or .jsonl")
    p.add_argument("--gpu", default="h100-sxm5", help="catalog id or .toml profile path")
    p.add_argument("--algorithm", "-a", default="fa2",
                   help=f"an algorithm ({', '.join(algorithms.names())}) or an implementation "
                   f"preset ({', '.join(implementations())})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm option, e.g. --set num_splits=4 (repeatable)")
    p.add_argument("--clock", default="sustained", type=str.lower,
                   help="SM clock: sustained (the power model), boost, datasheet, or a clock "
                   "lock in MHz")
    p.add_argument("--kernel-only", action="store_true",
                   help="GPU time of the kernels alone: no host floor per call")
    p.add_argument("--engine", choices=("auto", "numpy", "compiled"), default="auto",
                   help="evaluation engine, as for perfsim sweep")
    p.add_argument("--out", metavar="FILE", type=path_arg,
                   help="write every row (.csv or .parquet)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON records")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no table (with --out or --json)")
    p.set_defaults(func=_cmd_rows)
