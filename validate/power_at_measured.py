"""The power model alone, on measured attention rows: the model's board power for each call
evaluated at the **measured** SM clock and over the **measured** time, against NVML's power.

The report's clock error mixes two models: the timing model (how long the call takes at a
clock) and the power model (what the call's work costs in energy). Here the timing model is
left out: the energies ``perfsim.power.call_energy_j`` counts for the call (tensor FLOPs, FP32
slots, ALU, MUFU, HBM and L2 bytes) are spread over the measured seconds at the measured tick
clock (NVML's clock x ``external_report.TENSOR_TICK_OVER_NVML`` for tensor-core calls), as
``perfsim.power.power_w`` does. A call whose model power sits above NVML's is charged too much
energy for its work; below, too little.

    python -m perfsim.validate.power_at_measured validate/reports/h200-external/results.jsonl \
        [--gpu h200-sxm] [--min-seconds 3e-4] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from perfsim.power import MEMORY_TERMS, PICO, SM_TERMS, energy_terms_pj

#: Terms of the table, in order (``fp32`` holds the ALU pipe's instructions too).
TERMS = SM_TERMS + MEMORY_TERMS


def power_terms(gpu, costs, seconds: float, clock_hz: float) -> dict:
    """Watts per term (:data:`TERMS`: the energies ``perfsim.power.energy_terms_pj`` counts,
    the SM-side ones scaled to ``clock_hz``) and
    ``"static"`` of ``costs`` lasting ``seconds`` at SM clock ``clock_hz``."""
    p = gpu.power
    scale = (clock_hz / p.reference_clock_hz) ** p.voltage_exponent
    out = dict.fromkeys(TERMS, 0.0)
    for cost in costs:
        for term, pj in energy_terms_pj(gpu, cost).items():
            out[term] += PICO * float(pj) * (scale if term in SM_TERMS else 1.0) / seconds
    out["static"] = p.static_w
    return out


def rows(results: Path, gpu_id: str, min_seconds: float) -> list[dict]:
    """One dict per ok row of ``results`` at least ``min_seconds`` long with NVML power."""
    import perfsim
    from perfsim.gpu_catalog import load_gpu
    from perfsim.power import uses_tensor_cores
    from perfsim.validate.external_report import (
        PRESETS,
        _device,
        load_rows,
        tensor_tick_clock,
        workload_of,
    )

    gpu = load_gpu(gpu_id)
    out = []
    for r in load_rows(results):
        if (r.get("status") != "ok" or r.get("impl") not in PRESETS
                or not r.get("power_mean_w") or not r.get("sm_clock_mean_hz")
                or not (r.get("measured_s") or 0) >= min_seconds):
            continue
        try:
            p = perfsim.predict(workload_of(r), gpu=gpu, algorithm=PRESETS[r["impl"]])
        except perfsim.PerfsimError:
            continue
        costs = [k.cost for k in p.kernels]
        tick = uses_tensor_cores(costs)
        clock = (tensor_tick_clock(_device(r), r["sm_clock_mean_hz"], r["impl"], r["phase"])
                 if tick else r["sm_clock_mean_hz"])
        terms = power_terms(gpu, costs, r["measured_s"], clock)
        model = sum(terms.values())
        out.append({"impl": r["impl"], "phase": r["phase"], "head_dim": r["head_dim"],
                    "shape": f"B={r['batch']} H={r['heads']}/{r['kv_heads']} "
                             f"N={r['seqlen_q']} {'causal' if r['causal'] else 'full'} "
                             f"{r['dtype']}",
                    "clock_mhz": clock / 1e6, "nvml_w": r["power_mean_w"], "model_w": model,
                    "gap_w": model - r["power_mean_w"], **terms})
    return out


def table(scored: list[dict]) -> str:
    """Markdown: per (implementation, phase, head dim) the median gap and its range, and the
    median of each modelled term."""
    groups: dict = {}
    for r in scored:
        groups.setdefault((r["impl"], r["phase"], r["head_dim"]), []).append(r)
    lines = ["| implementation | phase | d | rows | NVML W | model W | model − NVML (min … max) | "
             + " | ".join(TERMS) + " |", "|---" * (7 + len(TERMS)) + "|"]
    for (impl, phase, d), rs in sorted(groups.items()):
        med = {k: statistics.median(r[k] for r in rs) for k in ("nvml_w", "model_w", "gap_w",
                                                                  *TERMS)}
        gaps = [r["gap_w"] for r in rs]
        lines.append(f"| {impl} | {phase} | {d} | {len(rs)} | {med['nvml_w']:.0f} | "
                     f"{med['model_w']:.0f} | {med['gap_w']:+.0f} ({min(gaps):+.0f} … "
                     f"{max(gaps):+.0f}) | "
                     + " | ".join(f"{med[k]:.0f}" for k in TERMS) + " |")
    return "\n".join(lines)


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1e3:            # NaN fails this too
        raise argparse.ArgumentTypeError(f"must be seconds from 0 to 1000, got {text!r}")
    return value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfsim.validate.power_at_measured",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a results.jsonl of external rows")
    ap.add_argument("--gpu", default="h200-sxm")
    ap.add_argument("--min-seconds", type=_seconds, default=3e-4,
                    help="leave out shorter calls (NVML's power lags short runs)")
    ap.add_argument("--out", type=Path, help="write the markdown table here too")
    args = ap.parse_args(argv)
    from perfsim.errors import PerfsimError
    from perfsim.files import check_output, read_text

    try:
        read_text(args.results, "results file")
        if args.out is not None:
            check_output(args.out, (".md",), "--out")
        scored = rows(args.results, args.gpu, args.min_seconds)
        if not scored:
            raise PerfsimError(f"{args.results}: no ok rows of at least {args.min_seconds} s "
                               "with NVML power and clock (is it a results.jsonl of "
                               "perfsim.validate.external_run?)")
    except PerfsimError as exc:
        sys.stderr.write(f"power_at_measured: {exc}\n")
        return 2
    text = (f"# The power model at the measured clock and time — {args.gpu}\n\n"
            f"Rows: `{args.results}`, ok rows of at least {args.min_seconds * 1e6:.0f} µs "
            f"({len(scored)}). Watts are medians per group; terms as "
            "`perfsim.power.energy_terms_pj` counts them, static "
            f"{scored[0]['static']:.0f} W in the model total.\n\n"
            + table(scored) + "\n")
    sys.stdout.write(text)
    if args.out:
        from perfsim.files import write_text_atomic

        write_text_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
