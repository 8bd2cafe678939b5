"""Which aten op launches each CUDA kernel of eager attention's backward (issue 9, item 7).

``python -m perfsim.validate.probe_eager_ops`` runs the backward of one saved forward of the
``standard`` validation kernel (B = 4, H = 16, N = 2048, d = 128, bf16, both masks) under
``torch.profiler`` with CPU and CUDA activity and prints each kernel's full name, its mean time
per call and the innermost aten op that launched it; then the same for softmax's backward on a
standalone tensor (what ``eager_ceilings.softmax_backward`` times), and SDPA's math backend's
backward at the same shape. Structural facts only:
which kernels run, how many, and for which op.
"""

from __future__ import annotations

import sys


def _ops(prof, reps):
    """``[(aten op, kernel name, µs per call)]`` from a profile's CPU events and their kernels."""
    rows = {}
    for evt in prof.profiler.function_events:
        for k in getattr(evt, "kernels", []) or []:
            key = (evt.name, k.name)
            rows[key] = rows.get(key, 0.0) + k.duration / reps
    return sorted(((op, name, us) for (op, name), us in rows.items()), key=lambda r: -r[2])


def _profile(title: str, fn, reps: int = 3) -> None:
    """Run ``fn`` once, then ``reps`` times under torch.profiler; print each kernel with the
    aten op that launched it."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    print(f"== {title}")
    for op, name, us in _ops(prof, reps):
        print(f"{us:9.1f} us  {op:<40} {name[:160]}")


def _backward_of(forward):
    """A no-argument function: the backward of one saved ``forward(q, k, v)`` (B = 4, H = 16,
    N = 2048, d = 128, bf16), by ``torch.autograd.grad`` with the graph kept."""
    import torch

    q, k, v = (torch.randn(4, 16, 2048, 128, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    out = forward(q, k, v)
    grad = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


def main() -> int:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from perfsim.validate.kernels import load

    std = load("standard")
    shape = "B=4 H=16 N=2048 d=128 bf16"
    for causal in (False, True):
        _profile(f"standard backward, {shape} causal={causal}", _backward_of(
            lambda q, k, v, c=causal: std.forward(q, k, v, causal=c)[0]))

    def math_sdpa(q, k, v, causal):
        with sdpa_kernel(SDPBackend.MATH):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    for causal in (False, True):
        _profile(f"SDPA math backward, {shape} causal={causal}", _backward_of(
            lambda q, k, v, c=causal: math_sdpa(q, k, v, c)))
    x = torch.softmax(torch.randn(1 << 17, 2048, device="cuda", dtype=torch.bfloat16), -1)
    dx = torch.randn_like(x)
    _profile("torch._softmax_backward_data on [131072, 2048] bf16 (eager_ceilings)",
             lambda: torch._softmax_backward_data(dx, x, -1, torch.bfloat16))
    return 0

if __name__ == "__main__":
    sys.exit(main())
