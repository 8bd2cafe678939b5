"""Turning kernel counts into time (DESIGN.md "TimingModel").

For one kernel on one GPU:

* SM-side units (``tensor``, ``fp32``, ``mufu``, ``smem``)::

      t_unit = executed × wave_factor / (rate_per_clk_per_sm × SMs × clock_hz × efficiency)

  ``wave_factor = ⌈grid / SMs⌉ · SMs / grid`` (≥ 1) is the tail effect: with equal CTAs the
  busiest SM runs ``⌈grid/SMs⌉`` of them, so a grid of 133 CTAs on 132 SMs takes as long as
  264. A grid smaller than the GPU uses only ``grid`` SMs. ``executed`` is the demand with
  the whole tiles a CTA computes where the problem ends inside one (``KernelCost.executed``).
* HBM: ``t_hbm = bytes / (hbm_bandwidth_bytes_per_s × hbm_efficiency)``, plus the payload of
  the kernel's fp32 reductions into L2 (``4 · KernelCost.atomics``) at
  ``GPUSpec.l2_reduction_bytes_per_s`` where the GPU has that rate (``memory_path_seconds``:
  they take turns with the HBM stream); for a kernel that
  states its loads in flight per CTA (``KernelCost.bytes_in_flight``) the rate is at most
  ``resident CTAs × bytes_in_flight / load_latency_s`` (Little's law: a small grid, as in
  decode, cannot keep enough bytes in flight to reach the peak); and never less than the
  L2's time for a TMA kernel's row segments (``KernelCost.l2_request_seconds``,
  ``GPUSpec.tma_segment_seconds``).
* Overlap: the kernel's rule groups units; units in a group add, groups overlap (max).
* Unpipelined kernels (``KernelCost.load_chain``): per SM, the resident CTAs circulate
  through a load latency (``GPUSpec.load_latency_s`` per wait; the waits of different CTAs
  overlap), the SM's load path (bytes at ``GPUSpec.cta_load_bandwidth_bytes_per_s``, one CTA's
  loads at a time) and the SM's
  compute (its units one after another, as one instruction stream issues them): a closed
  queueing network solved exactly by mean-value analysis (``unpipelined_time``); HBM bandwidth
  caps it.
* Register spills (``KernelCost.local_load_bytes``): the kernel's time computed as above
  is the compute station of the same closed network, and its spill reloads, at the SM's
  measured reload rate, the load station: one spilling instruction stream per SM adds them;
  more (resident CTAs times ``KernelCost.spill_streams``) hide one's reloads behind the
  others' work.
* Launch: ``launch_overhead_s`` per launched kernel (grid > 0).
* Edges: a tiled attention kernel's CTAs load their first tiles and store their outputs
  outside the steady-state loop; each wave of resident CTAs adds that fixed time
  (:func:`cta_edge_seconds`; once for a persistent kernel) to the SM side; HBM streams on
  for the others meanwhile, so the HBM side pays one wave's (:func:`edge_seconds`). Loads a
  CTA's warps wait for inside the loop, outside its prefetched pipeline
  (``KernelCost.serial_loads``), are paid there too (:func:`serial_load_seconds`).

Stated simplifications: per-CTA work is taken as uniform for the tail effect (causal grids are
ordered longest-first by the reference kernels, which keeps the busiest SM close to the
average); HBM bandwidth is reachable by any grid; occupancy limits feasibility and the number
of waves reported, not the rates.

Length: the one place counts become seconds — unit rates, the wave factor, overlap groups, the
closed two-station cycle and the unpipelined load chain, and the binding unit — one rule per
function; the queueing solvers themselves live in ``perfsim.queueing``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from perfsim.errors import PerfsimError
from perfsim.errors import short_repr as _short
from perfsim.frozen import fast_init
from perfsim.gpu import BYTES_PER_ELEMENT, CalibratedTiming, GPUSpec
from perfsim.kernel import UNITS, KernelCost
from perfsim.mathops import asarray, cdiv, maximum, minimum, take, where
from perfsim.queueing import closed_cycle, unpipelined_time
from perfsim.software import DEFAULT_SOFTWARE, SoftwareProfile, load_software


def _finite(value):
    """``value`` if it is a finite real number (not a bool, numpy bool or string)."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or not isinstance(value, (int, float,
                                                                                   np.number)):
        raise ValueError(f"must be a finite number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:           # an int past float's range (10**400)
        raise ValueError("must be a finite number, got an integer too large for a float") \
            from None
    if not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {value!r}")
    return number


def _allowed(name: str) -> str:
    """``"from LOW to HIGH"``: the bounds of the numeric ``TimingParams`` field ``name``
    (with the unit ``s`` for a time, ``*_s``)."""
    metadata = TimingParams.model_fields[name].metadata
    low = next(m.ge for m in metadata if hasattr(m, "ge"))
    high = next(m.le for m in metadata if hasattr(m, "le"))
    return f"from {low:g} to {high:g}{' s' if name.endswith('_s') else ''}"


def _measured_share(key: str, rate: float, bandwidth: float) -> float:
    """A calibrated profile's measured eager-kernel rate (B/s) as a share of the spec's HBM
    bandwidth: at most 1 (a what-if that lowers the bandwidth also caps the kernel; a kernel
    cannot stream faster than the memory), and at least ``MIN_FRACTION``, below which the
    number is not a measurement.

    Raises:
        perfsim.PerfsimError: the share is below ``MIN_FRACTION`` (names the key)."""
    share = rate / bandwidth
    if not share >= MIN_FRACTION:
        raise PerfsimError(f"[calibration] {key} = {rate:g} B/s is {share:.3g} of the HBM "
                           f"bandwidth ({bandwidth:g} B/s); below {MIN_FRACTION:g} it is not "
                           "a measurement (the calibrated profile's block holds B/s)")
    return min(share, 1.0)


#: ``TimingParams.for_gpu`` defaults by (spec, software profile): ``{(id, name): (spec,
#: params)}``, cleared when it reaches :data:`DEFAULTS_CACHE_SIZE` entries.
_DEFAULTS: dict = {}
DEFAULTS_CACHE_SIZE = 64

#: Largest reachable fraction of the HBM copy bandwidth an eager kernel may be given: a kernel
#: that only reads can beat a device-to-device copy (softmax's backward pair ran at 1.05x of
#: it on the H200, validate/reports/h200/probes/eager_bwd/), 1.5x is no longer a measurement.
MAX_EAGER_FRACTION = 1.5
#: Smallest fraction of a peak a measured table may hold: below 1 % it is not a measurement of
#: a working kernel but a typo (and would turn a microsecond into seconds).
MIN_FRACTION = 0.01
#: Largest time a ``TimingParams`` overhead may hold (per launch, per wave of CTAs, per call):
#: 1 s. The measured ones are microseconds (4.1 us per launch, host floors of 19-168 us per
#: call; hardware/software/*.toml); a second is thousands of times any of them, a unit mistake
#: (ms or us written as s) rather than an overhead, and larger numbers only drive predictions
#: towards overflow (1e308 s per launch was inf for two kernels).
MAX_OVERHEAD_S = 1.0


class TimingParams(BaseModel):
    """Efficiency factors and overheads of the timing model (all named, all with defaults).

    Args:
        hbm_efficiency: fraction of the datasheet HBM bandwidth a streaming kernel reaches,
            in [``MIN_FRACTION`` = 0.01, 1] as ``GPUSpec.hbm_efficiency`` (below 1 % it is a
            typo, not a memory system, and a denormal gave infinite times);
            ``None`` (default): the GPU's own ``GPUSpec.hbm_efficiency`` (on the H200 a
            measured device-to-device copy, 4.17 TB/s of the 4.8 TB/s datasheet rate;
            validate/reports/h200/probes/power-microbench.json, hbm_copy).
        tensor_efficiency: a further factor on every tensor-core rate, in [0.01, 1] (as
            ``GPUSpec.tensor_sustained_fraction``; default 1.0; the GPU's
            own measured ``tensor_sustained_fraction`` is applied by :func:`rates` to its
            native instruction family, and the per-algorithm pipeline losses are modelled by
            the algorithms).
        launch_overhead_s: time added per kernel launch, from 0 to ``MAX_OVERHEAD_S`` = 1 s
            (as every overhead and host floor here: measured ones are microseconds, a second
            is a unit mistake; from the software profile,
            :mod:`perfsim.software`; ``perfsim calibrate`` measures it on the GPU at hand).
        cta_overhead_s: fixed time per wave of a tiled attention kernel's CTAs outside the
            steady-state loop (``KernelCost.tiled``), 0 to 1 s. ``None`` (default): modelled
            from the GPU's load latency, per-CTA load rate and ``cta_wave_overhead_s`` and the
            kernel's edge tiles (:func:`cta_edge_seconds`); a number replaces that model (a
            calibrated profile's fitted figure, which says how it was obtained; 0 turns it
            off).
        eager_softmax: ``((row_length, efficiency), ...)``: the fraction of the reachable HBM
            copy bandwidth ``torch.softmax`` reaches at each row length (interpolated in log2
            of the length); empty = 1. From the software profile (catalog GPUs) or a
            calibrated profile's ``eager_softmax_<L>``. With ``eager_reference`` set, the
            fractions (this one, ``eager_broadcast_fill`` and ``eager_strided_copy``) are of
            the reference GPU's copy bandwidth and are carried to the GPU at hand by SM count
            x clock (:func:`eager_sm_scale`), capped at its copy bandwidth; an override of
            them is read the same way (pass ``eager_reference=None`` for fractions of the
            GPU's own copy bandwidth).
        eager_softmax_masked: ``((row_length, ratio), ...)``: ``torch.softmax``'s rate on
            causally masked scores over its rate on unmasked ones (``KernelCost.eager_op=
            "softmax_masked"``); empty = 1.
        eager_broadcast_fill: the same for ``masked_fill_`` with a broadcast mask.
        eager_strided_copy: the same for PyTorch's strided elementwise copy (carried as the
            ceilings above: SDPA flash's backward layout copies took 99-102 µs on the H100 and
            97-99 µs on the H200, validate/reports/h100/probes/profile_calls.json).
        eager_reference: ``(copy B/s, SMs, SM clock Hz)`` of the GPU the eager ceilings were
            measured on, or None (the tables are fractions of every GPU's own copy
            bandwidth, as a calibrated profile's are). The catalog's default: the
            ``pytorch`` software profile's H200 (4.1712e12 B/s, 132, 1.98e9).
        sgemm_peak_fraction, sgemm_tile_overhead_k: the K law of cuBLAS's SIMT SGEMM (fp32
            matmuls with TF32 off, ``KernelCost.eager_op="sgemm"``): it sustains
            ``e_inf · K / (K + k0)`` of the FP32 pipes' peak for reduction length ``K``
            (software profile; 1 and 0 = the peak).
        sgemm_width: ``((N, fraction), ...)``: the share of that rate an SGEMM with an output
            N columns wide sustains (cuBLAS launches narrower, less efficient tiles for narrow
            outputs instead of padding them); linear between entries, the first entry's
            fraction below it, 1 past the last; empty = 1.
        host_floor_fwd_s, host_floor_bwd_s: host time per forward / backward call, 0 to 1 s;
            a call's phase takes at least this long (software profile).
        host_floor_fwd_unmasked_s: host time per forward call that passes no mask (no
            causal mask, no window, fixed lengths), where the software's call path differs
            (FlexAttention without a BlockMask); ``None``: ``host_floor_fwd_s``.
            :meth:`for_gpu` overrides of ``host_floor_fwd_s`` reset it unless it is given
            too; :meth:`replace` or a constructor call sets each field as given.
        host_floor_fwd_paged_extra_s: host time a forward call with a paged K/V cache adds to
            its forward floor (flash_attn.cute passes and checks a page table); reset by
            :meth:`for_gpu` overrides of ``host_floor_fwd_s`` as the unmasked floor is.
        clock: the SM clock the call runs at. ``"sustained"`` (default): where the GPU's
            power model (``GPUSpec.power``, :mod:`perfsim.power`) puts it under this call's
            load — its ceiling when the call stays under the board power limit, lower when
            it does not; the ceiling is ``max_clock_hz``, or ``clock_hz`` for a call that uses
            the tensor cores (``perfsim.power.clock_ceiling``: measured on the H200). A GPU
            without a power table runs at ``clock_hz``.
            ``"boost"``: the ceiling, power ignored (a cold GPU, short bursts of under ~0.1 s).
            ``"datasheet"``: ``clock_hz`` (the clock of the vendor's quoted peaks). A number:
            a clock lock in Hz (``nvidia-smi --lock-gpu-clocks``): the call runs at that clock
            unless the power limit holds it lower (a lock does not lift the power limit), and
            at most at the call's ceiling above (a lock above it acts as the ceiling, as the
            driver clamps a lock to the clocks the GPU supports); ``Prediction.clock_hz``
            says the clock used.

    To change fields of one, use :meth:`replace` (``perfsim.timing_for("h100-sxm5", "fa2")
    .replace(hbm_efficiency=0.8)``), which validates them as the constructor does
    (``model_copy(update=...)`` does too here: pydantic's own sets the values unchecked).

    Raises:
        perfsim.PerfsimError: one line naming the field and what is allowed — a value out of
            its range (``hbm_efficiency=2``), of the wrong type, or an unknown field name.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    hbm_efficiency: float | None = Field(default=None, ge=MIN_FRACTION, le=1)
    tensor_efficiency: float = Field(default=1.0, ge=MIN_FRACTION, le=1)
    launch_overhead_s: float = Field(default=4e-6, ge=0, le=MAX_OVERHEAD_S)
    cta_overhead_s: float | None = Field(default=None, ge=0, le=MAX_OVERHEAD_S)
    eager_softmax: tuple[tuple[float, float], ...] = ()
    eager_softmax_masked: tuple[tuple[float, float], ...] = ()
    eager_broadcast_fill: float = Field(default=1.0, ge=MIN_FRACTION, le=MAX_EAGER_FRACTION)
    eager_strided_copy: float = Field(default=1.0, ge=MIN_FRACTION, le=1)
    eager_reference: tuple[float, int, float] | None = None
    sgemm_peak_fraction: float = Field(default=1.0, ge=MIN_FRACTION, le=1)
    sgemm_tile_overhead_k: float = Field(default=0.0, ge=0, le=4096)
    sgemm_width: tuple[tuple[float, float], ...] = ()
    host_floor_fwd_s: float = Field(default=0.0, ge=0, le=MAX_OVERHEAD_S)
    host_floor_bwd_s: float = Field(default=0.0, ge=0, le=MAX_OVERHEAD_S)
    host_floor_fwd_unmasked_s: float | None = Field(default=None, ge=0, le=MAX_OVERHEAD_S)
    host_floor_fwd_paged_extra_s: float = Field(default=0.0, ge=0, le=MAX_OVERHEAD_S)
    clock: Literal["sustained", "boost", "datasheet"] | float = "sustained"

    def __init__(self, **fields):
        """Raises:
            perfsim.PerfsimError: one line naming the field and what is allowed."""
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = str(first["loc"][0]) if first["loc"] else "fields"
            msg = first["msg"].removeprefix("Value error, ")
            if where == "clock":
                given = first.get("input")
                hint = (f" (in MHz? {given:g} MHz is {given * 1e6:g} Hz)"
                        if isinstance(given, (int, float)) and 100 <= given <= 5000 else "")
                msg = ("must be 'sustained', 'boost', 'datasheet' or an SM clock in Hz "
                       f"between 1e8 and 5e9, got {_short(given)}{hint}")
            elif first["type"] in ("greater_than_equal", "less_than_equal"):
                msg = f"must be {_allowed(where)}, got {first.get('input')!r}"
            raise PerfsimError(f"TimingParams.{where}: {msg} (fields: "
                               f"{', '.join(type(self).model_fields)})") from None

    def replace(self, **changes) -> TimingParams:
        """A copy with ``changes`` set, validated again as the constructor validates them (each
        field as given: no :meth:`for_gpu` reset of the forward floors).

        Raises:
            perfsim.PerfsimError: an unknown field or a value out of its range (one line)."""
        return type(self)(**{**self.model_dump(), **changes})

    def model_copy(self, *, update=None, deep: bool = False) -> TimingParams:
        """pydantic's ``model_copy``, with ``update`` validated (:meth:`replace`): pydantic's
        sets the values unchecked, and an ``hbm_efficiency`` of -5 or 0 reached the timing
        model (negative times, ZeroDivisionError).

        Raises:
            perfsim.PerfsimError: an unknown field or a value out of its range (one line)."""
        return self.replace(**update) if update else super().model_copy(deep=deep)

    @field_validator("eager_softmax", "eager_softmax_masked", "sgemm_width", mode="before")
    @classmethod
    def _table(cls, table, info):
        """A lookup table: keys (row lengths, output widths) >= 1 and distinct, fractions in
        [MIN_FRACTION, MAX_EAGER_FRACTION] (``sgemm_width``: up to 1), both finite; returned
        sorted by key (the interpolation needs increasing keys)."""
        top = MAX_EAGER_FRACTION if info.field_name == "eager_softmax" else 1.0
        keys = set()
        if isinstance(table, (str, bytes, dict)) or not hasattr(table, "__iter__"):
            raise ValueError(f"must be a sequence of (key, fraction) pairs, got {table!r}")
        table = [tuple(entry) if hasattr(entry, "__iter__") else entry for entry in table]
        for entry in table:
            if not isinstance(entry, tuple) or len(entry) != 2:
                raise ValueError(f"entries must be (key, fraction) pairs, got {entry!r}")
            key, fraction = (_finite(x) for x in entry)
            if key < 1 or key in keys:
                raise ValueError(f"keys must be distinct numbers >= 1, got {key!r}")
            if not MIN_FRACTION <= fraction <= top:
                raise ValueError(f"fractions must be in [{MIN_FRACTION:g}, {top:g}], got "
                                 f"{fraction!r} at {key:g}")
            keys.add(key)
        return tuple(sorted((float(k), float(f)) for k, f in table))

    @field_validator("hbm_efficiency", "tensor_efficiency", "launch_overhead_s",
                     "cta_overhead_s", "eager_broadcast_fill", "eager_strided_copy",
                     "sgemm_peak_fraction", "sgemm_tile_overhead_k", "host_floor_fwd_s",
                     "host_floor_bwd_s", "host_floor_fwd_unmasked_s",
                     "host_floor_fwd_paged_extra_s", mode="before")
    @classmethod
    def _number(cls, value, info):
        if value is None and info.field_name in ("hbm_efficiency", "cta_overhead_s",
                                                 "host_floor_fwd_unmasked_s"):
            return value
        return _finite(value)

    @field_validator("eager_reference", mode="before")
    @classmethod
    def _reference(cls, value):
        """``(copy bandwidth B/s, SMs, SM clock Hz)`` of the GPU the eager tables were
        measured on, each finite and positive, or None."""
        if value is None:
            return value
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__") \
                or len(tuple(value)) != 3:
            raise ValueError("must be (copy bandwidth in B/s, SM count, SM clock in Hz) of "
                             f"the GPU the eager ceilings were measured on, or None; got "
                             f"{_short(value)}")
        bw, sms, clock = (_finite(x) for x in value)
        if not (1e9 <= bw <= 1e15 and 1 <= sms <= 4096 and sms == int(sms)
                and 1e8 <= clock <= 5e9):
            raise ValueError("must be (copy bandwidth 1e9-1e15 B/s, a whole SM count 1-4096, "
                             f"an SM clock 1e8-5e9 Hz), got {_short(value)}")
        return (float(bw), int(sms), float(clock))

    @field_validator("clock", mode="before")
    @classmethod
    def _clock_name(cls, v):
        """A clock name in any case (``"BOOST"``, as the CLI's ``--clock`` takes it)."""
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("clock")
    @classmethod
    def _clock_range(cls, v):
        if not isinstance(v, str) and not 1e8 <= v <= 5e9:
            raise ValueError(f"clock must be 'sustained', 'boost', 'datasheet' or an SM clock "
                             f"in Hz between 1e8 and 5e9, got {v}")
        return v

    @classmethod
    def for_gpu(cls, gpu: GPUSpec, software: str | SoftwareProfile = DEFAULT_SOFTWARE,
                **overrides) -> TimingParams:
        """Defaults for ``gpu`` under a software profile (:mod:`perfsim.software`; default
        PyTorch): its launch gap, host floors and eager-kernel ceilings. A calibrated profile
        already holds measured (reachable) rates, so its efficiencies are 1, it runs at its
        reference clock, and its own measured launch overhead and eager ceilings are used.
        ``overrides`` replace any field (e.g. ``clock="boost"``). ``perfsim.timing_for(gpu,
        algorithm, ...)`` picks the software profile ``perfsim.predict`` would for an
        algorithm."""
        if not isinstance(gpu, GPUSpec):
            raise PerfsimError(f"TimingParams.for_gpu needs a GPUSpec (perfsim.load_gpu(...)), "
                               f"got {type(gpu).__name__}; perfsim.timing_for(gpu_id, "
                               "algorithm) takes an id or path")
        if overrides or not isinstance(software, str):
            return cls._for_gpu(gpu, software, **overrides)
        # the defaults of one (frozen) spec under one profile never change: built once (the
        # key holds the spec itself, so an id is never reused while its entry lives)
        key = (id(gpu), software)
        hit = _DEFAULTS.get(key)
        if hit is None or hit[0] is not gpu:
            if len(_DEFAULTS) >= DEFAULTS_CACHE_SIZE:
                _DEFAULTS.clear()
            hit = _DEFAULTS[key] = (gpu, cls._for_gpu(gpu, software))
        return hit[1]

    @classmethod
    def _for_gpu(cls, gpu: GPUSpec, software: str | SoftwareProfile = DEFAULT_SOFTWARE,
                 **overrides) -> TimingParams:
        """:meth:`for_gpu` without the cache."""
        sw = software if isinstance(software, SoftwareProfile) else load_software(software)
        base = {"launch_overhead_s": sw.launch_overhead_s,
                "host_floor_fwd_s": sw.host_floor_fwd_s,
                "host_floor_bwd_s": sw.host_floor_bwd_s,
                "host_floor_fwd_unmasked_s": sw.host_floor_fwd_unmasked_s,
                "host_floor_fwd_paged_extra_s": sw.host_floor_fwd_paged_extra_s,
                "eager_softmax": sw.table("eager_softmax"),
                "eager_softmax_masked": sw.table("eager_softmax_masked"),
                "eager_broadcast_fill": sw.eager_broadcast_fill,
                "eager_strided_copy": sw.strided_copy,
                "sgemm_peak_fraction": sw.sgemm_peak_fraction,
                "sgemm_tile_overhead_k": sw.sgemm_tile_overhead_k,
                "sgemm_width": sw.table("sgemm_width")}
        if sw.eager_reference_copy_bytes_per_s is not None and not gpu.calibration:
            # the ceilings are SM-side rates measured on this GPU model: carried to the GPU at
            # hand by SM count x clock where they are used (eager_sm_scale)
            base["eager_reference"] = (sw.eager_reference_copy_bytes_per_s,
                                       sw.eager_reference_sm_count,
                                       sw.eager_reference_clock_hz)
        if gpu.calibration:
            cal = CalibratedTiming.of(gpu.calibration)
            bw = gpu.hbm_bandwidth_bytes_per_s
            base.update(hbm_efficiency=1.0, tensor_efficiency=1.0, clock="datasheet",
                        launch_overhead_s=(sw.launch_overhead_s if cal.launch_overhead_s is None
                                           else cal.launch_overhead_s),
                        cta_overhead_s=cal.cta_overhead_s,
                        eager_softmax=tuple((float(n), _measured_share(f"eager_softmax_{n}",
                                                                       rate, bw))
                                            for n, rate in cal.eager_softmax),
                        eager_broadcast_fill=(1.0 if cal.eager_broadcast_fill is None
                                              else _measured_share("eager_broadcast_fill",
                                                                   cal.eager_broadcast_fill,
                                                                   bw)))
        if "host_floor_fwd_s" in overrides and "host_floor_fwd_unmasked_s" not in overrides:
            # a forward floor set by hand (0 for kernel time alone) holds for every forward
            base["host_floor_fwd_unmasked_s"] = None
        if "host_floor_fwd_s" in overrides and "host_floor_fwd_paged_extra_s" not in overrides:
            base["host_floor_fwd_paged_extra_s"] = 0.0
        base.update(overrides)
        return cls(**base)

    def host_floor(self, phase: str, masked: bool, paged: bool = False) -> float:
        """Host seconds per call of ``phase`` (``"fwd"`` or ``"bwd"``): the forward floor of
        attention without a mask (``masked`` false) is ``host_floor_fwd_unmasked_s`` when
        that is set; a forward through a paged K/V cache (``paged``) adds
        ``host_floor_fwd_paged_extra_s``.

        Raises:
            perfsim.PerfsimError: ``phase`` is neither ``"fwd"`` nor ``"bwd"`` (a
                ``fwd_bwd`` call pays both floors, one per phase)."""
        if phase not in ("fwd", "bwd"):
            raise PerfsimError(f"TimingParams.host_floor: phase must be 'fwd' or 'bwd' (a "
                               f"fwd_bwd call pays one floor per phase), got {phase!r}")
        if phase == "bwd":
            return self.host_floor_bwd_s
        extra = self.host_floor_fwd_paged_extra_s if paged else 0.0
        if not masked and self.host_floor_fwd_unmasked_s is not None:
            return self.host_floor_fwd_unmasked_s + extra
        return self.host_floor_fwd_s + extra

    def eager_efficiency(self, cost: KernelCost, gpu: GPUSpec | None = None):
        """Reachable fraction of ``gpu``'s HBM copy bandwidth for an eager kernel (1 when not
        measured). With :attr:`eager_reference` set and ``gpu`` given, the softmax and
        broadcast-fill ceilings are SM-side rates carried from the reference GPU
        (:func:`eager_sm_scale`), each capped at the copy bandwidth — the causally masked
        softmax's own rate, not the unmasked cap times the mask's ratio — and so is PyTorch's
        strided copy."""
        if cost.eager_op in ("softmax", "softmax_masked"):
            share = 1.0
            if self.eager_softmax:
                log_lengths, effs = _log2_table(self.eager_softmax)
                share = np.interp(np.log2(cost.row_length), log_lengths, effs)
            if cost.eager_op == "softmax_masked" and self.eager_softmax_masked:
                log_lengths, ratios = _log2_table(self.eager_softmax_masked)
                share = share * np.interp(np.log2(cost.row_length), log_lengths, ratios)
            return self._carried(share, gpu)
        if cost.eager_op == "broadcast_fill":
            return self._carried(self.eager_broadcast_fill, gpu)
        if cost.eager_op == "strided_copy":
            return self._carried(self.eager_strided_copy, gpu)
        return 1.0

    def copy_bandwidth(self, gpu: GPUSpec):
        """``gpu``'s reachable HBM copy bandwidth under this timing (B/s): its datasheet rate
        times ``hbm_efficiency`` (this timing's, else the GPU's)."""
        eff = gpu.hbm_efficiency if self.hbm_efficiency is None else self.hbm_efficiency
        return gpu.hbm_bandwidth_bytes_per_s * eff

    def _carried(self, share, gpu):
        """``share`` (a fraction of the reference GPU's copy bandwidth) on ``gpu``."""
        if gpu is None or self.eager_reference is None:
            return share
        scale = eager_sm_scale(gpu, self)
        if not isinstance(scale, np.ndarray) and scale == 1.0:
            return share
        return _sm_side_share(share, scale)

    def sgemm_efficiency(self, k, n=None):
        """Share of the FP32 pipes' peak an SGEMM of reduction length ``k`` (and output width
        ``n``, if given) sustains: the K law times the width table (arrays in sweeps)."""
        law = self.sgemm_peak_fraction * k / (k + self.sgemm_tile_overhead_k)
        if n is None or not self.sgemm_width:
            return law
        widths, fractions = zip(*self.sgemm_width)
        return law * np.interp(n, widths, fractions, right=1.0)


def eager_sm_scale(gpu: GPUSpec, params: TimingParams) -> float:
    """Factor from the eager ceilings of ``params`` (``eager_softmax``,
    ``eager_broadcast_fill``, ``eager_strided_copy``: fractions of the copy bandwidth of the
    GPU they were measured on, ``params.eager_reference``) to the same kernels' fractions of
    ``gpu``'s copy bandwidth; 1 when ``params`` names no reference (a calibrated profile: its
    own GPU's; its strided copy, which ``calibrate`` does not measure, then stays the
    software profile's share of the calibrated GPU's own bandwidth).

    The cap at the copy bandwidth is an extrapolation where the carried rate exceeds it (the
    RTX 3090/4090/5090, L40S, A10G: SDPA flash's layout copies and pads and the eager softmax
    there run 17-37 % shorter than under the former bandwidth rule): no GPU where it binds was
    measured.

    The ceilings are SM-side rates, not shares of the memory: measured with the same
    microbenchmark (``validate/eager_ceilings.py``) on the H100 SXM5 (2.97e12 B/s copy) and the
    H200 (4.15e12 B/s), which have the same 132 SMs at the same 1980 MHz, ``torch.softmax``
    ran at 0.88-1.00 of the H200's bytes per second at every row length from 128 to 16384
    (median 0.98) and ``masked_fill_`` with a broadcast mask at 0.93, while the copy ran at
    0.715 and softmax's backward, which the model keeps bandwidth-bound, at 0.70-0.76
    (``validate/reports/h100/probes/eager_bwd/eager_ceilings.json``). So the rate carries to
    another GPU by SM count x clock: ``rate = fraction x reference copy bandwidth x (SMs x
    clock) / (reference SMs x reference clock)``, as a fraction of ``gpu``'s reachable copy
    bandwidth (``hbm_bandwidth_bytes_per_s x hbm_efficiency``, ``params.hbm_efficiency`` if
    set). The clock: a fixed lock (``params.clock`` in Hz, at most ``max_clock_hz``) or the
    datasheet ``clock_hz`` when the timing asks for it, else ``max_clock_hz`` (eager kernels
    carry no tensor-core work; the H100 and H200 ran SDPA math's calls at 1980 MHz).
    ASSUMED: the rate scales with the clock and the SM count (the two GPUs measured share both,
    so they show only that it does not follow the bandwidth; a kernel bound by bytes in flight
    over latency would follow the SMs but not the clock), and an SM of another architecture
    sustains the H100/H200's bytes per clock (not measured). :func:`_sm_side_share` caps the
    result at the copy bandwidth."""
    ref = params.eager_reference
    if ref is None:
        return 1.0
    ref_bw, ref_sms, ref_clock = ref
    clock = params.clock
    if clock == "datasheet":
        clock = gpu.clock_hz
    elif isinstance(clock, str):
        clock = gpu.max_clock_hz
    else:
        clock = minimum(clock, gpu.max_clock_hz)
    scale = (ref_bw / params.copy_bandwidth(gpu)
             * (gpu.sm_count * clock) / (ref_sms * ref_clock))
    # the reference GPU itself: exactly its own fractions, not a rounding away from them
    # (GPU fields are arrays in a sweep over what-if hardware)
    if isinstance(scale, np.ndarray):
        return np.where(np.abs(scale - 1.0) < 1e-9, 1.0, scale)
    return 1.0 if abs(scale - 1.0) < 1e-9 else scale


def _sm_side_share(fraction: float, scale: float) -> float:
    """A measured eager fraction carried by :func:`eager_sm_scale`'s ``scale``: no faster
    than the copy bandwidth (a kernel that reads and writes every byte streams no faster than
    a copy) unless the table itself says so, and at least ``MIN_FRACTION``."""
    return maximum(MIN_FRACTION, minimum(fraction * scale, maximum(fraction, 1.0)))


def _log2_table(table: tuple) -> tuple:
    """``(log2 of the keys, fractions)`` as numpy arrays of a ``TimingParams`` row-length
    table (interpolated in log2 of the length), kept per table in :data:`_LOG2_TABLES` (the
    tables are tuples on a frozen model; the key holds the table, so its id is not reused)."""
    hit = _LOG2_TABLES.get(id(table))
    if hit is not None and hit[0] is table:
        return hit[1]
    lengths, fractions = zip(*table)
    arrays = (np.log2(lengths), asarray(fractions, dtype=float))
    if len(_LOG2_TABLES) >= 64:
        _LOG2_TABLES.clear()
    _LOG2_TABLES[id(table)] = (table, arrays)
    return arrays


#: :func:`_log2_table` by table: ``{id(table): (table, arrays)}``, cleared at 64 entries.
_LOG2_TABLES: dict = {}


@fast_init
@dataclass(frozen=True)
class KernelTiming:
    """A kernel's counts with its times (seconds) on one GPU."""

    cost: KernelCost
    unit_seconds: dict
    seconds: object
    bound: object
    waves: object
    wave_factor: object
    load_chain: dict | None = None


def rates(gpu: GPUSpec, cost: KernelCost, params: TimingParams, clock_hz=None) -> dict:
    """Per-GPU rate of each unit for this kernel (per second, whole GPU) at SM clock
    ``clock_hz`` (default ``gpu.clock_hz``; a numpy array in sweeps). The tensor rate is
    the kernel's: the GPU's times ``KernelCost.tensor_issue_share``."""
    return _issue_scaled(_rates_at(_RateFactors.of(gpu, cost, params),
                                   gpu.sm_clocks_per_s(clock_hz)), cost)


def _issue_scaled(rate: dict, cost: KernelCost) -> dict:
    """``rate`` with its tensor rate times ``cost.tensor_issue_share`` (the same dict when the
    share is a plain 1, as for every kernel but one-CTA Triton WGMMA ones)."""
    share = cost.tensor_issue_share
    if type(share) in (int, float) and share == 1:
        return rate
    return {**rate, "tensor": rate["tensor"] * share}


@dataclass(frozen=True)
class _RateFactors:
    """The clock-free factors of :func:`rates` for one kernel: its per-SM-clock rates (and
    the tensor rate's efficiencies) and its HBM rate, which does not depend on the clock."""

    tensor: object
    tensor_efficiency: float
    sustained: float
    fp32: object
    alu: object
    issue: object
    mufu: object
    smem: object
    hbm: object

    @classmethod
    def of(cls, gpu: GPUSpec, cost: KernelCost, params: TimingParams) -> _RateFactors:
        """The factors for ``cost``'s tensor dtype and instruction family on ``gpu`` under
        ``params``, kept per (spec, params, dtype, family) in :data:`_RATE_FACTORS` (all
        frozen; the key holds the spec and params themselves, so an id is never reused
        while its entry lives)."""
        key = (id(gpu), id(params), cost.tensor_dtype, cost.tensor_family)
        hit = _RATE_FACTORS.get(key)
        if hit is not None and hit[0] is gpu and hit[1] is params:
            return hit[2]
        factors = cls._build(gpu, cost, params)
        if len(_RATE_FACTORS) >= RATE_FACTORS_CACHE_SIZE:
            _RATE_FACTORS.clear()
        _RATE_FACTORS[key] = (gpu, params, factors)
        return factors

    @classmethod
    def _build(cls, gpu: GPUSpec, cost: KernelCost, params: TimingParams) -> _RateFactors:
        # the measured GEMM efficiency scales the native family's (datasheet) tensor rates; a
        # non-native family's table (mma.sync on Hopper) is its own measured rate, and a
        # dtype without a tensor path runs on the FP32 pipes
        sustained = (gpu.tensor_sustained_fraction
                     if cost.tensor_family in (None, gpu.native_tensor_family)
                     and cost.tensor_dtype in gpu.tensor_flops_per_clk_per_sm else 1.0)
        return cls(
            tensor=gpu.tensor_flops_per_clk(cost.tensor_dtype, cost.tensor_family),
            tensor_efficiency=params.tensor_efficiency, sustained=sustained,
            fp32=gpu.fp32_flops_per_clk_per_sm, alu=gpu.alu_ops_per_clk_per_sm,
            issue=gpu.warp_schedulers_per_sm * WARP_SIZE, mufu=gpu.mufu_ops_per_clk_per_sm,
            smem=gpu.smem_bandwidth_bytes_per_clk_per_sm,
            hbm=gpu.hbm_bandwidth_bytes_per_s * (gpu.hbm_efficiency if params.hbm_efficiency
                                                  is None else params.hbm_efficiency))


#: :meth:`_RateFactors.of` by ``(id(spec), id(params), tensor dtype, tensor family)``:
#: ``{key: (spec, params, factors)}``, cleared when it reaches
#: :data:`RATE_FACTORS_CACHE_SIZE` entries.
_RATE_FACTORS: dict = {}
RATE_FACTORS_CACHE_SIZE = 256


def _rates_at(f: _RateFactors, sm_clocks) -> dict:
    """:func:`rates` from its clock-free factors and ``GPUSpec.sm_clocks_per_s``."""
    return {
        "tensor": f.tensor * sm_clocks * f.tensor_efficiency * f.sustained,
        "fp32": f.fp32 * sm_clocks,
        "alu": f.alu * sm_clocks,
        "issue": f.issue * sm_clocks,
        "mufu": f.mufu * sm_clocks,
        "smem": f.smem * sm_clocks,
        "hbm": f.hbm,
    }


#: Threads per warp: one warp instruction is this many lane instructions.
WARP_SIZE = 32


def cuda_core_seconds(fp32_slots, alu_ops, rate: dict, in_turn: bool = False):
    """Seconds the CUDA-core pipes need for ``fp32_slots`` FMA-pipe FLOP slots (2 per lane
    instruction, ``KernelCost.fp32_flops``) and ``alu_ops`` ALU-pipe lane instructions at the
    ``rate``s of :func:`rates`: the busiest of the FMA pipe, the ALU pipe (half its width on
    the catalog GPUs) and the issue port both are fed through (one warp instruction per
    clock per scheduler). The softmax's FMA and ALU instructions work on independent score
    elements, so the two pipes overlap; what one warp issues to both still passes one port.
    Measured on the H200 (Nsight Compute, ``validate/reports/h200/probes/ncu``): SDPA flash's
    forward issues per score element 3 + d_v/B_c FMA-pipe instructions (FMUL scale, FADD
    row max, FADD row sum, FMUL rescale of O) and 1.5 ALU-pipe ones (FMNMX, half an F2FP),
    plus 2 and 1 more around each exp of a build without fast math
    (``perfsim.algorithms.softmax_costs``).

    ``in_turn`` (``KernelCost.cuda_cores_in_turn``): the two pipes' times add instead — a
    kernel whose FMA and ALU instructions wait on each other: the ``mma.sync`` warps of
    flash-attn 2's kernels (SDPA flash's forward keeps its tensor, FMA and ALU pipes busy
    94-99 % of its duration in sum at head dims 32-128,
    ``validate/reports/h200/probes/ncu/summary-flash-headdims.json``) and cuDNN's sm90
    kernels with dropout. Measured on the H200 (Nsight Compute, each pipe's busy time; MUFU from its
    instruction count): cuDNN's sm90 kernels with dropout keep the tensor, FMA, ALU and MUFU
    pipes busy 102.5-103.8 % of their duration in sum (forward at d = 64 and 128, backward);
    the busier of FMA and ALU in place of their sum accounts for 77-84 % of it
    (``validate/reports/h200/probes/ncu/summary-dropout.json``). The Philox rounds of the
    draw alternate integer multiplies (FMA pipe) with XORs (ALU pipe), each on the last one's
    result (Philox4x32-10, Salmon et al., SC 2011)."""
    fma = fp32_slots / rate["fp32"]
    alu = alu_ops / rate["alu"]
    issue = (fp32_slots / 2 + alu_ops) / rate["issue"]
    if in_turn:
        return maximum(fma + alu, issue)
    return maximum(maximum(fma, alu), issue)


def time_kernel(cost: KernelCost, gpu: GPUSpec, params: TimingParams,
                clock_hz=None) -> KernelTiming:
    """Time one kernel at SM clock ``clock_hz`` (default ``gpu.clock_hz``; works on numpy
    arrays of counts and clocks for sweeps)."""
    return KernelClock(cost, gpu, params).timing(clock_hz)


def check_timing(timing) -> None:
    """Refuse a ``timing`` argument that is neither ``None`` nor a :class:`TimingParams`.

    Raises:
        perfsim.PerfsimError: naming what was given and how to build one."""
    if timing is not None and not isinstance(timing, TimingParams):
        raise PerfsimError(
            f"timing must be a perfsim.TimingParams or a dict of its fields, got "
            f"{type(timing).__name__}: e.g. timing={{'clock': 1.5e9}} (Hz), or build one with "
            "perfsim.timing_for(gpu, algorithm, **overrides), e.g. "
            "perfsim.timing_for('h100-sxm5', 'fa2', clock=1.5e9)")


def kernel_seconds(cost: KernelCost, gpu: GPUSpec, params: TimingParams, clock_hz=None):
    """``time_kernel(...).seconds`` without naming the binding unit (the power model's clock
    search times every kernel at a dozen clocks and needs only the seconds)."""
    return KernelClock(cost, gpu, params).seconds(clock_hz)


class KernelClock:
    """One kernel's timing (:func:`time_kernel`) in two stages: what does not depend on the
    SM clock — the wave factor, the demand, the load path, the HBM time, the CTA edges, the
    launch overhead — computed once here, and the rest at each clock (:meth:`at`). The power
    model's clock search times every kernel at a dozen clocks (``perfsim.predict.evaluate``
    builds one per kernel per call). The same operations in the same order as timing at one
    clock, so the same numbers (scalars, numpy arrays or sympy expressions alike).

    Results are kept per clock (:meth:`at`: every Python-float clock, and the last clock
    otherwise, by identity — an array clock of a sweep): the search ends at a clock it has
    already tried, and the call's final timing runs at that clock, so neither is computed
    twice. A ``KernelClock`` belongs to one (cost, gpu, params) and one call; it is not
    shared between calls.
    """

    __slots__ = ("cost", "gpu", "params", "safe_grid", "busiest", "wave_factor", "factors",
                 "demand", "scaled", "hbm_seconds", "ceiling", "groups", "hbm_only",
                 "gemm_scale", "lead_demand", "edges", "edge_shares", "spills", "step_waits",
                 "ring", "launch_s",
                 "same_totals", "alu", "_clock", "_result", "_totals",
                 "_by_clock", "_linear")

    def __init__(self, cost: KernelCost, gpu: GPUSpec, params: TimingParams):
        self.cost, self.gpu, self.params = cost, gpu, params
        grid = cost.grid
        self.safe_grid = safe_grid = maximum(grid, 1)
        self.busiest = busiest = cdiv(safe_grid, gpu.sm_count)
        self.wave_factor = wave_factor = (
            busiest * gpu.sm_count / safe_grid if "cta_work" not in cost.launch
            else unequal_wave_factor(cost.launch["cta_work"], gpu.sm_count))
        self.factors = factors = _RateFactors.of(gpu, cost, params)
        self.demand = demand = {**cost.sm_demand(), "hbm": cost.hbm_bytes}
        self.alu = demand.get("alu", 0)
        # each SM-side unit's demand on the busiest SM's share of the waves
        self.scaled = {u: demand[u] * wave_factor for u in UNITS if u != "hbm"}
        hbm = memory_path_seconds(cost, gpu, factors.hbm)
        if cost.bytes_in_flight is not None:
            # A CTA pulls its loads (L2 hits included) at most at the measured per-CTA rate
            # (GPUSpec.cta_load_bandwidth_bytes_per_s) and, by Little's law, at its bytes in
            # flight per load latency; a small grid (decode) cannot reach the HBM peak.
            resident = minimum(safe_grid, gpu.sm_count * maximum(cost.ctas_per_sm, 1))
            per_cta = minimum(gpu.cta_load_bandwidth_bytes_per_s,
                              cost.bytes_in_flight / gpu.load_latency_s)
            hbm = maximum(hbm, (cost.hbm_read_bytes + cost.l2_hit_bytes) / (resident * per_cta))
        if gpu.l2_load_peak_bytes_per_s is not None:
            # however many CTAs pull them, a kernel's loads come through the L2 at most at
            # its best measured read rate (GPUSpec.l2_load_peak_bytes_per_s)
            hbm = maximum(hbm, (cost.hbm_read_bytes + cost.l2_hit_bytes)
                          / gpu.l2_load_peak_bytes_per_s)
        if not (isinstance(cost.l2_request_seconds, (int, float))
                and cost.l2_request_seconds == 0):
            # the L2's time for the kernel's TMA row segments (KernelCost.l2_request_seconds)
            # and its fp32 reductions, which take turns with them (l2_request_path_seconds)
            hbm = maximum(hbm, l2_request_path_seconds(cost, gpu))
        self.ceiling = ceiling = eager_ceiling(cost, params, gpu)
        if ceiling is not None and ceiling[0] == "hbm":
            hbm = hbm / ceiling[1]
        self.hbm_seconds = hbm
        self.gemm_scale = (_gemm_scale(cost, demand["tensor"]) if cost.gemms else None)
        self.lead_demand = _lead_demand(cost)
        if cost.load_chain is not None:
            self.groups = None
            hbm_only = [False, True]
        else:
            self.groups, hbm_only = _overlap_plan(cost.overlap)
            hbm_only = list(hbm_only)
        if cost.pipeline is not None:
            hbm_only.append(False)
        self.hbm_only = hbm_only
        self.edges = edges = edge_seconds(cost, gpu, params, safe_grid)
        self.edge_shares = None if edges is None else _edge_shares(edges, hbm_only)
        # binding_unit compares the overlap groups and the pipeline's units as one more
        # group, adding the edges by its own HBM-only rule; that rule reads the groups as the
        # time does (above) unless the pipeline's units are HBM alone. Where it does, the
        # bound comes from the group totals the time computed (:meth:`timing`).
        self.same_totals = cost.load_chain is None and (
            edges is None or cost.pipeline is None
            or [u for station in cost.pipeline[0] for u in station] != ["hbm"])
        self.spills = not _no_spills(cost) and bool(gpu.spill_reload_bandwidth_bytes_per_s)
        self.step_waits = cost.step_waits is not None
        self.ring = (ring_load_terms(cost, gpu, self.scaled["tensor"])
                     if cost.ring_loads is not None and cost.pipeline is not None else None)
        launched = where(grid > 0, 1, 0) if isinstance(grid, np.ndarray) else (1 if grid else 0)
        self.launch_s = launched * params.launch_overhead_s
        self._clock = self._result = self._totals = None
        self._by_clock: dict = {}
        self._linear = None

    def at(self, clock_hz=None):
        """``(unit_seconds, seconds, load_chain parts, load_chain bound, busiest,
        wave_factor, exp_lead)`` at SM clock ``clock_hz`` (default ``gpu.clock_hz``)."""
        if type(clock_hz) is float:
            kept = self._by_clock.get(clock_hz)
            if kept is not None:
                self._result, self._totals = kept
                return kept[0]
        elif self._result is not None and clock_hz is self._clock:
            return self._result
        if self._linear and clock_hz is not None:
            return self._scaled_at(clock_hz)
        cost, gpu, wave_factor = self.cost, self.gpu, self.wave_factor
        unit_rate = _issue_scaled(_rates_at(self.factors, gpu.sm_clocks_per_s(clock_hz)), cost)
        scaled, demand = self.scaled, self.demand
        unit_seconds = {"tensor": scaled["tensor"] / unit_rate["tensor"],
                        "fp32": wave_factor * cuda_core_seconds(demand["fp32"], self.alu,
                                                                unit_rate,
                                                                cost.cuda_cores_in_turn),
                        "mufu": scaled["mufu"] / unit_rate["mufu"],
                        "smem": scaled["smem"] / unit_rate["smem"],
                        "hbm": self.hbm_seconds}
        if self.gemm_scale is not None:
            unit_seconds["tensor"] = wave_factor * (self.gemm_scale
                                                    * _gemm_total(cost, unit_rate))
        if self.ceiling is not None and self.ceiling[0] != "hbm":
            unit, share = self.ceiling
            unit_seconds[unit] = unit_seconds[unit] / share
        chain = chain_bound = None
        if self.groups is None:
            chain, chain_bound, group_seconds = _load_chain_time(cost, gpu, unit_seconds,
                                                                 self.busiest)
        else:
            # each group's weighted times summed (one entry: the same 0 + t·w as sum())
            group_seconds = [0 + unit_seconds[g[0][0]] * g[0][1] if len(g) == 1
                             else sum([unit_seconds[u] * w for u, w in g])
                             for g in self.groups]
        lead = (0.0 if self.lead_demand is None
                else _lead_at(self.lead_demand, unit_rate, wave_factor))
        if cost.pipeline is not None:
            cycle = cycle_time(unit_seconds, *cost.pipeline, exp_lead=lead)
            if self.ring is not None:
                cycle = maximum(cycle, ring_seconds(
                    ring_load_seconds(self.ring, gpu.clock_hz if clock_hz is None else clock_hz),
                    unit_seconds["tensor"]))
            group_seconds.append(cycle)
        if self.edge_shares is not None:
            group_seconds = [g + e for g, e in zip(group_seconds, self.edge_shares)]
        totals = group_seconds
        body = group_seconds[0]
        for g in group_seconds[1:]:
            body = maximum(body, g)
        if self.spills:
            chain, chain_bound, body = _spill_time(cost, gpu, unit_seconds, body, self.busiest,
                                                   self.safe_grid, self.edges, lead)
        if self.step_waits:
            chain, chain_bound, body = _step_wait_time(cost, gpu, unit_seconds, body,
                                                       self.busiest, chain, chain_bound,
                                                       self.edges, lead)
        result = (unit_seconds, body + self.launch_s, chain, chain_bound, self.busiest,
                  wave_factor, lead)
        self._clock, self._result, self._totals = clock_hz, result, totals
        if type(clock_hz) is float:
            self._by_clock[clock_hz] = (result, totals)
        return result

    def seconds(self, clock_hz=None, ratio=None):
        """The kernel's seconds at SM clock ``clock_hz`` (:meth:`at`). ``ratio``: optionally
        ``(f₀, f₀ / clock_hz)`` with the quotient already computed (the clock search's
        tables, ``perfsim.power.sustained_clock``), used where ``f₀`` is this kernel's
        reference clock (the same object).

        At a clock other than the last one timed (a Python float, or a numpy array in
        sweeps) the answer comes from :meth:`_linear_form` where the kernel has one: every
        SM-side unit's seconds are its demand over a rate proportional to the clock
        (``GPUSpec.sm_clocks_per_s``), and so is a pipeline's cycle (its stations' times all
        scale alike, so their ratio — and the queueing factor — does not move), while HBM,
        the CTA edges and the launch overhead do not depend on the clock. Each group's
        seconds are therefore ``A · f₀/f + B``, with ``A`` and ``B`` read off the full
        evaluation at a clock ``f₀`` already timed; the clock search
        (``perfsim.power.sustained_clock``, a dozen clocks per power-capped call or sweep
        chunk) evaluates that instead of the whole timing. The same numbers as :meth:`at` up
        to rounding (at most 1.2e-15 relative over the 500 cases of
        ``tests/speed_cases.py``)."""
        if type(clock_hz) is float:
            kept = self._by_clock.get(clock_hz)
            if kept is not None:
                return kept[0][1]
        elif isinstance(clock_hz, np.ndarray):
            if self._result is not None and clock_hz is self._clock:
                return self._result[1]
        else:
            return self.at(clock_hz)[1]
        linear = self._linear
        if linear is None:
            if self._result is None:            # a first clock: most calls need no other
                return self.at(clock_hz)[1]
            linear = self._linear = self._linear_form(self._clock)
        if not linear:
            return self.at(clock_hz)[1]
        reference, parts, launch_s, _at_reference, ring_parts = linear
        scale = (ratio[1] if ratio is not None and ratio[0] is reference
                 else reference / clock_hz)
        a, b = parts[0]
        body = a * scale + b
        if type(body) is float:
            for a, b in (*parts[1:], *ring_parts):
                body = max(body, a * scale + b)
        else:
            for a, b in (*parts[1:], *ring_parts):
                body = np.maximum(body, a * scale + b)
        return body + launch_s

    def _linear_form(self, clock_hz):
        """``(f₀, [(A, B) per group], launch seconds, the timing at f₀, ring parts)`` of
        :meth:`seconds` at the clock ``clock_hz`` already timed — the ring parts the two lines
        of a single-stage ring's bound (:func:`ring_seconds`), which join the cycle's group —
        or ``False`` where the seconds are not of that form or
        not floating-point numbers: a load chain (its latency term), spills (the reload
        path), a pipeline station that holds HBM, a count that is a symbol."""
        cost = self.cost
        if (self.groups is None or self.spills or self.step_waits
                or (cost.pipeline is not None
                    and any("hbm" in station for station in cost.pipeline[0]))):
            return False
        unit_seconds, seconds, *_rest, lead = self.at(clock_hz)
        if not all(_is_real(t) for t in (seconds, lead, clock_hz, self.launch_s,
                                         *unit_seconds.values())):
            return False
        sm_only = dict(unit_seconds, hbm=0.0)
        hbm = unit_seconds["hbm"]
        parts = []
        for group in self.groups:
            a = b = 0.0
            for unit, weight in group:
                if unit == "hbm":
                    b = b + hbm * weight
                else:
                    a = a + sm_only[unit] * weight
            parts.append((a, b))
        if cost.pipeline is not None:
            parts.append((cycle_time(sm_only, *cost.pipeline, exp_lead=lead), 0.0))
        ring_parts = ()
        if self.ring is not None:
            # the ring's bound joins the cycle's group (its last part) with that group's
            # edges: two lines more, K's and V's (ring_seconds), each A · f₀/f + B
            # (the loads' SM cycles scale with the clock, their seconds do not)
            k_s, k_clk, v_s, v_clk, qk = self.ring
            if not all(_is_real(x) for x in self.ring):
                return False
            tensor = sm_only["tensor"]
            edge = self.edge_shares[-1] if self.edge_shares is not None else 0.0
            ring_parts = ((tensor * qk + k_clk / clock_hz, k_s + edge),
                          (tensor * (1 - qk) + v_clk / clock_hz, v_s + edge))
        if self.edge_shares is not None:
            if not all(_is_real(e) for e in self.edge_shares):
                return False
            parts = [(a, b + e) for (a, b), e in zip(parts, self.edge_shares)]
        return clock_hz, parts, self.launch_s, (unit_seconds, lead, self._totals), ring_parts

    def _scaled_at(self, clock_hz):
        """:meth:`at` at another clock from the linear form (:meth:`seconds`): every SM-side
        unit's seconds and the exp lead scaled by ``f₀/f``, HBM's kept, each group's time
        ``A · f₀/f + B``. The clock search ends at a clock of this form, so the call's final
        timing costs no second full evaluation (in a sweep's compiled kernel, a third of its
        divisions). Elements at ``f₀`` itself (a sweep's rows under the power limit) keep
        the full evaluation's doubles, so a row's numbers do not depend on its neighbours';
        elsewhere the same numbers as :meth:`at` up to rounding (:meth:`seconds`)."""
        reference, parts, launch_s, (unit_seconds, lead, totals), ring_parts = self._linear
        scale = reference / clock_hz
        unit_seconds = {u: t if u == "hbm" else t * scale for u, t in unit_seconds.items()}
        lead = lead * scale
        scaled = [a * scale + b for a, b in parts]
        for a, b in ring_parts:             # the ring's bound, in the cycle's group (last)
            scaled[-1] = maximum(scaled[-1], a * scale + b)
        if isinstance(scaled[0], np.ndarray):
            same = clock_hz == reference
            scaled = [np.where(same, t, s) for t, s in zip(totals, scaled)]
        body = scaled[0]
        for g in scaled[1:]:
            body = maximum(body, g)
        result = (unit_seconds, body + launch_s, None, None, self.busiest, self.wave_factor,
                  lead)
        self._clock, self._result, self._totals = clock_hz, result, scaled
        if type(clock_hz) is float:
            self._by_clock[clock_hz] = (result, scaled)
        return result

    def timing(self, clock_hz=None) -> KernelTiming:
        """:func:`time_kernel` at SM clock ``clock_hz``: :meth:`at` and the binding unit."""
        unit_seconds, seconds, chain, chain_bound, busiest, wave_factor, lead = self.at(
            clock_hz)
        cost = self.cost
        ring = (self._ring_binds(unit_seconds, lead,
                                 self.gpu.clock_hz if clock_hz is None else clock_hz)
                if self.ring is not None and chain is None else None)
        if chain is not None:
            bound = chain_bound
        elif self.same_totals:          # the groups' times at this clock, from at()
            groups = (cost.overlap if cost.pipeline is None
                      else _bound_groups(cost.overlap, cost.pipeline))
            bound = _largest_entry(unit_seconds, groups, self._totals, cost.pipeline, lead,
                                   latency=ring)
        else:
            bound = binding_unit(unit_seconds, cost.overlap, cost.pipeline,
                                 edge_seconds(cost, self.gpu, self.params,
                                              maximum(cost.grid, 1)),
                                 exp_lead=lead)
            if ring is not None:
                bound = (np.where(ring, "latency", bound) if isinstance(ring, np.ndarray)
                         else ("latency" if ring else bound))
        return KernelTiming(cost, unit_seconds, seconds, bound, waves=busiest,
                            wave_factor=wave_factor, load_chain=chain)

    def _ring_binds(self, unit_seconds, lead, clock_hz):
        """Whether a single-stage ring's loads set the kernel's time at SM clock ``clock_hz``
        (arrays: elementwise): :func:`ring_seconds` above the cycle, and the cycle's group
        the longest."""
        totals, cost = self._totals, self.cost
        cycle = cycle_time(unit_seconds, *cost.pipeline, exp_lead=lead)
        ring = ring_seconds(ring_load_seconds(self.ring, clock_hz), unit_seconds["tensor"])
        longest = totals[0]
        for t in totals[1:]:
            longest = maximum(longest, t)
        binds = (ring > cycle) & (totals[-1] >= longest)
        return bool(binds) if type(binds) in (bool, np.bool_) else binds


def ring_load_terms(cost: KernelCost, gpu: GPUSpec, busiest_tensor_flops) -> tuple:
    """``(K loads' seconds, K loads' SM cycles, V loads' seconds, V loads' SM cycles, S GEMMs'
    share)`` of a kernel with a single-stage K/V ring (``KernelCost.ring_loads``) on the
    busiest SM: its steps there (the SM's share of the executed tensor FLOPs,
    ``busiest_tensor_flops / SMs``, over one step's) times one tile's load with nothing ahead
    of it. At SM clock ``f`` a side's loads take ``seconds + cycles / f``
    (:func:`ring_load_seconds`).

    The ring's CTAs read K/V tiles that the CTAs of the same head beside them have just
    loaded (Nsight Compute, cuDNN's head-dim-256 forward on an H100, 1 x 8 x 16384: 12.6 GB
    through L2, 0.37 GB from HBM), so where the GPU has the L2-hit step's fit
    (``GPUSpec.l2_load_latency_clk``, ``cta_l2_load_bytes_per_clk``) a load is
    ``l2_load_latency_clk + bytes / cta_l2_load_bytes_per_clk`` SM cycles — cycles, as
    that kernel keeps its cycles per call when the SM clock drops
    (``validate/reports/h100/probes/clock-scaling/``). Elsewhere it is the step from HBM,
    ``GPUSpec.load_latency_s + bytes / cta_load_bandwidth_bytes_per_s`` seconds (both from
    ``microbench.load_chain``: 1.59 µs per 64 KiB on the H200), a stated fallback."""
    flops_per_step, k_bytes, v_bytes, qk_share = cost.ring_loads
    steps = busiest_tensor_flops / gpu.sm_count / flops_per_step
    if gpu.l2_load_latency_clk is not None:
        latency, rate = gpu.l2_load_latency_clk, gpu.cta_l2_load_bytes_per_clk
        return (0.0, steps * (latency + k_bytes / rate), 0.0,
                steps * (latency + v_bytes / rate), qk_share)
    rate = gpu.cta_load_bandwidth_bytes_per_s
    return (steps * (gpu.load_latency_s + k_bytes / rate), 0.0,
            steps * (gpu.load_latency_s + v_bytes / rate), 0.0, qk_share)


def ring_load_seconds(terms: tuple, clock_hz) -> tuple:
    """``(K loads, V loads, S GEMMs' share)`` in seconds at SM clock ``clock_hz`` (Hz; arrays
    elementwise) from :func:`ring_load_terms`."""
    k_s, k_clk, v_s, v_clk, qk = terms
    return k_s + k_clk / clock_hz, v_s + v_clk / clock_hz, qk


def ring_seconds(ring: tuple, tensor_seconds):
    """The least time of a single-stage ring's kernel on the busiest SM (seconds; arrays
    elementwise): each K tile is loaded, then read by the S GEMMs, before the next can be
    loaded — ``K loads + the S GEMMs' tensor time`` — and each V tile likewise with the P·V
    GEMMs. ``ring``: :func:`ring_load_seconds`; ``tensor_seconds``: the kernel's tensor time
    there. Evidence: Nsight Compute on the H200 (``validate/reports/h200/probes/ncu/
    summary-dropout-spills.json``, cuDNN's forward at head dims 192 and 256, 233,472 B of
    shared memory: Q and one K and one V tile) has the tensor pipe busy for the time the
    model gives (within 1 %) but the kernel 10-11 % longer than the model's cycle at its
    clock (``perfsim.validate.per_clock``)."""
    k_side, v_side = ring_sides(ring, tensor_seconds)
    return maximum(k_side, v_side)


def ring_sides(ring: tuple, tensor_seconds) -> tuple:
    """``(K loads + the S GEMMs, V loads + the P·V GEMMs)``: the two bounds whose longer is
    :func:`ring_seconds` (seconds, on the busiest SM)."""
    load_k, load_v, qk = ring
    return load_k + tensor_seconds * qk, load_v + tensor_seconds * (1 - qk)


def unequal_wave_factor(cta_work, sm_count) -> float:
    """Wave factor of a grid whose CTAs differ in work (a variable-length batch's groups,
    ``((CTAs, work per CTA), ...)``): the busiest SM's work over the mean SM's. The busiest SM
    holds at least the mean, and for each group at least ``⌈N_≥ / SMs⌉`` CTAs as heavy as
    it, ``N_≥`` the CTAs of that group and heavier ones (list scheduling's rounds); equal
    CTAs give ``⌈grid / SMs⌉ · SMs / grid`` as for any grid. A stated estimate: the
    reference launches a ``cu_seqlens`` grid in index order, not heaviest first."""
    groups = sorted(cta_work, key=lambda g: -g[1])
    total = sum(c * w for c, w in groups)
    if not total:
        return 1.0
    busiest, heavier = total / sm_count, 0
    for ctas, work in groups:
        heavier += ctas
        busiest = max(busiest, -(-heavier // sm_count) * work)
    return busiest * sm_count / total


def _is_real(x) -> bool:
    """Whether ``x`` is a real number :meth:`KernelClock.seconds` may scale: a Python or
    numpy float or int, or a numpy array of them (not a sympy expression)."""
    if type(x) in (float, int, np.float64, np.int64):
        return True
    return isinstance(x, np.ndarray) and x.dtype.kind in "fiu"


def exp_lead_seconds(cost: KernelCost, rate: dict, wave_factor):
    """Seconds the busiest SM's softmax threads spend on the work their exps wait for
    (``KernelCost.exp_after``: the row max, a scale kept apart from the exp argument) at the
    CUDA-core ``rate``s of :func:`rates`; 0 for a kernel without a pipeline or such terms.

    Evidence (not attention timing): ``validate/probe_softmax_pipes.py`` on the H200
    (``validate/reports/h200/probes/probe_softmax_pipes.json``): one warp per scheduler (one
    consumer warpgroup) running the online softmax over a 64 x 128 accumulator tile took
    812 cycles per tile where the exps alone took 606 and the FP32/ALU work alone 445 —
    neither their sum (1051: the pipes back to back) nor the larger (606: fully overlapped);
    the exps waited for the row max (+206 cycles), and for the scale too where it is a
    separate multiply (895 cycles, +289). The rest of the FP32 work ran under the exps.
    Charged here at the pipes' throughput (128 and 192 cycles for those tiles); the rest of
    the measured wait, about 80 cycles per tile, is the reduction's dependent latency
    (shuffles across the row's quad), which is not modelled."""
    return _lead_at(_lead_demand(cost), rate, wave_factor)


def _lead_demand(cost: KernelCost):
    """``KernelCost.exp_lead_demand`` where :func:`exp_lead_seconds` charges it, else
    ``None``."""
    if cost.pipeline is None or not cost.exp_after:
        return None
    return cost.exp_lead_demand()


def _lead_at(demand, rate: dict, wave_factor):
    """:func:`exp_lead_seconds` of a :func:`_lead_demand` at the ``rate``\\ s of :func:`rates`."""
    if demand is None:
        return 0.0
    fp32, alu = demand
    return wave_factor * cuda_core_seconds(fp32, alu, rate)


def gemm_seconds(cost: KernelCost, executed_flops, rate: dict):
    """Seconds of a kernel's tensor work when its GEMMs read their operands from shared
    memory through WGMMA descriptors (``KernelCost.gemms``): each GEMM runs at the slower of
    the tensor rate and the shared-memory rate times its operand bytes per FLOP, and the
    GEMMs of one tile follow each other. The executed work (whole tiles and the causal
    tail, ``KernelCost.executed``) scales every GEMM's FLOPs alike.

    Evidence (not attention timing): ``validate/probe_wgmma_smem.py`` on the H200
    (``validate/reports/h200/probes/probe_wgmma_smem.json``): a WGMMA loop with both operands
    in shared memory runs at 2400-2480 FLOP/clk/SM with N = 32 — its operands, counted once
    per warpgroup, then arrive at 113-116 B/clk/SM, near the 128 B/clk port — and at
    3230-3850 (tensor-bound) with N = 128 or 256, whatever K, the warps and the CTAs per SM —
    rates per NVML clock; per cycle the SMs tick (about 0.9 of NVML's under tensor work,
    ``validate/probe_tick_clock.py``) the N = 32 operands arrive at 127-130 B/clk/SM, the
    128 B/clk port."""
    return _gemm_scale(cost, executed_flops) * _gemm_total(cost, rate)


def _gemm_scale(cost: KernelCost, executed_flops):
    """The executed tensor work over the GEMMs' counted FLOPs (:func:`gemm_seconds`)."""
    counted = sum(cost.terms[term] for term, _ in cost.gemms)
    return executed_flops / maximum(counted, 1e-30)


def _gemm_total(cost: KernelCost, rate: dict):
    """Seconds of the counted GEMMs, one after the other, each at the slower of the tensor
    and shared-memory rates (:func:`gemm_seconds`)."""
    total = 0.0
    for term, bytes_per_flop in cost.gemms:
        total = total + cost.terms[term] * maximum(1 / rate["tensor"],
                                                   bytes_per_flop / rate["smem"])
    return total


#: Bytes of payload one fp32 reduction (``KernelCost.atomics`` counts them) adds into L2.
REDUCTION_BYTES = BYTES_PER_ELEMENT["fp32"]


def memory_path_seconds(cost: KernelCost, gpu: GPUSpec, hbm_rate):
    """Seconds ``cost`` keeps the memory path busy: its HBM bytes at ``hbm_rate`` (bytes/s)
    plus its fp32 reductions into L2 (``KernelCost.atomics``: a backward's dQ accumulation)
    at ``GPUSpec.l2_reduction_bytes_per_s`` of payload, one after the other (no reduction
    term where the GPU has no measured rate).

    Evidence (not attention timing): ``validate/probe_l2_mix.py`` on the H200
    (``validate/reports/h200/probes/probe_l2_mix.json``) runs an HBM stream and fp32
    reductions into a 16 MiB L2-resident buffer in one Triton kernel, alone and together:
    at 8 programs per SM a copy of 2.2 GB took 577 us, 1.1 GB of reductions 301 us and
    both 887 us (their sum 878 us, not the longer part); a read stream of 1.1 GB with the
    same reductions 520 us (263 + 301 = 564); at 4 programs per SM 459 against 291 + 155
    and 263 against 136 + 155. Reductions alone run at 3.6-3.7 TB/s of payload whether
    ``atom.global.add`` or TMA bulk reductions (``validate/probe_l2.py``); SDPA flash,
    cuDNN and flash_attn.cute send their dQ that way (``REDG``, ``UTMAREDG``, ``UBLKRED``
    in Nsight Compute's opcode counts, ``validate/reports/h200/probes/ncu/summary.json``).
    Works on numbers, numpy arrays and sympy expressions."""
    return cost.hbm_bytes / hbm_rate + reduction_seconds(cost, gpu)


def reduction_seconds(cost: KernelCost, gpu: GPUSpec):
    """Seconds the L2 takes for ``cost``'s fp32 reductions (``KernelCost.atomics``, 4 bytes of
    payload each) at ``GPUSpec.l2_reduction_bytes_per_s``; 0 where the GPU has no measured
    rate. Works on numbers, numpy arrays and sympy expressions."""
    if not gpu.l2_reduction_bytes_per_s:
        return 0
    return cost.atomics * REDUCTION_BYTES / gpu.l2_reduction_bytes_per_s


def l2_request_path_seconds(cost: KernelCost, gpu: GPUSpec):
    """The L2's time for a TMA kernel's row segments (``KernelCost.l2_request_seconds``) with
    its fp32 reductions into L2 (:func:`reduction_seconds`), which take turns with them:
    ``max(R, S + share · R)`` for segments ``S`` and reductions ``R``, ``share`` =
    ``GPUSpec.l2_reduction_segment_share`` (where not measured: ``S`` alone). A floor under
    the kernel's memory path: 0 for a kernel whose ``l2_request_seconds`` is the number 0 (no
    TMA row segments); on arrays, an element without segments gets ``R`` alone, which its
    memory path (HBM bytes plus ``R``) already covers.

    Evidence (not attention timing): ``validate/probe_l2_tma_mix.py`` on the H200
    (``validate/reports/h200/probes/probe_l2_tma_mix.json``) runs TMA loads of 64 x 64 bf16
    boxes from an L2-resident tensor (fed to WGMMAs) and fp32 ``[64, 128]`` tile reductions
    into an L2-resident accumulator in one Triton kernel, alone and together, at head dims
    128, 224, 232, 240 and 256, 1-2 programs per SM and 1-2 reduced tiles per loaded tile:
    the pair took 0.79-0.97 of the sum of its parts' times and 1.06-1.45 of the longer one;
    the reductions' share
    ``(pair - loads) / reductions`` was 0.83-0.96 with TMA bulk reductions and 0.68-0.97
    with ``red.global.add`` (median of all 40 pairs 0.885: the H200's
    ``l2_reduction_segment_share``). By group the share was lower with one reduced tile per
    loaded tile (medians: bulk 0.85, ``red.global`` 0.77) than with two (0.91, 0.89); the
    FA3-class backwards (one dQ tile per Q/dO pair) lie nearer the first, so the median may
    over-charge them a little. At one program per SM the probe's loads alone ran slower than
    the segment table (16.7-20.0 ps per 128-byte segment against 13.9 and 18.9) and its
    reductions alone at 3.88-3.90 TB/s against the catalog's 3.68. Works on numbers, numpy
    arrays and sympy expressions."""
    floor = cost.l2_request_seconds
    if isinstance(floor, (int, float)) and floor == 0:
        return 0
    share = gpu.l2_reduction_segment_share
    if share is None:
        return floor
    reductions = reduction_seconds(cost, gpu)
    return maximum(reductions, floor + share * reductions)


def cta_edge_seconds(cost: KernelCost, gpu: GPUSpec, params: TimingParams):
    """Fixed time (s) one wave of a tiled kernel's CTAs spends outside its steady-state loop
    (0 for other kernels): its first loads wait ``GPUSpec.load_latency_s``, its edge tiles
    (``KernelCost.edge_bytes``: Q and the first K/V tile in, O out) pass its own load path at
    ``GPUSpec.cta_load_bandwidth_bytes_per_s``, and the rest — CTA launch and retirement,
    address and barrier set-up, the first MMA's latency — takes
    ``GPUSpec.cta_wave_overhead_s``. An unpipelined kernel (``KernelCost.load_chain``) already
    waits out its loads' latency there. A ``TimingParams.cta_overhead_s`` (a calibrated
    profile's fitted figure) replaces the whole sum.

    Evidence (not attention timing): ``validate/probe_cta_fixed.py`` on the H200
    (``validate/reports/h200/probes/probe_cta_fixed*.json``) times Triton tile loops (Q tile
    in, 1-32 K/V steps of two GEMMs from L2, O tile out) at 1-16 full waves for six tiles:
    the time per wave at zero steps is 2.66-4.79 us, and load latency plus edge bytes at the
    per-CTA load rate leaves 0.99-1.93 us (median 1.69: ``cta_wave_overhead_s``); the sum
    reproduces the six measurements within 15 %. A CTA of ``KernelCost.edge_phases`` phases
    (a dK/dV loop, then a dQ loop) pays the latency and the overhead once per phase; a given
    ``cta_overhead_s`` is the whole per-wave figure, phases included (the calibrated
    profile's was fitted that way)."""
    if not cost.tiled:
        return 0.0
    if params.cta_overhead_s is not None:
        return params.cta_overhead_s
    latency = 0.0 if cost.load_chain is not None else gpu.load_latency_s
    return (cost.edge_phases * (latency + gpu.cta_wave_overhead_s)
            + cost.edge_bytes / gpu.cta_load_bandwidth_bytes_per_s)


def serial_load_seconds(cost: KernelCost, gpu: GPUSpec):
    """Seconds one CTA (one work unit of a persistent kernel) waits inside its loop for the
    loads its warps issue outside the prefetched pipeline (``KernelCost.serial_loads``): a
    ``GPUSpec.load_latency_s`` per wait and the bytes at
    ``GPUSpec.cta_load_bandwidth_bytes_per_s`` — the unpipelined load step both constants
    were measured on (``validate/microbench.py`` load_chain). Charged per wave of resident
    CTAs (per unit, persistent) beside the edges (:func:`edge_seconds`): with one CTA per SM,
    as cuDNN's sm90 forward runs, no other CTA hides them."""
    waits, nbytes = cost.serial_loads
    return waits * gpu.load_latency_s + nbytes / gpu.cta_load_bandwidth_bytes_per_s


def edge_seconds(cost: KernelCost, gpu: GPUSpec, params: TimingParams, grid):
    """``(all waves, one wave)``: the edges of all the waves a kernel's busiest SM runs and of
    one of them (s), or ``None`` for a kernel without them. :func:`cta_edge_seconds` per wave
    of resident CTAs (the CTAs of a wave start together and finish together, so their edges
    coincide). A ``persistent`` kernel's CTAs pay them once, then for each further work unit
    (the ``grid`` counts units) only ``GPUSpec.cta_wave_overhead_s``: their producer loads
    the next unit's tiles while they finish the last, so the load latency and the edge bytes
    stay hidden, while the per-unit set-up, first MMA and epilogue do not.
    Evidence: ``validate/probe_persistent_unit.py`` (``gqa`` series,
    ``validate/reports/h200/probes/probe_persistent_unit-gqa.json``) runs cuDNN's persistent
    forward with every query head on one L2-resident K/V head, 2-16 units per SM and
    8-32 key tiles per unit: a least-squares fit of its cycles gives 2696 cycles per unit
    beyond its loop (1.6-1.9 us at the 1.45-1.8 GHz it ticked at; ``cta_wave_overhead_s``
    1.69 us), 2402 per key tile and 9145 once (the model without the per-unit term: 0, 2527
    and 8915). The SM side pays them all; HBM streams on for the CTAs already in their loops
    while others are in their edges, except at the start of the first wave and the end of the
    last, so an HBM-bound kernel pays one wave's edges (:func:`_edge_shares`)."""
    per_wave = cta_edge_seconds(cost, gpu, params)
    if isinstance(per_wave, float) and not per_wave:
        return None
    waves = cdiv(grid, gpu.sm_count * maximum(cost.ctas_per_sm, 1))
    serial = serial_load_seconds(cost, gpu)
    if cost.persistent:
        return (per_wave + (waves - 1) * persistent_unit_seconds(gpu, params, cost, per_wave)
                + waves * serial, per_wave + serial)
    return waves * (per_wave + serial), per_wave + serial


def persistent_unit_seconds(gpu: GPUSpec, params: TimingParams, cost: KernelCost = None,
                            per_wave=0.0):
    """What each work unit after the first costs a persistent kernel's CTA outside its loop
    (:func:`edge_seconds`): ``GPUSpec.cta_wave_overhead_s`` — or the whole edge
    ``per_wave`` for a kernel whose next unit's loads wait for this unit's epilogue
    (``KernelCost.unit_edges_exposed``: a persistent backward); nothing where a
    ``TimingParams.cta_overhead_s`` replaces the modelled edges (a calibrated profile's
    fitted per-wave figure, fitted with persistent kernels paying it once) or where the
    kernel's pipes stay busy through its units' edges (``KernelCost.unit_edges_hidden``:
    cuDNN's forward with its MMAs and exps in turn, ``FA3.fwd_pipes_in_turn``).

    Evidence for the exposed edges (not attention timing alone): flash-attn 3's backward
    stages its dK/dV epilogue in the shared memory of K and V, which hold one tile each
    (``TensorStorage``: single ``smem_k``, ``smem_v``; hopper/mainloop_bwd_sm90_tma_gmma_ws.hpp),
    so a unit's K/V cannot arrive before the last unit's dK/dV have left; cuDNN's persistent
    backward ASSUMED alike (closed source). Nsight Compute of cuDNN's backward main kernel
    (``validate/reports/h200/probes/ncu/summary-short-bwd.json``): at N = 256 and 384, where
    each unit is 4-6 steps, its time exceeded the model with prefetched units by 18 % (d = 64,
    31 units per SM) and 24 % (d = 192, 17 units) while its DRAM bytes matched."""
    if params.cta_overhead_s is not None or (cost is not None and cost.unit_edges_hidden):
        return 0.0
    if cost is not None and cost.unit_edges_exposed:
        return per_wave
    return gpu.cta_wave_overhead_s


def _edge_shares(edges, hbm_only) -> list:
    """What each overlap group pays of ``edges`` (:func:`edge_seconds`): all the waves' edges
    an SM-side group, one wave's an HBM-only group."""
    every, one = edges
    return [one if h else every for h in hbm_only]


def eager_ceiling(cost: KernelCost, params: TimingParams, gpu: GPUSpec | None = None):
    """``(unit, share)`` of an eager PyTorch kernel's measured ceiling — the FP32 pipes at
    the SGEMM K law (``TimingParams.sgemm_efficiency``) or HBM at its measured fraction of
    the copy bandwidth (``TimingParams.eager_efficiency``) — or ``None`` for other kernels.
    The one place both the timing and ``Prediction.term_seconds`` take it from."""
    if cost.eager_op == "sgemm":
        return "fp32", params.sgemm_efficiency(cost.row_length, cost.gemm_n)
    if cost.eager_op:
        return "hbm", params.eager_efficiency(cost, gpu)
    return None


#: The SM-side units, in the order one instruction stream issues them.
SM_UNITS = ("tensor", "fp32", "mufu", "smem")


def _load_chain_time(cost: KernelCost, gpu: GPUSpec, unit_seconds, busiest):
    """``(parts, bound, [time, HBM time])`` for an unpipelined kernel
    (``KernelCost.load_chain``).

    The busiest SM runs ``busiest`` CTAs, ``k = min(ctas_per_sm, busiest)`` at a time. Per
    CTA: ``waits × GPUSpec.load_latency_s`` of pure delay, ``bytes /
    GPUSpec.cta_load_bandwidth_bytes_per_s`` on the SM's load path and the SM units' times,
    one after another, on its compute; the SM finishes after ``busiest`` CTAs at the
    throughput of :func:`unpipelined_time`. ``parts`` holds the busiest SM's ``latency``,
    ``load`` and ``compute`` seconds (their sum is the one-CTA-per-SM time) and ``in_flight``
    (k). ``bound``: ``hbm`` when HBM bandwidth sets the time, else ``latency`` when a CTA
    spends longer waiting for its own loads (delay plus load path: not the HBM bandwidth)
    than computing, else the largest SM unit."""
    compute = group_time(unit_seconds, SM_UNITS)
    latency, load, in_flight, t, residence = _own_waits(cost.load_chain, cost, gpu, compute,
                                                        busiest)
    waiting = residence[0] + residence[1]            # latency and load path: both waits
    bound = np.where(unit_seconds["hbm"] >= t, "hbm",
                     np.where(waiting > residence[2], "latency",
                              binding_unit(unit_seconds, (SM_UNITS,))))
    parts = {"latency": latency, "load": load, "compute": compute, "in_flight": in_flight}
    return parts, (bound if bound.ndim else str(bound)), [t, unit_seconds["hbm"]]


def _no_spills(cost: KernelCost) -> bool:
    """A kernel whose counts hold no register-spill reloads (a plain zero, not an array)."""
    return isinstance(cost.local_load_bytes, (int, float)) and not cost.local_load_bytes


def _spill_time(cost: KernelCost, gpu: GPUSpec, unit_seconds, body, busiest, grid,
                edges=None, exp_lead=0.0):
    """``(parts, bound, seconds)`` of a kernel that reloads spilled registers in its main loop
    (``KernelCost.local_load_bytes``, taken as spread evenly over its ``grid`` CTAs).

    The busiest SM reloads ``busiest`` CTAs' spill bytes at
    ``GPUSpec.spill_reload_bandwidth_bytes_per_s`` — measured with one 4-warp CTA per SM
    that reloads, accumulates into and stores back its spilled accumulators each step
    (``validate/probe_spill_cost.py``), so the rate includes the reload latency such a CTA
    cannot hide. The kernel's time without spills (``body``, the busiest SM's) is the compute
    station; :func:`unpipelined_time` with the resident CTAs' spilling instruction streams
    in flight (``KernelCost.spill_streams`` per CTA) joins the two (one stream per SM: they
    add). Bound ``latency`` when the reloads take longer than the rest."""
    load = busiest * (cost.local_load_bytes / grid) / gpu.spill_reload_bandwidth_bytes_per_s
    ctas = minimum(cost.ctas_per_sm, busiest)
    in_flight = ctas * cost.spill_streams
    t, residence = unpipelined_time(0.0, load, body, in_flight)
    bound = np.where(residence[1] > residence[2], "latency",
                     binding_unit(unit_seconds, cost.overlap, cost.pipeline, edges,
                                  exp_lead=exp_lead))
    parts = {"load": load, "compute": body, "in_flight": in_flight, "spills": True,
             "ctas": ctas, "streams": cost.spill_streams}
    return parts, (bound if bound.ndim else str(bound)), t


def _step_wait_time(cost: KernelCost, gpu: GPUSpec, unit_seconds, body, busiest,
                    spill_parts=None, spill_bound=None, edges=None, exp_lead=0.0):
    """``(parts, bound, seconds)`` of a tiled kernel whose CTAs stop inside their loop for
    their own global-memory round trips (``KernelCost.step_waits``: per CTA, ``waits`` load
    latencies and ``bytes`` through its own load path — a lock, an accumulator read back,
    the fences around it).

    Per SM, the busiest SM's ``busiest`` CTAs, ``k = min(ctas_per_sm, busiest)`` at a time,
    circulate through a delay (``waits × GPUSpec.load_latency_s`` each, overlapping across
    CTAs), the SM's load path (``bytes / GPUSpec.cta_load_bandwidth_bytes_per_s``, one CTA
    at a time) and the rest of the kernel (``body``, its time without these waits, register
    spills included): :func:`perfsim.queueing.unpipelined_time`, as for an unpipelined
    kernel (``KernelCost.load_chain``) — one CTA per SM adds them; more hide one CTA's waits
    behind the others' work. Bound ``latency`` when a CTA spends longer in the waits than in
    the rest. ``parts`` holds ``step_waits`` (True), the busiest SM's ``latency``, ``load``
    and ``compute`` seconds, ``in_flight`` (k), ``waits`` per CTA and, for a kernel that also
    spills, its spill parts (``spill_parts``)."""
    latency, load, in_flight, t, residence = _own_waits(cost.step_waits, cost, gpu, body,
                                                        busiest)
    below = (spill_bound if spill_bound is not None
             else binding_unit(unit_seconds, cost.overlap, cost.pipeline, edges,
                               exp_lead=exp_lead))
    waiting, working = residence[0] + residence[1], residence[2]
    if spill_parts is not None:
        # the rest of the kernel holds its spill reloads too (_spill_time): they are waits
        # as well, so a CTA that spends longer in its round trips and reloads together than
        # in its compute is latency-bound though neither alone outlasts the rest (a fresh
        # user's review: sdpa-efficient's split backward at d = 136 read "fp32" with 71 % of
        # its time in lock waits and reloads)
        spill, body_compute = spill_parts["load"], spill_parts["compute"]
        total = spill + body_compute
        share = np.where(total > 0, spill / np.where(total > 0, total, 1.0), 0.0)
        waiting, working = waiting + working * share, working * (1 - share)
    bound = np.where(waiting > working, "latency", below)
    parts = {"step_waits": True, "latency": latency, "load": load, "compute": body,
             "in_flight": in_flight, "waits": cost.step_waits[0], "spill_parts": spill_parts}
    return parts, (bound if bound.ndim else str(bound)), t


def _own_waits(waits_bytes, cost: KernelCost, gpu: GPUSpec, compute, busiest):
    """``(latency, load, in_flight, seconds, residences)`` of the busiest SM's ``busiest``
    CTAs whose own loads stall them (``(waits, bytes)`` per CTA: ``KernelCost.load_chain``
    or ``KernelCost.step_waits``): ``waits × GPUSpec.load_latency_s`` of delay each, ``bytes``
    at ``GPUSpec.cta_load_bandwidth_bytes_per_s`` on the SM's load path, ``compute`` on the
    SM, ``min(ctas_per_sm, busiest)`` of them in flight
    (:func:`perfsim.queueing.unpipelined_time`)."""
    waits, nbytes = waits_bytes
    latency = busiest * waits * gpu.load_latency_s
    load = busiest * nbytes / gpu.cta_load_bandwidth_bytes_per_s
    in_flight = minimum(cost.ctas_per_sm, busiest)
    t, residence = unpipelined_time(latency, load, compute, in_flight)
    return latency, load, in_flight, t, residence


def cycle_time(unit_seconds: dict, stations, tiles_in_flight, serial=None, exp_lead=0.0):
    """Time of a closed two-station cycle with ``K`` tiles (or warps) in flight.

    A station's time is its slowest unit while several tiles are in flight (its units serve
    different tiles at once), or the sum of its units' times when one instruction stream
    issues them in program order: the stations ``serial`` marks (one flag per station; a
    :data:`MUFU_BESIDE` flag adds all but the MUFU, whose exps after their lead run beside the
    FP32 work: ``Σ others + max(fp32, mufu + lead)``), and
    — when ``serial`` is not given — every station after the first when ``K = 1`` (no
    ping-pong, no intra-warpgroup overlap, no warp specialisation: the FA2 rule, which the
    H200 validation of the FA2-style Triton kernel supports). Real stage times vary (bank
    conflicts, barrier waits, issue contention); perfsim models them as exponential: a closed
    cyclic queueing network of two stations and ``K`` circulating customers keeps the
    bottleneck busy a fraction ``U = (1 − ρ^K) / (1 − ρ^(K+1))`` of the time,
    ``ρ = s_fast / s_slow`` (product-form result; ``U = K/(K+1)`` at ρ = 1, and ``K = 1``
    gives ``s_slow + s_fast``: no overlap). This is a stated modelling assumption, not a
    fitted constant. ``K`` may be a numpy array (sweeps). ``exp_lead``: seconds of the work
    the exps wait for (:func:`exp_lead_seconds`); a station that overlaps its pipes and
    holds the MUFU takes at least the MUFU's time plus that lead (the rest of its FP32 work
    runs under the exps; a serial station already adds it all).

    Returns:
        ``s_slow / U`` (seconds).
    """
    times = station_times(unit_seconds, stations, tiles_in_flight, serial, exp_lead)
    return closed_cycle(times[0], times[1], tiles_in_flight)


def station_times(unit_seconds: dict, stations, tiles_in_flight, serial=None,
                  exp_lead=0.0) -> list:
    """Each station's time in :func:`cycle_time`'s cycle (seconds; arrays elementwise): its
    units' sum where one instruction stream issues them in turn (:func:`_station_adds`), else
    its slowest unit — and at least the MUFU's time plus ``exp_lead`` for an overlapping
    station that holds the MUFU."""
    times = []
    for index, station in enumerate(stations):
        adds = _station_adds(serial, index, tiles_in_flight)
        if adds and _mufu_beside(serial, index):
            t = 0.0
            for _, part in _beside_parts(unit_seconds, station, exp_lead):
                t = t + part
            times.append(t)
            continue
        t = unit_seconds[station[0]]
        for u in station[1:]:
            t = t + unit_seconds[u] if adds else maximum(t, unit_seconds[u])
        if not adds and "mufu" in station:
            t = maximum(t, unit_seconds["mufu"] + exp_lead)
        times.append(t)
    return times


#: A station flag (``KernelCost.pipeline``'s third entry): the station's units take turns
#: except the MUFU, whose exps (after their ``exp_lead``) run beside the FP32 pipes' work
#: (:func:`station_times`: ``Σ others + max(fp32, mufu + lead)``). The ``mma.sync`` warp's
#: compute station (``perfsim.algorithms.base.MMA_SYNC_SERIAL``).
MUFU_BESIDE = "mufu beside"


def _mufu_beside(serial, index) -> bool:
    """Whether station ``index`` is flagged :data:`MUFU_BESIDE`."""
    return serial is not None and serial[index] == MUFU_BESIDE


def _beside_parts(unit_seconds: dict, station, exp_lead=0.0) -> list:
    """``(unit, seconds)`` parts whose sum is a :data:`MUFU_BESIDE` station's time: each unit
    but the FP32 pipes and the MUFU alone, then the longer of those two (the MUFU with the
    exps' lead), named by the one that sets it (on arrays, elementwise: an ``fp32`` and a
    ``mufu`` part, one of them zero)."""
    parts = [(u, unit_seconds[u]) for u in station if u not in ("fp32", "mufu")]
    fp32 = unit_seconds["fp32"] if "fp32" in station else 0.0
    mufu = unit_seconds["mufu"] + exp_lead if "mufu" in station else 0.0
    if np.ndim(fp32) == 0 and np.ndim(mufu) == 0:
        try:
            parts.append(("mufu", mufu) if bool(mufu > fp32) else ("fp32", fp32))
        except TypeError:       # sympy expressions the comparison cannot decide
            parts.append(("fp32", maximum(fp32, mufu)))
        return parts
    exps = mufu > fp32                  # sweeps: elementwise, one of the two is zero
    parts += [("fp32", where(exps, 0.0, fp32)), ("mufu", where(exps, mufu, 0.0))]
    return parts


def _station_adds(serial, index, tiles_in_flight) -> bool:
    """Whether station ``index`` adds its units' times: the flag ``serial`` gives it (a
    :data:`MUFU_BESIDE` station adds all but its MUFU), or, without flags, every station
    after the first at ``K = 1``."""
    if serial is not None:
        flag = serial[index]
        if isinstance(flag, str) and flag != MUFU_BESIDE:
            raise ValueError(f"station flag {flag!r}: a bool or {MUFU_BESIDE!r}")
        return bool(flag)
    return np.ndim(tiles_in_flight) == 0 and tiles_in_flight == 1 and index > 0


def _entries(group):
    """``(unit, weight)`` pairs of an overlap group (a bare name has weight 1), as a tuple.
    Kept per group object (:data:`_ENTRIES`): the overlap rules are tuples, mostly the same
    few constants (``ROOFLINE``) on every kernel."""
    hit = _ENTRIES.get(id(group))
    if hit is not None and hit[0] is group:
        return hit[1]
    entries = tuple((e, 1.0) if isinstance(e, str) else (e[0], e[1]) for e in group)
    if isinstance(group, tuple):        # immutable: its entries never change
        if len(_ENTRIES) >= ENTRIES_CACHE_SIZE:
            _ENTRIES.clear()
        _ENTRIES[id(group)] = (group, entries)
    return entries


def _overlap_plan(overlap) -> tuple:
    """``(entries per group, HBM-only per group)`` of an overlap rule (:func:`_entries`,
    :func:`_hbm_only`), kept per rule in :data:`_PLANS` as :func:`_entries` keeps a group's
    (the rules are tuples, mostly the same few on every kernel)."""
    hit = _PLANS.get(id(overlap))
    if hit is not None and hit[0] is overlap:
        return hit[1]
    plan = (tuple(_entries(group) for group in overlap), tuple(_hbm_only(overlap)))
    if isinstance(overlap, tuple):
        if len(_PLANS) >= ENTRIES_CACHE_SIZE:
            _PLANS.clear()
        _PLANS[id(overlap)] = (overlap, plan)
    return plan


#: :func:`_entries` by overlap group: ``{id(group): (group, entries)}`` (the group itself is
#: held, so its id is never reused while the entry lives), and :func:`_overlap_plan` by
#: overlap rule the same way; each cleared when it reaches :data:`ENTRIES_CACHE_SIZE` entries.
_ENTRIES: dict = {}
_PLANS: dict = {}
ENTRIES_CACHE_SIZE = 256


def group_time(unit_seconds: dict, group):
    """Time of one overlap group: its units' (weighted) times, one after the other."""
    return sum(unit_seconds[u] * w for u, w in _entries(group))


def binding_unit(unit_seconds: dict, overlap, pipeline=None, edges=None,
                 exp_lead=0.0) -> object:
    """The unit that sets the kernel's time: the largest entry of the longest group. A
    pipeline counts as a group whose time is its cycle time; when it is the longest, the unit
    that contributes most to that cycle is named (:func:`_pipeline_unit`: with many tiles in
    flight the slower station's, with one the largest term of the serial sum). ``edges``: the
    CTA edges (:func:`edge_seconds`) that lengthen every group but an HBM-only one.

    For numpy inputs returns an array of unit names.
    """
    totals = [group_time(unit_seconds, g) for g in overlap]
    if pipeline is not None:
        overlap = _bound_groups(overlap, pipeline)
        totals.append(cycle_time(unit_seconds, *pipeline, exp_lead=exp_lead))
    if edges is not None:
        shares = _edge_shares(edges, _hbm_only(overlap))
        totals = [t + e for t, e in zip(totals, shares)]
    return _largest_entry(unit_seconds, overlap, totals, pipeline, exp_lead)


def _bound_groups(overlap, pipeline) -> tuple:
    """The groups :func:`binding_unit` compares: the overlap rule's, then the pipeline's
    units as one group."""
    return (*overlap, tuple(u for station in pipeline[0] for u in station))


def _hbm_only(groups) -> list[bool]:
    """Which groups hold HBM alone (they pay one wave's CTA edges, :func:`_edge_shares`)."""
    return [[u for u, _ in _entries(g)] == ["hbm"] for g in groups]


def _any_array(values) -> bool:
    """Whether any of ``values`` is a numpy array (a loop: no generator per call)."""
    for v in values:
        if isinstance(v, np.ndarray):
            return True
    return False


def _largest_entry(unit_seconds: dict, overlap, totals, pipeline=None, exp_lead=0.0,
                   latency=None):
    """:func:`binding_unit` from the groups' times ``totals`` (edges included): the largest
    weighted entry of the longest group (arrays: elementwise). With ``pipeline``, the last
    group is its stations' units (:func:`_bound_groups`) and names the unit that contributes
    most to the cycle (:func:`_pipeline_unit`). ``latency``: where true, ``"latency"``
    instead (a single-stage ring's loads set the time, ``KernelClock._ring_binds``), chosen
    by index so that the compiled paths trace it."""
    if _any_array([unit_seconds[u] for u in UNITS]):
        shape = np.broadcast(*[asarray(unit_seconds[u]) for u in UNITS]).shape
        best_group = np.argmax(np.stack([np.broadcast_to(t, shape) for t in totals]), axis=0)
        best = None
        for gi, group in enumerate(overlap):
            if pipeline is not None and gi == len(overlap) - 1:
                pick = _pipeline_unit(unit_seconds, pipeline, exp_lead, shape)
            else:
                weighted = np.stack([np.broadcast_to(unit_seconds[u] * w, shape)
                                     for u, w in _entries(group)])
                index = np.array([UNITS.index(u) for u, _ in _entries(group)])
                pick = take(index, np.argmax(weighted, axis=0))
            # index into UNITS (ints: fast for sweeps); every element's group overwrites it
            best = pick if best is None else np.where(best_group == gi, pick, best)
        if latency is not None:
            return take(UNITS_AND_LATENCY, np.where(latency, len(UNITS), best))
        return take(UNITS, best)
    if latency:
        return "latency"
    g = max(range(len(overlap)), key=lambda i: totals[i])
    if pipeline is not None and g == len(overlap) - 1:
        return UNITS[int(_pipeline_unit(unit_seconds, pipeline, exp_lead))]
    return max(_entries(overlap[g]), key=lambda e: unit_seconds[e[0]] * e[1])[0]


#: :data:`UNITS` and ``"latency"``, which :func:`_largest_entry` names by index.
UNITS_AND_LATENCY = (*UNITS, "latency")


def _pipeline_unit(unit_seconds: dict, pipeline, exp_lead=0.0, shape=None):
    """Index into ``UNITS`` of the unit that contributes most to a pipeline's cycle time
    (``shape``: elementwise over sweep arrays). The cycle takes the slower station's time
    ``s`` plus ``cycle − s`` of the faster one's (:func:`closed_cycle`; at ``K = 1`` all of
    it); a station that adds its units (:func:`_station_adds`) shares its part among them
    in proportion, an overlapping one gives it all to the unit that sets its time (its
    slowest, or the MUFU with ``exp_lead``). So many tiles in flight name the slower
    station's unit, and one tile the largest single unit of the serial sum."""
    stations, k = pipeline[0], pipeline[1]
    serial = pipeline[2] if len(pipeline) > 2 else None
    times = station_times(unit_seconds, stations, k, serial, exp_lead)
    cycle = closed_cycle(times[0], times[1], k)
    first_slow = times[0] >= times[1]
    candidates = []                                   # (unit, contribution)
    for index, station in enumerate(stations):
        own, other = times[index], times[1 - index]
        part = where(first_slow if index == 0 else _not(first_slow), own, cycle - other)
        if _station_adds(serial, index, k):
            safe = where(own > 0, own, 1.0)
            parts = (_beside_parts(unit_seconds, station, exp_lead)
                     if _mufu_beside(serial, index) else
                     [(u, unit_seconds[u]) for u in station])
            candidates += [(u, t * part / safe) for u, t in parts]
            continue
        sets = False                                  # the first unit whose time is the station's
        for u in station:
            hit = (unit_seconds[u] + (exp_lead if u == "mufu" else 0.0) >= own) & _not(sets)
            candidates.append((u, where(hit, part, 0.0)))
            sets = sets | hit
    if shape is None:                                 # one call: the first maximum, as argmax
        return UNITS.index(max(candidates, key=lambda c: c[1])[0])
    values = np.stack([np.broadcast_to(c, shape) for _, c in candidates])
    index = np.array([UNITS.index(u) for u, _ in candidates])
    return take(index, np.argmax(values, axis=0))


def _not(flag):
    """Logical not of a plain or numpy boolean, or elementwise of a boolean array."""
    return ~flag if isinstance(flag, np.ndarray) else not flag
