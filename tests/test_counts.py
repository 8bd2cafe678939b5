"""Textbook cross-checks of the counts, and the unit-GPU fixture (time = counts)."""

from __future__ import annotations

import pytest

import perfsim
from perfsim.algorithms import FA1, FA2, Standard
from perfsim.queueing import closed_cycle
from perfsim.tiles import visits
from perfsim.workload import AttentionWorkload
from tests.conftest import unit_gpu

W = perfsim.AttentionWorkload
ALGOS = [Standard(), FA1(block_r=32, block_c=64), FA2(block_m=64, block_n=32)]


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: a.label())
@pytest.mark.parametrize("n_q,n_k,d", [(1000, 1000, 64), (333, 777, 40), (777, 333, 128)])
def test_forward_matmul_flops_are_4BHNNd(unit, algo, n_q, n_k, d):
    w = W(batch=3, heads=5, seqlen_q=n_q, seqlen_k=n_k, head_dim=d, dtype="fp16")
    p = perfsim.predict(w, gpu=unit, algorithm=algo)
    assert p.counts.tensor_flops == 4 * 3 * 5 * n_q * n_k * d


def test_backward_matmul_flops_are_2_5x_forward_for_fused(unit):
    w = W(batch=2, heads=3, seqlen_q=300, head_dim=64, dtype="bf16")
    fwd = perfsim.predict(w, gpu=unit, algorithm=FA2(block_m=64, block_n=64)).counts
    bwd = perfsim.predict(w.replace(phase="bwd"), gpu=unit,
                          algorithm=FA2(bwd_block_m=64, bwd_block_n=64)).counts
    assert bwd.tensor_flops == 2.5 * fwd.tensor_flops


def test_causal_fa2_flops_follow_the_visited_tiles(unit):
    n, b = 1000, 64
    w = W(batch=1, heads=2, seqlen_q=n, head_dim=32, causal=True, dtype="bf16")
    p = perfsim.predict(w, gpu=unit, algorithm=FA2(block_m=b, block_n=b))
    v = visits(n, n, b, b, True)
    assert p.counts.tensor_flops == 2 * 2 * v.elements * 64
    # about half of the non-causal work, a bit more because diagonal tiles are computed whole
    assert 0.5 < p.counts.tensor_flops / (4 * 2 * n * n * 32) < 0.55


@pytest.mark.parametrize("algo", [FA2(), FA1(q_splits=1)], ids=lambda a: a.name)
def test_gqa_cuts_kv_hbm_bytes_by_group_size(algo):
    gpu = perfsim.load_gpu("h100-sxm5")
    base = W(batch=2, heads=16, seqlen_q=2048, head_dim=128, dtype="bf16")
    mha = perfsim.predict(base, gpu=gpu, algorithm=algo).counts.hbm_read_bytes
    gqa = perfsim.predict(base.replace(kv_heads=2), gpu=gpu, algorithm=algo).counts
    kv_mha = 2 * 2 * 16 * 2048 * (128 + 128)      # K and V of every head, bf16
    q_etc = mha - kv_mha                          # everything that is not K/V
    assert gqa.hbm_read_bytes - q_etc == pytest.approx(kv_mha * 2 / 16)


def test_unit_gpu_times_equal_counts(unit):
    w = W(batch=1, heads=2, seqlen_q=100, head_dim=16, dtype="fp16")
    p = perfsim.predict(w, gpu=unit, algorithm="standard",
                        timing=perfsim.TimingParams(hbm_efficiency=1.0, launch_overhead_s=0.0))
    for k in p.kernels:
        c = k.cost
        assert k.unit_seconds["hbm"] == c.hbm_read_bytes + c.hbm_write_bytes
        assert k.unit_seconds["mufu"] == c.sm_demand()["mufu"] * k.wave_factor
        assert k.seconds == max(k.unit_seconds.values())   # every eager kernel is a roofline
    softmax = next(k for k in p.kernels if k.cost.name == "softmax")
    nn = 2 * 100 * 100
    assert softmax.cost.hbm_bytes == 2 * 2 * nn           # read S, write P (fp16)
    assert softmax.cost.exp_ops == nn


def test_fa2_overlap_rule_adds_compute_units():
    """One 4-warp CTA per SM: one warp per scheduler with one operand slice prefetched, so
    two customers cycle between shared memory and the warp's compute (the MMAs and the FP32
    work add, the exps run beside the FP32 work after their lead); HBM overlaps."""
    from perfsim.timing import exp_lead_seconds, rates

    gpu = unit_gpu(max_ctas_per_sm=1)
    w = W(batch=1, heads=1, seqlen_q=128, head_dim=16, dtype="fp16")
    # no launch gap and no CTA edges (perfsim.timing.cta_edge_seconds): the cycle alone
    p = perfsim.predict(w, gpu=gpu, algorithm=FA2(block_m=128, block_n=128),
                        timing=perfsim.TimingParams(launch_overhead_s=0.0, cta_overhead_s=0.0))
    k = p.kernels[0]
    lead = exp_lead_seconds(k.cost, rates(gpu, k.cost, p.timing, p.clock_hz), k.wave_factor)
    serial = k.unit_seconds["tensor"] + max(k.unit_seconds["fp32"],
                                            k.unit_seconds["mufu"] + lead)
    _, in_flight, _ = k.cost.pipeline
    assert in_flight == 2
    assert k.seconds == pytest.approx(max(closed_cycle(k.unit_seconds["smem"], serial, 2),
                                          k.unit_seconds["hbm"]), rel=1e-12)


# ------------------------------------------------------------------ named terms (issue 12)
TERM_WORKLOADS = [
    AttentionWorkload(batch=2, heads=8, seqlen_q=1000, head_dim=64, dtype="bf16"),
    AttentionWorkload(batch=2, heads=8, kv_heads=2, seqlen_q=777, seqlen_k=1333, head_dim=128,
                      causal=True, dtype="bf16", phase="fwd_bwd"),
    AttentionWorkload(batch=3, heads=16, kv_heads=4, seqlen_q=1, seqlen_k=8192, head_dim=128,
                      dtype="bf16", page_size=256, kv_dtype="fp8_e4m3"),
    AttentionWorkload(batch=1, heads=8, seqlen_q=2048, head_dim=64, dtype="bf16",
                      window=(255, 0), softcap=30.0, phase="fwd_bwd"),
    AttentionWorkload(batch=2, heads=4, seqlen_q=512, head_dim=64, dtype="bf16",
                      dropout_p=0.1, phase="fwd_bwd"),
    AttentionWorkload(batch=3, heads=4, seqlens_q=(100, 300, 300), seqlens_k=(100, 300, 300),
                      head_dim=64, dtype="bf16", causal=True),
]
TERM_ALGOS = ["standard", "fa1", "fa2", "fa3", "fa4", "sdpa-flash", "sdpa-cudnn",
              "flash-attn-cute", "flex", "triton-tutorial", "sdpa-math", "eager"]


@pytest.mark.parametrize("gpu", ["h200-sxm", "a100-sxm4-80gb", "b200"])
@pytest.mark.parametrize("w", TERM_WORKLOADS, ids=range(len(TERM_WORKLOADS)))
def test_every_count_is_the_sum_of_its_named_terms(w, gpu):
    from perfsim.errors import InfeasibleError
    from perfsim.kernel import TERM_FIELDS

    checked = 0
    for algo in TERM_ALGOS:
        try:
            p = perfsim.predict(w, gpu, algo)
        except InfeasibleError:
            continue
        for k in p.kernels:
            c = k.cost
            assert c.terms, c.name
            for prefix, field in TERM_FIELDS.items():
                total = sum(float(v) for key, v in c.terms.items()
                            if key.split("/", 1)[0] == prefix)
                assert total == pytest.approx(float(getattr(c, field)), rel=1e-9, abs=1e-6), \
                    (algo, c.name, field)
            checked += 1
    if w.kv_dtype == "fp8_e4m3" and gpu == "a100-sxm4-80gb":
        assert checked == 0    # no fp8 conversion instructions before sm_89: refused
    else:
        assert checked >= 2    # the paged fp8 decode: only fa2 (and fa3 on Hopper) take it


def test_named_terms_match_the_papers_formulas():
    """FA2 forward (non-causal): the two GEMMs are 2·B·H·N²·d FLOP each, the exps one per
    score element plus one per row and key tile; the backward's five GEMMs are named one by
    one (FA2 §3.1.2: 2.5x the forward's FLOPs)."""
    B, H, N, d = 2, 8, 1024, 64
    w = AttentionWorkload(batch=B, heads=H, seqlen_q=N, head_dim=d, dtype="bf16")
    fwd = perfsim.predict(w, "a100-sxm4-80gb", "fa2").kernels[0].cost
    assert fwd.terms["tensor/S=QKᵀ"] == fwd.terms["tensor/O+=PV"] == 2 * B * H * N * N * d
    assert fwd.terms["mufu/exp(S)"] == B * H * N * N
    assert fwd.terms["hbm_read/Q"] == 2 * B * H * N * d
    bwd = [k.cost for k in perfsim.predict(w.replace(phase="bwd"), "a100-sxm4-80gb",
                                           "fa2").kernels if k.cost.name == "fa2_bwd"][0]
    gemms = [t for t in bwd.terms if t.startswith("tensor/")]
    assert sorted(gemms) == sorted(["tensor/S=QKᵀ", "tensor/dP=dO·Vᵀ", "tensor/dV+=Pᵀ·dO",
                                    "tensor/dK+=dSᵀ·Q", "tensor/dQ+=dS·K"])
    assert sum(bwd.terms[t] for t in gemms) == 2.5 * (fwd.terms["tensor/S=QKᵀ"]
                                                       + fwd.terms["tensor/O+=PV"])


def test_a_term_with_an_unknown_prefix_is_refused():
    from perfsim.kernel import KernelCost

    with pytest.raises(ValueError, match="prefix"):
        KernelCost.of("k", {"flops/x": 1}, grid=1)
