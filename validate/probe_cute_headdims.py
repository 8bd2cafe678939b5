"""flash_attn.cute on the H200 at head dims between its tile widths: which kernels run, and how
long each takes, against the compiled width's own call.

The default path has flash_attn.cute's backward 20-31 % too fast at head dims 200-248 (hold-outs
9-11 and 18) and 12 % at 136-176, while the same model is within 8 % at 256 and 192, the widths
those calls compile to (``interface._tile_size_bwd_sm90``: ``tile_hdim`` rounded up to 64).
This probe times one shape (B = 2, H = 8, N = 4096, non-causal, bf16) at a list of head dims,
forward and backward, and lists each call's kernels with their GPU time under
``torch.profiler`` — the per-kernel split that says which kernel pays for the odd head dim.
NVML's SM clock and power are sampled beside every timed region.

    python -m perfsim.validate.probe_cute_headdims OUT.json [--dims 192,200,232,256]

torch, flash_attn.cute and pynvml are imported inside ``main``.
"""

from __future__ import annotations

import argparse
import time

SHAPE = {"batch": 2, "heads": 8, "seqlen": 4096}
DIMS = (144, 160, 176, 192, 200, 216, 232, 240, 248, 256)


def kernels_of(fn, calls: int = 3) -> list[dict]:
    """The CUDA kernels ``calls`` calls of ``fn`` launch: name, launches per call and GPU
    microseconds per call (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = {}
    for ev in prof.events():
        if ev.device_type.name != "CUDA":
            continue
        rec = out.setdefault(ev.name, {"name": ev.name[:300], "launches": 0, "us": 0.0})
        rec["launches"] += 1
        rec["us"] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time
    rows = sorted(out.values(), key=lambda r: -r["us"])
    for r in rows:
        r["launches"] /= calls
        r["us"] /= calls
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--dims", default=",".join(map(str, DIMS)))
    ap.add_argument("--phases", default="bwd,fwd")
    args = ap.parse_args(argv)

    from perfsim.validate import external
    from perfsim.validate.nvml_sampler import NvmlSampler
    from perfsim.validate.probe_util import write_rows
    from perfsim.validate.shapes import Shape

    rows = []
    sampler = NvmlSampler()
    for phase in args.phases.split(","):
        for d in (int(x) for x in args.dims.split(",")):
            shape = Shape(batch=SHAPE["batch"], heads=SHAPE["heads"],
                          seqlen_q=SHAPE["seqlen"], head_dim=d, causal=False, phase=phase)
            rec = {"phase": phase, "head_dim": d, **SHAPE,
                   "flops": external.benchmark_flops(shape)}
            t0 = time.perf_counter()
            try:
                q, k, v, do = external.make_inputs(shape, f"probe-cute-{phase}-{d}")
                built = external.build(shape, "cute", q, k, v)
                fn = built.backward_fn(built.make_do(do)) if phase == "bwd" else built.forward
                fn()
                rec.update(external.time_op(fn, sampler))
                rec["tflops"] = rec["flops"] / rec["measured_s"] / 1e12
                rec["kernels"] = kernels_of(fn)
                rec["config"] = built.config
            except Exception as exc:  # noqa: BLE001 - recorded with the row
                rec["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rec["wall_s"] = time.perf_counter() - t0
            rows.append(rec)
            print(phase, d, rec.get("measured_s"), rec.get("tflops"), rec.get("error", ""),
                  [(k["name"][:60], round(k["us"], 1)) for k in rec.get("kernels", [])[:4]],
                  flush=True)
            write_rows(args.out, rows, shape=SHAPE,
                       method="external.time_op (CUDA events, NVML sampled), torch.profiler "
                              "kernel list over 3 calls")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
