"""Microbenchmark: inside one warpgroup, do the online softmax's exps (MUFU) and its FP32 work
(FMA and ALU pipes) overlap, or run one after the other (not attention)?

perfsim's FA3-class forward times the two consumer warpgroups as a closed cycle of an MMA
station and a softmax station (``FA3.pipeline``, ``perfsim.timing.cycle_time``); what the
softmax station costs depends on whether one warp's MUFU.EX2 and its FMA/ALU instructions
overlap. This probe measures that alone: one CTA of 4 warps per SM (one warp per scheduler,
as one consumer warpgroup of FA3 runs) holds a 64 x 128 fp32 tile in the layout of a WGMMA
accumulator (it starts as ``tl.dot`` of two fp16 tiles: each row spread over a quad of
threads, as in flash-attention's kernels) and runs, ``ITERS`` times, one step of the online
softmax over it:

* ``softmax``: ``m = rowmax(x)``; ``p = exp2(x·c − m·c)`` (the scale and subtraction in one
  FFMA, as flash_attn.cute issues it); ``l += rowsum(p)``; ``x = p``;
* ``softmax_split``: the same with the scale apart, ``exp2(x·c − m)`` after ``x·c`` (an FMUL
  and an FADD, as cuDNN's and SDPA flash's census show);
* ``no_exp`` / ``no_exp_split``: the same steps without the exp (``p = x·c − m·c``): the FP32
  and ALU work alone;
* ``exp_only``: ``p = exp2(x·c − k)`` with a constant ``k``: the MUFU work and its FFMA alone.

If the pipes of one warp overlap, ``softmax`` takes about ``max(no_exp, exp_only)`` cycles;
if they run back to back, about ``no_exp + exp_only`` less the shared FFMA. Also with 2 CTAs
per SM (two warps per scheduler, as FA3's two consumer warpgroups): the other warp's
instructions can then fill one warp's waits. Reports per configuration: NVML SM clock (the
SMs tick at NVML's clock on FMA/MUFU loops, ``validate/probe_tick_clock.py``), cycles per
iteration per SM, and the PTX's ex2, max and fma/add/mul counts.

Run on a CUDA GPU with perfsim importable (``validate/probe_run.sh`` arranges it):
``python -m perfsim.validate.probe_softmax_pipes OUT.json``; torch, triton and pynvml are
imported inside functions.
"""

from __future__ import annotations

import json
import re
import sys

#: (BM, BN): one consumer warpgroup's score tile in FA3 / flash_attn.cute at d = 128 (64 query
#: rows of the 128-row CTA tile x 128 keys) and half of it.
TILES = ((64, 128), (64, 64))
MODES = ("softmax", "softmax_split", "no_exp", "no_exp_split", "exp_only")
CTAS_PER_SM = (1, 2)
ITERS = 4096
#: log2(e) / sqrt(128): the scale an attention kernel folds into its exp2 argument.
SCALE = 1.4426950408889634 / 128 ** 0.5


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def loop(A, B, Y, iters, c, BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, 16)
        a = tl.load(A + rm[:, None] * 16 + rk[None, :])
        b = tl.load(B + rk[:, None] * BN + rn[None, :])
        # a WGMMA accumulator: its layout (rows over thread quads) stays through the loop
        x = tl.dot(a, b) + (pid % 7).to(tl.float32) * 0.01
        l_acc = tl.zeros((BM,), dtype=tl.float32)
        for _ in range(iters):
            if MODE == 0:                          # softmax, fused scale (FFMA)
                m = tl.max(x, axis=1)
                p = tl.exp2(x * c - (m * c)[:, None])
                l_acc += tl.sum(p, axis=1)
                x = p
            elif MODE == 1:                        # softmax, split scale (FMUL, FADD)
                s = x * c
                m = tl.max(s, axis=1)
                p = tl.exp2(s - m[:, None])
                l_acc += tl.sum(p, axis=1)
                x = p
            elif MODE == 2:                        # no exp, fused scale
                m = tl.max(x, axis=1)
                p = x * c - (m * c)[:, None]
                l_acc += tl.sum(p, axis=1)
                x = p
            elif MODE == 3:                        # no exp, split scale
                s = x * c
                m = tl.max(s, axis=1)
                p = s - m[:, None]
                l_acc += tl.sum(p, axis=1)
                x = p
            else:                                  # the exps (and their FFMA) alone
                x = tl.exp2(x * c - 0.5)
        tl.store(Y + pid * BM + rm, l_acc + tl.sum(x, axis=1))

    return loop


def _ptx(compiled) -> dict:
    ptx = compiled.asm.get("ptx", "")
    return {"ex2": len(re.findall(r"\bex2\.approx", ptx)),
            "max": len(re.findall(r"\bmax\.f32", ptx)),
            "fma": len(re.findall(r"\bfma\.rn\.f32", ptx)),
            "add": len(re.findall(r"\badd\.f32", ptx)),
            "mul": len(re.findall(r"\bmul\.f32", ptx)),
            "shfl": len(re.findall(r"\bshfl\.sync", ptx)),
            "wgmma": len(re.findall(r"wgmma\.mma_async", ptx))}


def _sass(compiled) -> dict:
    """Static SASS opcode counts of the kernel (nvdisasm through triton), or {} without it."""
    try:
        sass = compiled.asm.get("sass") or ""
    except Exception:                             # nvdisasm missing
        return {}
    ops = re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M)
    counts: dict = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return {k: v for k, v in sorted(counts.items(), key=lambda kv: -kv[1])
            if k in ("MUFU", "FMNMX", "FFMA", "FADD", "FMUL", "SHFL", "FSETP", "FSEL", "MOV")}


def run(out_path: str) -> list[dict]:
    import torch

    from perfsim.validate.probe_util import back_to_back, nvml_handle, write_rows

    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = _kernel()
    rows = []
    for bm, bn in TILES:
        a = torch.randn(bm, 16, device="cuda", dtype=torch.float16)
        b = torch.randn(16, bn, device="cuda", dtype=torch.float16)
        for mode_index, mode in enumerate(MODES):
            for ctas in CTAS_PER_SM:
                grid = ctas * sms
                y = torch.empty(grid * bm, device="cuda", dtype=torch.float32)
                launch = {"BM": bm, "BN": bn, "MODE": mode_index, "num_warps": 4}
                try:
                    compiled = kernel[(grid,)](a, b, y, 4, SCALE, **launch)
                    torch.cuda.synchronize()
                except Exception as exc:           # out of registers, a compile failure
                    rows.append({"bm": bm, "bn": bn, "mode": mode, "ctas_per_sm": ctas,
                                 "error": str(exc)[:200]})
                    continue

                def call(grid=grid, args=(a, b, y, ITERS, SCALE), launch=launch):
                    kernel[(grid,)](*args, **launch)

                call()                                                        # warm
                torch.cuda.synchronize()
                timed = back_to_back(call, handle, 0.2)
                rows.append({"bm": bm, "bn": bn, "mode": mode, "ctas_per_sm": ctas,
                             "grid": grid, "warps": 4, "iters": ITERS, **timed,
                             "finite": bool(torch.isfinite(y).all()),
                             "regs": getattr(compiled, "n_regs", None),
                             "spills": getattr(compiled, "n_spills", None),
                             "ptx": _ptx(compiled), "sass": _sass(compiled),
                             "cycles_per_iter_per_sm": timed["seconds"]
                             * timed["sm_clock_mhz_mean"] * 1e6 / ITERS})
                print(json.dumps(rows[-1]), flush=True)
    write_rows(out_path, rows, scale=SCALE)
    return rows


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_softmax_pipes.json")
