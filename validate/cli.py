"""``perfsim validate`` and ``perfsim calibrate``: :data:`COMMANDS` holds their ``register``
functions (``perfsim.cli`` adds them to the ``perfsim`` parser).

Run through the ``perfsim`` command line (``perfsim validate ...`` or ``python -m perfsim.cli
validate ...``).

Exit codes: 0 done (also a clean stop at ``--limit-seconds``: re-run to resume); 1 no CUDA GPU,
or the run stopped on an error that makes the CUDA context unusable (re-run to resume);
2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from perfsim.errors import PerfsimError
from perfsim.gpu_catalog import detect_gpu, load_gpu

EXIT_NO_GPU = 1
#: Profile for measuring runs and --dry-run when --gpu is not given.
DEFAULT_GPU = "h200-sxm"


def _names(values: list[str]) -> list[str]:
    return [n for v in values for n in v.replace(",", " ").split() if n and n != "none"]


def _no_gpu(command: str) -> int | None:
    from perfsim.validate.session import no_gpu_reason

    reason = no_gpu_reason()
    if reason is None:
        return None
    sys.stderr.write(f"perfsim {command}: no CUDA GPU found ({reason}); nothing was timed\n")
    return EXIT_NO_GPU


# ------------------------------------------------------------------ validate
def _interrupt_note(args) -> str:
    """What an interrupted ``perfsim validate`` keeps, for the CLI's one line: nothing for a
    dry run or a report (they write nothing, or their report whole), else the rows measured
    so far, which the same command resumes after."""
    if args.dry_run or args.report_only:
        return ""
    return (f": the rows measured so far are kept in {args.out} (each row is appended as "
            "it is measured); the same command resumes after them")


def register_validate(subparsers) -> None:
    """Add ``validate`` to an argparse subparsers object."""
    from perfsim.cli.common import int_arg
    from perfsim.validate.models import EXTERNAL_MODELS, OWN_ALGORITHMS
    from perfsim.validate.shapes import GRIDS

    p = subparsers.add_parser(
        "validate", help="time the attention kernels on this GPU and compare with perfsim",
        description="Measure the project's Triton kernels (and the PyTorch kernels users call) "
        "on a shape grid, compare each time with perfsim's prediction, append every result to "
        "OUT/results.jsonl (a re-run resumes) and write OUT/report.md, results.csv, "
        "scatter.png.")
    p.add_argument("--out", default="validate-results", metavar="DIR",
                   help="results folder (default: %(default)s)")
    p.add_argument("--gpu", default=None, metavar="FILE_OR_ID",
                   help=f"GPU profile for the predictions: catalog id or calibrated .toml "
                   f"(default: the GPU present, by NVML or torch; {DEFAULT_GPU} for --dry-run "
                   "and without a GPU; use the profile `perfsim calibrate` wrote; with "
                   "--report-only --repredict: the profile recorded in the rows)")
    p.add_argument("--algorithms", nargs="+", default=list(OWN_ALGORITHMS), metavar="NAME",
                   help=f"own kernels (comma or space separated; 'none' for none): "
                   f"{', '.join(OWN_ALGORITHMS)} (default: all)")
    p.add_argument("--grid", default="default", metavar="NAME",
                   help=f"shape grid: {', '.join(sorted(GRIDS))}, or a .json file "
                   "(default: %(default)s)")
    p.add_argument("--external", action=argparse.BooleanOptionalAction, default=True,
                   help="also time the kernels users call (default: on)")
    p.add_argument("--backends", nargs="+", default=list(EXTERNAL_MODELS), metavar="NAME",
                   help=f"external backends with --external: {', '.join(EXTERNAL_MODELS)}")
    p.add_argument("--phase", choices=("fwd", "bwd"), default="fwd",
                   help="time the forward or the backward of one saved forward "
                   "(default: %(default)s)")
    p.add_argument("--limit-seconds", type=_positive_seconds, metavar="S",
                   help="stop cleanly before this wall-clock budget (re-run to resume)")
    p.add_argument("--retry-errors", action="store_true",
                   help="measure again rows recorded with status 'error'")
    p.add_argument("--seed", type=int_arg, default=0, help="input seed offset (default 0)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the planned rows with their predictions; needs no GPU")
    p.add_argument("--json", action="store_true", help="with --dry-run: rows as JSON")
    p.add_argument("--report-only", metavar="DIR",
                   help="only regenerate DIR's report from DIR/results.jsonl, with the "
                   "predictions stored in its rows (made by the perfsim of the run; "
                   "--repredict: this perfsim's); needs no GPU")
    p.add_argument("--repredict", action="store_true",
                   help="with --report-only: recompute every prediction with this perfsim and "
                   "the profile recorded in the rows (or --gpu); the measurements are kept "
                   "as they are. Writes DIR/repredicted/ unless --force")
    p.add_argument("--force", action="store_true",
                   help="with --report-only: overwrite DIR's existing report.md, results.csv "
                   "and scatter.png (otherwise a new report goes to DIR/repredicted/ or "
                   "DIR/regenerated/)")
    p.set_defaults(func=cmd_validate, interrupt_note=_interrupt_note)


def _positive_seconds(text: str) -> float:
    """``--limit-seconds``: a decimal number of seconds > 0."""
    from perfsim.cli.common import float_arg

    seconds = float_arg(text)
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return seconds


def _no_gpu_quiet() -> bool:
    """Whether torch sees no CUDA GPU (the run will stop with _no_gpu's message)."""
    try:
        import torch

        return not torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch: the run stops anyway
        return True


def cmd_validate(args) -> int:
    from perfsim.validate import report
    from perfsim.validate.runner import RESULTS_FILE, ResultStore, plan
    from perfsim.validate.shapes import grid

    alone = [f for f, on in (("--repredict", args.repredict), ("--force", args.force)) if on]
    if alone and not args.report_only:
        raise PerfsimError(f"{' and '.join(alone)} only appl{'y' if len(alone) > 1 else 'ies'} "
                           "with --report-only DIR "
                           "(regenerating the report of an earlier run)")
    if args.report_only:
        from perfsim.validate.models import EXTERNAL_MODELS, OWN_ALGORITHMS

        # a measuring run's options would be ignored here: said, not dropped
        # (each compared with its default: a default given again changes nothing; a fresh
        # user's report: --algorithms fa9, --phase bwd, --out, --seed went by unnoticed)
        ignored = [flag for flag, on in (
            ("--dry-run", args.dry_run), ("--json", args.json),
            ("--grid", args.grid != "default"),
            ("--gpu (without --repredict)", args.gpu is not None and not args.repredict),
            ("--out", args.out != "validate-results"),
            ("--algorithms", list(args.algorithms) != list(OWN_ALGORITHMS)),
            ("--no-external", not args.external),
            ("--backends", list(args.backends) != list(EXTERNAL_MODELS)),
            ("--phase", args.phase != "fwd"),
            ("--limit-seconds", args.limit_seconds is not None),
            ("--retry-errors", args.retry_errors), ("--seed", args.seed != 0)) if on]
        if ignored:
            raise PerfsimError(f"{', '.join(ignored)}: not used with --report-only DIR, which "
                               "regenerates the report of an earlier run (--gpu chooses the "
                               "profile of --repredict)")
        return _report_only(Path(args.report_only), args.repredict, args.gpu, args.force)
    if args.json and not args.dry_run:
        raise PerfsimError("--json only applies with --dry-run (the planned rows as JSON); a "
                           "measuring run writes OUT/results.jsonl")
    # a measuring run predicts for the GPU it measures: the one present unless told; a dry
    # run (no GPU needed) plans for DEFAULT_GPU
    gpu = load_gpu(args.gpu or (DEFAULT_GPU if args.dry_run or _no_gpu_quiet() else "auto"))
    try:
        rows = plan(grid(args.grid, args.phase), _names(args.algorithms),
                    _names(args.backends) if args.external else [])
    except ValueError as exc:
        raise PerfsimError(str(exc)) from None
    if not rows:
        raise PerfsimError("nothing to run: no algorithms and no external backends selected")
    out = Path(args.out)
    store = ResultStore(out / RESULTS_FILE)
    if args.dry_run:
        return _dry_run(rows, gpu, store.load(), args.json)
    no_gpu = _no_gpu("validate")
    if no_gpu is not None:
        return no_gpu
    if not gpu.calibration:
        print(f"note: {gpu.id} is not a calibrated profile (datasheet rates); "
              "`perfsim calibrate` writes one")
    summary = _run(rows, gpu, store, args)
    paths = report.write_report(out)
    report.print_summary(report.load(out))
    print(f"{len(summary.measured)} rows measured now, {summary.skipped} already done, "
          f"{summary.remaining} left; report: {paths['md']}")
    if summary.stopped_for_time:
        print(f"stopped before the {args.limit_seconds:g} s limit; run the same command "
              "again to resume")
    if summary.aborted:
        sys.stderr.write(f"perfsim validate: stopped: {summary.aborted}; run again to "
                         "resume\n")
        return EXIT_NO_GPU
    return 0


def _run(rows, gpu, store, args):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from perfsim.validate.runner import pending, run
    from perfsim.validate.session import make_measure

    todo = len(pending(rows, store.load(), args.retry_errors))
    console = Console(stderr=True)
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("validate", total=todo)

        def on_record(i, total, rec):
            progress.advance(task)
            err = rec.get("error")
            progress.console.print(
                f"[{i}/{total}] {rec['algorithm']:14} {rec['key'].split('|')[0]:44} "
                f"{rec.get('status', '?'):11} meas {_ms(rec.get('measured_s'))} "
                f"pred {_ms(rec.get('predicted_s'))}"
                + (f" err {err:+.1%}" if err is not None else "")
                + (f"  {rec.get('reason', '')[:80]}" if rec.get("status") != "ok" else ""),
                highlight=False, markup=False)

        return run(rows, make_measure(gpu, args.seed), store,
                   limit_seconds=args.limit_seconds, retry_errors=args.retry_errors,
                   on_record=on_record)


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4g} ms"


def _report_only(out: Path, repredict_rows: bool = False, gpu_arg: str | None = None,
                 force: bool = False) -> int:
    """Regenerate the report of ``out`` from its results.jsonl.

    Never overwrites an existing report without ``force``: a re-predicted report goes to
    ``out/repredicted/``, a regenerated one to ``out/regenerated/`` (each replaced by the next
    such run, with a note on stderr: they are made from results.jsonl alone, so nothing is
    lost). ``--repredict`` uses the
    GPU profile recorded in the rows (``gpu_profile``) unless ``gpu_arg`` names one.
    """
    import datetime

    import perfsim
    from perfsim.validate import report
    from perfsim.validate.repredict import repredict
    from perfsim.validate.runner import RESULTS_FILE

    if not (out / RESULTS_FILE).is_file():
        raise PerfsimError(f"no {RESULTS_FILE} in {out}")
    records, problems = report.load_checked(out)
    if not records:
        from perfsim.validate.external_report import load_rows

        kinds = sorted({str(r["kind"]) for r in load_rows(out / RESULTS_FILE)
                        if r.get("kind")})
        hint = (" (rows of kind 'decode': score them with `python -m "
                f"perfsim.validate.decode_report {out} [--gpu ID]`)" if "decode" in kinds else
                (f" (rows of kind {', '.join(kinds)})" if kinds else ""))
        raise PerfsimError(f"{out / RESULTS_FILE} holds no row of a `perfsim validate` run"
                           + (f"{hint}; {len(problems)} line(s) skipped, e.g. {problems[0]}"
                              if problems else " (the file is empty)"))
    external = sorted({r["impl"] for r in records if isinstance(r.get("impl"), str)})
    if external:        # validate/external.py rows: the kernels users call, by preset
        raise PerfsimError(
            f"{out} holds rows of the kernels users call ({', '.join(external)}), measured by "
            f"validate/external.py; score them with `python -m perfsim.validate.external_report "
            f"{out} [--gpu ID]` (--report-only reports runs of `perfsim validate`)")
    note = ""
    gpu = None
    if repredict_rows:
        gpu_arg = gpu_arg or _recorded_profile(records, out)
        gpu = load_gpu(gpu_arg)
        other = _other_device(records, gpu)
        if other:
            print(f"note: the rows were measured on {other}; --repredict --gpu {gpu_arg} "
                  f"predicts them for {gpu.name}, another GPU", file=sys.stderr)
            note = (f"**The rows were measured on {other}; the predictions are for {gpu.name}, "
                    "another GPU.** ")
    dest = out
    if not force and any((out / name).exists()
                         for name in ("report.md", "results.csv", "scatter.png")):
        dest = out / ("repredicted" if gpu is not None else "regenerated")
        if (dest / "report.md").exists():
            # derived from results.jsonl alone, so replaced each time — and said so
            print(f"note: replacing the earlier report in {dest} (made from "
                  f"{RESULTS_FILE} by an earlier --report-only; --force writes to {out} "
                  "itself instead)", file=sys.stderr)
    if gpu is not None:
        records = repredict(records, gpu, problems, _lines(out))
        note += (f"Predictions recomputed with perfsim {perfsim.__version__} on "
                f"{datetime.date.today().isoformat()} (profile {gpu.id}) from the launch "
                "configurations recorded with the measurements; results.jsonl keeps the "
                "predictions the rows were measured with. Regenerate with `perfsim validate "
                f"--report-only {_shown(out)} --repredict --gpu {_shown(gpu_arg) or gpu.id}"
                f"{' --force' if dest == out else ''}` "
                "(paths relative to the directory this report was made from, the repository "
                "root for the committed reports); without --repredict the report uses the "
                "stored predictions.")
        if (out / "report-first-run.md").is_file():
            note += (" report-first-run.md is that report of the first run. The model changes "
                     "made after the first run, motivated by these measurements, are listed in "
                     "validate/README.md.")
        method = (gpu.calibration or {}).get("cta_overhead_method")
        if method and _fitted_on(out / RESULTS_FILE, method):
            note += "\n\n" + _holdout_note(records, gpu, method)
        elif method:
            note += (f"\n\nThe profile's one fitted parameter, `cta_overhead_s` = "
                     f"{float(gpu.calibration['cta_overhead_s']) * 1e6:.2f} µs, was {method}; "
                     "none of the rows here was used in that fit.")
    paths = report.write_report(out, records, note, dest=dest, problems=problems)
    report.print_summary(records)
    if problems:
        where = {p.split(":", 1)[0] for p in problems}
        print(f"{len(problems)} problem(s) on {len(where)} line(s) of {RESULTS_FILE}: rows "
              f"skipped or fields set to null (listed in {paths['md']}):")
        print("\n".join(f"  {p}" for p in problems[:20]))
    print("wrote " + ", ".join(str(p) for p in paths.values())
          + ("" if dest == out else f" (not over {out}'s report; --force to replace it)"))
    return 0


def _other_device(records: list[dict], gpu) -> str | None:
    """The measured device's name where it is not the GPU ``gpu`` describes, else ``None``:
    their model numbers (the words with a digit, split at spaces and hyphens, past memory
    sizes, SXM/PCIe form factors and HBM generations: ``H200``, ``A100``, ``4090``) share
    none."""
    def models(name: str) -> set:
        words = re.split(r"[\s\-_]+", name.upper())
        return {w for w in words if any(ch.isdigit() for ch in w) and not w.endswith("GB")
                and not w.startswith(("SXM", "PCIE", "HBM"))}

    spec = models(gpu.name)
    devices = {r["device"] for r in records if isinstance(r.get("device"), str)}
    for device in sorted(devices):
        measured = models(device)
        if measured and spec and not measured & spec:
            return device
    return None


def _lines(out: Path) -> dict[str, int]:
    """key -> line number of ``out``'s results.jsonl (for the problems --repredict lists)."""
    from perfsim.validate.runner import RESULTS_FILE, ResultStore

    store = ResultStore(out / RESULTS_FILE)
    store.load()
    return store.lines


def _recorded_profile(records: list[dict], out: Path) -> str:
    """The GPU profile the rows were predicted with (their ``gpu_profile``), as a catalog id
    or a .toml path: the catalog, then ``validate/profiles/``, then the run folder."""
    from perfsim.gpu_catalog import gpus

    ids = sorted({r["gpu_profile"] for r in records if isinstance(r.get("gpu_profile"), str)})
    if len(ids) != 1:
        raise PerfsimError(f"--repredict: the rows record {len(ids)} GPU profiles "
                           f"({', '.join(ids) or 'none'}); name one with --gpu")
    name = ids[0]
    if name in gpus():
        return name
    for folder in (Path(__file__).parent / "profiles", out):
        if (folder / f"{name}.toml").is_file():
            return str(folder / f"{name}.toml")
    raise PerfsimError(f"--repredict: the rows were predicted with GPU profile {name!r}, "
                       f"which is neither a catalog id nor a .toml in validate/profiles/ or "
                       f"{out}; name it with --gpu")


def _shown(path) -> str:
    """``path`` relative to the working directory when it lies below it, else as given."""
    import os

    if not path:
        return ""
    p = Path(path)
    if not p.exists():
        return str(path)
    rel = os.path.relpath(p.resolve(), Path.cwd())
    return Path(rel).as_posix() if not rel.startswith("..") else p.resolve().as_posix()


def _fitted_on(results: Path, method: str) -> bool:
    """Whether the fit ``method`` names this results file (the fit records it relative to the
    repository root, e.g. ``validate/reports/h200/results.jsonl``)."""
    import filecmp
    import re

    named = re.findall(r"\S*results\.jsonl", method)
    here = results.resolve().as_posix()
    if any(here == n or here.endswith("/" + n.lstrip("./")) for n in named):
        return True
    # a copy elsewhere holds the same rows: compared by content, not by its path
    root = Path(__file__).resolve().parent.parent
    for n in named:
        fitted = root / n.lstrip("./")
        try:
            if fitted.is_file() and filecmp.cmp(fitted, results, shallow=False):
                return True
        except OSError:
            continue
    return False


def _holdout_note(records, gpu, method: str) -> str:
    """The fitted parameter, how it was fitted, and the error on each half of the shapes."""
    import statistics

    from perfsim.validate.fit_overhead import split

    fit_keys, _ = split([r for r in records if r.get("status") == "ok"])
    halves: dict = {}
    for r in records:
        if r.get("status") == "ok" and r.get("error") is not None:
            half = "fit" if r["key"].split("|")[0] in fit_keys else "hold-out"
            name = f"{r['algorithm']} {r.get('phase', 'fwd')}"
            halves.setdefault(name, {}).setdefault(half, []).append(abs(r["error"]))
    rows = [f"| {k} | {statistics.median(v['fit']):.1%} | {statistics.median(v['hold-out']):.1%} |"
            for k, v in sorted(halves.items()) if "fit" in v and "hold-out" in v]
    c = float(gpu.calibration["cta_overhead_s"])
    return "\n".join([
        f"**One fitted parameter.** `cta_overhead_s` = {c * 1e6:.2f} µs per wave of CTAs of a "
        f"tiled attention kernel: {method}. Median |error| on each half:", "",
        "| kernel | fit half | hold-out half |", "|---|---|---|", *rows])


def _dry_run(rows, gpu, done: dict, as_json: bool) -> int:
    from perfsim.validate.models import planned_prediction

    listing = []
    for i, row in enumerate(rows, 1):
        pred = planned_prediction(row.shape, row.algorithm, row.kind, gpu)
        listing.append({"index": i, "key": row.key, "shape": row.shape.describe(),
                        "algorithm": row.algorithm, "kind": row.kind,
                        "model": pred.get("model"), "predicted_s": pred.get("predicted_s"),
                        "predicted_bound": pred.get("predicted_bound"),
                        "prediction_error": pred.get("prediction_error"),
                        "state": done[row.key].get("status", "done") if row.key in done
                        else "planned"})
    if as_json:
        print(json.dumps(listing, indent=1))
        return 0
    from perfsim.cli.common import print_table

    print_table(f"validation plan ({gpu.id})",
                ["#", "shape", "algorithm", "state", "model", "predicted"],
                [[str(r["index"]), r["shape"], r["algorithm"], r["state"], str(r["model"]),
                  _ms(r["predicted_s"]) if r["predicted_s"] else f"- ({r['prediction_error']})"]
                 for r in listing])
    planned = sum(r["state"] == "planned" for r in listing)
    total = sum(r["predicted_s"] or 0 for r in listing if r["state"] == "planned")
    print(f"{len(listing)} rows: {planned} planned, {len(listing) - planned} already in the "
          f"results; predicted kernel time of one call each: {total:.3f} s (profile {gpu.id})")
    return 0


# ------------------------------------------------------------------ calibrate
def register_calibrate(subparsers) -> None:
    """Add ``calibrate`` to an argparse subparsers object."""
    p = subparsers.add_parser(
        "calibrate", help="measure this GPU's ceilings and write a calibrated profile",
        description="Run microbenchmarks (HBM copy, matmul per dtype, exp2, FMA, launch "
        "overhead) and write a GPU profile TOML that `perfsim predict --gpu FILE` accepts.")
    p.add_argument("--out", required=True, metavar="FILE", help="profile to write (.toml)")
    p.add_argument("--base", default="auto", metavar="ID_OR_FILE",
                   help="catalog spec to start from (default: auto, the catalog entry of the "
                   "GPU present)")
    p.add_argument("--json", action="store_true", help="print the measurements as JSON")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from perfsim.files import check_output
    from perfsim.validate.calibrate import FIELDS, calibrate

    # a path that cannot be written is bad input, found before a GPU's worth of measurements
    check_output(args.out, (".toml",), "calibrate --out")
    if args.base != "auto":
        base = load_gpu(args.base)          # a bad id is a bad-input error, GPU or not
    no_gpu = _no_gpu("calibrate")
    if no_gpu is not None:
        return no_gpu
    if args.base == "auto":
        args.base = detect_gpu()
        base = load_gpu(args.base)

    def show(m):
        if not args.json:      # progress, one line per microbenchmark as it finishes
            value = "not measured" if m.value is None else f"{m.value:.4g} {m.unit}"
            print(f"{m.name}: {value} ({m.method[:150]})", flush=True)

    path, measurements, data = calibrate(args.out, args.base, on_result=show)
    if args.json:
        print(json.dumps([m.__dict__ for m in measurements], indent=1, default=str))
        return 0
    rows = []
    for m in measurements:
        if m.value is None or m.name not in FIELDS:
            continue
        fld, key, _ = FIELDS[m.name]
        old = getattr(base, fld) if key is None else getattr(base, fld).get(key)
        new = data[fld] if key is None else data[fld][key]
        rows.append([fld + (f".{key}" if key else ""), f"{old or 0:.4g}", f"{new:.4g}",
                     f"{new / old:.3f}" if old else "-"])
    from perfsim.cli.common import print_table

    print_table(f"{base.id} -> calibrated", ["field", "base", "calibrated", "ratio"], rows)
    print(f"launch_overhead_s = {data['calibration'].get('launch_overhead_s', 'not measured')}")
    print(f"wrote {path}")
    return 0


COMMANDS = [register_validate, register_calibrate]
