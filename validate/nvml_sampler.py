"""Background NVML sampling of SM clock, board power, temperature and clock-event reasons.

Used by :mod:`perfsim.validate.external` (one summary per timed region) and
:mod:`perfsim.validate.power_probe` (full traces). pynvml (the ``nvidia-ml-py`` package) is
imported inside :class:`NvmlSampler`, so this module imports without it.

Power is read two ways, both in watts: ``nvmlDeviceGetPowerUsage`` (``power_avg_w``; on
Hopper the driver averages it over about a second) and, where the driver has it, the field
``NVML_FI_DEV_POWER_INSTANT`` through ``nvmlDeviceGetFieldValues`` (``power_inst_w``).
Summaries prefer the instant field and say which one they used.
"""

from __future__ import annotations

import threading
import time

#: Clock-event ("throttle") reason bits of NVML (nvml.h ``nvmlClocksEventReason*``).
REASON_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
#: ``NVML_FI_DEV_POWER_INSTANT`` in nvml.h (used if pynvml lacks the constant).
FI_POWER_INSTANT = 186


def reason_names(mask: int) -> list[str]:
    """Names of the reason bits set in ``mask`` (unknown bits as hex)."""
    names = [name for bit, name in REASON_BITS.items() if mask & bit]
    rest = mask & ~sum(REASON_BITS)
    if rest:
        names.append(hex(rest))
    return names


class NvmlSampler:
    """Samples device ``index`` every ``period_s`` in a daemon thread between :meth:`start`
    and :meth:`stop`. Each sample is a dict: ``t`` (s, ``time.perf_counter``), ``sm_hz``,
    ``mem_hz``, ``power_avg_w``, ``power_inst_w`` (None if unavailable), ``temp_c``,
    ``reasons`` (bit mask)."""

    def __init__(self, index: int = 0, period_s: float = 0.005):
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.period_s = period_s
        self._fid = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", FI_POWER_INSTANT)
        self._reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                         or getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        self._has_instant = self._instant() is not None
        self._thread = None
        self._stop = threading.Event()
        self.samples: list[dict] = []

    def _instant(self):
        try:
            vals = self.nv.nvmlDeviceGetFieldValues(self.handle, [self._fid])
            v = vals[0]
            if getattr(v, "nvmlReturn", 0) != 0:
                return None
            return v.value.uiVal / 1000.0
        except Exception:  # noqa: BLE001 - field absent on this driver
            return None

    def read(self) -> dict:
        """One sample now."""
        nv, h = self.nv, self.handle
        s = {"t": time.perf_counter()}
        try:
            s["sm_hz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM) * 1e6
        except Exception:  # noqa: BLE001
            s["sm_hz"] = None
        try:
            s["mem_hz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM) * 1e6
        except Exception:  # noqa: BLE001
            s["mem_hz"] = None
        try:
            s["power_avg_w"] = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
        except Exception:  # noqa: BLE001
            s["power_avg_w"] = None
        s["power_inst_w"] = self._instant() if self._has_instant else None
        try:
            s["temp_c"] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        except Exception:  # noqa: BLE001
            s["temp_c"] = None
        try:
            s["reasons"] = int(self._reasons(h)) if self._reasons else None
        except Exception:  # noqa: BLE001
            s["reasons"] = None
        return s

    def _loop(self):
        nxt = time.perf_counter()
        while not self._stop.is_set():
            self.samples.append(self.read())
            nxt += self.period_s
            delay = nxt - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.perf_counter()

    def start(self) -> NvmlSampler:
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._thread = None
        return self.samples

    def device_limits(self) -> dict:
        """Power limits and clock ranges (each None where the driver refuses)."""
        nv, h = self.nv, self.handle
        out = {}

        def get(name, fn):
            try:
                out[name] = fn()
            except Exception as exc:  # noqa: BLE001
                out[name] = f"unavailable: {type(exc).__name__}"

        get("name", lambda: _text(nv.nvmlDeviceGetName(h)))
        get("driver", lambda: _text(nv.nvmlSystemGetDriverVersion()))
        get("power_management_limit_w", lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1e3)
        get("enforced_power_limit_w", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3)
        get("power_limit_constraints_w",
            lambda: [x / 1e3 for x in nv.nvmlDeviceGetPowerManagementLimitConstraints(h)])
        get("default_power_limit_w",
            lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1e3)
        get("max_sm_clock_hz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM) * 1e6)
        get("max_mem_clock_hz",
            lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM) * 1e6)
        get("pstate0_sm_clock_range_hz", lambda: [
            x * 1e6 for x in nv.nvmlDeviceGetMinMaxClockOfPState(h, nv.NVML_CLOCK_SM,
                                                                  nv.NVML_PSTATE_0)])
        get("applications_sm_clock_hz",
            lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM) * 1e6)
        get("default_applications_sm_clock_hz",
            lambda: nv.nvmlDeviceGetDefaultApplicationsClock(h, nv.NVML_CLOCK_SM) * 1e6)
        get("supported_sm_clocks_mhz_min_max", lambda: _minmax(
            nv.nvmlDeviceGetSupportedGraphicsClocks(
                h, nv.nvmlDeviceGetSupportedMemoryClocks(h)[0])))
        get("power_instant_field", lambda: self._has_instant)
        get("temperature_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        return out


def _text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def _minmax(values):
    values = list(values)
    return [min(values), max(values)] if values else None


def summarize(samples: list[dict]) -> dict:
    """Summary of a timed region's samples (the row fields of external.py)."""
    def vals(key):
        return [s[key] for s in samples if s.get(key) is not None]

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    clocks, inst, avg, temps = vals("sm_hz"), vals("power_inst_w"), vals("power_avg_w"), \
        vals("temp_c")
    power = inst or avg
    mask = 0
    for r in vals("reasons"):
        mask |= r
    return {
        "n_samples": len(samples),
        "sm_clock_mean_hz": mean(clocks), "sm_clock_min_hz": min(clocks) if clocks else None,
        "sm_clock_max_hz": max(clocks) if clocks else None,
        "mem_clock_mean_hz": mean(vals("mem_hz")),
        "power_mean_w": mean(power), "power_max_w": max(power) if power else None,
        "power_source": ("NVML_FI_DEV_POWER_INSTANT" if inst else
                         "nvmlDeviceGetPowerUsage (driver-averaged)" if avg else None),
        "power_avg_field_mean_w": mean(avg),
        "temperature_mean_c": mean(temps), "temperature_max_c": max(temps) if temps else None,
        "throttle_reasons_mask": mask,
        "throttle_reasons_seen": reason_names(mask),
    }
