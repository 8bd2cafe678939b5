"""FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608): Hopper's asynchronous pipeline.

Forward (§3.1–3.2): a producer warpgroup streams K/V tiles with TMA into a ``stages``-deep
shared-memory ring; ``block_m / 64`` consumer warpgroups each own 64 query rows and issue
WGMMA (``Q Kᵀ`` with both operands in shared memory; ``P V`` with P from registers).
Mechanisms, each a switch:

* ``pingpong`` (§3.1): two consumer warpgroups alternate, one's softmax under the other's
  GEMMs — the tensor cores and the softmax units overlap.
* ``intra_warpgroup_overlap`` (§3.2): inside a warpgroup, the softmax of tile j runs while the
  ``Q K_{j+1}ᵀ`` GEMM runs; only the ``P V`` GEMM stays on the softmax's path.
* ``warp_specialized`` (§3.1): with a producer warpgroup, loads overlap everything; without
  it, the consumers issue and wait for their loads, so HBM time joins the MMA path — and
  ping-pong is lost: both consumer warpgroups read the same K/V stage, so without a producer
  they meet at a CTA-wide barrier before each stage is refilled, which puts them back in
  phase every tile (perfsim's reading; the paper's no-warp-specialisation figure, 570
  TFLOP/s, equals its no-ping-pong one, §3.1).

Timing: a closed MMA ⇄ softmax cycle (``perfsim.timing.cycle_time``) with one tile in
flight plus one for ping-pong and one for intra-warpgroup pipelining: with neither switch the
MMA and softmax times add; each mechanism lets more of the softmax hide under the MMAs.
FP8 (§3.3): e4m3 WGMMA at twice the rate, the V tile transposed in shared memory, and
(``quantize_inputs``) a preparation kernel that applies the incoherent-processing Hadamard
transform to Q and K (``d·log2 d`` adds and ``d`` sign flips per row: O(d log d)) and
block-quantises Q, K, V.

Backward (§3.1, App. B): the FA2 algorithm on WGMMA with a producer warpgroup: units overlap.

Needs TMA and WGMMA (sm_90a): elsewhere ``InfeasibleError`` names the missing feature.

Length: one algorithm — FA3's options, tiles by head dim, the producer/consumer pipeline, WGMMA
operand traffic and the fp8 preparation kernel — each part citing the paper or the reference
source beside it.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from perfsim.algorithms.base import FP32_BYTES, Dims, register_file_share
from perfsim.algorithms.common import (
    WARPS_PER_WARPGROUP,
    WGMMA_ROWS,
    check_fused_inputs,
    check_training_inputs,
    pick_tile,
    tma_request_seconds,
    wgmma_operand_reads,  # noqa: F401 (re-exported: the WGMMA operand rule's old home)
)
from perfsim.algorithms.fa2 import FusedAttention, fwd_smem_bytes
from perfsim.algorithms.fa2_launch import BwdLaunch
from perfsim.algorithms.softmax_costs import FMA_SLOTS
from perfsim.algorithms.splits import any_split, choice_arrays, decide, varlen_batch_dims
from perfsim.errors import InfeasibleError
from perfsim.frozen import replace
from perfsim.gpu import BYTES_PER_ELEMENT, GPUSpec
from perfsim.kernel import KernelCost
from perfsim.mathops import asarray, cdiv, log2, one_value

#: Forward tiles (block_m, block_n) by head dim, 16-bit inputs, as flash-attention's
#: hopper/tile_size.h ``tile_size_fwd_sm90`` returns them with K/V loaded by TMA, for the
#: three masks its launch tells apart (``is_causal``, ``is_local``, neither; hopper/
#: flash_api.cpp): no mask; causal (128 keys at head dims 64 and 128, 96 keeps its 144);
#: a local window (160 keys at 64, 128 at 96-128, 96 at 192, 64 at 256).
FWD_TILES = {64: (192, 192), 96: (192, 144), 128: (128, 176), 192: (128, 112), 256: (128, 80)}
FWD_TILES_CAUSAL = {64: (192, 128), 96: (192, 144), 128: (128, 128), 192: (128, 112),
                    256: (128, 80)}
FWD_TILES_LOCAL = {64: (192, 160), 96: (192, 128), 128: (128, 128), 192: (128, 96),
                   256: (128, 64)}
#: FP8 doubles the key block where shared memory allows (the reference's fp8 entries of the
#: same function; a local window takes 64 keys at head dim 256, and with softcap 192 at 128
#: and 128 at 192: ``FA3._tma_tile``).
FWD_TILES_FP8 = {64: (192, 160), 96: (192, 128), 128: (128, 224), 192: (128, 160),
                 256: (128, 128)}
FWD_TILES_FP8_LOCAL = {**FWD_TILES_FP8, 256: (128, 64)}
#: The forward's tiles where flash-attn 3 reads a paged K/V cache without TMA (its producer
#: warps gather the pages: ``tile_size_fwd_sm90(..., paged_kv_non_TMA=true)``, hopper/
#: tile_size.h): a narrower key block at head dims up to 192 (16-bit) and 128 (fp8); causal
#: keeps its 128 at head dims up to 128.
PAGED_NON_TMA_TILES = {64: (192, 160), 96: (192, 128), 128: (128, 128), 192: (128, 96),
                       256: (128, 80)}
PAGED_NON_TMA_TILES_CAUSAL = {64: (192, 128), 96: (192, 128), 128: (128, 128), 192: (128, 96),
                              256: (128, 80)}
PAGED_NON_TMA_TILES_FP8 = {64: (192, 160), 96: (192, 128), 128: (128, 160), 192: (128, 160),
                           256: (128, 128)}
#: ... under a local window (``is_local``; flash-attn 3 never loads a windowed paged cache
#: with TMA): 64 keys above head dim 192, fp8 128 at 192.
PAGED_NON_TMA_TILES_LOCAL = {64: (192, 160), 96: (192, 128), 128: (128, 128), 192: (128, 96),
                             256: (128, 64)}
PAGED_NON_TMA_TILES_FP8_LOCAL = {64: (192, 160), 96: (192, 128), 128: (128, 160),
                                 192: (128, 128), 256: (128, 64)}
#: Backward tiles (query rows, key rows) by head dim, as flash-attention's
#: hopper/flash_bwd_launch_template.h ``run_mha_bwd_hdim*`` dispatches them on sm90 (read at
#: Dao-AILab commit 000786d2): 128 x 128 at 64 (96 x 128 causal with softcap), 64 x 128 at
#: 96, 80 x 128 at 128 without a mask or softcap (64 x 128 with one), 64 x 96 at 192, 64 x 80
#: at 256 (one dO and one dS stage above 128: ``Stages_dO = Stages_dS = 1``).
BWD_TILES = {64: (128, 128), 96: (64, 128), 128: (80, 128), 192: (64, 96), 256: (64, 80)}
#: ... where the mask (causal or a window) or softcap narrows them
BWD_TILES_MASKED = {**BWD_TILES, 128: (64, 128)}
#: MMA warpgroups of the backward: two, three at head dims 129-192 whose V is wider than 128
#: (``NumMmaWarpGroups`` 3 where ``dv_rounded > 128``, the same template)
BWD_MMA_WARPGROUPS_WIDE_V = 3
#: Fewest 32-bit registers per thread the reference gives a consumer (MMA) warpgroup and the
#: producer warpgroup through ``setmaxnreg`` (flash-attn 3, hopper/flash_fwd_kernel_sm90.h and
#: flash_bwd_kernel_sm90.h: ``MmaRegisterRequirement = NumMmaWarpGroups == 2 ? 240 : 160``,
#: ``LoadRegisterRequirement = NumMmaWarpGroups == 2 ? 24 : 32``): 160 with three consumer
#: warpgroups, 24 for the producer. Below it a consumer thread cannot hold its share of the
#: O accumulator and the S tile of a 64-row WGMMA slice; no CTA runs.
FA3_MIN_CONSUMER_REGISTERS = 160
FA3_MIN_PRODUCER_REGISTERS = 24
#: The head dims flash-attn 3 compiles a kernel for: a call runs the smallest at least its head
#: dim, with a (192, 128) kernel where d_v <= 128 (``run_mha_fwd`` / ``run_mha_bwd`` in
#: ``hopper/flash_api.cpp``: ``params.d <= 64 / 96 / 128 / 192 / 256``).
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)
#: flash_attn.cute's sm90 kernels (flash-attn-4 4.0.0b36) round each head dim up to a tile
#: multiple instead: 16 in the forward (``hdim_multiple_of = 16``, ``flash_fwd.py``), and in
#: the backward 64 where its config swaps the dK/dV accumulators onto WGMMA's 64-row M axis
#: (``dKV_swapAB``, set by ``_tile_size_bwd_sm90`` for head dims 129-256) and 16 below
#: (``flash_bwd_sm90.py``).
CUTE_SM90_HEAD_DIM_MULTIPLE = 16
#: cuDNN's sm90 attention kernels (closed source) run a head dim rounded up to a multiple of
#: 64: their names carry the compiled head dim, ``..._64x128x128_...`` for a call with head
#: dim 96 and ``..._64x128x192_...`` for 160, forward and backward, beside the call's own at
#: 64, 128 and 256 (Nsight Compute on the H200, cuDNN 9.19,
#: ``validate/reports/h200/probes/ncu/summary-cudnn-shapes.json``, ``summary.json``); other
#: head dims ASSUMED to follow the same rule.
CUDNN_SM90_HEAD_DIM_MULTIPLE = 64
CUTE_SM90_BWD_SWAPPED_MULTIPLE, CUTE_SM90_BWD_SWAPPED_ABOVE = 64, 128


def kernel_head_dims(mode: str, dims: Dims) -> tuple:
    """``(d, d_v)`` a compiled kernel runs at under ``mode`` (``FA3.compiled_head_dims``):
    flash-attn 3's kernel for ``d``; flash_attn.cute's or cuDNN's tile multiple (cute's
    backward's where the kernel being built is not the forward); or the call's own. Symbolic
    dims run as themselves."""
    if dims.symbolic or mode == "exact":
        return dims.d, dims.d_v
    if mode == "cudnn-sm90":
        step = CUDNN_SM90_HEAD_DIM_MULTIPLE
        return cdiv(dims.d, step) * step, cdiv(dims.d_v, step) * step
    if mode == "cute-sm90":
        step = CUTE_SM90_HEAD_DIM_MULTIPLE
        if (dims.phase != "fwd" and CUTE_SM90_BWD_SWAPPED_ABOVE < dims.d
                <= max(FA3_HEAD_DIMS)):
            step = CUTE_SM90_BWD_SWAPPED_MULTIPLE
        return cdiv(dims.d, step) * step, cdiv(dims.d_v, step) * step
    # the kernel is chosen by the Q/K head dim; FA3.check_masks refuses the pairs
    # flash-attn 3 does not take
    k = next((h for h in FA3_HEAD_DIMS if h >= dims.d), dims.d)
    return k, (128 if k == 192 and dims.d_v <= 128 else k)


def _numeric_head_dims(dims: Dims) -> bool:
    """The head dims are numbers (plain, or sympy numbers in a closed form whose other sizes
    are symbols), so the reference's tile table applies; a symbolic head dim takes the tile
    the symbolic counts are written for."""
    return all(getattr(h, "is_number", True) for h in (dims.d, dims.d_v))


class FA3(FusedAttention):
    """FlashAttention-3 options (defaults: the reference Hopper kernels).

    Args:
        block_m, block_n: forward tile; ``None`` = reference default per head dim.
        stages: K/V shared-memory ring depth (reference: 2).
        pingpong: inter-warpgroup ping-pong scheduling (§3.1).
        intra_warpgroup_overlap: GEMM–softmax pipelining inside a warpgroup (§3.2); the
            reference turns it off for a local window at head dims up to 64 (16-bit inputs,
            tile_size.h), and so does perfsim there whatever this says.
        warp_specialized: a producer warpgroup issues the TMA loads (§3.1).
        quantize_inputs: for fp8, include the kernel that Hadamard-rotates and
            block-quantises Q, K, V (§3.3).
        incoherent_processing: apply the Hadamard rotation in that kernel (§3.3).
        persistent: CTAs stay resident and loop over tiles (the reference's tile scheduler,
            hopper/tile_scheduler.hpp); ``False`` for one CTA per tile (Triton).
        tensor_family: ``wgmma``.
        num_splits, pack_gqa: as ``FusedAttention``, with flash-attn 3's rules for ``"auto"``
            (``hopper/heuristics.h``, ``perfsim.algorithms.splits``).
        dropout_supported: the kernel this configuration stands for has dropout (cuDNN's, in
            the ``sdpa-cudnn`` preset), charged from its instruction census
            (``softmax_costs.DROPOUT_INSTRUCTIONS`` for its ``address_arithmetic``). Default
            ``False``: the reference has none (flash-attn issue #1251), so a workload with
            ``dropout_p > 0`` raises ``InfeasibleError``.
        serial_stations: the pipes take turns — the MMA and softmax stations run with one
            tile in flight and the softmax station's MUFU, FMA and ALU work in turn, forward
            and backward, with shared memory and HBM beside the cycle (the ``sdpa-cudnn``
            preset sets it for calls with dropout, from Nsight Compute's pipe busy times on
            the H200). Default ``False``.
        fwd_spill_reload_bytes, bwd_spill_reload_bytes: register-spill reloads per thread
            and tile step of the forward and of the backward's dK/dV loop (bytes; a
            compiled-kernel fact: the ``sdpa-cudnn`` preset's with dropout,
            ``perfsim.implementations.CUDNN_SM90_DROPOUT_SPILL_BYTES``). Default 0.
    """

    name: ClassVar[str] = "fa3"
    split_rule: ClassVar[str] = "fa3"
    overlap_rule: ClassVar[str] = ("producer/consumer pipeline: MMA and softmax stations in a "
                                   "cycle with 1 tile in flight, +1 for ping-pong (which needs "
                                   "warp specialisation), +1 for intra-warpgroup pipelining; "
                                   "HBM loads overlap when a producer warpgroup issues them")

    stages: int = Field(default=2, ge=1, le=8)
    #: the kernel this configuration stands for has dropout (cuDNN's, in the ``sdpa-cudnn``
    #: preset): charged from its census (``softmax_costs.DROPOUT_INSTRUCTIONS``) instead of
    #: refused
    dropout_supported: bool = False
    #: the MMA and softmax stations run with one tile in flight, the softmax station's MUFU,
    #: FMA and ALU work in turn (``KernelCost.cuda_cores_in_turn``), forward and backward;
    #: shared memory and HBM overlap the cycle (:meth:`pipeline`). The ``sdpa-cudnn``
    #: preset sets it for calls with dropout: Nsight Compute on the H200 has the busy times of
    #: cuDNN's tensor, FMA, ALU and MUFU pipes adding to 103-104 % of its sm90 kernels'
    #: duration with dropout and to 118-155 % without (``validate/reports/h200/probes/ncu/
    #: summary-dropout.json``; ``validate/README.md``, hold-outs 38-40).
    serial_stations: bool = False
    #: the forward's consumer warpgroups run their MMAs and their exps in turn: the MMA
    #: station (tensor cores fed from shared memory) and the MUFU station add, one tile in
    #: flight, while the FMA- and ALU-pipe work of the softmax (the exps' lead included) runs
    #: under them (:meth:`pipeline`; an overlap group of its own, :meth:`overlap_groups`).
    #: The ``sdpa-cudnn`` preset sets it for every forward but its head-dim-128 kernel where
    #: its softmax masks no score (no causal mask, keys a multiple of 128; ``implementations.
    #: cudnn_fwd_pipes_in_turn``). A persistent kernel's units after the first then pay no
    #: edge (:meth:`unit_edges_hidden`). Nsight Compute has the tensor and MUFU pipes of cuDNN's
    #: sm90 forward busy 99-102.5 % of its duration in sum there, and 109-115 % (the exps of
    #: one warpgroup under the other's MMAs) only in that kernel's path that masks no score.
    fwd_pipes_in_turn: bool = False
    #: register spills of the compiled kernels: local-memory bytes each thread reloads per
    #: tile step of the forward and of the backward's dK/dV loop (a compiled-kernel fact read
    #: from a profile, timed at ``GPUSpec.spill_reload_bandwidth_bytes_per_s``: the
    #: ``sdpa-cudnn`` preset's with dropout, ``CUDNN_SM90_DROPOUT_SPILL_BYTES``). Default 0:
    #: the reference keeps its live values in registers. At most CUDA's 512 KiB of local
    #: memory per thread.
    fwd_spill_reload_bytes: float = Field(default=0.0, ge=0, le=512 * 1024)
    bwd_spill_reload_bytes: float = Field(default=0.0, ge=0, le=512 * 1024)
    #: a GQA backward reduce-adds each query head's dK, dV in fp32 into accumulators at the
    #: K/V heads, zeroed before and converted after (flash-attn 3's ``CollectiveEpilogueBwdGQA``,
    #: flash_attn.cute's ``dKV_postprocess``: ``base.gqa_dkdv_accumulator``); ``False``: dK,
    #: dV written per query head and summed by separate kernels (flash-attn 2's way; the
    #: ``sdpa-cudnn`` preset's: Nsight Compute on an H100 shows cuDNN's GQA backward followed
    #: by two ``cudnn::fmha_reduce_head`` kernels, validate/reports/h100/probes/ncu/
    #: ncu-gqa-bwd.tgz)
    gqa_dkdv_accumulator: bool = True
    pingpong: bool = True
    intra_warpgroup_overlap: bool = True
    warp_specialized: bool = True
    quantize_inputs: bool = True
    incoherent_processing: bool = True
    persistent: bool = True
    tensor_family: str = "wgmma"
    #: head dims above which each of the two backward consumer warpgroups issues the whole
    #: S = QKᵀ and dP = dO·Vᵀ GEMMs of a tile (``None``: never, the reference). cuDNN's sm90
    #: backward does at head dim 256 (``sdpa-cudnn`` preset).
    bwd_sdp_twice_above: int | None = Field(default=None, ge=1)
    #: which head dims have a compiled kernel (a call runs its MMAs and shared-memory tiles
    #: that wide; its HBM traffic stays at its own head dims): ``"flash-attn-3"`` (default,
    #: :data:`FA3_HEAD_DIMS`), ``"cute-sm90"`` (flash_attn.cute's rounding,
    #: :data:`CUTE_SM90_HEAD_DIM_MULTIPLE`), ``"cudnn-sm90"`` (cuDNN's,
    #: :data:`CUDNN_SM90_HEAD_DIM_MULTIPLE`) or ``"exact"`` (every head dim as itself).
    compiled_head_dims: Literal["flash-attn-3", "cute-sm90", "cudnn-sm90", "exact"] = \
        "flash-attn-3"
    #: how the forward reads a paged K/V cache (``compiled_head_dims`` ``"flash-attn-3"``):
    #: ``"auto"`` (the reference's ``get_pagedkv_tma``, :meth:`paged_kv_tma`), ``"tma"`` or
    #: ``"gather"`` (its producer warps gather the pages: the narrower tile, heads packed)
    paged_kv_path: Literal["auto", "tma", "gather"] = "auto"
    dtypes: ClassVar[tuple[str, ...]] = ("fp16", "bf16", "fp8_e4m3")

    def kernel_head_dims(self, dims: Dims) -> tuple:
        """``(d, d_v)`` the compiled kernel runs at: :func:`kernel_head_dims` of the
        ``compiled_head_dims`` option."""
        return kernel_head_dims(self.compiled_head_dims, dims)

    def accumulates_gqa_dkdv(self) -> bool:
        """The ``gqa_dkdv_accumulator`` option."""
        return self.gqa_dkdv_accumulator

    def tma_l2_seconds(self, dims: Dims, gpu: GPUSpec, loads) -> object:
        """The L2's time for the TMA row segments of ``loads``
        (:func:`~perfsim.algorithms.common.tma_request_seconds`): flash-attn 3, its CuTe-DSL
        port (flash_attn.cute) and cuDNN's sm90 kernels load Q, K, V and dO with TMA (their
        ``UTMALDG`` instructions in Nsight Compute's opcode counts,
        ``validate/reports/h200/probes/ncu/summary.json``), in tiles as wide as the compiled
        head dims, laid out by CUTLASS's swizzle rule (cuDNN's layout is closed source: the
        same rule ASSUMED; its compiled head dims, multiples of 64, take the 128-byte
        segments). Numeric shapes only: the closed forms of ``perfsim.symbolic`` leave it
        out."""
        if dims.symbolic:
            return 0
        return tma_request_seconds(gpu, loads)

    def fwd_tiles(self, dims: Dims, gpu: GPUSpec = None) -> tuple[int, int, int]:
        """``(B_r, B_c, warps)``: flash-attn 3's forward tile for the head dim and mask (a
        producer warpgroup plus one consumer warpgroup per 64 query rows); a paged K/V cache
        read without TMA (:meth:`paged_kv_tma`) takes the gathering kernel's tile
        (:meth:`_gather_tile`) where every element of ``dims`` does (a sweep's block of mixed
        calls keeps the TMA tile: ``perfsim.sweep`` evaluates the others apart,
        :meth:`split_choices`)."""
        b_r, b_c = self._gather_tile(dims) if self._gathers(dims) else self._tma_tile(dims)
        consumers = cdiv(b_r, WGMMA_ROWS)
        return b_r, b_c, WARPS_PER_WARPGROUP * (consumers + 1)

    def launch_mask(self, dims: Dims) -> str:
        """The mask flash-attn 3's launch chooses its tile for: ``"local"`` (a window: the
        reference's ``is_local``, a causal call with a left edge included), ``"causal"`` or
        ``"none"`` (hopper/flash_api.cpp, after ``base.effective_mask`` has dropped the
        window sides that hide nothing). A causal call of one query row against no window
        launches unmasked ("causal=true is the same as causal=false in this case"), except
        with a paged cache at head dims 65-128, where the source keeps the causal tile (128
        keys, "better for pagedKV and TMA"). The rows are the query positions, before GQA
        packing and whole-tile padding; each variable-length group tests its own longest
        (ASSUMED, as ``FA2.launch_causal``: the reference tests ``max_seqlen_q`` of the whole
        batch). flash_attn.cute and cuDNN (other ``compiled_head_dims``) keep the call's
        mask: their presets set their own tiles. Only the tile changes: the mask's costs
        follow the call's mask either way."""
        if dims.window != (None, None):
            return "local"
        if not dims.causal:
            return "none"
        if (self.compiled_head_dims != "flash-attn-3" or dims.symbolic
                or not _numeric_head_dims(dims)):
            return "causal"
        n_q = dims.unpadded[0] if dims.unpadded else dims.N_q
        positions = n_q if dims.group == 1 else cdiv(n_q, dims.group)
        if not bool(np.all(asarray(positions) == 1)):
            return "causal"
        keeps = bool(dims.page_size) and 64 < dims.d <= 128
        return "causal" if keeps else "none"

    def _tma_tile(self, dims: Dims) -> tuple[int, int]:
        """``(B_r, B_c)`` of the forward with its K/V loaded by TMA (no pages, or pages TMA
        can load): the reference's table for the head dim, launch mask
        (:meth:`launch_mask`) and dtype, or the options. Above head dim 128 a 16-bit V of
        head dim at most 128 takes 128 keys, not 112 (``headdim_v <= 128 ? 128 : 112``,
        tile_size.h), unless a local window narrows it to 96."""
        if not _numeric_head_dims(dims):
            return self.block_m or 128, self.block_n or 128
        mask = self.launch_mask(dims)
        if dims.dtype == "fp8_e4m3":
            table = FWD_TILES_FP8_LOCAL if mask == "local" else FWD_TILES_FP8
        else:
            table = {"local": FWD_TILES_LOCAL, "causal": FWD_TILES_CAUSAL}.get(mask, FWD_TILES)
        b_r, b_c = pick_tile(table, max(dims.d, dims.d_v), self.name)
        if (dims.dtype != "fp8_e4m3" and mask != "local" and 128 < dims.d <= 192
                and dims.d_v <= 128):
            b_c = 128
        if dims.dtype == "fp8_e4m3" and mask == "local" and dims.softcap:
            # fp8 with softcap under a window: 192 keys at head dim 128, 128 at 129-192
            # (``softcap && is_local``, tile_size.h)
            d = max(dims.d, dims.d_v)
            b_c = 192 if 96 < d <= 128 else (128 if 128 < d <= 192 else b_c)
        return self.block_m or b_r, self.block_n or b_c

    def fwd_tile_note(self, dims: Dims) -> str | None:
        """Where flash-attn 3 gathers a paged cache and its key block differs from the TMA
        tile of the same call, in words for ``explain`` (a fresh user's report: a paged
        call came out 1 % faster than its contiguous twin with nothing said): the key tiles'
        padding changes with the block, so a paged call can take less time."""
        if (dims.symbolic or self.block_m or self.block_n or not dims.page_size
                or not _numeric_head_dims(dims) or not self._gathers(dims)):
            return None
        (_, gather), (_, tma) = self._gather_tile(dims), self._tma_tile(dims)
        if gather == tma:
            return None
        return (f"flash-attn 3 gathers a paged cache with its producer warps and then takes "
                f"B_c = {gather} (tile_size.h, paged_kv_non_TMA) where a contiguous cache "
                f"loaded by TMA takes {tma}; the last key tile's padding changes with it, so "
                "a paged call can come out a little faster or slower than its contiguous twin "
                "(the gather's own shared-memory writes are charged)")

    def _gather_tile(self, dims: Dims) -> tuple[int, int]:
        """``(B_r, B_c)`` of the forward whose producer warps gather a paged cache
        (``tile_size_fwd_sm90(..., paged_kv_non_TMA=true)``, tile_size.h): a local window's
        table, the causal one, or :data:`PAGED_NON_TMA_TILES`; the options where set."""
        mask = self.launch_mask(dims)
        if dims.dtype == "fp8_e4m3":
            table = (PAGED_NON_TMA_TILES_FP8_LOCAL if mask == "local" else
                     PAGED_NON_TMA_TILES_FP8)
        else:
            table = {"local": PAGED_NON_TMA_TILES_LOCAL,
                     "causal": PAGED_NON_TMA_TILES_CAUSAL}.get(mask, PAGED_NON_TMA_TILES)
        b_r, b_c = pick_tile(table, max(dims.d, dims.d_v), self.name)
        return self.block_m or b_r, self.block_n or b_c

    def _gathers(self, dims: Dims) -> bool:
        """Whether every element of ``dims`` reads a paged cache without TMA
        (:meth:`paged_kv_tma`): the forward then runs the gathering kernel's tile and names
        its K/V writes so."""
        return self._paged_rule(dims) and one_value(np.logical_not(
            self.paged_kv_tma(dims, *self._tma_tile(dims))).astype(np.int64)) == 1

    def kv_tma_segments(self, dims: Dims, b_c) -> bool:
        """Whether the forward's K/V rows reach the L2 as TMA row segments: not where
        flash-attn 3 gathers the pages of a paged cache (:meth:`paged_kv_tma`); flash_attn.cute
        and cuDNN as :meth:`FusedAttention.kv_tma_segments`."""
        if self._paged_rule(dims):
            return not self._gathers(dims)
        return super().kv_tma_segments(dims, b_c)

    def _paged_rule(self, dims: Dims) -> bool:
        """Whether flash-attn 3's own rule for a paged cache applies: a page size given, the
        reference's kernels (``compiled_head_dims`` ``"flash-attn-3"``; flash_attn.cute loads a
        page with TMA where it is one key tile, ``FusedAttention._forward``), numeric dims."""
        return (bool(dims.page_size) and self.compiled_head_dims == "flash-attn-3"
                and not dims.symbolic and _numeric_head_dims(dims))

    def paged_kv_tma(self, dims: Dims, b_r: int, b_c: int):
        """Whether flash-attn 3 loads the call's K/V with TMA (``get_pagedkv_tma``,
        hopper/flash_api.cpp): always without pages; with pages only where a page holds
        whole key blocks of the TMA tile ``(b_r, b_c)`` and the query rows of a K/V head
        (``N_q · H / H_kv``) exceed its ``b_r`` ("when seqlen_q <= kBlockM ... using TMA is
        slower"), and never for a local window; ``paged_kv_path`` fixes it. Elementwise on
        array dims (a bool array). Where it does not, its producer warps gather the pages
        (:meth:`_gather_tile`) and the query heads of a K/V head are packed whatever
        ``pack_gqa`` says (``PackGQA_ || ... || PagedKVNonTMA``, hopper/flash_api.cpp)."""
        if not self._paged_rule(dims):
            return True
        if self.paged_kv_path != "auto":
            return self.paged_kv_path == "tma"
        rows = np.asarray(dims.N_q) * (np.asarray(dims.H) // np.asarray(dims.H_kv))
        tma = (rows > b_r) & (dims.page_size % b_c == 0) & (dims.window == (None, None))
        return bool(tma) if np.ndim(tma) == 0 else tma

    def _with_path(self, dims: Dims):
        """This configuration with the paged K/V path of ``dims`` fixed
        (``paged_kv_path``), so that the kernels built for it — their whole-tile padding
        included (``base.with_whole_tiles`` rounds ``N_q`` up) — keep the path the call's own
        shape takes; itself where the path is fixed, not paged, or mixed across a sweep
        block's elements."""
        if self.paged_kv_path != "auto" or not self._paged_rule(dims):
            return self
        tma = one_value(np.asarray(self.paged_kv_tma(replace(dims, phase="fwd"),
                                                     *self._tma_tile(dims)), dtype=np.int64))
        if tma is None:
            return self
        return type(self)(**{**self.model_dump(), "paged_kv_path": "tma" if tma else "gather"})

    def varlen_config(self, dims: Dims, gpu: GPUSpec):
        """Split-KV, packing and a paged cache's K/V path decided once for the whole
        variable-length batch (its longest lengths, as ``max_seqlen_q`` decides them)."""
        batch = varlen_batch_dims(dims)
        return super().varlen_config(dims, gpu)._with_path(batch)

    def forward_dims(self, dims: Dims, gpu: GPUSpec) -> Dims:
        """The forward's dims with the packing and split-KV choice applied; a paged cache
        read without TMA packs the query heads of a K/V head (:meth:`paged_kv_tma`)."""
        if dims.symbolic or not self._paged_rule(dims):
            return super().forward_dims(dims, gpu)
        b_r, b_c, _ = self.fwd_tiles(dims, gpu)
        gather = np.logical_not(self.paged_kv_tma(dims, *self._tma_tile(dims)))
        pack = self.pack_gqa if self.pack_gqa == "auto" or not np.all(gather) else True
        return decide(dims, gpu, self.num_splits, pack, self.split_rule, b_r, b_c,
                      can_split=self.can_split(gpu), pack_always=gather)

    def _unmasked_rows(self, dims: Dims):
        """Sweeps: where a causal block mixes one-row calls, which :meth:`launch_mask`
        launches unmasked and the others causal, a bool array of the unmasked elements
        (``None`` where every element launches alike)."""
        if (not dims.causal or dims.window != (None, None) or dims.symbolic
                or np.ndim(dims.N_q) == 0 or self.launch_mask(dims) != "causal"):
            return None
        one = np.asarray(dims.N_q) == 1
        if not one.any():
            return None
        return None if self.launch_mask(replace(dims, N_q=1)) == "causal" else one

    @staticmethod
    def _each(dims: Dims, unmasked, tile):
        """``tile(dims)``, with the unmasked elements' (``unmasked``) from the call without
        its causal mask, elementwise."""
        b_r, b_c = tile(dims)
        if unmasked is None:
            return b_r, b_c
        r0, c0 = tile(replace(dims, causal=False))
        return np.where(unmasked, r0, b_r), np.where(unmasked, c0, b_c)

    def split_choices(self, dims: Dims, gpu: GPUSpec):
        """Sweeps: :meth:`FusedAttention.split_choices`, and for a paged cache each element's
        K/V path as a further key (1: gathered without TMA, its tile and packing; 0: TMA), so
        that a block's elements of either path run apart; a causal block's one-row elements
        with the tile of their unmasked launch (:meth:`launch_mask`)."""
        fdims = replace(dims, phase="fwd")
        unmasked = self._unmasked_rows(fdims)
        if dims.symbolic or not self._paged_rule(dims):
            if unmasked is None or (self.num_splits != "auto" and self.pack_gqa is False):
                return super().split_choices(dims, gpu)
            b_r, b_c = self._each(fdims, unmasked, self._tma_tile)
            splits, group = choice_arrays(fdims, gpu, self.num_splits, self.pack_gqa,
                                          self.split_rule, b_r, b_c,
                                          can_split=self.can_split(gpu))
            return splits, group, 0
        b_r, b_c = self._each(fdims, unmasked, self._tma_tile)
        gather = np.logical_not(self.paged_kv_tma(fdims, b_r, b_c))
        paged_r, paged_c = self._each(fdims, unmasked, self._gather_tile)
        splits, group = choice_arrays(
            fdims, gpu, self.num_splits, self.pack_gqa, self.split_rule,
            np.where(gather, paged_r, b_r), np.where(gather, paged_c, b_c),
            can_split=self.can_split(gpu), pack_always=gather)
        return splits, group, np.asarray(gather, dtype=np.int64)

    def bwd_tiles(self, dims: Dims, gpu: GPUSpec = None) -> tuple[int, int, int]:
        """``(B_r, B_c, warps)``: flash-attn 3's backward tile (:data:`BWD_TILES`, by the
        mask and softcap: :data:`BWD_TILES_MASKED`) and warps (a producer warpgroup and two
        MMA warpgroups; the reference's three at head dims 129-192 with V wider than 128),
        or the options."""
        warps = 3 * WARPS_PER_WARPGROUP
        if _numeric_head_dims(dims):
            masked = dims.masked or bool(dims.softcap)
            d = max(dims.d, dims.d_v)
            b_r, b_c = pick_tile(BWD_TILES_MASKED if masked else BWD_TILES, d, self.name)
            if d <= 64 and dims.causal and dims.window == (None, None) and dims.softcap:
                b_r = 96        # Is_causal && Has_softcap (a window is is_local)
            if (128 < d <= 192 and dims.d_v > 128
                    and self.compiled_head_dims == "flash-attn-3"):
                warps = (BWD_MMA_WARPGROUPS_WIDE_V + 1) * WARPS_PER_WARPGROUP
        else:
            b_r, b_c = 64, 128
        return (self.bwd_block_m or b_r, self.bwd_block_n or b_c, self.bwd_warps or warps)

    def bwd_launch(self, dims: Dims, gpu: GPUSpec) -> BwdLaunch:
        """The backward tile; WGMMA warpgroups need no warp layouts."""
        return BwdLaunch(*self.bwd_tiles(dims, gpu), atoms=(1, 1, 1))

    def bwd_smem_bytes(self, launch, dims: Dims):
        """Q tiles double-buffered, dO double-buffered (the reference's single above head
        dim 128: its ``Stages_dO``, hopper/flash_bwd_launch_template.h), K and V resident, P
        and dS staged, at the compiled kernel's head dims."""
        e = dims.e
        kd, kd_v = self.kernel_head_dims(dims)
        wide = (self.compiled_head_dims == "flash-attn-3" and _numeric_head_dims(dims)
                and max(kd, kd_v) > 128)
        stages_do = 1 if wide else 2
        return e * (launch.block_n * (kd + kd_v) + launch.block_m * (2 * kd + stages_do * kd_v)
                    + 2 * launch.block_m * launch.block_n)

    def bwd_scheduling(self, dims: Dims) -> tuple[bool, bool]:
        """``(persistent, lpt)`` of the backward: the reference launches one CTA per key
        tile, ``SingleTileBwdLPTScheduler`` for a causal fixed-length call (longest first)
        and ``SingleTileScheduler`` otherwise (hopper/flash_bwd_launch_template.h:
        ``Is_causal && !Varlen``); other kernels as :meth:`FusedAttention.bwd_scheduling`."""
        if self.compiled_head_dims != "flash-attn-3" or dims.symbolic:
            return super().bwd_scheduling(dims)
        varlen = dims.varlen or dims.seqlens is not None
        return False, bool(dims.causal and dims.window == (None, None) and not varlen)

    def persistent_grid(self) -> bool:
        """FA3 launches one CTA per SM that loops over tiles."""
        return self.persistent

    def fwd_scheduling(self, dims: Dims) -> tuple[bool, bool]:
        """``(persistent, lpt)`` of the forward: the reference's scheduler where
        ``compiled_head_dims`` is ``"flash-attn-3"`` (hopper/flash_fwd_launch_template.h:
        ``UsePersistentScheduler = Arch >= 90 ? !(Split && !Varlen)``; a persistent grid of
        fixed-length calls under a causal mask or a window runs
        ``DynamicPersistentTileScheduler``, whose ``get_block_coord`` hands out each head's
        query tiles in reverse, "Longest-processing-time-first", hopper/tile_scheduler.hpp;
        a variable-length batch's scheduler walks them in order), ``persistent`` and
        ``lpt_scheduling`` otherwise (or where set off: ``persistent=False`` launches one
        CTA per tile, ``lpt_scheduling=True`` forces longest first)."""
        if self.compiled_head_dims != "flash-attn-3" or dims.symbolic:
            return self.persistent, self.lpt_scheduling
        split = any_split(dims.splits)
        varlen = dims.varlen or dims.seqlens is not None
        persistent = self.persistent and not (split and not varlen)
        return persistent, self.lpt_scheduling or (persistent and not varlen and dims.masked)

    def check_masks(self, dims: Dims) -> None:
        """flash-attn 3 (``hopper/``) has windows, softcap and paged K/V (any page size) but no
        dropout.

        Raises:
            InfeasibleError: ``dropout_p > 0``; a backward with fp8, mixed-dtype or paged
                K/V (``common.check_training_inputs``; flash-attn 3's ``mha_bwd`` takes fp16
                and bf16 only).
        """
        if dims.dropout_p and not self.dropout_supported:
            raise InfeasibleError(f"{self.name} with dropout_supported=False has no dropout "
                                  "(FlashAttention-3's hopper/ kernels have none, flash-attn "
                                  "issue #1251)")
        check_training_inputs(dims, self.name, "flash-attn 3's mha_bwd, hopper/flash_api.cpp, "
                              "and flash_attn.cute's _flash_attn_bwd: fp16/bf16 inputs of one "
                              "dtype, no page table")
        self._check_head_dim_pair(dims)

    def _check_head_dim_pair(self, dims: Dims) -> None:
        """flash-attn 3 takes a value head dim other than the Q/K one only for Q/K in
        (128, 192] with V in (96, 128] (its 192 x 128 kernel), or Q/K <= 64 with V <= 512
        (its 64 x 512 kernel, not modelled here) (``hopper/flash_api.cpp``, ``mha_fwd``).

        Raises:
            InfeasibleError: another pair, or the 64 x 512 kernel's."""
        if (self.compiled_head_dims != "flash-attn-3" or dims.symbolic
                or dims.d == dims.d_v):
            return
        d, d_v = dims.d, dims.d_v
        if 128 < d <= 192 and 96 < d_v <= 128:
            return
        if d <= 64 and d_v <= 64:
            return
        if d <= 64 and d_v <= 512:
            raise InfeasibleError(
                f"{self.name}: head_dim {d} with head_dim_v {d_v} runs flash-attn 3's 64 x 512 "
                "kernel (hopper/flash_api.cpp), which perfsim does not model")
        raise InfeasibleError(
            f"{self.name}: flash-attn 3 takes a head_dim_v ({d_v}) other than head_dim ({d}) "
            "only for head_dim in (128, 192] with head_dim_v in (96, 128], or head_dim <= 64 "
            "with head_dim_v <= 512 (hopper/flash_api.cpp)")

    def kv_in_flight(self, dims: Dims, b_c):
        """TMA keeps ``stages`` K/V tiles in flight (the producer warpgroup's ring)."""
        return self.stages * dims.e_kv * b_c * (dims.d + dims.d_v)

    def ring_loads(self, dims: Dims, b_r, b_c):
        """``KernelCost.ring_loads`` of a forward whose ring holds one stage (``stages=1``:
        the ``sdpa-cudnn`` preset at head dims above 128, where Q and two stages do not fit
        an SM's shared memory): the producer can load the next K (V) tile only once both
        consumer warpgroups have read the current one, so per step the tile's load and the
        GEMMs that read it run one after the other. ``None`` with two stages or more (the
        next tile loads while the current one is read) and for symbolic dims (closed forms
        do not count it)."""
        if self.stages != 1 or dims.symbolic:
            return None
        kd, kd_v = self.kernel_head_dims(dims)
        return (2 * b_r * b_c * (kd + kd_v), dims.e_kv * b_c * dims.d,
                dims.e_kv * b_c * dims.d_v, kd / (kd + kd_v))

    def registers(self, gpu: GPUSpec, warps: int) -> int:
        """``setmaxnreg`` shares the whole register file among the CTA's warpgroups (240 for
        consumers, 24-32 for the producer in the reference): one CTA per SM.

        Raises:
            InfeasibleError: the register file cannot give each consumer thread
                :data:`FA3_MIN_CONSUMER_REGISTERS` with the producer at
                :data:`FA3_MIN_PRODUCER_REGISTERS` (or the per-thread maximum is below it).
        """
        group_threads = 32 * WARPS_PER_WARPGROUP
        groups = max(cdiv(warps, WARPS_PER_WARPGROUP), 1)
        consumers = max(groups - 1, 1)
        producers = groups - consumers
        spare = gpu.registers_per_sm - producers * group_threads * FA3_MIN_PRODUCER_REGISTERS
        per_consumer = min(gpu.max_registers_per_thread, spare // (consumers * group_threads))
        if per_consumer < FA3_MIN_CONSUMER_REGISTERS:
            need = group_threads * (consumers * FA3_MIN_CONSUMER_REGISTERS
                                    + producers * FA3_MIN_PRODUCER_REGISTERS)
            raise InfeasibleError(
                f"no CTA fits on one {gpu.id} SM (registers per SM): {self.name}'s "
                f"{consumers} consumer warpgroup(s) need {FA3_MIN_CONSUMER_REGISTERS} registers "
                f"per thread and its producer {FA3_MIN_PRODUCER_REGISTERS} (flash-attn 3 "
                f"setmaxnreg), {need} in all; {gpu.id} has {gpu.registers_per_sm} per SM, at "
                f"most {gpu.max_registers_per_thread} per thread")
        return register_file_share(gpu, warps)

    def overlap_groups(self, phase: str, dims: Dims):
        """HBM (fed by the producer warpgroup) overlaps the MMA ⇄ softmax cycle; without warp
        specialisation the consumers wait for their own loads inside the MMA station. With
        ``serial_stations`` shared memory overlaps the cycle too (:meth:`pipeline`)."""
        hbm = (("hbm",),) if self.warp_specialized or phase == "bwd" else ()
        if self.serial_stations:
            return hbm + (("smem",),)
        return (hbm + (("fp32",),)) if self._pipes_in_turn(phase) else hbm

    def _pipes_in_turn(self, phase: str) -> bool:
        """Whether ``phase``'s main kernel runs the ``fwd_pipes_in_turn`` cycle."""
        return (self.fwd_pipes_in_turn and phase == "fwd" and self.warp_specialized
                and not self.serial_stations)

    def unit_edges_hidden(self, phase: str) -> bool:
        """``KernelCost.unit_edges_hidden`` of ``phase``'s main kernel: under
        ``fwd_pipes_in_turn`` a persistent forward's units after the first cost nothing
        outside the cycle. Evidence (Nsight Compute, the profiles named at
        ``implementations.CUDNN_SM90_FWD_OVERLAP_HEAD_DIM``): cuDNN's forward on that path
        keeps its tensor pipe and its MUFU busy 99-102.5 % of its duration in sum on
        unmasked calls, so no stretch is left where neither runs; at head dim 64 (B = 4,
        H = 24, N = 4096: 23 units per CTA) the 1.69 µs per unit of
        ``GPUSpec.cta_wave_overhead_s`` would be 5 % of it. (That figure was measured on the
        overlapping path, ``validate/probe_persistent_unit.py``, where each unit refills the
        two warpgroups' stagger.)"""
        return self._pipes_in_turn(phase)

    def exp_after(self, phase: str) -> tuple:
        """``KernelCost.exp_after`` of ``phase``'s main kernel: none under
        ``fwd_pipes_in_turn`` (the exps' lead is FMA- and ALU-pipe work, which runs under the
        MMA and MUFU stations there), else FA2's."""
        return () if self._pipes_in_turn(phase) else super().exp_after(phase)

    def fwd_spill_bytes(self, dims: Dims) -> float:
        """Local-memory bytes a forward thread reloads per tile step: the
        ``fwd_spill_reload_bytes`` option."""
        return self.fwd_spill_reload_bytes

    def spill_reload_bytes(self, dims: Dims) -> float:
        """Local-memory bytes a backward thread reloads per dK/dV step: the
        ``bwd_spill_reload_bytes`` option."""
        return self.bwd_spill_reload_bytes

    def spill_term(self, phase: str) -> str:
        """The named term of the register-spill reloads (``fwd_spill_reload_bytes``,
        ``bwd_spill_reload_bytes``: cuDNN's with dropout hold the Philox state and keep mask
        beside the accumulators)."""
        return "local_load/register spills"

    def spill_streams(self, phase: str) -> int:
        """``KernelCost.spill_streams``: the two consumer warpgroups (the ping-pong pair;
        FA3 §3.1) of a warp-specialised kernel, and of every backward (taken as
        warp-specialised, as :meth:`pipeline` does); one stream otherwise. ASSUMED: one
        warpgroup's waits on its reloads overlap the other's work — memory waits are not
        ordered by the barriers that keep their compute in turn (``serial_stations``) —
        so the spill model's closed network has two customers against the SM's one reload
        path (``perfsim.timing``). A check, not a fit: where cuDNN's sm90 forward spills with
        dropout at d = 256 (Nsight Compute, ``summary-dropout-spills.json``) its tensor,
        FMA, ALU and MUFU pipes are busy 67 % of its 965 µs in sum, against 103-104 % where
        it does not spill; the model gives the kernel 951 µs at the profile's clock, 1267
        with one stream and 649 without the spills."""
        return 2 if self.warp_specialized or phase == "bwd" else 1

    def tensor_issue_share(self, gpu: GPUSpec, customers) -> float:
        """``KernelCost.tensor_issue_share``: 1.0 — the consumer warpgroups issue their
        WGMMAs asynchronously (``wgmma.mma_async``, committed in groups and waited on a step
        later) with a producer loading ahead, so one CTA per SM keeps the pipe fed; the
        cycle's tiles in flight (:meth:`pipeline`) carry what is left. Without warp
        specialisation (``warp_specialized=False``, the FA3 ablation) the MMAs stay
        asynchronous and its single tile in flight already runs the stations in turn: 1.0
        there too (ASSUMED; the one-CTA share was measured on Triton's synchronous loops,
        ``GPUSpec.wgmma_one_cta_fraction``). The catalog's ``tensor_sustained_fraction`` is
        the pipe's rate in a loop."""
        return 1.0

    def cuda_cores_in_turn(self) -> bool:
        """``KernelCost.cuda_cores_in_turn``: with ``serial_stations`` the FMA and ALU pipes
        take turns as well (``perfsim.timing.cuda_core_seconds``)."""
        return self.serial_stations

    def pipeline(self, phase: str, gpu: GPUSpec = None, ctas_per_sm=1, warps=None,
                 prefetch=None):
        """Stations MMA (tensor cores fed from shared memory) and softmax (MUFU and FMA
        pipes); tiles in flight: one, plus one for ping-pong (the second consumer warpgroup)
        and one for intra-warpgroup pipelining (the next ``Q Kᵀ`` during this softmax).
        ``prefetch`` (the ``mma.sync`` operand slices held in registers) does not apply:
        WGMMA reads its operands from shared memory through descriptors.

        Forward, warp-specialised: the softmax station's MUFU, FMA and ALU pipes overlap
        (its time is the slowest of them) except for the work the exps wait on — the row max
        and a scale kept apart from the exp argument (``KernelCost.exp_after``,
        ``perfsim.timing.exp_lead_seconds``): one warpgroup alone on its schedulers ran the
        online softmax of a 64 x 128 tile in 812 cycles where its exps alone took 606 and
        its FP32/ALU work alone 445 (``validate/probe_softmax_pipes.py``). Nsight Compute on
        the H200 (``validate/reports/h200/probes/ncu/summary.json``, d = 128) has
        flash_attn.cute's sm90 forward and cuDNN's at the same MUFU and HGMMA counts per
        score, cuDNN issuing one more FMUL and FADD per score (the split scale), and cuDNN
        taking 7 % more cycles — which FP32 work hidden under the exps could not cause.
        Backward, and forward without warp specialisation: serial — one instruction stream
        issues the steps in turn, each needing the last one's result (as FA2's mma.sync
        kernels, whose profile fits the tensor, FMA and ALU pipes' sum with the MUFU beside:
        SDPA flash forward, tensor 56 %, FMA/ALU 18/20 %, MUFU 19 %). What overlaps in both
        is one warpgroup's softmax with the other's (or its own next) GEMMs (FA3 §3.1, Fig.
        1). With ``serial_stations`` nothing does: one tile in flight, the MMAs, the exps and
        the FMA- and ALU-pipe work in turn, and the shared-memory traffic beside them (an
        overlap group of its own, :meth:`overlap_groups`). Evidence, Nsight Compute on the
        H200 (``validate/reports/h200/probes/ncu/summary-dropout.json``; B = 1, H = 32,
        N = 4096, d = 128, dropout 0.1): cuDNN's sm90 backward keeps its tensor, FMA, ALU and
        MUFU pipes busy 46.6 + 20.2 + 28.0 + 9.0 = 103.8 % of its duration, and its
        shared-memory wavefronts (220 M summed over WGMMA operands, loads and stores, 176 M by
        the all-operation counter: 59 or 47 % of the duration at one per clock per SM) match
        or exceed the tensor pipe's 46.6 % while the four pipes already fill the duration —
        the softmax stage's own loads and stores run while the FMA and ALU pipes work, so
        shared memory is not a step of the MMA station's turn."""
        mma = ("tensor", "smem") if self.warp_specialized or phase == "bwd" else (
            "tensor", "smem", "hbm")
        if self.serial_stations:
            return ((tuple(u for u in mma if u != "smem"), ("mufu", "fp32")), 1,
                    (False, True))
        if phase == "bwd":
            return ((mma, ("mufu", "fp32")), 2, (False, True))
        if self._pipes_in_turn(phase):
            return ((mma, ("mufu",)), 1, (False, False))
        staggered = self.pingpong and self.warp_specialized
        return ((mma, ("mufu", "fp32")), 1 + staggered + self.intra_warpgroup_overlap,
                (False, not self.warp_specialized))

    def _drops_intra_overlap(self, dims: Dims) -> bool:
        """Whether the reference forward of this call runs without intra-warpgroup
        overlap though the option asks for it: tile_size.h returns ``IntraWGOverlap =
        !is_local`` for 16-bit inputs at head dims up to 64, so a local window there
        (:meth:`launch_mask`) pipelines only across warpgroups, and ``!paged_kv_non_TMA``
        for fp8 above head dim 192 ("PagedKV uses more registers"), so a gathered paged
        cache there (:meth:`_gathers`) does the same."""
        if not (self.intra_warpgroup_overlap and dims.fwd
                and self.compiled_head_dims == "flash-attn-3" and not dims.symbolic
                and _numeric_head_dims(dims)):
            return False
        if dims.dtype == "fp8_e4m3":
            return max(dims.d, dims.d_v) > 192 and self._gathers(dims)
        return max(dims.d, dims.d_v) <= 64 and self.launch_mask(dims) == "local"

    def kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        """FA3's kernels (FP8 inputs add the quantisation pass); a paged call's K/V path is
        fixed from its own shape first (:meth:`_with_path`: the kernels' whole-tile padding
        keeps it).

        Raises:
            InfeasibleError: a GPU without TMA and WGMMA, or an input FA3 does not take."""
        missing = [f for f in ("tma", "wgmma") if not getattr(gpu.features, f)]
        if missing:
            raise InfeasibleError(f"fa3 needs {' and '.join(m.upper() for m in missing)} "
                                  f"(Hopper sm_90a); {gpu.id} has none")
        check_fused_inputs(dims, self.name, self.dtypes, gpu)
        fixed = self._with_path(dims) if dims.fwd else self
        if fixed is not self:       # a paged call's K/V path, fixed from its own shape
            return fixed.kernels(dims, gpu)
        if self._drops_intra_overlap(dims):
            return type(self)(**{**self.model_dump(),
                                 "intra_warpgroup_overlap": False}).kernels(dims, gpu)
        self._check_smem(dims, gpu)
        out = super().kernels(dims, gpu)
        if dims.dtype == "fp8_e4m3" and self.quantize_inputs and dims.fwd:
            out.insert(0, self._fp8_prepare(dims))
        return out

    def memory_bytes(self, dims: Dims, gpu: GPUSpec):
        """:meth:`FusedAttention.memory_bytes`, plus, where the fp8 preparation kernel runs
        (:meth:`_fp8_prepare`), the 16-bit Q, K and V it reads: they and the e4m3 copies it
        writes are in memory together."""
        total = super().memory_bytes(dims, gpu)
        if dims.dtype == "fp8_e4m3" and self.quantize_inputs and dims.fwd:
            total = total + BYTES_PER_ELEMENT["bf16"] * self._fp8_elements(dims)
        return total

    def _check_smem(self, dims: Dims, gpu: GPUSpec) -> None:
        b_r, b_c, _ = self.fwd_tiles(dims, gpu)
        need = fwd_smem_bytes(dims.e, b_r, b_c, self.stages, dims.d, dims.d_v)
        if not dims.symbolic and need > gpu.smem_bytes_per_block:
            stages = f"{self.stages} stage" + ("s" if self.stages != 1 else "")
            raise InfeasibleError(f"fa3 tile {b_r}x{b_c} with {stages} needs "
                                  f"{need} B of shared memory; {gpu.id} allows "
                                  f"{gpu.smem_bytes_per_block} B per CTA")

    def _fwd_row_work(self, dims: Dims, rows=None) -> dict:
        """Per-row work not scaled by the tail: Q in, O out through shared memory, O
        normalised (see ``FusedAttention._fwd_row_work``; ``rows``: the query rows of the
        CTAs that run, ``None`` for all)."""
        e, bh = dims.e, dims.B * dims.H
        rows = dims.N_q if rows is None else rows
        return {"fp32": bh * rows * dims.d_v,
                "smem": 2 * bh * rows * (e * dims.d + dims.e_o * dims.d_v)}

    def _fwd_smem(self, dims: Dims, v, b_r, warps) -> dict:
        """TMA lands Q once and each visited K/V tile once; every consumer warpgroup reads the
        whole K tile (Q Kᵀ, SS) and V tile (P V, RS: P from registers) and its own Q rows;
        O leaves through shared memory. FP8 transposes each V tile in shared memory."""
        e, bh, dkv = dims.e, dims.B * dims.H, dims.d + dims.d_v
        consumers = cdiv(b_r, WGMMA_ROWS)
        terms = {"smem_write/Q": e * bh * dims.N_q * dims.d,
                 "smem_write/O (TMA store)": dims.e_o * bh * dims.N_q * dims.d_v,
                 # (a contiguous cache is TMA's: no tile looked up for it)
                 ("smem_write/K,V (TMA)" if not dims.page_size
                  or self.kv_tma_segments(dims, self.fwd_tiles(dims)[1])
                  else "smem_write/K,V (paged, gathered by the producer warps)"):
                     e * bh * v.q_outer_cols * dkv,
                 "smem_read/Q (per tile, SS)": e * bh * v.tiles * b_r * dims.d,
                 "smem_read/K,V (every consumer warpgroup)":
                     e * bh * consumers * v.q_outer_cols * dkv,
                 "smem_read/O (TMA store)": dims.e_o * bh * dims.N_q * dims.d_v}
        if dims.dtype == "fp8_e4m3":
            terms["smem_write/V transposed (fp8)"] = e * bh * v.q_outer_cols * dims.d_v
            terms["smem_read/V transposed (fp8)"] = e * bh * v.q_outer_cols * dims.d_v
        return terms

    def fwd_operand_groups(self, warps, rows):
        """Consumer warpgroups of the forward: one per ``WGMMA_ROWS`` query rows (the
        producer warpgroup issues TMA, no MMAs)."""
        return cdiv(rows, WGMMA_ROWS)

    def bwd_operand_groups(self, warps, b_r, b_c):
        """Consumer warpgroups of the backward: ``warps / 4 − 1`` (the producer warpgroup
        issues TMA, no MMAs); each GEMM is split among them
        (:func:`~perfsim.algorithms.common.wgmma_operand_reads`). All five GEMMs are counted
        with both operands in shared memory (SS); the reference may keep P or dS in registers
        for some head dims (RS), which would read less: an upper bound."""
        return max(warps // WARPS_PER_WARPGROUP - 1, 1)

    def sdp_issued_twice(self, dims: Dims) -> int:
        """See ``FusedAttention.sdp_issued_twice``: from ``bwd_sdp_twice_above``."""
        limit = self.bwd_sdp_twice_above
        # (bool(): a sympy number's comparison is a sympy boolean; a symbolic head dim
        # cannot say which kernel runs and raises, which the symbolic module reports)
        return int(limit is not None and bool(max(dims.d, dims.d_v) > limit))

    def dq_staging(self, dims: Dims, v, b_r):
        """FA3 (and FA4) write each tile's fp32 dQ partial to shared memory and a TMA bulk
        reduction adds it to global memory, reading it back: ``B_r x d`` fp32 each way per
        tile (the ``Md/16`` "dQ fp32 write + TMA read-back" term of FA4 §3.2.1's backward
        shared-memory count), as wide as the compiled kernel's head dim (``sdQaccum`` is
        ``tile_m x tile_hdim``, flash_bwd_sm90.py)."""
        return FP32_BYTES * dims.B * dims.H * v.tiles * b_r * self.kernel_head_dims(dims)[0]

    @staticmethod
    def _fp8_elements(dims: Dims):
        """Elements of Q, K and V the fp8 preparation kernel converts."""
        return (dims.B * (dims.H * dims.N_q + dims.H_kv * dims.N_k) * dims.d
                + dims.B * dims.H_kv * dims.N_k * dims.d_v)

    def _fp8_prepare(self, dims: Dims) -> KernelCost:
        """Hadamard-rotate Q and K (incoherent processing) and block-quantise Q, K, V from
        16-bit inputs to e4m3: per element an absmax, a scale and a convert (3 ops)."""
        rows_qk = dims.B * (dims.H * dims.N_q + dims.H_kv * dims.N_k)
        elems = self._fp8_elements(dims)
        hadamard = rows_qk * (dims.d * log2(dims.d) + dims.d) if self.incoherent_processing \
            else 0
        src = BYTES_PER_ELEMENT["bf16"]
        return KernelCost(name="fp8_prepare", grid=cdiv(elems, 4096), warps_per_cta=4,
                          tensor_dtype=dims.dtype,
                          fp32_flops=FMA_SLOTS * (3 * elems + hadamard),
                          hbm_read_bytes=src * elems, hbm_write_bytes=dims.e * elems)
