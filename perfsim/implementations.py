"""Implementations: what people call, mapped to an algorithm configuration and a software
profile.

``perfsim.predict(w, gpu, algorithm="sdpa-flash")`` predicts PyTorch's SDPA flash backend;
``algorithm="fa2"`` the FlashAttention-2 algorithm with the reference kernels' defaults. An
implementation fixes what the user does not choose: which kernel runs on which GPU, its tiles
and instruction family, the extra kernels around it, and the per-call host cost
(:mod:`perfsim.software`). Each preset names its source.

======================  ======================================================================
name                    what runs (and the perfsim configuration)
======================  ======================================================================
``sdpa-flash``          ``F.scaled_dot_product_attention`` with ``SDPBackend.FLASH_ATTENTION``:
                        flash-attn 2's CUDA kernels (``mma.sync`` on every GPU), built by
                        PyTorch without fast math → ``FA2(fast_math=False,
                        fused_scale=False, compiled_head_dims="pytorch",
                        address_arithmetic="pytorch-flash")`` (its instruction census,
                        softmax_costs; its copy has no head-dim-160 kernel, from the
                        kernels profiled)
``sdpa-cudnn``          ``SDPBackend.CUDNN_ATTENTION``: cuDNN's fused flash attention; on Hopper
                        a warp-specialised WGMMA kernel (FA3-class) → ``FA3()`` with the
                        forward and backward tiles its kernel names show and two forward
                        tiles in flight (its profile); elsewhere the FA2 algorithm on
                        ``mma.sync`` (on Blackwell too: perfsim has no cuDNN sm100 model)
``sdpa-efficient``      ``SDPBackend.EFFICIENT_ATTENTION``: xFormers' CUTLASS memory-efficient
                        kernels (``cutlassF.h``/``cutlassB.h``) → ``FA2`` with their tiles
                        by head dim, ``m16n8k8`` MMAs, the address arithmetic of their
                        instruction census, PyTorch's key splits and the backward's
                        locked dQ accumulation (its waits measured without attention)
``sdpa-math``, ``eager``  the math backend / eager code: one PyTorch kernel per step →
                        ``Standard`` (math: scale folded into Q and K; eager: separate scale)
``flex``                ``torch.compile(flex_attention)``: a Triton template with FA2's loop
                        order; its default tiles on sm_90 and Triton's MMA choice → ``FA2``
``flash-attn-2``        flash-attn 2 called directly → ``FA2()``
``flash-attn-3``        flash-attn 3 (``hopper/``) → ``FA3(num_splits=1)`` as
                        ``flash_attn_func`` passes it (the heuristic for a paged cache, as
                        ``flash_attn_with_kvcache``); Hopper only
``flash-attn-cute``     flash-attn 4's CuTe-DSL kernels (``flash_attn.cute``): the FA3-style
                        kernels on sm_90 (``FA3`` with ``interface.py``'s sm90 tiles), FA4 on
                        sm_100; one split, its ``flash_attn_func``'s default
``triton-tutorial``     Triton's fused-attention tutorial kernel → ``FA2`` on Triton's MMA choice
======================  ======================================================================

Length: a table of ten presets, each with the facts it rests on (tiles, split and packing
rules, kernel names from profiles) cited in place; the facts are the bulk and belong beside the
preset that uses them.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import model_validator

from perfsim import algorithms as algos
from perfsim.algorithms import softmax_costs as sc
from perfsim.algorithms.base import Algorithm, Dims, infeasible_where, unknown_option_hint
from perfsim.algorithms.common import HEAD_DIM_MULTIPLE, MAX_HEAD_DIM
from perfsim.algorithms.fa2 import fwd_smem_bytes, next_power_of_two
from perfsim.algorithms.fa3 import kernel_head_dims
from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.frozen import replace
from perfsim.gpu import GPUSpec, compute_capability_numbers
from perfsim.kernel import KernelCost
from perfsim.mathops import asarray, cdiv, one_value
from perfsim.software import DEFAULT_SOFTWARE, load_software

#: Shared memory the driver reserved beside every CTA in the Nsight Compute profiles on the
#: project's H200: ``launch__shared_mem_per_block`` counts it with the kernel's own (an
#: elementwise kernel with none shows 1,024 B; Triton's tutorial preprocess kernel, 512 B in its
#: compiled metadata, shows 1,536 B; validate/reports/h200/probes/ncu/summary.json and
#: probe_tutorial_registers.json, whose CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK is
#: 1,024).
NCU_DRIVER_SMEM_BYTES = 1024


def _own_smem(profiled: dict) -> dict:
    """A table of Nsight Compute shared-memory figures per CTA as the kernels' own bytes (less
    :data:`NCU_DRIVER_SMEM_BYTES`): the occupancy rule adds the GPU's reservation itself."""
    return {key: value - NCU_DRIVER_SMEM_BYTES for key, value in profiled.items()}


def triton_tensor_family(gpu: GPUSpec, block_m: int, num_warps: int) -> str:
    """The MMA instructions Triton emits for a ``tl.dot`` with this tile on ``gpu``: WGMMA
    (MMAv3) on sm_90 when the CTA has whole warpgroups (``num_warps % 4 == 0``) and the
    tile's M is a multiple of 64, else ``mma.sync`` (MMAv2) (triton
    ``lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp``). On a GPU whose native family
    is ``tcgen05`` Triton uses it (MMAv5)."""
    if gpu.native_tensor_family == "tcgen05":
        return "tcgen05"
    if gpu.features.wgmma and num_warps % 4 == 0 and block_m % 64 == 0:
        return "wgmma"
    return "mma_sync"


#: cuDNN's sm90 backward tile (query rows, key rows) by the largest compiled head dim it is
#: used for. Its kernel names say 64 x 64 (``..._bprop_wgmma_f16_knob_26_64x64x{d}``), but up
#: to head dim 128 its shared-memory traffic is a 64 x 128 tile's: Nsight Compute counts
#: 164.8 M read and 50.0 M stored 128-byte wavefronts (WGMMA operands and loads; stores) at
#: d = 128 against 167.8 / 50.3 M for 64 query rows x 128 keys and 192.9 / 83.9 M for
#: 64 x 64, and 194.7 / 74.9 M at d = 64 against 201.3 / 67.1 M (B = 1, H = 4096 / d,
#: N = 4096; validate/reports/h200/probes/ncu/summary-smem.json). At d = 256 the 64 x 64
#: tile's (a 64 x 128 one would not fit in shared memory).
CUDNN_SM90_BWD_TILES = {128: (64, 128), 256: (64, 64)}
#: cuDNN's sm90 forward tile (B_r, B_c), the same at every head dim: its kernel names say
#: ``..._fprop_wgmma_f16_knob_7_64x128x{64,128,192,256}_...`` with 384 threads (a producer
#: warpgroup and two consumer warpgroups of 64 query rows each) and one CTA per SM. Nsight
#: Compute's counts agree with 128 keys: at d = 128 (B = 1, H = 32, N = 4096) 4,194,304 warp
#: WGMMAs are 275 GFLOP / (2·64·128·16) per warpgroup times its 4 warps — both GEMMs
#: m64n128k16; 41,943,040 shared-memory wavefronts from WGMMA are K, V and Q (64 x 128 each,
#: 128-byte wavefronts) per 64-row warpgroup per 128-key tile (validate/reports/h200/probes/
#: ncu/summary.json, summary-smem.json, summary-cudnn-shapes.json; causal as well). Not the
#: FA3 reference's per-head-dim table (``FWD_TILES``: 192 x 192 at d = 64, 128 x 176 at 128,
#: 128 x 80 at 256).
CUDNN_SM90_FWD_TILE = (128, 128)
#: Local-memory bytes a thread of cuDNN's sm90 kernels reloads per tile step when the call
#: has dropout, by compiled head dim (the call's rounded up to a multiple of 64): forward,
#: and the backward's dK/dV loop. Nsight Compute on the H200 (B = 1, H = 4096 / d, N = 4096,
#: dropout 0.1; ``validate/reports/h200/probes/ncu/summary-dropout.json`` and
#: ``summary-dropout-spills.json``; ``python -m perfsim.validate.spill_facts``): the local
#: loads over the kernel's tile steps and 384 threads — forward 0 at d = 64 and 128, 27.2 B
#: at 192, 336.8 B at 256 (2.12 GB loaded and 2.05 GB stored back per call there); backward
#: 20.1 B at 128, 30.2 B at 192, 112.9 B at 256, and 1.0 B at 64, which the kernel without
#: dropout reloads as well (summary-smem.json) and is taken as none, as the kernels without
#: dropout are (at most 1 B per thread and step; 0 at d = 192 and in the forwards).
#: The Philox state and the keep mask of a tile need registers the kernels at 192 and 256
#: (and the backward at 128) do not have (168 per thread in every profile).
CUDNN_SM90_DROPOUT_SPILL_BYTES = {
    "fwd": {128: 0.0, 192: 27.2, 256: 336.8},
    "bwd": {64: 0.0, 128: 20.1, 192: 30.2, 256: 112.9},
}
#: The causal kernels' figures where profiled (per thread and visited tile; B = 1, H = 16,
#: N = 4096, causal, dropout 0.1: ``summary-dropout-causal.json``): at compiled head dim 256
#: the forward reloads 541.4 B (1.76 GB per call: more per tile than the non-causal kernel)
#: and the backward 27.3 B (0.35 GB). Other head dims take the non-causal figure (ASSUMED:
#: not profiled causal; at d = 128 the causal forward does not spill either).
CUDNN_SM90_CAUSAL_DROPOUT_SPILL_BYTES = {"fwd": {256: 541.4}, "bwd": {256: 27.3}}
#: Whether cuDNN's sm90 forward overlaps a warpgroup's softmax with its own next ``Q Kᵀ``
#: (FA3 §3.2; ``FA3.intra_warpgroup_overlap``): ASSUMED not — two tiles in flight (the two
#: consumer warpgroups' ping-pong), not FA3's three. Evidence, Nsight Compute on the H200
#: (B = 1, H = 4096 / d, N = 4096, non-causal; summary.json, summary-smem.json): the tensor
#: pipe and the MUFU (XU) pipe were busy 50.4 % + 52.2 % of the active cycles at d = 64,
#: 75.7 % + 39.1 % at 128 and 80.6 % + 20.8 % at 256 — the MMAs and the exps overlap in
#: 3 %, 15 % and 1 % of the cycles. The two-station cycle with two tiles in flight puts the
#: pair at 51.8 + 52.2, 70.1 + 35.3 and 80.2 + 20.2 %; with three at 57.8 + 58.2,
#: 76.8 + 38.7 and 83.7 + 21.1 %. Two fits d = 64 and 256 and three fits 128, where cuDNN
#: overlaps more than two tiles in flight explain (a schedule perfsim does not know; the
#: kernel is closed source). flash_attn.cute's sm90 forward, with the reference's
#: three-stage schedule, overlaps 21 % at d = 128 (81.3 % + 39.6 %).
CUDNN_SM90_FWD_INTRA_WARPGROUP_OVERLAP = False
#: The compiled head dim of the one cuDNN sm90 forward kernel whose consumer warpgroups run
#: one's exps under the other's MMAs, and only where its softmax masks no score (no causal
#: mask, keys a multiple of :data:`CUDNN_SM90_TILE_MULTIPLE`): every other forward runs its
#: MMAs and exps in turn (``FA3.fwd_pipes_in_turn``, :func:`cudnn_fwd_pipes_in_turn`).
#: Nsight Compute, the tensor pipe's busy share plus the MUFU's (``sm__inst_executed_pipe_xu``
#: at 16 lanes per SM clock) of the kernel's duration, bf16, non-causal unless said:
#: head-dim-128 kernel on lengths that are multiples of 128 — 113.2 % (B = 1, H = 32,
#: N = 4096; H100 and H200 alike), 111.8 % (N = 3968), 109.2 % (B = 4, H = 16, N = 2048),
#: 115.3 % (B = 1, H = 16, N = 8192), 111.8 % (head dim 96, run by the 128 kernel); the same
#: kernel at N = 4000 101 % (H200), 4032 101.0 %, causal at 4096 98.7 %; the head-dim-64
#: kernel 102.5 % (N = 4096), 89.8 % at N = 4000, 94.4 % causal; head dim 192 99 %; 256
#: 101.0 %, causal 92.0 % (``validate/reports/h100/probes/ncu/summary-cudnn-fwd-overlap.json``,
#: a lent H100, 2026-12-07; ``validate/reports/h200/probes/ncu/summary-dropout.json``,
#: ``summary-dropout-spills.json``, ``summary-uneven.json``). Why only that path overlaps is
#: not known (the kernels are closed source); what each path does is measured.
CUDNN_SM90_FWD_OVERLAP_HEAD_DIM = 128


def cudnn_fwd_pipes_in_turn(dims):
    """Whether cuDNN's sm90 forward runs its MMAs and exps in turn for ``dims``
    (:data:`CUDNN_SM90_FWD_OVERLAP_HEAD_DIM`): every call but one on the head-dim-128 kernel
    whose softmax masks no score — no window, no causal mask over more than one query row
    (bottom-right, one row sees every key), and keys that fill whole tiles of
    :data:`CUDNN_SM90_TILE_MULTIPLE` (the last tile's out-of-range keys are masked score by
    score, as a causal mask is; a variable-length batch is one launch, so every sequence's
    keys must). The query length does not enter: rows past it are only
    not stored (ASSUMED from the few-query profiles, ``summary-few-queries-mask.json``: 16
    query rows against 32 768 keys keep the tensor pipe 77.9 % busy, which the exps in turn
    beside it would not leave room for). Per element on array dims; ``False`` for symbolic
    dims (the closed forms keep the overlapping cycle)."""
    if dims.symbolic:
        return False
    compiled = np.maximum(*kernel_head_dims("cudnn-sm90", dims))
    # one launch for a variable-length batch: any sequence's last key tile masks scores
    whole_keys = (asarray(dims.N_k) % CUDNN_SM90_TILE_MULTIPLE == 0 if dims.seqlens is None
                  else all(n_k % CUDNN_SM90_TILE_MULTIPLE == 0 for _, n_k in dims.seqlens))
    # a causal mask over one query row (bottom-right) hides no score; a window may
    masks = (dims.window != (None, None)) or (dims.causal & (asarray(dims.N_q) > 1))
    overlaps = (compiled == CUDNN_SM90_FWD_OVERLAP_HEAD_DIM) & whole_keys & ~asarray(masks)
    return ~overlaps if isinstance(overlaps, np.ndarray) else not bool(overlaps)
#: The lengths cuDNN's sm90 kernels need to skip their per-tile bound checks: its kernel names
#: give 64 x 128 forward and 64 x 64 backward tiles (``..._fprop_wgmma_f16_knob_7_64x128x128``,
#: ``..._bprop_wgmma_f16_knob_26_64x64x128``, validate/reports/h200/probes/ncu/summary.json),
#: so 128 for both lengths (ASSUMED for both phases: the measured uneven lengths are not
#: multiples of 64 either; softmax_costs.BOUND_CHECKS["cudnn"]). Not the FA3 model's tile, whose
#: 176-key forward tile at head dim 128 no power of two divides.
CUDNN_SM90_TILE_MULTIPLE = 128
#: Head dims above which cuDNN's sm90 backward issues S and dP in both consumer warpgroups.
CUDNN_SDP_TWICE_ABOVE = 128
#: FlexAttention's forward tiles, 16-bit inputs, by architecture: {head dim: (BLOCK_M, BLOCK_N,
#: num_stages, num_warps)}, looked up by the exact head dim, with
#: :data:`FLEX_FWD_DEFAULT_CONFIG` for every other head dim up to :data:`FLEX_MAX_HEAD_DIM`
#: (``get_flex_attn_fwd_configs`` in ``torch/_inductor/template_heuristics/triton.py``: by
#: compute capability, at least 11.0 ``sm_120_default_flex_config``, 10.x
#: ``sm_100_default_flex_config``, 9.0 ``h100_default_flex_config``, 8.x
#: ``a100_default_flex_config``, each ``.get((dtype, head_dim), FlexConfig(64, 64, 3, 4))``;
#: torch 2.13's source, and torch 2.5-2.7 had the sm_90 table in ``kernel/flex_attention.py``).
#: The sm_90 entries are confirmed on the project's H200 with torch 2.11: their three K/V
#: stages show in Nsight Compute as 115,712 / 132,096 / 230,400 / 132,096 B of shared memory
#: per CTA at head dims 64 / 128 / 192 (the default tile at 256 wide) / 256 — Q plus three
#: K/V tiles and a few KB of barriers — and 2 / 1 / 1 / 1 CTAs per SM
#: (validate/reports/h200/probes/ncu/summary.json flex-fwd-d128, summary-flexfwd.json). The
#: other architectures' are not measured.
FLEX_FWD_CONFIGS = {
    "sm120": {64: (128, 64, 2, 4), 128: (128, 64, 2, 8), 256: (32, 64, 2, 4)},
    "sm100": {64: (128, 128, 3, 4), 128: (128, 64, 3, 8), 192: (128, 128, 1, 8),
              256: (64, 32, 3, 4)},
    "sm90": {64: (128, 128, 3, 4), 128: (128, 64, 3, 8), 256: (64, 32, 3, 4)},
    "sm80": {64: (128, 64, 3, 4), 128: (128, 64, 3, 8), 192: (128, 32, 2, 8),
             256: (32, 64, 3, 4)},
}
FLEX_FWD_DEFAULT_CONFIG = (64, 64, 3, 4)
#: The largest head dim those tables cover (the same function's ``head_dim <= 256`` branch).
FLEX_MAX_HEAD_DIM = 256
#: FlexAttention's forward skips the key bound check on its inner tiles only when both
#: sequence lengths are multiples of 128 (``IS_DIVISIBLE`` in ``torch/_inductor/kernel/flex``:
#: ``seq_len_q % 128 == 0 and seq_len_kv % 128 == 0``).
FLEX_DIVISIBLE_MULTIPLE = 128
#: FlexAttention's forward takes its decoding template below this many query rows
#: (``_use_flex_decoding``: ``query.size(-2) < 128``).
FLEX_DECODING_BELOW = 128
#: The smallest head dim ``flex_attention`` accepts (its input validation).
FLEX_MIN_HEAD_DIM = 16
#: FlexAttention's backward on sm_90, 16-bit inputs, by head dim: (BLOCK_M1, BLOCK_N1, warps) of
#: its dK/dV programs (query rows per step, key rows per program). torch's rule for sm_90
#: (``get_flex_attn_bwd_configs``, torch 2.13's template_heuristics/triton.py) takes the call's
#: head dim h: 64 x 64 with 4 warps for h < 64, 64 x 128 with 8 warps for h <= 128, 64 x 64 with
#: 4 warps above. Seen in the kernels inductor generated on the project's H200 (torch 2.11;
#: validate/reports/h200/probes/flex_bwd_configs.json: d 64 -> 64 x 128 with 8 warps, d 192 and
#: 256 -> 64 x 64 with 4 warps; d 128 -> 8 warps and 128 keys from its profiled grid and block;
#: d 32 and d 48 -> 64 x 64 with 4 warps from their profiled grids, 64 dK/dV and 64 dQ programs
#: per head at N = 4096, and 128 threads, summary-small-headdims.json and
#: summary-small-headdims-2.json; the 48 profile was read after hold-out 30 was measured). Keyed
#: by the largest head dim each covers (63: below 64). Its dQ programs (BLOCK_M2 x BLOCK_N2) are
#: separate CTAs of the same grid; perfsim charges their work to the dK/dV CTAs
#: (``dq_recompute``).
FLEX_BWD_TILES = {63: (64, 64, 4), 128: (64, 128, 8), 256: (64, 64, 4)}
#: Registers per thread of that backward as compiled for sm_90 (Nsight Compute launch
#: statistics, the same summaries), by head dim: 144 at d 32 (3 CTAs of 4 warps per SM, 11.9
#: warps measured), 182 at d 48 (its dots run 64 wide, FLEX_HEAD_DIMS: every head dim from 33
#: to 63 compiles the same kernel), 194 at d 64, 253-255 above.
FLEX_BWD_REGISTERS_SM90 = {32: 144, 63: 182, 64: 194, 128: 253, 256: 255}
#: ... and by architecture (``get_flex_attn_bwd_configs``, torch 2.13's source:
#: ``FlexBwDConfig(BLOCK_M1, BLOCK_N1, BLOCK_M2, BLOCK_N2, num_stages, num_warps)`` by head dim
#: h): sm_10x 64 x 128 with 4 warps up to 128, 64 x 64 with 8 warps up to 192, 64 x 64 with 4
#: above; sm_8x, sm_11x and sm_12x 32 x 128 with 4 warps below 64, 64 x 64 with 4 from 64 on.
#: Keyed by the largest head dim each covers (63: below 64); not measured off sm_90.
FLEX_BWD_CONFIGS = {
    "sm120": {63: (32, 128, 4), 256: (64, 64, 4)},
    "sm100": {128: (64, 128, 4), 192: (64, 64, 8), 256: (64, 64, 4)},
    "sm90": FLEX_BWD_TILES,
    "sm80": {63: (32, 128, 4), 256: (64, 64, 4)},
}


def flex_arch(gpu: GPUSpec) -> str | None:
    """The key of FlexAttention's per-architecture tables for ``gpu``'s compute capability:
    ``"sm120"`` (11.0 and up), ``"sm100"`` (10.x), ``"sm90"`` (9.0), ``"sm80"`` (8.x and 9.x
    other than 9.0), else ``None`` (the defaults)."""
    major, minor = compute_capability_numbers(gpu.compute_capability)
    if major >= 11:
        return "sm120"
    if major == 10:
        return "sm100"
    if (major, minor) == (9, 0):
        return "sm90"
    return "sm80" if major >= 8 else None


#: Registers per thread of FlexAttention's forward as compiled for sm_90 (torch 2.11, Triton
#: 3.6), by ``(BLOCK_M, BLOCK_N, num_warps, the head dim its dots run at)``: Nsight Compute's
#: launch statistics of the kernels profiled on the H200 (validate/reports/h200/probes/ncu/
#: summary-small-headdims.json, summary-flexfwd.json, summary-flexdiv.json,
#: summary-flex-unaligned.json, summary.json; grid, block and shared memory match the tile;
#: the default tile at head dims 40 and 48, dots at 64: summary-small-headdims-2.json, read
#: after hold-out 30 was measured).
#: The register file then holds 5 CTAs per SM at head dims 16 and 32 (19.5 warps per SM
#: measured) where 255 registers would allow 2; at the larger tiles shared memory or the
#: registers keep the 1-2 CTAs the model had. Tiles not listed (another GPU, another torch, a
#: ``--set`` launch) keep the 255-register cap (ASSUMED, an upper bound).
FLEX_FWD_REGISTERS_SM90 = {(64, 64, 4, 16): 82, (64, 64, 4, 32): 90, (64, 64, 4, 64): 113,
                           (128, 128, 4, 64): 237,
                           (64, 64, 4, 128): 146, (128, 64, 8, 128): 157,
                           (64, 64, 4, 256): 236, (64, 32, 4, 256): 204}


def flex_fwd_config(gpu: GPUSpec, head_dim: int) -> tuple[int, int, int, int]:
    """``(BLOCK_M, BLOCK_N, num_stages, num_warps)`` of FlexAttention's forward on ``gpu`` for
    ``head_dim`` (:data:`FLEX_FWD_CONFIGS`)."""
    return FLEX_FWD_CONFIGS.get(flex_arch(gpu), {}).get(head_dim, FLEX_FWD_DEFAULT_CONFIG)


def flex_bwd_tile(gpu: GPUSpec, head_dim: int) -> tuple[int, int, int]:
    """``(query rows, key rows, warps)`` of FlexAttention's dK/dV programs on ``gpu``
    (:data:`FLEX_BWD_CONFIGS`; sm_90's for an architecture without a table)."""
    return _tile(FLEX_BWD_CONFIGS.get(flex_arch(gpu), FLEX_BWD_TILES), head_dim)


#: FlexAttention's templates tile Q, K and V as ``[BLOCK, QK_HEAD_DIM_ROUNDED]`` and
#: ``[BLOCK, V_HEAD_DIM_ROUNDED]``, the head dims rounded up to a power of two
#: (``next_power_of_two`` in ``torch/_inductor/kernel/flex/common.py``; ``tl.arange(0,
#: QK_HEAD_DIM_ROUNDED)`` in its Jinja templates): its dots run that wide.
FLEX_HEAD_DIMS = "power-of-two"
#: Local-memory bytes a thread reloads per dK/dV step when the compiled backward spills (the
#: dK and dV accumulators alone need 2 · B_c · d / threads registers: 256 for the tutorial at
#: d 128, 192 and 256 for FlexAttention at d 192 and 256, against 255), from Nsight Compute
#: divided by the profiled call's dK/dV steps and threads (``python -m
#: perfsim.validate.spill_facts``; ``reports/h200/probes/ncu/summary*.json`` and
#: ``reports/h100/probes/spill/summary-flex-spills.json``). Keyed by the largest head dim
#: each figure covers. The tutorial: only 64 and 128 profiled. FlexAttention without a block
#: mask: 1113 B at head dims 160 (H100), 192 (H200) and 224 (H100) alike — every head dim
#: its template pads to 256 with a mask on the head-dim loads — and 1233 B at 256 (H200), the
#: unmasked load; so 129-255 take 1113 (ASSUMED between the profiled ones and for 232-248:
#: the same masked code) and 256 takes 1233. The same compiled code on both GPUs (sm_90; the
#: H100's d 160 and the H200's d 192 agree to 0.01 %); taken on every GPU (each caps a thread
#: at 255 registers; the compiled code differs on other architectures and was not profiled).
TRITON_TUTORIAL_BWD_SPILL_BYTES = {64: 0.0, 128: 751.7}
FLEX_BWD_SPILL_BYTES = {128: 0.0, 255: 1113.1, 256: 1233.1}
#: The same for FlexAttention's backward compiled with a block mask (causal, a window): its
#: ``mask_mod`` code in the partial blocks takes the kernel from 253 to 255 registers at head
#: dim 128, and it spills — 0.159 GB of local loads in the profiled causal call (B = 16,
#: H = 16, N = 1024; ``summary-short-shapes.json``, ``spill_facts``), 33.8 B per thread and
#: dK/dV step, where the unmasked kernel moves none. Above 128 the masked kernel reloads
#: 1336 B per thread and step at head dims 160, 192 and 256 alike (causal, H100,
#: ``summary-flex-spills.json``: 1336.1, 1336.1 and 1335.6), 20 % more than the unmasked
#: kernel's 1113 (8 % more at 256). ASSUMED: none at head dims up to 64 (the unmasked kernel
#: holds 194 registers there) and the d = 128 figure from 65 (not profiled at 96).
FLEX_BWD_MASKED_SPILL_BYTES = {64: 0.0, 128: 33.8, 256: 1336.0}
#: (The tutorial's head-dim-64 backward moves 0.015 GB through local memory in the profiled
#: call, 0.8 B per thread and step: spills outside the loop, taken as none.)
#: Shared memory per backward CTA as compiled for sm_90, by head dim: it sets the CTAs per SM
#: (one for the tutorial at d 128 and FlexAttention above d 64). Nsight Compute's
#: ``shared_bytes_per_cta`` (``launch__shared_mem_per_block``, same summaries) counts the
#: driver's reservation beside the kernel's own (:data:`NCU_DRIVER_SMEM_BYTES`); the tables
#: hold the kernel's own, and the occupancy rule adds the GPU's reservation
#: (``GPUSpec.smem_reserved_per_cta_bytes``). Used on GPUs whose per-block limit holds it;
#: elsewhere Triton compiles other stages (not profiled): flash-attn 2's traits.
TRITON_TUTORIAL_BWD_SMEM = _own_smem({64: 75776, 128: 149504})
FLEX_BWD_SMEM = _own_smem({32: 34816, 63: 67584, 64: 83968, 128: 165888, 192: 198144,
                           256: 198144})


def _compiled_smem(table: dict, d, gpu: GPUSpec) -> int | None:
    """The compiled shared memory per CTA for head dim ``d`` (``table``), or ``None`` where it
    exceeds ``gpu``'s per-block limit or the head dim is above the table's."""
    smem = _lookup(table, d)
    return smem if smem is not None and smem <= gpu.smem_bytes_per_block else None
#: The tutorial kernel's forward launch, ``(BLOCK_M, BLOCK_N, warps, num_stages)``. Its forward
#: is autotuned (python/tutorials/06-fused-attention.py: BLOCK_M 64/128, BLOCK_N 32-128,
#: num_stages 2-6, 4 or 8 warps); the H200 runs record the configuration the tuner kept for each
#: call (``launch_config.fwd_config`` in validate/reports/h200-external*/results.jsonl, the tuner
#: restricted to external.TUTORIAL_CONFIGS): of 136 forward calls, 64 x 64 with 4 warps in 99
#: (3 stages in 83, 2 in 16; every call at head dim 256), 128 x 128 with 8 warps in 29 (head dim
#: 128, mostly N >= 1536) and 128 x 64 with 4 warps in 8 (head dim 64, mostly N <= 1024).
#: perfsim takes the modal 64 x 64, 4 warps, 3 stages at every head dim: which of two close
#: configurations the tuner's timing keeps is not modelled (with the compiled occupancy below
#: the model picks the recorded one for 85 of the 136 calls when asked to choose).
TRITON_TUTORIAL_FWD_TILE = (64, 64, 4, 3)
#: Registers per thread and shared memory per CTA (bytes) of that forward as compiled for
#: sm_90 by Triton 3.6, by head dim (``validate/probe_tutorial_registers.py``,
#: validate/reports/h200/probes/probe_tutorial_registers.json; the causal build, STAGE 3 — the
#: non-causal one takes 0-10 registers and 0-1 KB less): Q's tile and three K/V stages, so the
#: driver's occupancy calculator holds 3, 2 and 1 CTAs per SM at head dims 64, 128 and 256
#: (the same file; before these were read the model ran one K/V stage at 255 registers: 2 CTAs
#: at every head dim). Read on sm_90 only: elsewhere the stages take the formula of
#: ``FA2._fwd_smem_bytes`` and 255 registers (ASSUMED).
TRITON_TUTORIAL_FWD_COMPILED = {64: (107, 58368), 128: (138, 115712), 256: (213, 230400)}
#: Head dims the tutorial runs as perfsim models it. Its ``attention.forward`` asserts
#: ``HEAD_DIM_K in {16, 32, 64, 128, 256}`` and its forward kernel
#: ``tl.static_assert(BLOCK_N <= HEAD_DIM)``, so the 64-wide key tile of
#: :data:`TRITON_TUTORIAL_FWD_TILE` compiles at head dims 64, 128 and 256 only: at 16 and 32
#: the H200 runs of hold-out 29 failed to compile (CompileTimeAssertionFailure,
#: validate/reports/h200-external-holdout29/results.jsonl). Head dim 32 runs only the 32-wide
#: key tiles of the tutorial's full autotuning list and 16 none of them; neither is modelled.
TRITON_TUTORIAL_HEAD_DIMS = (64, 128, 256)
#: Options a preset reads from the kernel its own launch compiles to, by preset: ``(launch
#: options, compiled facts)``. A caller who changes a launch option (``--set block_m=128``; the
#: preset's own value changes nothing) gets the algorithm's defaults for the facts not given
#: too, not the facts of a launch that no longer runs (:meth:`Implementation.config`).
COMPILED_FACTS = {
    "triton-tutorial": (("block_m", "block_n", "warps", "fwd_stages"),
                        ("registers_per_thread", "fwd_smem_per_cta")),
    "flex": (("block_m", "block_n", "warps", "fwd_stages"),
             ("registers_per_thread", "bound_check_classes")),
}
#: Its backward (``_attn_bwd``): BLOCK_M1 = 32, BLOCK_N1 = 128, 4 warps (the tutorial's fixed
#: backward launch; the dQ loop uses the transposed 128 x 32 blocks).
TRITON_TUTORIAL_BWD_TILE = (32, 128, 4)
#: Largest head dim its backward runs: it takes powers of two up to 256 (``attention.forward``
#: asserts), and at 256 its fixed launch needs 295,936 B of shared memory per CTA, above the
#: H200's 232,448 (Triton's out-of-resources error, validate/reports/h200-external/README.md).
TRITON_TUTORIAL_BWD_MAX_HEAD_DIM = 128
#: xFormers' memory-efficient forward kernels (PyTorch's ``mem_eff_attention/kernels/
#: cutlassF.h``, 16-bit inputs, sm_80+), by the largest head dim each takes (its ``kMaxK``):
#: ``(kQueriesPerBlock, kKeysPerBlock, warps)``, warps = the tile / (32 x 32) per warp
#: (``kernel_forward.h``). Profiled at head dim 128 on the H200: the 64 x 128 kernel, block
#: 32 x 8 (eight warps), 128 registers per thread, 53,248 B of shared memory (Nsight
#: Compute, ``validate/reports/h200/probes/ncu/summary.json``, ``efficient-fwd-d128``).
#: Above 128 the 32 x 128 kernel keeps its output in global memory between value-column
#: passes (``gmem``); that round trip is not modelled.
EFFICIENT_FWD_TILES = {64: (64, 64, 4), 128: (64, 128, 8), 65536: (32, 128, 4)}
#: Their shared memory per CTA as compiled (Nsight Compute on the H200: 19,968 B for
#: ``64x64_rf`` in ``efficient-bwd-d64``'s forward, 53,248 B for ``64x128_rf``, 52,224 B for
#: ``32x128_gmem`` at head dims 192 and 256; ``summary.json`` and ``summary-efficient.json``,
#: the last two profiled after hold-out 19 was measured): the same sm80 code on every GPU.
#: Those figures count the driver's reservation; the table holds the kernels' own
#: (:func:`_own_smem`).
EFFICIENT_FWD_SMEM = _own_smem({64: 19_968, 128: 53_248, 65536: 52_224})
#: Registers per thread of the forward kernels (the same profiles; 122 for ``32x128_gmem``).
EFFICIENT_REGISTERS = 128
#: Its backward kernels (``cutlassB.h``), by the largest head dim each takes:
#: ``(queries, keys, warps, shared bytes per CTA as profiled — the driver's reservation
#: included, NCU_DRIVER_SMEM_BYTES —, registers per thread, spilled bytes each
#: thread reloads per tile step)``, from Nsight Compute on the H200 (``efficient-bwd-d128`` in
#: ``validate/reports/h200/probes/ncu/summary.json``; ``-d64`` and ``-d256`` in
#: ``summary-efficient.json``, profiled after hold-out 19 was measured): ``64x64_k64`` (128
#: threads, 43,264 B, 162 registers), ``128x128_k128`` (512 threads, 134,656 B: one CTA per
#: SM, 128 registers) and ``128x64_k65536`` (256 threads, 61,952 B, 151 registers, and
#: 12.9 GB of local-memory loads at B = 1, H = 16, N = 4096, d = 256: 1,536 B per thread and
#: tile step). Where a GPU's CTA may not take a kernel's shared memory (the 128 x 128 one on
#: consumer parts) a 64 x 64 kernel with 4 warps and a stand-in shared memory is ASSUMED
#: (``cutlassB.h`` lists 64 x 64 kernels for every head-dim bound; PyTorch's pick there was
#: not profiled).
EFFICIENT_BWD_KERNELS = {64: (64, 64, 4, 43_264, 162, 0.0),
                         128: (128, 128, 16, 134_656, 128, 0.0),
                         65536: (128, 64, 8, 61_952, 151, 1536.0)}
EFFICIENT_BWD_SMALL_SMEM_TILE = (64, 64, 4)
#: The largest head dim of PyTorch's sm86/sm89 backward pick ``128x64_k96`` (cutlassB.h),
#: which keeps dK/dV in registers and preloads; above it the stand-in follows
#: ``64x128_k128`` (global memory, no preload).
EFFICIENT_BWD_SM8X_K96 = 96
#: Load latencies (``GPUSpec.load_latency_s``) a cutlassB CTA waits per (query tile, key tile) step
#: and ``B_c``-wide dQ column block for its locked dQ accumulation (``FA2.dq_lock_waits``): take the
#: lock (two relaxed ``atomicCAS`` and a ``__nanosleep`` when it is free), fence, read the fp32
#: tile, count the add (``atomicAdd`` read back), write the tile, fence, release
#: (``kernel_backward.h``, ``AtomicLock``). Measured without attention by
#: ``validate/probe_dq_lock.py`` on an H100 (``validate/reports/h100/probes/dq_lock/
#: probe_dq_lock.json``): the protocol in a Triton kernel on cutlassB's grid and query rotation with
#: nothing else between the steps, per step less the tile at ``cta_load_bandwidth_bytes_per_s`` and
#: the same kernel without the protocol, over the busiest SM's steps: 9.06 load latencies with one
#: 16-warp CTA per SM and a 64 KiB tile, 8.60 with three 4-warp CTAs and a 16 KiB one; their mean
#: 8.8. (With the stand-in computation between the steps the 64 KiB rows give 8.9 and 10.1, less
#: certain: their compute-only control ran at twice the CTAs per SM.) Earlier runs whose atomics
#: carried acquire semantics (one more fence per step than the source) gave 9.79-10.14 on the H100
#: and 8.45-9.02 on the H200 (``probe_dq_lock-acquire.json``); the model frozen for hold-out 52 took
#: 9.8 from the first of them. The probe's release still costs each warp a fence the source's
#: thread-0 release does not (Nsight Compute: 2.95 against 2.03 ``MEMBAR`` per warp and step), so
#: the figure is high by up to that fence; its lock was nearly always free (0.13-0.63 ``atomicCAS``
#: per warp and step), where the real kernel's profile counts ~35 tries per step: contention is not
#: in it.
XFORMERS_DQ_LOCK_WAITS = 8.8
#: flash_attn.cute sm90 forward tiles by head dim (``interface.py`` ``_tile_size_fwd_sm90``;
#: head dim 96 takes 192 x 128 when causal or under a window; head dim 192 takes 112 keys
#: when the value head dim is above 128 and 96 with a window; head dim 256 takes 64 keys with
#: a window).
CUTE_SM90_FWD_TILES = {64: (192, 128), 96: (192, 144), 128: (128, 128), 192: (128, 128),
                       256: (128, 80)}
#: flash_attn.cute sm90 backward tiles (``_tile_size_bwd_sm90``: head dim 128 takes 64 query
#: rows when causal or under a window, 80 otherwise; head dim 256 takes 64 x 48, because its
#: 64 KB shared-memory dQ staging buffer leaves no room for FA3's C++ 64 x 80 tile — the
#: source's own comment, flash-attn-4 4.0.0b36; an Nsight Compute profile on the H200 shows
#: the 86 key blocks of N = 4096 / 48 in its grid, validate/reports/h200/probes/ncu/
#: summary.json ``cute-bwd-d256``).
CUTE_SM90_BWD_TILES = {64: (128, 128), 96: (64, 128), 128: (80, 128), 192: (64, 96),
                       256: (64, 48)}


def _lookup(table: dict, d):
    """The entry of a table keyed by head dim for ``d``: the smallest key ≥ ``d``, or
    ``None`` above the largest."""
    return next((table[hdim] for hdim in sorted(table) if d <= hdim), None)


def _cudnn_dropout_spills(dims) -> dict:
    """``FA3``'s spill options for cuDNN's sm90 kernels (``CUDNN_SM90_DROPOUT_SPILL_BYTES``
    by the call's head dim): none without dropout, or for symbolic dims (closed forms,
    ``perfsim.symbolic``, count no spills)."""
    if not dims.dropout_p or dims.symbolic:
        return {}
    compiled = max(kernel_head_dims("cudnn-sm90", dims))
    figures = {}
    for phase in ("fwd", "bwd"):
        figure = _tile(CUDNN_SM90_DROPOUT_SPILL_BYTES[phase], compiled)
        if dims.causal:
            figure = CUDNN_SM90_CAUSAL_DROPOUT_SPILL_BYTES[phase].get(compiled, figure)
        figures[f"{phase}_spill_reload_bytes"] = figure
    return figures


def _tile(table: dict, d):
    entry = _lookup(table, d)
    if entry is None:
        raise InfeasibleError(f"head dim {d} (the larger of head_dim and head_dim_v) is above "
                              f"the largest ({max(table)}) this implementation supports")
    return entry


#: Fields of an :class:`Implementation` a label may set beside its configuration's options.
PRESET_FIELDS = ("software", "upcast_16bit")


class Implementation(Algorithm):
    """An implementation preset: an algorithm configuration chosen per GPU, plus a software
    profile and any kernels the framework adds. Use through :func:`resolve_implementation`
    or ``perfsim.predict(..., algorithm="<name>")``.

    Args:
        preset: the implementation name (:data:`IMPLEMENTATIONS`).
        software: software profile id (:mod:`perfsim.software`).
        upcast_16bit: the implementation computes in float32 on 16-bit inputs (casts them
            up first and the results back: :func:`math_upcast_kernels`).
    """

    name: ClassVar[str] = "implementation"
    preset: str
    software: str = DEFAULT_SOFTWARE
    upcast_16bit: bool = False
    #: options set on the configuration the preset picks, e.g. ``{"pack_gqa": False}``
    #: (what a caller passes to the real function: ``flash_attn_func(..., pack_gqa=False)``).
    options: dict = {}
    #: the configuration chosen once for a whole variable-length batch (``varlen_config``);
    #: ``None``: chosen per shape
    batch_config: Algorithm | None = None

    @model_validator(mode="before")
    @classmethod
    def _preset_defaults(cls, data):
        """A preset built by hand (``Implementation(preset="sdpa-math")``) takes its preset's
        software profile and upcast as :func:`resolve_implementation` gives them, unless it
        sets them; an unknown preset is refused."""
        if isinstance(data, dict) and "preset" in data:
            key = str(data["preset"]).lower().replace("_", "-")
            if key not in IMPLEMENTATIONS:
                raise ValueError(f"unknown preset {data['preset']!r}; presets: "
                                 f"{', '.join(IMPLEMENTATIONS)}")
            data = {**IMPLEMENTATIONS[key][2], **data, "preset": key}
        return data

    def label(self) -> str:
        """The preset's name, with the options set on it and any preset field that differs
        from the preset's own (``sdpa-flash(block_m=64)``,
        ``flash-attn-2(software=flex)``): :func:`resolve` takes it back."""
        own = IMPLEMENTATIONS[self.preset][2]
        fields = {k: getattr(self, k) for k in PRESET_FIELDS
                  if getattr(self, k) != own.get(k, type(self).model_fields[k].default)}
        items = {**fields, **self.options}
        if not items:
            return self.preset
        return f"{self.preset}(" + ", ".join(f"{k}={v}" for k, v in items.items()) + ")"

    def config(self, dims: Dims, gpu: GPUSpec) -> Algorithm:
        """The algorithm configuration this implementation runs for ``dims`` on ``gpu``.

        Raises:
            InfeasibleError: the implementation does not run on this GPU.
            PerfsimError: an option the configuration does not have.
        """
        if self.batch_config is not None:
            return self.batch_config
        inner = IMPLEMENTATIONS[self.preset][0](dims, gpu)
        if (self.preset == "flash-attn-cute" and not gpu.features.tcgen05
                and self.options.get("num_splits", 1) not in (1, "auto")):
            raise InfeasibleError("flash_attn.cute refuses split-KV on sm90 (interface.py: "
                                  "'SplitKV not supported on SM 9.0')")
        if self.options:
            unknown = set(self.options) - set(type(inner).model_fields)
            if unknown:
                self._refuse_options(inner, unknown)
            fields = inner.model_dump()
            launch, facts = COMPILED_FACTS.get(self.preset, ((), ()))
            if any(name in self.options and self.options[name] != fields[name]
                   for name in launch):
                # facts read from the compiled kernel of the preset's own launch do not carry
                # over to another launch: the ones not given take the algorithm's defaults
                for name in facts:
                    if name not in self.options:
                        fields[name] = type(inner).model_fields[name].default
            inner = type(inner)(**{**fields, **self.options})
        return inner

    def _refuse_options(self, inner: Algorithm, unknown: set) -> None:
        """Refuse options the configuration run for this call does not have.

        Raises:
            PerfsimError: an option no algorithm configuration has (a typo: the sweep or
                call stops before any row).
            InfeasibleError: options of another algorithm class only. A preset can run
                another class for other calls (``sdpa-cudnn``: FA3 on Hopper, an FA2-class
                decode kernel for one query token), so such an option is this call's
                refusal, not the whole sweep's: a sweep marks these rows infeasible with this
                reason and goes on.
        """
        words = (f"{self.preset} runs {inner.name}, which has no option "
                 f"{', '.join(sorted(unknown))}"
                 f"{unknown_option_hint(sorted(unknown), type(inner).model_fields)}; options: "
                 f"{', '.join(type(inner).model_fields)}")
        owners = sorted(name for name, cls in algos.REGISTRY.items()
                        if cls is not type(inner) and unknown <= set(cls.model_fields))
        if not owners:
            raise PerfsimError(words)
        raise InfeasibleError(f"{self.preset}: runs {inner.name} for this call, which has no "
                              f"option {', '.join(sorted(unknown))} (an option of "
                              f"{' and '.join(owners)}); options here: "
                              f"{', '.join(type(inner).model_fields)}")

    def element_keys(self, dims: Dims, gpu: GPUSpec):
        """Sweeps: an integer per element of array dims, equal for elements that this preset
        runs with the same configuration (:meth:`config`), or None when one configuration
        serves them all. Only ``sdpa-cudnn`` picks per element today: its decode kernel for
        one query token on Hopper (:data:`ELEMENT_KEYS`)."""
        keys = ELEMENT_KEYS.get(self.preset)
        return None if keys is None or self.batch_config is not None else keys(dims, gpu)

    def varlen_config(self, dims: Dims, gpu: GPUSpec) -> Algorithm:
        """The preset with its inner configuration's batch-wide choices (split-KV, packing)
        fixed as options, for every sequence of a variable-length batch."""
        from perfsim.algorithms.splits import varlen_batch_dims

        # the batch as the launch sees it, in the call's phase (a preset that launches its
        # backward differently picks the backward's configuration here too)
        whole = replace(varlen_batch_dims(dims), phase=dims.phase)
        inner = self.config(whole, gpu)
        return self.model_copy(update={"batch_config": inner.varlen_config(dims, gpu)})

    def kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        """The kernels of the configuration this preset runs for ``dims`` on ``gpu``."""
        try:
            return self._kernels(dims, gpu)
        except InfeasibleError as exc:
            raise InfeasibleError(self.reason(str(exc), dims, gpu)) from None

    def reason(self, text: str, dims: Dims, gpu: GPUSpec) -> str:
        """A refusal as the user who asked for the preset reads it: the preset leads, and a
        reason that names the inner model ("fa2 needs ...") names it after the reason. The
        same words for a whole call (:meth:`kernels`) and for some rows of a sweep block."""
        if text.startswith(self.preset + ": "):
            return text
        if self.preset in HEAD_DIM_PADDING:
            # the kernel's own check reads "a multiple of 8 up to 256"; this library pads
            # other head dims to the next multiple of 8 first, so only the ceiling refuses
            text = text.replace(f"a multiple of {HEAD_DIM_MULTIPLE} up to {MAX_HEAD_DIM}",
                                f"at most {MAX_HEAD_DIM} (the library pads a head dim that "
                                f"is not a multiple of {HEAD_DIM_PAD_MULTIPLE} to one)")
        model = None
        try:
            inner = self.config(dims, gpu)
            names = {type(inner).__name__.lower(), inner.name}
        except PerfsimError:            # no configuration for these dims: say it as is
            names = set()
        sep = ": "
        for name in sorted(names, key=len, reverse=True):
            if text.startswith(name + " ") or text.startswith(name + ": "):
                # "fa3 runs ..." reads "flash-attn-cute runs ...": the preset is the subject
                sep = ": " if text.startswith(name + ": ") else " "
                text, model = text[len(name):].lstrip(": "), name
                break
            if text.startswith(name + "'s "):         # "fa3's backward takes ..."
                text, model = "its " + text[len(name) + 3:], name
                break
        note = f" (perfsim models it with {model})" if model else ""
        return f"{self.preset}{sep}{text}{note}"

    def _kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        check = IMPLEMENTATIONS[self.preset][3] if len(IMPLEMENTATIONS[self.preset]) > 3 \
            else None
        check_input_dtype(self.preset, dims)
        if check is not None:
            check(dims)
        if self.upcast_16bit and dims.dtype in UPCAST_DTYPES:
            return math_upcast_kernels(self.config(dims, gpu), dims, gpu)
        d8 = self._padded_head_dim(dims)
        if d8 is not None:
            return self._padded_kernels(dims, gpu, d8)
        out = self.config(dims, gpu).kernels(dims, gpu)
        if self.preset == "sdpa-cudnn":
            out = [with_mask_bias_loads(k, dims) if k.name == "fa3_fwd" else k for k in out]
        copies = load_software(self.software).bwd_layout_copies
        if copies and dims.bwd:
            out.append(layout_copy_kernel(dims, copies))
        return out

    def _padded_head_dim(self, dims: Dims):
        """The head dim this preset's library pads ``dims.d`` to (:data:`HEAD_DIM_PADDING`),
        or ``None`` where it runs the call as it is."""
        if (self.preset not in HEAD_DIM_PADDING or dims.symbolic
                or not dims.d % HEAD_DIM_PAD_MULTIPLE):
            return None
        padded = cdiv(dims.d, HEAD_DIM_PAD_MULTIPLE) * HEAD_DIM_PAD_MULTIPLE
        # above the kernels' largest head dim nothing is padded: the call is refused with
        # the head dim the user gave (the kernel's check), not the padded one
        return padded if padded <= MAX_HEAD_DIM else None

    def _padded_kernels(self, dims: Dims, gpu: GPUSpec, d8: int) -> list[KernelCost]:
        """A call whose head dim is not a multiple of 8, as the library runs it (see
        :data:`HEAD_DIM_PADDING`): Q, K and V padded with zeros to the next multiple
        (``constant_pad_nd``: a fill and a copy each), the kernels of the padded head dim —
        their tensor FLOPs on the zero columns timed, not counted (``KernelCost.executed``) —
        and in a backward the output gradient padded the same way (the sliced output's
        backward: zeros and a copy), then, where the library does, the three gradients copied
        out of the padded ones (``constant_pad_nd``'s backward clones the narrowed tensor)."""
        padded = replace(dims, d=d8, d_v=d8)
        share = dims.d / d8
        inner = []
        for k in self.config(padded, gpu).kernels(padded, gpu):
            if np.any(asarray(k.tensor_flops)):
                k = replace(k, executed=dict(k.sm_demand()),
                            tensor_flops=k.tensor_flops * share)
            inner.append(k)
        copies = load_software(self.software).bwd_layout_copies
        if copies and dims.bwd:
            inner.append(layout_copy_kernel(padded, copies))
        q_rows = dims.B * dims.H * dims.N_q
        kv_rows = dims.B * dims.H_kv * dims.N_k
        out = []
        if dims.fwd:
            for rows in (q_rows, kv_rows, kv_rows):
                out += head_dim_pad_kernels(rows, dims.d, d8, dims.e)
        # the forward's kernels come first in a fwd_bwd call; the dO pad before the backward's
        n_fwd = sum(1 for k in inner if "bwd" not in k.name and k.name != "layout_copy") \
            if dims.fwd else 0
        out += inner[:n_fwd]
        if dims.bwd:
            out += head_dim_pad_kernels(q_rows, dims.d, d8, dims.e)
        out += inner[n_fwd:]
        if dims.bwd and HEAD_DIM_PADDING[self.preset]:
            for rows in (q_rows, kv_rows, kv_rows):
                out.append(unpad_copy_kernel(rows, dims.d, dims.e))
        return out

    def memory_bytes(self, dims: Dims, gpu: GPUSpec):
        """Peak footprint (bytes) of the configuration this preset runs (a call padded to a
        head dim that is a multiple of 8: the padded call's, plus the unpadded Q, K and V
        it was copied from)."""
        d8 = self._padded_head_dim(dims)
        if d8 is not None:
            padded = replace(dims, d=d8, d_v=d8)
            inputs = dims.e * dims.B * (dims.H * dims.N_q * dims.d
                                        + dims.H_kv * dims.N_k * (dims.d + dims.d_v))
            return self.config(padded, gpu).memory_bytes(padded, gpu) + inputs
        if self.upcast_16bit and dims.dtype in UPCAST_DTYPES:
            # the float32 computation's footprint, plus the 16-bit Q, K, V it was cast from
            inputs = dims.e * dims.B * (dims.H * dims.N_q * dims.d
                                        + dims.H_kv * dims.N_k * (dims.d + dims.d_v))
            return self.config(dims, gpu).memory_bytes(replace(dims, dtype="fp32"), gpu) \
                + inputs
        return self.config(dims, gpu).memory_bytes(dims, gpu)

    def explain_lines(self, prediction) -> list[str]:
        """Which configuration and software profile the preset ran, in words."""
        dims = Dims.of(prediction.workload)
        inner = self.config(dims, prediction.gpu)
        lines = [f"{self.preset} runs {inner.label()} on {prediction.gpu.id} "
                 f"(software profile {self.software!r})."]
        note = self.stand_in_note(prediction.gpu, prediction.workload)
        if note:
            lines.append(note + ".")
        line = self._cudnn_path_line(prediction, dims, inner)
        if line:
            lines.append(line)
        line = self._cudnn_decode_line(prediction, dims, inner)
        if line:
            lines.append(line)
        line = self._library_splits_line(dims, inner)
        if line:
            lines.append(line)
        return lines

    def _library_splits_line(self, dims: Dims, inner) -> str | None:
        """Where the flash-attn 3 / flash_attn.cute presets run a few-query call unsplit
        because ``flash_attn_func`` defaults to one split (:data:`LIBRARY_DEFAULT_SPLITS`),
        in words: a fresh user's report found a contiguous decode step 3.7x slower than the
        same step over a paged cache (taken to come through ``flash_attn_with_kvcache``,
        which splits the keys) with nothing saying why. None elsewhere."""
        if (self.preset not in ("flash-attn-3", "flash-attn-cute") or dims.symbolic
                or getattr(inner, "num_splits", None) != LIBRARY_DEFAULT_SPLITS
                or dims.N_q > DECODE_NOTE_MAX_QUERIES
                or dims.N_k < DECODE_NOTE_MIN_KEYS_PER_QUERY * dims.N_q):
            return None
        if self.preset == "flash-attn-cute":
            return (f"{self.preset} runs flash_attn.cute's flash_attn_func, whose num_splits "
                    f"defaults to {LIBRARY_DEFAULT_SPLITS} (no split-KV: one CTA per query "
                    "tile and head walks all the keys); --set num_splits=auto times the "
                    "launch its split heuristic would choose.")
        return (f"{self.preset} runs flash_attn_func, whose num_splits defaults to "
                f"{LIBRARY_DEFAULT_SPLITS} (no split-KV: one CTA per query tile and head walks "
                "all the keys); a decode step through flash_attn_with_kvcache splits the keys "
                "by its heuristic instead: --set num_splits=auto (a paged cache, --page-size, "
                "is taken to come through it).")

    def _cudnn_decode_line(self, prediction, dims: Dims, inner) -> str | None:
        """Where cuDNN's one-token decode kernel runs (:data:`CUDNN_DECODE_TILE`), where its
        split count comes from, in words (a fresh user's report: ``num_splits=64`` was
        printed with no source, and multi-query attention came out slower than two K/V
        heads); None elsewhere."""
        if self.preset != "sdpa-cudnn" or not _runs_cudnn_decode(dims, prediction.gpu):
            return None
        splits = getattr(inner, "num_splits", 1)
        rows = cdiv(dims.H // dims.H_kv, CUDNN_DECODE_TILE[0])
        tiles = (f"; the {dims.H // dims.H_kv} query heads of a K/V head fill {rows} tiles of "
                 f"{CUDNN_DECODE_TILE[0]} rows, each with its own {splits} splits (ASSUMED: "
                 "the profiled calls had at most 8 query heads per K/V head, one tile)"
                 if rows > 1 else "")
        return (f"cuDNN's one-token decode kernel ({CUDNN_DECODE_TILE[0]} x "
                f"{CUDNN_DECODE_TILE[1]} tiles) splits the keys {splits} ways: B·H_kv·splits "
                f"= {CUDNN_DECODE_CTAS} CTAs, at most {CUDNN_DECODE_MAX_SPLITS} splits, as its "
                "profiled grids show (implementations.CUDNN_DECODE_CTAS; cuDNN's source is "
                f"closed, so the rule is read from four shapes){tiles}. Fewer K/V heads mean "
                "more splits, so a multi-query call can run more waves than one with more K/V "
                "heads.")

    def _cudnn_path_line(self, prediction, dims: Dims, inner) -> str | None:
        """Which of cuDNN's two forward cycles the call's training forward runs
        (:func:`cudnn_fwd_pipes_in_turn`), and whether the rule or an option chose it; None
        where no such forward runs (another preset, another GPU, the decode kernel)."""
        if (self.preset != "sdpa-cudnn" or not dims.fwd or dims.symbolic
                or not any(k.cost.name == "fa3_fwd" for k in prediction.kernels)):
            return None
        in_turn = bool(getattr(inner, "fwd_pipes_in_turn", False))
        rule = bool(cudnn_fwd_pipes_in_turn(dims))
        where = (f"only its head-dim-{CUDNN_SM90_FWD_OVERLAP_HEAD_DIM} kernel with no score "
                 f"masked (no causal mask or window, keys a multiple of "
                 f"{CUDNN_SM90_TILE_MULTIPLE}) runs one consumer warpgroup's exps under the "
                 "other's MMAs (Nsight Compute's pipe counters; "
                 "implementations.CUDNN_SM90_FWD_OVERLAP_HEAD_DIM)")
        what = ("runs its MMAs and its exps in turn" if in_turn else
                "overlaps one consumer warpgroup's exps with the other's MMAs")
        if in_turn != rule:
            return (f"cuDNN's forward {what} on this call because the fwd_pipes_in_turn "
                    f"option says so; the profiled rule would have it "
                    f"{'in turn' if rule else 'overlap'}: {where}.")
        return f"cuDNN's forward {what} on this call: {where}."

    def stand_in_note(self, gpu: GPUSpec, workload=None) -> str | None:
        """What perfsim runs in place of kernels it has no model of on ``gpu`` (for
        ``workload``, where given), in words, or ``None``: cuDNN's attention is modelled from
        its sm90 (Hopper, WGMMA + TMA) kernels only; elsewhere ``sdpa-cudnn`` runs the FA2 loop
        (ASSUMED: cuDNN's sm80/sm89 kernels were not profiled; on Blackwell its sm100 kernels
        are likely faster). FlexAttention's forward with fewer than 128 query rows runs its
        decoding template (``_use_flex_decoding`` in torch/_inductor/kernel/flex:
        ``query length < 128``), which perfsim times as the prefill template. A causal
        ``sdpa-cudnn`` call with N_q ≠ N_k: torch's ``is_causal`` is the top-left mask
        there, so the bottom-right mask perfsim's workload means reaches cuDNN as an
        explicit ``attn_mask`` (``torch.nn.attention.bias.causal_lower_right``
        materialises it for that backend): the forward's bias loads are charged
        (:func:`with_mask_bias_loads`), the mask's conversion kernels and the backward's
        bias reads are not."""
        if (self.preset == "flex" and workload is not None and workload.phase != "bwd"
                and int(np.max(workload.seqlen_q if workload.seqlens_q is None
                               else workload.seqlens_q)) < FLEX_DECODING_BELOW):
            return ("FlexAttention runs its decoding template (flex_decoding, split over the "
                    f"keys) for fewer than {FLEX_DECODING_BELOW} query rows; perfsim has no "
                    "model of it and times the prefill template in its place, with the "
                    "prefill call's host floor (the decoding call's host time measured "
                    "148-216 µs per forward at 64 query rows on the H200, "
                    "validate/reports/h200/probes/probe_host_floor-flex-n64.json)")
        if (self.preset == "sdpa-cudnn" and workload is not None
                and gpu.features.wgmma and gpu.features.tma
                and workload.seqlens_q is not None and max(workload.seqlens_q) == 1):
            return ("a variable-length batch of one query token per sequence: perfsim times "
                    "cuDNN's sm90 prefill kernel for it, as for any ragged batch; its "
                    "one-token decode kernel is modelled for fixed-length calls only (ASSUMED: "
                    "not profiled on nested-tensor inputs)")
        if (self.preset == "sdpa-cudnn" and workload is not None
                and gpu.features.wgmma and gpu.features.tma
                and explicit_mask(Dims.of(workload)).any()):
            keyless = ("; with N_q > N_k the first N_q − N_k query rows see no key, an "
                       "all-masked softmax row whose output cuDNN was not checked for "
                       "(ASSUMED: timed as the masked kernel)"
                       if np.any(asarray(workload.seqlen_q) > asarray(workload.seqlen_k))
                       else "")
            return ("SDPA's is_causal is the top-left mask when N_q ≠ N_k, so the "
                    "bottom-right causal mask reaches cuDNN as an explicit attn_mask: perfsim "
                    "charges the forward's per-key-tile bias loads (with_mask_bias_loads), "
                    "not torch's mask conversion kernels and their host time (short caches: "
                    "tens of µs) nor the backward's bias reads" + keyless)
        if (self.preset == "triton-tutorial" and workload is not None
                and workload.phase != "bwd" and flex_arch(gpu) == "sm90"
                and np.any(asarray(workload.seqlen_q) % TUTORIAL_EXACT_MULTIPLE != 0)):
            return ("the tutorial's forward returned wrong results on the H200 at sequence "
                    "lengths that are not a multiple of 128 (its TMA loads of the last tile "
                    "run into the next head's rows: relative error 0.13-0.66, "
                    "validate/README.md); perfsim times the kernel as launched, which is "
                    "not a correct attention")
        if self.preset == "triton-tutorial" and flex_arch(gpu) != "sm90":
            return ("the tutorial kernel's registers and shared memory were read from its "
                    "sm_90 build only (TRITON_TUTORIAL_FWD_COMPILED); on "
                    f"{gpu.arch} perfsim takes 255 registers per thread and the stage "
                    "formula (ASSUMED), which may hold fewer CTAs per SM than the kernel "
                    "Triton compiles there")
        if self.preset != "sdpa-cudnn" or (gpu.features.wgmma and gpu.features.tma):
            return None
        if gpu.native_tensor_family == "tcgen05":
            return ("perfsim has no model of cuDNN's Blackwell (sm100) kernels: this is the "
                    "FA2 loop on mma.sync, likely slower than cuDNN's own kernels")
        return (f"perfsim has no model of cuDNN's kernels on {gpu.arch}: this is the FA2 "
                "loop as a stand-in (ASSUMED; only cuDNN's Hopper kernels were profiled)")


#: Input dtypes SDPA's math backend computes in float32 (``_scaled_dot_product_attention_math``
#: promotes fp16/bf16 query, key and value with ``.to(at::kFloat)`` unless
#: ``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)``; default off).
UPCAST_DTYPES = ("fp16", "bf16")


def math_upcast_kernels(config: Algorithm, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
    """SDPA math on 16-bit inputs: Q, K, V cast to float32, the eager steps in float32 (the
    matmuls on the FP32 pipes: TF32 is off by default), O cast back; in backward dO cast up
    and dQ, dK, dV cast back."""
    wide = replace(dims, dtype="fp32")
    q_o = dims.B * dims.H * dims.N_q
    k_v = dims.B * dims.H_kv * dims.N_k
    out = []
    if dims.fwd:
        out.append(cast_kernel("upcast_qkv", q_o * dims.d + k_v * (dims.d + dims.d_v),
                               dims.e, 4))
        out += config.kernels(replace(wide, phase="fwd"), gpu)
        out.append(cast_kernel("downcast_o", q_o * dims.d_v, 4, dims.e))
    if dims.bwd:
        out.append(cast_kernel("upcast_do", q_o * dims.d_v, dims.e, 4))
        out += config.kernels(replace(wide, phase="bwd"), gpu)
        out.append(cast_kernel("downcast_grads", q_o * dims.d + k_v * (dims.d + dims.d_v),
                               4, dims.e))
    return out


def cast_kernel(name: str, elements, src_bytes: int, dst_bytes: int) -> KernelCost:
    """An elementwise dtype conversion of ``elements`` values."""
    return KernelCost(name=name, grid=cdiv(elements, 4096), warps_per_cta=4,
                      fp32_flops=elements, hbm_read_bytes=src_bytes * elements,
                      hbm_write_bytes=dst_bytes * elements)


def explicit_mask(dims: Dims) -> np.ndarray:
    """Where (per row, for sweeps) a causal SDPA call has N_q ≠ N_k, so that its
    bottom-right mask reaches a backend as an explicit ``attn_mask``: torch's ``is_causal``
    is the top-left mask there, and ``CausalBias._dispatch`` (torch/nn/attention/bias.py)
    takes ``is_causal`` only for ``seq_len_q == seq_len_kv`` and otherwise, for a backend
    other than flash or memory-efficient, materialises the lower-right mask. ``False`` for
    symbolic dims and variable-length batches — whole or one group of equal sequences
    (``Dims.varlen``): SDPA takes a ragged batch as a nested tensor with ``is_causal``, no
    ``attn_mask`` tensor (the groups had carried the mask and its bias loads: a one-token
    causal batch, whose mask hides nothing, 64 % slow). ASSUMED: that path masks
    bottom-right, as the workload's ``causal`` means (not checked against torch's
    nested-tensor dispatch; top-left would hide more keys, not fewer)."""
    if dims.symbolic or dims.seqlens is not None or dims.varlen or not dims.causal:
        return asarray(False)
    return asarray(dims.N_q) != asarray(dims.N_k)


def with_mask_bias_loads(cost: KernelCost, dims: Dims) -> KernelCost:
    """cuDNN's sm90 forward (``cost``) where the call's mask reaches it as an explicit
    ``attn_mask``: causal with N_q ≠ N_k, where torch's ``is_causal`` would be
    the top-left mask, so the bottom-right one is passed as a tensor
    (``torch.nn.attention.bias.causal_lower_right`` materialises it for this backend).
    Its softmax warps then read a bias tile per visited key tile with plain LDGs and wait
    for it (``KernelCost.serial_loads``: per CTA, one wait per key tile and the tile's
    ``block_m x block_n`` input-dtype bias). Evidence, Nsight Compute on the H200
    (``validate/reports/h200/probes/ncu/summary-few-queries-mask.json``; B = 1, H = 32,
    N_q = 16, N_k = 32768): the same kernel and MMAs with and without the mask, 2.1 M LDGs
    and 243 MB more L2 reads (29.7 KB per key tile and CTA against the 32 KB bias tile) with
    it, 717 against 377 µs. Other calls are returned as they are."""
    masked = explicit_mask(dims)
    if not dims.fwd or not masked.any():
        return cost
    tiles_per_cta = cost.launch["tiles"] / cost.grid
    bias_tile = cost.launch["block_m"] * cost.launch["block_n"] * dims.e
    waits = np.where(masked, tiles_per_cta, 0.0)
    if not np.ndim(waits):
        waits = float(waits)
    return replace(cost, serial_loads=(waits, waits * bias_tile),
                   launch={**cost.launch, "explicit_mask": True})


#: Presets whose library pads a head dim that is not a multiple of
#: :data:`HEAD_DIM_PAD_MULTIPLE` before its kernels, and whether the backward copies the
#: gradients out of the padded ones. PyTorch's SDPA flash path (``attention.cpp``,
#: ``scaled_dot_product_attention``: ``pad_last_dim<8, false>`` on Q, K and V, the flash
#: kernel, then ``post_process_flash_output`` slices the output; ``check_head_dim_size_flash``
#: takes any head dim up to 256): its autograd clones the narrowed gradients
#: (``constant_pad_nd``'s backward is ``constant_pad_nd`` with negated pads, which returns
#: ``narrow(...).clone()``), True. flash-attn 2's Python interface (``flash_attn_interface.py``:
#: ``F.pad`` of Q, K, V when ``head_size_og % 8``; the backward pads ``dout`` and returns
#: ``dq[..., :head_size_og]``, a view), False.
HEAD_DIM_PADDING = {"sdpa-flash": True, "flash-attn-2": False}
#: The head-dim multiple those kernels take (flash-attn's ``head_size % 8 == 0`` check).
HEAD_DIM_PAD_MULTIPLE = 8


def head_dim_pad_kernels(rows, d: int, d_padded: int, e: int) -> list[KernelCost]:
    """``constant_pad_nd`` of a ``rows`` x ``d`` tensor to ``rows`` x ``d_padded`` (elements of
    ``e`` bytes): ``at::empty``, ``fill_`` with zeros (written once) and ``narrow(...).copy_``
    of the input (read, and written into the padded rows by PyTorch's strided copy)."""
    fill = rows * d_padded * e
    data = rows * d * e
    return [KernelCost(name="pad_fill", grid=cdiv(fill, 4096), warps_per_cta=4,
                       hbm_write_bytes=fill),
            KernelCost(name="pad_copy", grid=cdiv(data, 4096), warps_per_cta=4,
                       hbm_read_bytes=data, hbm_write_bytes=data, eager_op="strided_copy")]


def unpad_copy_kernel(rows, d: int, e: int) -> KernelCost:
    """A gradient's first ``d`` columns copied out of its padded rows (``clone`` of the
    narrowed tensor, PyTorch's strided copy)."""
    data = rows * d * e
    return KernelCost(name="unpad_copy", grid=cdiv(data, 4096), warps_per_cta=4,
                      hbm_read_bytes=data, hbm_write_bytes=data, eager_op="strided_copy")


def layout_copy_kernel(dims: Dims, tensors: int) -> KernelCost:
    """``tensors`` B x H x N_q x d_v tensors copied (read and written) into another layout by
    PyTorch's strided elementwise copy (``SoftwareProfile.bwd_layout_copies``; seen in the
    profile of SDPA's flash backward, ``validate/reports/h200/probes/profile_calls.json``)."""
    nbytes = tensors * dims.e * dims.B * dims.H * dims.N_q * dims.d_v
    return KernelCost(name="layout_copy", grid=cdiv(nbytes, 4096), warps_per_cta=4,
                      hbm_read_bytes=nbytes, hbm_write_bytes=nbytes, eager_op="strided_copy")


#: cuDNN's decode kernel (one query token) on sm90, from its name in a profile
#: (``cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x128_1x4x1``:
#: 16 query rows x 128 keys, 128 threads, 183 registers;
#: validate/reports/h200/probes/probe_decode_kernels.json): the query heads of a K/V head
#: packed into the 16 rows, the keys split over CTAs and a ``lean_reduction_kernel`` combining
#: the parts.
CUDNN_DECODE_TILE, CUDNN_DECODE_REGISTERS = (16, 128, 4), 183
#: Its split count as the profiled grids show it: ``B·H_kv·splits`` = 256 CTAs (grids
#: 32x8, 8x32 and 4x8x8 for B·H_kv = 8, 32, 64), at most 64 splits (64 for B·H_kv = 1) —
#: read from four profiled shapes, not from cuDNN's source (which is closed).
CUDNN_DECODE_CTAS, CUDNN_DECODE_MAX_SPLITS = 256, 64


def _fa2_like(**options):
    """The FA2 model for a kernel that is not flash-attn 2's code (cuDNN off Hopper and in
    decode, xFormers', Triton's): none of flash-attn 2's compiled facts; unless the options
    say otherwise (FlexAttention), every head dim runs as itself
    (``compiled_head_dims="exact"``, ASSUMED: not read from the kernels' sources)."""
    options.setdefault("compiled_head_dims", "exact")
    # none of flash-attn 2's per-tile bound checks (its census) unless the options say
    options.setdefault("bound_checks", "none")
    # nor its early exit of query tiles that see no key: FlexAttention's and the tutorial's
    # Triton templates load Q before their key loop (ASSUMED for xFormers' and cuDNN's
    # kernels off Hopper, whose sources or profiles were not read for it)
    options.setdefault("keyless_tile_exit", False)
    return algos.FA2(**options)


def _cudnn_fwd_stages(dims, gpu) -> int:
    """K/V ring depth of cuDNN's sm90 forward: the reference's 2 where a 2-deep ring of its
    128 x 128 tile fits the CTA's shared memory beside Q, else 1 — the compiled head dims 192
    and 256, where Q with two K/V stages would need 240 and 320 KiB (ASSUMED: cuDNN is closed;
    at head dim 256 its kernel takes 233,472 B, all an SM has; ``CUDNN_SM90_FWD_TILE``).
    Counted at the compiled head dims."""
    if dims.symbolic:
        return 2
    need = fwd_smem_bytes(dims.e, *CUDNN_SM90_FWD_TILE, 2,
                          *kernel_head_dims("cudnn-sm90", dims))
    return 2 if need <= gpu.smem_bytes_per_block else 1


def _sdpa_cudnn(dims, gpu):
    # The decode kernel is a forward kernel: a backward runs the sm90 training kernels below.
    # The forward of a fwd_bwd call (timed as its own phase) keeps the decode kernel:
    # ASSUMED, cuDNN's choice under autograd at one query token was not profiled.
    if _runs_cudnn_decode(dims, gpu):
        block_m, block_n, warps = CUDNN_DECODE_TILE
        splits = one_value(_cudnn_decode_splits(dims))
        if splits is None:                  # a sweep block is grouped by _sdpa_cudnn_keys
            raise PerfsimError("sdpa-cudnn: the decode kernel's split count differs across "
                               "this block (perfsim.sweep evaluates each count apart)")
        return _fa2_like(block_m=block_m, block_n=block_n, warps=warps, num_splits=splits,
                         pack_gqa=True, registers_per_thread=CUDNN_DECODE_REGISTERS)
    if gpu.features.wgmma and gpu.features.tma:
        # more query tokens: the sm90 WGMMA kernel, one CTA per (batch, head, query tile) up
        # to one per SM, no split-KV and no GQA packing (the profiled grids: 32 CTAs for
        # B = 1, H = 32 at N_q = 4 and 16; 132 for large grids)
        # At head dim 256 both consumer warpgroups issue the whole S and dP GEMMs of a tile:
        # Nsight Compute on the H200 counts 88 warpgroup WGMMAs per 64 x 64 tile against 28 at
        # d = 128 (the five GEMMs with S and dP twice and the three d-wide ones split in
        # n128 halves), with the tensor pipe busy 1.45x the useful FLOPs' share (1.04x at
        # d = 64 and 128), and twice the exps per score element (2 MUFU against 1 at d = 128:
        # each warpgroup recomputes the softmax of its copy) (validate/reports/h200/probes/
        # ncu/summary.json, cudnn-bwd-d*); the head-dim-192 kernel a call at 160 runs does the
        # same (summary-cudnn-shapes.json). The integer, predicate and extra FP32
        # instructions of its census: softmax_costs.ADDRESS_ARITHMETIC["cudnn"].
        # (keyed by multiples of 64, so the call's head dim finds its compiled kernel's
        # entry; a head dim left as a symbol takes the widest kernel's tile)
        hdim = max(dims.d, dims.d_v)
        bm, bn = (_tile(CUDNN_SM90_BWD_TILES, hdim) if getattr(hdim, "is_number", True)
                  else CUDNN_SM90_BWD_TILES[max(CUDNN_SM90_BWD_TILES)])
        block_m, block_n = CUDNN_SM90_FWD_TILE
        # the forward's path (a backward alone runs no forward: one value for the block)
        in_turn = one_value(cudnn_fwd_pipes_in_turn(dims)) if dims.fwd else 0
        if in_turn is None:                 # a sweep block is grouped by _sdpa_cudnn_keys
            raise PerfsimError("sdpa-cudnn: the forward's overlap path differs across this "
                               "block (perfsim.sweep evaluates each path apart)")
        return algos.FA3(block_m=block_m, block_n=block_n,
                         intra_warpgroup_overlap=CUDNN_SM90_FWD_INTRA_WARPGROUP_OVERLAP,
                         fwd_pipes_in_turn=bool(in_turn),
                         stages=_cudnn_fwd_stages(dims, gpu),
                         bwd_block_m=bm, bwd_block_n=bn, address_arithmetic="cudnn",
                         num_splits=1, pack_gqa=False, dropout_supported=True,
                         # with dropout its pipes run back to back (FA3.serial_stations)
                         serial_stations=bool(dims.dropout_p),
                         # ... and at the wider head dims spills registers
                         **_cudnn_dropout_spills(dims),
                         fused_scale=False, bwd_sdp_twice_above=CUDNN_SDP_TWICE_ABOVE,
                         bound_checks="cudnn", bound_check_unless_multiple=CUDNN_SM90_TILE_MULTIPLE,
                         # closed source: the profiled kernels' names carry the head dim
                         # they run, the call's rounded up to a multiple of 64
                         compiled_head_dims="cudnn-sm90",
                         # a GQA backward writes dK, dV per query head and sums them after:
                         # Nsight Compute on an H100 lists two cudnn::fmha_reduce_head
                         # kernels after the main one (35.8 + 35.6 MB at B 1, H 32/8, N 4096,
                         # d 128; validate/reports/h100/probes/ncu/ncu-gqa-bwd.tgz)
                         gqa_dkdv_accumulator=False)
    return _fa2_like(tensor_family=gpu.native_tensor_family
                     if gpu.native_tensor_family != "tcgen05" else "mma_sync")


def _flex(dims, gpu):
    hdim = max(dims.d, dims.d_v)
    if dims.phase == "bwd":
        # the backward template computes dQ in programs of their own that recompute S and
        # dP (bwd_dq beside bwd_dkdv in the generated kernel): FLEX_BWD_TILES, and the
        # register spills of its dK/dV programs above head dim 128 (FLEX_BWD_SPILL_BYTES),
        # and from head dim 65 with a block mask (FLEX_BWD_MASKED_SPILL_BYTES)
        block_m, block_n, warps = flex_bwd_tile(gpu, hdim)
        # the compiled facts (spills, shared memory) were read from sm_90's kernels: another
        # architecture's tile takes its spills only where it is the same tile, and flash-attn
        # 2's shared-memory traits as the stand-in (ASSUMED; not profiled there)
        same_tile = (block_m, block_n, warps) == _tile(FLEX_BWD_TILES, hdim)
        return _fa2_like(bwd_block_m=block_m, bwd_block_n=block_n, bwd_warps=warps,
                         dq_recompute=True, dq_programs=True,
                         compiled_head_dims=FLEX_HEAD_DIMS,
                         bwd_spill_bytes=(_tile(FLEX_BWD_MASKED_SPILL_BYTES if dims.masked
                                                else FLEX_BWD_SPILL_BYTES, hdim)
                                          if same_tile else 0.0),
                         bwd_smem_per_cta=(_compiled_smem(FLEX_BWD_SMEM, hdim, gpu)
                                           if flex_arch(gpu) == "sm90" else None),
                         bwd_registers_per_thread=(
                             _lookup(FLEX_BWD_REGISTERS_SM90, hdim)
                             if same_tile and flex_arch(gpu) == "sm90" else None),
                         tensor_family=triton_tensor_family(gpu, block_n, warps),
                         bound_checks="flex",
                         bound_check_unless_multiple=FLEX_DIVISIBLE_MULTIPLE,
                         num_splits=1, pack_gqa=False)
    if hdim > FLEX_MAX_HEAD_DIM:
        raise InfeasibleError(f"head_dim {hdim} is above the largest ({FLEX_MAX_HEAD_DIM}) "
                              "FlexAttention supports")
    block_m, block_n, stages, warps = flex_fwd_config(gpu, hdim)
    # the main template has no split-KV and no GQA packing (flex's short-query decoding
    # template is not modelled)
    # its scale multiplies and, when a sequence length is not a multiple of 128, the key
    # bound check on every tile (softmax_costs.FLEX_SCALE_FMULS, BOUND_CHECK_ALU_OPS_PER_SCORE)
    # its pipelined loads copy Q, K and V rows 16 bytes at a time (split_sector_rows: at head
    # dims 16 bytes off a whole number of 32-byte sectors, 1.5x the L2 bytes; Nsight Compute,
    # reports/h200/probes/ncu/summary-flex-unaligned.json, and validate/probe_row_alignment.py)
    # and on sm_90 the check's code by the lengths' class (multiples of 16, even, odd), with
    # the spills it brings at the 4-warp tiles near 255 registers
    # (softmax_costs.FLEX_FWD_BOUND_CHECK_CLASSES)
    compiled = {}
    if flex_arch(gpu) == "sm90":
        tile = (block_m, block_n, warps, next_power_of_two(hdim))
        regs = FLEX_FWD_REGISTERS_SM90.get(tile)
        compiled = {} if regs is None else {"registers_per_thread": regs}
        classes = sc.flex_fwd_bound_check_classes(tile)
        if classes is not None:
            compiled["bound_check_classes"] = classes
    return _fa2_like(block_m=block_m, block_n=block_n, warps=warps, dq_recompute=True,
                     dq_programs=True,
                     split_sector_rows=True, scale_multiplies=sc.FLEX_SCALE_FMULS,
                     bound_checks="flex", bound_check_unless_multiple=FLEX_DIVISIBLE_MULTIPLE,
                     compiled_head_dims=FLEX_HEAD_DIMS, fwd_stages=stages,
                     tensor_family=triton_tensor_family(gpu, block_m, warps),
                     num_splits=1, pack_gqa=False, **compiled)


def _triton_tutorial(dims, gpu):
    if dims.phase == "bwd":
        # _attn_bwd: BLOCK_M1 = 32 query rows against BLOCK_N1 = 128 keys for dK/dV, then a
        # dQ loop that recomputes S and dP (4 warps). Its dots have M = 128 (the key block in
        # the dK/dV loop, BLOCK_M2 = 128 in the dQ loop), so Triton emits WGMMA on sm_90: the
        # compiled kernel's PTX has 82-146 wgmma.mma_async and no mma.sync
        # (validate/reports/h200/probes/probe_tutorial_registers.json). It also spills at head
        # dim 128 (255 registers, n_spills 224 against 16 at head dim 64): the reloads are
        # TRITON_TUTORIAL_BWD_SPILL_BYTES.
        block_m, block_n, warps = TRITON_TUTORIAL_BWD_TILE
        return _fa2_like(bwd_block_m=block_m, bwd_block_n=block_n, bwd_warps=warps,
                         dq_recompute=True, bwd_prescaled_k=True, bwd_masked_row_split=2,
                         bwd_spill_bytes=_tile(TRITON_TUTORIAL_BWD_SPILL_BYTES,
                                               max(dims.d, dims.d_v)),
                         bwd_smem_per_cta=_compiled_smem(TRITON_TUTORIAL_BWD_SMEM,
                                                         max(dims.d, dims.d_v), gpu),
                         tensor_family=triton_tensor_family(gpu, block_n, warps),
                         num_splits=1, pack_gqa=False)
    block_m, block_n, warps, stages = TRITON_TUTORIAL_FWD_TILE
    # (the table's largest key is the largest head dim the tutorial takes: 256)
    hdim = max(dims.d, dims.d_v)
    registers, smem = _tile(TRITON_TUTORIAL_FWD_COMPILED, hdim)
    # (head dims below 64 are refused: _tutorial_limits, TRITON_TUTORIAL_HEAD_DIMS)
    compiled = ({"registers_per_thread": registers, "fwd_smem_per_cta": smem}
                if flex_arch(gpu) == "sm90" else {})
    # one CTA per (batch, head, query tile): no split-KV, no packing
    return _fa2_like(block_m=block_m, block_n=block_n, warps=warps, fwd_stages=stages,
                     tensor_family=triton_tensor_family(gpu, block_m, warps),
                     num_splits=1, pack_gqa=False, **compiled)


def _runs_cudnn_decode(dims, gpu) -> bool:
    """Whether ``sdpa-cudnn`` runs its one-token decode kernel (:data:`CUDNN_DECODE_TILE`):
    a forward of one query token on a GPU with WGMMA and TMA."""
    return bool(gpu.features.wgmma and gpu.features.tma and _one_query_token(dims)
                and dims.phase == "fwd")


def _one_query_token(dims) -> bool:
    """A decode step with one query token; on arrays (a sweep block), every element one
    (``perfsim.sweep`` groups a block's elements by :func:`_sdpa_cudnn_keys` first)."""
    return (not dims.symbolic and dims.seqlens is None
            and bool(np.all(asarray(dims.N_q) == 1)))


def _cudnn_decode_splits(dims):
    """Splits of cuDNN's decode kernel (per element on arrays)."""
    return np.minimum(np.minimum(CUDNN_DECODE_MAX_SPLITS, np.maximum(
        1, CUDNN_DECODE_CTAS // (dims.B * dims.H_kv))), cdiv(dims.N_k, CUDNN_DECODE_TILE[1]))


def _sdpa_cudnn_keys(dims, gpu):
    """Per element of array dims, which of ``_sdpa_cudnn``'s configurations runs it: twice
    the decode kernel's split count (0 for the sm90 training kernel) plus 1 where the training
    kernel's forward runs its pipes in turn (:func:`cudnn_fwd_pipes_in_turn`)
    (``Implementation.element_keys``)."""
    if not (gpu.features.wgmma and gpu.features.tma) or dims.phase == "bwd":
        return None             # (the forward of a fwd_bwd call is timed as a forward)
    one = asarray(dims.N_q) == 1
    # twice the decode kernel's split count (0: the training kernel), plus 1 where the
    # training kernel runs its pipes in turn (cudnn_fwd_pipes_in_turn): a fwd_bwd call's
    # backward runs the training kernels at one query token too, so both keys group a block
    path = np.asarray(cudnn_fwd_pipes_in_turn(dims), dtype=int)
    return np.where(one, _cudnn_decode_splits(dims), 0) * 2 + path


def _efficient(dims, gpu):
    hdim = max(dims.d, dims.d_v)
    block_m, block_n, warps = _tile(EFFICIENT_FWD_TILES, hdim)
    fwd_smem = _tile(EFFICIENT_FWD_SMEM, hdim)
    bwd_m, bwd_n, bwd_warps, profiled_smem, registers, spill = _tile(EFFICIENT_BWD_KERNELS,
                                                                     hdim)
    smem = profiled_smem - NCU_DRIVER_SMEM_BYTES       # the kernel's own (_own_smem)
    bwd = {"bwd_spill_bytes": spill}
    if smem <= gpu.smem_bytes_per_block:
        bwd["bwd_smem_per_cta"] = smem
    else:
        bwd_m, bwd_n, bwd_warps = EFFICIENT_BWD_SMALL_SMEM_TILE
    bwd["bwd_registers_per_thread"] = registers
    # The kernel's kMaxK (its table key) against its B_r: above it dK and dV stay in global
    # memory between steps and are read back each step (``kOutputInRF = kIsHalf && kMaxK <=
    # kBlockSizeI`` false), and the next GEMM's operands are not preloaded (``kPreload``
    # needs ``kOutputInRF``: the static_assert in kernel_backward.h; the profiled kernel
    # names carry it — ``..._k64``/``_k128`` preload, ``_k65536`` not). On GPUs whose CTAs
    # cannot take the 128 x 128 kernel, PyTorch launches the first listed kernel that fits
    # (cutlassB.h): ``128x64_k96`` for sm86/sm89 up to head dim 96 (dK/dV in registers,
    # preloaded), then ``64x128_k128`` (B_r 64 < kMaxK 128: in global memory, not
    # preloaded); the 64 x 64 stand-in tile takes those two rules (ASSUMED: not profiled).
    k_max = next(key for key in sorted(EFFICIENT_BWD_KERNELS) if hdim <= key)
    stand_in = "bwd_smem_per_cta" not in bwd
    in_registers = (hdim <= EFFICIENT_BWD_SM8X_K96) if stand_in else k_max <= bwd_m
    bwd.update(bwd_key_splits="xformers", dq_lock_waits=XFORMERS_DQ_LOCK_WAITS,
               dq_reductions=False, bwd_gmem_accumulators=not in_registers,
               bwd_gemms_preloaded=in_registers)
    # one CTA per (batch, head, query tile): no split-KV, no GQA packing (profiled grid
    # [1, 32, 1] for B = 1, H = 32, one query token). Its census (Nsight Compute on the H200,
    # efficient-fwd/bwd-d128): m16n8k8 HMMAs (CUTLASS's InstructionShape<16, 8, 8> for
    # 16-bit inputs on sm_80: 8 HMMA per score element forward, 20 backward, twice SDPA
    # flash's), an FSETP and two FMULs around each exp (built without fast math), the scale
    # and the row max apart (FMUL, FADD), and its address arithmetic
    # (softmax_costs.ADDRESS_ARITHMETIC). Its backward loads and stores the fp32 dQ
    # accumulator under a per-tile lock instead of reducing into it (no RED in the census,
    # 0.3-2.6 M ATOM for the lock: FA2.dq_reductions)
    return _fa2_like(block_m=block_m, block_n=block_n, warps=warps,
                     bwd_block_m=bwd_m, bwd_block_n=bwd_n, bwd_warps=bwd_warps,
                     num_splits=1, pack_gqa=False, mma_k=8, fast_math=False,
                     fwd_smem_per_cta=fwd_smem,
                     fused_scale=False, address_arithmetic="xformers",
                     registers_per_thread=EFFICIENT_REGISTERS, compiled_head_dims="xformers", **bwd)


def _no_gqa(dims) -> None:
    """SDPA's memory-efficient backend takes no grouped-query attention (with
    ``enable_gqa=True`` and H != H_kv torch 2.11 finds no kernel)."""
    _lacks(dims, "SDPA's memory-efficient kernel", "gqa")


def _sdpa_math(dims) -> Algorithm:
    """``at::_scaled_dot_product_attention_math`` (aten/src/ATen/native/transformers/
    attention.cpp): Q and K scaled before the matmul, a causal mask turned into a float mask and
    added in place, ``_safe_softmax``, and the attention weights cast back to the input dtype
    beside the output (computed although SDPA discards them); run on float32 copies of 16-bit
    inputs (:func:`math_upcast_kernels`)."""
    cast = dims.e if dims.dtype in UPCAST_DTYPES else 0
    return algos.Standard(scale_in_matmul=True, softmax="safe", mask_op="add_float",
                          weights_cast_bytes=cast)


def _no_dropout(dims) -> None:
    """FlashAttention-3 (``hopper/``) has no dropout (flash-attention issue #1251), and its
    K and V take the query's dtype (``hopper/flash_api.cpp``: ``TORCH_CHECK(k.scalar_type()
    == q_type, "query and key must have the same dtype")``); algorithm ``fa3`` keeps a
    narrower K/V cache as a what-if."""
    if dims.dropout_p:
        raise InfeasibleError("no dropout in this kernel (FlashAttention-3's hopper/ code "
                              "has none)")
    _lacks(dims, "FlashAttention-3", "kv_dtype")


def _cute_limits(dims) -> None:
    """flash_attn.cute (flash-attn 4) has no dropout on any architecture: its
    ``flash_attn_func`` takes no ``dropout_p`` (``flash_attn/cute/interface.py``), and it
    asserts one dtype for Q, K and V. The ``fa4`` algorithm keeps dropout and a narrower K/V
    cache as what-ifs (flash-attn 2's draw, ASSUMED)."""
    if dims.dropout_p:
        raise InfeasibleError("flash_attn.cute has no dropout (its flash_attn_func takes no "
                              "dropout_p, on Hopper or Blackwell); algorithm fa4 models one "
                              "as a what-if")
    # its interface asserts q.dtype == k.dtype == v.dtype (flash_attn/cute/interface.py)
    _lacks(dims, "flash_attn.cute", "kv_dtype")


def _lacks(dims, name: str, *features: str) -> None:
    """Raise InfeasibleError for the first of ``features`` the workload uses: ``window``,
    ``softcap``, ``paged``, ``kv_dtype`` (a K/V dtype of its own), ``gqa``, ``dropout``."""
    used = {"window": dims.window != (None, None), "softcap": bool(dims.softcap),
            "paged": bool(dims.page_size), "kv_dtype": dims.kv_dtype not in (None, dims.dtype),
            "gqa": False, "dropout": bool(dims.dropout_p)}
    words = {"window": "no sliding-window argument", "softcap": "no softcap argument",
             "paged": "no paged K/V cache", "kv_dtype": "no K/V dtype of its own (Q, K, V "
             "share one dtype)", "gqa": "no grouped-query attention (H_kv must equal H)",
             "dropout": "no dropout"}
    for f in features:
        if f == "gqa" and not dims.symbolic:        # per element in sweeps
            infeasible_where(asarray(dims.H) != asarray(dims.H_kv),
                             f"{name} has {words[f]}")
        elif used[f]:
            raise InfeasibleError(f"{name} has {words[f]}")


#: preset -> (the library's name, the input dtypes it takes, the ones perfsim models for it).
#: Sources: torch's per-backend dtype sets in ``aten/src/ATen/native/transformers/cuda/
#: sdp_utils.cpp`` (flash: Half, BFloat16; cuDNN: Half, BFloat16; memory-efficient: Half,
#: Float, BFloat16 on sm80+); the math path takes every floating dtype (fp32 with TF32
#: matmuls when enabled); FlexAttention carries fp32 tile tables beside the 16-bit ones
#: (``get_flex_attn_fwd_configs``); flash-attn 2 takes fp16 and bf16 (``mha_fwd``'s dtype
#: check); FlashAttention-3 adds fp8 e4m3 forward (``hopper/flash_api.cpp``). Presets not
#: listed leave the dtype to the model they run.
PRESET_INPUT_DTYPES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "sdpa-flash": ("torch SDPA's flash backend", ("fp16", "bf16"), ("fp16", "bf16")),
    "sdpa-cudnn": ("torch SDPA's cuDNN backend", ("fp16", "bf16"), ("fp16", "bf16")),
    "sdpa-efficient": ("torch SDPA's memory-efficient backend", ("fp16", "bf16", "fp32"),
                       ("fp16", "bf16")),
    "sdpa-math": ("torch SDPA's math backend", ("fp16", "bf16", "fp32"),
                  ("fp16", "bf16", "fp32", "tf32")),
    "flex": ("FlexAttention", ("fp16", "bf16", "fp32"), ("fp16", "bf16")),
    "flash-attn-2": ("flash-attn 2", ("fp16", "bf16"), ("fp16", "bf16")),
    "flash-attn-3": ("FlashAttention-3", ("fp16", "bf16", "fp8_e4m3"),
                     ("fp16", "bf16", "fp8_e4m3")),
}
#: where a user refused by one backend can go instead
_DTYPE_HINTS = {"fp8_e4m3": " (fp8 attention: flash-attn-3, or algorithm fa3 or fa4)",
                "fp32": " (for fp32 inputs torch picks the memory-efficient or math backend: "
                        "sdpa-efficient, sdpa-math)"}


def _words(items) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def check_input_dtype(preset: str, dims) -> None:
    """Refuse an input dtype the library behind ``preset`` does not take, saying which it
    takes (:data:`PRESET_INPUT_DTYPES`), or one it takes that perfsim does not model for it,
    saying so — never a library's limit reported as perfsim's or the other way round.

    Raises:
        InfeasibleError: the dtype and the dtypes allowed.
    """
    entry = PRESET_INPUT_DTYPES.get(preset)
    if entry is None or not isinstance(dims.dtype, str):
        return
    name, takes, modelled = entry
    if "fp32" in takes:            # tf32: fp32 tensors with TF32 matmuls allowed
        takes = (*takes, "tf32") if "tf32" not in takes else takes
    if dims.dtype not in takes:
        hint = _DTYPE_HINTS.get(dims.dtype, "")
        if dims.dtype == "fp32" and not preset.startswith("sdpa-"):
            hint = ""                  # the SDPA backends' fallback, no help elsewhere
        raise InfeasibleError(f"{name} takes {_words(takes)} inputs, not {dims.dtype}{hint}")
    if dims.dtype not in modelled:
        raise InfeasibleError(f"{name} also runs {dims.dtype} inputs, but perfsim models it "
                              f"for {_words(modelled)} only")


def _sdpa_limits(dims) -> None:
    """``F.scaled_dot_product_attention`` takes Q, K, V of one dtype, an optional mask,
    ``is_causal``, ``dropout_p``, ``scale`` and ``enable_gqa``: no window, softcap or paged
    cache (those go through an explicit ``attn_mask`` or another library). Its backends'
    input dtypes: :data:`PRESET_INPUT_DTYPES`."""
    _lacks(dims, "torch SDPA", "window", "softcap", "paged", "kv_dtype")


def _flash_attn_2_limits(dims) -> None:
    """flash-attn 2's ``mha_fwd`` takes one head dim and one dtype for Q, K and V."""
    _same_head_dims(dims, "flash-attn 2")
    _lacks(dims, "flash-attn 2", "kv_dtype")


def _same_head_dims(dims, name: str) -> None:
    """flash-attn 2 takes one head dim for Q, K and V (``CHECK_SHAPE(v, ..., head_size_og)``
    in its ``mha_fwd``; PyTorch's ``check_head_dim_size_flash`` asks the same of SDPA flash,
    and Triton's fused-attention tutorial asserts it)."""
    if dims.symbolic:
        return
    infeasible_where(asarray(dims.d) != asarray(dims.d_v),
                     f"{name} takes one head dim for Q, K and V (head_dim_v must equal "
                     "head_dim)")


def _flash_limits(dims) -> None:
    _sdpa_limits(dims)
    _same_head_dims(dims, "torch SDPA's flash backend")


def _efficient_limits(dims) -> None:
    _sdpa_limits(dims)
    _no_gqa(dims)


def _flex_limits(dims) -> None:
    """FlexAttention expresses windows (block masks) and softcap (``score_mod``); it has no
    dropout, and its paged and mixed-dtype paths are not modelled."""
    _lacks(dims, "FlexAttention", "dropout", "paged", "kv_dtype")
    if not dims.symbolic:
        # flex_attention's input check: "embedding dimension ... must be at least 16"
        infeasible_where(np.minimum(asarray(dims.d), asarray(dims.d_v))
                         < FLEX_MIN_HEAD_DIM,
                         f"FlexAttention takes head dims of at least {FLEX_MIN_HEAD_DIM}")


#: The tutorial's forward computed right only at sequence lengths that are multiples of this
#: on the H200 (its TMA loads of the last tile run into the next head's rows otherwise:
#: relative error 0.13-0.66, recorded as ``incorrect``, validate/README.md).
TUTORIAL_EXACT_MULTIPLE = 128


def _tutorial_limits(dims) -> None:
    """The tutorial's backward computes causal attention only, with N a multiple of its
    128-row block (its ``attention.backward`` asserts); it has no GQA, window, softcap,
    paged cache, mixed dtype, dropout or variable-length batch (it takes one ``N_CTX`` for
    every sequence and no ``cu_seqlens``); its forward asserts one head dim for Q, K and V
    (``HEAD_DIM_Q == HEAD_DIM_K == HEAD_DIM_V``, Triton's ``06-fused-attention.py``)."""
    _lacks(dims, "the tutorial kernel", "gqa", "window", "softcap", "paged", "kv_dtype")
    _same_head_dims(dims, "the tutorial kernel")
    if dims.varlen or dims.seqlens is not None:
        raise InfeasibleError("the tutorial kernel has no variable-length batch: it takes one "
                              "sequence length (N_CTX) for every sequence and no cu_seqlens; "
                              "give the padded batch (seqlen_q = the longest) instead")
    if not dims.symbolic:
        for name, value in (("head_dim", dims.d), ("head_dim_v", dims.d_v)):
            scalar = np.ndim(value) == 0
            if scalar and value in TRITON_TUTORIAL_HEAD_DIMS:
                continue            # one call: no array work on the common path
            infeasible_where(~np.isin(asarray(value), TRITON_TUTORIAL_HEAD_DIMS),
                             f"the tutorial takes {name} in "
                             f"{', '.join(map(str, TRITON_TUTORIAL_HEAD_DIMS))} (its forward "
                             "asserts a power of two from 16 to 256 and a key tile no wider "
                             "than the head dim; the 64-wide tile modelled needs 64 or more), "
                             f"got {value if scalar else 'others'}")
        if np.ndim(dims.N_q) or np.ndim(dims.N_k) or dims.N_q != dims.N_k:
            infeasible_where(asarray(dims.N_q) != asarray(dims.N_k),
                             "the tutorial takes one sequence length for Q and K/V (its "
                             "N_CTX), got " + (f"N_q {dims.N_q} and N_k {dims.N_k}"
                                               if np.ndim(dims.N_q) == 0 == np.ndim(dims.N_k)
                                               else "N_q different from N_k"))
    if dims.bwd and not dims.symbolic:
        # element-wise for sweeps (N_q, N_k and causal may be arrays)
        # one check per condition, so the message names the one that failed
        infeasible_where(np.logical_not(dims.causal),
                         "the tutorial's backward runs causal attention only (causal=False "
                         "given)")
        for name, n in (("N_q", dims.N_q), ("N_k", dims.N_k)):
            infeasible_where(asarray(n) % 128 != 0,
                             f"the tutorial's backward needs {name} a multiple of 128 (its "
                             f"block), got {n if np.ndim(n) == 0 else 'other lengths'}")
    if dims.bwd and max(dims.d, dims.d_v) > TRITON_TUTORIAL_BWD_MAX_HEAD_DIM:
        raise InfeasibleError(
            f"the tutorial's backward runs head dims up to {TRITON_TUTORIAL_BWD_MAX_HEAD_DIM}: "
            "it takes powers of two up to 256, and at 256 its fixed launch needs 295,936 B of "
            "shared memory per CTA (Triton's out-of-resources error on the H200)")
    if dims.dropout_p:
        raise InfeasibleError("the tutorial kernel has no dropout")


#: The library calls take Q, K and V already in fp8 (flash-attn 3's ``hopper/flash_api.cpp``
#: with optional descale factors, flash_attn.cute's ``interface.py`` with
#: ``torch.float8_e4m3fn`` tensors): quantising them is the caller's work, so the presets run
#: FA3 without its preparation kernel (``FA3(quantize_inputs=False)``; the ``fa3`` algorithm
#: keeps FA3 §3.3's Hadamard rotation and block quantisation of 16-bit inputs).
LIBRARY_FP8_INPUTS_QUANTISED = True


#: The split count the libraries' Python entry points pass when the caller gives none:
#: flash-attn 3's ``flash_attn_func`` and ``flash_attn_varlen_func`` (hopper/
#: flash_attn_interface.py) and flash_attn.cute's ``flash_attn_func`` / ``_flash_attn_fwd``
#: (flash_attn/cute/interface.py) default to ``num_splits=1`` — no split-KV; only a value
#: below 1 runs the split heuristic (``num_splits_heuristic``). flash-attn 3's
#: ``flash_attn_with_kvcache`` defaults to 0, the heuristic: a call with a paged K/V cache
#: (``page_table``, which ``flash_attn_func`` does not take) is taken to come through it. A
#: fresh reviewer's report: both presets split prefill forwards the libraries run whole.
LIBRARY_DEFAULT_SPLITS = 1
#: Query rows up to which, over keys at least :data:`DECODE_NOTE_MIN_KEYS_PER_QUERY` times as
#: many, an unsplit flash-attn 3 / flash_attn.cute call is explained as a decode step that
#: ``flash_attn_with_kvcache`` would split (``_library_splits_line``): wording thresholds for
#: when the note is useful, not a property of the kernels (their split heuristic decides).
DECODE_NOTE_MAX_QUERIES = 16
DECODE_NOTE_MIN_KEYS_PER_QUERY = 4


def _flash_attn_3(dims, gpu):
    splits = "auto" if (not dims.symbolic and dims.page_size) else LIBRARY_DEFAULT_SPLITS
    return algos.FA3(num_splits=splits, quantize_inputs=not LIBRARY_FP8_INPUTS_QUANTISED)


def _cute(dims, gpu):
    if gpu.features.tcgen05:
        return algos.FA4(num_splits=LIBRARY_DEFAULT_SPLITS)
    if not (gpu.features.wgmma and gpu.features.tma):
        raise InfeasibleError(
            f"perfsim models flash_attn.cute's kernels for Hopper (sm_90: FA3-style, WGMMA "
            f"and TMA) and Blackwell (sm_100: FA4, tcgen05) only; {gpu.id} is {gpu.arch}")
    # sm90: flash_attn.cute packs the query heads of a K/V head whenever H > H_kv and
    # refuses split-KV (interface.py: ``assert not is_split_kv, "SplitKV not supported on
    # SM 9.0"``), so the preset runs one split
    # it packs the query heads of a K/V head whenever H > H_kv; on arrays (sweeps) that is
    # pack_gqa=True, which packs exactly the elements with H > H_kv (perfsim.sweep groups them)
    pack = not dims.symbolic and (np.ndim(dims.H) > 0 or np.ndim(dims.H_kv) > 0
                                  or bool(dims.H != dims.H_kv))
    d = max(dims.d, dims.d_v)
    block_m, block_n = _tile(CUTE_SM90_FWD_TILES, d)
    local = any(side is not None for side in dims.window)
    if d > 64 and d <= 96 and (dims.causal or local):
        block_n = 128
    elif 128 < d <= 192:
        block_n = 96 if local else (128 if dims.d_v <= 128 else 112)
    elif d > 192 and local:
        block_n = 64
    bwd_m, bwd_n = _tile(CUTE_SM90_BWD_TILES, d)
    if 96 < d <= 128 and (dims.causal or local):
        bwd_m = 64
    # one CTA per tile, not persistent: its sm90 forward builds its tile scheduler with
    # ``is_persistent=False`` (SingleTileScheduler, or SingleTileLPTScheduler when causal) and
    # its backward uses SingleTileScheduler / SingleTileLPTBwdScheduler (flash_fwd_sm90.py,
    # flash_bwd_sm90.py, flash-attn-4 4.0.0b36); Nsight Compute on the H200 shows grids of
    # one CTA per tile (32 x 32 for the 1024 tiles of B = 1, H = 32, N = 4096, d = 128,
    # forward and backward; validate/reports/h200/probes/ncu/summary.json)
    # its head dims rounded to its tile multiples (fa3.CUTE_SM90_HEAD_DIM_MULTIPLE); the
    # causal or windowed forward's tiles launched longest first (``SingleTileLPTScheduler if
    # self.is_causal or self.is_local``, flash_fwd_sm90.py): no in-order tail
    return algos.FA3(block_m=block_m, block_n=block_n, bwd_block_m=bwd_m, bwd_block_n=bwd_n,
                     num_splits=1, pack_gqa=pack, persistent=False,
                     compiled_head_dims="cute-sm90", lpt_scheduling=True,
                     quantize_inputs=not LIBRARY_FP8_INPUTS_QUANTISED)


#: name -> (f(dims, gpu) -> algorithm config, what it is, extra Implementation fields[,
#: f(dims) raising InfeasibleError where the real kernel cannot run])
IMPLEMENTATIONS: dict[str, tuple] = {
    "sdpa-flash": (lambda dims, gpu: algos.FA2(fast_math=False, fused_scale=False,
                                               compiled_head_dims="pytorch",
                                               address_arithmetic="pytorch-flash"),
                   "torch SDPA, SDPBackend.FLASH_ATTENTION (flash-attn 2 CUDA kernels)",
                   {"software": "sdpa-flash"}, _flash_limits),
    "sdpa-cudnn": (_sdpa_cudnn, "torch SDPA, SDPBackend.CUDNN_ATTENTION",
                   {"software": "sdpa-cudnn"}, _sdpa_limits),
    "sdpa-efficient": (_efficient, "torch SDPA, SDPBackend.EFFICIENT_ATTENTION "
                       "(xFormers CUTLASS kernel)", {"software": "sdpa-efficient"},
                       _efficient_limits),
    "sdpa-math": (lambda dims, gpu: _sdpa_math(dims),
                  "torch SDPA, SDPBackend.MATH (one kernel per step)",
                  {"software": "sdpa-math", "upcast_16bit": True}, _sdpa_limits),
    "eager": (lambda dims, gpu: algos.Standard(mask_op="masked_fill"),
              "eager PyTorch: matmul, scale, masked_fill, softmax, matmul",
              {"software": "sdpa-math"}),
    "flex": (_flex, "torch.compile(flex_attention)", {"software": "flex"}, _flex_limits),
    "flash-attn-2": (lambda dims, gpu: algos.FA2(), "flash_attn.flash_attn_func (v2)", {},
                     _flash_attn_2_limits),
    "flash-attn-3": (_flash_attn_3, "flash_attn_interface.flash_attn_func (v3, Hopper; "
                     "num_splits=1, its default; flash_attn_with_kvcache's split heuristic "
                     "for a paged K/V cache)", {},
                     _no_dropout),
    "flash-attn-cute": (_cute, "flash_attn.cute.flash_attn_func (flash-attn 4; num_splits=1, "
                        "its default)",
                        {"software": "flash-attn-cute"}, _cute_limits),
    "triton-tutorial": (_triton_tutorial, "Triton tutorial 06-fused-attention",
                        {"software": "triton-tutorial"}, _tutorial_limits),
}


#: preset -> f(array dims, gpu) -> per-element configuration keys or None
#: (:meth:`Implementation.element_keys`)
ELEMENT_KEYS = {"sdpa-cudnn": _sdpa_cudnn_keys}


def implementations() -> list[str]:
    """Implementation preset names."""
    return list(IMPLEMENTATIONS)


def algorithm_group(name) -> list[str] | None:
    """The names ``"all"`` (every algorithm) or ``"presets"`` (every implementation preset)
    stand for, in any case and with surrounding spaces (``perfsim predict --algorithm``, a
    sweep's ``algorithms``, alone or in its list); None for anything else (one algorithm or
    preset, a configuration object)."""
    if not isinstance(name, str):
        return None
    group = name.strip().lower()
    return (algos.names() if group == "all" else implementations() if group == "presets"
            else None)


#: The preset objects :func:`resolve_implementation` returns, one per name (frozen: shared
#: safely), so that repeated calls name the same configuration (``perfsim.fastpath`` keys its
#: structures by identity).
_PRESETS: dict[str, Implementation] = {}


def resolve_implementation(name: str) -> Implementation | None:
    """The preset called ``name`` (``-`` or ``_`` alike), or ``None`` if there is none."""
    key = name.lower().replace("_", "-")
    if key not in IMPLEMENTATIONS:
        return None
    found = _PRESETS.get(key)
    if found is None:
        # its software profile and upcast: _preset_defaults
        found = _PRESETS[key] = Implementation(preset=key)
    return found


def with_fixed_choice(algo: Algorithm, inner: Algorithm, group: int,
                      splits: int = 1) -> Algorithm:
    """``algo`` with its forward's split-KV and GQA-packing choice fixed: ``splits`` parts,
    and the query heads packed when ``group > 1`` — for a preset (``Implementation``) in its
    options, else a copy of ``inner`` (``algo`` itself) with them set. The same kernels as
    ``algo`` on every call for which it makes that choice; ``perfsim.sweep`` runs a block of
    one unsplit structure with it and ``perfsim.fastpath`` traces a call's structure with it
    (its code then takes no decision on the rows' values for the choice)."""
    choice = {"num_splits": int(splits), "pack_gqa": bool(group > 1)}
    if isinstance(algo, Implementation):
        return algo.model_copy(update={"options": {**algo.options, **choice}})
    return type(inner)(**{**inner.model_dump(), **choice})


def resolve(algorithm: str | Algorithm) -> Algorithm:
    """An algorithm config from an algorithm name (``"fa2"``: its defaults), an
    implementation preset's name (``"sdpa-flash"``), a label with options as
    ``Prediction.algorithm`` and ``--json`` write them (``"fa2(block_m=64)"``,
    ``"sdpa-cudnn(pack_gqa=False)"``: :func:`parse_label`) or a config (returned as is).

    Raises:
        perfsim.PerfsimError: unknown name (the message lists the algorithms and presets), a
            malformed label, an option the algorithm refuses, or anything but a string or a
            configuration (a list: one algorithm per call).
    """
    if not isinstance(algorithm, (str, Algorithm)):
        several = (" (one per call; perfsim.sweep(algorithms=[...]) takes several)"
                   if isinstance(algorithm, (list, tuple, set)) else "")
        raise PerfsimError(f"algorithm must be a name, a label such as 'fa2(block_m=64)' or a "
                           f"configuration such as perfsim.algorithms.FA2(), got "
                           f"{type(algorithm).__name__} {algorithm!r}{several}; known: "
                           f"{', '.join(algos.names())}; implementations: "
                           f"{', '.join(implementations())}")
    if isinstance(algorithm, str):
        algorithm = algorithm.strip()       # " fa2" from a hand-edited list or cell
    if isinstance(algorithm, Algorithm) or algorithm.lower() in algos.REGISTRY:
        return algos.resolve(algorithm)
    if algorithm.strip().lower() in ("all", "presets"):
        raise PerfsimError(f"algorithm {algorithm!r} names several; a prediction takes one "
                           f"(perfsim.sweep(algorithms={algorithm.strip().lower()!r}) and "
                           f"perfsim predict --algorithm {algorithm.strip().lower()} take "
                           f"several): {', '.join(algos.names())}; implementations: "
                           f"{', '.join(implementations())}")
    preset = resolve_implementation(algorithm)
    if preset is not None:
        return preset
    label = algorithm
    found = _LABELS.get(label)
    if found is None:
        found = configured(label)
        if len(_LABELS) >= 256:
            _LABELS.clear()
        _LABELS[label] = found
    return found


#: Configurations :func:`resolve` built from labels (``"fa2(block_m=64)"``), one per label
#: (frozen: shared safely; the same label names the same object, as a preset's name does).
_LABELS: dict[str, Algorithm] = {}


def configured(name: str, options: dict | None = None, where: str = "options") -> Algorithm:
    """Algorithm or preset ``name`` — or a label, ``fa2(block_m=64)``, whose options join
    ``options`` — with ``options`` set (a preset's go to the configuration it runs, as
    ``perfsim predict -a NAME --set KEY=VALUE`` sets them; ``software`` and
    ``upcast_16bit`` to the preset itself). The one path of ``resolve``, ``--algorithm`` /
    ``--set`` and a sweep's algorithm tables.

    Raises:
        perfsim.PerfsimError: unknown name, a malformed label, an option given both in the
            label and in ``options`` (named as ``where``), or an option the algorithm
            refuses."""
    options = dict(options or {})
    label = parse_label(name)
    if label is not None:
        twice = sorted(set(label[1]) & set(options))
        if twice:
            raise PerfsimError(f"{', '.join(twice)} given both in the label {name!r} and in "
                               f"{where}; give each option once")
        name, options = label[0], {**label[1], **options}
    cls = algos.REGISTRY.get(name.lower())
    if cls is not None:
        return cls(**options)      # Algorithm.__init__ raises one PerfsimError line
    preset = resolve_implementation(name)
    if preset is None:
        raise PerfsimError(f"unknown algorithm {name!r}; known: {', '.join(algos.names())}; "
                           f"implementations: {', '.join(implementations())}")
    fields = {k: v for k, v in options.items() if k in PRESET_FIELDS}
    inner = {k: v for k, v in options.items() if k not in PRESET_FIELDS}
    if fields:
        # the preset's own fields (a software profile's name is checked when a prediction
        # loads it)
        preset = Implementation(preset=preset.preset, **fields)
    return preset.model_copy(update={"options": inner}) if inner else preset


def _label_value(raw: str):
    """One value of a label (:func:`parse_label`)."""
    import ast
    import json

    if raw in ("inf", "-inf", "nan"):          # how Python prints these floats
        return float(raw)
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def parse_label(text: str) -> tuple[str, dict] | None:
    """``(name, options)`` of a label ``name(key=value, ...)`` as ``Algorithm.label`` writes
    it, or ``None`` for text without parentheses. Each value is read as a Python literal
    (``64``, ``0.5``, ``True``, ``None``, ``(64, 128)``, ``inf``), else as JSON (``false``,
    ``null``: as ``--set`` reads its values), else kept as the string it is
    (``compiled_head_dims=cudnn-sm90``).

    Raises:
        perfsim.PerfsimError: parentheses that do not close, an empty item, or an item
            without ``=``."""
    head, sep, rest = text.strip().partition("(")
    if not sep:
        return None
    if not rest.endswith(")") or not head.strip():
        raise PerfsimError(f"algorithm label {text!r} must read name(key=value, ...), e.g. "
                           "fa2(block_m=64)")
    items, depth, start, body = [], 0, 0, rest[:-1]
    for i, ch in enumerate(body + ","):
        depth += (ch in "([{") - (ch in ")]}")
        if depth < 0:               # "fa2(block_m=64)(x)": a bracket closed before it opened
            raise PerfsimError(f"algorithm label {text!r} must read name(key=value, ...), "
                               "e.g. fa2(block_m=64)")
        if ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    if items == [""]:               # name(): no options
        items = []
    if "" in items:
        raise PerfsimError(f"algorithm label {text!r}: an empty item between commas")
    if depth != 0:
        raise PerfsimError(f"algorithm label {text!r}: unbalanced brackets")
    options = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise PerfsimError(f"algorithm label {text!r}: {item!r} is not key=value")
        if key.strip() in options:
            raise PerfsimError(f"algorithm label {text!r}: {key.strip()} given twice")
        options[key.strip()] = _label_value(raw.strip())
    return head.strip(), options
