"""Unpipelined kernels (``KernelCost.load_chain``): FA1 with ``pipelined=False``.

On the unit GPU (1 SM at 1 Hz, every rate 1) times equal counts, so the expected times are
written from Algorithm 1's loop structure by hand, not from perfsim's own functions.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perfsim
from perfsim.algorithms import FA1
from perfsim.queueing import closed_cycle
from perfsim.timing import TimingParams, cta_edge_seconds, time_kernel
from tests.conftest import unit_gpu

W = perfsim.AttentionWorkload
PARAMS = TimingParams(hbm_efficiency=1.0, launch_overhead_s=0.0)
#: the unit GPU with a load step of 7 s + bytes / (2 B/s)
CHAIN = {"load_latency_s": 7.0, "cta_load_bandwidth_bytes_per_s": 2.0}


def _fa1_cost(gpu, **kw):
    w = W(batch=1, heads=1, seqlen_q=64, head_dim=16, dtype="fp16")
    algo = FA1(**{"block_r": 16, "block_c": 32, "q_splits": 1, "pipelined": False, **kw})
    (cost,) = algo.kernels(perfsim.algorithms.Dims.of(w), gpu)
    return cost


def test_one_cta_waits_then_computes():
    """One CTA on one SM: its load latency, load transfers and compute add."""
    gpu = unit_gpu(**CHAIN)
    cost = _fa1_cost(gpu)
    t_r, t_c, b_r, d, e = 4, 2, 16, 16, 2
    waits = t_r * t_c + t_c + t_r                 # inner steps, K/V loads, final pass
    row = e * d + e * d + 2 * 4                   # Q_i, O_i (fp16 workspace), l_i, m_i
    nbytes = t_c * t_r * b_r * row + 64 * e * 2 * d + 64 * (e * d + 8)
    assert cost.load_chain == (waits, nbytes)
    t = time_kernel(cost, gpu, PARAMS)
    compute = sum(t.unit_seconds[u] for u in ("tensor", "fp32", "mufu", "smem"))
    assert t.load_chain["latency"] == pytest.approx(waits * 7.0)
    assert t.load_chain["load"] == pytest.approx(nbytes / 2.0)
    assert t.seconds == pytest.approx(max(waits * 7.0 + nbytes / 2.0 + compute,
                                          t.unit_seconds["hbm"]))


def test_query_splits_share_the_inner_steps():
    """q_splits = 3 over T_r = 4 query tiles: the busiest CTA takes 2 of them (every third,
    starting at 0), visits both key tiles for each and loads all of K and V."""
    gpu = unit_gpu(sm_count=4, **CHAIN)
    cost = _fa1_cost(gpu, q_splits=3)
    t_c, busiest_q_tiles = 2, 2
    assert cost.grid == 3
    assert cost.load_chain[0] == pytest.approx(busiest_q_tiles * t_c + t_c + busiest_q_tiles)


def _mva(z, d1, d2, k):
    """Mean-value analysis written out: k customers, a delay z, two queues d1, d2."""
    q1 = q2 = 0.0
    for n in range(1, k + 1):
        r1, r2 = d1 * (1 + q1), d2 * (1 + q2)
        x = n / (z + r1 + r2)
        q1, q2 = x * r1, x * r2
    return 1 / x


def test_resident_ctas_overlap_latency_not_transfers():
    """Eight CTAs on one SM, two at a time: one CTA's latency hides behind the other's
    transfers and compute; transfers and compute serve one CTA at a time."""
    gpu = unit_gpu(max_ctas_per_sm=2, **CHAIN)
    w = W(batch=2, heads=4, seqlen_q=64, head_dim=16, dtype="fp16")
    algo = FA1(block_r=16, block_c=32, q_splits=1, pipelined=False)
    (cost,) = algo.kernels(perfsim.algorithms.Dims.of(w), gpu)
    assert cost.ctas_per_sm == 2 and cost.grid == 8
    t = time_kernel(cost, gpu, PARAMS)
    part = t.load_chain
    serial = part["latency"] + part["load"] + part["compute"]
    assert max(part["load"], part["compute"]) < t.seconds < serial
    assert t.seconds == pytest.approx(max(_mva(part["latency"], part["load"],
                                               part["compute"], 2), t.unit_seconds["hbm"]))


def test_many_resident_ctas_hide_the_latency():
    gpu = unit_gpu(max_ctas_per_sm=32, **{**CHAIN, "load_latency_s": 1e7})
    w = W(batch=8, heads=8, seqlen_q=64, head_dim=16, dtype="fp16")
    algo = FA1(block_r=16, block_c=32, q_splits=1, pipelined=False, registers_per_thread=16)
    (cost,) = algo.kernels(perfsim.algorithms.Dims.of(w), gpu)
    t = time_kernel(cost, gpu, PARAMS)
    part = t.load_chain
    assert min(cost.ctas_per_sm, cost.grid) == 16     # 64 warps per SM / 4 per CTA
    assert t.seconds < part["latency"] / 4            # 16 CTAs overlap their waits
    assert t.bound == "latency"


def test_few_ctas_on_a_big_gpu_run_one_per_sm():
    """grid < SMs: each SM holds one CTA although two would fit — no overlap at all."""
    gpu = unit_gpu(sm_count=8, max_ctas_per_sm=2, **CHAIN)
    cost = _fa1_cost(gpu)
    assert cost.ctas_per_sm == 2 and cost.grid == 1
    t = time_kernel(cost, gpu, PARAMS)
    part = t.load_chain
    assert t.seconds == pytest.approx(max(part["latency"] + part["load"] + part["compute"],
                                          t.unit_seconds["hbm"]))


def test_bound_names_what_sets_the_time():
    """HBM bandwidth when it is the longest; else latency for the load waits; else the
    largest SM unit."""
    hbm = perfsim.predict(W(batch=512, heads=8, seqlen_q=4096, head_dim=128), "rtx-4090",
                          FA1(pipelined=False))
    # HBM plus the launch gap and one wave's CTA edges (the first wave's start, the last's end)
    edge = cta_edge_seconds(hbm.kernels[0].cost, hbm.gpu, hbm.timing)
    assert hbm.kernels[0].unit_seconds["hbm"] >= hbm.kernels[0].seconds - 5e-6 - edge
    assert hbm.bound == "hbm" and "sets the time" in hbm.explain()
    lat = perfsim.predict(W(batch=2, heads=32, kv_heads=4, seqlen_q=3, seqlen_k=70000,
                            head_dim=128, causal=True), "h200-sxm", FA1(pipelined=False))
    assert lat.bound == "latency" and "memory latency" in lat.explain()
    comp = perfsim.predict(W(batch=2, heads=16, seqlen_q=8192, head_dim=128), "h200-sxm",
                           FA1(block_r=64, block_c=64, q_splits=1, pipelined=False))
    part = comp.kernels[0].load_chain
    assert part["compute"] > part["latency"] + part["load"]
    assert comp.bound in ("tensor", "fp32", "mufu", "smem")


def test_closed_cycle_limits_and_arrays():
    assert closed_cycle(3.0, 5.0, 1) == pytest.approx(8.0)
    assert closed_cycle(4.0, 4.0, 3) == pytest.approx(4.0 * 4 / 3)
    assert closed_cycle(1.0, 10.0, 50) == pytest.approx(10.0, rel=1e-9)
    a, b, k = np.array([3.0, 4.0, 1.0]), np.array([5.0, 4.0, 10.0]), np.array([1, 3, 50])
    assert np.allclose(closed_cycle(a, b, k), [8.0, 16 / 3, 10.0])


def test_pipelined_switch_only_adds_the_load_chain():
    gpu = perfsim.load_gpu("h200-sxm")
    w = W(batch=2, heads=16, seqlen_q=8192, head_dim=128)
    dims = perfsim.algorithms.Dims.of(w)
    (fast_cost,) = FA1(block_r=64, block_c=64, q_splits=1).kernels(dims, gpu)
    (slow_cost,) = FA1(block_r=64, block_c=64, q_splits=1, pipelined=False).kernels(dims, gpu)
    assert fast_cost.load_chain is None
    # the unpipelined kernel's load chain already waits for its first tiles: no edge bytes
    assert slow_cost.edge_bytes == 0 < fast_cost.edge_bytes
    assert dataclasses.replace(slow_cost, load_chain=None,
                               edge_bytes=fast_cost.edge_bytes) == fast_cost
    fast = perfsim.predict(w, gpu=gpu, algorithm=FA1(block_r=64, block_c=64, q_splits=1))
    slow = perfsim.predict(w, gpu=gpu, algorithm=FA1(block_r=64, block_c=64, q_splits=1,
                                                      pipelined=False))
    assert slow.seconds > fast.seconds
    assert "unpipelined" in slow.explain() and "one CTA per SM" in slow.explain()


def test_sweep_rows_equal_predict_for_unpipelined_fa1():
    from perfsim.sweep import sweep

    algo = FA1(block_r=64, block_c=64, q_splits=1, pipelined=False)
    frame = sweep(gpus=["h200-sxm"], algorithms=[algo], batch=[1, 8, 64],
                  heads=[16], seqlen_q=[1024, 4096], head_dim=[64, 128], causal=[False, True])
    assert len(frame) == 24
    for row in frame.itertuples():
        w = W(batch=row.batch, heads=row.heads, seqlen_q=row.seqlen_q, head_dim=row.head_dim,
              causal=row.causal)
        p = perfsim.predict(w, gpu="h200-sxm", algorithm=algo)
        assert row.seconds == pytest.approx(p.seconds, rel=1e-9)
        assert row.bound == p.bound


def test_waiting_longer_than_computing_is_latency_bound():
    """Delay plus load path together against compute (each alone is shorter than compute)."""
    w = W(batch=1, heads=8, seqlen_q=16, seqlen_k=16384, head_dim=64, dtype="fp16")
    h200 = perfsim.load_gpu("h200-sxm")
    p = perfsim.predict(w, h200, FA1(pipelined=False),
                        timing=perfsim.TimingParams.for_gpu(h200, clock="datasheet"))
    part, k = p.kernels[0].load_chain, p.kernels[0]
    assert part["latency"] < part["compute"] and part["load"] < part["compute"]
    assert part["latency"] + part["load"] > part["compute"]
    assert k.bound == "latency"


def test_every_bound_has_a_colour():
    from perfsim.plots.style import UNIT_COLORS
    from perfsim.predict import BOUNDS

    assert set(BOUNDS) <= set(UNIT_COLORS)
