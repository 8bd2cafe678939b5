"""``perfsim calibrate``: a GPU profile whose ceilings are measured on the GPU at hand.

Starts from a catalog spec (``--base``, default ``h200-sxm``) and replaces what the
microbenchmarks (:mod:`perfsim.validate.microbench`) measured:

==================================  =========================================================
field                               from
==================================  =========================================================
``hbm_bandwidth_bytes_per_s``       device-to-device copy, bytes read + written per second
``tensor_flops_per_clk_per_sm[dt]`` dense 8192³ matmul FLOP/s ÷ (``sm_count`` × ``clock_hz``)
``mufu_ops_per_clk_per_sm``         exp2 results/s ÷ (``sm_count`` × ``clock_hz``)
``fp32_flops_per_clk_per_sm``       FMA FLOP/s ÷ (``sm_count`` × ``clock_hz``)
``sm_count``, ``l2_bytes``          torch.cuda.get_device_properties (when they differ)
``[calibration].launch_overhead_s`` median time of a trivial Triton kernel
``load_latency_s``,                 an unpipelined CTA's load step at four tile sizes,
``cta_load_bandwidth_bytes_per_s``  ``latency + bytes / rate`` (``microbench.load_chain``)
==================================  =========================================================

``clock_hz`` becomes the SM clock read (nvidia-smi) right after the microbenchmarks, when it can
be read (else the base spec's stays), so the per-clock rates are per actual cycle and
``rate_per_clk_per_sm × sm_count × clock_hz`` equals the measured rate; the unmeasured per-clock
rates (shared memory, ``mma.sync``) then run at that clock too. Every
replaced field's ``sources`` entry reads ``M: measured by perfsim calibrate on <device> <date>:
<method>``; what was not measured keeps the base value and source. The ``[calibration]`` table
(strings) records device, driver, versions, date and method; ``TimingParams.for_gpu`` reads
``launch_overhead_s`` from it and treats the rates as reachable (efficiency 1).
"""

from __future__ import annotations

import statistics
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from perfsim.errors import PerfsimError
from perfsim.gpu import GPUSpec
from perfsim.gpu_catalog import load_gpu
from perfsim.validate.microbench import Measurement
from perfsim.validate.tomlwrite import dumps, write_atomic

#: Measurement name -> (field, key in a per-dtype table or None, divide by SMs x clock?)
FIELDS = {
    "hbm_copy": ("hbm_bandwidth_bytes_per_s", None, False),
    "matmul_bf16": ("tensor_flops_per_clk_per_sm", "bf16", True),
    "matmul_fp16": ("tensor_flops_per_clk_per_sm", "fp16", True),
    "matmul_tf32": ("tensor_flops_per_clk_per_sm", "tf32", True),
    "matmul_fp8_e4m3": ("tensor_flops_per_clk_per_sm", "fp8_e4m3", True),
    "mufu_exp2": ("mufu_ops_per_clk_per_sm", None, True),
    "fp32_fma": ("fp32_flops_per_clk_per_sm", None, True),
    "load_latency_s": ("load_latency_s", None, False),
    "cta_load_bandwidth": ("cta_load_bandwidth_bytes_per_s", None, False),
}
#: Device properties that replace the base spec's when they differ.
#: (``hbm_bytes`` is not among them: torch reports the memory usable after the driver's
#: reservation, while the catalog holds the device's capacity.)
DEVICE_FIELDS = {"sm_count": "multi_processor_count", "l2_bytes": "L2_cache_size"}
METHOD = ("perfsim calibrate (perfsim.validate.microbench): fresh random data, "
          "triton.testing.do_bench medians; per-clock rates = measured rate / "
          "(sm_count x the SM clock read after the benchmarks)")


def build_profile(base: GPUSpec, measurements: list[Measurement], device: dict,
                  date: str, device_fields: dict | None = None) -> dict:
    """The calibrated profile as TOML-ready data (validated as a :class:`GPUSpec`).

    Args:
        base: the catalog spec to start from.
        measurements: microbenchmark results (unmeasured ones keep the base values).
        device: strings describing the device (``device``, ``driver``, ``torch`` ...).
        date: ISO date of the measurement.
        device_fields: measured ``sm_count``/``l2_bytes`` (ints), if known.

    Raises:
        perfsim.PerfsimError: the result does not validate as a GPUSpec.
    """
    data = base.model_dump(exclude_none=True)
    sources = dict(data.pop("sources", {}))
    name = device.get("device", "unknown device")
    tag = f"M: measured by perfsim calibrate on {name} {date}"
    for fld, value in (device_fields or {}).items():
        if value and value != data[fld]:
            data[fld] = int(value)
            sources[fld] = f"{tag}: torch.cuda.get_device_properties (base {base.id} had a " \
                           "different value)"
    clock_mhz = device.get("sm_clock_mhz_after_benchmarks")
    if clock_mhz and float(clock_mhz) > 0:
        data["clock_hz"] = float(clock_mhz) * 1e6
        sources["clock_hz"] = (f"{tag}: SM clock read by nvidia-smi right after the "
                               "microbenchmarks (the clock the measured rates ran at)")
    per_s = data["sm_count"] * data["clock_hz"]
    calibration = {k: str(v) for k, v in device.items()}
    calibration.update(date=date, base=base.id, method=METHOD)
    not_measured = []
    for m in measurements:
        if m.name == "launch_overhead" and m.value is not None:
            calibration["launch_overhead_s"] = repr(float(m.value))
            calibration["launch_overhead_method"] = m.method
            continue
        if m.name.startswith("eager_") and m.value is not None:
            calibration[m.name] = repr(float(m.value))
            calibration[f"{m.name}_method"] = m.method
            continue
        if m.value is None or m.name not in FIELDS:
            not_measured.append(f"{m.name}: {m.method}")
            continue
        fld, key, per_clock = FIELDS[m.name]
        value = m.value / per_s if per_clock else m.value
        method = m.method + (f"; per clock: {m.value:.4g} {m.unit} / ({data['sm_count']} SMs x "
                             f"{data['clock_hz']:.4g} Hz)" if per_clock else "")
        if key is None:
            data[fld] = float(value)
            sources[fld] = f"{tag}: {method}"
        else:
            data[fld] = {**data[fld], key: float(value)}
            sources[f"{fld}.{key}"] = f"{tag}: {method}"
        calibration[f"measured_{m.name}"] = f"{m.value:.6g} {m.unit}"
    measured_dtypes = {m.name.removeprefix("matmul_") for m in measurements
                       if m.name.startswith("matmul_") and m.value is not None}
    if measured_dtypes:
        # an unmeasured dtype runs as efficiently as the GEMMs measured beside it: the
        # median of their measured per-clock rates over the base's (datasheet) ones
        table, base_table = data["tensor_flops_per_clk_per_sm"], base.tensor_flops_per_clk_per_sm
        ratios = sorted(table[dt] / base_table[dt] for dt in measured_dtypes
                        if base_table.get(dt))
        fraction = (statistics.median(ratios) if ratios else base.tensor_sustained_fraction)
        for dt in set(table) - measured_dtypes:
            table[dt] *= fraction
            sources[f"tensor_flops_per_clk_per_sm.{dt}"] = (
                f"I: not measured here: the base value x {fraction:.4g}, the measured GEMMs' "
                f"median share of their base rates "
                f"({base.sources.get(f'tensor_flops_per_clk_per_sm.{dt}', '')})")
        data["tensor_sustained_fraction"] = 1.0
        sources["tensor_sustained_fraction"] = (f"{tag}: the tensor rates above are measured "
                                                "GEMM rates (or scaled as their sources say)")
        # whole GEMMs already run below the pipe's rate, about where one Triton CTA per SM
        # does (the base's share, relative to the pipe): not charged twice
        data["wgmma_one_cta_fraction"] = 1.0
        sources["wgmma_one_cta_fraction"] = (
            f"{tag}: 1.0, not the base's {base.wgmma_one_cta_fraction:g}: the tensor rates "
            "above are whole measured GEMMs, which already run below the pipe's rate, near "
            "what one Triton CTA per SM reaches; a share above 1 for two CTAs cannot be written")
    if data.get("power_capped_clock_hz") is not None:
        data["power_capped_clock_hz"] = None    # the measured rates ran at whatever clock
        sources.pop("power_capped_clock_hz", None)
    if not_measured:
        calibration["not_measured"] = "; ".join(not_measured)
    data.update(id=f"{base.id}-calibrated", name=f"{name} (calibrated from {base.id})",
                sources=sources, calibration=calibration)
    try:
        GPUSpec.model_validate(data)
    except ValueError as exc:
        raise PerfsimError(f"calibrated profile does not validate: {exc}") from None
    return data


def write_profile(path: str | Path, data: dict) -> Path:
    """Write ``data`` as TOML atomically, after checking it reads back as a GPUSpec.

    Raises:
        perfsim.PerfsimError: the text does not round-trip to a valid spec.
    """
    text = f"# Calibrated GPU profile written by `perfsim calibrate`. Do not edit by hand.\n" \
           f"# {data.get('name', '')}\n\n" + dumps(data)
    try:
        GPUSpec.model_validate(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise PerfsimError(f"calibrated profile does not round-trip: {exc}") from None
    return write_atomic(path, text)


def calibrate(out: str | Path, base: str = "h200-sxm", on_result=None):
    """Run the microbenchmarks on the current CUDA device and write the profile to ``out``.

    Returns:
        ``(path, measurements, data)``.

    Raises:
        perfsim.PerfsimError: unknown base GPU, or a profile that does not validate.
    """
    import torch

    from perfsim.validate import microbench
    from perfsim.validate.session import device_info

    base_spec = load_gpu(base)
    device = device_info()
    props = torch.cuda.get_device_properties(0)
    measured_fields = {f: getattr(props, attr, None) for f, attr in DEVICE_FIELDS.items()}
    measurements = microbench.run_all(on_result)
    clock = microbench.sm_clock_mhz()
    if clock:
        device["sm_clock_mhz_after_benchmarks"] = f"{clock:.0f}"
    date = datetime.now(UTC).date().isoformat()
    data = build_profile(base_spec, measurements, device, date, measured_fields)
    return write_profile(out, data), measurements, data
