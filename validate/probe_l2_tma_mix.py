"""Microbenchmark: do TMA tile loads from L2 and fp32 reductions into L2 take turns? (not
attention)

An FA3-class backward (flash-attn 3, flash_attn.cute on sm90, cuDNN's sm90 kernel) sends two
kinds of L2 traffic from the same CTAs in the same loop: the TMA loads of its Q and dO tiles
(row segments, ``probe_tma_rows.py``: 13.9-18.9 ps per 128-byte segment on the H200) and the
fp32 reductions of its dQ partial tiles into the dQ accumulator (``probe_l2.py``: 3.6-3.7 TB/s
of payload, as ``tl.atomic_add`` or as TMA bulk reductions). ``probe_l2_mix.py`` showed that
reductions and an HBM stream take turns (their times add). This probe asks the same of TMA
loads and reductions, with no attention in it: one Triton kernel (sm_90 TMA descriptors)
whose programs, in each of ``ITERS`` steps, do any of

- ``load``: a ``[BM, d]`` bf16 tile of an L2-resident ``[16384, d]`` tensor as ``⌈d / 64⌉``
  TMA boxes of 64 columns (128-byte segments; rows of ``2 d`` bytes, 16 bytes off whole
  32-byte sectors at d = 232), each fed to a WGMMA against a slice of a weight matrix so the
  loads are used (the way ``probe_tma_rows.py`` does);
- ``red_bulk``: ``RED_TILES`` fp32 tiles of ``[BM, 128]`` added into an 8 MiB L2-resident
  accumulator, each as one TMA bulk reduction (``cp.reduce.async.bulk``: flash_attn.cute's
  and flash-attn 3's dQ path);
- ``red_atom``: the same tiles with ``tl.atomic_add(..., sem="relaxed")`` (``red.global.add``:
  flash-attn 2's and cuDNN's dQ path);

alone and together, with the same grid and step count. If the two kinds of traffic have
separate limits, the pair takes about the longer of its parts; if they share one (the L2
slices, or the SM's TMA unit), about their sum. Rows: seconds, segments and reduction payload
per call, the NVML SM clock and board power (``probe_util.back_to_back``).

    python3 validate/probe_l2_tma_mix.py OUT.json [--dims 232,256,128] [--programs-per-sm 1,2]
        [--group 8]   # 8 programs at a time walk the same tiles in step

(The committed ``probe_l2_tma_mix.json`` has ``--group 1``, every program on its own tiles;
``probe_l2_tma_mix-group8.json`` the grouped walk.)

torch, triton and pynvml are imported inside ``main``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROWS = 16384                # 16384 x 232 bf16 = 7.3 MiB: L2-resident on the H200 (50 MiB)
ACC_MB = 8                  # the accumulator: 8 MiB of fp32, L2-resident
BM, BC, BN = 64, 64, 16     # tile rows, TMA box columns (128-byte segments), WGMMA N
RED_COLS = 128              # fp32 columns of one reduced tile (32 KiB of payload)
ITERS = 256
MODES = ("load", "red_bulk", "load+red_bulk", "red_atom", "load+red_atom")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--dims", default="232,256,128")
    ap.add_argument("--programs-per-sm", default="1,2")
    ap.add_argument("--red-tiles", default="1,2", help="reduced [BM, 128] tiles per step")
    ap.add_argument("--group", type=int, default=1,
                    help="programs walking the same tiles in step (1: each its own)")
    args = ap.parse_args(argv)

    import torch
    import triton
    import triton.language as tl
    from probe_util import back_to_back, nvml_handle, write_rows
    from triton.tools.tensor_descriptor import TensorDescriptor

    @triton.jit
    def mix(desc, w_ptr, ACC, out, n_tiles, n_acc_tiles, ITERS: tl.constexpr,
            BM: tl.constexpr, BC: tl.constexpr, NSUB: tl.constexpr, BN: tl.constexpr,
            RED_COLS: tl.constexpr, RED_TILES: tl.constexpr, LOAD: tl.constexpr,
            RED: tl.constexpr, BULK: tl.constexpr, GROUP: tl.constexpr):
        # GROUP consecutive programs walk the same tiles in step (as the CTAs of one head
        # of an FA3-class backward walk the same Q/dO and dQ tiles); 1: every program its own
        pid = tl.program_id(0) // GROUP
        nprog = tl.num_programs(0) // GROUP
        acc = tl.zeros([BM, BN], tl.float32)
        ones = tl.full([BM, RED_COLS], 1.0, tl.float32)
        acc_desc = tl.make_tensor_descriptor(ACC, shape=[n_acc_tiles * BM, RED_COLS],
                                             strides=[RED_COLS, 1],
                                             block_shape=[BM, RED_COLS])
        rows = tl.arange(0, BM)[:, None] * RED_COLS + tl.arange(0, RED_COLS)[None, :]
        for i in range(ITERS):
            t = (pid + i * nprog) % n_tiles
            if LOAD:
                for j in tl.static_range(NSUB):
                    x = desc.load([t * BM, j * BC])
                    w = tl.load(w_ptr + (j * BC + tl.arange(0, BC))[:, None] * BN
                                + tl.arange(0, BN)[None, :])
                    acc = tl.dot(x, w, acc)
            if RED:
                for r in tl.static_range(RED_TILES):
                    a = ((pid + i * nprog) * RED_TILES + r) % n_acc_tiles
                    if BULK:
                        acc_desc.atomic_add([a * BM, 0], ones)
                    else:
                        tl.atomic_add(ACC + a.to(tl.int64) * BM * RED_COLS + rows, ones,
                                      sem="relaxed")
        tl.store(out + tl.program_id(0) * BM * BN + tl.arange(0, BM)[:, None] * BN
                 + tl.arange(0, BN)[None, :], acc)

    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device="cuda"))
    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n_acc_tiles = ACC_MB * 2**20 // (4 * BM * RED_COLS)
    accum = torch.zeros(n_acc_tiles * BM * RED_COLS, device="cuda", dtype=torch.float32)
    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        x = torch.randn(ROWS, d, device="cuda", dtype=torch.bfloat16)
        nsub = -(-d // BC)
        desc = TensorDescriptor(x, shape=[ROWS, d], strides=[d, 1], block_shape=[BM, BC])
        w = torch.randn(nsub * BC, BN, device="cuda", dtype=torch.bfloat16) / 16
        for per_sm in (int(p) for p in args.programs_per_sm.split(",")):
            grid = sms * per_sm
            out = torch.empty(grid, BM, BN, device="cuda", dtype=torch.float32)
            for red_tiles in (int(r) for r in args.red_tiles.split(",")):
                for mode in MODES:
                    load, red, bulk = "load" in mode, "red" in mode, "bulk" in mode
                    if not red and red_tiles != int(args.red_tiles.split(",")[0]):
                        continue        # loads alone do not depend on the reduction count

                    def call(load=load, red=red, bulk=bulk, red_tiles=red_tiles, out=out,
                             grid=grid, w=w, desc=desc, nsub=nsub):
                        mix[(grid,)](desc, w, accum, out, ROWS // BM, n_acc_tiles,
                                     ITERS=ITERS, BM=BM, BC=BC, NSUB=nsub, BN=BN,
                                     RED_COLS=RED_COLS, RED_TILES=red_tiles, LOAD=load,
                                     RED=red, BULK=bulk, GROUP=args.group, num_warps=4,
                                     num_stages=3)

                    accum.zero_()
                    call()
                    torch.cuda.synchronize()
                    payload = grid * ITERS * red_tiles * BM * RED_COLS * 4 if red else 0
                    # every reduction landed: the accumulator sums to the elements added
                    added_ok = (not red) or abs(float(accum.double().sum()) - payload / 4) \
                        < 1e-6 * payload
                    t = back_to_back(call, handle)
                    segments = grid * ITERS * nsub * BM if load else 0
                    rec = {"mode": mode, "group": args.group, "head_dim": d,
                           "row_bytes": 2 * d,
                           "programs_per_sm": per_sm, "grid": grid, "iters": ITERS,
                           "red_tiles_per_step": red_tiles if red else 0,
                           "segments_128B": segments, "reduction_payload_bytes": payload,
                           "reductions_landed": added_ok, **t}
                    rows.append(rec)
                    print(mode, d, per_sm, red_tiles, added_ok,
                          round(t["seconds"] * 1e6, 1), "us",
                          round(t["sm_clock_mhz_mean"]), "MHz", flush=True)
                    write_rows(args.out, rows, method=(
                        "Triton TMA descriptor loads (sm_90) of 64 x 64 bf16 boxes fed to "
                        "WGMMA, and fp32 [64, 128] tile reductions (TMA bulk or "
                        "red.global.add) into an 8 MiB accumulator; back_to_back timing with "
                        "NVML"), triton=triton.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
