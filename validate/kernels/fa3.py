"""FlashAttention-3-style forward (Shah et al. 2024, arXiv 2407.08608) in Triton, for Hopper.

The math and the causal split are FA2's (:mod:`.fa2`); what changes is how tiles move:

* Q, K, V and O go through tensor descriptors (``tl.make_tensor_descriptor``), which Triton
  lowers to TMA bulk copies on sm_90 (FA3 §3.1 "producer ... TMA"). The descriptors are 3-D,
  ``[B*H (or B*H_kv), N, d]`` with block ``[1, block, d]``, so a ragged last tile is zero-padded
  by the hardware instead of reading the next head's rows.
* The K/V loop is ``tl.range(..., num_stages=num_stages, warp_specialize=warp_specialize)``: a
  software pipeline with ``num_stages`` tiles in flight (FA3's K/V shared-memory ring, 2 stages
  in hopper/flash_fwd_launch_template.h) and, if asked, Triton's automatic warp specialisation.

README.md (next to this file) says which FA3 mechanisms Triton 3.6 can express on sm_90 and
which it cannot. Under ``TRITON_INTERPRET=1`` the descriptors run in Triton's interpreter as
well (it emulates them with masked loads), so the same code path is checked on CPU.
"""

import torch
import triton
import triton.language as tl

from ._common import (
    LOG2_E,
    interpreting,
    new_output,
    prepare,
)
from ._online_softmax import finalize, kv_block_range, mask_scores, softmax_step
from .configs import fa3 as launch_config

__all__ = ["forward", "launch_config"]


@triton.jit
def _kv_loop(q, desc_k, desc_v, bh_kv, m_i, l_i, acc, offs_m, lo, hi, qk_scale, seqlen_q,
             seqlen_k, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
             MASKED: tl.constexpr, NUM_STAGES: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    for start_n in tl.range(lo, hi, BLOCK_N, num_stages=NUM_STAGES,
                            warp_specialize=WARP_SPECIALIZE):
        k = desc_k.load([bh_kv, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        v = desc_v.load([bh_kv, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            qk = mask_scores(qk, offs_m, offs_n, seqlen_q, seqlen_k, CAUSAL)
        m_i, l_i, acc = softmax_step(qk, v, m_i, l_i, acc, MASKED)
    return m_i, l_i, acc


@triton.jit
def _rows_descriptor(ptr, heads_total, seqlen, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    """TMA descriptor of a contiguous ``[heads_total, seqlen, HEAD_DIM]`` tensor, moving
    ``BLOCK`` rows of one head at a time."""
    return tl.make_tensor_descriptor(ptr, shape=[heads_total, seqlen, HEAD_DIM],
                                     strides=[seqlen * HEAD_DIM, HEAD_DIM, 1],
                                     block_shape=[1, BLOCK, HEAD_DIM])


@triton.jit
def _fa3_fwd(Q, K, V, Out, LSE, qk_scale, seqlen_q, seqlen_k, heads, group, bh_total,
             bh_kv_total, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, NUM_STAGES: tl.constexpr,
             WARP_SPECIALIZE: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    bh_kv = (bh // heads) * (heads // group) + (bh % heads) // group
    desc_q = _rows_descriptor(Q, bh_total, seqlen_q, HEAD_DIM, BLOCK_M)
    desc_o = _rows_descriptor(Out, bh_total, seqlen_q, HEAD_DIM, BLOCK_M)
    desc_k = _rows_descriptor(K, bh_kv_total, seqlen_k, HEAD_DIM, BLOCK_N)
    desc_v = _rows_descriptor(V, bh_kv_total, seqlen_k, HEAD_DIM, BLOCK_N)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = desc_q.load([bh, start_m, 0]).reshape([BLOCK_M, HEAD_DIM])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full_hi, hi = kv_block_range(start_m, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
    m_i, l_i, acc = _kv_loop(q, desc_k, desc_v, bh_kv, m_i, l_i, acc, offs_m, 0, full_hi,
                             qk_scale, seqlen_q, seqlen_k, HEAD_DIM, BLOCK_N, CAUSAL, False,
                             NUM_STAGES, WARP_SPECIALIZE)
    m_i, l_i, acc = _kv_loop(q, desc_k, desc_v, bh_kv, m_i, l_i, acc, offs_m, full_hi, hi,
                             qk_scale, seqlen_q, seqlen_k, HEAD_DIM, BLOCK_N, CAUSAL, True,
                             NUM_STAGES, WARP_SPECIALIZE)
    o, lse = finalize(acc, l_i, m_i)
    desc_o.store([bh, start_m, 0], o.to(Out.dtype.element_ty).reshape([1, BLOCK_M, HEAD_DIM]))
    tl.store(LSE + bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)


def _device_allocator(size: int, alignment: int, stream):
    """Global scratch for device-side TMA descriptors (Triton asks for it at launch)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _ensure_allocator():
    """Install :func:`_device_allocator` unless the caller already set an allocator."""
    from triton.runtime import _allocation

    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_device_allocator)


def forward(q, k, v, *, causal, sm_scale=None, **config):
    """FA3-style forward.

    Args:
        q: ``[B, H, N_q, d]`` fp16/bf16; k, v: ``[B, H_kv, N_k, d]`` (GQA: H % H_kv == 0).
        causal: bottom-right-aligned causal mask (see ``_common``).
        sm_scale: softmax scale, default ``1/sqrt(d)``.
        **config: :func:`launch_config` knobs: ``block_m``, ``block_n``, ``num_warps``,
            ``num_stages``, ``warp_specialize``.

    Returns:
        ``(o, lse)``: o ``[B, H, N_q, d]`` in q's dtype; lse ``[B, H, N_q]`` fp32, natural log.
    """
    run = prepare(launch_config, q, k, v, causal=causal, sm_scale=sm_scale, phase="fwd",
                  config=config)
    dims, cfg, sm_scale, q, k, v = run.dims, run.cfg, run.sm_scale, run.q, run.k, run.v
    o = new_output(q.shape, q.dtype, q.device)
    lse = new_output(q.shape[:3], torch.float32, q.device)
    if not interpreting():
        _ensure_allocator()
    _fa3_fwd[cfg["grid"]](q, k, v, o, lse, sm_scale * LOG2_E, dims.seqlen_q, dims.seqlen_k,
                          dims.heads, dims.group, dims.batch * dims.heads,
                          dims.batch * dims.kv_heads, HEAD_DIM=dims.head_dim,
                          BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"], CAUSAL=bool(causal),
                          NUM_STAGES=cfg["num_stages"], WARP_SPECIALIZE=cfg["warp_specialize"],
                          num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o, lse
