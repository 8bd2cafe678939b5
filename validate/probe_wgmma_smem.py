"""Microbenchmark: WGMMA throughput against the shared-memory operand bytes it reads (not
attention).

perfsim counts a WGMMA's shared-memory operand reads once per issuing warpgroup
(``perfsim.algorithms.common.wgmma_operand_reads``) and times them on the SM's shared-memory
port (``smem_bandwidth_bytes_per_clk_per_sm``) beside the tensor pipe. This probe measures that
pair alone: every CTA loads one A (BM x BK) and one B (BK x BN) bf16 tile once and runs
``acc += A @ B`` ``iters`` times (``probe_mma_smem``'s loop: mma.sync with BM = 32, WGMMA
here, with BM ≥ 64 and whole warpgroups); Triton keeps both loop-invariant operands in
shared memory and issues ``wgmma.mma_async`` with shared-memory descriptors on sm_90 (the
PTX is counted and recorded: instructions, their N, and whether A comes from registers).
Small N and large K read more operand bytes per FLOP: ``(BM·BK + BN·BK·warpgroups) · 2``
bytes per ``2·BM·BN·BK`` FLOPs. Reported per configuration: NVML SM clock and power, FLOP
per clock per SM, and the operand bytes per clock per SM that rate implies.

Run on a CUDA GPU with perfsim importable (``validate/probe_run.sh`` arranges it):
``python -m perfsim.validate.probe_wgmma_smem OUT.json``; torch, triton and pynvml are
imported inside functions.
"""

from __future__ import annotations

import re
import sys

#: (BM, BN, BK, num_warps): BM = 64 per warpgroup; N from 32 to 256, K from 64 to 256.
CONFIGS = ((64, 32, 256, 4), (64, 64, 256, 4), (64, 128, 256, 4), (64, 256, 256, 4),
           (64, 32, 64, 4), (64, 64, 64, 4), (64, 128, 64, 4), (64, 256, 64, 4),
           (64, 64, 128, 4), (64, 128, 128, 4), (128, 64, 128, 8), (128, 128, 128, 8),
           (128, 256, 64, 8), (128, 32, 256, 8))
CTAS_PER_SM = (1, 2)
ITERS = 2048


def _ptx(compiled) -> dict:
    ptx = compiled.asm.get("ptx", "")
    shapes = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", ptx)
    return {"wgmma": len(shapes), "wgmma_n": sorted({int(n) for n in shapes}),
            "mma_sync": len(re.findall(r"\bmma\.sync\.", ptx)),
            # a register-sourced A operand is a brace list; a descriptor is a 64-bit register
            "wgmma_a_from_registers": len(re.findall(
                r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16[^\n]*?\{[^}]*\},\s*\{", ptx))}


def run(out_path: str) -> list[dict]:
    from perfsim.validate.probe_mma_smem import measure_dot_loop
    from perfsim.validate.probe_util import write_rows

    rows = measure_dot_loop(CONFIGS, CTAS_PER_SM, _ptx, seconds=0.25, iters=ITERS)
    for r in rows:
        if "error" in r:
            continue
        groups = max(r["warps"] // 4, 1)
        cycles = r["cycles_per_iter_per_sm"]
        r["flop_per_clk_per_sm"] = r["flop_per_iter_per_sm"] / cycles
        r["operand_bytes_per_clk_per_sm"] = (2 * (r["bm"] * r["bk"] + r["bn"] * r["bk"] * groups)
                                            * r["ctas_per_sm"] / cycles)
    write_rows(out_path, rows)
    return rows

if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_wgmma_smem.json")
