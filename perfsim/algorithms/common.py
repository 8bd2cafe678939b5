"""What the fused algorithms share: input checks, the FA2-style serial overlap rule, the
GQA dK/dV reduction kernels, the fused memory footprint, and the named terms of the backward's
per-score work and of softcap, quantised K/V and paged reads.

Length: a little over 300 lines of small shared pieces, each used by several algorithm
modules; split, each part would be a module of a few functions."""

from __future__ import annotations

from perfsim.algorithms import softmax_costs as sc
from perfsim.algorithms.base import (
    FP32_BYTES,
    STAT_BYTES,
    Dims,
)
from perfsim.errors import InfeasibleError
from perfsim.gpu import BYTES_PER_ELEMENT, compute_capability_numbers
from perfsim.kernel import KernelCost
from perfsim.mathops import cdiv, where

#: Overlap rule of FA2-style kernels that do not issue mma.sync (Triton's WGMMA on Hopper):
#: MMA, softmax FP32 work and exps run one after the other inside a warp; shared memory and
#: HBM overlap with them. mma.sync kernels use the warp cycle (``base.warp_cycle``).
SERIAL_COMPUTE = (("tensor", "fp32", "mufu"), ("smem",), ("hbm",))

#: Rows per warpgroup: a WGMMA instruction covers 64 rows (P3 §2.2).
WGMMA_ROWS = 64
WARPS_PER_WARPGROUP = 4


def wgmma_operand_reads(m, n, k, warpgroups):
    """Elements read from shared memory for one ``m x n x k`` GEMM issued as WGMMA by
    ``warpgroups`` warpgroups. A WGMMA reads its shared-memory operands once per issuing
    warpgroup through matrix descriptors (PTX ISA, "Asynchronous Warpgroup Level Matrix
    Multiply-Accumulate"), not once per warp as ``mma.sync``'s ``ldmatrix`` does. The output
    tile is split among the warpgroups along M in ``WGMMA_ROWS``-row slabs when M has enough
    rows (then A is read once in all and B by every warpgroup), else along N (A by every
    warpgroup, B once)."""
    if m >= WGMMA_ROWS * warpgroups:
        return k * (m + n * warpgroups)
    return k * (m * warpgroups + n)


#: The backward's five GEMMs of one ``B_r x B_c`` tile: the named tensor term each one's
#: FLOPs are counted under (``base.backward_gemm_terms``) and its ``(m, n, k)`` in terms of
#: ``(b_r, b_c, d, d_v)``.
BWD_GEMMS = (("tensor/S=QKᵀ", lambda b_r, b_c, d, d_v: (b_r, b_c, d)),
             ("tensor/dP=dO·Vᵀ", lambda b_r, b_c, d, d_v: (b_r, b_c, d_v)),
             ("tensor/dQ+=dS·K", lambda b_r, b_c, d, d_v: (b_r, d, b_c)),
             ("tensor/dV+=Pᵀ·dO", lambda b_r, b_c, d, d_v: (b_c, d_v, b_r)),
             ("tensor/dK+=dSᵀ·Q", lambda b_r, b_c, d, d_v: (b_c, d, b_r)))


def wgmma_bwd_operand_elements(b_r, b_c, d, d_v, warpgroups) -> dict:
    """Shared-memory operand reads (elements) of each of one backward tile's five GEMMs issued
    as WGMMA by ``warpgroups`` warpgroups (:func:`wgmma_operand_reads`), keyed by the GEMM's
    tensor term, all five counted with both operands in shared memory (SS): a kernel that
    keeps P or dS in registers (RS) reads less, so these are upper bounds."""
    return {term: wgmma_operand_reads(*shape(b_r, b_c, d, d_v), warpgroups)
            for term, shape in BWD_GEMMS}


def wgmma_bwd_operand_reads(b_r, b_c, d, d_v, warpgroups):
    """The five GEMMs' operand reads of :func:`wgmma_bwd_operand_elements`, summed."""
    return sum(wgmma_bwd_operand_elements(b_r, b_c, d, d_v, warpgroups).values())

#: Head dims the FlashAttention kernels take: multiples of 8 up to 256 (flash-attn's
#: ``head_size % 8 == 0`` and ``head_size <= 256`` checks).
HEAD_DIM_MULTIPLE, MAX_HEAD_DIM = 8, 256


def pick_tile(table: dict, d, algorithm: str = "fa2"):
    """The entry of ``table`` (keyed by head dim) for the smallest head dim ≥ ``d``.

    Raises:
        InfeasibleError: ``d`` above every key (the message names ``algorithm``)."""
    for hdim in sorted(table):
        if d <= hdim:
            return table[hdim]
    raise InfeasibleError(f"head_dim {d} > {MAX_HEAD_DIM} is not supported by {algorithm} "
                          f"(the reference kernels take head dims up to {MAX_HEAD_DIM})")


#: The first compute capability with fp8 conversion instructions (PTX ISA: ``cvt`` with
#: ``.e4m3x2`` needs sm_89), charged one FP32-pipe op per element (``mask_extras``); sm_80 and
#: sm_86 would convert in software, integer operations perfsim does not model.
FP8_CONVERT_MIN_CC = (8, 9)


def check_fused_inputs(dims: Dims, algorithm: str, dtypes=("fp16", "bf16"), gpu=None) -> None:
    """The input dtypes and head dims a fused FlashAttention kernel takes (on ``gpu``, where
    given: an fp8 K/V cache needs its conversion instructions, :data:`FP8_CONVERT_MIN_CC`).

    Raises:
        InfeasibleError: another dtype, a K/V dtype as wide as Q's or wider but not Q's own,
            an fp8 K/V cache before sm_89, or a head dim not a multiple of 8 / over 256.
    """
    if dims.dtype not in dtypes:
        raise InfeasibleError(f"{algorithm} runs {', '.join(dtypes)} inputs, not {dims.dtype}")
    if dims.kv_dtype is not None and BYTES_PER_ELEMENT[dims.kv_dtype] >= dims.e:
        # a narrower cache (fp8_e4m3 under 16-bit queries) is converted up after loading, as
        # mixed-precision decode kernels do; no fused kernel converts the queries up instead
        raise InfeasibleError(
            f"{algorithm} reads K/V in the queries' dtype or a narrower cache (fp8_e4m3 under "
            f"fp16/bf16 queries), not {dims.kv_dtype} K/V under {dims.dtype} queries")
    if (gpu is not None and dims.kv_dtype == "fp8_e4m3" and dims.dtype != "fp8_e4m3"
            and compute_capability_numbers(gpu.compute_capability) < FP8_CONVERT_MIN_CC):
        raise InfeasibleError(
            f"{algorithm}: an fp8_e4m3 K/V cache is converted to {dims.dtype} with the fp8 "
            f"conversion instructions of sm_89 and later (cvt .e4m3x2); {gpu.id} is compute "
            f"capability {gpu.compute_capability}, where the conversion runs in software "
            "(integer operations per element), which perfsim does not model")
    if dims.symbolic:
        return
    for name, d in (("head_dim", dims.d), ("head_dim_v", dims.d_v)):
        if d % HEAD_DIM_MULTIPLE or d > MAX_HEAD_DIM:
            raise InfeasibleError(f"{algorithm} needs {name} a multiple of "
                                  f"{HEAD_DIM_MULTIPLE} up to {MAX_HEAD_DIM}, got {d}")

def check_training_inputs(dims: Dims, algorithm: str, reference: str) -> None:
    """A backward takes 16-bit Q, K and V of one dtype from contiguous memory: no fp8, no
    K/V dtype of its own, no paged cache (those are inference paths of the forward).

    Raises:
        InfeasibleError: a backward (or forward and backward) with any of them."""
    if not dims.bwd:
        return
    if dims.dtype not in ("fp16", "bf16") or dims.kv_dtype is not None:
        raise InfeasibleError(
            f"{algorithm}'s backward takes fp16 or bf16 Q, K and V of one dtype ({reference}); "
            f"this call has {dims.dtype}"
            + (f" queries with a {dims.kv_dtype} K/V cache" if dims.kv_dtype else ""))
    if dims.page_size:
        raise InfeasibleError(f"{algorithm}: a paged K/V cache is an inference path (no "
                              f"backward; {reference})")


def bwd_preprocess_kernel(dims: Dims, name: str, zero_dq: bool = True,
                          lse_log2: bool = False, dq_width=None) -> KernelCost:
    """The backward's preprocess kernel: ``D = rowsum(dO ∘ O)`` per query row (reads dO and
    O, writes D), and, where the main kernel adds dQ into a global fp32 accumulator
    (``zero_dq``), that accumulator zeroed — ``dq_width`` columns per row (the compiled
    kernel's head dim; default the call's ``d``); ``lse_log2``: the logsumexp read and
    written back times log2(e) as well (flash_attn.cute's
    ``FlashAttentionBackwardPreprocess``). One CTA per 128 query rows, 4 warps (flash-attn
    2's ``compute_dot_do_o``, FA3's and flash_attn.cute's preprocess)."""
    rows = dims.B * dims.H * dims.N_q
    terms = {"fp32/D = rowsum(dO∘O)": 2 * rows * dims.d_v,
             "hbm_read/dO,O": 2 * dims.e * rows * dims.d_v, "hbm_write/D": rows * STAT_BYTES}
    if zero_dq:
        width = dims.d if dq_width is None else dq_width
        terms["hbm_write/zeroed fp32 dQ accumulator"] = rows * FP32_BYTES * width
    if lse_log2:
        terms["hbm_read/logsumexp"] = rows * STAT_BYTES
        terms["hbm_write/logsumexp · log2(e)"] = rows * STAT_BYTES
    return KernelCost.of(f"{name}_bwd_preprocess", terms, grid=cdiv(rows, 128),
                         warps_per_cta=4)


def dq_convert_kernel(dims: Dims, name: str, dq_width=None) -> KernelCost:
    """The backward's postprocess kernel: the fp32 dQ accumulator read (``dq_width``
    columns per row: the compiled kernel's head dim; default the call's ``d``), dQ written
    in the input dtype (flash-attn 2's ``convert_dQ``, FA3's and flash_attn.cute's
    ``FlashAttentionBackwardPostprocess``). One CTA per 128 query rows, 4 warps."""
    rows = dims.B * dims.H * dims.N_q
    width = dims.d if dq_width is None else dq_width
    return KernelCost.of(
        f"{name}_bwd_convert_dq",
        {"hbm_read/fp32 dQ": FP32_BYTES * rows * width, "hbm_write/dQ": dims.e * rows * dims.d},
        grid=cdiv(rows, 128), warps_per_cta=4)


def gqa_reduce_kernels(dims: Dims) -> list[KernelCost]:
    """Sum the per-query-head dK, dV into the key/value heads (GQA/MQA backward): one
    kernel per tensor, as K and V are tensors of their own — Nsight Compute on an H100 lists
    two ``at::reduce_kernel`` after SDPA flash's backward and two ``cudnn::fmha_reduce_head``
    after cuDNN's (validate/reports/h100/probes/ncu/ncu-gqa-bwd.tgz).

    Launched only when ``H_kv < H``: their grids (and so their counts and launches) are 0
    otherwise.
    """
    grouped = where(dims.H > dims.H_kv, 1, 0)
    rows = dims.e * dims.B * dims.N_k
    return [KernelCost(
        name=f"gqa_reduce_{tensor}", grid=grouped * cdiv(dims.B * dims.H_kv * dims.N_k, 128),
        fp32_flops=grouped * rows * width / dims.e * (dims.H - dims.H_kv),
        hbm_read_bytes=grouped * rows * width * dims.H,
        hbm_write_bytes=grouped * rows * width * dims.H_kv)
        for tensor, width in (("dk", dims.d), ("dv", dims.d_v))]


def fused_memory_bytes(dims: Dims):
    """Peak footprint of a fused (FlashAttention-style) kernel: Q, K, V, O and the logsumexp;
    in backward also dO, dQ, dK, dV, D and the fp32 dQ accumulator. Nothing N x N."""
    e, B = dims.e, dims.B
    q_o = B * dims.H * dims.N_q * (dims.d + dims.d_v)
    k_v = B * dims.H_kv * dims.N_k * (dims.d + dims.d_v)
    stats = B * dims.H * dims.N_q * STAT_BYTES
    # O in its own width (Dims.e_o: bf16 under fp8 inputs, which have no backward)
    total = B * dims.H * dims.N_q * (e * dims.d + dims.e_o * dims.d_v) + dims.e_kv * k_v \
        + stats
    if dims.bwd:
        total = total + e * (2 * q_o + k_v) + stats \
            + FP32_BYTES * B * dims.H * dims.N_q * dims.d
    return total

#: Softcap per score element (``s ← c·tanh(s/c)``): one MUFU ``tanh`` and two FP32 multiplies
#: forward; the backward recomputes ``tanh`` and multiplies ``dS`` by ``1 − tanh²`` (3 ops);
#: in FMA-pipe FLOP slots (2 per instruction).
SOFTCAP_FWD_FP32, SOFTCAP_BWD_FP32 = 2 * sc.FMA_SLOTS, 5 * sc.FMA_SLOTS
#: int32 page-table entry.
PAGE_TABLE_ENTRY_BYTES = 4


def backward_softmax_terms(dims: Dims, v, masked_elements, dropout_family: str = "none") -> dict:
    """The backward's per-score work as named terms (FA2 Algorithm 2): ``P`` recomputed and
    ``dS`` formed on the FMA pipes, ``P`` and ``dS`` converted and the mask on the ALU, one
    exp each, plus dropout as ``dropout_family``'s kernels draw it
    (``softmax_costs.DROPOUT_INSTRUCTIONS``) and :func:`mask_extras`; ``masked_elements``
    scores get the mask."""
    bh = dims.B * dims.H
    elems = bh * v.elements
    terms = {"fp32/P = exp(S − LSE), dS = P∘(dP − D)": elems * sc.BWD_FLOPS_PER_SCORE,
             "alu/P, dS to 16 bits": elems * sc.BWD_ALU_OPS_PER_SCORE,
             "alu/mask": masked_elements * sc.MASK_ALU_OPS_PER_SCORE,
             "mufu/exp(S − LSE)": elems}
    if dims.dropout_p:
        terms.update(sc.dropout_terms(dropout_family, "bwd", elems))
    terms.update(mask_extras(dims, v, bh, dims.d + dims.d_v, backward=True))
    return terms


def mask_extras(dims: Dims, v, bh, dkv, backward: bool = False) -> dict:
    """Work a plain kernel does not do: softcap (``SOFTCAP_*``: FP32 ops and a MUFU tanh per
    score), converting a narrower K/V cache to the matmul dtype (one FP32-pipe op per K/V
    element loaded, ``dims.kv_dtype``), and page-table reads (one entry per page a query
    tile's key range touches, ``dims.page_size``). Returns named terms (none for a plain
    kernel)."""
    elems = bh * v.elements
    terms = {}
    if dims.softcap:
        terms["fp32/softcap"] = elems * (SOFTCAP_BWD_FP32 if backward else SOFTCAP_FWD_FP32)
        terms["mufu/softcap tanh"] = elems
    if dims.kv_dtype and dims.kv_dtype != dims.dtype:
        terms["fp32/K,V to the matmul dtype"] = sc.FMA_SLOTS * bh * v.q_outer_cols * dkv
    if dims.page_size and not backward:
        terms["hbm_read/page table"] = (PAGE_TABLE_ENTRY_BYTES * bh
                                        * cdiv(v.q_outer_cols, dims.page_size))
    return terms


def power_of_two_warps(v):
    """A warps-per-CTA option: ``None`` (the reference's) or a power of two up to 32.

    Raises:
        ValueError: anything else (pydantic reports it as the option's error)."""
    if v is not None and v & (v - 1):
        raise ValueError(f"warps per CTA must be a power of two (1, 2, 4, 8, 16, 32), got {v}")
    return v


#: Bytes of one TMA row segment by the shared-memory swizzle a tile's rows take: CUTLASS's
#: sm90 layout atoms (``cutlass.utils.hopper_helpers.get_smem_layout_atom``, the CuTe DSL
#: flash_attn.cute builds its tiles with, and ``ss_smem_selector`` in flash-attn 3's C++)
#: pick the 128-byte swizzle when a row of the tile is a multiple of 1024 bits, else 64 bytes
#: at 512 bits, else 32 bytes at 256 bits; a TMA box is then loaded as boxes of the swizzle's
#: width, one request per row segment.
TMA_SWIZZLE_BITS = ((1024, 128), (512, 64), (256, 32))


def tma_segment_bytes(row_elements, element_bytes) -> int:
    """Bytes per TMA row segment of a shared-memory tile whose rows hold ``row_elements``
    elements of ``element_bytes`` bytes (:data:`TMA_SWIZZLE_BITS`; 32 below 256 bits: not
    measured, ASSUMED)."""
    bits = int(row_elements) * int(element_bytes) * 8
    return next((seg for unit, seg in TMA_SWIZZLE_BITS if bits % unit == 0), 32)


def tma_request_seconds(gpu, loads) -> float:
    """Seconds the L2 needs for a kernel's TMA loads (``KernelCost.l2_request_seconds``): for
    each ``(rows, tile_elements, row_elements, element_bytes)`` of ``loads`` — rows loaded
    (every visit counted), the shared-memory tile's row width (the compiled head dim), the
    tensor's own row width (the call's head dim) and the element size — the row segments
    (``⌈tile row bytes / segment bytes⌉`` of :func:`tma_segment_bytes`) times
    ``gpu.tma_segment_seconds`` for that width, the ``/half`` entry where the tensor's rows
    are 16 bytes off whole 32-byte sectors (half of them then start half a sector in). 0 on a
    GPU without that table; a load whose rows are not a multiple of 16 bytes (which TMA cannot
    describe) adds nothing. ``rows`` may be numpy arrays (sweeps).

    Evidence (not attention timing): ``validate/probe_tma_rows.py`` on the H200 (the table's
    source in ``hardware/h200-sxm.toml``); Nsight Compute has flash_attn.cute's forward at
    head dim 240 (32-byte segments) at 86 % of the L2's peak throughput for 2.1 GB, against
    36 % for 1.5 GB at 256 (``validate/reports/h200/probes/ncu/summary-cute-headdims.json``).
    """
    table = gpu.tma_segment_seconds
    if not table:
        return 0.0
    total = 0.0
    for rows, tile_elements, row_elements, element_bytes in loads:
        if (int(row_elements) * int(element_bytes)) % 16:
            # TMA needs 16-byte row strides: such rows are loaded another way (no segments)
            continue
        seg = tma_segment_bytes(tile_elements, element_bytes)
        half = (int(row_elements) * int(element_bytes)) % 32 == 16
        key = f"{seg}/half" if half else str(seg)
        segments = cdiv(int(tile_elements) * int(element_bytes), seg)
        total = total + rows * segments * table[key]
    return total
