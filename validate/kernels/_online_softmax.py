"""Triton building blocks shared by the fused kernels: tile ranges, masks, online softmax.

Scores are carried in log2 units: ``qk = (Q K^T) * sm_scale * log2(e)``, so every exponential
is one ``exp2`` (FA2 paper §3.1; Triton tutorial 06-fused-attention). Rows that see no key keep
``m = -inf``; the masked step substitutes 0 for such a max so that ``exp2(-inf - m)`` is 0 rather
than NaN, and :func:`finalize` writes o = 0, lse = +inf for them (see ``_common``).
"""

import triton
import triton.language as tl

from ._common import LN_2

_LN_2 = tl.constexpr(LN_2)


@triton.jit
def kv_block_range(start_m, seqlen_q, seqlen_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr):
    """Device twin of ``_common.kv_block_range``: ``(full_hi, hi)`` keys for a query tile."""
    if CAUSAL:
        off = seqlen_k - seqlen_q
        last_row = tl.minimum(start_m + BLOCK_M, seqlen_q) - 1
        hi = tl.maximum(tl.minimum(seqlen_k, last_row + off + 1), 0)
        full = tl.maximum(tl.minimum(seqlen_k, start_m + off + 1), 0)
    else:
        hi = seqlen_k
        full = seqlen_k
    return (full // BLOCK_N) * BLOCK_N, hi


@triton.jit
def q_block_range(start_n, seqlen_q, seqlen_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr):
    """Device twin of ``_common.q_block_range``: ``(lo, full_lo, hi)`` rows for a key tile."""
    hi = tl.cdiv(seqlen_q, BLOCK_M) * BLOCK_M
    if CAUSAL:
        off = seqlen_k - seqlen_q
        first_row = tl.maximum(start_n - off, 0)
        last_key = tl.minimum(start_n + BLOCK_N, seqlen_k) - 1
        lo = tl.minimum((first_row // BLOCK_M) * BLOCK_M, hi)
        full_lo = tl.cdiv(tl.maximum(last_key - off, 0), BLOCK_M) * BLOCK_M
        full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
        lo = tl.where(first_row >= seqlen_q, hi, lo)
        full_lo = tl.where(first_row >= seqlen_q, hi, full_lo)
    else:
        lo = 0
        full_lo = 0
    return lo, full_lo, hi


@triton.jit
def mask_scores(qk, offs_m, offs_n, seqlen_q, seqlen_k, CAUSAL: tl.constexpr):
    """Set scores of out-of-range keys (and, if causal, keys j > i + N_k - N_q) to -inf."""
    valid = offs_n[None, :] < seqlen_k
    if CAUSAL:
        valid = valid & (offs_n[None, :] <= offs_m[:, None] + (seqlen_k - seqlen_q))
    return tl.where(valid, qk, float("-inf"))


@triton.jit
def safe_max(m, MASKED: tl.constexpr):
    """The row max to subtract: ``m``, with -inf (row sees nothing yet) replaced by 0."""
    if MASKED:
        return tl.where(m == float("-inf"), 0.0, m)
    else:
        return m


@triton.jit
def softmax_step(qk, v, m_i, l_i, acc, MASKED: tl.constexpr):
    """One FA2 inner step on a score tile ``qk [BLOCK_M, BLOCK_N]`` (log2 units, masked).

    m_new = max(m, rowmax(qk)); P = exp2(qk - m_new); l = exp2(m - m_new) l + rowsum(P);
    acc = exp2(m - m_new) acc + P V. Normalisation by l is deferred to :func:`finalize` (FA2 §3.1).
    Returns ``(m_new, l, acc)``.
    """
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    m_use = safe_max(m_new, MASKED)
    p = tl.exp2(qk - m_use[:, None])
    alpha = tl.exp2(m_i - m_use)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc)
    return m_new, l_i, acc


@triton.jit
def finalize(acc, l_i, m_i):
    """``(O, lse)`` from the accumulators: O = acc / l, lse = (m + log2 l) ln 2 (natural log).

    Rows with l = 0 (no visible key) get O = 0 and lse = +inf.
    """
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    o = acc / l_safe[:, None]
    lse = tl.where(empty, float("inf"), (m_i + tl.log2(l_safe)) * _LN_2)
    return o, lse
