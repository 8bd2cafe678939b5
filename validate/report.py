"""The validation report, regenerated from ``results.jsonl`` alone (no GPU needed).

Writes into the results folder:

* ``report.md`` — error per kernel and phase (count, median and max |predicted − measured| /
  measured), rank agreement per shape, the main cause of each kernel's remaining error
  (computed, see :mod:`perfsim.validate.analysis`), rows that did not run and why, and a
  per-shape table with achieved TFLOP/s and GB/s beside every time;
* ``results.csv`` — one row per record (nested fields as JSON);
* ``scatter.png`` — predicted vs measured, log-log, one colour per kernel/backend.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from collections import Counter
from pathlib import Path

from perfsim.errors import PerfsimError
from perfsim.files import atomic_write, signals_deferred
from perfsim.validate import analysis
from perfsim.validate.runner import RESULTS_FILE, ResultStore

CSV_FIELDS = ("key", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
              "causal", "dtype", "phase", "algorithm", "kind", "model_name", "model",
              "status", "reason", "predicted_s", "predicted_bound", "predicted_tflops",
              "measured_s", "measured_p20_s", "measured_p80_s", "error", "achieved_tflops",
              "achieved_gbps", "model_flops", "hbm_bytes", "correctness_rel_error",
              "correctness_tolerance", "tensor_family_source", "gpu_profile", "device",
              "wall_s", "finished_at", "prediction_error", "launch_config",
              "predicted_unit_s", "compiled", "correctness_checked")


METHOD_NOTE = (
    "Error = (predicted − measured) / measured; measured = `triton.testing.do_bench` median "
    "(L2 flushed before each call). Correctness was checked against a float64 reference before "
    "timing (see `correctness_checked` in results.csv). The profile's rates come from "
    "microbenchmarks; a parameter taken from attention timings, if any, is named above with "
    "its error on the shapes it was not fitted on.")


#: Shape fields a record needs to be placed in the report (integers >= 1).
REQUIRED_INTS = ("batch", "heads", "seqlen_q", "head_dim")
OPTIONAL_INTS = ("kv_heads", "seqlen_k")
#: Numeric fields: null or a finite number (times in :data:`TIME_RANGE`; sizes, rates and
#: wall times ≥ 0).
NUMBER_FIELDS = ("measured_s", "measured_p20_s", "measured_p80_s", "predicted_s", "error",
                 "predicted_tflops", "achieved_tflops", "achieved_gbps", "model_flops",
                 "hbm_bytes", "wall_s")
POSITIVE_FIELDS = ("measured_s", "measured_p20_s", "measured_p80_s", "predicted_s")
NONNEGATIVE_FIELDS = ("predicted_tflops", "achieved_tflops", "achieved_gbps", "model_flops",
                      "hbm_bytes", "wall_s")
#: Fields computed from ``measured_s``: null when it is (a damaged time leaves no error).
FROM_MEASURED = ("error", "achieved_tflops", "achieved_gbps")
#: Units a row's ``predicted_unit_s`` may name (``Prediction.unit_seconds``).
UNIT_NAMES = ("tensor", "fp32", "mufu", "smem", "hbm", "latency")
#: Plausible times, seconds (1 ps to 11.6 days for one call): beyond them a "time" is damage,
#: and a log-scale plot of it overflows.
TIME_RANGE = (1e-12, 1e6)
#: Text fields that, when present, must be strings with a meaning: a record whose status,
#: phase, kind, device, ... is null or a number cannot be counted or placed (skipped).
REQUIRED_TEXT = ("status", "phase", "dtype", "kind", "device", "finished_at", "gpu_profile")
#: Allowed values of some of them.
TEXT_VALUES = {"phase": ("fwd", "bwd", "fwd_bwd"), "kind": ("own", "external")}
#: Text fields that may be null: another type becomes null (listed).
OPTIONAL_TEXT = ("reason", "model", "model_name", "predicted_bound", "prediction_error",
                 "tensor_family_source", "correctness_checked")
#: Object fields that may be null: another type becomes null (listed).
TABLE_FIELDS = ("launch_config", "compiled", "predicted_unit_s")


def load(out_dir: str | Path) -> list[dict]:
    """Checked records of ``out_dir/results.jsonl`` in file order (:func:`load_checked`)."""
    return load_checked(out_dir)[0]


def load_checked(out_dir: str | Path) -> tuple[list[dict], list[str]]:
    """Records of ``out_dir/results.jsonl`` in file order (the last per key, see
    :class:`~perfsim.validate.runner.ResultStore`) and one line per line of the file that was
    skipped or replaced, or whose record was corrected (:func:`check_records`)."""
    store = ResultStore(Path(out_dir) / RESULTS_FILE)
    records = store.load()
    kept, problems = check_records(records.values(), store.lines)
    return kept, store.problems + problems


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _finite(v) -> bool:
    """A number (not a bool) that is finite as a float: an integer beyond a float's range
    (``10**400`` in JSON) is not."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _is_number(v, positive: bool, nonnegative: bool = False) -> bool:
    return (_finite(v) and (not positive or TIME_RANGE[0] <= v <= TIME_RANGE[1])
            and (not nonnegative or v >= 0))


def _allowed(field: str) -> str:
    """What ``field`` of a record may hold, as a problem line names it."""
    if field in POSITIVE_FIELDS:
        return f"a time of {TIME_RANGE[0]:g} to {TIME_RANGE[1]:g} s"
    if field in NONNEGATIVE_FIELDS:
        return "a finite number ≥ 0"
    if field in NUMBER_FIELDS:
        return "a finite number"
    if field == "predicted_unit_s":
        return (f"an object of unit ({', '.join(UNIT_NAMES)}) to seconds from 0 to "
                f"{TIME_RANGE[1]:g}")
    if field in TABLE_FIELDS:
        return "an object"
    return "text"


def _bad_entries(field: str, value) -> list[str] | None:
    """Why a :data:`TABLE_FIELDS` value is unusable, or None if it is not: not an object, or
    for ``predicted_unit_s`` the entries that are not a known unit's seconds from 0 to
    ``TIME_RANGE[1]`` (a NaN there reached results.csv and the per-unit columns unflagged),
    each shown, not the object cut short."""
    if not isinstance(value, dict):
        return [f"{value!r:.30}"]
    if field != "predicted_unit_s":
        return None
    bad = [f"[{unit!r:.20}]={t!r:.24}" for unit, t in value.items()
           if unit not in UNIT_NAMES or not _finite(t) or not 0 <= t <= TIME_RANGE[1]]
    return bad or None


def _bad_text(rec: dict) -> list[str]:
    """The :data:`REQUIRED_TEXT` fields of ``rec`` that are present but not usable."""
    bad = []
    for f in REQUIRED_TEXT:
        if f in rec and (not isinstance(rec[f], str)
                         or rec[f] not in TEXT_VALUES.get(f, (rec[f],))):
            bad.append(f)
    return bad


def check_records(records, lines: dict | None = None) -> tuple[list[dict], list[str]]:
    """Records the report can use, and one line per record skipped or corrected.

    A record without its shape (``batch``, ``heads``, ``seqlen_q``, ``head_dim`` integers
    ≥ 1, ``algorithm`` a string), or with a :data:`REQUIRED_TEXT` field (``status``,
    ``phase``, ``device``, ...) that is present but not a string (or not an allowed value), is
    skipped. A numeric field that is not a finite number (``"abc"``, NaN, ∞; a time outside
    :data:`TIME_RANGE`), an :data:`OPTIONAL_TEXT` field that is not a string and a
    :data:`TABLE_FIELDS` field that is not an object (for ``predicted_unit_s``, one with an
    entry that is not a known unit's seconds from 0 to ``TIME_RANGE[1]``) become null, each
    problem line naming what the field allows, and with a damaged ``measured_s`` the fields
    computed from it (:data:`FROM_MEASURED`); a measured row (``ok``)
    whose ``measured_s`` is so corrected gets status ``invalid`` and is not compared.
    """
    lines = lines or {}
    kept, problems = [], []
    for rec in records:
        key = rec.get("key")
        where = f"line {lines[key]}" if key in lines else "record"
        where += f" ({key!r})"
        bad = [f for f in REQUIRED_INTS if not _is_int(rec.get(f))]
        bad += [f for f in OPTIONAL_INTS if rec.get(f) is not None and not _is_int(rec[f])]
        if not isinstance(rec.get("algorithm"), str):
            bad.append("algorithm")
        if rec.get("causal") is not None and not isinstance(rec["causal"], bool):
            bad.append("causal")
        if rec.get("dropout_p") is not None and not (_finite(rec["dropout_p"])
                                                     and 0 <= rec["dropout_p"] < 1):
            bad.append("dropout_p")             # part of the shape: a probability in [0, 1)
        bad += _bad_text(rec)
        if bad:
            shown = ", ".join(f"{f}={rec.get(f)!r:.30}" for f in bad)
            problems.append(f"{where}: missing or invalid {shown}; skipped")
            continue
        # field -> how the problem line shows it: ``f=value`` or its bad entries
        fixed = {}
        for f in NUMBER_FIELDS:
            v = rec.get(f)
            if v is not None and not _is_number(v, f in POSITIVE_FIELDS,
                                                f in NONNEGATIVE_FIELDS):
                fixed[f] = f"{f}={v!r:.30}"
        fixed.update({f: f"{f}={rec[f]!r:.30}" for f in OPTIONAL_TEXT
                      if rec.get(f) is not None and not isinstance(rec[f], str)})
        for f in TABLE_FIELDS:
            bad = _bad_entries(f, rec[f]) if rec.get(f) is not None else None
            if bad:
                fixed[f] = ", ".join(f"{f}{b}" if isinstance(rec[f], dict) else f"{f}={b}"
                                     for b in bad)
        # what was computed from a damaged time goes with it
        derived = ([f for f in FROM_MEASURED if rec.get(f) is not None and f not in fixed]
                   if "measured_s" in fixed else [])
        if fixed:
            text = ", ".join(f"{shown} ({_allowed(f)} allowed)" for f, shown in fixed.items())
            measured = rec.get("measured_s")
            rec = {**rec, **dict.fromkeys([*fixed, *derived])}
            if rec.get("status") == "ok" and "measured_s" in fixed:
                rec["status"] = "invalid"
                rec["reason"] = f"measured_s {measured!r:.30} is not a time"
                also = (f", with {', '.join(derived)} computed from it" if derived else "")
                problems.append(f"{where}: {text} not valid; set to null{also}, status "
                                "'invalid' (not compared)")
            else:
                problems.append(f"{where}: {text} not valid; set to null")
        kept.append(rec)
    return kept, problems


def write_csv(records, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for r in records:
            writer.writerow({k: json.dumps(v) if isinstance(v, dict | list) else v
                             for k, v in r.items()})


def save_png(fig, path, dpi: int, **savefig_kwargs) -> None:
    """Write ``fig`` to ``path`` as an 8-bit palette PNG (Pillow's 256-colour quantisation
    of matplotlib's RGBA render, then Pillow's ``optimize``). The report's scatter plots
    have a few dozen distinct colours, so the image looks the same at about a third of the
    RGBA file's bytes (130 → 44 kB); the committed reports are many, and every device run
    carries the whole working tree under a size limit."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=dpi, format="png", **savefig_kwargs)
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(256).save(path, format="PNG", optimize=True)


def scatter(records):
    """Predicted vs measured seconds, log-log, one colour per kernel/backend, with the
    ±:data:`~perfsim.validate.analysis.TARGET_ABS_ERROR` band (``perfsim.plots``); returns
    ``(fig, ax)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from perfsim import plots

    rows = analysis.compared(records)
    if not rows:
        fig, ax = plt.subplots(figsize=(5.5, 5))
        ax.text(0.5, 0.5, "no compared rows yet", ha="center", va="center")
        return fig, ax
    df = pd.DataFrame({"kernel": [analysis.label(r) for r in rows],
                       "predicted_s": [r["predicted_s"] for r in rows],
                       "measured_s": [r["measured_s"] for r in rows]})
    return plots.predicted_vs_measured(df, hue="kernel", band=analysis.TARGET_ABS_ERROR)


def _ms(seconds) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.4g}"


def _pct(x) -> str:
    return "–" if x is None else f"{x:+.1%}"


def _num(x, fmt=".1f") -> str:
    return "–" if x is None else format(x, fmt)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]


def error_table(records) -> list[str]:
    rows = []
    for s in analysis.error_stats(records):
        other = ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items()) if k != "ok")
        rows.append([s["group"], s["phase"], str(s["compared"]),
                     _pct(s.get("median_abs")).lstrip("+"), _pct(s.get("max_abs")).lstrip("+"),
                     _pct(s.get("median_signed")),
                     f"{s['within_target']}/{s['compared']}" if s["compared"] else "–",
                     other or "–"])
    return _table(["kernel", "phase", "n compared", "median abs err", "max abs err",
                   "median signed err", f"within ±{analysis.TARGET_ABS_ERROR:.0%}",
                   "not compared"], rows)


def markdown(records, note: str = "", problems: list[str] | tuple = ()) -> str:
    """The report text (``note``: a paragraph under the title; ``problems``: lines of
    results.jsonl skipped or replaced, listed in their own section)."""
    records = list(records)
    devices = sorted({r.get("device", "?") for r in records})
    profiles = sorted({r.get("gpu_profile", "?") for r in records})
    when = sorted(r["finished_at"] for r in records if r.get("finished_at"))
    lines = ["# perfsim validation report", "",
             f"Device: {', '.join(devices)}; GPU profile used for predictions: "
             f"{', '.join(profiles)}; {len(records)} rows"
             + (f", measured {when[0]} to {when[-1]}." if when else "."),
             f"Statuses: {dict(Counter(r.get('status', '?') for r in records))}.", "",
             *([note, ""] if note else []),
             METHOD_NOTE, "", "## Error per kernel", ""]
    lines += error_table(records)
    ra = analysis.rank_agreement(records)
    lines += ["", "## Rank agreement (own kernels)", ""]
    if ra["n_shapes"]:
        lines.append(f"The model's fastest kernel is the measured fastest on "
                     f"{ra['fraction_fastest']:.0%} of {ra['n_shapes']} shapes; mean Kendall "
                     f"tau {_num(ra['mean_tau'], '.2f')}.")
        lines += [""] + _table(
            ["shape", "predicted order", "measured order", "fastest agrees", "Kendall tau"],
            [[_shape(s["row"]), " < ".join(s["predicted_order"]),
              " < ".join(s["measured_order"]), "yes" if s["fastest_match"] else "no",
              _num(s["tau"], ".2f")] for s in ra["shapes"]])
    else:
        lines.append("No shape has two or more compared own kernels yet.")
    lines += ["", "## Main cause of the remaining error", "",
              "Computed from the data (the error's split by sequence length, mask and the "
              "model's binding unit): leads for the next model change, not verified causes.", ""]
    lines += [f"- **{g}**: {text}" for g, text in analysis.causes(records).items()] or ["–"]
    failed = [r for r in records if r.get("status") != "ok"]
    lines += ["", "## Rows not compared", ""]
    reasons = Counter((r["algorithm"], r.get("status"), (r.get("reason") or "")[:160])
                      for r in failed)
    lines += _table(["kernel", "status", "reason", "rows"],
                    [[a, s, why, str(n)] for (a, s, why), n in sorted(reasons.items())]) \
        if failed else ["None."]
    if problems:
        lines += ["", "## Lines of results.jsonl skipped or replaced", "",
                  f"{len(problems)} line(s); every other row is in this report.", ""]
        lines += [f"- {p}" for p in problems]
    lines += ["", "## Per shape", ""]
    lines += _table(["shape", "kernel", "model", "predicted ms", "measured ms (p20–p80)",
                     "error", "TFLOP/s", "GB/s", "bound", "status"],
                    [[_shape(r), r["algorithm"], r.get("model") or "–", _ms(r.get("predicted_s")),
                      f"{_ms(r.get('measured_s'))} ({_ms(r.get('measured_p20_s'))}–"
                      f"{_ms(r.get('measured_p80_s'))})" if r.get("measured_s") else "–",
                      _pct(analysis.rel_error(r)) if analysis.is_compared(r) else "–",
                      _num(r.get("achieved_tflops")), _num(r.get("achieved_gbps"), ".0f"),
                      r.get("predicted_bound") or "–", r.get("status", "?")]
                     for r in records])
    return "\n".join(lines) + "\n"


def _shape(r: dict) -> str:
    gqa = f"/{r.get('kv_heads')}" if r.get("kv_heads", r.get("heads")) != r.get("heads") else ""
    return (f"B={r.get('batch')} H={r.get('heads')}{gqa} N={r.get('seqlen_q')} "
            f"d={r.get('head_dim')}{' causal' if r.get('causal') else ''} "
            f"{r.get('phase', 'fwd')}")


def write_report(out_dir: str | Path, records: list[dict] | None = None,
                 note: str = "", dest: str | Path | None = None,
                 problems: list[str] | None = None) -> dict[str, Path]:
    """Write report.md, results.csv and scatter.png from ``out_dir/results.jsonl`` (or from
    ``records``, e.g. re-predicted ones), with ``note`` under the title, into ``dest``
    (default ``out_dir``). The three are written to temporary files and renamed together
    with SIGINT and SIGTERM held, so an interrupted write leaves the previous report whole."""
    out_dir = Path(out_dir)
    if records is None:
        records, found = load_checked(out_dir)
        problems = found if problems is None else problems
    dest = Path(dest) if dest is not None else out_dir
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PerfsimError(f"cannot create report folder {str(dest)!r}: "
                           f"{exc.strerror or type(exc).__name__}") from None
    paths = {"md": dest / "report.md", "csv": dest / "results.csv",
             "png": dest / "scatter.png"}
    import matplotlib.pyplot as plt

    # the three files are one report: each written to its temporary file first, then the
    # three renamed with SIGINT and SIGTERM held, so an interrupt leaves the old report or
    # the new one, never a mix (a fresh user's break attempt found report.md and
    # results.csv new beside the old scatter.png after a Ctrl-C)
    with contextlib.ExitStack() as stack:
        tmps = {key: stack.enter_context(atomic_write(path)) for key, path in paths.items()}
        tmps["md"].write_text(markdown(records, note, problems or ()), encoding="utf-8")
        write_csv(records, tmps["csv"])
        fig, _ = scatter(records)
        try:
            save_png(fig, tmps["png"], dpi=120, bbox_inches="tight")
        finally:
            plt.close(fig)
        renames = stack.pop_all()
    with signals_deferred():
        renames.close()
    return paths


SUMMARY_COLUMNS = ["kernel", "phase", "n", "med |err|", "max |err|", "bias", "statuses"]


def summary_rows(records) -> list[list[str]]:
    """Rows of the short summary table (:data:`SUMMARY_COLUMNS`; per kernel and phase: rows
    compared, median and max |error|, median signed error, and the statuses of rows without
    a comparison)."""
    rows = []
    for s in analysis.error_stats(records):
        if not s["compared"]:
            rows.append([s["group"], s["phase"], "0", "", "", "", str(s["statuses"])])
            continue
        rows.append([s["group"], s["phase"], str(s["compared"]), f"{s['median_abs']:.1%}",
                     f"{s['max_abs']:.1%}", f"{s['median_signed']:+.1%}", ""])
    return rows


def print_summary(records, title: str = "perfsim vs measured") -> None:
    """Print the summary table with rich (``perfsim.cli.common.print_table``)."""
    from perfsim.cli.common import print_table

    print_table(title, SUMMARY_COLUMNS, summary_rows(records))
