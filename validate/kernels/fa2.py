"""FlashAttention-2 (Dao 2023, arXiv 2307.08691) forward and backward in Triton.

Forward (FA2 Algorithm 1, §3.1-3.2): grid ``(ceil(N_q / block_m), B*H)``; each CTA keeps its
query tile on chip, walks the K/V tiles with an online softmax in exp2 and normalises once at
the end, writing O and the logsumexp (fp32). Causal work is split as in Triton's
06-fused-attention: an unmasked loop over tiles below the diagonal band, a masked loop over the
band (and a ragged last tile); tiles entirely above the diagonal are skipped.

Backward (FA2 Algorithm 2, §3.1-3.2): a preprocess kernel computes ``D = rowsum(dO * O)``; the
main kernel runs one CTA per K/V tile and (batch, kv head), loops over the query tiles (and the
H/H_kv query heads sharing this K/V head), accumulates dK and dV on chip and adds each tile's
dQ contribution with fp32 ``tl.atomic_add`` into a zero-initialised buffer, cast at the end.
"""

import torch
import triton
import triton.language as tl

from ._common import (
    LOG2_E,
    kernel_entry,
    new_output,
    prepare,
)
from ._online_softmax import finalize, kv_block_range, mask_scores, q_block_range, softmax_step
from .configs import fa2 as launch_config

__all__ = ["attention", "backward", "forward", "launch_config"]

_LOG2_E = tl.constexpr(LOG2_E)


@triton.jit
def _kv_loop(q, k_ptr, v_ptr, m_i, l_i, acc, offs_m, lo, hi, qk_scale, seqlen_q, seqlen_k,
             HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
             MASKED: tl.constexpr):
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
        m_i, l_i, acc = softmax_step(qk, v, m_i, l_i, acc, MASKED)
    return m_i, l_i, acc


@triton.jit
def _fa2_fwd(Q, K, V, Out, LSE, qk_scale, seqlen_q, seqlen_k, heads, group,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr):
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
    m_i, l_i, acc = _kv_loop(q, k_ptr, v_ptr, m_i, l_i, acc, offs_m, 0, full_hi, qk_scale,
                             seqlen_q, seqlen_k, HEAD_DIM, BLOCK_N, CAUSAL, False)
    m_i, l_i, acc = _kv_loop(q, k_ptr, v_ptr, m_i, l_i, acc, offs_m, full_hi, hi, qk_scale,
                             seqlen_q, seqlen_k, HEAD_DIM, BLOCK_N, CAUSAL, True)
    o, lse = finalize(acc, l_i, m_i)
    tl.store(Out + q_off, o.to(Out.dtype.element_ty), mask=row_ok)
    tl.store(LSE + bh * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)


@triton.jit
def _fa2_bwd_preprocess(Out, DO, Delta, seqlen_q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1).to(tl.int64)
    offs = bh * seqlen_q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    row_ok = offs_m[:, None] < seqlen_q
    o = tl.load(Out + offs, mask=row_ok, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=row_ok, other=0.0).to(tl.float32)
    tl.store(Delta + bh * seqlen_q + offs_m, tl.sum(o * do, 1), mask=offs_m < seqlen_q)


@triton.jit
def _q_loop(k, v, dk, dv, q_ptr, do_ptr, dq_ptr, lse_ptr, delta_ptr, offs_n, lo, hi, sm_scale,
            qk_scale, seqlen_q, seqlen_k, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
            MASKED: tl.constexpr):
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < seqlen_q
        offs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        q = tl.load(q_ptr + offs, mask=row_ok[:, None], other=0.0)
        do = tl.load(do_ptr + offs, mask=row_ok[:, None], other=0.0)
        lse = tl.load(lse_ptr + offs_m, mask=row_ok, other=float("inf")) * _LOG2_E
        delta = tl.load(delta_ptr + offs_m, mask=row_ok, other=0.0)
        p_t = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        if MASKED:
            p_t = tl.where(offs_n[:, None] <= offs_m[None, :] + (seqlen_k - seqlen_q), p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = (p_t * (dp_t - delta[None, :])).to(q.dtype)
        dk += tl.dot(ds_t, q)
        dq = tl.dot(tl.trans(ds_t), k) * sm_scale
        tl.atomic_add(dq_ptr + offs, dq, mask=row_ok[:, None])
    return dk, dv


@triton.jit
def _fa2_bwd(Q, K, V, DO, LSE, Delta, DQ, DK, DV, sm_scale, qk_scale, seqlen_q, seqlen_k,
             heads, group, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    bh_kv = tl.program_id(1).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_off = bh_kv * seqlen_k * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    col_ok = offs_n[:, None] < seqlen_k
    k = tl.load(K + kv_off, mask=col_ok, other=0.0)
    v = tl.load(V + kv_off, mask=col_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    lo, full_lo, hi = q_block_range(start_n, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
    kv_heads = heads // group
    for g in range(group):
        bh = (bh_kv // kv_heads) * heads + (bh_kv % kv_heads) * group + g
        q_off = bh * seqlen_q * HEAD_DIM
        dk, dv = _q_loop(k, v, dk, dv, Q + q_off, DO + q_off, DQ + q_off, LSE + bh * seqlen_q,
                         Delta + bh * seqlen_q, offs_n, lo, full_lo, sm_scale, qk_scale,
                         seqlen_q, seqlen_k, HEAD_DIM, BLOCK_M, True)
        dk, dv = _q_loop(k, v, dk, dv, Q + q_off, DO + q_off, DQ + q_off, LSE + bh * seqlen_q,
                         Delta + bh * seqlen_q, offs_n, full_lo, hi, sm_scale, qk_scale,
                         seqlen_q, seqlen_k, HEAD_DIM, BLOCK_M, False)
    tl.store(DK + kv_off, (dk * sm_scale).to(DK.dtype.element_ty), mask=col_ok)
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=col_ok)


def forward(q, k, v, *, causal, sm_scale=None, **config):
    """FA2 forward.

    Args:
        q: ``[B, H, N_q, d]`` fp16/bf16; k, v: ``[B, H_kv, N_k, d]`` (GQA: H % H_kv == 0).
        causal: bottom-right-aligned causal mask (see ``_common``).
        sm_scale: softmax scale, default ``1/sqrt(d)``.
        **config: knobs of :func:`launch_config` (``block_m``, ``block_n``, ``num_warps``,
            ``num_stages``; ``bwd_*`` ones are accepted and ignored here).

    Returns:
        ``(o, lse)``: o ``[B, H, N_q, d]`` in q's dtype; lse ``[B, H, N_q]`` fp32, natural log.
    """
    run = prepare(launch_config, q, k, v, causal=causal, sm_scale=sm_scale, phase="fwd",
                  config=config)
    dims, cfg, sm_scale, q, k, v = run.dims, run.cfg, run.sm_scale, run.q, run.k, run.v
    o = new_output(q.shape, q.dtype, q.device)
    lse = new_output(q.shape[:3], torch.float32, q.device)
    _fa2_fwd[cfg["grid"]](q, k, v, o, lse, sm_scale * LOG2_E, dims.seqlen_q, dims.seqlen_k,
                          dims.heads, dims.group, HEAD_DIM=dims.head_dim,
                          BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"], CAUSAL=bool(causal),
                          num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o, lse


def backward(do, q, k, v, o, lse, *, causal, sm_scale=None, **config):
    """FA2 backward: ``(dq, dk, dv)`` shaped like q, k, v, from dO ``[B, H, N_q, d]``.

    ``o`` and ``lse`` are :func:`forward`'s outputs; ``**config`` as there (``bwd_*`` knobs).
    """
    run = prepare(launch_config, q, k, v, causal=causal, sm_scale=sm_scale, phase="bwd",
                  config=config)
    dims, cfg, sm_scale, q, k, v = run.dims, run.cfg, run.sm_scale, run.q, run.k, run.v
    o, do = o.contiguous(), do.contiguous()
    dq_accum = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    delta = new_output(q.shape[:3], torch.float32, q.device)
    dk = new_output(k.shape, k.dtype, k.device)
    dv = new_output(v.shape, v.dtype, v.device)
    pre = kernel_entry(cfg, "fa2_bwd_preprocess")
    _fa2_bwd_preprocess[pre["grid"]](o, do, delta, dims.seqlen_q, HEAD_DIM=dims.head_dim,
                                     BLOCK_M=pre["block_m"], num_warps=pre["num_warps"],
                                     num_stages=pre["num_stages"])
    _fa2_bwd[cfg["grid"]](q, k, v, do, lse, delta, dq_accum, dk, dv, sm_scale,
                          sm_scale * LOG2_E, dims.seqlen_q, dims.seqlen_k, dims.heads,
                          dims.group, HEAD_DIM=dims.head_dim, BLOCK_M=cfg["block_m"],
                          BLOCK_N=cfg["block_n"], CAUSAL=bool(causal),
                          num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return dq_accum.to(q.dtype), dk, dv


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, config):
        o, lse = forward(q, k, v, causal=causal, sm_scale=sm_scale, **config)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.config = causal, sm_scale, config
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward(do, q, k, v, o, lse, causal=ctx.causal, sm_scale=ctx.sm_scale,
                              **ctx.config)
        return dq, dk, dv, None, None, None


def attention(q, k, v, causal=False, sm_scale=None, **config):
    """Differentiable FA2 attention: :func:`forward` with :func:`backward` as its gradient."""
    return _Attention.apply(q, k, v, causal, sm_scale, config)
