"""FA3 and FA4 models: the FA4 per-tile cycle tables exactly, the FA3 ablation, the papers'
headlines with their stated tolerances, feasibility and what-if GPUs.

Sources: the FlashAttention-3 paper (Shah et al., arXiv 2407.08608) and the FlashAttention-4
paper (arXiv 2603.05451).
"""

from __future__ import annotations

import re

import pytest

import perfsim
from perfsim.algorithms import FA2, FA3, FA4, Dims
from perfsim.algorithms.fa4_softmax import (
    emulated_exp_fma_ops,
    estimate_rescales,
    shipped_emulation_fraction,
)
from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.timing import TimingParams

W = perfsim.AttentionWorkload
#: P3 App. C.1 fixes the H100's clock at 1830 MHz, but a clock lock does not lift the 700 W
#: power limit: the power model (perfsim.power, fitted on the project's H200, same GH100 SM and
#: limit) solves the clock under the lock; on the H200, SDPA cuDNN at Table 2's shape ran at
#: 1529 MHz, power-capped (the catalog's ``power_capped_clock_hz``, with its source).
_H100 = perfsim.load_gpu("h100-sxm5")
LOCK_1830 = TimingParams.for_gpu(_H100, clock=1.83e9)
D128 = Dims.of(W(batch=1, heads=16, seqlen_q=8192, head_dim=128, dtype="bf16"))


# --------------------------------------------------------------------------- FA4 tables
def test_fa4_table1_forward_tiles_on_b200():
    b200 = perfsim.load_gpu("b200")
    assert FA4(q_tiles_per_cta=1).tile_cycles(D128, b200) == \
        {"mma": 1024, "smem": 768, "exp": 1024}
    assert FA4(q_tiles_per_cta=2).tile_cycles(D128, b200) == \
        {"mma": 2048, "smem": 1536, "exp": 2048}


def test_fa4_table3_backward_tiles_on_b200():
    b200 = perfsim.load_gpu("b200")
    assert FA4(two_cta_backward=False).tile_cycles(D128, b200, "bwd") == \
        {"mma": 2560, "smem": 3328, "exp": 1024}
    assert FA4(two_cta_backward=True).tile_cycles(D128, b200, "bwd")["smem"] == 2688


def test_same_formulas_on_h100_give_2048_mma_cycles():
    c = FA4(variant="sm90", q_tiles_per_cta=1).tile_cycles(D128, perfsim.load_gpu("h100-sxm5"))
    assert c["mma"] == 2048 and c["exp"] == 1024


def test_fa4_explain_names_the_per_tile_binding_unit():
    w = W(batch=4, heads=16, seqlen_q=8192, head_dim=128, dtype="bf16", phase="fwd_bwd")
    text = perfsim.predict(w, gpu="b200", algorithm=FA4(emulate_fraction=0)).explain()
    assert "exp = MMA: overlap alone cannot hide it" in text
    assert "smem binds, 5 % over MMA" in text
    # a fresh user's report: the shipped build computes 18.75 % of its exps on the FMA pipes,
    # so the MUFU's share of the tile is under the MMA's (the unit times said so, the line
    # did not)
    text = perfsim.predict(w, gpu="b200", algorithm="fa4").explain()
    assert ("exp 2048 (1664 on the MUFU, 18.75 % of the exps emulated on the FMA pipes) — "
            "MMA binds") in text


def test_fa4_claim_smem_and_exp_exceed_mma():
    """P4 §1: on B200 shared-memory traffic and exponentials exceed MMA time by 25–60 % for
    typical workloads. Per tile at d = 128 the model puts the 1-CTA backward's shared memory
    30 % over MMA (inside the range) and the forward's exps level with MMA; at d = 64 the
    forward's exps are 2x MMA. The forward claim holds only counting exp and smem together."""
    b200 = perfsim.load_gpu("b200")
    bwd = FA4(two_cta_backward=False).tile_cycles(D128, b200, "bwd")
    assert 0.25 <= bwd["smem"] / bwd["mma"] - 1 <= 0.60
    d64 = Dims.of(W(batch=1, heads=32, seqlen_q=8192, head_dim=64, dtype="bf16"))
    fwd64 = FA4().tile_cycles(d64, b200)
    assert fwd64["exp"] > fwd64["mma"]


# --------------------------------------------------------------------------- mechanisms
def test_emulated_exp_cost_is_derived_from_the_polynomial():
    assert emulated_exp_fma_ops(3) == 9 and emulated_exp_fma_ops(5) == 11


def test_shipped_emulation_fractions():
    assert shipped_emulation_fraction(128, False, "bf16", 16) == 0.1875
    assert shipped_emulation_fraction(128, True, "bf16", 16) == 0.125
    assert shipped_emulation_fraction(128, False, "bf16", 32) == 0.0     # B300 turns it off


def test_rescale_estimate_is_rare_for_unit_scores_and_grows_with_drift():
    assert estimate_rescales(32, score_std=1.0) < 0.01
    assert estimate_rescales(32, score_std=1.0, drift=1.0) > 1


def test_emulation_moves_exps_from_mufu_to_fma():
    w = W(batch=4, heads=16, seqlen_q=8192, head_dim=128, dtype="bf16")
    off = perfsim.predict(w, gpu="b200", algorithm=FA4(emulate_fraction=0.0))
    on = perfsim.predict(w, gpu="b200", algorithm=FA4(emulate_fraction=0.25))
    assert on.unit_seconds["mufu"] < off.unit_seconds["mufu"]
    assert on.unit_seconds["fp32"] > off.unit_seconds["fp32"]
    assert on.counts.emulated_exp_ops == pytest.approx(0.25 * off.counts.exp_ops, rel=0.01)


def test_conditional_rescaling_saves_correction_work():
    w = W(batch=4, heads=16, seqlen_q=8192, head_dim=128, dtype="bf16")
    always = perfsim.predict(w, gpu="b200", algorithm=FA4(rescale_threshold=0.0)).counts
    rarely = perfsim.predict(w, gpu="b200", algorithm=FA4()).counts
    assert rarely.fp32_flops < always.fp32_flops and rarely.exp_ops < always.exp_ops


def test_tmem_capacity_shrinks_tiles_at_large_head_dims():
    b200 = perfsim.load_gpu("b200")
    big = Dims.of(W(batch=1, heads=8, seqlen_q=4096, head_dim=256, dtype="bf16"))
    assert FA4().tmem_tiles(D128, b200) == (2, 128)
    assert FA4().tmem_tiles(big, b200) == (1, 128)       # 2·(256+128) > 512 columns
    huge = Dims.of(W(batch=1, heads=8, seqlen_q=4096, head_dim=512, dtype="bf16"))
    with pytest.raises(perfsim.InfeasibleError, match="tensor memory"):
        FA4().tmem_tiles(huge, b200)


def test_lpt_scheduling_helps_causal_only():
    w = W(batch=8, heads=16, seqlen_q=4096, head_dim=128, dtype="bf16", causal=True)
    lpt = perfsim.predict(w, gpu="b200", algorithm=FA4()).seconds
    plain = perfsim.predict(w, gpu="b200", algorithm=FA4(lpt_scheduling=False)).seconds
    assert plain > lpt
    nc = w.replace(causal=False)
    assert perfsim.predict(nc, gpu="b200", algorithm=FA4(lpt_scheduling=False)).seconds == \
        perfsim.predict(nc, gpu="b200", algorithm=FA4()).seconds


# --------------------------------------------------------------------------- feasibility
@pytest.mark.parametrize("algo,gpu,feature", [
    ("fa3", "a100-sxm4-80gb", "TMA"), ("fa3", "b200", "WGMMA"), ("fa3", "rtx-5090", "WGMMA"),
    ("fa4", "h100-sxm5", "tcgen05"), ("fa4", "rtx-5090", "tcgen05"),
    (FA4(variant="sm90"), "a100-sxm4-80gb", "tma"),
])
def test_missing_feature_is_named(algo, gpu, feature):
    w = W(batch=1, heads=16, seqlen_q=4096, head_dim=128, dtype="bf16")
    with pytest.raises(perfsim.InfeasibleError, match=feature):
        perfsim.predict(w, gpu=gpu, algorithm=algo)


def test_fa4_two_cta_backward_needs_the_feature():
    w = W(batch=1, heads=16, seqlen_q=4096, head_dim=128, dtype="bf16", phase="bwd")
    no_pair = perfsim.load_gpu("b200").replace(features={"tma": True, "wgmma": False,
                                                         "tcgen05": True, "two_cta": False})
    with pytest.raises(perfsim.InfeasibleError, match="two_cta"):
        perfsim.predict(w, gpu=no_pair, algorithm="fa4")
    assert perfsim.predict(w, gpu=no_pair, algorithm=FA4(two_cta_backward=False)).seconds > 0


def test_fa4_pairs_ctas_in_the_backward_from_head_dim_128():
    """flash-attn-4 4.0.0b36 _flash_attn_bwd: use_2cta_instrs = head_dim >= 128 and ...;
    perfsim had paired the CTAs at every head dim (an auditor's finding)."""
    def bwd(d, gpu="b200", algo="fa4"):
        w = W(batch=4, heads=16, seqlen_q=4096, head_dim=d, dtype="bf16", phase="bwd")
        p = perfsim.predict(w, gpu=gpu, algorithm=algo)
        return [k for k in p.kernels if k.cost.name == "fa4_bwd"][0].cost.launch["two_cta"], p

    assert bwd(128)[0] is True and bwd(192)[0] is True
    assert bwd(64)[0] is False and bwd(96)[0] is False
    assert bwd(64)[1].seconds == pytest.approx(
        bwd(64, algo=FA4(two_cta_backward=False))[1].seconds, rel=1e-12)
    no_pair = perfsim.load_gpu("b200").replace(features={"tma": True, "wgmma": False,
                                                         "tcgen05": True, "two_cta": False})
    assert bwd(64, gpu=no_pair)[1].seconds > 0          # no pair needed below 128


# --------------------------------------------------------------------------- headlines
def _best_fwd_tflops(gpu, algo, dims=(64, 128, 256), total=16384, timing=None):
    best = 0.0
    for d in dims:
        for n in (512, 1024, 2048, 4096, 8192, 16384):
            w = W(batch=max(total // n, 1), heads=2048 // d, seqlen_q=n, head_dim=d,
                  dtype="bf16")
            best = max(best, perfsim.predict(w, gpu=gpu, algorithm=algo, timing=timing).tflops)
    return best


def test_fa3_headline_within_10_percent_of_740():
    """P3 v1: "up to 740 TFLOPs/s", measured with the v1 code of Table 2 and so checked on the
    same power-limited H100 under the 1830 MHz lock, within the issue's 10 %. The model gives
    683 (-7.7 %; 662 while the catalog took a whole cuBLAS GEMM's 0.92 of the WGMMA peak as the
    pipe's rate, 630 before the energy of L2 bytes was split from the GEMM's): the best shape
    (d = 256, N = 16k) is held near 1.34 GHz by the power model. The camera-ready's 840 came
    from later kernels; the model is about 19 % below it."""
    assert _best_fwd_tflops(_H100, "fa3", timing=LOCK_1830) == pytest.approx(740, rel=0.10)


def test_fa4_headline_within_15_percent_of_1613():
    best = _best_fwd_tflops("b200", "fa4", dims=(64, 128), total=32768)
    assert best == pytest.approx(1613, rel=0.15)


def test_fa2_headline_within_15_percent_of_230_on_a100():
    assert _best_fwd_tflops("a100-sxm4-80gb", "fa2", dims=(64, 128)) == \
        pytest.approx(230, rel=0.15)


@pytest.mark.parametrize("d, n", [
    (64, 512), (64, 1024), (64, 2048), (128, 512),
    (128, 1024),   # 55.9 % (it was 59.6 %, a strict xfail, before the FP32 lane counts)
    (128, 2048)])
def test_fa1_forward_at_30_to_50_percent_of_a100_peak(d, n):
    w = W(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="bf16")
    util = perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa1").tflops / 312
    assert 0.30 * 0.85 <= util <= 0.50 * 1.15, (d, n, util)


@pytest.mark.xfail(strict=True, reason="known miss: FA1's backward comes out at 47-75 % of the "
                   "A100's peak on these shapes against the FA2 paper's 25-35 % for "
                   "FlashAttention-1's CUDA backward; perfsim models Algorithm 4 with SRAM-sized "
                   "tiles and the mma.sync cycle, not the v1 kernel (not profiled; a fresh "
                   "user's report, 2026-12-02)")
@pytest.mark.parametrize("d, n", [(64, 512), (64, 2048), (128, 1024), (128, 2048)])
def test_fa1_backward_at_25_to_35_percent_of_a100_peak(d, n):
    """P2 abstract and §1: FlashAttention-1 reaches 25-35 % of the A100's peak in the
    backward; the forward test's tolerance (15 % of the band's ends)."""
    w = W(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="bf16", phase="bwd")
    util = perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="fa1").tflops / 312
    assert 0.25 * 0.85 <= util <= 0.35 * 1.15, (d, n, util)


# --------------------------------------------------------------------------- FA3 ablation
TABLE2 = W(batch=4, heads=16, seqlen_q=8448, head_dim=128, dtype="fp16")


def _tflops(cfg):
    return perfsim.predict(TABLE2, gpu=_H100, algorithm=cfg, timing=LOCK_1830).tflops


@pytest.mark.xfail(strict=True, reason="known miss: under the 700 W limit the power model gives "
                   "the slower variant a higher clock (1493 vs 1411 MHz), which compresses the "
                   "gain to +4.0 % against the paper's +9-12 %; at one clock both hold "
                   "(1.2 GHz) it is +10.0 %")
def test_fa3_pingpong_gain_matches_the_paper():
    """P3 §3.1: ping-pong moves ≈570 → 620–640 TFLOP/s (+9 % to +12 %)."""
    gain = _tflops(FA3()) / _tflops(FA3(pingpong=False))
    assert 1.05 <= gain <= 1.15


def test_fa3_mechanisms_order_like_the_paper():
    full = _tflops(FA3())
    assert _tflops(FA3(intra_warpgroup_overlap=False)) < full
    assert _tflops(FA3(pingpong=False, intra_warpgroup_overlap=False)) < \
        _tflops(FA3(intra_warpgroup_overlap=False))


@pytest.mark.parametrize("cfg,paper", [
    (FA3(), 661), (FA3(intra_warpgroup_overlap=False), 582), (FA3(warp_specialized=False), 570)])
def test_fa3_table2_within_10_percent(cfg, paper):
    assert _tflops(cfg) == pytest.approx(paper, rel=0.10)


# --------------------------------------------------------------------------- what-if
def test_b300_like_mufu_what_if():
    """A B300-like GPU doubles MUFU (P4 §2.2). The shipped tuning then emulates nothing."""
    w = W(batch=2, heads=16, seqlen_q=16384, head_dim=128, dtype="bf16")
    b200 = perfsim.load_gpu("b200")
    b300 = b200.replace(mufu_ops_per_clk_per_sm=32, id="b300-like")
    base = perfsim.predict(w, gpu=b200, algorithm="fa4").seconds
    faster = perfsim.predict(w, gpu=b300, algorithm="fa4").seconds
    assert faster < base
    no_emu = perfsim.predict(w, gpu=b200, algorithm=FA4(emulate_fraction=0.0)).seconds
    assert no_emu >= base


def test_fa2_is_slower_than_fa3_on_hopper():
    """FA3 §4.1: 1.5-2.0x faster than FA2 in the forward, on an H100 with the clock locked at
    1830 MHz (App. C.1); the lock holds FA2, the power limit holds FA3 lower."""
    from perfsim.timing import TimingParams

    w = W(batch=4, heads=16, seqlen_q=8192, head_dim=128, dtype="bf16")
    h100 = perfsim.load_gpu("h100-sxm5")
    lock = TimingParams.for_gpu(h100, clock=1.83e9)
    fa2 = perfsim.predict(w, gpu=h100, algorithm=FA2(), timing=lock).tflops
    fa3 = perfsim.predict(w, gpu=h100, algorithm="fa3", timing=lock).tflops
    assert 1.5 * fa2 < fa3 < 2.0 * fa2


def test_fa3_composes_the_fused_kernels_instead_of_inheriting_fa2s_options():
    """FA2 and FA3 share ``FusedAttention`` (issue 12): FA3 has none of FA2's launch options,
    and an FA2 option given to FA3 is one clear error naming what it takes. Both name their
    compiled head dims ``compiled_head_dims``, each with its own reference's values."""
    from perfsim.algorithms.fa2 import FusedAttention

    assert issubclass(FA3, FusedAttention) and not issubclass(FA3, FA2)
    fa2_only = set(FA2.model_fields) - set(FusedAttention.model_fields)
    assert fa2_only == {"warps", "registers_per_thread", "bwd_registers_per_thread",
                        "dq_recompute", "dq_programs", "dq_reductions", "bwd_prescaled_k",
                        "bwd_key_splits", "dq_lock_waits", "bwd_gmem_accumulators",
                        "bwd_gemms_preloaded",
                        "bwd_masked_row_split",
                        "bwd_spill_bytes",
                        "bwd_smem_per_cta", "fwd_smem_per_cta", "compiled_head_dims",
                        "fwd_stages", "mma_k", "split_sector_rows", "keyless_tile_exit"}
    assert fa2_only & set(FA3.model_fields) == {"compiled_head_dims"}
    for option in sorted(fa2_only - {"compiled_head_dims"}):
        with pytest.raises(PerfsimError, match=rf"fa3 has no option {option}( \(did you "
                           r"mean '\w+'\?\))?;"):
            FA3(**{option: FA2.model_fields[option].default or 1})
    # FA2's values are not FA3's
    with pytest.raises(PerfsimError, match="compiled_head_dims"):
        FA3(compiled_head_dims="pytorch")


def test_fa4_backward_dq_partials_are_reduced_in_l2_not_written_each():
    """The backward's dQ partials are TMA reduce-adds into an fp32 accumulator, resolved in L2
    (FA2's rule for its atomics): a long call moves about its inputs and gradients through
    HBM, not one fp32 write per (key tile, query row) partial (275 GB here before)."""
    w = W(batch=1, heads=8, kv_heads=4, seqlen_q=65536, head_dim=256, phase="bwd")
    k = max(perfsim.predict(w, "b200", "fa4").kernels, key=lambda k: k.seconds)
    assert k.cost.hbm_bytes < 5e9
    assert k.cost.terms["l2_hit/dQ reduce-adds"] > 100e9


def test_fa4_backward_launches_the_preprocess_and_dq_convert_kernels():
    """flash_attn.cute's ``_flash_attn_bwd`` (interface.py) runs, on sm90 and sm100 alike, a
    preprocess kernel (rowsum(dO∘O), the logsumexp times log2(e), the fp32 dQ accumulator
    zeroed), the main kernel and a postprocess kernel (dQ from the accumulator): the same
    three as FA3's model, not the main kernel alone."""
    w = W(batch=4, heads=16, seqlen_q=4096, head_dim=128, phase="bwd")
    p = perfsim.predict(w, "b200", "fa4")
    assert [k.cost.name for k in p.kernels] == ["fa4_bwd_preprocess", "fa4_bwd",
                                                 "fa4_bwd_convert_dq"]
    pre, _, post = p.kernels
    rows = 4 * 16 * 4096
    assert pre.cost.terms["hbm_write/zeroed fp32 dQ accumulator"] == 4 * rows * 128
    assert pre.cost.terms["hbm_write/logsumexp · log2(e)"] == 4 * rows
    assert post.cost.terms["hbm_read/fp32 dQ"] == 4 * rows * 128
    # the forward is one kernel, as before
    assert [k.cost.name for k in perfsim.predict(w.replace(phase="fwd"), "b200",
                                                  "fa4").kernels] == ["fa4_fwd"]


@pytest.mark.parametrize("phase", ["fwd", "bwd"])
@pytest.mark.parametrize("change, needle", [
    ({"max_warps_per_sm": 8, "max_threads_per_sm": 256}, "a CTA of 16 warps"),
    ({"registers_per_sm": 32768}, "registers per SM"),
    ({"max_registers_per_thread": 64}, "128 registers per thread exceed"),
])
def test_fa4_refuses_a_what_if_sm_its_cta_does_not_fit(phase, change, needle):
    """FA4's CTA is 16 warps launched at 128 registers a thread (the whole 64 Ki register file,
    split by setmaxnreg: flash_fwd_sm100.py, flash_bwd_sm100.py); a what-if SM with 8 warp
    slots or half the registers ran it as before."""
    from perfsim.gpu_catalog import load_gpu

    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True,
                                  phase=phase)
    base = perfsim.predict(w, gpu="b200", algorithm="fa4").seconds
    assert base > 0
    with pytest.raises(InfeasibleError, match=re.escape(needle)):
        perfsim.predict(w, gpu=load_gpu("b200").replace(**change), algorithm="fa4")


def test_fa3_fp8_preparation_holds_the_16_bit_inputs_and_their_copies():
    """Review finding: with ``quantize_inputs`` the footprint left out the 16-bit Q, K, V that
    the preparation kernel reads while it writes their e4m3 copies."""
    import perfsim

    w = perfsim.AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=32768,
                                  head_dim=128, dtype="fp8_e4m3")
    p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa3")
    (prep,) = [k for k in p.kernels if k.cost.name == "fp8_prepare"]
    assert p.memory_bytes >= prep.cost.hbm_read_bytes + prep.cost.hbm_write_bytes
    off = perfsim.predict(w, gpu="h100-sxm5", algorithm=FA3(quantize_inputs=False))
    assert p.memory_bytes - off.memory_bytes == prep.cost.hbm_read_bytes


@pytest.mark.parametrize("algorithm, gpu, splits", [
    ("flash-attn-3", "h100-sxm5", 1), ("flash-attn-3", "h100-sxm5", 4), ("fa4", "b200", 1),
    ("flash-attn-cute", "b200", 1)])
def test_fp8_inputs_write_a_bf16_output(algorithm, gpu, splits):
    """A fresh user's report: fp8 inputs wrote O in fp8 (1 byte an element). flash-attn 3
    allocates a bf16 O for e4m3 inputs (``hopper/flash_api.cpp``: ``out_type = q_type ==
    Float8_e4m3fn ? BFloat16 : q_type``) and flash-attn 4 writes a 16-bit O too: the O written
    (by the forward, or by the split-KV combine) and held is 2 bytes an element, Q, K and V 1."""
    from perfsim.implementations import resolve

    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=2048, head_dim=128,
                                  dtype="fp8_e4m3")
    if splits > 1:
        algorithm = resolve(algorithm).model_copy(update={"options": {"num_splits": splits}})
    p = perfsim.predict(w, gpu=gpu, algorithm=algorithm)
    o = 4 * 16 * 2048 * 128
    if splits == 1:
        (main,) = p.kernels
        assert main.cost.terms["hbm_write/O"] == 2 * o
    else:
        (combine,) = [k for k in p.kernels if "combine" in k.cost.name]
        assert combine.cost.hbm_write_bytes == 4 * 16 * 2048 * (2 * 128 + 4)
    qkv, lse = 3 * o, 4 * 16 * 2048 * 4
    assert p.memory_bytes >= qkv + 2 * o + lse


def test_longest_first_grids_take_at_least_their_longest_cta():
    """A fresh user's report: kernels that launch the longest tiles first (fa4,
    flash_attn.cute) were charged the average CTA, so a causal grid of about one wave ran at
    60 % of the unmasked one and got faster with more query rows. One SM runs the longest
    CTA (every key tile) from start to end: the causal call costs about the unmasked one."""
    floors = {"host_floor_fwd_s": 0, "host_floor_bwd_s": 0}

    def seconds(algorithm, gpu, nq, causal):
        w = W(batch=1, heads=4, seqlen_q=nq, seqlen_k=4096, head_dim=128, causal=causal)
        return perfsim.predict(w, gpu=gpu, algorithm=algorithm, timing=floors).seconds

    fa4 = "fa4(num_splits=1, pack_gqa=False)"
    unmasked, causal = seconds(fa4, "b200", 4096, False), seconds(fa4, "b200", 4096, True)
    assert causal == pytest.approx(unmasked, rel=0.05)
    assert seconds(fa4, "b200", 8192, True) >= causal
    assert seconds("flash-attn-cute", "h100-sxm5", 8192, True) >= seconds(
        "flash-attn-cute", "h100-sxm5", 4096, True)
    # many waves: longest first balances the SMs, and the causal call takes about half
    many = [perfsim.predict(W(batch=16, heads=16, seqlen_q=4096, head_dim=128, causal=c),
                            gpu="b200", algorithm=fa4, timing=floors).seconds
            for c in (False, True)]
    assert 0.45 < many[1] / many[0] < 0.6


@pytest.mark.parametrize("algorithm, gpu", [("flash-attn-cute", "h200-sxm"),
                                            ("flash-attn-3", "h100-sxm5"), ("fa4", "b200")])
def test_gqa_backward_accumulates_dk_dv_at_the_kv_heads(algorithm, gpu):
    """flash-attn 3 (hopper/epilogue_bwd.hpp, ``CollectiveEpilogueBwdGQA``) and
    flash_attn.cute (interface.py, ``dKV_postprocess``) reduce-add each query head's fp32
    dK, dV into accumulators at the K/V heads, zeroed before and converted after; they were
    counted as flash-attn 2's dK, dV per query head plus a summing kernel."""
    b, h, h_kv, n, d = 2, 32, 4, 2048, 128
    w = W(batch=b, heads=h, kv_heads=h_kv, seqlen_q=n, head_dim=d, phase="bwd")
    kernels = {k.cost.name: k.cost for k in perfsim.predict(w, gpu=gpu,
                                                           algorithm=algorithm).kernels}
    name = "fa4" if algorithm == "fa4" else "fa3"
    assert not any(k.startswith("gqa_reduce") for k in kernels)
    accumulator = 4 * b * h_kv * n * d                   # fp32, N a multiple of the key block
    for t in ("dk", "dv"):
        assert kernels[f"{name}_bwd_zero_{t}_accum"].hbm_write_bytes == accumulator
        convert = kernels[f"{name}_bwd_convert_{t}"]
        assert (convert.hbm_read_bytes, convert.hbm_write_bytes) == (accumulator,
                                                                     2 * b * h_kv * n * d)
    main = kernels[f"{name}_bwd"]
    assert "hbm_write/dK,dV" not in main.terms or main.terms["hbm_write/dK,dV"] == 0
    # every query head's tile is added once: B·H·N·(d + d_v) fp32 reductions
    adds = [v for k, v in main.terms.items() if k.startswith("atomics/dK,dV")]
    assert adds == [b * h * n * 2 * d]
    # without GQA: dK, dV written straight from the main kernel, no extra kernels
    mha = {k.cost.name: k.cost for k in perfsim.predict(
        W(batch=b, heads=h, seqlen_q=n, head_dim=d, phase="bwd"), gpu=gpu,
        algorithm=algorithm).kernels}
    assert not any("accum" in k or "convert_d" in k and k.endswith(("dk", "dv")) for k in mha)
    assert mha[f"{name}_bwd"].terms["hbm_write/dK,dV"] == 2 * b * h * n * 2 * d


@pytest.mark.parametrize("algorithm", ["sdpa-flash", "flash-attn-2", "sdpa-cudnn"])
def test_gqa_backward_of_the_others_sums_per_query_head_gradients(algorithm):
    """flash-attn 2 (``mha_bwd``: ``dk_expanded`` summed over each group) writes dK, dV per
    query head and sums them; so does cuDNN (Nsight Compute: two ``fmha_reduce_head``
    kernels after its main one, validate/reports/h100/probes/ncu/ncu-gqa-bwd.tgz)."""
    w = W(batch=2, heads=32, kv_heads=4, seqlen_q=2048, head_dim=128, phase="bwd")
    names = [k.cost.name for k in perfsim.predict(w, gpu="h100-sxm5",
                                                  algorithm=algorithm).kernels]
    assert {"gqa_reduce_dk", "gqa_reduce_dv"} <= set(names)
    assert not any("accum" in n for n in names)


def test_flash_attn_2_backward_rereads_kv_a_head_of_batches_later():
    """flash-attn 2's backward grid is blockIdx (key block, batch, head)
    (flash_bwd_launch_template.h ``grid_n(num_n_block, params.b, params.h)``): the query heads
    of one K/V head re-read its tiles B · key blocks CTAs apart, so the K/V of every batch
    must stay in L2 for the re-read to hit. On an RTX 3090 (6 MB of L2) one batch's 1 MB of
    K/V per K/V head stays; sixteen batches' do not. FA3's grid (blocks, heads, batch) keeps
    the heads adjacent whatever B."""
    comp = {}
    for b in (1, 16):
        w = W(batch=b, heads=32, kv_heads=4, seqlen_q=2048, head_dim=128, phase="bwd")
        (main,) = [k.cost for k in perfsim.predict(w, gpu="rtx-3090",
                                                   algorithm="sdpa-flash").kernels
                   if k.cost.name == "fa2_bwd"]
        comp[b] = main.terms["hbm_read/K,V"] / (2 * b * 4 * 2048 * 256)
    assert comp == {1: 1.0, 16: 8.0}            # once per K/V head; once per query head
    w = W(batch=16, heads=32, kv_heads=4, seqlen_q=2048, head_dim=128, phase="bwd")
    (main,) = [k.cost for k in perfsim.predict(w, gpu="h100-sxm5",
                                               algorithm="flash-attn-3").kernels
               if k.cost.name == "fa3_bwd"]
    assert main.terms["hbm_read/K,V"] == 2 * 16 * 4 * 2048 * 256
