"""Host-side helpers shared by every kernel: shapes, GQA, causal alignment, tile ranges.

Pure Python at import time (no torch, no triton), so :mod:`.configs` and perfsim-side tests can
use the tile-range functions without a GPU stack. Notation as in DESIGN.md: ``B`` batch, ``H``
query heads, ``H_kv`` key/value heads, ``N_q``/``N_k`` sequence lengths, ``d`` head dim.

Conventions every kernel follows (and :mod:`.reference` implements in float64):

* GQA: query head ``h`` reads key/value head ``h // (H // H_kv)``.
* Causal with ``N_q != N_k`` is aligned bottom-right as in flash-attn >= 2.1: query row ``i`` sees
  key ``j`` iff ``j <= i + (N_k - N_q)``. A row that sees no key has output 0 and
  logsumexp ``+inf`` (flash-attn's convention, so that ``exp(s - lse) = 0`` in the backward).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: log2(e) and ln(2): the kernels evaluate exp(x) as exp2(x * LOG2_E) and convert back.
LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453

#: Head dims the Triton kernels accept: tl.arange needs a power of two; 16 is tl.dot's minimum.
MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 256

#: When true (or PERFSIM_POISON_OUTPUTS=1), outputs are allocated filled with NaN instead of
#: left uninitialised, so a test can check that a kernel writes every element.
POISON_OUTPUTS = os.environ.get("PERFSIM_POISON_OUTPUTS") == "1"


@dataclass(frozen=True)
class Dims:
    """Workload dimensions of one attention call (paper notation B, H, H_kv, N_q, N_k, d)."""

    batch: int
    heads: int
    kv_heads: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int

    @property
    def group(self) -> int:
        """Query heads per key/value head, ``H // H_kv`` (1 for MHA)."""
        return self.heads // self.kv_heads


def dims_of(q, k, v) -> Dims:
    """Read and check the dims of q ``[B, H, N_q, d]`` and k, v ``[B, H_kv, N_k, d]``.

    Raises:
        ValueError: on rank, shape or GQA-divisibility mismatches.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be 4-D: q [B, H, N_q, d], k and v [B, H_kv, N_k, d]")
    b, h, n_q, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must be [B, H_kv, N_k, d] "
                         f"matching q {tuple(q.shape)}")
    h_kv, n_k = k.shape[1], k.shape[2]
    if h_kv < 1 or h % h_kv:
        raise ValueError(f"heads H={h} must be a multiple of kv_heads H_kv={h_kv}")
    return Dims(b, h, h_kv, n_q, n_k, d)


def check_triton_inputs(q, k, v) -> Dims:
    """Check what the Triton kernels need on top of :func:`dims_of`; returns the dims.

    Raises:
        ValueError: dtype not fp16/bf16, mixed dtypes or devices, or head dim not a power of
            two in [16, 256].
    """
    import torch

    dims = dims_of(q, k, v)
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"Triton kernels take fp16 or bf16, got {q.dtype}")
    if not (q.dtype == k.dtype == v.dtype) or not (q.device == k.device == v.device):
        raise ValueError("q, k, v must share dtype and device")
    d = dims.head_dim
    if not (MIN_HEAD_DIM <= d <= MAX_HEAD_DIM and is_pow2(d)):
        raise ValueError(f"head dim d={d} must be a power of two in [{MIN_HEAD_DIM}, "
                         f"{MAX_HEAD_DIM}]")
    return dims


def causal_offset(seqlen_q: int, seqlen_k: int) -> int:
    """Bottom-right causal offset ``N_k - N_q``: row ``i`` sees keys ``j <= i + offset``."""
    return seqlen_k - seqlen_q


def visible(i: int, j: int, seqlen_q: int, seqlen_k: int, causal: bool) -> bool:
    """Whether query row ``i`` may attend to key ``j`` (the brute-force form of the mask)."""
    in_bounds = 0 <= i < seqlen_q and 0 <= j < seqlen_k
    return in_bounds and (not causal or j <= i + causal_offset(seqlen_q, seqlen_k))


def kv_block_range(start_m: int, block_m: int, block_n: int, seqlen_q: int, seqlen_k: int,
                   causal: bool) -> tuple[int, int]:
    """Key range a query tile visits, split as in Triton's 06-fused-attention.

    For the query tile of rows ``[start_m, start_m + block_m)`` returns ``(full_hi, hi)``, in
    keys: tiles starting in ``[0, full_hi)`` are fully visible to every row and fully in bounds
    (no mask needed, the off-band loop); tiles starting in ``[full_hi, hi)`` need the mask (the
    diagonal band and a ragged last tile); tiles from ``hi`` on are skipped. ``full_hi`` is a
    multiple of ``block_n``. The Triton helper ``_online_softmax.kv_block_range`` mirrors this.
    """
    off = causal_offset(seqlen_q, seqlen_k)
    last_row = min(start_m + block_m, seqlen_q) - 1
    if causal:
        hi = max(min(seqlen_k, last_row + off + 1), 0)
        full = max(min(seqlen_k, start_m + off + 1), 0)
    else:
        hi = full = seqlen_k
    return (full // block_n) * block_n, hi


def q_block_range(start_n: int, block_m: int, block_n: int, seqlen_q: int, seqlen_k: int,
                  causal: bool) -> tuple[int, int, int]:
    """Query range a key tile visits in the backward pass (the transpose of :func:`kv_block_range`).

    For the key tile ``[start_n, start_n + block_n)`` returns ``(lo, full_lo, hi)`` in rows, all
    multiples of ``block_m``: query tiles starting in ``[lo, full_lo)`` need the causal mask, tiles
    in ``[full_lo, hi)`` see every key of the tile, tiles before ``lo`` see none of it.
    Out-of-range rows and keys need no mask there (they load as zero with lse = +inf).
    """
    hi = cdiv(seqlen_q, block_m) * block_m
    if not causal:
        return 0, 0, hi
    off = causal_offset(seqlen_q, seqlen_k)
    first_row = max(start_n - off, 0)
    if first_row >= seqlen_q:
        return hi, hi, hi
    last_key = min(start_n + block_n, seqlen_k) - 1
    lo = min((first_row // block_m) * block_m, hi)
    full_lo = min(max(cdiv(max(last_key - off, 0), block_m) * block_m, lo), hi)
    return lo, full_lo, hi


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)


def is_pow2(x: int) -> bool:
    """True for 1, 2, 4, ..."""
    return x >= 1 and (x & (x - 1)) == 0


def pow2_floor(x: float) -> int:
    """Largest power of two <= ``x`` (``x >= 1``)."""
    return 1 << (int(x).bit_length() - 1)


def default_sm_scale(head_dim: int) -> float:
    """Softmax scale ``1 / sqrt(d)`` (Vaswani et al.; FA1 Algorithm 0)."""
    return head_dim ** -0.5


def interpreting() -> bool:
    """True under ``TRITON_INTERPRET=1`` (Triton's CPU interpreter)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def new_output(shape, dtype, device):
    """Allocate a kernel output: ``torch.empty``, or NaN-filled when :data:`POISON_OUTPUTS`."""
    import torch

    if POISON_OUTPUTS:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def dtype_name(t) -> str:
    """``"fp16"``, ``"bf16"`` or ``"fp32"`` for a torch tensor."""
    import torch

    return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[t.dtype]


@dataclass(frozen=True)
class Launch:
    """What every kernel's host side sets up before launching: the checked sizes, the launch
    configuration it reports, the softmax scale and contiguous inputs."""

    dims: Dims
    cfg: dict
    sm_scale: float
    q: object
    k: object
    v: object


def prepare(launch_config, q, k, v, *, causal, sm_scale, phase, config) -> Launch:
    """Check ``q, k, v``, compute the launch configuration (so the kernel launches exactly
    what it reports), default the scale to ``1/sqrt(d)`` and make the inputs contiguous.

    Raises:
        ValueError: bad shapes or dtypes (``check_triton_inputs``); TypeError/ValueError for
            bad knobs (``launch_config``).
    """
    dims = check_triton_inputs(q, k, v)
    cfg = launch_config(dims.batch, dims.heads, dims.kv_heads, dims.seqlen_q, dims.seqlen_k,
                        dims.head_dim, causal=causal, dtype=dtype_name(q), phase=phase,
                        **config)
    scale = default_sm_scale(dims.head_dim) if sm_scale is None else sm_scale
    return Launch(dims, cfg, scale, q.contiguous(), k.contiguous(), v.contiguous())


def kernel_entry(cfg: dict, name: str) -> dict:
    """The entry called ``name`` in a launch config's ``kernels`` list."""
    return next(kernel for kernel in cfg["kernels"] if kernel["name"] == name)
