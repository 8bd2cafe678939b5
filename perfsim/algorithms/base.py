"""The interface every algorithm module implements, and helpers they share.

An algorithm is a frozen pydantic config (its options, with the reference implementation's
defaults) whose :meth:`Algorithm.kernels` turns a workload into the list of launched kernels
with their counts. Count code is written once over :class:`Dims`, whose numeric fields may be
Python ints, numpy arrays (``perfsim.sweep``) or sympy symbols (``perfsim.symbolic``).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import sympy
from pydantic import BaseModel, ConfigDict

from perfsim.errors import InfeasibleError
from perfsim.gpu import BYTES_PER_ELEMENT, GPUSpec
from perfsim.kernel import KernelCost
from perfsim.mathops import cdiv, is_symbolic, minimum, where
from perfsim.workload import AttentionWorkload

FP32_BYTES = 4
#: Bytes of a logsumexp / row-statistic entry (fp32 in every reference implementation).
STAT_BYTES = FP32_BYTES
#: Bytes of one dropout-mask element as PyTorch's native dropout stores it (torch.bool).
DROPOUT_MASK_BYTES = 1
#: Random-number cost of dropout, in FP32-pipe operations per element: Philox4x32-10
#: (the generator cuRAND/PyTorch use) makes 4 uint32 per 10 rounds, each round 2 32x32->64
#: multiplies (2 ops each) + 4 add/xor, i.e. 10 x 8 / 4 = 20 ops per random number, plus
#: 2 ops (compare with p, scale by 1/(1-p)).
DROPOUT_OPS_PER_ELEMENT = 22


@dataclass(frozen=True)
class Dims:
    """Workload sizes in paper notation. Numeric fields: int, numpy array or sympy symbol.

    ``causal``, ``dtype``, ``phase`` and ``dropout_p`` are always scalars (sweeps group by them).
    """

    B: object
    H: object
    H_kv: object
    N_q: object
    N_k: object
    d: object
    d_v: object
    causal: bool
    dtype: str
    phase: str
    dropout_p: float = 0.0

    @classmethod
    def of(cls, w: AttentionWorkload) -> Dims:
        return cls(w.batch, w.heads, w.kv_heads, w.seqlen_q, w.seqlen_k, w.head_dim,
                   w.head_dim_v, w.causal, w.dtype, w.phase, w.dropout_p)

    @property
    def e(self) -> int:
        """Bytes per element of Q, K, V, O."""
        return BYTES_PER_ELEMENT[self.dtype]

    @property
    def symbolic(self) -> bool:
        return is_symbolic(self.B, self.H, self.H_kv, self.N_q, self.N_k, self.d, self.d_v)

    @property
    def fwd(self) -> bool:
        return self.phase in ("fwd", "fwd_bwd")

    @property
    def bwd(self) -> bool:
        return self.phase in ("bwd", "fwd_bwd")


def l2_filtered(total_bytes, compulsory_bytes, working_set_bytes, gpu: GPUSpec,
                usable_fraction: float):
    """Split global-memory reads into HBM traffic and L2 hits.

    Re-reads (``total - compulsory``) of data whose concurrently live working set fits in the
    usable part of L2 are served by L2; otherwise they go to HBM (cyclic re-reads of a working
    set larger than an LRU-like cache miss almost every time). This step rule is a stated
    assumption of perfsim, checked by ``perfsim validate``.

    Returns:
        ``(hbm_bytes, l2_hit_bytes)``.
    """
    rereads = total_bytes - compulsory_bytes
    fits = working_set_bytes <= usable_fraction * gpu.l2_bytes
    hits = where(fits, rereads, 0 * rereads)
    return total_bytes - hits, hits


def resident_ctas(gpu: GPUSpec, smem_bytes: int, warps: int, registers_per_thread: int) -> int:
    """CTAs that fit on one SM at once (occupancy), from shared memory, warps and registers.

    A numpy ``smem_bytes`` (sweeps) gives an array; a sympy one (closed forms) the ``Min``
    of the limits, unchecked.

    Raises:
        InfeasibleError: not even one CTA fits (the message names the limit).
    """
    if isinstance(smem_bytes, np.ndarray):  # sweeps: per element (raises if any fails)
        sizes, where_ = np.unique(smem_bytes, return_inverse=True)
        return np.array([resident_ctas(gpu, int(s), warps, registers_per_thread)
                         for s in sizes])[where_.reshape(smem_bytes.shape)]
    limits = {
        "CTAs per SM": gpu.max_ctas_per_sm,
        "warps per SM": gpu.max_warps_per_sm // warps,
        "registers per SM": gpu.registers_per_sm // (registers_per_thread * warps * 32),
    }
    if smem_bytes:
        limits["shared memory per SM"] = gpu.smem_bytes_per_sm // smem_bytes
    if is_symbolic(smem_bytes):  # closed forms (perfsim.symbolic): occupancy, unchecked;
        # unevaluated: sympy 1.14 wrongly simplifies Min(2, floor(c / (a + b))) to 2
        return sympy.Min(*limits.values(), evaluate=False)
    if smem_bytes > gpu.smem_bytes_per_block:
        raise InfeasibleError(
            f"a CTA needs {smem_bytes} B of shared memory; {gpu.id} allows "
            f"{gpu.smem_bytes_per_block} B per CTA")
    if registers_per_thread > gpu.max_registers_per_thread:
        raise InfeasibleError(
            f"{registers_per_thread} registers per thread exceed {gpu.id}'s "
            f"{gpu.max_registers_per_thread}")
    ctas = min(limits.values())
    if ctas < 1:
        worst = min(limits, key=limits.get)
        raise InfeasibleError(f"no CTA fits on one {gpu.id} SM ({worst})")
    return ctas


class Algorithm(BaseModel):
    """Base class of the algorithm configs (``Standard``, ``FA1``, ``FA2``, ``FA3``, ``FA4``).

    Subclasses set ``name`` and implement :meth:`kernels` and :meth:`memory_bytes`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: ClassVar[str] = "algorithm"
    #: one line on how units overlap inside this algorithm's kernels (for explain()).
    overlap_rule: ClassVar[str] = ""

    @abstractmethod
    def kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        """Kernels launched for ``dims`` on ``gpu``, in launch order.

        Raises:
            InfeasibleError: this configuration cannot run there.
        """

    @abstractmethod
    def memory_bytes(self, dims: Dims, gpu: GPUSpec):
        """Peak HBM footprint (bytes): inputs, outputs, what is saved for backward, and the
        largest transient buffers."""

    def label(self) -> str:
        """Name plus the options that differ from the defaults, e.g. ``fa2(block_m=64)``."""
        changed = {k: v for k, v in self.model_dump().items()
                   if v != type(self).model_fields[k].default}
        if not changed:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")"


def in_order_tail(v, grid, slots, causal: bool, lpt: bool):
    """Tail factor (≥ 1) of a causal grid whose CTAs differ in length.

    With longest-processing-time-first order (``lpt``) or equal CTAs (no mask) the busiest
    SM stays at the average and the factor is 1. Launched in index order (flash-attn 2,
    FA3, Triton: query tiles of each head from short to long), the longest CTAs start last
    and the final wave ends about ``max − avg`` of a CTA after the balanced finish, spread over
    ``slots`` resident CTAs: factor ``1 + (max/avg − 1) · slots / grid`` of the balanced time.
    A stated estimate (list scheduling), not a fitted constant.
    """
    if lpt or not causal:
        return 1
    longest_over_avg = v.kv_tiles * v.q_tiles / v.tiles
    return 1 + (longest_over_avg - 1) * minimum(slots / grid, 1)


def padding(n, block):
    """``⌈n / block⌉ · block / n``: the work of whole blocks over the work of ``n`` items."""
    return cdiv(n, block) * block / n


def with_whole_tiles(build, dims: Dims, block_r, block_c) -> KernelCost:
    """``build(dims)`` with, as executed SM-side work, ``build`` evaluated on the sequence
    lengths rounded up to whole ``B_r x B_c`` tiles (``KernelCost.executed``)."""
    cost = build(dims)
    if dims.symbolic:
        return cost
    whole = replace(dims, N_q=cdiv(dims.N_q, block_r) * block_r,
                    N_k=cdiv(dims.N_k, block_c) * block_c)
    return cost.with_executed(build(whole))
