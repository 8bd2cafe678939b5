"""FlashAttention-4 (Zadouri et al. 2026, arXiv 2603.05451): Blackwell's asymmetric scaling.

The per-tile cycle model of §3.1.1 (forward, Table 1) and §3.2.1 (backward, Table 3), with
M x N tiles along the sequence and head dim d, in cycles per SM:

* forward: ``MMA = 2·M·N·(d + d_v) / R_tensor``; shared memory ``= [⌈M/128⌉⌈N/128⌉·2·128·d
  + ⌈M/128⌉⌈d_v/128⌉·128·N]·e / R_smem`` (Q Kᵀ is SS: Q and K blocks from shared memory;
  P V is TS: P from tensor memory, V from shared memory); ``exp = M·N / R_mufu``.
* backward (M = N = 128 per CTA): ``MMA = 2·M·N·(3d + 2d_v) / R_tensor``; shared memory
  ``= [(4Md + 3Nd + MN)·e + MN·e + 8·Md] / R_smem`` (MMA operands, the dS write, the fp32
  dQ write and its TMA read-back). In 2-CTA mode each CTA stages half of the B operands:
  the ``3Nd`` SS and ``2Md`` TS operand terms halve (which operands the pair shares is inferred
  so as to give Table 3's 2688 cycles; the paper states the ≈5 % over MMA).

Mechanisms, each an option: partial software exp2 on the FMA pipes (Cody–Waite range
reduction + a degree-``poly_degree`` Horner polynomial, §3.1.3), conditional rescaling with
threshold τ (§3.1.4), tensor-memory capacity (tiles shrink when two O and two S tiles no
longer fit), 1-CTA or 2-CTA backward (§3.2), longest-processing-time-first scheduling (§3.3).
Timing: asynchronous MMA and dedicated softmax/correction warpgroups form a closed
MMA ⇄ softmax cycle with one tile in flight per Q tile of the CTA (``perfsim.timing.
cycle_time``); HBM traffic overlaps it.

``variant="sm100"`` needs tcgen05 (and 2-CTA MMA for the 2-CTA backward); ``variant="sm90"``
is the Hopper path the reference also ships (WGMMA + TMA).

Length: one algorithm — the paper's per-tile cycle tables, TMEM tile fitting, the reference's
launch rules and the forward/backward kernels — kept in one module so the tables and the
kernels that use them are read side by side.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from perfsim.algorithms import softmax_costs as sc
from perfsim.algorithms.base import (
    FP32_BYTES,
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
    register_file_share,
    resident_ctas,
    rows_read,
    with_whole_tiles,
)
from perfsim.algorithms.common import (
    backward_softmax_terms,
    bwd_preprocess_kernel,
    check_fused_inputs,
    check_training_inputs,
    dq_convert_kernel,
    fused_memory_bytes,
    mask_extras,
)
from perfsim.algorithms.fa4_softmax import (
    emulated_exp_fma_ops,
    shipped_emulation_fraction,
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
from perfsim.mathops import asarray, cdiv, is_symbolic, minimum, where

#: MMA tile rows on Blackwell (tcgen05: 128 x N; P4 §2.2).
MMA_ROWS = 128
#: TMEM is 128 lanes of 32-bit cells (P4 §2.2: 256 KB per SM = 128 lanes x 512 columns).
TMEM_LANES = 128
#: Warps per forward CTA: 2 softmax + 1 correction + 1 MMA/TMA warpgroups (P4 §3.1.2).
FWD_WARPS = 16
#: Registers per thread an FA4 CTA is launched with: its 16 warps then divide the whole 64 Ki
#: register file between warpgroups with ``setmaxnreg`` — forward: softmax warpgroups
#: 152-256, correction 64-160, the others ``min((512 − softmax·q_stage − correction) //
#: (3 − q_stage), 65536 // threads_per_cta)`` (``flash_fwd_sm100.py``); backward: reduce +
#: 2 × compute + load/MMA = 512 per lane across four warpgroups (``flash_bwd_sm100.py``). So a
#: CTA needs 16 warp slots and 16 × 32 × 128 = 65536 registers of one SM.
LAUNCH_REGISTERS = 128
#: Shared-memory K/V stages of the forward pipeline.
KV_STAGES = 2
#: Shared memory the sm100 forward sizes its K/V ring against (``flash_fwd_sm100.py``:
#: ``224 * 1024`` less Q and O).
FWD_SMEM_BUDGET = 224 * 1024
#: The asynchronous cycle (``KernelCost.pipeline``): the MMA station (tensor cores reading
#: operands from shared memory) and the softmax station (MUFU and the FMA pipes, which FA4
#: balances with its emulated exps).
STATIONS = (("tensor", "smem"), ("mufu", "fp32"))
#: Backward: the MMA warp and the softmax/dS warpgroups alternate over two tiles.
BWD_TILES_IN_FLIGHT = 2


def q_tiles_in_flight(block_m) -> int:
    """Forward tiles in flight: one per 128-row Q tile of the CTA (the H/L ping-pong)."""
    return max(1, int(block_m) // MMA_ROWS)


class FA4(Algorithm):
    """FlashAttention-4 options (defaults: the reference configuration).

    Args:
        variant: ``sm100`` (Blackwell tcgen05) or ``sm90`` (the Hopper path).
        q_tiles_per_cta: 128-row Q tiles per CTA (2 = the H/L ping-pong of §3.1.2).
        block_n: key/value tile.
        emulate_fraction: share of exps computed on the FMA pipes; ``None`` = the shipped
            tuning (``shipped_emulation_fraction``), 0 on GPUs with a 32/clk MUFU (B300).
        poly_degree: degree of the exp2 polynomial (3 in the reference).
        rescale_threshold: τ in log2 units; rescale O only when the row max grows by more
            (8.0 = log2 256; 0 = rescale every tile, as FA2).
        rescales_per_row: expected rescales per row when τ > 0 (see
            ``perfsim.algorithms.fa4_softmax.estimate_rescales``); default 1.
        two_cta_backward: 2-CTA MMA in the backward pass (§3.2); flash_attn.cute pairs the
            CTAs only from head dim 128 up (4.0.0b36 ``interface.py``: ``use_2cta_instrs =
            head_dim >= 128 and ...``), and so does perfsim (:meth:`pairs_ctas`).
        lpt_scheduling: longest-processing-time-first tile order for causal work (§3.3).
        persistent: CTAs stay resident and loop over tiles (the reference's tile scheduler,
            flash_attn/cute/tile_scheduler.py); ``False`` for one CTA per tile (Triton).
        num_splits, pack_gqa: split-KV and GQA packing (``perfsim.algorithms.splits``);
            ``"auto"`` follows flash_attn.cute's rules (``interface.py``).

    Dropout is charged as flash-attn 2's kernels draw it (Philox, 8-bit keep threshold;
    ``softmax_costs.DROPOUT_INSTRUCTIONS["none"]``: ASSUMED, no sm100 census).
    """

    name: ClassVar[str] = "fa4"
    overlap_rule: ClassVar[str] = ("asynchronous MMA ⇄ softmax cycle, one tile in flight per "
                                   "128-row Q tile; HBM overlaps")

    variant: Literal["sm100", "sm90"] = "sm100"
    q_tiles_per_cta: int = Field(default=2, ge=1, le=2)
    block_n: int = Field(default=128, ge=16)
    emulate_fraction: float | None = Field(default=None, ge=0, le=1)
    poly_degree: int = Field(default=3, ge=1, le=8)
    rescale_threshold: float = Field(default=8.0, ge=0)
    rescales_per_row: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    two_cta_backward: bool = True
    lpt_scheduling: bool = True
    persistent: bool = True
    num_splits: Literal["auto"] | int = "auto"
    pack_gqa: Literal["auto"] | bool = "auto"

    _splits = field_validator("num_splits", mode="before")(
        classmethod(lambda cls, v: check_num_splits(v)))
    _pack = field_validator("pack_gqa", mode="before")(
        classmethod(lambda cls, v: check_pack_gqa(v)))

    # ---------------------------------------------------------------- configuration
    def family(self) -> str:
        """The tensor-core instruction family: ``tcgen05`` (sm100) or ``wgmma`` (sm90)."""
        return "tcgen05" if self.variant == "sm100" else "wgmma"

    def check(self, dims: Dims, gpu: GPUSpec) -> None:
        """Raise ``InfeasibleError`` naming what the GPU or workload lacks."""
        needs = ["tcgen05"] if self.variant == "sm100" else ["tma", "wgmma"]
        if self.variant == "sm100" and dims.bwd and self.pairs_ctas(dims):
            needs.append("two_cta")
        missing = [f for f in needs if not getattr(gpu.features, f)]
        if missing:
            raise InfeasibleError(f"fa4 ({self.variant}) needs {', '.join(missing)}; "
                                  f"{gpu.id} lacks {'it' if len(missing) == 1 else 'them'}")
        check_fused_inputs(dims, self.name, ("fp16", "bf16", "fp8_e4m3"), gpu)
        check_training_inputs(dims, self.name, "flash-attn-4 4.0.0b36 flash_attn/cute/"
                              "interface.py _flash_attn_bwd: fp16/bf16 inputs of one dtype, "
                              "no page table")

    def tmem_tiles(self, dims: Dims, gpu: GPUSpec) -> tuple[int, int]:
        """``(q_tiles_per_cta, block_n)`` that fit tensor memory: each Q tile keeps an fp32
        O tile (d_v columns) and an S tile (block_n columns, P aliases it) in TMEM
        (§3.1.2). Large head dims drop the second Q tile, then halve block_n (down to 64).

        Raises:
            InfeasibleError: nothing fits (or the GPU has no TMEM for the sm100 variant).
        """
        if self.variant == "sm90" or dims.symbolic:
            return self.q_tiles_per_cta, self.block_n
        columns = gpu.tmem_bytes_per_sm // (TMEM_LANES * FP32_BYTES)
        for q_tiles in range(self.q_tiles_per_cta, 0, -1):
            block_n = self.block_n
            while block_n >= 64:
                if q_tiles * (dims.d_v + block_n) <= columns:
                    return q_tiles, block_n
                block_n //= 2
        raise InfeasibleError(f"d_v = {dims.d_v} leaves no room in {gpu.id}'s tensor memory "
                              f"({columns} columns) for an O tile and a 64-column S tile")

    def fwd_tiles(self, dims: Dims, gpu: GPUSpec) -> tuple[int, int]:
        """``(Q tiles per CTA, block_n)`` of the forward: :meth:`tmem_tiles`, with one Q tile
        when the query rows of a (batch, K/V head) after the packing choice fit in one
        (:meth:`forward_q_tiles`; packing does not depend on the tile)."""
        q_tiles, b_c = self.tmem_tiles(dims, gpu)
        rows = decide(replace(dims, phase="fwd"), gpu, 1, self.pack_gqa, "cute",
                      MMA_ROWS * q_tiles, b_c).N_q
        return min(q_tiles, self.forward_q_tiles(rows)), b_c

    def forward_q_tiles(self, rows) -> int:
        """128-row Q tiles per forward CTA for ``rows`` query rows per (batch, K/V head) after
        GQA packing: the reference launches its second Q tile (``q_stage = 2``) only when the
        rows exceed one tile, and never on sm90 (flash-attn-4 4.0.0b36 ``interface.py``:
        ``q_stage = 2 if seqlen_q_packgqa > tile_m and head_dim_v != 256 else 1`` for
        sm100/sm110, else 1; the head-dim-256 case is :meth:`tmem_tiles`'). Arrays of rows
        (sweeps) take one tile where every element fits one (``perfsim.sweep`` groups the
        elements by that, :meth:`split_choices`), else ``q_tiles_per_cta``; symbols keep
        ``q_tiles_per_cta``."""
        if self.variant == "sm90":
            return 1
        if is_symbolic(rows):
            return self.q_tiles_per_cta
        if np.ndim(rows) > 0:
            # a sweep block whose rows all fit one tile (perfsim.sweep groups them so)
            return 1 if np.all(asarray(rows) <= MMA_ROWS) else self.q_tiles_per_cta
        return self.q_tiles_per_cta if int(rows) > MMA_ROWS else 1

    def emulation(self, dims: Dims, gpu: GPUSpec) -> float:
        """Share of the exps computed by polynomial on the FMA pipes (option, else the
        reference's tuning table)."""
        if self.emulate_fraction is not None:
            return self.emulate_fraction
        return shipped_emulation_fraction(dims.d, dims.causal, dims.dtype,
                                          gpu.mufu_ops_per_clk_per_sm)

    def pairs_ctas(self, dims: Dims) -> bool:
        """Whether the backward runs its MMAs on CTA pairs: ``two_cta_backward``, from head
        dim 128 up (flash-attn-4 4.0.0b36 ``_flash_attn_bwd``: ``use_2cta_instrs = head_dim
        >= 128 and not requested_disable_2cta and ...``); a symbolic head dim keeps the
        option here (the feature it needs, the launch label) and its closed form takes the
        head-dim condition (:meth:`_pair_divisor`)."""
        if not self.two_cta_backward:
            return False
        if dims.symbolic and not getattr(dims.d, "is_number", True):
            return True
        return bool(dims.d >= 128)

    def _pair_divisor(self, dims: Dims):
        """2 where the backward's CTAs are paired (they share the B operands' reads), else
        1: :meth:`pairs_ctas`, a ``Piecewise`` in a symbolic head dim."""
        if self.two_cta_backward and dims.symbolic and not getattr(dims.d, "is_number", True):
            return where(dims.d >= 128, 2, 1)
        return 2 if self.pairs_ctas(dims) else 1

    # ---------------------------------------------------------------- per-tile model
    def tile_cycles(self, dims: Dims, gpu: GPUSpec, phase: str = "fwd",
                    two_cta: bool | None = None) -> dict:
        """Cycles per SM for one tile (P4 Tables 1 and 3): ``{"mma", "smem", "exp"}``.

        Forward tile: ``(128 · q_tiles) x block_n`` (:meth:`fwd_tiles`); backward tile:
        128 x 128 per CTA.
        """
        d, d_v, e = dims.d, dims.d_v, dims.e
        rate = gpu.tensor_flops_per_clk(dims.dtype, self.family())
        smem_rate = gpu.smem_bandwidth_bytes_per_clk_per_sm
        if phase == "fwd":
            q_tiles, n = self.fwd_tiles(dims, gpu)
            m = MMA_ROWS * q_tiles
            blocks_m = cdiv(m, MMA_ROWS)
            smem = (blocks_m * cdiv(n, MMA_ROWS) * 2 * MMA_ROWS * d
                    + blocks_m * cdiv(d_v, MMA_ROWS) * MMA_ROWS * n) * e
            return {"mma": 2 * m * n * (d + d_v) / rate, "smem": smem / smem_rate,
                    "exp": m * n / gpu.mufu_ops_per_clk_per_sm}
        m = n = MMA_ROWS
        pairs = self._pair_divisor(dims) if two_cta is None else (2 if two_cta else 1)
        shared = (3 * n * d + 2 * m * d) / pairs      # B operands, halved in a pair
        operands = (2 * m * d + m * n) * e + shared * e
        smem = operands + m * n * e + 2 * FP32_BYTES * m * d
        return {"mma": 2 * m * n * (3 * d + 2 * d_v) / rate, "smem": smem / smem_rate,
                "exp": m * n / gpu.mufu_ops_per_clk_per_sm}

    # ---------------------------------------------------------------- kernels
    def kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        """FA4's forward and backward kernels.

        Raises:
            InfeasibleError: a GPU without the variant's features or tensor memory."""
        self.check(dims, gpu)
        q_tiles, b_c = self.fwd_tiles(dims, gpu) if dims.fwd else self.tmem_tiles(dims, gpu)
        b_r = MMA_ROWS * q_tiles
        smem, stages, stage_bytes = self.fwd_smem(dims, q_tiles, b_c)
        if not dims.symbolic and stages < KV_STAGES:
            # sm100: Q and O leave the K/V ring fewer than two stages of the 224 KiB budget
            q_o = smem - max(stages, 0) * stage_bytes
            raise InfeasibleError(
                f"fa4's forward CTA of {q_tiles} Q tile(s) of {MMA_ROWS} rows at head dims "
                f"({dims.d}, {dims.d_v}) keeps Q and O in {q_o} B of its {FWD_SMEM_BUDGET} B "
                f"shared-memory budget, room for {max(stages, 0)} K/V stage(s) of "
                f"{stage_bytes} B where it needs {KV_STAGES} (flash_fwd_sm100.py); the "
                "reference itself takes head dims up to 128, (192, 128), (256, 256) and "
                "d_v = 512 on sm100 (interface.py _validate_head_dims)")
        if not dims.symbolic and smem > gpu.smem_bytes_per_block:
            raise InfeasibleError(f"fa4 tiles need {smem} B of shared memory with "
                                  f"{KV_STAGES} K/V stages; {gpu.id} allows "
                                  f"{gpu.smem_bytes_per_block} B per CTA")
        if not dims.symbolic:
            # one CTA of 16 warps and the whole register file per SM (a what-if GPU with fewer
            # warp slots or registers cannot launch it)
            resident_ctas(gpu, smem, FWD_WARPS, LAUNCH_REGISTERS)
        out = []
        if dims.fwd:
            fdims = decide(replace(dims, phase="fwd"), gpu, self.num_splits, self.pack_gqa,
                           "cute", b_r, b_c)
            main = with_whole_tiles(
                lambda x: self._forward(x, gpu, b_r, b_c, smem, stages * stage_bytes),
                fdims, b_r, b_c)
            out.append(split_forward(main, fdims, fdims.splits))
            if any_split(fdims.splits):
                out.append(combine_kernel(fdims, fdims.splits, "fa4_fwd_combine", gpu))
        if dims.bwd:
            # flash_attn.cute's _flash_attn_bwd launches, on every architecture, a preprocess
            # kernel (dO·O row sums, the logsumexp times log2(e), the fp32 dQ accumulator
            # zeroed) before the main kernel and a postprocess kernel (dQ converted from the
            # accumulator) after it (flash_attn/cute/interface.py)
            # a GQA backward's dK, dV: fp32 accumulators at the K/V heads zeroed before and
            # converted after (interface.py's ``dKV_postprocess``, every architecture;
            # ASSUMED for head dim 256 too, whose dedicated sm100 kernel converts them itself)
            _, zero, convert = gqa_dkdv_accumulator(
                dims, self.name, MMA_ROWS, cdiv(dims.N_k, MMA_ROWS) * MMA_ROWS,
                (dims.d, dims.d_v),
                dims.kv_rows_read(MMA_ROWS), 1, gpu)
            out.extend(zero)
            out.append(bwd_preprocess_kernel(dims, self.name, zero_dq=True, lse_log2=True))
            out.append(with_whole_tiles(lambda x: self._backward(x, gpu), dims, MMA_ROWS,
                                        MMA_ROWS))
            out.append(dq_convert_kernel(dims, self.name))
            out.extend(convert)
        return out

    def split_choices(self, dims: Dims, gpu: GPUSpec):
        """Sweeps: each element's split count, packing group (as :meth:`kernels` decides them
        for that element alone) and whether its packed query rows fit one 128-row tile (1)
        or not (0), which sets the forward's Q tiles per CTA (:meth:`forward_q_tiles`):
        ``(splits, group, one_tile)`` integer arrays
        (:func:`perfsim.algorithms.splits.choice_arrays`)."""
        fdims = replace(dims, phase="fwd")
        q_tmem, b_c = self.tmem_tiles(fdims, gpu)
        _, group = choice_arrays(fdims, gpu, 1, self.pack_gqa, "cute", MMA_ROWS * q_tmem, b_c)
        one_tile = (asarray(dims.N_q) * group <= MMA_ROWS) & (self.variant != "sm90")
        q_tiles = np.where(one_tile, 1, min(q_tmem, self.forward_q_tiles(MMA_ROWS + 1)))
        splits, group = choice_arrays(fdims, gpu, self.num_splits, self.pack_gqa, "cute",
                                      MMA_ROWS * q_tiles, b_c)
        return splits, group, one_tile.astype(np.int64)

    def varlen_config(self, dims: Dims, gpu: GPUSpec):
        """Split-KV and packing decided once for the whole variable-length batch."""
        if self.num_splits != "auto" and self.pack_gqa != "auto":
            return self
        self.check(varlen_batch_dims(dims), gpu)      # what the GPU lacks, before the tiles
        q_tiles, b_c = self.fwd_tiles(varlen_batch_dims(dims), gpu)
        return frozen_choice(self, decide(varlen_batch_dims(dims), gpu, self.num_splits,
                                          self.pack_gqa, "cute", MMA_ROWS * q_tiles, b_c))

    def _imbalance(self, dims: Dims, gpu: GPUSpec, v, grid, columns: bool = False):
        """Causal tail without LPT scheduling (``perfsim.algorithms.base.in_order_tail``),
        one resident CTA per SM; ``columns``: a grid of key tiles (the backward)."""
        return in_order_tail(v, grid, gpu.sm_count, 1, dims.masked, self.lpt_scheduling,
                             columns)

    def fwd_smem(self, dims: Dims, q_tiles, b_c):
        """``(shared-memory bytes, K/V stages, bytes per stage)`` of the forward CTA.

        sm100 (flash-attn-4 4.0.0b36 ``flash_fwd_sm100.py``, ``_setup_attributes``): K and V
        tiles take turns in one ring whose stage holds the larger of a K and a V tile;
        ``stages = min((224 KiB − Q − O) // stage, 32)``, with O sharing Q's buffer at head
        dim 192 and 256 (``overlap_sO_sQ``); O is 16-bit (bf16 for fp8 inputs). The
        reference also shares the buffer for split-KV at d_v ≥ 128; the tile is sized here
        before the split choice, so split-KV calls are counted without it (fewer stages: a
        conservative bound). sm90: ``KV_STAGES`` stages of a K and a V tile beside Q, as FA3.
        """
        if self.variant == "sm90" or dims.symbolic:
            stage = dims.e_kv * b_c * (dims.d + dims.d_v)
            return dims.e * MMA_ROWS * q_tiles * dims.d + KV_STAGES * stage, KV_STAGES, stage
        rows = MMA_ROWS * q_tiles
        q = rows * dims.d * dims.e
        o = rows * dims.d_v * max(dims.e, 2)
        overlap = (dims.d > 128 and dims.d <= 192 and dims.d_v >= 64) or dims.d > 192
        q_o = max(q, o) if overlap else q + o
        stage = b_c * max(dims.d, dims.d_v) * dims.e_kv
        stages = min((FWD_SMEM_BUDGET - q_o) // stage, 32)
        return q_o + max(stages, 0) * stage, stages, stage

    def _forward(self, dims: Dims, gpu: GPUSpec, b_r, b_c, smem, in_flight) -> KernelCost:
        e, ekv, bh, dkv = dims.e, dims.e_kv, dims.B * dims.H, dims.d + dims.d_v
        v = dims.tile_visits(b_r, b_c)
        v128 = dims.tile_visits(MMA_ROWS, b_c)
        elems = bh * v.elements
        frac = self.emulation(dims, gpu)
        rows_tiles = bh * v128.kv_outer_rows      # (row, key tile) pairs, no padding
        rescales = rows_tiles if self.rescale_threshold == 0 else \
            bh * dims.N_q * self.rescales_per_row
        terms = {
            **forward_gemm_terms(elems, dims.d, dims.d_v),
            "fp32/softmax (scale−max, row sum)": elems * sc.ONLINE_SOFTMAX_FLOPS_PER_SCORE,
            "fp32/emulated exp2 (polynomial)":
                sc.FMA_SLOTS * frac * elems * emulated_exp_fma_ops(self.poly_degree),
            "fp32/rescale O": rescales * (sc.RESCALE_FLOPS_PER_ROW_ELEMENT * dims.d_v
                                          + sc.RESCALE_FLOPS_PER_ROW_EXTRA),
            "fp32/normalise O": sc.FMA_SLOTS * bh * dims.N_q * dims.d_v,
            "alu/row max, P to 16 bits": elems * sc.FWD_ALU_OPS_PER_SCORE,
            "alu/mask": bh * v.masked_tiles * b_r * b_c * sc.MASK_ALU_OPS_PER_SCORE,
            "alu/max-jump test": rows_tiles,
            "mufu/exp(S) on MUFU": (1 - frac) * elems,
            "mufu/exp(m_old − m_new)": rescales,
            "emulated_exp/exp(S) on the FMA pipes": frac * elems}
        if dims.dropout_p:      # ASSUMED drawn as flash-attn 2 draws it (no sm100 census)
            terms.update(sc.dropout_terms("none", "fwd", elems))
        terms.update(mask_extras(dims, v, bh, dkv))
        kv_total = ekv * bh * v.q_outer_cols * dkv
        window = gpu.sm_count * in_flight
        kv_hbm, kv_hits = l2_filtered(kv_total,
                                      ekv * dims.B * dims.H_kv * dims.kv_rows_read(b_c) * dkv,
                                      window, gpu, gpu.l2_usable_fraction)
        grid = v.q_tiles * bh
        # MMA operand reads (the paper's formula, per 128-row block) + TMA writes
        terms.update({
            "hbm_read/Q": e * bh * dims.N_q * dims.d, "hbm_read/K,V": kv_hbm,
            "hbm_write/O": dims.e_o * bh * dims.N_q * dims.d_v,
            "hbm_write/logsumexp": bh * dims.N_q * STAT_BYTES, "l2_hit/K,V re-read": kv_hits,
            "smem_read/Q (per 128-row block and key tile)":
                e * bh * v128.tiles * cdiv(b_c, MMA_ROWS) * MMA_ROWS * dims.d,
            "smem_read/K,V": ekv * bh * v128.q_outer_cols * dkv,
            "smem_write/Q (TMA)": e * bh * dims.N_q * dims.d,
            "smem_write/K,V (TMA)": ekv * bh * v.q_outer_cols * dkv})
        cost = KernelCost.of(
            "fa4_fwd", terms, grid=grid, tiled=True, persistent=self.persistent,
            edge_bytes=e * b_r * (dims.d + dims.d_v) + ekv * b_c * dkv,
            warps_per_cta=FWD_WARPS, smem_bytes_per_cta=smem,
            registers_per_thread=register_file_share(gpu, FWD_WARPS),
            tensor_dtype=dims.dtype, tensor_family=self.family(), overlap=(("hbm",),),
            pipeline=(STATIONS, q_tiles_in_flight(b_r)),
            bytes_in_flight=in_flight,
            launch={"block_m": b_r, "block_n": b_c, "emulate_fraction": frac,
                   "packed_heads": dims.group},
        )
        return cost.padded(self._imbalance(dims, gpu, v, grid))

    def _backward(self, dims: Dims, gpu: GPUSpec) -> KernelCost:
        e, bh, d, d_v = dims.e, dims.B * dims.H, dims.d, dims.d_v
        v = dims.tile_visits(MMA_ROWS, MMA_ROWS)
        elems = bh * v.elements
        tiles = bh * v.tiles
        terms = {**backward_gemm_terms(elems, d, d_v),
                 **backward_softmax_terms(dims, v, bh * v.masked_tiles * MMA_ROWS * MMA_ROWS)}
        per_tile = self.tile_cycles(dims, gpu, "bwd")
        q_side = bh * v.kv_outer_rows
        q_total = q_side * (e * (d + d_v) + 2 * STAT_BYTES)
        q_hbm, q_hits = l2_filtered(q_total, bh * rows_read(dims, MMA_ROWS)
                                    * (e * (d + d_v) + 2 * STAT_BYTES),
                                    gpu.sm_count * 2 * MMA_ROWS * (e * (d + d_v)), gpu,
                                    gpu.l2_usable_fraction)
        grid = v.kv_tiles * bh
        # dK, dV written per head, or under GQA reduce-added into the K/V heads' fp32
        # accumulators (gqa_dkdv_accumulator: flash_attn.cute's dKV_postprocess); one CTA per
        # SM, the K/V heads of the query heads the resident CTAs span live in L2
        heads_live = cdiv(minimum(gpu.sm_count, grid), v.kv_tiles) + 1
        dkv_terms, _, _ = gqa_dkdv_accumulator(
            dims, self.name, MMA_ROWS, v.kv_tiles * MMA_ROWS, (d, d_v),
            dims.kv_rows_read(MMA_ROWS),
            cdiv(heads_live, dims.H // dims.H_kv) + 1, gpu)
        kv = e * bh * dims.N_k * (d + d_v) * where(dims.H > dims.H_kv, 0, 1)
        # The dQ partials are TMA reduce-adds into an fp32 accumulator: resolved in L2 while
        # the query tiles the resident CTAs add into fit there (FA2's rule for its atomics,
        # FusedAttention._backward), not one HBM write per partial (275 GB at B = 1, H = 8,
        # N = 65536, d = 256 before).
        atomics = q_side * d
        dq_read, dq_write, dq_hits = accumulator_traffic(
            atomics, bh * rows_read(dims, MMA_ROWS) * FP32_BYTES * d,
            gpu.sm_count * 2 * MMA_ROWS * FP32_BYTES * d, gpu)
        terms.update({
            "atomics/dQ (fp32, TMA reduce)": atomics,
            "hbm_read/dQ accumulator": dq_read, "hbm_write/dQ accumulator": dq_write,
            "l2_hit/dQ reduce-adds": dq_hits,
            # K/V tiles outside every query's window are not read (their dK/dV still written)
            "hbm_read/K,V": e * bh * dims.kv_rows_read(MMA_ROWS) * (d + d_v),
            "hbm_read/Q,dO,LSE,D": q_hbm,
            "hbm_write/dK,dV": kv,
            "l2_hit/Q,dO,LSE,D re-read": q_hits,
            "smem_read/per-tile traffic (FA4 Table 3)":
                tiles * per_tile["smem"] * gpu.smem_bandwidth_bytes_per_clk_per_sm,
            **dkv_terms})
        cost = KernelCost.of(
            "fa4_bwd", terms, grid=grid, tiled=True, persistent=self.persistent,
            edge_bytes=(2 * e * MMA_ROWS * (d + d_v)
                        + MMA_ROWS * (e * (d + d_v) + 2 * STAT_BYTES)),
            warps_per_cta=FWD_WARPS,
            registers_per_thread=register_file_share(gpu, FWD_WARPS),
            tensor_dtype=dims.dtype, tensor_family=self.family(),
            overlap=(("hbm",),), pipeline=(STATIONS, BWD_TILES_IN_FLIGHT),
            launch={"two_cta": self.pairs_ctas(dims)},
        )
        return cost.padded(self._imbalance(dims, gpu, v, grid, columns=True))

    def memory_bytes(self, dims: Dims, gpu: GPUSpec):
        """Peak footprint (bytes): ``common.fused_memory_bytes``, and under GQA the fp32 dK,
        dV accumulators at the K/V heads (``base.gqa_accumulator_bytes``)."""
        total = fused_memory_bytes(dims)
        if dims.bwd:
            total = total + gqa_accumulator_bytes(dims, (dims.d, dims.d_v))
        return total

    def explain_lines(self, prediction) -> list[str]:
        """Per tile, which unit binds and by how much (P4 Tables 1 and 3)."""
        dims = Dims.of(prediction.workload)
        gpu = prediction.gpu
        lines = []
        for phase in ("fwd", "bwd"):
            if not getattr(dims, phase):
                continue
            c = self.tile_cycles(dims, gpu, phase)
            words = ", ".join(f"{k} {v:.0f}" for k, v in c.items())
            # the forward computes a share of its exps on the FMA pipes (emulate_fraction):
            # the MUFU's cycles are the rest, and they are what the MMA is set against
            frac = self.emulation(dims, gpu) if phase == "fwd" else 0.0
            if frac:
                c = {**c, "exp": c["exp"] * (1 - frac)}
                words += (f" ({c['exp']:.0f} on the MUFU, {100 * frac:.2f} % of the exps "
                          "emulated on the FMA pipes)")
            top = max(c, key=c.get)
            note = (f"{top} binds, {100 * (c[top] / c['mma'] - 1):.0f} % over MMA"
                    if top != "mma" else "MMA binds")
            if top == "mma" and max(c["exp"], c["smem"]) >= c["mma"]:
                note = "exp = MMA: overlap alone cannot hide it"
            lines.append(f"Per {phase} tile (cycles/SM): {words} — {note}.")
        return lines
