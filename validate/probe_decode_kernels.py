"""Which kernels a decode-shaped attention call launches, with their grids (torch.profiler).

``python -m perfsim.validate.probe_decode_kernels OUT.json`` runs, for a few decode shapes
(few query tokens against a long K/V cache, GQA and not), SDPA's flash, cuDNN and
memory-efficient backends (``enable_gqa=True``) and flash_attn.cute when installed, under
``torch.profiler`` with a Chrome trace, and writes per call every CUDA kernel with its name,
grid, block, registers per thread, shared memory and mean duration. The grid answers the
structural questions the decode model needs from a profile, not from timings: does the
backend split the key range (more CTAs than ``B·H·⌈N_q/B_r⌉``), does it pack GQA heads
(``B·H_kv`` CTAs), does it run a combine kernel.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

#: (batch, heads, kv_heads, seqlen_q, seqlen_k), d = 128, bf16, not causal.
SHAPES = ((1, 32, 8, 1, 32768), (1, 32, 8, 4, 32768), (1, 32, 8, 16, 32768),
          (1, 32, 32, 1, 32768), (1, 32, 32, 16, 32768), (8, 32, 8, 1, 8192),
          (64, 32, 8, 16, 1024), (1, 8, 1, 1, 10000))
CALLS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "cute")


def _fn(name):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if name == "cute":
        from flash_attn.cute import flash_attn_func

        def cute(q, k, v):
            out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            return out[0] if isinstance(out, tuple) else out
        return cute, None
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION,
               "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
               "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}[name]
    return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
            lambda: sdpa_kernel([backend]))


def profile(name, shape, reps=5) -> dict:
    """``{"kernels": [{name, grid, block, registers, shared_memory, us}], "status"}``."""
    from contextlib import nullcontext

    import torch
    from torch.profiler import ProfilerActivity

    b, h, hkv, nq, nk = shape
    q = torch.randn(b, h, nq, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hkv, nk, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    try:
        fn, ctx = _fn(name)
        with (ctx() if ctx else nullcontext()):
            fn(q, k, v)
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    fn(q, k, v)
                torch.cuda.synchronize()
    except Exception as exc:              # a backend refusing the shape is a result
        return {"status": "unsupported", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    kernels: dict = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        args = e.get("args", {})
        key = (e["name"], str(args.get("grid")), str(args.get("block")))
        rec = kernels.setdefault(key, {"name": e["name"][:200], "grid": args.get("grid"),
                                       "block": args.get("block"),
                                       "registers": args.get("registers per thread"),
                                       "shared_memory": args.get("shared memory"),
                                       "calls": 0, "us": 0.0})
        rec["calls"] += 1
        rec["us"] += e.get("dur", 0.0)
    out = []
    for rec in kernels.values():
        rec["us"] = rec["us"] / max(rec["calls"], 1)
        rec["calls_per_op"] = rec.pop("calls") / reps
        out.append(rec)
    return {"status": "ok", "kernels": out}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_path = argv[0] if argv else "probe_decode_kernels.json"
    import torch

    result = {"device": torch.cuda.get_device_name(), "sm_count":
              torch.cuda.get_device_properties(0).multi_processor_count,
              "torch": torch.__version__, "shapes": []}
    for shape in SHAPES:
        for name in CALLS:
            rec = {"call": name, "batch": shape[0], "heads": shape[1], "kv_heads": shape[2],
                   "seqlen_q": shape[3], "seqlen_k": shape[4], "head_dim": 128,
                   **profile(name, shape)}
            result["shapes"].append(rec)
            ks = ", ".join(f"{k['name'][:60]} grid={k['grid']} {k['us']:.1f}us"
                           for k in rec.get("kernels", []))
            print(f"{name:15s} {shape}: {rec['status']} {ks or rec.get('reason', '')}"[:400],
                  flush=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
