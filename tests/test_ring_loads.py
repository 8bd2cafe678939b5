"""A forward whose K/V ring holds one stage (``KernelCost.ring_loads``; issue 9): each K (V)
tile's load and the GEMMs that read it take turns, a bound on the kernel's time beside its
cycle (``perfsim.timing.ring_seconds``)."""

from __future__ import annotations

import pytest

import perfsim
from perfsim import fastpath
from perfsim.algorithms import FA3
from perfsim.algorithms.base import Dims
from perfsim.gpu_catalog import load_gpu
from perfsim.timing import KernelClock, TimingParams, cycle_time, ring_load_seconds, ring_seconds
from perfsim.validate.per_clock import unlimited


def _w(d=256, n=4096, heads=None, **kw):
    return perfsim.AttentionWorkload(batch=kw.pop("batch", 1), heads=heads or 4096 // d,
                                     seqlen_q=n, head_dim=d, dtype="bf16",
                                     phase=kw.pop("phase", "fwd"), **kw)


def _step_seconds(gpu, nbytes, clock_hz):
    """One ring tile's load at ``clock_hz``: an L2 hit in SM cycles where the GPU has that
    fit, else the step from HBM in seconds."""
    if gpu.l2_load_latency_clk is not None:
        return (gpu.l2_load_latency_clk + nbytes / gpu.cta_l2_load_bytes_per_clk) / clock_hz
    return gpu.load_latency_s + nbytes / gpu.cta_load_bandwidth_bytes_per_s


def _main(p):
    return max(p.kernels, key=lambda k: k.seconds)


def _ring(d=256, gpu="h200-sxm"):
    """cuDNN's forward configuration at head dim ``d`` (one ring stage above 128) with its
    two warpgroups overlapping, the cycle its head-dim-128 kernel runs: the configuration
    where the ring outlasts the cycle. The preset's own forward at these head dims runs its
    MMAs and exps in turn (``FA3.fwd_pipes_in_turn``), a cycle the ring rarely outlasts."""
    from perfsim.implementations import Implementation

    cfg = Implementation(preset="sdpa-cudnn").config(Dims.of(_w(d)), load_gpu(gpu))
    return cfg.model_copy(update={"fwd_pipes_in_turn": False})


def test_only_a_single_stage_forward_carries_the_ring():
    gpu = load_gpu("h200-sxm")
    dims = Dims.of(_w())
    one, two = FA3(stages=1), FA3(stages=2)
    assert one.ring_loads(dims, 128, 64) == (2 * 128 * 64 * 512, 2 * 64 * 256, 2 * 64 * 256,
                                             0.5)
    assert two.ring_loads(dims, 128, 64) is None
    fwd = [k for k in one.kernels(dims, gpu) if k.name == "fa3_fwd"]
    assert fwd and fwd[0].ring_loads is not None
    assert all(k.ring_loads is None for k in two.kernels(dims, gpu))
    # the sdpa-cudnn preset: one stage where Q and two stages do not fit (compiled d > 128)
    for d, ring in ((128, False), (192, True), (256, True)):
        p = perfsim.predict(_w(d), gpu="h200-sxm", algorithm="sdpa-cudnn")
        assert any(k.cost.ring_loads is not None for k in p.kernels) is ring, d


def test_k_and_v_tiles_take_their_own_head_dims():
    """Bytes at the call's head dims (what the loads move), FLOPs and the S GEMMs' share at
    the compiled ones (what the tensor pipe runs): d 160 runs cuDNN's d 192 kernel."""
    dims = Dims.of(_w(128, head_dim_v=256))
    exact = FA3(stages=1, compiled_head_dims="exact")
    assert exact.ring_loads(dims, 128, 64) == (2 * 128 * 64 * 384, 2 * 64 * 128,
                                                       2 * 64 * 256, 128 / 384)
    p = perfsim.predict(_w(160, heads=16), gpu="h200-sxm", algorithm="sdpa-cudnn")
    flops, k_bytes, v_bytes, qk = _main(p).cost.ring_loads
    assert (flops, k_bytes, v_bytes, qk) == (2 * 128 * 128 * 384, 2 * 128 * 160,
                                             2 * 128 * 160, 0.5)


def test_the_kernel_takes_the_longer_of_its_cycle_and_the_ring():
    """cuDNN's forward at d 256 on the H200 at 1686 MHz (its Nsight Compute profile's
    clock): 512 query tiles on 132 SMs, the busiest SM 4 of them × 32 K/V steps, each step a
    64 KiB K tile's load (load latency + bytes at the per-CTA rate) before its S GEMMs; the
    cycle's group is the longer of the cycle and that bound, plus its edges."""
    gpu = unlimited(load_gpu("h200-sxm"))
    algo = _ring()
    p = perfsim.predict(_w(256), gpu=gpu, algorithm=algo, timing={"clock": 1.686e9})
    main = _main(p)
    clock = KernelClock(main.cost, gpu, perfsim.timing_for(gpu, algo))
    unit_seconds, _seconds, _chain, _b, _busiest, _wave, lead = clock.at(1.686e9)
    load_k, load_v, qk = ring_load_seconds(clock.ring, 1.686e9)
    step = _step_seconds(gpu, 2 * 128 * 256, 1.686e9)
    assert load_k == pytest.approx(4 * 32 * step) and load_v == pytest.approx(load_k)
    ring = ring_seconds((load_k, load_v, qk), unit_seconds["tensor"])
    assert ring == pytest.approx(load_k + qk * unit_seconds["tensor"])
    cycle = cycle_time(unit_seconds, *main.cost.pipeline, exp_lead=lead)
    assert ring > cycle                                   # it binds here ...
    edge = clock.edge_shares[-1] if clock.edge_shares is not None else 0.0
    assert clock._totals[-1] == pytest.approx(max(cycle, ring) + edge, rel=1e-12)
    assert main.bound == "latency"
    # ... and not at a clock low enough that the GEMMs outlast the loads
    slow = perfsim.predict(_w(256), gpu=gpu, algorithm=algo, timing={"clock": 1.2e9})
    assert _main(slow).bound != "latency"
    # the preset's own forward here: its MMAs and exps in turn, a cycle longer than the ring
    own = perfsim.predict(_w(256), gpu=gpu, algorithm="sdpa-cudnn", timing={"clock": 1.686e9})
    assert _main(own).bound != "latency"


def test_the_power_capped_clock_search_keeps_the_ring():
    """At the sustained clock (the clock search's linear form) the main kernel's time is
    the full evaluation's at that clock, with the ring: an H100 call where it binds."""
    gpu = load_gpu("h100-sxm5")
    algo = _ring(gpu="h100-sxm5")
    p = perfsim.predict(_w(256, n=1024), gpu=gpu, algorithm=algo)
    main = _main(p)
    assert main.bound == "latency" and p.clock_hz < 1.83e9
    fresh = KernelClock(main.cost, gpu, perfsim.timing_for(gpu, algo))
    assert main.seconds == pytest.approx(fresh.at(float(p.clock_hz))[1], rel=1e-12)


def test_the_ring_names_the_bound_only_where_it_sets_the_time():
    """Where the kernel's HBM path is longer (a few queries against many keys on the H100)
    the bound stays ``hbm`` though the ring is above the cycle; where spill reloads set the
    time (cuDNN with dropout at d 256) explain does not credit the ring."""
    few = perfsim.predict(_w(256, n=16, batch=8, heads=8, seqlen_k=16384), gpu="h100-sxm5",
                          algorithm="sdpa-cudnn", timing={"clock": "boost"})
    assert _main(few).bound == "hbm"
    line = next(x for x in few.explain().splitlines() if "one ring stage" in x)
    assert "not what sets its time (bound 'hbm')" in line
    drop = perfsim.predict(_w(256, heads=16, batch=2, dropout_p=0.1), gpu="h100-sxm5",
                           algorithm="sdpa-cudnn", timing={"clock": "boost"})
    line = next(x for x in drop.explain().splitlines() if "one ring stage" in x)
    assert "not what sets its time" in line
    wide_v = perfsim.predict(_w(160, heads=16, batch=2, head_dim_v=192), gpu="h200-sxm",
                             algorithm="sdpa-cudnn", timing={"clock": "boost"})
    line = next(x for x in wide_v.explain().splitlines() if "one ring stage" in x)
    assert "its V loads" in line and "P·V GEMMs" in line          # the longer side


@pytest.mark.parametrize("clock", ["boost", "sustained"])
def test_sweep_rows_equal_predict_where_the_ring_binds_and_where_it_does_not(clock):
    for algo in (_ring(), "sdpa-cudnn"):
        df = perfsim.sweep(batch=[1, 4], heads=8, seqlen_q=[1024, 4096], head_dim=[256],
                           causal=[False, True], gpus=["h200-sxm", "h100-sxm5"],
                           algorithms=[algo], timing={"clock": clock})
        if clock == "boost" and algo != "sdpa-cudnn":
            assert "latency" in set(df["bound"])
        for row in df.itertuples():
            w = perfsim.AttentionWorkload(batch=row.batch, heads=row.heads,
                                          seqlen_q=row.seqlen_q, head_dim=row.head_dim,
                                          causal=row.causal, dtype="bf16", phase="fwd")
            p = perfsim.predict(w, gpu=row.gpu, algorithm=algo, timing={"clock": clock})
            assert row.seconds == pytest.approx(p.seconds, rel=1e-12)
            assert row.bound == p.bound


@pytest.mark.skipif(not fastpath._available(), reason="llvmlite/numba not installed")
def test_the_compiled_predict_path_covers_ring_kernels(monkeypatch):
    """The ring's bound is chosen by index, so the fastpath traces these structures (a
    string ``np.where`` had made them untraceable: every call interpreted)."""
    fastpath.clear()
    monkeypatch.setenv("PERFSIM_PREDICT_ENGINE", "compiled")
    before = dict(fastpath.STATS)
    try:
        algo = _ring()
        for n in (2048, 4096, 8192):
            p = perfsim.predict(_w(256, n=n, batch=2, heads=16), gpu="h200-sxm",
                                algorithm=algo, timing={"clock": "boost"})
            assert p.bound == "latency"
        assert fastpath.STATS["programs"] > before["programs"]
        assert fastpath.STATS["hits"] > before["hits"]
    finally:
        fastpath.clear()


def test_ring_loads_from_l2_keep_their_cycles_when_the_clock_drops():
    """With the L2-hit step's fit (``GPUSpec.l2_load_latency_clk``,
    ``cta_l2_load_bytes_per_clk``) a ring kernel's loads are SM cycles: its ring bound, and
    so a ring-bound kernel's loop, takes the same cycles at any clock (the measured cuDNN
    forward at head dim 256 keeps its cycles within 1 % from 1.7 to 1.43 GHz). Without the
    fit they are the HBM step's nanoseconds, fewer cycles at a lower clock."""
    base = unlimited(load_gpu("h200-sxm"))
    l2 = base.replace(l2_load_latency_clk=900.0, cta_l2_load_bytes_per_clk=40.0)
    hbm = base.replace(l2_load_latency_clk=None, cta_l2_load_bytes_per_clk=None)
    cycles = {}
    for name, gpu in (("l2", l2), ("hbm", hbm)):
        for f in (1.8e9, 1.4e9):
            p = perfsim.predict(_w(256), gpu=gpu, algorithm="sdpa-cudnn",
                                timing={"clock": f})
            main = _main(p)
            clock = KernelClock(main.cost, gpu, TimingParams.for_gpu(gpu, "sdpa-cudnn"))
            unit_seconds = clock.at(f)[0]
            ring = ring_seconds(ring_load_seconds(clock.ring, f), unit_seconds["tensor"])
            cycles[name, f] = ring * f
            if name == "l2":
                k_s, k_clk, v_s, v_clk, _qk = clock.ring
                assert k_s == v_s == 0.0
                assert k_clk == pytest.approx(4 * 32 * (900 + 2 * 128 * 256 / 40))
            else:
                assert clock.ring[1] == clock.ring[3] == 0.0
    assert cycles["l2", 1.4e9] == pytest.approx(cycles["l2", 1.8e9], rel=1e-12)
    assert cycles["hbm", 1.4e9] < 0.99 * cycles["hbm", 1.8e9]


def test_the_l2_step_fit_is_both_fields_or_neither():
    gpu = load_gpu("h200-sxm")
    with pytest.raises(perfsim.PerfsimError, match="set both or neither"):
        gpu.replace(l2_load_latency_clk=900.0, cta_l2_load_bytes_per_clk=None)
    with pytest.raises(perfsim.PerfsimError, match="cta_l2_load_bytes_per_clk"):
        gpu.replace(l2_load_latency_clk=900.0, cta_l2_load_bytes_per_clk=-1.0)
