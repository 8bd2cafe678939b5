"""Microbenchmark: L2 bytes of pipelined 16-byte row loads when a row is not a whole number of
32-byte sectors (not attention).

FlexAttention's forward runs 25-40 % slower than modelled at head dims that are a multiple of
8 but not of 16 (``validate/README.md``, "FlexAttention's forward at head dims that are not a
multiple of 16"), and Nsight Compute showed its L2 moving 1.5x the bytes its tiles hold there.
This probe isolates the load pattern: a Triton loop over key tiles that loads a ``[64, P]``
tile of K and of V from row-major ``[N, D]`` bf16 matrices (row stride ``D`` elements, ``P``
the next power of two, columns ``>= D`` masked off — how FlexAttention's template loads them)
and runs two dots on them, pipelined over ``num_stages = 3`` (Triton emits ``cp.async``,
LDGSTS, 16 bytes per thread). Every program reads the same K and V (L2-resident), as the
query tiles of one head do. Each launch runs between ``cudaProfilerStart``/``Stop`` for
Nsight Compute (``--profile-from-start off``) in the order of :data:`HEAD_DIMS`; the JSON
written holds, per head dim, the bytes the tiles hold, so ``lts__t_bytes`` divided by them is
the inflation.

    python3 validate/probe_row_alignment.py OUT.json           # timings and bytes
    ncu --profile-from-start off --metrics lts__t_bytes.sum,gpu__time_duration.sum \\
        --csv python3 validate/probe_row_alignment.py OUT.json  # the L2 bytes per launch
"""

from __future__ import annotations

import json
import sys

#: Head dims (row lengths in bf16 elements): multiples of 16 (rows a whole number of 32-byte
#: sectors) beside multiples of 8 that are not (every other row starts half a sector in).
HEAD_DIMS = (96, 104, 112, 128, 144, 152, 216, 256)
BLOCK_M, BLOCK_N, SEQ, STAGES, WARPS = 64, 64, 4096, 3, 4
PROGRAMS_PER_SM = 2


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def row_tiles(Q, K, V, Out, n_keys, D: tl.constexpr, P: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr):
        pid = tl.program_id(0)
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, P)
        cols = rd[None, :] < D
        q = tl.load(Q + rm[:, None] * D + rd[None, :], mask=cols, other=0.0)
        acc = tl.zeros([BM, P], dtype=tl.float32)
        for start in range(0, n_keys, BN):
            rows = start + rn
            k = tl.load(K + rows[:, None] * D + rd[None, :], mask=cols, other=0.0)
            v = tl.load(V + rows[:, None] * D + rd[None, :], mask=cols, other=0.0)
            s = tl.dot(q, tl.trans(k))
            acc += tl.dot(s.to(v.dtype), v)
        tl.store(Out + pid * BM * P + rm[:, None] * P + rd[None, :], acc)

    return row_tiles


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_path = argv[0] if argv else "probe_row_alignment.json"
    import torch
    import triton

    kernel = _kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = PROGRAMS_PER_SM * sms
    rows = []
    for d in HEAD_DIMS:
        p = triton.next_power_of_2(d)
        q = torch.randn(BLOCK_M, d, device="cuda", dtype=torch.bfloat16) / 8
        k = torch.randn(SEQ, d, device="cuda", dtype=torch.bfloat16) / 8
        v = torch.randn(SEQ, d, device="cuda", dtype=torch.bfloat16) / 8
        o = torch.empty(grid * BLOCK_M * p, device="cuda", dtype=torch.float32)

        def launch(q=q, k=k, v=v, o=o, d=d, p=p):
            return kernel[(grid,)](q, k, v, o, SEQ, D=d, P=p, BM=BLOCK_M, BN=BLOCK_N,
                                   num_stages=STAGES, num_warps=WARPS)

        compiled = launch()
        for _ in range(3):
            launch()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.cudart().cudaProfilerStart()
        start.record()
        launch()
        end.record()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        ptx = (getattr(compiled, "asm", {}) or {}).get("ptx", "")
        tile_bytes = grid * (BLOCK_M * d + 2 * SEQ * d) * 2     # Q once, K and V per program
        rows.append({"head_dim": d, "padded": p, "row_bytes": 2 * d,
                     "row_bytes_mod_32": (2 * d) % 32, "grid": grid,
                     "seconds": start.elapsed_time(end) / 1e3,
                     "tile_bytes_read": tile_bytes,
                     "cp_async": ptx.count("cp.async.cg") + ptx.count("cp.async.ca"),
                     "wgmma": ptx.count("wgmma.mma_async"),
                     "shared": getattr(getattr(compiled, "metadata", None), "shared", None)})
        print(rows[-1], flush=True)
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "block": [BLOCK_M, BLOCK_N],
                   "seq": SEQ, "stages": STAGES, "warps": WARPS, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
