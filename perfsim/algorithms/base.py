"""The interface every algorithm module implements, and helpers they share.

An algorithm is a frozen pydantic config (its options, with the reference implementation's
defaults) whose :meth:`Algorithm.kernels` turns a workload into the list of launched kernels
with their counts. Count code is written once over :class:`Dims`, whose numeric fields may be
Python ints, numpy arrays (``perfsim.sweep``) or sympy symbols (``perfsim.symbolic``).

Length: the algorithm interface plus the helpers every algorithm's count code shares (dims, L2
reuse, whole-tile padding, varlen grouping, occupancy): one module so each algorithm imports
one place and no algorithm imports another.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.frozen import fast_init, replace
from perfsim.gpu import BYTES_PER_ELEMENT, GPUSpec
from perfsim.kernel import ADDITIVE, TERM_FIELDS, KernelCost
from perfsim.mathops import (
    INT64_SAFE,
    cdiv,
    fdiv,
    is_symbolic,
    maximum,
    minimum,
    one_value,
    shortcut_all,
    where,
)
from perfsim.tiles import mask_visits
from perfsim.workload import AttentionWorkload

FP32_BYTES = 4
#: Bytes of a logsumexp / row-statistic entry (fp32 in every reference implementation).
STAT_BYTES = FP32_BYTES
#: Bytes of one dropout-mask element as PyTorch's native dropout stores it (torch.bool).
DROPOUT_MASK_BYTES = 1
#: Operations of one Philox4x32-10 call (the generator cuRAND and PyTorch use): 10 rounds, each
#: two 32x32->64 multiplies (2 ops each) and 4 adds/xors; one call makes 128 random bits.
PHILOX_OPS_PER_CALL = 80
#: Dropout in PyTorch's own kernels, per element, in FMA-pipe lane instructions: one 32-bit
#: random number per element (4 per call: 80 / 4 = 20), a compare with p and a scale by
#: 1/(1-p). ASSUMED: all on the FMA pipe (the multiplies are IMADs; the adds, xors and the
#: compare would go to the ALU, a split not measured).
DROPOUT_OPS_PER_ELEMENT = PHILOX_OPS_PER_CALL / 4 + 2
#: Dropout inside the fused attention kernels is counted from their instruction census
#: (``softmax_costs.DROPOUT_INSTRUCTIONS``), except FA1's (no census of its kernels): an
#: 8-bit keep threshold as in flash-attn 2 (``p_dropout_in_uint8_t``), one call's 128 bits
#: deciding 16 elements (80 / 16 = 5), plus the compare and the scale, all on the FMA pipe.
FUSED_DROPOUT_OPS_PER_ELEMENT = PHILOX_OPS_PER_CALL / 16 + 2


def forward_gemm_terms(elems, d, d_v) -> dict:
    """The forward's two GEMMs over ``elems`` visited score elements, as named terms
    (2 FLOP per multiply-add): ``S = Q Kᵀ`` and ``O += P V``."""
    return {"tensor/S=QKᵀ": 2 * elems * d, "tensor/O+=PV": 2 * elems * d_v}


def backward_gemm_terms(elems, d, d_v) -> dict:
    """The backward's five GEMMs (FA2 Algorithm 2) as named terms: ``S`` recomputed,
    ``dP = dO Vᵀ``, ``dV += Pᵀ dO``, ``dK += dSᵀ Q``, ``dQ += dS K`` — 2.5x the forward's."""
    return {"tensor/S=QKᵀ": 2 * elems * d, "tensor/dP=dO·Vᵀ": 2 * elems * d_v,
            "tensor/dV+=Pᵀ·dO": 2 * elems * d_v, "tensor/dK+=dSᵀ·Q": 2 * elems * d,
            "tensor/dQ+=dS·K": 2 * elems * d}


def effective_mask(causal: bool, window: tuple, seqlen_q, seqlen_k) -> tuple[bool, tuple]:
    """The mask as the kernels see it (flash-attn 2's ``mha_fwd`` does the same before
    choosing a kernel): a window side that hides nothing is dropped (``left >= N_k − 1`` or
    ``right >= N_q − 1`` with the bottom-right alignment), a right edge of 0 is the causal
    mask, and causal makes any wider right edge moot. For a variable-length batch the longest
    lengths decide. Returns ``(causal, (left, right))``. (With one query row the causal mask
    hides no key either, but only flash-attn 2's forward drops it, before choosing its tile:
    ``FA2.launch_causal``.)"""
    left, right = window
    if left is not None and left >= seqlen_k - 1:
        left = None
    if right is not None and right >= seqlen_q - 1 and not causal:
        right = None
    if right is not None and (right == 0 or causal):
        causal, right = True, None
    return causal, (left, right)


@fast_init
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
    #: ``(left, right)`` sliding window (``AttentionWorkload.window``), ``None`` = unbounded.
    window: tuple = (None, None)
    #: query heads packed into the rows of one tile (GQA packing): ``N_q`` then counts
    #: packed rows (``positions × group``, position ``row // group``) and ``H`` the K/V heads.
    group: int = 1
    softcap: float = 0.0
    #: element type of K and V (``None``: ``dtype``).
    kv_dtype: str | None = None
    page_size: int | None = None
    #: variable-length batch: ``((N_q, N_k), ...)`` one pair per sequence, or ``None``.
    seqlens: tuple | None = None
    #: split-KV parts of the forward (``perfsim.algorithms.splits``); 1 = none.
    splits: int = 1
    #: ``(N_q, N_k, d, d_v)`` before :func:`whole_tile_dims` rounded them up to whole tiles and
    #: the compiled head dims (what a kernel's bound checks test), ``None`` when these are the
    #: call's own.
    unpadded: tuple | None = None
    #: one group of a variable-length batch, run by a ``cu_seqlens`` kernel
    #: (:func:`varlen_groups`).
    varlen: bool = False
    #: the call hands the library a mask: causal, a window (even one that hides nothing, which
    #: the kernels drop) or variable lengths — what a software path that builds a mask object
    #: per call sees (FlexAttention's ``BlockMask``; ``TimingParams.host_floor``).
    mask_given: bool = False
    #: the window as the call gives it (``AttentionWorkload.window``), before
    #: :func:`effective_mask` drops sides that hide nothing: flash-attn 2 packs a decode
    #: step's query heads only when it gives none (:func:`perfsim.algorithms.splits.decide`).
    window_given: tuple = (None, None)

    @classmethod
    def of(cls, w: AttentionWorkload) -> Dims:
        """The dims of a workload (its effective mask, packing and splits not yet applied)."""
        seqlens = tuple(zip(w.seqlens_q, w.seqlens_k)) if w.varlen else None
        causal, window = effective_mask(w.causal, tuple(w.window), w.seqlen_q, w.seqlen_k)
        return cls(w.batch, w.heads, w.kv_heads, w.seqlen_q, w.seqlen_k, w.head_dim,
                   w.head_dim_v, causal, w.dtype, w.phase, w.dropout_p, window, 1,
                   w.softcap, w.kv_dtype if w.kv_dtype != w.dtype else None, w.page_size,
                   seqlens, mask_given=w.masked or w.varlen,
                   window_given=tuple(w.window))

    @property
    def e(self) -> int:
        """Bytes per element of Q (and of O, dO and the gradients, but see :attr:`e_o`)."""
        return BYTES_PER_ELEMENT[self.dtype]

    @property
    def e_o(self) -> int:
        """Bytes per element of the forward's output O: the inputs' width, but 2 (bf16) for
        fp8 inputs — flash-attn 3 allocates ``out_type = q_type == Float8_e4m3fn ? BFloat16 :
        q_type`` and refuses any other output dtype for fp8 ("For FP8 input, output must
        have dtype BF16", ``hopper/flash_api.cpp``), and flash-attn 4's forward writes a
        16-bit O for fp8 inputs as well (``perfsim.algorithms.fa4``). Only FA3 and FA4 take
        fp8 inputs here; every other algorithm refuses them."""
        return BYTES_PER_ELEMENT["bf16"] if self.dtype.startswith("fp8") else self.e

    @property
    def e_kv(self) -> int:
        """Bytes per element of K and V."""
        return BYTES_PER_ELEMENT[self.kv_dtype or self.dtype]

    @property
    def masked(self) -> bool:
        """Some score is hidden (causal mask or a window)."""
        return self.causal or self.window != (None, None)

    def tile_visits(self, block_r, block_c):
        """:class:`perfsim.tiles.TileVisits` of this mask in ``B_r x B_c`` tiles (the one
        tile-range rule, ``perfsim.tiles.mask_visits``); with packed heads the mask applies
        to positions ``row // group`` of ``⌈N_q / group⌉``, over ``N_q`` rows. The rows are
        ``N_q`` with or without a mask, also when whole-tile padding has made ``N_q`` more than
        the packed heads' rows and not a multiple of ``group`` (``whole_tile_dims``;
        ``⌈N_q / group⌉ · group`` would overshoot the padded tile by a query tile)."""
        offset = self.padded_offset()
        if self.group == 1 or not self.masked:
            return mask_visits(self.N_q, self.N_k, block_r, block_c, self.causal, self.window,
                               offset=offset)
        return mask_visits(cdiv(self.N_q, self.group), self.N_k, block_r, block_c,
                           self.causal, self.window, self.group, rows=self.N_q, offset=offset)

    def mask_lengths(self):
        """``(positions, N_k)`` that place a bottom-right-aligned mask (query position ``p``
        sees keys up to ``p + N_k − positions``): the call's own lengths, also after
        :func:`whole_tile_dims` has rounded ``N_q`` and ``N_k`` up to whole tiles — the
        kernels place the mask by ``seqlen_q`` and ``seqlen_k`` (flash-attn's
        ``n_block_max``, ``m_block_min``), and the padded rows and keys only fill tiles."""
        n_q, n_k = (self.N_q, self.N_k) if self.unpadded is None else self.unpadded[:2]
        return (n_q if self.group == 1 else cdiv(n_q, self.group)), n_k

    def padded_offset(self):
        """The mask's diagonal ``N_k − positions`` of :meth:`mask_lengths` where whole-tile
        padding moved the lengths (``None`` otherwise: the lengths' own)."""
        if self.unpadded is None or not self.masked:
            return None
        positions, n_k = self.mask_lengths()
        return n_k - positions

    def kv_rows_read(self, block_c):
        """K/V rows per (batch, K/V head) that some query's mask reaches, in whole ``B_c``-key
        tiles: ``N_k`` unless the window bounds the left side; with ``left``, the keys from
        the tile that holds key ``N_k − N_q − left`` on (query ``i`` sees keys up to
        ``left`` before ``i + N_k − N_q``: bottom-right alignment). A kernel never loads a
        K/V tile outside every query's range (flash-attn's ``n_block_min``,
        ``perfsim.tiles``), so this is the compulsory K/V traffic; with packed heads the
        mask runs over ``⌈N_q / group⌉`` positions."""
        left = self.window[0]
        if left is None:
            return self.N_k
        positions, n_k = self.mask_lengths()
        first = maximum(n_k - positions - left, 0)
        return self.N_k - (first // block_c) * block_c

    def packed(self) -> Dims:
        """GQA packing (flash-attn 3 ``PackGQA``): the ``H / H_kv`` query heads of a K/V head
        become rows of one tile (``N_q`` counts those rows), so each K/V tile is read once per
        K/V head and query tile."""
        if self.group != 1 or is_symbolic(self.H, self.H_kv):
            return self
        g = self.H // self.H_kv
        return replace(self, H=self.H_kv, N_q=self.N_q * g, group=g)

    @functools.cached_property
    def symbolic(self) -> bool:
        """Whether any size is a sympy symbol (closed forms). Kept on the instance once asked
        (the dims are frozen; ``perfsim.frozen.replace`` drops it from a copy)."""
        return is_symbolic(self.B, self.H, self.H_kv, self.N_q, self.N_k, self.d, self.d_v)

    @property
    def fwd(self) -> bool:
        """Whether the phase includes the forward."""
        return self.phase in ("fwd", "fwd_bwd")

    @property
    def bwd(self) -> bool:
        """Whether the phase includes the backward."""
        return self.phase in ("bwd", "fwd_bwd")




def l2_filtered(total_bytes, compulsory_bytes, working_set_bytes, gpu: GPUSpec,
                usable_fraction: float, written: bool = False):
    """Split global-memory reads into HBM traffic and L2 hits.

    Re-reads (``total - compulsory``) of data whose concurrently live working set fits in the
    usable part of L2 (``usable_fraction`` of it; the working set is never larger than the
    compulsory bytes) are served by L2. Past that the share served by L2 falls linearly to
    none at ``GPUSpec.l2_reuse_ramp_end`` times the L2's size (the rest goes to HBM):
    measured with cyclic re-reads on the H200 (validate/probe_l2.py --sizes,
    reports/h200/probes/probe_l2_sizes.json), where a strict LRU cache would miss at once
    (and the step rule perfsim used before made a GPU with one more SM, a larger working set,
    up to 4× slower). Data the kernel also writes (``written``: FA1's O, ℓ, m read-modify-write, the
    backward's accumulators, split-KV partials read back) keeps the step — no hits past the
    usable part — as the FA1 paper's measured HBM traffic for GPT-2 on the A100 shows (Fig. 2,
    4.4 GB: ``tests/test_papers.py``; the ramp would give 2.7 GB); the probe read only. A
    stated assumption of perfsim, checked by ``perfsim validate``.

    Returns:
        ``(hbm_bytes, l2_hit_bytes)``.
    """
    rereads = total_bytes - compulsory_bytes
    # The live working set is at most the distinct data the kernel reads (e.g. GQA heads
    # sharing one K/V head), however many CTAs are resident.
    live = minimum(working_set_bytes, compulsory_bytes)
    hits = rereads * l2_hit_share(live, gpu, usable_fraction, written)
    return total_bytes - hits, hits


def l2_hit_share(live, gpu: GPUSpec, usable_fraction: float, written: bool = False):
    """The share of re-reads L2 serves when ``live`` bytes are live at once
    (:func:`l2_filtered`'s rule: all of them up to the usable part of L2, then a linear ramp
    to none at ``GPUSpec.l2_reuse_ramp_end`` times its size; a step at the usable part for
    data a kernel wrote, ``written``). A number, an array or a sympy Piecewise."""
    start, end = usable_fraction * gpu.l2_bytes, gpu.l2_reuse_ramp_end * gpu.l2_bytes
    if written or end <= start:         # written data, or a usable fraction past the ramp
        share = where(live <= start, 1.0, 0.0)
    elif is_symbolic(live) or is_symbolic(start):
        # closed forms: one Piecewise whose last branch is no hits (perfsim.symbolic drops
        # it for the IO model)
        import sympy
        share = sympy.Piecewise((1, live <= start), ((end - live) / (end - start), live < end),
                                (0, True))
    else:
        share = minimum(1.0, maximum(0.0, (end - live) / (end - start)))
    return share


def accumulator_traffic(adds, accumulator_bytes, working_set_bytes, gpu: GPUSpec,
                        zeroed_just_before: bool = True):
    """HBM and L2 bytes of ``adds`` fp32 reduce-adds into the ``accumulator_bytes`` of a
    global accumulator that they touch (at most ``4 · adds``) and that a kernel just before
    zeroed (the backward's dQ: flash-attn 2's ``atomicAdd``, FA3/FA4's TMA reduce-add,
    cuDNN's).

    Each add reads and writes its 4 bytes in L2 (``2 · 4 · adds`` bytes). While the lines
    the resident CTAs add into fit in L2 (:func:`l2_filtered`'s rule) the adds themselves
    are hits, but the accumulator still crosses HBM once each way: every line is fetched on
    its first add — except the share the zeroing kernel left in L2, at most the usable part
    of L2 — and written back once when evicted. Evidence: Nsight Compute's DRAM bytes of the
    backward kernels on the project's H200 (``validate/reports/h200/probes/ncu``, B = 1,
    H·d = 4096, N = 4096): cuDNN 315-327 MB, SDPA flash (FA2) 315-366 MB and
    flash_attn.cute 317-331 MB against 201 MB of Q, dO, K, V, dK and dV, i.e. about 120 MB
    more for a 67 MB accumulator; FlexAttention and Triton's tutorial, which write dQ
    without an accumulator, 216-222 MB (d ≤ 128). At N = 1024 (a 16.8 MB accumulator) cuDNN
    reads and writes 10 MB more. ASSUMED: the zeroing kernel's share left in L2 is
    ``min(accumulator, l2_usable_fraction · l2_bytes)``; the dirty lines still in L2 at
    the end are charged here, not to the next kernel. ``zeroed_just_before=False``: other
    kernels ran between the zeroing and the adds, and none of it is left in L2.

    Returns:
        ``(hbm_read_bytes, hbm_write_bytes, l2_hit_bytes)``.
    """
    total = 2 * FP32_BYTES * adds
    hbm, _ = l2_filtered(total, 0 * adds, working_set_bytes, gpu, gpu.l2_usable_fraction,
                         written=True)
    retained = (minimum(accumulator_bytes, gpu.l2_usable_fraction * gpu.l2_bytes)
                if zeroed_just_before else 0)
    read = maximum(hbm / 2, accumulator_bytes - retained)
    write = maximum(hbm / 2, accumulator_bytes)
    return read, write, total - read - write


#: Elements one CTA of PyTorch's vectorised fill kernel writes (``torch.zeros``: 128 threads
#: of 4 elements; ASSUMED from its elementwise launch, ``Loops.cuh``), for the grid of the GQA
#: backward's zeroed dK/dV accumulators.
FILL_ELEMENTS_PER_CTA = 512


def gqa_accumulator_bytes(dims: Dims, widths):
    """Bytes of the fp32 dK, dV accumulators of :func:`gqa_dkdv_accumulator` at ``widths``
    (the compiled head dims) over the ``N_k`` keys of each (batch, K/V head); 0 without GQA."""
    return (where(dims.H > dims.H_kv, 1, 0) * FP32_BYTES * dims.B * dims.H_kv * dims.N_k
            * (widths[0] + widths[1]))


def gqa_dkdv_accumulator(dims: Dims, name: str, block_n, rows_k, widths, adds_rows,
                         live_kv_heads, gpu: GPUSpec) -> tuple[dict, list, list]:
    """The GQA backward's dK and dV as flash-attn 3 and flash_attn.cute compute them: each
    query head's CTA reduce-adds its fp32 dK and dV tiles (TMA bulk reductions, evict-last)
    into accumulators at the K/V heads, which ``torch.zeros`` cleared before the call and a
    postprocess kernel converts to the input dtype after it — instead of writing dK, dV per
    query head and summing them in another kernel (flash-attn 2's expand-then-sum,
    :func:`~perfsim.algorithms.common.gqa_reduce_kernels`). Sources: flash-attn 3's
    ``CollectiveEpilogueBwdGQA`` (hopper/epilogue_bwd.hpp: ``SM90_BULK_REDUCE_ADD`` of the
    fp32 tile into ``dKaccum`` / ``dVaccum`` of shape (seqlen_k_rounded · d_rounded, H_kv, B))
    and flash_attn.cute's ``_flash_attn_bwd`` (``dKV_postprocess = qhead_per_kvhead > 1``:
    ``dk_accum``, ``dv_accum`` zeroed fp32, converted by ``FlashAttentionBackwardPostprocess``).

    ``block_n``: the backward's key block; ``rows_k``: key rows per (batch, K/V head) of the
    accumulators (the key length rounded up to it); ``widths``: ``(d, d_v)`` of the
    accumulators (the compiled kernel's head dims); ``adds_rows``: key rows some query
    reaches (``Dims.kv_rows_read``), added as whole ``block_n`` tiles by each query head's
    CTAs; ``live_kv_heads``: the K/V heads whose accumulator tiles the resident
    CTAs add into at once (the re-adds by a K/V head's query heads, consecutive in the grid,
    hit L2 while those fit: :func:`accumulator_traffic`). Where ``H == H_kv`` every count is
    0 (``dK``, ``dV`` are written directly).

    Returns:
        ``(terms, before, after)``: the main kernel's terms (the reduce-adds as
        ``KernelCost.atomics``, their HBM and L2 bytes), the two zeroing kernels and the two
        conversion kernels. The fp32 tiles' pass through shared memory on their way to the
        bulk reduction happens once per CTA, in its epilogue, as the bf16 tiles' TMA store
        does without GQA: part of the CTA's edge, not of the shared-memory unit's stream.
    """
    grouped = where(dims.H > dims.H_kv, 1, 0)
    kv_heads = dims.B * dims.H_kv
    width = widths[0] + widths[1]
    # whole key tiles, as the bulk reduction sends them, of the keys some query reaches
    # (a window that leaves most key tiles unreached adds into those tiles only)
    added_rows = minimum(cdiv(adds_rows, block_n) * block_n, rows_k)
    adds = dims.B * dims.H * added_rows * width
    # accumulator_traffic's rule on the lines the adds touch (each add one of the group's
    # H / H_kv per line, so the L2's share is never negative); nothing of the zeroing is
    # left in L2: the dQ accumulator's zeroing and the preprocess's O, dO reads come after it
    read, write, hits = accumulator_traffic(
        adds, FP32_BYTES * kv_heads * added_rows * width,
        FP32_BYTES * live_kv_heads * added_rows * width, gpu, zeroed_just_before=False)
    terms = {"atomics/dK,dV (fp32 TMA reduce-add into the K/V heads' accumulators)":
             grouped * adds,
             "hbm_read/dK,dV accumulators": grouped * read,
             "hbm_write/dK,dV accumulators": grouped * write,
             "l2_hit/dK,dV reduce-adds": grouped * hits}
    before, after = [], []
    for tensor, w, out_width in (("dK", widths[0], dims.d), ("dV", widths[1], dims.d_v)):
        elements = kv_heads * rows_k * w
        before.append(KernelCost.of(
            f"{name}_bwd_zero_{tensor.lower()}_accum",
            {f"hbm_write/zeroed fp32 {tensor} accumulator": grouped * FP32_BYTES * elements},
            grid=grouped * cdiv(elements, FILL_ELEMENTS_PER_CTA), warps_per_cta=4))
        after.append(KernelCost.of(
            f"{name}_bwd_convert_{tensor.lower()}",
            {f"hbm_read/fp32 {tensor} accumulator": grouped * FP32_BYTES * elements,
             f"hbm_write/{tensor}": grouped * dims.e * kv_heads * dims.N_k * out_width},
            grid=grouped * cdiv(kv_heads * rows_k, 128), warps_per_cta=4))
    return terms, before, after


def right_bound(dims: Dims):
    """How far right of its diagonal a query row sees: 0 under the causal mask (or less,
    with a window's right side below it), a window's right side, or ``None`` (unbounded)."""
    right = dims.window[1] if dims.window else None
    if dims.causal:
        right = 0 if right is None else minimum(right, 0)
    return right


def rows_read(dims: Dims, block_r):
    """Query rows a key/value-outer loop loads at least once (the compulsory count of its
    Q-side re-reads, :func:`l2_filtered`).

    With a bottom-right aligned mask and ``N_q > N_k`` query row ``i`` sits at key position
    ``i − (N_q − N_k)`` and sees keys up to ``right`` beyond it (``right = 0`` under the
    causal mask, a window's right side otherwise): rows ``i < N_q − N_k − right`` see no key,
    so the first ``⌊(N_q − N_k − right) / B_r⌋`` query tiles (at most ``T_r − 1``: the last
    tile always sees a key) are never visited, so never loaded (``TileVisits.kv_outer_rows``
    skips them too). Otherwise (no right bound) every row is loaded.
    """
    right = right_bound(dims)
    if right is None:
        return dims.N_q
    t_r = cdiv(dims.N_q, block_r)
    # (the call's own lengths place the mask, also on whole tiles: Dims.mask_lengths)
    n_q, n_k = (dims.N_q, dims.N_k) if dims.unpadded is None else dims.unpadded[:2]
    skipped = minimum(maximum(fdiv(n_q - n_k - right, block_r), 0), t_r - 1)
    return dims.N_q - block_r * skipped


_INFEASIBLE: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "perfsim_infeasible_elements", default=None)


@contextlib.contextmanager
def collect_infeasible():
    """Within the block, :func:`resident_ctas` on numpy arrays reports the elements where no
    CTA fits instead of raising for the whole array (``perfsim.sweep``). Yields the list it
    fills with ``(mask, reason)`` pairs; a mask is broadcastable to the sweep block."""
    found: list = []
    token = _INFEASIBLE.set(found)
    try:
        yield found
    finally:
        _INFEASIBLE.reset(token)


def infeasible_where(mask, reason: str) -> None:
    """Report the elements of a numpy ``mask`` (sweeps) where the configuration cannot run:
    to the active :func:`collect_infeasible` collector, or raise when none is active or
    every element fails. A scalar ``True`` raises.

    Raises:
        InfeasibleError: as said.
    """
    if not isinstance(mask, np.ndarray):
        if mask:
            raise InfeasibleError(reason)
        return
    if not mask.any():
        return
    collector = _INFEASIBLE.get()
    if collector is None or mask.all():
        raise InfeasibleError(reason)
    collector.append((mask, reason))


def lockstep_window(resident, tiles_per_group, tile_bytes, tiles_in_flight: int = 2):
    """Bytes of re-read tiles live in L2 at once when the CTAs of one group walk the same
    tiles in the same order (FA2/FA3 forward: the query tiles of one (batch, head) over K/V;
    backward: the key tiles of one head over Q/dO).

    The reference grids put a group's CTAs next to each other in launch order (flash-attn 2
    ``dim3 grid(num_m_block, b, h)``, blockIdx.x fastest), so the ``resident`` CTAs span
    ``⌈resident / tiles_per_group⌉ + 1`` groups (a wave straddles a group boundary), and the
    CTAs of a group, started together with equal work, read the same ``tiles_in_flight``
    (double-buffered) tiles: distinct live data is that many tiles per group, not per CTA.
    """
    groups = minimum(resident, cdiv(resident, tiles_per_group) + 1)
    return groups * tiles_in_flight * tile_bytes




def register_file_share(gpu: GPUSpec, warps: int) -> int:
    """Registers per thread when one CTA of ``warps`` warps takes the whole register file
    (FA3's ``setmaxnreg`` split, FA4's warp-specialised CTA): the largest count whose
    whole-warp allocations (``GPUSpec.register_allocation_unit``) all fit, at most the GPU's
    per-thread maximum."""
    unit = gpu.register_allocation_unit
    per_warp = (gpu.registers_per_sm // warps) // unit * unit
    return min(gpu.max_registers_per_thread, per_warp // 32)


def _register_limit(gpu: GPUSpec, registers_per_thread, warps):
    """CTAs of ``warps`` warps the register file holds: whole warps' allocations
    (``GPUSpec.register_allocation_unit`` registers at a time: 82 registers per thread give 5
    CTAs of 4 warps on the H200, as Nsight Compute measured for FlexAttention's forward, not
    the 6 of an unrounded count), then whole CTAs."""
    if is_symbolic(registers_per_thread) or is_symbolic(warps):
        return gpu.registers_per_sm // (registers_per_thread * warps * 32)
    unit = gpu.register_allocation_unit
    per_warp = -(-(registers_per_thread * 32) // unit) * unit
    return (gpu.registers_per_sm // per_warp) // warps


def resident_ctas(gpu: GPUSpec, smem_bytes: int, warps: int, registers_per_thread: int) -> int:
    """CTAs that fit on one SM at once (occupancy), from shared memory (each CTA's plus the
    driver's per-CTA reservation, ``GPUSpec.smem_reserved_per_cta_bytes``), warps and
    registers.

    A numpy ``smem_bytes`` (sweeps) gives an array, element by element: inside
    :func:`collect_infeasible` an element where no CTA fits gets 1 and is reported to the
    collector with its reason (the other elements are exact); outside, any such element
    raises. A sympy ``smem_bytes`` (closed forms) gives the ``Min`` of the limits, unchecked.

    Raises:
        InfeasibleError: not even one CTA fits (the message names the limit); for an array,
            when every element fails or no collector is active.
    """
    if getattr(type(smem_bytes), "_perfsim_general_path", False):
        # traced (perfsim.compiled): one size for the rows, held by a guard
        return resident_ctas(gpu, one_value(smem_bytes), warps, registers_per_thread)
    if isinstance(smem_bytes, np.ndarray):  # sweeps: per element
        sizes, where_ = np.unique(smem_bytes, return_inverse=True)
        where_ = where_.reshape(smem_bytes.shape)
        collector = _INFEASIBLE.get()
        values, reasons = [], []
        for size in sizes:
            try:
                values.append(resident_ctas(gpu, int(size), warps, registers_per_thread))
                reasons.append("")
            except InfeasibleError as exc:
                if collector is None or len(sizes) == 1:
                    raise
                values.append(1)
                reasons.append(str(exc))
        if all(reasons):
            raise InfeasibleError(reasons[0])
        for i, why in enumerate(reasons):
            if why:
                collector.append((where_ == i, why))
        return np.array(values)[where_]
    if not is_symbolic(registers_per_thread) and registers_per_thread < 1:
        # e.g. FA3's setmaxnreg share of a register file smaller than 32 x the CTA's warps
        raise InfeasibleError(
            f"a CTA of {warps} warps cannot be resident on one {gpu.id} SM: its "
            f"{gpu.registers_per_sm} registers give less than one register per thread")
    # resident warps: the SM's warp slots and its thread limit, whichever is smaller (equal
    # in the catalog, 32 threads per warp; a what-if may move one alone)
    warp_slots = min(gpu.max_warps_per_sm, gpu.max_threads_per_sm // 32)
    if not is_symbolic(warps) and warps > warp_slots:
        raise InfeasibleError(f"a CTA of {warps} warps ({32 * warps} threads) exceeds "
                              f"{gpu.id}'s {gpu.max_warps_per_sm} warps and "
                              f"{gpu.max_threads_per_sm} threads per SM")
    limits = {
        "CTAs per SM": gpu.max_ctas_per_sm,
        "warps per SM": warp_slots // warps,
        "registers per SM": _register_limit(gpu, registers_per_thread, warps),
    }
    if smem_bytes:
        # the driver reserves smem_reserved_per_cta_bytes beside every CTA's own (1 KB on the
        # H200; the occupancy calculator counts it: validate/probe_tutorial_registers.py)
        limits["shared memory per SM"] = gpu.smem_bytes_per_sm // (
            smem_bytes + gpu.smem_reserved_per_cta_bytes)
    if is_symbolic(smem_bytes):  # closed forms (perfsim.symbolic): occupancy, unchecked;
        # unevaluated: sympy 1.14 wrongly simplifies Min(2, floor(c / (a + b))) to 2
        import sympy
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
        if worst == "shared memory per SM":
            raise InfeasibleError(
                f"no CTA fits on one {gpu.id} SM: its {smem_bytes} B of shared memory and the "
                f"{gpu.smem_reserved_per_cta_bytes} B the driver reserves per CTA exceed the "
                f"SM's {gpu.smem_bytes_per_sm} B")
        raise InfeasibleError(f"no CTA fits on one {gpu.id} SM ({worst})")
    return ctas


def unknown_option_hint(names, options) -> str:
    """Words after an "has no option" error: the option a name was probably meant to be, or,
    for a name of a GPU field (``hbm_bandwidth_bytes_per_s``, ``power.tdp_w``), where GPU
    what-ifs go — an algorithm's options do not take them (a fresh user's report)."""
    from perfsim.errors import closest
    from perfsim.gpu import GPUSpec

    hints = []
    for name in names:
        name = str(name)
        if name.split(".", 1)[0] in GPUSpec.model_fields:
            hints.append(f"{name} is a GPU field, not an algorithm option: a GPU what-if is a "
                         ".toml profile given as the GPU (hardware/README.md) or a sweep's "
                         "[overrides] table (docs/sweeps.md)")
        elif (close := closest(name, options)) is not None:
            hints.append(f"did you mean {close!r}?")
    return f" ({'; '.join(hints)})" if hints else ""


def option_error(cls, exc: ValidationError) -> str:
    """One line for the first error of an algorithm's options (``Algorithm.__init__``)."""
    err = exc.errors()[0]
    loc = ".".join(map(str, err["loc"]))
    msg = err["msg"].removeprefix("Value error, ")
    if not loc:             # a rule across options (a model validator): its message says it
        return f"{cls.name} options: {msg}"
    if err.get("type") == "extra_forbidden":      # pydantic's words for an unknown name
        return (f"{cls.name} has no option {loc}{unknown_option_hint([loc], cls.model_fields)}"
                f"; options: {', '.join(cls.model_fields)}")
    if err.get("type") == "bool_type":      # as --set and TOML write them (1 is no boolean)
        msg = "must be true or false"
    value = err.get("input")
    got = "" if isinstance(value, dict) or "got" in msg else f" (got {repr(value)[:60]})"
    return (f"{cls.name} option {loc}: {msg}{got}; options: "
            f"{', '.join(cls.model_fields)}")


class Algorithm(BaseModel):
    """Base class of the algorithm configs (``Standard``, ``FA1``, ``FA2``, ``FA3``, ``FA4``).

    Subclasses set ``name`` and implement :meth:`kernels` and :meth:`memory_bytes`.
    Options are strict: ``64`` is an integer option, ``"64"``, ``64.0`` and ``True`` are not.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    name: ClassVar[str] = "algorithm"
    #: one line on how units overlap inside this algorithm's kernels (for explain()).
    overlap_rule: ClassVar[str] = ""

    def __init__(self, **options):
        """Validate the options.

        Raises:
            perfsim.PerfsimError: one line naming the option, what is allowed and the known
                options (never pydantic's multi-line ``ValidationError``).
        """
        try:
            super().__init__(**options)
        except ValidationError as exc:
            raise PerfsimError(option_error(type(self), exc)) from None

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

    def varlen_config(self, dims: Dims, gpu: GPUSpec) -> Algorithm:
        """The configuration that runs a whole variable-length batch: choices the reference
        makes once per launch (split-KV, GQA packing) taken on the batch (its sequence count
        and longest lengths), not per sequence. Default: this configuration."""
        return self

    def overlap_text(self) -> str:
        """How this configuration's units overlap, in words (``explain()``)."""
        return self.overlap_rule

    def label(self) -> str:
        """Name plus the options that differ from the defaults, e.g. ``fa2(block_m=64)``."""
        changed = {k: v for k, v in self.model_dump().items()
                   if v != type(self).model_fields[k].default}
        if not changed:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")"


#: The two stations of an ``mma.sync`` kernel's warp (FA1, FA2 and their backward passes):
#: shared memory (``ldmatrix`` of the MMA operands; one SM-wide port) and the warp's
#: compute, where the synchronous MMAs and the FP32 softmax work issue from one instruction
#: stream in program order (their times add) while the exps, once their lead is done, run on
#: the MUFU beside the FP32 work (``perfsim.timing.MUFU_BESIDE``: ``tensor + max(fp32,
#: mufu + lead)``). Evidence (not attention timing): Nsight Compute's pipe busy times of SDPA
#: flash's forward on the H200 (``validate/reports/h200/probes/ncu/summary.json``,
#: ``summary-small-headdims.json``, ``summary-flash-headdims.json``): tensor + FMA + ALU
#: add to 99 / 97 / 97 / 94 % of the duration at head dims 32 / 64 / 96 / 128, where the
#: MUFU's 46 / 32 / 24 / 19 % more would take the sum to 113-145 %: the MUFU overlaps, the
#: FMA and ALU pipes do not (``FA2.cuda_cores_in_turn``).
MMA_SYNC_STATIONS = (("smem",), ("tensor", "fp32", "mufu"))
MMA_SYNC_SERIAL = (False, "mufu beside")


#: Operand slices a CTA of flash-attn 2 keeps in flight while it computes: its GEMM loop
#: copies k-slice ``i + 1`` from shared memory to registers before issuing the MMAs of slice
#: ``i`` (flash-attn 2 ``csrc/flash_attn/src/utils.h``, ``flash::gemm``). ``prefetch = 0`` (one
#: slice in flight per CTA) is the hook for a kernel whose warps cannot hold the next slice;
#: no modelled kernel uses it since flash-attn 2's head-dim-256 backward was shown to keep its
#: shared-memory pipe as busy as the other backwards (``validate/README.md``, "flash-attn 2
#: below its compiled head dims: the predicated path's shared-memory traffic").
OPERAND_PREFETCH_DEPTH = 1


def warp_cycle(gpu: GPUSpec, ctas_per_sm, warps_per_cta,
               prefetch: int = OPERAND_PREFETCH_DEPTH):
    """``KernelCost.pipeline`` of an ``mma.sync`` kernel: the SM's work circulates between the
    shared-memory station (``ldmatrix`` of the MMA operands; one SM-wide port) and the
    compute station, where the synchronous MMAs and the FP32 softmax work issue from one
    instruction stream in program order (their times add) and the exps run on the MUFU
    beside the FP32 work (:data:`MMA_SYNC_SERIAL`).

    Customers: the CTAs resident on the SM, each with ``1 + prefetch`` operand slices in
    flight. A CTA, not a warp, is one customer because these kernels put CTA-wide barriers
    between their phases every tile (flash-attn 2: ``__syncthreads()`` once K, then V, has
    landed in the forward; after the dS store and after the dV GEMM in the backward,
    ``csrc/flash_attn/src/flash_fwd_kernel.h``, ``flash_bwd_kernel.h``), so a CTA's warps
    move through the phases together and only another CTA can fill the gap.

    Evidence (not attention timing): an ``ldmatrix`` + ``mma.sync`` loop with a barrier per
    iteration on the H200 (``validate/probe_mma_smem.py``;
    ``validate/reports/h200/probes/probe_mma_smem.json``, 16 configurations, 1-8 CTAs per
    SM) follows this cycle with a median error of 8 % (one customer per CTA; the probe's
    Triton loop is taken without prefetch). ``warps_per_cta`` is kept for callers that
    describe barrier-free kernels (not used: every kernel modelled here has barriers).
    Works on numpy arrays.
    """
    return (MMA_SYNC_STATIONS, maximum(ctas_per_sm, 1) * (1 + prefetch), MMA_SYNC_SERIAL)


def in_order_tail(v, grid, sm_count, ctas_per_sm, causal: bool, lpt: bool,
                  columns: bool = False):
    """Tail factor (≥ 1) of a causal grid whose CTAs differ in length.

    Equal CTAs (no mask) keep the busiest SM at the average: factor 1. With
    longest-processing-time-first order (``lpt``) the busiest SM holds the average
    (``w · avg``, the wave factor's charge) or its longest CTA, whichever is more:
    ``max(1, (max/avg) / w)``. A grid of query tiles (a forward) has its
    longest CTA visit ``TileVisits.widest`` key tiles (all of them under the causal mask; a
    window's band width) against ``tiles / q_tiles`` on average; a grid of key tiles
    (``columns``: a backward) has its longest visited by ``TileVisits.tallest`` query tiles
    against ``tiles / kv_tiles`` — the two agree on a square causal mask, not when
    ``N_q > N_k``, where rows that see no key shorten the key tiles' CTAs. Launched in index
    order (flash-attn 2, Triton, flash-attn 3's split and variable-length launches: query
    tiles of each head from short to long; ``FA3.fwd_scheduling``), the
    longest CTAs start last,
    and each of the busiest SM's resident CTAs of the final wave ends about ``max − avg`` of
    a CTA after the balanced finish. The busiest SM runs ``w = ⌈grid / SMs⌉`` CTAs, of which
    ``min(ctas_per_sm, w)`` are resident at the end, so its work is
    ``w · avg + (max − avg) · min(ctas_per_sm, w)``: relative to the ``w · avg`` the wave
    factor of ``perfsim.timing`` already charges, factor
    ``1 + (max/avg − 1) · min(ctas_per_sm, w) / w``. That work never decreases when the grid
    grows (one more batch never makes the kernel faster). A stated estimate (list
    scheduling), not a fitted constant.
    """
    if not causal:
        return 1
    if columns:
        longest_over_avg = ((v.q_tiles if v.tallest is None else v.tallest) * v.kv_tiles
                            / maximum(v.tiles, 1))
    else:
        longest_over_avg = ((v.kv_tiles if v.widest is None else v.widest) * v.q_tiles
                            / maximum(v.tiles, 1))
    busiest = cdiv(maximum(grid, 1), sm_count)
    if lpt:
        # longest first: the busiest SM's work is the balanced w · avg, but never less than
        # its longest CTA, which one SM runs from start to end (a grid of about one wave:
        # longest first gains nothing; a fresh user's report had flash_attn.cute's causal
        # forward of one wave at 56 % of its unmasked one, and faster with more rows)
        return maximum(1, longest_over_avg / busiest)
    return 1 + (longest_over_avg - 1) * minimum(ctas_per_sm, busiest) / busiest


def two_kind_tail(dkdv, dq, blocks, programs, sm_count, ctas_per_sm, uneven=None):
    """Tail factor of a backward grid of two program kinds launched block by block
    (FlexAttention's, ``FA2.dq_programs``): per (batch, K/V head) block, its dK/dV programs
    (longest first under a causal mask), then its dQ programs (shortest first). ``dkdv``
    and ``dq`` are ``(programs that work, their total work, the longest one's work)`` in any
    one unit (ints, arrays or sympy); ``blocks`` the (batch, K/V head) blocks; ``programs``
    the whole grid, programs of rows no key sees included (they do no tile work: their loads
    are the edges'). Returns the busiest SM's work ``M`` over the ``⌈P / SMs⌉ · W / P`` that
    ``perfsim.timing``'s wave factor charges a grid of ``P`` equal programs of total work
    ``W``, so the timing's wave factor times it is ``M`` whatever the empty programs do to
    the wave count.

    ``M`` is the largest of (``S`` SMs, ``c = min(ctas_per_sm, w)`` resident programs, the
    mean ``x̄`` over the ``P'`` programs that work, ``w = ⌈P' / S⌉``):

    - the equal-program charge ``w · x̄``;
    - the last dQ program, the block's longest, launched last: ``W / S + c · (L_dQ − x̄)``
      (:func:`in_order_tail`'s rule, against the grid's mean);
    - the last block's longest dK/dV program, launched as the block starts, at about
      ``t₀ = W / S − W_block / S − c · x̄`` (the work launched before it spread over the SMs,
      a first wave earlier; 0 at the least): it shares its SM with ``c − 1`` others, at
      ``1 / c`` of it, until the rest of the grid drains at ``W / S``, then has it alone —
      ``min(t₀ + c · L, W / S + L − (W / S − t₀) / c)``;
    - one program alone: ``max(L_dKdV, L_dQ)``.

    ``uneven`` (a variable-length batch's merged launch: :func:`_cta_work`'s ``((CTAs, work
    per CTA), ...)`` of its groups): the equal-program charge becomes the uneven grid's
    busiest SM (``perfsim.timing.unequal_wave_factor`` times ``W / S``), which equals it for
    equal programs and, unlike ``w · x̄``, never falls when a short sequence adds light
    programs (a fresh user's report: FlexAttention's backward got faster with one more
    sequence).

    A stated estimate, not fitted: on 240 shapes (GQA 1-8 with MQA, ``N_q`` 512-8192,
    ``N_k`` 512-8192, causal and not, one or two programs per SM) it is within 15 % of a
    simulation of the programs in launch order on SMs that share their throughput among
    their resident programs for 195 of them, median ratio 1.00, 0.50-1.25 (lowest with two
    programs per SM and ``N_q > N_k``, where the longest program shares its SM throughout)
    (``tests/test_inference_workloads.py``; ``validate/README.md``, "FlexAttention's
    backward grid")."""
    (p_kv, w_kv, l_kv), (p_dq, w_dq, l_dq) = dkdv, dq
    total = w_kv + w_dq
    working = maximum(p_kv + p_dq, 1)
    waves = cdiv(working, sm_count)
    c = minimum(ctas_per_sm, waves)
    mean = total / working
    drained = total / sm_count
    charge = waves * mean
    if uneven is not None:
        from perfsim.timing import unequal_wave_factor

        charge = unequal_wave_factor(uneven, sm_count) * drained
    last_dq = where(p_dq > 0, drained + c * maximum(l_dq - mean, 0), 0)
    start = maximum(drained - total / maximum(blocks, 1) / sm_count - c * mean, 0)
    first_dkdv = where(p_kv > 0, minimum(start + c * l_kv,
                                         drained + l_kv - (drained - start) / c), 0)
    busiest = maximum(maximum(charge, last_dq),
                      maximum(first_dkdv, maximum(l_kv, l_dq)))
    grid = maximum(programs, 1)
    charged = cdiv(grid, sm_count) * total / grid
    return where(total > 0, busiest / maximum(charged, 1e-300), 1)


def padding(n, block):
    """``⌈n / block⌉ · block / n``: the work of whole blocks over the work of ``n`` items."""
    return cdiv(n, block) * block / n


def with_whole_tiles(build, dims: Dims, block_r, block_c, head_dims=None) -> KernelCost:
    """``build(dims)`` with, as executed SM-side work, ``build`` evaluated on the sequence
    lengths rounded up to whole ``B_r x B_c`` tiles and the head dims of the compiled kernel
    (``head_dims = (d, d_v)``; ``KernelCost.executed``)."""
    cost = build(dims)
    whole = whole_tile_dims(dims, block_r, block_c, head_dims)
    return cost if whole is None else cost.with_executed(build(whole))


def whole_tile_dims(dims: Dims, block_r, block_c, head_dims=None) -> Dims | None:
    """``dims`` with the sequence lengths rounded up to whole ``B_r x B_c`` tiles and, with
    ``head_dims = (d, d_v)``, the head dims the compiled kernel runs at; ``None`` when
    nothing is padded (or the dims are symbolic)."""
    if dims.symbolic:
        return None
    n_q, n_k = cdiv(dims.N_q, block_r) * block_r, cdiv(dims.N_k, block_c) * block_c
    d, d_v = head_dims or (dims.d, dims.d_v)
    # (skips rebuilding an unpadded kernel: the same result)
    if (shortcut_all(n_q == dims.N_q) and shortcut_all(n_k == dims.N_k) and d == dims.d
            and d_v == dims.d_v):
        return None
    return replace(dims, N_q=n_q, N_k=n_k, d=d, d_v=d_v,
                   unpadded=dims.unpadded or (dims.N_q, dims.N_k, dims.d, dims.d_v))


def varlen_groups(dims: Dims) -> list[Dims]:
    """A variable-length batch as groups of equal sequences (``B`` = how many), each with
    fixed lengths; ``[dims]`` for a fixed-length batch."""
    if dims.seqlens is None:
        return [dims]
    counts: dict = {}
    for pair in dims.seqlens:
        counts[pair] = counts.get(pair, 0) + 1
    return [replace(dims, B=c, N_q=q, N_k=k, seqlens=None, varlen=True)
            for (q, k), c in counts.items()]


def merge_kernels(lists: list[list[KernelCost]], whole: list[KernelCost],
                  sm_count: int) -> list[KernelCost]:
    """One launch per kernel name over the groups of a variable-length batch (a
    ``cu_seqlens`` kernel runs every sequence in one grid): counts, grids, executed work and
    the L2's time for TMA row segments add; occupancy is the smallest; the rest is taken from
    ``whole`` — the kernels of the group with the heaviest CTAs rebuilt with as many sequences
    as the batch's work holds CTAs of that weight (:func:`kernels_for`), so what depends on
    the grid (CTAs in flight in the cycle, the issue share of one CTA per SM) is the merged
    launch's, not one group's small grid's, and light CTAs (a short sequence) add little of
    it (a kernel ``whole`` lacks takes the group with the largest grid's). Per-group choices (tiles,
    splits, packing) stay as each group made them: an approximation of the reference's one
    choice for the whole batch. The executed work of each group is taken without its own
    causal tail and the merged launch's tail applied (:func:`_merged_tail` on ``sm_count``
    SMs; the per-row work a tail leaves unscaled, ``KernelCost.padded``'s ``fixed``,
    is rescaled with the rest: a small share, ASSUMED negligible)."""
    if len(lists) == 1:
        return lists[0]
    by_name: dict[tuple, list[KernelCost]] = {}
    for ks in lists:
        for k in ks:
            by_name.setdefault(_merge_key(k), []).append(k)
    shapes = {_merge_key(k): k for k in whole or ()}
    out = []
    for key, parts in by_name.items():
        lead = shapes.get(key) or max(parts, key=lambda k: k.grid)
        sums = {f: sum(getattr(k, f) for k in parts) for f in ADDITIVE}
        # each group's executed work carries its own small grid's causal tail
        # (KernelCost.padded by base.in_order_tail); the merged launch has one tail. A grid
        # of two program kinds (two_kind_tail) takes it from the groups' kinds merged:
        # programs, work and blocks add, the longest program is the longest of any group
        # (its tail is over the equal-program wave charge, so the launch keeps that charge:
        # no per-group CTA work for perfsim.timing.unequal_wave_factor)
        kinds = (_merged_kinds(parts) if all("program_kinds" in k.launch for k in parts)
                 else None)
        tail = (two_kind_tail(*kinds, sum(k.grid for k in parts), sm_count,
                              min(k.ctas_per_sm for k in parts), uneven=_cta_work(parts))
                if kinds else _merged_tail(parts, sm_count))
        executed = {u: tail * sum(k.sm_demand()[u] / k.launch.get("tail", 1) for k in parts)
                    for u in lead.sm_demand()}
        terms: dict = {}
        for k in parts:
            for key, value in k.terms.items():
                terms[key] = terms[key] + value if key in terms else value
        out.append(replace(lead, grid=sum(k.grid for k in parts), executed=executed,
                           ctas_per_sm=min(k.ctas_per_sm for k in parts), terms=terms,
                           launch={**lead.launch, "tail": tail,
                                   **({"program_kinds": kinds} if kinds
                                      else {"cta_work": _cta_work(parts)})},
                           l2_request_seconds=sum(k.l2_request_seconds for k in parts),
                           **sums))
    return out


def _merge_key(k: KernelCost) -> tuple:
    """What one merged launch of :func:`merge_kernels` shares: the kernel's name and, for an
    eager PyTorch kernel, the row length and GEMM width its measured rate depends on (the
    softmax ceilings by row length, cuBLAS's SGEMM K law and tile by N: ``KernelCost``'s
    ``row_length``, ``gemm_n``). Groups whose eager kernels differ there stay separate
    launches, each at its own rate — eager PyTorch has no variable-length kernel, so a
    variable-length batch runs its groups' sequences apart — rather than every group at
    one group's rate."""
    if k.eager_op is None:
        return (k.name,)
    return (k.name, k.row_length, k.gemm_n)


def _merged_tail(parts: list[KernelCost], sm_count: int):
    """:func:`in_order_tail`'s factor for one launch of a variable-length batch's groups
    (``parts``, each built with its own grid's tail, ``launch["tail"]``). In-order launch
    leaves the busiest SM ``(longest − mean) · min(c, w)`` of work past the balanced finish
    (``c`` resident CTAs, ``w`` waves: the fixed-length rule). For the merged launch the
    balanced finish is the uneven grid's busiest SM (``perfsim.timing.unequal_wave_factor``
    of :func:`_cta_work`, the groups' tails taken out) and the excess is the largest any
    group's longest CTA has over its own mean (recovered from that group's factor,
    ``1 + (r − 1) · min(c, w) / w`` on its own waves), over the merged waves. So the
    busiest SM's work never falls when a sequence is added or lengthened: the uneven grid's
    busiest SM and the largest excess only grow, and so do the merged waves. One group gives
    back :func:`in_order_tail`'s factor. The factor returned scales the groups' work without
    their tails, so the timing's wave factor times it puts that excess on the busiest SM."""
    from perfsim.timing import unequal_wave_factor

    if all(type(k.launch.get("tail", 1)) in (int, float) and k.launch.get("tail", 1) == 1
           for k in parts):
        return 1
    work = _cta_work(parts)
    total = sum(c * w for c, w in work)
    if not total:
        return 1
    excess = 0.0
    for k, (_ctas, mean) in zip([k for k in parts if k.grid], work):
        ctas = maximum(k.ctas_per_sm, 1)
        waves = cdiv(maximum(k.grid, 1), sm_count)
        ratio = 1 + (k.launch.get("tail", 1) - 1) * waves / minimum(ctas, waves)
        excess = maximum(excess, (ratio - 1) * mean)
    grid = sum(c for c, _ in work)
    waves = cdiv(maximum(grid, 1), sm_count)
    ctas = maximum(min(k.ctas_per_sm for k in parts), 1)
    balanced = unequal_wave_factor(work, sm_count) * total / sm_count
    return 1 + excess * minimum(ctas, waves) / balanced


def _merged_kinds(parts: list[KernelCost]) -> tuple:
    """The ``launch["program_kinds"]`` (``(dK/dV kind, dQ kind, blocks)``, inputs of
    :func:`two_kind_tail`) of one launch of a variable-length batch's groups: each kind's
    programs and work summed and its longest program the longest of any group, the blocks
    summed (ASSUMED: the groups' blocks launched one after another, as one ``cu_seqlens``
    grid runs them)."""
    kinds = [k.launch["program_kinds"] for k in parts]
    merged = tuple(tuple(f(kind[i][j] for kind in kinds) for j, f in enumerate((sum, sum, max)))
                   for i in (0, 1))
    return (*merged, sum(kind[2] for kind in kinds))


def _cta_work(parts: list[KernelCost]) -> tuple:
    """``((CTAs, work per CTA), ...)`` of a merged variable-length kernel's groups, for the
    wave count (``perfsim.timing.KernelClock``): a group's CTAs differ from another's in work,
    and a wave of tiny CTAs (one short sequence) must not cost a wave of the longest. Work:
    the group's executed tensor FLOPs per CTA without its own causal tail (``launch["tail"]``,
    which the merged launch replaces), or its HBM bytes per CTA for a kernel without
    matmuls."""
    matmuls = any(k.sm_demand()["tensor"] for k in parts)
    out = []
    for k in parts:
        if not k.grid:
            continue
        work = k.sm_demand()["tensor"] if matmuls else k.hbm_read_bytes + k.hbm_write_bytes
        if matmuls:
            work = work / k.launch.get("tail", 1)
        out.append((int(k.grid), float(work) / k.grid))
    return tuple(out)


#: A part of a variable-length batch (groups of distinct lengths that take the same branches,
#: :func:`_group_parts`) with at least this many groups has their kernels built once, on
#: arrays (:func:`_group_kernels`); a smaller one is built one group at a time (an array build
#: costs about what 8-15 one-group builds cost, docs/performance.md).
ARRAY_GROUPS = 8
#: How the groups of variable-length batches were built, for tests and profiles: ``arrays``
#: (groups built on arrays), ``one_by_one`` (groups in parts too small for it),
#: ``fallback`` (groups whose array build could not run: a branch that needs one length).
GROUP_STATS = {"arrays": 0, "one_by_one": 0, "fallback": 0}


class _NotOnArrays(Exception):
    """An array build of a variable-length batch's groups that cannot run: a scalar-only
    branch (a Python ``if`` on an array, ``int()`` of one) or a kernel field that is not one
    value per group. The groups are then built one at a time (:func:`_group_kernels`)."""


def mask_kinds(causal: bool, window: tuple, n_q, n_k):
    """Per element of the length arrays ``n_q``, ``n_k``, what its lengths do to the mask the
    kernels see, as an integer: 4 for one query row (flash-attn 2's causal forward launches
    its unmasked kernel there, flash-attn 3's takes that launch's tile), + 2 where the left
    window edge hides no key (``N_k − 1 ≤ left``), + 1 where the right edge hides none
    without causal (``N_q − 1 ≤ right``); all 0 without a mask. Elements of one kind take the
    same branches (``perfsim.sweep`` evaluates a block's columns of one kind together; a
    variable-length batch's groups are parted so, :func:`_group_parts`)."""
    n_q, n_k = np.asarray(n_q), np.asarray(n_k)
    kind = np.zeros(np.broadcast_shapes(n_q.shape, n_k.shape), dtype=np.int8)
    left, right = window
    if tuple(window) == (None, None) and not causal:
        return kind
    kind = kind + 4 * (n_q == 1).astype(np.int8)
    if left is not None:
        kind = kind + 2 * (n_k - 1 <= left).astype(np.int8)
    if right is not None and not causal:
        kind = kind + (n_q - 1 <= right).astype(np.int8)
    return kind


def structure_keys(splits, group, extra):
    """One integer per element for the kernel structure an algorithm's ``split_choices``
    gives it: split or not (1), its further key (2: flash-attn 4's one Q tile, a paged
    cache's gather path) and its packing group (× 4, so ``key // 4`` is the group).
    ``perfsim.sweep`` parts a block's elements by it, :func:`_group_parts` a
    variable-length batch's groups."""
    return (splits > 1) + 2 * extra + 4 * group


def _group_kernels(algo: Algorithm, groups: list[Dims], gpu: GPUSpec) -> list[list[KernelCost]]:
    """``[algo.kernels(g, gpu) for g in groups]`` for the groups of a variable-length batch
    (:func:`varlen_groups`: the same dims but ``B``, ``N_q``, ``N_k``; ``algo`` the batch's
    configuration, :meth:`Algorithm.varlen_config`).

    Groups that take the same branches (:func:`_group_parts`) are built together, once, with
    ``B``, ``N_q`` and ``N_k`` as numpy arrays — the vectorised path ``perfsim.sweep`` runs,
    the same formulas — when a part holds :data:`ARRAY_GROUPS` groups or more; each group's
    kernels are then read off the arrays as Python numbers (:func:`_split_on_groups`). A
    batch of thousands of distinct lengths costs a few array builds instead of one build per
    length. Built one at a time: smaller parts, every group when the sizes could overflow
    int64 (:data:`perfsim.mathops.INT64_SAFE`: the one-group path counts in Python
    integers), and a part whose array build cannot run (:class:`_NotOnArrays`) or that one
    of its lengths makes infeasible — so every error is the one-group path's own.
    ``tests/test_varlen_groups.py`` holds the two paths to the same predictions (1e-12; a
    count may come back as a float where the one-group path gives an int of the same
    value)."""
    n = len(groups)
    arrays = replace(groups[0], **{f: np.array([getattr(g, f) for g in groups], dtype=np.int64)
                                   for f in ("B", "N_q", "N_k")})
    parts = _group_parts(algo, arrays, gpu) if n >= ARRAY_GROUPS else None
    if parts is None:
        GROUP_STATS["one_by_one"] += n
        return [algo.kernels(g, gpu) for g in groups]
    out: list = [None] * n
    for at in parts:
        built = None
        if at.size >= ARRAY_GROUPS:
            part = arrays if at.size == n else replace(
                arrays, B=arrays.B[at], N_q=arrays.N_q[at], N_k=arrays.N_k[at])
            try:
                built = _kernels_on_arrays(algo, part, gpu)
                GROUP_STATS["arrays"] += at.size
            except _NotOnArrays:
                GROUP_STATS["fallback"] += at.size
            except PerfsimError:    # a length this configuration refuses: said per group
                pass
        else:
            GROUP_STATS["one_by_one"] += at.size
        for j, i in enumerate(at.tolist()):
            out[i] = built[j] if built is not None else algo.kernels(groups[i], gpu)
    return out


def _group_parts(algo: Algorithm, arrays: Dims, gpu: GPUSpec):
    """The index arrays of the groups (``arrays``: the batch's dims with ``B``, ``N_q``,
    ``N_k`` one element per group) that take the same branches, as ``perfsim.sweep`` parts a
    block's elements: the mask their lengths leave the kernels (:func:`mask_kinds`) and the
    kernel structure of the algorithm's ``split_choices`` on the lengths
    (:func:`structure_keys`) — or ``None``: sizes that could overflow int64, or choices that
    cannot be made on arrays."""
    worst = (float(arrays.B.max()) * float(arrays.H) * float(arrays.N_q.max())
             * float(arrays.N_k.max()) * (arrays.d + arrays.d_v))
    if worst >= INT64_SAFE:
        return None
    key = mask_kinds(arrays.causal, arrays.window, arrays.N_q, arrays.N_k).astype(np.int64)
    fwd = replace(arrays, phase="fwd")      # the choices are the forward's
    # an implementation preset (perfsim.implementations.Implementation, which imports this
    # module) picks the configuration it runs per call: the choices are that configuration's
    pick = getattr(algo, "config", None)
    try:
        with np.errstate(all="ignore"):
            inner = pick(fwd, gpu) if callable(pick) else algo
            choose = getattr(inner, "split_choices", None)
            chosen = choose(fwd, gpu) if choose is not None else None
    except (PerfsimError, TypeError, ValueError):   # a length refused; a scalar-only branch
        return None
    if chosen is not None:
        splits, group, extra = (np.broadcast_to(np.asarray(c, dtype=np.int64), key.shape)
                                for c in chosen)
        key = key + 8 * structure_keys(splits, group, extra)
    return [np.flatnonzero(key == value) for value in np.unique(key)]


def _kernels_on_arrays(algo: Algorithm, part: Dims, gpu: GPUSpec) -> list[list[KernelCost]]:
    """The kernels of one part of :func:`_group_parts` (``part``: ``B``, ``N_q``, ``N_k``
    one element per group) built once and read off per group.

    Raises:
        _NotOnArrays: a scalar-only branch, or a field not one value per group.
        perfsim.PerfsimError: a length the configuration refuses (the caller then builds
            each group alone, which names it)."""
    try:
        with np.errstate(all="ignore"):
            built = algo.kernels(part, gpu)
    except (TypeError, ValueError) as exc:   # "truth value of an array is ambiguous", int()
        raise _NotOnArrays(str(exc)) from exc
    return _split_on_groups(built, len(part.B))


def _split_on_groups(kernels: list[KernelCost], n: int) -> list[list[KernelCost]]:
    """Per group, ``kernels`` (built on arrays of ``n`` groups) with every array field read
    at that group's index as a Python number (``ndarray.tolist``: the types the one-group
    path mostly computes). A kernel's terms named after its counts (``KernelCost``'s own,
    ``"<count>/<name>"``, made where none were given) keep, per group, only the counts that
    are not zero there, as the one-group path makes them.

    Raises:
        _NotOnArrays: a field holds an array that is not one value per group."""
    plans = []
    for k in kernels:
        state = dict(k.__dict__)
        varying = []
        for name, value in k.__dict__.items():
            reader = _reader(value, n)
            if callable(reader):
                varying.append((name, reader))
            else:
                state[name] = reader
        own = {f"{prefix}/{k.name}" for prefix in TERM_FIELDS}
        plans.append((type(k), state, varying, bool(k.terms) and set(k.terms) <= own))
    out = []
    for i in range(n):
        ks = []
        for cls, state, varying, own_terms in plans:
            # frozen KernelCost copied as perfsim.frozen.replace copies it: the instance dict
            # filled at once (its __post_init__ only fills empty terms, and these are not)
            new = object.__new__(cls)
            fields = new.__dict__
            fields.update(state)
            for name, reader in varying:
                fields[name] = reader(i)
            if own_terms:
                fields["terms"] = {key: v for key, v in fields["terms"].items()
                                   if not (isinstance(v, (int, float)) and v == 0)}
            ks.append(new)
        out.append(ks)
    return out


def _reader(value, n: int):
    """A field value's reading per group: a function of the group's index where it holds an
    array of one value per group, else the value itself (numpy scalars as Python numbers).

    Raises:
        _NotOnArrays: an array of another shape."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value.item()
        if value.shape != (n,):
            raise _NotOnArrays(f"a kernel field of shape {value.shape} over {n} groups")
        return value.tolist().__getitem__
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list, dict)):
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        parts = [(key, _reader(v, n)) for key, v in items]
        if not any(callable(r) for _, r in parts):
            if all(r is v for (_, r), (_, v) in zip(parts, items)):
                return value            # nothing per group: the same object
            fixed = [r for _, r in parts]
            return (dict(zip([key for key, _ in parts], fixed)) if isinstance(value, dict)
                    else type(value)(fixed))
        if isinstance(value, dict):
            return lambda i: {key: r(i) if callable(r) else r for key, r in parts}
        kind = type(value)
        return lambda i: kind([r(i) if callable(r) else r for _, r in parts])
    return value


def kernels_for(algo: Algorithm, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
    """``algo.kernels`` for fixed-length or variable-length batches (``merge_kernels``)."""
    groups = varlen_groups(dims)
    if len(groups) == 1 and dims.seqlens is None:
        return algo.kernels(groups[0], gpu)
    algo = algo.varlen_config(dims, gpu)
    lists = _group_kernels(algo, groups, gpu)
    if len(lists) == 1:
        return lists[0]
    # the merged launch's shape: the group with the heaviest CTAs, with as many sequences as
    # the batch's work holds CTAs of that weight (its cycle's CTAs in flight and issue share
    # are functions of the grid; light CTAs of a short sequence add little of either)
    weights = [_cta_work(ks) for ks in lists]
    grids = [sum(c for c, _ in w) for w in weights]
    per_cta = [sum(c * x for c, x in w) / max(g, 1) for w, g in zip(weights, grids)]
    lead = max(range(len(lists)), key=lambda i: (per_cta[i], grids[i]))
    equivalent = sum(g * x for g, x in zip(grids, per_cta)) / max(per_cta[lead], 1e-300)
    batch = max(groups[lead].B, round(groups[lead].B * equivalent / max(grids[lead], 1)))
    whole = algo.kernels(replace(groups[lead], B=batch), gpu)
    return merge_kernels(lists, whole, gpu.sm_count)


def memory_for(algo: Algorithm, dims: Dims, gpu: GPUSpec):
    """Peak footprint; a variable-length batch's groups are all resident, so they add."""
    if dims.seqlens is not None:
        algo = algo.varlen_config(dims, gpu)
    return sum(algo.memory_bytes(g, gpu) for g in varlen_groups(dims))
