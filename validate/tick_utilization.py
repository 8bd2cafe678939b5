"""Tensor-pipe utilization per cycle the SMs tick, measured against modelled, on the long rows
of the external grid — where the model's time error comes from: its clock (the power model)
or its work per cycle (the kernel's stations).

For each long, non-causal, bf16, MHA row of ``reports/h200-external/`` (N = 16384, and
N = 8192 at head dim 128) of an implementation the tick probe measured
(``reports/h200/probes/tick/``): the measured utilization is the row's FLOPs (the benchmark
convention) over its time, the SMs, 4096 FLOP/clk/SM and its tick clock — NVML's mean times the
ratio the probe measured for that implementation and phase (at d = 128; taken for every head
dim); the modelled one is the same with perfsim's time and clock. Their ratio says how far the
work per cycle is off; the clock column how far the power model's clock is.

    python -m perfsim.validate.tick_utilization [--out FILE.md]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
GRID = ROOT / "reports/h200-external/results.jsonl"
TICK = ROOT / "reports/h200/probes/tick"
#: probe case prefix -> the external grid's implementation name
IMPLS = {"sdpa_flash": "sdpa-flash", "sdpa_cudnn": "sdpa-cudnn", "flex": "flex",
         "triton_tutorial": "triton-tutorial", "cute": "flash-attn-cute"}
#: dense tensor FLOP per clock per SM on the H200 (the peak the utilization is a share of)
PEAK_PER_CLK = 4096


def ratios() -> dict:
    """``{(impl, phase): tick / NVML}`` from the probe's documents."""
    out = {}
    for path in sorted(TICK.glob("*.json")):
        for case in json.loads(path.read_text()).get("cases", []):
            impl, _, phase = case["case"].rpartition("-")
            if case.get("status") == "ok" and impl in IMPLS and case.get("tick_over_nvml"):
                out[(impl, phase)] = case["tick_over_nvml"]
    return out


def rows() -> list[dict]:
    import perfsim

    tick = ratios()
    out = []
    for line in GRID.read_text().splitlines():
        r = json.loads(line)
        key = (r.get("impl"), r.get("phase"))
        if (r.get("status") != "ok" or key not in tick or r["causal"] or r["dtype"] != "bf16"
                or r["kv_heads"] != r["heads"]
                or not (r["seqlen_q"] == 16384 or (r["seqlen_q"] == 8192
                                                   and r["head_dim"] == 128))):
            continue
        clock = r["sm_clock_mean_hz"] * tick[key]
        w = perfsim.AttentionWorkload(batch=r["batch"], heads=r["heads"],
                                      seqlen_q=r["seqlen_q"], head_dim=r["head_dim"],
                                      dtype="bf16", phase=r["phase"])
        p = perfsim.predict(w, gpu="h200-sxm", algorithm=IMPLS[r["impl"]])
        sms = perfsim.load_gpu("h200-sxm").sm_count
        measured = r["grid_flops"] / r["measured_s"] / (sms * clock * PEAK_PER_CLK)
        modelled = r["grid_flops"] / p.seconds / (sms * p.clock_hz * PEAK_PER_CLK)
        out.append({"impl": r["impl"], "phase": r["phase"], "d": r["head_dim"],
                    "N": r["seqlen_q"], "measured": measured, "modelled": modelled,
                    "clock": p.clock_hz / clock, "time": p.seconds / r["measured_s"]})
    return sorted(out, key=lambda x: (x["phase"], x["impl"], x["d"], x["N"]))


def table(found: list[dict]) -> str:
    lines = ["| implementation | phase | d | N | per tick, measured | modelled | modelled / "
             "measured | clock, modelled / tick | time, modelled / measured |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in found:
        lines.append(f"| {r['impl']} | {r['phase']} | {r['d']} | {r['N']} | "
                     f"{r['measured']:.3f} | {r['modelled']:.3f} | "
                     f"{r['modelled'] / r['measured']:.3f} | {r['clock']:.3f} | "
                     f"{r['time']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from perfsim.validate.clock_check import table_cli

    return table_cli(
        "tick_utilization", "# Tensor-pipe utilization per tick, measured and modelled (H200, "
        "catalog model)\n\nUtilization = FLOPs / (time x 132 SMs x clock x 4096); measured "
        "at NVML's clock times the tick probe's ratio for the implementation and phase "
        "(validate/tick_utilization.py).\n\n", lambda: table(rows()), argv)


if __name__ == "__main__":
    sys.exit(main())
