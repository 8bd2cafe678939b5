"""Microbenchmarks of the GPU's ceilings, for ``perfsim calibrate``.

Each function returns a :class:`Measurement`: a rate in SI units plus the method in words. All
use fresh random data (never zeros: a bf16 matmul ran 13 % faster on zeros on an H200,
validate/reports/h200/probes/power-microbench.json shows why: zeros draw half the power) and
``triton.testing.do_bench`` medians; each takes well under 5 s on an H200.

* :func:`hbm_copy` — device-to-device copies over several rotated buffers, bytes read + written.
* :func:`matmul` — dense 8192³ products per dtype through torch (cuBLAS; WGMMA on Hopper).
* :func:`exp2` — MUFU ex2 rate: independent ``tl.exp2`` chains on registers; PTX checked.
* :func:`fma` — FP32 FMA rate: independent ``tl.fma`` chains on registers; PTX checked.
* :func:`load_chain` — an unpipelined CTA's load step, ``latency + bytes / per-CTA rate``.
* :func:`launch_overhead` — median time of a one-thread Triton kernel, plus back-to-back rates.
* :func:`smem_bandwidth` — not measured (see its docstring).

Not measured either: the ``mma.sync`` tensor rate (``mma_sync_flops_per_clk_per_sm``). A Triton
probe (``tl.dot`` in a loop on tiles with M = 32, which Triton 3.6 compiles to mma.sync on sm_90)
reloads its loop-invariant operands from shared memory every iteration (12 ldmatrix and a
bar.sync per 16 mma.sync in the PTX, compiled for sm_90 offline), so it would time shared memory,
not the tensor cores; the base profile's per-clock value is kept.

torch and triton are imported inside the functions.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

#: Square matmul size (M = N = K); 2·8192³ = 1.1 TFLOP, about 1.4 ms at 790 TFLOP/s.
MATMUL_N = 8192
MATMUL_DTYPES = ("bf16", "fp16", "tf32", "fp8_e4m3")
#: HBM copy: this many source/destination pairs of this size (4 GiB in all), rotated.
COPY_BYTES, COPY_BUFFERS = 512 * 2**20, 4
#: Register-loop kernels: CTAs per SM, threads, elements (independent chains) per thread.
CTAS_PER_SM, WARPS, CHAINS = 8, 4, 8
REP_MS = 300


@dataclass(frozen=True)
class Measurement:
    """One measured ceiling. ``value`` is None when it was not measured (``method`` says why).

    Units: ``B/s`` (bytes read + written per second), ``FLOP/s``, ``results/s`` (exp2),
    ``s`` (seconds per launch).
    """

    name: str
    value: float | None
    unit: str
    method: str
    details: dict = field(default_factory=dict)


def _median_s(fn, rep_ms: int = REP_MS) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=rep_ms, return_mode="median") * 1e-3


def _sm_count() -> int:
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count


def hbm_copy(nbytes: int = COPY_BYTES, buffers: int = COPY_BUFFERS) -> Measurement:
    """Device-to-device copy bandwidth (B/s), counting bytes read plus bytes written."""
    import torch

    pairs = [(torch.randn(nbytes // 4, device="cuda"), torch.empty(nbytes // 4, device="cuda"))
             for _ in range(buffers)]
    cycle = itertools.cycle(pairs)

    def fn():
        src, dst = next(cycle)
        dst.copy_(src)

    t = _median_s(fn)
    return Measurement("hbm_copy", 2 * nbytes / t, "B/s",
                       f"torch Tensor.copy_ of {nbytes / 2**20:.0f} MiB fp32, {buffers} "
                       f"source/destination pairs rotated, L2 flushed by do_bench; "
                       f"(read + write bytes) / do_bench median {t * 1e3:.3f} ms")


def matmul(dtype: str, n: int = MATMUL_N) -> Measurement:
    """Dense ``n x n x n`` matmul rate (FLOP/s = 2n³ / median) through torch for ``dtype``.

    Raises:
        RuntimeError: the dtype has no path in this torch/GPU (e.g. no ``torch._scaled_mm``).
    """
    import torch

    mm = torch.backends.cuda.matmul
    how = "torch.mm"
    if dtype in ("bf16", "fp16"):
        tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
        a, b = (torch.randn(n, n, device="cuda", dtype=tdt) for _ in range(2))
        out = torch.empty(n, n, device="cuda", dtype=tdt)

        def fn():
            torch.mm(a, b, out=out)
    elif dtype == "tf32":
        a, b = (torch.randn(n, n, device="cuda") for _ in range(2))
        out = torch.empty(n, n, device="cuda")

        def fn():
            torch.mm(a, b, out=out)
        how = "torch.mm fp32 with TF32 matmuls allowed"
    elif dtype == "fp8_e4m3":
        if not hasattr(torch, "_scaled_mm"):
            raise RuntimeError("torch._scaled_mm is not available")
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
        one = torch.ones((), device="cuda")

        def fn():
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                             use_fast_accum=True)
        how = "torch._scaled_mm e4m3 x e4m3 -> bf16, use_fast_accum=True"
    else:
        raise ValueError(f"dtype must be one of {MATMUL_DTYPES}, got {dtype!r}")
    restore = _allow_tf32(mm, dtype == "tf32")
    try:
        t = _median_s(fn)
    finally:
        restore()
    return Measurement(f"matmul_{dtype}", 2 * n**3 / t, "FLOP/s",
                       f"{how}, {n}x{n}x{n} random normal, 2n^3 / do_bench median "
                       f"{t * 1e3:.3f} ms")


def _allow_tf32(mm, enabled: bool):
    """Set TF32 matmuls on or off (new ``fp32_precision`` API where present); returns undo."""
    if hasattr(mm, "fp32_precision"):
        old = mm.fp32_precision
        mm.fp32_precision = "tf32" if enabled else "ieee"
        return lambda: setattr(mm, "fp32_precision", old)
    old = mm.allow_tf32
    mm.allow_tf32 = enabled
    return lambda: setattr(mm, "allow_tf32", old)


def _ptx_count(kernel, op: str) -> int:
    try:
        return kernel.asm["ptx"].count(op)
    except (AttributeError, KeyError, TypeError):
        return -1


def _register_loop(kind: str, iters: int) -> tuple[float, int, int]:
    """Run the exp2 or FMA register-loop kernel: (median s, operations, PTX count)."""
    import torch

    from perfsim.validate import _bench_kernels as bk

    block = WARPS * 32 * CHAINS
    grid = (_sm_count() * CTAS_PER_SM,)
    x = torch.rand(grid[0] * block, device="cuda") * 0.5 - 1.0  # in [-1, -0.5)
    y = torch.empty_like(x)
    if kind == "exp2":
        def launch():
            return bk.exp2_loop[grid](x, y, iters, BLOCK=block, UNROLL=bk.UNROLL,
                                      num_warps=WARPS)
        op = "ex2.approx"
    else:
        def launch():
            return bk.fma_loop[grid](x, y, iters, 0.9999, 1e-4, BLOCK=block, UNROLL=bk.UNROLL,
                                     num_warps=WARPS)
        op = "fma.rn.f32"
    count = _ptx_count(launch(), op)
    return _median_s(launch), grid[0] * block * iters * bk.UNROLL, count


def exp2(iters: int = 512) -> Measurement:
    """MUFU ex2 throughput (results/s) from independent ``tl.exp2`` chains on registers."""
    t, ops, count = _register_loop("exp2", iters)
    if count <= 0:
        return Measurement("mufu_exp2", None, "results/s",
                           f"not measured: no ex2.approx in the PTX (count {count})")
    return Measurement("mufu_exp2", ops / t, "results/s",
                       f"Triton kernel, {CHAINS} independent x = -tl.exp2(x) chains per thread "
                       f"(fp32, registers), {WARPS} warps x {CTAS_PER_SM} CTAs/SM; PTX has "
                       f"{count} ex2.approx; {ops:.3g} results / do_bench median "
                       f"{t * 1e3:.3f} ms", {"ptx_ex2": count})


def fma(iters: int = 4096) -> Measurement:
    """FP32 FMA throughput (FLOP/s, 2 per FMA) from independent ``tl.fma`` chains."""
    t, ops, count = _register_loop("fma", iters)
    if count <= 0:
        return Measurement("fp32_fma", None, "FLOP/s",
                           f"not measured: no fma.rn.f32 in the PTX (count {count})")
    return Measurement("fp32_fma", 2 * ops / t, "FLOP/s",
                       f"Triton kernel, {CHAINS} independent x = fma(x, a, b) chains per thread "
                       f"(fp32, registers), {WARPS} warps x {CTAS_PER_SM} CTAs/SM; PTX has "
                       f"{count} fma.rn.f32; 2 x {ops:.3g} FMA / do_bench median "
                       f"{t * 1e3:.3f} ms", {"ptx_fma": count})


def launch_overhead(back_to_back: int = 2000) -> Measurement:
    """Seconds per kernel launch: do_bench median of a one-element Triton kernel (the GPU-side
    cost of a launch in a busy stream); back-to-back host-bound intervals of that kernel and
    of a tiny eager torch op are kept in ``details``."""
    import torch

    from perfsim.validate import _bench_kernels as bk

    buf = torch.zeros(1, device="cuda")
    t = _median_s(lambda: bk.noop[(1,)](buf), rep_ms=200)

    def interval(fn) -> float:
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(back_to_back):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e-3 / back_to_back

    triton_gap = interval(lambda: bk.noop[(1,)](buf))
    eager_gap = interval(lambda: buf.add_(1.0))
    return Measurement("launch_overhead", t, "s",
                       f"do_bench median of a one-element Triton store kernel, grid (1,): "
                       f"{t * 1e6:.2f} us; back-to-back intervals over {back_to_back} launches: "
                       f"Triton {triton_gap * 1e6:.2f} us, "
                       f"eager torch add_ {eager_gap * 1e6:.2f} us",
                       {"triton_back_to_back_s": triton_gap, "eager_back_to_back_s": eager_gap})


#: load_chain: tiles of 64 rows x these fp32 columns (8-64 KiB), CTAs (one per SM on 32 SMs,
#: far from the HBM limit), steps per CTA.
CHAIN_COLS, CHAIN_GRID, CHAIN_STEPS = (32, 64, 128, 256), 32, 256


def load_chain() -> list[Measurement]:
    """An unpipelined CTA's global-load step (4 warps load a tile, wait, add, store, next):
    per-step time at four tile sizes, fitted by least squares as ``latency + bytes / rate``.
    Returns two measurements: ``load_latency_s`` (s) and ``cta_load_bandwidth`` (B/s), the
    GPUSpec fields ``load_latency_s`` and ``cta_load_bandwidth_bytes_per_s`` that time
    ``KernelCost.load_chain`` (perfsim.timing)."""
    import numpy as np
    import torch

    from perfsim.validate import _bench_kernels as bk

    sizes, times = [], []
    for cols in CHAIN_COLS:
        n = CHAIN_GRID * CHAIN_STEPS * 64 * cols
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)

        def run(x=x, y=y, cols=cols):
            bk.load_chain[(CHAIN_GRID,)](x, y, CHAIN_STEPS, ROWS=64, COLS=cols, num_warps=4,
                                        num_stages=1)
        run()
        sizes.append(64 * cols * 4)
        times.append(_median_s(run, rep_ms=200) / CHAIN_STEPS)
    slope, latency = np.polyfit(sizes, times, 1)
    steps = ", ".join(f"{b // 1024} KiB {t * 1e6:.3f} us" for b, t in zip(sizes, times))
    method = (f"Triton kernel, one 4-warp CTA on each of {CHAIN_GRID} SMs walks {CHAIN_STEPS} "
              f"fp32 tiles (load, add 1, store, no prefetch); per step: {steps}; least-squares "
              "fit t = latency + bytes / rate")
    return [Measurement("load_latency_s", float(latency), "s", method),
            Measurement("cta_load_bandwidth", float(1 / slope), "B/s", method)]


def smem_bandwidth() -> Measurement:
    """Not measured: Triton exposes no shared-memory load or store, so a Triton kernel cannot
    stream shared memory alone — any kernel that stages data there (layout conversions, dot
    operands) mixes in global loads, barriers and other instructions, giving a lower bound of
    unknown tightness. The base profile's value is kept."""
    return Measurement("smem_bandwidth", None, "B/s",
                       "not measured: Triton has no explicit shared-memory load/store, so no "
                       "credible shared-memory-only stream can be written in it; base value kept")


def sm_clock_mhz() -> float | None:
    """Current SM clock through NVML (torch.cuda.clock_rate), or None if unavailable."""
    try:
        import torch

        return float(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - NVML missing or refused
        return None


def run_all(on_result=None) -> list[Measurement]:
    """Every microbenchmark; one that raises is returned unmeasured with the error."""
    jobs = [("hbm_copy", hbm_copy)]
    jobs += [(f"matmul_{d}", lambda d=d: matmul(d)) for d in MATMUL_DTYPES]
    jobs += [("mufu_exp2", exp2), ("fp32_fma", fma), ("launch_overhead", launch_overhead),
             ("load_chain", load_chain), ("smem_bandwidth", smem_bandwidth)]
    from perfsim.validate import eager_ceilings

    jobs += eager_ceilings.jobs()
    out = []
    for name, job in jobs:
        try:
            got = job()
        except Exception as exc:  # noqa: BLE001 - recorded as not measured
            text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            got = Measurement(name, None, "", f"not measured: {type(exc).__name__}: {text}")
        for m in got if isinstance(got, list) else [got]:
            out.append(m)
            if on_result:
                on_result(m)
    return out
