"""What flash-attn 2 launches on a given GPU: tiles, warps and warp layouts per head dim.

The reference picks its kernel configuration per head dim, per compute capability and per
shared-memory size (flash-attn 2 ``csrc/flash_attn/src/flash_fwd_launch_template.h``
``run_mha_fwd_hdim*`` and ``flash_bwd_launch_template.h`` ``run_mha_bwd_hdim*``). Its ``is_sm8x``
test is compute capability 8.x with a minor version above 0 (sm_86, sm_89: the consumer and
workstation parts with 100 KB of shared memory per SM); every other GPU (sm_80, sm_90,
sm_100, sm_120) takes the A100/H100 branch, except where a branch tests the shared memory
per block itself.

Backward warp layouts (``AtomLayoutMSdP``, ``AtomLayoutNdKV``, ``AtomLayoutMdQ``: warps along
the M dimension of the S/dP, dK/dV and dQ GEMMs) set how often each shared-memory operand is
read (:func:`perfsim.algorithms.fa2.bwd_operand_reads`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from perfsim.errors import InfeasibleError
from perfsim.gpu import GPUSpec, compute_capability_numbers
from perfsim.mathops import maximum

KIB = 1024


def is_sm8x(gpu: GPUSpec) -> bool:
    """flash-attn 2's ``is_sm8x``: compute capability 8.x with minor > 0 (sm_86, sm_89)."""
    major, minor = compute_capability_numbers(gpu.compute_capability)
    return major == 8 and minor != 0


#: The head dims flash-attn 2 compiles kernels for (``HEADDIM_SWITCH``,
#: ``csrc/flash_attn/src/static_switch.h``): a call runs the smallest one at least its head
#: dim, its MMAs and shared-memory tiles that wide (the extra columns zero-filled).
HEAD_DIM_TEMPLATES = (32, 64, 96, 128, 160, 192, 256)
#: PyTorch's copy of flash-attn 2 (SDPA's flash backend, torch 2.11) has no head-dim-160
#: kernel: the kernels Nsight Compute names on the H200 for calls at head dims 40, 80, 112,
#: 160, 176, 200 and 224 are the 64, 96, 128, 192, 192, 256 and 256 ones, forward and
#: backward (``validate/reports/h200/probes/ncu/summary-headdims.json``; 32 not profiled,
#: ASSUMED as flash-attn 2's).
PYTORCH_HEAD_DIM_TEMPLATES = (32, 64, 96, 128, 192, 256)


@functools.lru_cache(maxsize=1024)
def kernel_head_dim(d: int, templates: tuple[int, ...] = HEAD_DIM_TEMPLATES) -> int:
    """The compiled head dim that runs head dim ``d`` (``d`` itself above the largest). A
    function of its arguments alone (a head dim and a tuple), kept for the last 1024: one
    call asks it for every kernel it builds."""
    return next((t for t in templates if d <= t), d)


def fwd_launch(d: int, causal: bool, dropout: bool, gpu: GPUSpec) -> tuple[int, int, int]:
    """``(B_r, B_c, warps)`` of flash-attn 2's forward kernel for (compiled) head dim ``d``
    (``run_mha_fwd_hdim*``).

    Raises:
        InfeasibleError: ``d`` above 256.
    """
    sm8x = is_sm8x(gpu)
    if d <= 32:
        return 128, 128, 4
    if d <= 64:
        return (128, 64, 4) if dropout else (128, 128, 4)
    if d <= 96:
        return (64, 64, 4) if sm8x and causal else (128, 64, 4)
    if d <= 128:
        if dropout:
            return 128, 32, 4
        if sm8x:
            return (64, 64, 4) if causal else (128, 32, 4)
        return 128, 64, 4
    if d <= 160:
        # run_mha_fwd_hdim160: 128 x 32 on A100/H100; sm8x: square 64 x 64 when causal
        if sm8x:
            return (64, 64, 4) if causal else (128, 64, 8)
        return 128, 32, 4
    if d <= 192:
        return (64, 64, 4) if dropout else (128, 64, 8)
    if d <= 256:
        # 128 x 64 (128 KB) where a CTA may take it and an SM cannot hold two 64 x 64 CTAs
        # (A100); else 64 x 64 with 4 warps (H100: two CTAs per SM; sm8x: all that fits).
        big = (gpu.smem_bytes_per_block >= 2 * 256 * (128 + 2 * 64)
               and gpu.smem_bytes_per_sm < 4 * 256 * (64 + 2 * 64))
        return (128, 64, 8) if big else (64, 64, 4)
    raise InfeasibleError(f"head_dim {d} > 256 is not supported by fa2 (the reference "
                          "kernels take head dims up to 256)")


class BwdLaunch(NamedTuple):
    """One flash-attn 2 backward configuration (``Flash_bwd_kernel_traits`` arguments)."""

    block_m: int                      #: query rows per K/V tile step (B_r)
    block_n: int                      #: key rows per CTA (B_c)
    warps: int
    atoms: tuple[int, int, int]       #: AtomLayoutMSdP, AtomLayoutNdKV, AtomLayoutMdQ
    v_in_regs: bool = False           #: Is_V_in_regs
    no_double_buffer: bool = False    #: No_double_buffer (Q and dO single-buffered)

    def smem_bytes(self, d, d_v, e: int):
        """Shared memory per CTA, as ``Flash_bwd_kernel_traits::kSmemSize1colblock``: Q
        (double-buffered unless ``no_double_buffer``) and dO tiles, K and V, dS and P; with V
        in registers the V part of the K/V space is shared with dS and P. Works on symbols."""
        q_do = self.block_m * ((1 if self.no_double_buffer else 2) * d + d_v) * e
        k_v = self.block_n * (d + d_v) * e
        ds_p = 2 * self.block_m * self.block_n * e
        if self.v_in_regs:
            return q_do + maximum(k_v, self.block_n * d * e + ds_p)
        return q_do + k_v + ds_p


def bwd_launch(d: int, dropout: bool, gpu: GPUSpec) -> BwdLaunch:
    """flash-attn 2's backward configuration for head dim ``d`` on ``gpu`` (``block_m``
    query rows, ``block_n`` key rows per CTA).

    Raises:
        InfeasibleError: ``d`` above 256, or head dim 256 with dropout on a GPU with under
            144 KB of shared memory per CTA (the reference has no such kernel).
    """
    smem = gpu.smem_bytes_per_block
    if d <= 32:
        return BwdLaunch(128, 128, 8, (4, 4, 4), v_in_regs=not dropout or smem < 104 * KIB)
    if d <= 64:
        return (BwdLaunch(128, 128, 8, (4, 4, 4)) if smem >= 144 * KIB
                else BwdLaunch(64, 128, 8, (2, 4, 4), v_in_regs=True))
    if d <= 96:
        return BwdLaunch(64, 128, 8, (2, 4, 4),
                         v_in_regs=not (dropout and smem >= 116 * KIB))
    if d <= 128:
        return (BwdLaunch(64, 128, 8, (2, 4, 2)) if smem >= 144 * KIB
                else BwdLaunch(64, 64, 8, (4, 2, 2), v_in_regs=True))
    if d <= 160:
        return BwdLaunch(64, 64, 8, (4, 4, 4), no_double_buffer=smem < 116 * KIB)
    if d <= 192:
        return (BwdLaunch(64, 64, 8, (4, 2, 2)) if smem >= 136 * KIB
                else BwdLaunch(64, 64, 8, (4, 2, 2), v_in_regs=True, no_double_buffer=True))
    if d <= 256:
        if smem >= 176 * KIB:
            return BwdLaunch(64, 64, 8, (4, 2, 2))
        if smem >= 144 * KIB:
            return BwdLaunch(64, 64, 8, (4, 2, 2), no_double_buffer=True)
        if dropout:
            raise InfeasibleError(f"fa2 backward at head_dim {d} with dropout needs 144 KB of "
                                  f"shared memory per CTA; {gpu.id} allows {smem // KIB} KB")
        return BwdLaunch(64, 32, 8, (4, 1, 2), v_in_regs=True, no_double_buffer=True)
    raise InfeasibleError(f"head_dim {d} > 256 is not supported by fa2 (the reference "
                          "kernels take head dims up to 256)")
