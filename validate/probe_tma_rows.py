"""TMA tile loads from L2 by segment width and row size: how fast does the L2 serve the row
segments of 64-row TMA boxes of a row-major ``[M, d]`` bf16 tensor, by the box's width (the
swizzle a tile takes: 128-, 64- or 32-byte segments) and by whether the ``2 d``-byte rows are
whole 32-byte sectors?

flash_attn.cute's sm90 kernels load Q, K, V and dO with TMA in tiles as wide as their
``tile_hdim`` (the head dim rounded up to 16 in the forward, 64 in the backward above 128),
laid out with CUTLASS's swizzle rule, from tensors whose rows are the call's own ``2 d``
bytes. Nsight Compute has its forward at head dim 240 (a 32-byte swizzle) moving 1.45x the
bytes of 256 at 86 % of the L2's peak throughput against 36 %, and its backward at 232 taking
31 % longer than at 256 with the same tile, grid and instructions
(``reports/h200/probes/ncu/summary-cute-headdims.json``). This microbenchmark has no
attention in it: a Triton kernel (TMA descriptors on sm_90) loads, round robin from an
L2-resident tensor of ``d`` columns, 64-row tiles as ``⌈d / BC⌉`` boxes of ``BC`` = 64, 32 or
16 columns side by side (Triton gives such boxes the 128-, 64- or 32-byte swizzle; columns
past ``d`` are TMA's out-of-bounds zeros), feeds each box to a WGMMA against a ``[BC, 16]``
slice of a weight matrix (the way the attention kernels consume their tiles from shared
memory) so that the loads are used, and repeats; ``programs_per_sm`` programs per SM. Per
configuration: box rows (segments) per second and useful bytes (the ``d`` columns) per second.
``probe_tma_rows-one-box.json`` is an earlier run with one 256-column box per tile (128-byte
segments only), at 1 and 2 programs per SM.

    python -m perfsim.validate.probe_tma_rows OUT.json

torch, triton and pynvml are imported inside ``main``.
"""

from __future__ import annotations

import argparse

HEAD_DIMS = (256, 240, 232, 224, 208, 200, 192, 160, 144, 128)
ROWS = 16384                  # 16384 x 256 bf16 = 8 MiB: L2-resident on the H200 (50 MiB)
BM, BN = 64, 16
ITERS = 256


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--programs-per-sm", default="2")
    ap.add_argument("--dims", default=",".join(map(str, HEAD_DIMS)))
    ap.add_argument("--box-cols", default="64,32,16")
    args = ap.parse_args(argv)

    import torch
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    from perfsim.validate.probe_util import back_to_back, nvml_handle, write_rows

    @triton.jit
    def tma_rows(desc, w_ptr, out, n_tiles, ITERS: tl.constexpr, BM: tl.constexpr,
                 BC: tl.constexpr, NSUB: tl.constexpr, BN: tl.constexpr):
        # each tile: NSUB boxes of BM rows x BC columns side by side (TMA requests of BC
        # columns: Triton picks the 128-, 64- or 32-byte swizzle of a 64-, 32- or 16-column
        # bf16 box), each fed to a WGMMA against its slice of w
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        acc = tl.zeros([BM, BN], tl.float32)
        for i in range(ITERS):
            t = (pid + i * nprog) % n_tiles
            for j in tl.static_range(NSUB):
                x = desc.load([t * BM, j * BC])
                w = tl.load(w_ptr + (j * BC + tl.arange(0, BC))[:, None] * BN
                            + tl.arange(0, BN)[None, :])
                acc = tl.dot(x, w, acc)
        tl.store(out + pid * BM * BN + tl.arange(0, BM)[:, None] * BN
                 + tl.arange(0, BN)[None, :], acc)

    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for per_sm in (int(x) for x in args.programs_per_sm.split(",")):
        grid = sms * per_sm
        for d in (int(x) for x in args.dims.split(",")):
            x = torch.randn(ROWS, d, device="cuda", dtype=torch.bfloat16)
            for bc in (int(c) for c in args.box_cols.split(",")):
                nsub = -(-d // bc)
                desc = TensorDescriptor(x, shape=[ROWS, d], strides=[d, 1],
                                        block_shape=[BM, bc])
                w = torch.randn(nsub * bc, BN, device="cuda", dtype=torch.bfloat16) / 16
                out = torch.empty(grid, BM, BN, device="cuda", dtype=torch.float32)

                def call(desc=desc, w=w, out=out, bc=bc, nsub=nsub, grid=grid):
                    tma_rows[(grid,)](desc, w, out, ROWS // BM, ITERS=ITERS, BM=BM, BC=bc,
                                      NSUB=nsub, BN=BN, num_warps=4, num_stages=3)

                call()
                torch.cuda.synchronize()
                # program 0's result against torch
                tiles = [(i * grid) % (ROWS // BM) for i in range(ITERS)]
                xs = x.float().view(ROWS // BM, BM, d)[tiles].sum(0)
                want = xs @ w[:d].float()
                ok = bool(torch.allclose(out[0], want, rtol=2e-2, atol=2e-1 * ITERS ** 0.5))
                t = back_to_back(call, handle)
                useful = grid * ITERS * BM * d * 2
                rec = {"head_dim": d, "row_bytes": 2 * d, "row_bytes_mod_32": 2 * d % 32,
                       "box": [BM, bc], "boxes_per_tile": nsub, "programs_per_sm": per_sm,
                       "grid": grid, "iters": ITERS, "useful_bytes": useful, "correct": ok,
                       **t, "useful_bytes_per_s": useful / t["seconds"],
                       "box_rows_per_s": grid * ITERS * nsub * BM / t["seconds"]}
                rows.append(rec)
                print(per_sm, d, bc, ok, round(rec["useful_bytes_per_s"] / 1e12, 2), "TB/s",
                      round(rec["box_rows_per_s"] / 1e9, 1), "G box rows/s",
                      round(t["sm_clock_mhz_mean"]), flush=True)
                write_rows(args.out, rows, rows_in_tensor=ROWS,
                           method="Triton TMA descriptor loads (sm_90), back_to_back timing "
                                  "with NVML; useful bytes = the d columns read")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
