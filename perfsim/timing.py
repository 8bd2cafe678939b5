"""Turning kernel counts into time (DESIGN.md "TimingModel").

For one kernel on one GPU:

* SM-side units (``tensor``, ``fp32``, ``mufu``, ``smem``)::

      t_unit = executed × wave_factor / (rate_per_clk_per_sm × SMs × clock_hz × efficiency)

  ``wave_factor = ⌈grid / SMs⌉ · SMs / grid`` (≥ 1) is the tail effect: with equal CTAs the
  busiest SM runs ``⌈grid/SMs⌉`` of them, so a grid of 133 CTAs on 132 SMs takes as long as
  264. A grid smaller than the GPU uses only ``grid`` SMs. ``executed`` is the demand with
  the whole tiles a CTA computes where the problem ends inside one (``KernelCost.executed``).
* HBM: ``t_hbm = bytes / (hbm_bandwidth_bytes_per_s × hbm_efficiency)``.
* Overlap: the kernel's rule groups units; units in a group add, groups overlap (max).
* Launch: ``launch_overhead_s`` per launched kernel (grid > 0).

Stated simplifications: per-CTA work is taken as uniform for the tail effect (causal grids are
ordered longest-first by the reference kernels, which keeps the busiest SM close to the
average); HBM bandwidth is reachable by any grid; occupancy limits feasibility and the number
of waves reported, not the rates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfsim.gpu import GPUSpec
from perfsim.kernel import UNITS, KernelCost
from perfsim.mathops import cdiv, maximum, where


class TimingParams(BaseModel):
    """Efficiency factors and overheads of the timing model (all named, all with defaults).

    Args:
        hbm_efficiency: fraction of the datasheet HBM bandwidth a streaming kernel reaches.
            Default 0.9: a device-to-device copy moved 4.3 TB/s on an H200 rated 4.8 TB/s
            (device KINDS.md, measured 2026-10-28 and 2026-11-04).
        tensor_efficiency: fraction of the tensor-core rate reachable; 1.0 for datasheet specs
            (the per-algorithm pipeline losses are modelled by the algorithms).
        launch_overhead_s: time added per kernel launch. Default 4 µs: the launch-to-launch
            gap of back-to-back eager PyTorch kernels is a few microseconds (an assumption;
            ``perfsim calibrate`` measures it on the GPU at hand).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    hbm_efficiency: float = Field(default=0.9, gt=0, le=1)
    tensor_efficiency: float = Field(default=1.0, gt=0, le=1)
    launch_overhead_s: float = Field(default=4e-6, ge=0)

    @classmethod
    def for_gpu(cls, gpu: GPUSpec) -> TimingParams:
        """Defaults for ``gpu``: a calibrated profile already holds measured (reachable)
        rates, so its efficiencies are 1 and its measured launch overhead is used."""
        if gpu.calibration:
            overhead = float(gpu.calibration.get("launch_overhead_s", cls().launch_overhead_s))
            return cls(hbm_efficiency=1.0, tensor_efficiency=1.0, launch_overhead_s=overhead)
        return cls()


@dataclass(frozen=True)
class KernelTiming:
    """A kernel's counts with its times (seconds) on one GPU."""

    cost: KernelCost
    unit_seconds: dict
    seconds: object
    bound: object
    waves: object
    wave_factor: object


def rates(gpu: GPUSpec, cost: KernelCost, params: TimingParams) -> dict:
    """Per-GPU rate of each unit for this kernel (per second, whole GPU)."""
    per_sm = gpu.sm_count * gpu.clock_hz
    return {
        "tensor": gpu.tensor_flops_per_clk(cost.tensor_dtype, cost.tensor_family) * per_sm
        * params.tensor_efficiency,
        "fp32": gpu.fp32_flops_per_clk_per_sm * per_sm,
        "mufu": gpu.mufu_ops_per_clk_per_sm * per_sm,
        "smem": gpu.smem_bandwidth_bytes_per_clk_per_sm * per_sm,
        "hbm": gpu.hbm_bandwidth_bytes_per_s * params.hbm_efficiency,
    }


def time_kernel(cost: KernelCost, gpu: GPUSpec, params: TimingParams) -> KernelTiming:
    """Time one kernel (works on numpy arrays of counts for sweeps)."""
    grid = cost.grid
    safe_grid = maximum(grid, 1)
    busiest = cdiv(safe_grid, gpu.sm_count)
    wave_factor = busiest * gpu.sm_count / safe_grid
    unit_rate = rates(gpu, cost, params)
    demand = {**cost.sm_demand(), "hbm": cost.hbm_bytes}
    unit_seconds = {u: demand[u] * (1 if u == "hbm" else wave_factor) / unit_rate[u]
                    for u in UNITS}
    group_seconds = [sum(unit_seconds[u] for u in group) for group in cost.overlap]
    body = group_seconds[0]
    for g in group_seconds[1:]:
        body = maximum(body, g)
    launched = where(grid > 0, 1, 0) if isinstance(grid, np.ndarray) else (1 if grid else 0)
    seconds = body + launched * params.launch_overhead_s
    bound = binding_unit(unit_seconds, cost.overlap)
    return KernelTiming(cost, unit_seconds, seconds, bound, waves=busiest, wave_factor=wave_factor)


def binding_unit(unit_seconds: dict, overlap) -> object:
    """The unit that sets the kernel's time: the largest unit of the longest group.

    For numpy inputs returns an array of unit names.
    """
    names = [max(group, key=lambda u: _scalar(unit_seconds[u])) for group in overlap]
    if any(isinstance(unit_seconds[u], np.ndarray) for u in UNITS):
        per_group = np.stack([sum(unit_seconds[u] for u in g) for g in overlap])
        per_unit = np.stack([unit_seconds[u] for u in UNITS])
        # largest unit inside the winning group
        best_group = np.argmax(per_group, axis=0)
        mask = np.zeros((len(overlap), len(UNITS)), dtype=bool)
        for gi, group in enumerate(overlap):
            for u in group:
                mask[gi, UNITS.index(u)] = True
        masked = np.where(mask[best_group].T, per_unit, -np.inf)
        return np.array(UNITS)[np.argmax(masked, axis=0)]
    totals = [sum(unit_seconds[u] for u in g) for g in overlap]
    return names[max(range(len(overlap)), key=lambda i: totals[i])]


def _scalar(x):
    return float(np.max(x)) if isinstance(x, np.ndarray) else float(x)
