"""What the microbenchmarks share: a back-to-back timing loop with NVML sampled beside it, the
JSON file every probe writes, and the Triton readers of the SM's cycle counter and the global
nanosecond timer (torch, triton and pynvml are imported inside the functions)."""

from __future__ import annotations

import json
import time


def tick_readers():
    """``(globaltimer, clock64)``: Triton device functions ``f(dummy) -> int64`` reading
    ``%globaltimer`` (ns) and ``%clock64`` (this SM's cycles); ``dummy`` is any int tensor
    (make it depend on a result to order the read after it). Not pure: never merged or
    hoisted."""
    import triton
    import triton.language as tl

    @triton.jit
    def globaltimer(dummy):
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dummy],
                                         dtype=tl.int64, is_pure=False, pack=1)

    @triton.jit
    def clock64(dummy):
        return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [dummy],
                                         dtype=tl.int64, is_pure=False, pack=1)

    return globaltimer, clock64


def nvml_handle():
    """NVML's handle of GPU 0 (NVML initialised)."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetHandleByIndex(0)


def back_to_back(call, handle, seconds: float = 0.25) -> dict:
    """Run ``call`` back to back for about ``seconds`` between two CUDA events, sampling the SM
    clock and board power after each launch: ``seconds`` per call, the mean SM clock (MHz),
    the number of clock samples and the mean power of the second half (W, once settled)."""
    import pynvml
    import torch

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    clocks, watts, reps = [], [], 0
    start.record()
    t0 = time.time()
    while time.time() - t0 < seconds:
        call()
        reps += 1
        clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        watts.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)
    end.record()
    torch.cuda.synchronize()
    settled = watts[len(watts) // 2:]
    return {"seconds": start.elapsed_time(end) / 1e3 / reps,
            "sm_clock_mhz_mean": sum(clocks) / len(clocks), "n_clock_samples": len(clocks),
            "power_w_mean": sum(settled) / max(len(settled), 1)}


def write_rows(out_path: str, rows: list, **extra) -> None:
    """The probe's JSON file: the device, its SM count, torch's version, ``extra`` and ``rows``."""
    import torch

    with open(out_path, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(0),
                   "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
                   "torch": torch.__version__, **extra, "rows": rows}, fh, indent=1)
