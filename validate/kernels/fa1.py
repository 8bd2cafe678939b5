"""FlashAttention-1 forward, Algorithm 1 of Dao et al. 2022 (arXiv 2205.14135), in Triton.

One CTA per (batch, head): the grid is ``(B*H,)``, as in FA1. The OUTER loop walks the K/V
tiles ``j`` (Algorithm 1 line 5), the INNER loop the query tiles ``i`` (line 7); every inner
step reads ``O_i, l_i, m_i`` from HBM (line 8), updates them and writes them back (lines 12-13),
keeping O_i normalised by ``diag(l_i)^-1`` at every step (line 12). Before the loops the kernel
initialises O = 0, l = 0, m = -inf in HBM (line 2).

Implementation choices, each recorded by :func:`launch_config`:

* ``O``, ``l`` and ``m`` live in an fp32 HBM workspace (Algorithm 1 leaves the precision of the
  running O open; fp32 avoids a rounding per inner step). A last loop over the query tiles in the
  same kernel writes O in the input dtype and ``lse = m + log l``.
* ``m`` is kept in log2 units (scores times ``sm_scale * log2(e)``), so each ``exp`` is one
  ``exp2``; mathematically identical to the paper's ``exp``.
* A ``tl.debug_barrier()`` (``bar.sync``) separates the inner steps that write ``O_i`` from the next
  outer step that reads it back: different threads of the CTA may own an element in the two.
* Causal: per K/V tile the inner loop starts at the first query tile that sees any of its keys;
  masking is applied to every visited tile (FA1 has no unmasked/masked split).
"""

import torch
import triton
import triton.language as tl

from ._common import LN_2, LOG2_E, new_output, prepare
from ._online_softmax import mask_scores, q_block_range, safe_max
from .configs import fa1 as launch_config

__all__ = ["forward", "launch_config"]

_LN_2 = tl.constexpr(LN_2)


@triton.jit
def _inner_step(q, k, v, o, l_i, m_i, offs_m, offs_n, qk_scale, seqlen_q, seqlen_k,
                CAUSAL: tl.constexpr):
    """Algorithm 1 lines 9-12 for one (i, j) pair; returns the new (O_i, l_i, m_i)."""
    s = mask_scores(tl.dot(q, tl.trans(k)) * qk_scale, offs_m, offs_n, seqlen_q, seqlen_k,
                    CAUSAL)
    m_tile = tl.max(s, 1)
    p = tl.exp2(s - safe_max(m_tile, True)[:, None])
    l_tile = tl.sum(p, 1)
    m_new = tl.maximum(m_i, m_tile)
    m_use = safe_max(m_new, True)
    alpha = tl.exp2(m_i - m_use)
    beta = tl.exp2(m_tile - m_use)
    l_new = alpha * l_i + beta * l_tile
    pv = tl.dot(p.to(v.dtype), v)
    o = (l_i * alpha)[:, None] * o + beta[:, None] * pv
    o = o / tl.where(l_new == 0.0, 1.0, l_new)[:, None]
    return o, l_new, m_new


@triton.jit
def _fa1_fwd(Q, K, V, Out, LSE, O_ws, L_ws, M_ws, qk_scale, seqlen_q, seqlen_k, heads, group,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    bh_kv = (bh // heads) * (heads // group) + (bh % heads) // group
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = bh * seqlen_q * HEAD_DIM
    kv_base = bh_kv * seqlen_k * HEAD_DIM
    stats_base = bh * seqlen_q
    for start_m in range(0, seqlen_q, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < seqlen_q
        tile = q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(O_ws + tile, tl.zeros([BLOCK_M, HEAD_DIM], tl.float32), mask=row_ok[:, None])
        tl.store(L_ws + stats_base + offs_m, tl.zeros([BLOCK_M], tl.float32), mask=row_ok)
        tl.store(M_ws + stats_base + offs_m, tl.full([BLOCK_M], float("-inf"), tl.float32),
                 mask=row_ok)
    tl.debug_barrier()
    for start_n in range(0, seqlen_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_tile = kv_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv_tile, mask=offs_n[:, None] < seqlen_k, other=0.0)
        v = tl.load(V + kv_tile, mask=offs_n[:, None] < seqlen_k, other=0.0)
        lo, _, hi = q_block_range(start_n, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
        for start_m in range(lo, hi, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            row_ok = offs_m < seqlen_q
            tile = q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
            q = tl.load(Q + tile, mask=row_ok[:, None], other=0.0)
            o = tl.load(O_ws + tile, mask=row_ok[:, None], other=0.0)
            l_i = tl.load(L_ws + stats_base + offs_m, mask=row_ok, other=0.0)
            m_i = tl.load(M_ws + stats_base + offs_m, mask=row_ok, other=float("-inf"))
            o, l_i, m_i = _inner_step(q, k, v, o, l_i, m_i, offs_m, offs_n, qk_scale,
                                      seqlen_q, seqlen_k, CAUSAL)
            tl.store(O_ws + tile, o, mask=row_ok[:, None])
            tl.store(L_ws + stats_base + offs_m, l_i, mask=row_ok)
            tl.store(M_ws + stats_base + offs_m, m_i, mask=row_ok)
        tl.debug_barrier()
    for start_m in range(0, seqlen_q, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < seqlen_q
        tile = q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        o = tl.load(O_ws + tile, mask=row_ok[:, None], other=0.0)
        l_i = tl.load(L_ws + stats_base + offs_m, mask=row_ok, other=0.0)
        m_i = tl.load(M_ws + stats_base + offs_m, mask=row_ok, other=float("-inf"))
        empty = l_i == 0.0
        lse = tl.where(empty, float("inf"), (m_i + tl.log2(tl.where(empty, 1.0, l_i))) * _LN_2)
        tl.store(Out + tile, o.to(Out.dtype.element_ty), mask=row_ok[:, None])
        tl.store(LSE + stats_base + offs_m, lse, mask=row_ok)


def forward(q, k, v, *, causal, sm_scale=None, **config):
    """FA1 forward (Algorithm 1).

    Args:
        q: ``[B, H, N_q, d]`` fp16/bf16; k, v: ``[B, H_kv, N_k, d]`` (GQA: H % H_kv == 0).
        causal: bottom-right-aligned causal mask (see ``_common``).
        sm_scale: softmax scale, default ``1/sqrt(d)``.
        **config: :func:`launch_config` knobs: ``sram_elements`` (M, elements), ``block_m``
            (B_r), ``block_n`` (B_c), ``num_warps``, ``num_stages``.

    Returns:
        ``(o, lse)``: o ``[B, H, N_q, d]`` in q's dtype; lse ``[B, H, N_q]`` fp32 natural-log
        logsumexp, ``m + log(l)`` from Algorithm 1's row statistics.
    """
    run = prepare(launch_config, q, k, v, causal=causal, sm_scale=sm_scale, phase="fwd",
                  config=config)
    dims, cfg, sm_scale, q, k, v = run.dims, run.cfg, run.sm_scale, run.q, run.k, run.v
    o = new_output(q.shape, q.dtype, q.device)
    lse = new_output(q.shape[:3], torch.float32, q.device)
    o_ws = new_output(q.shape, torch.float32, q.device)
    l_ws = new_output(q.shape[:3], torch.float32, q.device)
    m_ws = new_output(q.shape[:3], torch.float32, q.device)
    _fa1_fwd[cfg["grid"]](q, k, v, o, lse, o_ws, l_ws, m_ws, sm_scale * LOG2_E, dims.seqlen_q,
                          dims.seqlen_k, dims.heads, dims.group, HEAD_DIM=dims.head_dim,
                          BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"], CAUSAL=bool(causal),
                          num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o, lse
