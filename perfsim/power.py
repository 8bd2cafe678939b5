"""Board power and the sustained SM clock (DESIGN.md "Clock and power").

A GPU under load does not run at its datasheet clock: its power controller lowers the SM
clock until board power meets the limit (``PowerSpec.tdp_w``), and raises it to the maximum
boost clock when there is headroom. Measured on the project's H200 (NVML, 5 ms samples,
``validate/reports/h200/probes/``): a bf16 GEMM holds ~1.5 GHz at 700 W; cuDNN's FA3-class
attention 1.65–1.8 GHz; flash-attn 2 (mma.sync) 1.85–1.98 GHz. So the clock is a function of
what a kernel does, and this module computes it. Those are NVML's readings: while tensor
cores work the SMs tick at 0.889-0.916 of them (a resident ``%clock64`` / ``%globaltimer``
probe, ``validate/probe_tick_clock.py``; FMA, MUFU, copy and L2 loops tick at NVML's clock),
and the clock here is the one the SMs tick at — the clock every per-clock rate of the catalog
is counted in, and the clock the power model's energies were fitted at
(``validate/fit_power.py --tick``).

Power while a call runs for ``T(f)`` seconds at SM clock ``f`` (``PowerSpec``)::

    P(f) = static_w + (E_SM · (f / f_ref)^voltage_exponent + E_HBM) / T(f)

``E_SM`` is the energy of the SM-side work at the reference clock (tensor FLOPs by
instruction family and input width, FP32 FLOPs, MUFU ops, shared-memory bytes), ``E_HBM`` of
the HBM bytes and of the bytes L2 serves (``PowerSpec.l2_pj_per_byte``: a tile loop re-reading
K/V from L2 pays for it): ``validate/fit_power.py --l2`` fits it from the H200's
microbenchmarks (an L2-resident read walk; the GEMM's energy less its L2 and HBM bytes), and
the H200 and the GH100 parts carry that split (``validate/README.md``, "Energy per byte from
L2"); the other catalog GPUs set it to 0 and keep tensor energies derived from a GEMM with
its own L2 traffic in them.
A call has one clock: a ``fwd_bwd`` call's forward and backward share the clock where the
energy of both over their total time meets the limit. The H200's controller settles over
a fraction of a second (a bf16 GEMM ran 700 TFLOP/s in its first 250-ms window against 651
steady, ``validate/reports/h200/probes/clocks-fa1.json``), far longer than a phase of a
millisecond-scale call repeated in a training loop, so it sees their average power
(ASSUMED for phases of tens of milliseconds or more, where each could settle at its own
clock). A forward and a backward predicted
apart, each at its own clock, can therefore sum to more than their ``fwd_bwd`` call.
``P`` grows with ``f`` (more energy per operation, less time), so the
sustained clock — where ``P(f) = tdp_w`` — is found by bisection between
``PowerSpec.min_clock_hz`` and the call's clock ceiling; a call that stays under the limit
at its ceiling runs there. Works elementwise on numpy arrays (sweeps).

**The clock ceiling of tensor-core work** (:func:`clock_ceiling`). A call whose kernels use
the tensor cores ticks at most at ``GPUSpec.clock_hz``, the clock the vendor's tensor peak is
quoted at (H100/H200: 1830 MHz for 989 TFLOP/s; XLA's device descriptions list a separate
"matrix unit" clock of 1.83 GHz for the H100 and B200), not at the 1980 MHz maximum boost
clock. Measured on the project's H200 with hardware cycle counters (Nsight Compute,
``gpc__cycles_elapsed`` over ``gpu__time_duration``, each kernel launched alone, so no power
limit applied; ``validate/reports/h200/probes/ncu/summary.json``): SDPA flash forward and
backward kernels (mma.sync) ticked at 1.77-1.80 GHz, cuDNN's WGMMA backward 1.78 GHz and its
forward 1.67 GHz, while PyTorch's elementwise kernels in the same runs ticked at
1.95-1.97 GHz. The register-only ``mma.sync`` loop of ``hardware/probes`` (no attention)
implies 1.79 GHz from its ``clock64()`` cycles and CUDA-event time. NVML's reported SM clock
does not show this: it read 1.85-1.98 GHz during the same SDPA flash kernels. Every measured
kernel that runs MMAs ticked at or under ``clock_hz`` however busy its tensor pipes were —
cuDNN's decode kernel, 12 % busy, at 1.75 GHz — and kernels without them (elementwise, copies,
split-KV combines) at ``max_clock_hz``. So the ceiling is a property of what a call runs: any
tensor-core work (:func:`clock_ceiling`). Kernels with no tensor-core work (FP32 matmuls,
elementwise, softmax) keep ``max_clock_hz``. On GPUs whose tensor peak is quoted at the
maximum clock (A100, RTX 3090/4090) the ceiling changes nothing. The H100 SXM5 shows the same
ceiling (Nsight Compute on a lent H100, 2026-12-06, ``validate/reports/h100/probes/ncu/
summary-clocks.json``: its attention kernels with tensor-core work ticked at 1.71-1.84 GHz,
median 1.80, alone and under the power limit, its elementwise kernels at 1.90-2.05); on the
other GPUs it is ASSUMED to act as measured on these two.

Length: the energy of a call, the clock ceiling and the clock search (its scalar form and its
array form, whose bisection reads tabulated powers of the clock) are one model of the
sustained clock; split, each part would only serve the others.
"""

from __future__ import annotations

import numpy as np

from perfsim.gpu import TENSOR_ENERGY_SCALE, GPUSpec
from perfsim.kernel import KernelCost
from perfsim.mathops import asarray, minimum, shortcut_none, take

PICO = 1e-12
#: Energy of one ALU-pipe lane instruction in FP32 FLOP slots: ASSUMED that of one FMA-pipe
#: lane instruction (2 slots at ``fp32_pj_per_flop``); no ALU-only microbenchmark was run.
ALU_SLOTS = 2
#: Relative tolerance of "at the power limit": a call's modelled power within 0.2 % of
#: ``tdp_w`` is at it (the clock search stops within 0.1 % of the clock); above
#: ``tdp_w · (1 + LIMIT_TOLERANCE)`` it is over the limit even at the floor clock.
LIMIT_TOLERANCE = 0.002
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
#: operands against (690 − 124) / 651 = 0.87 pJ with random ones
#: (validate/reports/h200/probes/clocks-fa1.json): 0.42.
#: Measured on the H200 only and ASSUMED for every GPU (a property of zero operands in the
#: multipliers, not of one chip); a per-GPU value belongs in ``PowerSpec`` once measured.
PADDING_ENERGY_FRACTION = 0.42


def call_energy_j(gpu: GPUSpec, costs: list[KernelCost]):
    """``(E_SM, E_HBM)`` in joules: the SM-side energy at ``PowerSpec.reference_clock_hz``
    (executed work, whole tiles included — tensor FLOPs on zero padding at
    :data:`PADDING_ENERGY_FRACTION` of the energy) and the memory-side energy of all ``costs``
    (HBM bytes, the bytes L2 served, ``KernelCost.l2_hit_bytes``, and register-spill traffic,
    ``KernelCost.local_load_bytes``), which does not scale with the SM clock: the sums of
    :func:`energy_terms_pj`."""
    e_sm = e_hbm = 0.0
    for cost in costs:
        t = energy_terms_pj(gpu, cost)
        e_sm = e_sm + PICO * (t["tensor"] + t["fp32"] + t["mufu"] + t["smem"])
        e_hbm = e_hbm + PICO * (t["hbm"] + t["l2"] + t["spill"])
    # numpy float scalars (from np.maximum) as Python floats: the same doubles, and the clock
    # search's power_w then runs on floats
    return _float(e_sm), _float(e_hbm)


#: The terms of :func:`energy_terms_pj`: SM-side (scaled with the SM clock), then memory-side.
SM_TERMS, MEMORY_TERMS = ("tensor", "fp32", "mufu", "smem"), ("hbm", "l2", "spill")


def energy_terms_pj(gpu: GPUSpec, cost: KernelCost) -> dict:
    """One kernel's energy by term, in pJ (numbers, or arrays in sweeps): ``tensor`` (its
    instruction family's energy per FLOP, padding at :data:`PADDING_ENERGY_FRACTION`),
    ``fp32`` (FMA-pipe FLOP slots and ALU-pipe instructions, :data:`ALU_SLOTS` slots each),
    ``mufu``, ``smem`` — at ``PowerSpec.reference_clock_hz`` — and ``hbm``, ``l2`` and
    ``spill`` (bytes, not scaled with the clock: a spilled byte's reload and store cross the
    L1 and L2, ``PowerSpec.spill_pj_per_byte``)."""
    power = gpu.power
    work = cost.sm_demand()
    # (floats: a padded count beyond int64 as a Python int would overflow in numpy)
    padding = np.maximum(asarray(work["tensor"], dtype=float)
                         - asarray(cost.tensor_flops, dtype=float), 0.0)
    tensor = work["tensor"] - padding * (1 - PADDING_ENERGY_FRACTION)
    return {"tensor": tensor * tensor_energy_pj(gpu, cost),
            "fp32": (work["fp32"] + ALU_SLOTS * work.get("alu", 0)) * power.fp32_pj_per_flop,
            "mufu": work["mufu"] * power.mufu_pj_per_op,
            "smem": work["smem"] * power.smem_pj_per_byte,
            "hbm": cost.hbm_bytes * power.hbm_pj_per_byte,
            "l2": cost.l2_hit_bytes * power.l2_pj_per_byte,
            "spill": cost.local_load_bytes * power.spill_pj_per_byte}


def _float(x):
    """``x`` as a Python float if it is a numpy float64 scalar, else as it is."""
    return float(x) if type(x) is np.float64 else x


def power_w(gpu: GPUSpec, energy, seconds, clock_hz):
    """Average board power (W) of a call with ``energy = (E_SM, E_HBM)`` lasting
    ``seconds`` at SM clock ``clock_hz``."""
    power = gpu.power
    e_sm, e_hbm = energy
    if (isinstance(e_sm, float) and isinstance(e_hbm, float) and isinstance(seconds, float)
            and isinstance(clock_hz, float)):
        # one call (Python floats): the same arithmetic without numpy's per-op overhead
        scale = (clock_hz / power.reference_clock_hz) ** power.voltage_exponent
        return power.static_w + (e_sm * scale + e_hbm) / (seconds if seconds > 0 else 1.0)
    scale = (asarray(clock_hz) / power.reference_clock_hz) ** power.voltage_exponent
    busy = np.where(asarray(seconds) > 0, seconds, 1.0)
    return power.static_w + (e_sm * scale + e_hbm) / busy


def sustained_clock(gpu: GPUSpec, costs: list[KernelCost], seconds_at, max_clock_hz=None):
    """The SM clock a call settles at, and its power there.

    Args:
        gpu: a spec with a ``power`` table.
        costs: the call's kernels.
        seconds_at: ``f -> total seconds`` of the call at SM clock ``f`` (scalar or array);
            called as ``seconds_at(f, (f₀, f₀ / f))`` by the array search, the quotient
            over the ceiling ``f₀`` already computed (``KernelClock.seconds``).
        max_clock_hz: the highest clock allowed (a clock lock); default ``gpu.max_clock_hz``.

    Returns:
        ``(clock_hz, power_w)`` (floats, or arrays in sweeps): the highest allowed clock if
        the call stays under ``tdp_w`` there, else the clock where modelled power meets
        ``tdp_w`` (never below ``PowerSpec.min_clock_hz``).
    """
    power = gpu.power
    energy = call_energy_j(gpu, costs)
    hi = clock_ceiling(gpu, costs, max_clock_hz)
    seconds_hi = seconds_at(hi)
    if isinstance(hi, np.ndarray) or not isinstance(seconds_hi, float):
        # arrays (sweeps). Every element starts from one of two brackets (its ceiling is
        # ``clock_hz`` or the top clock, :func:`clock_ceiling`), so the clocks the search
        # can try at step k are among 2^k per bracket, and what a step needs of them — the
        # clock, its (f / f_ref)^γ and the ceiling over it, the linear form's scale
        # (``KernelClock.seconds``) — is tabulated once (:func:`_bisection_tables`: the same
        # doubles numpy's elementwise ``**`` and ``/`` give) instead of computed per
        # element and step. ``path`` numbers each element's bracket and decisions so far:
        # at step k, ``bracket · 2^k + decisions``, the index into both brackets' tables
        # end to end.
        low, top = _ceiling_pair(gpu, max_clock_hz)
        tables = _bracket_tables(power, low, top)
        path = 0 if low == top else np.where(asarray(hi) == low, 0, 1)
        hi_scale = take(tables["hi_scale"], path)
    else:
        hi_scale = (hi / power.reference_clock_hz) ** power.voltage_exponent
    capped = _over_limit(power, energy, seconds_hi, hi_scale)
    if type(capped) in (bool, np.bool_):  # one call: no numpy reduction, no shapes
        if not capped:
            return _out(hi, power_w(gpu, energy, seconds_hi, hi))
        # one call: the same bisection on Python floats (the array path's per-step numpy
        # overhead is most of a single prediction's clock search)
        lo_s, hi_s = min(power.min_clock_hz, hi), float(hi)
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo_s + hi_s)
            scale = (mid / power.reference_clock_hz) ** power.voltage_exponent
            if _over_limit(power, energy, seconds_at(mid), scale):
                hi_s = mid
            else:
                lo_s = mid
        return _out(lo_s, power_w(gpu, energy, seconds_at(lo_s), lo_s))
    if shortcut_none(capped):            # (the bisection would end at ``hi`` everywhere)
        return _out(hi, _power(power, energy, seconds_hi, hi_scale))
    for step in range(BISECTION_STEPS):
        mid = take(tables["mid"][step], path)
        seconds = seconds_at(mid, (hi, take(tables["ratio"][step], path)))
        over = _over_limit(power, energy, seconds, take(tables["scale"][step], path))
        path = 2 * path + np.where(over, 0, 1)
    clock = np.where(capped, take(tables["lo"][0], path), hi)
    scale = np.where(capped, take(tables["lo_scale"][0], path), hi_scale)
    return _out(clock, _power(power, energy, seconds_at(clock), scale))


def _ceiling_pair(gpu: GPUSpec, max_clock_hz=None):
    """``(ceiling with tensor-core work, ceiling without)`` (:func:`clock_ceiling`)."""
    top = gpu.max_clock_hz if max_clock_hz is None else min(max_clock_hz, gpu.max_clock_hz)
    return min(top, gpu.clock_hz), top


#: Bisection tables by (power spec, ceiling): see :func:`_bisection_tables`.
_TABLES: dict = {}


def _bisection_tables(power, ceiling: float) -> dict:
    """The clocks :func:`sustained_clock`'s bisection can try from the bracket
    ``[min(min_clock_hz, ceiling), ceiling]``: per step ``k`` a table of the ``2^k`` midpoints
    (``"mid"``; entry ``2p`` follows entry ``p`` of step ``k-1`` when its power was over the
    limit, ``2p + 1`` when not) and their ``(mid / reference_clock_hz) ** voltage_exponent``
    (``"scale"``); the final lower ends (``"lo"``, ``"lo_scale"``, one table) and the
    ceiling's scale. Computed with numpy's elementwise operations in the order the
    per-element bisection uses them, so each value is the same double."""
    key = (id(power), ceiling)
    found = _TABLES.get(key)
    if found is not None and found[0] is power:
        return found[1]
    ref, exponent = power.reference_clock_hz, power.voltage_exponent
    lo = np.array([min(power.min_clock_hz, ceiling)], dtype=float)
    hi = np.array([ceiling], dtype=float)
    mids, scales, ratios = [], [], []
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        mids.append(mid)
        scales.append((mid / ref) ** exponent)
        ratios.append(np.array([ceiling], dtype=float) / mid)
        # over the limit: [lo, mid] (entry 2p); under: [mid, hi] (entry 2p + 1)
        lo, hi = np.stack([lo, mid], axis=1).ravel(), np.stack([mid, hi], axis=1).ravel()
    tables = {"mid": mids, "scale": scales, "ratio": ratios, "lo": [lo],
              "lo_scale": [(lo / ref) ** exponent],
              "hi_scale": ((np.array([ceiling], dtype=float) / ref) ** exponent)}
    if len(_TABLES) > 256:
        _TABLES.clear()
    _TABLES[key] = (power, tables)
    return tables


def _bracket_tables(power, low: float, top: float) -> dict:
    """:func:`_bisection_tables` of the brackets under ceilings ``low`` and ``top``, each
    table of the first followed by the second's (one table where ``low == top``): indexed
    by :func:`sustained_clock`'s ``path``, one lookup per table and step."""
    first = _bisection_tables(power, low)
    if low == top:
        return first
    key = (id(power), low, top)
    found = _TABLES.get(key)
    if found is not None and found[0] is power:
        return found[1]
    second = _bisection_tables(power, top)
    tables = {name: ([np.concatenate([a, b]) for a, b in zip(first[name], second[name])]
                     if isinstance(first[name], list)
                     else np.concatenate([first[name], second[name]]))
              for name in first}
    _TABLES[key] = (power, tables)
    return tables


def _over_limit(power, energy, seconds, scale):
    """Whether a call of energy ``(E_SM, E_HBM)`` lasting ``seconds`` at a clock whose
    ``(f / f_ref)^voltage_exponent`` is ``scale`` draws more than ``tdp_w``: :func:`power_w`
    above the limit, asked as ``E_SM · scale + E_HBM > (tdp_w − static_w) · seconds`` (one
    multiplication where the power takes a division: the clock search asks it 11 times per
    call, or per row of a sweep). Numbers or arrays."""
    e_sm, e_hbm = energy
    if type(seconds) is float:
        busy = seconds if seconds > 0 else 1.0
    else:
        busy = np.where(asarray(seconds) > 0, seconds, 1.0)
    return e_sm * scale + e_hbm > (power.tdp_w - power.static_w) * busy


def _power(power, energy, seconds, scale):
    """:func:`power_w` from the clock's ``(f / f_ref)^voltage_exponent`` (arrays)."""
    e_sm, e_hbm = energy
    busy = np.where(asarray(seconds) > 0, seconds, 1.0)
    return power.static_w + (e_sm * scale + e_hbm) / busy


def uses_tensor_cores(costs: list[KernelCost]):
    """Whether a call executes tensor-core matmuls (FP32 matmuls on the FMA pipes excluded):
    a bool, or a boolean array when the counts are arrays (sweeps)."""
    work = [(c.executed or {}).get("tensor", c.tensor_flops) for c in costs
            if c.tensor_dtype != "fp32"]
    if all(type(x) in _NUMBERS for x in work):
        # one call (plain numbers): the same float64 sum, without a 0-d array per kernel
        total = 0.0
        for x in work:
            total = total + float(x)
        return total > 0
    total = 0.0
    for x in work:
        total = total + asarray(x, dtype=float)
    used = asarray(total) > 0
    return bool(used) if used.ndim == 0 else used


#: Plain number types (``predict``'s counts), summed as Python floats by the scalar paths.
_NUMBERS = (int, float, np.float64, np.int64)


def clock_ceiling(gpu: GPUSpec, costs: list[KernelCost], max_clock_hz=None):
    """The highest SM clock a call can tick at (Hz; an array in sweeps): ``max_clock_hz`` (or
    a lower lock), and at most ``gpu.clock_hz`` — the clock of the vendor's tensor peak — when
    the call runs tensor-core work (module docstring: measured on the H200, ASSUMED
    elsewhere). A property of what the call runs, not of how long it takes, so more
    bandwidth, more SMs or a shorter host floor never lower it."""
    top = gpu.max_clock_hz if max_clock_hz is None else min(max_clock_hz, gpu.max_clock_hz)
    tensor = uses_tensor_cores(costs)
    low = min(top, gpu.clock_hz)
    if isinstance(tensor, bool):
        return low if tensor else top
    return np.where(tensor, low, top)


def _out(clock, watts):
    if type(clock) in _NUMBERS and type(watts) in _NUMBERS:   # one call: as the 0-d path
        return float(clock), float(watts)
    clock, watts = asarray(clock, dtype=float), asarray(watts, dtype=float)
    if clock.ndim == 0 and watts.ndim == 0:
        return float(clock), float(watts)
    return clock, watts


def call_clock(gpu: GPUSpec, costs: list[KernelCost], params, seconds_at):
    """``(clock_hz, power_w)`` of a call under ``params.clock`` (``TimingParams``):
    ``"sustained"`` solves the power model up to the call's :func:`clock_ceiling`; a number is
    a clock lock (as ``nvidia-smi --lock-gpu-clocks``): the model solves up to that clock (and
    the tensor-clock ceiling), and the power limit may still hold the call below it;
    ``"boost"`` is the call's ceiling (``max_clock_hz``, or ``clock_hz`` for tensor-core
    work) and
    ``"datasheet"`` ``clock_hz``, both regardless of power. Without a power table the
    sustained clock is ``clock_hz`` and a lock is held up to the ceiling. ``seconds_at(f)``: the
    call's seconds at SM clock ``f``. ``power_w`` is ``None`` without a power table."""
    choice = params.clock
    if gpu.power is not None and (choice == "sustained" or not isinstance(choice, str)):
        lock = None if isinstance(choice, str) else float(choice)
        return sustained_clock(gpu, costs, seconds_at, max_clock_hz=lock)
    if isinstance(choice, str):
        clock = clock_ceiling(gpu, costs) if choice == "boost" else gpu.clock_hz
    else:     # a lock without a power table: held up to the call's ceiling (arrays in sweeps)
        clock = minimum(float(choice), clock_ceiling(gpu, costs))
    if gpu.power is None:
        return clock, None
    return _out(clock, power_w(gpu, call_energy_j(gpu, costs), seconds_at(clock), clock))
