"""Standard (eager) attention: one kernel per step, the N x N intermediates in HBM.

Algorithm 0 of the FlashAttention paper (Dao et al. 2022, §2.2) as PyTorch eager code runs it,
step by step as the RTX 5090 roofline post §3.2 takes it apart::

    S = Q Kᵀ            (batched GEMM, writes S: N_q x N_k per head)
    S = S / sqrt(d)     (elementwise)
    S = S.masked_fill   (causal only)
    P = softmax(S)      (fused kernel, or max / subtract / exp / sum / divide: 5 kernels)
    P = dropout(P)      (dropout_p > 0)
    O = P V             (batched GEMM)

and the kernels autograd runs backward. GQA/MQA: K and V are expanded to ``H`` heads first
(``repeat_interleave``, as eager code does), and the key/value gradients are summed back.

Each kernel is a roofline (its units overlap); GEMMs move each operand once (cuBLAS tiles
reuse operands through L2); elementwise kernels read and write whole tensors.

Occupancy: these are library kernels (cuBLAS, PyTorch's softmax and elementwise kernels) whose
launch configuration perfsim does not model, so a what-if GPU's residency limits (warp slots,
threads, registers, shared memory per SM or CTA) do not change their times and never make them
infeasible: ASSUMED the library picks a kernel that fits the GPU it runs on, as cuBLAS's
heuristics and PyTorch's launch bounds do on every shipped GPU. The fused kernels (FA1-FA4)
check their own CTAs against those limits.

Length: one algorithm — the forward's and autograd's kernels for three softmax forms, three
mask operations, softcap and dropout, the GEMMs' tile rules (cuBLAS's narrow tiles and SIMT
SGEMMs), and the memory footprint; the profile facts each rule rests on are cited beside it.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from perfsim.algorithms import softmax_costs as sc
from perfsim.algorithms.base import (
    DROPOUT_MASK_BYTES,
    DROPOUT_OPS_PER_ELEMENT,
    Algorithm,
    Dims,
    padding,
)
from perfsim.algorithms.common import gqa_reduce_kernels
from perfsim.errors import InfeasibleError
from perfsim.gpu import GPUSpec
from perfsim.kernel import KernelCost
from perfsim.mathops import cdiv, where

#: Elements per CTA of an elementwise kernel (PyTorch launches 128 threads x 4 elements per
#: thread and loops; only the grid size, hence the tail effect, depends on it).
ELEMENTWISE_ELEMENTS_PER_CTA = 512
#: Output tile of a cuBLAS GEMM CTA (for the grid size only).
GEMM_TILE = 128
#: Rows of the output tile cuBLAS launches for a GEMM with few output rows (decode: one query
#: row per batch and head), from the kernels' names on the H200 (``probe_small_gemm.py``,
#: validate/reports/h200/probes/sgemm/small_gemm.json): 16-bit GEMMs with 1 and 16 rows run
#: ``nvjet_…_256x8``/``64x8`` and ``…x16`` tiles (8 and 16 rows); fp32 ones with 1 row a GEMV
#: (``gemvx``, ``gemv2T``: no padding), with 16 rows ``tilesize32x32``/``32x64`` tiles (and at
#: B·H = 8 a ``gemmSN_NN`` kernel). Between the measured sizes the rows pad to the next power of
#: two, 32 and 64 — ASSUMED (cuBLAS's families have 32- and 64-row tiles, e.g. the
#: ``tilesize64x256`` SGEMM of sgemm-widths.json; these sizes were not timed) — so one more row
#: never costs a jump to a 128-row tile. Larger outputs keep the 128-row tile. ASSUMED the same
#: on other GPUs (the same library).
NARROW_ROW_TILES = {"16-bit": (8, 16, 32, 64), "fp32": (1, 32, 64)}


def gemm_rows_tile(m, fp32: bool):
    """Rows of the output tile for an ``m``-row GEMM (:data:`NARROW_ROW_TILES`; an array or
    a sympy expression where ``m`` is one): the smallest listed tile that holds ``m`` rows,
    else :data:`GEMM_TILE`."""
    tile = GEMM_TILE
    for rows in reversed(NARROW_ROW_TILES["fp32" if fp32 else "16-bit"]):
        tile = where(m <= rows, rows, tile)
    return tile


#: Bytes of the per-row argmax index autograd keeps for ``max`` (torch.int64).
INDEX_BYTES = 8
#: What autograd runs for softmax's backward (torch 2.11, CUDA), from torch.profiler on the H200
#: with the launching aten op of each kernel (validate/reports/h200/probes/eager_bwd/
#: eager_ops.txt, ``validate/probe_eager_ops.py``): ``aten::_softmax_backward_data`` launches
#: an elementwise ``aten::mul`` (``BinaryFunctor<MulFunctor>``: dP ∘ P, two N x N reads, one
#: write) and then ``cunn_SoftMaxBackwardSmem`` (the row sums and P ∘ (dP − sum): two reads, one
#: write) — the same pair in bf16 and in SDPA math's fp32, on a standalone tensor too. Each ran
#: at about the HBM copy bandwidth at every row length from 128 to 16384 (the pair moved
#: 1.8-2.2e12 B/s of its three nominal passes against a 4.15e12 B/s copy, eager_ceilings.json
#: there), so neither takes a ceiling. Masks: SDPA math's in-place float-mask add has no
#: backward kernel and ``_safe_softmax``'s ``where`` none either (the same profile, both
#: masks); eager ``masked_fill``'s backward is a copy plus the same broadcast-mask
#: ``masked_fill_`` kernel as the forward (733.5 against 733.2 µs in the same run, at
#: B=4, H=16, N=2048), so it takes the forward's broadcast-fill ceiling.
SOFTMAX_BWD_KERNELS = ("softmax_bwd_mul", "softmax_bwd")


class Standard(Algorithm):
    """Eager attention options.

    Args:
        softmax: ``"fused"`` (one ``torch.softmax`` kernel) or ``"5kernel"`` (max, subtract,
            exp, sum, divide — the RTX 5090 post's form).
        scale_in_matmul: fold ``1/sqrt(d)`` into the QKᵀ GEMM (``baddbmm``-style); default off
            (Algorithm 0 and the 5090 post divide in a separate kernel).
        mask_op: how the causal mask is applied: ``"where"`` — one kernel that reads S and the
            mask and writes S (``torch.where``, as HuggingFace GPT-2 does); ``"masked_fill"`` —
            PyTorch's out-of-place ``masked_fill``, which is a copy of S followed by an
            in-place fill (two kernels; seen in the H200 profile,
            validate/reports/h200/profile_eager.txt); its backward is the same pair
            (validate/reports/h200/probes/eager_bwd/eager_ops.txt);
            ``"add_float"`` — an in-place add of an N_q x N_k float mask of the workload's
            dtype (SDPA math turns the causal mask into one, ``convert_boolean_attn_mask``);
            its backward is the identity (no kernel).
        softmax ``"safe"``: ``at::_safe_softmax`` (SDPA math, torch >= 2.5): the softmax,
            then ``eq(-inf)`` (a bool N x N), ``all`` over each row and a ``where`` that zeroes
            fully masked rows — three more full passes; its backward launches no ``where``
            kernel (:data:`SOFTMAX_BWD_KERNELS`).
        weights_cast_bytes: SDPA math returns the attention weights cast to the input dtype
            (``attn.to(origin_dtype)``) beside the output, an extra N x N pass writing that
            many bytes per element (0: none).
    """

    name: ClassVar[str] = "standard"
    #: software profile (perfsim.software): eager PyTorch launches one op at a time, as the
    #: SDPA math backend does (its measured per-call host floors)
    software: ClassVar[str] = "sdpa-math"
    overlap_rule: ClassVar[str] = ("every kernel is a roofline: its time is the slowest of "
                                   "its units; kernels run one after another")

    softmax: Literal["fused", "5kernel", "safe"] = "fused"
    scale_in_matmul: bool = Field(default=False)
    mask_op: Literal["where", "masked_fill", "add_float"] = "where"
    weights_cast_bytes: int = Field(default=0, ge=0, le=4)

    def kernels(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        """The eager kernels: QKᵀ, scale, mask, softmax, dropout, PV (and their backward)."""
        if dims.kv_dtype and dims.kv_dtype != dims.dtype:
            raise InfeasibleError(f"standard attention multiplies tensors of one dtype; a "
                                  f"{dims.kv_dtype} K/V under {dims.dtype} queries must be "
                                  "converted first (count that conversion separately)")
        if dims.page_size:
            raise InfeasibleError("standard attention multiplies contiguous K/V; a paged cache "
                                  "must be gathered first (count that copy separately)")
        if str(dims.dtype).startswith("fp8"):
            raise InfeasibleError(f"eager PyTorch has no {dims.dtype} matmul: torch.matmul and "
                                  "torch.bmm take no float8 inputs (float8 GEMMs go through "
                                  "torch._scaled_mm, 2-D only); use fp16/bf16 (or fp32)")
        out = []
        if dims.fwd:
            out += self._forward(dims, gpu)
        if dims.bwd:
            out += self._backward(dims, gpu)
        return out

    # --------------------------------------------------------------- building blocks
    def _nn(self, dims: Dims):
        """Elements of one N_q x N_k tensor over all heads."""
        return dims.B * dims.H * dims.N_q * dims.N_k

    def _gemm(self, name, dims: Dims, gpu: GPUSpec, m, n, k, read_elems, write_elems):
        flops = 2 * dims.B * dims.H * m * n * k
        tensor = gpu.native_tensor_family
        on_fp32_pipes = dims.dtype == "fp32"
        tile_m = gemm_rows_tile(m, on_fp32_pipes)
        grid = dims.B * dims.H * cdiv(m, tile_m) * cdiv(n, GEMM_TILE)
        return KernelCost(name=name, grid=grid, warps_per_cta=8, tensor_dtype=dims.dtype,
                          tensor_family=tensor,
                          tensor_flops=0 if on_fp32_pipes else flops,
                          fp32_flops=flops if on_fp32_pipes else 0,
                          hbm_read_bytes=dims.e * read_elems,
                          hbm_write_bytes=dims.e * write_elems,
                          # cuBLAS's SIMT SGEMM: its K law and width table
                          # (TimingParams.sgemm_efficiency) instead of padding a narrow
                          # output to a 128-wide tile: it launches narrower tiles there
                          eager_op="sgemm" if on_fp32_pipes else None,
                          row_length=k if on_fp32_pipes else None,
                          gemm_n=n if on_fp32_pipes else None,
                          ).padded(padding(m, tile_m)
                                   * (1 if on_fp32_pipes else padding(n, GEMM_TILE)))

    def _pointwise(self, name, dims: Dims, reads, writes, fma_ops=0, exps=0, extra_read=0,
                   extra_write=0, active=1, eager_op=None, alu=0):
        """An elementwise pass over ``reads``/``writes`` N x N tensors (in elements of the
        workload dtype) plus ``extra_*`` bytes; per element ``fma_ops`` FMA-pipe and ``alu``
        ALU-pipe lane instructions and ``exps`` exps."""
        nn = self._nn(dims)
        return KernelCost(name=name, grid=active * cdiv(nn, ELEMENTWISE_ELEMENTS_PER_CTA),
                          warps_per_cta=4, tensor_dtype=dims.dtype,
                          fp32_flops=active * sc.FMA_SLOTS * fma_ops * nn,
                          alu_ops=active * alu * nn,
                          exp_ops=active * exps * nn,
                          hbm_read_bytes=active * (dims.e * reads * nn + extra_read),
                          hbm_write_bytes=active * (dims.e * writes * nn + extra_write),
                          # (a row length only where a measured rate reads it: one merged
                          # launch of a variable-length batch's groups keeps one value)
                          eager_op=eager_op, row_length=dims.N_k if eager_op else None,
                          ).padded(padding(nn, ELEMENTWISE_ELEMENTS_PER_CTA))

    def _expand_kv(self, dims: Dims) -> KernelCost:
        grouped = where(dims.H > dims.H_kv, 1, 0)
        kv = dims.e * dims.B * dims.N_k * (dims.d + dims.d_v)
        return KernelCost(name="repeat_kv", grid=grouped * cdiv(dims.B * dims.H * dims.N_k, 128),
                          hbm_read_bytes=grouped * kv * dims.H_kv,
                          hbm_write_bytes=grouped * kv * dims.H)

    # --------------------------------------------------------------- forward
    def _forward(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        bh = dims.B * dims.H
        nn = self._nn(dims)
        causal = 1 if dims.masked else 0     # a window is one more mask of the same kind
        drop = 1 if dims.dropout_p else 0
        rows = bh * dims.N_q
        ks = [self._expand_kv(dims),
              self._gemm("qk_matmul", dims, gpu, dims.N_q, dims.N_k, dims.d,
                         bh * (dims.N_q + dims.N_k) * dims.d, nn)]
        if not self.scale_in_matmul:
            ks.append(self._pointwise("scale", dims, 1, 1, fma_ops=1))
        if dims.softcap:     # s / c, tanh (MUFU), · c: three eager elementwise kernels
            ks += [self._pointwise("softcap_div", dims, 1, 1, fma_ops=1),
                   self._pointwise("softcap_tanh", dims, 1, 1, exps=1),
                   self._pointwise("softcap_mul", dims, 1, 1, fma_ops=1)]
        if causal:
            if self.mask_op == "masked_fill":
                ks.append(self._pointwise("mask_copy", dims, 1, 1))
            mask_bytes = dims.e if self.mask_op == "add_float" else 1
            ks.append(self._pointwise("mask", dims, 1, 1, alu=sc.MASK_ALU_OPS_PER_SCORE,
                                      extra_read=mask_bytes * dims.N_q * dims.N_k,
                                      eager_op="broadcast_fill"
                                      if self.mask_op == "masked_fill" else None))
        if self.softmax in ("fused", "safe"):
            # on masked scores (-inf where the mask hides a key) the same kernel runs slower
            # (TimingParams.eager_softmax_masked)
            ks.append(self._pointwise("softmax", dims, 1, 1, fma_ops=sc.FUSED_SOFTMAX_FMA_OPS,
                                      alu=sc.FUSED_SOFTMAX_ALU_OPS, exps=1,
                                      eager_op="softmax_masked" if causal else "softmax"))
        if self.softmax == "safe":
            ks += [self._pointwise("safe_softmax_eq", dims, 1, 0, fma_ops=1, extra_write=nn),
                   self._pointwise("safe_softmax_all", dims, 0, 0, fma_ops=1, extra_read=nn,
                                   extra_write=rows),
                   self._pointwise("safe_softmax_where", dims, 1, 1, extra_read=rows)]
        elif self.softmax == "5kernel":
            row = dims.e * rows
            ks += [self._pointwise("softmax_max", dims, 1, 0, fma_ops=1, extra_write=row),
                   self._pointwise("softmax_sub", dims, 1, 1, fma_ops=1, extra_read=row),
                   self._pointwise("softmax_exp", dims, 1, 1, exps=1),
                   self._pointwise("softmax_sum", dims, 1, 0, fma_ops=1, extra_write=row),
                   self._pointwise("softmax_div", dims, 1, 1, fma_ops=1, extra_read=row)]
        if drop:
            ks.append(self._pointwise("dropout", dims, 1, 1, fma_ops=DROPOUT_OPS_PER_ELEMENT,
                                      extra_write=DROPOUT_MASK_BYTES * nn))
        ks.append(self._gemm("pv_matmul", dims, gpu, dims.N_q, dims.d_v, dims.N_k,
                             nn + bh * dims.N_k * dims.d_v, bh * dims.N_q * dims.d_v))
        if self.weights_cast_bytes:
            ks.append(self._pointwise("weights_cast", dims, 1, 0,
                                      extra_write=self.weights_cast_bytes * nn))
        return ks

    # --------------------------------------------------------------- backward
    def _backward(self, dims: Dims, gpu: GPUSpec) -> list[KernelCost]:
        bh = dims.B * dims.H
        nn = self._nn(dims)
        rows = bh * dims.N_q
        ks = [self._gemm("pv_bwd_dP", dims, gpu, dims.N_q, dims.N_k, dims.d_v,
                         bh * (dims.N_q + dims.N_k) * dims.d_v, nn),
              self._gemm("pv_bwd_dV", dims, gpu, dims.N_k, dims.d_v, dims.N_q,
                         nn + rows * dims.d_v, bh * dims.N_k * dims.d_v)]
        if dims.dropout_p:
            ks.append(self._pointwise("dropout_bwd", dims, 1, 1, fma_ops=2,
                                      extra_read=DROPOUT_MASK_BYTES * nn))
        if self.softmax in ("fused", "safe"):
            # torch._softmax_backward_data launches two kernels (SOFTMAX_BWD_KERNELS)
            ks += [self._pointwise("softmax_bwd_mul", dims, 2, 1, fma_ops=1),
                   self._pointwise("softmax_bwd", dims, 2, 1,
                                   fma_ops=sc.SOFTMAX_BWD_FMA_OPS - 1)]
        elif self.softmax == "5kernel":
            row = dims.e * rows
            ks += [self._pointwise("div_bwd_num", dims, 1, 1, fma_ops=1, extra_read=row),
                   self._pointwise("div_bwd_den", dims, 2, 0, fma_ops=3, extra_write=row),
                   self._pointwise("sum_bwd", dims, 1, 1, fma_ops=1, extra_read=row),
                   self._pointwise("exp_bwd", dims, 2, 1, fma_ops=1),
                   self._pointwise("max_bwd", dims, 1, 1, fma_ops=1,
                                   extra_read=INDEX_BYTES * rows)]
        if dims.softcap:     # dS · (1 − tanh²): tanh saved, one fused elementwise pass
            ks.append(self._pointwise("softcap_bwd", dims, 2, 1, fma_ops=3))
        if dims.masked and self.mask_op != "add_float":   # an add's gradient is the identity
            if self.mask_op == "masked_fill":
                ks.append(self._pointwise("mask_bwd_copy", dims, 1, 1))
            ks.append(self._pointwise("mask_bwd", dims, 1, 1, alu=sc.MASK_ALU_OPS_PER_SCORE,
                                      extra_read=dims.N_q * dims.N_k,
                                      eager_op="broadcast_fill"
                                      if self.mask_op == "masked_fill" else None))
        if not self.scale_in_matmul:
            ks.append(self._pointwise("scale_bwd", dims, 1, 1, fma_ops=1))
        ks += [self._gemm("qk_bwd_dQ", dims, gpu, dims.N_q, dims.d, dims.N_k,
                          nn + bh * dims.N_k * dims.d, rows * dims.d),
               self._gemm("qk_bwd_dK", dims, gpu, dims.N_k, dims.d, dims.N_q,
                          nn + rows * dims.d, bh * dims.N_k * dims.d),
               *gqa_reduce_kernels(dims)]
        return ks

    # --------------------------------------------------------------- memory
    def saved_bytes(self, dims: Dims):
        """N x N tensors autograd keeps for backward (5090 post, Table 3-3): the softmax
        output P (fused) or exp output and P (5-kernel, plus the per-row argmax), and with
        dropout its bool mask and the dropped-out P that the PV GEMM saves."""
        nn = self._nn(dims)
        saved = dims.e * nn
        if self.softmax == "5kernel":
            saved = saved + dims.e * nn + INDEX_BYTES * dims.B * dims.H * dims.N_q
        if dims.dropout_p:
            saved = saved + (DROPOUT_MASK_BYTES + dims.e) * nn
        return saved

    def memory_bytes(self, dims: Dims, gpu: GPUSpec):
        """Q, K, V (and their H-head expansion for GQA), O, two live N x N temporaries (an
        elementwise kernel's input and output); with backward also what autograd saves,
        dO and the input gradients."""
        e = dims.e
        q_o = dims.B * dims.H * dims.N_q * (dims.d + dims.d_v)
        k_v = dims.B * dims.N_k * (dims.d + dims.d_v) * (dims.H_kv + where(
            dims.H > dims.H_kv, dims.H, 0))
        total = e * (q_o + k_v) + 2 * e * self._nn(dims)
        if dims.bwd:
            total = total + self.saved_bytes(dims) + e * (2 * q_o + k_v)
        return total
