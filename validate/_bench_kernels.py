"""Triton kernels of the microbenchmarks (:mod:`perfsim.validate.microbench`).

Each register-loop kernel loads ``CHAINS`` values per thread once, runs ``iters x UNROLL``
dependent steps on each (the chains are independent of each other, so the scheduler always has
work), and stores the result so that nothing is dead code. Imported only on a GPU machine.
"""

import triton
import triton.language as tl

#: Steps per loop iteration, unrolled at compile time (keeps loop overhead to a few %).
UNROLL = 16


@triton.jit
def exp2_loop(X, Y, iters, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """``x <- -2**x`` repeatedly: stays in [-1, -0.5], one MUFU ex2 per step."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    for _ in range(iters):
        for _u in tl.static_range(UNROLL):
            x = -tl.exp2(x)
    tl.store(Y + offs, x)


@triton.jit
def fma_loop(X, Y, iters, a, b, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """``x <- x * a + b`` repeatedly as one fused multiply-add per step (a, b at run time, so
    nothing folds)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    for _ in range(iters):
        for _u in tl.static_range(UNROLL):
            x = tl.fma(x, a, b)
    tl.store(Y + offs, x)


@triton.jit
def load_chain(X, Y, steps, ROWS: tl.constexpr, COLS: tl.constexpr):
    """One CTA walks ``steps`` fp32 tiles of ROWS x COLS: load, add 1, store, next — no
    software pipelining, so each step's load waits for the previous step's arithmetic."""
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    base = pid * steps * ROWS * COLS
    for i in range(steps):
        t = tl.load(X + base + i * ROWS * COLS + offs)
        tl.store(Y + base + i * ROWS * COLS + offs, t + 1.0)


@triton.jit
def noop(X):
    """One thread block storing one element: the cheapest kernel a launch can run."""
    tl.store(X, 1.0)
