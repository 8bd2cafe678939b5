"""Microbenchmark: L2 cache bandwidth of the GPU present (not attention).

Every program of a Triton kernel walks an L2-resident buffer (``SIZES_MB``, below the
usable half of the H200's 60 MiB L2) in contiguous 16 KiB chunks, ``ITERS`` chunks each,
starting at its own offset so that the CTAs of a wave touch different chunks:

- ``read``: loads the chunks and keeps a running sum (one store per program at the end);
- ``rmw``: loads each chunk, adds 1 and stores it back (read-modify-write: data a kernel
  also writes, as FA1's O, ℓ, m round trips; its bytes are the loads and the stores);
- ``reduce``: adds a register tile into the chunks with ``tl.atomic_add(..., sem="relaxed")``
  (the per-element fp32 reductions flash-attn 2 sends to its dQ accumulator);
- ``bulk_reduce``: adds each chunk as one TMA bulk reduction through a tensor descriptor
  (``cp.reduce.async.bulk``, as FA3-class kernels send their dQ partial tiles; sm_90+).

Bytes are counted as the kernel asks for them: 4 B per loaded or added fp32 element. The first
of 200 timed calls (``triton.testing.do_bench``) follows 50 warm-up calls, so the buffer is in
L2 (a buffer of 4-24 MiB is read ~100 times per call); NVML samples the SM clock and board
power during the timed calls. Rows: bytes/s, the sampled SM clock and the bytes per SM clock.

    python3 validate/probe_l2.py OUT.json
    ncu --metrics ... python3 validate/probe_l2.py --once   # one launch per mode, 16 MiB

(``--once``: the target program for Nsight Compute, whose ``lts__t_bytes`` counters say how
the L2 counts these bytes, and its ``.peak_sustained`` the L2's own bytes-per-cycle peak.)
"""

from __future__ import annotations

import json
import sys

SIZES_MB = (4, 8, 16, 24)
BLOCK = 4096            # fp32 elements per chunk (16 KiB)
ITERS = 128             # chunks per program
PROGRAMS_PER_SM = (4, 8)


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def walk(BUF, OUT, n_chunks, grid, iters, BLOCK: tl.constexpr, REDUCE: tl.constexpr,
             RMW: tl.constexpr = False):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(iters):
            chunk = (pid + i * grid) % n_chunks
            ptr = BUF + chunk.to(tl.int64) * BLOCK + offs
            if REDUCE:
                tl.atomic_add(ptr, acc + 1.0, sem="relaxed")
            elif RMW:
                tl.store(ptr, tl.load(ptr) + 1.0)
            else:
                acc += tl.load(ptr)
        tl.store(OUT + pid, tl.sum(acc, axis=0))

    @triton.jit
    def walk_bulk(BUF, OUT, n_chunks, grid, iters, BLOCK: tl.constexpr):
        # the same walk, each chunk added as one TMA bulk reduction (cp.reduce.async.bulk,
        # as FA3-class kernels send their dQ partial tiles)
        ROWS: tl.constexpr = BLOCK // 128
        desc = tl.make_tensor_descriptor(BUF, shape=[n_chunks * ROWS, 128], strides=[128, 1],
                                         block_shape=[ROWS, 128])
        pid = tl.program_id(0)
        tile = tl.full([ROWS, 128], 1.0, dtype=tl.float32)
        for i in range(iters):
            chunk = (pid + i * grid) % n_chunks
            desc.atomic_add([chunk * ROWS, 0], tile)
        tl.store(OUT + pid, 0.0)
    return walk, walk_bulk


def run(out_path: str, sizes=SIZES_MB, modes=("read", "reduce", "bulk_reduce"),
        programs=PROGRAMS_PER_SM) -> list[dict]:
    import re

    import torch
    import triton

    from perfsim.validate.nvml_sampler import NvmlSampler, summarize

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    walk, walk_bulk = _kernels()
    # scratch for tensor descriptors built inside kernels
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device="cuda"))
    rows = []
    for size_mb in sizes:
        n_chunks = size_mb * 2**20 // (4 * BLOCK)
        buf = torch.zeros(n_chunks * BLOCK, device="cuda", dtype=torch.float32)
        for per_sm in programs:
            grid = per_sm * sms
            out = torch.empty(grid, device="cuda", dtype=torch.float32)
            for mode in modes:
                def call(buf=buf, out=out, n_chunks=n_chunks, grid=grid, mode=mode):
                    if mode == "bulk_reduce":
                        return walk_bulk[(grid,)](buf, out, n_chunks, grid, ITERS,
                                                  BLOCK=BLOCK, num_warps=4)
                    return walk[(grid,)](buf, out, n_chunks, grid, ITERS, BLOCK=BLOCK,
                                         REDUCE=(mode == "reduce"), RMW=(mode == "rmw"),
                                         num_warps=8)
                try:
                    compiled = call()
                except Exception as exc:          # e.g. no TMA reductions in this Triton
                    rows.append({"mode": mode, "buffer_mb": size_mb, "error": repr(exc)[:300]})
                    print(json.dumps(rows[-1]), flush=True)
                    continue
                torch.cuda.synchronize()
                sampler = NvmlSampler(period_s=0.005)
                sampler.start()
                ms = triton.testing.do_bench(call, warmup=50, rep=200, return_mode="median")
                summary = summarize(sampler.stop())
                seconds = ms / 1e3
                nbytes = grid * ITERS * BLOCK * 4 * (2 if mode == "rmw" else 1)
                ptx = compiled.asm.get("ptx", "")
                clock = summary.get("sm_clock_mean_hz")
                rows.append({
                    "mode": mode, "buffer_mb": size_mb,
                    "programs_per_sm": per_sm, "grid": grid, "seconds": seconds,
                    "bytes": nbytes, "bytes_per_s": nbytes / seconds,
                    "nvml": summary,
                    "bytes_per_sm_clock": nbytes / seconds / clock if clock else None,
                    "ptx_memory_ops": sorted(set(re.findall(
                        r"\b(red\.[\w.]+|atom\.[\w.]+|ld\.global[\w.]*|st\.global[\w.]*"
                        r"|cp\.reduce[\w.:]*)",
                        ptx)))[:6]})
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "nvml"}),
                      flush=True)
    with open(out_path, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(0), "sm_count": sms,
                   "torch": torch.__version__, "triton": triton.__version__,
                   "block_fp32": BLOCK, "iters": ITERS, "rows": rows}, fh, indent=1)
    return rows


def once() -> None:
    """One launch of each mode on a 16 MiB buffer, 8 programs per SM (for ncu)."""
    import torch
    import triton

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    walk, walk_bulk = _kernels()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device="cuda"))
    n_chunks = 16 * 2**20 // (4 * BLOCK)
    buf = torch.zeros(n_chunks * BLOCK, device="cuda", dtype=torch.float32)
    grid = 8 * sms
    out = torch.empty(grid, device="cuda", dtype=torch.float32)
    for _ in range(2):          # the first launch of each warms L2; ncu sees both
        for reduce in (False, True):
            walk[(grid,)](buf, out, n_chunks, grid, ITERS, BLOCK=BLOCK, REDUCE=reduce,
                          num_warps=8)
        try:
            walk_bulk[(grid,)](buf, out, n_chunks, grid, ITERS, BLOCK=BLOCK, num_warps=4)
        except Exception as exc:
            print("bulk_reduce:", repr(exc)[:300])
    torch.cuda.synchronize()


def main(argv=None) -> int:
    """``OUT.json [--sizes MB,MB,...] [--modes read,rmw,reduce,bulk_reduce] [--programs 4,8]``,
    or ``--once`` (the Nsight Compute target). Sizes past the L2 (60 MiB on the H200) walk
    the buffer cyclically: how much of a working set larger than L2 still hits there."""
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--once"]:
        once()
        return 0
    ap = argparse.ArgumentParser(prog="python -m perfsim.validate.probe_l2")
    ap.add_argument("out", nargs="?", default="probe_l2.json")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES_MB)))
    ap.add_argument("--modes", default="read,reduce,bulk_reduce")
    ap.add_argument("--programs", default=",".join(map(str, PROGRAMS_PER_SM)))
    a = ap.parse_args(argv)
    run(a.out, sizes=[int(x) for x in a.sizes.split(",")], modes=a.modes.split(","),
        programs=[int(x) for x in a.programs.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
