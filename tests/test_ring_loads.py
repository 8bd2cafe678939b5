"""A forward whose K/V ring holds one stage (``KernelCost.ring_loads``; issue 9): each K (V)
tile's load and the GEMMs that read it take turns, a bound on the kernel's time beside its
cycle (``perfsim.timing.ring_seconds``)."""

from __future__ import annotations

import pytest

import perfsim
from perfsim.algorithms import FA3
from perfsim.algorithms.base import Dims
from perfsim.gpu_catalog import load_gpu
from perfsim.timing import ring_load_seconds, ring_seconds
from perfsim.validate.per_clock import unlimited


def _w(d=256, n=4096, **kw):
    return perfsim.AttentionWorkload(batch=1, heads=4096 // d, seqlen_q=n, head_dim=d,
                                     dtype="bf16", phase="fwd", **kw)


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


def test_the_ring_bound_is_the_tile_loads_plus_the_gemms_that_read_them():
    """cuDNN's forward at d 256 on the H200 at 1686 MHz (its Nsight Compute profile's
    clock): steps on the busiest SM times (load latency + a 64 KiB K tile at the per-CTA
    load rate) plus the S GEMMs' half of the tensor time sets the kernel's time, bound
    ``latency``; without the ring the cycle is shorter."""
    gpu = unlimited(load_gpu("h200-sxm"))
    p = perfsim.predict(_w(256), gpu=gpu, algorithm="sdpa-cudnn", timing={"clock": 1.686e9})
    main = max(p.kernels, key=lambda k: k.seconds)
    cost = main.cost
    busiest_flops = cost.sm_demand()["tensor"] * main.wave_factor
    load_k, load_v, qk = ring_load_seconds(cost, gpu, busiest_flops)
    steps = busiest_flops / gpu.sm_count / cost.ring_loads[0]
    assert steps == pytest.approx(4 * 32)          # 512 query tiles on 132 SMs, 32 steps each
    assert load_k == pytest.approx(steps * (gpu.load_latency_s
                                            + 2 * 128 * 256 / gpu.cta_load_bandwidth_bytes_per_s))
    ring = ring_seconds((load_k, load_v, qk), main.unit_seconds["tensor"])
    assert ring == pytest.approx(load_k + 0.5 * main.unit_seconds["tensor"])
    assert main.bound == "latency"
    assert main.seconds >= ring
    # at a clock low enough the GEMMs take longer than the loads save: the cycle binds again
    slow = perfsim.predict(_w(256), gpu=gpu, algorithm="sdpa-cudnn", timing={"clock": 1.2e9})
    assert max(slow.kernels, key=lambda k: k.seconds).bound != "latency"


def test_sweep_rows_equal_predict_where_the_ring_binds_and_where_it_does_not():
    df = perfsim.sweep(batch=[1, 4], heads=8, seqlen_q=[1024, 4096], head_dim=[192, 256],
                       causal=[False, True], gpus="h200-sxm", algorithms="sdpa-cudnn",
                       timing={"clock": "boost"})
    assert "latency" in set(df["bound"])
    for row in df.itertuples():
        w = perfsim.AttentionWorkload(batch=row.batch, heads=row.heads,
                                      seqlen_q=row.seqlen_q, head_dim=row.head_dim,
                                      causal=row.causal, dtype="bf16", phase="fwd")
        p = perfsim.predict(w, gpu="h200-sxm", algorithm="sdpa-cudnn",
                            timing={"clock": "boost"})
        assert row.seconds == pytest.approx(p.seconds, rel=1e-12)
        assert row.bound == p.bound
