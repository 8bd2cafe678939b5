"""Microbenchmark: the fixed cost of one wave of CTAs in a pipelined tile loop (not attention).

Every CTA loads its own Q tile (BM x D bf16) from HBM, walks ``steps`` K/V tiles (BN x D each)
doing ``acc += (q @ kᵀ) @ v`` — two GEMMs per step, no softmax, loads pipelined by Triton's
``num_stages`` — and stores its BM x D result. Unlike ``probe_mma_smem.run_prologue`` (whose
CTAs each stream their own K/V and so run at HBM speed), all CTAs here walk one of
``KV_SETS`` small K/V sets that stay in L2, so a step costs its GEMMs and L2 loads and the
grid is not HBM-bound. For a grid of ``waves`` full waves of resident CTAs the time is
``launch + waves x (fixed + steps x step)``: the slope in ``steps`` is the steady-state step,
the intercept per wave is what a CTA pays once — its first loads (Q and the first K/V tile
through the load latency and the SM's load path), the pipeline fill and the epilogue store —
that the CTAs resident beside it did not hide. Two Q-tile widths (D = 64 and 128) test how it
grows with the bytes a CTA must load before its first MMA.

Run on a CUDA GPU with perfsim importable (``validate/probe_run.sh`` arranges it):
``python -m perfsim.validate.probe_cta_fixed OUT.json [TILE INDICES]`` (torch, triton
and pynvml are imported inside functions). NVML's SM clock is sampled around each timing.
"""

from __future__ import annotations

import json
import sys

#: (BM, BN, D, num_warps, num_stages): forward tiles of the tutorial-style Triton kernels
#: (the first three), then tiles whose steps are much shorter or longer, which tell a fixed
#: cost per wave from one that grows with the step.
TILES = ((128, 64, 128, 4, 2), (128, 64, 64, 4, 2), (64, 64, 128, 4, 2),
         (64, 32, 64, 4, 2), (128, 128, 128, 8, 2), (128, 64, 256, 8, 2))
STEPS = (1, 2, 4, 8, 16, 32)
#: Grids as multiples of the resident CTAs (one full wave = SMs x resident per SM).
WAVES = (1, 2, 4, 8, 16)
#: Distinct K/V sets the CTAs share (each at most 32 steps x 64 x 128 x 2 B x 2 = 1 MiB): 8 MiB
#: in all, far inside the H200's 60 MiB L2.
KV_SETS = 8


def _resident(compiled, warps: int, props) -> int:
    """CTAs of this compiled kernel one SM holds (registers, shared memory, warps)."""
    regs = max(int(getattr(compiled, "n_regs", 0) or 0), 1)
    smem = max(int(compiled.metadata.shared), 1)
    by_regs = props.regs_per_multiprocessor // (regs * 32 * warps)
    by_smem = props.shared_memory_per_multiprocessor // (smem + 1024)
    by_warps = props.max_threads_per_multi_processor // (32 * warps)
    return max(1, min(by_regs, by_smem, by_warps))


def _fit(xs, ys):
    """Least-squares line ``y = a + b x``: ``(a, b)``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def run(out_path: str, tiles=TILES) -> dict:
    import pynvml
    import torch
    import triton

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def mhz():
        return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)

    from perfsim.validate.probe_mma_smem import _chain_kernel
    from perfsim.validate.probe_util import write_rows

    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    kernel = _chain_kernel()      # probe_mma_smem's tile loop, here on KV_SETS shared K/V sets
    rows, fits = [], []
    for bm, bn, d, warps, stages in tiles:
        k = torch.randn(KV_SETS * max(STEPS) * bn * d, device="cuda", dtype=torch.bfloat16) / 8
        v = torch.randn_like(k)
        resident = None
        per_waves = {}
        for waves in WAVES:
            times = []
            for steps in STEPS:
                # the grid is set before the kernel is compiled: compile once on a small grid
                if resident is None:
                    q0 = torch.randn(sms * bm * d, device="cuda", dtype=torch.bfloat16) / 8
                    o0 = torch.empty_like(q0)
                    compiled = kernel[(sms,)](q0, k, v, o0, 1, KV_SETS, BM=bm, BN=bn, D=d,
                                              num_warps=warps, num_stages=stages)
                    resident = _resident(compiled, warps, props)
                grid = waves * resident * sms
                q = torch.randn(grid * bm * d, device="cuda", dtype=torch.bfloat16) / 8
                o = torch.empty_like(q)

                launch = {"BM": bm, "BN": bn, "D": d, "num_warps": warps,
                          "num_stages": stages}

                def call(grid=grid, args=(q, k, v, o, steps, KV_SETS), launch=launch):
                    kernel[(grid,)](*args, **launch)

                call()
                torch.cuda.synchronize()
                clocks = [mhz()]
                seconds = triton.testing.do_bench(call, warmup=50, rep=200,
                                                  return_mode="median") / 1e3
                clocks.append(mhz())
                times.append(seconds)
                rows.append({"bm": bm, "bn": bn, "d": d, "warps": warps, "stages": stages,
                             "resident_per_sm": resident, "waves": waves, "grid": grid,
                             "steps": steps, "seconds": seconds,
                             "sm_clock_mhz": sum(clocks) / len(clocks),
                             "q_and_out_bytes": 2 * 2 * grid * bm * d,
                             "flop": 4 * grid * steps * bm * bn * d})
                print(json.dumps(rows[-1]), flush=True)
            intercept, slope = _fit(list(STEPS), times)
            per_waves[waves] = (intercept, slope)
        # intercept against waves: its slope is the fixed cost per wave
        ws = sorted(per_waves)
        per_wave, launch = _fit(ws, [per_waves[w][0] for w in ws])[::-1]
        fits.append({"bm": bm, "bn": bn, "d": d, "warps": warps, "stages": stages,
                     "resident_per_sm": resident,
                     "intercept_s_by_waves": {str(w): per_waves[w][0] for w in ws},
                     "step_s_by_waves": {str(w): per_waves[w][1] for w in ws},
                     "fixed_s_per_wave": per_wave, "intercept_at_zero_waves_s": launch,
                     "q_tile_bytes": 2 * bm * d, "kv_tile_bytes": 2 * 2 * bn * d})
        print(json.dumps(fits[-1]), flush=True)
    write_rows(out_path, rows, triton=triton.__version__, kv_sets=KV_SETS, fits=fits)
    return {"rows": rows, "fits": fits}


if __name__ == "__main__":
    # optional second argument: indices into TILES, e.g. "3,4,5"
    picked = TILES if len(sys.argv) < 3 else tuple(TILES[int(i)] for i in sys.argv[2].split(","))
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_cta_fixed.json", picked)
