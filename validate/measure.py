"""Measuring one row on the GPU: fresh inputs, a correctness check first, then ``do_bench``.

For every (shape, kernel) row (correct first, then time properly):

1. fresh random normal inputs (never zeros), seeded from the row key;
2. own kernels run with NaN-poisoned outputs (``kernels._common.POISON_OUTPUTS``) and every
   output element must be finite, i.e. written; external kernels allocate their own outputs,
   so only the finiteness check applies to them;
3. the float64 reference (``kernels.reference``) is computed for at most
   :data:`REFERENCE_SLICES` (batch, kv-head group) slices, all rows of each, and the relative
   Frobenius error must be within :data:`TOLERANCE` — a row that fails is recorded
   ``incorrect`` and not timed;
4. ``triton.testing.do_bench`` median, p20 and p80 (it flushes L2 before every call).

torch and triton are imported inside functions, so this module imports without them.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from perfsim.prediction import model_flops
from perfsim.validate.runner import Row

#: Relative Frobenius error allowed against the float64 reference, per dtype; the values of
#: tests/test_kernels_interpreter.py: bf16 (u = 2**-8) 2e-2 = about 5u, fp16 1e-2.
TOLERANCE = {"bf16": 2e-2, "fp16": 1e-2}
#: (batch, kv-head group) slices the reference is computed for; each covers all rows.
REFERENCE_SLICES = 2
#: do_bench budget in ms: at least its defaults (25 ms warm-up, 100 ms timed), stretched to
#: about :data:`TARGET_REPS` calls for slow kernels, capped so that a row stays short.
WARMUP_MS, REP_MS, TARGET_REPS, MAX_WARMUP_MS, MAX_REP_MS = 25, 100, 10, 200, 1000
#: Messages after which the CUDA context is unusable: the run stops (resume in a new process).
FATAL_CUDA = ("illegal memory access", "unspecified launch failure", "misaligned address",
              "device-side assert", "illegal instruction")
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


class Unsupported(Exception):
    """The kernel or backend does not run this shape (recorded as ``unsupported``)."""


@dataclass
class Impl:
    """How to run one kernel on fixed inputs.

    ``forward()`` returns O. ``backward_fn(do)`` returns a no-argument function that computes
    (dq, dk, dv) from saved forward results (the thing timed for ``phase = bwd``).
    """

    forward: object
    backward_fn: object
    launch_config: dict
    poisoned: bool
    context: object = field(default=nullcontext)
    module: object = None


def autograd_backward(f, q, k, v):
    """``backward_fn`` for a differentiable ``f(q, k, v) -> o``: one forward with a graph,
    then ``torch.autograd.grad`` (graph retained, so it can be timed repeatedly)."""
    import torch

    def make(do):
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        o = f(qg, kg, vg)
        return lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)

    return make


def own_impl(row: Row, q, k, v) -> Impl:
    """:class:`Impl` for a kernel in ``validate/kernels``.

    Raises:
        Unsupported: no module for it, or its ``launch_config`` rejects the shape or phase.
    """
    from perfsim.validate import kernels

    s = row.shape
    try:
        mod = kernels.load(row.algorithm)
    except ImportError as exc:
        raise Unsupported(f"kernel module {row.algorithm!r} does not import: {exc}") from None
    try:
        cfg = mod.launch_config(s.batch, s.heads, s.kv_heads, s.seqlen_q, s.seqlen_k,
                                s.head_dim, causal=s.causal, dtype=s.dtype, phase=s.phase)
    except (ValueError, TypeError) as exc:
        raise Unsupported(f"launch_config: {exc}") from None

    def forward():
        return mod.forward(q, k, v, causal=s.causal)[0]

    if hasattr(mod, "backward"):
        def backward_fn(do):
            o, lse = mod.forward(q, k, v, causal=s.causal)
            return lambda: mod.backward(do, q, k, v, o, lse, causal=s.causal)
    elif hasattr(mod, "attention"):
        backward_fn = autograd_backward(
            lambda a, b, c: mod.attention(a, b, c, causal=s.causal), q, k, v)
    else:
        backward_fn = None
    if s.phase == "bwd" and backward_fn is None:
        raise Unsupported(f"{row.algorithm} has no backward")
    # Kernels that allocate through _common.new_output honour POISON_OUTPUTS; eager torch
    # code (standard) writes whole tensors by construction.
    return Impl(forward, backward_fn, cfg, poisoned=hasattr(mod, "new_output"), module=mod)


def make_inputs(row: Row, seed: int = 0, device: str = "cuda"):
    """Fresh ``q, k, v`` (standard normal, never zeros) seeded from the row key."""
    import torch

    s = row.shape
    gen = torch.Generator(device=device).manual_seed(zlib.crc32(row.key.encode()) + seed)
    dtype = getattr(torch, TORCH_DTYPES[s.dtype])

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=dtype)

    return (randn(s.batch, s.heads, s.seqlen_q, s.head_dim),
            randn(s.batch, s.kv_heads, s.seqlen_k, s.head_dim),
            randn(s.batch, s.kv_heads, s.seqlen_k, s.head_dim))


@contextmanager
def poisoned_outputs(enabled: bool):
    """Allocate own-kernel outputs NaN-filled while inside (``_common.POISON_OUTPUTS``)."""
    from perfsim.validate.kernels import _common

    old = _common.POISON_OUTPUTS
    _common.POISON_OUTPUTS = enabled
    try:
        yield
    finally:
        _common.POISON_OUTPUTS = old


def reference_slices(row: Row) -> list[tuple[int, int]]:
    """(batch, kv head) pairs checked against the reference: the first and the last."""
    s = row.shape
    picks = [(0, 0), (s.batch - 1, s.kv_heads - 1)]
    return list(dict.fromkeys(picks))[:REFERENCE_SLICES]


def check(row: Row, impl: Impl, q, k, v, do) -> dict:
    """Run once (outputs poisoned where possible) and compare with the float64 reference.

    Returns:
        ``correctness_rel_error``, ``correctness_tolerance``, ``correctness_checked``, and
        ``status`` ``incorrect`` with a reason if the check fails.
    """
    import torch

    from perfsim.validate.kernels.reference import reference_attention, relative_error

    s = row.shape
    group = s.heads // s.kv_heads
    with poisoned_outputs(impl.poisoned):
        outs = impl.backward_fn(do)() if s.phase == "bwd" else (impl.forward(),)
    if q.is_cuda:
        torch.cuda.synchronize()
    names = ("dq", "dk", "dv") if s.phase == "bwd" else ("o",)
    errors = []
    for name, out in zip(names, outs, strict=True):
        if not bool(torch.isfinite(out).all()):
            return {"status": "incorrect", "reason": f"{name} has NaN/inf elements "
                    "(unwritten or overflowed)", "correctness_rel_error": None}
    for b, g in reference_slices(row):
        heads = slice(g * group, (g + 1) * group)
        qs, ks, vs = (t[b:b + 1].double() for t in (q[:, heads], k[:, g:g + 1], v[:, g:g + 1]))
        if s.phase == "bwd":
            qs, ks, vs = (t.requires_grad_() for t in (qs, ks, vs))
            ref_o, _ = reference_attention(qs, ks, vs, causal=s.causal)
            ref_o.backward(do[b:b + 1, heads].double())
            pairs = [(outs[0][b:b + 1, heads], qs.grad), (outs[1][b:b + 1, g:g + 1], ks.grad),
                     (outs[2][b:b + 1, g:g + 1], vs.grad)]
        else:
            ref_o, _ = reference_attention(qs, ks, vs, causal=s.causal)
            pairs = [(outs[0][b:b + 1, heads], ref_o)]
        errors += [relative_error(out, ref) for out, ref in pairs]
        del qs, ks, vs, ref_o, pairs
    worst, tol = max(errors), TOLERANCE[s.dtype]
    n_slices = len(reference_slices(row))
    rec = {"correctness_rel_error": worst, "correctness_tolerance": tol,
           "correctness_checked": (
               f"{n_slices} of {s.batch * s.kv_heads} (batch, kv-head) slices vs float64, all "
               f"{s.seqlen_q} rows; every element of {'/'.join(names)} checked finite"
               + ("; outputs NaN-poisoned" if impl.poisoned else ""))}
    if not worst <= tol:
        rec.update(status="incorrect", reason=f"relative error {worst:.3g} > {tol:g}")
    return rec


def bench(fn) -> tuple[float, float, float]:
    """``(median, p20, p80)`` seconds of ``fn()`` by ``triton.testing.do_bench``."""
    import torch
    from triton.testing import do_bench

    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    est = max(start.elapsed_time(end), 1e-3)
    warmup = min(max(WARMUP_MS, 2 * est), MAX_WARMUP_MS)
    rep = min(max(REP_MS, TARGET_REPS * est), MAX_REP_MS)
    med, p20, p80 = do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5, 0.2, 0.8])
    return med * 1e-3, p20 * 1e-3, p80 * 1e-3


def timed_fields(row: Row, impl: Impl, q, k, v, do, pred: dict) -> dict:
    """Time the row's phase and derive achieved rates and the model error."""
    fn = impl.backward_fn(do) if row.shape.phase == "bwd" else impl.forward
    med, p20, p80 = bench(fn)
    flops = float(model_flops(row.shape.workload()))
    rec = {"status": "ok", "reason": "", "measured_s": med, "measured_p20_s": p20,
           "measured_p80_s": p80, "achieved_tflops": flops / med / 1e12,
           "achieved_gbps": (pred["hbm_bytes"] / med / 1e9) if pred.get("hbm_bytes") else None}
    if pred.get("predicted_s"):
        rec["error"] = (pred["predicted_s"] - med) / med
    return rec
