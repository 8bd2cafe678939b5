"""The L2's best read rate as a floor under every kernel's loads
(``GPUSpec.l2_load_peak_bytes_per_s``, validate/reports/h100/probes/probe_l2.json)."""

import pytest

import perfsim
from perfsim.gpu_catalog import load_gpu


def _loads(k) -> float:
    return float(k.cost.hbm_read_bytes + k.cost.l2_hit_bytes)


@pytest.mark.parametrize("gpu", ["h200-sxm", "h100-sxm5", "gh200"])
def test_no_kernel_pulls_loads_faster_than_the_l2_peak(gpu):
    """flash-attn 2's split-KV combine kernel reads the fp32 partials its forward just wrote
    (14 MB, L2 hits: under the usable half of the L2) with hundreds of CTAs, faster than the
    L2 delivers on their per-CTA rates alone; the floor holds it at the measured peak, and
    --explain says when a kernel's time is that rate. (The 38 MB of H = 16 were this test's
    case while the combine read every partial from L2 however large; they now come from
    HBM: tests/test_inference_workloads.py.)"""
    spec = load_gpu(gpu)
    peak = spec.l2_load_peak_bytes_per_s
    assert peak == pytest.approx(16.7e12)
    w = perfsim.AttentionWorkload(batch=1, heads=12, seqlen_q=768, head_dim=128)
    p = perfsim.predict(w, gpu, "fa2")
    combine = [k for k in p.kernels if k.cost.name.endswith("combine")][0]
    assert combine.cost.l2_hit_bytes == _loads(combine) > 10e6
    assert _loads(combine) / float(combine.unit_seconds["hbm"]) == pytest.approx(peak,
                                                                                 rel=1e-9)
    # FA1's forward re-reads its O, l, m tiles from L2 at every step: held at the peak too,
    # and as its longest kernel --explain names the rate
    w = perfsim.AttentionWorkload(batch=1, heads=16, seqlen_q=2048, head_dim=64)
    fa1 = perfsim.predict(w, gpu, "fa1")
    k = max(fa1.kernels, key=lambda k: k.seconds)
    assert _loads(k) / float(k.unit_seconds["hbm"]) == pytest.approx(peak, rel=1e-9)
    assert "is the L2's read rate" in fa1.explain()
    # every kernel of a sample of calls stays at or under the peak
    for algo in ("fa1", "fa2", "fa3", "sdpa-flash", "sdpa-cudnn"):
        for shape in ({"seqlen_q": 1, "seqlen_k": 16384, "kv_heads": 4},
                      {"seqlen_q": 2048}, {"seqlen_q": 256, "batch": 64}):
            w = perfsim.AttentionWorkload(**{"batch": 8, "heads": 32, "head_dim": 128,
                                             **shape})
            for k in perfsim.predict(w, gpu, algo).kernels:
                if k.seconds > 0:
                    assert _loads(k) / float(k.seconds) <= peak * (1 + 1e-9), (algo, shape)


def test_no_floor_where_not_measured():
    """A GPU without the measurement keeps its per-CTA load path alone (the A100: none in
    its file)."""
    assert load_gpu("a100-sxm4-80gb").l2_load_peak_bytes_per_s is None
    spec = load_gpu("h100-sxm5")
    w = perfsim.AttentionWorkload(batch=1, heads=12, seqlen_q=768, head_dim=128)
    without = spec.model_copy(update={"l2_load_peak_bytes_per_s": None})
    p = perfsim.predict(w, without, "fa2")
    combine = [k for k in p.kernels if k.cost.name.endswith("combine")][0]
    assert combine.cost.l2_hit_bytes == _loads(combine) > 10e6
    assert _loads(combine) / float(combine.unit_seconds["hbm"]) > 17e12
    assert p.seconds < perfsim.predict(w, spec, "fa2").seconds
