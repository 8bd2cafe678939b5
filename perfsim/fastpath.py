"""One ``perfsim.predict`` call through a compiled program of its structure (issue 13).

Why: an interpreted ``predict`` builds the call's kernels as Python objects, times them and
searches the power-capped clock — about a thousand Python function calls, 200-450 µs on the
development machine — although, for a given GPU, algorithm, timing and head dims, dtype, mask
and phase, only the batch, the head counts and the sequence lengths change from one call to
the next. Autotuners and schedulers call ``predict`` in loops of exactly that kind.

How: the calls are grouped by **structure** — the GPU spec, the algorithm configuration
after its split-KV / GQA-packing choice, the ``TimingParams`` (these three by identity: the
objects ``load_gpu``, ``resolve`` and ``timing_for`` keep, and ``predict`` keeps one per
``timing={...}`` dict), and the dims other than ``B, H, H_kv, N_q, N_k``. Once a call
pattern (the same, before the choice) has been met :data:`HOT_CALLS` times and its
interpreted calls have taken :data:`COMPILE_AFTER_S` (about what compiling it costs), each
structure it meets is traced and compiled by :mod:`perfsim.compiled` — the sweep's own
mechanism: the model's array code (``perfsim.predict.evaluate`` on one-row arrays) recorded
once, the decisions it made on the row's values kept as **guards**, turned into LLVM IR and
compiled.
The trace, the IR and numba's scalar twins are built in the calling thread (15-800 ms, once
per structure: Python work, which a background thread would get only in the gaps a busy
caller leaves it); LLVM compiles in a background thread (0.3-2 s with the caller idle; up to
~10 s for the largest structure, standard attention's fwd_bwd, while the caller keeps
calling ``predict`` on the 2-core development machine) and the calls stay interpreted until
it is done. Later calls of the structure run the compiled program on their five numbers
(about 4 µs) and get the prediction's totals from it: seconds, binding unit, per-unit and
per-bound seconds, counts, clock and power. A row that fails a guard (another branch of the
model: a sequence length that is no longer a whole number of tiles, a host floor) is
evaluated interpreted; a structure whose rows keep failing gets one more program traced on
such a row, up to :data:`MAX_PROGRAMS`.

The split-KV and GQA-packing choice (``num_splits="auto"``, ``pack_gqa="auto"``) is made
per call by the configuration's own scalar rule, as the interpreted path makes it; the
structure is traced with that choice fixed (``implementations.with_fixed_choice``), so a
decode call with 16 splits and packed heads and one with 32 splits are two structures.

What stays interpreted: ``Prediction.kernels`` (the per-kernel breakdown) is built on first
access by the interpreted path — ``explain()`` reads it — so a call that only reads totals
never builds kernel objects. Calls the compiled programs do not cover: variable-length
batches; FA4's forwards whose packed query rows fit one tile (a choice no configuration
option fixes); structures whose code the tracer cannot record (sliding windows, among
others: their tile ranges stack arrays along a second axis); and every call when
llvmlite/numba are not installed (``perfsim[fast]``).

Checks: the first result of every program is compared with the interpreted prediction of
the same call (seconds, TFLOP/s, clock, power, every unit, bound and count: relative 1e-12,
the bound exactly); a program that disagrees is dropped with a ``RuntimeWarning`` and its
structure stays interpreted. Results agree with the interpreted path to that tolerance
(typically to the last bit or two: the array code sums some terms in another order), so
a call's totals may differ in the last bits between a structure's first calls and later ones.

Costs: the first program of a process loads numba and LLVM (~0.6 s, ~140 MB of memory); each
compiled kernel keeps its LLVM module, 4-8 MB (structures whose code is the same share one:
32 programs took 16 kernels and 127 MB more), so ``auto`` builds at most
:data:`MAX_AUTO_PROGRAMS` per process. A fork waits for the background compiles (a child
forked while LLVM or numba held their locks in that thread hung at its own first compile).
Calls that name new objects every time — ``FA2(block_m=64)`` or ``load_gpu(...).replace(...)``
built per call — never repeat a structure: build the object once and pass it.

Control: ``PERFSIM_PREDICT_ENGINE`` = ``auto`` (the default, as above), ``python`` (never
compile) or ``compiled`` (compile a structure at its first call, in the calling thread, with
no limit on programs: deterministic, for tests and benchmarks).

Length: the structure key, the one-row runner, the trace of the call and its check are one
mechanism (what the key leaves out the trace must take as an input, what the trace outputs the
runner must read and the check compare), used nowhere else.
"""

from __future__ import annotations

import atexit
import ctypes
import dataclasses
import os
import threading
import warnings

import numpy as np

from perfsim.algorithms.fa1 import FA1
from perfsim.algorithms.fa2 import FusedAttention
from perfsim.errors import PerfsimError
from perfsim.frozen import replace
from perfsim.implementations import Implementation, with_fixed_choice
from perfsim.kernel import BOUNDS, UNITS
from perfsim.mathops import INT64_SAFE
from perfsim.prediction import Counts, convention_flops, credited_flops

#: Calls of one call pattern before ``auto`` compiles its structures (and guard misses of a
#: structure's programs before one more is traced).
HOT_CALLS = 16
#: ... and the interpreted seconds the pattern must have spent by then: ``auto`` compiles
#: once the calls have cost about what compiling saves them from (the rent-or-buy rule: a
#: loop never pays much more than twice the better of the two). Building one structure's
#: program costs about 0.3 s in the calling thread and as much again in LLVM's thread on the
#: 2-core development machine (plus ~0.6 s once per process to load numba and LLVM), against
#: 0.2-0.5 ms per interpreted call: a pattern compiles after about 1 000-2 500 calls, and a
#: loop of a few hundred calls per pattern stays interpreted (a reviewer's 144 patterns x 40
#: calls took 31 s with compiles after 16 calls, 2.8 s interpreted).
COMPILE_AFTER_S = 0.5
#: Programs one structure may hold (each traced on a row the others' guards refused).
MAX_PROGRAMS = 4
#: Programs ``auto`` builds in one process: each compiled kernel holds its LLVM module, 4-8 MB
#: (32 programs of 4 GPUs x 4 algorithms x 2 head dims x 3 phases compiled to 16 kernels took
#: 127 MB beyond numba's and LLVM's first 140 MB on the development machine; structures whose
#: code is the same share a kernel), so past this the new structures stay interpreted.
#: ``compiled`` has no such limit.
MAX_AUTO_PROGRAMS = 32
#: Structures remembered at once (the table is emptied past this; compiled kernels stay
#: cached by :mod:`perfsim.compiled`, so a structure met again is traced again, not
#: compiled again).
MAX_STRUCTURES = 2048
#: ``PERFSIM_PREDICT_ENGINE`` values.
ENGINES = ("auto", "python", "compiled")
#: Relative tolerance of the check of a program's first result.
CHECK_RTOL = 1e-12
#: Counts fields, in order.
COUNT_FIELDS = tuple(f.name for f in dataclasses.fields(Counts))
#: The row inputs of a program, in order.
INPUTS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k")
#: The outputs of a program, in order (``Prediction`` fields; ``unit/*``, ``bound/*`` and
#: ``count/*`` the entries of ``unit_seconds``, ``bound_seconds`` and ``counts``).
OUTPUTS = ("seconds", "tflops", "bound", "clock_hz", "power_w", "memory_bytes",
           *(f"unit/{u}" for u in UNITS),
           *(f"bound/{b}" for b in BOUNDS),
           *(f"count/{c}" for c in COUNT_FIELDS))
_UNITS_AT = OUTPUTS.index(f"unit/{UNITS[0]}")
_BOUNDS_AT = _UNITS_AT + len(UNITS)
_COUNTS_AT = _BOUNDS_AT + len(BOUNDS)

_STRUCTURES: dict = {}
_CHOSEN: dict = {}
_LOCK = threading.Lock()
_BUILDS: list[threading.Thread] = []
#: Counters of this process: calls answered by a program, calls evaluated interpreted where
#: a structure had programs (guard misses), programs built, programs dropped by the check.
STATS = {"hits": 0, "misses": 0, "programs": 0, "dropped": 0}


def engine() -> str:
    """``PERFSIM_PREDICT_ENGINE`` (default ``auto``).

    Raises:
        perfsim.PerfsimError: any other value than :data:`ENGINES`."""
    value = os.environ.get("PERFSIM_PREDICT_ENGINE", "").strip().lower()
    if not value:
        return "auto"
    if value not in ENGINES:
        raise PerfsimError(f"PERFSIM_PREDICT_ENGINE={value!r}: use one of "
                           f"{', '.join(ENGINES)} (unset: auto)")
    return value


class _Structure:
    """What one structure has: guard misses since its last program, its programs (:class:`_Runner`),
    whether one is being built, whether it cannot be compiled (``dead``: no program serves
    it), whether it gets no more programs (``closed``: a row its guards refused could not be
    traced; its programs keep answering the rows they pass), and the objects whose ids its
    key holds (kept alive so that an id is not reused while the entry exists)."""

    __slots__ = ("misses", "runners", "building", "dead", "closed", "keep")

    def __init__(self, keep):
        self.misses, self.runners = 0, []
        self.building, self.dead, self.closed, self.keep = False, False, False, keep


class _Runner:
    """A compiled program bound to one-row buffers: per thread, its inputs and outputs
    allocated once (the outputs as slices of one buffer per dtype, read with one ``tolist``
    each) and the pointer table built once; :meth:`run` writes five numbers, calls the
    kernel and reads the outputs."""

    def __init__(self, program, input_dtypes: dict):
        from perfsim import compiled

        self.fn = compiled.kernel_of(program, vectorize=False)    # one row a call
        self.input_dtypes = [input_dtypes[name] for name in program.inputs]
        self.order = [INPUTS.index(name) for name in program.inputs]
        self.floats = program.floats if len(program.floats) else np.zeros(1)
        self.ints = program.ints if len(program.ints) else np.zeros(1, dtype=np.int64)
        rows = sorted((detail[0], name, np.dtype(detail[1]), detail[2])
                      for name, (kind, detail) in program.plan.items() if kind == "row")
        kinds = ("f", "i", "b")
        self.sizes = [max(1, sum(1 for r in rows if r[2].kind == k)) for k in kinds]
        used = dict.fromkeys(kinds, 0)
        #: per row output: (buffer, index within it)
        self.slots = []
        # name -> (buffer, index, constant, labels)
        read = {name: (None, None, detail if kind == "const" else None, None)
                for name, (kind, detail) in program.plan.items() if kind != "row"}
        for _, name, dtype, labels in rows:
            b = kinds.index(dtype.kind)
            self.slots.append((b, used[dtype.kind]))
            read[name] = (b, used[dtype.kind], None, labels)
            used[dtype.kind] += 1
        #: per output of :data:`OUTPUTS`, in order: (buffer, index, constant, labels)
        self.reads = tuple(read[name] for name in OUTPUTS)
        self.local = threading.local()
        self.verified = False

    def _bound(self):
        """This thread's ``(inputs, output buffers, guard flag, pointer table)``."""
        found = getattr(self.local, "bound", None)
        if found is None:
            inputs = [np.zeros(1, dtype=dtype) for dtype in self.input_dtypes]
            buffers = [np.zeros(n, dtype=dtype) for n, dtype in
                       zip(self.sizes, (np.float64, np.int64, np.bool_))]
            ok = np.ones(1, dtype=np.uint8)
            addresses = [*(a.ctypes.data for a in (*inputs, self.floats, self.ints)),
                         *(buffers[b].ctypes.data + i * buffers[b].itemsize
                           for b, i in self.slots), ok.ctypes.data]
            pointers = (ctypes.c_void_p * len(addresses))(*addresses)
            found = self.local.bound = (inputs, buffers, ok, pointers)
        return found

    def run(self, values: tuple) -> list | None:
        """The program's outputs for one row (``values`` in :data:`INPUTS` order), in
        :data:`OUTPUTS` order, or None where the row fails a guard."""
        inputs, buffers, ok, pointers = self._bound()
        for buffer, i in zip(inputs, self.order):
            buffer[0] = values[i]
        ok[0] = 1
        self.fn(pointers, 0, 1, 1, 1, 1)
        if not ok[0]:
            return None
        got = [b.tolist() for b in buffers]
        return [const if b is None else (got[b][index] if labels is None
                                         else labels[got[b][index]])
                for b, index, const, labels in self.reads]


class Handle:
    """One call's place in the table: its structure and row values. ``predict`` asks
    :meth:`fields`, and hands the interpreted prediction to :meth:`after` when it had to
    build one."""

    __slots__ = ("entry", "values", "build")

    def __init__(self, entry: _Structure, values: tuple, build):
        self.entry, self.values, self.build = entry, values, build

    def fields(self):
        """``(runner, outputs)`` of the first program whose guards this row passes, or
        ``(None, None)``."""
        for runner in self.entry.runners:
            out = runner.run(self.values)
            if out is not None:
                return runner, out
        return None, None

    def after(self, prediction, runner, out, seconds: float = 0.0) -> None:
        """Bookkeeping once the call was evaluated interpreted (in ``seconds``): check a
        program's first result against it, or build a program (the structure's first, or one
        more after :data:`HOT_CALLS` guard misses)."""
        entry = self.entry
        if runner is not None:
            _check(entry, runner, out, prediction)
            return
        if entry.dead or entry.building or entry.closed:
            return
        mode = engine()
        if entry.runners:
            entry.misses += 1
            if entry.misses < (1 if mode == "compiled" else HOT_CALLS) \
                    or len(entry.runners) >= MAX_PROGRAMS:
                return
        if mode == "auto" and STATS["programs"] >= MAX_AUTO_PROGRAMS:
            return
        with _LOCK:
            if entry.building:
                return
            entry.building = True
        entry.misses = 0
        self.build(entry, self.values, background=(mode == "auto"))


def prepare(workload, dims, spec, algo, params, evaluate):
    """The :class:`Handle` of a call (``dims``: ``Dims.of(workload)``; ``evaluate``:
    ``perfsim.predict.evaluate``), or None where no program serves it (yet): the engine is
    ``python``, llvmlite/numba are missing, a variable-length batch, a choice with a further
    key
    (:func:`_fixed_choice`), a structure found untraceable before, or a configuration that
    refuses the workload (the interpreted path says why). A call pattern not hot yet
    (``auto``: met fewer than :data:`HOT_CALLS` times, or its interpreted calls have taken
    less than :data:`COMPILE_AFTER_S`) gets a handle with no program, whose ``after`` counts
    the call's interpreted seconds.

    The calls are counted by their GPU, configuration and timing objects and dims other than
    B, H, H_kv, N_q, N_k — before the split/packing choice, which is made only for a hot
    pattern: a call that never becomes hot costs a few µs here. Once hot, each choice is a
    structure of its own, built at its first call.

    Raises:
        perfsim.PerfsimError: a bad ``PERFSIM_PREDICT_ENGINE`` (:func:`engine`)."""
    mode = engine()
    if mode == "python" or dims.seqlens is not None or not _available():
        return None
    B, H, H_kv, N_q, N_k = values = (dims.B, dims.H, dims.H_kv, dims.N_q, dims.N_k)
    if not all(type(v) is int for v in values):
        return None
    wide = B * H * N_q * N_k * (dims.d + dims.d_v) >= INT64_SAFE
    given = (workload.causal, tuple(workload.window))
    pattern = (id(algo), id(spec), id(params), dims.d, dims.d_v, dims.causal, dims.dtype,
               dims.phase, dims.dropout_p, dims.window, dims.softcap, dims.kv_dtype,
               dims.page_size, dims.mask_given, wide, given)
    if mode == "auto":
        # counted with the objects the ids name: an object built anew for every call may
        # take the address (and id) its freed predecessor had, and must count from 1
        seen = _CALLS.get(pattern)
        same = (seen is not None and seen[2] is algo and seen[3] is spec
                and seen[4] is params)
        calls, spent = (seen[0] + 1, seen[1]) if same else (1, 0.0)
        if calls < HOT_CALLS or spent < COMPILE_AFTER_S:
            if len(_CALLS) >= MAX_STRUCTURES:
                _CALLS.clear()
            record = _CALLS[pattern] = [calls, spent, algo, spec, params]
            return _Cold(record)
    try:
        run = _fixed_choice(algo, dims, spec)
    except Exception:       # noqa: BLE001 - the interpreted path refuses the call, and says why
        return None
    if run is None:
        return None
    key = (id(run), *pattern)
    entry = _STRUCTURES.get(key)
    if entry is None:
        _make_room(_STRUCTURES)
        entry = _STRUCTURES[key] = _Structure((run, algo, spec, params))
    if entry.dead:
        return None

    def build(entry, row, background):
        _build(entry, row, dims, run, spec, params, wide, given, evaluate, background)
    return Handle(entry, values, build)


#: Per call pattern (``prepare``) until it is hot: ``[calls, interpreted seconds, algo, spec,
#: params]``.
_CALLS: dict = {}


class _Cold:
    """A call of a pattern not hot yet: no program (:meth:`fields`); :meth:`after` adds the
    call's interpreted seconds to the pattern's count."""

    __slots__ = ("record",)
    entry = None

    def __init__(self, record: list):
        self.record = record

    def fields(self):
        return None, None

    def after(self, prediction, runner, out, seconds: float = 0.0) -> None:
        self.record[1] += seconds


def _make_room(table: dict) -> None:
    """Keep ``table`` under :data:`MAX_STRUCTURES`: drop the structures without a program
    (a hot loop's entries stay), or everything when all have one."""
    if len(table) < MAX_STRUCTURES:
        return
    with _LOCK:
        cold = [k for k, e in list(table.items()) if not e.runners and not e.building]
        for k in cold:
            table.pop(k, None)
        if len(table) >= MAX_STRUCTURES:
            table.clear()


_HAVE: list = []


def _available() -> bool:
    if not _HAVE:
        from perfsim import compiled
        _HAVE.append(compiled.available())
    return _HAVE[0]


def _fixed_choice(algo, dims, spec):
    """The configuration that runs ``dims`` with its split-KV and packing choice fixed — the
    split count and the packing group the configuration picks for this call — or None where
    the choice has a further key (FA4's one-tile packed rows). Kept per (configuration,
    choice), so that the calls of one choice map to one object."""
    if type(algo) is FA1 and algo.q_splits is None:
        # flash-attn 1's CTAs per head, forward and backward (a scan over counts): fixed as
        # its q_splits option
        splits = int(algo.launch(dims, spec)[2])
        return _chosen((id(algo), splits, 0), algo,
                       lambda: algo.model_copy(update={"q_splits": splits}))
    if dims.phase == "bwd":
        return algo
    fdims = dims if dims.phase == "fwd" else replace(dims, phase="fwd")
    inner = algo.config(fdims, spec) if isinstance(algo, Implementation) else algo
    choose = getattr(inner, "split_choices", None)
    if choose is None:
        return algo
    if type(inner).split_choices is FusedAttention.split_choices:
        if inner.num_splits != "auto" and inner.pack_gqa is False:
            return algo                     # fixed by its options: nothing to choose
        # the scalar twin of split_choices (perfsim.algorithms.splits.decide)
        chosen = inner.forward_dims(fdims, spec)
        splits, group, extra = chosen.splits, chosen.group, 0
    else:
        found = choose(fdims, spec)
        if found is None:
            return algo
        splits, group, extra = (int(np.asarray(c).reshape(-1)[0]) for c in found)
    if extra:
        return None
    return _chosen((id(algo), int(splits), int(group)), algo,
                   lambda: with_fixed_choice(algo, inner, int(group), int(splits)))


def _chosen(key, algo, make):
    """The fixed-choice configuration kept under ``key`` (made by ``make`` the first time),
    so that calls of one choice map to one object (and one structure)."""
    found = _CHOSEN.get(key)
    if found is None or found[0] is not algo:
        if len(_CHOSEN) >= 256:
            _CHOSEN.clear()
        found = _CHOSEN[key] = (algo, make())
    return found[1]


def _traced(run, spec, params, template, wide, given, evaluate):
    """The function :func:`perfsim.compiled.trace` records: ``evaluate`` on array dims
    (``template`` with the row inputs as arrays), returning :data:`OUTPUTS` — the TFLOP/s
    by the convention for the workload's ``given`` ``(causal, window)`` mask
    (``perfsim.prediction.model_flops``) and the footprint (``memory_for``) included."""
    from perfsim.algorithms.base import memory_for

    kind = np.float64 if wide else np.int64

    def fn(t):
        n_q, n_k = t["seqlen_q"], t["seqlen_k"]
        if wide:
            n_q, n_k = n_q.astype(kind), n_k.astype(kind)
        dims = replace(template, B=t["batch"].astype(kind), H=t["heads"].astype(kind),
                       H_kv=t["kv_heads"].astype(kind), N_q=n_q, N_k=n_k)
        kernels, seconds, unit_seconds, bound_seconds, bound, clock_hz, power_w = evaluate(
            run, dims, spec, params)
        counts = Counts.total(kernels)
        # the batch as a float (as the sweep counts it): 2·B·H·N_q·N_k·(d + d_v) passes
        # int64 long before the block needs float64 sizes
        model = convention_flops(t["batch"].astype(np.float64), t["heads"], n_q, n_k,
                                 template.d, template.d_v, given[0], given[1],
                                 template.phase)
        tflops = credited_flops(model, counts.tensor_flops, counts.flops) / seconds / 1e12
        out = {"seconds": seconds, "tflops": tflops, "bound": bound, "clock_hz": clock_hz,
               "power_w": power_w, "memory_bytes": memory_for(run, dims, spec)}
        out.update({f"unit/{u}": unit_seconds[u] for u in UNITS})
        out.update({f"bound/{b}": bound_seconds[b] for b in BOUNDS})
        out.update({f"count/{c}": getattr(counts, c) for c in COUNT_FIELDS})
        return out
    return fn


def _build(entry, row, dims, run, spec, params, wide, given, evaluate, background) -> None:
    """Trace ``row``, emit its program's IR and compile the scalar twins it calls here (the
    tracer patches numpy's converters while it runs; all three are Python work, which a
    background thread gets only in the gaps a busy caller leaves it: 8 s instead of 0.7 s
    for the first fa2 program in a loop of predict calls), then compile it with LLVM — in a
    daemon thread when ``background`` (llvmlite's calls release the GIL) — and add it to
    ``entry``."""
    from perfsim import compiled

    try:
        inputs = {name: np.array([v], dtype=np.int64) for name, v in zip(INPUTS, row)}
        trace = compiled.trace(_traced(run, spec, params, dims, wide, given, evaluate),
                               inputs)
        program = compiled.generate(trace)
        compiled.primitive_addresses(program)       # numba: Python work, here too
    except Exception:       # noqa: BLE001 - untraceable (or raising) structures stay interpreted
        # ... all of it where no program serves it yet; else its programs keep answering
        # the rows their guards pass (e.g. FlexAttention's forward: rows whose length class
        # spills take the spill timing, which does not trace) and no more are built
        with _LOCK:
            if entry.runners:
                entry.closed = True
            else:
                entry.dead = True
            entry.building = False
        return
    except BaseException:   # an interrupt: the structure may be built at a later call
        entry.building = False
        raise
    dtypes = {op[1]: dtype for op, _, dtype in trace.graph.nodes if op[0] == "input"}

    def finish():
        try:
            runner = _Runner(program, dtypes)
        except Exception as exc:    # noqa: BLE001 - a compiler failure: interpreted
            if not isinstance(exc, compiled.Untraceable):
                compiled.warn_failed(f"predict of {run.label()} on {spec.id}", exc)
            entry.dead = True
        else:
            entry.runners = [*entry.runners, runner]
            STATS["programs"] += 1
        finally:
            entry.building = False

    if not background:
        finish()
        return
    thread = threading.Thread(target=finish, name="perfsim-predict-compile", daemon=True)
    with _LOCK:
        _BUILDS[:] = [t for t in _BUILDS if t.is_alive()]
        _BUILDS.append(thread)
    try:
        thread.start()
    except BaseException:   # no thread to be had: the structure may be built at a later call
        entry.building = False
        raise


def wait(timeout: float | None = None) -> None:
    """Wait for the programs being compiled in the background (tests, benchmarks, and at
    exit: LLVM must not be compiling while the interpreter shuts down)."""
    with _LOCK:
        threads = list(_BUILDS)
    for thread in threads:
        thread.join(timeout)


atexit.register(wait, 10.0)


def _before_fork() -> None:
    """A fork waits for the programs being compiled in the background: a child forked while
    LLVM or numba held their own locks in that thread would hang at its first compile."""
    wait(60.0)


def _after_fork_in_child() -> None:
    """A forked child starts with no structure and fresh locks (a runner's buffers may have
    been mid-call in another thread of the parent)."""
    global _LOCK
    _LOCK = threading.Lock()
    _BUILDS.clear()
    _STRUCTURES.clear()
    _CHOSEN.clear()
    _CALLS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _reference(prediction) -> list:
    """An interpreted prediction's fields in :data:`OUTPUTS` order."""
    return [prediction.seconds, prediction.tflops, prediction.bound, prediction.clock_hz,
            prediction.power_w, prediction.memory_bytes,
            *(prediction.unit_seconds[u] for u in UNITS),
            *(prediction.bound_seconds[b] for b in BOUNDS),
            *(getattr(prediction.counts, c) for c in COUNT_FIELDS)]


def _check(entry, runner, out, prediction) -> None:
    """Compare a program's first result ``out`` with the interpreted ``prediction`` of the
    same call; keep the program, or drop every program of the structure, which stays
    interpreted. (Only the first result is compared: later rows rely on the guards, which
    hold every decision the model made on the traced row's values.)"""
    problem = None
    for name, got, want in zip(OUTPUTS, out, _reference(prediction)):
        if name == "bound":
            if str(got) != want:
                problem = f"bound {got!r} against {want!r}"
        elif want is None or got is None:
            if want is not got:
                problem = f"{name}: {got!r} against {want!r}"
        else:
            want, got = float(want), float(got)
            if want != got and not (np.isnan(want) and np.isnan(got)) and (
                    abs(got - want) > CHECK_RTOL * max(abs(want), np.finfo(float).tiny)):
                problem = f"{name}: {got!r} against {want!r}"
        if problem:
            break
    if problem:
        with _LOCK:                 # none of its programs is trusted any more
            entry.runners = []
            entry.dead = True
        STATS["dropped"] += 1
        warnings.warn(f"perfsim.fastpath: the compiled program of {prediction.algorithm.label()}"
                      f" on {prediction.gpu.id} disagrees with the interpreted predict "
                      f"({problem}); that structure stays interpreted. Please report this.",
                      RuntimeWarning, stacklevel=4)
        return
    runner.verified = True


def totals(runner, out: list) -> dict:
    """A verified program's outputs as ``Prediction`` fields (``seconds``, ``tflops``,
    ``bound``, ``clock_hz``, ``power_w``, ``memory_bytes``, ``unit_seconds``,
    ``bound_seconds``, ``counts``). A count is a Python int where the program computes it
    in int64 and a float where in float64; the interpreted path's type for the same count can
    be the other (its integer arithmetic on Python ints, or a division on the way), with the
    same value."""
    power = out[4]
    return {"seconds": float(out[0]), "tflops": float(out[1]), "bound": str(out[2]),
            "clock_hz": float(out[3]), "power_w": None if power is None else float(power),
            "memory_bytes": float(out[5]),
            "unit_seconds": dict(zip(UNITS, map(float, out[_UNITS_AT:_BOUNDS_AT]))),
            "bound_seconds": dict(zip(BOUNDS, map(float, out[_BOUNDS_AT:_COUNTS_AT]))),
            "counts": Counts(*out[_COUNTS_AT:])}


def clear() -> None:
    """Forget every structure and its programs (the compiled kernels stay cached)."""
    wait()
    with _LOCK:
        _STRUCTURES.clear()
        _CHOSEN.clear()
        _CALLS.clear()
