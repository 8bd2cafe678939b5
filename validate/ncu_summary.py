"""Summarise the Nsight Compute counters written by ``validate/probe_ncu.sh``.

    python -m perfsim.validate.ncu_summary NCU.tgz OUT.json ["WHERE AND WHEN"]

For every profiled kernel: its duration, the **effective SM clock** (``sm__cycles_elapsed``
over ``gpu__time_duration``: the cycles the SMs actually ticked, not NVML's reported clock),
tensor/FMA/ALU/XU (MUFU) pipe utilisation, issue-slot use, warps resident per SM,
shared-memory wavefronts, DRAM bytes, registers, warp stall reasons, and executed SASS
instructions by opcode. The optional third argument replaces the summary's ``source`` line
(the GPU and date of the profile).
The committed output is ``validate/reports/h200/probes/ncu/summary.json``; ``perfsim.power``
cites it for the tensor-core clock ceiling.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import tarfile

_PCT = ".avg.pct_of_peak_sustained_active"
METRICS = {
    "duration_s": ("gpu__time_duration.sum", 1e-9),
    "sm_cycles": ("sm__cycles_elapsed.avg", 1.0),
    "tensor_pipe_pct": ("sm__pipe_tensor_op_hmma_cycles_active" + _PCT, 1.0),
    "wgmma_pipe_pct": ("sm__pipe_tensor_op_gmma_cycles_active" + _PCT, 1.0),
    "fma_pipe_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", 1.0),
    "alu_pipe_pct": ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", 1.0),
    "xu_pipe_pct": ("sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active", 1.0),
    "issue_active_pct": ("smsp__issue_active.avg.pct_of_peak_sustained_active", 1.0),
    "warps_per_sm": ("sm__warps_active.avg.per_cycle_active", 1.0),
    # every shared-memory wavefront, WGMMA's operand reads included (the counter's own
    # description: LDS, LD, STSM, LDGSTS, HGMMA, ...), and the WGMMA, load and store shares
    # (profiles from 2026-12-01 on; None in older ones)
    "smem_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", 1.0),
    "smem_wavefronts_gmma": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum", 1.0),
    "smem_wavefronts_ld": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 1.0),
    "smem_wavefronts_st": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", 1.0),
    "dram_bytes": ("dram__bytes.sum", 1.0),
    "registers_per_thread": ("launch__registers_per_thread", 1.0),
    "instructions": ("sm__inst_executed.sum", 1.0),
    # register spills and L2 traffic (profiles from 2026-12-01 on; None in older ones)
    "local_load_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", 1.0),
    "local_store_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", 1.0),
    "l2_bytes": ("lts__t_bytes.sum", 1.0),
    "l2_throughput_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed", 1.0),
    "shared_bytes_per_cta": ("launch__shared_mem_per_block", 1.0),
    # cycles the busiest, the least busy and the mean SM had work (imbalance between SMs;
    # profiles from 2026-12-02 on; None in older ones)
    "sm_active_cycles_max": ("sm__cycles_active.max", 1.0),
    "sm_active_cycles_min": ("sm__cycles_active.min", 1.0),
    "sm_active_cycles_avg": ("sm__cycles_active.avg", 1.0),
    # warp instructions executed per pipe (profiles from 2026-12-03 on; the dropout census)
    "inst_pipe_fma": ("sm__inst_executed_pipe_fma.sum", 1.0),
    "inst_pipe_alu": ("sm__inst_executed_pipe_alu.sum", 1.0),
    "inst_pipe_fp16": ("sm__inst_executed_pipe_fp16.sum", 1.0),
    "inst_pipe_xu": ("sm__inst_executed_pipe_xu.sum", 1.0),
    "inst_pipe_lsu": ("sm__inst_executed_pipe_lsu.sum", 1.0),
    "inst_pipe_uniform": ("sm__inst_executed_pipe_uniform.sum", 1.0),
}


#: Warp stall reasons (``WarpStateStats``): the counter's reason -> warps stalled for it per
#: issue-active cycle (``smsp__average_warps_issue_stalled_REASON_per_issue_active.ratio``);
#: ``no_instruction`` is a warp waiting for its next instruction to be fetched (an
#: instruction-cache miss or a branch target), ``wait`` a fixed-latency dependency,
#: ``long_scoreboard`` a global/local memory result.
_STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")


#: Opcode instance lists of kernels with many distinct instructions exceed csv's default.
csv.field_size_limit(1 << 26)


def _rows(text: str) -> list[dict]:
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    return [dict(zip(rows[0], r)) for r in rows[2:]]


def _num(value: str):
    try:
        return float(value.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def _opcodes(value: str) -> dict:
    return {op: int(n.replace(",", "")) for op, n in re.findall(r"([A-Z0-9_.]+): ([\d,]+)", value)}


def summarise(files: dict[str, str]) -> dict:
    """``files``: name -> CSV text from ``probe_ncu.sh``. Returns ``{case: [kernel, ...]}``."""
    out = {}
    for name, text in sorted(files.items()):
        if not name.endswith(".csv") or name.endswith("-opcodes.csv"):
            continue
        case = name[len("ncu-"):-len(".csv")]
        ops = _rows(files.get(f"ncu-{case}-opcodes.csv", ""))
        kernels = []
        for i, row in enumerate(_rows(text)):
            rec = {"kernel": row.get("Kernel Name", "")[:160], "block": row.get("Block Size"),
                   "grid": row.get("Grid Size")}
            for key, (metric, scale) in METRICS.items():
                v = _num(row.get(metric, ""))
                rec[key] = None if v is None else v * scale
            stalls = {m.group(1): _num(v) for k, v in row.items()
                      if (m := _STALL.match(k)) and _num(v) is not None}
            if stalls:
                rec["stalls"] = stalls
            if rec["duration_s"] and rec["sm_cycles"]:
                rec["effective_clock_hz"] = rec["sm_cycles"] / rec["duration_s"]
            if i < len(ops):
                col = next((k for k in ops[i] if "sass__inst_executed_per_opcode" in k), None)
                if col:
                    rec["opcodes"] = _opcodes(ops[i][col])
            kernels.append(rec)
        out[case] = kernels
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3):
        print('usage: python -m perfsim.validate.ncu_summary NCU.tgz OUT.json ["SOURCE"]',
              file=sys.stderr)
        return 2
    with tarfile.open(argv[0]) as tar:
        files = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()
                 if m.isfile()}
    source = argv[2] if len(argv) == 3 else (
        "validate/probe_ncu.sh on the project's H200, 2026-11-30 and 2026-12-01")
    summary = {"source": f"{source} (ncu 2025.3.1, --clock-control none; shapes in "
                         "validate/probe_ncu.py)",
               "cases": summarise(files)}
    with open(argv[1], "w") as f:
        json.dump(summary, f, indent=1)
    from perfsim.cli.common import print_table

    print_table("kernels profiled", ["case", "kernel", "µs", "GHz", "tensor %", "wgmma %"],
                [[case, k["kernel"][:60], f"{(k['duration_s'] or 0) * 1e6:.1f}",
                  f"{(k.get('effective_clock_hz') or 0) / 1e9:.3f}",
                  f"{k['tensor_pipe_pct'] or 0:.1f}", f"{k['wgmma_pipe_pct'] or 0:.1f}"]
                 for case, kernels in summary["cases"].items() for k in kernels])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
