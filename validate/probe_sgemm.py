"""FP32 (SIMT) GEMM efficiency by reduction length K on the GPU at hand (issue 9).

SDPA's math backend runs attention's matmuls on float32 copies of 16-bit inputs with TF32 off,
so they execute as cuBLAS SGEMMs on the FP32 pipes (``sm80_xmma_gemm_f32f32…ffma`` and
``cutlass_80_simt_sgemm_128x128_8x4``, validate/reports/h200/probes/eager_bwd/eager_ops.txt).
This microbenchmark times batched SGEMMs (``torch.bmm``, 64 batches) with M = N = 2048 and K
from 32 to 8192, and — as a check, not for fitting — the two shapes attention uses
(``[2048, d] x [d, 2048]ᵀ`` with K = d, and ``[2048, N] x [N, d]`` with K = N), sampling the SM
clock with NVML during each. Output: JSON rows with FLOP/s, the mean NVML SM clock and FLOP
per clock per SM.

    python -m perfsim.validate.probe_sgemm OUT.json       # measure (on the GPU)
    python -m perfsim.validate.probe_sgemm --fit OUT.json # the K law's constants, the widths

The K law (:func:`fit`): a CTA's output tile costs ``K + k0`` steps of ``K`` useful ones (``k0``
for the prologue that fills the pipeline and the epilogue that writes the tile), and the
main loop issues FFMAs in a share ``e_inf`` of the FP32 pipe's slots (the rest: shared-memory
loads, address arithmetic), so the sustained share of the FP32 peak is
``e(K) = e_inf · K / (K + k0)``. Fitted on the square rows only; the attention-shaped rows
are the check.
"""

from __future__ import annotations

import json
import sys

BATCH = 64
SQUARE_K = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
#: Output widths N of the ``pv_n`` rows (P·V and the backward's dQ/dK at head dim N): whether
#: cuBLAS pads a narrow output to a 128-wide tile, read from the kernel it launches.
NARROW = (32, 64, 96, 128, 192, 256)


def _time(fn):
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e-3


def _kernel_name(fn) -> str:
    """Name of the (longest) CUDA kernel ``fn`` launches, from torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    evts = [e for e in prof.key_averages() if e.device_time_total > 0]
    return max(evts, key=lambda e: e.device_time_total).key[:160] if evts else ""


def fit(path: str, fp32_flops_per_clk_per_sm: float = 256.0) -> dict:
    """``{"e_inf", "k0", "rows"}``: least squares of ``1/e = 1/e_inf + (k0/e_inf)/K`` over the
    square rows of a measurement file (``e`` = FLOP/clk/SM over the FP32 peak per clock: 128
    FP32 lanes x 2 on sm_80/sm_90), and each row's measured and fitted ``e``."""
    import numpy as np

    rows = json.load(open(path))["rows"]
    sq = [r for r in rows if r["kind"] == "square"]
    rows = [r for r in rows if r["kind"] != "pv_n"]
    k = np.array([r["k"] for r in sq], dtype=float)
    e = np.array([r["flop_per_clk_per_sm"] for r in sq], dtype=float) / fp32_flops_per_clk_per_sm
    if len(set(k)) < 3 or not np.all(np.isfinite(e) & (e > 0)):
        raise ValueError("the law needs positive rates at three or more K values "
                         f"(square rows: {len(sq)})")
    slope, intercept = np.polyfit(1 / k, 1 / e, 1)
    e_inf, k0 = 1 / intercept, slope / intercept
    out = [{"kind": r["kind"], "k": r["k"], "m": r["m"], "n": r["n"],
            "measured": r["flop_per_clk_per_sm"] / fp32_flops_per_clk_per_sm,
            "law": e_inf * r["k"] / (r["k"] + k0)} for r in rows]
    return {"e_inf": e_inf, "k0": k0, "rows": out}


def widths(path: str) -> list[tuple[int, float, str]]:
    """``(N, rate over the N = 128 rate capped at 1, kernel)`` of a file's ``pv_n`` rows: the
    software profile's ``sgemm_width`` table."""
    rows = [r for r in json.load(open(path))["rows"] if r["kind"] == "pv_n"]
    ref = next((r["flop_per_clk_per_sm"] for r in rows if r["n"] == 128), None)
    return [(r["n"], min(1.0, r["flop_per_clk_per_sm"] / ref), r.get("kernel", ""))
            for r in rows] if ref else []


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m perfsim.validate.probe_sgemm",
                                 description="measure (on a GPU) or --fit a measurement file")
    ap.add_argument("path", help="output JSON (measure) or measurement file (--fit)")
    ap.add_argument("--fit", action="store_true",
                    help="print the K law's two constants and the width table of PATH")
    args = ap.parse_args(argv)
    if args.fit:
        try:
            got = fit(args.path)
            table = widths(args.path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"probe_sgemm: {args.path} is not a probe_sgemm measurement file "
                  f"({type(exc).__name__}: {exc})", file=sys.stderr)
            return 2
        print(f"e_inf = {got['e_inf']:.4f}, k0 = {got['k0']:.1f} K-steps")
        for r in got["rows"]:
            print(f"{r['kind']:<7} M={r['m']:<5} N={r['n']:<5} K={r['k']:<5} measured "
                  f"{r['measured']:.3f}  law {r['law']:.3f}  ({r['law'] / r['measured'] - 1:+.1%})")
        for n, fraction, kernel in table:
            print(f"width N={n:<4} {fraction:.4f} of the N = 128 rate  {kernel[:70]}")
        return 0
    import torch

    from perfsim.validate.nvml_sampler import NvmlSampler, summarize

    out = args.path
    torch.backends.cuda.matmul.allow_tf32 = False
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    def randn(*shape):
        return torch.randn(*shape, device="cuda")

    # (kind, M, N, K, operand factory, call)
    cases = [("square", 2048, 2048, k, (lambda k=k: (randn(BATCH, 2048, k),
                                                     randn(BATCH, k, 2048))), torch.bmm)
             for k in SQUARE_K]
    cases += [("qk_t", 2048, 2048, d,           # S = Q Kᵀ: K = d, B·H = 64, N = 2048
               (lambda d=d: (randn(BATCH, 2048, d), randn(BATCH, 2048, d))),
               lambda a, b: torch.bmm(a, b.transpose(1, 2))) for d in (64, 128, 256)]
    cases += [("pv", n, 128, n,                  # O = P V: K = N, d = 128
               (lambda n=n: (randn(BATCH, n, n), randn(BATCH, n, 128))), torch.bmm)
              for n in (1024, 2048, 4096)]
    cases += [("pv_n", 2048, n, 2048,             # O = P V at other head dims (output width)
               (lambda n=n: (randn(BATCH, 2048, 2048), randn(BATCH, 2048, n))), torch.bmm)
              for n in NARROW]
    rows = []
    for kind, m, n, k, make, call in cases:
        a, b = make()
        sampler = NvmlSampler().start()
        t = _time(lambda a=a, b=b, call=call: call(a, b))
        clock = summarize(sampler.stop())
        kernel = _kernel_name(lambda a=a, b=b, call=call: call(a, b))
        flops = 2 * BATCH * m * n * k
        hz = clock.get("sm_clock_mean_hz")
        rows.append({"kind": kind, "batch": BATCH, "m": m, "n": n, "k": k, "seconds": t,
                     "flop_per_s": flops / t, "nvml_sm_hz": hz, "kernel": kernel,
                     "flop_per_clk_per_sm": flops / t / hz / sms if hz else None})
        print(json.dumps(rows[-1]), flush=True)
    json.dump({"device": torch.cuda.get_device_name(0), "sms": sms, "torch": torch.__version__,
               "tf32": False, "rows": rows}, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
