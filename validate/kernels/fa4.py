"""FlashAttention-4-style forward (Zadouri et al. 2026, arXiv 2603.05451) in Triton, for Hopper.

FA2's loop structure and causal split (:mod:`.fa2`) plus FA4's two softmax changes:

(a) Conditional rescaling (§3.1.4). Each row keeps a *stale* reference max ``m_ref``; P, l and O
    are all accumulated against it, so ``O / l`` is exact for any reference. The reference
    moves to the true running max only when a tile's row max exceeds it by more than
    ``rescale_threshold`` (tau, log2 units; default 8 so unnormalised P stays <= 2**8 = 256).
    ``tau = 0`` rescales whenever the max grows, i.e. standard online softmax. In Triton the
    decision is per row (``tl.where``); FA4 decides per warp. The O multiply is skipped only
    when no row of the tile needs it: Triton has no finer-grained uniform branch than the tile.
(b) Partial exp2 emulation (§3.1.3). A static ``emulate_fraction`` of each tile's columns (the
    last ``block_n * emulate_fraction`` keys of the tile) runs :func:`._exp2.exp2_poly3` on the
    FMA units; the rest use ``tl.exp2`` (MUFU.EX2). FA4 instead spreads the emulated entries
    over 32-element fragments of a row; the count per tile is what matters. See :mod:`._exp2`.

Loads are plain pointer loads (as fa2); tiles default to FA4's 128 x 128 (see ``configs``).
"""

import torch
import triton
import triton.language as tl

from ._common import LOG2_E, new_output, prepare
from ._exp2 import exp2_mixed
from ._online_softmax import finalize, kv_block_range, mask_scores, safe_max
from .configs import fa4 as launch_config

__all__ = ["forward", "launch_config"]


@triton.jit
def _fa4_step(qk, v, m_ref, l_i, acc, tau, MASKED: tl.constexpr, EMULATE: tl.constexpr,
              LOG2_PERIOD: tl.constexpr):
    """One inner step against a stale reference max; returns ``(m_ref, l, acc)``.

    A row moves its reference iff its tile max exceeds it by more than tau (always on the
    row's first visible tile, where ``m_ref = -inf``); P = exp2(qk - m_ref) <= 2**tau.
    """
    m_cand = tl.maximum(m_ref, tl.max(qk, 1))
    rescale = m_cand > m_ref + tau
    m_new = tl.where(rescale, m_cand, m_ref)
    m_use = safe_max(m_new, MASKED)
    alpha = tl.where(rescale, tl.exp2(m_ref - m_use), 1.0)
    p = exp2_mixed(qk - m_use[:, None], EMULATE, LOG2_PERIOD)
    l_i = l_i * alpha + tl.sum(p, 1)
    if tl.max(rescale.to(tl.int32), 0) > 0:
        acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc)
    return m_new, l_i, acc


@triton.jit
def _kv_loop(q, k_ptr, v_ptr, m_i, l_i, acc, offs_m, lo, hi, qk_scale, tau, seqlen_q,
             seqlen_k, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
             MASKED: tl.constexpr, EMULATE: tl.constexpr, LOG2_PERIOD: tl.constexpr):
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_off = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        if MASKED:
            k = tl.load(k_ptr + kv_off, mask=offs_n[:, None] < seqlen_k, other=0.0)
            v = tl.load(v_ptr + kv_off, mask=offs_n[:, None] < seqlen_k, other=0.0)
        else:
            k = tl.load(k_ptr + kv_off)
            v = tl.load(v_ptr + kv_off)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            qk = mask_scores(qk, offs_m, offs_n, seqlen_q, seqlen_k, CAUSAL)
        m_i, l_i, acc = _fa4_step(qk, v, m_i, l_i, acc, tau, MASKED, EMULATE, LOG2_PERIOD)
    return m_i, l_i, acc


@triton.jit
def _fa4_fwd(Q, K, V, Out, LSE, qk_scale, tau, seqlen_q, seqlen_k, heads, group,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr, EMULATE: tl.constexpr, LOG2_PERIOD: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    bh_kv = (bh // heads) * (heads // group) + (bh % heads) // group
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m[:, None] < seqlen_q
    q_off = bh * seqlen_q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + q_off, mask=row_ok, other=0.0)
    k_ptr = K + bh_kv * seqlen_k * HEAD_DIM
    v_ptr = V + bh_kv * seqlen_k * HEAD_DIM
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full_hi, hi = kv_block_range(start_m, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
    m_i, l_i, acc = _kv_loop(q, k_ptr, v_ptr, m_i, l_i, acc, offs_m, 0, full_hi, qk_scale, tau,
                             seqlen_q, seqlen_k, HEAD_DIM, BLOCK_N, CAUSAL, False, EMULATE,
                             LOG2_PERIOD)
    m_i, l_i, acc = _kv_loop(q, k_ptr, v_ptr, m_i, l_i, acc, offs_m, full_hi, hi, qk_scale, tau,
                             seqlen_q, seqlen_k, HEAD_DIM, BLOCK_N, CAUSAL, True, EMULATE,
                             LOG2_PERIOD)
    o, lse = finalize(acc, l_i, m_i)
    tl.store(Out + q_off, o.to(Out.dtype.element_ty), mask=row_ok)
    tl.store(LSE + bh * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)


def forward(q, k, v, *, causal, sm_scale=None, **config):
    """FA4-style forward.

    Args:
        q: ``[B, H, N_q, d]`` fp16/bf16; k, v: ``[B, H_kv, N_k, d]`` (GQA: H % H_kv == 0).
        causal: bottom-right-aligned causal mask (see ``_common``).
        sm_scale: softmax scale, default ``1/sqrt(d)``.
        **config: :func:`launch_config` knobs: ``block_m``, ``block_n``, ``num_warps``,
            ``num_stages``, ``rescale_threshold`` (log2 units), ``emulate_fraction``.

    Returns:
        ``(o, lse)``: o ``[B, H, N_q, d]`` in q's dtype; lse ``[B, H, N_q]`` fp32, natural log.
    """
    run = prepare(launch_config, q, k, v, causal=causal, sm_scale=sm_scale, phase="fwd",
                  config=config)
    dims, cfg, sm_scale, q, k, v = run.dims, run.cfg, run.sm_scale, run.q, run.k, run.v
    period = cfg["emulate_period"]
    o = new_output(q.shape, q.dtype, q.device)
    lse = new_output(q.shape[:3], torch.float32, q.device)
    _fa4_fwd[cfg["grid"]](q, k, v, o, lse, sm_scale * LOG2_E, cfg["rescale_threshold"],
                          dims.seqlen_q, dims.seqlen_k, dims.heads, dims.group,
                          HEAD_DIM=dims.head_dim, BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"],
                          CAUSAL=bool(causal), EMULATE=period > 0,
                          LOG2_PERIOD=max(period, 1).bit_length() - 1,
                          num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o, lse
