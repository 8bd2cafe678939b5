"""Microbenchmark: fp32 atomic-add throughput into an L2-resident accumulator (not attention).

FlashAttention backward kernels add each key tile's dQ share into an fp32 accumulator in
global memory: flash-attn 2 with per-element ``atomicAdd`` (RED), FA3 with bulk reductions.
The adds resolve in L2. This probe measures how many fp32 adds per second the L2 takes in
that pattern: ``C`` CTAs per accumulator block (as the key-tile CTAs of one head) each add a
BM x D fp32 tile into rows ``j*BM ...`` for ``j = 0 .. steps-1`` (as they walk the query
tiles), with ``tl.atomic_add`` (relaxed); and the same with plain stores for comparison.

    python -m perfsim.validate.probe_atomics OUT.json
"""

from __future__ import annotations

import json
import re
import sys

CONFIGS = ((64, 128, 16), (128, 128, 16), (64, 128, 4), (64, 64, 16))   # BM, D, CTAs per block
STEPS = 64
BLOCKS_PER_SM = 4


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def add_tiles(ACC, X, steps, ctas_per_block, BM: tl.constexpr, D: tl.constexpr,
                  ATOMIC: tl.constexpr):
        pid = tl.program_id(0)
        block = pid // ctas_per_block
        rm, rd = tl.arange(0, BM), tl.arange(0, D)
        x = tl.load(X + rm[:, None] * D + rd[None, :]) + pid.to(tl.float32)
        base = ACC + block.to(tl.int64) * steps * BM * D
        for j in range(steps):
            ptr = base + j * BM * D + rm[:, None] * D + rd[None, :]
            if ATOMIC:
                tl.atomic_add(ptr, x, sem="relaxed")
            else:
                tl.store(ptr, x)
    return add_tiles


def run(out_path: str) -> list[dict]:
    import torch
    import triton

    from perfsim.validate.probe_util import write_rows

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = _kernels()
    rows = []
    for bm, d, per_block in CONFIGS:
        blocks = BLOCKS_PER_SM * sms // per_block
        grid = blocks * per_block
        acc = torch.zeros(blocks * STEPS * bm * d, device="cuda", dtype=torch.float32)
        x = torch.randn(bm * d, device="cuda", dtype=torch.float32)
        for atomic in (True, False):
            def call():
                kernel[(grid,)](acc, x, STEPS, per_block, BM=bm, D=d, ATOMIC=atomic,
                                num_warps=4)
            compiled = kernel[(grid,)](acc, x, STEPS, per_block, BM=bm, D=d, ATOMIC=atomic,
                                       num_warps=4)
            ms = triton.testing.do_bench(call, warmup=50, rep=200, return_mode="median")
            adds = grid * STEPS * bm * d
            ptx = compiled.asm.get("ptx", "")
            rows.append({"bm": bm, "d": d, "ctas_per_block": per_block, "grid": grid,
                         "atomic": atomic, "seconds": ms / 1e3, "adds": adds,
                         "adds_per_s": adds / (ms / 1e3),
                         "accumulator_bytes": acc.numel() * 4,
                         "ptx_red": sorted(set(re.findall(r"\b(red\.[\w.]+|atom\.[\w.]+)",
                                                          ptx)))[:6]})
            print(json.dumps(rows[-1]), flush=True)
    write_rows(out_path, rows)
    return rows


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_atomics.json")
