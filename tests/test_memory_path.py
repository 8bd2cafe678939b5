"""fp32 reductions into L2 on the memory path (perfsim.timing.memory_path_seconds) and
cuDNN's sm90 forward launch (implementations.CUDNN_SM90_FWD_TILE): the rules, not figures."""

from __future__ import annotations

import dataclasses

import pytest

import perfsim
from perfsim import implementations as im
from perfsim.algorithms.base import Dims
from perfsim.timing import REDUCTION_BYTES, memory_path_seconds

SHORT_BWD = perfsim.AttentionWorkload(batch=64, heads=16, seqlen_q=256, head_dim=128,
                                      dtype="bf16", phase="bwd")


def _main_bwd(prediction):
    return next(k for k in prediction.kernels if k.cost.name.endswith("_bwd"))


def test_reductions_add_to_the_hbm_time_at_the_gpus_rate():
    h200 = perfsim.load_gpu("h200-sxm")
    cost = _main_bwd(perfsim.predict(SHORT_BWD, h200, "sdpa-cudnn")).cost
    assert cost.atomics > 0
    rate = 4e12
    with_term = memory_path_seconds(cost, h200, rate)
    without = memory_path_seconds(cost, h200.replace(l2_reduction_bytes_per_s=None), rate)
    assert without == pytest.approx(cost.hbm_bytes / rate)
    assert with_term - without == pytest.approx(
        cost.atomics * REDUCTION_BYTES / h200.l2_reduction_bytes_per_s)


def test_a_reduction_bound_backward_is_slower_with_the_term_and_says_why():
    h200 = perfsim.load_gpu("h200-sxm")
    lock = perfsim.timing_for(h200, "sdpa-cudnn", clock=1.7e9)
    with_term = perfsim.predict(SHORT_BWD, h200, "sdpa-cudnn", timing=lock)
    without = perfsim.predict(SHORT_BWD, h200.replace(l2_reduction_bytes_per_s=None),
                              "sdpa-cudnn", timing=lock)
    assert with_term.seconds > without.seconds
    assert _main_bwd(with_term).bound == "hbm"
    text = with_term.explain()
    assert "fp32 reductions into L2" in text and "memory path" in text
    # the named term has a time of its own
    assert any("atomics/dQ" in k and v > 0 for k, v in with_term.term_seconds().items())


def test_gpus_without_a_measured_rate_have_no_term():
    a100 = perfsim.load_gpu("a100-sxm4-80gb")
    assert a100.l2_reduction_bytes_per_s is None
    assert "memory path" not in perfsim.predict(SHORT_BWD, a100, "fa2").explain()


def test_the_rate_is_validated():
    with pytest.raises(perfsim.PerfsimError):
        perfsim.load_gpu("h200-sxm").replace(l2_reduction_bytes_per_s=-1.0)


@pytest.mark.parametrize("d, stages", [(64, 2), (128, 2), (160, 1), (256, 1)])
def test_cudnn_sm90_forward_runs_one_tile_at_every_head_dim(d, stages):
    """(160 runs the compiled 192 kernel: Q and two K/V stages would need 240 KiB.)"""
    h200 = perfsim.load_gpu("h200-sxm")
    w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=2048, head_dim=d, dtype="bf16")
    algo = im._sdpa_cudnn(Dims.of(w), h200)
    assert (algo.block_m, algo.block_n) == im.CUDNN_SM90_FWD_TILE == (128, 128)
    assert algo.intra_warpgroup_overlap is False and algo.stages == stages
    kernel = perfsim.predict(w, h200, "sdpa-cudnn").kernels[-1]
    assert kernel.cost.launch["block_m"] == 128 and kernel.cost.launch["block_n"] == 128
    # two tiles in flight (the ping-pong of the two consumer warpgroups alone) in the
    # head-dim-128 kernel; the others run their MMAs and exps in turn (one tile in flight)
    assert kernel.cost.pipeline[1] == (2 if d == 128 else 1)
    assert algo.fwd_pipes_in_turn is (d != 128)


def test_explain_names_the_memory_path_only_where_that_kernel_binds_on_it():
    # SDPA flash's short backward: HBM-bound through its pre/post kernels, which have no
    # reductions, while the kernel that has them is bound by shared memory
    w = perfsim.AttentionWorkload(batch=128, heads=16, seqlen_q=128, head_dim=64,
                                  dtype="bf16", phase="bwd")
    text = perfsim.predict(w, "h200-sxm", "sdpa-flash").explain()
    assert "memory path" not in text and "Bound by HBM bandwidth" in text


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, d", [("fa3", 192), ("fa3", 256), ("sdpa-cudnn", 128)])
def test_symbolic_memory_path_matches_the_numeric_timing(algorithm, d):
    """The closed form has the memory path (HBM bytes and reductions), not the TMA row
    segments (numeric shapes only): it equals the numeric timing where the segments are set
    aside (l2_reduction_segment_share None: the segments alone, which do not bind here) and
    is a floor under it with them (FA3's segments taking turns with its reductions bind)."""
    from perfsim import symbolic

    h200 = perfsim.load_gpu("h200-sxm")
    apart = h200.replace(l2_reduction_segment_share=None)
    sizes = dict(B=4, H=8, H_kv=8, N_q=1024, N_k=1024, d=d, d_v=d)
    closed = float(symbolic.unit_seconds(algorithm, apart, phase="bwd", **sizes)["hbm"])
    assert closed == float(symbolic.unit_seconds(algorithm, h200, phase="bwd",
                                                 **sizes)["hbm"])
    w = perfsim.AttentionWorkload(batch=4, heads=8, seqlen_q=1024, head_dim=d, dtype="bf16",
                                  phase="bwd")
    assert closed == pytest.approx(perfsim.predict(w, apart, algorithm).unit_seconds["hbm"],
                                   rel=1e-9)
    assert closed <= perfsim.predict(w, h200, algorithm).unit_seconds["hbm"] * (1 + 1e-9)


def test_xformers_backward_loads_and_stores_its_accumulator_instead_of_reducing():
    h200 = perfsim.load_gpu("h200-sxm")
    w = SHORT_BWD.model_copy(update={"head_dim": 64})
    algo = im.resolve("sdpa-efficient")
    eff = _main_bwd(perfsim.predict(w, h200, algo)).cost
    assert eff.atomics == 0
    # the same L2 and HBM bytes as the option's other setting, without the reductions
    inner = im._efficient(Dims.of(w), h200)
    reducing = _main_bwd(perfsim.predict(w, h200, inner.model_copy(
        update={"dq_reductions": True}))).cost
    assert reducing.atomics > 0
    assert (eff.hbm_bytes, eff.l2_hit_bytes) == (reducing.hbm_bytes, reducing.l2_hit_bytes)


def test_a_persistent_backward_pays_each_units_whole_edge_a_forward_its_set_up():
    from perfsim.mathops import cdiv
    from perfsim.timing import edge_seconds

    h200 = perfsim.load_gpu("h200-sxm")
    params = perfsim.timing_for(h200, "sdpa-cudnn")
    bwd = _main_bwd(perfsim.predict(SHORT_BWD, h200, "sdpa-cudnn")).cost
    fwd = perfsim.predict(SHORT_BWD.model_copy(update={"phase": "fwd"}), h200,
                          "sdpa-cudnn").kernels[-1].cost
    assert bwd.persistent and bwd.unit_edges_exposed
    assert fwd.persistent and not fwd.unit_edges_exposed
    for cost, each in ((bwd, None), (fwd, h200.cta_wave_overhead_s)):
        every, one = edge_seconds(cost, h200, params, cost.grid)
        units = cdiv(cost.grid, h200.sm_count)
        assert units > 1
        assert every == pytest.approx(one + (units - 1) * (one if each is None else each))
    # a calibrated profile's fitted per-wave figure stays once per CTA
    fitted = perfsim.timing_for(h200, "sdpa-cudnn", cta_overhead_s=5e-6)
    assert edge_seconds(bwd, h200, fitted, bwd.grid)[0] == pytest.approx(5e-6)


def test_read_only_rereads_leave_l2_gradually_and_written_data_at_once():
    """Cyclic re-reads past the usable part of L2 still hit it in part, falling to none at
    GPUSpec.l2_reuse_ramp_end x its size (the H200 probe, probe_l2_sizes.json); data the
    kernel also writes keeps the step. A GPU what-if with one more SM no longer jumps 4x
    (the a10g FA1 decode: 1037 -> 4126 us from 126 to 127 SMs before)."""
    from perfsim.algorithms.base import l2_filtered

    gpu = perfsim.load_gpu("h200-sxm")
    c, end = gpu.l2_bytes, gpu.l2_reuse_ramp_end
    # ten passes over a working set of ws x the L2: nine of them re-reads
    share = [l2_filtered(10 * ws * c, ws * c, ws * c, gpu, 0.5)[1] / (9 * ws * c)
             for ws in (0.4, 0.5, 0.8, 1.25, 1.9, end, 3.0)]
    assert share[0] == pytest.approx(1.0) and share[1] == pytest.approx(1.0)
    assert share[-2] == 0.0 and share[-1] == 0.0
    assert all(a >= b for a, b in zip(share, share[1:]))
    assert share[3] == pytest.approx((end - 1.25) / (end - 0.5))
    assert l2_filtered(8 * c, 0.8 * c, 0.8 * c, gpu, 0.5, written=True)[1] == 0.0

    a10g = perfsim.load_gpu("a10g")
    w = perfsim.AttentionWorkload(batch=8, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=16384,
                                  head_dim=128)
    t = [perfsim.predict(w, gpu=a10g.replace(sm_count=n), algorithm="fa1").seconds
         for n in (126, 127)]
    assert t[1] / t[0] < 1.05


# ------------------------------------------------ TMA row segments taking turns with reductions
CUTE_BWD = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=8192, head_dim=232,
                                     causal=True, dtype="bf16", phase="bwd")


def test_segments_and_reductions_take_turns_by_the_gpus_share():
    from perfsim.timing import l2_request_path_seconds, reduction_seconds

    h200 = perfsim.load_gpu("h200-sxm")
    cost = _main_bwd(perfsim.predict(CUTE_BWD, h200, "flash-attn-cute")).cost
    segments, reductions = cost.l2_request_seconds, reduction_seconds(cost, h200)
    assert segments > 0 and reductions > 0
    share = h200.l2_reduction_segment_share
    assert l2_request_path_seconds(cost, h200) == pytest.approx(segments + share * reductions)
    # strict turns, no overlap credit, and the field unset (the segments alone, as before it)
    assert l2_request_path_seconds(cost, h200.replace(l2_reduction_segment_share=1.0)) == \
        pytest.approx(segments + reductions)
    assert l2_request_path_seconds(cost, h200.replace(l2_reduction_segment_share=0.0)) == \
        pytest.approx(max(segments, reductions))
    assert l2_request_path_seconds(cost, h200.replace(l2_reduction_segment_share=None)) == \
        segments
    # a kernel without row segments has no such floor
    assert l2_request_path_seconds(dataclasses.replace(cost, l2_request_seconds=0), h200) == 0


def test_a_cute_backward_on_offset_rows_is_bound_by_the_l2_and_says_why():
    h200 = perfsim.load_gpu("h200-sxm")
    turns = perfsim.predict(CUTE_BWD, h200, "flash-attn-cute")
    alone = perfsim.predict(CUTE_BWD, h200.replace(l2_reduction_segment_share=None),
                            "flash-attn-cute")
    assert turns.seconds > alone.seconds
    assert _main_bwd(turns).bound == "hbm"
    assert "taking turns with its" in turns.explain()


def test_the_catalog_share_is_the_median_of_the_committed_probe():
    """hardware/h200-sxm.toml's l2_reduction_segment_share is what the committed probe run
    (validate/probe_l2_tma_mix.py) gives: (pair - loads alone) / reductions alone, median of
    every pair of the run; H100 and GH200 take it as ASSUMED (the same GH100 L2)."""
    import json
    import statistics
    from pathlib import Path

    from perfsim import validate

    run = json.loads((Path(validate.__file__).resolve().parent
                      / "reports/h200/probes/probe_l2_tma_mix.json").read_text())
    t = {(r["mode"], r["head_dim"], r["programs_per_sm"], r["red_tiles_per_step"]): r["seconds"]
         for r in run["rows"]}
    shares = [(s - t[("load", d, p, 0)]) / t[(m.split("+")[1], d, p, n)]
              for (m, d, p, n), s in t.items() if m.startswith("load+")]
    assert len(shares) == 40
    for gpu in ("h200-sxm", "h100-sxm5", "gh200"):
        assert perfsim.load_gpu(gpu).l2_reduction_segment_share == \
            pytest.approx(statistics.median(shares), abs=5e-4)
    with pytest.raises(perfsim.PerfsimError):
        perfsim.load_gpu("h200-sxm").replace(l2_reduction_segment_share=1.5)


def test_an_optional_field_can_be_swept_back_to_none():
    """A sweep's override may set an optional GPU field to None ("none" from TOML): the rows
    equal predict on the GPU without the field; a required field still refuses None."""
    h200 = perfsim.load_gpu("h200-sxm")
    want = [perfsim.predict(CUTE_BWD, h200.replace(l2_reduction_segment_share=s),
                            "flash-attn-cute").seconds for s in (0.885, None)]
    assert want[0] > want[1]
    for none in (None, "none"):         # (both in one list would be the same rows twice)
        rows = perfsim.sweep(gpus="h200-sxm", algorithms="flash-attn-cute", batch=2, heads=8,
                             seqlen_q=8192, head_dim=232, causal=True, phase="bwd",
                             overrides={"l2_reduction_segment_share": [0.885, none]})
        assert list(rows.seconds) == pytest.approx(want, rel=1e-12)
    with pytest.raises(perfsim.PerfsimError, match="sm_count"):
        perfsim.sweep(gpus="h200-sxm", algorithms="fa2", batch=2, heads=8, seqlen_q=1024,
                      head_dim=64, overrides={"sm_count": [None]})



def _by_suffix(prediction, suffix):
    return next(k.cost for k in prediction.kernels if k.cost.name.endswith(suffix))


@pytest.mark.parametrize("algo, d, kd", [
    ("flash-attn-cute", 200, 256),   # sm90 backward: head dims 129-256 to a multiple of 64
    ("flash-attn-cute", 136, 192),
    ("sdpa-cudnn", 72, 128),         # cuDNN's sm90 kernels: multiples of 64
    ("sdpa-flash", 80, 96),          # PyTorch's flash-attn 2 kernels
    ("sdpa-flash", 200, 256),
    ("fa2", 160, 160),               # flash-attn 2 compiles a 160 kernel: nothing padded
])
def test_the_dq_accumulator_is_as_wide_as_the_compiled_kernel(algo, d, kd):
    """The backward adds whole B_r x kd fp32 tiles into a dQ accumulator allocated at the
    compiled kernel's head dim (flash-attn 2's unpredicated atomicAdd loop; FA3's and
    flash_attn.cute's TMA bulk reduction of a tile_m x tile_hdim tile), so the zeroing, the
    adds and the read-back are those of a call at kd; dQ itself is written at the call's d."""
    def bwd(h):
        w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=2048, head_dim=h,
                                      dtype="bf16", phase="bwd")
        return perfsim.predict(w, "h200-sxm", algo)
    p, at_kd = bwd(d), bwd(kd)
    rows = 2 * 8 * 2048
    assert _main_bwd(p).cost.atomics == _main_bwd(at_kd).cost.atomics > 0
    assert _main_bwd(p).cost.atomics % (rows * kd) == 0      # whole rows of kd columns
    assert _by_suffix(p, "_bwd_preprocess").terms["hbm_write/zeroed fp32 dQ accumulator"] == \
        rows * 4 * kd
    convert = _by_suffix(p, "_bwd_convert_dq").terms
    assert convert["hbm_read/fp32 dQ"] == rows * 4 * kd
    assert convert["hbm_write/dQ"] == rows * 2 * d
