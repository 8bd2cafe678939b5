"""A WGMMA loop that times itself in cycles: the tick clock and the tensor rate per tick of an
undisturbed, power-capped tensor-core load (not attention).

``probe_tick_clock.py`` measures the SMs' clock beside a workload from a CTA of its own, which
takes one SM from the workload. Here every CTA of the workload itself reads ``%clock64`` and
``%globaltimer`` after its operand loads and after its loop (``probe_mma_smem``'s WGMMA loop:
both operands in shared memory, 64 x 256 x 64 tile, one warpgroup per CTA), on all SMs. Per
launch: the tick clock = cycles / nanoseconds of the CTAs' loops (median), the rate per tick =
the CTA's FLOPs x CTAs per SM / its cycles; NVML is sampled every 5 ms. Launches run back to
back for ``--duration`` seconds at 1 and 2 CTAs per SM; the launches after the first second are
summarised.

    python3 -m perfsim.validate.probe_tick_in_kernel --out FILE.json [--duration 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

BM, BN, BK = 64, 256, 64
SETTLE_S = 1.0


def _kernel():
    import triton
    import triton.language as tl

    from perfsim.validate.probe_util import tick_readers

    _gtimer, _clock = tick_readers()

    @triton.jit
    def timed_dot_loop(A, B, Y, T, iters, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
        a = tl.load(A + rm[:, None] * BK + rk[None, :])
        b = tl.load(B + rk[:, None] * BN + rn[None, :])
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        dummy = tl.program_id(0)
        t0 = _gtimer(dummy)
        c0 = _clock(dummy)
        for _ in range(iters):
            acc = tl.dot(a, b, acc)
        # the loop's result is needed before the second reading
        s = tl.sum(tl.sum(acc, axis=1), axis=0)
        t1 = _gtimer(dummy + (s > 1e30).to(tl.int32))
        c1 = _clock(dummy + (s > 1e30).to(tl.int32))
        tl.store(Y + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc)
        tl.store(T + pid * 4 + 0, t0)
        tl.store(T + pid * 4 + 1, c0)
        tl.store(T + pid * 4 + 2, t1)
        tl.store(T + pid * 4 + 3, c1)

    return timed_dot_loop


def run(ctas_per_sm: int, duration: float, sampler, kernel) -> dict:
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = ctas_per_sm * sms
    a = torch.randn(BM, BK, device="cuda", dtype=torch.bfloat16) / 8
    b = torch.randn(BK, BN, device="cuda", dtype=torch.bfloat16) / 8
    y = torch.empty(grid * BM * BN, device="cuda", dtype=torch.float32)
    stamps = torch.zeros(grid * 4, device="cuda", dtype=torch.int64)
    iters = 4096
    kernel[(grid,)](a, b, y, stamps, iters, BM=BM, BN=BN, BK=BK, num_warps=4)
    torch.cuda.synchronize()
    # about 50 ms per launch
    t = time.perf_counter()
    kernel[(grid,)](a, b, y, stamps, iters, BM=BM, BN=BN, BK=BK, num_warps=4)
    torch.cuda.synchronize()
    iters = max(int(iters * 0.05 / (time.perf_counter() - t)), 1)
    launches = []
    sampler.start()
    t_start = time.perf_counter()
    while time.perf_counter() - t_start < duration:
        t_launch = time.perf_counter() - t_start
        kernel[(grid,)](a, b, y, stamps, iters, BM=BM, BN=BN, BK=BK, num_warps=4)
        host = stamps.view(grid, 4).cpu().tolist()      # synchronises
        t_end = time.perf_counter() - t_start
        ticks = sorted((c1 - c0) / ((t1 - t0) * 1e-9) for t0, c0, t1, c1 in host if t1 > t0)
        cycles = statistics.median(c1 - c0 for _, c0, _, c1 in host)
        launches.append({"t0": t_launch, "t1": t_end, "tick_hz": statistics.median(ticks),
                         "cycles": cycles,
                         "flop_per_tick_per_sm": 2.0 * BM * BN * BK * iters * ctas_per_sm
                         / cycles})
    samples = sampler.stop()
    steady = [x for x in launches if x["t0"] >= SETTLE_S]
    nvml = [s for s in samples if s["t"] - (t_start) >= SETTLE_S and s.get("sm_hz")]
    tick = statistics.median(x["tick_hz"] for x in steady)
    nv = statistics.median(s["sm_hz"] for s in nvml)
    watts = statistics.median(s["power_inst_w"] or s["power_avg_w"] for s in nvml)
    return {"ctas_per_sm": ctas_per_sm, "grid": grid, "iters": iters,
            "launches": len(steady), "tick_clock_hz": tick, "nvml_sm_clock_hz": nv,
            "tick_over_nvml": tick / nv, "power_w": watts,
            "flop_per_tick_per_sm": statistics.median(x["flop_per_tick_per_sm"] for x in steady),
            "flop_per_nvml_clock_per_sm": statistics.median(
                x["flop_per_tick_per_sm"] * x["tick_hz"] for x in steady) / nv}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration", type=float, default=4.0)
    args = ap.parse_args(argv)
    import torch

    from perfsim.validate.nvml_sampler import NvmlSampler

    sampler = NvmlSampler(period_s=0.005)
    kernel = _kernel()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "method": __doc__.split("\n\n")[1].replace("\n", " "), "tile": [BM, BN, BK],
           "runs": []}
    for ctas in (1, 2):
        rec = run(ctas, args.duration, sampler, kernel)
        out["runs"].append(rec)
        print(json.dumps(rec), flush=True)
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
