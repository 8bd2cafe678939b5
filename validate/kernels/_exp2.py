"""Software exp2 on the FMA units, and a tile exp2 that mixes it with the hardware one (FA4).

FA4 (Zadouri et al. 2026, §3.1.3) computes a fraction of each softmax row's exponentials with
a polynomial instead of the MUFU.EX2 unit, so both units work in parallel:

    2**x = 2**n * 2**f,  n = floor(x), f = x - n in [0, 1)      (Cody-Waite range reduction)
    2**f ~ p(f) = p0 + f (p1 + f (p2 + f p3))                     (Horner, degree 3)
    2**n * p(f): add n to p's exponent field (an integer add of n << 23 to p's bits)

with x clamped to >= -127 first (results below 2**-126 come out as 0 or a tiny denormal, as
the flush-to-zero hardware unit gives 0). Coefficients: minimax on [0, 1), FA4's
flash_attn/cute/utils.py ``POLY_EX2[3]``; max relative error 8.8e-5 in fp32 (P4 Table 2).
"""

import triton
import triton.language as tl

_P1 = tl.constexpr(0.695146143436431884765625)
_P2 = tl.constexpr(0.227564394474029541015625)
_P3 = tl.constexpr(0.077119089663028717041015625)


@triton.jit
def exp2_poly3(x):
    """``2**x`` (fp32, x <= 127) from FMAs, a floor and integer ops only; no MUFU."""
    x = tl.maximum(x, -127.0)
    n = tl.floor(x)
    f = x - n
    p = tl.fma(tl.fma(tl.fma(f, _P3, _P2), f, _P1), f, 1.0)
    bits = p.to(tl.int32, bitcast=True) + (n.to(tl.int32) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def exp2_mixed(x, EMULATE: tl.constexpr, LOG2_PERIOD: tl.constexpr):
    """``2**x`` of a ``[rows, cols]`` tile: the last ``cols / 2**LOG2_PERIOD`` columns use
    :func:`exp2_poly3` (all of them when ``LOG2_PERIOD == 0``), the others ``tl.exp2``
    (MUFU.EX2). ``EMULATE=False``: every column on MUFU.

    The split is static: the tile is viewed as ``[rows, 2, cols/2]``, permuted so that
    ``tl.split`` separates the first and second halves of the columns, and the second half is
    split again recursively. Contiguous halves keep each thread's columns in its own registers
    (a thread of a Hopper wgmma accumulator holds columns 8 apart across the whole tile), so no
    layout conversion through shared memory is needed; splitting even/odd columns instead
    did need them and spilled registers at 1/8 (measured on H200, Triton 3.6).
    """
    if not EMULATE:
        return tl.exp2(x)
    elif LOG2_PERIOD == 0:
        return exp2_poly3(x)
    else:
        rows: tl.constexpr = x.shape[0]
        cols: tl.constexpr = x.shape[1]
        first, second = tl.split(tl.permute(tl.reshape(x, [rows, 2, cols // 2]), [0, 2, 1]))
        second = exp2_mixed(second, EMULATE, LOG2_PERIOD - 1)
        both = tl.permute(tl.join(tl.exp2(first), second), [0, 2, 1])
        return tl.reshape(both, [rows, cols])
