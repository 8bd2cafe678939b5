"""The size and what-if steps docs/sweeps.md states ("Size steps are not only a what-if's",
and the long/short programs of FlexAttention's backward): each figure as the model gives it,
so the text cannot drift from the code."""

import pytest

import perfsim
from perfsim import AttentionWorkload as W


def test_fa1_one_more_batch_element_changes_the_splits_and_the_l2_fit():
    runs = {}
    for b in (16, 17):
        p = perfsim.predict(W(batch=b, heads=16, seqlen_q=2048, head_dim=128, causal=True),
                            gpu="rtx-4090", algorithm="fa1")
        cost = p.kernels[0].cost
        runs[b] = (cost.launch["q_splits"], cost.hbm_bytes, p.seconds)
    assert runs[16][0] == 1 and runs[17][0] == 5
    assert runs[16][1] == pytest.approx(9.04e9, rel=0.01)
    assert runs[17][1] == pytest.approx(0.575e9, rel=0.01)
    assert runs[16][2] == pytest.approx(10.3e-3, rel=0.01)
    assert runs[17][2] == pytest.approx(4.33e-3, rel=0.01)


def test_fa1_more_sms_can_overflow_l2_and_explain_says_so():
    # more SMs hold more query rows at once; past the usable L2 every step's Q, O, l, m
    # read-modify-write goes to HBM (written data keeps L2's step), and explain() names it
    gpu = perfsim.load_gpu("rtx-3090")
    w = W(batch=16, heads=16, seqlen_q=256, head_dim=256, causal=True, dtype="fp16")
    base = perfsim.predict(w, gpu=gpu, algorithm="fa1")
    more = perfsim.predict(w, gpu=gpu.replace(sm_count=gpu.sm_count + 41), algorithm="fa1")
    assert more.counts.hbm_bytes > 4 * base.counts.hbm_bytes
    assert "exceed the usable L2" not in base.explain()
    assert "exceed the usable L2" in more.explain()


def test_fa1_splits_a_grid_that_already_fills_the_gpu():
    p = perfsim.predict(W(batch=61, heads=16, seqlen_q=256, head_dim=64), gpu="h100-sxm5",
                        algorithm="fa1")
    cost = p.kernels[0].cost
    assert cost.ctas_per_sm == 2 and cost.launch["q_splits"] == 4


def test_flex_backward_long_programs_share_their_sms_with_more_shared_memory():
    gpu = perfsim.load_gpu("a100-sxm4-80gb")
    more = gpu.replace(smem_bytes_per_sm=int(gpu.smem_bytes_per_sm * 1.2), id="more-smem")
    w = W(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=65536, head_dim=128, phase="bwd")
    out = {}
    for g in (gpu, more):
        p = perfsim.predict(w, gpu=g, algorithm="flex")
        main = max(p.kernels, key=lambda k: k.seconds)
        out[g.id] = (main.cost.ctas_per_sm, main.cost.launch["program_kinds"], p.seconds)
    (c1, kinds1, t1), (c2, kinds2, t2) = out[gpu.id], out["more-smem"]
    assert (c1, c2) == (1, 2) and kinds1 == kinds2
    short, long_, _ = kinds1
    assert (short[0], long_[0], long_[2]) == (8192, 32, 3072)
    assert t1 == pytest.approx(3.59e-3, rel=0.01) and t2 == pytest.approx(4.59e-3, rel=0.01)


def test_fa2_split_kv_step_one_query_tile_row_under_the_80_percent_line():
    out = {}
    for n in (768, 832):
        p = perfsim.predict(W(batch=1, heads=16, seqlen_q=n, head_dim=128), gpu="h100-sxm5",
                            algorithm="fa2")
        main = p.kernels[0].cost
        out[n] = (main.launch.get("num_splits", 1), p.counts.hbm_bytes, p.seconds)
    assert out[768][0] == 6 and out[832][0] == 1
    # the 38 MB of fp32 partials exceed the H100's usable L2 (half of its 52 MB): the combine
    # reads them back from HBM (base.l2_filtered's step for data a kernel wrote)
    assert out[768][1] == pytest.approx(88.7e6, rel=0.01)
    assert out[832][1] == pytest.approx(13.7e6, rel=0.01)
    assert out[768][2] == pytest.approx(57.2e-6, rel=0.01)
    assert out[832][2] == pytest.approx(27.0e-6, rel=0.01)
    one = perfsim.predict(W(batch=1, heads=16, seqlen_q=768, head_dim=128), gpu="h100-sxm5",
                          algorithm=perfsim.algorithms.FA2(num_splits=1))
    assert one.seconds == pytest.approx(25.5e-6, rel=0.01)


def test_more_sms_can_make_flash_attn_2_split_a_call_it_ran_whole():
    gpu = perfsim.load_gpu("h100-sxm5")
    w = W(batch=4, heads=32, seqlen_q=128, head_dim=256)
    base = perfsim.predict(w, gpu=gpu, algorithm="sdpa-flash")
    more = perfsim.predict(w, gpu=gpu.replace(sm_count=4 * gpu.sm_count), algorithm="sdpa-flash")
    assert base.kernels[0].cost.launch.get("num_splits", 1) == 1
    assert more.kernels[0].cost.launch["num_splits"] == 2
    assert base.seconds == pytest.approx(24.2e-6, rel=0.01)
    assert more.seconds == pytest.approx(47.3e-6, rel=0.01)
    assert any("one split would take 24.2 µs" in n for n in more.notes())
