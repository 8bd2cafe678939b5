"""Fit the one timing parameter perfsim takes from attention timings, with a hold-out.

``TimingParams.cta_overhead_s`` is the fixed time a wave of a tiled attention kernel's CTAs
spends outside the steady-state loop (loading Q and the first K/V tile, filling the pipeline,
normalising and storing O). No microbenchmark isolates it, so it is fitted — as issue 4 allows
— on one half of the measured shapes and reported on the other half:

* fit set: the project's FA2 Triton kernel (``fa2``), forward, on the shapes at even
  positions of the sorted list of shapes (both masks); hold-out: every other row.
* model: ``predicted(c) = predicted(0) + waves · c`` (waves of resident CTAs, per kernel);
  ``c`` minimises the squared relative error on the fit set (closed form).

``python -m perfsim.validate.fit_overhead RESULTS_DIR PROFILE.toml`` prints the fit and the
split errors and writes ``cta_overhead_s`` (with the method) into the profile's
``[calibration]`` table.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from perfsim.gpu_catalog import load_gpu
from perfsim.validate import report
from perfsim.validate.repredict import repredict
from perfsim.validate.tomlwrite import dumps, write_atomic

FIT_KERNEL = "fa2"
PROBE_S = 1e-6


def _with_overhead(gpu, seconds: float):
    cal = dict(gpu.calibration or {})
    cal["cta_overhead_s"] = repr(seconds)
    return gpu.replace(calibration=cal)


def _base(key: str) -> str:
    """A shape key without its mask, so that both masks of a shape fall in one half."""
    return key.split("|")[0].replace("_causal_", "_").replace("_full_", "_")


def split(records: list[dict]) -> tuple[set, set]:
    """Shape keys of the fit half (shapes at even positions of the sorted list of shapes,
    both masks) and of the hold-out half."""
    bases = sorted({_base(r["key"]) for r in records})
    fit_bases = set(bases[0::2])
    keys = {r["key"].split("|")[0] for r in records}
    fit_keys = {k for k in keys if _base(k) in fit_bases}
    return fit_keys, keys - fit_keys


def fit(records: list[dict], gpu) -> tuple[float, dict]:
    """``(c, stats)``: the fitted overhead (s) and median |error| per kernel on each half."""
    ok = [r for r in records if r.get("status") == "ok"]
    base = {r["key"]: r for r in repredict(ok, _with_overhead(gpu, 0.0))}
    probe = {r["key"]: r for r in repredict(ok, _with_overhead(gpu, PROBE_S))}
    fit_keys, _ = split(ok)
    num = den = 0.0
    for key, r in base.items():
        if (r["algorithm"] != FIT_KERNEL or r.get("phase") != "fwd"
                or key.split("|")[0] not in fit_keys):
            continue
        m, p0 = r["measured_s"], r["predicted_s"]
        waves = (probe[key]["predicted_s"] - p0) / PROBE_S
        num += (waves / m) * (m - p0) / m
        den += (waves / m) ** 2
    c = max(num / den, 0.0) if den else 0.0
    fitted = repredict(ok, _with_overhead(gpu, c))
    stats: dict = {}
    for r in fitted:
        half = "fit" if r["key"].split("|")[0] in fit_keys else "hold-out"
        if r.get("error") is not None:
            name = f"{r['algorithm']} {r.get('phase', 'fwd')}"
            stats.setdefault(name, {}).setdefault(half, []).append(abs(r["error"]))
    return c, {k: {h: statistics.median(v) for h, v in halves.items()}
               for k, halves in stats.items()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    results_dir, profile = Path(argv[0]), Path(argv[1])
    gpu = load_gpu(str(profile))
    c, stats = fit(report.load(results_dir), gpu)
    print(f"cta_overhead_s = {c * 1e6:.3f} us (fit on {FIT_KERNEL}, even shapes)")
    from perfsim.cli.common import print_table

    def pct(x):
        return "-" if x is None else f"{x:.1%}"
    print_table("median |error| by half", ["kernel", "fit", "hold-out"],
                [[name, pct(h.get("fit")), pct(h.get("hold-out"))]
                 for name, h in sorted(stats.items())])
    cal = dict(gpu.calibration or {})
    cal["cta_overhead_s"] = repr(c)
    cal["cta_overhead_method"] = (
        f"fitted by perfsim.validate.fit_overhead on the forward {FIT_KERNEL} rows of the "
        "even-positioned shapes (both masks) of validate/reports/h200/results.jsonl (least "
        "squares on relative error); every other row is held out and reported in report.md")
    header = "".join(line + "\n" for line in profile.read_text().splitlines()
                     if line.startswith("#"))
    write_atomic(profile, header + "\n" + dumps(gpu.replace(calibration=cal).model_dump()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
