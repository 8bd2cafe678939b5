"""FlashAttention-2 (Dao 2023, arXiv 2307.08691), as the reference CUDA kernels run it.

Forward (FA2 Algorithm 1, §3.1–3.2): one CTA per query tile per (batch, head); the CTA keeps
``Q_i`` and the un-normalised ``O_i`` on chip, loops over key/value tiles, rescales by
``exp(m_old − m_new)`` and divides by ℓ once at the end; it writes ``O`` and the logsumexp.
Causal: tiles above the diagonal are skipped, diagonal tiles masked (§3.1.1).

Backward (Algorithm 2, §3.2): a pre-processing kernel computes ``D = rowsum(dO ∘ O)`` and zeroes
an fp32 ``dQ`` accumulator; one CTA per key/value tile per (batch, head) recomputes
``P`` from the logsumexp, accumulates ``dK_j, dV_j`` on chip and adds its ``dQ_i`` share with
fp32 atomics; a last kernel converts ``dQ`` to the input dtype (and, for GQA, a reduction sums
the per-query-head ``dK, dV`` into the key/value heads).

Every warp runs its MMAs and its softmax one after the other (``mma.sync`` is synchronous), so
the tensor and FP32 times of a CTA add (its FMA and ALU pipes' too), the exps running on the
MUFU beside the FP32 work (``base.MMA_SYNC_SERIAL``); shared-memory and HBM traffic overlap
with them (cp.async double-buffering and other resident CTAs).

Length: one algorithm — FA2's options, forward, backward (five GEMMs, dQ accumulation,
preprocessing and conversion kernels), split-KV decode and the mma.sync shared-memory traffic —
each term named and cited.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from perfsim.algorithms import softmax_costs as sc
from perfsim.algorithms.base import (
    FP32_BYTES,
    OPERAND_PREFETCH_DEPTH,
    STAT_BYTES,
    Algorithm,
    Dims,
    accumulator_traffic,
    backward_gemm_terms,
    forward_gemm_terms,
    gqa_accumulator_bytes,
    gqa_dkdv_accumulator,
    in_order_tail,
    l2_filtered,
    lockstep_window,
    resident_ctas,
    right_bound,
    rows_read,
    two_kind_tail,
    warp_cycle,
    whole_tile_dims,
    with_whole_tiles,
)
from perfsim.algorithms.common import (
    BWD_GEMMS,
    HEAD_DIM_MULTIPLE,
    WARPS_PER_WARPGROUP,
    WGMMA_ROWS,
    backward_softmax_terms,
    bwd_preprocess_kernel,
    check_fused_inputs,
    dq_convert_kernel,
    fused_memory_bytes,
    gqa_reduce_kernels,
    mask_extras,
    power_of_two_warps,
    wgmma_bwd_operand_elements,
)
from perfsim.algorithms.fa2_launch import (
    HEAD_DIM_TEMPLATES,
    PYTORCH_HEAD_DIM_TEMPLATES,
    BwdLaunch,
    bwd_launch,
    fwd_launch,
    kernel_head_dim,
)
from perfsim.algorithms.splits import (
    any_split,
    check_num_splits,
    check_pack_gqa,
    choice_arrays,
    combine_kernel,
    decide,
    frozen_choice,
    split_forward,
    varlen_batch_dims,
)
from perfsim.errors import InfeasibleError
from perfsim.frozen import replace
from perfsim.gpu import GPUSpec
from perfsim.kernel import KernelCost
from perfsim.mathops import asarray, cdiv, fdiv, maximum, minimum, where

#: Tiles for closed forms (symbolic dims): the A100/H100 head-dim-128 configuration.
SYMBOLIC_FWD_TILE, SYMBOLIC_BWD_TILE = (128, 64, 4), BwdLaunch(64, 128, 8, (2, 4, 2))
#: Registers per thread of the reference kernels (they are compiled to the 255 cap).
REGISTERS_PER_THREAD = 255
#: Local-memory bytes a thread of flash-attn 2's kernels reloads per tile step because the
#: compiled kernel spills, by compiled head dim: ``(at that head dim, below it)`` — a call
#: between compiled head dims runs the next kernel with predicated (uneven) head-dim loads,
#: which spills where the even one may not. Nsight Compute on the H200 (PyTorch's copy,
#: sm_90, 255 registers; ``python -m perfsim.validate.spill_facts``,
#: ``reports/h200/probes/ncu/summary*.json``): each profiled call's local loads over its tile
#: steps and threads. Backward: at 96, 20.5 B (and 53.1 at head dim 80), 4.1 at 256, 1.6 at
#: head dim 40; none at 64, 128, 160 (the 192 kernel) and 192, and under 1 B (taken as none)
#: at 112 and 224. Forward: none at compiled head dims; 128.2 B at head dim 40, 28.0 at 80,
#: 118.7 at 112, 23.6 at 200 and 224, none at 160 and 176. Each "below" figure was profiled
#: at one head dim and is used for the whole range below its kernel (ASSUMED), so a call just
#: below a compiled head dim comes out slower than one at it (profiled: a head-dim-112
#: forward took 983 µs where the same H·d at 128 took 786). Head dim 32 and flash-attn 2's
#: own 160 kernel not profiled (none, ASSUMED); used on every GPU (the same code against the
#: same 255-register cap; other architectures' and upstream's builds not profiled, ASSUMED).
REFERENCE_BWD_SPILL_BYTES = {64: (0.0, 1.6), 96: (20.5, 53.1), 128: (0.0, 0.0),
                             192: (0.0, 0.0), 256: (4.1, 0.0)}
REFERENCE_FWD_SPILL_BYTES = {64: (0.0, 128.2), 96: (0.0, 28.0), 128: (0.0, 118.7),
                             192: (0.0, 0.0), 256: (0.0, 23.6)}
#: Shared-memory wavefronts (128-byte shared-memory cycles) each warp of flash-attn 2's
#: kernels adds per tile step when the call's head dim is below the compiled kernel's, by
#: phase and compiled head dim. The kernel then takes its predicated head-dim path
#: (``Is_even_K`` false), which issues shared-memory loads and stores the even path does not:
#: per CTA and tile step, 122-362 more ``LDS`` and 65-129 more ``STS`` in the forward,
#: 101-340 and 141-322 in the backward, the same count at every head dim below one forward
#: kernel profiled twice (160 and 176; 200 and 224), with the ``IMAD``/``LEA`` address
#: arithmetic that feeds them.
#: Nsight Compute on the H200 (opcodes and ``smem_wavefronts``, not a time; PyTorch's copy,
#: sm_90; ``python -m perfsim.validate.spill_facts --uneven``, ``reports/h200/probes/ncu/
#: summary.json`` and ``summary-headdims.json``): the wavefronts per tile step of each profiled
#: call below a kernel (forward 40, 80, 112, 160 and 176, 200 and 224, their mean where two;
#: backward 40, 80, 112, 160, 224)
#: less those of the call at the kernel's own head dim, over the warps of a CTA. The model's
#: own count of the even path's operand traffic is kept as it is; this adds the difference.
#: Per warp so that another GPU's launch of the same kernel (other warps per CTA) scales with
#: its warps, and per tile step whatever the tile (ASSUMED off sm_90, for the split-KV and
#: paged kernels, and for flash-attn 2's own head dims 193-224, which run its 256 kernel; its
#: 160 and 32 kernels, not profiled, take none). The ``fa2`` algorithm and the
#: ``flash-attn-2`` preset are that code (``compiled_head_dims="flash-attn"``) and take it too.
REFERENCE_UNEVEN_SMEM_WAVEFRONTS = {
    "fwd": {64: 118.2, 96: 61.0, 128: 88.3, 192: 62.2, 256: 172.4},
    "bwd": {64: 88.1, 96: 37.2, 128: 60.7, 192: 102.9, 256: 134.1}}
#: The term that carries them, as bytes of the GPU's shared-memory port width
#: (``GPUSpec.smem_bandwidth_bytes_per_clk_per_sm``: one wavefront a clock) so that each costs
#: one port cycle (``smem_read``: the port serves loads and stores alike).
UNEVEN_TERM = "smem_read/head dim below the kernel's: predicated path's loads and stores"
#: ``compiled_head_dims`` values that mean flash-attn 2's own code (its compiled facts apply)
FLASH_ATTN_CODE = ("flash-attn", "pytorch")


def next_power_of_two(n) -> int:
    """The smallest power of two ≥ ``n`` (≥ 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


#: Bytes of an L2 sector (the unit global loads are served in on every NVIDIA GPU of the
#: catalog: CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory", 32-byte
#: segments) and of the widest ``cp.async`` copy one thread issues (PTX ISA, ``cp.async``:
#: cp-size 4, 8 or 16), the width Triton's and flash-attn's pipelined loads use.
SECTOR_BYTES, COPY_BYTES = 32, 16


def sector_split_factor(row_bytes) -> float:
    """L2 bytes a row of ``row_bytes`` costs per byte it holds when it is loaded in 16-byte
    ``cp.async`` copies and consecutive rows are packed (row stride = ``row_bytes``).

    A row that is a whole number of 32-byte sectors costs its sectors (factor 1). A row of
    16 bytes more than that makes every other row start half a sector in, and such a row
    fetches a whole sector for each 16-byte copy; the factor is the mean of the two rows'
    sectors over the row's bytes — 1.54, 1.53 and 1.52 for head dims 104, 152 and 216 in 16-bit.
    Measured on the H200, no attention (``validate/probe_row_alignment.py``, Nsight Compute
    ``lts__t_sectors_srcunit_tex_op_read`` of a Triton loop loading 64-row K and V tiles with
    ``num_stages = 3``): 1.46, 1.49 and 1.48 times the bytes the tiles hold at those head dims
    against 0.83-0.94 at 96, 112 and 144 (rows of whole sectors, some hits in L1);
    FlexAttention's forward at head dims 104 and 216 moved 1.5x through L2 as well
    (``reports/h200/probes/ncu/summary-flex-unaligned.json``). Rows not a multiple of 16 bytes
    take no 16-byte copies and are not covered (factor 1)."""
    if np.ndim(row_bytes) == 0:
        row_bytes = float(row_bytes)
        if row_bytes <= 0 or row_bytes % COPY_BYTES or row_bytes % SECTOR_BYTES == 0:
            return 1.0
        aligned = math.ceil(row_bytes / SECTOR_BYTES)
        return (aligned + row_bytes / COPY_BYTES) / 2 * SECTOR_BYTES / row_bytes
    row_bytes = asarray(row_bytes, dtype=float)      # sweeps: element by element
    safe = np.where(np.isfinite(row_bytes) & (row_bytes > 0), row_bytes, 1.0)
    split = (np.ceil(safe / SECTOR_BYTES) + safe / COPY_BYTES) / 2 * SECTOR_BYTES / safe
    half = (safe == row_bytes) & (safe % COPY_BYTES == 0) & (safe % SECTOR_BYTES != 0)
    return np.where(half, split, 1.0)


def fwd_smem_bytes(e, b_r, b_c, stages, d, d_v, e_kv=None):
    """Shared memory (bytes) of a forward tile: Q (``b_r x d``, ``e`` bytes per element) and a
    ``stages``-deep ring of K/V tiles (``b_c x (d + d_v)``, ``e_kv`` bytes, default ``e``) —
    the layout of FA2-, FA3- and Triton-style forwards."""
    return e * b_r * d + stages * (e if e_kv is None else e_kv) * b_c * (d + d_v)


def half_sector_bytes(e, rows_d, rows_v, d, d_v):
    """L2 bytes beyond their own that ``rows_d`` rows of ``d`` and ``rows_v`` rows of ``d_v``
    elements (``e`` bytes each) cost when copied 16 bytes at a time
    (:func:`sector_split_factor`): 0 where every row is whole sectors."""
    return e * ((sector_split_factor(e * d) - 1) * rows_d * d
                + (sector_split_factor(e * d_v) - 1) * rows_v * d_v)


#: GEMMs per tile of a FlexAttention backward's dK/dV program (S, dP, dV, dK) and of its dQ
#: program (S, dP, dQ): the weights of their work in :func:`base.two_kind_tail` (both
#: recompute the softmax; the tensor work, which binds these kernels, taken as the measure)
DKDV_GEMMS, DQ_GEMMS = 4, 3


def flex_program_kinds(dims: Dims, v, v_dq, b_c):
    """``(dK/dV kind, dQ kind)`` of a FlexAttention backward grid (``FA2.dq_programs``) for
    :func:`base.two_kind_tail`: each ``(programs that work, total work, longest)``, work in
    tiles times :data:`DKDV_GEMMS` / :data:`DQ_GEMMS`. A dK/dV program walks its key block's
    column of ``B_r x B_c`` tiles (``v``; the longest: ``TileVisits.tallest``) for each of
    the ``H / H_kv`` query heads of its K/V head; a dQ program its query block's row of
    ``B_c x B_r`` tiles (``v_dq``; the longest: ``TileVisits.widest``). Blocks of rows no
    key sees (``base.rows_read`` in ``B_c`` rows) do no tile work."""
    group = fdiv(dims.H, dims.H_kv)
    kv_programs = dims.B * dims.H_kv * v.kv_tiles
    kv_work = DKDV_GEMMS * dims.B * dims.H * v.tiles
    tallest = v.q_tiles if v.tallest is None else v.tallest
    kv_longest = DKDV_GEMMS * group * (tallest if dims.masked
                                       else v.tiles / maximum(v.kv_tiles, 1))
    keyless_blocks = (dims.N_q - rows_read(dims, b_c)) / b_c
    dq_programs = dims.B * dims.H * (v_dq.q_tiles - keyless_blocks)
    widest = v_dq.kv_tiles if v_dq.widest is None else v_dq.widest
    dq_longest = DQ_GEMMS * (widest if dims.masked
                             else v_dq.tiles / maximum(v_dq.q_tiles, 1))
    return ((kv_programs, kv_work, kv_longest),
            (dq_programs, DQ_GEMMS * dims.B * dims.H * v_dq.tiles, dq_longest))


def resident_per_sm(grid, ctas_per_sm, gpu: GPUSpec):
    """CTAs resident at once on the busiest SM: its occupancy, or fewer when the grid does
    not give every SM that many (``⌈grid / SMs⌉``) — the customers of a kernel's cycle."""
    return minimum(ctas_per_sm, cdiv(maximum(grid, 1), gpu.sm_count))


#: The two stations of a kernel in FA2's loop order that issues asynchronous MMAs (Triton's
#: on Hopper: WGMMA; on Blackwell: tcgen05): the MMAs with the shared-memory operand reads
#: that feed them, and the softmax's FP32 work and exps, which one CTA's instruction stream
#: issues after its MMA's result (their times add). Customers: the CTAs resident on the SM —
#: Triton's kernels synchronise a CTA's warps each tile (the K/V ring), so only another CTA
#: fills the gap (as ``base.warp_cycle``). Evidence (not attention timing):
#: ``validate/probe_wgmma_exp.py`` on the H200 (``validate/reports/h200/probes/
#: probe_wgmma_exp.json``): a Triton loop of ``S = A B`` (WGMMA), ``exp2(S)``, ``acc += S C``
#: on the tiles FlexAttention and the tutorial launch runs, with one CTA per SM, 4-16 %
#: below the sum of its GEMM-only and exp-only times (the serial rule, K = 1), and with two
#: CTAs per SM within −9 to +3 % of this closed cycle with K = 2, where adding the two
#: would be 17-30 % too slow. Rerun with ``S = A B`` kept inside the loop
#: (``probe_wgmma_exp-carried.json``): 2-26 % below the sum at one CTA per SM, −12 to +15 %
#: of the cycle at two, where the sum is 4-51 % slow.
#: The forward's terms a thread finishes before its exps (``KernelCost.exp_after``): the row
#: max the exps subtract, and the scale where the kernel keeps it apart from the exp argument.
SPLIT_SCALE_TERM = "fp32/scale apart from the exp argument (FMUL)"
EXP_AFTER = ("alu/row max", SPLIT_SCALE_TERM)
ASYNC_MMA_STATIONS = (("tensor", "smem"), ("mufu", "fp32"))
#: Options that set a phase's tile, named by an occupancy error when a caller set them.
FWD_TILE_OPTIONS = ("block_m", "block_n", "warps", "fwd_warps", "fwd_stages", "stages")
BWD_TILE_OPTIONS = ("bwd_block_m", "bwd_block_n", "bwd_warps")
ASYNC_MMA_SERIAL = (False, True)


#: CUTLASS's K step of an sm80 16-bit threadblock GEMM (``DefaultGemmType::ThreadK``), the
#: step xFormers' cutlassF walks the head dim in (``compiled_head_dims="xformers"``).
XFORMERS_THREAD_K = 32
#: PyTorch's key-split heuristic for xFormers' backward (``_efficient_attention_backward``,
#: attention_backward.cu; ``FA2.bwd_splits``): no split once the grid has this many CTAs
#: (``B·H``) and the keys fit this many key blocks; at most this many CTAs in all
#: (``⌊200 / (B·H)⌋`` splits) for a kernel that stages dK/dV per split.
XFORMERS_SPLIT_ENOUGH_CTAS = 256
XFORMERS_SPLIT_FEW_KEY_BLOCKS = 2
XFORMERS_SPLIT_STAGING_CTAS = 200


class FusedAttention(Algorithm):
    """What FlashAttention-2 and -3 share — one fused kernel per phase that keeps a query or
    key tile on chip and streams the other side (FA2 Algorithms 1 and 2) — with the options
    both have. Not used alone: :class:`FA2` adds the ``mma.sync`` launch options (warps,
    registers, Triton's dQ pass and compiled facts), ``perfsim.algorithms.fa3.FA3`` the
    Hopper pipeline's. Each subclass declares its own options only (composition through
    these hooks, not inherited options it would ignore): :meth:`fwd_warps_option`,
    :meth:`recomputes_dq`, :meth:`spill_reload_bytes`, :meth:`registers`,
    :meth:`bwd_smem_bytes`.

    Args:
        block_m: query tile rows ``B_r`` (forward); ``None`` = reference default per head dim.
        block_n: key tile rows ``B_c`` (forward).
        bwd_block_m, bwd_block_n, bwd_warps: the backward kernel's tile and warps.
        tensor_family: tensor-core instructions issued (``mma_sync``, ``wgmma``, ...).
        lpt_scheduling: causal query tiles launched longest first; flash-attn 2 and Triton
            launch them in index order (short to long), the default.
        num_splits: split-KV parts of the forward (``perfsim.algorithms.splits``): an
            integer ≥ 1, or ``"auto"`` for the reference's heuristic.
        pack_gqa: pack the query heads of one K/V head into the rows of a tile: ``True``,
            ``False`` or ``"auto"`` (the reference's rule).
        fast_math: the kernels were built with ``--use_fast_math``, so an exp is one
            MUFU.EX2 (``perfsim.algorithms.softmax_costs``).
        fused_scale: the forward scales the scores and subtracts the row max in one FFMA per
            score (``False`` where the compiled kernel keeps an FMUL and an FADD).
        scale_multiplies: FMULs per score element the forward spends on scaling the scores
            apart from the exp argument; ``None`` (default): 0 with ``fused_scale``, else
            1. FlexAttention's forward takes 2 (``qk *= SM_SCALE``, then ``*= RCP_LN2``:
            ``perfsim.algorithms.softmax_costs.FLEX_SCALE_FMULS``).
        bound_checks: whose census of bound checks on every tile applies when a length is
            not a multiple of the tile (``softmax_costs.BOUND_CHECKS``: ``"flash-attn"``,
            ``"cudnn"``, ``"flex"``), or ``"none"`` (default here; ``FA2`` defaults to
            ``"flash-attn"``, its reference).
        bound_check_unless_multiple: the multiple both lengths must be for the checks to be
            skipped (FlexAttention: 128, its ``IS_DIVISIBLE``); ``None`` (default): the
            phase's own tile, ``N_q % B_r`` and ``N_k % B_c`` (flash-attn 2's
            ``is_even_MN``).
        bound_check_classes: the forward's bound checks by the class of the sequence
            lengths, for a kernel compiled with the lengths as constants (FlexAttention on
            sm_90: ``softmax_costs.FLEX_FWD_BOUND_CHECK_CLASSES``): rows ``(class, ALU, FMA,
            spill)`` for lengths whose largest power-of-two divisor is at least ``class`` (16,
            2 and 1, in that order), ALU and FMA-pipe lane instructions per score element and
            local bytes a thread reloads per K/V step; they replace the
            ``BOUND_CHECKS[bound_checks]["fwd"]`` figure where the checked variant runs.
            ``None`` (default): that figure for every length.
        address_arithmetic: whose census of integer and predicate arithmetic per score
            element the kernels issue beside the softmax (``softmax_costs.ADDRESS_ARITHMETIC``:
            ``"pytorch-flash"``, ``"xformers"``, ``"cudnn"``), or ``"none"`` (default: left
            uncounted; flash-attn 2's own build was not profiled, PyTorch's copy of it issues
            0.4-1.8 ALU and 0.2-0.7 FMA-pipe lane instructions more per score element in the
            forward, ``"pytorch-flash"``).
    """

    name: ClassVar[str] = "fused"
    #: which reference's split/packing rules ``"auto"`` follows (perfsim.algorithms.splits)
    split_rule: ClassVar[str] = "fa2"
    #: input dtypes the reference kernels take
    dtypes: ClassVar[tuple[str, ...]] = ("fp16", "bf16")

    block_m: int | None = Field(default=None, ge=16, multiple_of=16)
    block_n: int | None = Field(default=None, ge=16, multiple_of=16)
    bwd_block_m: int | None = Field(default=None, ge=16, multiple_of=16)
    bwd_block_n: int | None = Field(default=None, ge=16, multiple_of=16)
    bwd_warps: int | None = Field(default=None, ge=1, le=32)

    _bwd_power_of_two = field_validator("bwd_warps")(
        classmethod(lambda cls, v: power_of_two_warps(v)))
    tensor_family: str = "mma_sync"
    lpt_scheduling: bool = False
    num_splits: Literal["auto"] | int = Field(default="auto")
    pack_gqa: Literal["auto"] | bool = "auto"
    fast_math: bool = True
    fused_scale: bool = True
    scale_multiplies: int | None = Field(default=None, ge=0, le=4)
    bound_checks: Literal["none", "flash-attn", "cudnn", "flex"] = "none"
    bound_check_unless_multiple: int | None = Field(default=None, ge=1)
    bound_check_classes: tuple[tuple[Literal[16, 2, 1], float, float, float], ...] | None = None

    @field_validator("bound_check_classes", mode="before")
    @classmethod
    def _rows_as_tuples(cls, v):
        # JSON and TOML give lists
        if isinstance(v, list):
            return tuple(tuple(row) if isinstance(row, list) else row for row in v)
        return v

    @field_validator("bound_check_classes")
    @classmethod
    def _three_classes(cls, v, info):
        if v is None:
            return v
        if cls.name != "fa2":
            raise ValueError(f"bound_check_classes is a forward fact of kernels run through "
                             f"the FA2 model (FlexAttention's); {cls.name} does not take it "
                             "(allowed: None)")
        if (info.data.get("bound_checks", "none") == "none"
                or not info.data.get("bound_check_unless_multiple")):
            raise ValueError("bound_check_classes needs bound_checks (e.g. 'flex') and "
                             "bound_check_unless_multiple (the length multiple that skips the "
                             "checks: 128 for FlexAttention)")
        if (tuple(row[0] for row in v) != (16, 2, 1)
                or any(not math.isfinite(x) or x < 0 for row in v for x in row[1:])):
            raise ValueError("give three rows (16, alu, fma, spill), (2, ...), (1, ...) in "
                             "that order, each figure finite and at least 0")
        return v
    address_arithmetic: Literal["none", "pytorch-flash", "xformers", "cudnn"] = "none"

    _splits = field_validator("num_splits", mode="before")(
        classmethod(lambda cls, v: check_num_splits(v)))
    _pack = field_validator("pack_gqa", mode="before")(
        classmethod(lambda cls, v: check_pack_gqa(v)))

    def fwd_warps_option(self) -> int | None:
        """Warps per forward CTA set by an option (``None``: the reference's choice)."""
        return None

    def reduces_dq(self) -> bool:
        """Whether the backward adds its dQ partials into the fp32 accumulator as reductions
        in L2 (``KernelCost.atomics``, on the memory path: ``perfsim.timing``). True for
        flash-attn 2's ``atomicAdd`` and FA3/FA4's and cuDNN's TMA reduce-add."""
        return True

    def recomputes_dq(self) -> bool:
        """Whether the backward computes dQ in a second pass that recomputes S and dP."""
        return False

    def runs_dq_programs(self) -> bool:
        """Whether that dQ pass runs in programs of its own, one per (query head, query
        block), launched in the backward's grid after its dK/dV programs (FlexAttention)."""
        return False

    def bwd_splits(self, dims: Dims, v, b_c, bh):
        """CTAs per (batch, head) along the keys of the backward, or ``None`` for one per key
        block (flash-attn 2's grid; FA2's ``bwd_key_splits`` option)."""
        return None

    def bwd_step_wait_counts(self, dims: Dims, b_r, b_c, kd, kd_v, splits, kb):
        """``(load latencies, bytes)`` a backward CTA waits out per step for its own
        global-memory round trips outside any prefetch (``KernelCost.step_waits``): none
        here (FA2's options ``dq_lock_waits``, ``bwd_gmem_accumulators``,
        ``bwd_gemms_preloaded``)."""
        return 0, 0

    def prescales_k(self) -> bool:
        """Whether the backward first writes a scaled copy of K (one elementwise kernel)."""
        return False

    def masked_row_split(self) -> int:
        """Steps the backward's dK/dV loop takes per masked tile (1: one per tile)."""
        return 1

    def spill_reload_bytes(self, dims: Dims) -> float:
        """Local-memory bytes a backward thread reloads per dK/dV step (register spills)."""
        return 0.0

    def fwd_spill_bytes(self, dims: Dims) -> float:
        """Local-memory bytes a forward thread reloads per tile step (register spills)."""
        return 0.0

    def uneven_head_dim_wavefronts(self, phase: str, dims: Dims) -> float:
        """Shared-memory wavefronts each warp adds per tile step because the call's head dim
        is below the compiled kernel's (none here)."""
        return 0.0

    def bwd_smem_is_stand_in(self) -> bool:
        """Whether the backward's shared memory is a stand-in (flash-attn 2's traits for a
        kernel that is not its code, no compiled figure given): never for the references."""
        return False

    def _padded_head_dims(self, dims: Dims) -> dict:
        """``{"kernel_head_dims": (d, d_v)}`` where the compiled kernel runs wider head dims
        than the call's (for ``explain``), else nothing."""
        if dims.symbolic:
            return {}
        kd = tuple(int(x) for x in self.kernel_head_dims(dims))
        return {} if kd == (dims.d, dims.d_v) else {"kernel_head_dims": kd}

    def kernel_head_dims(self, dims: Dims) -> tuple:
        """``(d, d_v)`` the compiled kernel runs at: the call's own (FA2 overrides it)."""
        return dims.d, dims.d_v

    def fwd_tiles(self, dims: Dims, gpu: GPUSpec) -> tuple[int, int, int]:
        """``(B_r, B_c, warps)`` of the forward kernel: the options, else what flash-attn 2
        launches on ``gpu`` (:func:`perfsim.algorithms.fa2_launch.fwd_launch`)."""
        if dims.symbolic:
            b_r, b_c, warps = SYMBOLIC_FWD_TILE
        else:
            d = max(self.kernel_head_dims(dims))
            b_r, b_c, warps = (splitkv_tile(d) if any_split(dims.splits)
                               or dims.page_size
                               else fwd_launch(d, self.launch_causal(dims),
                                               bool(dims.dropout_p), gpu))
        return self.block_m or b_r, self.block_n or b_c, self.fwd_warps_option() or warps

    def fwd_tile_note(self, dims: Dims) -> str | None:
        """Why the forward's tile is not the kernel's usual one, in words for ``explain``
        (``KernelCost.launch["tile_note"]``), or ``None``: a paged K/V cache runs flash-attn
        2's split-KV kernel (``mha_fwd``: "paged KV is only supported in the splitkv
        kernel"), whose tile (:func:`~perfsim.algorithms.fa2_launch.splitkv_tile`) is taken
        whether or not the keys are split. Kernels that choose their tiles otherwise
        (flash-attn 3, 4) override :meth:`fwd_tiles` and have no such note."""
        if (type(self).fwd_tiles is not FusedAttention.fwd_tiles or dims.symbolic
                or not dims.page_size or any_split(dims.splits)
                or self.block_m or self.block_n):
            return None
        return ("a paged K/V cache runs flash-attn 2's split-KV kernel (mha_fwd: paged K/V "
                "only there), whose tile it takes with or without splits")

    def launch_causal(self, dims: Dims) -> bool:
        """Whether the forward launches its causal kernel (tile choice): the mask's
        (``dims.causal``) unless :class:`FA2` says otherwise."""
        return dims.causal

    def bwd_tiles(self, dims: Dims, gpu: GPUSpec) -> tuple[int, int, int]:
        """``(B_r, B_c, warps)`` of the backward kernel (``B_r`` query rows, ``B_c`` key
        rows): the options, else flash-attn 2's choice on ``gpu``."""
        return self.bwd_launch(dims, gpu)[:3]

    def bwd_launch(self, dims: Dims, gpu: GPUSpec):
        """The backward kernel's :class:`~perfsim.algorithms.fa2_launch.BwdLaunch`
        (:func:`perfsim.algorithms.fa2_launch.bwd_launch`). With tiles or warps set by the
        options, the warp layouts follow :func:`default_atom_layouts` and Q is
        double-buffered, K and V in shared memory."""
        launch = SYMBOLIC_BWD_TILE if dims.symbolic else bwd_launch(
            max(self.kernel_head_dims(dims)), bool(dims.dropout_p), gpu)
        if self.bwd_block_m or self.bwd_block_n or self.bwd_warps:
            warps = self.bwd_warps or launch.warps
            launch = BwdLaunch(self.bwd_block_m or launch.block_m,
                               self.bwd_block_n or launch.block_n, warps,
                               default_atom_layouts(warps))
        return launch

    def fwd_scheduling(self, dims: Dims) -> tuple[bool, bool]:
        """``(persistent, lpt)`` of the forward kernel of ``dims`` (its split count
        decided): :meth:`persistent_grid` and ``lpt_scheduling`` unless a subclass's
        reference decides them per call (``FA3.fwd_scheduling``)."""
        return self.persistent_grid(), self.lpt_scheduling

    def bwd_scheduling(self, dims: Dims) -> tuple[bool, bool]:
        """``(persistent, lpt)`` of the backward kernel: :meth:`persistent_grid`, key tiles
        in index order, unless a subclass's reference says otherwise
        (``FA3.bwd_scheduling``)."""
        return self.persistent_grid(), False

    def persistent_grid(self) -> bool:
        """flash-attn 2 launches one CTA per tile (not persistent)."""
        return False

    def registers(self, gpu: GPUSpec, warps: int) -> int:
        """32-bit registers per thread (for occupancy): the reference kernels are compiled to
        the 255-register cap."""
        return REGISTERS_PER_THREAD

    def bwd_registers(self, gpu: GPUSpec, warps: int) -> int:
        """32-bit registers per thread of the backward kernel: the forward's
        (:meth:`registers`) unless an option says otherwise."""
        return self.registers(gpu, warps)

    def overlap_groups(self, phase: str, dims: Dims):
        """Overlap rule of the main kernels (see ``perfsim.kernel``): HBM overlaps the cycle
        of :meth:`pipeline`."""
        return (("hbm",),)

    def pipeline(self, phase: str, gpu: GPUSpec, ctas_per_sm, warps,
                 prefetch: int = OPERAND_PREFETCH_DEPTH):
        """``KernelCost.pipeline`` of the main kernels: the ``mma.sync`` warp cycle
        (``perfsim.algorithms.base.warp_cycle``) with ``prefetch`` operand slices loaded
        ahead; for kernels that issue WGMMA or tcgen05 (Triton's on Hopper and Blackwell),
        :data:`ASYNC_MMA_STATIONS`: the MMAs with the shared-memory reads that feed them,
        then the softmax's FP32 work and exps in program order, one CTA per customer."""
        if self.tensor_family != "mma_sync":
            return (ASYNC_MMA_STATIONS, maximum(ctas_per_sm, 1), ASYNC_MMA_SERIAL)
        return warp_cycle(gpu, ctas_per_sm, warps, prefetch)

    def spill_term(self, phase: str) -> str:
        """The named term of the ``phase``'s register-spill reloads: flash-attn 2's compiled
        kernels spill in the forward where the call's head dim is below the kernel's
        (predicated loads), in the backward their dK/dV accumulators; FlexAttention's
        forward where its bound checks spill (:attr:`bound_check_classes`)."""
        if phase == "fwd" and self.bound_check_classes:
            return "local_load/register spills (bound checks by length class)"
        return ("local_load/register spills (head dim below the kernel's)" if phase == "fwd"
                else "local_load/dK,dV accumulators (register spills)")

    def unit_edges_hidden(self, phase: str) -> bool:
        """``KernelCost.unit_edges_hidden`` of ``phase``'s main kernel: False."""
        return False

    def exp_after(self, phase: str) -> tuple:
        """``KernelCost.exp_after`` of ``phase``'s main kernel: the terms a thread finishes
        before its exps (:data:`EXP_AFTER`)."""
        return EXP_AFTER

    def spill_streams(self, phase: str) -> int:
        """``KernelCost.spill_streams`` of the ``phase``'s main kernel: 1 — a CTA's warps
        step through the tile loop together."""
        return 1

    def tensor_issue_share(self, gpu: GPUSpec, customers):
        """``KernelCost.tensor_issue_share`` of the main kernels: for a kernel that issues
        WGMMA (Triton's on Hopper) with one CTA resident on the busiest SM (``customers``, as
        :meth:`pipeline` takes them), ``GPUSpec.wgmma_one_cta_fraction``: a CTA's warps
        issue their dots in program order and wait for each (the K/V ring synchronises them
        every tile), so one CTA leaves the tensor pipe idle between its dots and only another
        CTA fills those gaps. 1.0 with two or more CTAs, for ``mma.sync`` (its warp cycle,
        ``base.warp_cycle``, has its own customers) and for tcgen05 (not measured).

        Evidence (not attention timing): ``validate/probe_wgmma_smem.py`` on the H200
        (``validate/reports/h200/probes/probe_wgmma_smem.json``): a Triton loop ``acc += A @ B``
        on shared-memory operands, N ≥ 64, 11 tiles with 4 or 8 warps, ran at 3101-3401
        FLOP per NVML clock per SM with one CTA per SM and 3542-4109 with two (medians 3292
        and 3669; per tick, at 0.908 of NVML's clock under tensor work, 0.885 and 0.987 of
        the 4096 peak); one CTA's rate over two's, tile by tile, 0.81-0.94, median 0.88.
        Eight warps in one CTA (two warpgroups that wait together) run as slowly as four."""
        if self.tensor_family != "wgmma":
            return 1.0
        return where(customers <= 1, gpu.wgmma_one_cta_fraction, 1.0)

    def cuda_cores_in_turn(self) -> bool:
        """``KernelCost.cuda_cores_in_turn`` of the main kernels: for ``mma.sync`` kernels
        ``True`` — a warp's FMA- and ALU-pipe instructions take turns while the MUFU's exps
        run beside them (``base.MMA_SYNC_SERIAL``): SDPA flash's forward on the H200 keeps
        the tensor, FMA and ALU pipes busy 99 / 97 / 97 / 94 % of its duration in sum at head
        dims 32 / 64 / 96 / 128 (Nsight Compute, ``summary-flash-headdims.json`` and the
        profiles it lists; with dropout 44 + 21 + 28 = 93 % at d = 128,
        ``summary-dropout.json``); ``False`` for the WGMMA and tcgen05 kernels (Triton's on
        Hopper and Blackwell: their FMA and ALU pipes overlap, ASSUMED, not profiled for
        it)."""
        return self.tensor_family == "mma_sync"

    def check_masks(self, dims: Dims) -> None:
        """What the reference takes beyond plain attention (flash-attn 2: windows, softcap
        and dropout; paged K/V with pages of a multiple of 256 tokens, ``flash_api.cpp``; a
        paged cache or a K/V dtype of its own in the forward only).

        Raises:
            InfeasibleError: naming what the reference lacks.
        """
        if dims.page_size and dims.page_size % 256:
            raise InfeasibleError(f"{self.name} reads a paged KV cache in pages of a multiple "
                                  f"of 256 tokens (flash-attn 2's check), not {dims.page_size}")
        if dims.page_size and dims.bwd:
            raise InfeasibleError(f"{self.name}: a paged K/V cache is an inference path "
                                  "(flash_attn_with_kvcache: no backward)")
        if dims.kv_dtype is not None and dims.bwd:
            raise InfeasibleError(f"{self.name}'s backward takes Q, K and V of one dtype "
                                  f"(flash-attn 2's mha_bwd); a {dims.kv_dtype} K/V cache under "
                                  f"{dims.dtype} queries is an inference path")
        if dims.softcap and dims.dropout_p:
            raise InfeasibleError(f"{self.name}: softcapping does not support dropout "
                                  "(flash-attn 2's check)")

    def forward_dims(self, dims: Dims, gpu: GPUSpec) -> Dims:
        """The forward's dims with the packing and split-KV choice applied."""
        if dims.symbolic:
            return dims
        b_r, b_c, _ = self.fwd_tiles(replace(dims, splits=2) if self.split_rule == "fa2"
                                     else dims, gpu)
        return decide(dims, gpu, self.num_splits, self.pack_gqa, self.split_rule, b_r, b_c,
                      can_split=self.can_split(gpu))

    def split_choices(self, dims: Dims, gpu: GPUSpec):
        """Sweeps: the split-KV and packing choice of each element of array dims, as
        :meth:`forward_dims` makes it for that element alone — ``(splits, group, 0)`` integer
        arrays (:func:`perfsim.algorithms.splits.choice_arrays`; the last is a further
        grouping key, none here) — or None when the options fix one choice for every
        element (a split count given and no packing)."""
        if self.num_splits != "auto" and self.pack_gqa is False:
            return None
        fdims = replace(dims, phase="fwd")
        b_r, b_c, _ = self.fwd_tiles(replace(fdims, splits=2) if self.split_rule == "fa2"
                                     else fdims, gpu)
        splits, group = choice_arrays(fdims, gpu, self.num_splits, self.pack_gqa,
                                      self.split_rule, b_r, b_c, can_split=self.can_split(gpu))
        return splits, group, 0

    def _tile_context(self, phase: str, b_r, b_c, d, options: tuple) -> str:
        """Which tile an occupancy error is about, and which of ``options`` set it (a user's
        ``--set block_m=...``), for the error's one line."""
        fields = type(self).model_fields
        given = [f"{name}={getattr(self, name)}" for name in options
                 if name in fields and getattr(self, name) != fields[name].default]
        how = (f"set by {', '.join(given)}; smaller tiles need less" if given
               else "the reference's launch for this shape")
        return f"the {phase} tile of {b_r} x {b_c} at head dim {d}: {how}"

    def kv_in_flight(self, dims: Dims, b_c):
        """Global-load bytes one forward CTA keeps in flight: flash-attn 2 prefetches the next
        K (or V) tile with cp.async while it computes on the current one."""
        return dims.e_kv * b_c * maximum(dims.d, dims.d_v)

    def ring_loads(self, dims: Dims, b_r, b_c):
        """``KernelCost.ring_loads`` of the forward: ``None`` here — flash-attn 2's kernels
        and Triton's issue their K/V loads from the warps that compute, which the load path
        (``bytes_in_flight``) and the warp cycle already time."""
        return None

    def varlen_config(self, dims: Dims, gpu: GPUSpec):
        """Split-KV and packing decided once for the whole variable-length batch."""
        if self.num_splits != "auto" and self.pack_gqa != "auto":
            return self
        return frozen_choice(self, self.forward_dims(varlen_batch_dims(dims), gpu))

    def can_split(self, gpu: GPUSpec) -> bool:
        """Whether this implementation splits the key range (flash-attn 2 and 3 do)."""
        return True

    # ------------------------------------------------------------------ kernels
    def kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        """The forward (split-KV and combine when chosen) and the backward kernels.

        Raises:
            InfeasibleError: a dtype, head dim, mask or tensor family the GPU cannot run."""
        if self.compiled_head_dims == "power-of-two" and not dims.symbolic and (
                dims.d % HEAD_DIM_MULTIPLE or dims.d_v % HEAD_DIM_MULTIPLE):
            # Triton's templates (FlexAttention) run any head dim: [BLOCK, next power of two]
            # tiles with the columns past it masked (torch/_inductor/kernel/flex). Their rows
            # are then not a multiple of 16 bytes, so no 16-byte copy loads them, and how
            # many L2 sectors the narrower copies fetch was never measured
            # (sector_split_factor covers rows 16 bytes off a sector only)
            raise InfeasibleError(
                f"{self.name}: Triton's kernels run head dims off a multiple of "
                f"{HEAD_DIM_MULTIPLE} (masked power-of-two tiles), but perfsim has no "
                f"measurement of the narrower loads their rows take (got head_dim "
                f"{dims.d}, head_dim_v {dims.d_v}); not modelled")
        check_fused_inputs(dims, self.name, self.dtypes, gpu)
        gpu.tensor_flops_per_clk(self.mma_dtype(dims), self.tensor_family)  # raises if unsupported
        self.check_masks(dims)
        out = []
        if dims.fwd:
            fdims = self.forward_dims(replace(dims, phase="fwd"), gpu)
            b_r, b_c, _ = self.fwd_tiles(fdims, gpu)
            main = with_whole_tiles(lambda x: self._forward(x, gpu), fdims, b_r, b_c,
                                    self.kernel_head_dims(fdims))
            if any_split(fdims.splits):
                # the split grid's CTAs set its causal tail, its cycle's customers and its
                # issue share (the unsplit kernel's were taken for fewer CTAs)
                split = split_forward(self._split_tail(main, fdims, gpu), fdims, fdims.splits)
                customers = resident_per_sm(split.grid, main.ctas_per_sm, gpu)
                out += [replace(split, pipeline=self.pipeline("fwd", gpu, customers,
                                                              main.warps_per_cta),
                                tensor_issue_share=self.tensor_issue_share(gpu, customers)),
                        combine_kernel(fdims, fdims.splits, f"{self.name}_fwd_combine", gpu)]
            else:
                out.append(main)
        if dims.bwd:
            b_r, b_c, _ = self.bwd_tiles(dims, gpu)
            ks = self._backward(dims, gpu)         # built once; once more on whole tiles
            whole = whole_tile_dims(dims, b_r, b_c, self.kernel_head_dims(dims))
            if whole is not None:
                main = f"{self.name}_bwd"
                padded = {k.name: k for k in self._backward(whole, gpu)}
                ks = [k.with_executed(padded[k.name]) if k.name == main else k for k in ks]
            out.extend(ks)
        return out

    def overlap_text(self) -> str:
        """The mma.sync warp cycle, or, for kernels that issue WGMMA/tcgen05 (Triton on
        Hopper and Blackwell), :data:`ASYNC_MMA_STATIONS` in words."""
        if self.tensor_family == "mma_sync":
            return self.overlap_rule
        return (f"{self.tensor_family}: inside a CTA the MMAs (fed from shared memory), the "
                "softmax's FP32 work and its exps run one after the other; the CTAs resident "
                "on an SM cycle through the two stations; HBM overlaps")

    def mma_dtype(self, dims: Dims) -> str:
        """The dtype the matmuls run in: Q's (a narrower K/V cache is converted to it after
        loading, as mixed-precision decode kernels do; a wider one is refused,
        ``common.check_fused_inputs``; the flash-attn references themselves take one dtype
        for Q, K and V)."""
        return dims.dtype

    def _forward(self, dims: Dims, gpu: GPUSpec) -> KernelCost:
        if dims.causal and not dims.symbolic and not self.launch_causal(dims):
            # the library launches its unmasked kernel (launch_causal: one query row, which
            # the bottom-right causal mask lets see every key), so no mask code runs either
            dims = replace(dims, causal=False)
        b_r, b_c, warps = self.fwd_tiles(dims, gpu)
        e, ekv, bh = dims.e, dims.e_kv, dims.B * dims.H
        dkv = dims.d + dims.d_v
        # shared-memory tiles as wide as the compiled kernel's head dims
        kd, kd_v = self.kernel_head_dims(dims)
        smem = self._fwd_smem_bytes(dims, gpu, b_r, b_c, kd, kd_v)
        try:
            ctas = resident_ctas(gpu, smem, warps, self.registers(gpu, warps))
        except InfeasibleError as exc:
            tile = self._tile_context("forward", b_r, b_c, kd, FWD_TILE_OPTIONS)
            raise InfeasibleError(f"{exc} ({tile})") from None
        v = dims.tile_visits(b_r, b_c)
        # query tiles whose rows all see no key (causal or a window's right side with
        # N_q > N_k) and exit before loading Q where the kernel says so
        # (exits_keyless_tiles): they write zero O and +inf LSE and take no SM time in
        # this model beyond those bytes
        keyless = self.keyless_q_tiles(dims, b_r)
        some_keyless = self.exits_keyless_tiles() and (dims.symbolic or bool(np.any(keyless)))
        q_rows = dims.N_q - b_r * keyless
        run = replace(v, q_tiles=v.q_tiles - keyless) if some_keyless else v
        grid = run.q_tiles * bh
        # K/V: every query tile streams the key/value tiles it visits. The query tiles of one
        # (batch, head) are adjacent in the grid, start together and walk K/V in the same
        # order, so the re-reads of the CTAs resident at once hit L2: the live working set is
        # a double-buffered K/V tile per (batch, head) in flight (base.lockstep_window).
        kv_total = ekv * bh * v.q_outer_cols * dkv
        kv_compulsory = ekv * dims.B * dims.H_kv * dims.kv_rows_read(b_c) * dkv
        # (CTAs resident at once: the SMs' slots, or the whole grid when it is smaller)
        resident = minimum(gpu.sm_count * ctas, grid)
        window = lockstep_window(resident, run.q_tiles, ekv * b_c * dkv)
        kv_hbm, kv_hits = l2_filtered(kv_total, kv_compulsory, window, gpu,
                                      gpu.l2_usable_fraction)
        # (row, visited key tile) pairs of the call's rows; the padded rows of a last partial
        # query tile are timed through with_whole_tiles, not counted
        rows_steps = v.kv_outer_rows
        elems = bh * v.elements
        fmuls = self.scale_multiplies
        if fmuls is None:
            fmuls = 0 if self.fused_scale else sc.SPLIT_SCALE_FMA_OPS
        split = sc.FMA_SLOTS * fmuls
        terms = {
            **forward_gemm_terms(elems, dims.d, dims.d_v),
            "fp32/softmax (scale, −max, row sum)": elems * sc.ONLINE_SOFTMAX_FLOPS_PER_SCORE,
            "fp32/rescale O": bh * rows_steps * (sc.RESCALE_FLOPS_PER_ROW_ELEMENT * dims.d_v
                                                 + sc.RESCALE_FLOPS_PER_ROW_EXTRA),
            "fp32/normalise O": sc.FMA_SLOTS * bh * q_rows * dims.d_v,
            "alu/row max": elems * sc.ROW_MAX_ALU_OPS_PER_SCORE,
            "alu/P to 16 bits": elems * sc.P_CONVERT_ALU_OPS_PER_SCORE,
            "mufu/exp(S)": elems,
            "mufu/exp(m_old − m_new)": bh * rows_steps * sc.FA2_EXPS_PER_ROW_STEP,
            "hbm_read/Q": e * bh * q_rows * dims.d,
            "hbm_read/K,V": kv_hbm,
            "hbm_write/O": dims.e_o * bh * dims.N_q * dims.d_v,
            "hbm_write/logsumexp": bh * dims.N_q * STAT_BYTES,
            "l2_hit/K,V re-read": kv_hits,
            **self._fwd_smem(dims, v, b_r, warps),
        }
        if some_keyless:
            for name in ("smem_write/Q", "smem_read/Q"):
                if name in terms:
                    terms[name] = terms[name] * q_rows / dims.N_q
        if self.splits_sector_rows() and not dims.symbolic:
            # the sectors the half-sector rows fetch beyond their bytes: served by L2 (Q rows
            # once, K/V rows at every visit)
            kv_rows = kv_total / (ekv * dkv)
            extra = half_sector_bytes(e, bh * q_rows + kv_rows, kv_rows, dims.d, dims.d_v)
            if np.any(extra):
                terms["l2_hit/Q,K,V half-sector rows (16-byte copies)"] = extra
        if split:
            terms[SPLIT_SCALE_TERM] = elems * split
        terms.update(self.mask_terms("fwd", dims, bh * v.masked_tiles * b_r * b_c))
        terms.update(self.bound_check_terms("fwd", dims, elems, b_r, b_c))
        terms.update(self.address_terms("fwd", dims, elems))
        if dims.dropout_p:
            terms.update(sc.dropout_terms(self.address_arithmetic, "fwd", elems))
        terms.update(mask_extras(dims, v, bh, dkv))
        exps = sum(t for key, t in terms.items() if key.startswith("mufu/"))
        terms.update(self.exp_fixup(exps))
        spill = self.fwd_spill_bytes(dims)
        if np.any(spill):
            # every thread reloads its spilled registers once per tile its CTA visits
            # (REFERENCE_FWD_SPILL_BYTES: the kernel's predicated head-dim loads;
            # bound_check_spill_bytes: FlexAttention's checked kernel by length class)
            terms[self.spill_term("fwd")] = bh * v.tiles * warps * 32 * spill
        uneven = self.uneven_head_dim_wavefronts("fwd", dims)
        if uneven:
            terms[UNEVEN_TERM] = (bh * v.tiles * warps * uneven
                                 * gpu.smem_bandwidth_bytes_per_clk_per_sm)
        persistent, lpt = self.fwd_scheduling(dims)
        tail = in_order_tail(run, grid, gpu.sm_count, ctas, dims.masked, lpt)
        # a CTA's edges: its Q tile and first K/V tile in, its O tile out
        edge = b_r * (e * dims.d + dims.e_o * dims.d_v) + ekv * b_c * dkv
        cost = KernelCost.of(
            f"{self.name}_fwd", terms, grid=grid, tiled=True, ctas_per_sm=ctas,
            edge_bytes=edge, persistent=persistent,
            gemms=self.fwd_gemms(dims, b_r, b_c, warps),
            warps_per_cta=warps, smem_bytes_per_cta=smem,
            registers_per_thread=self.registers(gpu, warps), tensor_dtype=self.mma_dtype(dims),
            tensor_family=self.tensor_family,
            overlap=self.overlap_groups("fwd", dims),
            pipeline=self.pipeline("fwd", gpu, resident_per_sm(grid, ctas, gpu), warps),
            bytes_in_flight=self.kv_in_flight(dims, b_c), exp_after=self.exp_after("fwd"),
            unit_edges_hidden=self.unit_edges_hidden("fwd"),
            ring_loads=self.ring_loads(dims, b_r, b_c),
            cuda_cores_in_turn=self.cuda_cores_in_turn(),
            tensor_issue_share=self.tensor_issue_share(gpu, resident_per_sm(grid, ctas, gpu)),
            spill_streams=self.spill_streams("fwd"),
            l2_request_seconds=self.tma_l2_seconds(dims, gpu, (
                (bh * q_rows, kd, dims.d, e),
                # paged K/V gathered without TMA: no TMA segments (kv_tma_segments)
                *(() if not self.kv_tma_segments(dims, b_c) else (
                    (kv_total / (ekv * dkv), kd, dims.d, ekv),
                    (kv_total / (ekv * dkv), kd_v, dims.d_v, ekv))))),
            launch={"tiles": bh * v.tiles, "masked_tiles": bh * v.masked_tiles,
                   "block_m": b_r, "block_n": b_c, "ctas_per_sm": ctas, "tail": tail,
                   "longest_first": bool(lpt),
                   **({"tile_note": note} if (note := self.fwd_tile_note(dims)) else {}),
                   "packed_heads": dims.group, **self._padded_head_dims(dims),
                   **({"keyless_ctas": bh * keyless} if some_keyless else {})},
        )
        return self.mma_shape(cost.padded(tail, fixed=self._fwd_row_work(dims, q_rows)), gpu)

    def exits_keyless_tiles(self) -> bool:
        """Whether a forward CTA whose query rows all see no key returns before loading Q
        (writing zero O and +inf logsumexp). False here: FlexAttention's and Triton's
        templates load Q before their (empty) key loop, and FA3's persistent scheduler
        hands such tiles out as units (ASSUMED: their cost kept as modelled)."""
        return False

    def keyless_q_tiles(self, dims: Dims, b_r):
        """Query tiles per (batch, head) that see no key and exit early
        (:meth:`exits_keyless_tiles`): under a causal mask or a window's right side
        ``right``, positions ``p < P − N_k − right`` see no key (``P`` positions, bottom-right
        alignment), so the first ``⌊(P − N_k − right) · g / B_r⌋`` tiles of the
        ``N_q = P · g`` rows (``g`` query heads packed per K/V head, 1 unpacked; as
        ``base.rows_read`` for ``g = 1``), at most ``T_r − 1``; 0 otherwise. Numbers,
        arrays (sweeps) or sympy expressions (closed forms)."""
        right = right_bound(dims)
        if not self.exits_keyless_tiles() or right is None:
            return 0
        positions, n_k = dims.mask_lengths()     # the call's own, also on whole tiles
        keyless_rows = maximum(positions - n_k - right, 0) * dims.group
        keyless = minimum(fdiv(keyless_rows, b_r), cdiv(dims.N_q, b_r) - 1)
        if dims.causal or dims.symbolic:
            return keyless
        # flash-attn 2's mha_fwd drops a right bound of at least N_k (window_size_right
        # >= seqlen_k becomes -1): no row of that call exits (the mask it then runs is
        # base.effective_mask's, which keeps the bound up to N_q − 1: open, see the notes)
        return where(asarray(right) >= asarray(dims.N_k), 0, keyless)

    def _split_tail(self, main: KernelCost, dims: Dims, gpu: GPUSpec) -> KernelCost:
        """``main`` (the unsplit forward) with its causal tail factor taken for the grid it
        launches split (``Dims.splits`` CTAs per query tile): :func:`base.in_order_tail`'s
        longest-over-average ratio is the same for the split CTAs (each split takes an even
        share of its tile's key range; a causal tile's early splits are empty as its late
        ones are full), but the busiest SM runs more of them, so less of its work waits on
        the longest. The executed work is rescaled by the new factor over the old
        (``KernelCost.padded``: the once-per-row work left unscaled, as when it was built)."""
        old = main.launch.get("tail", 1)
        if type(old) in (int, float) and old == 1:
            return main
        ctas = maximum(main.ctas_per_sm, 1)
        before = cdiv(maximum(main.grid, 1), gpu.sm_count)
        after = cdiv(maximum(main.grid * dims.splits, 1), gpu.sm_count)
        ratio = (old - 1) * before / minimum(ctas, before)
        new = 1 + ratio * minimum(ctas, after) / after
        b_r = main.launch["block_m"]
        rows = dims.N_q - b_r * self.keyless_q_tiles(dims, b_r)
        rescaled = main.padded(new / old, fixed=self._fwd_row_work(dims, rows))
        return replace(rescaled, launch={**main.launch, "tail": new})

    def _fwd_row_work(self, dims: Dims, rows=None) -> dict:
        """Forward work done once per query row, whatever the keys it visits (O normalised,
        Q staged through shared memory): not scaled by the causal tail factor, which
        describes how the per-tile work spreads over the CTAs. ``rows``: the query rows of
        the CTAs that run (``None``: all ``N_q``; fewer where keyless tiles exit early,
        :meth:`keyless_q_tiles`)."""
        e, bh = dims.e, dims.B * dims.H
        rows = dims.N_q if rows is None else rows
        return {"fp32": sc.FMA_SLOTS * bh * rows * dims.d_v,
                "smem": 2 * e * bh * rows * dims.d}

    def exp_fixup(self, exps) -> dict:
        """The named terms of the range guard around ``exps`` exps in a build without fast
        math (``fast_math=False``; FMA-pipe slots and ALU ops), else none."""
        if self.fast_math:
            return {}
        return {"fp32/exp range guard": sc.FMA_SLOTS * sc.EXP_FIXUP_FMA_OPS * exps,
                "alu/exp range guard": sc.EXP_FIXUP_ALU_OPS * exps}

    def _fwd_smem(self, dims: Dims, v, b_r, warps) -> dict:
        """Forward shared-memory traffic as named terms: Q once into shared memory; each K/V
        tile written once (cp.async) and read by every warp (split-Q: each warp needs all of
        K_j, V_j). A kernel that issues WGMMA (Triton on Hopper) reads its shared-memory
        operands once per warpgroup (:func:`~perfsim.algorithms.common.wgmma_operand_reads`):
        each warpgroup's K and V tiles, and Q with every tile (``Q Kᵀ`` with both operands
        in shared memory; ``P V`` takes P from registers)."""
        e, bh, dkv = dims.e, dims.B * dims.H, dims.d + dims.d_v
        kv = dims.e_kv * bh * v.q_outer_cols * dkv
        terms = {"smem_write/Q": e * bh * dims.N_q * dims.d, "smem_write/K,V": kv}
        if self.tensor_family == "mma_sync":
            terms.update({"smem_read/Q": e * bh * dims.N_q * dims.d,
                          "smem_read/K,V (every warp)": warps * kv})
        else:
            q, k, v_ = self._fwd_operand_bytes(dims, v, b_r, warps)
            terms.update({"smem_read/Q (per tile, SS)": q,
                          "smem_read/K,V (every warpgroup)": k + v_})
        return terms

    def _fwd_operand_bytes(self, dims: Dims, v, b_r, warps) -> tuple:
        """Shared-memory operand bytes of the forward's WGMMAs: ``(Q, K, V)`` — Q's tile rows
        with every tile (``Q Kᵀ`` reads both operands from shared memory), each K and V tile
        once per issuing warpgroup (``P V`` takes P from registers)."""
        groups = self.fwd_operand_groups(warps, b_r)
        cols = dims.e_kv * dims.B * dims.H * v.q_outer_cols * groups
        return dims.e * dims.B * dims.H * v.tiles * b_r * dims.d, cols * dims.d, cols * dims.d_v

    def fwd_kv_stages(self) -> int:
        """K/V tiles the forward's shared memory holds at once, for its occupancy: one K and
        one V buffer (flash-attn 2's ``Kernel_traits::kSmemSize``)."""
        return 1

    def splits_sector_rows(self) -> bool:
        """Whether the kernels' 16-byte row copies fetch a sector per copy on rows that start
        half a sector in (:func:`sector_split_factor`; numeric shapes only, the closed forms
        of ``perfsim.symbolic`` leave it out): not for these kernels (TMA or flash-attn's
        copies, not profiled)."""
        return False

    def kv_tma_segments(self, dims: Dims, b_c) -> bool:
        """Whether the forward's K/V rows reach the L2 as TMA row segments
        (:meth:`tma_l2_seconds`; 0 s for kernels that use no TMA): a contiguous cache, or a
        paged one whose page is one key tile (flash_attn.cute's flash_fwd_sm90.py: TMA for
        "paged with page_size == n_block_size", else the cp.async path; flash-attn 3's own
        rule in ``FA3.kv_tma_segments``)."""
        return not dims.page_size or dims.page_size == b_c

    def tma_l2_seconds(self, dims: Dims, gpu: GPUSpec, loads) -> object:
        """``KernelCost.l2_request_seconds`` of a kernel whose ``loads`` are ``(rows, tile
        row elements, tensor row elements, element bytes)``: 0 here — flash-attn 2's and
        Triton's copies are not TMA row segments (FA3 overrides it)."""
        return 0

    def _fwd_smem_bytes(self, dims: Dims, gpu: GPUSpec, b_r, b_c, kd, kd_v):
        """Shared memory per forward CTA: the Q tile and :meth:`fwd_kv_stages` K/V tiles,
        fewer K/V stages where that many do not fit the GPU's per-block limit (as Triton's
        pipeliner is given fewer stages on smaller GPUs; ASSUMED: the stage counts were read
        for sm_90 only), at least one."""
        stages = self.fwd_kv_stages()
        smem = fwd_smem_bytes(dims.e, b_r, b_c, stages, kd, kd_v, dims.e_kv)
        if not dims.symbolic:
            for fewer in range(stages - 1, 0, -1):
                smem = where(smem > gpu.smem_bytes_per_block,
                             fwd_smem_bytes(dims.e, b_r, b_c, fewer, kd, kd_v, dims.e_kv), smem)
        return smem

    def fwd_gemms(self, dims: Dims, b_r, b_c, warps) -> tuple:
        """``KernelCost.gemms`` of the forward: each GEMM's tensor term and the shared-memory
        operand bytes its WGMMAs read per FLOP, from the tile (Q's ``B_r`` rows with every
        tile and each K tile once per issuing warpgroup for ``Q Kᵀ``; each V tile once per
        warpgroup for ``P V``, P from registers); none for ``mma.sync``, whose ``ldmatrix``
        reads the warp cycle times."""
        if self.tensor_family == "mma_sync":
            return ()
        groups = self.fwd_operand_groups(warps, b_r)
        return (("tensor/S=QKᵀ", (dims.e * b_r + dims.e_kv * groups * b_c) / (2 * b_r * b_c)),
                ("tensor/O+=PV", dims.e_kv * groups / (2 * b_r)))

    def fwd_operand_groups(self, warps, rows):
        """Warpgroups that issue the forward's WGMMAs on ``rows`` query rows: all the CTA's
        warps in groups of four (Triton's kernels have no producer warpgroup), at most one
        per ``WGMMA_ROWS`` rows; one for tcgen05 (a single thread issues the CTA's MMA)."""
        if self.tensor_family == "tcgen05":
            return 1
        return max(min(warps // WARPS_PER_WARPGROUP, cdiv(rows, WGMMA_ROWS)), 1)

    def bwd_operand_groups(self, warps, b_r, b_c):
        """Warpgroups that issue the backward's WGMMAs (as :meth:`fwd_operand_groups`, on the
        larger tile side)."""
        return self.fwd_operand_groups(warps, max(b_r, b_c))

    def mask_terms(self, phase: str, dims: Dims, masked_elements) -> dict:
        """The causal or window mask on ``masked_elements`` score elements (of the tiles the
        mask crosses): ``softmax_costs.MASK_CENSUS``'s ALU and FMA-pipe instructions per
        element where it has a census of the code that runs (``bound_checks``), for this
        phase and the compiled head dim, else ``MASK_ALU_OPS_PER_SCORE`` ALU instructions
        (ASSUMED; also for symbolic dims, whose head dim is a symbol: ``perfsim.symbolic``).
        Works on arrays of elements (the head dims are one value per call)."""
        census = sc.MASK_CENSUS.get(self.bound_checks, {}).get(phase)
        if not census or dims.symbolic:
            return {"alu/mask": masked_elements * sc.MASK_ALU_OPS_PER_SCORE}
        compiled = max(self.kernel_head_dims(dims))
        if compiled > census[-1][0]:
            return {"alu/mask": masked_elements * sc.MASK_ALU_OPS_PER_SCORE}
        alu, fma = next(ops for upto, ops in census if compiled <= upto)
        return {"alu/mask": masked_elements * alu,
                "fp32/mask (census)": masked_elements * sc.FMA_SLOTS * fma}

    def bound_check_terms(self, phase: str, dims: Dims, elems, b_r, b_c) -> dict:
        """The bound checks every tile pays in the kernel variant that checks them:
        ``softmax_costs.BOUND_CHECKS[bound_checks][phase]`` ALU and FMA-pipe instructions per
        score element (0 where the unchecked variant runs; works on arrays). Empty for
        ``bound_checks="none"``.

        Which variant runs: with ``bound_check_unless_multiple`` (FlexAttention's
        ``IS_DIVISIBLE``, cuDNN), the checked one unless the call's query positions and keys
        are multiples of it; otherwise (flash-attn 2) unless the rows and keys fill whole
        tiles, and flash-attn 2's backward also runs it for a variable-length batch, a local
        window, a head dim other than the compiled one, or a compiled head dim above 128
        (``flash_bwd_launch_template.h``: its unchecked instantiation needs ``is_even_MN``,
        ``is_even_K``, ``!Is_local`` and ``kHeadDim <= 128``)."""
        if self.bound_checks == "none" or dims.symbolic:
            return {}
        alu, fma = sc.BOUND_CHECKS[self.bound_checks][phase]
        if phase == "fwd" and self.bound_check_classes:
            alu, fma, _ = self._by_length_class(dims)
        # the call's own lengths and head dim, also when the executed work is counted on
        # whole tiles at the compiled head dim
        n_q, n_k, d_call, _ = dims.unpadded or (dims.N_q, dims.N_k, dims.d, dims.d_v)
        every = self.bound_check_unless_multiple
        if every:
            checked = self._off_multiple(dims, every)
        else:
            checked = (n_q % b_r != 0) | (n_k % b_c != 0)
        if self.bound_checks == "flash-attn" and phase == "bwd":
            compiled = max(self.kernel_head_dims(dims))
            local = any(side is not None for side in dims.window)
            checked = checked | (dims.varlen or local or compiled > 128 or d_call != compiled)
        # which terms exist is decided by the figures, not the call's lengths (an array of
        # lengths gives arrays of figures)
        some_alu, some_fma = alu, fma
        if phase == "fwd" and self.bound_check_classes:
            some_alu = any(row[1] for row in self.bound_check_classes)
            some_fma = any(row[2] for row in self.bound_check_classes)
        out = {}
        if some_alu:
            out["alu/bound checks, every tile"] = elems * alu * checked
        if some_fma:
            out["fp32/bound checks, every tile"] = elems * sc.FMA_SLOTS * fma * checked
        return out

    def _by_length_class(self, dims: Dims):
        """``(ALU, FMA, spill)`` of :attr:`bound_check_classes` for the call's lengths (its
        query positions and keys; the class of the smaller power-of-two divisor of the two,
        ASSUMED: profiled with ``N_q = N_k``). Works on arrays."""
        positions, n_k = self._call_lengths(dims)
        even = (positions % 2 == 0) & (n_k % 2 == 0)
        by16 = (positions % 16 == 0) & (n_k % 16 == 0)
        (_, *a16), (_, *a2), (_, *a1) = self.bound_check_classes
        if isinstance(by16, (bool, np.bool_)):
            return a16 if by16 else a2 if even else a1
        # arrays (sweeps, and the compiled engine's traced arrays: numpy.where traces)
        return tuple(np.where(by16, c16, np.where(even, c2, c1))
                     for c16, c2, c1 in zip(a16, a2, a1))

    def bound_check_spill_bytes(self, dims: Dims):
        """Local bytes a forward thread reloads per K/V step because the checked variant
        spills (:attr:`bound_check_classes`; 0 where the unchecked variant runs or no classes
        are given). Works on arrays."""
        if not self.bound_check_classes or dims.symbolic:
            return 0.0
        # the field's validator makes sure bound_check_unless_multiple is set
        checked = self._off_multiple(dims, self.bound_check_unless_multiple)
        return self._by_length_class(dims)[2] * checked

    @staticmethod
    def _off_multiple(dims: Dims, every: int):
        """Whether the call's query positions or keys are not multiples of ``every``: the
        framework's test for its checked kernel, on the sequence lengths (packed rows are
        positions times the query heads per K/V head). Works on arrays."""
        positions, n_k = FusedAttention._call_lengths(dims)
        return (positions % every != 0) | (n_k % every != 0)

    @staticmethod
    def _call_lengths(dims: Dims):
        """The call's query positions and keys, before whole-tile padding (packed rows are
        positions times the query heads per K/V head): what frameworks test lengths on."""
        n_q, n_k = dims.unpadded[:2] if dims.unpadded else (dims.N_q, dims.N_k)
        return n_q // max(dims.group, 1), n_k

    def address_terms(self, phase: str, dims: Dims, elems) -> dict:
        """The integer and predicate arithmetic of ``address_arithmetic``'s census:
        ``softmax_costs.ADDRESS_ARITHMETIC`` ALU and FMA-pipe lane instructions per score
        element of the padded tiles (``elems``), by the kernel for ``max(d, d_v)`` (the
        widest kernel's when a head dim is a free symbol). Empty for ``"none"``."""
        if self.address_arithmetic == "none":
            return {}
        table = sc.ADDRESS_ARITHMETIC[self.address_arithmetic][phase]
        key = max(table)
        if all(getattr(x, "is_number", True) for x in (dims.d, dims.d_v)):
            hdim = max(dims.d, dims.d_v)
            key = min((k for k in table if k >= hdim), default=key)
        alu, fma = table[key]
        return {"alu/integer and predicate arithmetic (census)": elems * alu,
                "fp32/integer multiply-adds (census)": elems * sc.FMA_SLOTS * fma}

    def mma_shape(self, cost: KernelCost, gpu: GPUSpec) -> KernelCost:
        """``cost`` as its MMA instruction shape runs it on ``gpu``: unchanged here (FA2's
        ``mma_k`` option stretches the tensor-pipe work of ``m16n8k8``)."""
        return cost

    def _backward(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        launch = self.bwd_launch(dims, gpu)
        b_r, b_c, warps, atoms = launch.block_m, launch.block_n, launch.warps, launch.atoms
        e, bh = dims.e, dims.B * dims.H
        d, d_v = dims.d, dims.d_v
        kd, kd_v = self.kernel_head_dims(dims)
        rows = bh * dims.N_q
        # A kernel with a dQ pass (Triton's tutorial, FlexAttention) writes dQ from its own
        # loop in the input dtype: no fp32 accumulator to zero, add into or convert (their
        # Nsight Compute kernel lists: a delta preprocess and the main kernel only).
        again = 1 if self.recomputes_dq() else 0
        # The fp32 dQ accumulator is as wide as the compiled kernel's head dim: the kernel adds
        # whole B_r x kd tiles into it (flash-attn 2's unpredicated ``atomicAdd`` loop over
        # ``acc_dq``, csrc/flash_attn/src/flash_bwd_kernel.h; FA3's and flash_attn.cute's TMA
        # bulk reduction of a ``tile_m x tile_hdim`` fp32 tile, flash_bwd_sm90.py, into a
        # ``dq_accum`` allocated at ``head_dim_rounded``, interface.py), so its zeroing, its
        # adds and its read-back are counted at kd, not at the call's d.
        pre = bwd_preprocess_kernel(dims, self.name, zero_dq=not again, dq_width=kd)
        # Q and dO tiles, K_j/V_j resident, P and dS staged in shared memory (the
        # reference's kernel traits: BwdLaunch.smem_bytes)
        smem = self.bwd_smem_bytes(launch, dims)
        if (self.bwd_smem_is_stand_in() and not dims.symbolic
                and not launch.no_double_buffer and smem > gpu.smem_bytes_per_block):
            # a kernel that is not flash-attn 2's code, with no compiled figure for this GPU,
            # keeps one Q/dO stage where two do not fit (as Triton's pipeliner does with fewer
            # stages; ASSUMED)
            launch = launch._replace(no_double_buffer=True)
            smem = self.bwd_smem_bytes(launch, dims)
        try:
            ctas = resident_ctas(gpu, smem, warps, self.bwd_registers(gpu, warps))
        except InfeasibleError as exc:
            if not self.bwd_smem_is_stand_in():
                tile = self._tile_context("backward", b_r, b_c, max(kd, kd_v),
                                          BWD_TILE_OPTIONS)
                raise InfeasibleError(f"backward: {exc} ({tile})") from None
            raise InfeasibleError(
                f"backward: {exc} (the {b_r} x {b_c} tile's shared memory taken as flash-attn "
                "2's layout at one Q/dO stage: ASSUMED, this kernel's own was not compiled "
                f"for {gpu.id})") from None
        v = dims.tile_visits(b_r, b_c)
        # A dQ pass walks query blocks of B_c rows in steps of B_r keys (BLOCK_M2 = BLOCK_N1,
        # BLOCK_N2 = BLOCK_M1: the tutorial's and FlexAttention's). FlexAttention's grid
        # (dq_programs, which implies the pass) holds dK/dV programs per (batch, K/V head),
        # looping over the group's query heads, then dQ programs per (batch, query head).
        programs = self.runs_dq_programs()
        kv_heads = dims.B * dims.H_kv if programs else bh
        v_dq = dims.tile_visits(b_c, b_r) if again else None
        if programs:
            # A dQ program of rows no key sees loads its Q and dO, stores a zero dQ and
            # leaves: it is launched, so it counts in the grid's waves of edges, but it does
            # no tile work, so not in the tail (two_kind_tail) nor among the programs that
            # share an SM's cycle (`working`). Hold-outs 48 and 49 (rows of N_q / N_k up to
            # 8) read 10 % too fast with such programs left out of the grid altogether.
            kinds = flex_program_kinds(dims, v, v_dq, b_c)
            kv_programs, n_dq = kinds[0][0], bh * v_dq.q_tiles
            grid = kv_programs + n_dq
            working = kv_programs + kinds[1][0]
        else:
            grid = working = v.kv_tiles * bh
        # xFormers' key splits: CTAs per (batch, head) along the keys, each walking key blocks
        # split, split + splits, ... (None: one CTA per key block)
        splits = None if programs else self.bwd_splits(dims, v, b_c, bh)
        if splits is not None:
            grid = working = splits * bh
        q_side = bh * v.kv_outer_rows          # (query row, key tile) pairs
        q_total = q_side * (e * (d + d_v) + 2 * STAT_BYTES)   # Q, dO, LSE, D
        q_compulsory = bh * rows_read(dims, b_r) * (e * (d + d_v) + 2 * STAT_BYTES)
        # The key-tile CTAs of one head start together and walk the query tiles in the same
        # order, so their Q/dO re-reads and their dQ atomics hit the few query tiles in flight
        # (as the forward's K/V): two query tiles per head in flight (base.lockstep_window),
        # counted here in rows.
        resident = minimum(gpu.sm_count * ctas, working)
        window = lockstep_window(resident, v.kv_tiles, b_r)
        q_hbm, q_hits = l2_filtered(q_total, q_compulsory,
                                    window * (e * (d + d_v) + 2 * STAT_BYTES),
                                    gpu, gpu.l2_usable_fraction)
        # K/V tiles no query's window reaches are not read; their dK/dV are still written
        # (zeros: flash-attn's backward stores them and returns)
        kv_read = e * kv_heads * dims.kv_rows_read(b_c) * (d + d_v)
        kv_hbm, kv_hits = kv_read, 0
        if not programs:
            # GQA: the query heads of one K/V head read the same K/V tiles. Their CTAs are
            # consecutive heads of the grid (flash-attn's ``(num_n_blocks, b, h)``), so head
            # h + 1's CTA re-reads the tile head h's loaded ``kv_tiles`` launches earlier;
            # those re-reads hit L2 while the K/V of the K/V heads the resident CTAs span
            # stay there (l2_filtered's rule, as the forward's re-reads; a fresh reviewer's
            # report: MQA's backward read K/V from HBM once per query head)
            # flash-attn 2's grid runs every batch of a head before the next head (blockIdx
            # (n, b, h), flash_bwd_launch_template.h): head h + 1 re-reads a K/V tile B
            # key-tile rows later, so the K/V of all B batches of the K/V heads spanned must
            # stay (bwd_batch_before_heads)
            per_kv_head = e * dims.kv_rows_read(b_c) * (d + d_v)
            batches = dims.B if self.bwd_batch_before_heads() else 1
            heads_live = cdiv(resident, batches * v.kv_tiles) + 1
            kv_live = (cdiv(heads_live, dims.H // dims.H_kv) + 1) * batches * per_kv_head
            kv_hbm, kv_hits = l2_filtered(kv_read, dims.B * dims.H_kv * per_kv_head, kv_live,
                                          gpu, gpu.l2_usable_fraction)
        if again:
            # the dQ pass walks K/V per query tile as a forward does (its programs of one
            # head in lockstep: base.lockstep_window) and re-reads its query tile's Q, dO,
            # LSE and D, which the dK/dV pass of the same kernel reads too (ASSUMED served
            # by L2: Nsight Compute has FlexAttention's backward at 216-222 MB of DRAM at
            # d <= 128, B = 1, H·d = 4096, N = 4096: Q, dO, K, V once, dK, dV, dQ written)
            kv_pass = e * bh * v_dq.q_outer_cols * (d + d_v)
            kv_all, _ = l2_filtered(kv_pass + kv_read, kv_read,
                                    lockstep_window(resident, v_dq.q_tiles,
                                                    e * b_c * (d + d_v)),
                                    gpu, gpu.l2_usable_fraction)
            # Rows no key sees (causal, N_q > N_k) were never loaded by the dK/dV pass: the
            # dQ pass still loads them (FlexAttention's dQ program loads its Q and dO block
            # before its key loop), from HBM.
            seen = bh * rows_read(dims, b_r)
            row_bytes = e * (d + d_v) + 2 * STAT_BYTES
            dq_terms = {"hbm_read/K,V (dQ pass)": kv_all - kv_read,
                        "l2_hit/K,V (dQ pass)": kv_pass + kv_read - kv_all,
                        "l2_hit/Q,dO,LSE,D (dQ pass)": seen * row_bytes,
                        "hbm_read/Q,dO,LSE,D of rows no key sees (dQ pass)":
                            (rows - seen) * row_bytes,
                        "hbm_write/dQ": e * rows * d}
        else:
            # fp32 dQ adds are resolved in L2; the accumulator crosses HBM once each way
            adds = q_side * kd
            # (the rows some key tile adds into: rows_read, as Q's compulsory reads)
            dq_read, dq_write, dq_hits = accumulator_traffic(
                adds, bh * rows_read(dims, b_r) * FP32_BYTES * kd, window * FP32_BYTES * kd,
                gpu)
            if self.reduces_dq():
                dq_terms = {"atomics/dQ (fp32)": adds, "hbm_read/dQ accumulator": dq_read,
                            "hbm_write/dQ accumulator": dq_write, "l2_hit/dQ atomics": dq_hits}
            else:
                # loads and stores of the accumulator: the same bytes, no reductions
                dq_terms = {"hbm_read/dQ accumulator": dq_read,
                            "hbm_write/dQ accumulator": dq_write,
                            "l2_hit/dQ accumulator (loads and stores)": dq_hits}
        kv_written = e * kv_heads * dims.N_k * (d + d_v)
        accumulate = not programs and self.accumulates_gqa_dkdv()
        if accumulate:
            # GQA: fp32 reduce-adds into the K/V heads' accumulators instead (flash-attn 3,
            # flash_attn.cute: base.gqa_dkdv_accumulator); their live set is that of the K/V
            # reads above, the K/V heads of the query heads the resident CTAs span
            dkv_terms, dkv_before, dkv_after = gqa_dkdv_accumulator(
                dims, self.name, b_c, v.kv_tiles * b_c, (kd, kd_v), dims.kv_rows_read(b_c),
                cdiv(heads_live, dims.H // dims.H_kv) + 1, gpu)
            kv_written = kv_written * where(dims.H > dims.H_kv, 0, 1)
        elems = bh * v.elements
        # per score, once per pass (twice with a dQ pass that recomputes S and dP)
        per_pass = backward_softmax_terms(dims, v, bh * v.masked_tiles * b_r * b_c,
                                          self.address_arithmetic)
        per_pass.update(self.exp_fixup(sum(t for key, t in per_pass.items()
                                           if key.startswith("mufu/"))))
        twice = self.sdp_issued_twice(dims)
        # the dQ pass's recomputation and a second warpgroup's copy of the S and dP GEMMs
        extra = []
        if again:
            extra.append(("tensor/S=QKᵀ again (dQ pass)", "tensor/dP=dO·Vᵀ again (dQ pass)"))
        if twice:
            extra.append(("tensor/S=QKᵀ (second consumer warpgroup)",
                          "tensor/dP=dO·Vᵀ (second consumer warpgroup)"))
        if self.tensor_family == "mma_sync":
            # the extra S and dP GEMMs at the five GEMMs' mean reads (an approximation)
            reads = (self.bwd_operand_reads(b_r, b_c, d, d_v, warps, atoms)
                     * (5 + 2 * len(extra)) / 5)
            gemms = ()
        else:
            # WGMMA: each GEMM's own reads, the extra S and dP GEMMs included, the same
            # elements KernelCost.gemms times on the shared-memory port
            per_gemm = wgmma_bwd_operand_elements(b_r, b_c, d, d_v,
                                                  self.bwd_operand_groups(warps, b_r, b_c))
            reads = sum(per_gemm.values()) + len(extra) * (
                per_gemm["tensor/S=QKᵀ"] + per_gemm["tensor/dP=dO·Vᵀ"])
            gemms = self.bwd_gemms(dims, b_r, b_c, per_gemm, extra)
        operand_reads = e * bh * v.tiles * reads
        staging = self.dq_staging(dims, v, b_r)
        terms = {
            **backward_gemm_terms(elems, d, d_v),
            # a second consumer warpgroup that issues S and dP again also recomputes their
            # softmax (cuDNN's head-dim-192/256 census: 2 MUFU per score, 1 below)
            **{key: value * (1 + again + twice) for key, value in per_pass.items()},
            "hbm_read/K,V": kv_hbm, "l2_hit/K,V re-read by the query heads of a K/V head":
                kv_hits, "hbm_read/Q,dO,LSE,D": q_hbm,
            "hbm_write/dK,dV": kv_written, "l2_hit/Q,dO,LSE,D re-read": q_hits, **dq_terms,
            **(dkv_terms if accumulate else {}),
            # operands of the five MMAs read from shared memory; Q/dO tiles, P and dS written
            "smem_read/MMA operands": operand_reads,
            "smem_write/Q,dO": e * q_side * (d + d_v), "smem_write/P,dS": e * 2 * elems}
        for s_term, dp_term in extra:
            terms[s_term] = 2 * elems * d
            terms[dp_term] = 2 * elems * d_v
        if self.splits_sector_rows() and not dims.symbolic:
            # Q/dO rows per (query row, key tile), K/V rows once per key block, and the
            # dQ pass's own: the sectors half-sector rows fetch beyond their bytes
            row_loads = q_side + bh * dims.kv_rows_read(b_c)
            if again:
                row_loads = row_loads + rows + bh * v.q_outer_cols
            extra = half_sector_bytes(e, row_loads, row_loads, d, d_v)
            if np.any(extra):
                terms["l2_hit/Q,dO,K,V half-sector rows (16-byte copies)"] = extra
        terms.update(self.bound_check_terms("bwd", dims, elems, b_r, b_c))
        terms.update(self.address_terms("bwd", dims, elems))
        if not isinstance(staging, (int, float)) or staging:
            terms["smem_read/dQ partial (TMA reduce)"] = staging
            terms["smem_write/dQ partial (TMA reduce)"] = staging
        spill = self.spill_reload_bytes(dims)
        if spill:
            # every thread reloads its spilled dK/dV accumulators once per (query tile, key
            # tile) its CTA visits (the dQ pass holds one accumulator and is taken not to spill)
            # — per loop step: a kernel that walks its masked tiles in steps of B_r / k rows
            # (bwd_masked_row_split = k) takes k steps for each
            steps = v.tiles + (self.masked_row_split() - 1) * v.masked_tiles
            terms[self.spill_term("bwd")] = bh * steps * warps * 32 * spill
        uneven = self.uneven_head_dim_wavefronts("bwd", dims)
        if uneven:
            terms[UNEVEN_TERM] = (bh * v.tiles * warps * uneven
                                 * gpu.smem_bandwidth_bytes_per_clk_per_sm)
        # a CTA's edges: its K/V block and first Q, dO, LSE and D tiles in, dK and dV out
        edge = 2 * e * b_c * (d + d_v) + b_r * (e * (d + d_v) + 2 * STAT_BYTES)
        if again:
            # ... and its dQ pass's: a query block as wide as the key block (Q, dO, LSE, D
            # in, dQ out) and its first K/V step (the tutorial's BLOCK_M2 = BLOCK_N1 and
            # BLOCK_N2 = BLOCK_M1, as FlexAttention's: ``dq_programs``)
            dq_edge = b_c * (e * (2 * d + d_v) + 2 * STAT_BYTES) + e * b_r * (d + d_v)
            # in programs of their own, each program has one kind's edges: their mean over
            # the grid (a dQ program of rows no key sees skips its first K/V step: taken as
            # the others, a small share of its edge)
            edge = ((kv_programs * edge + n_dq * dq_edge) / grid if programs
                    else edge + dq_edge)
        # The key-tile CTAs of a masked backward differ in length (causal: key tile 0 is seen
        # by every query row) and start in index order — flash-attn 2's grid, Triton's,
        # flash_attn.cute's SingleTileScheduler (its LPT scheduler is for the deterministic
        # backward only, flash_bwd_sm90.py), cuDNN's persistent units — so the busiest SM
        # ends late as in the forward (base.in_order_tail; FA4's backward takes the same).
        # Nsight Compute on the H200 (probes/ncu/summary-short-shapes.json): cuDNN's causal
        # backward at B = 1, H = 32, N = 1024 keeps its busiest SM active 1.47 times the mean.
        persistent, lpt = self.bwd_scheduling(dims)
        if programs:
            tail = two_kind_tail(*kinds, dims.B * dims.H_kv, grid, gpu.sm_count, ctas)
        else:
            tail = in_order_tail(v, grid, gpu.sm_count, ctas, dims.masked, lpt,
                                 columns=True)
        step_waits, per_cta = None, 1          # key blocks per CTA
        if splits is not None:
            # a CTA of several key blocks: the busiest CTA walks ⌈kb / splits⌉ of them, the mean
            # kb / splits (ASSUMED: their masked lengths mix, so the causal tail is not added
            # again); its edges (K/V in, dK/dV out, the first Q/dO tiles) come once per block
            per_cta = cdiv(v.kv_tiles, splits)
            tail = where(per_cta > 1, per_cta * splits / v.kv_tiles, tail)
            edge = edge * per_cta
        waits, wait_bytes = self.bwd_step_wait_counts(dims, b_r, b_c, kd, kd_v, splits,
                                                      v.kv_tiles)
        if not (isinstance(waits, (int, float)) and waits == 0):
            # per CTA: its (query tile, key tile) steps, the busiest's share (tail)
            steps = bh * v.tiles / grid * tail
            step_waits = (steps * waits, steps * wait_bytes)
        main = KernelCost.of(
            f"{self.name}_bwd", terms, grid=grid, tiled=True, ctas_per_sm=ctas,
            edge_bytes=edge, edge_phases=(1 if programs else 1 + again) * per_cta,
            step_waits=step_waits,
            persistent=persistent,
            # a persistent backward's next K/V block waits for this one's dK/dV epilogue
            # (they share shared memory: timing.persistent_unit_seconds)
            unit_edges_exposed=persistent,
            gemms=gemms,
            # Q and dO at every (query row, key tile) pair, K and V once
            l2_request_seconds=self.tma_l2_seconds(dims, gpu, (
                (q_side, kd, d, e), (q_side, kd_v, d_v, e),
                (bh * dims.kv_rows_read(b_c), kd, d, dims.e_kv),
                (bh * dims.kv_rows_read(b_c), kd_v, d_v, dims.e_kv))),
            warps_per_cta=warps, smem_bytes_per_cta=smem,
            registers_per_thread=self.bwd_registers(gpu, warps), tensor_dtype=dims.dtype,
            tensor_family=self.tensor_family,
            overlap=self.overlap_groups("bwd", dims),
            pipeline=self.pipeline("bwd", gpu, resident_per_sm(working, ctas, gpu), warps),
            cuda_cores_in_turn=self.cuda_cores_in_turn(),
            tensor_issue_share=self.tensor_issue_share(
                gpu, resident_per_sm(working, ctas, gpu)),
            spill_streams=self.spill_streams("bwd"),
            launch={"tiles": bh * v.tiles, "block_m": b_r, "block_n": b_c, "ctas_per_sm": ctas,
                    "tail": tail,
                    **({"program_kinds": (*kinds, dims.B * dims.H_kv)} if programs else {}),
                    # xFormers' key splits (bwd_splits), for explain()
                    **({"key_splits": splits} if splits is not None else {}),
                    **self._padded_head_dims(dims)},
        )
        out = [pre, self.mma_shape(main.padded(tail), gpu)]
        if self.prescales_k():
            k_elems = dims.B * dims.H_kv * dims.N_k * d
            out.insert(0, KernelCost.of(
                f"{self.name}_bwd_scale_k",
                {"fp32/K · scale · log2(e)": sc.FMA_SLOTS * k_elems,
                 "hbm_read/K": dims.e_kv * k_elems, "hbm_write/scaled K": dims.e_kv * k_elems},
                grid=cdiv(k_elems, 1024), warps_per_cta=4))
        if not again:
            out.append(dq_convert_kernel(dims, self.name, dq_width=kd))
        if accumulate:
            out = [*dkv_before, *out, *dkv_after]
        elif not programs:
            out.extend(gqa_reduce_kernels(dims))
        return out

    def bwd_batch_before_heads(self) -> bool:
        """Whether the backward's grid launches every batch of a head before the next head
        (flash-attn 2: ``grid_n(num_n_block, b, h)``), rather than every head of a batch
        before the next batch (flash-attn 3's and flash_attn.cute's ``SingleTileScheduler``:
        (blocks, heads, batch); xFormers' (splits, heads, batch)). It sets how far apart the
        query heads of one K/V head re-read its K/V tiles. False here."""
        return False

    def accumulates_gqa_dkdv(self) -> bool:
        """Whether a GQA backward reduce-adds each query head's dK, dV in fp32 into
        accumulators at the K/V heads (flash-attn 3, flash_attn.cute:
        :func:`~perfsim.algorithms.base.gqa_dkdv_accumulator`) rather than writing them per
        query head for a separate sum (flash-attn 2's expand-then-sum,
        ``common.gqa_reduce_kernels``). False here: flash-attn 2 (``mha_bwd`` allocates
        ``dk_expanded``, ``dv_expanded`` at H heads and sums them over each group)."""
        return False

    def sdp_issued_twice(self, dims: Dims) -> int:
        """1 when each of two consumer warpgroups issues the whole S and dP GEMMs of a
        backward tile (their softmax work is not repeated), else 0: never for mma.sync
        kernels (FA3 sets it per head dim)."""
        return 0

    def dq_staging(self, dims: Dims, v, b_r):
        """Shared-memory bytes (each way) of staging dQ partials: none for flash-attn 2,
        whose warps add their dQ share to global memory from registers (``atomicAdd``)."""
        return 0

    def bwd_smem_bytes(self, launch, dims: Dims):
        """Shared memory per backward CTA (flash-attn 2's kernel traits, at the compiled
        kernel's head dims)."""
        return launch.smem_bytes(*self.kernel_head_dims(dims), dims.e)

    def bwd_operand_reads(self, b_r, b_c, d, d_v, warps, atoms=None):
        """Shared-memory operand reads (elements) of one backward tile's five GEMMs:
        ``mma.sync`` warps each load their own operands (:func:`bwd_operand_reads`); a kernel
        that issues WGMMA reads them once per issuing warpgroup
        (:func:`~perfsim.algorithms.common.wgmma_bwd_operand_elements`, with
        :meth:`bwd_operand_groups`)."""
        if self.tensor_family == "mma_sync":
            return bwd_operand_reads(b_r, b_c, d, d_v, warps, atoms)
        return sum(wgmma_bwd_operand_elements(
            b_r, b_c, d, d_v, self.bwd_operand_groups(warps, b_r, b_c)).values())

    def bwd_gemms(self, dims: Dims, b_r, b_c, elements: dict, extra) -> tuple:
        """``KernelCost.gemms`` of a WGMMA backward: the five GEMMs' tensor terms and the
        shared-memory operand bytes per FLOP of their ``elements`` per tile
        (:func:`~perfsim.algorithms.common.wgmma_bwd_operand_elements`), and the S and dP
        GEMMs again under each term pair of ``extra`` (the dQ pass's recomputation, a second
        warpgroup's copy)."""
        per_flop = {term: dims.e * elements[term] / (2 * m * n * k)
                    for term, shape in BWD_GEMMS
                    for m, n, k in [shape(b_r, b_c, dims.d, dims.d_v)]}
        out = list(per_flop.items())
        for s_term, dp_term in extra:
            out += [(s_term, per_flop["tensor/S=QKᵀ"]), (dp_term, per_flop["tensor/dP=dO·Vᵀ"])]
        return tuple(out)

    def memory_bytes(self, dims: Dims, gpu: GPUSpec):
        """Peak footprint (bytes): ``common.fused_memory_bytes`` with the fp32 dQ accumulator
        as wide as the compiled kernel's head dim (as :meth:`_backward` zeroes and reduces
        into it), without it for a backward with a dQ pass (:meth:`recomputes_dq`: dQ is
        written in the input dtype), with the scaled copy of K of :meth:`prescales_k`, and under
        GQA with the fp32 dK, dV accumulators at the K/V heads of :meth:`accumulates_gqa_dkdv`
        (:func:`~perfsim.algorithms.base.gqa_dkdv_accumulator`; their rounding of the keys to
        the key block, under one tile per K/V head, left out)."""
        total = fused_memory_bytes(dims)
        if dims.bwd:
            accumulator = FP32_BYTES * dims.B * dims.H * dims.N_q
            total = total + accumulator * (
                -dims.d if self.recomputes_dq() else self.kernel_head_dims(dims)[0] - dims.d)
        if dims.bwd and self.accumulates_gqa_dkdv() and not self.runs_dq_programs():
            total = total + gqa_accumulator_bytes(dims, self.kernel_head_dims(dims))
        if dims.bwd and self.prescales_k():
            total = total + dims.e_kv * dims.B * dims.H_kv * dims.N_k * dims.d
        return total


class FA2(FusedAttention):
    """FlashAttention-2 options (defaults: the flash-attn 2 reference launch configuration).

    Args:
        block_m: query tile rows ``B_r`` (forward); ``None`` = reference default per head dim.
        block_n: key tile rows ``B_c`` (forward).
        warps: warps per CTA (forward).
        bwd_block_m, bwd_block_n, bwd_warps: the same for the backward kernel.
        tensor_family: tensor-core instructions issued; flash-attn 2 uses ``mma_sync`` on
            every GPU (FA3 paper §1: ~35 % of H100 peak). Triton picks ``wgmma`` on Hopper.
        registers_per_thread: for occupancy.
        bwd_registers_per_thread: the backward kernel's, where it differs (``None``: the
            same).
        lpt_scheduling: causal query tiles launched longest first; flash-attn 2 and Triton
            launch them in index order (short to long), the default.
        dq_recompute: the backward computes dQ in a second pass over the tiles that
            recomputes ``S = Q Kᵀ``, ``P`` and ``dP = dO Vᵀ`` (Triton's fused-attention
            tutorial: a dK/dV loop, then a dQ loop), instead of accumulating dQ alongside dK
            and dV: two more GEMMs and the exps again per tile; the operand reads grow in the
            same proportion (7/5, an approximation).
        dq_programs: with ``dq_recompute``, the dQ pass runs in programs of its own rather
            than after the dK/dV loop of the same CTA: FlexAttention's backward grid
            (``flex_attention_backward_grid``, torch/_inductor/kernel/flex/flex_attention.py)
            is ``(⌈N_k / BLOCK_N1⌉ + (H / H_kv) · ⌈N_q / BLOCK_M2⌉, B, H_kv)``; program ids
            below ``⌈N_k / BLOCK_N1⌉`` compute dK and dV of one key block, looping over the
            ``H / H_kv`` query heads of their K/V head (so dK and dV are written once per
            K/V head: no GQA reduction kernel), the others dQ of one query block of one query
            head, over the keys its rows see (``BLOCK_M2 = BLOCK_N1 = B_c``, ``BLOCK_N2 =
            BLOCK_M1 = B_r``). A query block whose rows see no key (causal, ``N_q > N_k``)
            still loads its Q and dO and stores a zero dQ. Triton's tutorial (``False``)
            runs its dQ loop in the CTA that ran the dK/dV loop of the same block index.
        dq_reductions: the backward adds its dQ partials into the fp32 accumulator as
            reductions in L2 (flash-attn 2's ``atomicAdd``; default); ``False``: as loads and
            stores of the accumulator under a per-tile lock — the same L2 bytes, no
            reductions (xFormers' cutlassB: Nsight Compute counts no ``RED``, 0.3-2.6 M
            ``ATOM`` for the lock and the accumulator's ``LDG``/``STG``,
            validate/reports/h200/probes/ncu/summary-efficient.json).
        bwd_key_splits: how many CTAs of the backward share a (batch, head)'s keys:
            ``"per-key-tile"`` (default: one per key block, flash-attn 2's grid) or
            ``"xformers"`` (PyTorch's ``num_splits_key`` rule for xFormers' cutlassB:
            :meth:`bwd_splits`; each CTA walks key blocks ``split, split + splits, ...``).
        dq_lock_waits: load latencies (``GPUSpec.load_latency_s``) a backward CTA waits per
            (query tile, key tile) step to add its dQ partial into the fp32 accumulator under
            a per-tile lock, when several CTAs add into it: xFormers' cutlassB takes the lock
            (``atomicCAS`` until it holds it, ``__nanosleep`` between tries), fences, reads
            the ``B_r × d`` fp32 tile back, adds, counts its add (``atomicAdd``), writes the
            tile, fences and releases — between ``__syncthreads``, so nothing of the CTA's
            overlaps it; one protocol per ``B_c``-wide column block of dQ. 0 (default): the adds
            do not stall the CTA (reductions); a positive value needs ``dq_reductions=False``.
            Timed per CTA with the tile's bytes through its own load path
            (``KernelCost.step_waits``).
        bwd_gmem_accumulators: the backward keeps dK and dV in global memory between steps
            and reads them back each step (xFormers' cutlassB when the head dim exceeds its
            ``B_r``: ``kOutputInRF`` false); a load latency per ``B_r``-wide column block of
            each.
        bwd_gemms_preloaded: the backward loads each GEMM's first operand tiles ahead of it
            (default); ``False``: each GEMM pass waits a load latency for them (xFormers'
            cutlassB with ``kPreload`` off; its dV, dK and dQ GEMMs run once per head-dim
            column block).
        bwd_masked_row_split: the backward's dK/dV loop walks the key block's masked
            (diagonal) tiles in steps of ``B_r / k`` query rows, ``k`` steps per tile — each
            step reloading what a step reloads (register spills); 1: one step per tile.
            Triton's tutorial: ``MASK_BLOCK_M1 = BLOCK_M1 // BLK_SLICE_FACTOR`` with
            ``BLK_SLICE_FACTOR = 2`` (``_attn_bwd``).
        bwd_prescaled_k: the backward first writes a copy of K multiplied by the softmax
            scale and log2(e) (Triton's fused-attention tutorial: ``arg_k = k * (sm_scale *
            RCP_LN2)`` in ``_attention.backward``; Nsight Compute lists it as an
            elementwise kernel ahead of ``_attn_bwd_preprocess``): one more kernel that reads
            K and writes its copy.
        num_splits: split-KV parts of the forward (``perfsim.algorithms.splits``): an
            integer ≥ 1, or ``"auto"`` for the reference's heuristic.
        pack_gqa: pack the query heads of one K/V head into the rows of a tile: ``True``,
            ``False`` or ``"auto"`` (the reference's rule).
        fast_math: the kernels were built with ``--use_fast_math`` (flash-attn's own
            ``setup.py``), so an exp is one MUFU.EX2; ``False`` for PyTorch's copy of flash-attn
            2, whose SASS guards each exp with an FSETP and two FMULs
            (``perfsim.algorithms.softmax_costs``, measured with Nsight Compute).
        fused_scale: the forward scales the scores and subtracts the row max in one FFMA per
            score (flash_attn.cute, Triton); ``False`` where the compiled kernel keeps an FMUL
            and an FADD (PyTorch's flash-attn 2 and cuDNN, by their instruction census).
        fwd_stages: K/V tiles the forward keeps in shared memory at once (its load ring):
            1 for flash-attn 2 (one K and one V buffer, ``Kernel_traits::kSmemSize``);
            Triton's kernels take their ``num_stages``. Sets the CTAs an SM holds.
        split_sector_rows: the kernels pull their Q, K, V and dO rows from L2 with 16-byte
            ``cp.async`` copies (Triton's pipelined loads), so a row that starts half a
            32-byte sector in fetches one sector per 16-byte copy (:func:`sector_split_factor`;
            the extra sectors are L2 hits, timed on the load path and charged L2 energy);
            ``False`` (default): rows cost the sectors they span (not profiled for flash-attn
            2's and xFormers' CUTLASS copies).
        bwd_smem_per_cta: shared memory per backward CTA as compiled (bytes; a compiled-kernel
            fact for Triton kernels, whose pipelining stages decide it); ``None``: flash-attn
            2's kernel traits.
        mma_k: the K of the ``mma.sync`` instruction shape: 16 (``m16n8k16``, default) or 8
            (``m16n8k8``, xFormers' CUTLASS kernels), whose FLOPs keep the tensor pipe
            ``1 / GPUSpec.mma_sync_k8_fraction`` times as long; ``mma_sync`` kernels only.
        fwd_smem_per_cta: shared memory per forward CTA as compiled (bytes; a compiled-kernel
            fact read from a profile, e.g. xFormers' kernels); ``None``: the Q tile and the
            K/V stages (:meth:`_fwd_smem_bytes`).
        compiled_head_dims: which head dims have a compiled kernel; a call runs the smallest at
            least ``max(d, d_v)`` (``"xformers"``: its own rounding, below) — its MMAs,
            shared-memory tiles and launch table that wide, its HBM traffic at the true head dims,
            its register spills and predicated-path shared-memory traffic as profiled
            (:data:`REFERENCE_FWD_SPILL_BYTES`, :data:`REFERENCE_BWD_SPILL_BYTES`,
            :data:`REFERENCE_UNEVEN_SMEM_WAVEFRONTS`). ``"flash-attn"``
            (default): flash-attn 2's ``HEADDIM_SWITCH`` (32, 64, 96, 128, 160, 192, 256);
            ``"pytorch"``: the kernels PyTorch's copy runs (torch 2.11, profiled: 32, 64, 96, 128,
            192, 256 — no 160; an older PyTorch source also has 160 and 224); ``"power-of-two"``:
            each head dim rounded up to a power of two (FlexAttention's templates); ``"xformers"``:
            xFormers' cutlassF forward runs Q·Kᵀ at the head dim rounded up to 32 and P·V at the
            value head dim rounded up to its ``B_c`` (whole CUTLASS threadblock tiles; Nsight
            Compute counts 1.167 times the exact HMMAs at head dim 192, the value columns at 256),
            its backward at the call's own; ``"exact"``: every head dim runs as itself. The last
            three take none of flash-attn 2's compiled facts (spills, predicated-path traffic;
            kernels that are not its code) but keep its launch table for the head dim's range
            (tiles and warps: the ASSUMED stand-in where a preset gives none), so their time can
            step down where a range starts.
        bwd_spill_bytes: local-memory bytes each thread of the backward kernel reloads per
            step of its dK/dV loop because the compiler spilled registers (a compiled-kernel
            fact read from a profile: ``perfsim.validate.spill_facts``); ``None`` (default):
            flash-attn 2's own figure by compiled head dim (:data:`REFERENCE_BWD_SPILL_BYTES`;
            none unless ``compiled_head_dims`` names its own code); 0 for none. Timed at the
            SM's measured spill-reload rate (``KernelCost.local_load_bytes``).
        keyless_tile_exit: a forward CTA whose query rows all see no key (causal or a
            window's right side with ``N_q > N_k``) returns before loading Q, writing zero O
            and +inf logsumexp (flash-attn 2's ``compute_attn_1rowblock``: "We exit early
            and write 0 to gO and gLSE" when ``n_block_max <= n_block_min``); such CTAs
            then cost their O/LSE bytes only, outside the grid's waves, tail and Q traffic.
            True (default) for flash-attn 2's code; False for the kernels that are not
            (``implementations._fa2_like``: FlexAttention's and Triton's templates load Q
            before their key loop).
    """

    name: ClassVar[str] = "fa2"
    overlap_rule: ClassVar[str] = ("mma.sync: warps load MMA operands from shared memory, "
                                   "then issue MMAs and softmax FP32 work in program order "
                                   "(FMA and ALU pipes in turn), the exps on the MUFU beside "
                                   "the FP32 work; the resident CTAs (each with a prefetched "
                                   "operand slice) overlap one's loads with another's "
                                   "compute, a closed cycle; HBM overlaps")

    warps: int | None = Field(default=None, ge=1, le=32)
    _power_of_two = field_validator("warps")(
        classmethod(lambda cls, v: power_of_two_warps(v)))
    registers_per_thread: int = Field(default=REGISTERS_PER_THREAD, ge=16, le=255)
    bwd_registers_per_thread: int | None = Field(default=None, ge=16, le=255)
    dq_recompute: bool = False
    dq_programs: bool = False

    @field_validator("dq_programs")
    @classmethod
    def _programs_recompute(cls, v, info):
        if v and not info.data.get("dq_recompute", False):
            raise ValueError("dq_programs=True needs dq_recompute=True (dQ programs recompute "
                             "S and dP; allowed: dq_programs=False, or both True)")
        return v
    dq_reductions: bool = True
    bwd_key_splits: Literal["per-key-tile", "xformers"] = "per-key-tile"
    dq_lock_waits: float = Field(default=0.0, ge=0, le=1000)
    bwd_gmem_accumulators: bool = False
    bwd_gemms_preloaded: bool = True

    @field_validator("dq_lock_waits")
    @classmethod
    def _lock_is_not_reductions(cls, v, info):
        if v and info.data.get("dq_reductions", True):
            raise ValueError(f"dq_lock_waits={v} (a locked read-modify-write of the dQ "
                             "accumulator, as sdpa-efficient's preset sets) and "
                             "dq_reductions=True (reductions into it) exclude each other: "
                             "keep dq_reductions=False with lock waits, or set "
                             "dq_lock_waits=0 with reductions")
        return v
    bwd_prescaled_k: bool = False
    bwd_masked_row_split: int = Field(default=1, ge=1, le=8)
    #: at most CUDA's 512 KiB of local memory per thread
    bwd_spill_bytes: float | None = Field(default=None, ge=0, le=512 * 1024)
    bwd_smem_per_cta: int | None = Field(default=None, ge=0)
    fwd_smem_per_cta: int | None = Field(default=None, ge=0)
    mma_k: Literal[8, 16] = 16

    @field_validator("mma_k")
    @classmethod
    def _k8_is_mma_sync(cls, v, info):
        family = info.data.get("tensor_family", "mma_sync")
        if v == 8 and family != "mma_sync":
            raise ValueError(f"mma_k=8 is an mma.sync shape; tensor_family is {family!r} "
                             "(allowed with mma_k=8: 'mma_sync')")
        return v
    fwd_stages: int = Field(default=1, ge=1, le=8)
    split_sector_rows: bool = False
    compiled_head_dims: Literal["flash-attn", "pytorch", "power-of-two", "exact",
                                "xformers"] = "flash-attn"

    @field_validator("compiled_head_dims")
    @classmethod
    def _xformers_needs_its_tile(cls, v, info):
        if v == "xformers" and info.data.get("block_n") is None:
            raise ValueError("compiled_head_dims='xformers' rounds the value head dim up to "
                             "the forward kernel's B_c: give block_n too (cutlassF's "
                             "kKeysPerBlock, 64 or 128; the sdpa-efficient preset sets it)")
        return v
    bound_checks: Literal["none", "flash-attn", "cudnn", "flex"] = "flash-attn"
    keyless_tile_exit: bool = True

    def fwd_kv_stages(self) -> int:
        """``fwd_stages``: 1 for flash-attn 2, Triton's ``num_stages`` for its kernels."""
        return self.fwd_stages

    def exits_keyless_tiles(self) -> bool:
        """The ``keyless_tile_exit`` option."""
        return self.keyless_tile_exit

    def splits_sector_rows(self) -> bool:
        """The ``split_sector_rows`` option."""
        return self.split_sector_rows

    def fwd_warps_option(self) -> int | None:
        """The ``warps`` option."""
        return self.warps

    def recomputes_dq(self) -> bool:
        """The ``dq_recompute`` option."""
        return self.dq_recompute

    def runs_dq_programs(self) -> bool:
        """The ``dq_programs`` option."""
        return self.dq_programs

    def reduces_dq(self) -> bool:
        """The ``dq_reductions`` option."""
        return self.dq_reductions

    def bwd_batch_before_heads(self) -> bool:
        """True for flash-attn 2's grid (``bwd_key_splits="per-key-tile"``: blockIdx (n, b,
        h)); False for xFormers' (``"xformers"``: (splits, heads, batch),
        attention_backward.cu). ASSUMED flash-attn 2's for the other kernels this class
        stands for with a CTA per key tile (cuDNN's before Hopper)."""
        return self.bwd_key_splits == "per-key-tile"

    def bwd_splits(self, dims: Dims, v, b_c, bh):
        """CTAs per (batch, head) along the keys of the backward, or ``None`` for one per key
        block (``bwd_key_splits``). ``"xformers"``: PyTorch's rule for xFormers' cutlassB
        (``_efficient_attention_backward``, aten/src/ATen/native/transformers/cuda/
        attention_backward.cu): one per key block, but one when the grid is already
        ``B·H ≥ 256`` CTAs and the keys fit two blocks (``N_k ≤ 2 B_c``), and at most
        ``⌊200 / (B·H)⌋`` (at least one) for a kernel that keeps dK and dV in global memory
        (``bwd_gmem_accumulators``: a staging area per split)."""
        if self.bwd_key_splits == "per-key-tile" or dims.symbolic:
            return None         # closed forms: the counts do not depend on the split grid
        kb = v.kv_tiles
        splits = where((bh >= XFORMERS_SPLIT_ENOUGH_CTAS)
                       & (asarray(dims.N_k) <= XFORMERS_SPLIT_FEW_KEY_BLOCKS * b_c), 1, kb)
        if self.bwd_gmem_accumulators:
            splits = minimum(splits, XFORMERS_SPLIT_STAGING_CTAS // bh)
        return maximum(splits, 1)

    def bwd_step_wait_counts(self, dims: Dims, b_r, b_c, kd, kd_v, splits, kb):
        """``(load latencies, bytes)`` a backward CTA waits out per (query tile, key tile)
        step for its own global-memory round trips outside any prefetch
        (``KernelCost.step_waits``), from the options:

        - ``dq_lock_waits`` per ``B_c``-wide dQ column block where several CTAs add into a
          query tile (key splits > 1): the locked read-modify-write of the fp32 dQ tile
          (``B_r × kd`` fp32 read back in all); where one CTA walks all the key blocks
          (splits = 1) it takes no lock and reads its own partial back (one load latency
          per block) at each step but those of its first key block;
        - ``bwd_gmem_accumulators``: dK and dV read back from global memory each step (one
          load latency per ``B_r``-wide column block of each, ``B_c × (kd + kd_v)`` fp32);
        - ``bwd_gemms_preloaded=False``: one load latency per GEMM pass whose first operand
          tiles are not loaded ahead (S and dP once, dV and dK per ``B_r``-wide block, dQ
          per ``B_c``-wide block).

        ``(0, 0)`` with the defaults, and for symbolic dims (closed forms,
        ``perfsim.symbolic``, count no waits, as they take no load chain)."""
        waits = bytes_ = 0.0
        if dims.symbolic:
            return 0, 0
        # cutlassB walks the head dims in chunks (kernel_backward.h): dQ in B_c-wide column
        # blocks (MatmulGradQ's N = kBlockSizeJ), each added under its own lock; dK and dV
        # in B_r-wide ones (MatmulGradK/GradV's N = kBlockSizeI)
        dq_chunks = cdiv(kd, b_c)
        if self.dq_lock_waits:
            tile = b_r * kd * FP32_BYTES
            if splits is None:
                # one key block per CTA: several CTAs add into a query tile (locked) unless
                # the keys are one block; a CTA never reads back its own partial
                locked, own = kb > 1, 0.0
            else:
                # one CTA walking all the key blocks takes no lock and reads its own partial
                # back at each step but those of its first key block
                locked, own = splits > 1, 1 - 1 / cdiv(kb, splits)
            waits = waits + where(locked, self.dq_lock_waits, own) * dq_chunks
            bytes_ = bytes_ + tile * where(locked, 1.0, own)
        if self.bwd_gmem_accumulators:
            waits = waits + cdiv(kd, b_r) + cdiv(kd_v, b_r)
            bytes_ = bytes_ + b_c * (kd + kd_v) * FP32_BYTES
        if not self.bwd_gemms_preloaded:
            # S = K Qᵀ and dP = dO Vᵀ once, dV and dK per B_r-wide chunk, dQ per B_c-wide one
            waits = waits + 2 + cdiv(kd_v, b_r) + cdiv(kd, b_r) + dq_chunks
        return waits, bytes_

    def prescales_k(self) -> bool:
        """The ``bwd_prescaled_k`` option."""
        return self.bwd_prescaled_k

    def masked_row_split(self) -> int:
        """The ``bwd_masked_row_split`` option."""
        return self.bwd_masked_row_split

    def spill_reload_bytes(self, dims: Dims) -> float:
        """The ``bwd_spill_bytes`` option, else the reference's compiled figure
        (:data:`REFERENCE_BWD_SPILL_BYTES`; none unless ``compiled_head_dims`` names
        flash-attn 2's own code)."""
        if self.bwd_spill_bytes is not None:
            return self.bwd_spill_bytes
        return self._reference_figure(REFERENCE_BWD_SPILL_BYTES, dims)

    def fwd_spill_bytes(self, dims: Dims) -> float:
        """Local-memory bytes a forward thread reloads per tile step: the reference's
        compiled figure (:data:`REFERENCE_FWD_SPILL_BYTES`; none unless
        ``compiled_head_dims`` names flash-attn 2's own code). The split-KV (and paged)
        kernel takes the same figure by its compiled head dim (not profiled, ASSUMED). Plus
        the spills of a checked variant by length class (:meth:`bound_check_spill_bytes`;
        may be an array)."""
        return (self._reference_figure(REFERENCE_FWD_SPILL_BYTES, dims)
                + self.bound_check_spill_bytes(dims))

    def uneven_head_dim_wavefronts(self, phase: str, dims: Dims) -> float:
        """Shared-memory wavefronts each warp adds per tile step of ``phase`` when the
        call's head dim (before the compiled kernel's padding) is below the kernel's:
        :data:`REFERENCE_UNEVEN_SMEM_WAVEFRONTS` (0 unless ``compiled_head_dims`` names
        flash-attn 2's own code, and at the compiled head dim itself). The split-KV (and
        paged) kernel takes the same figure by its compiled head dim (not profiled,
        ASSUMED)."""
        if self.compiled_head_dims not in FLASH_ATTN_CODE or dims.symbolic:
            return 0.0
        if not self._below_kernel(dims):
            return 0.0
        return REFERENCE_UNEVEN_SMEM_WAVEFRONTS[phase].get(max(self.kernel_head_dims(dims)),
                                                           0.0)

    def _reference_figure(self, table: dict, dims: Dims) -> float:
        """``table``'s figure for the compiled kernel running ``dims`` (at its head dim, or
        below it); 0 where the table has none or nothing is compiled per head dim."""
        if self.compiled_head_dims not in FLASH_ATTN_CODE or dims.symbolic:
            return 0.0
        kd = max(self.kernel_head_dims(dims))
        even, uneven = table.get(kd, (0.0, 0.0))
        return uneven if self._below_kernel(dims) else even

    def _below_kernel(self, dims: Dims) -> bool:
        """Whether the compiled kernel runs the call predicated: its query/key head dim or its
        value head dim (the call's own, before whole-tile padding) below the kernel's. The
        reference kernels take ``d_v = d``; a call with ``d < d_v`` runs the kernel for
        ``d_v`` with its query/key loads predicated, and counts as below it (ASSUMED)."""
        call = dims.unpadded[2:] if dims.unpadded else (dims.d, dims.d_v)
        kd = max(self.kernel_head_dims(dims))
        return any(c < kd for c in call)

    def launch_causal(self, dims: Dims) -> bool:
        """flash-attn 2's own code (``compiled_head_dims`` its or PyTorch's) launches its
        unmasked forward for one query row: ``mha_fwd`` sets ``is_causal = false`` there, the
        mask hiding no key (``csrc/flash_attn/flash_api.cpp``: "causal=true is the same as
        causal=false in this case"), before the tile is chosen (on sm8x its causal tiles are
        narrower). The rows are the query positions, before GQA packing and whole-tile
        padding. ``mha_varlen_fwd`` tests the longest sequence; perfsim's variable-length
        groups (``base.varlen_groups``) each test their own (ASSUMED: a batch mixing one-row
        and longer queries is rare). Other kernels run through this model keep the mask's
        launch (their code was not read for it)."""
        if not dims.causal or self.compiled_head_dims not in FLASH_ATTN_CODE or dims.symbolic:
            return dims.causal
        n_q = dims.unpadded[0] if dims.unpadded else dims.N_q
        positions = n_q if dims.group == 1 else cdiv(n_q, dims.group)
        return not bool(np.all(asarray(positions) == 1))

    def bwd_launch(self, dims: Dims, gpu: GPUSpec):
        """As ``FusedAttention.bwd_launch``; a kernel that is not flash-attn 2's code with its
        backward tile and warps all given takes them without flash-attn 2's launch table,
        whose refusals (head dim 256 with dropout on GPUs under 144 KB of shared memory per
        CTA, head dims above 256) are that code's, not this kernel's."""
        if (self.compiled_head_dims not in FLASH_ATTN_CODE and not dims.symbolic
                and self.bwd_block_m and self.bwd_block_n and self.bwd_warps):
            return BwdLaunch(self.bwd_block_m, self.bwd_block_n, self.bwd_warps,
                             default_atom_layouts(self.bwd_warps))
        return super().bwd_launch(dims, gpu)

    def mma_shape(self, cost: KernelCost, gpu: GPUSpec) -> KernelCost:
        """``cost`` with its tensor-pipe work stretched by ``1 / gpu.mma_sync_k8_fraction``
        for the ``m16n8k8`` shape (its FLOPs unchanged; the power model charges the stretch
        as it charges zero padding); unchanged for ``m16n8k16``."""
        if self.mma_k == 16:
            return cost
        demand = dict(cost.sm_demand())
        demand["tensor"] = demand["tensor"] / gpu.mma_sync_k8_fraction
        return replace(cost, executed=demand)

    def _fwd_smem_bytes(self, dims: Dims, gpu: GPUSpec, b_r, b_c, kd, kd_v):
        """Shared memory per forward CTA: ``fwd_smem_per_cta`` where given, else the Q tile
        and the K/V stages (``FusedAttention._fwd_smem_bytes``)."""
        if self.fwd_smem_per_cta is not None and not dims.symbolic:
            return self.fwd_smem_per_cta
        return super()._fwd_smem_bytes(dims, gpu, b_r, b_c, kd, kd_v)

    def registers(self, gpu: GPUSpec, warps: int) -> int:
        """32-bit registers per thread (for occupancy): the ``registers_per_thread`` option."""
        return self.registers_per_thread

    def bwd_registers(self, gpu: GPUSpec, warps: int) -> int:
        """The backward kernel's: ``bwd_registers_per_thread``, else ``registers_per_thread``."""
        return self.bwd_registers_per_thread or self.registers_per_thread

    def bwd_smem_is_stand_in(self) -> bool:
        """True for a kernel that is not flash-attn 2's code whose backward shared memory is
        not given (``bwd_smem_per_cta``): its stages are flash-attn 2's traits, a stand-in."""
        return (self.compiled_head_dims not in FLASH_ATTN_CODE
                and self.bwd_smem_per_cta is None)

    def kernel_head_dims(self, dims: Dims) -> tuple:
        """``(d, d_v)`` the kernel runs at, by the ``compiled_head_dims`` option: flash-attn
        2's (or PyTorch's) compiled kernel for ``max(d, d_v)`` (``HEADDIM_SWITCH``; the
        references themselves take d_v = d), each rounded up to a power of two on its own,
        or the call's own. Symbolic dims run as themselves."""
        mode = self.compiled_head_dims
        if dims.symbolic or mode == "exact":
            return dims.d, dims.d_v
        if mode == "xformers":
            if dims.phase != "fwd":
                return dims.d, dims.d_v         # its backward's GEMMs: the call's (ASSUMED)
            # cutlassF's CUTLASS threadblock tiles: Q·Kᵀ walks the head dim in steps of
            # ThreadK = 32; P·V computes B_c value columns per pass (MM1's N = kKeysPerBlock),
            # the columns past d_v included
            b_c = self.block_n
            return (-(-dims.d // XFORMERS_THREAD_K) * XFORMERS_THREAD_K,
                    -(-dims.d_v // b_c) * b_c)
        if mode == "power-of-two":
            return next_power_of_two(dims.d), next_power_of_two(dims.d_v)
        templates = HEAD_DIM_TEMPLATES if mode == "flash-attn" else PYTORCH_HEAD_DIM_TEMPLATES
        k = kernel_head_dim(max(dims.d, dims.d_v), templates)
        return k, k

    def bwd_smem_bytes(self, launch, dims: Dims):
        """Shared memory per backward CTA: ``bwd_smem_per_cta``, else flash-attn 2's kernel
        traits."""
        if self.bwd_smem_per_cta is not None:
            return self.bwd_smem_per_cta
        return super().bwd_smem_bytes(launch, dims)


def gemm_operand_reads(m, n, k, warps_m, warps_n):
    """Elements a CTA reads from shared memory for one ``m x n x k`` GEMM split over a
    ``warps_m x warps_n`` grid of warps: each warp loads the A rows and B columns of its own
    output tile, so A is read ``warps_n`` times and B ``warps_m`` times (the usual GEMM
    shared-memory traffic, ``k·(m·warps_n + n·warps_m)``)."""
    return k * (m * warps_n + n * warps_m)


def default_atom_layouts(warps: int) -> tuple[int, int, int]:
    """Backward warp layouts for a warp count the reference table does not list: two warps
    along M for the query-row GEMMs, ``warps / 2`` along M for the key-row ones (flash-attn
    2's head-dim-128 choice)."""
    return 2 if warps >= 2 else 1, max(warps // 2, 1), 2 if warps >= 2 else 1


def bwd_operand_reads(b_r, b_c, d, d_v, warps, atoms):
    """Shared-memory operand reads (elements) of the five backward GEMMs of one tile
    (FA2 Algorithm 2): ``S = Q Kᵀ`` and ``dP = dO Vᵀ`` (B_r x B_c), ``dQ = dS K`` (B_r x d),
    ``dV = Pᵀ dO`` and ``dK = dSᵀ Q`` (B_c x d). ``atoms = (MSdP, NdKV, MdQ)``: warps along
    M of the S/dP, dK/dV and dQ GEMMs; the rest of the warps split N (flash-attn 2's
    ``Flash_bwd_kernel_traits`` ``AtomLayoutMSdP``, ``AtomLayoutNdKV``, ``AtomLayoutMdQ``)."""
    m_sdp, n_dkv, m_dq = (max(min(a, warps), 1) for a in atoms)
    return (gemm_operand_reads(b_r, b_c, d, m_sdp, max(warps // m_sdp, 1))
            + gemm_operand_reads(b_r, b_c, d_v, m_sdp, max(warps // m_sdp, 1))
            + gemm_operand_reads(b_r, d, b_c, m_dq, max(warps // m_dq, 1))
            + gemm_operand_reads(b_c, d_v, b_r, n_dkv, max(warps // n_dkv, 1))
            + gemm_operand_reads(b_c, d, b_r, n_dkv, max(warps // n_dkv, 1)))


#: flash-attn 2's split-KV kernel (``run_mha_fwd_splitkv_dispatch``): 64 query rows, a key
#: tile of 256 / 128 / 64 for head dims ≤ 64 / ≤ 128 / larger, 4 warps; it also runs every
#: paged-KV call.
def splitkv_tile(d) -> tuple[int, int, int]:
    """``(B_r, B_c, warps)`` of flash-attn 2's split-KV kernel for head dim ``d``."""
    return 64, (256 if d <= 64 else 128 if d <= 128 else 64), 4


