"""Microbenchmark: do a Triton kernel's WGMMAs and its exponentials overlap (not attention)?

perfsim times the FA2-order Triton kernels on Hopper (FlexAttention, the tutorial kernel)
with the MMAs, the FP32 work and the exps of one CTA one after the other
(``perfsim.algorithms.common.SERIAL_COMPUTE``). This probe measures that composition alone:
every CTA holds an A (BM x D), a B (D x BN) and a C (BN x D) bf16 tile and runs, ``iters``
times, ``s = A @ B`` (WGMMA, both operands in shared memory), ``p = exp2(s · 2^-10)`` (one
MUFU.EX2 per element, mode ``full``) or ``p = s`` (mode ``gemm``), then ``acc += p @ C``
(WGMMA, ``p`` from registers); mode ``exp`` keeps only the exponentials (a chain of
``exp2`` over a BM x BN register tile, the same count per iteration). No max, no sums, no
rescale: the two GEMMs and the exps of an attention tile, nothing else. Grids of 1 and 2 CTAs
per SM, 4 and 8 warps.

``s = A @ B`` takes the last ``s`` times zero as its accumulator (``carry``, the default):
without a loop-carried input Triton's loop-invariant code motion hoists that GEMM (and in
mode ``full`` its exps) out of the loop, so the loop runs one GEMM and no exps. The first
run (``probe_wgmma_exp.json``, 2026-11-30) was made that way; ``--hoisted`` repeats it.
Reports per configuration: NVML SM clock, cycles per iteration per
SM, and the PTX's wgmma and ex2 counts.

Run on a CUDA GPU with perfsim importable (``validate/probe_run.sh`` arranges it):
``python -m perfsim.validate.probe_wgmma_exp OUT.json``; torch, triton and pynvml are
imported inside functions.
"""

from __future__ import annotations

import re
import sys

#: (BM, BN, D, num_warps): FlexAttention's sm_90 forward tiles (d 64: 128 x 128, 4 warps;
#: d 128: 128 x 64, 8 warps; d 256: 64 x 32, 4 warps), the tutorial's 128 x 64 with 4 warps
#: at d 64 and 128, and FlexAttention's default 64 x 64 at d 256.
CONFIGS = ((128, 128, 64, 4), (128, 64, 64, 4), (128, 64, 128, 4), (128, 64, 128, 8),
           (64, 32, 256, 4), (64, 64, 256, 4))
MODES = ("full", "gemm", "exp")
CTAS_PER_SM = (1, 2)
ITERS = 1024


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def loop(A, B, C, Y, iters, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
             MODE: tl.constexpr, CARRY: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
        a = tl.load(A + rm[:, None] * D + rd[None, :])
        b = tl.load(B + rd[:, None] * BN + rn[None, :])
        c = tl.load(C + rn[:, None] * D + rd[None, :])
        acc = tl.zeros((BM, D), dtype=tl.float32)
        x = tl.zeros((BM, BN), dtype=tl.float32) + (pid % 7).to(tl.float32) * 0.01
        s = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(iters):
            if MODE == 0:                                    # full: GEMM, exp, GEMM
                if CARRY:
                    s = tl.dot(a, b, s * 0.0)
                else:
                    s = tl.dot(a, b)
                p = tl.exp2(s * 0.0009765625)
                acc = tl.dot(p.to(tl.bfloat16), c, acc)
            elif MODE == 1:                                  # gemm: the two GEMMs
                if CARRY:
                    s = tl.dot(a, b, s * 0.0)
                else:
                    s = tl.dot(a, b)
                acc = tl.dot(s.to(tl.bfloat16), c, acc)
            else:                                            # exp: the exps alone
                x = tl.exp2(x * 0.5 - 0.25)
        if MODE == 2:
            acc += tl.sum(x, axis=1)[:, None]
        tl.store(Y + pid * BM * D + rm[:, None] * D + rd[None, :], acc)

    return loop


def _ptx(compiled) -> dict:
    ptx = compiled.asm.get("ptx", "")
    return {"wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
            "mma_sync": len(re.findall(r"\bmma\.sync\.", ptx)),
            "ex2": len(re.findall(r"\bex2\.approx", ptx))}


def run(out_path: str, carry: bool = True) -> list[dict]:
    """Time every configuration, mode and CTA count (``probe_util.time_tile_loops``)."""
    from perfsim.validate.probe_util import time_tile_loops

    return time_tile_loops(_kernel(), out_path, CONFIGS, MODES, CTAS_PER_SM, ITERS, _ptx,
                           launch_extra={"CARRY": carry}, row_extra={"carry": carry})


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_wgmma_exp.json",
        carry="--hoisted" not in sys.argv)
