"""Microbenchmark: what does a CTA that exits at once cost beside CTAs that work (not attention)?

flash-attn 2's forward returns before loading Q in a CTA whose query rows all see no key
(causal, ``N_q > N_k``): it writes its zero O tile and leaves. ``FA2(keyless_tile_exit=True)``
charges such CTAs their O bytes only, outside the grid's waves; hold-outs 48 and 49
(validate/README.md, "More queries than keys") measured SDPA flash's forward 6-22 % slower
than that where most CTAs exit, and charging each wave of them a CTA's edge
(``GPUSpec.cta_wave_overhead_s`` plus the O tile) overshoots where few do. This probe measures
the cost directly.

Kernel: the GEMM → softmax → GEMM loop of ``probe_cta_lone`` (``probe_util.attn_tile_step``).
A *full* program loads its tiles, runs ``ITERS`` steps and stores its ``BM x D`` fp32 tile; a
*keyless* program loads nothing (masked loads), runs no step and stores a zero tile. Rows, for
``c`` CTAs per SM and ``waves`` waves of full programs (``F = waves · c · SMs``):

- ``every = r``: ``r · F`` programs, program ``i`` full iff ``i % r == 0`` (keyless ones
  interleaved, as a causal grid with ``N_q > N_k`` puts the empty query tiles of each head
  before its full ones); ``r = 1`` is the full grid alone;
- ``keyless_only``: ``(r − 1) · F`` keyless programs alone.

The cost of one keyless CTA beside full ones, per SM: ``(t(r) − t(1)) · SMs / ((r − 1) · F)``;
alone: ``t(keyless_only) · SMs / ((r − 1) · F)``.

    python -m perfsim.validate.probe_keyless OUT.json [--iters 64] [--waves 4]

torch, triton and pynvml are imported inside ``main``.
"""

from __future__ import annotations

import argparse

#: (BM, BN, D, warps): BM = 32 lowers to mma.sync on sm_90 (as FA2), BM = 64 to WGMMA.
CONFIGS = ((32, 128, 64, 4), (64, 128, 64, 4))
EVERY = (1, 2, 4, 8)
CTAS_PER_SM = (2, 4)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=64)
    ap.add_argument("--waves", type=int, default=4)
    args = ap.parse_args(argv)

    import torch
    import triton
    import triton.language as tl

    from perfsim.validate.probe_util import (
        abc_tiles,
        attn_tile_step,
        back_to_back,
        nvml_handle,
        write_rows,
    )

    step = attn_tile_step()

    @triton.jit
    def loop(A, B, C, Y, iters, every, KEYLESS_ONLY: tl.constexpr, BM: tl.constexpr,
             BN: tl.constexpr, D: tl.constexpr):
        pid = tl.program_id(0)
        if KEYLESS_ONLY:
            full = pid < 0
        else:
            full = (pid % every) == 0
        n = tl.where(full, iters, 0)
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
        a = tl.load(A + rm[:, None] * D + rd[None, :], mask=full, other=0.0)
        b = tl.load(B + rd[:, None] * BN + rn[None, :], mask=full, other=0.0)
        c = tl.load(C + rn[:, None] * D + rd[None, :], mask=full, other=0.0)
        acc = tl.zeros((BM, D), dtype=tl.float32)
        m_i = tl.zeros((BM,), dtype=tl.float32) - 1.0e30
        l_i = tl.zeros((BM,), dtype=tl.float32)
        s = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(n):
            s, acc, m_i, l_i = step(a, b, c, s, acc, m_i, l_i)
        acc = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        tl.store(Y + pid.to(tl.int64) * BM * D + rm[:, None] * D + rd[None, :], acc)

    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for bm, bn, d, warps in CONFIGS:
        a, b, c_tile = abc_tiles(bm, bn, d)
        for per_sm in CTAS_PER_SM:
            full = args.waves * per_sm * sms
            for every in EVERY:
                for keyless_only in ((0,) if every == 1 else (0, 1)):
                    grid = full * every if not keyless_only else full * (every - 1)
                    y = torch.empty(grid * bm * d, device="cuda", dtype=torch.float32)

                    def call(grid=grid, y=y, every=every, keyless_only=keyless_only,
                             tiles=(a, b, c_tile), shape=(bm, bn, d, warps)):
                        return loop[(grid,)](*tiles, y, args.iters, every,
                                             KEYLESS_ONLY=keyless_only, BM=shape[0],
                                             BN=shape[1], D=shape[2], num_warps=shape[3])

                    call()
                    torch.cuda.synchronize()
                    timed = back_to_back(call, handle, 0.2)
                    rows.append({"bm": bm, "bn": bn, "d": d, "warps": warps,
                                 "ctas_per_sm": per_sm, "full_programs": 0 if keyless_only
                                 else full, "keyless_programs": grid - (0 if keyless_only
                                                                        else full),
                                 "every": every, "keyless_only": bool(keyless_only),
                                 "grid": grid, "iters": args.iters, **timed})
                    print(rows[-1], flush=True)
            write_rows(args.out, rows, iters=args.iters, waves=args.waves,
                       triton=triton.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
