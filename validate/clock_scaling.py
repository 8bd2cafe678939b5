"""Cycles per call at two SM clocks (``validate/probe_clock_scaling.sh``'s Nsight Compute
pages), beside perfsim's: whether a kernel's time is set on the SM side (its cycles stay
when the clock drops) or by something timed in nanoseconds (fewer cycles at the lower clock).
Not an attention timing: one launch profiled at the clock the GPU picks (``none``) and at the
base clock Nsight Compute locks (``base``).

Usage::

    python -m perfsim.validate.clock_scaling DIR [--gpu h100-sxm5] [--out FILE.md]

``DIR`` holds ``clk-CASE-{none,base}.csv``; CASE is ``probe_ncu.py``'s (modelled with its
preset at each profile's own clock, the power limit lifted: ``per_clock.unlimited``) or
``chain-COLS`` / ``chainl2-COLS`` (the load-chain microbenchmark from HBM / from L2, not
modelled as a call). Writes DIR/summary.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from perfsim.validate.ncu_summary import _num as _number

#: Nsight Compute's time units in its raw page.
TIME_UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3,
              "msecond": 1e-3, "s": 1.0, "second": 1.0}
METRICS = {"gmma_pct": "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
           "hmma_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
           "xu_pct": "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active",
           "dram_bytes": "dram__bytes.sum", "l2_bytes": "lts__t_bytes.sum"}


def main_kernel(path: Path) -> dict:
    """The longest kernel of one raw page: name, seconds, cycles, clock (Hz) and counters."""
    rows = list(csv.reader(path.open()))
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    names, units = rows[head], dict(zip(rows[head], rows[head + 1]))
    kernels = [dict(zip(names, r)) for r in rows[head + 2:] if len(r) == len(names)]
    if not kernels:
        raise ValueError(f"{path}: no kernel rows")
    best = max(kernels, key=lambda r: _number(r["gpu__time_duration.sum"]) or 0)
    seconds = (_number(best["gpu__time_duration.sum"])
               * TIME_UNITS[units["gpu__time_duration.sum"]])
    cycles = _number(best["sm__cycles_elapsed.avg"])
    out = {"kernel": best["Kernel Name"], "seconds": seconds, "cycles": cycles,
           "clock_hz": cycles / seconds}
    for key, metric in METRICS.items():
        out[key] = _number(best.get(metric, ""))
    return out


def modelled(case: str, gpu: str, clock_hz: float):
    """perfsim's main kernel for a ``probe_ncu.py`` case at ``clock_hz``: ``(seconds,
    bound)``, or ``None`` for a microbenchmark case."""
    if case.startswith("chain"):
        return None
    import perfsim
    from perfsim.validate.external_report import PRESETS
    from perfsim.validate.per_clock import unlimited
    from perfsim.validate.probe_ncu import NCU_IMPLS, parse_case

    c = parse_case(case)
    w = perfsim.AttentionWorkload(batch=c["batch"], heads=c["heads"], seqlen_q=c["seqlen"],
                                  head_dim=c["head_dim"], causal=c["causal"], dtype="bf16",
                                  phase=c["phase"], dropout_p=c["dropout_p"])
    p = perfsim.predict(w, gpu=unlimited(perfsim.load_gpu(gpu)),
                        algorithm=PRESETS[NCU_IMPLS[c["impl"]]], timing={"clock": clock_hz})
    main = max(p.kernels, key=lambda k: k.seconds)
    return main.seconds, str(main.bound)


def summarize(folder: Path, gpu: str) -> list[dict]:
    """One entry per case with both clocks' profiles: measured and modelled cycles."""
    pages: dict = {}
    for path in sorted(folder.glob("clk-*.csv")):
        case, control = path.stem[4:].rsplit("-", 1)
        pages.setdefault(case, {})[control] = main_kernel(path)
    out = []
    for case, got in pages.items():
        if not {"none", "base"} <= got.keys():
            continue
        entry = {"case": case, **{c: got[c] for c in ("none", "base")},
                 "measured_cycles_base_over_none": got["base"]["cycles"] / got["none"]["cycles"],
                 "clock_none_over_base": got["none"]["clock_hz"] / got["base"]["clock_hz"]}
        model = [modelled(case, gpu, got[c]["clock_hz"]) for c in ("none", "base")]
        if model[0] is not None:
            (t_none, b_none), (t_base, b_base) = model
            entry.update(
                model_cycles_base_over_none=(t_base * got["base"]["clock_hz"])
                / (t_none * got["none"]["clock_hz"]),
                model_error_none=t_none / got["none"]["seconds"] - 1,
                model_error_base=t_base / got["base"]["seconds"] - 1,
                model_bound_none=b_none, model_bound_base=b_base)
        out.append(entry)
    return out


def chain_fits(entries: list[dict]) -> list[dict]:
    """Least-squares ``cycles per step = latency + bytes / rate`` of the load chain at each
    clock, from HBM (``chain-COLS``) and from L2 (``chainl2-COLS``): one CTA on each of
    ``CHAIN_GRID`` SMs walks ``CHAIN_STEPS`` 64 x COLS fp32 tiles (load, add 1, store); the
    seconds and SM cycles of a step are the call's over ``CHAIN_STEPS``. Needs two tile sizes
    or more per source."""
    from perfsim.validate.microbench import CHAIN_STEPS

    fits = []
    for source, prefix in (("HBM", "chain-"), ("L2", "chainl2-")):
        got = [e for e in entries if e["case"].startswith(prefix)]
        if len(got) < 2:
            continue
        for control in ("none", "base"):
            xs = [64 * int(e["case"][len(prefix):]) * 4 for e in got]
            row = {"source": source, "control": control,
                   "clock_hz": sum(e[control]["clock_hz"] for e in got) / len(got),
                   "tile_bytes": xs}
            for unit in ("cycles", "seconds"):
                ys = [e[control][unit] / CHAIN_STEPS for e in got]
                slope, intercept = np.polyfit(xs, ys, 1)
                row[f"per_step_{unit}"] = ys
                row[f"latency_{unit}"] = float(intercept)
                row[f"bytes_per_{unit[:-1]}"] = float(1 / slope)
            fits.append(row)
    return fits


def chain_table(fits: list[dict]) -> str:
    """The fits of :func:`chain_fits` as a Markdown table (empty without any)."""
    if not fits:
        return ""
    lines = ["", "Load chain per step (least squares over the tile sizes): latency + bytes / rate",
             "", "| source | clock (MHz) | tiles (KiB) | cycles per step | latency (cycles) | "
             "bytes per cycle | latency (ns) | GB/s |", "|---|---|---|---|---|---|---|---|"]
    for f in fits:
        lines.append(
            f"| {f['source']} | {f['clock_hz'] / 1e6:.0f} | "
            f"{', '.join(f'{b / 1024:g}' for b in f['tile_bytes'])} | "
            f"{', '.join(f'{c:.0f}' for c in f['per_step_cycles'])} | "
            f"{f['latency_cycles']:.0f} | {f['bytes_per_cycle']:.2f} | "
            f"{f['latency_seconds'] * 1e9:.0f} | {f['bytes_per_second'] / 1e9:.1f} |")
    return "\n".join(lines) + "\n"


def table(entries: list[dict], gpu: str) -> str:
    lines = [f"# Cycles per call at two SM clocks — perfsim's {gpu}", "",
             "| case | clock none / base (MHz) | measured cycles base / none | perfsim's | "
             "perfsim error at none / base | perfsim's unit |", "|---|---|---|---|---|---|"]
    for e in entries:
        model = (f"{e['model_cycles_base_over_none']:.3f} | {e['model_error_none']:+.1%} / "
                 f"{e['model_error_base']:+.1%} | {e['model_bound_none']} / "
                 f"{e['model_bound_base']}" if "model_error_none" in e else "— | — | —")
        lines.append(f"| {e['case']} | {e['none']['clock_hz'] / 1e6:.0f} / "
                     f"{e['base']['clock_hz'] / 1e6:.0f} | "
                     f"{e['measured_cycles_base_over_none']:.3f} | {model} |")
    return "\n".join(lines).replace("%", " %") + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--gpu", default="h100-sxm5")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    if not folder.is_dir():
        print(f"clock_scaling: no folder {folder}", file=sys.stderr)
        return 2
    entries = summarize(folder, args.gpu)
    fits = chain_fits(entries)
    (folder / "summary.json").write_text(json.dumps(entries, indent=1) + "\n")
    if fits:
        (folder / "chain-fits.json").write_text(json.dumps(fits, indent=1) + "\n")
    text = table(entries, args.gpu) + chain_table(fits)
    if args.out:
        Path(args.out).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
