"""``perfsim.predict``: one workload, one GPU, one algorithm -> :class:`Prediction`."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np

from perfsim import fastpath
from perfsim.algorithms import Algorithm, Dims
from perfsim.algorithms.base import kernels_for, memory_for
from perfsim.errors import PerfsimError
from perfsim.frozen import replace
from perfsim.gpu import GPUSpec
from perfsim.gpu_catalog import load_gpu
from perfsim.implementations import resolve
from perfsim.kernel import BOUNDS, UNITS
from perfsim.mathops import asarray, maximum, take
from perfsim.power import call_clock
from perfsim.prediction import Counts, Prediction, credited_flops, model_flops
from perfsim.software import software_of
from perfsim.timing import KernelClock, KernelTiming, TimingParams, check_timing
from perfsim.workload import AttentionWorkload


def predict(workload: AttentionWorkload, gpu: str | Path | GPUSpec = "h100-sxm5",
            algorithm: str | Algorithm = "fa2", timing: TimingParams | dict | None = None,
            ) -> Prediction:
    """Predict the time of ``algorithm`` running ``workload`` on ``gpu``.

    Args:
        workload: the attention call.
        gpu: catalog id (``perfsim.gpus()``), path to a ``.toml`` profile, or a ``GPUSpec``.
        algorithm: an algorithm name (``standard``, ``fa1``, ``fa2``, ``fa3``, ``fa4``: the
            reference kernels' defaults), a config such as
            ``perfsim.algorithms.FA2(block_m=64)``, or an implementation preset
            (``sdpa-flash``, ``sdpa-cudnn``, ``flex``, ``flash-attn-cute``, ...:
            ``perfsim.implementations``), or a label with options as ``Prediction.to_dict()``
            and ``--json`` write it (``"fa2(block_m=64)"``, ``"sdpa-cudnn(pack_gqa=False)"``).
        timing: efficiency factors and overheads; default
            :func:`timing_for` ``(gpu, algorithm)`` (the GPU under the algorithm's software
            profile). To change one field and keep the rest, give a dict of the fields
            (``timing={"clock": 1.5e9}``, as ``perfsim.timing_for(gpu, algorithm,
            clock=1.5e9)``): a ``TimingParams`` given here replaces all of them, and is
            used as given — one built by ``timing_for`` for another GPU or algorithm
            carries that one's host floors and eager tables (a ``TimingParams`` does not
            record what it was built for, so this is not checked).

    Returns:
        A :class:`perfsim.prediction.Prediction` (seconds, TFLOP/s, binding unit, counts,
        memory footprint, per-kernel breakdown, ``explain()``).

    Raises:
        perfsim.PerfsimError: unknown GPU or algorithm name, or ``timing`` neither a
            ``TimingParams`` nor a dict of its fields (or a field it refuses).
        perfsim.InfeasibleError: the configuration cannot run on this workload/GPU.
    """
    if not isinstance(workload, AttentionWorkload):
        raise PerfsimError(f"predict() needs an AttentionWorkload, got "
                           f"{type(workload).__name__} (build one with "
                           "perfsim.AttentionWorkload(batch=..., heads=..., ...))")
    if not isinstance(timing, dict):
        check_timing(timing)
    spec = load_gpu(gpu)
    algo = resolve(algorithm)
    params = (_timing_of(spec, algo, timing) if isinstance(timing, dict)
              else timing or timing_for(spec, algo))
    dims = Dims.of(workload)
    # a structure met often runs as a compiled program (perfsim.fastpath)
    hot = fastpath.prepare(workload, dims, spec, algo, params, evaluate)
    runner = out = None
    if hot is not None:
        runner, out = hot.fields()
        if runner is not None and runner.verified:
            fastpath.STATS["hits"] += 1
            return _compiled_prediction(workload, dims, spec, algo, params,
                                        fastpath.totals(runner, out))
        if hot.entry is not None and hot.entry.runners and runner is None:
            fastpath.STATS["misses"] += 1
    start = time.perf_counter()
    prediction = _interpreted(workload, dims, spec, algo, params)
    if hot is not None:
        hot.after(prediction, runner, out, time.perf_counter() - start)
    return prediction


def _interpreted(workload: AttentionWorkload, dims: Dims, spec: GPUSpec, algo: Algorithm,
                 params: TimingParams) -> Prediction:
    """:func:`predict` by building, timing and adding up the call's kernels."""
    kernels, seconds, unit_seconds, bound_seconds, bound, clock_hz, power_w = evaluate(
        algo, dims, spec, params)
    counts = Counts.total(kernels)
    return Prediction(
        workload=workload, gpu=spec, algorithm=algo, seconds=seconds,
        tflops=credited_flops(model_flops(workload), counts.tensor_flops,
                              counts.flops) / seconds / 1e12, bound=str(bound),
        unit_seconds={u: float(t) for u, t in unit_seconds.items()},
        bound_seconds={u: float(t) for u, t in bound_seconds.items()},
        counts=counts, memory_bytes=float(memory_for(algo, dims, spec)),
        kernels=kernels, timing=params, clock_hz=clock_hz, power_w=power_w,
        repredict=functools.partial(_same_call, workload, spec, params))


def _compiled_prediction(workload: AttentionWorkload, dims: Dims, spec: GPUSpec,
                         algo: Algorithm, params: TimingParams, totals: dict) -> Prediction:
    """:func:`predict` from a compiled program's totals (``perfsim.fastpath.totals``); the
    per-kernel breakdown, ``Prediction.kernels``, is built by the interpreted path when first
    read."""
    def kernels():
        return evaluate(algo, dims, spec, params)[0]

    return Prediction.with_lazy_kernels(
        kernels, workload=workload, gpu=spec, algorithm=algo, timing=params,
        repredict=functools.partial(_same_call, workload, spec, params), **totals)


#: ``TimingParams`` built from ``predict(timing={...})`` dicts and ``timing_for(...,
#: **overrides)``, by (GPU, algorithm, fields), with the objects their ids name: the same
#: fields give the same object (frozen), so repeated calls share one structure in
#: ``perfsim.fastpath``.
_TIMINGS: dict = {}


def _timing_of(spec: GPUSpec, algo: Algorithm, fields: dict) -> TimingParams:
    """``timing_for(spec, algo, **fields)``, kept per (spec, algo, fields) where the field
    values can be a key."""
    try:
        key = (id(spec), id(algo), tuple(sorted(fields.items())))
        found = _TIMINGS.get(key)
    except TypeError:               # a table given as a list: built every call
        return TimingParams.for_gpu(spec, software_of(algo), **fields)
    if found is None or found[0] is not spec or found[1] is not algo:
        params = TimingParams.for_gpu(spec, software_of(algo), **fields)
        if len(_TIMINGS) >= 256:
            _TIMINGS.clear()
        found = _TIMINGS[key] = (spec, algo, params)
    return found[2]


def _same_call(workload: AttentionWorkload, spec: GPUSpec, params: TimingParams,
               algorithm: Algorithm, other: AttentionWorkload | None = None) -> Prediction:
    """:func:`predict` of ``algorithm`` on a prediction's own workload (or ``other``), GPU and
    timing (``Prediction.repredict``)."""
    return predict(other if other is not None else workload, spec, algorithm, timing=params)


def timing_for(gpu: str | Path | GPUSpec, algorithm: str | Algorithm = "fa2",
               **overrides) -> TimingParams:
    """The ``TimingParams`` :func:`predict` uses by default for ``algorithm`` on ``gpu`` —
    the GPU's rates under the algorithm's own software profile (``sdpa-math`` for
    ``standard``, ``eager`` and ``sdpa-math``; the preset's for an implementation preset;
    ``pytorch`` otherwise) — with ``overrides`` replaced (e.g. ``clock=1.5e9``).
    ``TimingParams.for_gpu(gpu, clock=...)`` instead would also switch to the ``pytorch``
    profile's host floors and ceilings.

    Args:
        gpu: catalog id, ``.toml`` path or ``GPUSpec`` (:func:`perfsim.load_gpu`).
        algorithm: an algorithm or implementation-preset name, or an ``Algorithm`` config.
        **overrides: ``TimingParams`` fields to set (seconds, Hz, fractions as each field's
            docstring says).

    Returns:
        A validated ``TimingParams``; pass it as ``predict(..., timing=...)``.

    Raises:
        perfsim.PerfsimError: unknown GPU or algorithm name, or an invalid override."""
    algo, spec = resolve(algorithm), load_gpu(gpu)
    if not overrides:
        return TimingParams.for_gpu(spec, software_of(algo))
    return _timing_of(spec, algo, overrides)


def evaluate(algo: Algorithm, dims: Dims, spec: GPUSpec, params: TimingParams):
    """The kernels of one call, timed: the path shared by :func:`predict` and
    ``perfsim.sweep`` (scalars or numpy arrays).

    Steps: the algorithm's kernels per phase (forward and backward apart for ``fwd_bwd``);
    the SM clock of the whole call (``TimingParams.clock``, :func:`perfsim.power.call_clock`);
    each kernel timed at that clock; a phase lasts at least its host floor.

    Returns:
        ``(kernels, seconds, unit_seconds, bound_seconds, bound, clock_hz, power_w)``.
    """
    phases = ("fwd", "bwd") if dims.phase == "fwd_bwd" else (dims.phase,)
    parts = []
    for phase in phases:
        part = dims if len(phases) == 1 else replace(dims, phase=phase)
        # drop kernels not launched (scalar grid 0); array grids are handled by aggregate
        parts.append((phase, [k for k in kernels_for(algo, part, spec)
                              if isinstance(k.grid, np.ndarray) or k.grid]))
    floors = {phase: params.host_floor(phase, dims.masked or dims.mask_given,
                                       paged=bool(dims.page_size))
              for phase in phases}
    # each kernel's clock-free timing once; the clock search evaluates the rest per clock
    clocked = [(phase, [KernelClock(k, spec, params) for k in ks]) for phase, ks in parts]

    def seconds_at(clock, ratio=None):
        total = 0.0
        for phase, kcs in clocked:
            gpu_s = sum(kc.seconds(clock, ratio) for kc in kcs)
            total = total + maximum(gpu_s, floors[phase])
        return total

    costs = [k for _, ks in parts for k in ks]
    clock_hz, power_w = call_clock(spec, costs, params, seconds_at)
    timed = [(phase, [kc.timing(clock_hz) for kc in kcs]) for phase, kcs in clocked]
    host, floored = 0.0, []
    for phase, ks in timed:
        gpu_s = sum(k.seconds for k in ks)
        host = host + maximum(floors[phase] - gpu_s, 0.0)
        under = floors[phase] > gpu_s         # the host, not these kernels, sets the phase
        floored += [under] * len(ks)
    kernels = [k for _, ks in timed for k in ks]
    seconds, unit_seconds, bound_seconds, bound = aggregate(kernels, params, host, floored)
    return kernels, seconds, unit_seconds, bound_seconds, bound, clock_hz, power_w


def aggregate(kernels: list[KernelTiming], params: TimingParams, host_s=0.0, floored=None):
    """Totals over kernels (scalars or numpy arrays, elementwise).

    Args:
        host_s: time the host adds beyond the kernels (the host floors' excess).
        floored: per kernel, whether its phase runs under the host floor (a bool or, in a
            sweep, an array): then the host sets that phase's time, and the kernel's time
            counts as ``host`` in ``bound_seconds``, not as its own binding unit's.

    Returns:
        ``(seconds, unit_seconds, bound_seconds, bound)``: total time; per unit its time
        summed over kernels; per unit the kernel time during which it was the binding unit
        (``launch`` for launch overheads, ``host`` for ``host_s`` and the kernels of a phase
        the host floor sets); and the unit with the largest such time.
    """
    seconds = sum(k.seconds for k in kernels) + host_s
    unit_seconds = {u: sum(k.unit_seconds[u] for k in kernels) for u in UNITS}
    floored = floored if floored is not None else [False] * len(kernels)
    if _all_scalar(kernels, host_s) and all(type(f) in (bool, np.bool_) for f in floored):
        return _aggregate_scalar(kernels, params, host_s, seconds, unit_seconds, floored)
    bound_seconds = {b: 0.0 for b in BOUNDS}
    for k, under in zip(kernels, floored):
        launched = asarray(k.cost.grid) > 0
        overhead = np.where(launched, params.launch_overhead_s, 0.0)
        body = k.seconds - overhead
        own = np.logical_not(under)
        for u in (b for b in BOUNDS if b not in ("launch", "host")):
            bound_seconds[u] = bound_seconds[u] + np.where(
                (asarray(k.bound) == u) & own, body, 0.0)
        bound_seconds["host"] = bound_seconds["host"] + np.where(own, 0.0, k.seconds)
        bound_seconds["launch"] = bound_seconds["launch"] + np.where(own, overhead, 0.0)
    bound_seconds["host"] = bound_seconds["host"] + host_s
    # broadcast: a kernel's grid may depend on fewer sweep axes than its times
    stacked = np.stack(np.broadcast_arrays(*[asarray(bound_seconds[b], dtype=float)
                                             for b in BOUNDS]))
    bound = take(BOUNDS, np.argmax(stacked, axis=0))
    if stacked.ndim == 1:
        bound_seconds = {b: float(v) for b, v in bound_seconds.items()}
        return float(seconds), unit_seconds, bound_seconds, str(bound)
    return seconds, unit_seconds, bound_seconds, bound


_SCALARS = (int, float, bool, np.float64, np.int64)


def _all_scalar(kernels: list[KernelTiming], host_s) -> bool:
    """Whether every input of :func:`aggregate` is a plain Python number (``predict``)."""
    if type(host_s) not in _SCALARS:
        return False
    for k in kernels:
        if (type(k.seconds) not in _SCALARS or type(k.cost.grid) not in _SCALARS
                or type(k.bound) is not str):
            return False
    return True


def _aggregate_scalar(kernels, params, host_s, seconds, unit_seconds, floored):
    """:func:`aggregate` on plain numbers: the same sums in the same order, without numpy
    (``np.where``/``stack``/``argmax`` on single values); ties go to the first of
    ``BOUNDS`` as ``argmax`` does."""
    bound_seconds = {b: 0.0 for b in BOUNDS}
    for k, under in zip(kernels, floored):
        if under:                       # the host floor sets this kernel's phase
            bound_seconds["host"] = bound_seconds["host"] + k.seconds
            continue
        overhead = params.launch_overhead_s if k.cost.grid > 0 else 0.0
        body = k.seconds - overhead
        for u in BOUNDS:
            if u != "launch":
                bound_seconds[u] = bound_seconds[u] + (body if k.bound == u else 0.0)
        bound_seconds["launch"] = bound_seconds["launch"] + overhead
    bound_seconds["host"] = bound_seconds["host"] + host_s
    bound_seconds = {b: float(v) for b, v in bound_seconds.items()}
    bound = BOUNDS[0]
    for b in BOUNDS[1:]:
        if bound_seconds[b] > bound_seconds[bound]:
            bound = b
    return float(seconds), unit_seconds, bound_seconds, bound
