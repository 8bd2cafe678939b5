"""FlashAttention (v1), Algorithm 1 and its backward (Dao et al. 2022, §3.1, App. B.3–B.4).

Forward, Algorithm 1: block sizes from the SRAM size ``M`` (in elements),
``B_c = ⌈M / 4d⌉``, ``B_r = min(⌈M / 4d⌉, d)`` (line 1). ``O``, ℓ and ``m`` start in HBM
(line 2). The *outer* loop walks key/value tiles ``j`` (line 5: load ``K_j, V_j``), the
*inner* loop query tiles ``i``: each inner step reads ``Q_i, O_i, ℓ_i, m_i`` from HBM
(line 8) and writes ``O_i, ℓ_i, m_i`` back (lines 12–13), keeping ``O_i`` normalised by
``diag(ℓ_i)^-1`` at every step. One CTA per (batch, head), as FA1's kernels are parallelised.

Backward, Algorithm 4: the same loop order; the outer step keeps ``K_j, V_j, dK_j, dV_j``
on chip; each inner step reads ``Q_i, O_i, dO_i, dQ_i, ℓ_i, m_i``, recomputes ``P_ij`` and
writes ``dQ_i`` back (line 21).

Algorithm 1 computes every tile and applies the causal mask elementwise (it has no tile
skipping; block-sparse FlashAttention, Algorithm 5, does) — ``skip_masked_tiles=True`` models
skipping. Theorem 2: Θ(N²d²M⁻¹) HBM accesses.

Parallelism: Algorithm 1 runs one CTA per (batch, head). FA1's CUDA release also split long
sequences across CTAs when batch x heads was small; perfsim models that as ``q_splits`` CTAs per
head, each taking every ``q_splits``-th query tile and streaming all of K, V itself.

Overlap: as FA2, each warp runs its MMAs, softmax and exps one after the other (``mma.sync``);
shared-memory and HBM traffic (the O, ℓ, m round trips included) overlap with that math
through the other warps and CTAs of the SM. ``pipelined=False`` describes a kernel whose CTA
waits for each step's loads (``Q_i, O_i, ℓ_i, m_i``; ``K_j, V_j`` per outer step) before it
computes, with nothing prefetched — perfsim's Triton FA1 kernel on an H200, where Triton's
``num_stages`` 2 and 3 leave the nested inner loop unpipelined (``validate/probes.py``): then
only the other CTAs on an SM hide a CTA's load waits (``KernelCost.load_chain``).

Length: one algorithm — Algorithm 1's forward and the backward of App. B, each line of the
paper's pseudo-code a named term — kept together so a reader checks it against the paper in one
place.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from pydantic import Field, field_validator

from perfsim.algorithms import softmax_costs as sc
from perfsim.algorithms.base import (
    FUSED_DROPOUT_OPS_PER_ELEMENT,
    STAT_BYTES,
    Algorithm,
    Dims,
    backward_gemm_terms,
    forward_gemm_terms,
    l2_filtered,
    resident_ctas,
    rows_read,
    with_whole_tiles,
)
from perfsim.algorithms.common import (
    SERIAL_COMPUTE,
    fused_memory_bytes,
    gqa_reduce_kernels,
    power_of_two_warps,
)
from perfsim.errors import InfeasibleError
from perfsim.frozen import replace
from perfsim.gpu import GPUSpec
from perfsim.kernel import KernelCost
from perfsim.mathops import asarray, cdiv, maximum, minimum
from perfsim.tiles import visits

#: ℓ and m per row (FA1 keeps both, in fp32).
STATS_PER_ROW = 2


class FA1(Algorithm):
    """FlashAttention Algorithm 1 options.

    Args:
        sram_bytes: SRAM budget ``M`` in bytes; ``None`` = the GPU's shared memory per CTA.
        block_r, block_c: override ``B_r``/``B_c`` (e.g. the powers of two a Triton kernel
            uses); ``None`` = Algorithm 1 line 1.
        warps: warps per CTA (FA1's kernels use 4).
        skip_masked_tiles: skip tiles entirely above the causal diagonal (not in Algorithm 1).
        q_splits: CTAs per (batch, head); ``None`` = flash-attn 1's wave-efficiency choice
            (:meth:`splits`): the fewest splits within 95 % of the best wave efficiency, so
            a grid that already fills the GPU can still be split (B·H = 976 on an H100's
            132 SMs × 2 slots: 4 splits, 3.70 → 14.8 waves).
        o_workspace_bytes: bytes per element of the O that makes the HBM round trips;
            ``None`` = the input dtype (Algorithm 1). FA1's CUDA kernels and perfsim's Triton
            kernel keep it in fp32 (4) and write O in the input dtype at the end.
        tensor_family: ``mma_sync`` (FA1 predates Hopper instructions).
        pipelined: the forward's loads overlap computation (True), or every step waits for
            its own loads (False; see the module docstring).
    """

    name: ClassVar[str] = "fa1"
    overlap_rule: ClassVar[str] = ("inside a warp MMA, softmax FP32 work and exps run one after "
                                   "another; shared memory and HBM (the O, l, m round trips "
                                   "included) overlap with them")

    sram_bytes: int | None = Field(default=None, gt=0)
    block_r: int | None = Field(default=None, ge=1)
    block_c: int | None = Field(default=None, ge=1)
    warps: int = Field(default=4, ge=1, le=32)
    _power_of_two = field_validator("warps")(classmethod(lambda cls, v: power_of_two_warps(v)))
    skip_masked_tiles: bool = False
    q_splits: int | None = Field(default=None, ge=1)
    o_workspace_bytes: int | None = Field(default=None, ge=1, le=8)
    tensor_family: str = "mma_sync"
    registers_per_thread: int = Field(default=255, ge=16, le=255)
    pipelined: bool = True

    def tiles(self, dims: Dims, gpu: GPUSpec):
        """``(B_r, B_c, M)`` with ``M`` in elements (Algorithm 1 line 1).

        A block longer than the sequence is cut to the sequence (Algorithm 1 is silent on
        it; a tile past the matrix would only hold padding). Where ``⌈M/4d⌉`` rounds up past
        what the four tiles can share of ``M``, the block is ``⌊M/(2(d + d_v))⌋`` instead
        (``⌊M/4d⌋`` when ``d_v = d``): the paper sizes the tiles to fit in SRAM, which its
        ceiling only approximates.
        """
        sram = self.sram_bytes or gpu.smem_bytes_per_block
        m = sram // dims.e
        block = cdiv(m, 4 * dims.d)
        b_c = self.block_c or minimum(block, dims.N_k)
        b_r = self.block_r or minimum(minimum(block, dims.d), dims.N_q)
        if not dims.symbolic and not (self.block_c or self.block_r):
            # ⌈M/4d⌉ overshoots M by up to 4d - 1 elements, so Q_i, K_j, V_j and O_i of that
            # size can need more than the SRAM when B_r = B_c (d ≥ ~√(M/4): most head dims
            # above 170 on an H100): there take ⌊M/2(d + d_v)⌋ (⌊M/4d⌋ when d_v = d), with
            # which they fit, as the algorithm intends (its tiles live in SRAM)
            over = (b_c + b_r) * (dims.d + dims.d_v) > m
            if np.any(over):
                block = np.where(over, m // (2 * (dims.d + dims.d_v)), block)
                if not np.ndim(block):
                    block = int(block)
                b_c = minimum(block, dims.N_k)
                b_r = minimum(minimum(block, dims.d), dims.N_q)
        return b_r, b_c, m

    def kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        """FA1's kernels for ``dims`` on ``gpu`` (Algorithm 1 forward, Algorithm 4 backward)."""
        if dims.dtype not in ("fp16", "bf16"):
            raise InfeasibleError(f"fa1 runs fp16/bf16 inputs, not {dims.dtype}")
        lacks = [what for what, has in (("no sliding windows", dims.window != (None, None)),
                                        ("no softcap", dims.softcap),
                                        ("one dtype for Q, K and V",
                                         dims.kv_dtype not in (None, dims.dtype)),
                                        ("no paged K/V", dims.page_size))
                 if has]
        if lacks:
            raise InfeasibleError(f"fa1 (FlashAttention-1's Algorithm 1) has {lacks[0]}")
        gpu.tensor_flops_per_clk(dims.dtype, self.tensor_family)
        b_r, b_c, m = self.tiles(dims, gpu)
        if not dims.symbolic and m < dims.d:
            raise InfeasibleError(f"SRAM of {m} elements is below d = {dims.d} "
                                  "(Theorem 2 needs d <= M)")
        if not dims.symbolic and np.any(np.minimum(b_r, b_c) < 1):
            raise InfeasibleError(
                f"fa1: not one row of Q, K, V and O fits the {m * dims.e} bytes of SRAM at "
                f"head dims {dims.d}/{dims.d_v} (each tile needs 2·(d + d_v)·{dims.e} bytes "
                "per row); give more SRAM (sram_bytes) or smaller head dims")
        smem, ctas, splits = self.launch(dims, gpu, b_r, b_c)

        def build(step):
            def cost(x: Dims) -> KernelCost:
                v = visits(x.N_q, x.N_k, b_r, b_c, x.causal and self.skip_masked_tiles,
                           x.padded_offset())
                return step(x, gpu, v, b_r, b_c, smem, ctas, splits)
            return with_whole_tiles(cost, dims, b_r, b_c)

        out = []
        if dims.fwd:
            out.append(build(self._forward))
        if dims.bwd:
            out += [build(self._backward), *gqa_reduce_kernels(dims)]
        return out

    def launch(self, dims: Dims, gpu: GPUSpec, b_r=None, b_c=None):
        """``(shared-memory bytes per CTA, resident CTAs per SM, CTAs per (batch, head))`` of
        the kernels for ``B_r x B_c`` tiles (default :meth:`tiles`): K_j, V_j, Q_i and O_i
        on chip (Algorithm 1 sizes them so 4·B_c·d <= M), occupancy from that, and
        :meth:`splits`.

        Raises:
            InfeasibleError: not one CTA fits on an SM."""
        if b_r is None:
            b_r, b_c, _ = self.tiles(dims, gpu)
        smem = dims.e * (b_c * (dims.d + dims.d_v) + b_r * (dims.d + dims.d_v))
        ctas = resident_ctas(gpu, smem, self.warps, self.registers_per_thread)
        return smem, ctas, self.splits(dims, gpu, ctas, cdiv(dims.N_q, b_r))

    def splits(self, dims: Dims, gpu: GPUSpec, ctas, q_tiles):
        """CTAs per (batch, head): ``q_splits``, or flash-attn 1's choice
        (``num_splits_heuristic_fwd`` in ``csrc/flash_attn/fmha_api.cpp``): among 1 to
        ``min(30, T_r)`` splits, the fewest whose wave efficiency ``waves / ⌈waves⌉`` (waves of
        ``B·H·splits`` CTAs on ``SMs × ctas_per_sm`` slots) exceeds 95 % of the best. Works on
        numpy arrays (sweeps) element by element."""
        if self.q_splits is not None or dims.symbolic:
            return self.q_splits or 1
        if isinstance(dims.B * dims.H, np.ndarray) or isinstance(q_tiles, np.ndarray):
            bh, tiles, slots = np.broadcast_arrays(dims.B * dims.H, q_tiles,
                                                   gpu.sm_count * asarray(ctas))
            keys, inverse = np.unique(np.stack([bh.ravel(), slots.ravel(), tiles.ravel()],
                                               axis=1), axis=0, return_inverse=True)
            out = np.array([fa1_num_splits(int(a), int(c), int(t)) for a, c, t in keys])
            return out[inverse.reshape(-1)].reshape(bh.shape)
        return fa1_num_splits(int(dims.B * dims.H), int(gpu.sm_count * ctas), int(q_tiles))

    def _live_rows(self, dims: Dims, gpu: GPUSpec, ctas, splits):
        """Query rows whose Q, O (and statistics) the resident CTAs cycle through."""
        return minimum(gpu.sm_count * ctas, dims.B * dims.H * splits) * cdiv(dims.N_q, splits)

    def _masked(self, dims: Dims, v, b_r, b_c):
        """Score elements on tiles that need the causal mask."""
        if not dims.causal:
            return 0
        if self.skip_masked_tiles:
            return v.masked_tiles * b_r * b_c
        return visits(dims.N_q, dims.N_k, b_r, b_c, True).tiles * b_r * b_c

    def _kv_traffic(self, dims: Dims, gpu: GPUSpec, ctas, splits, b_c):
        """K, V streamed once by each CTA. The CTAs of one head (its splits) and of one GQA
        group are adjacent in the grid and walk K/V in step, so their re-reads hit L2 (live
        set: a K/V tile per resident CTA, one for the ``H / H_kv`` CTAs of a GQA group, which
        read the same tile: counted per CTA, more SMs made a GQA decode up to 2x slower)."""
        e, per_head = dims.e, dims.N_k * (dims.d + dims.d_v)
        total = e * dims.B * dims.H * splits * per_head
        sharers = maximum(dims.H // dims.H_kv, 1)
        window = gpu.sm_count * ctas * e * b_c * (dims.d + dims.d_v) / sharers
        return l2_filtered(total, e * dims.B * dims.H_kv * per_head, window, gpu,
                           gpu.l2_usable_fraction)

    def _forward(self, dims, gpu, v, b_r, b_c, smem, ctas, splits) -> KernelCost:
        e, bh = dims.e, dims.B * dims.H
        o_b = self.o_workspace_bytes or e
        row_bytes = e * dims.d + o_b * dims.d_v + STATS_PER_ROW * STAT_BYTES
        q_o_total = bh * v.kv_outer_rows * row_bytes          # Q_i, O_i, l_i, m_i per step
        live = self._live_rows(dims, gpu, ctas, splits) * row_bytes
        q_rows = rows_read(replace(dims, causal=dims.causal and self.skip_masked_tiles), b_r)
        reads, read_hits = l2_filtered(q_o_total, bh * q_rows * e * dims.d, live, gpu,
                                       gpu.l2_usable_fraction, written=True)
        out_row = o_b * dims.d_v + STATS_PER_ROW * STAT_BYTES
        writes, write_hits = l2_filtered(bh * (dims.N_q + v.kv_outer_rows) * out_row,
                                         bh * dims.N_q * out_row, live, gpu,
                                         gpu.l2_usable_fraction, written=True)
        if self.o_workspace_bytes:       # the final O in the input dtype
            writes = writes + bh * dims.N_q * e * dims.d_v
        kv_hbm, kv_hits = self._kv_traffic(dims, gpu, ctas, splits, b_c)
        rows_steps = bh * v.kv_outer_rows      # (row, visited key tile) pairs, no padding
        elems = bh * v.elements
        dkv = dims.d + dims.d_v
        terms = {
            **forward_gemm_terms(elems, dims.d, dims.d_v),
            "fp32/softmax (scale−max, row sum)": elems * sc.ONLINE_SOFTMAX_FLOPS_PER_SCORE,
            "fp32/renormalise O each step": rows_steps * (
                sc.FA1_UPDATE_FLOPS_PER_ROW_ELEMENT * dims.d_v
                + sc.FA1_UPDATE_FLOPS_PER_ROW_EXTRA),
            "alu/row max, P to 16 bits": elems * sc.FWD_ALU_OPS_PER_SCORE,
            "alu/mask": bh * self._masked(dims, v, b_r, b_c) * sc.MASK_ALU_OPS_PER_SCORE,
            "mufu/exp(S)": elems, "mufu/exps per row and step": rows_steps
            * sc.FA1_EXPS_PER_ROW_STEP,
            "hbm_read/Q,O,ℓ,m per step": reads, "hbm_read/K,V": kv_hbm,
            "hbm_write/O,ℓ,m per step": writes,
            "l2_hit/Q,O,ℓ,m re-read": read_hits, "l2_hit/O,ℓ,m re-written": write_hits,
            "l2_hit/K,V re-read": kv_hits,
            # tiles staged through shared memory: Q_i, O_i per step, K_j, V_j per outer step;
            # split-K warps exchange partial O rows and the P̃ tile through shared memory.
            "smem_write/Q,O per step": e * bh * v.kv_outer_rows * dkv,
            "smem_write/K,V per outer step": e * bh * splits * dims.N_k * dkv,
            "smem_write/P̃": e * elems,
            "smem_write/partial O rows (split-K warps)": 4 * self.warps * rows_steps * dims.d_v,
            "smem_read/Q,O per step": e * bh * v.kv_outer_rows * dkv,
            "smem_read/K,V per tile": e * bh * v.tiles * b_c * dkv,
            "smem_read/P̃": e * elems,
            "smem_read/partial O rows (split-K warps)": 4 * self.warps * rows_steps * dims.d_v}
        if dims.dropout_p:
            terms["fp32/dropout (Philox)"] = elems * sc.FMA_SLOTS * FUSED_DROPOUT_OPS_PER_ELEMENT
        # a CTA's edges: its first K/V block and Q tile in (counted by the load chain when
        # the steps are unpipelined); O leaves inside the loop
        edge = 0 if not self.pipelined else e * b_c * (dims.d + dims.d_v) + e * b_r * dims.d
        return KernelCost.of(
            "fa1_fwd", terms, grid=bh * splits, tiled=True, ctas_per_sm=ctas, edge_bytes=edge,
            warps_per_cta=self.warps, smem_bytes_per_cta=smem,
            registers_per_thread=self.registers_per_thread, tensor_dtype=dims.dtype,
            tensor_family=self.tensor_family,
            **self._overlap(gpu, ctas),
            load_chain=None if self.pipelined else self._load_chain(dims, v, o_b, splits),
            launch={"block_r": b_r, "block_c": b_c, "tiles": bh * v.tiles, "ctas_per_sm": ctas,
                   "q_splits": splits, "live_rows_bytes": live,
                   "l2_usable_bytes": gpu.l2_usable_fraction * gpu.l2_bytes},
        )

    def _overlap(self, gpu: GPUSpec, ctas) -> dict:
        """Overlap rule ``SERIAL_COMPUTE``: MMA, FP32 and MUFU work add, shared memory and HBM
        overlap. Not FA2's warp cycle (``base.warp_cycle``): FA1's shared-memory counts are
        tile traffic (each tile written and read once per CTA), not the per-warp operand
        reads that cycle is built on, so it would not describe the same thing."""
        return {"overlap": SERIAL_COMPUTE}

    def _load_chain(self, dims: Dims, v, o_b, splits):
        """``(waits, bytes)`` the busiest CTA loads when every step waits for its own loads:
        each inner step ``Q_i, O_i, ℓ_i, m_i``; each outer step ``K_j, V_j``; the final pass
        ``O_i, ℓ_i, m_i`` once more to write O and the logsumexp. With ``q_splits`` CTAs per
        head the busiest takes ``⌈T_r / q_splits⌉`` query tiles (its share of the visited
        tiles is taken as proportional)."""
        stats = STATS_PER_ROW * STAT_BYTES
        share = cdiv(v.q_tiles, splits) / v.q_tiles     # the busiest split's query tiles
        nbytes = (v.kv_outer_rows * (dims.e * dims.d + o_b * dims.d_v + stats) * share
                  + dims.N_k * dims.e * (dims.d + dims.d_v)
                  + dims.N_q * (o_b * dims.d_v + stats) * share)
        return v.tiles * share + v.kv_tiles + cdiv(v.q_tiles, splits), nbytes

    def _backward(self, dims, gpu, v, b_r, b_c, smem, ctas, splits) -> KernelCost:
        e, bh = dims.e, dims.B * dims.H
        d, d_v = dims.d, dims.d_v
        # Q_i, O_i, dO_i, dQ_i, l_i, m_i read and dQ_i written per inner step (Alg. 4)
        row_read = e * (2 * d + 2 * d_v) + STATS_PER_ROW * STAT_BYTES
        q_rows = rows_read(replace(dims, causal=dims.causal and self.skip_masked_tiles), b_r)
        live = self._live_rows(dims, gpu, ctas, splits) * row_read
        reads, read_hits = l2_filtered(bh * v.kv_outer_rows * row_read,
                                       bh * q_rows * (e * (d + 2 * d_v)
                                                        + STATS_PER_ROW * STAT_BYTES),
                                       live, gpu, gpu.l2_usable_fraction, written=True)
        writes, write_hits = l2_filtered(bh * v.kv_outer_rows * e * d, bh * q_rows * e * d,
                                         live, gpu, gpu.l2_usable_fraction, written=True)
        kv_hbm, kv_hits = self._kv_traffic(dims, gpu, ctas, splits, b_c)
        # each split writes its partial dK, dV
        grads = e * bh * splits * dims.N_k * (d + d_v)
        elems = bh * v.elements
        terms = {
            **backward_gemm_terms(elems, d, d_v),
            "fp32/P = exp(S − LSE), dS = P∘(dP − D)": elems * sc.BWD_FLOPS_PER_SCORE,
            "fp32/softmax recomputed": elems * sc.ONLINE_SOFTMAX_FLOPS_PER_SCORE,
            "fp32/D_i = rowsum(dO_i∘O_i) per step": bh * v.kv_outer_rows * sc.FMA_SLOTS * d_v,
            "alu/P, dS to 16 bits, row max": elems * (sc.BWD_ALU_OPS_PER_SCORE
                                                      + sc.FWD_ALU_OPS_PER_SCORE),
            "alu/mask": bh * self._masked(dims, v, b_r, b_c) * sc.MASK_ALU_OPS_PER_SCORE,
            "mufu/exp(S)": elems,
            "hbm_read/Q,O,dO,dQ,ℓ,m per step": reads, "hbm_read/K,V": kv_hbm,
            "hbm_write/dQ per step": writes, "hbm_write/dK,dV (per split)": grads,
            "l2_hit/Q,O,dO,dQ,ℓ,m re-read": read_hits, "l2_hit/dQ re-written": write_hits,
            "l2_hit/K,V re-read": kv_hits,
            "smem_write/Q,O,dO,dQ per step": e * bh * v.kv_outer_rows * (2 * d + 2 * d_v),
            "smem_write/P, dS": e * 2 * elems,
            "smem_read/Q,O,dO,dQ per step": e * bh * v.kv_outer_rows * (2 * d + 2 * d_v),
            "smem_read/K,V per tile": e * bh * v.tiles * b_c * (2 * d + d_v),
            "smem_read/P, dS, dP": e * 3 * elems}
        if dims.dropout_p:
            terms["fp32/dropout (Philox)"] = elems * sc.FMA_SLOTS * FUSED_DROPOUT_OPS_PER_ELEMENT
        return KernelCost.of(
            "fa1_bwd", terms, grid=bh * splits, tiled=True, ctas_per_sm=ctas,
            edge_bytes=2 * e * b_c * (d + d_v),      # its K/V block in, dK and dV out
            warps_per_cta=self.warps, smem_bytes_per_cta=smem,
            registers_per_thread=self.registers_per_thread, tensor_dtype=dims.dtype,
            tensor_family=self.tensor_family,
            **self._overlap(gpu, ctas),
            launch={"block_r": b_r, "block_c": b_c, "tiles": bh * v.tiles, "q_splits": splits,
                    "live_rows_bytes": live,
                    "l2_usable_bytes": gpu.l2_usable_fraction * gpu.l2_bytes},
        )

    def memory_bytes(self, dims: Dims, gpu: GPUSpec):
        """As FA2 (no N x N tensor), with ℓ and m both kept (2 fp32 per row)."""
        return fused_memory_bytes(dims) + dims.B * dims.H * dims.N_q * STAT_BYTES


#: Most query splits flash-attn 1 takes (``std::min(30, ...)`` at its call site).
FA1_MAX_SPLITS = 30


def fa1_num_splits(batch_heads: int, slots: int, q_tiles: int) -> int:
    """flash-attn 1's ``num_splits_heuristic_fwd`` (see :meth:`FA1.splits`)."""
    best, eff = 0.0, []
    for s in range(1, max(min(FA1_MAX_SPLITS, q_tiles), 1) + 1):
        waves = batch_heads * s / slots
        eff.append(waves / math.ceil(waves))
        best = max(best, eff[-1])
    return next((i + 1 for i, e in enumerate(eff) if e > 0.95 * best), 1)
