"""What xFormers' locked dQ accumulation costs a CTA per step, without attention (issue 9).

    python3 validate/probe_dq_lock.py OUT.json        # on a GPU (torch + triton)

PyTorch's memory-efficient backward (xFormers' ``cutlassB``, ``mem_eff_attention/
kernel_backward.h``) runs one CTA per key block (``num_splits_key`` = key blocks unless the
grid is already large and the keys few) and walks the query blocks, the CTA of key block
``s`` starting at query block ``s`` (``getQueryStartShift``). At each (query, key) step it
adds its dQ partial into an fp32 accumulator tile in global memory under a per-tile lock:

1. thread 0 takes the lock (``atomicCAS(lock, 0, s + 1)`` until it reads ``s + 1``, with
   ``__nanosleep(40)`` between tries: two CAS round trips when the lock is free), then
   ``__syncthreads`` and ``__threadfence``;
2. every thread loads its part of the fp32 tile (``B_r x d``), adds, and
3. thread 0 counts the adds (``atomicAdd`` on a per-tile counter, read back); the last adder
   stores the tile to dQ, the others store it back to the workspace, ``__threadfence``,
   ``__syncthreads`` and release the lock.

Between the steps the CTA computes (five GEMMs and the softmax); none of this overlaps with
that work inside the CTA (``__syncthreads`` on both sides). This probe runs the same
protocol in a Triton kernel with a stand-in computation (``SPIN`` dependent FMAs on a
register tile per step) and times three modes on the same grid: 0 the computation alone,
1 the tile's load-add-store without lock, fence or counter, 2 the whole protocol. The
difference per step is what the protocol costs a CTA, measured without attention. Records
the compiled kernels' registers and shared memory (the CTAs an SM holds), CUDA-event times,
and the SM clock and power sampled by NVML every 5 ms during each timed region.
"""

from __future__ import annotations

import json
import os
import sys

#: (name, rows, cols, warps, key blocks = query blocks, heads, live register tiles, spins)
CONFIGS = (("tile128x128_w16", 128, 128, 16, 32, 32, 1, (0, 100, 230)),
           ("tile64x64_w4", 64, 64, 4, 64, 64, 2, (0, 50, 110)))
MODES = (0, 1, 2)


def _sampler():
    """An NVML sampler running, or None without NVML (``probe_spill_cost._sampler``)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from probe_spill_cost import _sampler as sampler

    return sampler()


def _clock_power(samples: list[dict]) -> dict:
    """Mean SM clock (Hz) and power (W) of the samples (``probe_spill_cost._clock_power``)."""
    from probe_spill_cost import _clock_power as clock_power

    return clock_power(samples)


def build():
    """The Triton kernel (imported lazily: the module documents the probe without a GPU)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _fence(x):
        return tl.inline_asm_elementwise("fence.sc.gpu;\n mov.b32 $0, $1;", "=r,r", [x],
                                         dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def _nanosleep(x):
        return tl.inline_asm_elementwise("nanosleep.u32 40;\n mov.b32 $0, $1;", "=r,r", [x],
                                         dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def _release(lock):
        # thread 0 stores 0 with release semantics, as kernel_backward.h's AtomicLock::release
        # (st.global.release.gpu.b32); no value comes back, so nothing waits for it
        return tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .b32 t; .reg .b32 z; mov.u32 t, %tid.x; mov.b32 z, 0;\n"
            " setp.eq.u32 p, t, 0;\n @p st.global.release.gpu.b32 [$1], z;\n mov.b32 $0, 0; }",
            "=r,l", [lock.to(tl.uint64)], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def dq_lock_walk(ACC, LOCKS, COUNTS, DQ, KEEP, n_q, spin, ROWS: tl.constexpr,
                     COLS: tl.constexpr, LIVE: tl.constexpr, MODE: tl.constexpr):
        s = tl.program_id(0)
        h = tl.program_id(1)
        n_s = tl.num_programs(0)
        offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
        x = tl.zeros([ROWS, COLS], tl.float32) + s.to(tl.float32)
        y = tl.zeros([ROWS, COLS], tl.float32) + h.to(tl.float32)
        me = s + 1
        for t in range(n_q):
            for _ in range(spin):                       # the stand-in computation
                x = x * 0.999 + 0.5
                if LIVE > 1:
                    y = y * 0.998 + x
            q = (s + t) % n_q
            tile = (h * n_q + q).to(tl.int64)
            ptrs = ACC + tile * ROWS * COLS + offs
            if MODE == 1:
                acc = tl.load(ptrs, cache_modifier=".cg")
                tl.store(ptrs, acc + x, cache_modifier=".cg")
            elif MODE == 2:
                lock = LOCKS + tile
                # relaxed, as the source's atomicCAS / atomicAdd: its ordering is the
                # explicit __threadfence (_fence)
                got = tl.atomic_cas(lock, 0, me, sem="relaxed", scope="gpu")
                while got != me:
                    _nanosleep(got)
                    got = tl.atomic_cas(lock, 0, me, sem="relaxed", scope="gpu")
                tl.debug_barrier()
                _fence(got)
                acc = tl.load(ptrs, cache_modifier=".cg") + x
                adds = tl.atomic_add(COUNTS + tile, 1, sem="relaxed", scope="gpu") + 1
                if adds == n_s:
                    tl.store(DQ + tile * ROWS * COLS + offs, acc.to(DQ.dtype.element_ty))
                else:
                    tl.store(ptrs, acc, cache_modifier=".cg")
                    _fence(adds)
                    tl.debug_barrier()
                    _release(lock)
        keep = KEEP + (h * n_s + s).to(tl.int64) * ROWS * COLS + offs
        tl.store(keep, x + y)

    return dq_lock_walk


def one(name: str, spin: int, mode: int) -> int:
    """One launch of ``name`` at ``spin`` and ``mode`` after a warm-up launch (for Nsight
    Compute: ``--launch-skip 1 --launch-count 1``)."""
    import torch

    kernel = build()
    _n, r, c, warps, n_blocks, heads, live, _spins = next(x for x in CONFIGS if x[0] == name)
    tiles = heads * n_blocks
    acc = torch.zeros(tiles * r * c, device="cuda", dtype=torch.float32)
    dq = torch.empty(tiles * r * c, device="cuda", dtype=torch.bfloat16)
    keep = torch.empty(tiles * r * c, device="cuda", dtype=torch.float32)
    for _ in range(2):
        locks = torch.zeros(tiles, device="cuda", dtype=torch.int32)
        counts = torch.zeros(tiles, device="cuda", dtype=torch.int32)
        kernel[(n_blocks, heads)](acc, locks, counts, dq, keep, n_blocks, spin, ROWS=r, COLS=c,
                                  LIVE=live, MODE=mode, num_warps=warps, num_stages=1)
        torch.cuda.synchronize()
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--one":
        return one(argv[1], int(argv[2]), int(argv[3]))
    import torch

    kernel = build()
    dev = torch.cuda.get_device_properties(0)
    rows = []
    for name, r, c, warps, n_blocks, heads, live, spins in CONFIGS:
        tiles = heads * n_blocks
        acc = torch.zeros(tiles * r * c, device="cuda", dtype=torch.float32)
        dq = torch.empty(tiles * r * c, device="cuda", dtype=torch.bfloat16)
        keep = torch.empty(heads * n_blocks * r * c, device="cuda", dtype=torch.float32)
        locks = torch.zeros(tiles, device="cuda", dtype=torch.int32)
        counts = torch.zeros(tiles, device="cuda", dtype=torch.int32)
        for spin in spins:
            for mode in MODES:
                locks.zero_()
                counts.zero_()
                compiled = kernel[(n_blocks, heads)](acc, locks, counts, dq, keep, n_blocks,
                                                     spin, ROWS=r, COLS=c, LIVE=live,
                                                     MODE=mode, num_warps=warps,
                                                     num_stages=1)
                torch.cuda.synchronize()
                times = []
                sampler = _sampler()
                for _ in range(int(os.environ.get("PROBE_REPS", "15"))):
                    locks.zero_()
                    counts.zero_()
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    kernel[(n_blocks, heads)](acc, locks, counts, dq, keep, n_blocks, spin,
                                              ROWS=r, COLS=c, LIVE=live, MODE=mode,
                                              num_warps=warps, num_stages=1)
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end) * 1e-3)
                samples = sampler.stop() if sampler else []
                times.sort()
                rows.append({"config": name, "rows": r, "cols": c, "warps": warps,
                             "key_blocks": n_blocks, "heads": heads, "steps": n_blocks,
                             "ctas": n_blocks * heads, "live_tiles": live, "spin": spin,
                             "mode": mode, "tile_bytes": r * c * 4,
                             "n_regs": getattr(compiled, "n_regs", None),
                             "n_spills": getattr(compiled, "n_spills", None),
                             "shared": getattr(getattr(compiled, "metadata", None), "shared",
                                               None),
                             "median_s": times[len(times) // 2], "min_s": times[0],
                             **_clock_power(samples)})
                print(json.dumps(rows[-1]), flush=True)
    if argv:
        with open(argv[0], "w") as f:
            json.dump({"device": dev.name, "sm_count": dev.multi_processor_count,
                       "source": "validate/probe_dq_lock.py", "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
