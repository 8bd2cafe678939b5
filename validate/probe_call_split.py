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
    python3 -m perfsim.validate.probe_call_split --decode OUT.json   (DECODE_CASES through the
                                                                decode harness)
"""

from __future__ import annotations

import json
import statistics
import sys
import time

#: repetitions of the decode rows (alternating: host time moves within a session)
REPEATS = 2
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


def split_call(fn) -> dict:
    """``event_s``, ``host_s``, ``kernels`` and ``kernel_s`` of one call ``fn`` (module
    docstring), after 20 warm-up calls."""
    import torch

    row = {}
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


#: decode-harness rows (``--decode``): (kind, impl, B, H, H_kv, N_q, N_k, d, page size).
#: flash_attn.cute's paged calls beside the same calls on a contiguous cache, where the GPU
#: work is a few microseconds (N_k = 32 and 1024) and where it is not (4096), and one query
#: token of 8 heads sharing one K/V head over 10 000 keys at head dim 64 (one packed CTA
#: streams the whole cache: flash-attn 3's one-split case in issue 11).
DECODE_CASES = (
    ("decode", "cute", 1, 32, 8, 1, 1024, 128, None),
    ("paged", "cute", 1, 32, 8, 1, 1024, 128, 16),
    ("paged", "cute", 1, 32, 8, 1, 1024, 128, 128),
    ("paged", "cute", 1, 32, 8, 1, 1024, 128, 256),
    ("decode", "cute", 64, 64, 8, 1, 32, 128, None),
    ("paged", "cute", 64, 64, 8, 1, 32, 128, 256),
    ("decode", "cute", 64, 64, 8, 1, 4096, 128, None),
    ("paged", "cute", 64, 64, 8, 1, 4096, 128, 256),
    ("decode", "cute", 1, 8, 1, 1, 10000, 64, None),
    ("decode", "sdpa_flash", 1, 8, 1, 1, 10000, 64, None),
    ("decode", "sdpa_cudnn", 1, 8, 1, 1, 10000, 64, None),
    ("decode", "cute", 1, 8, 8, 1, 10000, 64, None),
)


def _one_decode(kind, impl, b, h, hkv, nq, nk, d, page) -> dict:
    from perfsim.validate import external_decode

    case = external_decode.Case(kind, external_decode._shape(b, h, hkv, nq, nk, False, d=d),
                                impl, page_size=page)
    built = external_decode.build(case)
    row = {"kind": kind, "impl": impl, "batch": b, "heads": h, "kv_heads": hkv, "seqlen_q": nq,
           "seqlen_k": nk, "head_dim": d, "page_size": page, "config": built.config}
    with built.context():
        row.update(split_call(built.forward))
    return row


def _one(impl, batch, heads, seqlen, d, causal) -> dict:

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
        row.update(split_call(built.forward))
    return row


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    decode = "--decode" in argv
    argv = [a for a in argv if a != "--decode"]
    out = argv[0] if argv else "probe_call_split.json"
    rows = []
    runs = [(_one_decode, c) for c in DECODE_CASES] * REPEATS if decode else [
        (_one, c) for c in CASES]
    for one, case in runs:
        try:
            rows.append(one(*case))
        except Exception as exc:  # noqa: BLE001 - record and go on
            rows.append({"case": list(case), "error": repr(exc)[:300]})
        print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("kernels", "config")},
                         default=str), flush=True)
    import torch

    with open(out, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "rows": rows}, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
