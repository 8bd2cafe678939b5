"""``perfsim.fastpath``: a structure of ``predict`` calls met often runs as a compiled program
of the model's own array code, and gives the interpreted path's numbers (relative 1e-12, the
bound exactly) on every row it answers; rows its guards refuse, split and packed forwards,
and every call under ``PERFSIM_PREDICT_ENGINE=python`` stay interpreted."""

from __future__ import annotations

import copy
import itertools
import pickle
import random
import threading
import warnings
import zlib

import numpy as np
import pytest

import perfsim
from perfsim import fastpath
from perfsim.algorithms import Dims
from perfsim.implementations import resolve
from perfsim.predict import _interpreted, timing_for

pytestmark = pytest.mark.skipif(not fastpath._available(),
                                reason="llvmlite/numba (perfsim[fast]) not installed")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test starts with no structure remembered, compiling at a structure's first call
    (``compiled``: deterministic), unless it sets the engine itself."""
    fastpath.clear()
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "compiled")
    before = dict(fastpath.STATS)
    yield before
    fastpath.clear()


def _fields(p) -> list:
    return fastpath._reference(p)


def _same(fast, ref) -> str | None:
    for name, x, y in zip(fastpath.OUTPUTS, _fields(fast), _fields(ref)):
        if name == "bound":
            if x != y:
                return f"bound {x} != {y}"
        elif x is None or y is None:
            if x is not y:
                return f"{name}: {x} != {y}"
        elif not (x == y or abs(x - y) <= 1e-12 * abs(y)):
            return f"{name}: {x} != {y} ({abs(x - y) / abs(y):.1e})"
    return None


def _interpreted_of(w, gpu, algorithm):
    spec, algo = perfsim.load_gpu(gpu), resolve(algorithm)
    return _interpreted(w, Dims.of(w), spec, algo, timing_for(spec, algo))


def _answered(p) -> bool:
    """Whether ``p`` came from a program (its kernels not built yet)."""
    return "_build_kernels" in p.__dict__


STRUCTURES = [
    ("h100-sxm5", "fa2", dict(head_dim=128, causal=True)),
    ("h100-sxm5", "fa3", dict(head_dim=128, causal=False, phase="fwd_bwd")),
    ("h200-sxm", "sdpa-cudnn", dict(head_dim=128, causal=True, phase="bwd")),
    ("a100-sxm4-80gb", "fa2", dict(head_dim=64, causal=False, phase="bwd", dtype="fp16")),
    ("b200", "fa4", dict(head_dim=128, causal=True)),
    ("rtx-4090", "sdpa-flash", dict(head_dim=96, causal=True)),
    ("h100-sxm5", "standard", dict(head_dim=128, causal=True, phase="fwd_bwd")),
    ("a100-sxm4-40gb", "fa1", dict(head_dim=64, causal=True, phase="fwd_bwd")),
    ("h200-sxm", "flex", dict(head_dim=128, causal=True)),
    # the forward's bound checks and spills by length class (3000: even, off 16)
    ("h100-sxm5", "flex", dict(head_dim=64, causal=False)),
    ("l40s", "sdpa-math", dict(head_dim=64, causal=False)),
    ("h100-sxm5", "fa2", dict(head_dim=128, causal=True, window=(512, 0))),
]
#: Structures whose code the tracer cannot record (a sliding window's tile ranges stack
#: arrays along another axis): interpreted, with the same numbers.
UNTRACEABLE = {("h100-sxm5", "fa2", 512)}


@pytest.mark.parametrize("gpu,algorithm,fixed", STRUCTURES)
def test_programs_give_the_interpreted_numbers_on_every_row_they_answer(gpu, algorithm, fixed):
    rng = random.Random(zlib.crc32(f"{gpu} {algorithm}".encode()))
    answered = 0
    for _ in range(24):
        heads = rng.choice([8, 16, 32])
        w = perfsim.AttentionWorkload(
            batch=rng.choice([1, 2, 4, 16]), heads=heads, seqlen_q=rng.choice(
                [1024, 2048, 4096, 8192, 3000]), **fixed)
        p = perfsim.predict(w, gpu=gpu, algorithm=algorithm)
        answered += _answered(p)
        problem = _same(p, _interpreted_of(w, gpu, algorithm))
        assert problem is None, f"{w}: {problem}"
    if (gpu, algorithm, fixed.get("window", (None,))[0]) in UNTRACEABLE:
        assert answered == 0
    else:
        # the first call builds, the second checks; the rest a program answers unless its
        # guards refuse the row
        assert answered >= 8


def test_rows_far_larger_than_the_traced_one_keep_their_numbers():
    """Sizes whose product passes 2^53 run in float64 (the structure's key says so); a
    count the program made from its int64 inputs (the convention's FLOPs) wrapped past
    2^63 for a batch of 1024 (TFLOP/s came out negative)."""
    def w(batch):
        return perfsim.AttentionWorkload(batch=batch, heads=1, seqlen_q=2 ** 22, head_dim=128)
    for batch in (2, 2, 3, 1024, 4000):
        p = perfsim.predict(w(batch), gpu="h100-sxm5", algorithm="fa2")
        ref = _interpreted_of(w(batch), "h100-sxm5", "fa2")
        assert _same(p, ref) is None, batch
    assert _answered(p) and p.tflops > 0


def test_a_row_that_does_not_trace_keeps_the_structures_programs():
    """FlexAttention's head-dim-64 forward on the H100 spills at an even length off 16
    (3000), and the spill timing does not trace: that row runs interpreted, the structure
    gets no more programs, and its program keeps answering the lengths it was traced for."""
    def predict(n):
        w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=n, head_dim=64)
        return perfsim.predict(w, gpu="h100-sxm5", algorithm="flex")

    predict(4096), predict(4096)
    assert _answered(predict(2048))
    spilled = predict(3000)
    assert not _answered(spilled) and spilled.kernels[0].cost.local_load_bytes > 0
    entries = [e for e in fastpath._STRUCTURES.values() if e.runners]
    assert len(entries) == 1 and entries[0].closed and not entries[0].dead
    assert _answered(predict(8192)) and not _answered(predict(3000))


def test_kernels_are_built_when_read_and_match_the_interpreted_ones():
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True)
    for _ in range(3):
        p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert _answered(p)
    ref = _interpreted_of(w, "h100-sxm5", "fa2")
    assert [k.cost.name for k in p.kernels] == [k.cost.name for k in ref.kernels]
    assert not _answered(p)
    assert [k.seconds for k in p.kernels] == pytest.approx([k.seconds for k in ref.kernels],
                                                           rel=1e-12)
    assert "tensor" in p.explain()
    # copies and pickles carry the kernels, not the closure that builds them
    q = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert _answered(q)
    for other in (pickle.loads(pickle.dumps(q)), copy.deepcopy(q), copy.copy(q)):
        assert len(other.kernels) == len(ref.kernels)
        assert "_build_kernels" not in other.__dict__
    assert q.to_dict()["seconds"] == q.seconds
    # copies with a field changed build the kernels too
    from perfsim.frozen import replace
    r = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert _answered(r)
    assert len(replace(r, seconds=1.0).kernels) == len(ref.kernels)


def test_a_row_the_guards_refuse_is_interpreted_and_counted(fresh):
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True)
    for _ in range(3):
        perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    # few CTAs: flash-attn 2 splits the keys (another structure), or one short sequence
    # whose tiles the trace's guards did not see
    odd = w.replace(batch=1, heads=1, seqlen_q=200)
    p = perfsim.predict(odd, gpu="h100-sxm5", algorithm="fa2")
    assert not _answered(p)
    assert _same(p, _interpreted_of(odd, "h100-sxm5", "fa2")) is None


@pytest.mark.parametrize("algorithm", ["fa2", "fa3", "sdpa-cudnn", "flash-attn-cute"])
def test_split_and_packed_decode_runs_as_programs_of_its_choice(algorithm):
    """One query token, GQA 4, a long cache: the configuration splits the keys and packs the
    query heads; each (split count, packing group) is a structure of its own."""
    for n_k in (8192, 32768, 131072, 131072 + 4096):
        w = perfsim.AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=1,
                                      seqlen_k=n_k, head_dim=128)
        for _ in range(3):
            p = perfsim.predict(w, gpu="h100-sxm5", algorithm=algorithm)
        assert _answered(p), n_k
        assert _same(p, _interpreted_of(w, "h100-sxm5", algorithm)) is None


def test_fa4_one_tile_packed_rows_stay_interpreted():
    """FA4's forward takes one Q tile per CTA where the packed query rows fit one 128-row
    tile (``FA4.split_choices``' third key): not fixed by a configuration, so not traced."""
    w = perfsim.AttentionWorkload(batch=4, heads=32, kv_heads=8, seqlen_q=4, seqlen_k=8192,
                                  head_dim=128)
    for _ in range(4):
        p = perfsim.predict(w, gpu="b200", algorithm="fa4")
    assert not _answered(p)
    assert _same(p, _interpreted_of(w, "b200", "fa4")) is None


def test_python_engine_never_compiles(monkeypatch, fresh):
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "python")
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    for _ in range(40):
        p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert not _answered(p)
    assert fastpath.STATS["programs"] == fresh["programs"]


def test_auto_engine_compiles_in_the_background_once_a_structure_is_hot(monkeypatch, fresh):
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "auto")
    monkeypatch.setattr(fastpath, "COMPILE_AFTER_S", 0.0)    # calls alone decide
    # (the budget counts this process's programs: earlier tests built many)
    monkeypatch.setattr(fastpath, "MAX_AUTO_PROGRAMS", fresh["programs"] + 8)
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=2048, head_dim=64, causal=True)
    for _ in range(fastpath.HOT_CALLS - 1):
        assert not _answered(perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa2"))
    assert fastpath.STATS["programs"] == fresh["programs"]
    perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa2")     # hot: a build starts
    fastpath.wait()
    assert fastpath.STATS["programs"] == fresh["programs"] + 1
    perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa2")     # checked
    assert _answered(perfsim.predict(w.replace(batch=3), gpu="a100-sxm4-80gb",
                                     algorithm="fa2"))


def test_auto_compiles_a_pattern_only_once_its_calls_have_cost_what_compiling_does(
        monkeypatch, fresh):
    """A reviewer's loop of 144 call patterns x 40 calls took 31 s with every pattern
    compiled after 16 calls, against 2.8 s interpreted: ``auto`` now also waits until a
    pattern's interpreted calls have taken :data:`fastpath.COMPILE_AFTER_S` (about what
    building its program costs), then compiles it."""
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "auto")
    monkeypatch.setattr(fastpath, "MAX_AUTO_PROGRAMS", fresh["programs"] + 8)
    monkeypatch.setattr(fastpath, "COMPILE_AFTER_S", 1e9)
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=2048, head_dim=96, causal=True)
    for _ in range(3 * fastpath.HOT_CALLS):
        assert not _answered(perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa2"))
    fastpath.wait()
    assert fastpath.STATS["programs"] == fresh["programs"]
    (record,) = [r for k, r in fastpath._CALLS.items()     # (its pattern: head dim 96)
                 if k[3] == 96 and r[0] == 3 * fastpath.HOT_CALLS]
    assert 0 < record[1] < 60            # the interpreted seconds of those calls
    monkeypatch.setattr(fastpath, "COMPILE_AFTER_S", record[1])
    perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa2")     # spent enough: a build
    fastpath.wait()
    assert fastpath.STATS["programs"] == fresh["programs"] + 1


def test_auto_stops_building_past_its_program_budget(monkeypatch, fresh):
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "auto")
    monkeypatch.setattr(fastpath, "COMPILE_AFTER_S", 0.0)    # calls alone decide
    monkeypatch.setattr(fastpath, "MAX_AUTO_PROGRAMS", fastpath.STATS["programs"])
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=2048, head_dim=64, causal=True)
    for _ in range(fastpath.HOT_CALLS + 4):
        perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa2")
    fastpath.wait()
    assert fastpath.STATS["programs"] == fresh["programs"]


def test_timing_dicts_and_labels_repeat_their_structure():
    """``timing={...}`` and a label name the same objects call after call (predict keeps
    one ``TimingParams`` per dict, ``resolve`` one configuration per label), so their calls
    reach a program."""
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=4096, head_dim=128, causal=True)
    for algorithm, timing in (("fa2(block_m=64)", None), ("fa2", {"clock": 1.5e9})):
        for _ in range(3):
            p = perfsim.predict(w, gpu="h100-sxm5", algorithm=algorithm, timing=timing)
        assert _answered(p), algorithm
    assert p.clock_hz <= 1.5e9


def test_objects_built_anew_every_call_never_get_hot(monkeypatch, fresh):
    """A configuration built per call can take its freed predecessor's address (and id):
    counted by identity alone, 200 such calls built 4 programs that no call ever used."""
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "auto")
    monkeypatch.setattr(fastpath, "COMPILE_AFTER_S", 0.0)    # calls alone decide
    monkeypatch.setattr(fastpath, "MAX_AUTO_PROGRAMS", fresh["programs"] + 8)
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=2048, head_dim=128, causal=True)
    for _ in range(3 * fastpath.HOT_CALLS):
        perfsim.predict(w, gpu="h100-sxm5", algorithm=perfsim.algorithms.FA2(block_m=64))
    fastpath.wait()
    assert fastpath.STATS["programs"] == fresh["programs"]
    # ... while timing_for with overrides keeps one object per value, so it does
    for _ in range(fastpath.HOT_CALLS + 1):
        perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2",
                        timing=perfsim.timing_for("h100-sxm5", "fa2", clock=1.5e9))
    fastpath.wait()
    assert fastpath.STATS["programs"] == fresh["programs"] + 1


def test_a_blank_engine_name_is_auto(monkeypatch):
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "  ")
    assert fastpath.engine() == "auto"


def test_a_bad_engine_name_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "fast")
    w = perfsim.AttentionWorkload(batch=1, heads=8, seqlen_q=128, head_dim=64)
    with pytest.raises(perfsim.PerfsimError, match="PERFSIM_PREDICT_ENGINE='fast'.*auto"):
        perfsim.predict(w)


def test_a_program_that_disagrees_is_dropped_with_a_warning(fresh):
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True)
    perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")          # builds the program
    (entry,) = fastpath._STRUCTURES.values()
    (runner,) = entry.runners
    floats = runner.floats
    assert floats.size > 1
    floats *= 1.5                                # every constant of the program is wrong now
    with pytest.warns(RuntimeWarning, match="disagrees with the interpreted predict"):
        p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert _same(p, _interpreted_of(w, "h100-sxm5", "fa2")) is None
    assert entry.dead and not entry.runners
    assert fastpath.STATS["dropped"] == fresh["dropped"] + 1
    assert not _answered(perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2"))


def test_threads_get_their_own_rows_right():
    ws = [perfsim.AttentionWorkload(batch=b, heads=h, seqlen_q=n, head_dim=128, causal=True)
          for b, h, n in itertools.product((1, 4, 8), (16, 32), (2048, 4096, 8192))]
    for _ in range(3):
        perfsim.predict(ws[0], gpu="h100-sxm5", algorithm="fa3")
    want = {w: _interpreted_of(w, "h100-sxm5", "fa3") for w in ws}
    problems: list = []

    def work(seed):
        rng = random.Random(seed)
        for _ in range(200):
            w = rng.choice(ws)
            problem = _same(perfsim.predict(w, gpu="h100-sxm5", algorithm="fa3"), want[w])
            if problem:
                problems.append(problem)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    # each thread has its own buffers: no thread waits for another's call, and none counts
    # a busy program as a guard miss (which built extra programs)
    assert [len(e.runners) for e in fastpath._STRUCTURES.values()] == [1]


def test_counts_keep_their_values_and_results_stay_finite():
    w = perfsim.AttentionWorkload(batch=8, heads=32, seqlen_q=8192, head_dim=128,
                                  phase="fwd_bwd")
    for _ in range(3):
        p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert _answered(p)
    ref = _interpreted_of(w, "h100-sxm5", "fa2")
    assert p.counts == ref.counts
    assert all(np.isfinite(v) for v in p.unit_seconds.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert p.explain()


@pytest.mark.slow
def test_the_golden_cases_through_their_programs():
    """The 500 seeded cases of ``tests/test_speed_equivalence.py``, each predicted three
    times (build, check, answer): the third against the golden file, to the tolerance the
    interpreted path is held to (relative 1e-12)."""
    from tests.speed_cases import outcome
    from tests.test_speed_equivalence import _golden, check_row, workload_of

    hits = fastpath.STATS["hits"]
    for row in _golden():
        wl = workload_of(row)
        for _ in range(2):
            outcome(wl, row["gpu"], row["algorithm"])
        check_row(row, outcome(wl, row["gpu"], row["algorithm"]))
    # most predicted cases are dense and unsplit: their third call is a program's
    assert fastpath.STATS["hits"] - hits > 100


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_starts_afresh_and_predicts_right():
    import multiprocessing

    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True)
    for _ in range(3):
        perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    want = _interpreted_of(w, "h100-sxm5", "fa2").seconds
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply(_child_seconds, (w,))
    assert got[0] == pytest.approx(want, rel=1e-12)
    assert got[1] == 0                      # no structure carried over


def _child_seconds(w):
    structures = len(fastpath._STRUCTURES)
    return perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2").seconds, structures


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_fork_during_a_background_compile_leaves_a_child_that_can_compile(monkeypatch):
    """A child forked while the parent compiled in the background hung at its own first
    compile (LLVM's or numba's lock, held by the parent's compile thread, copied locked):
    a fork now waits for the parent's builds."""
    import os
    import time

    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "auto")
    monkeypatch.setattr(fastpath, "COMPILE_AFTER_S", 0.0)    # calls alone decide
    w = perfsim.AttentionWorkload(batch=1, heads=16, seqlen_q=2048, head_dim=128, causal=True)
    for i in range(fastpath.HOT_CALLS):
        perfsim.predict(w.replace(batch=1 + i % 3), gpu="h100-sxm5", algorithm="fa3")
    pid = os.fork()                     # the build just started in the background
    if pid == 0:                        # child: compile something of its own, then leave
        code = 1
        try:
            os.environ["PERFSIM_PREDICT_ENGINE"] = "compiled"
            perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa2")
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung")


#: A what-if GPU whose SMs hold thousands of CTAs: flash-attn 2's closed cycle then has more
#: than 2^CUSTOMER_BITS customers (perfsim.queueing).
CROWDED = dict(max_ctas_per_sm=4096, max_warps_per_sm=4096, max_threads_per_sm=2**17,
               registers_per_sm=2**24, smem_bytes_per_sm=2**30)


def test_more_customers_than_a_program_reads_are_interpreted():
    """A program traced on rows of few resident CTAs reads 8 bits of the customer count; a
    later row with more fails that guard and is interpreted (before the guard: ``inf``)."""
    gpu = perfsim.load_gpu("h100-sxm5").model_copy(update={**CROWDED, "id": "crowded"})
    small = perfsim.AttentionWorkload(batch=1, heads=64, seqlen_q=4096, head_dim=64)
    for batch in (1, 2, 3, 1, 2):
        perfsim.predict(small.replace(batch=batch), gpu=gpu, algorithm="fa2")
    big = small.replace(batch=64)
    p = perfsim.predict(big, gpu=gpu, algorithm="fa2")
    assert np.isfinite(p.seconds) and p.bound == "tensor"
    assert _same(p, _interpreted_of(big, gpu, "fa2")) is None


def test_a_count_past_the_bits_a_program_read_gives_the_interpreted_numbers():
    """A program traced on a grid of few resident CTAs reads the fewest bits of the customer
    count that hold it (perfsim.queueing.CUSTOMER_BIT_TIERS: 4); a later row with a count of
    16 or more must not be answered from those 4 bits (16 would read as 0 and the cycle
    come out wrong): it fails the guard and the pattern is traced again on it. What this
    checks is the numbers, equal to the interpreted path's, whichever path answered."""
    gpu = perfsim.load_gpu("h100-sxm5").model_copy(update={**CROWDED, "id": "crowded"})
    few = perfsim.AttentionWorkload(batch=1, heads=8, seqlen_q=4096, head_dim=64)
    for _ in range(2):                                     # compiles the structure
        perfsim.predict(few, gpu=gpu, algorithm="fa2")
    for heads in (8, 24):                                  # 4 and 12 customers
        assert _answered(perfsim.predict(few.replace(heads=heads), gpu=gpu, algorithm="fa2"))
    for heads in (32, 96):                                 # 16 and 48: past 4 bits
        many = few.replace(heads=heads)
        p = perfsim.predict(many, gpu=gpu, algorithm="fa2")
        assert _same(p, _interpreted_of(many, gpu, "fa2")) is None
