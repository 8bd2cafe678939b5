"""Registers and spills of the Triton tutorial's attention kernels, from the compiler.

``python -m perfsim.validate.probe_tutorial_registers OUT.json`` runs the tutorial's
forward and backward once per head dim (64, 128; causal, bf16, B=1, H=4, N=1024) on a CUDA
GPU and records, for every compiled kernel, Triton's ``n_regs``, ``n_spills`` and shared
memory, plus whether its PTX uses ``wgmma`` or ``mma.sync``. The question it answers (for
the model, not from timings): does the backward at head dim 128 spill registers, as its
dK/dV accumulators of 128 x 128 fp32 each (256 registers per thread in a 4-warp CTA) suggest?
"""

from __future__ import annotations

import json
import sys


def _kernels(fn) -> list[dict]:
    out = []
    cache = getattr(fn, "device_caches", None) or {}
    for entry in cache.values():
        table = entry[0] if isinstance(entry, tuple) else entry
        for compiled in getattr(table, "values", lambda: [])():
            asm = getattr(compiled, "asm", {}) or {}
            ptx = asm.get("ptx", "") if isinstance(asm, dict) else ""
            meta = getattr(compiled, "metadata", None)
            out.append({"n_regs": getattr(compiled, "n_regs", None),
                        "n_spills": getattr(compiled, "n_spills", None),
                        "shared": getattr(meta, "shared", None),
                        "num_warps": getattr(meta, "num_warps", None),
                        "wgmma": ptx.count("wgmma.mma_async"),
                        "mma_sync": ptx.count("mma.sync")})
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_path = argv[0] if argv else "probe_tutorial_registers.json"
    import torch

    from perfsim.validate.external import _tutorial_module

    mod = _tutorial_module()
    result = {"device": torch.cuda.get_device_name(), "rows": []}
    for d in (64, 128):
        q, k, v = (torch.randn(1, 4, 1024, d, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        o = mod.attention(q, k, v, True, d ** -0.5)
        o.backward(torch.randn_like(o))
        torch.cuda.synchronize()
        for name in ("_attn_bwd", "_attn_bwd_preprocess", "_attn_fwd", "_attn_fwd_tma"):
            fn = getattr(mod, name, None)
            if hasattr(fn, "configs"):          # an autotuner wraps the JIT function
                fn = fn.fn
            if fn is None:
                continue
            for rec in _kernels(fn):
                result["rows"].append({"head_dim_run": d, "kernel": name, **rec})
        for r in result["rows"]:
            print(r, flush=True)
        result["rows"] = [dict(t) for t in {tuple(sorted(r.items())) for r in result["rows"]}]
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
