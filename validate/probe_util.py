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


def smid_reader():
    """A Triton device function ``f(dummy) -> int32`` reading ``%smid``, the SM a CTA runs on
    (``dummy``: any int tensor). Not pure."""
    import triton
    import triton.language as tl

    @triton.jit
    def smid(dummy):
        return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dummy],
                                         dtype=tl.int32, is_pure=False, pack=1)

    return smid


def attn_tile_step():
    """A Triton device function ``f(a, b, c, s, acc, m_i, l_i) -> (s, acc, m_i, l_i)``: one
    tile of the GEMM → online softmax → GEMM loop of ``probe_mma_exp`` (mode ``attn``) and
    ``probe_cta_lone``: ``s = A B`` (with the last ``s`` times zero as its accumulator, so
    the compiler cannot hoist it out of a loop), the row max, ``exp2(s − m)``, the row sum, the
    rescale of ``acc``, then ``acc += P C``."""
    import triton
    import triton.language as tl

    softmax = online_softmax()

    @triton.jit
    def step(a, b, c, s, acc, m_i, l_i):
        s = tl.dot(a, b, s * 0.0)
        p, acc, m_new, l_i = softmax(s, acc, m_i, l_i)
        acc = tl.dot(p.to(tl.bfloat16), c, acc)
        return s, acc, m_new, l_i

    return step


def online_softmax():
    """A Triton device function ``f(s, acc, m_i, l_i) -> (p, acc, m_i, l_i)``: the online
    softmax of one score tile ``s`` (scaled by 2^-10): the row max, ``p = exp2(s − m)``, the
    row sum and the rescale of ``acc`` (:func:`attn_tile_step`, ``probe_flex_loop``)."""
    import triton
    import triton.language as tl

    @triton.jit
    def softmax(s, acc, m_i, l_i):
        t = s * 0.0009765625
        m_new = tl.maximum(m_i, tl.max(t, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(t - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        return p, acc, m_new, l_i

    return softmax


def tile_loader():
    """A Triton device function ``f(A, B, C, BM, BN, D) -> (a, b, c)``: the A (BM x D),
    B (D x BN) and C (BN x D) tiles of :func:`abc_tiles`, loaded whole."""
    import triton
    import triton.language as tl

    @triton.jit
    def load(A, B, C, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
        a = tl.load(A + rm[:, None] * D + rd[None, :])
        b = tl.load(B + rd[:, None] * BN + rn[None, :])
        c = tl.load(C + rn[:, None] * D + rd[None, :])
        return a, b, c

    return load


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


def abc_tiles(bm: int, bn: int, d: int):
    """The A (BM x D), B (D x BN) and C (BN x D) bf16 tiles of the GEMM-exp-GEMM loop probes
    (random, scaled by 1/8 so ``exp2`` of their products stays finite), on the GPU."""
    import torch

    return tuple(torch.randn(*shape, device="cuda", dtype=torch.bfloat16) / 8
                 for shape in ((bm, d), (d, bn), (bn, d)))


def time_tile_loops(kernel, out_path: str, configs, modes, ctas_per_sm, iters: int, ptx,
                    launch_extra=None, row_extra=None) -> list[dict]:
    """Time a Triton loop ``kernel(A, B, C, Y, iters, BM=, BN=, D=, MODE=, **launch_extra)``
    (``probe_wgmma_exp``, ``probe_mma_exp``) for every ``(BM, BN, D, warps)`` of
    ``configs``, mode and CTAs per SM (a grid of that many CTAs per SM), back to back with
    NVML beside it. A configuration that does not compile (shared memory, registers) is a row
    with its ``error``. Rows carry the compiled registers, spills, shared memory and
    ``ptx(compiled)``, and cycles per loop iteration per SM at NVML's clock; the file is
    written after every configuration, so a run cut off keeps what it measured."""
    import torch

    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for bm, bn, d, warps in configs:
        a, b, c = abc_tiles(bm, bn, d)
        for mode_index, mode in enumerate(modes):
            for ctas in ctas_per_sm:
                grid = ctas * sms
                y = torch.empty(grid * bm * d, device="cuda", dtype=torch.float32)
                launch = {"BM": bm, "BN": bn, "D": d, "MODE": mode_index, "num_warps": warps,
                          **(launch_extra or {})}
                base = {"bm": bm, "bn": bn, "d": d, "warps": warps, "mode": mode,
                        **(row_extra or {}), "ctas_per_sm": ctas}
                try:
                    compiled = kernel[(grid,)](a, b, c, y, 4, **launch)
                    torch.cuda.synchronize()
                except Exception as exc:           # out of shared memory or registers
                    rows.append({**base, "error": str(exc)[:200]})
                    continue

                def call(grid=grid, args=(a, b, c, y, iters), launch=launch):
                    kernel[(grid,)](*args, **launch)

                call()                                                        # warm
                torch.cuda.synchronize()
                timed = back_to_back(call, handle, 0.2)
                rows.append({**base, "grid": grid, "iters": iters, **timed,
                             "regs": getattr(compiled, "n_regs", None),
                             "spills": getattr(compiled, "n_spills", None),
                             "shared": compiled.metadata.shared, "ptx": ptx(compiled),
                             "cycles_per_iter_per_sm": timed["seconds"]
                             * timed["sm_clock_mhz_mean"] * 1e6 / iters})
                print(json.dumps(rows[-1]), flush=True)
        write_rows(out_path, rows)
    return rows
