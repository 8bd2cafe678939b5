"""Microbenchmark: how far ``mma.sync`` MMAs overlap the ``ldmatrix`` loads that feed them.

FA1/FA2 warps load MMA operands from shared memory (``ldmatrix``) and then issue
``mma.sync``; perfsim models the pair as a closed cycle of two stations (shared memory, the
warp's compute) with as many warps in flight as each scheduler holds
(``perfsim.algorithms.base.warp_cycle``). This probe measures that pair alone — no
exponentials, no softmax, no HBM — so the overlap is checked on something that is not the
attention timing it is used for.

Kernel: every CTA loads one A (BM x BK) and one B (BK x BN) bf16 tile once and runs
``acc += A @ B`` ``iters`` times. On sm_90 Triton lowers ``tl.dot`` with BM = 32 to
``mma.sync`` and re-reads the loop-invariant operands from shared memory with ``ldmatrix``
every iteration (counted from the PTX and recorded). Grids of ``c x SMs`` CTAs give ``c``
resident CTAs per SM. Reports per configuration: SM clock (NVML), cycles per loop iteration
per SM, the tensor and shared-memory cycles the PTX counts imply at the GPU's per-clock
rates, and the closed-cycle prediction.

Run on a CUDA GPU: ``python -m perfsim.validate.probe_mma_smem OUT.json``. torch and triton
are imported inside functions.
"""

from __future__ import annotations

import json
import re
import sys
import time

#: (BM, BN, BK, num_warps) tiles; BM = 32 keeps Triton on mma.sync (MMAv2) on sm_90.
CONFIGS = ((32, 64, 128, 4), (32, 128, 64, 4), (32, 128, 128, 4), (32, 64, 64, 2))
CTAS_PER_SM = (1, 2, 4, 8)
ITERS = 4096


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


def _kernel_rs():
    """:func:`_kernel`'s loop with A computed in registers (scaled by a runtime ``scale``), as
    attention's P is: Triton's Hopper lowering keeps an operand that does not come straight
    from a load in registers, so its WGMMAs read A from registers and only B from shared
    memory (``wgmma ... {acc}, {a0, a1, a2, a3}, descB``); :func:`wgmma_operand_forms` counts
    the two forms in the PTX."""
    import triton
    import triton.language as tl

    @triton.jit
    def dot_loop_rs(A, B, Y, iters, scale, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
        a = (tl.load(A + rm[:, None] * BK + rk[None, :]).to(tl.float32) * scale
             ).to(tl.bfloat16)
        b = tl.load(B + rk[:, None] * BN + rn[None, :])
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(iters):
            acc = tl.dot(a, b, acc)
        tl.store(Y + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc)

    return dot_loop_rs


def wgmma_operand_forms(ptx: str) -> dict:
    """``{"ss": n, "rs": n}``: WGMMAs in ``ptx`` whose A operand is a shared-memory
    descriptor (``ss``) or a brace list of registers (``rs``)."""
    forms = {"ss": 0, "rs": 0}
    for m in re.finditer(r"wgmma\.mma_async[^;]*?\{[^}]*\}\s*,\s*(\{|%)", ptx):
        forms["rs" if m.group(1) == "{" else "ss"] += 1
    return forms


def _ptx_counts(compiled) -> dict:
    ptx = compiled.asm.get("ptx", "")
    counts = {"mma_sync": len(re.findall(r"\bmma\.sync\.", ptx)),
              "wgmma": len(re.findall(r"\bwgmma\.mma_async", ptx)),
              "bar_sync": len(re.findall(r"\bbar\.sync\b", ptx))}
    for width in ("x1", "x2", "x4"):
        counts[f"ldmatrix_{width}"] = len(re.findall(rf"ldmatrix\.sync\.aligned\.m8n8\.{width}",
                                                     ptx))
    return counts


def _clock_mhz(handle):
    import pynvml

    return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)


def measure_dot_loop(configs, ctas_per_sm, ptx_counts, seconds: float = 0.3,
                     iters: int = ITERS) -> list[dict]:
    """Time :func:`_kernel`'s ``acc += A @ B`` loop for each ``(BM, BN, BK, warps)`` of
    ``configs`` at each of ``ctas_per_sm``: one row each with the NVML clock and power
    (``probe_util.back_to_back``), ``ptx_counts(compiled)``, the registers, cycles per loop
    iteration per SM and FLOP per iteration per SM (a configuration that does not compile is
    a row with its ``error``)."""
    import torch

    from perfsim.validate.probe_util import back_to_back, nvml_handle

    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = _kernel()
    rows = []
    for bm, bn, bk, warps in configs:
        a = torch.randn(bm, bk, device="cuda", dtype=torch.bfloat16) / 8
        b = torch.randn(bk, bn, device="cuda", dtype=torch.bfloat16) / 8
        for c in ctas_per_sm:
            grid = c * sms
            y = torch.empty(grid * bm * bn, device="cuda", dtype=torch.float32)
            launch = {"BM": bm, "BN": bn, "BK": bk, "num_warps": warps}
            shape = {"bm": bm, "bn": bn, "bk": bk, "warps": warps, "ctas_per_sm": c}
            try:
                compiled = kernel[(grid,)](a, b, y, 8, **launch)
                torch.cuda.synchronize()
            except Exception as exc:          # out of shared memory or registers
                rows.append({**shape, "error": str(exc)[:200]})
                continue

            def call(grid=grid, args=(a, b, y, iters), launch=launch):
                kernel[(grid,)](*args, **launch)

            call()                                                          # warm
            torch.cuda.synchronize()
            timed = back_to_back(call, handle, seconds)
            rows.append({**shape, "grid": grid, "iters": iters, **timed,
                         "ptx": ptx_counts(compiled),
                         "regs": getattr(compiled, "n_regs", None),
                         "cycles_per_iter_per_sm": timed["seconds"]
                         * timed["sm_clock_mhz_mean"] * 1e6 / iters,
                         "flop_per_iter_per_sm": 2 * bm * bn * bk * c})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def run(out_path: str) -> list[dict]:
    from perfsim.validate.probe_util import write_rows

    rows = measure_dot_loop(CONFIGS, CTAS_PER_SM, _ptx_counts)
    write_rows(out_path, rows)
    return rows




# ----------------------------------------------------------------------------------------
# Per-CTA fixed cost of a tiled kernel (prologue + epilogue), not attention: every CTA loads
# its own Q tile (BM x D), walks ``steps`` K/V tiles (BN x D each, loads pipelined by
# Triton's num_stages) doing acc += (q @ kᵀ) @ v — two GEMMs per step, no softmax — and
# stores its BM x D result. The time of a full grid against ``steps`` is a line: its slope is
# the steady-state step, its intercept the per-wave fixed cost (first loads, pipeline fill,
# epilogue store) that co-resident CTAs did not hide.
STEPS = (1, 2, 4, 8, 16, 32)
TILE_CONFIGS = ((128, 64, 128, 4, 2), (128, 128, 64, 4, 2))    # BM, BN, D, warps, stages


def _chain_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def gemm_chain(Q, K, V, Out, steps, kv_sets, BM: tl.constexpr, BN: tl.constexpr,
                   D: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
        q = tl.load(Q + pid * BM * D + rm[:, None] * D + rd[None, :])
        acc = tl.zeros((BM, D), dtype=tl.float32)
        # CTA i walks K/V set i mod kv_sets: kv_sets = grid gives every CTA its own
        base = (pid % kv_sets) * steps * BN * D
        for j in range(steps):
            k = tl.load(K + base + j * BN * D + rn[:, None] * D + rd[None, :])
            v = tl.load(V + base + j * BN * D + rn[:, None] * D + rd[None, :])
            s = tl.dot(q, tl.trans(k))
            acc = tl.dot(s.to(tl.bfloat16), v, acc)
        tl.store(Out + pid * BM * D + rm[:, None] * D + rd[None, :], acc.to(tl.bfloat16))

    return gemm_chain


def run_prologue(out_path: str, ctas_per_sm_grid: int = 16) -> list[dict]:
    """Time the GEMM chain for every ``steps`` with ``ctas_per_sm_grid x SMs`` CTAs."""
    import pynvml
    import torch
    import triton

    from perfsim.validate.probe_util import write_rows

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = _chain_kernel()
    rows = []
    for bm, bn, d, warps, stages in TILE_CONFIGS:
        grid = ctas_per_sm_grid * sms
        for steps in STEPS:
            q = torch.randn(grid * bm * d, device="cuda", dtype=torch.bfloat16) / 8
            k = torch.randn(grid * steps * bn * d, device="cuda", dtype=torch.bfloat16) / 8
            v = torch.randn_like(k)
            o = torch.empty_like(q)

            def call():
                kernel[(grid,)](q, k, v, o, steps, grid, BM=bm, BN=bn, D=d, num_warps=warps,
                                num_stages=stages)

            call()
            torch.cuda.synchronize()
            clocks = [_clock_mhz(handle)]
            seconds = triton.testing.do_bench(call, warmup=100, rep=300, return_mode="median")
            clocks.append(_clock_mhz(handle))
            rows.append({"bm": bm, "bn": bn, "d": d, "warps": warps, "stages": stages,
                         "steps": steps, "grid": grid, "seconds": seconds / 1e3,
                         "sm_clock_mhz": sum(clocks) / len(clocks),
                         "bytes": 2 * (2 * grid * bm * d + 2 * grid * steps * bn * d),
                         "flop": 4 * grid * steps * bm * bn * d})
            print(json.dumps(rows[-1]), flush=True)
    write_rows(out_path, rows)
    return rows


def run_power(out_path: str, seconds: float = 3.0) -> dict:
    """The densest mma.sync loop (BM 32, BN 128, BK 128, 4 warps, 8 CTAs per SM) back to
    back for ``seconds`` with NVML sampled every 5 ms: steady clock, board power and FLOP/s
    of mma.sync work fed from shared memory (the power model's mma.sync energy)."""
    import torch

    from perfsim.validate.nvml_sampler import NvmlSampler, summarize

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = _kernel()
    bm, bn, bk, warps, c = 32, 128, 128, 4, 8
    a = torch.randn(bm, bk, device="cuda", dtype=torch.bfloat16) / 8
    b = torch.randn(bk, bn, device="cuda", dtype=torch.bfloat16) / 8
    y = torch.empty(c * sms * bm * bn, device="cuda", dtype=torch.float32)

    def call():
        kernel[(c * sms,)](a, b, y, ITERS, BM=bm, BN=bn, BK=bk, num_warps=warps)

    call()
    torch.cuda.synchronize()
    sampler = NvmlSampler(period_s=0.005)
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.5:                     # let the clock settle
        call()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sampler.start()
    start.record()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        call()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    samples = sampler.stop()
    elapsed = start.elapsed_time(end) / 1e3
    rec = {"config": {"bm": bm, "bn": bn, "bk": bk, "warps": warps, "ctas_per_sm": c},
           "calls": calls, "seconds": elapsed,
           "flop_per_s": calls * 2.0 * bm * bn * bk * ITERS * c * sms / elapsed,
           **summarize(samples)}
    with open(out_path, "w") as fh:
        json.dump(rec, fh, indent=1)
    print(json.dumps(rec), flush=True)
    return rec


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    run(f"{out}/probe_mma_smem.json")
    run_power(f"{out}/probe_mma_sync_power.json")
    run_prologue(f"{out}/probe_cta_prologue.json")
