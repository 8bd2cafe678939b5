"""The SM clock the kernels tick at under sustained load, from hardware cycle counts (issue 9).

NVML reports the clock the power controller set; the clock the SMs tick at can be lower. For
each forward kernel profiled with Nsight Compute (``probes/ncu/summary.json``: B = 1,
H·d = 4096, N = 4096, non-causal bf16, launched alone) the external grid holds a row with twice
its work and the same per-CTA shape (B·H doubled). That row's effective clock under sustained
load is ``2 · (the kernel's SM cycles) / (its measured time)`` — the cycles a kernel needs do
not depend on the clock it runs at, so this is a measurement of the clock, not of the model.
The table compares it with NVML's mean during the row and with perfsim's predicted clock.

    python -m perfsim.validate.clock_check [--out FILE.md]

Forward only: the backward cases' profiles include the forward and harness kernels, and a
backward call also runs pre- and post-processing kernels, so its time is not one kernel's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NCU = ROOT / "reports/h200/probes/ncu/summary.json"
GRID = ROOT / "reports/h200-external"
#: ncu case prefix -> the external grid's implementation name
IMPLS = {"cudnn": "sdpa_cudnn", "cute": "cute", "flash": "sdpa_flash", "flex": "flex",
         "tutorial": "triton_tutorial"}


def rows() -> list[dict]:
    """One dict per profiled forward kernel with a matching external row."""
    import perfsim
    from perfsim import AttentionWorkload
    from perfsim.validate.external_report import PRESETS

    cases = json.loads(NCU.read_text())["cases"]
    measured = [json.loads(line) for line in (GRID / "results.jsonl").read_text().splitlines()
                if line.strip()]
    out = []
    for case, kernels in sorted(cases.items()):
        prefix, phase, d = case.split("-")
        if phase != "fwd" or prefix not in IMPLS:
            continue
        d = int(d[1:])
        main = max(kernels, key=lambda k: k["duration_s"])      # the attention kernel
        for r in measured:
            if (r.get("status") == "ok" and r["impl"] == IMPLS[prefix] and r["phase"] == "fwd"
                    and r["seqlen_q"] == 4096 and r["seqlen_k"] == 4096
                    and r["head_dim"] == d and not r["causal"] and r["dtype"] == "bf16"
                    and r["batch"] * r["heads"] == 2 * 4096 // d
                    and r["kv_heads"] == r["heads"]):
                w = AttentionWorkload(batch=r["batch"], heads=r["heads"], seqlen_q=4096,
                                      head_dim=d, dtype="bf16")
                p = perfsim.predict(w, gpu="h200-sxm", algorithm=PRESETS[r["impl"]])
                effective = 2 * main["sm_cycles"] / r["measured_s"]
                out.append({"case": case, "batch": r["batch"], "heads": r["heads"],
                            "ncu_alone_hz": main["effective_clock_hz"],
                            "effective_hz": effective, "nvml_hz": r["sm_clock_mean_hz"],
                            "predicted_hz": p.clock_hz})
    return out


def table(found: list[dict]) -> str:
    lines = ["| kernel (ncu case) | B × H | alone (ncu) | sustained, effective | NVML mean "
             "| predicted | vs effective | vs NVML |", "|---|---|---|---|---|---|---|---|"]
    for r in found:
        lines.append(
            f"| {r['case']} | {r['batch']} × {r['heads']} | {r['ncu_alone_hz'] / 1e9:.3f} "
            f"| {r['effective_hz'] / 1e9:.3f} | {r['nvml_hz'] / 1e9:.3f} "
            f"| {r['predicted_hz'] / 1e9:.3f} "
            f"| {r['predicted_hz'] / r['effective_hz'] - 1:+.1%} "
            f"| {r['predicted_hz'] / r['nvml_hz'] - 1:+.1%} |")
    eff = statistics.median(abs(r["predicted_hz"] / r["effective_hz"] - 1) for r in found)
    nv = statistics.median(abs(r["predicted_hz"] / r["nvml_hz"] - 1) for r in found)
    over = statistics.median(r["nvml_hz"] / r["effective_hz"] - 1 for r in found)
    lines += ["", f"Median |predicted − effective| / effective: {eff:.1%}; against NVML: "
              f"{nv:.1%}. NVML's reading exceeds the effective clock by {over:.1%} (median)."]
    return "\n".join(lines) + "\n"


def table_cli(prog: str, heading: str, make_table, argv=None) -> int:
    """A markdown report's command line: ``heading`` and ``make_table()`` printed, and
    written to ``--out`` too (this module's and ``tick_utilization``'s)."""
    ap = argparse.ArgumentParser(prog=f"python -m perfsim.validate.{prog}")
    ap.add_argument("--out", help="write the table (markdown) here too")
    args = ap.parse_args(argv)
    text = heading + make_table()
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


def main(argv=None) -> int:
    return table_cli("clock_check", "# Effective SM clock under sustained load (GHz)\n\n"
                     "Effective = 2 × the kernel's Nsight Compute SM cycles (B = 1, H·d = 4096, "
                     "N = 4096) / the measured time of the external row with twice the work "
                     "(validate/clock_check.py).\n\n", lambda: table(rows()), argv)


if __name__ == "__main__":
    sys.exit(main())
