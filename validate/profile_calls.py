"""Which CUDA kernels one attention call launches, and how long each takes (torch.profiler).

``python -m perfsim.validate.profile_calls OUT.json`` profiles, for a few shapes, the
backward of eager attention (the ``standard`` kernel of ``perfsim.validate.kernels`` under
autograd) and of SDPA's flash and cuDNN backends, and the forward of each, and writes per call
the list of CUDA kernels with their mean time. It answers structural questions the model
needs — how many elementwise passes the eager backward makes, whether SDPA copies the
gradients back to the inputs' layout — from a profile, not from attention timings.
"""

from __future__ import annotations

import json
import sys

SHAPES = ((4, 16, 2048, 128, False), (4, 16, 2048, 128, True), (2, 32, 4096, 64, False))
CALLS = ("eager", "sdpa_flash", "sdpa_cudnn")


def _call(name, causal):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if name == "eager":
        from perfsim.validate.kernels import load

        std = load("standard")
        # std.attention returns O alone (std.forward returns (O, logsumexp), which
        # autograd.grad took for two outputs with one gradient)
        return lambda q, k, v: std.attention(q, k, v, causal=causal), None
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION,
               "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}[name]
    return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            lambda: sdpa_kernel([backend]))


def profile(name, batch, heads, seqlen, head_dim, causal, reps=5) -> dict:
    """``{"fwd": [(kernel, µs)], "bwd": [(kernel, µs)]}`` for one call of ``name``."""
    from contextlib import nullcontext

    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    fn, ctx = _call(name, causal)
    shape = (batch, heads, seqlen, head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    out = {}
    with (ctx() if ctx else nullcontext()):
        o = fn(q, k, v)
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        torch.cuda.synchronize()
        for phase in ("fwd", "bwd"):
            with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    if phase == "fwd":
                        fn(q, k, v)
                    else:
                        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
                torch.cuda.synchronize()
            rows = [(evt.key[:90], evt.device_time_total / reps, evt.count // reps)
                    for evt in prof.key_averages()
                    if evt.device_type.name == "CUDA" and evt.device_time_total > 0]
            out[phase] = sorted(rows, key=lambda r: -r[1])
    return out


def main(argv=None) -> int:
    import torch

    out_path = (argv or sys.argv[1:] or ["profile_calls.json"])[0]
    device = torch.cuda.get_device_name(0)
    records = []
    for batch, heads, seqlen, head_dim, causal in SHAPES:
        for name in CALLS:
            try:
                kernels = profile(name, batch, heads, seqlen, head_dim, causal)
            except Exception as exc:  # noqa: BLE001 - recorded
                kernels = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            records.append({"call": name, "batch": batch, "heads": heads, "seqlen": seqlen,
                            "head_dim": head_dim, "causal": causal, "kernels": kernels,
                            "device": device})
            print(json.dumps(records[-1])[:2000], flush=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(records, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
