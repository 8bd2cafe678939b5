"""Microbenchmark: do ``mma.sync`` MMAs and exponentials of different warps overlap (not attention)?

perfsim times FA1/FA2-style kernels (``mma.sync``) with the synchronous MMAs, the FP32
softmax work and the exps of every resident CTA on one station of a closed cycle: their
times add even across CTAs (``perfsim.algorithms.base.MMA_SYNC_STATIONS``). The tensor pipe
and the MUFU/FP32 pipes are separate units, so whether one CTA's MMAs run while another
CTA's exps issue is a hardware question this probe answers on its own, with no HBM, no
softmax bookkeeping and no attention kernel.

Kernel (the ``mma.sync`` analogue of ``probe_wgmma_exp``): every CTA holds an A (BM x D),
a B (D x BN) and a C (BN x D) bf16 tile and runs, ``iters`` times, ``s = A @ B`` (with the
last ``s`` times zero as its accumulator, so the compiler cannot hoist it out of the loop),
``p = exp2(s · 2^-10)`` (one MUFU.EX2 per element, mode ``full``) or ``p = s`` (mode
``gemm``), then ``acc += p @ C`` (``p`` converted in registers); mode ``exp`` keeps only the
exponentials (the same count per iteration); mode ``attn`` adds the online softmax's FP32
work of one tile (row max, ``exp2(s - m)``, row sum, rescale of ``acc``). On sm_90 Triton
lowers ``tl.dot`` with BM = 32 and 4 warps to ``mma.sync``
(MMAv2) and re-reads the loop-invariant operands from shared memory with ``ldmatrix``
(counted from the PTX and recorded). Grids of ``c x SMs`` CTAs give ``c`` resident CTAs per
SM (1, 2, 4, 8, as registers and shared memory allow). Reports per configuration: NVML SM
clock and power, cycles per iteration per SM, registers, shared memory and the PTX's
``mma.sync``, ``ldmatrix`` and ``ex2`` counts.

Reading it: with one station (today's model) ``full`` costs ``gemm + exp`` at every ``c``;
with separate tensor and MUFU stations and ``c`` CTAs cycling through them, ``full`` falls
toward ``max(gemm, exp)`` as ``c`` grows.

Run on a CUDA GPU with perfsim importable (``validate/probe_run.sh`` arranges it):
``python -m perfsim.validate.probe_mma_exp OUT.json``; torch, triton and pynvml are
imported inside functions.
"""

from __future__ import annotations

import json
import re
import sys

#: (BM, BN, D, num_warps): BM = 32 with 4 warps keeps Triton on mma.sync on sm_90; head dims
#: 64 and 128 and key tiles 64 and 128 as FA2's forward tiles take them.
CONFIGS = ((32, 64, 64, 4), (32, 128, 64, 4), (32, 64, 128, 4), (32, 128, 128, 4))
#: Two warps of 32 rows each (``--two-warp``): half the operand bytes per MMA FLOP of the
#: 4-warp tiles (each warp reads the whole B and C for 32 rows, as FA2's forward warps read
#: K and V for theirs), so the tensor pipe, not shared memory, binds the GEMM-only loop.
TWO_WARP_CONFIGS = ((64, 64, 64, 2), (64, 128, 64, 2), (64, 64, 128, 2))
MODES = ("full", "gemm", "exp", "attn")
CTAS_PER_SM = (1, 2, 4, 8)
TWO_WARP_CTAS_PER_SM = (1, 2, 4, 8, 16)
ITERS = 2048


def _kernel():
    import triton
    import triton.language as tl

    from perfsim.validate.probe_util import attn_tile_step

    attn_tile = attn_tile_step()

    @triton.jit
    def loop(A, B, C, Y, iters, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
             MODE: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
        a = tl.load(A + rm[:, None] * D + rd[None, :])
        b = tl.load(B + rd[:, None] * BN + rn[None, :])
        c = tl.load(C + rn[:, None] * D + rd[None, :])
        acc = tl.zeros((BM, D), dtype=tl.float32)
        x = tl.zeros((BM, BN), dtype=tl.float32) + (pid % 7).to(tl.float32) * 0.01
        m_i = tl.zeros((BM,), dtype=tl.float32) - 1.0e30
        l_i = tl.zeros((BM,), dtype=tl.float32)
        s = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(iters):
            # ``s * 0.0`` as the accumulator keeps ``A @ B`` inside the loop: without a
            # loop-carried input Triton's loop-invariant code motion hoists it (and, in mode
            # full, the exps of it) out of the loop.
            if MODE == 0:                                    # full: GEMM, exp, GEMM
                s = tl.dot(a, b, s * 0.0)
                p = tl.exp2(s * 0.0009765625)
                acc = tl.dot(p.to(tl.bfloat16), c, acc)
            elif MODE == 1:                                  # gemm: the two GEMMs
                s = tl.dot(a, b, s * 0.0)
                acc = tl.dot(s.to(tl.bfloat16), c, acc)
            elif MODE == 2:                                  # exp: the exps alone
                x = tl.exp2(x * 0.5 - 0.25)
            else:                                            # attn: one online-softmax tile
                s, acc, m_i, l_i = attn_tile(a, b, c, s, acc, m_i, l_i)
        if MODE == 2:
            acc += tl.sum(x, axis=1)[:, None]
        if MODE == 3:
            acc = acc / l_i[:, None]
        tl.store(Y + pid * BM * D + rm[:, None] * D + rd[None, :], acc)

    return loop


def _ptx(compiled) -> dict:
    """``probe_wgmma_exp``'s PTX counts plus the ``ldmatrix`` loads and barriers."""
    from perfsim.validate.probe_wgmma_exp import _ptx as wgmma_ptx

    ptx = compiled.asm.get("ptx", "")
    return {**wgmma_ptx(compiled), "ldmatrix": len(re.findall(r"\bldmatrix\.sync", ptx)),
            "bar_sync": len(re.findall(r"\bbar\.sync\b", ptx))}


def run(out_path: str, configs=CONFIGS, ctas_per_sm=CTAS_PER_SM) -> list[dict]:
    """Time every configuration, mode and CTA count (``probe_util.time_tile_loops``)."""
    from perfsim.validate.probe_util import time_tile_loops

    return time_tile_loops(_kernel(), out_path, configs, MODES, ctas_per_sm, ITERS, _ptx)


def launch_once(ctas_per_sm=(1, 8), configs=((32, 128, 128, 4), (32, 64, 64, 4))) -> None:
    """Each (configuration, mode) launched once at ``ctas_per_sm`` CTAs per SM, untimed: the
    run Nsight Compute profiles (``--once``), one kernel launch per row."""
    import torch

    from perfsim.validate.probe_util import abc_tiles

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = _kernel()
    for bm, bn, d, warps in configs:
        a, b, c = abc_tiles(bm, bn, d)
        for mode_index, mode in enumerate(MODES):
            for ctas in ctas_per_sm:
                grid = ctas * sms
                y = torch.empty(grid * bm * d, device="cuda", dtype=torch.float32)
                kernel[(grid,)](a, b, c, y, 256, BM=bm, BN=bn, D=d, MODE=mode_index,
                                num_warps=warps)
                torch.cuda.synchronize()
                print(bm, bn, d, warps, mode, ctas, flush=True)


#: Nsight Compute metrics the summary reads (``validate/probe_ncu.sh``'s list has them).
NCU_COLUMNS = {"cycles": "sm__cycles_active.avg",
               "tensor_pct":
                   "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
               "issue_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
               "hmma": "sm__inst_executed_pipe_tensor_op_hmma.sum",
               "fma": "sm__inst_executed_pipe_fma.sum", "alu": "sm__inst_executed_pipe_alu.sum",
               "xu": "sm__inst_executed_pipe_xu.sum",
               "smem_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"}


def summarize_ncu(csv_path: str, configs, ctas_per_sm=(1, 8), iters: int = 256,
                  sm_count: int = 132) -> list[dict]:
    """Rows of an Nsight Compute raw CSV of :func:`launch_once` (kernel ``loop``, launched in
    its order), per CTA iteration: SM cycles, instructions per pipe, shared-memory
    wavefronts, and for mode ``full`` the share of the exp-only loop's cycles that the
    GEMM-only loop hides (``(gemm + exp − full) / exp``, 0 = serial, 1 = hidden)."""
    import csv

    with open(csv_path, newline="") as fh:
        table = list(csv.reader(fh))
    head = next(i for i, r in enumerate(table) if r and r[0] == "ID")
    names = table[head]
    data = [r for r in table[head + 2:]
            if len(r) == len(names) and r[names.index("Kernel Name")] == "loop"]
    labels = [(bm, bn, d, warps, mode, c) for bm, bn, d, warps in configs for mode in MODES
              for c in ctas_per_sm]
    if len(data) != len(labels):
        raise ValueError(f"{csv_path}: {len(data)} 'loop' kernels, expected {len(labels)}")
    out = {}
    for (bm, bn, d, warps, mode, c), r in zip(labels, data):
        row = {"bm": bm, "bn": bn, "d": d, "warps": warps, "mode": mode, "ctas_per_sm": c}
        per = c * sm_count * iters                     # CTA iterations in the launch
        for key, col in NCU_COLUMNS.items():
            v = float(r[names.index(col)].replace(",", ""))
            row[key] = v / iters / c if key == "cycles" else (
                v if key.endswith("_pct") else v / per)
        out[(bm, bn, d, warps, mode, c)] = row
    for (bm, bn, d, warps, mode, c), row in out.items():
        if mode == "full":
            gemm = out[(bm, bn, d, warps, "gemm", c)]["cycles"]
            exp = out[(bm, bn, d, warps, "exp", c)]["cycles"]
            row["exp_hidden"] = (gemm + exp - row["cycles"]) / exp
    return list(out.values())


if __name__ == "__main__":
    if "--summarize" in sys.argv:       # --summarize OUT.json 4WARP.csv 2WARP.csv
        out, four, two = sys.argv[2:5]
        with open(out, "w") as fh:
            json.dump({"source": "Nsight Compute (--clock-control none) of launch_once on the "
                                 "project's H200; per CTA iteration (cycles per SM)",
                       "four_warp": summarize_ncu(four, ((32, 128, 128, 4), (32, 64, 64, 4))),
                       "two_warp": summarize_ncu(two, TWO_WARP_CONFIGS[:2])}, fh, indent=1)
    elif "--once" in sys.argv:
        launch_once(configs=TWO_WARP_CONFIGS[:2]) if "--two-warp" in sys.argv else launch_once()
    elif "--two-warp" in sys.argv:
        run(sys.argv[1], TWO_WARP_CONFIGS, TWO_WARP_CTAS_PER_SM)
    else:
        run(sys.argv[1] if len(sys.argv) > 1 else "probe_mma_exp.json")
