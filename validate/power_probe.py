"""Power microbenchmarks: SM clock, board power and throughput over time, for a power model
``P(f) = static + energy * ops / T``.

    python3 -m perfsim.validate.power_probe --out FILE.json [--duration 3.5] [--only a,b]

Each benchmark runs back to back for ``--duration`` seconds (after one untimed call and a
0.5 s idle gap, both outside the trace's timed part) while :class:`NvmlSampler` reads SM and
memory clock, board power (``NVML_FI_DEV_POWER_INSTANT`` and ``nvmlDeviceGetPowerUsage``),
temperature and clock-event reasons every 5 ms; a CUDA event after every iteration gives its
completion time on the GPU, binned into 50 ms windows (iterations and ops per second over time).
The CPU keeps about 30 ms of work queued (it waits on the event of an earlier iteration), so
the GPU never idles and the run ends close to ``--duration``. Time 0 of the trace is the
launch of the first timed iteration (a CUDA event recorded on an idle GPU at that moment).

Benchmarks (:data:`BENCHES`): idle; a one-CTA FMA spin kernel (clock up, almost no work);
HBM copy 512 MiB fp32 (``Tensor.copy_``, two buffer pairs rotated); cuBLAS GEMM 8192^3 bf16 and
fp16 on random normal data; bf16 on zeros, and with only B zero; fp8 e4m3
``torch._scaled_mm``; the MUFU exp2 and FP32 FMA register-loop Triton kernels of
``_bench_kernels.py`` (8 CTAs x 4 warps per SM); and
bf16 GEMM 4096^3 alternating with ``torch.cuda._sleep`` of about the same length (about half
utilisation); an L2-resident read walk (``probe_l2``); a WGMMA loop with both operands in shared
memory (``probe_mma_smem``'s kernel on a 64 x 256 x 64 tile) at 1 and 2 CTAs per SM; fp32
reductions into an L2-resident buffer (``probe_l2``'s walk: per-element atomic adds, and TMA
bulk reductions); ``probe_spill_cost``'s register-spilling MMA loop and its control. torch,
triton and pynvml are imported inside functions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

WINDOW_S, QUEUE_S, IDLE_GAP_S, POST_S = 0.05, 0.03, 0.5, 0.2
STEADY_S, BURST_S = 2.0, 0.15


def _benches():
    """name -> setup() returning (step, ops_per_iteration, unit, description)."""
    import torch

    def probs(n, dtype):
        # softmax numerators as attention's P @ V feeds them: exp(s - rowmax) of scores
        # s ~ N(0, 1) (what q, k ~ N(0, 1) give after the 1/sqrt(d) scale), in (0, 1]
        s = torch.randn(n, n, device="cuda")
        return torch.exp(s - s.amax(dim=1, keepdim=True)).to(dtype)

    def gemm(dtype, n=8192, zeros=False, b_zeros=False, a_probs=False):
        def setup():
            mk = torch.zeros if zeros else torch.randn
            a = probs(n, dtype) if a_probs else mk(n, n, device="cuda", dtype=dtype)
            b = (torch.zeros if zeros or b_zeros else torch.randn)(n, n, device="cuda",
                                                                    dtype=dtype)
            out = torch.empty(n, n, device="cuda", dtype=dtype)
            data = ("zeros" if zeros else "A random normal, B zeros" if b_zeros
                    else "A softmax numerators exp(s - rowmax), B random normal" if a_probs
                    else "random normal")
            return (lambda: torch.mm(a, b, out=out), 2.0 * n**3, "FLOP",
                    f"torch.mm {n}^3 {str(dtype).replace('torch.', '')} {data}")
        return setup

    def fp8():
        if not hasattr(torch, "_scaled_mm"):
            raise RuntimeError("torch._scaled_mm missing")
        n = 8192
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        return (lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                         out_dtype=torch.bfloat16, use_fast_accum=True),
                2.0 * n**3, "FLOP", "torch._scaled_mm 8192^3 e4m3 x e4m3 -> bf16, fast accum")

    def copy():
        nbytes = 512 * 2**20
        pairs = [(torch.randn(nbytes // 4, device="cuda"),
                  torch.empty(nbytes // 4, device="cuda")) for _ in range(2)]
        state = [0]

        def step():
            src, dst = pairs[state[0] % 2]
            state[0] += 1
            dst.copy_(src)
        return step, 2.0 * nbytes, "B", "Tensor.copy_ 512 MiB fp32, 2 pairs rotated (read+write)"

    def regloop(kind, grid_per_sm=8, iters=None, one_cta=False, warps=4, chains=8,
                sm_share=1.0):
        def setup():
            from perfsim.validate import _bench_kernels as bk

            block = warps * 32 * chains
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            grid = (1,) if one_cta else (max(1, round(sms * sm_share)) * grid_per_sm,)
            x = torch.rand(grid[0] * block, device="cuda") * 0.5 - 1.0
            y = torch.empty_like(x)
            it = iters
            if kind == "alu":
                xi = torch.randint(0, 1 << 30, (grid[0] * block,), device="cuda",
                                   dtype=torch.int32)
                yi = torch.empty_like(xi)

                def step():
                    bk.alu_loop[grid](xi, yi, it, 0x5A5A5A5, 12345, BLOCK=block,
                                      UNROLL=bk.UNROLL, num_warps=warps)
                ops, unit = 2 * grid[0] * block * it * bk.UNROLL, "ALU op (LOP3 + IADD3 = 2)"
                desc = (f"Triton alu_loop, {grid[0]} CTAs x {warps} warps x {chains} chains, "
                        f"iters {it}")
            elif kind == "exp2":
                def step():
                    bk.exp2_loop[grid](x, y, it, BLOCK=block, UNROLL=bk.UNROLL, num_warps=warps)
                ops, unit = grid[0] * block * it * bk.UNROLL, "exp2"
                desc = (f"Triton exp2_loop, {grid[0]} CTAs x {warps} warps x {chains} chains, "
                        f"iters {it}")
            else:
                def step():
                    bk.fma_loop[grid](x, y, it, 0.9999, 1e-4, BLOCK=block, UNROLL=bk.UNROLL,
                                      num_warps=warps)
                ops, unit = 2 * grid[0] * block * it * bk.UNROLL, "FLOP (fp32 FMA = 2)"
                desc = (f"Triton fma_loop, {grid[0]} CTA{'s' if grid[0] > 1 else ''} x {warps} "
                        f"warps x {chains} chains, iters {it}")
            return step, float(ops), unit, desc
        return setup

    def half_gemm(a_probs=False):
        n = 4096
        a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        if a_probs:
            a = probs(n, torch.bfloat16)
        out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(20):
            torch.mm(a, b, out=out)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(50):
            torch.mm(a, b, out=out)
        e.record()
        torch.cuda.synchronize()
        t_gemm = s.elapsed_time(e) / 50 * 1e-3
        cycles = int(t_gemm * 1.75e9)  # about the GEMM's length at a ~1.75 GHz SM clock

        def step():
            torch.mm(a, b, out=out)
            torch.cuda._sleep(cycles)
        return (step, 2.0 * n**3, "FLOP",
                f"torch.mm {n}^3 bf16 {'A softmax numerators, B ' if a_probs else ''}random "
                f"then torch.cuda._sleep({cycles} cycles); GEMM "
                f"alone {t_gemm * 1e3:.3f} ms per call (so about half utilisation)")

    def l2_walk(mode):
        # probe_l2's walk over a 16 MiB L2-resident fp32 buffer, 8 programs per SM:
        # "read" loads the chunks (8.5 TB/s there: the energy of moving a byte from L2 into an
        # SM; one FADD per 4 B rides along, subtracted where the energy is derived);
        # "reduce" adds a tile into each chunk with tl.atomic_add (atom.global.add.v4.f32;
        # flash-attn 2 sends its dQ this way, per element); "bulk_reduce" adds it as one TMA
        # bulk reduction per chunk (cp.reduce.async.bulk, as FA3-class kernels send their dQ
        # partial tiles). The added tile does not change inside the loop (no FP32 work per
        # byte) and the buffer stays in L2 (no HBM traffic once resident).
        def setup():
            import triton

            from perfsim.validate.probe_l2 import BLOCK, ITERS
            from perfsim.validate.probe_l2 import _kernels as l2_kernels

            walk, walk_bulk = l2_kernels()
            if mode == "bulk_reduce":        # scratch for the in-kernel tensor descriptor
                triton.set_allocator(lambda size, align, stream: torch.empty(
                    size, dtype=torch.int8, device="cuda"))
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            n_chunks = 16 * 2**20 // (4 * BLOCK)
            buf = torch.zeros(n_chunks * BLOCK, device="cuda", dtype=torch.float32)
            grid, iters = 8 * sms, 8 * ITERS
            out = torch.empty(grid, device="cuda", dtype=torch.float32)

            def step():
                if mode == "bulk_reduce":
                    walk_bulk[(grid,)](buf, out, n_chunks, grid, iters, BLOCK=BLOCK,
                                       num_warps=4)
                else:
                    walk[(grid,)](buf, out, n_chunks, grid, iters, BLOCK=BLOCK,
                                  REDUCE=(mode == "reduce"), num_warps=8)
            what = {"read": ("B (L2 -> SM)", "read walk", "8 warps"),
                    "reduce": ("B (fp32 reduced into L2)", "reduction walk",
                               "8 warps, tl.atomic_add per element"),
                    "bulk_reduce": ("B (fp32 reduced into L2)", "reduction walk",
                                    "4 warps, one TMA bulk reduction per chunk")}[mode]
            return (step, float(grid * iters * BLOCK * 4), what[0],
                    f"probe_l2 {what[1]}, 16 MiB buffer in L2, {grid} CTAs x {what[2]}, "
                    f"{iters} chunks of {BLOCK * 4} B each")
        return setup

    def wgmma_loop(ctas_per_sm, a_in_registers=False, bn=256):
        # probe_mma_smem's loop on its WGMMA tile (64 x bn x 64, one warpgroup): both
        # operands stay in shared memory, no load from L2 or HBM inside the loop; with
        # ``a_in_registers`` A is computed in registers (probe_mma_smem._kernel_rs), so the
        # WGMMAs read A from registers and B from shared memory, as attention's P @ V does
        def setup():
            from perfsim.validate.probe_mma_smem import _kernel, _kernel_rs, wgmma_operand_forms

            kernel = _kernel_rs() if a_in_registers else _kernel()
            extra = (1.0,) if a_in_registers else ()      # the RS kernel's run-time scale
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            bm, bk, iters = 64, 64, 4096 * 256 // bn
            a = torch.randn(bm, bk, device="cuda", dtype=torch.bfloat16) / 8
            b = torch.randn(bk, bn, device="cuda", dtype=torch.bfloat16) / 8
            grid = ctas_per_sm * sms
            y = torch.empty(grid * bm * bn, device="cuda", dtype=torch.float32)
            compiled = kernel[(grid,)](a, b, y, iters, *extra, BM=bm, BN=bn, BK=bk,
                                       num_warps=4)
            forms = wgmma_operand_forms(compiled.asm.get("ptx", ""))
            where = ("A computed in registers (A x 1.0), B in shared memory" if a_in_registers
                     else "operands in shared memory")

            def step():
                kernel[(grid,)](a, b, y, iters, *extra, BM=bm, BN=bn, BK=bk, num_warps=4)
            return (step, 2.0 * bm * bn * bk * iters * grid, "FLOP",
                    f"Triton acc += A @ B (wgmma m64n{bn}k16, {where}; PTX operand forms "
                    f"{forms}; random normal / 8), {grid} CTAs x 4 warps, {iters} iterations")
        return setup

    def spill_loop(m, n, factor):
        # probe_spill_cost's kernel: one 4-warp CTA per SM, two MMAs per step into two fp32
        # M x N accumulators; at M = N = 128 (or 64 x 256) they need more than 255 registers
        # and ptxas spills them to local memory, which Nsight Compute counts (reload and store
        # per thread and step; lts__t_bytes: through the L2); M x N = 64 x 128 or 128 x 64 at
        # twice the steps is the control (the same FLOPs, no spill). The energy of a spilled
        # byte is (W - static - the control's energy per FLOP x FLOP/s) / local bytes per
        # second, the local bytes from that profile (reports/h200/probes/probe_spill_cost.json)
        def setup():
            from perfsim.validate.probe_spill_cost import STEPS, launcher

            k, steps = 64, STEPS * factor
            step, sms = launcher(m, n, k, steps)
            compiled = step()
            return (step, 2.0 * 2 * m * n * k * steps * sms, "FLOP",
                    f"probe_spill_cost two_acc_loop M={m} N={n} K={k}, {steps} steps, {sms} "
                    f"CTAs x 4 warps; n_regs {getattr(compiled, 'n_regs', None)}, n_spills "
                    f"{getattr(compiled, 'n_spills', None)}")
        return setup

    def tile_walk(mode, where, group=1, stride=0, lag=0):
        # _bench_kernels.tile_walk: [64, 64] bf16 boxes of a [rows, 256] tensor, each fed to a
        # WGMMA with N = 16 (16 FLOP per byte loaded), 2 programs per SM. ``where``: "l2" =
        # 8 MiB, resident in L2 after the first call; "hbm" = 512 MiB, read from HBM.
        # ``mode``: "tma" (descriptor loads, cp.async.bulk.tensor), "ptr" (pointer loads,
        # cp.async), "none" (no load in the loop: the WGMMAs and weight loads alone). The
        # energy per byte of a path is (W - static - the "none" loop's energy per FLOP x
        # FLOP/s) / bytes per second. ``group``: programs reading the same tiles in step;
        # ``stride``/``lag``: pairs p, p + stride read the same tiles, ``lag`` steps apart.
        def setup():
            import re

            import triton
            from triton.tools.tensor_descriptor import TensorDescriptor

            from perfsim.validate._bench_kernels import tile_walk as kernel

            d, bm, bc, bn = 256, 64, 64, 16
            rows = (16384 if where == "l2" else 1 << 20)
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            grid = 2 * sms
            iters = {"l2": 1024, "hbm": 256}[where]
            x = torch.randn(rows, d, device="cuda", dtype=torch.bfloat16)
            desc = TensorDescriptor(x, shape=[rows, d], strides=[d, 1], block_shape=[bm, bc])
            w = torch.randn(d, bn, device="cuda", dtype=torch.bfloat16) / 16
            y = torch.empty(grid * bm * bn, device="cuda", dtype=torch.float32)
            code = {"tma": 0, "ptr": 1, "none": 2}[mode]
            nsub = d // bc

            def step():
                return kernel[(grid,)](desc, x, w, y, rows // bm, iters, D=d, BM=bm, BC=bc,
                                       NSUB=nsub, BN=bn, MODE=code, GROUP=group,
                                       STRIDE=stride, LAG=lag, num_warps=4, num_stages=3)
            ptx = step().asm.get("ptx", "")
            census = {"cp.async.bulk.tensor": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
                      "cp.async (LSU)": len(re.findall(r"cp\.async\.(?:ca|cg)\.", ptx)),
                      "wgmma": len(re.findall(r"wgmma\.mma_async", ptx))}
            loaded = grid * iters * nsub * bm * bc * 2 if mode != "none" else 0
            flops = 2.0 * grid * iters * nsub * bm * bc * bn
            return (step, flops, "FLOP",
                    f"tile_walk {mode} {where}: {grid} CTAs x 4 warps, "
                    + (f"pairs p, p + {stride} reading the same tiles {lag} steps apart, "
                       if stride else f"in groups of {group} reading the same tiles in step, ")
                    + f"{iters} steps of {nsub} "
                    f"[{bm}, {bc}] bf16 boxes of a [{rows}, {d}] tensor, WGMMA N = {bn}; "
                    f"bytes loaded per call {loaded}; PTX {census}; triton {triton.__version__}")
        return setup

    return {
        "walk_tma_l2": tile_walk("tma", "l2"),
        "walk_ptr_l2": tile_walk("ptr", "l2"),
        "walk_none_l2": tile_walk("none", "l2"),
        "walk_tma_hbm": tile_walk("tma", "hbm"),
        "walk_ptr_hbm": tile_walk("ptr", "hbm"),
        "walk_tma_l2_g2": tile_walk("tma", "l2", group=2),
        "walk_tma_l2_g4": tile_walk("tma", "l2", group=4),
        "walk_tma_l2_g8": tile_walk("tma", "l2", group=8),
        "walk_tma_l2_g16": tile_walk("tma", "l2", group=16),
        "walk_tma_l2_g32": tile_walk("tma", "l2", group=32),
        "walk_tma_l2_g132": tile_walk("tma", "l2", group=132),
        # which pairs merge: neighbours (1), 2, 8, 33 and 66 apart, and the CTA in the same
        # SM's second slot (132: the block scheduler fills every SM once, then again); and
        # how far apart in time (neighbours 1, 2 and 8 steps behind)
        **{f"walk_tma_l2_pair{s}": tile_walk("tma", "l2", stride=s)
           for s in (1, 2, 8, 33, 66, 132)},
        **{f"walk_tma_l2_pair1_lag{k}": tile_walk("tma", "l2", stride=1, lag=k)
           for k in (1, 2, 8)},
        "walk_ptr_l2_pair1": tile_walk("ptr", "l2", stride=1),
        "walk_ptr_l2_pair1_lag1": tile_walk("ptr", "l2", stride=1, lag=1),
        "walk_ptr_l2_g8": tile_walk("ptr", "l2", group=8),
        "walk_tma_hbm_g8": tile_walk("tma", "hbm", group=8),
        "spill_m128_n128": spill_loop(128, 128, 1),
        "spill_m64_n256": spill_loop(64, 256, 1),
        "nospill_m64_n128": spill_loop(64, 128, 2),
        "nospill_m128_n64": spill_loop(128, 64, 2),
        "wgmma_rs_1cta": wgmma_loop(1, a_in_registers=True),
        "wgmma_rs_2cta": wgmma_loop(2, a_in_registers=True),
        "l2_read": l2_walk("read"),
        "l2_reduce": l2_walk("reduce"),
        "l2_bulk_reduce": l2_walk("bulk_reduce"),
        "wgmma_smem_1cta": wgmma_loop(1),
        "wgmma_smem_2cta": wgmma_loop(2),
        # the instruction's N (a forward's P @ V has N = d): shared-memory operand bytes per
        # FLOP grow as N shrinks (A, 64 x 16, is read once per N columns)
        "wgmma_smem_2cta_n128": wgmma_loop(2, bn=128),
        "wgmma_smem_2cta_n64": wgmma_loop(2, bn=64),
        "spin_1cta": regloop("fma", iters=100000, one_cta=True),
        "hbm_copy": copy,
        "gemm_bf16": gemm(torch.bfloat16),
        "gemm_fp16": gemm(torch.float16),
        "gemm_bf16_zeros": gemm(torch.bfloat16, zeros=True),
        # one operand zero, as a tile's padding where only one side is zero-filled (the
        # padded d columns of V against a nonzero P; padded query rows of Q against K)
        "gemm_bf16_b_zeros": gemm(torch.bfloat16, b_zeros=True),
        "gemm_fp8_e4m3": fp8,
        "mufu_exp2": regloop("exp2", iters=1024),
        "fp32_fma": regloop("fma", iters=4096),
        # the ALU pipe's energy per instruction (power.py charges ALU_SLOTS FMA slots each,
        # ASSUMED until this ran)
        "alu_int": regloop("alu", iters=4096),
        "gemm_bf16_half_duty": half_gemm,
        # A as attention's P (exp(s - rowmax), all in (0, 1]): does the tensor energy per FLOP
        # depend on P's narrower values, as it does on zeros?
        "gemm_bf16_probs": gemm(torch.bfloat16, a_probs=True),
        "gemm_bf16_probs_half_duty": lambda: half_gemm(a_probs=True),
        # issue rate at fixed residency: one CTA per SM, `warps` warps, `chains` independent
        # dependent chains per thread (FMA latency ~4 cycles: one chain per warp issues about
        # one instruction per 4 cycles). Power against FMA rate at every SM resident, and at
        # half the SMs: whether an SM that is resident and issuing draws power beyond its
        # operations' (validate/README.md, "Power of a busy SM")
        "fma_w1_c1": regloop("fma", grid_per_sm=1, iters=16384, warps=1, chains=1),
        "fma_w4_c1": regloop("fma", grid_per_sm=1, iters=16384, warps=4, chains=1),
        "fma_w4_c2": regloop("fma", grid_per_sm=1, iters=16384, warps=4, chains=2),
        "fma_w4_c4": regloop("fma", grid_per_sm=1, iters=16384, warps=4, chains=4),
        "fma_w8_c4": regloop("fma", grid_per_sm=1, iters=16384, warps=8, chains=4),
        "fma_w4_c4_half": regloop("fma", grid_per_sm=1, iters=16384, warps=4, chains=4,
                                  sm_share=0.5),
        "fma_w1_c1_half": regloop("fma", grid_per_sm=1, iters=16384, warps=1, chains=1,
                                  sm_share=0.5),
        "fma_w4_c8": regloop("fma", grid_per_sm=1, iters=8192, warps=4, chains=8),
        "fma_w32_c1": regloop("fma", grid_per_sm=1, iters=8192, warps=32, chains=1),
        "fma_8x_w4_c4": regloop("fma", grid_per_sm=8, iters=4096, warps=4, chains=4),
        "fma_8x_w1_c8": regloop("fma", grid_per_sm=8, iters=4096, warps=1, chains=8),
        "fma_w16_c2": regloop("fma", grid_per_sm=1, iters=8192, warps=16, chains=2),
        "exp2_w4_c1": regloop("exp2", grid_per_sm=1, iters=4096, warps=4, chains=1),
        "exp2_w4_c4": regloop("exp2", grid_per_sm=1, iters=4096, warps=4, chains=4),
    }


BENCHES = ("idle", "spin_1cta", "hbm_copy", "gemm_bf16", "gemm_fp16", "gemm_bf16_zeros",
           "gemm_bf16_b_zeros",
           "gemm_fp8_e4m3", "mufu_exp2", "fp32_fma", "alu_int", "gemm_bf16_half_duty", "l2_read",
           "wgmma_smem_1cta", "wgmma_smem_2cta", "wgmma_smem_2cta_n128",
           "wgmma_smem_2cta_n64", "l2_reduce", "l2_bulk_reduce",
           "fma_w1_c1", "fma_w4_c1", "fma_w4_c2", "fma_w4_c4", "fma_w8_c4", "fma_w4_c4_half",
           "fma_w1_c1_half", "fma_w4_c8", "fma_w32_c1", "fma_8x_w4_c4", "fma_8x_w1_c8",
           "fma_w16_c2", "exp2_w4_c1", "exp2_w4_c4", "gemm_bf16_probs",
           "gemm_bf16_probs_half_duty", "wgmma_rs_1cta", "wgmma_rs_2cta",
           "walk_tma_l2", "walk_ptr_l2", "walk_none_l2", "walk_tma_hbm", "walk_ptr_hbm",
           "walk_tma_l2_g8", "walk_ptr_l2_g8", "walk_tma_hbm_g8", "walk_tma_l2_g2",
           "walk_tma_l2_g4", "walk_tma_l2_g16", "walk_tma_l2_g32", "walk_tma_l2_g132",
           *(f"walk_tma_l2_pair{s}" for s in (1, 2, 8, 33, 66, 132)),
           *(f"walk_tma_l2_pair1_lag{k}" for k in (1, 2, 8)), "walk_ptr_l2_pair1",
           "walk_ptr_l2_pair1_lag1", "spill_m128_n128", "nospill_m64_n128", "spill_m64_n256",
           "nospill_m128_n64")


def _trace(samples, t0):
    return [{"t": round(s["t"] - t0, 5),
             "sm_mhz": None if s.get("sm_hz") is None else round(s["sm_hz"] / 1e6),
             "mem_mhz": None if s.get("mem_hz") is None else round(s["mem_hz"] / 1e6),
             "p_inst_w": s.get("power_inst_w"), "p_avg_w": s.get("power_avg_w"),
             "temp_c": s.get("temp_c"), "reasons": s.get("reasons")} for s in samples]


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _phase_stats(trace, ends, ops, lo, hi):
    sel = [s for s in trace if lo <= s["t"] < hi]
    n_it = sum(1 for t in ends if lo <= t < hi)
    mask = 0
    for s in sel:
        mask |= s["reasons"] or 0
    from perfsim.validate.nvml_sampler import reason_names

    return {"from_s": lo, "to_s": hi, "n_samples": len(sel),
            "sm_mhz_mean": _mean([s["sm_mhz"] for s in sel]),
            "power_inst_w_mean": _mean([s["p_inst_w"] for s in sel]),
            "power_avg_w_mean": _mean([s["p_avg_w"] for s in sel]),
            "temp_c_mean": _mean([s["temp_c"] for s in sel]),
            "iterations": n_it,
            "ops_per_s": n_it * ops / (hi - lo) if ops and hi > lo else None,
            "reasons_seen": reason_names(mask)}


def run_one(name, setup, sampler, duration_s):
    import torch

    rec = {"name": name}
    if name == "idle":
        torch.cuda.synchronize()
        time.sleep(0.5)
        sampler.start()
        t0 = time.perf_counter()
        time.sleep(1.0)
        trace = _trace(sampler.stop(), t0)
        rec.update(description="nothing running (1 s)", unit=None, ops_per_iteration=None,
                   trace=trace, windows=[],
                   steady=_phase_stats(trace, [], None, 0.0, 1.0),
                   burst=_phase_stats(trace, [], None, 0.0, BURST_S))
        return rec
    step, ops, unit, desc = setup()
    step()
    torch.cuda.synchronize()
    w = time.perf_counter()
    step()
    torch.cuda.synchronize()
    est = max(time.perf_counter() - w, 1e-5)
    lag = max(2, int(QUEUE_S / est))
    rec.update(description=desc, unit=unit, ops_per_iteration=ops)
    sampler.start()
    time.sleep(IDLE_GAP_S)
    start = torch.cuda.Event(enable_timing=True)
    evs = []
    t0 = time.perf_counter()
    start.record()
    while time.perf_counter() - t0 < duration_s:
        step()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        evs.append(e)
        if len(evs) > lag:
            evs[-lag - 1].synchronize()
    torch.cuda.synchronize()
    t_end = time.perf_counter()
    time.sleep(POST_S)
    trace = _trace(sampler.stop(), t0)
    ends = [start.elapsed_time(e) * 1e-3 for e in evs]
    run_s = ends[-1] if ends else t_end - t0
    windows = []
    k = 0
    nwin = int(run_s / WINDOW_S) + 1
    for i in range(nwin):
        hi = (i + 1) * WINDOW_S
        n = 0
        while k < len(ends) and ends[k] < hi:
            n += 1
            k += 1
        windows.append([round(hi, 3), n, n * ops / WINDOW_S])
    rec.update(trace=trace, windows=windows, window_s=WINDOW_S, run_s=run_s,
               iterations=len(ends), iteration_end_s_first_300ms=[
                   round(t, 6) for t in ends if t < 0.3][:2000],
               steady=_phase_stats(trace, ends, ops, max(0.0, run_s - STEADY_S), run_s),
               burst=_phase_stats(trace, ends, ops, 0.0, BURST_S),
               whole=_phase_stats(trace, ends, ops, 0.0, run_s))
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m perfsim.validate.power_probe")
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration", type=float, default=3.5)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    import torch

    from perfsim.validate.nvml_sampler import NvmlSampler

    sampler = NvmlSampler(period_s=0.005)
    benches = _benches()
    names = [n for n in BENCHES if not args.only or n in args.only.split(",")]
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "limits": sampler.device_limits(), "sample_period_s": 0.005,
           "method": __doc__.strip().split("\n\n")[1], "started_at":
           time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "benchmarks": []}
    print(json.dumps(doc["limits"]), flush=True)
    table = []
    for name in names:
        try:
            rec = run_one(name, benches.get(name), sampler, args.duration)
        except Exception as exc:  # noqa: BLE001 - recorded
            try:
                sampler.stop()
            except Exception:  # noqa: BLE001
                pass
            rec = {"name": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        doc["benchmarks"].append(rec)
        with open(args.out, "w") as fh:
            json.dump(doc, fh)
        st, bu = rec.get("steady") or {}, rec.get("burst") or {}

        def f(x, scale=1.0, fmt="{:.0f}"):
            return fmt.format(x / scale) if isinstance(x, (int, float)) else "-"

        row = [name, f(st.get("sm_mhz_mean")),
               f(st.get("power_inst_w_mean") or st.get("power_avg_w_mean")),
               f(st.get("ops_per_s"), 1, "{:.3e}"), f(bu.get("sm_mhz_mean")),
               f(bu.get("power_inst_w_mean") or bu.get("power_avg_w_mean")),
               f(bu.get("ops_per_s"), 1, "{:.3e}"),
               ",".join(st.get("reasons_seen", [])) or rec.get("error", "")]
        table.append(row)
        print(f"{name}: " + " ".join(row[1:]), flush=True)     # progress as each one ends
    from perfsim.cli.common import print_table

    print_table("power microbenchmarks", ["bench", "steady MHz", "steady W", "steady ops/s",
                                          "burst MHz", "burst W", "burst ops/s", "reasons"],
                table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
