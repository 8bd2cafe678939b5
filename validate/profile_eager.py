"""Per-kernel times of eager (standard) attention on the GPU at hand, beside perfsim's.

``python -m perfsim.validate.profile_eager [--gpu PROFILE]`` runs the ``standard`` kernel of
``perfsim.validate.kernels`` under ``torch.profiler`` for a few shapes and prints, per CUDA
kernel, the measured time and the time perfsim predicts for the matching model kernel, so
the eager error in the validation report can be traced to the ops that cause it.
"""

from __future__ import annotations

import argparse
import sys

SHAPES = ((4, 16, 2048, 128), (4, 16, 8192, 128), (1, 16, 16384, 128))


def profile(batch, heads, seqlen, head_dim, causal, reps=5, phase="fwd"):
    """``[(cuda kernel name, mean µs, launches per call)]`` for one standard forward call, or
    (``phase="bwd"``) for the backward of one saved forward (``torch.autograd.grad`` of O
    with a random dO, the graph kept between repetitions)."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from perfsim.validate.kernels import load

    std = load("standard")
    q, k, v = (torch.randn(batch, heads, seqlen, head_dim, device="cuda", dtype=torch.bfloat16,
                           requires_grad=phase == "bwd") for _ in range(3))
    if phase == "bwd":
        out = std.forward(q, k, v, causal=causal)[0]
        grad = torch.randn_like(out)

        def call():
            torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
    else:
        def call():
            std.forward(q, k, v, causal=causal)
    for _ in range(2):
        call()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    rows = []
    for evt in prof.key_averages():
        if evt.device_type.name == "CUDA" and evt.device_time_total > 0:
            rows.append((evt.key[:90], evt.device_time_total / reps, evt.count / reps))
    return sorted(rows, key=lambda r: -r[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsim.validate.profile_eager")
    parser.add_argument("--gpu", default="h200-sxm")
    parser.add_argument("--phase", choices=("fwd", "bwd"), default="fwd")
    args = parser.parse_args(argv)
    import perfsim
    from perfsim.algorithms import Standard

    gpu = perfsim.load_gpu(args.gpu)
    for batch, heads, seqlen, head_dim in SHAPES:
        for causal in (False, True):
            w = perfsim.AttentionWorkload(batch=batch, heads=heads, seqlen_q=seqlen,
                                          head_dim=head_dim, causal=causal, dtype="bf16",
                                          phase=args.phase)
            pred = perfsim.predict(w, gpu=gpu, algorithm=Standard(mask_op="masked_fill"))
            print(f"== {w.describe()} {args.phase}: predicted {pred.seconds * 1e6:.0f} us")
            for k in pred.kernels:
                print(f"   model {k.cost.name:<12} {float(k.seconds) * 1e6:9.1f} us "
                      f"{float(k.cost.hbm_bytes) / 1e9:7.3f} GB")
            measured = profile(batch, heads, seqlen, head_dim, causal, phase=args.phase)
            print(f"   measured total {sum(t for _, t, _ in measured):.0f} us")
            for name, t, count in measured:
                print(f"   gpu   {t:9.1f} us  x{count:g}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
