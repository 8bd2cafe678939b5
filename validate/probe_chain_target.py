"""Target program for Nsight Compute: one launch of ``microbench.load_chain``'s kernel (an
unpipelined CTA's load step: 4 warps load a 64 x COLS fp32 tile, wait, add, store, next; one
CTA on each of 32 SMs) between ``cudaProfilerStart``/``Stop``, so that
``validate/probe_clock_scaling.sh`` can time the same launch at two SM clocks: a step whose
time is memory latency and memory-side bandwidth keeps its nanoseconds when the SMs slow down;
one set by SM-side work keeps its cycles.

Usage (on the GPU, perfsim importable as ``ncu_env.sh`` links it)::

    python3 validate/probe_chain_target.py COLS [WRAP]   # COLS in 32, 64, 128, 256

With ``WRAP`` each CTA walks ``WRAP`` tiles again and again (``load_chain_wrapped``): 32 CTAs
x WRAP tiles of 64 x COLS fp32, in and out, stay in the L2 (WRAP = 8: at most 32 MiB), so
the step is an L2 hit's; without it every step reads HBM, as the microbenchmark does.
"""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import torch

    from perfsim.validate import _bench_kernels as bk
    from perfsim.validate.microbench import CHAIN_GRID, CHAIN_STEPS
    from perfsim.validate.probe_ncu import _profile_once

    cols = int(argv[0]) if argv else 256
    wrap = int(argv[1]) if len(argv) > 1 else None
    n = CHAIN_GRID * (wrap or CHAIN_STEPS) * 64 * cols
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)

    def run():
        if wrap:
            bk.load_chain_wrapped[(CHAIN_GRID,)](x, y, CHAIN_STEPS, wrap, ROWS=64, COLS=cols,
                                                 num_warps=4, num_stages=1)
        else:
            bk.load_chain[(CHAIN_GRID,)](x, y, CHAIN_STEPS, ROWS=64, COLS=cols, num_warps=4,
                                        num_stages=1)
    _profile_once(run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
