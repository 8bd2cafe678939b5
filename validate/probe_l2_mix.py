"""Microbenchmark: do fp32 reductions in L2 and an HBM stream share a limit? (not attention)

A backward that accumulates dQ with fp32 reductions (flash-attn 2 and 3, cuDNN) sends two kinds
of traffic through the L2 slices at once: the reductions into the dQ accumulator and the
HBM stream of Q, dO, K, V and dK/dV. Measured alone on the H200, reductions into an
L2-resident buffer run at 3.6-3.7 TB/s of payload (``probe_l2.py``) and a device copy at
4.17 TB/s read + written (``hardware/h200-sxm.toml``, ``hbm_efficiency``). This probe times
one Triton kernel whose programs, in each of ``ITERS`` steps, do any of:

- ``copy``: load a 16 KiB chunk of a large source buffer and store it to a large destination
  (each chunk once: an HBM stream, read + written);
- ``read``: load the chunk only (an HBM read stream);
- ``red``: add a register tile into a chunk of a 16 MiB accumulator with
  ``tl.atomic_add(..., sem="relaxed")`` (stays in L2, as the dQ accumulator of a short call);
- ``red_hbm``: the same into a chunk of an accumulator as large as the stream (each chunk
  once: its lines come from HBM and go back, as a long call's dQ accumulator).

Modes run the parts alone and together with the same grid and step count: if the limits are
separate, the pair takes about the longer of its parts; if the parts share one, about their
sum. Rows: seconds, bytes of each part, the NVML SM clock and board power during the timed
calls.

    python3 validate/probe_l2_mix.py OUT.json
"""

from __future__ import annotations

import json
import sys

BLOCK = 4096            # fp32 elements per chunk (16 KiB)
ITERS = 64              # steps per program
PROGRAMS_PER_SM = (4, 8)
ACC_MB = 16
MODES = ("copy", "red", "copy+red", "read", "read+red", "red_hbm", "copy+red_hbm",
         "read+red_hbm")


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def mix(SRC, DST, ACC, OUT, n_acc_chunks, grid, iters, BLOCK: tl.constexpr,
            LOAD: tl.constexpr, STORE: tl.constexpr, RED: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(iters):
            chunk = (pid + i * grid).to(tl.int64)
            if LOAD:
                x = tl.load(SRC + chunk * BLOCK + offs)
                if STORE:
                    tl.store(DST + chunk * BLOCK + offs, x)
                else:
                    acc += x
            if RED:
                a = chunk % n_acc_chunks
                tl.atomic_add(ACC + a * BLOCK + offs, acc + 1.0, sem="relaxed")
        tl.store(OUT + pid, tl.sum(acc, axis=0))

    return mix


def run(out_path: str) -> list[dict]:
    import torch
    import triton

    from perfsim.validate.nvml_sampler import NvmlSampler, summarize

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    mix = _kernel()
    rows = []
    for per_sm in PROGRAMS_PER_SM:
        grid = per_sm * sms
        n = grid * ITERS * BLOCK                   # fp32 elements streamed per part
        src = torch.ones(n, device="cuda", dtype=torch.float32)
        dst = torch.empty_like(src)
        acc_l2 = torch.zeros(ACC_MB * 2**20 // 4, device="cuda", dtype=torch.float32)
        acc_hbm = torch.zeros_like(src)
        out = torch.empty(grid, device="cuda", dtype=torch.float32)
        for mode in MODES:
            load = "copy" in mode or "read" in mode
            store = "copy" in mode
            red = "red" in mode
            acc = acc_hbm if "red_hbm" in mode else acc_l2

            def call(acc=acc, load=load, store=store, red=red, src=src, dst=dst, out=out,
                     grid=grid):
                return mix[(grid,)](src, dst, acc, out, acc.numel() // BLOCK, grid, ITERS,
                                    BLOCK=BLOCK, LOAD=load, STORE=store, RED=red,
                                    num_warps=8)

            call()
            torch.cuda.synchronize()
            sampler = NvmlSampler(period_s=0.005)
            sampler.start()
            ms = triton.testing.do_bench(call, warmup=25, rep=150, return_mode="median")
            summary = summarize(sampler.stop())
            stream = 4 * n * (2 if store else 1) if load else 0
            rows.append({"mode": mode, "programs_per_sm": per_sm, "grid": grid,
                         "seconds": ms / 1e3, "hbm_stream_bytes": stream,
                         "reduction_payload_bytes": 4 * n if red else 0,
                         "accumulator_bytes": 4 * acc.numel() if red else 0,
                         "nvml": summary})
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "nvml"}), flush=True)
        del src, dst, acc_hbm
        torch.cuda.empty_cache()
    with open(out_path, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(0), "sm_count": sms,
                   "torch": torch.__version__, "triton": triton.__version__,
                   "block_fp32": BLOCK, "iters": ITERS, "rows": rows}, fh, indent=1)
    return rows


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_l2_mix.json")
