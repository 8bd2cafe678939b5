"""Float64 reference attention: the oracle every kernel is checked against, on CPU or GPU.

Brute force, straight from the definition ``O = softmax(sm_scale * Q K^T + mask) V`` (FA1 paper
§2.2, Algorithm 0), in float64, with the conventions of ``_common``: GQA head ``h`` uses K/V head
``h // (H // H_kv)``; causal is bottom-right aligned (``j <= i + N_k - N_q``); a row that sees
no key has O = 0 and lse = +inf. Differentiable, so its autograd gradients are the reference
gradients too.
"""

import torch

from ._common import default_sm_scale, dims_of


def reference_attention(q, k, v, *, causal, sm_scale=None):
    """Float64 attention.

    Args:
        q: ``[B, H, N_q, d]``; k, v: ``[B, H_kv, N_k, d]``; any float dtype (upcast to float64).
        causal: bottom-right-aligned causal mask.
        sm_scale: softmax scale, default ``1/sqrt(d)``.

    Returns:
        ``(o, lse)``: o ``[B, H, N_q, d]`` float64; lse ``[B, H, N_q]`` float64 (natural log).
    """
    dims = dims_of(q, k, v)
    sm_scale = default_sm_scale(dims.head_dim) if sm_scale is None else sm_scale
    q, k, v = q.double(), k.double(), v.double()
    k = k.repeat_interleave(dims.group, dim=1)
    v = v.repeat_interleave(dims.group, dim=1)
    s = torch.matmul(q, k.transpose(-2, -1)) * sm_scale
    if causal:
        s = s.masked_fill(~causal_mask(dims.seqlen_q, dims.seqlen_k, q.device), float("-inf"))
    m = s.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    denom = e.sum(dim=-1, keepdim=True)
    empty = denom == 0
    o = torch.matmul(e / torch.where(empty, torch.ones_like(denom), denom), v)
    lse = torch.where(empty, torch.full_like(denom, float("inf")),
                      m + torch.log(torch.where(empty, torch.ones_like(denom), denom)))
    return o, lse.squeeze(-1)


def causal_mask(seqlen_q, seqlen_k, device=None):
    """Boolean ``[N_q, N_k]``, True where query ``i`` may see key ``j`` (``j <= i + N_k - N_q``)."""
    ones = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    return ones.tril(diagonal=seqlen_k - seqlen_q)


def relative_error(out, ref) -> float:
    """``||out - ref|| / ||ref||`` (Frobenius), computed in float64."""
    out, ref = out.double(), ref.double()
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()
