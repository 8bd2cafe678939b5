"""``KernelCost``: what one launched kernel demands of each GPU unit.

Counts are additive over kernels and can be Python numbers, numpy arrays (sweeps) or sympy
expressions (closed forms). Units: FLOP, operations, bytes.

Length: one frozen record and its arithmetic; most of it is the attribute documentation, a
paragraph per field that says what the timing model does with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perfsim.frozen import fast_init, replace
from perfsim.mathops import maximum, minimum

#: The units perfsim times. ``tensor``: tensor cores; ``fp32``: FP32/FMA pipes (non-matmul
#: FLOPs, software-emulated exp); ``mufu``: the special-function unit (ex2); ``smem``: shared
#: memory bandwidth; ``hbm``: device memory bandwidth.
UNITS: tuple[str, ...] = ("tensor", "fp32", "mufu", "smem", "hbm")
Unit = Literal["tensor", "fp32", "mufu", "smem", "hbm"]
#: What a prediction can be bound by (``Prediction.bound``): a unit, the load latency of an
#: unpipelined kernel (``KernelCost.load_chain``), the kernel-launch overhead, or the host (a
#: call whose GPU work is shorter than the host's per-call time,
#: ``TimingParams.host_floor_*_s``).
BOUNDS: tuple[str, ...] = (*UNITS, "latency", "launch", "host")

#: Overlap rule: groups of units. Units inside a group run one after the other (their times
#: add); groups run concurrently (the kernel takes the longest group). An entry is a unit name
#: or ``(unit, weight)`` when only that share of the unit's time sits on the group's path.
#: ``ROOFLINE`` is every unit on its own, i.e. ``time = max(unit times)``.
ROOFLINE: tuple[tuple[str, ...], ...] = tuple((u,) for u in UNITS)


@fast_init
@dataclass(frozen=True)
class KernelCost:
    r"""One kernel launch.

    Attributes:
        name: short label, e.g. ``"fa2_fwd"`` or ``"softmax"``.
        grid: CTAs launched.
        warps_per_cta: warps per CTA.
        smem_bytes_per_cta: shared memory per CTA (bytes).
        registers_per_thread: 32-bit registers per thread.
        tensor_dtype: input dtype of the tensor-core matmuls (``fp32`` = FP32 pipes).
        tensor_family: ``mma_sync`` / ``wgmma`` / ``tcgen05`` (see ``perfsim.gpu``).
        tensor_flops: matmul FLOPs executed (2 per multiply-add), masked elements of
            visited tiles included.
        fp32_flops: non-matmul work on the FP32 (FMA) pipes, in FLOP slots: 2 per lane
            instruction, so an FMA counts 2 and so does a lone add or multiply, which
            occupies a lane for the same cycle (scale, subtract the row max, row sum,
            rescale O, ...).
        alu_ops: lane instructions on the ALU pipe (max/min, compare, select, 32-to-16-bit
            conversion): half the FMA pipe's width on the GPUs in the catalog
            (``GPUSpec.alu_ops_per_clk_per_sm``). Timed with ``fp32_flops`` as the ``fp32``
            unit (the CUDA-core pipes; ``perfsim.timing.cuda_core_seconds``).
        cuda_cores_in_turn: the FMA- and ALU-pipe instructions wait on each other, so the
            ``fp32`` unit's time is the two pipes' times added rather than the busier one
            (``perfsim.timing.cuda_core_seconds``): the ``mma.sync`` warps of flash-attn
            2-style kernels (``FA2.cuda_cores_in_turn``) and cuDNN's sm90 kernels with dropout
            (``FA3.serial_stations``). Default ``False``: the pipes overlap.
        tensor_issue_share: the share of the tensor rate the kernel's own issue sustains
            (a number; an array in sweeps, a sympy ``Piecewise`` in closed forms):
            ``GPUSpec.wgmma_one_cta_fraction`` for a kernel that issues WGMMAs in program
            order from one CTA per SM and waits for each dot (FlexAttention's and the
            tutorial's Triton loops, ``FusedAttention.tensor_issue_share``), 1.0 otherwise
            (two or more such CTAs per SM, FA3-class kernels, mma.sync, tcgen05). Multiplies
            the ``tensor`` unit's rate, so divides its time (``perfsim.timing.rates``).
        exp_ops: operations on the MUFU unit: exponentials, and softcap's ``tanh``.
        emulated_exp_ops: exponentials computed in software on the FMA pipes (FA4 §3.1.3);
            their FMA cost is added to the ``fp32`` unit by the timing model.
        hbm_read_bytes, hbm_write_bytes: device-memory traffic after the L2 reuse rule.
        l2_hit_bytes: global-memory reads served by L2 instead of HBM (information only).
        smem_read_bytes, smem_write_bytes: shared-memory traffic.
        atomics: fp32 atomic adds to global memory.
        executed: SM-side demand actually executed, ``{"tensor": FLOP, "fp32": FLOP slots,
            "mufu": ops, "smem": bytes, "alu": lane instructions}``, when it exceeds the
            counts: a CTA computes whole tiles (an elementwise CTA whole blocks) even where
            the problem ends inside one.
            The timing model charges SM-side units for it; counts stay exact. ``None``: the
            counts.
        overlap: which units overlap (see ``ROOFLINE``).
        ctas_per_sm: CTAs resident on one SM at once (occupancy), for the waves.
        tiled: a tiled attention kernel whose CTAs each pay a fixed prologue/epilogue (load Q
            and the first K/V tile, fill the pipeline, normalise and store O): the timing
            model adds that fixed time (``perfsim.timing.cta_edge_seconds``) per wave of
            resident CTAs (once, for a ``persistent`` kernel, whose CTAs loop over tiles and
            overlap one tile's epilogue with the next one's prologue).
        unit_edges_exposed: a ``persistent`` kernel's units after the first each pay the
            whole edge, not only the set-up (``perfsim.timing.persistent_unit_seconds``).
        unit_edges_hidden: a ``persistent`` kernel's units after the first pay nothing
            outside its loop: their set-up and epilogue run while its pipes are busy
            (``perfsim.timing.persistent_unit_seconds``).
        edge_bytes: for a ``tiled`` kernel, the bytes one CTA moves outside its steady-state
            loop, through its own load path: the tiles it loads before its first MMA can
            start (Q and the first K/V tile in a forward; its K/V block and the first Q/dO
            tiles in a backward) and the output tiles it stores after its last (O; dK and
            dV). The load-latency waits an unpipelined kernel's ``load_chain`` already
            counts are not repeated here: such a kernel gives its stores only.
        edge_phases: for a ``tiled`` kernel, the load-loop-store phases one CTA runs one
            after another, each waiting out its first loads' latency and paying the fixed
            per-wave overhead (``perfsim.timing.cta_edge_seconds``): 1, or 2 for a backward
            whose dQ pass is a second loop of the same program (Triton's fused-attention
            tutorial) or separate CTAs of the same grid whose work perfsim charges to the
            dK/dV CTAs (FlexAttention); ``edge_bytes`` then holds both phases' tiles.
        serial_loads: ``(waits, bytes)`` one CTA of a ``tiled`` kernel spends inside its
            loop on global loads its warps issue and wait for themselves, outside the
            kernel's prefetched pipeline (each wait a load latency, the bytes through the
            CTA's own load path; ``perfsim.timing.serial_load_seconds``, charged per wave
            beside the edges): an explicit mask
            (an additive bias) that cuDNN's softmax warps read per key tile with plain LDGs.
            ``(0, 0)``: none.
        gemms: for a kernel whose MMAs read their operands from shared memory through the
            asynchronous path (WGMMA), ``((tensor term, operand bytes per FLOP), ...)``: each
            GEMM's named ``tensor/...`` term and the shared-memory operand bytes its MMAs
            read per FLOP (a property of the tile and of how many warpgroups issue it). The
            timing model runs each GEMM at the slower of the tensor pipe and
            the shared-memory port (``perfsim.timing.gemm_seconds``): a GEMM with a narrow
            N reads more operand bytes per FLOP and can be port-bound while the kernel's
            total shared-memory traffic is not. Empty: the tensor work at the tensor rate.
        eager_op: ``None``, ``"softmax"``, ``"softmax_masked"`` (on masked scores),
            ``"broadcast_fill"`` or ``"strided_copy"``: an
            eager PyTorch kernel whose reachable bandwidth was measured (``TimingParams``);
            ``"sgemm"``: a cuBLAS SIMT SGEMM (fp32 matmul on the FP32 pipes), timed with the
            K law of ``TimingParams.sgemm_efficiency``.
        row_length: for the softmax ``eager_op``\ s, the softmax row length (keys); for
            ``"sgemm"``, the reduction length K.
        gemm_n: for ``eager_op="sgemm"``, the output width N (columns of C), which sets the
            tile cuBLAS launches (``TimingParams.sgemm_width``).
        pipeline: ``None``, or ``(stations, tiles_in_flight)`` for an asynchronous
            producer/consumer cycle (FA3, FA4): each station is a tuple of units that work
            concurrently (the station takes its slowest); tiles cycle through the stations
            (MMA → softmax → MMA) with ``tiles_in_flight`` of them in flight. The timing
            model turns it into time with ``perfsim.timing.cycle_time``; the units in no
            station stay in ``overlap`` and overlap with the cycle.
        load_chain: ``None``, or ``(waits, bytes)`` per CTA for an *unpipelined* kernel: each
            CTA stops ``waits`` times for its own global loads (``bytes`` in all) before it
            can compute, and no load is in flight across those stops (no prefetch; one
            instruction stream per CTA). The timing model then charges a load latency per
            wait and a per-CTA load rate (``TimingParams``), and overlaps a CTA's waits only
            with the compute of the other CTAs resident on its SM (``ctas_per_sm``).
        step_waits: ``None``, or ``(waits, bytes)`` per CTA of a ``tiled`` kernel whose
            instruction stream stops inside its main loop for its own global-memory round
            trips that no prefetch covers — a lock taken and released, an accumulator read
            back, the fences around them (xFormers' locked dQ accumulation): ``waits`` load
            latencies and ``bytes`` through the CTA's own load path. Unlike ``serial_loads``
            (charged per wave beside the edges) the timing model joins them to the rest of
            the kernel as a closed network per SM (``perfsim.timing._step_wait_time``): the
            other resident CTAs' work hides one CTA's waits.
        ring_loads: ``None``, or ``(flops_per_step, k_bytes, v_bytes, qk_share)`` for a
            forward whose K/V ring holds a single stage (one K and one V buffer in shared
            memory): a K tile can only be loaded once the current one's S GEMMs are done and
            must be in before the next S GEMMs start, so each step takes at least a K tile's
            load (``GPUSpec.load_latency_s`` + ``k_bytes`` at
            ``GPUSpec.cta_load_bandwidth_bytes_per_s``: one tile, nothing ahead of it) plus
            the S GEMMs' tensor time (``qk_share`` of the kernel's), and likewise for V with
            the P·V GEMMs. ``flops_per_step``: tensor FLOPs of one CTA's K/V step, which turn
            the executed tensor work into steps. The timing model takes the longer of this
            bound and the kernel's cycle (``perfsim.timing.ring_seconds``).
        local_load_bytes: register-spill reloads from local memory (bytes, the whole grid):
            what the compiler stored there because the kernel's live values exceed the
            registers a thread can address, read back in the main loop (each reload stored
            back after use). The timing model spreads them evenly over the CTAs and adds
            them at the SM's measured spill-reload rate
            (``GPUSpec.spill_reload_bandwidth_bytes_per_s``), hidden only by the work of the
            other spilling streams resident on the SM (CTAs times ``spill_streams``;
            ``perfsim.timing``).
        spill_streams: instruction streams per CTA that reload their spilled registers
            independently — the customers of the spill model with the resident CTAs
            (``perfsim.timing``): 1 where a CTA's warps step through the loop together, as
            the one 4-warp CTA per SM that measured the reload rate; a warp-specialised
            kernel's consumer warpgroups each (FA3: 2).
        bytes_in_flight: bytes of global loads one CTA keeps in flight while it computes
            (its prefetched K/V tiles), or ``None``. With it the timing model bounds the
            loads by what the resident CTAs can pull: each at most
            ``GPUSpec.cta_load_bandwidth_bytes_per_s`` and, by Little's law, its bytes in
            flight per ``GPUSpec.load_latency_s``, so small grids (decode) cannot reach
            the peak bandwidth.
        l2_request_seconds: seconds the L2 needs to serve the kernel's TMA loads, one
            request per row segment of each box (``GPUSpec.tma_segment_seconds``: by the
            segment width the tile's shared-memory swizzle sets, and by whether the tensor's
            rows are whole 32-byte sectors; ``perfsim.algorithms.common.tma_request_seconds``):
            with the kernel's fp32 reductions (which take turns with the loads,
            ``perfsim.timing.l2_request_path_seconds``) a floor under the kernel's memory
            path, not scaled with the SM clock. 0: none.
        exp_after: names of ``terms`` whose work each thread of the softmax finishes before
            its exps can start: the row max the exps subtract (and a scale kept apart from
            the exp argument). Where a ``pipeline``'s softmax station overlaps its pipes, the
            exps wait for this work (``perfsim.timing.exp_lead_seconds``); a serial station
            already adds all of it.
        terms: the named terms the counts are sums of, ``"<field>/<what>": count`` with
            ``<field>`` a key of :data:`TERM_FIELDS` — e.g. ``"tensor/S=QKᵀ"``,
            ``"hbm_read/K,V"``, ``"fp32/softmax"``; build with :meth:`of`. A kernel built
            from plain counts gets one term per non-zero count, named after the kernel.
            ``tests/test_counts.py`` checks that every count equals the sum of its terms.
        launch: launch choices for explanations (tiles, splits, packed heads, ...).
    """

    name: str
    grid: object
    warps_per_cta: int = 4
    smem_bytes_per_cta: int = 0
    registers_per_thread: int = 64
    tensor_dtype: str = "bf16"
    tensor_family: str = "mma_sync"
    tensor_flops: object = 0
    fp32_flops: object = 0
    alu_ops: object = 0
    exp_ops: object = 0
    emulated_exp_ops: object = 0
    hbm_read_bytes: object = 0
    hbm_write_bytes: object = 0
    l2_hit_bytes: object = 0
    smem_read_bytes: object = 0
    smem_write_bytes: object = 0
    atomics: object = 0
    local_load_bytes: object = 0
    executed: dict | None = None
    overlap: tuple[tuple[str, ...], ...] = ROOFLINE
    pipeline: tuple | None = None
    ctas_per_sm: object = 1
    eager_op: str | None = None
    row_length: object = None
    gemm_n: object = None
    tiled: bool = False
    edge_bytes: object = 0
    edge_phases: object = 1
    serial_loads: tuple = (0, 0)
    gemms: tuple = ()
    persistent: bool = False
    unit_edges_exposed: bool = False
    unit_edges_hidden: bool = False
    load_chain: tuple | None = None
    step_waits: tuple | None = None
    ring_loads: tuple | None = None
    bytes_in_flight: object = None
    l2_request_seconds: object = 0
    exp_after: tuple[str, ...] = ()
    cuda_cores_in_turn: bool = False
    tensor_issue_share: object = 1.0
    spill_streams: int = 1
    terms: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.terms:
            # one term per count that is not a plain zero
            state = self.__dict__
            object.__setattr__(self, "terms", {
                f"{prefix}/{self.name}": state[f] for prefix, f in TERM_FIELDS.items()
                if not (isinstance(state[f], (int, float)) and state[f] == 0)})

    @classmethod
    def of(cls, name: str, terms: dict, **fields) -> KernelCost:
        """A kernel whose counts are the sums of ``terms`` (``"<field>/<what>": count``,
        ``<field>`` in :data:`TERM_FIELDS`); ``fields`` give the rest (grid, overlap, ...).

        Raises:
            ValueError: a term whose prefix is not a count field."""
        sums: dict = {}
        field_of = _FIELD_OF_TERM
        for key, value in terms.items():
            f = field_of.get(key) or _term_field(key)
            sums[f] = sums[f] + value if f in sums else value
        return cls(name=name, terms=dict(terms), **sums, **fields)

    def with_terms(self, extra: dict, **fields) -> KernelCost:
        """This kernel with ``extra`` terms added to its counts (and ``fields`` replaced)."""
        terms = dict(self.terms)
        counts = {}
        for key, value in extra.items():
            f = _term_field(key)
            terms[key] = terms[key] + value if key in terms else value
            counts[f] = counts.get(f, getattr(self, f)) + value
        return replace(self, terms=terms, **counts, **fields)

    def exp_lead_demand(self):
        """``(fp32 FLOP slots, ALU lane instructions)`` of the ``exp_after`` terms, scaled as
        the kernel's executed work is (padding, the causal tail: ``executed``)."""
        fp32 = alu = 0
        for key in self.exp_after:
            value = self.terms.get(key)
            if value is None:
                continue
            if key.startswith("fp32/"):
                fp32 = fp32 + value
            elif key.startswith("alu/"):
                alu = alu + value
        if self.executed is not None:
            # the ratio first: two counts of ~1e10 multiplied pass int64 in a sweep's arrays
            # (Python integers, one call's, do not wrap; sweeps then disagreed with predict)
            fp32 = fp32 * (self.executed["fp32"] / maximum(self.fp32_flops, 1e-30))
            alu = alu * (self.executed["alu"] / maximum(self.alu_ops, 1e-30))
        return fp32, alu

    @property
    def hbm_bytes(self):
        """HBM bytes read and written."""
        return self.hbm_read_bytes + self.hbm_write_bytes

    @property
    def smem_bytes(self):
        """Shared-memory bytes read and written."""
        return self.smem_read_bytes + self.smem_write_bytes

    def sm_demand(self) -> dict:
        """Demand on the SM-side units, padding included (see ``executed``)."""
        if self.executed is not None:
            return self.executed
        return {"tensor": self.tensor_flops, "fp32": self.fp32_flops, "mufu": self.exp_ops,
                "smem": self.smem_bytes, "alu": self.alu_ops}

    def padded(self, factor, fixed: dict | None = None) -> KernelCost:
        """This kernel with SM-side work ``factor`` times the counts (whole blocks, or the
        tail of an uneven grid), except ``fixed``: per-unit work every CTA does once whatever
        its share of the tiles (loading Q, normalising and storing O), which is not scaled."""
        fixed = fixed or {}
        demand = self.sm_demand()
        # the fixed share is part of the demand, never more (rows that see no key do no
        # per-tile work, so their fixed work may exceed what the counts give them)
        part = {u: minimum(fixed.get(u, 0), v) for u, v in demand.items()}
        return replace(self, executed={u: (v - part[u]) * factor + part[u]
                                       for u, v in demand.items()})

    def with_executed(self, padded_cost: KernelCost) -> KernelCost:
        """This kernel's counts with ``padded_cost``'s SM-side demand as executed work, and
        its GEMMs' operand bytes per FLOP (``gemms``: those of the shapes the compiled kernel
        runs, e.g. at its head dim rather than the call's)."""
        return replace(self, executed=padded_cost.sm_demand(),
                       gemms=padded_cost.gemms or self.gemms)


#: Prefix of a named term -> the count field it adds to.
TERM_FIELDS: dict[str, str] = {
    "tensor": "tensor_flops", "fp32": "fp32_flops", "alu": "alu_ops", "mufu": "exp_ops",
    "emulated_exp": "emulated_exp_ops", "hbm_read": "hbm_read_bytes",
    "hbm_write": "hbm_write_bytes", "l2_hit": "l2_hit_bytes", "smem_read": "smem_read_bytes",
    "smem_write": "smem_write_bytes", "atomics": "atomics", "local_load": "local_load_bytes"}


def _term_field(key: str) -> str:
    """The count field a named term adds to (:data:`TERM_FIELDS` by its prefix), kept per
    term name (:data:`_FIELD_OF_TERM`: the algorithms name the same terms on every call).

    Raises:
        ValueError: a term whose prefix is not a count field."""
    field_name = _FIELD_OF_TERM.get(key)
    if field_name is None:
        prefix = key.split("/", 1)[0]
        if prefix not in TERM_FIELDS:
            raise ValueError(f"term {key!r}: the prefix must be one of "
                             f"{', '.join(TERM_FIELDS)}")
        if len(_FIELD_OF_TERM) >= 4096:
            _FIELD_OF_TERM.clear()
        field_name = _FIELD_OF_TERM[key] = TERM_FIELDS[prefix]
    return field_name


#: :func:`_term_field` by term name (a name's prefix never changes); cleared at 4096 names.
_FIELD_OF_TERM: dict[str, str] = {}


ADDITIVE: tuple[str, ...] = (
    "tensor_flops", "fp32_flops", "alu_ops", "exp_ops", "emulated_exp_ops", "hbm_read_bytes",
    "hbm_write_bytes", "l2_hit_bytes", "smem_read_bytes", "smem_write_bytes", "atomics",
    "local_load_bytes",
)
