"""The speedups of one ``predict`` (issue 13, docs/performance.md) compute what the plain
code computes: the staged kernel timing (``timing.KernelClock``), the copy of frozen
dataclasses (``perfsim.frozen.replace``), and every cache gives a different answer for a
different input. ``test_speed_equivalence.py`` pins whole predictions; these pin the parts."""

from __future__ import annotations

import dataclasses
import functools
import inspect

import numpy as np
import pytest

import perfsim
from perfsim.algorithms import Dims
from perfsim.frozen import replace
from perfsim.gpu_catalog import load_gpu
from perfsim.kernel import ROOFLINE, KernelCost
from perfsim.predict import evaluate
from perfsim.timing import KernelClock, TimingParams, kernel_seconds, time_kernel

W = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True)


def _kernels(gpu="h100-sxm5", algorithm="fa3", workload=W):
    spec = load_gpu(gpu)
    algo = perfsim.implementations.resolve(algorithm)
    return spec, algo, algo.kernels(Dims.of(workload), spec)


def test_frozen_replace_builds_what_dataclasses_replace_builds():
    _, _, ks = _kernels()
    k = ks[0]
    for changes in ({"executed": {"tensor": 1.0, "fp32": 2.0, "mufu": 3.0, "smem": 4.0,
                                  "alu": 5.0}}, {"grid": 7, "ctas_per_sm": 2}, {}):
        fast, plain = replace(k, **changes), dataclasses.replace(k, **changes)
        assert type(fast) is KernelCost and fast == plain
        assert vars(fast) == vars(plain)
    d = Dims.of(W)
    assert replace(d, phase="bwd", N_q=8) == dataclasses.replace(d, phase="bwd", N_q=8)


def test_frozen_replace_runs_post_init_and_refuses_unknown_fields():
    # a kernel built from plain counts names its terms in __post_init__; replacing a count
    # of a kernel with no terms (all counts zero) names them again, as dataclasses.replace
    empty = KernelCost("k", 1)
    assert empty.terms == {}
    assert replace(empty, tensor_flops=8).terms == {"tensor/k": 8}
    assert replace(empty, tensor_flops=8) == dataclasses.replace(empty, tensor_flops=8)
    with pytest.raises(TypeError, match="no_such_field"):
        replace(empty, no_such_field=1)


def test_frozen_replace_drops_values_cached_beside_the_fields():
    @dataclasses.dataclass(frozen=True)
    class Box:
        x: int

        @functools.cached_property
        def double(self):
            return 2 * self.x

    box = Box(1)
    assert box.double == 2
    assert replace(box, x=5).double == 10


@pytest.mark.parametrize("algorithm", ["fa2", "fa3", "standard", "sdpa-flash", "fa1"])
@pytest.mark.parametrize("phase", ["fwd", "fwd_bwd"])
def test_kernel_clock_times_as_time_kernel(algorithm, phase):
    spec, algo, _ = _kernels(algorithm=algorithm)
    params = perfsim.timing_for(spec, algo)
    w = W.replace(phase=phase)
    for k in algo.kernels(Dims.of(w), spec):
        kc = KernelClock(k, spec, params)
        for clock in (1.2e9, 1.755e9, None, 1.2e9):
            staged, plain = kc.timing(clock), time_kernel(k, spec, params, clock)
            assert staged.seconds == plain.seconds and staged.bound == plain.bound
            assert staged.unit_seconds == plain.unit_seconds
            assert kc.seconds(clock) == kernel_seconds(k, spec, params, clock)


def test_kernel_clock_gives_each_clock_its_own_time():
    spec, algo, ks = _kernels()
    kc = KernelClock(ks[0], spec, perfsim.timing_for(spec, algo))
    slow, fast = kc.seconds(1.0e9), kc.seconds(1.8e9)
    assert slow > fast
    assert kc.seconds(1.0e9) == slow          # not the last clock's result
    # 1.8 GHz was reached through the linear form read off the first clock (a sum in
    # another order): the full timing agrees with it to rounding, not always bit for bit
    assert kc.timing(1.8e9).seconds == pytest.approx(fast, rel=1e-14)
    assert kc.timing(1.0e9).seconds == slow   # a kept clock: its own result and bound
    assert kc.timing(1.0e9).bound == time_kernel(ks[0], spec, kc.params, 1.0e9).bound


@pytest.mark.parametrize("algorithm,workload", [
    ("fa3", W), ("fa2", W), ("standard", W), ("fa1", W), ("sdpa-flash", W.replace(phase="bwd")),
    ("fa2", perfsim.AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=1,
                                      seqlen_k=131072, head_dim=128))])
def test_kernel_clock_seconds_scale_with_the_clock_as_the_full_timing(algorithm, workload):
    # the clock search's shortcut (KernelClock._linear_form): after a first clock, a kernel's
    # seconds at another are A·f0/f + B per group; the full timing at each clock agrees
    spec, algo, _ = _kernels(algorithm=algorithm, workload=workload)
    params = perfsim.timing_for(spec, algo)
    linear = 0
    for k in algo.kernels(Dims.of(workload), spec):
        kc = KernelClock(k, spec, params)
        kc.seconds(1.83e9)
        for clock in (1.1e9, 1.4e9, 1.65e9, 1.98e9):
            fast = kc.seconds(clock)
            assert fast == pytest.approx(KernelClock(k, spec, params).at(clock)[1], rel=1e-13)
        linear += bool(kc._linear)
    assert linear                       # the shortcut was taken by some kernel


def test_kernel_clock_linear_form_declines_what_is_not_linear():
    # an unpipelined kernel (load latency in seconds inside a queueing solution) has no
    # A·f0/f + B form: its seconds at other clocks come from the full timing
    spec = load_gpu("h100-sxm5")
    algo = perfsim.algorithms.FA1(pipelined=False)
    params = perfsim.timing_for(spec, algo)
    chained = [k for k in algo.kernels(Dims.of(W), spec) if k.load_chain is not None]
    assert chained
    kc = KernelClock(chained[0], spec, params)
    kc.seconds(1.83e9)
    assert kc.seconds(1.2e9) == KernelClock(chained[0], spec, params).at(1.2e9)[1]
    assert kc._linear is False


def test_kernel_clock_on_arrays():
    spec, algo, ks = _kernels()
    params = perfsim.timing_for(spec, algo)
    clocks = np.array([1.0e9, 1.5e9, 1.8e9])
    kc = KernelClock(ks[0], spec, params)
    got = kc.seconds(clocks)
    want = np.array([kernel_seconds(ks[0], spec, params, float(c)) for c in clocks])
    assert np.array_equal(got, want)
    again = kc.seconds(clocks.copy())        # an equal array, not the same one: recomputed
    assert np.array_equal(again, want)


def test_timing_params_give_different_kernel_times():
    spec, algo, ks = _kernels()
    base = perfsim.timing_for(spec, algo)
    slower = perfsim.timing_for(spec, algo, tensor_efficiency=0.5, hbm_efficiency=0.5)
    assert (KernelClock(ks[0], spec, slower).seconds(1.5e9)
            > KernelClock(ks[0], spec, base).seconds(1.5e9))
    other = spec.replace(sm_count=100)
    assert (KernelClock(ks[0], other, TimingParams.for_gpu(other)).seconds(1.5e9)
            != KernelClock(ks[0], spec, TimingParams.for_gpu(spec)).seconds(1.5e9))


def test_evaluate_times_at_the_clock_it_returns():
    # the final timing comes from the clock search's linear form (KernelClock._scaled_at)
    # where the call is power-capped (both, on the H100), from the full timing at the
    # ceiling where not: either way it is the timing at the clock the call reports
    capped = 0
    for algorithm in ("fa3", "fa2"):
        spec, algo, _ = _kernels(algorithm=algorithm)
        params = perfsim.timing_for(spec, algo)
        kernels, seconds, *_, clock_hz, _ = evaluate(algo, Dims.of(W), spec, params)
        capped += clock_hz < spec.clock_hz
        for k in kernels:
            full = time_kernel(k.cost, spec, params, clock_hz)
            assert k.seconds == pytest.approx(full.seconds, rel=1e-13)
            assert k.bound == full.bound
            for unit, t in full.unit_seconds.items():
                assert k.unit_seconds[unit] == pytest.approx(t, rel=1e-13, abs=0)
    assert capped                    # the linear form was taken


def test_a_name_means_the_default_config_built_once():
    from perfsim.algorithms import FA2, FA3, resolve
    assert resolve("fa2") is resolve("FA2") and resolve("fa2") == FA2()
    assert resolve("fa3") == FA3() and resolve("fa3") != resolve("fa2")
    custom = FA2(block_m=64)
    assert resolve(custom) is custom


def test_rate_factors_are_kept_per_spec_params_and_dtype():
    from perfsim.timing import rates
    spec, algo, ks = _kernels()
    k = ks[0]
    base = perfsim.timing_for(spec, algo)
    half = perfsim.timing_for(spec, algo, tensor_efficiency=0.5, hbm_efficiency=0.5)
    a, b = rates(spec, k, base), rates(spec, k, half)
    assert b["tensor"] == pytest.approx(a["tensor"] / 2) and b["hbm"] == pytest.approx(
        a["hbm"] * 0.5 / spec.hbm_efficiency)
    assert rates(spec, k, base) == a                             # the kept entry
    fp8 = dataclasses.replace(k, tensor_dtype="fp8_e4m3")
    assert rates(spec, fp8, base)["tensor"] == pytest.approx(2 * a["tensor"])
    wider = spec.replace(sm_count=2 * spec.sm_count)
    assert rates(wider, k, base)["tensor"] == pytest.approx(2 * a["tensor"])


def test_overlap_entries_follow_each_group():
    from perfsim.timing import _entries, group_time
    seconds = {"tensor": 1.0, "fp32": 2.0, "mufu": 3.0, "smem": 4.0, "hbm": 5.0}
    assert _entries(("tensor", ("hbm", 0.5))) == (("tensor", 1.0), ("hbm", 0.5))
    assert group_time(seconds, ("tensor", ("hbm", 0.5))) == 3.5
    assert group_time(seconds, ("tensor", ("hbm", 0.25))) == 2.25
    assert group_time(seconds, ["fp32", "mufu"]) == 5.0          # a list: not kept


def test_split_choice_is_a_function_of_its_integers():
    from perfsim.algorithms.splits import fa2_num_splits
    assert fa2_num_splits(8, 132, 1024) == fa2_num_splits(8, 132, 1024) > 1
    assert fa2_num_splits(8, 132, 1024) != fa2_num_splits(64, 132, 1024)
    assert fa2_num_splits(264, 132, 1024) == 1


def test_eager_softmax_tables_follow_the_params():
    spec, algo, _ = _kernels(algorithm="standard")
    base = perfsim.timing_for(spec, algo)
    flat = perfsim.timing_for(spec, algo, eager_softmax=((128, 0.5), (8192, 0.5)))
    cost = KernelCost("softmax", 1, eager_op="softmax", row_length=4096)
    assert flat.eager_efficiency(cost) == pytest.approx(0.5)
    assert base.eager_efficiency(cost) != flat.eager_efficiency(cost)
    assert base.eager_efficiency(cost) == base.eager_efficiency(cost)


def test_kernel_terms_named_from_plain_counts():
    k = KernelCost("k", 1, tensor_flops=8, fp32_flops=0.0, hbm_read_bytes=np.float64(0),
                   exp_ops=np.array([0, 1]))
    assert set(k.terms) == {"tensor/k", "mufu/k"}


def test_default_timing_follows_the_configs_software_profile():
    from perfsim.predict import timing_for
    spec = load_gpu("h100-sxm5")
    assert timing_for(spec, "fa2") == TimingParams.for_gpu(spec, "pytorch")
    assert timing_for(spec, "standard") == TimingParams.for_gpu(spec, "sdpa-math")
    assert timing_for(spec, "sdpa-flash") == TimingParams.for_gpu(spec, "sdpa-flash")
    assert timing_for(spec, "fa2") != timing_for(spec, "standard")


def test_fast_init_builds_what_the_dataclass_init_builds():
    from perfsim.frozen import fast_init

    def make():
        @dataclasses.dataclass(frozen=True)
        class Twin:
            name: str
            grid: object
            count: int = 0
            terms: dict = dataclasses.field(default_factory=dict)

            def __post_init__(self):
                if not self.terms:
                    object.__setattr__(self, "terms", {"count": self.count})
        return Twin

    plain, fast = make(), fast_init(make())
    assert inspect.signature(plain) == inspect.signature(fast)
    for args, kwargs in (((), {"name": "k", "grid": 2}), (("k", 2, 5), {}),
                         (("k",), {"grid": 3, "terms": {"x": 1}})):
        a, b = plain(*args, **kwargs), fast(*args, **kwargs)
        assert vars(a) == vars(b) and list(vars(a)) == list(vars(b))
    assert fast("k", 1).terms is not fast("k", 1).terms        # a fresh factory value
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast("k", 1).grid = 2
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'grid'"):
        fast("k")
    k = KernelCost("k", 1, tensor_flops=3)
    assert k.terms == {"tensor/k": 3} and k.launch == {} and k.overlap == ROOFLINE
