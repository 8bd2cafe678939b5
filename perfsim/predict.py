"""``perfsim.predict``: one workload, one GPU, one algorithm -> :class:`Prediction`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from perfsim.algorithms import Algorithm, Dims, resolve
from perfsim.gpu import GPUSpec, load_gpu
from perfsim.kernel import UNITS
from perfsim.prediction import Counts, Prediction, model_flops
from perfsim.timing import KernelTiming, TimingParams, time_kernel
from perfsim.workload import AttentionWorkload


def predict(workload: AttentionWorkload, gpu: str | Path | GPUSpec = "h100-sxm5",
            algorithm: str | Algorithm = "fa2", timing: TimingParams | None = None,
            ) -> Prediction:
    """Predict the time of ``algorithm`` running ``workload`` on ``gpu``.

    Args:
        workload: the attention call.
        gpu: catalog id (``perfsim.gpus()``), path to a ``.toml`` profile, or a ``GPUSpec``.
        algorithm: a name (``standard``, ``fa1``, ``fa2``, ``fa3``, ``fa4``: defaults) or a
            config such as ``perfsim.algorithms.FA2(block_m=64)``.
        timing: efficiency factors and overheads; default ``TimingParams.for_gpu(gpu)``.

    Returns:
        A :class:`perfsim.prediction.Prediction` (seconds, TFLOP/s, binding unit, counts,
        memory footprint, per-kernel breakdown, ``explain()``).

    Raises:
        perfsim.PerfsimError: unknown GPU or algorithm name.
        perfsim.InfeasibleError: the configuration cannot run on this workload/GPU.
    """
    spec = load_gpu(gpu)
    algo = resolve(algorithm)
    params = timing or TimingParams.for_gpu(spec)
    dims = Dims.of(workload)
    launched = [k for k in algo.kernels(dims, spec) if k.grid]   # drop kernels not launched
    kernels = [time_kernel(k, spec, params) for k in launched]
    seconds, unit_seconds, bound_seconds, bound = aggregate(kernels, params)
    return Prediction(
        workload=workload, gpu=spec, algorithm=algo, seconds=seconds,
        tflops=model_flops(workload) / seconds / 1e12, bound=str(bound),
        unit_seconds={u: float(t) for u, t in unit_seconds.items()},
        bound_seconds={u: float(t) for u, t in bound_seconds.items()},
        counts=Counts.total(kernels), memory_bytes=float(algo.memory_bytes(dims, spec)),
        kernels=kernels, timing=params)


#: What a prediction can be bound by: a unit, the load latency of an unpipelined kernel
#: (``KernelCost.load_chain``), or the kernel-launch overhead.
BOUNDS: tuple[str, ...] = (*UNITS, "latency", "launch")


def aggregate(kernels: list[KernelTiming], params: TimingParams):
    """Totals over kernels (scalars or numpy arrays, elementwise).

    Returns:
        ``(seconds, unit_seconds, bound_seconds, bound)``: total time; per unit its time
        summed over kernels; per unit the kernel time during which it was the binding unit
        (``launch`` for launch overheads); and the unit with the largest such time.
    """
    seconds = sum(k.seconds for k in kernels)
    unit_seconds = {u: sum(k.unit_seconds[u] for k in kernels) for u in UNITS}
    bound_seconds = {b: 0.0 for b in BOUNDS}
    for k in kernels:
        launched = np.asarray(k.cost.grid) > 0
        overhead = np.where(launched, params.launch_overhead_s, 0.0)
        body = k.seconds - overhead
        for u in (b for b in BOUNDS if b != "launch"):
            bound_seconds[u] = bound_seconds[u] + np.where(np.asarray(k.bound) == u, body, 0.0)
        bound_seconds["launch"] = bound_seconds["launch"] + overhead
    # broadcast: a kernel's grid may depend on fewer sweep axes than its times
    stacked = np.stack(np.broadcast_arrays(*[np.asarray(bound_seconds[b], dtype=float)
                                             for b in BOUNDS]))
    bound = np.array(BOUNDS)[np.argmax(stacked, axis=0)]
    if stacked.ndim == 1:
        bound_seconds = {b: float(v) for b, v in bound_seconds.items()}
        return float(seconds), unit_seconds, bound_seconds, str(bound)
    return seconds, unit_seconds, bound_seconds, bound
