"""Issue 11's six public inference cases, each against the number its source reports, with
the issue's tolerance of 20 %. Misses are strict xfails that state the current prediction,
so a model change that fixes one shows up as an XPASS (and must then become a plain test).

Sources (facts from public threads, as the issue quotes them):
1. H100, FA3, B=1, H=8, H_kv=1, N_q=1, N_k=10 000, d=64, bf16: 0.184 ms with 1 split,
   0.086 ms with 32 splits (flash-attention GitHub discussion of split-KV decode).
2. B200, FA4, B=4, H=96, H_kv=8, N_q=1, N_k=65 536, d=128, bf16, 1 split: 1.816 ms without
   GQA packing, 0.621 ms with (2.92x) (flash-attention issue on pack_gqa for decode).
3. H100 SXM, 64 sequences, H=64, H_kv=8, d=128, fp16, paged KV (page 256), N_k 32 -> 256:
   21.1 -> 43.6 us (a paged-attention benchmark report).
4. B200-class, FA2/FA3 decode with B=1 and few K/V heads: about H CTAs on 132-148 SMs, one
   partial wave; the split heuristic fills the GPU.
5. GB200, FA4, H=16, ~32k tokens, bf16, dropout 0.125: forward at 75-85 % and backward at
   60-70 % of the no-dropout TFLOP/s.
6. B300, B=1, H=8, H_kv=4, N=65 536, d=256, bf16, sliding window (1023, 0): FA2 forward
   1.62 ms / backward 13.98 ms; FA4 forward 2.30 ms / backward 4.04 ms.
"""

from __future__ import annotations

import pytest

import perfsim
from perfsim import AttentionWorkload, InfeasibleError
from perfsim.algorithms import FA2, FA3, FA4

TOLERANCE = 0.20


def within(predicted, published):
    return abs(predicted - published) / published <= TOLERANCE


def miss(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


# ------------------------------------------------------------------ 1: split-KV on H100
CASE1 = AttentionWorkload(batch=1, heads=8, kv_heads=1, seqlen_q=1, seqlen_k=10_000,
                          head_dim=64)


@miss("predicted 0.107 ms: a single CTA's K/V stream (79 tiles) is modelled as a pipelined "
      "cycle; the report's 2.3 us per tile is not reproduced. The same class of kernel "
      "(flash_attn.cute, one packed CTA) on the H200 took 106-111 us for this shape, the model "
      "111.7 (validate/reports/h200/probes/probe_call_split-decode.json): blocked on an H100 "
      "or flash-attn 3's own kernel")
def test_case1_fa3_one_split():
    assert within(perfsim.predict(CASE1, "h100-sxm5", FA3(num_splits=1)).seconds, 0.184e-3)


@miss("predicted 0.024 ms (the 24.2 us host floor of a PyTorch call); reported 0.086 ms. "
      "The kernels are short (SDPA flash's split-KV kernels took 16 us for this shape on the "
      "H200, the model 14.4), so the report's figure is host time, and flash-attn 3's Python "
      "call path is not measured here")
def test_case1_fa3_32_splits():
    assert within(perfsim.predict(CASE1, "h100-sxm5", FA3(num_splits=32)).seconds, 0.086e-3)


def test_case1_splits_pay_off():
    one = perfsim.predict(CASE1, "h100-sxm5", FA3(num_splits=1)).seconds
    many = perfsim.predict(CASE1, "h100-sxm5", FA3(num_splits=32)).seconds
    assert many < one / 2          # reported: 2.1x


# ------------------------------------------------------------------ 2: GQA packing on B200
CASE2 = AttentionWorkload(batch=4, heads=96, kv_heads=8, seqlen_q=1, seqlen_k=65_536,
                          head_dim=128)


@miss("predicted 2.31 ms (+27 %): 384 one-Q-tile CTAs whose MMA and softmax stations run "
      "back to back (one tile in flight)")
def test_case2_fa4_without_packing():
    p = perfsim.predict(CASE2, "b200", FA4(num_splits=1, pack_gqa=False))
    assert within(p.seconds, 1.816e-3)


@miss("predicted 0.77 ms (+24 %; +68 % before the reference's one-Q-tile launch for the 12 "
      "packed rows and the padded-rows fix of Dims.tile_visits)")
def test_case2_fa4_with_packing():
    p = perfsim.predict(CASE2, "b200", FA4(num_splits=1, pack_gqa=True))
    assert within(p.seconds, 0.621e-3)


def test_case2_packing_pays_off():
    off = perfsim.predict(CASE2, "b200", FA4(num_splits=1, pack_gqa=False))
    on = perfsim.predict(CASE2, "b200", FA4(num_splits=1, pack_gqa=True))
    assert on.seconds < off.seconds / 1.5                 # reported 2.92x
    # each K/V tile is loaded once per K/V head, not once per query head (unpacked, the
    # re-reads are L2 hits that still cross the SMs' load paths)
    assert on.counts.hbm_bytes <= off.counts.hbm_bytes
    assert (on.counts.hbm_read_bytes + on.counts.l2_hit_bytes
            < (off.counts.hbm_read_bytes + off.counts.l2_hit_bytes) / 8)


# ------------------------------------------------------------------ 3: paged decode on H100
def paged(n_k):
    return AttentionWorkload(batch=64, heads=64, kv_heads=8, seqlen_q=1, seqlen_k=n_k,
                             head_dim=128, dtype="fp16", page_size=256)


def test_case3_paged_short_cache():
    """Predicted 24.2 us: the PyTorch host floor per forward (the kernel alone ~12 us)."""
    assert within(perfsim.predict(paged(32), "h100-sxm5", "fa3").seconds, 21.1e-6)


@miss("predicted 32.7 us (-25 %): 64 x 8 packed CTAs pulling 67 MB; the report's growth "
      "from 21 to 44 us between N_k = 32 and 256 is not reproduced (32.7 / 24.2)")
def test_case3_paged_longer_cache():
    assert within(perfsim.predict(paged(256), "h100-sxm5", "fa3").seconds, 43.6e-6)


# ------------------------------------------------------------------ 4: splits fill the GPU
@pytest.mark.parametrize("gpu", ["b200", "h100-sxm5", "rtx-5090"])
def test_case4_split_heuristic_fills_the_gpu(gpu):
    w = AttentionWorkload(batch=1, heads=32, kv_heads=4, seqlen_q=1, seqlen_k=32_768,
                          head_dim=128)
    spec = perfsim.load_gpu(gpu)
    unsplit = perfsim.predict(w, gpu, FA2(num_splits=1))
    auto = perfsim.predict(w, gpu, FA2())
    assert unsplit.kernels[0].cost.grid < 0.1 * spec.sm_count     # one partial wave
    assert auto.kernels[0].cost.grid >= 0.8 * spec.sm_count       # the heuristic fills it
    assert auto.seconds < unsplit.seconds


# ------------------------------------------------------------------ 5: dropout on GB200
CASE5 = AttentionWorkload(batch=2, heads=16, seqlen_q=16_384, head_dim=128, dropout_p=0.125)


def _dropout_ratio(phase):
    a = perfsim.predict(CASE5.replace(phase=phase), "gb200", "fa4")
    b = perfsim.predict(CASE5.replace(phase=phase, dropout_p=0.0), "gb200", "fa4")
    return a.tflops / b.tflops


def test_case5_dropout_forward():
    """Predicted 80 % (reported 75-85 %; 71 % before dropout was counted from the H200's
    instruction census, ``softmax_costs.DROPOUT_INSTRUCTIONS``)."""
    assert 0.75 * (1 - TOLERANCE) <= _dropout_ratio("fwd") <= 0.85 * (1 + TOLERANCE)


@miss("backward keeps 86 % (reported 60-70 %; 96 % before the census of flash-attn 2's draw, "
      "whose ALU work FA4 is ASSUMED to share): the rest of the backward's dropout work hides "
      "behind its MMAs in the model")
def test_case5_dropout_backward():
    assert 0.60 * (1 - TOLERANCE) <= _dropout_ratio("bwd") <= 0.70 * (1 + TOLERANCE)


# ------------------------------------------------------------------ 6: windows on B300
CASE6 = AttentionWorkload(batch=1, heads=8, kv_heads=4, seqlen_q=65_536, head_dim=256,
                          window=(1023, 0))


def test_case6_fa2_window_forward():
    p = perfsim.predict(CASE6.replace(phase="fwd"), "b300", "fa2")
    assert within(p.seconds, 1.62e-3)


@miss("predicted 6.0 ms; reported 13.98 ms (FA2's backward at head dim 256 on Blackwell; "
      "4.3 ms before its window and head dim ran the bound-checked kernel)")
def test_case6_fa2_window_backward():
    assert within(perfsim.predict(CASE6.replace(phase="bwd"), "b300", "fa2").seconds,
                  13.98e-3)


@miss("predicted 0.58 ms (-75 %): feasible since the forward's K/V ring follows the "
      "reference (one K or V tile per stage, O in Q's buffer at head dim 256), but the "
      "report's 240 TFLOP/s is not reproduced (the model runs it at ~950)")
def test_case6_fa4_window_forward():
    try:
        p = perfsim.predict(CASE6.replace(phase="fwd"), "b300", "fa4")
    except InfeasibleError:
        pytest.fail("fa4 at head dim 256 is infeasible in the model")
    assert within(p.seconds, 2.30e-3)


@miss("predicted 1.27 ms (-69 %): the backward's window, head dim 256 and GQA 2 on the "
      "B300 run at ~1.07 PFLOP/s in the model; the report's 4.04 ms is ~340 TFLOP/s")
def test_case6_fa4_window_backward():
    assert within(perfsim.predict(CASE6.replace(phase="bwd"), "b300", "fa4").seconds,
                  4.04e-3)


def test_case6_window_is_far_cheaper_than_full_causal():
    full = perfsim.predict(CASE6.replace(window=(None, None), causal=True), "b300", "fa2")
    windowed = perfsim.predict(CASE6, "b300", "fa2")
    assert full.seconds > 5 * windowed.seconds            # reported: 5-21x
