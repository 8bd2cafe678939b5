"""What a register spill costs a 4-warp CTA, without attention (issue 9's spill question).

    python3 validate/probe_spill_cost.py OUT.json            # on a GPU (torch + triton)
    ncu --metrics ... python3 validate/probe_spill_cost.py OUT.json   # probe_spill_cost.sh

One Triton kernel, one CTA of four warps per SM (grid = SMs), loops ``STEPS`` times over two
MMAs that accumulate into two fp32 accumulators of ``M x N``, with the operands loaded from
a small L2-resident buffer each step (the shape of a backward's dK/dV loop, none of its
softmax). With ``M = 128, N = 128`` the accumulators need 2 · 128 · 128 / 128 = 256
registers per thread, more than the 255 a thread can address, so the compiler spills; the
control runs ``M = 64`` for twice the steps (the same FLOPs, 128 accumulator registers, no
spill). The difference in time per SM, divided by the bytes reloaded from local memory per
SM (Nsight Compute, ``probe_spill_cost.sh``), is the cost of a reloaded byte. Records the
compiled kernels' registers and spill sizes (``n_regs``, ``n_spills``) and CUDA-event times,
with the SM clock and power sampled by NVML every 5 ms during each timed region.
``--merge OUT.json NCU.csv`` adds Nsight Compute's local-memory bytes to the rows and the
reload rate per SM of each spilling variant against its control.
"""

from __future__ import annotations

import json
import os
import sys

STEPS = 2048
#: (name, M, N, K, steps factor[, num_stages: 2 unless given])
VARIANTS = (("spill_m128_n128", 128, 128, 64, 1), ("nospill_m64_n128", 64, 128, 64, 2),
            ("spill_m64_n256", 64, 256, 64, 1), ("nospill_m128_n64", 128, 64, 64, 2))
#: ``PROBE_SET=sweep``: the reload rate against the bytes spilled per step and the shared
#: memory beside them (more pipeline stages take more of the SM's 256 KB of L1 and shared
#: memory): the two spilling loops at 2-4 stages, a wider one (M = 128, N = 256: 512
#: accumulator registers), each with a control of the same FLOPs that does not spill (12
#: variants, 24 launches under Nsight Compute)
VARIANTS_SWEEP = (
    ("spill_m128_n128", 128, 128, 64, 1, 2), ("spill_m128_n128_s3", 128, 128, 64, 1, 3),
    ("spill_m128_n128_s4", 128, 128, 64, 1, 4), ("nospill_m64_n128", 64, 128, 64, 2, 2),
    ("nospill_m64_n128_s3", 64, 128, 64, 2, 3), ("nospill_m64_n128_s4", 64, 128, 64, 2, 4),
    ("spill_m64_n256", 64, 256, 64, 1, 2), ("spill_m64_n256_s3", 64, 256, 64, 1, 3),
    ("nospill_m128_n64", 128, 64, 64, 2, 2), ("nospill_m128_n64_s3", 128, 64, 64, 2, 3),
    ("spill_m128_n256", 128, 256, 64, 1, 2), ("nospill_m64_n128_x4", 64, 128, 64, 4, 2))
BUFFERS = 8


def _sampler():
    """An NVML sampler running (``nvml_sampler.py`` beside this file), or None without NVML."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from nvml_sampler import NvmlSampler

        return NvmlSampler(period_s=0.005).start()
    except Exception:  # noqa: BLE001 - no pynvml / no NVML: times still count
        return None


def _clock_power(samples: list[dict]) -> dict:
    """Mean SM clock (Hz) and power (W) of the samples."""
    def mean(key):
        vals = [s[key] for s in samples if s.get(key) is not None]
        return sum(vals) / len(vals) if vals else None
    return {"n_samples": len(samples), "sm_clock_mean_hz": mean("sm_hz"),
            "power_mean_w": mean("power_inst_w") or mean("power_avg_w")}


#: spilling variant -> its control (the same FLOPs, no spill)
CONTROLS = {"spill_m128_n128": "nospill_m64_n128", "spill_m64_n256": "nospill_m128_n64",
            "spill_m128_n128_s3": "nospill_m64_n128_s3", "spill_m128_n128_s4":
            "nospill_m64_n128_s4", "spill_m64_n256_s3": "nospill_m128_n64_s3",
            "spill_m128_n256": "nospill_m64_n128_x4"}


def merge(out_json: str, ncu_csv: str) -> int:
    """Add Nsight Compute's local bytes (mean over the profiled launches of each variant, in
    launch order) and the derived reload rate per SM to ``out_json``."""
    import csv

    data = json.load(open(out_json))
    rows = list(csv.reader(open(ncu_csv)))
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    names = rows[head]
    launches = [dict(zip(names, r)) for r in rows[head + 2:] if len(r) == len(names)]
    per = len(launches) // len(data["rows"])

    def num(x):
        return float(x.replace(",", ""))
    for i, row in enumerate(data["rows"]):
        mine = launches[i * per:(i + 1) * per]
        for key, metric in (("local_load_bytes", "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"),
                            ("local_store_bytes", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"),
                            ("ncu_duration_s", "gpu__time_duration.sum")):
            row[key] = sum(num(m[metric]) for m in mine) / len(mine)
        row["ncu_duration_s"] *= 1e-9
    by = {r["variant"]: r for r in data["rows"]}
    for spill, control in CONTROLS.items():
        if spill not in by or control not in by:
            continue
        s, c = by[spill], by[control]
        extra = s["median_s"] - c["median_s"]
        s["extra_s_vs_control"] = extra
        s["reload_bytes_per_thread_step"] = s["local_load_bytes"] / (s["ctas"] * 128 * s["steps"])
        s["reload_bandwidth_per_sm_bytes_per_s"] = s["local_load_bytes"] / s["ctas"] / extra
    json.dump(data, open(out_json, "w"), indent=1)
    for r in data["rows"]:
        print(json.dumps(r))
    return 0


_KERNEL = None


def kernel():
    """The Triton kernel (built once): one CTA loops ``steps`` times over two MMAs into two
    fp32 ``M x N`` accumulators, its operands loaded from ``NBUF`` small L2-resident buffers.
    ``validate/power_probe.py`` runs it back to back for its power (``spill_*`` benches)."""
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import triton
    import triton.language as tl

    @triton.jit
    def two_acc_loop(A, B, Out, steps, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                     NBUF: tl.constexpr):
        pid = tl.program_id(0)
        offs_m = tl.arange(0, M)
        offs_n = tl.arange(0, N)
        offs_k = tl.arange(0, K)
        acc1 = tl.zeros([M, N], dtype=tl.float32)
        acc2 = tl.zeros([M, N], dtype=tl.float32)
        a_ptrs = A + offs_m[:, None] * K + offs_k[None, :]
        b_ptrs = B + offs_k[:, None] * N + offs_n[None, :]
        for i in range(steps):
            j = (i + pid) % NBUF
            a = tl.load(a_ptrs + j * M * K)
            b1 = tl.load(b_ptrs + j * K * N)
            acc1 = tl.dot(a, b1, acc1)
            b2 = tl.load(b_ptrs + ((j + 1) % NBUF) * K * N)
            acc2 = tl.dot(a, b2, acc2)
        out = Out + pid * M * N + offs_m[:, None] * N + offs_n[None, :]
        tl.store(out, acc1 + acc2)

    _KERNEL = two_acc_loop
    return _KERNEL


def launcher(m: int, n: int, k: int, steps: int, stages: int = 2):
    """``(run, sms)``: ``run()`` launches :func:`kernel` once on one CTA of 4 warps per SM,
    ``M x N x K`` tiles, ``steps`` steps and ``stages`` pipeline stages, on inputs made here
    (``BUFFERS`` small bf16 operand buffers, L2-resident), and returns the compiled kernel
    (its ``n_regs`` and ``n_spills``). Shared by :func:`main` and ``power_probe.py``."""
    import torch

    two_acc_loop = kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a = torch.randn(BUFFERS * m * k, device="cuda", dtype=torch.bfloat16) * 0.01
    b = torch.randn(BUFFERS * k * n, device="cuda", dtype=torch.bfloat16) * 0.01
    out = torch.empty(sms * m * n, device="cuda", dtype=torch.float32)

    def run():
        return two_acc_loop[(sms,)](a, b, out, steps, M=m, N=n, K=k, NBUF=BUFFERS,
                                    num_warps=4, num_stages=stages)
    return run, sms


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--merge":
        return merge(argv[1], argv[2])
    import torch

    dev = torch.cuda.get_device_properties(0)
    rows = []
    variants = VARIANTS_SWEEP if os.environ.get("PROBE_SET") == "sweep" else VARIANTS
    for name, m, n, k, factor, *rest in variants:
        stages = rest[0] if rest else 2
        steps = STEPS * factor
        run, sms = launcher(m, n, k, steps, stages)
        compiled = run()
        torch.cuda.synchronize()
        times = []
        sampler = _sampler()
        for _ in range(int(os.environ.get("PROBE_REPS", "20"))):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        samples = sampler.stop() if sampler else []
        times.sort()
        rows.append({"variant": name, "M": m, "N": n, "K": k, "steps": steps, "ctas": sms,
                     "num_stages": stages,
                     "warps": 4, "n_regs": getattr(compiled, "n_regs", None),
                     "n_spills": getattr(compiled, "n_spills", None),
                     "shared": getattr(compiled, "metadata", None) and compiled.metadata.shared,
                     "flops": 2 * 2 * m * n * k * steps * sms,
                     "median_s": times[len(times) // 2], "min_s": times[0],
                     **_clock_power(samples)})
        print(json.dumps(rows[-1]))
    if argv:
        with open(argv[0], "w") as f:
            json.dump({"device": dev.name, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
