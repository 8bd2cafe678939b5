"""GPU specifications (``GPUSpec``); loading them from ``hardware/*.toml`` is
:mod:`perfsim.gpu_catalog`.

A GPU is described by per-SM, per-clock rates of each unit perfsim models, plus HBM, caches,
on-chip capacities and feature flags. Times are always ``demand / (rate_per_clk_per_sm x SMs x
clock_hz)``, so ``clock_hz`` is the clock at which the per-clock rates reproduce the vendor's
quoted peaks (e.g. 1830 MHz for the H100's 989 TFLOP/s BF16).

The numbers live only in ``hardware/*.toml``; each file has a ``[sources]`` table that names the
source of every number (see ``hardware/README.md``).

Length: one pydantic model of about fifty sourced fields, each with its description, bounds and
the validator that names it in an error, plus the derived rates; the catalog loading is in
``perfsim.gpu_catalog``.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import ClassVar, Literal, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from perfsim.errors import (
    Immutable,
    InfeasibleError,
    PerfsimError,
    closest,
    did_you_mean,
    short_repr,
)

Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8_e4m3"]
DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")
#: Keys of ``GPUSpec.tma_segment_seconds``: segment bytes, and ``/half`` for rows 16 bytes off a
#: whole number of 32-byte sectors.
TMA_SEGMENT_KEYS: tuple[str, ...] = ("128", "64", "32", "128/half", "64/half", "32/half")
BYTES_PER_ELEMENT: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8_e4m3": 1}

#: Tensor-core instruction families. ``mma_sync`` is the warp-level Ampere-style MMA (what FA2's
#: CUDA kernels issue on every GPU), ``wgmma`` the Hopper warpgroup MMA, ``tcgen05`` the Blackwell
#: datacenter MMA that writes tensor memory.
TensorFamily = Literal["mma_sync", "wgmma", "tcgen05"]


class GPUFeatures(BaseModel):
    """Hardware features an algorithm may need (CUDA Programming Guide; FA3/FA4 papers)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tma: bool = Field(description="Tensor Memory Accelerator (bulk async tensor copies), sm_90+")
    wgmma: bool = Field(description="warpgroup MMA (Hopper sm_90a)")
    tcgen05: bool = Field(description="5th-gen tensor-core MMA into tensor memory (sm_100)")
    two_cta: bool = Field(description="2-CTA (CTA pair) MMA mode, M = 256 (sm_100)")


class PowerSpec(BaseModel):
    """Board power of a GPU as a function of what it does and its SM clock (the sustained-clock
    model, :mod:`perfsim.power`).

    Power at SM clock ``f`` while a kernel runs for ``T(f)`` seconds::

        P(f) = static_w + (Σ_SM-units n_u · e_u · (f / reference_clock_hz)^voltage_exponent
                           + hbm_bytes · hbm_pj_per_byte + l2_hit_bytes · l2_pj_per_byte
                           + local_load_bytes · spill_pj_per_byte)
           / T(f)

    ``n_u`` are the kernel's executed counts (tensor FLOPs, FP32 FLOPs, MUFU ops, shared-memory
    bytes), ``e_u`` the energy per operation at ``reference_clock_hz``. The energy of a switching
    transistor is C·V², and over the DVFS range the supply voltage rises about linearly with the
    clock, so energy per SM operation scales as ``(f/f_ref)^voltage_exponent`` (2 for V ∝ f;
    the value is measured where a ``[sources]`` entry says so). HBM, L2 and spill energy do
    not scale with the SM clock (L2 runs in its own clock domain: ASSUMED). The sustained
    clock is where ``P(f) = tdp_w``, capped at ``max_clock_hz`` and floored at
    ``min_clock_hz``.

    Energies in picojoules (pJ, 1e-12 J); tensor energies per FLOP of 16-bit inputs, keyed by
    instruction family (``mma_sync``, ``wgmma``, ``tcgen05``); other input widths scale with
    the operand width (``tensor_energy_scale``, an assumption stated there).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tdp_w: float = Field(gt=0, le=5000, description="board power limit (W)")
    static_w: float = Field(ge=0, le=5000, description="board power with the SM clock at "
                            "reference_clock_hz and no kernel running (W)")
    reference_clock_hz: float = Field(gt=1e8, le=5e9, description="SM clock the energies "
                                      "are quoted at (Hz)")
    min_clock_hz: float = Field(gt=1e8, le=5e9, description="lowest SM clock the power "
                                "controller settles at under load (Hz)")
    voltage_exponent: float = Field(ge=0, le=4, description="energy per SM operation scales "
                                    "as (f / reference_clock_hz) ** voltage_exponent")
    tensor_pj_per_flop: dict[str, float] = Field(description="pJ per tensor FLOP (16-bit "
                                                 "inputs) by instruction family")
    fp32_pj_per_flop: float = Field(ge=0, le=1e3, description="pJ per FP32 FLOP (FMA = 2)")
    mufu_pj_per_op: float = Field(ge=0, le=1e4, description="pJ per MUFU ex2")
    smem_pj_per_byte: float = Field(ge=0, le=1e3, description="pJ per shared-memory byte")
    hbm_pj_per_byte: float = Field(ge=0, le=1e4, description="pJ per HBM byte read or written")
    l2_pj_per_byte: float = Field(default=0.0, ge=0, le=1e4, description="pJ per byte an SM "
                                  "reads from L2 that L2 served (KernelCost.l2_hit_bytes; "
                                  "HBM bytes pay hbm_pj_per_byte, their L2 pass included): "
                                  "measured on the H200 (22.85), taken by the GH100 parts; 0 "
                                  "(default) where the tensor energies include their GEMM's "
                                  "L2 traffic")
    spill_pj_per_byte: float = Field(default=0.0, ge=0, le=1e4, description="pJ per byte a "
                                     "kernel reloads from local memory (register spills, "
                                     "KernelCost.local_load_bytes), its store back included "
                                     "(spilled accumulators are reloaded and stored once per "
                                     "step; both cross the L2): measured on the H100 (106.9); "
                                     "0 (default) prices spills in time only")

    @field_validator("tdp_w", "static_w", "reference_clock_hz", "min_clock_hz",
                     "voltage_exponent", "tensor_pj_per_flop", "fp32_pj_per_flop",
                     "mufu_pj_per_op", "smem_pj_per_byte", "hbm_pj_per_byte", "l2_pj_per_byte",
                     "spill_pj_per_byte", mode="before")
    @classmethod
    def _strict_numbers(cls, value, info: ValidationInfo):
        field = cls.model_fields[info.field_name]
        allowed = _power_unit(info.field_name) + _bounds_text(field.metadata)
        if info.field_name == "tensor_pj_per_flop":     # bounds checked in _check
            allowed = "of pJ per FLOP, from 0 to 1000"
        if isinstance(value, dict):             # tensor_pj_per_flop: per family
            return {k: strict_number(v, allowed, label=f"{info.field_name}[{k}] ")
                    for k, v in value.items()}
        return strict_number(value, allowed)

    @model_validator(mode="after")
    def _check(self) -> PowerSpec:
        for key, value in self.tensor_pj_per_flop.items():
            if key not in ("mma_sync", "wgmma", "tcgen05"):
                raise ValueError(f"power.tensor_pj_per_flop: unknown family {key!r}; allowed: "
                                 "mma_sync, wgmma, tcgen05")
            if not 0 <= value <= 1e3:
                raise ValueError(f"power.tensor_pj_per_flop[{key}] must be in [0, 1000] pJ, "
                                 f"got {value}")
        if self.static_w >= self.tdp_w:
            raise ValueError(f"power.static_w ({self.static_w} W) must be below tdp_w "
                             f"({self.tdp_w} W)")
        if self.min_clock_hz > self.reference_clock_hz:
            raise ValueError(f"power.min_clock_hz ({self.min_clock_hz:g} Hz) must not exceed "
                             f"power.reference_clock_hz ({self.reference_clock_hz:g} Hz)")
        return self


def _bounds_text(metadata) -> str:
    """``"from 0 to 4"``, ``"above 0, at most 5000"``: a pydantic field's bounds in words."""
    lo = hi = None
    for m in metadata:
        for attr in ("gt", "ge"):
            if getattr(m, attr, None) is not None:
                lo = (attr, getattr(m, attr))
        for attr in ("lt", "le"):
            if getattr(m, attr, None) is not None:
                hi = (attr, getattr(m, attr))
    if lo and hi and lo[0] == "ge" and hi[0] == "le":
        return f"from {lo[1]:g} to {hi[1]:g}"
    words = {"gt": "above", "ge": "at least", "lt": "below", "le": "at most"}
    return ", ".join(f"{words[a]} {v:g}" for a, v in (b for b in (lo, hi) if b)) or "any value"


def _power_unit(name: str) -> str:
    for suffix, unit in (("_w", "W"), ("_hz", "Hz"), ("_pj_per_flop", "pJ per FLOP"),
                         ("_pj_per_op", "pJ per operation"), ("_pj_per_byte", "pJ per byte")):
        if name.endswith(suffix):
            return f"of {unit}, "
    return ""


def strict_number(value, allowed: str, integer: bool = False, label: str = ""):
    """``value`` as an ``int`` (``integer``) or ``float``, refusing what only looks like a
    number: ``bool`` (TOML ``true`` would be 1), strings (``"132"``), NaN and ±inf. Python and
    numpy integers and floats are accepted; an integral float is accepted for an integer.

    Raises:
        ValueError: one line, ``label`` + "must be ... {allowed}" + what was given.
    """
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ValueError(f"{label}must be {kind} {allowed}, not {type(value).__name__} "
                         f"{shown}")
    if isinstance(value, numbers.Integral):
        value = int(value)
        if abs(value) > 2**64:                  # beyond every range, and beyond a float
            raise ValueError(f"{label}must be {kind} {allowed}, got an integer of "
                             f"{len(str(abs(value))) if abs(value) < 10**4000 else 'over 4000'}"
                             " digits")
        return value if integer else float(value)
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{label}must be a finite number {allowed}, got {value}")
    if integer:
        if not value.is_integer():
            raise ValueError(f"{label}must be a whole number {allowed}, got {value:g}")
        return int(value)
    return value


#: Energy per tensor FLOP relative to 16-bit inputs, by input dtype: proportional to the
#: operand width (the multiplier array's switched capacitance). fp8 checked on the H200: an
#: e4m3 GEMM settled at 1443 MHz drew 692 W for 1.28 PFLOP/s, which this scale predicts at
#: 659 W (-5 %, the same as the fp16 GEMM's -5 %; validate/fit_power.py checks); tf32 is
#: ASSUMED. fp32 inputs without a tensor path run on the FP32 pipes and are charged there.
TENSOR_ENERGY_SCALE = {"fp8_e4m3": 0.5, "fp16": 1.0, "bf16": 1.0, "tf32": 2.0}


#: Plausible range of each numeric GPUSpec field, with its unit: a value outside is a typo or
#: a wrong unit (``clock_hz = 1830``: MHz given for Hz), not a GPU. Generous by orders of
#: magnitude around every GPU in the catalog so that what-ifs stay possible.
FIELD_RANGES: dict[str, tuple[float, float, str]] = {
    "sm_count": (1, 4096, "SMs"),
    "clock_hz": (1e8, 5e9, "Hz (100 MHz to 5 GHz)"),
    "max_clock_hz": (1e8, 5e9, "Hz (100 MHz to 5 GHz)"),
    "power_capped_clock_hz": (1e8, 5e9, "Hz (100 MHz to 5 GHz)"),
    "tensor_flops_per_clk_per_sm": (1, 1e6, "FLOP per clock per SM"),
    "mma_sync_flops_per_clk_per_sm": (1, 1e6, "FLOP per clock per SM"),
    "fp32_flops_per_clk_per_sm": (1, 1e5, "FLOP per clock per SM"),
    "mufu_ops_per_clk_per_sm": (0.01, 1e5, "operations per clock per SM"),
    "alu_ops_per_clk_per_sm": (1, 1e5, "lane operations per clock per SM"),
    "smem_bandwidth_bytes_per_clk_per_sm": (1, 1e5, "bytes per clock per SM"),
    "smem_bytes_per_sm": (1024, 2**30, "bytes"),
    "smem_bytes_per_block": (1024, 2**30, "bytes"),
    "smem_reserved_per_cta_bytes": (0, 2**20, "bytes"),
    "registers_per_sm": (1, 2**24, "registers"),
    "max_registers_per_thread": (1, 2**16, "registers"),
    "max_warps_per_sm": (1, 2**12, "warps"),
    "max_ctas_per_sm": (1, 2**12, "CTAs"),
    "max_threads_per_sm": (32, 2**17, "threads"),
    "warp_schedulers_per_sm": (1, 8, "warp schedulers"),
    "l2_bytes": (1, 2**40, "bytes (1 B: a what-if without L2)"),
    "hbm_bytes": (2**20, 2**50, "bytes (1 MiB to 1 PiB)"),
    "hbm_bandwidth_bytes_per_s": (1e9, 1e14, "bytes/s (1 GB/s to 100 TB/s)"),
    "hbm_efficiency": (0.01, 1, "(a share of hbm_bandwidth_bytes_per_s)"),
    "l2_bandwidth_bytes_per_s": (1e9, 1e15, "bytes/s (1 GB/s to 1 PB/s)"),
    "l2_reduction_bytes_per_s": (1e9, 1e15, "bytes/s (1 GB/s to 1 PB/s)"),
    "l2_load_peak_bytes_per_s": (1e9, 1e15, "bytes/s (1 GB/s to 1 PB/s)"),
    "l2_reduction_segment_share": (0, 1, "(a share of the reductions' own L2 time)"),
    "tmem_bytes_per_sm": (0, 2**30, "bytes"),
    "load_latency_s": (1e-9, 1e-3, "s (1 ns to 1 ms)"),
    "cta_load_bandwidth_bytes_per_s": (1e6, 1e14, "bytes/s (1 MB/s to 100 TB/s)"),
    "l2_load_latency_clk": (1, 1e6, "SM cycles"),
    "cta_l2_load_bytes_per_clk": (0.01, 1e4, "bytes per SM cycle"),
    "cta_wave_overhead_s": (0, 1e-3, "s (0 to 1 ms)"),
    "spill_reload_bandwidth_bytes_per_s": (1e6, 1e14, "bytes/s (1 MB/s to 100 TB/s)"),
    "tensor_sustained_fraction": (0.01, 1, "(a share of the per-clock tensor rate)"),
    "mma_sync_k8_fraction": (0.01, 1, "(a share of the mma.sync rate)"),
    "wgmma_one_cta_fraction": (0.01, 1, "(a share of the WGMMA rate)"),
    "l2_usable_fraction": (0.001, 1, "(a share of l2_bytes)"),
    "l2_reuse_ramp_end": (0.001, 100, "(multiples of l2_bytes)"),
    "register_allocation_unit": (1, 65536, "registers"),
}


def range_text(name: str) -> str:
    """``"of SMs, from 1 to 4096"``: what :data:`FIELD_RANGES` allows for field ``name``."""
    lo, hi, unit = FIELD_RANGES[name]
    if unit.startswith("("):
        return f"from {lo:g} to {hi:g} {unit}"
    return f"of {unit}, from {lo:g} to {hi:g}"


def mhz_hint(name: str, value) -> str:
    """``" (in MHz? 1830 MHz is 1.83e+09 Hz)"`` where ``value`` of clock field ``name``
    (:data:`FIELD_RANGES`, in Hz) is out of range but would be in it read as MHz, else ``""``."""
    lo, hi, unit = FIELD_RANGES[name]
    if unit.startswith("Hz") and lo <= value * 1e6 <= hi:
        return f" (in MHz? {value:g} MHz is {value * 1e6:g} Hz)"
    return ""


def _check_ranges(spec) -> None:
    """Raise ValueError naming the first field outside :data:`FIELD_RANGES` (or not finite)."""
    for name, (lo, hi, unit) in FIELD_RANGES.items():
        value = getattr(spec, name)
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for key, v in items:
            if v is None:
                continue
            label = name if key is None else f"{name}[{key}]"
            if not math.isfinite(v):
                raise ValueError(f"{label} must be a finite number of {unit}, got {v}")
            if not lo <= v <= hi:
                got = f"{v:,}" if isinstance(v, int) else f"{v:g}"
                raise ValueError(f"{label} must be between {lo:g} and {hi:g} {unit}, got "
                                 f"{got}{mhz_hint(name, v)}")
    if spec.max_clock_hz < spec.clock_hz:
        raise ValueError(f"max_clock_hz ({spec.max_clock_hz:g} Hz) must be >= clock_hz "
                         f"({spec.clock_hz:g} Hz): a what-if that raises clock_hz raises "
                         "max_clock_hz with it (scale both)")
    if spec.power is not None and spec.power.min_clock_hz > spec.max_clock_hz:
        raise ValueError(f"power.min_clock_hz ({spec.power.min_clock_hz:g} Hz), the lowest "
                         "clock the power controller settles at, must not exceed "
                         f"max_clock_hz ({spec.max_clock_hz:g} Hz): a what-if that lowers "
                         "the clocks below it lowers power.min_clock_hz too")


class CalibratedTiming(BaseModel):
    """The timing facts a calibrated profile's ``[calibration]`` block carries, typed (the
    block itself stays a string table of provenance: device, driver, date, methods).

    Attributes:
        launch_overhead_s: measured GPU-side gap per launch (s).
        cta_overhead_s: fitted per-wave prologue/epilogue time of tiled kernels (s), or
            ``None``: the block has none (the timing model's own, perfsim.timing).
        eager_softmax: ``((row_length, B/s), ...)``: ``torch.softmax``'s measured
            throughput by row length (``eager_softmax_<L>`` keys), sorted.
        eager_broadcast_fill: ``masked_fill_`` with a broadcast mask (B/s), or ``None``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    launch_overhead_s: float | None = Field(default=None, ge=0, le=1e-3)
    cta_overhead_s: float | None = Field(default=None, ge=0, le=1e-3)
    eager_softmax: tuple[tuple[int, float], ...] = ()
    eager_broadcast_fill: float | None = Field(default=None, gt=0)

    @classmethod
    def of(cls, block: dict[str, str]) -> CalibratedTiming:
        """Parse a ``[calibration]`` block.

        Raises:
            perfsim.PerfsimError: a timing key whose value is not a number in range."""
        softmax = []
        fields = {}
        try:
            for key, value in block.items():
                if key.startswith("eager_softmax_") and key[len("eager_softmax_"):].isdigit():
                    softmax.append((int(key.rsplit("_", 1)[1]), float(value)))
                elif key in ("launch_overhead_s", "cta_overhead_s", "eager_broadcast_fill"):
                    fields[key] = float(value)
            return cls(eager_softmax=tuple(sorted(softmax)), **fields)
        except (ValueError, ValidationError) as exc:
            msg = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise PerfsimError(f"[calibration]: {msg}") from None


class GPUSpec(Immutable, BaseModel):
    """One GPU. Frozen; use :meth:`replace` for a what-if variant (validated again).

    Units are in the field names: ``_hz``, ``_bytes``, ``_per_clk_per_sm``, ``_per_s``.
    Per-dtype tables are keyed by ``fp32``, ``tf32``, ``fp16``, ``bf16``, ``fp8_e4m3``; a dtype
    missing from a tensor table has no tensor-core path on that GPU (fp32 matmuls then run on
    the FP32 pipes).

    Raises:
        perfsim.PerfsimError: on construction or :meth:`replace` with a non-positive rate, a
            value outside its plausible range or not finite (:data:`FIELD_RANGES`, the unit
            is in the message), ``max_clock_hz < clock_hz``, an unknown dtype key, a
            per-block shared-memory size above the per-SM size, a ``native_tensor_family``
            that the feature flags do not provide, or an ``id`` that is empty or holds
            whitespace or control characters.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    REPLACE_AS: ClassVar[str] = "gpu"      # (Immutable's message)

    id: str = Field(description="catalog id, e.g. 'h100-sxm5'")
    name: str = Field(description="marketing name")
    arch: str = Field(description="architecture, a label for messages (the catalog: ampere, "
                      "ada, hopper, blackwell, blackwell-geforce); the model reads the "
                      "features, rates and sizes, never this name. A known label must agree "
                      "with compute_capability (ARCH_COMPUTE_CAPABILITIES); another is taken "
                      "as it is")
    compute_capability: str = Field(
        description="CUDA compute capability, e.g. '9.0' (an architecture-specific suffix "
        "such as '9.0a' is allowed)")
    sm_count: int = Field(gt=0, description="streaming multiprocessors")
    clock_hz: float = Field(gt=0, description="clock at which the per-clock rates give the "
                            "vendor's peaks (the 'datasheet' clock; predictions run at the "
                            "power model's sustained clock unless TimingParams.clock says "
                            "otherwise, so changing it is no clock what-if: use "
                            "TimingParams(clock=...) or max_clock_hz)")
    max_clock_hz: float = Field(gt=0, description="maximum (boost) SM clock")
    device_name_pattern: str | None = Field(
        default=None, description="regular expression (case-insensitive) matching the device "
        "name NVML and torch report for this GPU, for --gpu auto; exactly one catalog entry "
        "may match a name")
    native_tensor_family: TensorFamily = Field(
        description="instruction family that reaches tensor_flops_per_clk_per_sm")
    tensor_flops_per_clk_per_sm: dict[str, float] = Field(
        description="dense tensor-core FLOP/clk/SM through the native family, per input dtype")
    mma_sync_flops_per_clk_per_sm: dict[str, float] = Field(
        description="dense tensor-core FLOP/clk/SM through warp-level mma.sync, per input dtype")
    fp32_flops_per_clk_per_sm: float = Field(gt=0, description="FP32 FLOP/clk/SM (FMA = 2 FLOP)")
    mufu_ops_per_clk_per_sm: float = Field(gt=0, description="MUFU ex2 results/clk/SM")
    alu_ops_per_clk_per_sm: float = Field(
        gt=0, description="ALU-pipe lane results/clk/SM (max/min, compare, select, "
        "float-to-16-bit conversion): 16 lanes per SM sub-partition")
    smem_bandwidth_bytes_per_clk_per_sm: float = Field(gt=0, description="shared-memory B/clk/SM")
    smem_bytes_per_sm: int = Field(gt=0, description="max shared memory per SM (carveout max)")
    smem_bytes_per_block: int = Field(gt=0, description="max shared memory per CTA (opt-in)")
    smem_reserved_per_cta_bytes: int = Field(
        default=1024, ge=0, description="shared memory the CUDA driver sets aside for every "
        "resident CTA beside what the kernel asks for, so an SM holds floor(smem_bytes_per_sm "
        "/ (CTA's shared memory + this)) CTAs (perfsim.algorithms.base.resident_ctas); the "
        "H200's driver reports 1024 (CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK), "
        "which is also the gap between what an SM has and what one CTA may opt in to on every "
        "GPU of compute capability 8.0 and later")
    registers_per_sm: int = Field(gt=0, description="32-bit registers per SM")
    register_allocation_unit: int = Field(
        default=256, gt=0, description="registers the SM hands a warp at a time: a warp's "
        "32 x registers per thread is rounded up to a multiple of this before the register "
        "file is divided among CTAs (perfsim.algorithms.base.resident_ctas; the CUDA "
        "occupancy calculator's register allocation unit, warp granularity)")
    max_registers_per_thread: int = Field(gt=0, description="32-bit registers per thread, max")
    max_warps_per_sm: int = Field(gt=0)
    warp_schedulers_per_sm: int = Field(
        default=4, gt=0, le=8, description="warp schedulers (SM sub-partitions) per SM, each "
        "with its own quarter of the tensor cores and FP32 pipes: 4 on every NVIDIA SM since "
        "Volta (CUDA C++ Programming Guide, 'Compute Capability 7.x/8.x/9.x/10.x/12.x')")
    max_ctas_per_sm: int = Field(gt=0)
    max_threads_per_sm: int = Field(gt=0)
    l2_bytes: int = Field(gt=0)
    l2_usable_fraction: float = Field(
        gt=0, le=1, description="share of L2 that data shared by all SMs can use: A100/H100 "
        "L2 is two partitions that each cache for their own GPCs (A100 whitepaper), so "
        "data read by every SM may sit in both; 0.5 for those, 1 for a unified L2")
    l2_reuse_ramp_end: float = Field(
        default=2.0, gt=0, description="working set, in multiples of l2_bytes, at which "
        "re-reads of read-only data stop hitting L2: past l2_usable_fraction the share served "
        "by L2 falls linearly to none here (perfsim.algorithms.base.l2_filtered); at or below "
        "l2_usable_fraction: a step")
    hbm_bytes: int = Field(gt=0, description="device memory capacity")
    hbm_bandwidth_bytes_per_s: float = Field(gt=0, description="device memory bandwidth")
    hbm_efficiency: float = Field(
        gt=0, le=1, description="share of hbm_bandwidth_bytes_per_s a streaming kernel reaches "
        "(a device-to-device copy, bytes read + written, over the datasheet rate)")
    l2_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="L2 read bandwidth a kernel reading an L2-resident "
        "buffer reaches (bytes/s); None where not measured. Not a timing unit (a smaller "
        "set is read faster: l2_load_peak_bytes_per_s); the roofline's L2 ceiling where "
        "that is not known (perfsim.plots.roofline)")
    l2_load_peak_bytes_per_s: float | None = Field(
        default=None, gt=0, description="the most the SMs pull from the L2 per second, "
        "bytes/s: the L2 read walk's best rate, on a buffer small enough that each L2 "
        "partition holds a copy (above l2_bandwidth_bytes_per_s, the rate of a larger "
        "resident buffer; walks whose loads hit L1 left out). A floor under every kernel's "
        "load time: its HBM reads and L2 hits at this rate (perfsim.timing). None where not "
        "measured: no such floor")
    l2_reduction_bytes_per_s: float | None = Field(
        default=None, gt=0, description="fp32 reductions into L2 (atomic adds, or TMA bulk "
        "reductions), bytes of payload per second; they share the memory path with the HBM "
        "stream, so a kernel's HBM time grows by its reduction payload at this rate "
        "(perfsim.timing.memory_path_seconds). None where not measured: no such term")
    l2_reduction_segment_share: float | None = Field(
        default=None, ge=0, le=1, description="in a kernel that loads TMA row segments and "
        "sends fp32 reductions into L2 (an FA3-class backward: Q and dO tiles in, dQ partial "
        "tiles added into the accumulator), the share of the reductions' own L2 time "
        "(l2_reduction_bytes_per_s) during which the L2 serves none of the kernel's row "
        "segments: the L2 then takes max(reductions, segments + share x reductions) "
        "(perfsim.timing.l2_request_path_seconds; 1: they take strict turns, 0: the segments "
        "hide behind the reductions). None where not measured: the segments' time alone is "
        "the floor")
    tma_segment_seconds: dict[str, float] | None = Field(
        default=None, description="seconds the L2 takes per TMA row segment a kernel loads, "
        "by segment width in bytes ('128', '64', '32': the shared-memory swizzle of the tile, "
        "perfsim.algorithms.common.tma_segment_bytes) and by the tensor's row size: a key "
        "alone for rows that are whole 32-byte sectors, with '/half' for rows 16 bytes off "
        "(half of such rows start half a sector in). The time the L2 needs for a kernel's TMA "
        "loads, with its fp32 reductions into L2 (l2_reduction_segment_share), is a floor under "
        "its memory path (perfsim.timing.l2_request_path_seconds); not scaled "
        "with the SM clock. None where not measured: no such floor")
    tmem_bytes_per_sm: int = Field(ge=0, description="Blackwell tensor memory per SM (0: none)")
    load_latency_s: float = Field(
        gt=0, description="an unpipelined CTA's global-load step (4 warps load a tile, wait, "
        "use it) takes load_latency_s + bytes / cta_load_bandwidth_bytes_per_s "
        "(KernelCost.load_chain; validate/microbench.py load_chain)")
    cta_load_bandwidth_bytes_per_s: float = Field(
        gt=0, description="bytes per second of that step's loads, one CTA per SM")
    l2_load_latency_clk: float | None = Field(
        default=None, gt=0, description="the same unpipelined load step when the L2 holds "
        "the tile (microbench.load_chain walking a few tiles again and again: "
        "validate/probe_chain_target.py COLS WRAP) takes l2_load_latency_clk + bytes / "
        "cta_l2_load_bytes_per_clk SM cycles: it keeps its cycles when the SM clock drops "
        "(validate/probe_clock_scaling.sh), unlike the step from HBM. Times a single-stage "
        "K/V ring's loads, which its co-resident CTAs' reads of the same head have brought "
        "into L2 (perfsim.timing.ring_load_terms). None where not measured: those loads are "
        "timed as the step from HBM (load_latency_s, cta_load_bandwidth_bytes_per_s)")
    cta_l2_load_bytes_per_clk: float | None = Field(
        default=None, gt=0, description="bytes per SM cycle of that L2-hit step's loads, one "
        "CTA per SM (see l2_load_latency_clk; set both or neither)")
    cta_wave_overhead_s: float = Field(
        ge=0, description="fixed time (s) a wave of a tiled kernel's CTAs spends outside its "
        "steady-state loop beyond its first loads' latency and its edge tiles' bytes on the "
        "per-CTA load path: CTA launch and retirement, address and barrier set-up, the first "
        "MMA's latency (perfsim.timing.cta_edge_seconds; validate/probe_cta_fixed.py)")
    spill_reload_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="bytes per second one SM reloads of registers a "
        "kernel spilled to local memory, with one 4-warp CTA resident that stores them back "
        "each step (KernelCost.local_load_bytes; validate/probe_spill_cost.py). Bytes per "
        "second, not per SM clock: the path runs through L1 and L2 and its latency, so it is "
        "not scaled with the SM clock (measured at an NVML clock of 1980 MHz); None: spills "
        "are not timed")
    power_capped_clock_hz: float | None = Field(
        default=None, gt=0, description="SM clock (Hz) NVML reports under sustained dense "
        "tensor-core work at the board power limit (the SMs tick at about 0.9 of NVML's "
        "reading then: validate/probe_tick_clock.py); None where not measured. A record, not "
        "an input: the power model (power) computes the clock under load")
    tensor_sustained_fraction: float = Field(
        default=1.0, gt=0, le=1, description="share of the native family's per-clock tensor "
        "rates that the tensor pipe sustains in a kernel's main loop, measured per cycle the "
        "SMs tick (a WGMMA loop on the GPU or its die); 1.0 where not measured. Not a whole "
        "GEMM's efficiency: the model counts a kernel's padding to whole tiles and its wave "
        "tail itself. The timing model scales the native family's rates by it "
        "(perfsim.timing.rates); a calibrated profile's tensor rates are measured already and "
        "carry 1.0")
    wgmma_one_cta_fraction: float = Field(
        default=1.0, gt=0, le=1, description="WGMMA rate that one CTA per SM sustains when "
        "it issues its WGMMAs in program order and waits for each dot (Triton's loops, no "
        "warp specialisation), as a share of the rate two such CTAs per SM reach together "
        "(``KernelCost.tensor_issue_share``); 1.0 where not measured")
    mma_sync_k8_fraction: float = Field(
        default=1.0, gt=0, le=1, description="FLOP rate of mma.sync with the m16n8k8 shape "
        "(xFormers' CUTLASS kernels) as a share of ``mma_sync_flops_per_clk_per_sm`` "
        "(m16n8k16): the tensor pipe is busy 1 / this as long per FLOP; 1.0 where the shapes "
        "run alike")
    features: GPUFeatures
    power: PowerSpec | None = Field(
        default=None, description="board power model (perfsim.power): the sustained SM clock "
        "under a kernel's load; None: predictions run at clock_hz")
    sources: dict[str, str] = Field(default_factory=dict,
                                    description="field name -> where the number comes from")
    calibration: dict[str, str] | None = Field(
        default=None, description="for calibrated profiles: device, driver, date, method")

    @field_validator(*FIELD_RANGES, mode="before")
    @classmethod
    def _strict_numbers(cls, value, info: ValidationInfo):
        """Numbers only (no ``true``, no ``"132"``, no NaN), named with unit and range."""
        if value is None:           # optional fields (power_capped_clock_hz); else pydantic
            return value
        allowed = range_text(info.field_name)
        annotation = cls.model_fields[info.field_name].annotation
        if isinstance(value, dict):             # per-dtype tables
            return {k: strict_number(v, allowed, label=f"{info.field_name}[{k}] ")
                    for k, v in value.items()}
        if get_origin(annotation) is dict:
            raise ValueError(f"must be a table of dtype -> number {allowed} (e.g. "
                             f"{{bf16 = 4096}}; one entry: {info.field_name}.bf16), not "
                             f"{type(value).__name__} {value!r}")
        return strict_number(value, allowed, integer=annotation is int)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        """One printable word: the id is a table cell and a sweep's gpu column."""
        if not value or not value.isprintable() or any(c.isspace() for c in value):
            raise ValueError(f"must be a non-empty id without spaces or control characters, "
                             f"e.g. 'h100-sxm5' or 'b300-like', got {short_repr(value)}")
        return value

    @field_validator("compute_capability")
    @classmethod
    def _compute_capability(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9]+\.[0-9]+[a-z]?", value):
            raise ValueError(f"must be MAJOR.MINOR with an optional letter, e.g. '9.0' or "
                             f"'9.0a', got {value!r}")
        return value

    @field_validator("device_name_pattern")
    @classmethod
    def _device_name_pattern(cls, value):
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"must be a regular expression, got {value!r} ({exc})") \
                    from None
        return value

    @field_validator("tma_segment_seconds", mode="before")
    @classmethod
    def _strict_segment_seconds(cls, value):
        """A table of numbers (no strings, booleans or NaN), each named in an error."""
        if not isinstance(value, dict):
            return value
        return {str(k): strict_number(v, "seconds per segment (between 0 and 1e-6)",
                                      label=f"tma_segment_seconds[{k}] ")
                for k, v in value.items()}

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> GPUSpec:
        for table in ("tensor_flops_per_clk_per_sm", "mma_sync_flops_per_clk_per_sm"):
            for key, value in getattr(self, table).items():
                if key not in DTYPES:
                    raise ValueError(f"{table}: unknown dtype {key!r}; allowed: "
                                     f"{', '.join(DTYPES)}")
                if not value > 0:
                    raise ValueError(f"{table}[{key}] must be > 0, got {value}")
        missing = [k for k in TMA_SEGMENT_KEYS if self.tma_segment_seconds
                   and k not in self.tma_segment_seconds]
        if missing:
            raise ValueError(f"tma_segment_seconds needs every entry ({', '.join(TMA_SEGMENT_KEYS)}"
                             f") or none; missing: {', '.join(missing)}")
        for key, value in (self.tma_segment_seconds or {}).items():
            if key not in TMA_SEGMENT_KEYS:
                raise ValueError(f"tma_segment_seconds: unknown key {key!r}; allowed: "
                                 f"{', '.join(TMA_SEGMENT_KEYS)}")
            if not 0 < value < 1e-6:
                raise ValueError(f"tma_segment_seconds[{key}] must be between 0 and 1e-6 s, "
                                 f"got {value}")
        major_minor = compute_capability_numbers(self.compute_capability)
        named = ARCH_COMPUTE_CAPABILITIES.get(self.arch.lower())
        if named is not None and not named[0] <= major_minor <= named[1]:
            owner = next((a for a, (lo, hi) in ARCH_COMPUTE_CAPABILITIES.items()
                          if lo <= major_minor <= hi), None)
            raise ValueError(
                f"arch {self.arch!r} is compute capability {named[0][0]}.{named[0][1]}"
                + (f"-{named[1][0]}.{named[1][1]}" if named[1] != named[0] else "")
                + f", not this spec's {self.compute_capability}"
                + (f" ({owner})" if owner else "") + ": arch is a label, the model reads "
                "compute_capability, the features and the rates, so a spec of another "
                "architecture changes those (an unlisted label, e.g. a hypothetical part's, "
                "is taken as it is)")
        if (self.l2_load_latency_clk is None) != (self.cta_l2_load_bytes_per_clk is None):
            raise ValueError("l2_load_latency_clk and cta_l2_load_bytes_per_clk are one "
                             "measurement (the L2-hit load step's fit): set both or neither")
        if self.smem_bytes_per_block > self.smem_bytes_per_sm:
            raise ValueError(f"smem_bytes_per_block ({self.smem_bytes_per_block} B, the most one "
                             f"CTA may take) must not exceed smem_bytes_per_sm "
                             f"({self.smem_bytes_per_sm} B): lower smem_bytes_per_block with "
                             "it, or raise smem_bytes_per_sm")
        if self.smem_reserved_per_cta_bytes >= self.smem_bytes_per_sm:
            raise ValueError(f"smem_reserved_per_cta_bytes ({self.smem_reserved_per_cta_bytes}) "
                             f"must be below smem_bytes_per_sm ({self.smem_bytes_per_sm}): the "
                             "driver's reservation is part of what one CTA takes")
        if not (info.context or {}).get("unchecked_ranges"):   # unit-rate test fixtures only
            _check_ranges(self)
        needs = {"wgmma": self.features.wgmma, "tcgen05": self.features.tcgen05,
                 "mma_sync": True}
        if not needs[self.native_tensor_family]:
            raise ValueError(f"native_tensor_family {self.native_tensor_family!r} "
                             "needs the matching feature flag")
        return self

    # ----------------------------------------------------------------- derived rates
    def tensor_flops_per_clk(self, dtype: str, family: str) -> float:
        """Dense tensor FLOP/clk/SM for ``dtype`` through instruction ``family``.

        ``fp32`` inputs without a tensor path return the FP32-pipe rate (a plain SGEMM).

        Raises:
            InfeasibleError: the GPU lacks the family (e.g. ``wgmma`` on an A100) or has no
                tensor path for ``dtype`` (e.g. ``fp8_e4m3`` on an A100).
        """
        if family == "wgmma" and not self.features.wgmma:
            raise InfeasibleError(f"{self.id} has no WGMMA (warpgroup MMA, Hopper sm_90a)")
        if family == "tcgen05" and not self.features.tcgen05:
            raise InfeasibleError(f"{self.id} has no tcgen05 MMA (Blackwell sm_100)")
        if family == self.native_tensor_family:
            table = self.tensor_flops_per_clk_per_sm
        elif family == "mma_sync":
            table = self.mma_sync_flops_per_clk_per_sm
        else:  # e.g. wgmma requested on a tcgen05 GPU: not issued by any kernel we model
            others = ("mma_sync" if self.native_tensor_family == "mma_sync" else
                      f"{self.native_tensor_family}, or mma_sync")
            raise InfeasibleError(f"{self.id}: instruction family {family!r} is not available "
                                  f"(native: {others})")
        if dtype in table:
            return table[dtype]
        if dtype == "fp32":
            return self.fp32_flops_per_clk_per_sm
        raise InfeasibleError(f"{self.id} has no {family} tensor-core path for {dtype} "
                              f"(has: {', '.join(table) or 'none, an empty table'})")

    def sm_clocks_per_s(self, clock_hz=None):
        """SM-clocks per second over the whole GPU at ``clock_hz`` (default ``clock_hz``; a
        numpy array in sweeps): a per-SM, per-clock rate times this is the GPU's rate. The one
        place per-GPU rates are derived (``perfsim.timing.rates``, the ``peak_*`` figures,
        ``Prediction.peak_flops_per_s``)."""
        return self.sm_count * (self.clock_hz if clock_hz is None else clock_hz)

    def peak_tensor_flops_per_s(self, dtype: str) -> float:
        """Datasheet dense tensor peak (FLOP/s) for ``dtype`` through the native family."""
        return (self.tensor_flops_per_clk(dtype, self.native_tensor_family)
                * self.sm_clocks_per_s())

    @property
    def fp32_flops_per_s(self) -> float:
        """FP32 FLOP/s at ``clock_hz`` (FMA = 2)."""
        return self.fp32_flops_per_clk_per_sm * self.sm_clocks_per_s()

    @property
    def mufu_ops_per_s(self) -> float:
        """MUFU results/s at ``clock_hz``."""
        return self.mufu_ops_per_clk_per_sm * self.sm_clocks_per_s()

    @property
    def smem_bandwidth_bytes_per_s(self) -> float:
        """Shared-memory bytes/s over all SMs at ``clock_hz``."""
        return self.smem_bandwidth_bytes_per_clk_per_sm * self.sm_clocks_per_s()

    def ridge_point(self, dtype: str) -> float:
        """Roofline ridge point (FLOP/byte) = peak compute / HBM bandwidth for ``dtype``."""
        return self.peak_tensor_flops_per_s(dtype) / self.hbm_bandwidth_bytes_per_s

    # ----------------------------------------------------------------- what-if
    def replace(self, **fields) -> GPUSpec:
        """A copy with ``fields`` changed, validated again (what-if GPUs).

        A what-if that lowers ``tensor_flops_per_clk_per_sm[dtype]`` below the
        ``mma_sync_flops_per_clk_per_sm`` rate of that dtype (a GPU whose native family is
        WGMMA or tcgen05), without setting the latter, lowers the mma.sync rate to it too:
        the same tensor cores run both instruction families, so the legacy path cannot
        outrun the native one (a fresh user's review: FA2 kept its speed at 1/64 of the
        native rate, 1720x the what-if's matmul peak). A native rate lowered but still above
        the mma.sync rate leaves it as it is, and a profile's own values are never touched.
        A dtype dropped from the native table (a table given whole without it) is dropped
        from the mma.sync table too, for the same reason.

        Example: ``load_gpu("b200").replace(mufu_ops_per_clk_per_sm=32, id="b300-like")``.
        A dict for ``features`` or ``power`` changes the entries it names
        (``features={"tma": False}``); a table field (``tensor_flops_per_clk_per_sm``) is
        replaced whole, and a dotted name changes one entry, as a sweep's overrides do:
        ``replace(**{"tensor_flops_per_clk_per_sm.bf16": 8192})`` keeps the other dtypes,
        ``replace(**{"power.tdp_w": 600})`` the other power terms.
        Without an explicit ``id``/``name`` a copy whose values differ is labelled a what-if
        (``"b200*"``, name ``"... (what-if: mufu_ops_per_clk_per_sm)"``); a what-if of a
        what-if keeps the one ``*`` and lists the fields changed so far once each. Values
        equal to the current ones change nothing: the copy equals this spec, id included.

        Raises:
            perfsim.PerfsimError: an unknown field name or a value that fails validation.
        """
        dotted = {k: v for k, v in fields.items() if "." in k}
        if dotted:
            fields = {k: v for k, v in fields.items() if "." not in k}
            for key, value in dotted.items():
                name, entry = key.split(".", 1)
                current = getattr(self, name, None) if name in type(self).model_fields else None
                if isinstance(current, BaseModel):
                    current = current.model_dump()
                if not isinstance(current, dict) or "." in entry:
                    raise PerfsimError(f"GPUSpec.replace: {key!r} names no entry of a table "
                                       "field (dotted names: TABLE.KEY, e.g. "
                                       "tensor_flops_per_clk_per_sm.bf16 or power.tdp_w)")
                base = fields.get(name, current)
                if isinstance(base, BaseModel):
                    base = base.model_dump()
                if not isinstance(base, dict):
                    raise PerfsimError(f"GPUSpec.replace: {name} given as {base!r} and "
                                       f"{key!r} by entry: give the table whole (a dict) or "
                                       "by its entries")
                fields[name] = {**base, entry: value}
        unknown = sorted(set(fields) - set(type(self).model_fields))
        if unknown:
            raise PerfsimError(f"GPUSpec has no field(s) {', '.join(unknown)}; fields: "
                               f"{', '.join(type(self).model_fields)}")
        data = self.model_dump()
        # a dict for a sub-model field (features, power) changes the entries it names; the
        # others stay (those models have no optional fields to leave out)
        fields = {k: ({**getattr(self, k).model_dump(), **v}
                      if isinstance(v, dict) and isinstance(getattr(self, k), BaseModel)
                      else v) for k, v in fields.items()}
        data.update({k: _dumped(v) for k, v in fields.items()})
        _cap_mma_sync(self, fields, data)
        # fields whose values differ (the same value again makes no what-if)
        changed = sorted(k for k in fields if k not in ("id", "name", "sources", "calibration")
                         and data[k] != _dumped(getattr(self, k)))
        if changed:
            # a changed number no longer comes from its source: say where it came from, entry
            # by entry in a table field ("field.sub" keys); unchanged values keep theirs, and
            # sources given with the change are merged over the result
            sources = dict(self.sources or {})
            for key in changed:
                old = _dumped(getattr(self, key))
                before, after = dict(_leaves(key, old)), dict(_leaves(key, data[key]))
                for leaf in sorted(set(before) | set(after)):
                    if before.get(leaf, _MISSING) == after.get(leaf, _MISSING):
                        continue
                    for stale in [s for s in sources if s == leaf or s.startswith(leaf + ".")]:
                        del sources[stale]
                    if leaf in after:       # (an entry dropped from the table has no source)
                        was = (repr(before[leaf]) if leaf in before else
                               "a table" if isinstance(old, dict) else "absent")
                        sources[leaf] = (f"what-if: set by GPUSpec.replace() (was {was} in "
                                         f"{self.id})")
            sources.update(fields.get("sources") or {})
            data["sources"] = sources
        if changed and "id" not in fields:      # label a what-if as one, unless named
            data["id"] = self.id if self.id.endswith("*") else f"{self.id}*"
        if changed and "name" not in fields:
            # a what-if of a what-if: one list of the fields changed so far, not one more
            # "(what-if: ...)" per call
            base, sep, before = self.name.partition(" (what-if: ")
            if sep and before.endswith(")") and "(" not in before:
                changed = sorted({*before[:-1].split(", "), *changed})
            data["name"] = f"{base} (what-if: {', '.join(changed)})"
        return _validate_spec(data, where=f"{self.id}.replace()")

    def model_copy(self, *, update=None, deep: bool = False) -> GPUSpec:
        """pydantic's ``model_copy``, with ``update`` validated as :meth:`replace` validates
        it (pydantic's sets the values unchecked: a negative HBM bandwidth reached the timing
        model); unlike :meth:`replace`, the copy keeps its id and name.

        Raises:
            perfsim.PerfsimError: an unknown field name or a value that fails validation.
        """
        if not update:
            return super().model_copy(deep=deep)
        data = self.model_dump()
        data.update({k: _dumped(v) for k, v in update.items()})
        return _validate_spec(data, where=f"{self.id}.model_copy()")


#: Architecture labels perfsim knows and the compute capabilities (lowest, highest) each
#: covers (CUDA C++ Programming Guide, "Compute Capabilities"; sm_110 is Jetson Thor's
#: Blackwell): a spec naming one of them must carry a compute capability in its range
#: (a fresh user's report: ``arch = "volta"`` was taken on a Hopper spec). Other labels are
#: taken as they are (a hypothetical part's).
ARCH_COMPUTE_CAPABILITIES = {"volta": ((7, 0), (7, 2)), "turing": ((7, 5), (7, 5)),
                             "ampere": ((8, 0), (8, 7)), "ada": ((8, 9), (8, 9)),
                             "hopper": ((9, 0), (9, 0)), "blackwell": ((10, 0), (11, 0)),
                             "blackwell-geforce": ((12, 0), (12, 1))}


def compute_capability_numbers(text: str) -> tuple[int, int]:
    """``(major, minor)`` of a compute capability such as ``"9.0"`` or ``"9.0a"`` (the
    suffix names architecture-specific features and does not change the numbers)."""
    major, minor = text.split(".", 1)
    return int(major), int(minor.rstrip("abcdefghijklmnopqrstuvwxyz"))


_MISSING = object()


def _cap_mma_sync(spec, fields: dict, data: dict) -> None:
    """:meth:`GPUSpec.replace`'s rule for the mma.sync rates, on the dumped ``data``."""
    table, legacy = "tensor_flops_per_clk_per_sm", "mma_sync_flops_per_clk_per_sm"
    if table not in fields or legacy in fields or \
            data.get("native_tensor_family", spec.native_tensor_family) == "mma_sync":
        return
    old, new = getattr(spec, table), data[table]
    if not isinstance(new, dict) or not isinstance(data.get(legacy), dict):
        return                  # not a table: validation names it
    capped, notes = dict(data[legacy]), {}
    for dtype, rate in new.items():
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                   for x in (rate, capped.get(dtype, 0.0), old.get(dtype, 0.0))):
            continue            # not a number: validation names it
        lowered = dtype not in old or rate < old[dtype]
        if lowered and dtype in capped and rate < capped[dtype]:
            notes[f"{legacy}.{dtype}"] = (
                f"what-if: capped at {table}.{dtype} set by GPUSpec.replace() (the same tensor "
                f"cores run mma.sync; was {capped[dtype]!r} in {spec.id})")
            capped[dtype] = rate
    for dtype in [d for d in capped if d in old and d not in new]:
        notes[f"{legacy}.{dtype}"] = (
            f"what-if: removed with {table}.{dtype} by GPUSpec.replace() (the same tensor cores "
            f"run mma.sync; was {capped[dtype]!r} in {spec.id})")
        del capped[dtype]
    if notes:
        data[legacy] = capped
        fields[legacy] = capped     # so the copy lists it among the fields changed
        fields["sources"] = {**notes, **(fields.get("sources") or {})}


def _dumped(value):
    """A field's value as ``model_dump`` writes it (a nested model as its dict)."""
    return value.model_dump() if isinstance(value, BaseModel) else value


def _leaves(key: str, value):
    """``(dotted key, value)`` of every entry of a (nested) table field, or the field itself:
    the keys ``GPUSpec.sources`` uses."""
    if isinstance(value, dict) and value:
        for sub, item in value.items():
            yield from _leaves(f"{key}.{sub}", item)
    else:
        yield key, value


def _validate_spec(data: dict, where: str) -> GPUSpec:
    try:
        return GPUSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        last = str(first["loc"][-1]) if first["loc"] else ""
        if last and msg.startswith(last + "["):     # the message names the table entry
            loc = loc[:-len(last)].rstrip(".")
        if ("input" in first and "got" not in msg and not isinstance(first["input"], dict)
                # ours name a value of the wrong type already ("not str 'lots'")
                and f"{type(first['input']).__name__} {first['input']!r}" not in msg):
            msg = f"{msg}, got {first['input']!r}"      # pydantic's own checks omit it
        extra = [".".join(str(p) for p in e["loc"]) for e in exc.errors()
                 if e["type"] == "extra_forbidden"]
        if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
            msg += did_you_mean(last, GPUSpec.model_fields)
        if first["type"] == "missing" and extra:
            # a missing field beside keys the schema lacks: most often one misspelt
            hints = [f"{key!r} for {close!r}" for key in extra
                     if (close := closest(key, GPUSpec.model_fields))]
            msg += (f" (the file has {'keys' if len(extra) > 1 else 'a key'} no GPU spec "
                    f"takes: {', '.join(map(repr, extra))}; misspelt?"
                    + (f" perhaps {', '.join(hints)}" if hints else "") + ")")
        others = sorted({".".join(str(p) for p in e["loc"]) or "(the spec)"
                         for e in exc.errors()[1:]} - {loc})
        if others:      # one message, but every field that failed named
            msg += f" (also invalid: {', '.join(others)})"
        raise PerfsimError(f"{where}: {loc + ': ' if loc else ''}{msg}") from None
