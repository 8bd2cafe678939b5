"""``Prediction``: the answer to one ``perfsim.predict`` call, and ``explain()``.

Length: the ``Prediction`` model with its counts, JSON/DataFrame forms and ``explain()``, whose
sentences need the model's every field; the text generation is most of it.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass

import numpy as np

from perfsim.errors import PerfsimError
from perfsim.frozen import fast_init
from perfsim.gpu import GPUSpec
from perfsim.kernel import ADDITIVE, UNITS
from perfsim.mathops import asarray, where
from perfsim.power import LIMIT_TOLERANCE
from perfsim.tiles import visible_pairs
from perfsim.timing import (
    MUFU_BESIDE,
    REDUCTION_BYTES,
    KernelTiming,
    TimingParams,
    exp_lead_seconds,
    l2_request_path_seconds,
    memory_path_seconds,
    rates,
    reduction_seconds,
    station_times,
)
from perfsim.units import si
from perfsim.workload import AttentionWorkload

UNIT_WORDS = {
    "tensor": "tensor cores (matmul)",
    "fp32": "CUDA-core pipes (FMA and ALU: non-matmul math)",
    "mufu": "the exp unit (MUFU)",
    "smem": "shared-memory bandwidth",
    "hbm": "HBM bandwidth",
    "latency": "memory latency (a kernel waiting for its own loads: an unpipelined load "
               "chain, reloads of spilled registers, round trips inside its loop, or a "
               "single-stage K/V ring)",
    "launch": "kernel launches (the GPU-side gap each launch adds)",
    "host": "the host (the per-call time of the software stack, longer than the GPU work)",
}

#: ``fp32`` when the matmuls themselves run on the FP32 pipes (cuBLAS SIMT SGEMMs).
SGEMM_WORDS = "FP32/FMA pipes (the matmuls, run as SIMT SGEMMs, and the non-matmul math)"


def _ms(seconds) -> str:
    """A time for explain(): milliseconds to three decimals from 1 ms to 1 s, seconds to
    three decimals above, an SI prefix below 1 ms (:func:`perfsim.units.si`)."""
    s = float(seconds)
    if s >= 1:
        return f"{s:,.3f} s"
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else si(s, "s")


def _ring_line(k, gpu, clock_hz) -> str:
    """The explain line of a kernel whose K/V ring holds one stage (``KernelCost.ring_loads``,
    ``perfsim.timing.ring_seconds``): the side (K with the S GEMMs, or V with the P·V GEMMs)
    whose loads and GEMMs take longer, and whether that bound sets the kernel's time — it does
    where the bound is ``latency`` and no load chain (spill reloads, round trips) set it.
    ``clock_hz``: the SM clock the kernel was timed at (Hz)."""
    from perfsim.timing import ring_load_seconds, ring_load_terms, ring_sides

    terms = ring_load_terms(k.cost, gpu, k.cost.sm_demand()["tensor"] * k.wave_factor)
    ring = ring_load_seconds(terms, clock_hz)
    load_k, load_v, _qk = ring
    k_side, v_side = ring_sides(ring, k.unit_seconds["tensor"])
    v_binds = float(v_side) > float(k_side)
    name, loads, tile, gemms = (("V", load_v, k.cost.ring_loads[2], "P·V") if v_binds
                                else ("K", load_k, k.cost.ring_loads[1], "S"))
    sets = k.bound == "latency" and k.load_chain is None
    return (f"{k.cost.name} holds one K and one V tile in shared memory (one ring stage): a "
            "tile can only be loaded once the GEMMs reading the last one are done, so on the "
            f"busiest SM its {name} loads ({_ms(loads)}: a load latency plus "
            f"{tile / 1024:g} KiB at the per-CTA load rate each step, "
            + ("from L2, in SM cycles: GPUSpec.l2_load_latency_clk and "
               "cta_l2_load_bytes_per_clk" if gpu.l2_load_latency_clk is not None else
               "GPUSpec.load_latency_s and cta_load_bandwidth_bytes_per_s")
            + ") and the "
            f"{gemms} GEMMs take turns: at least {_ms(max(k_side, v_side))}"
            + (", which sets its time (bound 'latency')." if sets else
               f", not what sets its time (bound {k.bound!r})."))


def _gb(nbytes) -> str:
    """Bytes for explain(): GB to two decimals from 1 GB to 1 TB, TB (two decimals) above, an
    SI prefix below 1 GB."""
    b = float(nbytes)
    if b >= 1e12:
        return f"{b / 1e12:,.2f} TB"
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else si(b, "B")


def _gib(nbytes) -> str:
    """A footprint for explain(): GiB to two decimals from 1 GiB to 10 TiB, TiB above, a
    binary prefix below 1 GiB."""
    b = float(nbytes)
    if b >= 10 * 2**40:
        return f"{b / 2**40:,.2f} TiB"
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else si(b, "B", binary=True)


def _positive(value) -> bool:
    """Whether a count (number or array) is positive anywhere."""
    try:
        return bool(np.any(asarray(value, dtype=float) > 0))
    except (TypeError, ValueError):      # a sympy expression: symbolic counts are not zero
        return True


#: The count fields whose terms add up to a unit's time in :func:`_padding_gap`.
_GAP_FIELDS = {"tensor": ("tensor",), "mufu": ("mufu",), "smem": ("smem_read", "smem_write")}


def _padding_gap(unit_seconds: dict, terms: dict) -> list[str]:
    """A line for ``explain()`` when the largest of the tensor, MUFU and shared-memory units
    takes 10 % or more longer than its terms add up to: the terms are the counts as counted,
    and the unit's time also holds whole tiles (padding), the compiled head dim and the
    busiest SM's share of the waves."""
    unit = max(_GAP_FIELDS, key=lambda u: unit_seconds.get(u, 0.0))
    total = unit_seconds.get(unit, 0.0)
    summed = sum(t for name, t in terms.items()
                 if name.split(": ", 1)[-1].split("/", 1)[0] in _GAP_FIELDS[unit])
    if total <= 0 or summed <= 0 or total < 1.1 * summed:
        return []
    ratio = total / summed
    more = (f"{100 * (ratio - 1):.0f} % more than" if ratio < 2 else
            f"{ratio:,.0f} times" if ratio >= 10 else f"{ratio:.1f} times")
    return [f"The {unit} unit's {_ms(total)} is {more} what its terms add up to "
            f"({_ms(summed)}): it also times the padding to "
            "whole tiles and to the compiled head dim, and the busiest SM's share of the "
            "waves of CTAs, which are not counted as terms."]


def model_flops(w: AttentionWorkload):
    """FLOPs by the FlashAttention benchmark convention (FA2 §4.1, FA3 §4.1, flash-attn
    ``benchmarks/benchmark_flash_attention.py``): forward ``2·B·H·N_q·N_k·(d + d_v)``
    (= ``4·B·H·N²·d``), halved when causal, backward 2.5× forward, fwd+bwd 3.5×.

    The halving is the convention for ``N_q = N_k``; with ``N_q != N_k`` the causal count
    uses the score elements the bottom-right aligned mask leaves, so that TFLOP/s never
    credits work the mask removes; a window counts the elements it leaves (as flash-attn's
    benchmarks do for local attention), a variable-length batch sums its sequences. Works on
    ints and numpy arrays (sweeps).
    """
    seqlens = None if w.seqlens_q is None else tuple(zip(w.seqlens_q, w.seqlens_k))
    return convention_flops(w.batch, w.heads, w.seqlen_q, w.seqlen_k, w.head_dim,
                            w.head_dim_v, w.causal, tuple(w.window), w.phase, seqlens)


def convention_flops(batch, heads, seqlen_q, seqlen_k, head_dim, head_dim_v, causal: bool,
                     window: tuple, phase: str, seqlens=None):
    """:func:`model_flops` from the workload's fields (numpy arrays allowed for the sizes:
    the sweeps' columns); ``seqlens``: ``((N_q, N_k), ...)`` of a variable-length batch."""
    if seqlens is not None:       # variable-length: Σ per sequence
        pairs = sum(_pairs(q, k, causal, window) for q, k in seqlens)
        fwd = 2 * heads * pairs * (head_dim + head_dim_v)
    else:
        fwd = 2 * batch * heads * _pairs(seqlen_q, seqlen_k, causal, window) * (
            head_dim + head_dim_v)
    return {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}[phase] * fwd


def _pairs(n_q, n_k, causal: bool, window):
    """Score elements the convention counts: all, half for a square causal mask, else the
    elements a bottom-right aligned causal mask or window leaves (``visible_pairs``)."""
    left, right = window
    if causal:
        right = 0 if right is None else min(right, 0)
    # a sweep's integer columns: count in float64, whose products of two lengths cannot wrap
    # around as int64's do from N_q · N_k = 2^63 (predict counts in Python ints)
    n_q, n_k = (x.astype(np.float64) if isinstance(x, np.ndarray) and x.dtype.kind in "iu"
                else x for x in (n_q, n_k))
    if left is None and right is None:
        return n_q * n_k
    if left is None and right == 0:
        unmasked = visible_pairs(n_q, n_k, None, 0)
        return where(n_q == n_k, n_q * n_k / 2, unmasked)
    return visible_pairs(n_q, n_k, left, right)


def credited_flops(model, tensor_flops, flops):
    """The FLOPs ``tflops`` divides by: the convention's :func:`model_flops`, but at most the
    matmul FLOPs the kernels execute (``Counts.tensor_flops``; ``Counts.flops`` where the
    matmuls run on the FP32 pipes, ``tensor_flops == 0``). The convention charges the
    backward at 2.5x the forward (five matmuls, FA2's recomputation); a kernel that runs fewer
    (standard attention's backward: four) is not credited with work it does not do, so
    TFLOP/s never exceeds the matmul peak (``Prediction.peak_flops_per_s``). Equal to
    ``model`` for every forward pass and for kernels that recompute. Works on numpy arrays
    (sweeps)."""
    executed = where(asarray(tensor_flops) > 0, tensor_flops, flops)
    return np.minimum(model, executed) if isinstance(executed, np.ndarray) else min(model,
                                                                                   executed)


@fast_init
@dataclass(frozen=True)
class Counts:
    """Totals over all kernels of one call (each a number; arrays in sweeps).

    Attributes:
        flops: ``tensor_flops + fp32_flops`` (FLOP; executed: masked elements of visited
            tiles and recomputation included — not the benchmark convention of ``tflops``).
        tensor_flops: matrix-multiply FLOPs on the tensor cores (2 per multiply-add).
        fp32_flops: FMA-pipe FLOP slots (2 per lane instruction: an FFMA, FADD or FMUL).
        exp_ops: MUFU operations, one per lane: the exponentials (``ex2``) and, with
            ``softcap``, its ``tanh`` (one per score element forward, recomputed backward).
        emulated_exp_ops: exponentials computed in software on the FMA pipes (FA4's
            polynomial ``exp2``, FA4 paper §3.1.3), one per lane.
        hbm_read_bytes, hbm_write_bytes, hbm_bytes: bytes that cross HBM (read, written,
            their sum), after the L2 reuse rule.
        l2_hit_bytes: bytes the L2 served (re-reads that did not reach HBM).
        smem_bytes: shared-memory bytes read + written.
        atomics: fp32 atomic adds to global memory (4 bytes each; a backward's dQ).
        alu_ops: the ALU pipe's lane instructions (row max, conversions, masks, integer
            and predicate arithmetic; ``perfsim.algorithms.softmax_costs``).
        local_load_bytes: register-spill reloads from local memory
            (``KernelCost.local_load_bytes``).
    """

    flops: float
    tensor_flops: float
    fp32_flops: float
    exp_ops: float
    emulated_exp_ops: float
    hbm_read_bytes: float
    hbm_write_bytes: float
    hbm_bytes: float
    l2_hit_bytes: float
    smem_bytes: float
    atomics: float
    alu_ops: float = 0.0
    local_load_bytes: float = 0.0

    @classmethod
    def total(cls, kernels: list[KernelTiming]) -> Counts:
        """The counts of timed kernels, summed."""
        return cls.of_costs([k.cost for k in kernels])

    @classmethod
    def of_costs(cls, costs: list) -> Counts:
        """The counts of ``KernelCost`` s, summed (numbers, arrays or sympy expressions)."""
        # one row of the additive counts per kernel, summed column by column (the same
        # sums in the same order as one sum per count over the kernels)
        columns = zip(*map(_additive, costs)) if costs else [()] * len(ADDITIVE)
        sums = dict(zip(ADDITIVE, map(sum, columns)))
        return cls(
            flops=sums["tensor_flops"] + sums["fp32_flops"],
            tensor_flops=sums["tensor_flops"], fp32_flops=sums["fp32_flops"],
            exp_ops=sums["exp_ops"], emulated_exp_ops=sums["emulated_exp_ops"],
            hbm_read_bytes=sums["hbm_read_bytes"], hbm_write_bytes=sums["hbm_write_bytes"],
            hbm_bytes=sums["hbm_read_bytes"] + sums["hbm_write_bytes"],
            l2_hit_bytes=sums["l2_hit_bytes"],
            smem_bytes=sums["smem_read_bytes"] + sums["smem_write_bytes"],
            atomics=sums["atomics"], alu_ops=sums["alu_ops"],
            local_load_bytes=sums["local_load_bytes"],
        )


#: A kernel's :data:`perfsim.kernel.ADDITIVE` counts, as a tuple.
_additive = operator.attrgetter(*ADDITIVE)

#: How many named terms ``explain()`` lists.
TOP_TERMS = 5
#: Version of the ``Prediction.to_dict()`` / ``--json`` layout; raised when a key changes
#: meaning or goes away (new keys do not raise it).
SCHEMA_VERSION = 2


@fast_init
@dataclass(frozen=True)
class Prediction:
    """Predicted time and its breakdown for one (workload, GPU, algorithm).

    Attributes:
        workload, gpu: the inputs; ``algorithm``: the resolved config (``.label()``).
        seconds: predicted wall time of the call (s): its kernels' time, and for a phase
            whose kernels take less than the software profile's host floor
            (``TimingParams.host_floor_fwd_s`` / ``host_floor_bwd_s``: launch and framework
            overhead per call) that floor instead.
        tflops: achieved TFLOP/s by the FlashAttention convention (``model_flops / seconds``).
        bound: what binds most of the time (``tensor``, ``fp32``, ``mufu``, ``smem``,
            ``hbm``, ``latency`` (an unpipelined kernel's load waits, or register-spill
            reloads), ``launch``, or ``host``: the host floor, for a call too short to fill
            it). A unit names the largest part of the path that sets a kernel's time (a
            closed cycle of stations run in turn, with the CTAs' edges), so it need not be
            the unit with the longest time alone (:attr:`unit_seconds`): HBM streaming
            beside an SM-side cycle that takes longer does not bind.
        unit_seconds: per unit, its time summed over kernels (s), had it run alone.
        bound_seconds: per unit, the kernel time during which it was the binding unit (s).
        counts: :class:`Counts` totals.
        memory_bytes: peak HBM footprint (inputs, outputs, saved tensors, transients).
        kernels: per-kernel :class:`perfsim.timing.KernelTiming`, in launch order (where a
            compiled program of ``perfsim.fastpath`` answered the call, built by the
            interpreted path when first read).
        timing: the :class:`perfsim.timing.TimingParams` the times were computed with.
        clock_hz: the SM clock the times are at (``TimingParams.clock``: by default the
            sustained clock of :mod:`perfsim.power`). One clock for the whole call: a
            ``fwd_bwd`` call's forward and backward run at the clock of their average power
            (ASSUMED: the power limit acts on the call's average), so where one phase alone
            would settle at another clock, ``fwd_bwd`` is not exactly ``fwd`` + ``bwd``
            (within 2 % on 99 % of random shapes; up to 7.5 % where the phases' powers
            differ most).
        power_w: modelled average board power at that clock (W); ``None`` for a GPU
            without a power table.
        repredict: ``(algorithm, other=None) -> Prediction`` on the same workload (or the
            workload ``other``), GPU and timing (set by ``perfsim.predict``; ``None`` for a
            prediction built by hand), with which :meth:`explain` prices a choice the
            reference's heuristics made and other lengths.
    """

    workload: AttentionWorkload
    gpu: GPUSpec
    algorithm: object
    seconds: float
    tflops: float
    bound: str
    unit_seconds: dict
    bound_seconds: dict
    counts: Counts
    memory_bytes: float
    kernels: list
    timing: object = None
    clock_hz: float | None = None
    power_w: float | None = None
    #: ``(algorithm, other=None) -> Prediction`` of the same workload (or ``other``), GPU and
    #: timing, set by ``perfsim.predict`` (kept out of comparisons): :meth:`explain` prices
    #: alternatives the reference's heuristics decided against, and other lengths. ``None``
    #: for a prediction built by hand.
    repredict: object = dataclasses.field(default=None, compare=False, repr=False)

    def __repr__(self) -> str:
        # one line (the generated repr printed the whole GPU spec, ~15 kB); every field is
        # an attribute, and explain() gives the breakdown
        label = self.algorithm.label() if hasattr(self.algorithm, "label") else self.algorithm
        rate = "" if self.tflops is None else f", {self.tflops:.1f} TFLOP/s"
        return (f"<Prediction {label} on {self.gpu.id}, {self.workload.describe()}: "
                f"{si(self.seconds, 's')}{rate}, bound by {self.bound}; .explain() for why>")

    @classmethod
    def with_lazy_kernels(cls, build, **fields) -> Prediction:
        """A prediction whose ``kernels`` are ``build()``, called when first read (then kept):
        ``perfsim.predict``'s compiled path (``perfsim.fastpath``) has the totals without
        building kernel objects. ``fields``: every other field."""
        pred = object.__new__(cls)
        pred.__dict__.update(fields)        # frozen: filled as fast_init's __init__ fills it
        pred.__dict__["_build_kernels"] = build
        return pred

    def __getstate__(self):
        # pickled and copied with its kernels built (the builder is a closure)
        self.kernels                        # noqa: B018 - builds them where still lazy
        return {k: v for k, v in self.__dict__.items() if k != "_build_kernels"}

    @property
    def model_flops(self) -> float:
        """FLOPs by the FlashAttention benchmark convention (:func:`model_flops`)."""
        return model_flops(self.workload)

    @property
    def executed_flops(self) -> float:
        """FLOPs of the tiles the kernels visit (``counts.flops``: matmul + FP32 work, masked
        elements of visited tiles and recomputation included; padding to whole tiles and to
        a kernel's compiled head dim is timed (``KernelCost.executed``) but not counted here);
        ``model_flops`` is the convention."""
        return self.counts.flops

    def matmul_dtype(self) -> str:
        """The dtype the call's matmuls execute in: the workload's, or ``fp32`` when every
        matmul runs on float32 copies (SDPA's math backend on 16-bit inputs)."""
        used = {k.cost.tensor_dtype for k in self.kernels
                if k.cost.eager_op == "sgemm" or _positive(k.cost.tensor_flops)}
        return used.pop() if len(used) == 1 else self.workload.dtype

    @property
    def peak_flops_per_s(self) -> float:
        """The GPU's dense matmul peak for the dtype the matmuls execute in
        (:meth:`matmul_dtype`) at the clock of this prediction (FLOP/s): the fastest
        instruction family it has for the dtype (the FP32 pipes where there is no tensor
        path). ``tflops`` never exceeds it."""
        g, best, dtype = self.gpu, 0.0, self.matmul_dtype()
        for family in (g.native_tensor_family, "mma_sync"):
            try:
                best = max(best, g.tensor_flops_per_clk(dtype, family))
            except PerfsimError:
                continue
        best = best or g.fp32_flops_per_clk_per_sm
        return best * g.sm_clocks_per_s(self.clock_hz or None)

    @property
    def fits_memory(self) -> bool:
        """Whether the peak footprint fits in the GPU's HBM."""
        return self.memory_bytes <= self.gpu.hbm_bytes

    @property
    def hbm_gbps(self) -> float:
        """Achieved HBM bandwidth implied by the predicted time, in GB/s (10^9 bytes per
        second, not Gbit/s): HBM bytes over ``seconds``."""
        return self.counts.hbm_bytes / self.seconds / 1e9

    def _clock_lock(self) -> tuple | None:
        """``(asked Hz, held, why)`` of a clock lock (``timing={"clock": Hz}``, ``--clock
        MHz``): whether the call runs at it, and in words why or why not — the power limit,
        above the maximum boost clock, or the tensor-core clock ceiling. ``None`` without a
        numeric lock."""
        g, asked = self.gpu, getattr(self.timing, "clock", None)
        if isinstance(asked, str) or asked is None:
            return None
        clock = self.clock_hz or g.clock_hz
        tdp = g.power.tdp_w if g.power is not None else None
        capped = self.power_w is not None and self.power_w >= tdp * (1 - LIMIT_TOLERANCE)
        if clock >= asked * (1 - 1e-9):
            return asked, True, "held there"
        above = (f"above the {g.max_clock_hz / 1e6:.0f} MHz maximum boost clock"
                 if asked > g.max_clock_hz * (1 + 1e-9) else None)
        if capped:
            why = (f"{above}, and the power limit holds it lower still" if above else
                   "the power limit holds it lower")
        elif clock >= g.max_clock_hz * (1 - 1e-9):
            why = f"{above}, so held there"
        else:
            why = ((f"{above}, and " if above else "")
                   + "the tensor-core clock ceiling holds it lower (perfsim.power)")
        return asked, False, why

    def _clock_not_held_note(self) -> str | None:
        """Where a clock lock was not held (:meth:`_clock_lock`), for :meth:`notes`."""
        lock = self._clock_lock()
        if lock is None or lock[1]:
            return None
        asked, _held, why = lock
        return (f"clock {asked / 1e6:.0f} MHz not held ({why}): runs at "
                f"{(self.clock_hz or self.gpu.clock_hz) / 1e6:.0f} MHz")

    def _clock_line(self) -> str:
        """Which SM clock the times are at, and why."""
        g, choice = self.gpu, getattr(self.timing, "clock", "datasheet")
        clock = self.clock_hz or g.clock_hz
        text = f"Times are at an SM clock of {clock / 1e6:.0f} MHz"
        eager = sorted({k.cost.name for k in self.kernels if k.cost.eager_op is not None})
        if (eager and isinstance(choice, str) and choice != "datasheet"
                and clock < g.max_clock_hz * (1 - 1e-9)):
            # timing.eager_sm_scale: PyTorch's own kernels run no tensor-core work
            text += (f" ({', '.join(eager)} at the {g.max_clock_hz / 1e6:.0f} MHz maximum "
                     "boost clock: PyTorch's elementwise and softmax kernels run no tensor-core "
                     "work, perfsim.timing.eager_sm_scale)")
        tdp = g.power.tdp_w if g.power is not None else None
        if not isinstance(choice, str):
            held = self._clock_lock()[2]
            power = ("" if self.power_w is None else f"; modelled board power "
                     f"{self.power_w:.0f} W of the {tdp:.0f} W limit")
            return text + f" (clock locked at {choice / 1e6:.0f} MHz, {held}){power}."
        if self.power_w is None:
            return text + (f" (clock_hz; {g.id} has no power table, so the clock under load "
                           "is not modelled)." if choice == "sustained" else
                           f" (timing clock = {choice!r}).")
        if isinstance(choice, str) and choice != "sustained":
            why = ("; boost stops at the tensor-core clock ceiling for a call that keeps the "
                   "tensor pipes busy (perfsim.power)" if choice == "boost"
                   and clock < g.max_clock_hz * (1 - 1e-9) else "")
            return text + (f" (timing clock = {choice!r}{why}); modelled board power "
                           f"{self.power_w:.0f} W of the {tdp:.0f} W limit.")
        if self.power_w < tdp * (1 - LIMIT_TOLERANCE):
            if clock >= g.max_clock_hz * (1 - 1e-9):
                where = "the maximum boost clock"
            else:
                where = (f"the tensor-core clock ceiling (clock_hz; the "
                         f"{g.max_clock_hz / 1e6:.0f} MHz maximum boost clock is for calls "
                         "without tensor-core work, perfsim.power)")
            return text + (f", {where}: modelled board power "
                           f"{self.power_w:.0f} W stays under the {tdp:.0f} W limit.")
        if self.power_w > tdp * (1 + LIMIT_TOLERANCE):
            return text + (f", the power model's floor (power.min_clock_hz): even there the "
                           f"modelled power is {self.power_w:.0f} W, over the {tdp:.0f} W limit "
                           "— the model's energies over-count this call, or the GPU would go "
                           "lower still; treat the time as optimistic.")
        return text + (f": at a higher clock this call would draw more than the {tdp:.0f} W "
                       f"limit, so the power model (perfsim.power) settles it where board power "
                       f"meets the limit.")

    def _memory_path(self, heavy):
        """``(taken, path, hbm_alone)`` seconds of a kernel's ``hbm`` unit: what the timing
        took, its memory path (HBM bytes plus fp32 reductions into L2,
        ``perfsim.timing.memory_path_seconds``) and its HBM bytes alone, at the timing's
        HBM rate (``perfsim.timing.rates``)."""
        cost = heavy.cost
        rate = rates(self.gpu, cost, self.timing)["hbm"]
        return (float(heavy.unit_seconds["hbm"]),
                float(memory_path_seconds(cost, self.gpu, rate)), float(cost.hbm_bytes) / rate)

    def _hbm_reading(self, heavy) -> tuple | None:
        """What a kernel's ``hbm`` time is, where it is not plain HBM bandwidth, with
        :meth:`_memory_path`'s seconds: ``("l2 peak", taken, path, alone)`` (its loads at the
        L2's best read rate, ``GPUSpec.l2_load_peak_bytes_per_s``), ``("load path", ...)``
        (its CTAs' load path, above its memory path: ``perfsim.timing.KernelClock``),
        ``("reductions", ...)``
        (its memory path, bound there, fp32 reductions into L2 over 5 % of it), else
        ``None``."""
        if not self.timing:
            return None
        taken, path, alone = self._memory_path(heavy)
        floor = l2_request_path_seconds(heavy.cost, self.gpu)
        if (not (isinstance(floor, (int, float)) and floor == 0) and taken > path
                and float(floor) >= taken * (1 - 1e-9)):
            return "l2 requests", taken, path, alone
        peak = self.gpu.l2_load_peak_bytes_per_s
        pulled = float(heavy.cost.hbm_read_bytes + heavy.cost.l2_hit_bytes)
        if peak is not None and taken > path * 1.05 and pulled / peak >= taken * (1 - 1e-9):
            return "l2 peak", taken, path, alone
        if heavy.cost.bytes_in_flight is not None and taken > path * 1.05:
            return "load path", taken, path, alone
        if heavy.bound == "hbm" and path - alone > 0.05 * path and taken <= path * 1.05:
            return "reductions", taken, path, alone
        return None

    def _load_path_line(self, heavy, reading) -> str | None:
        """The sentence for :meth:`_hbm_reading`'s ``reading``: the CTAs' load path (at most
        the measured per-CTA rate, and by Little's law its bytes in flight per load latency,
        over HBM reads and L2 hits) or the memory path's fp32 reductions taking turns with the
        HBM bytes."""
        if reading is None:
            return None
        cost = heavy.cost
        kind, taken, path, hbm_alone = reading
        if kind == "l2 requests":
            segments = float(cost.l2_request_seconds)
            reductions = float(reduction_seconds(cost, self.gpu))
            share = self.gpu.l2_reduction_segment_share
            also = (f", taking turns with its {_gb(float(cost.atomics) * REDUCTION_BYTES)} of "
                    f"fp32 reductions into L2 ({_ms(reductions)} alone), which hold the L2 "
                    f"from the loads for {100 * share:.1f} % of that "
                    "(GPUSpec.l2_reduction_segment_share"
                    ", perfsim.timing.l2_request_path_seconds)"
                    ) if reductions > 0 and share is not None else ""
            return (f"{cost.name}'s 'hbm' time ({_ms(taken)}) is the L2 serving its TMA loads "
                    f"row segment by row segment ({_ms(segments)}; "
                    "KernelCost.l2_request_seconds: segments as "
                    "wide as its tiles' shared-memory swizzle"
                    ", at GPUSpec.tma_segment_seconds, more per segment on rows that are not "
                    "whole 32-byte sectors; perfsim.algorithms.common.tma_request_seconds)"
                    f"{also}, not "
                    f"HBM bandwidth: the {_gb(float(cost.hbm_bytes))} that cross HBM alone "
                    f"would take {_ms(hbm_alone)}.")
        if kind == "l2 peak":
            gpu = self.gpu
            pulled = float(cost.hbm_read_bytes + cost.l2_hit_bytes)
            larger = (f"; {gpu.l2_bandwidth_bytes_per_s / 1e12:.2f} TB/s for buffers too "
                      "large for that, GPUSpec.l2_bandwidth_bytes_per_s"
                      if gpu.l2_bandwidth_bytes_per_s else "")
            return (f"{cost.name}'s 'hbm' time ({_ms(taken)}) is the L2's read rate, not HBM "
                    f"bandwidth: {_gb(pulled)} of loads (HBM reads and "
                    f"{_gb(float(cost.l2_hit_bytes))} of L2 hits) at "
                    f"{gpu.l2_load_peak_bytes_per_s / 1e12:.2f} TB/s, the most the SMs pull "
                    "from the L2 (GPUSpec.l2_load_peak_bytes_per_s, "
                    f"{_source_kind(gpu, 'l2_load_peak_bytes_per_s')}: a small buffer each "
                    f"L2 partition holds a copy of{larger}); the {_gb(float(cost.hbm_bytes))} "
                    f"that cross HBM alone would take {_ms(hbm_alone)}.")
        if kind == "reductions":
            dkv = (", and the dK, dV accumulators of a GQA backward"
                   if any(k.startswith("atomics/dK,dV") for k in cost.terms) else "")
            return (f"{cost.name}'s 'hbm' time ({_ms(taken)}) is its memory path: the "
                    f"{_gb(float(cost.hbm_bytes))} that cross HBM "
                    f"({_ms(hbm_alone)}) and "
                    f"{_gb(float(cost.atomics) * REDUCTION_BYTES)} of fp32 reductions "
                    f"into L2 (the dQ accumulation{dkv}) at "
                    f"{self.gpu.l2_reduction_bytes_per_s / 1e12:.2f} TB/s "
                    f"({_ms((path - hbm_alone))}; GPUSpec.l2_reduction_bytes_per_s, "
                    f"{_source_kind(self.gpu, 'l2_reduction_bytes_per_s')}), which take "
                    "turns rather than overlap "
                    "(perfsim.timing.memory_path_seconds).")
        pulled = float(cost.hbm_read_bytes + cost.l2_hit_bytes)
        return (f"{cost.name}'s 'hbm' time ({_ms(taken)}) is its CTAs' load path, not "
                f"HBM bandwidth: {_gb(pulled)} of loads (HBM reads and "
                f"{_gb(float(cost.l2_hit_bytes))} of L2 hits) at "
                f"{pulled / taken / 1e12:.2f} TB/s, the resident CTAs' per-CTA load rate "
                f"(GPUSpec.cta_load_bandwidth_bytes_per_s, or bytes in flight per load "
                f"latency); the {_gb(float(cost.hbm_bytes))} that cross HBM alone "
                f"would take {_ms(hbm_alone)}"
                + (f" ({_ms(path)} with its fp32 reductions into L2)."
                   if path > hbm_alone * 1.001 else "."))

    def _edges_line(self, heavy) -> str | None:
        """The longest kernel's CTA edges, if it is a tiled attention kernel."""
        return _edges_sentence(heavy.cost, self.gpu, self.timing)

    def _host_line(self) -> str | None:
        """What the host floor adds, when it does."""
        host = self.bound_seconds.get("host", 0.0)
        if not host:
            return None
        t = self.timing
        unmasked = ("" if t.host_floor_fwd_unmasked_s is None else
                    f" ({t.host_floor_fwd_unmasked_s * 1e6:.1f} µs with no mask passed)")
        if t.host_floor_fwd_paged_extra_s and self.workload.page_size:
            unmasked += (f" plus {t.host_floor_fwd_paged_extra_s * 1e6:.1f} µs with a paged "
                         "K/V cache,")
        # the kernels' own time; the rest of the call is the GPU waiting for the host
        # (bound_seconds["host"] also holds the kernel time of the phases a floor sets)
        kernels = sum(k.seconds for k in self.kernels)
        return (f"The host sets a floor: a forward call takes at least "
                f"{t.host_floor_fwd_s * 1e6:.1f} µs{unmasked} and a backward "
                f"{t.host_floor_bwd_s * 1e6:.1f} "
                f"µs (software profile; hardware/software/*.toml), so "
                f"{_ms(self.seconds - kernels)} of this call is the GPU waiting for "
                f"the host. Kernels alone: {_ms(kernels)} (TimingParams host floors "
                "0, or --kernel-only).")

    def _one_split_seconds(self) -> float | None:
        """Seconds of the same call with one split where the split count came from the
        reference's heuristic (``num_splits="auto"``), else ``None``."""
        from perfsim.algorithms.base import Dims

        if self.repredict is None:
            return None
        algo = self.algorithm
        options = getattr(algo, "options", None)
        if options is not None:                        # an implementation preset
            inner = algo.config(Dims.of(self.workload), self.gpu)
            if options.get("num_splits", getattr(inner, "num_splits", None)) != "auto":
                return None
            one = algo.model_copy(update={"options": {**options, "num_splits": 1}})
        elif getattr(algo, "num_splits", None) == "auto":
            one = algo.model_copy(update={"num_splits": 1})
        else:
            return None
        try:
            return self.repredict(one).seconds
        except PerfsimError:
            return None

    def _timing_params(self):
        """The ``TimingParams`` this prediction ran with: its own, else the defaults of its GPU
        under its algorithm's software profile."""
        from perfsim.software import software_of

        if isinstance(self.timing, TimingParams):
            return self.timing
        return TimingParams.for_gpu(self.gpu, software_of(self.algorithm))

    def _eager_ceiling_lines(self) -> list[str]:
        """For the longest eager kernel that its ceiling binds (torch.softmax, the broadcast
        masked_fill_; its 'hbm' unit the bound): the rate it streams at, as a share of the
        GPU's copy bandwidth, and where that ceiling comes from — an SM-side rate carried
        from the GPU it was measured on (``perfsim.timing.eager_sm_scale``), so its 'hbm'
        time is not the memory's."""
        from perfsim.timing import eager_ceiling, eager_sm_scale

        held = [k for k in self.kernels if k.bound == "hbm"
                and k.cost.eager_op in ("softmax", "softmax_masked", "broadcast_fill",
                                        "strided_copy")]
        if not held:
            return []
        k = max(held, key=lambda k: k.seconds)
        params = self._timing_params()
        share = float(eager_ceiling(k.cost, params, self.gpu)[1])
        copy = params.copy_bandwidth(self.gpu)
        if k.cost.eager_op == "broadcast_fill":
            what = "masked_fill_ with a broadcast mask"
        elif k.cost.eager_op == "strided_copy":
            what = "PyTorch's strided elementwise copy (layout copies, head-dim pads)"
        else:
            what = "torch.softmax" + (f" on causally masked rows of {int(k.cost.row_length)}"
                                      if k.cost.eager_op == "softmax_masked"
                                      else f" on rows of {int(k.cost.row_length)}")
        rate = f"{share * copy / 1e12:.2f} TB/s, {share:.2f} of the copy bandwidth"
        if params.eager_reference is None and k.cost.eager_op == "strided_copy":
            return [f"{k.cost.name} ({_ms(k.seconds)}) streams at {rate}: the software "
                    f"profile's share for {what}, taken of this GPU's own copy bandwidth "
                    "(a calibrated profile does not measure it): its 'hbm' time is that "
                    "ceiling, not the memory's."]
        if params.eager_reference is None:
            return [f"{k.cost.name} ({_ms(k.seconds)}) streams at the ceiling of {what} in "
                    f"this timing ({rate}; a calibrated profile's own measurement or a table "
                    "given): its 'hbm' time is that ceiling, not the memory's."]
        scale = eager_sm_scale(self.gpu, params)
        where = ("measured on this GPU model (the software profile's reference)"
                 if scale == 1.0 else
                 "carried from the GPU it was measured on by SM count x clock (ASSUMED for "
                 "SMs of other designs)")
        why = ("a rate of the SMs, not of the memory: the H200 and the H100, with equal SMs "
               "and clock and 0.715x the bandwidth, ran it at the same bytes per second")
        if abs(share - 1.0) < 1e-3:
            return [f"{k.cost.name} ({_ms(k.seconds)}) streams at the copy bandwidth, "
                    f"{share * copy / 1e12:.2f} TB/s: the ceiling of {what} is {why}; "
                    f"{where}, it is above what this GPU's memory delivers."]
        return [f"{k.cost.name} ({_ms(k.seconds)}) streams at the ceiling of {what}: {rate}. "
                f"The ceiling is {why}; {where}. Its 'hbm' time is that ceiling, not the "
                "memory's."]

    def _bound_not_longest_line(self) -> list[str]:
        """Where the longest kernel's binding unit is the call's and is not that kernel's unit
        with the longest time alone, one line saying why: its time is set by a path the
        binding unit is the largest part of (a closed cycle of stations, the CTAs' edges),
        and the longer unit runs beside it. (A fresh user read ``bound='tensor'`` beside
        'hbm 19.1 µs, tensor 7.26 µs' as a contradiction.)"""
        if not self.kernels or self.bound not in UNITS:
            return []
        heavy = max(self.kernels, key=lambda k: k.seconds)
        if heavy.bound != self.bound:
            return []
        alone = {u: float(t) for u, t in heavy.unit_seconds.items() if u in UNITS}
        top = max(alone, key=alone.get)
        if top == self.bound or alone[top] <= 1.05 * alone[self.bound]:
            return []
        return [f"In {heavy.cost.name}, {self.bound} is not the unit with the longest time "
                f"alone ({top}, {_ms(alone[top])} against {_ms(alone[self.bound])}): its time "
                f"is set by the path {self.bound} is the largest part of (units that take turns "
                "on the SM, with the CTAs' time outside their loop), which "
                f"{top} overlaps; a faster {self.bound} shortens only its own part of that "
                f"path, a faster {top} nothing until it sets the time."]

    def _unpacked_window_line(self) -> list[str]:
        """Why a windowed one-token GQA decode runs unpacked under flash-attn 2's rule, where
        the same call without the window packs (and may then split): reading fewer keys can
        take longer, which needs saying."""
        w = self.workload
        if (w.seqlen_q != 1 or w.seqlens_q is not None or w.heads == w.kv_heads
                or w.window == (None, None) or w.dropout_p or "f" not in w.phase):
            return []
        algo = self._configured()
        if getattr(algo, "split_rule", None) != "fa2" or getattr(algo, "pack_gqa",
                                                                 None) != "auto":
            return []
        return [f"No GQA packing: flash-attn 2 packs the {w.heads // w.kv_heads} query heads "
                "of a K/V head into one tile only for a one-token decode without a window "
                "(its seqlenq_ngroups_swapped path), so each query head runs as its own row "
                "and reads K/V on its own; the same call without the window packs and may "
                "run faster although it reads more keys."]

    def _configured(self):
        """The algorithm configuration the call ran (a preset's inner algorithm for this
        workload and GPU), or ``None`` where it cannot be formed."""
        from perfsim.algorithms.base import Dims

        if not hasattr(self.algorithm, "config"):
            return self.algorithm
        try:
            return self.algorithm.config(Dims.of(self.workload), self.gpu)
        except PerfsimError:
            return None

    def _one_split_line(self, splits: int) -> list[str]:
        """Where the split count came from the reference's heuristic (``num_splits="auto"``),
        the same call with one split, in words: the heuristics (flash-attn's
        ``num_splits_heuristic``, FA3's) weigh the waves of CTAs, not the combine kernel and
        the partial outputs a split adds, so on small grids the choice can cost time."""
        t1 = self._one_split_seconds()
        if t1 is None:
            return self._varlen_split_caveat()
        change = self.seconds / t1 - 1
        if abs(change) < 0.005:
            # within half a percent (both calls on the host floor, say): no effect to rate
            return [f"The {splits} splits are the reference's heuristic choice "
                    f"(num_splits='auto'); with one split perfsim predicts {_ms(t1)} "
                    "as well: the split changes nothing here"
                    + (" (the call is bound by its host floor either way)."
                       if self.bound == "host" else ".")]
        why = (" (the heuristic weighs the waves of CTAs, not the combine kernel and the "
               "partial outputs a split adds)" if change > 0 else "")
        effect = (f"{change * 100:.0f} % slower" if change > 0 else
                  f"{t1 / self.seconds:.3g}x faster ({-change * 100:.0f} % less time)")
        return [f"The {splits} splits are the reference's heuristic choice (num_splits='auto'); "
                f"with one split perfsim predicts {_ms(t1)}, so the split is "
                f"{effect}{why}.", *self._varlen_split_caveat()]

    def _varlen_split_caveat(self) -> list[str]:
        """For a variable-length batch split by flash-attn 3's rule: what perfsim's split
        count stands for, in words. perfsim applies the fixed-length rule to the batch size
        and the longest lengths and splits every sequence alike; flash-attn 3's varlen
        scheduler (``prepare_varlen_num_blocks`` in hopper/flash_prepare_scheduler.cu) sets a
        count per sequence from its own length, which perfsim does not model (a fresh
        user's report: one more short sequence changed the count for all of them)."""
        w = self.workload
        if w.seqlens_q is None and w.seqlens_k is None:
            return []
        algo = self._configured()
        if getattr(algo, "split_rule", None) != "fa3" or getattr(algo, "num_splits",
                                                                   None) != "auto":
            return []
        return ["For a variable-length batch perfsim takes the count from the fixed-length "
                "rule on the batch size and the longest query and key lengths, and splits "
                "every sequence alike; flash-attn 3's varlen scheduler "
                "(prepare_varlen_num_blocks) sets a count per sequence from its own length "
                "(not modelled), so short sequences here pay for splits they may not run, and "
                "a batch with one more sequence can get another count for all of them."]

    def to_dict(self) -> dict:
        """The prediction as plain JSON-ready data (what ``perfsim predict --json`` prints):
        workload, algorithm label, GPU id, time (s), TFLOP/s, binding unit and the time each
        bound set, clock (Hz) and
        power (W), counts, memory, per kernel its times, grid, waves and named terms, and the
        :meth:`notes`, and the timing fields that differ from the defaults
        (:meth:`timing_overrides`). ``SCHEMA_VERSION`` names the layout."""
        c = self.counts
        return {
            "schema_version": SCHEMA_VERSION,
            "workload": self.workload.model_dump(mode="json"),
            "algorithm": self.algorithm.label(), "gpu": self.gpu.id, "seconds": self.seconds,
            "tflops": self.tflops, "bound": self.bound, "model_flops": self.model_flops,
            "clock_hz": self.clock_hz, "power_w": self.power_w,
            "executed_flops": self.executed_flops,
            "peak_tflops": self.peak_flops_per_s / 1e12,
            "unit_seconds": self.unit_seconds,
            "bound_seconds": {b: float(t) for b, t in self.bound_seconds.items()},
            "counts": {k: float(getattr(c, k)) for k in c.__dataclass_fields__},
            "memory_bytes": self.memory_bytes, "fits_memory": self.fits_memory,
            "kernels": [{"name": k.cost.name, "seconds": float(k.seconds),
                         "bound": str(k.bound), "grid": int(k.cost.grid), "waves": int(k.waves),
                         "tensor_issue_share": float(k.cost.tensor_issue_share),
                         "unit_seconds": {u: float(t) for u, t in k.unit_seconds.items()},
                         "terms": {name: float(v) for name, v in k.cost.terms.items()}}
                        for k in self.kernels],
            "term_seconds": self.term_seconds(),
            "notes": self.notes(),
            "timing": self.timing_overrides(),
        }

    def timing_overrides(self) -> dict:
        """The ``TimingParams`` fields this prediction ran with that differ from
        ``perfsim.timing_for(gpu, algorithm)``'s defaults, JSON-ready (``{}`` for a default
        call; ``--kernel-only`` gives zero host floors, ``--clock`` its choice):
        ``predict(workload, gpu, algorithm, timing=this)`` repeats the prediction."""
        from perfsim.software import software_of

        mine = self.timing.model_dump(mode="json")
        # what perfsim.timing_for(gpu, algorithm) builds
        default = TimingParams.for_gpu(self.gpu, software_of(self.algorithm)).model_dump(
            mode="json")
        return {k: v for k, v in mine.items() if default.get(k) != v}

    def notes(self) -> list[str]:
        """What a reader of the numbers must know, in words (the lines ``perfsim predict``
        prints under its table; ``notes`` in :meth:`to_dict`): the kernel perfsim times in
        place of one it has no model of (an implementation preset's ``stand_in_note``), a
        footprint above the GPU's memory, a modelled board power above the GPU's limit
        (a clock taken regardless of power, or the power model's floor clock), and a clock
        lock (``timing={"clock": Hz}``) the call could not be held at. Empty when there is
        nothing to say."""
        out = []
        stand_in = getattr(self.algorithm, "stand_in_note", None)
        note = stand_in(self.gpu, self.workload) if stand_in else None
        if note:
            out.append(note)
        if any(k.cost.name == "fp8_prepare" for k in self.kernels):
            out.append("includes fp8_prepare: FlashAttention-3 §3.3's Hadamard rotation and "
                       "block quantisation of 16-bit Q, K and V before the fp8 kernel "
                       "(FA3(quantize_inputs=True)); for a call on fp8 tensors quantised "
                       "beforehand use FA3(quantize_inputs=False) or the flash-attn-3 preset")
        if not self.fits_memory:
            out.append(f"does not fit: needs {_gib(self.memory_bytes)}, "
                       f"{self.gpu.id} has {_gib(self.gpu.hbm_bytes)}")
        power = self._over_power_note()
        if power:
            out.append(power)
        assumed = self._assumed_limit_note()
        if assumed:
            out.append(assumed)
        held = self._clock_not_held_note()
        if held:
            out.append(held)
        spills = self._unpriced_spills_note()
        if spills:
            out.append(spills)
        chosen = getattr(self.algorithm, "num_splits", "auto")
        if self.workload.phase == "bwd" and chosen not in ("auto", 1):
            out.append(f"num_splits={chosen} splits the forward's keys; a backward call "
                       "runs no split-KV kernel and ignores it")
        splits = max((int(k.cost.launch.get("num_splits", 1)) for k in self.kernels
                      if k.cost.launch and np.ndim(k.cost.launch.get("num_splits", 1)) == 0),
                     default=1)
        if splits > 1:
            t1 = self._one_split_seconds()
            if t1 is not None and self.seconds > t1 * 1.005:
                out.append(f"split over {splits} CTAs per query tile by the reference's "
                           f"heuristic (num_splits='auto'), which weighs waves, not the "
                           f"combine: one split would take {_ms(t1)} "
                           f"({(1 - t1 / self.seconds) * 100:.0f} % less; --explain)")
        return out

    def _unpriced_spills_note(self) -> str | None:
        """Where the kernels reload spilled registers and the GPU's power model gives them no
        energy (``PowerSpec.spill_pj_per_byte`` 0: a GPU file written without it), in words."""
        g = self.gpu
        if g.power is None or g.power.spill_pj_per_byte:
            return None
        reloaded = sum(float(np.sum(k.cost.local_load_bytes)) for k in self.kernels)
        if reloaded <= 0:
            return None
        return (f"its kernels reload {_gb(reloaded)} of spilled registers, which {g.id}'s power "
                "model charges no energy (power.spill_pj_per_byte = 0; the catalog's GPUs carry "
                "the energy measured on an H100): the predicted power and sustained clock leave "
                "them out")

    def _assumed_limit_note(self) -> str | None:
        """Where the power limit sets the sustained clock and the GPU's catalog gives that
        limit as ASSUMED (``sources["power.tdp_w"]``: the GH200's, whose module limit covers
        CPU, GPU and memory together), in words: the time rests on it."""
        g = self.gpu
        if (self.power_w is None or g.power is None
                or getattr(self.timing, "clock", None) != "sustained"
                or self.power_w < g.power.tdp_w * (1 - LIMIT_TOLERANCE)
                or _source_kind(g, "power.tdp_w") != "assumed"):
            return None
        return (f"the sustained clock ({(self.clock_hz or g.clock_hz) / 1e6:.0f} MHz) is where "
                f"modelled power meets {g.id}'s {g.power.tdp_w:.0f} W limit, which its catalog "
                "entry ASSUMES (sources['power.tdp_w']); another limit moves the clock and the "
                "time (a sweep's power.tdp_w override shows by how much)")

    def _over_power_note(self) -> str | None:
        """Where the modelled board power ends above the GPU's limit, why, in words: a clock
        taken regardless of power (``boost``, ``datasheet``, a lock), or the sustained clock
        at the power model's floor (``power.min_clock_hz``) with the model still over."""
        g = self.gpu
        if (self.power_w is None or g.power is None
                or self.power_w <= g.power.tdp_w * (1 + LIMIT_TOLERANCE)):
            return None
        tdp, choice = g.power.tdp_w, getattr(self.timing, "clock", "datasheet")
        over = f"modelled board power {self.power_w:.0f} W, over the {tdp:.0f} W limit"
        if choice == "sustained":
            return (f"{over} even at the power model's floor clock "
                    f"({(self.clock_hz or g.clock_hz) / 1e6:.0f} MHz): treat the time as "
                    "optimistic")
        taken = f"clock {choice!r}" if isinstance(choice, str) else (
            f"the clock lock at {choice / 1e6:.0f} MHz")
        return (f"{taken} ignores the power limit: {over} (clock 'sustained' gives the "
                "clock where the two meet)")

    def to_frame(self):
        """One row per kernel as a pandas DataFrame: ``kernel`` (its name; ``name`` in
        :meth:`to_dict`'s ``kernels``), ``seconds``, ``bound``, ``grid``, ``waves`` and each
        unit's seconds alone (``<unit>_seconds``); the count terms stay in :meth:`to_dict`
        (pandas is imported here, not with perfsim)."""
        import pandas as pd

        return pd.DataFrame([{"kernel": k.cost.name, "seconds": float(k.seconds),
                              "bound": str(k.bound), "grid": int(k.cost.grid),
                              "waves": int(k.waves),
                              **{f"{u}_seconds": float(t) for u, t in k.unit_seconds.items()}}
                             for k in self.kernels])

    def term_seconds(self) -> dict:
        """Each named count term (``KernelCost.terms``) as seconds on its unit alone, at the
        prediction's clock: ``{"kernel: field/what": seconds}``, largest first. Tensor,
        FMA-pipe, ALU, MUFU, shared-memory and HBM terms, and fp32 reductions into L2 on the
        memory path (``perfsim.timing.memory_path_seconds``; on a GPU with a measured
        reduction rate), and the L2's time for a TMA kernel's row segments
        (``l2 requests/TMA row segments``, ``KernelCost.l2_request_seconds``: with the
        reductions, a floor under the memory path, ``perfsim.timing.l2_request_path_seconds``;
        not a count); L2 hits and emulated exps take no time of their own here (the
        latter are counted in FMA-pipe terms). The counts
        as counted, without whole-tile padding or tail effects, so the terms of one unit add
        up to at most that unit's time; an eager kernel's HBM terms at its measured ceiling
        and an SGEMM's FMA-pipe terms at its K law, as the timing takes them."""
        from perfsim.timing import eager_ceiling

        params = self._timing_params()
        unit_of = {"tensor": "tensor", "fp32": "fp32", "alu": "alu", "mufu": "mufu",
                   "smem_read": "smem", "smem_write": "smem", "hbm_read": "hbm",
                   "hbm_write": "hbm"}
        out = {}
        for k in self.kernels:
            rate = dict(rates(self.gpu, k.cost, params, self.clock_hz or self.gpu.clock_hz))
            # the measured ceilings of eager kernels and the SGEMM law, as the timing applies
            ceiling = eager_ceiling(k.cost, params, self.gpu)
            if ceiling is not None:
                rate[ceiling[0]] = rate[ceiling[0]] * ceiling[1]
            if self.gpu.l2_reduction_bytes_per_s:
                rate["atomics"] = self.gpu.l2_reduction_bytes_per_s / REDUCTION_BYTES
            for key, value in k.cost.terms.items():
                kind = key.split("/", 1)[0]
                unit = "atomics" if kind == "atomics" and "atomics" in rate else \
                    unit_of.get(kind)
                seconds = float(value) / float(rate[unit]) if unit else 0.0
                if seconds > 0:
                    out[f"{k.cost.name}: {key}"] = out.get(f"{k.cost.name}: {key}", 0) + seconds
            floor = float(k.cost.l2_request_seconds)
            if floor > 0:
                # the L2's time for the kernel's TMA row segments (a floor on its memory path)
                out[f"{k.cost.name}: l2 requests/TMA row segments"] = floor
        return dict(sorted(out.items(), key=lambda item: -item[1]))

    def explain(self) -> str:
        """The prediction in words, as ``perfsim predict --explain`` prints it: a string of
        lines — the time, TFLOP/s against the matmul peak at the call's clock, HBM bytes and
        peak memory; the binding unit and each unit's time alone; the largest count terms;
        the kernel's overlap rule and pipeline; its waves, edges and memory path; the clock
        and modelled board power; the split, packing and stand-in notes; for FlexAttention's
        forward at lengths that run its bound check, their class and the time at longer
        lengths that skip it or take the cheaper code. Times are in µs up
        to 1 ms, ms to 1 s, s above; bytes in SI units (GB, TB), footprints in GiB/TiB."""
        w, g = self.workload, self.gpu
        lines = [f"{self.algorithm.label()} on {g.name}: {w.describe()}",
                 f"predicted {_ms(self.seconds)}, {self.tflops:.1f} TFLOP/s "
                 f"({100 * self.tflops * 1e12 / self.peak_flops_per_s:.0f} % "
                 f"of the {self.matmul_dtype()} matmul peak at this clock), "
                 f"{_gb(self.counts.hbm_bytes)} "
                 f"over HBM, peak memory {_gib(self.memory_bytes)}."]
        share = 100 * self.bound_seconds.get(self.bound, 0) / self.seconds
        words = UNIT_WORDS.get(self.bound, self.bound)
        if self.bound == "fp32" and any(k.cost.eager_op == "sgemm" for k in self.kernels):
            words = SGEMM_WORDS
        heavy_hbm = max(self.kernels, key=lambda k: k.seconds) if self.kernels else None
        reading = self._hbm_reading(heavy_hbm) if heavy_hbm is not None else None
        kind = reading[0] if reading and self.bound == "hbm" else None
        if kind == "load path":
            words = ("the CTAs' load path (the 'hbm' unit: HBM reads and L2 hits at the "
                     "resident CTAs' load rate, below)")
        elif kind == "reductions":
            words = ("the memory path (the 'hbm' unit: HBM bytes and fp32 reductions into L2, "
                     "below)")
        elif kind == "l2 requests":
            with_reductions = (self.gpu.l2_reduction_segment_share is not None
                               and float(reduction_seconds(heavy_hbm.cost, self.gpu)) > 0)
            words = ("the L2's TMA requests (the 'hbm' unit: row segments"
                     + (" taking turns with fp32 reductions" if with_reductions else "")
                     + ", below)")
        serial = (heavy_hbm is not None and heavy_hbm.bound == self.bound
                  and heavy_hbm.cost.pipeline is not None
                  and np.ndim(heavy_hbm.cost.pipeline[1]) == 0
                  and heavy_hbm.cost.pipeline[1] == 1)
        edge = (_edge_share(heavy_hbm, self.gpu, self.timing)
                if heavy_hbm is not None and heavy_hbm.bound == self.bound else 0.0)
        lines.append(f"Bound by {words} for {share:.0f} % of the time"
                     + (f" ({heavy_hbm.cost.name} runs one tile at a time, so its two "
                        "stations take turns and add: this unit has the largest part of "
                        "its time, not all of it; the cycle below)" if serial else "")
                     + (f"; {100 * edge:.0f} % of {heavy_hbm.cost.name}'s time is its CTAs' "
                        "time outside their loop (set-up, first loads, output tiles; below), "
                        "which that unit's group carries" if edge >= 0.2 else "")
                     + ".")
        ranked = sorted(UNITS, key=lambda u: -self.unit_seconds[u])
        parts = ", ".join(f"{u} {_ms(self.unit_seconds[u])}" for u in ranked
                          if self.unit_seconds[u] > 0)
        reloads = sum(float(_spill_parts(k.load_chain)["load"]) for k in self.kernels
                      if _spill_parts(k.load_chain) is not None)
        if reloads:
            parts += f"; register-spill reloads {_ms(reloads)} (busiest SM)"
        lines.append(f"Each unit alone: {parts}.")
        lines.extend(self._bound_not_longest_line())
        terms = self.term_seconds()
        top = list(terms.items())[:TOP_TERMS]
        if top:
            lines.append("Largest terms (each alone on its unit): " + ", ".join(
                f"{name} {_ms(t)}" for name, t in top) + ".")
            lines.extend(_padding_gap(self.unit_seconds, terms))
        lines.extend(self._unpacked_window_line())
        lines.extend(self._eager_ceiling_lines())
        for k in self.kernels:
            splits = k.cost.launch.get("num_splits", 1)
            packed = k.cost.launch.get("packed_heads", 1)
            if splits > 1 or packed > 1:
                what = []
                if splits > 1:
                    what.append(f"its key range split over {splits} CTAs per query tile "
                                "(split-KV; a combine kernel sums the parts)")
                if packed > 1:
                    what.append(f"the {packed} query heads of each K/V head packed into one "
                                "tile's rows (GQA packing: K/V read once per K/V head)")
                lines.append(f"{k.cost.name} runs with " + " and ".join(what) + ".")
                if splits > 1:
                    lines.extend(self._one_split_line(splits))
            key_splits = k.cost.launch.get("key_splits")
            if key_splits is not None and np.ndim(key_splits) == 0:
                n = int(key_splits)
                how = (f"{n} CTAs per (batch, head) along the keys, each over one in {n} of "
                       "the key blocks" if n > 1 else
                       "one CTA per (batch, head) over all its key blocks")
                lines.append(f"{k.cost.name} runs {how} ({int(k.cost.grid)} CTAs in all): "
                             "PyTorch's key-split rule for xFormers' backward, which caps the "
                             "splits by the batch x heads (FA2.bwd_splits; "
                             "FA2(bwd_key_splits='xformers')).")
            q_splits = k.cost.launch.get("q_splits", 1)
            if np.ndim(q_splits) == 0 and q_splits > 1:
                why = ("as given (FA1(q_splits=...))"
                       if getattr(self.algorithm, "q_splits", None) is not None else
                       "flash-attn 1's split of the query tiles when batch x heads leaves SMs "
                       "idle: the fewest splits within 95 % of the best wave efficiency; "
                       "FA1(q_splits=...) fixes it")
                lines.append(f"{k.cost.name} runs {int(q_splits)} CTAs per (batch, head), each "
                             f"over one in {int(q_splits)} of the query tiles and all of K and "
                             f"V ({why}).")
            live, usable = (k.cost.launch.get("live_rows_bytes"),
                            k.cost.launch.get("l2_usable_bytes"))
            if live is not None and np.ndim(live) == 0 and live > usable:
                lines.append(
                    f"{k.cost.name}: the query rows its resident CTAs read and write back "
                    f"every step (Q, O, ℓ, m; with dO and dQ in a backward: {_gb(live)}, SMs × "
                    f"CTAs per SM × rows per CTA) exceed the usable L2 ({_gb(usable)}), so each "
                    "step's "
                    "read-modify-write goes to HBM (perfsim.algorithms.base.l2_filtered: "
                    "written data keeps L2's step, as the FA1 paper's measured HBM traffic "
                    "shows); more SMs or more CTAs per SM hold more rows at once.")
            if "kernel_head_dims" in k.cost.launch:
                kd, kd_v = k.cost.launch["kernel_head_dims"]
                wide = f"{kd}" if kd == kd_v else f"{kd} / {kd_v}"
                acc = (f" (but the fp32 dQ accumulator, zeroed, reduced into and read back "
                       f"{kd} wide)" if k.cost.atomics else "")
                lines.append(f"{k.cost.name} runs the kernel compiled for head dim {wide}: "
                             "its MMAs and shared-memory tiles that wide, HBM traffic at "
                             f"the call's head dim {w.head_dim}{acc}.")
            issue = k.cost.tensor_issue_share
            if type(issue) in (int, float) and issue < 1:
                share = f"{100 * issue:.1f}" if issue > 0.995 else f"{100 * issue:.0f}"
                lines.append(f"{k.cost.name} issues its WGMMAs from one CTA per SM, in program "
                             "order and waiting for each dot: its tensor pipe runs at "
                             f"{share} % of the rate a second CTA would reach "
                             "(GPUSpec.wgmma_one_cta_fraction).")
        heavy = heavy_hbm
        from perfsim.algorithms.base import Dims

        inner = getattr(self.algorithm, "config", None)      # an implementation preset
        rule = (inner(Dims.of(w), g) if inner else self.algorithm).overlap_text()
        spilled = _spill_parts(heavy.load_chain)
        if heavy.load_chain is not None and heavy.load_chain.get("step_waits"):
            lines.append(_step_wait_line(heavy, g))
        if spilled is not None:
            parts = spilled
            share = parts["load"] / heavy.seconds if heavy.seconds else 0.0
            rate = g.spill_reload_bandwidth_bytes_per_s
            lines.append(
                f"{heavy.cost.name} spills registers: its CTAs reload "
                f"{_gb(float(heavy.cost.local_load_bytes))} of spilled values from local "
                f"memory in all (the bytes per thread and step are compiled-kernel figures "
                f"from Nsight Compute profiles on an H200 and an H100: "
                f"perfsim.validate.spill_facts for the presets' backwards and flash-attn 2, "
                f"perfsim.validate.flex_length_census for FlexAttention's forward by length "
                f"class), at "
                f"{rate / 1e9:.1f} GB/s "
                f"per SM ({g.id}'s spill-reload rate, "
                f"{_source_kind(g, 'spill_reload_bandwidth_bytes_per_s')}). "
                f"On the busiest SM the reloads take {_ms(parts['load'])} "
                f"({100 * float(share):.0f} % of the kernel), the rest of the kernel "
                f"{_ms(parts['compute'])}; "
                + _spill_overlap_text(parts)
                + (f" Each reloaded byte and its store draw {g.power.spill_pj_per_byte:g} pJ "
                   f"of board power (power.spill_pj_per_byte, "
                   f"{_source_kind(g, 'power.spill_pj_per_byte')})."
                   if g.power is not None and g.power.spill_pj_per_byte else ""))
        elif heavy.load_chain is not None and not heavy.load_chain.get("step_waits"):
            parts = heavy.load_chain
            in_flight = parts["in_flight"]
            lines.append(
                f"{heavy.cost.name} is unpipelined: each CTA waits for its own loads at every "
                f"step. On the busiest SM: load latency {_ms(parts['latency'])}, load "
                f"transfers {_ms(parts['load'])}, compute {_ms(parts['compute'])} "
                "(its units one after another, shared memory included); "
                + ("one CTA per SM, so the three add" if in_flight == 1 else
                   f"{in_flight} CTAs per SM overlap one's latency with the others' transfers "
                   "and compute (transfers and compute serve one CTA at a time)")
                + (f"; HBM bandwidth ({_ms(heavy.unit_seconds['hbm'])}) takes longer "
                   "still and sets the time." if heavy.bound == "hbm" else "."))
        elif rule:
            lines.append(f"Overlap rule: {rule}.")
        if heavy.cost.pipeline is not None:
            stations, tiles = heavy.cost.pipeline[:2]
            serial = heavy.cost.pipeline[2] if len(heavy.cost.pipeline) > 2 else \
                tuple(tiles == 1 and i > 0 for i in range(len(stations)))
            parts = []
            for index, (station, adds) in enumerate(zip(stations, serial)):
                times = [heavy.unit_seconds[u] for u in station]
                if adds == MUFU_BESIDE:
                    lead = exp_lead_seconds(heavy.cost, rates(
                        self.gpu, heavy.cost, self.timing, self.clock_hz or self.gpu.clock_hz),
                        heavy.wave_factor)
                    t = station_times(heavy.unit_seconds, stations, tiles, serial, lead)[index]
                    u = heavy.unit_seconds
                    rest = " + ".join(f"{x} {_ms(u[x])}" for x in station
                                      if x not in ("fp32", "mufu"))
                    led = (f" + its lead {_ms(lead)}" if float(lead) > 0 else "")
                    parts.append(f"{rest} + the longer of fp32 {_ms(u['fp32'])} (FMA and ALU "
                                 f"pipes in turn) and mufu {_ms(u['mufu'])}{led} (the exps "
                                 f"beside the fp32 work): {_ms(t)}")
                elif adds and len(station) > 1:
                    parts.append(f"{' + '.join(station)} {_ms(sum(times))} (in turn)")
                else:
                    top = max(station, key=lambda u: heavy.unit_seconds[u])
                    parts.append(f"{'/'.join(station)} {_ms(max(times))} ({top})")
            pace = ("with one in flight the two stations do not overlap: its time is their "
                    "sum, and the unit named as binding is that sum's largest term" if
                    np.ndim(tiles) == 0 and tiles == 1 else
                    "both stations set its pace, the slower one most")
            lines.append(f"{heavy.cost.name} is a closed cycle of two stations, "
                         f"{' and '.join(parts)}, with {float(tiles):g} in flight (tiles, or "
                         f"CTAs times operand slices for mma.sync kernels): {pace}.")
        if heavy.cost.ring_loads is not None and heavy.cost.pipeline is not None:
            lines.append(_ring_line(heavy, g, self.clock_hz or g.clock_hz))
        edges_line = self._edges_line(heavy)
        if edges_line:
            lines.append(edges_line)
        launch = heavy.cost.launch or {}
        if launch.get("tile_note") and launch.get("block_m") is not None:
            lines.append(f"{heavy.cost.name} runs B_r x B_c = {launch['block_m']} x "
                         f"{launch['block_n']} tiles, {launch.get('ctas_per_sm', 1)} CTA(s) "
                         f"per SM: {launch['tile_note']}.")
        tail_line = _tail_sentence(heavy.cost)
        if tail_line:
            lines.append(tail_line)
        load_path = self._load_path_line(heavy, reading)     # heavy is heavy_hbm
        if load_path:
            lines.append(load_path)
        for other in self.kernels:
            # another kernel of the call (a fwd_bwd's forward) whose memory path is the
            # L2's TMA row segments, when it is a noticeable part of the call
            if other is heavy or other.seconds < 0.05 * self.seconds:
                continue
            other_reading = self._hbm_reading(other)
            if other_reading and other_reading[0] == "l2 requests":
                lines.append(self._load_path_line(other, other_reading))
        lines.append(self._clock_line())
        if self.workload.phase == "fwd_bwd" and self.power_w is not None:
            lines.append("The forward and the backward share that clock: the power limit "
                         "acts on the call's average power (ASSUMED: a training step "
                         "alternates the two faster than the board's power averaging), so "
                         "fwd_bwd can differ from a forward and a backward predicted apart, "
                         "each at its own clock.")
        host_line = self._host_line()
        if host_line:
            lines.append(host_line)
        if not self.fits_memory:
            lines.append(f"Does not fit: needs {_gib(self.memory_bytes)}, the GPU has "
                         f"{_gib(g.hbm_bytes)} of HBM.")
        if len(self.kernels) > 1:
            lines.append(f"{len(self.kernels)} kernels; the longest is {heavy.cost.name} "
                         f"({_ms(heavy.seconds)}, bound by {heavy.bound}).")
        length_class = self._length_class_line()
        if length_class:
            lines.append(length_class)
        lines.extend(getattr(self.algorithm, "explain_lines", lambda p: [])(self))
        return "\n".join(lines)

    def _length_class_line(self) -> str | None:
        """For a forward whose compiled bound check depends on the class of its lengths
        (``FusedAttention.bound_check_classes``: FlexAttention on sm_90) at lengths that run
        the check: the class, and the predicted time at the lengths rounded up to a multiple
        of 16 and to the multiple that skips the check (the mask padded keys would need is
        not priced). ``None`` elsewhere."""
        from perfsim.algorithms import softmax_costs as sc
        from perfsim.algorithms.base import Dims

        w, g = self.workload, self.gpu
        if (self.repredict is None or w.phase == "bwd" or w.seqlens_q is not None
                or w.seqlens_k is not None):
            return None
        inner = getattr(self.algorithm, "config", None)      # an implementation preset
        try:
            cfg = inner(Dims.of(w), g) if inner else self.algorithm
        except PerfsimError:
            return None
        classes = getattr(cfg, "bound_check_classes", None)
        every = getattr(cfg, "bound_check_unless_multiple", None)
        n_q, n_k = w.seqlen_q, w.seqlen_k
        if not classes or not every or (n_q % every == 0 and n_k % every == 0):
            return None
        if n_q < every:     # shorter than one tile: not the profiled template's case
            return None
        cls = min(sc.length_class(n_q), sc.length_class(n_k))
        words = {16: "multiples of 16", 2: "even, not multiples of 16", 1: "odd"}[cls]
        parts, seen = [], set()
        for m in ((16,) if cls != 16 else ()) + (every,):
            up_q, up_k = -(-n_q // m) * m, -(-n_k // m) * m
            if (up_q, up_k) in seen:        # rounding up to 16 already reached the multiple
                continue
            seen.add((up_q, up_k))
            try:
                other = self.repredict(self.algorithm,
                                       other=w.replace(seqlen_q=up_q, seqlen_k=up_k))
            except PerfsimError:
                continue
            lengths = f"{up_q}" if up_q == up_k else f"{up_q} / {up_k}"
            parts.append(f"{_ms(other.seconds)} at {lengths}")
        alt = (f" The same call at longer lengths: {', '.join(parts)} (padded keys would "
               f"need a mask in practice, which these do not price)." if parts else "")
        return (f"The lengths are {words}: the kernel is compiled with them as constants "
                f"and checks key bounds on every tile, with code of that class "
                f"(softmax_costs.FLEX_FWD_BOUND_CHECK_CLASSES, Nsight Compute on an H100; "
                f"odd and even lengths off 16 issue more and may spill).{alt}")


class _LazyKernels:
    """``Prediction.kernels`` where the instance has none yet (:meth:`Prediction.
    with_lazy_kernels`): built once by the instance's builder and stored in its ``__dict__``,
    which then answers every later read (a non-data descriptor: the instance's own value
    wins)."""

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        state = obj.__dict__
        build = state.get("_build_kernels")
        if build is None:
            raise AttributeError("kernels")
        kernels = build()
        state["kernels"] = kernels
        state.pop("_build_kernels", None)
        return kernels


Prediction.kernels = _LazyKernels()


def _tail_sentence(cost) -> str | None:
    """What the unequal CTAs of a masked grid add (``launch["tail"]`` over 1.5 %, a forward
    that records its launch order): the busiest SM's work over the balanced share
    (``perfsim.algorithms.base.in_order_tail``)."""
    launch = cost.launch or {}
    tail, longest_first = launch.get("tail"), launch.get("longest_first")
    if longest_first is None or np.ndim(tail) or tail is None or float(tail) <= 1.015:
        return None
    order = ("longest first (a longest-processing-time-first scheduler), yet the grid is "
             "too short for the busiest SM to reach the balanced share"
             if longest_first else
             "in index order, each head's query tiles from short to long, so the longest "
             "start last (a launch without a longest-first scheduler: flash-attn 2, Triton, "
             "flash-attn 3's split-KV and variable-length launches)")
    return (f"{cost.name}'s CTAs differ in length under the mask and start {order}: its "
            f"busiest SM does {float(tail):.2f}x the balanced share of the work "
            "(perfsim.algorithms.base.in_order_tail).")


def _edges_sentence(cost, gpu, params) -> str | None:
    """What a tiled kernel's CTA edges add (``perfsim.timing.edge_seconds``), in words."""
    from perfsim.timing import edge_seconds

    edges = edge_seconds(cost, gpu, params, max(int(cost.grid), 1)) if params else None
    if edges is None:
        return None
    from perfsim.mathops import cdiv
    from perfsim.timing import persistent_unit_seconds

    every, per_wave = float(edges[0]), float(edges[1])
    waves = int(cdiv(max(int(cost.grid), 1), gpu.sm_count * max(int(cost.ctas_per_sm), 1)))
    how = ("TimingParams.cta_overhead_s, a given per-wave figure"
           if params.cta_overhead_s is not None else
           "first loads through the load latency and the CTA's own load path, output tiles, "
           "set-up")
    plural = "s" if waves != 1 else ""
    if cost.persistent:
        unit = persistent_unit_seconds(gpu, params, cost, per_wave)
        why = ("each unit's loads waiting for the last unit's output tiles, which leave "
               "through the same shared memory" if cost.unit_edges_exposed
               else "their loads prefetched")
        further = ("the 1 further unit" if waves == 2 else
                   f"each of the {waves - 1:,} further units")
        count = (f"persistent: once, then {unit * 1e6:.2f} µs for {further} its busiest CTA "
                 f"takes ({why})"
                 if waves > 1 and unit else
                 "persistent: once; its further units' edges run while its pipes are busy"
                 if waves > 1 and cost.unit_edges_hidden else "persistent: once")
        return (f"{cost.name}'s CTAs spend {per_wave * 1e6:.2f} µs outside their loop "
                f"({how}; {count}): {_ms(every)} on the SM side; HBM streams on "
                "meanwhile except in the first and last unit's edges.")
    busiest = int(cdiv(max(int(cost.grid), 1), gpu.sm_count))
    slots = (f" (the busiest SM's {busiest:,} CTAs, {max(int(cost.ctas_per_sm), 1)} resident "
             "at a time; the kernel's 'waves' field counts CTAs)" if busiest != waves else "")
    return (f"{cost.name}'s CTAs spend {per_wave * 1e6:.2f} µs per wave outside their loop "
            f"({how}), {waves:,} wave{plural} of resident CTAs{slots}: {_ms(every)} on "
            "the SM side; HBM streams on meanwhile except in the first and last wave's edges.")


def _edge_share(k, gpu, params) -> float:
    """The share of kernel ``k``'s seconds its CTAs spend outside their loop
    (``perfsim.timing.edge_seconds``'s SM-side time; 0 without edges)."""
    from perfsim.timing import edge_seconds

    if params is None or not k.seconds or np.ndim(k.cost.grid) != 0:
        return 0.0
    edges = edge_seconds(k.cost, gpu, params, max(int(k.cost.grid), 1))
    return 0.0 if edges is None else min(float(edges[0]) / float(k.seconds), 1.0)


def _source_kind(gpu, field: str) -> str:
    """``measured``, ``inferred`` (another GPU's measurement, carried by a stated reason) or
    ``assumed``, as the catalog source of ``field`` says, else ``given``."""
    text = str((gpu.sources or {}).get(field, ""))
    return ("assumed" if text.startswith("ASSUMED") else
            "measured" if text.startswith(("M:", "M ")) else
            "inferred from another GPU's measurement" if text.startswith("I:") else "given")

def _spill_overlap_text(parts: dict) -> str:
    """How a spilling kernel's reloads overlap its work (``timing._spill_time``'s parts)."""
    ctas, streams = parts["ctas"], parts["streams"]
    if parts["in_flight"] == 1:
        return "one CTA per SM, so the two add."
    per_cta = (f"{ctas} CTAs per SM" if ctas != 1 else "one CTA per SM")
    if streams == 1:
        return f"{per_cta} hide one's reloads behind the others' work."
    other = "the other's" if parts["in_flight"] == 2 else "the others'"
    return (f"{per_cta}, each with {streams} consumer warpgroups that reload on their own: "
            f"one warpgroup's reloads hide behind {other} work ({parts['in_flight']} in "
            "flight).")


def _spill_parts(chain) -> dict | None:
    """A kernel timing's register-spill parts (``perfsim.timing._spill_time``): its
    ``load_chain`` itself, or the spill parts a kernel that also waits inside its loop keeps
    under ``spill_parts`` (``perfsim.timing._step_wait_time``); ``None`` without spills."""
    if chain is None:
        return None
    if chain.get("spills"):
        return chain
    return chain.get("spill_parts")


def _step_wait_line(heavy, g) -> str:
    """The explain line of a kernel whose CTAs wait inside their loop for their own
    global-memory round trips (``KernelCost.step_waits``)."""
    parts = heavy.load_chain
    in_flight = parts["in_flight"]
    waits = float(np.max(parts["waits"]))
    return (f"{heavy.cost.name}'s CTAs stop inside their loop for their own global-memory "
            f"round trips (a lock, an accumulator read back, fences: {waits:.0f} load "
            f"latencies of {g.load_latency_s * 1e6:.2f} us per CTA, "
            f"{_source_kind(g, 'load_latency_s')}). On the busiest SM: waits "
            f"{_ms(parts['latency'])}, their transfers {_ms(parts['load'])}, the rest of the "
            f"kernel {_ms(parts['compute'])}; "
            + ("one CTA per SM, so they add." if np.all(in_flight == 1) else
               f"{in_flight} CTAs per SM hide one's waits behind the others' work "
               "(a closed network, perfsim.queueing.unpipelined_time)."))
