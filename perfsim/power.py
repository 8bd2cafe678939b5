"""Board power and the sustained SM clock (DESIGN.md "Clock and power").

A GPU under load does not run at its datasheet clock: its power controller lowers the SM
clock until board power meets the limit (``PowerSpec.tdp_w``), and raises it to the maximum
boost clock when there is headroom. Measured on the project's H200 (NVML, 5 ms samples,
``validate/reports/h200/probes/``): a bf16 GEMM holds ~1.5 GHz at 700 W; cuDNN's FA3-class
attention 1.65–1.8 GHz; flash-attn 2 (mma.sync) 1.85–1.98 GHz. So the clock is a function of
what a kernel does, and this module computes it.

Power while a call runs for ``T(f)`` seconds at SM clock ``f`` (``PowerSpec``)::

    P(f) = static_w + (E_SM · (f / f_ref)^voltage_exponent + E_HBM) / T(f)

``E_SM`` is the energy of the SM-side work at the reference clock (tensor FLOPs by
instruction family and input width, FP32 FLOPs, MUFU ops, shared-memory bytes), ``E_HBM`` of
the HBM bytes. ``P`` grows with ``f`` (more energy per operation, less time), so the
sustained clock — where ``P(f) = tdp_w`` — is found by bisection between
``PowerSpec.min_clock_hz`` and ``GPUSpec.max_clock_hz``; a call that stays under the limit
at the maximum clock runs there. Works elementwise on numpy arrays (sweeps).
"""

from __future__ import annotations

import numpy as np

from perfsim.gpu import TENSOR_ENERGY_SCALE, GPUSpec
from perfsim.kernel import KernelCost

PICO = 1e-12
#: Bisection steps for the sustained clock: the bracket (at most ~1.5 GHz wide) shrinks to
#: under 0.1 % of the clock.
BISECTION_STEPS = 11


def tensor_energy_pj(gpu: GPUSpec, cost: KernelCost) -> float:
    """pJ per tensor FLOP of this kernel: its instruction family's 16-bit energy (the native
    family's where the family has none listed), scaled by the input width
    (``perfsim.gpu.TENSOR_ENERGY_SCALE``). A dtype without a tensor path runs on the FP32
    pipes and is charged their energy."""
    power = gpu.power
    family = cost.tensor_family or gpu.native_tensor_family
    table = (gpu.tensor_flops_per_clk_per_sm if family == gpu.native_tensor_family
             else gpu.mma_sync_flops_per_clk_per_sm)
    if cost.tensor_dtype not in table:
        return power.fp32_pj_per_flop
    per_flop = power.tensor_pj_per_flop.get(
        family, power.tensor_pj_per_flop.get(gpu.native_tensor_family, 0.0))
    return per_flop * TENSOR_ENERGY_SCALE.get(cost.tensor_dtype, 1.0)


#: Energy of a tensor FLOP on padding (the rows or columns of a whole tile past the end of
#: the problem, zero-filled by the kernels) relative to one on data: the H200's cuBLAS bf16
#: 8192^3 GEMM drew (407 W − 124 W static) / 779 TFLOP/s = 0.36 pJ per FLOP with zero
#: operands against (690 − 124) / 651 = 0.87 pJ with random ones (hardware/h200-sxm.toml,
#: ``tensor_sustained_fraction``; validate/reports/h200/probes/clocks-fa1.json): 0.42.
#: Measured on the H200 only and ASSUMED for every GPU (a property of zero operands in the
#: multipliers, not of one chip); a per-GPU value belongs in ``PowerSpec`` once measured.
PADDING_ENERGY_FRACTION = 0.42


def call_energy_j(gpu: GPUSpec, costs: list[KernelCost]):
    """``(E_SM, E_HBM)`` in joules: the SM-side energy at ``PowerSpec.reference_clock_hz``
    (executed work, whole tiles included — tensor FLOPs on zero padding at
    :data:`PADDING_ENERGY_FRACTION` of the energy) and the HBM energy of all ``costs``."""
    power = gpu.power
    e_sm = e_hbm = 0.0
    for cost in costs:
        work = cost.sm_demand()
        padding = np.maximum(work["tensor"] - cost.tensor_flops, 0)
        tensor = work["tensor"] - padding * (1 - PADDING_ENERGY_FRACTION)
        e_sm = e_sm + PICO * (tensor * tensor_energy_pj(gpu, cost)
                              + work["fp32"] * power.fp32_pj_per_flop
                              + work["mufu"] * power.mufu_pj_per_op
                              + work["smem"] * power.smem_pj_per_byte)
        e_hbm = e_hbm + PICO * cost.hbm_bytes * power.hbm_pj_per_byte
    return e_sm, e_hbm


def power_w(gpu: GPUSpec, energy, seconds, clock_hz):
    """Average board power (W) of a call with ``energy = (E_SM, E_HBM)`` lasting
    ``seconds`` at SM clock ``clock_hz``."""
    power = gpu.power
    e_sm, e_hbm = energy
    scale = (np.asarray(clock_hz) / power.reference_clock_hz) ** power.voltage_exponent
    busy = np.where(np.asarray(seconds) > 0, seconds, 1.0)
    return power.static_w + (e_sm * scale + e_hbm) / busy


def sustained_clock(gpu: GPUSpec, costs: list[KernelCost], seconds_at, max_clock_hz=None):
    """The SM clock a call settles at, and its power there.

    Args:
        gpu: a spec with a ``power`` table.
        costs: the call's kernels.
        seconds_at: ``f -> total seconds`` of the call at SM clock ``f`` (scalar or array).
        max_clock_hz: the highest clock allowed (a clock lock); default ``gpu.max_clock_hz``.

    Returns:
        ``(clock_hz, power_w)`` (floats, or arrays in sweeps): the highest allowed clock if
        the call stays under ``tdp_w`` there, else the clock where modelled power meets
        ``tdp_w`` (never below ``PowerSpec.min_clock_hz``).
    """
    power = gpu.power
    energy = call_energy_j(gpu, costs)
    hi = gpu.max_clock_hz if max_clock_hz is None else min(max_clock_hz, gpu.max_clock_hz)
    lo = min(power.min_clock_hz, hi)
    p_hi = power_w(gpu, energy, seconds_at(hi), hi)
    capped = p_hi > power.tdp_w
    if not np.any(capped):
        return _out(hi, p_hi)
    lo_f = np.full(np.shape(capped), lo, dtype=float)
    hi_f = np.full(np.shape(capped), hi, dtype=float)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo_f + hi_f)
        over = power_w(gpu, energy, seconds_at(mid), mid) > power.tdp_w
        hi_f = np.where(over, mid, hi_f)
        lo_f = np.where(over, lo_f, mid)
    clock = np.where(capped, lo_f, hi)
    return _out(clock, power_w(gpu, energy, seconds_at(clock), clock))


def _out(clock, watts):
    clock, watts = np.asarray(clock, dtype=float), np.asarray(watts, dtype=float)
    if clock.ndim == 0 and watts.ndim == 0:
        return float(clock), float(watts)
    return clock, watts


def call_clock(gpu: GPUSpec, costs: list[KernelCost], params, seconds_at):
    """``(clock_hz, power_w)`` of a call under ``params.clock`` (``TimingParams``):
    ``"sustained"`` solves the power model up to ``max_clock_hz``; a number is a clock lock
    (as ``nvidia-smi --lock-gpu-clocks``): the model solves up to that clock, and the power
    limit may still hold the call below it; ``"boost"`` is ``max_clock_hz`` and
    ``"datasheet"`` ``clock_hz``, both regardless of power. Without a power table the
    sustained clock is ``clock_hz`` and a lock is taken as held. ``seconds_at(f)``: the
    call's seconds at SM clock ``f``. ``power_w`` is ``None`` without a power table."""
    choice = params.clock
    if gpu.power is not None and (choice == "sustained" or not isinstance(choice, str)):
        lock = None if isinstance(choice, str) else float(choice)
        return sustained_clock(gpu, costs, seconds_at, max_clock_hz=lock)
    if isinstance(choice, str):
        clock = gpu.max_clock_hz if choice == "boost" else gpu.clock_hz
    else:
        clock = float(choice)
    if gpu.power is None:
        return clock, None
    return _out(clock, power_w(gpu, call_energy_j(gpu, costs), seconds_at(clock), clock))
