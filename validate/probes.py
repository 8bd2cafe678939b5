"""GPU probes behind model decisions, run on the H200 with ``python -m
perfsim.validate.probes OUTDIR [PARTS]`` (PARTS: comma-separated, default
``clocks,fa1,conversions,mem_chain``; ``coresident`` on request). Results land in
``OUTDIR/probes-<parts>.json`` (``clocks`` also writes the nvidia-smi trace ``OUTDIR/smi.csv``);
the committed H200 results are in ``validate/reports/h200/probes/`` (renamed by content).

1. ``clocks``: the SM clock and board power while dense tensor work runs for seconds. Each
   workload runs ~3 s after 2 s idle; throughput is taken per 0.25 s window and joined with
   ``nvidia-smi`` samples (50 ms). Workloads: cuBLAS bf16 8192³ GEMM (random normal, and all
   zeros: same instructions, less switching power), SDPA cuDNN / flash and the own FA2/FA3-style
   Triton kernels at P3 Table 2's shape (B=4, N=8448, H=16, d=128, fp16, non-causal).
   Question: are the datasheet tensor peaks reachable, and if not, is it clock (power) or
   per-clock efficiency?
2. ``fa1``: the FA1 Triton kernel's inner step, taken apart. Variants of the same kernel
   (``validate/kernels/fa1.py``): the shipped one; ``num_stages`` 2 and 3 (Triton software-
   pipelines the inner loop's loads); 8 warps; the O update with a per-row reciprocal instead of
   a division per element; and two diagnostics that are not FlashAttention: ``no_hbm`` (inner
   steps keep O, ℓ, m in registers: the compute chain alone) and ``no_math`` (the loads and
   stores of each step with a trivial update: the memory chain alone). Per-step time =
   kernel time / (inner steps per CTA × waves).
3. ``conversions``: register-loop rates per clock of exp2, fp32 -> bf16/fp16 converts, and
   both together (does a convert share the exp unit's pipe?); ``PROBE_OPS`` picks loops.
4. ``mem_chain``: the unpipelined load step of ``microbench.load_chain`` on 32 and 132 SMs.
5. ``coresident``: the same step with 1, 2 and 3 CTAs per SM (do their waits overlap?).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from datetime import datetime

import torch
import triton
import triton.language as tl

from perfsim.validate.kernels import fa2 as k_fa2
from perfsim.validate.kernels import fa3 as k_fa3
from perfsim.validate.kernels._common import LOG2_E
from perfsim.validate.kernels.configs import fa1 as fa1_config

TABLE2 = (4, 16, 8448, 128)          # P3 Table 2: batch, heads, seqlen, head dim
SMI_FIELDS = "timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"


# ----------------------------------------------------------------------------- clocks
def _smi(path):
    fields = SMI_FIELDS
    probe = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                           capture_output=True, text=True)
    if probe.returncode != 0:            # older drivers call it clocks_throttle_reasons
        fields = fields.replace("clocks_event_reasons", "clocks_throttle_reasons")
    out = open(path, "w")
    return subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,"
                             "nounits", "-lms", "50"], stdout=out, stderr=subprocess.STDOUT)


def _windows(name, fn, flop, seconds=3.0, window=0.25):
    """Run ``fn`` back to back for ``seconds``; rate per ``window`` of wall time."""
    fn()
    torch.cuda.synchronize()
    out, end = [], time.time() + seconds
    while time.time() < end:
        t0, n = time.time(), 0
        while time.time() - t0 < window:
            fn()
            n += 1
            if n % 4 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        t1 = time.time()
        out.append({"workload": name, "t_start": t0, "t_end": t1,
                    "tflops": flop * n / (t1 - t0) / 1e12})
    return out


def _attn_inputs(dtype=torch.float16):
    b, h, n, d = TABLE2
    return [torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3)]


def clocks(outdir):
    b, h, n, d = TABLE2
    attn_flop = 4 * b * h * n * n * d
    g = 8192
    a = torch.randn(g, g, device="cuda", dtype=torch.bfloat16)
    bm = torch.randn(g, g, device="cuda", dtype=torch.bfloat16)
    z = torch.zeros_like(a)
    q, k, v = _attn_inputs()
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(backend):
        def f():
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v)
        return f

    work = [("gemm_bf16_randn", lambda: a @ bm, 2 * g**3),
            ("gemm_bf16_zeros", lambda: z @ z, 2 * g**3),
            ("sdpa_cudnn_table2", sdpa(SDPBackend.CUDNN_ATTENTION), attn_flop),
            ("sdpa_flash_table2", sdpa(SDPBackend.FLASH_ATTENTION), attn_flop),
            ("fa3_triton_table2", lambda: k_fa3.forward(q, k, v, causal=False), attn_flop),
            ("fa2_triton_table2", lambda: k_fa2.forward(q, k, v, causal=False), attn_flop),
            ("gemm_bf16_randn_again", lambda: a @ bm, 2 * g**3)]
    smi = _smi(os.path.join(outdir, "smi.csv"))
    rows = []
    try:
        for name, fn, flop in work:
            time.sleep(2.0)
            rows += _windows(name, fn, flop)
            print(f"{name}: last window {rows[-1]['tflops']:.0f} TFLOP/s", flush=True)
    finally:
        time.sleep(0.3)
        smi.terminate()
    return rows, _join(rows, os.path.join(outdir, "smi.csv"))


def _join(rows, smi_path):
    """Attach the mean SM clock / power of the nvidia-smi samples inside each window."""
    samples = []
    for line in open(smi_path):
        parts = [p.strip() for p in line.split(",")]
        try:
            ts = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((ts, float(parts[1]), float(parts[2]), parts[4]))
        except (ValueError, IndexError):
            continue
    summary = {}
    for r in rows:
        inside = [s for s in samples if r["t_start"] <= s[0] <= r["t_end"]]
        r["sm_clock_mhz"] = sum(s[1] for s in inside) / len(inside) if inside else None
        r["power_w"] = sum(s[2] for s in inside) / len(inside) if inside else None
        r["reasons"] = sorted({s[3] for s in inside})
    for name in dict.fromkeys(r["workload"] for r in rows):
        ws = [r for r in rows if r["workload"] == name]
        tail = ws[len(ws) // 2:]                      # the second half: the steady state
        clk = [r["sm_clock_mhz"] for r in tail if r["sm_clock_mhz"]]
        pw = [r["power_w"] for r in tail if r["power_w"]]
        tf = sum(r["tflops"] for r in tail) / len(tail)
        mean_clk = sum(clk) / len(clk) if clk else None
        summary[name] = {
            "first_window_tflops": ws[0]["tflops"], "steady_tflops": tf,
            "steady_sm_clock_mhz": mean_clk, "steady_power_w": sum(pw) / len(pw) if pw else None,
            "reasons": sorted({x for r in tail for x in r["reasons"]}),
            "steady_flop_per_clk_per_sm": tf * 1e12 / (132 * mean_clk * 1e6) if mean_clk
            else None}
    return summary


# ----------------------------------------------------------------------------- fa1 variants
@triton.jit
def _fa1_variant(Q, K, V, O_ws, L_ws, M_ws, Sink, qk_scale, seqlen, HEAD_DIM: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, RECIP: tl.constexpr,
                 HBM: tl.constexpr, MATH: tl.constexpr):
    """Non-causal FA1 forward (``validate/kernels/fa1.py``) with the probe switches."""
    bh = tl.program_id(0).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM)
    base = bh * seqlen * HEAD_DIM
    sbase = bh * seqlen
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    q0 = tl.load(Q + base + tl.arange(0, BLOCK_M)[:, None] * HEAD_DIM + offs_d[None, :])
    l_r = tl.zeros([BLOCK_M], tl.float32)
    m_r = tl.full([BLOCK_M], -1e30, tl.float32)
    for start_n in range(0, seqlen, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv = base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv)
        v = tl.load(V + kv)
        for start_m in range(0, seqlen, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            tile = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
            if HBM:
                q = tl.load(Q + tile)
                o = tl.load(O_ws + tile)
                l_i = tl.load(L_ws + sbase + offs_m)
                m_i = tl.load(M_ws + sbase + offs_m)
            else:
                q, o, l_i, m_i = q0, acc, l_r, m_r
            if MATH:
                s = tl.dot(q, tl.trans(k)) * qk_scale
                m_tile = tl.max(s, 1)
                p = tl.exp2(s - m_tile[:, None])
                l_tile = tl.sum(p, 1)
                m_new = tl.maximum(m_i, m_tile)
                alpha = tl.exp2(m_i - m_new)
                beta = tl.exp2(m_tile - m_new)
                l_new = alpha * l_i + beta * l_tile
                o = (l_i * alpha)[:, None] * o + beta[:, None] * tl.dot(p.to(v.dtype), v)
                if RECIP:
                    o = o * (1.0 / l_new)[:, None]
                else:
                    o = o / l_new[:, None]
            else:
                o = o + q.to(tl.float32)
                l_new, m_new = l_i + 1.0, m_i
            if HBM:
                tl.store(O_ws + tile, o)
                tl.store(L_ws + sbase + offs_m, l_new)
                tl.store(M_ws + sbase + offs_m, m_new)
            else:
                acc, l_r, m_r = o, l_new, m_new
        tl.debug_barrier()
    rows = tl.arange(0, BLOCK_M)
    tl.store(Sink + bh * BLOCK_M * HEAD_DIM + rows[:, None] * HEAD_DIM + offs_d[None, :],
             acc + (l_r + m_r)[:, None])


FA1_VARIANTS = {  # name: (num_stages, num_warps, RECIP, HBM, MATH)
    "shipped": (1, 4, False, True, True),
    "stages2": (2, 4, False, True, True),
    "stages3": (3, 4, False, True, True),
    "warps8": (1, 8, False, True, True),
    "reciprocal": (1, 4, True, True, True),
    "stages2_reciprocal": (2, 4, True, True, True),
    "no_hbm": (1, 4, False, False, True),
    "no_math": (1, 4, False, True, False),
}
FA1_SHAPES = [(2, 16, 4096, 128), (2, 16, 4096, 64), (16, 16, 1024, 128), (32, 32, 512, 64),
              (1, 16, 8192, 128)]


def fa1(outdir):
    rows = []
    for b, h, n, d in FA1_SHAPES:
        cfg = fa1_config(b, h, h, n, n, d, causal=False, dtype="bf16")
        bm, bn = cfg["block_m"], cfg["block_n"]
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v).float()
        o_ws = torch.empty(b, h, n, d, device="cuda", dtype=torch.float32)
        l_ws = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
        m_ws = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
        sink = torch.empty(b * h, bm, d, device="cuda", dtype=torch.float32)
        steps = (n // bn) * (n // bm)
        waves = math.ceil(b * h / 132)
        for name, (stages, warps, recip, hbm, mth) in FA1_VARIANTS.items():
            def run():
                _fa1_variant[(b * h,)](q, k, v, o_ws, l_ws, m_ws, sink, d**-0.5 * LOG2_E, n,
                                       HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, RECIP=recip,
                                       HBM=hbm, MATH=mth, num_stages=stages, num_warps=warps)
            try:
                o_ws.zero_(), l_ws.zero_(), m_ws.fill_(-1e30)   # Algorithm 1 line 2
                run()
                check = (o_ws - ref).abs().max().item() if hbm and mth else None
                t = triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median") / 1e3
                err = None
            except Exception as exc:  # noqa: BLE001 - a failing variant is a result
                t, check, err = None, None, f"{type(exc).__name__}: {str(exc)[:200]}"
            step_s = t / (steps * waves) if t else None
            rows.append({"shape": [b, h, n, d], "block_m": bm, "block_n": bn, "variant": name,
                         "num_stages": stages, "num_warps": warps, "seconds": t,
                         "step_us": step_s * 1e6 if step_s else None,
                         "bytes_per_step": bm * d * 2 + 2 * bm * d * 4 + 4 * bm * 4,
                         "max_abs_error_vs_sdpa": check, "error": err})
            print(f"fa1 {b}x{h}x{n}x{d} {name}: "
                  f"{'%.3f us/step' % (step_s * 1e6) if step_s else err}", flush=True)
    return rows


# ----------------------------------------------------------------------------- conversions
@triton.jit
def _unit_loop(X, Y, iters, BLOCK: tl.constexpr, UNROLL: tl.constexpr, OP: tl.constexpr):
    """Register loop like ``_bench_kernels.exp2_loop``; OP 0: ``x <- -2**x`` (MUFU);
    1: ``x <- f32(bf16(x))`` (one fp32 -> bf16 conversion per element); 2: the same to fp16;
    3: both 0 and 1 per step (do the conversions share the exp unit's pipe?); 4: ``x <- max(x,
    0.999 x)`` (an FMUL then an FMNMX)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    for _ in range(iters):
        for _u in tl.static_range(UNROLL):
            if OP == 0:
                x = -tl.exp2(x)
            elif OP == 1:
                x = -(x.to(tl.bfloat16).to(tl.float32))
            elif OP == 2:
                x = -(x.to(tl.float16).to(tl.float32))
            elif OP == 3:
                x = -(tl.exp2(x).to(tl.bfloat16).to(tl.float32))
            elif OP == 4:
                x = -tl.maximum(x, x * 0.999)
            elif OP == 5:
                x = tl.fma(x, 0.999, 0.001).to(tl.bfloat16).to(tl.float32)
            elif OP == 6:
                x = tl.fma(x, 0.999, 0.001)
            elif OP == 7:
                x = tl.fma(x, 0.999, 0.001).to(tl.float16).to(tl.float32)
            elif OP == 8:
                x = tl.fma(-tl.exp2(x), 0.999, 0.001).to(tl.bfloat16).to(tl.float32)
            elif OP == 9:
                x = tl.fma(-tl.exp2(x), 0.999, 0.001).to(tl.float16).to(tl.float32)
            else:
                x = tl.fma(-tl.exp2(x), 0.999, 0.001)
    tl.store(Y + offs, x)


UNIT_OPS = {0: ("exp2", "ex2.approx"), 1: ("cvt_bf16", "cvt.rn.bf16"),
            2: ("cvt_f16", "cvt.rn.f16"), 3: ("exp2_then_cvt_bf16", "ex2.approx"),
            4: ("fmul_fmnmx", "max.f32"), 5: ("fma_then_cvt_bf16", "cvt.rn.bf16"),
            6: ("fma", "fma.rn.f32"), 7: ("fma_then_cvt_f16", "cvt.rn.f16"),
            8: ("exp2_fma_cvt_bf16", "ex2.approx"), 9: ("exp2_fma_cvt_f16", "ex2.approx"),
            10: ("exp2_fma", "ex2.approx")}


def conversions():
    """Results per clock per SM of each register loop (8 CTAs x 4 warps per SM, 8 chains per
    thread), with the SM clock read by nvidia-smi right after each."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    block, iters, unroll = 4 * 32 * 8, 512, 16
    grid = (sms * 8,)
    x = torch.rand(grid[0] * block, device="cuda") * 0.5 - 1.0
    y = torch.empty_like(x)
    out = {}
    ops = [int(o) for o in os.environ.get("PROBE_OPS", "").split(",") if o] or list(UNIT_OPS)
    for op in ops:
        name, ptx_op = UNIT_OPS[op]
        def run():
            return _unit_loop[grid](x, y, iters, BLOCK=block, UNROLL=unroll, OP=op, num_warps=4)
        k = run()
        ptx = k.asm["ptx"]
        t = triton.testing.do_bench(run, warmup=25, rep=300, return_mode="median") / 1e3
        clk = float(subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm",
                                    "--format=csv,noheader,nounits"], capture_output=True,
                                   text=True).stdout.split()[0])
        results = grid[0] * block * iters * unroll
        try:
            sass = k.asm["sass"]
            sass_ops = {op_: sass.count(op_) for op_ in ("F2FP.F16", "F2FP.BF16", "F2F.BF16",
                                                         "MUFU", "FFMA", "FMNMX", "HADD2",
                                                         "PRMT", "SHL", "IMAD.U32")}
        except Exception as exc:  # noqa: BLE001 - nvdisasm missing: PTX only
            sass_ops = {"unavailable": str(exc)[:80]}
        out[name] = {"seconds": t, "sm_clock_mhz_after": clk, "sass_counts": sass_ops,
                     "results_per_clk_per_sm": results / t / (sms * clk * 1e6),
                     "ptx_count": ptx.count(ptx_op),
                     "ptx_cvt_lines": sorted({ln.split()[0] for ln in ptx.splitlines()
                                              if ln.strip().startswith("cvt.")})}
        print(name, out[name], flush=True)
    return out


# ----------------------------------------------------------------------------- memory chain
def mem_chain():
    """Per-step time of an unpipelined load -> store stream (``_bench_kernels.load_chain``: 4
    warps, one CTA per SM, no prefetch) for fp32 tiles of 8-64 KiB read (+ as much written),
    on 32 and on all 132 SMs. ``microbench.load_chain`` fits the 32-SM points."""
    from perfsim.validate import _bench_kernels as bk

    rows = []
    for cols in (32, 64, 128, 256):
        for grid in (32, 132):
            steps = 256
            n = grid * steps * 64 * cols
            x = torch.randn(n, device="cuda")
            y = torch.empty_like(x)

            def run():
                bk.load_chain[(grid,)](x, y, steps, ROWS=64, COLS=cols, num_warps=4,
                                       num_stages=1)
            run()
            t = triton.testing.do_bench(run, warmup=10, rep=200, return_mode="median") / 1e3
            rows.append({"grid": grid, "bytes_read_per_step": 64 * cols * 4,
                         "step_us": t / steps * 1e6})
            print("chain", rows[-1], flush=True)
    return rows


@triton.jit
def _chain_region(X, Y, steps, REGION: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """Like ``_bench_kernels.load_chain`` but each CTA cycles over its own ``REGION`` tiles,
    loaded with ``.cg`` (L2 only): after the first pass every load is an L2 hit."""
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    base = pid * REGION * ROWS * COLS
    for i in range(steps):
        tile = base + (i % REGION) * ROWS * COLS + offs
        t = tl.load(X + tile, cache_modifier=".cg")
        tl.store(Y + tile, t + 1.0)


def coresident():
    """Do the load waits of CTAs sharing an SM overlap? Per-step time of the unpipelined
    stream with 1, 2 and 3 CTAs per SM (grids 132, 264, 396; 4 warps each): from HBM with
    small tiles (2-4 KiB, far below the HBM limit at these grids) and from L2 (each CTA cycles
    over 2 tiles of its own, 8-32 KiB). Same per-step time at 2 and 3 CTAs/SM = waits overlap;
    double = one SM serves one CTA's loads at a time."""
    from perfsim.validate import _bench_kernels as bk

    rows = []
    for source, cols_list in (("hbm", (8, 16)), ("l2", (32, 64, 128))):
        for cols in cols_list:
            for grid in (132, 264, 396):
                steps = 256
                tiles = steps if source == "hbm" else 2
                x = torch.randn(grid * tiles * 64 * cols, device="cuda")
                y = torch.empty_like(x)
                if source == "hbm":
                    def run():
                        bk.load_chain[(grid,)](x, y, steps, ROWS=64, COLS=cols, num_warps=4,
                                               num_stages=1)
                else:
                    def run():
                        _chain_region[(grid,)](x, y, steps, REGION=2, ROWS=64, COLS=cols,
                                               num_warps=4, num_stages=1)
                run()
                t = triton.testing.do_bench(run, warmup=10, rep=200,
                                            return_mode="median") / 1e3
                rows.append({"source": source, "grid": grid, "ctas_per_sm": grid // 132,
                             "bytes_read_per_step": 64 * cols * 4,
                             "step_us": t / steps * 1e6})
                print("coresident", rows[-1], flush=True)
    return rows


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": triton.__version__, "date": datetime.now().isoformat(timespec="seconds")}
    parts = sys.argv[2].split(",") if len(sys.argv) > 2 else ["clocks", "fa1", "conversions",
                                                               "mem_chain"]
    if "clocks" in parts:
        windows, result["clocks"] = clocks(outdir)
        result["clock_windows"] = windows
    if "fa1" in parts:
        result["fa1"] = fa1(outdir)
    if "conversions" in parts:
        result["conversions"] = conversions()
    if "mem_chain" in parts:
        result["mem_chain"] = mem_chain()
    if "coresident" in parts:
        result["coresident"] = coresident()
    with open(os.path.join(outdir, f"probes-{'-'.join(parts)}.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "probe-out")
