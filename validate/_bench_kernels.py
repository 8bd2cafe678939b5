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
def alu_loop(X, Y, iters, a, b, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """``x <- (x ^ a) + b`` on int32 repeatedly: an XOR (LOP3) and an add (IADD3) per step,
    both on the ALU pipe (a, b at run time, so nothing folds). The instructions of
    attention's row max (FMNMX), P conversion (F2FP) and masks (ISETP/SEL) share that pipe."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    for _ in range(iters):
        for _u in tl.static_range(UNROLL):
            x = (x ^ a) + b
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
def load_chain_wrapped(X, Y, steps, wrap, ROWS: tl.constexpr, COLS: tl.constexpr):
    """:func:`load_chain` over ``wrap`` tiles per CTA, walked again and again (step ``i``
    reads tile ``i % wrap``): with ``CTAs x wrap`` tiles smaller than the L2, every load after
    the first pass is an L2 hit."""
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    base = pid * wrap * ROWS * COLS
    for i in range(steps):
        tile = (i % wrap) * ROWS * COLS
        t = tl.load(X + base + tile + offs)
        tl.store(Y + base + tile + offs, t + 1.0)


@triton.jit
def noop(X):
    """One thread block storing one element: the cheapest kernel a launch can run."""
    tl.store(X, 1.0)


@triton.jit
def tile_walk(desc, X, W, Y, n_tiles, iters, D: tl.constexpr, BM: tl.constexpr,
              BC: tl.constexpr, NSUB: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr,
              GROUP: tl.constexpr = 1, STRIDE: tl.constexpr = 0, LAG: tl.constexpr = 0):
    """Every program walks ``[BM, BC]`` bf16 boxes of an ``[n_tiles * BM, D]`` tensor, each fed
    to a WGMMA against a ``[BC, BN]`` weight slice (so the load is used; ``acc += x @ w``).
    ``MODE`` 0: the boxes come by TMA (``desc``, a host tensor descriptor:
    ``cp.async.bulk.tensor`` into shared memory, as FA3-class kernels load K and V); 1: by
    pointer loads (``X``; Triton pipelines them as ``cp.async`` through the load/store unit,
    as flash-attn 2 does); 2: no load in the loop (one box loaded before it, the same WGMMAs
    and weight loads): the compute alone. Program ``p`` reads tile ``p + i * programs`` at
    step ``i``; with ``GROUP`` > 1, ``GROUP`` consecutive programs read the same tiles in
    step (as the CTAs of one head read the same K and V tiles in a forward). With ``STRIDE``
    > 0 programs pair up instead: ``p`` and ``p + STRIDE`` (``p // STRIDE`` even) read the same
    tiles, the second ``LAG`` steps behind the first."""
    if STRIDE > 0:
        raw = tl.program_id(0)
        role = (raw // STRIDE) % 2
        pid = (raw // (2 * STRIDE)) * STRIDE + raw % STRIDE
        nprog = tl.num_programs(0) // 2
        lag = role * LAG
    else:
        pid = tl.program_id(0) // GROUP
        nprog = tl.num_programs(0) // GROUP
        lag = 0
    acc = tl.zeros([BM, BN], tl.float32)
    rows = tl.arange(0, BM)[:, None].to(tl.int64) * D
    cols = tl.arange(0, BC)[None, :]
    x0 = desc.load([(pid % n_tiles) * BM, 0])
    for i in range(iters):
        t = (pid + (i + n_tiles - lag) * nprog) % n_tiles   # int32: a descriptor's offsets are
        for j in tl.static_range(NSUB):
            w = tl.load(W + (j * BC + tl.arange(0, BC))[:, None] * BN
                        + tl.arange(0, BN)[None, :])
            if MODE == 0:
                x = desc.load([t * BM, j * BC])
            elif MODE == 1:
                x = tl.load(X + t.to(tl.int64) * BM * D + rows + j * BC + cols)
            else:
                x = x0
            acc = tl.dot(x, w, acc)
    tl.store(Y + tl.program_id(0) * BM * BN + tl.arange(0, BM)[:, None] * BN
             + tl.arange(0, BN)[None, :], acc)
