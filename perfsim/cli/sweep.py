"""``perfsim sweep``: a design-space sweep from a TOML file (:mod:`perfsim.sweep`).

``perfsim sweep CONFIG.toml --out results.csv [--plot FILE] [--json]`` reads a TOML file::

    gpus = ["a100-sxm4-80gb", "h200-sxm"]       # default: every catalog GPU
    algorithms = ["standard", "fa2", {name = "fa2", block_m = 64}]   # default: all
                                        # ("all": every algorithm, "presets": every preset)

    [workload]                                  # AttentionWorkload fields: a value or a list
    batch = 4
    heads = 16
    seqlen_q = [512, 1024, 2048, 4096]
    head_dim = [64, 128]
    causal = [false, true]

    [overrides]                                 # GPU what-ifs (optional; see perfsim.whatif)
    hbm_bandwidth_bytes_per_s = {scale = [0.5, 1, 2]}
    sm_count = [100, 132]

and an optional top-level ``columns = ["seconds", "bound"]`` (the result columns to keep;
default all; ``--columns`` overrides it).

Length: one command with its two paths (the local sweep and Dask partitions), which share the
TOML file's checks, the output checks made before any work, the progress bars and the
summary; split apart, each path would repeat them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path

from perfsim import algorithms
from perfsim.cli.common import path_arg, print_table, tflops_text, timing_fields
from perfsim.errors import PerfsimError
from perfsim.files import (
    FIGURE_EXTENSIONS,
    atomic_write,
    check_output,
    check_output_folder,
    raise_stop,
    read_text,
    save_figure,
    write_text_atomic,
)


@contextmanager
def _progress_bars(args):
    """Rich progress bars on stderr, hidden with ``--quiet`` or off a terminal. Yields
    ``track(label, total=None)``, which adds a bar and returns its ``(done, total=None)``
    callback (the one ``sweep``, ``dask_sweep`` and ``write_rows`` call)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    console = Console(stderr=True)
    with Progress("{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True,
                  disable=args.quiet or not console.is_terminal) as bar:
        def track(label: str, total=None):
            task = bar.add_task(label, total=total)

            def update(done, total=None):
                bar.update(task, completed=done, **({} if total is None else {"total": total}))
            return update
        yield track

CONFIG_KEYS = ("gpus", "algorithms", "workload", "overrides", "columns")
#: Result columns each ``--plot-kind`` draws from.
PLOT_COLUMNS = {"tflops": ("tflops", "fits_memory"),
                "bottleneck": ("bound", "tflops", "fits_memory")}   # (its cells print TFLOP/s)
PLOTS = ("tflops", "bottleneck")


def load_sweep_config(path: str | Path) -> dict:
    """Keyword arguments for :func:`perfsim.sweep.sweep` from a TOML file (module docstring).

    Raises:
        perfsim.PerfsimError: a missing or malformed file, an unknown key, an algorithm
            option that does not validate (the message names the key).
    """
    from perfsim.sweep import WORKLOAD_FIELDS  # pandas: imported only when sweeping

    path = Path(path)
    # a UTF-8 byte-order mark (some Windows editors write one) is not TOML: skipped
    text = read_text(path, "sweep config").removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PerfsimError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:      # tomllib recurses once per level of nested arrays
        raise PerfsimError(f"{path}: not valid TOML for a sweep: arrays nested too deep "
                           "(a workload field takes a value or a list of values)") from None
    unknown = sorted(set(data) - set(CONFIG_KEYS))
    if unknown:
        raise PerfsimError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: "
                           f"{', '.join(CONFIG_KEYS)}")
    workload = data.get("workload")
    if not isinstance(workload, dict):
        raise PerfsimError(f"{path}: needs a [workload] table with at least batch, heads, "
                           "seqlen_q and head_dim")
    varlen = sorted(set(workload) & {"seqlens_q", "seqlens_k"})
    if varlen:
        raise PerfsimError(f"{path}: [workload] {', '.join(varlen)}: variable-length batches "
                           "are perfsim.predict-only (sweeps evaluate fixed-length rows)")
    bad = sorted(set(workload) - set(WORKLOAD_FIELDS))
    if bad:
        raise PerfsimError(f"{path}: [workload] has unknown field(s) {', '.join(bad)}; "
                           f"fields: {', '.join(WORKLOAD_FIELDS)}")
    missing = [f for f in ("batch", "heads", "seqlen_q", "head_dim") if f not in workload]
    if missing:
        raise PerfsimError(f"{path}: [workload] needs {', '.join(missing)}")
    kwargs = dict(workload, gpus=_profile_paths(data.get("gpus"), path),
                  overrides=data.get("overrides"))
    names = data.get("algorithms")
    if names is not None:
        # "all" / "presets" (every algorithm / every implementation preset), alone or in the
        # list, go to perfsim.sweep as names, which expands them there
        from perfsim.implementations import algorithm_group

        kwargs["algorithms"] = [a if algorithm_group(a) is not None else _algorithm(a, path)
                                for a in (names if isinstance(names, list) else [names])]
    from perfsim.sweep import check_columns, count_rows

    try:            # every value checked as the sweep checks it, the file named in the error
        count_rows(**kwargs)
        if "columns" in data:
            kwargs["columns"] = list(check_columns(data["columns"]))
    except PerfsimError as exc:
        raise PerfsimError(f"{path}: {str(exc).removeprefix('sweep: ')}") from None
    return kwargs


def _profile_paths(gpus, config: Path):
    """``gpus`` with each relative ``.toml`` profile path read beside the config file (where a
    config and its profiles usually live together), else from the current folder (how
    configs were read before 2026-12-04). Catalog ids and absolute paths are unchanged.

    Raises:
        perfsim.PerfsimError: a relative profile in neither place (both named).
    """
    if gpus is None:
        return None
    out = []
    for entry in gpus if isinstance(gpus, list) else [gpus]:
        if (isinstance(entry, str) and entry.lower().endswith(".toml")
                and not Path(entry).is_absolute()):
            beside = config.parent / entry
            if beside.is_file():
                entry = str(beside)
            elif not Path(entry).is_file():
                folder = next((p for p in (beside, Path(entry)) if p.is_dir()), None)
                if folder is not None:
                    raise PerfsimError(f"{config}: GPU profile {entry!r} is a folder "
                                       f"({str(folder)!r}), not a .toml file")
                raise PerfsimError(f"{config}: GPU profile file {entry!r} does not exist "
                                   f"beside the config (in {str(config.parent)!r}) nor in "
                                   "the current folder")
        out.append(entry)
    return out if isinstance(gpus, list) else out[0]


def _algorithm(entry, path: Path) -> algorithms.Algorithm:
    """A name, or a table ``{name = "fa2", block_m = 64}`` of options — for an
    implementation preset (``{name = "flash-attn-3", compiled_head_dims = "exact"}``) the
    options of the configuration it runs, as ``perfsim predict --set`` takes them."""
    from perfsim.implementations import configured

    if isinstance(entry, dict) and "name" in entry:
        options = dict(entry)
        name, where = options.pop("name"), "the table"
    else:
        name, options, where = entry, {}, ""
    if not isinstance(name, str):
        raise PerfsimError(f"{path}: an algorithms entry must be a name or a table with a "
                           f"name, got {entry!r}")
    try:           # a name or a label ("fa2(block_m=64)", as --json writes it)
        return configured(name, options, where=where)
    except PerfsimError as exc:  # Algorithm.__init__: one line naming the option
        raise PerfsimError(f"{path}: {exc}{_quoted_hint(options)}") from None


def _quoted_hint(options: dict) -> str:
    """A hint for option values TOML read as strings that ``--set`` reads as numbers or
    booleans (``block_m = "64"``, ``pack_gqa = "true"``): a TOML table keeps their types."""
    import json

    quoted = []
    for key, value in options.items():
        if isinstance(value, str):
            try:
                typed = json.loads(value)
            except json.JSONDecodeError:
                continue
            if not isinstance(typed, str):
                quoted.append(f"{key} = {json.dumps(typed)}")
    if not quoted:
        return ""
    return (f" (a TOML table keeps a value's type: write {', '.join(quoted)} without quotes; "
            "--set KEY=VALUE reads the text)")


def register_sweep(subparsers) -> None:
    """Add ``perfsim sweep`` to the ``perfsim`` parser."""
    p = subparsers.add_parser(
        "sweep", help="predict a grid of workloads x GPUs x algorithms x GPU what-ifs",
        description="Predict every combination in a TOML config (see docs/sweeps.md); one "
        "row per combination, infeasible ones marked with their reason.")
    p.add_argument("config", help="TOML file: [workload] lists, gpus, algorithms, [overrides]")
    p.add_argument("--out", metavar="FILE", type=path_arg,
                   help="write the rows to this file: .csv, or .parquet (needs pyarrow); "
                   "written to a temporary file and renamed, so an interrupted sweep never "
                   "leaves a half-written FILE or loses the previous one (after SIGKILL, which "
                   "cannot be caught, a hidden .FILE.*.tmp may remain beside it: delete it)")
    p.add_argument("--plot", metavar="FILE", type=path_arg, help="write a figure (PNG/SVG/PDF)")
    p.add_argument("--plot-kind", choices=PLOTS, default="tflops",
                   help="tflops: TFLOP/s vs sequence length per algorithm; bottleneck: the "
                   "unit that binds on sequence length x head_dim (seqlen_k where only it "
                   "varies, as in decode sweeps; else seqlen_q)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON records")
    p.add_argument("--columns", metavar="LIST",
                   help="comma-separated result columns to keep (e.g. seconds,bound; default "
                   "all, or the config's columns): fewer columns take less memory and time; "
                   "the workload, gpu, algorithm, infeasible and stand_in columns stay")
    p.add_argument("--dask", metavar="SCHEDULER", type=_dask_arg,
                   help="run the sweep in partitions on Dask: "
                   "'local' (a LocalCluster on this machine) or a scheduler address "
                   "(tcp://host:8786); --out is then a directory that receives a partitioned "
                   "Parquet dataset, resumed when run again (perfsim.distributed; needs "
                   "perfsim[dask])")
    p.add_argument("--workers", type=int, metavar="N", help="with --dask local: worker "
                   "processes (default: the cores of this machine; at most 4 per core)")
    p.add_argument("--rows-per-partition", type=int, metavar="N",
                   help="with --dask: rows per partition (default 50,000)")
    p.add_argument("--stream", action="store_true", help="evaluate and write the rows block "
                   "by block (32 Ki rows at a time) instead of holding them all: memory stays "
                   "bounded however large the sweep (needs --out; no --plot or --json; the "
                   "summary then gives no medians). Chosen by itself, with a note, when the "
                   "rows would not fit in half the memory available. An interrupted stream "
                   "keeps its finished rows in NAME.partial.EXT; the same sweep run again "
                   "(with or without --stream, as long as --out is its file and there is no "
                   "--plot or --json) resumes after them (same config, columns and perfsim; "
                   "any engine) and says so; a partial file it cannot use (another sweep's, or "
                   "changed) is not resumed: the run starts over and its result replaces that "
                   "file, as do the rows it finishes if it is interrupted too")
    p.add_argument("--restart", action="store_true", help="with a streamed --out sweep: start "
                   "over instead of resuming from the rows an interrupted run kept in "
                   "NAME.partial.EXT: this run's whole result removes them, and if this run "
                   "is interrupted, the rows it finished by then replace them (they stay where "
                   "it finished none). Refused for a sweep held in memory, which resumes "
                   "nothing (add --stream)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar or summary")
    p.add_argument("--kernel-only", action="store_true",
                   help="GPU time of the kernels alone: no host floor per call")
    p.add_argument("--clock", default="sustained", type=str.lower,   # BOOST as boost
                   help="SM clock: sustained (the power model), boost, datasheet, or a clock "
                   "lock in MHz (as perfsim predict --clock)")
    # perfsim.sweep.ENGINES (not imported here: building the parser loads no numpy)
    p.add_argument("--engine", choices=("auto", "numpy", "compiled"), default="auto",
                   help="how the rows are evaluated: numpy arrays, or kernels compiled from "
                   "the same model code (perfsim.compiled; needs perfsim[fast]); auto "
                   "compiles sweeps of at least 2^23 rows in groups of at least 2^21 when "
                   "it can (default: auto; the rows agree to 1e-12)")
    p.set_defaults(func=_cmd_sweep)


def _dask_arg(text: str) -> str:
    """``--dask``: not empty or blank (``--dask ""`` read as no --dask and ran locally)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"needs a scheduler address (tcp://HOST:8786) or "
                                         f"'local', got {text!r}")
    return text


def _cmd_sweep(args) -> int:

    from perfsim.sweep import check_columns, check_engine, sweep

    kwargs = load_sweep_config(args.config)
    timing = timing_fields(args)
    if timing:
        kwargs["timing"] = timing
    check_engine(args.engine)
    if args.columns is not None:
        kwargs["columns"] = list(check_columns(
            [c.strip() for c in args.columns.split(",") if c.strip()]))
    if args.plot and "columns" in kwargs:
        lacking = [c for c in PLOT_COLUMNS[args.plot_kind] if c not in kwargs["columns"]]
        if lacking:
            raise PerfsimError(f"--plot-kind {args.plot_kind} draws {', '.join(lacking)}: "
                               f"keep {'it' if len(lacking) == 1 else 'them'} in the columns "
                               "(--columns or the config's columns)")
    if args.dask and args.stream:
        raise PerfsimError("--stream goes without --dask: the Dask path writes its partitions "
                           "to --out DIR as they finish already")
    if args.restart and (args.dask or not args.out or args.plot or args.json):
        raise PerfsimError("--restart goes with a streamed sweep (--out FILE, without --dask, "
                           "--plot or --json): it starts over instead of resuming from "
                           "NAME.partial.EXT (a --dask run resumes its folder: give a new one "
                           "to start over)")
    if args.quiet and not (args.out or args.plot or args.json):
        print("perfsim sweep: --quiet with no --out, --plot or --json computes the sweep and "
              "shows nothing of it: give --out FILE (or --plot FILE, --json), or drop --quiet "
              "for the summary table", file=sys.stderr)
    if args.dask:
        return _cmd_dask_sweep(args, kwargs)
    for flag in ("workers", "rows_per_partition"):
        if getattr(args, flag) is not None:
            raise PerfsimError(f"--{flag.replace('_', '-')} goes with --dask")
    if args.out:        # before the work: a bad path must not cost the computation
        check_output(args.out, OUT_EXTENSIONS, "--out")
        if args.out.lower().endswith(".parquet"):
            _pyarrow()
    if args.plot:
        check_output(args.plot, FIGURE_EXTENSIONS, "--plot")
    found = _found_partial(args, kwargs)
    streamed = _streamed(args, kwargs, found)
    if args.restart and not streamed:
        raise PerfsimError("--restart goes with a streamed sweep: this one fits in memory and "
                           "is computed there, resuming nothing (add --stream to stream it and "
                           "start over instead of resuming from NAME.partial.EXT)")
    if streamed:
        return _cmd_stream_sweep(args, kwargs, found, streamed)
    if args.json:
        _check_json_size(kwargs)
    if found and found[1] and not args.quiet:       # (not on stdout under the JSON)
        print(f"{partial_path(Path(args.out))}: not resumed: {found[1]}; the sweep is computed "
              "in memory and its whole result removes it",
              file=sys.stderr if args.json else sys.stdout)
    start = time.perf_counter()
    with _progress_bars(args) as track:
        df = sweep(**kwargs, progress=track("sweep"), engine=args.engine)
        seconds = time.perf_counter() - start
        written = time.perf_counter()
        if args.out:
            write_rows(df, args.out, track("write", len(df)))
            # a whole result replaces what an interrupted stream to the same file kept
            drop_partial(args.out)
        written = time.perf_counter() - written
    if args.plot:
        try:
            _plot(df, args.plot, args.plot_kind)
        except PerfsimError as exc:
            if not args.out:
                raise
            raise PerfsimError(f"wrote rows to {args.out}; no figure: {exc}") from None
    if args.json:
        print(json.dumps(json_records(df), indent=1, default=str))
    elif not args.quiet:
        _summary(df, seconds)
        for name, what in ((args.out, "rows"), (args.plot, "figure")):
            if name:
                # the summary's seconds are the predictions' alone; the write is timed here
                took = f" in {written:.2f} s" if what == "rows" else ""
                print(f"wrote {what} to {name}{took}")
    return 0


#: Memory per row of ``--json`` (bytes): the rows as Python dicts and then as JSON text, as
#: measured by tracemalloc on a 10,000-row FA2 sweep (8.9 kB at the peak), rounded up.
JSON_BYTES_PER_ROW = 10_000


def _check_json_size(kwargs) -> None:
    """Refuse ``--json`` for a sweep whose records would not fit in half the memory
    available (:func:`perfsim.sweep.memory_budget_bytes`) before any work: ``--json`` holds
    every row as Python objects and text, ~20 times the DataFrame."""
    from perfsim.sweep import count_rows, memory_budget_bytes

    rows, budget = count_rows(**kwargs), memory_budget_bytes()
    if rows * JSON_BYTES_PER_ROW > budget:
        def size(n):
            return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
        raise PerfsimError(f"--json: {rows:,} rows need about "
                           f"{size(rows * JSON_BYTES_PER_ROW)} as JSON records, more than the "
                           f"{size(budget)} allowed (half the memory available now); write "
                           "the rows to a file instead (--out FILE.parquet or .csv)")


def _found_partial(args, kwargs) -> tuple[int, str] | None:
    """``(rows, why)`` of the partial file beside ``--out`` (:func:`resumable_rows`; a CSV
    one is read through once, here only), or None: no ``--out`` file, or no partial file
    there. With ``--plot`` or ``--json`` (which hold every row) it is not looked into."""
    if not args.out or args.dask:
        return None
    try:
        present = partial_path(Path(args.out)).is_file()
    except OSError:
        present = False
    if not present:
        return None
    if args.plot or args.json:
        return 0, "--plot and --json hold every row in memory"
    from perfsim.sweep import rows_key

    return resumable_rows(args.out, rows_key(kwargs))


def _streamed(args, kwargs, found: tuple[int, str] | None = None) -> str:
    """Whether ``perfsim sweep`` streams, and why: ``"stream"`` (``--stream``), ``"resume"``
    (an ``--out`` sweep, no --plot or --json, which need every row at once, whose partial
    file ``found`` by :func:`_found_partial` it may resume from, unless ``--restart``),
    ``"memory"`` (such a sweep whose rows would not fit in memory; a line says so), or ``""``
    (held in memory).

    Raises:
        perfsim.PerfsimError: ``--stream`` without ``--out``, or with --plot or --json.
    """
    from perfsim.sweep import bytes_per_row, check_columns, count_rows, memory_budget_bytes

    if args.stream:
        if not args.out:
            raise PerfsimError("--stream needs --out FILE (.csv or .parquet): the rows go to "
                               "the file block by block")
        if args.plot or args.json:
            raise PerfsimError("--stream writes the rows to --out only: --plot and --json "
                               "need every row at once (plot from the file instead)")
        return "stream"
    if not args.out or args.plot or args.json:
        return ""
    if found and found[0] and not args.restart:
        return "resume"
    budget = memory_budget_bytes()
    rows = count_rows(**kwargs)
    per_row = bytes_per_row(check_columns(kwargs.get("columns")))
    if rows * per_row <= budget:
        return ""
    if not args.quiet:
        print(f"{rows:,} rows need about {rows * per_row / 2**30:.1f} GiB, more than "
              f"half the memory available ({budget / 2**30:.1f} GiB): streaming them to "
              f"{args.out} block by block (as --stream)")
    return "memory"


def _cmd_stream_sweep(args, kwargs, found: tuple[int, str] | None = None,
                      why: str = "stream") -> int:
    """``perfsim sweep CONFIG --out FILE --stream``: rows evaluated and written block by
    block (:func:`perfsim.sweep.sweep_frames`, :func:`write_frames`), a summary kept as they
    pass; after the rows an interrupted run of the same sweep kept (``found`` by
    :func:`_found_partial`, else looked up here; :func:`resumable_rows`) unless
    ``--restart``, or where they do not end a frame of the sweep. ``why``: as
    :func:`_streamed` gives it (``"resume"``: the line that says so names the stream).

    Raises:
        perfsim.PerfsimError: the partial file's path (or its record's) is a folder
            (:func:`check_partial`), before any work.
    """
    from perfsim.sweep import count_rows, rows_key, sweep_frames

    check_partial(args.out)     # before the work: an interrupt keeps the finished rows there
    identity = rows_key(kwargs)
    partial = partial_path(Path(args.out))
    if found is None:
        found = resumable_rows(args.out, identity)
    resumed, unused = found
    bar = []                    # the progress bar's callback, once it is shown

    def progress(done, total=None):
        if bar:
            bar[0](done, total)

    frames, note = None, ""
    replaced = ("this run's whole result removes it, and if this run is interrupted, the rows "
                "it finished by then replace it (it stays where there are none)")
    if resumed and args.restart:
        note = (f"{partial}: not resumed (--restart): starting over, its {resumed:,} rows "
                f"unused; {replaced}")
        resumed = 0
    elif resumed:
        try:        # rows off a frame end (an edited record): starting over
            frames = sweep_frames(**kwargs, progress=progress, engine=args.engine,
                                  skip_rows=resumed)
            note = (f"resuming from {partial}: its {resumed:,} rows are not computed again"
                    + (f" (streaming to {args.out}, as --stream)" if why == "resume" else ""))
        except PerfsimError:
            unused = f"its {resumed:,} rows are not whole blocks of this sweep"
            resumed = 0
    if not resumed and unused:
        note = f"{partial}: not resumed: {unused}; starting over: {replaced}"
    if frames is None:
        frames = sweep_frames(**kwargs, progress=progress, engine=args.engine)
    if note and not args.quiet:
        print(note)
    start = time.perf_counter()
    summary = _StreamSummary()
    with _progress_bars(args) as track:
        bar.append(track("sweep", count_rows(**kwargs)))
        if resumed:
            bar[0](resumed)     # the rows resumed, on the bar while they are copied
        write_frames(summary.watch(frames), args.out, identity=identity, resume_rows=resumed)
    if not args.quiet:
        summary.print(time.perf_counter() - start, resumed)
        print(f"wrote rows to {args.out}")
    return 0


class _StreamSummary:
    """Per (GPU, algorithm): rows, infeasible rows, the best TFLOP/s and the binding units,
    gathered from the frames as they are written (no medians: they need every row)."""

    def __init__(self):
        self.parts: dict = {}

    def watch(self, frames):
        import numpy as np

        for frame in frames:     # one group, or several whole ones (sweep_frames)
            for key, part in frame.groupby(["gpu", "algorithm"], observed=True, sort=False):
                entry = self.parts.setdefault(tuple(map(str, key)),
                                              [0, 0, float("-inf"), {}])
                feasible = (part["infeasible"] == "").to_numpy()
                entry[0] += len(part)
                entry[1] += int(len(part) - feasible.sum())
                if feasible.any() and "tflops" in part:
                    entry[2] = max(entry[2],
                                   float(np.nanmax(part["tflops"].to_numpy()[feasible])))
                if feasible.any() and "bound" in part:
                    for bound, n in zip(*np.unique(part["bound"].astype(str).to_numpy()
                                                   [feasible], return_counts=True)):
                        entry[3][str(bound)] = entry[3].get(str(bound), 0) + int(n)
            yield frame

    def print(self, seconds: float, resumed: int = 0) -> None:
        """The table, its title giving the rows and seconds of this run and the ``resumed``
        rows it took from an interrupted one (not counted in the table)."""
        rows = [[gpu, algo, str(n), str(bad),
                 f"{best:.1f}" if n > bad and best > float("-inf") else "-",
                 ", ".join(f"{b} {k}" for b, k in sorted(bounds.items(), key=lambda t: -t[1])
                           if k) or "-"]
                for (gpu, algo), (n, bad, best, bounds) in self.parts.items()]
        total = sum(e[0] for e in self.parts.values())
        infeasible = sum(e[1] for e in self.parts.values())
        after = f", after {resumed:,} rows resumed (not in this table)" if resumed else ""
        plural = "" if total == 1 else "s"
        print_table(f"{total} prediction{plural} ({infeasible} infeasible) in {seconds:.2f} "
                    f"s, streamed{after}", ["gpu", "algorithm", "rows", "infeasible",
                                         "max TFLOP/s", "bound (rows)"], rows)


def write_frames(frames, path: str | Path, progress=None, identity: str | None = None,
                 resume_rows: int = 0) -> Path:
    """Write a stream of sweep frames (:func:`perfsim.sweep.sweep_frames`) to ``path``
    (``.csv`` or ``.parquet``) one frame at a time, through a temporary file renamed over it
    as :func:`write_rows` does: memory holds at most :data:`ROW_GROUP_ROWS` rows, and an
    interrupted run leaves the previous file untouched. Parquet: row groups of
    :data:`ROW_GROUP_ROWS` rows, the schema of the first frame (categoricals as dictionaries
    of strings, a column that is empty there as strings).

    Ctrl-C or SIGTERM (any ``BaseException`` but an ``Exception``) keeps the whole frames
    written in :func:`partial_path` (a valid file) with its record (:func:`record_path`), and
    re-raises the interrupt carrying ``partial`` (the path, or None), ``partial_rows`` and
    ``resumable`` (whether the record was written). A whole result removes both. In the main
    thread SIGINT and SIGTERM wait (:class:`_Interrupts`) while a Parquet row group is
    written, while the finished rows are kept (a second signal then changes nothing) and
    from the last row to the rename of the result and the removal of the partial file; one
    that arrived in that last step is raised once the result is in place, carrying
    ``whole`` (the path written).

    Args:
        frames: the frames, in the sweep's order.
        path: the file to write.
        progress: called as ``progress(rows_written)`` after each frame (resumed rows
            included).
        identity: the text naming the rows (:func:`perfsim.sweep.rows_key`), recorded with
            a partial file so that a later run of the same sweep resumes from it; None: the
            partial is kept without a record (no run resumes from it).
        resume_rows: the rows of the partial file that ``frames`` start after
            (``sweep_frames(skip_rows=resume_rows)``; :func:`resumable_rows` gives them):
            they are copied into the new file first (Parquet: its schema kept; CSV: its lines
            counted as they are copied), the partial left in place until this run's result
            or partial replaces it. 0: none.

    Raises:
        perfsim.PerfsimError: unknown extension, missing folder, pyarrow missing for
            Parquet, a partial file path (or its record's) that is a folder or another
            non-regular file (:func:`check_partial`), no rows at all, or ``resume_rows``
            that are not the rows of a partial file recorded with ``identity`` (the message
            says why; a CSV partial whose lines are not ``resume_rows`` is found so as it is
            copied, and nothing is written).
    """
    path = check_output(path, OUT_EXTENSIONS, "--out")
    parquet = path.suffix.lower() == ".parquet"
    pq = _pyarrow() if parquet else None
    partial = check_partial(path)
    if resume_rows:
        found, why = (resumable_rows(path, identity, count_lines=False)
                      if identity is not None else (0, ""))
        if found != resume_rows:
            raise PerfsimError(f"{partial}: cannot resume {resume_rows:,} rows from it: "
                               + (why or (f"it holds {found:,}" if found else
                                          "no partial file recorded with this identity")))
    with _Interrupts() as interrupts:
        with atomic_write(path) as tmp:
            if parquet:
                written = _write_parquet(frames, tmp, path, pq, progress, identity,
                                         resume_rows, interrupts)
            else:
                written = _write_csv(frames, tmp, path, progress, identity, resume_rows,
                                     interrupts)
            if not written:
                raise PerfsimError("sweep: no rows to write")
            # (held by _write_*: the rename and the clean-up below are not cut short)
        # a whole result replaces what an earlier interrupted run of it kept
        drop_partial(path)
        interrupts.whole = str(path)        # a signal held since is raised saying so
    return path


def _write_parquet(frames, tmp: Path, path: Path, pq, progress, identity, resume_rows: int,
                   interrupts: _Interrupts) -> int:
    """:func:`write_frames`' Parquet file: ``tmp`` filled, closed, and signals held (for the
    rename) on return; the rows written. Interrupted, the rows the file holds (counted as
    each row group is written, a write held whole, and read back from the closed file: a
    count that differs keeps nothing) go to :func:`_keep_partial`."""
    import pyarrow as pa

    writer = schema = None
    pending, rows, written = [], 0, 0
    stored = [0]                # rows in the file: whole frames, counted as each write ends

    def write(table):
        with interrupts.holding():          # the write and its count, never one alone
            writer.write_table(table)
            stored[0] += table.num_rows

    def flush():
        with interrupts.holding():          # no signal between the list and the file
            tables = pending[:]
            pending.clear()                 # out of the list first: never written twice
            write(pa.concat_tables(tables).combine_chunks())

    try:
        if resume_rows:          # the partial's rows first, in its schema
            with pq.ParquetFile(partial_path(path)) as source:
                schema = source.schema_arrow
                writer = pq.ParquetWriter(tmp, schema)
                for group in range(source.num_row_groups):
                    write(source.read_row_group(group))
            written = resume_rows
        for frame in frames:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if writer is None:
                schema = parquet_schema(table)
                writer = pq.ParquetWriter(tmp, schema)
            pending.append(table.cast(schema))
            rows += len(frame)
            written += len(frame)
            if rows >= ROW_GROUP_ROWS:
                flush()
                rows = 0
            if progress:
                progress(written)
            raise_stop()    # a signal whose exception C code cleared: stops here, kept
        if pending:
            flush()
        interrupts.held = True      # from the footer to the rename: a signal waits
        if writer is not None:
            writer.close()
        return written
    except Exception:
        raise
    except BaseException as stop:          # Ctrl-C, SIGTERM: keep what is finished
        interrupts.held = True              # first (no call before it): a second waits
        try:
            if pending:
                flush()
            if writer is not None:
                writer.close()
                if pq.read_metadata(tmp).num_rows != stored[0]:
                    stored[0] = 0           # a write cut short: keep nothing
        except Exception:                   # (likewise)
            stored[0] = 0
        raise _keep_partial(stop, tmp, path, stored[0], identity, resume_rows) from None
    finally:
        if writer is not None and writer.is_open:
            writer.close()


def _write_csv(frames, tmp: Path, path: Path, progress, identity, resume_rows: int,
               interrupts: _Interrupts) -> int:
    """:func:`write_frames`' CSV file: ``tmp`` filled and signals held (for the rename) on
    return; the rows written. Interrupted, the file is cut back to its last whole frame and
    kept (:func:`_keep_partial`).

    Raises:
        perfsim.PerfsimError: the partial file copied first does not hold ``resume_rows``
            rows (its lines counted)."""
    mark = (0, 0)           # (bytes, rows) of the whole frames in the file: one assignment
    try:
        if resume_rows:         # the partial's bytes first (it ends with a whole row)
            partial = partial_path(path)
            size, lines = _copy_counting_lines(partial, tmp)
            if lines != resume_rows + 1:
                raise PerfsimError(f"{partial}: cannot resume {resume_rows:,} rows from it: "
                                   f"it holds {max(lines - 1, 0):,} (its lines less the "
                                   "header, or a last line cut short)")
            mark = (size, resume_rows)
        written = resume_rows
        with open(tmp, "a", encoding="utf-8", newline="") as fh:
            for frame in frames:
                frame.to_csv(fh, index=False, header=written == 0)
                written += len(frame)
                fh.flush()
                mark = (fh.tell(), written)
                if progress:
                    progress(written)
                raise_stop()    # a signal whose exception C code cleared: stops here, kept
        interrupts.held = True      # to the rename: a signal waits
        return written
    except Exception:
        raise
    except BaseException as stop:          # Ctrl-C, SIGTERM: keep what is finished
        interrupts.held = True              # first (no call before it): a second waits
        kept, done = mark
        try:
            os.truncate(tmp, kept)         # no half-written frame (the file closed)
        except OSError:
            done = 0
        raise _keep_partial(stop, tmp, path, done, identity, resume_rows) from None


#: Bytes read per step when a CSV partial file is copied or its lines counted.
COPY_CHUNK_BYTES = 1 << 23


def _copy_counting_lines(source: Path, target: Path | None = None) -> tuple[int, int]:
    """``(bytes, lines)`` of ``source``, copied to ``target`` on the way where given: its
    newline characters, less one where the file does not end with a newline (a last line cut
    short is no whole row). Reads it once, :data:`COPY_CHUNK_BYTES` at a time.

    Raises:
        OSError: a file that cannot be read or written.
    """
    size = lines = 0
    last = b"\n"
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(open(source, "rb"))
        dst = stack.enter_context(open(target, "wb")) if target is not None else None
        while chunk := src.read(COPY_CHUNK_BYTES):
            if dst is not None:
                dst.write(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return size, lines - (last != b"\n")


class _Interrupts:
    """SIGINT and SIGTERM while :func:`write_frames` writes (a context manager; the main
    thread only, where Python runs signal handlers: elsewhere it changes nothing). A signal
    does what the handler before it did (KeyboardInterrupt, the CLI's SIGTERM exception, the
    default action) except while ``held`` is true: then it is noted and waits.
    :meth:`holding` holds over a block and raises a noted signal after it. ``held`` is set
    by a plain assignment where a signal must not slip in before it (the first statement of
    an ``except`` clause: no call, so Python runs no handler before it).

    On leaving, the handlers before it come back; a signal still noted is dropped where an
    exception is on its way out (the run is stopping already), else raised, carrying
    ``whole`` (set by the writer: the result written whole before it took effect).
    """

    def __init__(self):
        self.held = False
        self.noted: list = []
        self.previous: dict = {}
        self.whole = None

    def __enter__(self):
        import signal

        try:
            for signum in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(signum)
                if handler is None or handler is signal.SIG_IGN:
                    continue        # set outside Python, or ignored: left as it is
                try:
                    signal.signal(signum, self._handle)
                except ValueError:  # not the main thread
                    break
                self.previous[signum] = handler
        except BaseException:       # a signal before both were in place
            self._restore(list(self.previous.items()))
            raise
        return self

    def __exit__(self, kind, value, traceback):
        self.held = True            # a signal while the handlers go back waits
        self._restore(list(self.previous.items()))
        noted, self.noted, self.held = self.noted, [], False
        if noted and kind is None:
            try:
                self._deliver(noted[0])
            except BaseException as stop:
                stop.whole = self.whole
                raise
        return False

    def _restore(self, handlers: list) -> None:
        """Put ``handlers`` (``(signum, handler)`` pairs) back, every one of them even where
        a signal raises on the way (each in the ``finally`` of the one before)."""
        import signal

        if handlers:
            try:
                signal.signal(*handlers[0])
            finally:
                self._restore(handlers[1:])

    def _handle(self, signum, frame):
        if self.held:
            self.noted.append(signum)
        else:
            self._deliver(signum, frame)

    def _deliver(self, signum, frame=None):
        """What the handler before :meth:`__enter__` does with ``signum``."""
        import signal

        handler = self.previous.get(signum)
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL:     # the default action: the process ends
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    @contextmanager
    def holding(self):
        """Hold signals over the block (already held: nothing changes); one noted meanwhile
        is raised after it."""
        if self.held:
            yield
            return
        self.held = True
        try:
            yield
        finally:
            self.held = False
            noted, self.noted = self.noted, []
        if noted:
            self._deliver(noted[0])


def partial_path(path: Path) -> Path:
    """Where an interrupted stream keeps the rows it finished: ``NAME.partial.EXT`` beside
    ``path``."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def record_path(partial: Path) -> Path:
    """The record of a partial file (:func:`partial_path`): ``NAME.partial.EXT.json``, JSON
    of its ``rows``, its size in ``bytes``, the ``perfsim`` version, the ``model``
    (:func:`perfsim.sweep.model_digest`) and the SHA-256 of the sweep's ``identity``
    (:func:`perfsim.sweep.rows_key`)."""
    return partial.with_name(f"{partial.name}.json")


def check_partial(path: str | Path) -> Path:
    """``path``'s partial file (:func:`partial_path`), checked before a stream starts: it and
    its record are regular files or absent, so that an interrupted run can keep its rows
    there.

    Raises:
        perfsim.PerfsimError: either is a folder or another non-regular file (a FIFO, a
            device), or the system refuses its name.
    """
    partial = partial_path(Path(path))
    for where in (partial, record_path(partial)):
        try:
            odd = where.exists() and not where.is_file()
        except OSError as exc:
            raise PerfsimError(f"{where}: {exc.strerror or type(exc).__name__} (an "
                               "interrupted stream keeps its finished rows there)") from None
        if odd:
            what = "a folder" if where.is_dir() else "not a regular file"
            raise PerfsimError(f"{where} is {what}: an interrupted stream to {path} keeps its "
                               "finished rows there; move it away or give another --out")
    return partial


def drop_partial(path: str | Path) -> None:
    """Remove ``path``'s partial file and its record (:func:`record_path`): what a whole
    result at ``path`` replaces, whichever sweep kept them. The record goes first (a file
    left without one is not resumed); a file that cannot be removed stays."""
    partial = partial_path(Path(path))
    for kept_file in (record_path(partial), partial):
        with contextlib.suppress(OSError):
            kept_file.unlink()


#: The fields of a partial file's record (:func:`record_path`).
RECORD_FIELDS = ("rows", "bytes", "perfsim", "model", "identity")
#: The most bytes of a record read: one is about 300 bytes.
RECORD_MAX_BYTES = 1 << 16


def _record(identity: str, rows: int, size: int) -> dict:
    """A partial file's record (:func:`record_path`) for ``rows`` rows in ``size`` bytes."""
    from perfsim import __version__
    from perfsim.sweep import model_digest

    return {"rows": rows, "bytes": size, "perfsim": __version__, "model": model_digest(),
            "identity": hashlib.sha256(identity.encode()).hexdigest()}


def _read_record(partial: Path) -> dict:
    """The record of ``partial`` (:func:`record_path`), a dict.

    Raises:
        FileNotFoundError: there is none.
        ValueError: anything else that keeps it from being read: unreadable, larger than
            :data:`RECORD_MAX_BYTES`, not UTF-8 JSON (arrays nested too deep included), not
            a JSON object.
    """
    try:
        with open(record_path(partial), "rb") as fh:
            data = fh.read(RECORD_MAX_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ValueError(exc.strerror) from None
    if len(data) > RECORD_MAX_BYTES:
        raise ValueError("too large")
    try:
        record = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:   # JSON nested too deep: RecursionError
        raise ValueError(str(exc)) from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def resumable_rows(path: str | Path, identity: str, count_lines: bool = True) -> tuple[int, str]:
    """The rows of ``path``'s partial file (:func:`partial_path`) that a stream of a sweep
    may resume after.

    Args:
        path: the ``--out`` file (not the partial file).
        identity: the sweep's :func:`perfsim.sweep.rows_key`.
        count_lines: a CSV partial file's lines are counted (one read through it: about
            1 s per GB from the page cache, disk speed otherwise): its rows must be the
            recorded ones, its header once before them. False: only its size is compared
            (:func:`write_frames` counts them as it copies the file). A Parquet file's row
            count is read from its footer either way.

    Returns:
        ``(rows, "")`` for a partial file this sweep may resume from; ``(0, "")`` where
        there is none; ``(0, why)`` (a few words) where there is one it may not use: no
        record; one that cannot be read (anything: unreadable, not JSON, too large, nested
        too deep) or is incomplete (a field missing); kept by another perfsim version or
        model, of another sweep, or changed since (its size, or its rows: a Parquet file's
        row count, a CSV file's lines, not the recorded ones). Whether the rows end a frame
        of the sweep is :func:`perfsim.sweep.sweep_frames`' check (``skip_rows``).
        Raises nothing: an unreadable partial is one it may not use.
    """
    partial = partial_path(Path(path))
    name = record_path(partial).name
    try:
        if not partial.is_file():
            return 0, ""
        record = _read_record(partial)
    except FileNotFoundError:
        return 0, (f"it has no record ({name}: kept by an older perfsim, "
                   "or cut off before its record was written)")
    except Exception:  # noqa: BLE001 - whatever keeps the record from being read
        return 0, f"its record {name} cannot be read"
    missing = [field for field in RECORD_FIELDS if field not in record]
    if missing:
        return 0, f"its record {name} is incomplete (no {', '.join(missing)})"
    current = _record(identity, 0, 0)
    if (record["perfsim"], record["model"]) != (current["perfsim"], current["model"]):
        return 0, "it was kept by another perfsim version or model (its rows may differ)"
    if record["identity"] != current["identity"]:
        return 0, ("it holds rows of another sweep (other grid, GPUs, algorithms, what-ifs, "
                   "timing or columns)")
    rows = record["rows"]
    changed = "it was changed after it was kept (its size or rows are not the recorded ones)"
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        return 0, changed
    try:
        size = partial.stat().st_size
        if partial.suffix.lower() == ".parquet":
            found = _pyarrow().read_metadata(partial).num_rows
        elif count_lines and size == record["bytes"]:
            found = _copy_counting_lines(partial)[1] - 1       # less the header
        else:
            found = rows
    except Exception:  # noqa: BLE001 - unreadable or damaged: not resumed
        return 0, changed
    if (size, found) != (record["bytes"], rows):
        return 0, changed
    return rows, ""


def _keep_partial(cause: BaseException, tmp: Path, path: Path, rows: int,
                  identity: str | None, resumed: int) -> BaseException:
    """Move the temporary file of an interrupted stream to :func:`partial_path` (whole frames
    only, a valid file) with its record where ``identity`` is given, and return the
    interrupt to re-raise, carrying ``partial`` (the path), ``partial_rows`` and
    ``resumable``. A temporary file of no more rows than the ``resumed`` partial it began
    with leaves that partial as it is; with no row at all, no file is kept. The record of
    the partial file replaced goes first, the new one is written after the move: a record is
    never beside rows it does not describe (:func:`write_frames` holds signals meanwhile).
    Where the move fails (an ``OSError``) the rows are lost and ``keep_error`` says why."""
    target = partial_path(path)
    record = record_path(target)
    cause.partial, cause.partial_rows, cause.resumable = None, rows, False
    if rows <= resumed:
        if resumed:                     # the partial this run resumed from stays
            cause.partial, cause.partial_rows = str(target), resumed
            cause.resumable = True
        return cause
    with contextlib.suppress(OSError):
        record.unlink()                 # the older partial's record, before its file goes
    try:
        os.replace(tmp, target)
    except OSError as exc:
        cause.keep_error = f"{target}: {exc.strerror or type(exc).__name__}"
        return cause
    cause.partial = str(target)
    if identity is not None:
        try:
            write_text_atomic(record, json.dumps(_record(identity, rows,
                                                         target.stat().st_size)))
            cause.resumable = True
        except (PerfsimError, OSError):  # kept without a record: a later run starts over
            pass
    return cause


def _cmd_dask_sweep(args, kwargs) -> int:
    """``perfsim sweep CONFIG --dask SCHEDULER --out DIR``: a partitioned Parquet dataset."""

    from perfsim.distributed import ROWS_PER_PARTITION, check_workers, dask_sweep

    if not args.out:
        raise PerfsimError("--dask needs --out DIR: the folder that receives the Parquet "
                           "partitions")
    if args.plot or args.json:
        raise PerfsimError("--dask writes a dataset only: read it with "
                           "perfsim.distributed.read_dataset(DIR) to plot or print it")
    if args.workers is not None and (args.workers < 1 or args.dask != "local"):
        raise PerfsimError("--workers must be at least 1 and goes with --dask local")
    check_workers(args.workers, "--workers")
    size = ROWS_PER_PARTITION if args.rows_per_partition is None else args.rows_per_partition
    if size < 1:
        raise PerfsimError(f"--rows-per-partition must be at least 1, got {size}")
    if args.out.lower().endswith(".csv"):
        raise PerfsimError(f"--out {args.out}: with --dask the rows go to a folder of Parquet "
                           "files; give a folder name (e.g. rows/ or rows.parquet)")
    check_output_folder(args.out, "--out")      # before the work, as a file --out is checked
    start = time.perf_counter()
    with _progress_bars(args) as track:
        out = dask_sweep(kwargs, args.out, args.dask, args.workers, size, track("partitions"),
                         engine=args.engine)
    if not args.quiet:
        from perfsim.distributed import MANIFEST
        manifest = json.loads((out / MANIFEST).read_text())
        print(f"wrote {manifest['rows']} rows in {len(manifest['partitions'])} Parquet "
              f"partitions to {out} in {time.perf_counter() - start:.1f} s")
    return 0


def json_records(df) -> list[dict]:
    """The rows as JSON-ready dicts, every float at full precision (``DataFrame.to_json``
    keeps 10 decimal places: 3.7123e-05 s would print as 3.71e-05); NaN and ±inf become
    null."""
    def clean(value):
        if hasattr(value, "item"):              # numpy scalars
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    return [{k: clean(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


#: Row files ``sweep --out`` writes.
OUT_EXTENSIONS = (".csv", ".parquet")
#: Rows written per step (the progress bar advances per step).
WRITE_CHUNK_ROWS = 1 << 16
#: Rows per Parquet row group of a streamed sweep (:func:`write_frames`): frames are gathered
#: to this many before a write (each write costs ~40 ms of fixed work; 256 Ki rows hold about
#: 100 MB).
ROW_GROUP_ROWS = 1 << 18


def _pyarrow(what: str = "--out .parquet", instead: str = "or write .csv"):
    """``pyarrow.parquet``, or a PerfsimError saying that ``what`` needs it."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError:
        raise PerfsimError(f"{what} needs pyarrow (pip install pyarrow, or "
                           f"pip install 'perfsim[parquet]'); {instead}") from None
    return pq


def parquet_schema(table):
    """The schema sweep rows are written to Parquet with, streamed or whole: categoricals as
    dictionaries with 32-bit codes (pandas picks 8 or 16 bits by the count of one frame's
    values, which would differ between a stream's frames and the whole), an empty column as
    strings, and pandas' own metadata (its column dtypes, the nullable boolean
    ``fits_memory``, come back when the file is read)."""
    import pyarrow as pa

    return pa.schema([
        pa.field(f.name, pa.string()) if pa.types.is_null(f.type)
        else pa.field(f.name, pa.dictionary(pa.int32(), pa.string()))
        if pa.types.is_dictionary(f.type) else f
        for f in table.schema], metadata=table.schema.metadata)


def write_rows(df, path: str | Path, progress=None) -> Path:
    """Write sweep rows to ``path`` (``.csv`` or ``.parquet``, by the extension) through a
    temporary file renamed over it: an interrupted write (exception, Ctrl-C, SIGKILL) leaves
    the previous file at ``path`` untouched. CSV is written in chunks of
    :data:`WRITE_CHUNK_ROWS` rows, calling ``progress(rows_written)`` after each.

    Raises:
        perfsim.PerfsimError: unknown extension, missing folder, or pyarrow missing for
            Parquet.
    """
    path = check_output(path, OUT_EXTENSIONS, "--out")
    parquet = path.suffix.lower() == ".parquet"
    pq = _pyarrow() if parquet else None
    with atomic_write(path) as tmp:
        if parquet:
            import pyarrow as pa

            table = pa.Table.from_pandas(df, preserve_index=False)
            # the streamed file's schema, so both ways of writing a sweep give one schema
            pq.write_table(table.cast(parquet_schema(table)), tmp)
            if progress:
                progress(len(df))
        else:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                for start in range(0, max(len(df), 1), WRITE_CHUNK_ROWS):
                    df.iloc[start:start + WRITE_CHUNK_ROWS].to_csv(
                        fh, index=False, header=start == 0)
                    if progress:
                        progress(min(start + WRITE_CHUNK_ROWS, len(df)))
    return path


def _plot(df, path: str, kind: str) -> None:
    from perfsim import plots

    # along the query length, or the key length where only that varies (decode sweeps)
    x = "seqlen_k" if df.seqlen_q.nunique() == 1 and df.seqlen_k.nunique() > 1 else "seqlen_q"
    if kind == "tflops":
        fig, _ = plots.tflops_vs_seqlen(df, x=x)
    else:
        fig, _ = plots.bottleneck_map(df, x=x)
    save_figure(fig, path, dpi=120)


def _summary(df, seconds: float) -> None:

    ok = df[df.infeasible == ""]
    rows = []
    # one line per GPU what-if too, where a sweep has several (MUFU x 0.5, x 1, x 2 were one
    # line: a fresh user's report)
    whatifs = "overrides" in df and df["overrides"].nunique() > 1
    keys = ["gpu", "algorithm", *(["overrides"] if whatifs else [])]
    for key, part in df.groupby(keys, observed=True, sort=False):
        gpu, algo = key[0], key[1]
        good = part[part.infeasible == ""]
        # (a column left out by --columns reads "-")
        tflops = len(good) and "tflops" in good
        bound = (good.bound.astype(str).value_counts() if "bound" in good
                 else {})
        rows.append([f"{gpu}", f"{algo}", *([str(key[2])] if whatifs else []),
                     str(len(part)), str(len(part) - len(good)),
                     tflops_text(good.tflops.median()) if tflops else "-",
                     tflops_text(good.tflops.max()) if tflops else "-",
                     ", ".join(f"{b} {n}" for b, n in bound.items() if n) or "-"])
    plural = "" if len(df) == 1 else "s"
    print_table(f"{len(df)} prediction{plural} ({len(df) - len(ok)} infeasible) in "
                f"{seconds:.2f} s",
                 ["gpu", "algorithm", *(["what-if"] if whatifs else []), "rows", "infeasible",
                  "median TFLOP/s", "max TFLOP/s", "bound (rows)"], rows)


#: ``register(subparsers)`` for the command line (:mod:`perfsim.cli`).
register = register_sweep
