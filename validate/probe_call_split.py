"""Where a short attention call's time goes: GPU kernels or the host (not a timing fit).

For each (implementation, shape) of ``CASES``, built as ``validate/external.py`` builds it
(inputs prepared outside the timed region), three numbers per forward call:

- ``event_s``: the harness's figure, CUDA events around each of back-to-back calls (median);
- ``host_s``: host wall time per call, 200 calls issued back to back without synchronising
  (``time.perf_counter``; the launch queue is deep enough that the host never waits);
- ``kernels``: every GPU kernel of one call with its duration (``torch.profiler``, 20 calls,
  per-call mean), and ``kernel_s`` their sum.

A call whose ``event_s`` is near ``kernel_s`` is GPU-bound; one near ``host_s`` and far above
``kernel_s`` is paced by the host.

    python3 -m perfsim.validate.probe_call_split OUT.json      (perfsim importable, as for
                                                                external_h200.sh)
"""

from __future__ import annotations

import json
import statistics
import sys
import time

#: (implementation, batch, heads, seqlen, head_dim, causal)
CASES = (
    ("cute", 1, 1, 64, 64, False),
    ("cute", 64, 16, 256, 128, True),
    ("cute", 32, 16, 512, 128, False),
    ("cute", 16, 12, 1024, 64, False),
    ("cute", 4, 16, 4096, 128, False),
    ("sdpa_cudnn", 64, 16, 256, 128, True),
    ("sdpa_cudnn", 16, 12, 1024, 64, False),
    ("triton_tutorial", 16, 12, 1024, 64, False),
)


def _one(impl, batch, heads, seqlen, d, causal) -> dict:
    import torch

    from perfsim.validate import external
    from perfsim.validate.shapes import Shape

    shape = Shape(batch=batch, heads=heads, seqlen_q=seqlen, head_dim=d, causal=causal,
                  phase="fwd")
    key = f"split-{impl}-{batch}-{heads}-{seqlen}-{d}-{causal}"
    q, k, v, _ = external.make_inputs(shape, key)
    built = external.build(shape, impl, q, k, v)
    row = {"impl": impl, "batch": batch, "heads": heads, "seqlen": seqlen, "head_dim": d,
           "causal": causal}
    with built.context():
        fn = built.forward
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(100):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            times.append((a, b))
        torch.cuda.synchronize()
        row["event_s"] = statistics.median(a.elapsed_time(b) for a, b in times) / 1e3
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        row["host_s"] = (time.perf_counter() - t0) / 200
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        kernels = {}
        for evt in prof.events():
            if evt.device_type.name == "CUDA":
                kernels[evt.name[:90]] = kernels.get(evt.name[:90], 0.0) + evt.device_time / 20
        row["kernels"] = {name: us * 1e-6 for name, us in kernels.items()}
        row["kernel_s"] = sum(row["kernels"].values())
    return row


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = argv[0] if argv else "probe_call_split.json"
    rows = []
    for case in CASES:
        try:
            rows.append(_one(*case))
        except Exception as exc:  # noqa: BLE001 - record and go on
            rows.append({"case": list(case), "error": repr(exc)[:300]})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "kernels"}), flush=True)
    import torch

    with open(out, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
