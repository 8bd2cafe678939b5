"""The SM clock the cores actually tick at while a kernel runs under load, against the clock
NVML reports (not an attention timing: a clock measurement).

NVML's ``nvmlDeviceGetClockInfo(NVML_CLOCK_SM)`` is what the project's rows record as the
"measured clock". Nsight Compute showed it reading above the cycle counters for kernels run one
at a time (``perfsim.power``: tensor-core kernels ticked at 1.67-1.80 GHz while NVML read
1.85-1.98), but Nsight Compute cannot time a kernel under sustained load, where the board power
limit sets the clock. This probe keeps one single-warp CTA resident on one SM for the whole
region: it reads ``%clock64`` (that SM's cycle counter) and ``%globaltimer`` (nanoseconds) every
few microseconds into a buffer, while the workload runs back to back on another stream on the
other SMs and NVML is sampled every 5 ms. The cycle count over the nanoseconds, per 20 ms
window, is the tick clock; its median over the steady part of the region (after
``SETTLE_S``, to the probe's last sample) goes beside NVML's median clock and power over the
same part.

What it does to the workload: the probe's SM is taken from it, so a grid sized for every SM
runs a tail (the WGMMA loop at one CTA per SM took 81 % longer, cuBLAS GEMMs 6-8 %) and its
load, power and clock can differ from a run without the probe (the one-CTA WGMMA loop was no
longer power-capped). The measurement is the ratio of the two clocks under that load; the
workload's throughput beside the probe (``ms_per_call_on_131_sms``) is not a rate to use.

Workloads (``--cases``, comma separated): ``idle`` (the probe alone), ``gemm`` (``torch.mm``,
bf16 8192^3, cuBLAS), ``power:NAME`` (a microbenchmark of ``perfsim.validate.power_probe``,
where the power model's energies come from), and ``IMPL-PHASE`` with IMPL one of
``perfsim.validate.external``'s (``sdpa_flash``, ``sdpa_cudnn``, ``flex``, ``cute``,
``triton_tutorial``) and PHASE ``fwd`` or ``bwd``, at B = 2, H = 16, N = 8192, d = 128,
bf16, non-causal (a main-grid shape); ``IMPL-PHASE@BxHxNxD`` takes another batch, head count,
sequence length and head dim (``sdpa_flash-bwd@64x16x256x128``: a load the power limit does
not cap).

Usage (on the GPU, perfsim importable as ``external_h200.sh`` links it)::

    python3 -m perfsim.validate.probe_tick_clock --out FILE.json [--cases ...] [--duration 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

#: Seconds of each region before the steady part starts (the power controller settles).
SETTLE_S = 1.0
#: Window over which one tick-clock figure is taken (s).
WINDOW_S = 0.02
#: Dependent FMAs between two samples of the probe (a few microseconds).
SPIN = 2000
#: Fewest microseconds between two samples (the buffer holds duration / this many).
MIN_SAMPLE_US = 1.0
SHAPE = dict(batch=2, heads=16, seqlen_q=8192, head_dim=128, causal=False, dtype="bf16")
DEFAULT_CASES = ("idle", "gemm", "sdpa_flash-fwd", "sdpa_flash-bwd", "sdpa_cudnn-fwd",
                 "sdpa_cudnn-bwd", "flex-fwd", "triton_tutorial-fwd")


def _kernel():
    import triton
    import triton.language as tl

    from perfsim.validate.probe_util import tick_readers

    _gtimer, _clock = tick_readers()

    @triton.jit
    def tick_probe(out_ptr, max_samples, duration_ns, SPIN: tl.constexpr):
        dummy = tl.program_id(0)
        t0 = _gtimer(dummy)
        t = t0
        i = 0
        x = dummy.to(tl.float32) + 1.0
        while (t - t0 < duration_ns) & (i < max_samples):
            t = _gtimer(dummy)
            c = _clock(dummy)
            tl.store(out_ptr + 2 * i, t)
            tl.store(out_ptr + 2 * i + 1, c)
            for _ in range(SPIN):
                x = x * 0.999 + 0.001
            i += 1
        tl.store(out_ptr + 2 * max_samples, i.to(tl.int64))
        tl.store(out_ptr + 2 * max_samples + 1, x.to(tl.int64))

    return tick_probe


def _workload(case: str):
    """``(fn, context, description)``: a no-argument callable running one call of the
    workload, and the context it runs in."""
    from contextlib import nullcontext

    import torch

    if case == "idle":
        return None, nullcontext, "nothing but the probe"
    if case.startswith("power:"):
        # one of perfsim.validate.power_probe's microbenchmarks (the energies' sources)
        from perfsim.validate.power_probe import _benches

        step, _, _, desc = _benches()[case.split(":", 1)[1]]()
        return step, nullcontext, desc
    if case == "gemm":
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        return (lambda: torch.mm(a, b)), nullcontext, "torch.mm bf16 8192^3 (cuBLAS), random data"
    from perfsim.validate import external
    from perfsim.validate.shapes import Shape

    case_shape = dict(SHAPE)
    if "@" in case:
        # IMPL-PHASE@BxHxNxD: another batch, head count, sequence length and head dim
        case, dims = case.split("@", 1)
        b, h, n, d = (int(x) for x in dims.split("x"))
        case_shape.update(batch=b, heads=h, seqlen_q=n, head_dim=d)
    impl, phase = case.rsplit("-", 1)
    shape = Shape(**case_shape, phase=phase)
    q, k, v, do = external.make_inputs(shape, case)
    built = external.build(shape, impl, q, k, v)
    with built.context():
        fn = built.backward_fn(built.make_do(do)) if phase == "bwd" else built.forward
    return fn, built.context, f"{impl} {phase} {case_shape}"


def _windows(t_ns, cycles, start_ns):
    """Tick clocks (Hz) of consecutive ``WINDOW_S`` windows from ``start_ns`` on."""
    out, i, n = [], 0, len(t_ns)
    while i < n and t_ns[i] < start_ns:
        i += 1
    step = int(WINDOW_S * 1e9)
    while i < n:
        j = i
        while j < n and t_ns[j] - t_ns[i] < step:
            j += 1
        if j >= n:
            break
        out.append((cycles[j] - cycles[i]) / ((t_ns[j] - t_ns[i]) * 1e-9))
        i = j
    return out


def run_case(case: str, duration: float, sampler, probe) -> dict:
    rec = {"case": case}
    try:
        fn, context, rec["workload"] = _workload(case)
        with context():
            return _measure(rec, fn, duration, sampler, probe)
    except Exception as exc:  # noqa: BLE001 - one case failing must not lose the others
        sampler.stop()
        import torch

        torch.cuda.synchronize()        # a probe already launched ends before the next case
        return {**rec, "status": "unsupported", "reason": f"{type(exc).__name__}: {exc}"[:400]}


def _measure(rec: dict, fn, duration: float, sampler, probe) -> dict:
    import torch

    if fn is not None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.3:
            fn()
        torch.cuda.synchronize()
    max_samples = int(duration * 1e6 / MIN_SAMPLE_US) + 16
    buf = torch.zeros(2 * max_samples + 2, dtype=torch.int64, device="cuda")
    probe_stream, work_stream = torch.cuda.Stream(), torch.cuda.Stream()
    done = torch.cuda.Event()
    sampler.start()
    t_launch = time.perf_counter()
    with torch.cuda.stream(probe_stream):
        probe[(1,)](buf, max_samples, int(duration * 1e9), SPIN=SPIN, num_warps=1)
        done.record(probe_stream)
    time.sleep(0.02)        # the probe is resident before the workload fills the SMs
    calls = 0
    with torch.cuda.stream(work_stream):
        while not done.query():
            if fn is None:
                time.sleep(0.01)
                continue
            for _ in range(4):
                fn()
            calls += 4
            work_stream.synchronize()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t_launch
    samples = sampler.stop()
    host = buf.cpu().tolist()
    n = host[2 * max_samples]
    t_ns, cycles = host[0:2 * n:2], host[1:2 * n:2]
    if n < 10:
        return {**rec, "status": "failed", "reason": f"the probe took {n} samples"}
    span = (t_ns[-1] - t_ns[0]) * 1e-9
    if span < 0.95 * duration:
        return {**rec, "status": "failed", "reason": f"the probe's buffer ran out after "
                f"{span:.2f} of {duration:g} s ({n} samples)"}
    start = t_ns[0] + int(SETTLE_S * 1e9)
    ticks = sorted(_windows(t_ns, cycles, start))
    # NVML over the same part: from SETTLE_S after the launch to the probe's last sample
    # (the launch is within microseconds of the probe's first sample: it is compiled already)
    steady = [s for s in samples if SETTLE_S <= s["t"] - t_launch <= span]

    def med(key):
        vals = [s[key] for s in steady if s.get(key) is not None]
        return statistics.median(vals) if vals else None

    def pct(vals, p):
        return vals[min(len(vals) - 1, int(round(p * (len(vals) - 1))))] if vals else None

    tick = statistics.median(ticks) if ticks else None
    nvml = med("sm_hz")
    rec.update({
        "status": "ok", "probe_samples": n,
        "probe_span_s": span,
        "sample_interval_us": (t_ns[-1] - t_ns[0]) * 1e-3 / max(n - 1, 1),
        "tick_clock_hz": tick, "tick_clock_p10_hz": pct(ticks, 0.1),
        "tick_clock_p90_hz": pct(ticks, 0.9), "windows": len(ticks),
        "nvml_sm_clock_hz": nvml, "nvml_power_w": med("power_inst_w") or med("power_avg_w"),
        "nvml_reasons": sorted({s.get("reasons") for s in steady if s.get("reasons")}),
        "tick_over_nvml": tick / nvml if tick and nvml else None,
        "workload_calls": calls, "wall_s": wall,
        "ms_per_call_on_131_sms": wall / calls * 1e3 if calls else None,
    })
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--duration", type=float, default=4.0)
    args = ap.parse_args(argv)
    import torch

    from perfsim.validate.nvml_sampler import NvmlSampler

    sampler = NvmlSampler(period_s=0.005)
    probe = _kernel()
    # compile it now, so no case's region starts with the compiler
    probe[(1,)](torch.zeros(4, dtype=torch.int64, device="cuda"), 1, 0, SPIN=SPIN, num_warps=1)
    torch.cuda.synchronize()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "method": __doc__.split("\n\n")[1].replace("\n", " "),
           "settle_s": SETTLE_S, "window_s": WINDOW_S, "spin": SPIN,
           "min_sample_us": MIN_SAMPLE_US, "cases": []}
    for case in args.cases.split(","):
        rec = run_case(case, args.duration, sampler, probe)
        out["cases"].append(rec)
        print(json.dumps({k: rec.get(k) for k in ("case", "status", "tick_clock_hz",
                                                   "nvml_sm_clock_hz", "nvml_power_w",
                                                   "tick_over_nvml", "reason")}), flush=True)
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
