"""How the SM clock and board power of one attention call settle when it runs back to back for
seconds, against the timed regions of ``external.py`` (≥ 0.4 s of warm-up, then about 0.25 s
timed): do those regions see the clock the power limit sustains, or a transient above it?

    python -m perfsim.validate.probe_settle OUT.json [--seconds 4]

Each case (SDPA with one backend, forward, bf16, B = 4, H = 16, N = 4096, non-causal) runs
after 1 s of idle, back to back for ``--seconds``; NVML is sampled every 5 ms
(:class:`NvmlSampler`: SM clock, instant and averaged power, clock-event reasons) and a CUDA
event after every call gives the call rate. The trace is summarised in 0.25 s windows:
calls per second, mean SM clock (MHz), mean instant power (W). The power limit acts on a
running average, so a short region after idle may run above the clock a long run settles at.
torch and pynvml are imported inside ``main``.
"""

from __future__ import annotations

import argparse
import json
import time

#: (backend, head dim): SDPA cuDNN (power-capped in the external grid) and flash (not capped).
CASES = (("cudnn", 128), ("cudnn", 256), ("flash", 128))
WINDOW_S = 0.25


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args(argv)
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from perfsim.validate.nvml_sampler import NvmlSampler

    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    sampler = NvmlSampler(period_s=0.005)
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "limits": sampler.device_limits(), "window_s": WINDOW_S, "cases": []}
    for backend, d in CASES:
        b, h, n = 4, 16, 4096
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        with sdpa_kernel(backends[backend]):
            def call(q=q, k=k, v=v):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v)
            call()
            torch.cuda.synchronize()
            time.sleep(1.0)                                  # idle: the average power falls
            sampler.start()
            t0 = time.perf_counter()
            events = []
            while time.perf_counter() - t0 < args.seconds:
                call()
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                events.append(ev)
                if len(events) > 8:                          # keep a few calls queued
                    events[-8].synchronize()
            torch.cuda.synchronize()
            samples = sampler.stop()
        # completion times of the calls on the GPU (CUDA events, from the first call's end),
        # aligned with the NVML samples' times from t0: the first call ends within a few ms
        # of t0, so the windows agree to that
        first = events[0]
        done = [first.elapsed_time(e) / 1e3 for e in events]
        windows = []
        t = 0.0
        while t < args.seconds:
            calls = sum(1 for x in done if t <= x < t + WINDOW_S)
            sm = [s["sm_hz"] for s in samples if s["sm_hz"] and t <= s["t"] - t0 < t + WINDOW_S]
            pw = [s["power_inst_w"] or s["power_avg_w"] for s in samples
                  if t <= s["t"] - t0 < t + WINDOW_S and (s["power_inst_w"] or s["power_avg_w"])]
            windows.append({"t_s": t, "calls_per_s": calls / WINDOW_S,
                            "sm_mhz_mean": sum(sm) / len(sm) / 1e6 if sm else None,
                            "power_w_mean": sum(pw) / len(pw) if pw else None})
            t += WINDOW_S
        case = {"backend": backend, "batch": b, "heads": h, "seqlen": n, "head_dim": d,
                "windows": windows}
        doc["cases"].append(case)
        for w in windows:
            print(backend, d, f"{w['t_s']:.2f}s", f"{w['calls_per_s']:.0f}/s",
                  f"{w['sm_mhz_mean'] or 0:.0f} MHz", f"{w['power_w_mean'] or 0:.0f} W",
                  flush=True)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
