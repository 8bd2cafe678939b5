"""Standard (eager) attention: FA1 paper Algorithm 0, one torch op per step.

``S = Q K^T`` (torch.matmul, S written to HBM), scale, ``masked_fill`` for causal, softmax,
optional dropout, ``O = P V`` (torch.matmul). The softmax is either fused (``torch.softmax``, one
kernel reading S and writing P) or the five-kernel form of the RTX 5090 post (seeds/
roofline-5090-training-step.zh.md §3): row max, subtract, exp, row sum, divide, which moves the
N x N matrix 8 times. The backward runs through autograd, which saves the N x N tensors.

GQA is done by ``repeat_interleave`` of K and V along the head axis: this materialises K and V
expanded to H heads (H/H_kv times their size) in HBM, as eager code does.

Works for fp32 as well as fp16/bf16, on any device torch supports.
"""

import torch

from ._common import default_sm_scale, dims_of, dtype_name
from .configs import standard as launch_config

__all__ = ["attention", "forward", "launch_config"]


def attention(q, k, v, causal=False, sm_scale=None, **config):
    """Differentiable eager attention; returns O only (gradients via autograd)."""
    return forward(q, k, v, causal=causal, sm_scale=sm_scale, **config)[0]


def forward(q, k, v, *, causal, sm_scale=None, softmax="fused", dropout_p=0.0):
    """Eager attention forward (Algorithm 0).

    Args:
        q: ``[B, H, N_q, d]``; k, v: ``[B, H_kv, N_k, d]`` (GQA: H % H_kv == 0); fp32/fp16/bf16.
        causal: bottom-right-aligned causal mask (see ``_common``).
        sm_scale: softmax scale, default ``1/sqrt(d)``.
        softmax: ``"fused"`` (torch.softmax) or ``"5kernel"`` (max, sub, exp, sum, div).
        dropout_p: dropout probability on P (0 launches no dropout kernel); seed with
            ``torch.manual_seed`` for reproducible masks.

    Returns:
        ``(o, None)``: o ``[B, H, N_q, d]`` in q's dtype. Eager attention keeps no row statistics.
    """
    dims = dims_of(q, k, v)
    cfg = launch_config(dims.batch, dims.heads, dims.kv_heads, dims.seqlen_q, dims.seqlen_k,
                        dims.head_dim, causal=causal, dtype=dtype_name(q), phase="fwd",
                        softmax=softmax, dropout_p=dropout_p)
    sm_scale = default_sm_scale(dims.head_dim) if sm_scale is None else sm_scale
    if dims.group > 1:
        k = k.repeat_interleave(dims.group, dim=1)
        v = v.repeat_interleave(dims.group, dim=1)
    s = torch.matmul(q, k.transpose(-2, -1))
    s = s * sm_scale
    if causal:
        above = torch.ones(dims.seqlen_q, dims.seqlen_k, dtype=torch.bool, device=q.device)
        above = above.triu(diagonal=dims.seqlen_k - dims.seqlen_q + 1)
        s = s.masked_fill(above, float("-inf"))
    if cfg["softmax"] == "fused":
        p = torch.softmax(s, dim=-1)
    else:
        m = s.max(dim=-1, keepdim=True).values
        e = torch.exp(s - m)
        p = e / e.sum(dim=-1, keepdim=True)
    if causal and dims.seqlen_q > dims.seqlen_k:
        p = p.masked_fill(above.all(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        p = torch.nn.functional.dropout(p, p=dropout_p, training=True)
    return torch.matmul(p, v), None
