"""Unpipelined kernels (``KernelCost.load_chain``): FA1 with ``pipelined=False``.

On the unit GPU (1 SM at 1 Hz, every rate 1) times equal counts, so the expected times are
written from Algorithm 1's loop structure by hand, not from perfsim's own functions.
"""

from __future__ import annotations

import numpy as np
import pytest

import perfsim
from perfsim.algorithms import FA1
from perfsim.timing import TimingParams, closed_cycle, time_kernel
from tests.conftest import unit_gpu

W = perfsim.AttentionWorkload
PARAMS = TimingParams(hbm_efficiency=1.0, launch_overhead_s=0.0, load_latency_s=7.0,
                      cta_load_bandwidth=2.0)


def _fa1_cost(gpu, **kw):
    w = W(batch=1, heads=1, seqlen_q=64, head_dim=16, dtype="fp16")
    algo = FA1(block_r=16, block_c=32, q_splits=1, pipelined=False, **kw)
    (cost,) = algo.kernels(perfsim.algorithms.Dims.of(w), gpu)
    return cost


def test_one_cta_waits_then_computes():
    """One CTA on one SM: its load waits and its compute add (no other CTA to overlap)."""
    gpu = unit_gpu()
    cost = _fa1_cost(gpu)
    t_r, t_c, b_r, b_c, d, e = 4, 2, 16, 32, 16, 2
    waits = t_r * t_c + t_c + t_r                 # inner steps, K/V loads, final pass
    row = e * d + e * d + 2 * 4                   # Q_i, O_i (fp16 workspace), l_i, m_i
    nbytes = t_c * t_r * b_r * row + 64 * e * 2 * d + 64 * (e * d + 8)
    assert cost.load_chain == (waits, nbytes)
    t = time_kernel(cost, gpu, PARAMS)
    chain = waits * 7.0 + nbytes / 2.0
    compute = sum(t.unit_seconds[u] for u in ("tensor", "fp32", "mufu", "smem"))
    assert t.load_chain_seconds == pytest.approx(chain)
    assert t.seconds == pytest.approx(max(chain + compute, t.unit_seconds["hbm"]))


def test_resident_ctas_hide_waits_behind_compute():
    """Eight CTAs on one SM, two at a time: between the fully overlapped and the serial time."""
    gpu = unit_gpu(max_ctas_per_sm=2)
    w = W(batch=2, heads=4, seqlen_q=64, head_dim=16, dtype="fp16")
    algo = FA1(block_r=16, block_c=32, q_splits=1, pipelined=False)
    (cost,) = algo.kernels(perfsim.algorithms.Dims.of(w), gpu)
    assert cost.ctas_per_sm == 2 and cost.grid == 8
    t = time_kernel(cost, gpu, PARAMS)
    compute = sum(t.unit_seconds[u] for u in ("tensor", "fp32", "mufu", "smem"))
    chain = t.load_chain_seconds
    assert max(chain, compute) < t.seconds < chain + compute
    assert t.seconds == pytest.approx(closed_cycle(chain, compute, 2))


def test_closed_cycle_limits_and_arrays():
    assert closed_cycle(3.0, 5.0, 1) == pytest.approx(8.0)
    assert closed_cycle(4.0, 4.0, 3) == pytest.approx(4.0 * 4 / 3)
    assert closed_cycle(1.0, 10.0, 50) == pytest.approx(10.0, rel=1e-9)
    a, b, k = np.array([3.0, 4.0, 1.0]), np.array([5.0, 4.0, 10.0]), np.array([1, 3, 50])
    assert np.allclose(closed_cycle(a, b, k), [8.0, 16 / 3, 10.0])


def test_pipelined_fa1_is_unchanged_and_faster():
    gpu = perfsim.load_gpu("h200-sxm")
    w = W(batch=2, heads=16, seqlen_q=8192, head_dim=128)
    fast = perfsim.predict(w, gpu=gpu, algorithm=FA1(block_r=64, block_c=64, q_splits=1))
    slow = perfsim.predict(w, gpu=gpu, algorithm=FA1(block_r=64, block_c=64, q_splits=1,
                                                      pipelined=False))
    assert fast.kernels[0].load_chain_seconds is None
    assert slow.seconds > fast.seconds
    assert "unpipelined" in slow.explain() and "one CTA per SM" in slow.explain()


def test_calibrated_profile_carries_the_measured_chain():
    spec = perfsim.load_gpu("validate/profiles/h200-sxm-calibrated.toml")
    params = TimingParams.for_gpu(spec)
    assert params.load_latency_s == pytest.approx(float(spec.calibration["load_latency_s"]))
    assert params.cta_load_bandwidth == pytest.approx(
        float(spec.calibration["cta_load_bandwidth"]))


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
