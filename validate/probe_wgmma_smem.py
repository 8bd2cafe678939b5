"""Microbenchmark: WGMMA throughput against the shared-memory operand bytes it reads (not
attention).

perfsim counts a WGMMA's shared-memory operand reads once per issuing warpgroup
(``perfsim.algorithms.common.wgmma_operand_reads``) and times them on the SM's shared-memory
port (``smem_bandwidth_bytes_per_clk_per_sm``) beside the tensor pipe. This probe measures that
pair alone: every CTA loads one A (BM x BK) and one B (BK x BN) bf16 tile once and runs
``acc += A @ B`` ``iters`` times; Triton keeps both loop-invariant operands in shared memory and
issues ``wgmma.mma_async`` with shared-memory descriptors on sm_90 (the PTX is counted and
recorded: instructions, their N, and whether A comes from registers). Small N and large K read
more operand bytes per FLOP: ``(BM·BK + BN·BK·warpgroups) · 2`` bytes per ``2·BM·BN·BK``
FLOPs. Reported per configuration: NVML SM clock and power, FLOP per clock per SM, and the
operand bytes per clock per SM that rate implies.

Run on a CUDA GPU: ``python -m perfsim.validate.probe_wgmma_smem OUT.json`` (or the file
directly); torch, triton and pynvml are imported inside functions.
"""

from __future__ import annotations

import json
import re
import sys
import time

#: (BM, BN, BK, num_warps): BM = 64 per warpgroup; N from 32 to 256, K from 64 to 256.
CONFIGS = ((64, 32, 256, 4), (64, 64, 256, 4), (64, 128, 256, 4), (64, 256, 256, 4),
           (64, 32, 64, 4), (64, 64, 64, 4), (64, 128, 64, 4), (64, 256, 64, 4),
           (64, 64, 128, 4), (64, 128, 128, 4), (128, 64, 128, 8), (128, 128, 128, 8),
           (128, 256, 64, 8), (128, 32, 256, 8))
CTAS_PER_SM = (1, 2)
ITERS = 2048


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def dot_loop(A, B, Y, iters, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
        a = tl.load(A + rm[:, None] * BK + rk[None, :])
        b = tl.load(B + rk[:, None] * BN + rn[None, :])
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(iters):
            acc = tl.dot(a, b, acc)
        tl.store(Y + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc)

    return dot_loop


def _ptx(compiled) -> dict:
    ptx = compiled.asm.get("ptx", "")
    shapes = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", ptx)
    return {"wgmma": len(shapes), "wgmma_n": sorted({int(n) for n in shapes}),
            "mma_sync": len(re.findall(r"\bmma\.sync\.", ptx)),
            # a register-sourced A operand is a brace list; a descriptor is a 64-bit register
            "wgmma_a_from_registers": len(re.findall(
                r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16[^\n]*?\{[^}]*\},\s*\{", ptx))}


def run(out_path: str) -> list[dict]:
    import pynvml
    import torch

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = _kernel()
    rows = []
    for bm, bn, bk, warps in CONFIGS:
        a = torch.randn(bm, bk, device="cuda", dtype=torch.bfloat16) / 8
        b = torch.randn(bk, bn, device="cuda", dtype=torch.bfloat16) / 8
        for c in CTAS_PER_SM:
            grid = c * sms
            y = torch.empty(grid * bm * bn, device="cuda", dtype=torch.float32)
            try:
                compiled = kernel[(grid,)](a, b, y, 8, BM=bm, BN=bn, BK=bk, num_warps=warps)
            except Exception as exc:      # e.g. out of shared memory or registers
                rows.append({"bm": bm, "bn": bn, "bk": bk, "warps": warps, "ctas_per_sm": c,
                             "error": str(exc)[:200]})
                continue
            torch.cuda.synchronize()
            kernel[(grid,)](a, b, y, ITERS, BM=bm, BN=bn, BK=bk, num_warps=warps)   # warm
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            clocks, watts, reps = [], [], 0
            start.record()
            t0 = time.time()
            while time.time() - t0 < 0.25:
                kernel[(grid,)](a, b, y, ITERS, BM=bm, BN=bn, BK=bk, num_warps=warps)
                reps += 1
                clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
                watts.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)
            end.record()
            torch.cuda.synchronize()
            seconds = start.elapsed_time(end) / 1e3 / reps
            mhz = sum(clocks) / len(clocks)
            groups = max(warps // 4, 1)
            flop_per_iter_sm = 2 * bm * bn * bk * c
            bytes_per_iter_sm = 2 * (bm * bk + bn * bk * groups) * c
            cycles_per_iter = seconds * mhz * 1e6 / ITERS
            rows.append({"bm": bm, "bn": bn, "bk": bk, "warps": warps, "ctas_per_sm": c,
                         "grid": grid, "iters": ITERS, "seconds": seconds,
                         "sm_clock_mhz_mean": mhz, "power_w_mean":
                         sum(watts[len(watts) // 2:]) / max(len(watts[len(watts) // 2:]), 1),
                         "ptx": _ptx(compiled),
                         "regs": getattr(compiled, "n_regs", None),
                         "cycles_per_iter_per_sm": cycles_per_iter,
                         "flop_per_clk_per_sm": flop_per_iter_sm / cycles_per_iter,
                         "operand_bytes_per_clk_per_sm": bytes_per_iter_sm / cycles_per_iter})
            print(json.dumps(rows[-1]), flush=True)
    with open(out_path, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(0), "sm_count": sms,
                   "torch": torch.__version__, "rows": rows}, fh, indent=1)
    return rows


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_wgmma_smem.json")
