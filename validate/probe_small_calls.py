"""Where the time of a small attention call goes: the host's enqueue time, the kernels the call
launches, and when each starts relative to the call (a profile, not a timing fit).

perfsim times a phase as ``max(GPU time, host floor)`` (``perfsim.predict.evaluate``): the
host's time per call (``TimingParams.host_floor_*``) and the kernels' sum overlap. Small calls
in the external grids, whose kernels take about as long as the host, run longer than both.
This probe answers, per implementation and shape, without a model:

* ``events_s``: the call timed as ``external.time_op`` times the rows (CUDA events around each
  call, back to back, median), with the GPU-side span of all timed calls per call
  (``region_per_call_s``) and the host's wall time per call of that loop (``wall_per_call_s``);
* ``host_s``: the host's own time per call (``time.perf_counter`` around ``fn()``, back to
  back, median; the GPU never blocks the host here);
* per call of an isolated run (``torch.cuda.synchronize`` and a 2 ms pause before each, so the
  GPU is idle when the call starts) under ``torch.profiler`` with CUDA activity alone (no
  per-op CPU records): every kernel the call launches (name, GPU duration), its launch and
  its GPU start relative to the call's start on the host (a CUDA event recorded before
  ``fn()``), and the call's host span. The profiler's host spans are several times the
  unprofiled ones, so its offsets are not used; the kernels' durations are.

    python -m perfsim.validate.probe_small_calls OUT.json [--impls flex,sdpa_flash,...]
        [--calls 20]

torch is imported inside functions (run on a CUDA machine; ``validate/probe_run.sh``-style
layout: perfsim importable, the implementations of ``validate/external.py``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

#: (implementation, phase, (B, H, N, d, causal)) per case: the smallest external rows' shape
#: (B = H = 1, N = 64 or 128) beside small calls whose kernels take about the host's time.
SHAPES = {
    "flex": {"fwd": ((1, 1, 128, 64, True), (2, 16, 1024, 64, True), (1, 16, 2048, 64, True),
                     (1, 16, 2048, 128, True), (4, 8, 1024, 128, True), (1, 8, 4096, 128, True),
                     (1, 16, 2048, 128, False)),
             "bwd": ((1, 1, 128, 64, True), (2, 16, 1024, 64, True), (1, 16, 2048, 64, True),
                     (1, 8, 4096, 64, True))},
    "sdpa_cudnn": {"fwd": ((1, 1, 64, 64, False), (1, 16, 1024, 128, False),
                           (2, 16, 2048, 128, True)),
                   "bwd": ((1, 1, 64, 64, False), (1, 16, 128, 128, False),
                           (2, 16, 1024, 128, True))},
    "sdpa_flash": {"fwd": ((1, 1, 64, 64, False), (1, 16, 1024, 128, False),
                           (2, 16, 2048, 128, True)),
                   "bwd": ((1, 1, 64, 64, False), (1, 16, 128, 128, False),
                           (2, 16, 1024, 128, True))},
    "sdpa_efficient": {"fwd": ((1, 1, 64, 64, False), (1, 16, 1024, 128, False)),
                       "bwd": ((1, 1, 64, 64, False), (1, 16, 128, 128, False))},
}
PAUSE_S = 0.002


def _host_times(fn, n: int) -> list[float]:
    import torch

    torch.cuda.synchronize()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return out


def _profiled(fn, calls: int, trace_path: str | None) -> list[dict]:
    """Per isolated call: the host span and each kernel's name, launch and GPU start offsets
    and duration (µs), from a Chrome trace of ``torch.profiler`` with CUDA activity alone (no
    per-op CPU records, which would slow the host). A CUDA event recorded before and after
    ``fn()`` marks the call on the host: its ``cudaEventRecord`` calls are in the trace, in the
    same clock as the launches (runtime and driver API) and the kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    marks = [(torch.cuda.Event(), torch.cuda.Event()) for _ in range(calls)]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for start, end in marks:
            torch.cuda.synchronize()
            time.sleep(PAUSE_S)
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
    path = trace_path or "/tmp/perfsim_small_call_trace.json"
    prof.export_chrome_trace(path)
    with open(path) as fh:
        return calls_from_trace(json.load(fh)["traceEvents"])


def calls_from_trace(events: list[dict]) -> list[dict]:
    """The calls of a Chrome trace (``traceEvents``) that :func:`_profiled` recorded: each call
    lies between two consecutive ``cudaEventRecord`` API calls (the events recorded before and
    after it; ``fn`` itself must record none); its kernels (and memsets, copies) are those
    whose launching API call (runtime or driver, matched by the ``correlation`` id) falls in
    that span. Per call ``{"host_us", "kernels": [{"name", "cat", "launch_us", "start_us",
    "dur_us"}, ...]}``, offsets in µs from the first record, kernels by GPU start."""
    api = sorted((e for e in events if e.get("ph") == "X"
                  and e.get("cat") in ("cuda_runtime", "cuda_driver")),
                 key=lambda e: float(e["ts"]))
    records = [float(e["ts"]) for e in api if "EventRecord" in e.get("name", "")]
    launches = {(e.get("args") or {}).get("correlation"): float(e["ts"]) for e in api}
    gpu = [e for e in events if e.get("ph") == "X"
           and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    calls_out = []
    for i in range(len(records) // 2):
        c0, c1 = records[2 * i], records[2 * i + 1]
        kernels = []
        for e in gpu:
            launched = launches.get((e.get("args") or {}).get("correlation"))
            if launched is None or not c0 <= launched <= c1:
                continue
            kernels.append({"name": e["name"][:160], "cat": e["cat"],
                            "launch_us": launched - c0, "start_us": float(e["ts"]) - c0,
                            "dur_us": float(e["dur"])})
        kernels.sort(key=lambda k: k["start_us"])
        calls_out.append({"host_us": c1 - c0, "kernels": kernels})
    return calls_out


def summary(calls: list[dict]) -> dict:
    """Medians over the profiled calls: host range, kernel count, GPU busy time, the longest
    kernel's launch and start offsets and duration, and the end of the last kernel."""
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def main(c):
        return max(c["kernels"], key=lambda k: k["dur_us"]) if c["kernels"] else None

    return {
        "host_us": med(c["host_us"] for c in calls),
        "kernels": med(len(c["kernels"]) for c in calls),
        "gpu_busy_us": med(sum(k["dur_us"] for k in c["kernels"]) for c in calls),
        "main_kernel": (main(calls[-1]) or {}).get("name"),
        "main_launch_us": med((main(c) or {}).get("launch_us") for c in calls),
        "main_start_us": med((main(c) or {}).get("start_us") for c in calls),
        "main_dur_us": med((main(c) or {}).get("dur_us") for c in calls),
        "after_main_us": med(sum(k["dur_us"] for k in c["kernels"]
                                 if k["start_us"] > (main(c) or {}).get("start_us", 1e30))
                             for c in calls),
        "last_end_us": med(max((k["start_us"] + k["dur_us"] for k in c["kernels"]),
                               default=None) for c in calls),
    }


def run_case(impl: str, phase: str, dims: tuple, calls: int, trace: str | None) -> dict:
    import torch

    from perfsim.validate import external
    from perfsim.validate.shapes import Shape

    b, h, n, d, causal = dims
    shape = Shape(b, h, n, d, causal, phase=phase)
    rec = {"impl": impl, "phase": phase, "batch": b, "heads": h, "seqlen": n, "head_dim": d,
           "causal": causal}
    try:
        q, k, v, do = external.make_inputs(shape, external.row_key(shape, impl))
        built = external.build(shape, impl, q, k, v)
        with built.context():
            fn = (built.backward_fn(built.make_do(do)) if phase == "bwd" else built.forward)
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            timed = external.time_op(fn, None)
            rec["events_s"] = timed["measured_s"]
            # the GPU-side span of all timed calls and the host's wall time, per call
            rec["region_per_call_s"] = timed["timed_region_s"] / timed["n_calls"]
            rec["wall_per_call_s"] = timed["timed_wall_s"] / timed["n_calls"]
            rec["host_s"] = statistics.median(_host_times(fn, 200))
            per_call = _profiled(fn, calls, trace)
            rec.update(summary(per_call))
            rec["calls"] = per_call[-3:]
            rec["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - recorded per case
        rec.update(status="error", reason=f"{type(exc).__name__}: {str(exc)[:300]}")
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--impls", default=",".join(SHAPES))
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    import torch

    torch._dynamo.config.recompile_limit = 256
    rows = []
    for impl in args.impls.split(","):
        for phase, shapes in SHAPES[impl].items():
            for dims in shapes:
                t = time.perf_counter()
                rec = run_case(impl, phase, dims, args.calls, None)
                rec["wall_s"] = time.perf_counter() - t
                rows.append(rec)
                print(json.dumps({k: v for k, v in rec.items() if k != "calls"}), flush=True)
                with open(args.out, "w") as fh:
                    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
