"""predict(), Prediction, explain() and feasibility."""

from __future__ import annotations

import pytest

import perfsim
from perfsim.algorithms import FA1, FA2

W = perfsim.AttentionWorkload
W1 = W(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True, dtype="bf16")


def test_prediction_fields_are_consistent():
    p = perfsim.predict(W1, gpu="h100-sxm5", algorithm="fa2")
    assert p.seconds == pytest.approx(sum(k.seconds for k in p.kernels))
    assert p.tflops == pytest.approx(4 * 4 * 16 * 4096**2 * 128 / 2 / p.seconds / 1e12)
    c = p.counts
    assert c.flops == c.tensor_flops + c.fp32_flops
    assert c.hbm_bytes == c.hbm_read_bytes + c.hbm_write_bytes
    assert p.bound in ("tensor", "fp32", "mufu", "smem", "hbm", "launch")
    assert p.memory_bytes > 0


def test_explain_says_what_binds():
    text = perfsim.predict(W1, gpu="h100-sxm5", algorithm="fa2").explain()
    assert "Bound by tensor cores" in text and "TFLOP/s" in text and "Overlap rule" in text


def test_string_means_defaults():
    a = perfsim.predict(W1, gpu="h100-sxm5", algorithm="fa2")
    b = perfsim.predict(W1, gpu="h100-sxm5", algorithm=FA2())
    assert a.seconds == b.seconds


def test_tile_options_change_the_prediction():
    a = perfsim.predict(W1, gpu="h100-sxm5", algorithm=FA2(block_m=64, block_n=64))
    b = perfsim.predict(W1, gpu="h100-sxm5", algorithm=FA2(block_m=128, block_n=128))
    assert a.kernels[0].cost.grid == 2 * b.kernels[0].cost.grid
    assert a.counts.smem_bytes != b.counts.smem_bytes


def test_tile_over_shared_memory_is_infeasible():
    with pytest.raises(perfsim.InfeasibleError, match="shared memory"):
        perfsim.predict(W1, gpu="rtx-5090", algorithm=FA2(block_m=256, block_n=256))


def test_unsupported_head_dim_is_infeasible():
    with pytest.raises(perfsim.InfeasibleError,
                       match="head_dim a multiple of 8 up to 256, got 512"):
        perfsim.predict(W1.replace(head_dim=512), gpu="h100-sxm5", algorithm="fa2")


def test_fa1_rejects_fp32_and_tiny_sram():
    with pytest.raises(perfsim.InfeasibleError, match="fp16/bf16"):
        perfsim.predict(W1.replace(dtype="fp32"), gpu="a100-sxm4-80gb", algorithm="fa1")
    with pytest.raises(perfsim.InfeasibleError, match="d <= M"):
        perfsim.predict(W1.replace(dtype="fp16"), gpu="a100-sxm4-80gb",
                        algorithm=FA1(sram_bytes=64))


def test_unknown_algorithm_lists_known():
    with pytest.raises(perfsim.PerfsimError, match="known: standard, fa1, fa2"):
        perfsim.predict(W1, gpu="h100-sxm5", algorithm="fa9")


def test_standard_memory_grows_quadratically():
    small = perfsim.predict(W1.replace(phase="fwd_bwd", seqlen_q=2048), gpu="h100-sxm5",
                            algorithm="standard").memory_bytes
    large = perfsim.predict(W1.replace(phase="fwd_bwd", seqlen_q=8192), gpu="h100-sxm5",
                            algorithm="standard").memory_bytes
    assert 12 < large / small <= 16


def test_explain_says_which_clock_and_why():
    """The clock line: a heavy Hopper call is held below the boost clock by the power limit;
    a caller's fixed clock is reported as such."""
    from perfsim.timing import TimingParams

    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=8448, head_dim=128,
                                  dtype="fp16")
    h100 = perfsim.load_gpu("h100-sxm5")
    p = perfsim.predict(w, gpu=h100, algorithm="fa3")
    assert p.clock_hz < h100.max_clock_hz
    assert f"{p.clock_hz / 1e6:.0f} MHz" in p.explain()
    assert "where board power meets the limit" in p.explain()
    locked = perfsim.predict(w, gpu=h100, algorithm="fa3",
                             timing=TimingParams.for_gpu(h100, clock=1.83e9))
    assert "locked at 1830 MHz, the power limit holds it lower" in locked.explain()


def test_measured_gemm_efficiency_scales_only_the_native_family():
    """H100: WGMMA (native) runs at the pipe's 4096 FLOP/clk/SM (tensor_sustained_fraction
    1.0: a WGMMA loop per cycle the cores tick), a kernel that issues it from one CTA per SM at
    its issue share of that, mma.sync at its own measured 2730, and an fp32 'matmul' on the
    FP32 pipes at 256."""
    from perfsim.kernel import KernelCost
    from perfsim.timing import TimingParams, rates

    h100 = perfsim.load_gpu("h100-sxm5")
    per_sm = h100.sm_count * h100.clock_hz
    params = TimingParams()
    wgmma = rates(h100, KernelCost("k", 1, tensor_dtype="bf16", tensor_family="wgmma"), params)
    mma = rates(h100, KernelCost("k", 1, tensor_dtype="bf16", tensor_family="mma_sync"), params)
    fp32 = rates(h100, KernelCost("k", 1, tensor_dtype="fp32", tensor_family="wgmma"), params)
    one_cta = rates(h100, KernelCost("k", 1, tensor_dtype="bf16", tensor_family="wgmma",
                                     tensor_issue_share=h100.wgmma_one_cta_fraction), params)
    assert h100.tensor_sustained_fraction == 1.0 and h100.wgmma_one_cta_fraction == 0.88
    assert wgmma["tensor"] == pytest.approx(4096 * per_sm)
    assert one_cta["tensor"] == pytest.approx(4096 * 0.88 * per_sm)
    assert one_cta["smem"] == wgmma["smem"]
    assert mma["tensor"] == pytest.approx(2730 * per_sm)
    assert fp32["tensor"] == pytest.approx(256 * per_sm)


def test_to_dict_and_to_frame():
    """The --json record from the API, and a kernel table for notebooks."""
    import json

    from perfsim.prediction import SCHEMA_VERSION

    p = perfsim.predict(W1, gpu="h100-sxm5", algorithm="fa2")
    data = json.loads(json.dumps(p.to_dict()))
    assert data["schema_version"] == SCHEMA_VERSION and data["gpu"] == "h100-sxm5"
    assert data["seconds"] == pytest.approx(p.seconds) and data["counts"]["alu_ops"] > 0
    frame = p.to_frame()
    assert list(frame["kernel"]) == [k.cost.name for k in p.kernels]
    assert frame["seconds"].sum() == pytest.approx(sum(k.seconds for k in p.kernels))


def test_json_records_follow_the_committed_schema():
    """to_dict() validates against the pydantic layout, and docs/prediction.schema.json is
    that layout's current schema (regenerate: python -m perfsim.schema)."""
    import json

    from perfsim.schema import SCHEMA_FILE, PredictionRecord, schema

    p = perfsim.predict(W1, gpu="h100-sxm5", algorithm="fa2")
    PredictionRecord.model_validate(p.to_dict())
    assert json.loads(SCHEMA_FILE.read_text()) == json.loads(json.dumps(schema()))


@pytest.mark.parametrize("extra", [["-a", "fa2"], ["-a", "all"], ["-a", "presets"],
                                   ["-a", "flex", "--phase", "bwd", "--explain"],
                                   ["-a", "fa3"]])
def test_cli_json_output_validates_against_the_committed_schema_file(extra, capsys):
    """Every ``--json`` record the CLI prints (one, or a list for ``all`` / ``presets``, with
    infeasible entries) validates against docs/prediction.schema.json with a standard JSON
    Schema validator."""
    import json

    jsonschema = pytest.importorskip("jsonschema")
    from perfsim.cli import main
    from perfsim.schema import SCHEMA_FILE

    committed = json.loads(SCHEMA_FILE.read_text())
    assert main(["predict", "--gpu", "h100-sxm5", "--batch", "2", "--heads", "8",
                 "--seqlen", "1024", "--head-dim", "128", "--json", *extra]) == 0
    out = json.loads(capsys.readouterr().out)
    # the whole output (one record, or the list of ``all`` / ``presets``) as printed
    jsonschema.validate(out, committed)
    records = out if isinstance(out, list) else [out]
    assert records
    for record in records:
        jsonschema.validate(record, committed)
    if isinstance(out, list):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate([{"algorithm": "fa2"}], committed)


# ----------------------------------------------------------------- the unit a pipeline names
def _units(**kw):
    return {"tensor": 0.0, "fp32": 0.0, "mufu": 0.0, "smem": 0.0, "hbm": 0.0, **kw}


def test_a_pipeline_names_the_unit_that_adds_most_to_its_cycle():
    """Binding unit of a closed cycle (timing.binding_unit): with many tiles in flight the
    slower station binds, so its unit is named even when a unit of the faster station is
    larger alone; with one tile in flight the stations add and the largest single term of
    that sum is named (a serial station's units count one by one)."""
    from perfsim.timing import binding_unit

    serial_compute = (("smem",), ("tensor", "fp32", "mufu"))
    u = _units(smem=2.3, tensor=2.2, fp32=0.45, mufu=0.45)     # compute 3.1 > smem 2.3
    assert binding_unit(u, (("hbm",),), (serial_compute, 8, (False, True))) == "tensor"
    assert binding_unit(u, (("hbm",),), (serial_compute, 1, (False, True))) == "smem"
    # FA4's order: tensor/smem overlap, the softmax station issues in turn
    fa4 = (("tensor", "smem"), ("mufu", "fp32"))
    u = _units(tensor=7.9, smem=9.9, mufu=6.4, fp32=5.1)         # 9.9 against 11.5
    assert binding_unit(u, (("hbm",),), (fa4, 16, (False, True))) == "mufu"
    assert binding_unit(u, (("hbm",),), (fa4, 1, (False, True))) == "smem"
    # the longest group still wins over the pipeline
    assert binding_unit(_units(hbm=99.0, **{k: v for k, v in u.items() if k != "hbm"}),
                        (("hbm",),), (fa4, 16, (False, True))) == "hbm"


def test_the_pipeline_rule_is_the_same_on_sweep_arrays():
    import numpy as np

    from perfsim.timing import binding_unit

    fa4 = (("tensor", "smem"), ("mufu", "fp32"))
    u = _units(tensor=np.array([7.9, 7.9, 1.0]), smem=np.array([9.9, 9.9, 1.0]),
               mufu=np.array([6.4, 6.4, 1.0]), fp32=np.array([5.1, 5.1, 3.0]),
               hbm=np.array([0.0, 99.0, 0.0]))
    got = binding_unit(u, (("hbm",),), (fa4, 16, (False, True)))
    assert list(got) == ["mufu", "hbm", "fp32"]
    for i, want in enumerate(got):
        one = {k: float(v[i]) for k, v in u.items()}
        assert binding_unit(one, (("hbm",),), (fa4, 16, (False, True))) == want


def test_a_call_under_the_host_floor_is_bound_by_the_host():
    """When the host floor sets a phase's time, its kernels do not: the whole phase counts as
    ``host`` (a faster unit would not change the time), in predict and in a sweep alike."""
    w = W(batch=4, heads=16, seqlen_q=1024, head_dim=64, causal=True, dtype="bf16")
    p = perfsim.predict(w, gpu="b200", algorithm="fa4")
    assert p.bound == "host" and p.bound_seconds["host"] == pytest.approx(p.seconds)
    more_mufu = perfsim.load_gpu("b200").replace(mufu_ops_per_clk_per_sm=32)
    assert perfsim.predict(w, gpu=more_mufu, algorithm="fa4").bound == "host"
    df = perfsim.sweep(batch=4, heads=16, seqlen_q=[1024, 8192], head_dim=64, causal=True,
                       gpus="b200", algorithms="fa4")
    long = perfsim.predict(W(batch=4, heads=16, seqlen_q=8192, head_dim=64, causal=True,
                             dtype="bf16"), gpu="b200", algorithm="fa4")
    assert long.bound != "host" and list(df.bound) == ["host", long.bound]


def test_explain_says_fwd_bwd_shares_one_clock():
    w = W(batch=3, heads=4, seqlen_q=3000, head_dim=256, causal=True, dtype="fp16",
          phase="fwd_bwd")
    text = perfsim.predict(w, gpu="h200-sxm", algorithm="fa1").explain()
    assert "The forward and the backward share that clock" in text
    assert "share that clock" not in perfsim.predict(
        W(batch=3, heads=4, seqlen_q=3000, head_dim=256, dtype="fp16"), gpu="h200-sxm",
        algorithm="fa1").explain()


def test_explain_says_why_a_windowed_gqa_decode_runs_unpacked_under_flash_attn_2():
    """Review finding: fa2's windowed one-token GQA decode took 1.7x the unwindowed time
    (flash-attn 2 packs the query heads only without a window) and explain() said nothing."""
    w = perfsim.AttentionWorkload(batch=8, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=32768,
                                  head_dim=128, window=(16383, 0))
    for algo in ("fa2", "flash-attn-2"):
        assert "No GQA packing" in perfsim.predict(w, gpu="h100-sxm5", algorithm=algo).explain()
    assert "No GQA packing" not in perfsim.predict(w, gpu="h100-sxm5",
                                                   algorithm="fa3").explain()
    assert "No GQA packing" not in perfsim.predict(w.replace(window=(None, None)),
                                                   gpu="h100-sxm5", algorithm="fa2").explain()


@pytest.mark.parametrize("phase", ["fwd", "bwd"])
def test_explain_gives_fa1s_query_splits(phase):
    """A reviewer found FA1's time jump between head dims with a split count that explain()
    never named: it now says how many CTAs per (batch, head) flash-attn 1's heuristic chose."""
    w = perfsim.AttentionWorkload(batch=1, heads=16, seqlen_q=8192, head_dim=96, phase=phase)
    p = perfsim.predict(w, gpu="l40s", algorithm="fa1")
    splits = {k.cost.launch["q_splits"] for k in p.kernels if "q_splits" in k.cost.launch}
    assert splits and max(splits) > 1
    assert f"runs {max(splits)} CTAs per (batch, head)" in p.explain()
    one = perfsim.predict(w, gpu="l40s", algorithm=perfsim.algorithms.FA1(q_splits=1))
    assert "CTAs per (batch, head)" not in one.explain()
    two = perfsim.predict(w, gpu="l40s", algorithm=perfsim.algorithms.FA1(q_splits=2))
    assert "runs 2 CTAs per (batch, head), each over one in 2 of the query tiles" in \
        two.explain() and "as given (FA1(q_splits=...))" in two.explain()


def test_explain_says_when_the_bound_unit_shares_a_serial_cycle():
    # FA4's decode on the B200 runs one tile at a time: its stations add, and "bound by
    # shared memory for 99 % of the time" read as if shared memory alone took that time
    w = perfsim.AttentionWorkload(batch=8, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072,
                                  head_dim=128)
    text = perfsim.predict(w, gpu="b200", algorithm="fa4").explain()
    assert "take turns and add" in text and "closed cycle" in text
    many = perfsim.predict(perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096,
                                                     head_dim=128), gpu="h100-sxm5",
                           algorithm="fa2").explain()
    assert "take turns and add" not in many


def test_a_prediction_prints_as_one_line():
    """A fresh user's report: print(prediction) dumped ~15 kB (the whole GPU spec with
    every source string)."""
    p = perfsim.predict(perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096,
                                                  head_dim=128, causal=True),
                        gpu="h100-sxm5", algorithm="sdpa-flash")
    text = repr(p)
    assert "\n" not in text and len(text) < 300 and str(p) == text
    for part in ("sdpa-flash", "h100-sxm5", "causal", "TFLOP/s", f"bound by {p.bound}"):
        assert part in text


def test_a_forward_only_split_count_in_a_backward_call_is_named():
    """``num_splits`` is a forward option: a backward call ignores it, and says so."""
    w = W1.replace(phase="bwd")
    split = perfsim.predict(w, gpu="h100-sxm5", algorithm=FA2(num_splits=4))
    plain = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert split.seconds == plain.seconds
    assert any("ignores it" in n for n in split.notes())
    assert not any("ignores it" in n for n in plain.notes())


def test_explain_names_the_kernels_timed_above_the_call_s_clock():
    # a helper's report: an eager softmax timed at the maximum boost clock while explain said
    # every time was at the call's 1830 MHz (a lock at 1830 then read 3.8 % slower)
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True)
    p = perfsim.predict(w, gpu="h100-sxm5", algorithm="standard")
    line = next(x for x in p.explain().splitlines() if x.startswith("Times are at"))
    assert "softmax at the 1980 MHz maximum boost clock" in line
    locked = perfsim.predict(w, gpu="h100-sxm5", algorithm="standard", timing={"clock": 1.83e9})
    assert "maximum boost clock:" not in next(
        x for x in locked.explain().splitlines() if x.startswith("Times are at"))


def test_a_clock_set_by_an_assumed_power_limit_says_so():
    """A fresh user's report: the GH200's 900 W limit is ASSUMED in its catalog entry (the
    module's budget covers CPU, GPU and memory), and a power-limited call on it came out 14 %
    faster than on the H200 with nothing said. The note names the assumption where the
    limit sets the clock, and only there."""
    from perfsim import AttentionWorkload, predict

    w = AttentionWorkload(batch=4, heads=32, seqlen_q=8192, head_dim=128, causal=True)
    capped = predict(w, gpu="gh200", algorithm="fa3")
    assert capped.power_w == pytest.approx(900, rel=0.003)
    assert any("900 W limit, which its catalog entry ASSUMES" in n for n in capped.notes())
    assert not any("ASSUMES" in n for n in predict(w, gpu="h200-sxm", algorithm="fa3").notes())
    small = predict(w.replace(batch=1, heads=1, seqlen_q=512), gpu="gh200", algorithm="fa3")
    assert small.power_w < 900 and not any("ASSUMES" in n for n in small.notes())
    boost = predict(w, gpu="gh200", algorithm="fa3", timing={"clock": "boost"})
    assert not any("ASSUMES" in n for n in boost.notes())


def test_explain_says_what_a_varlen_split_count_stands_for():
    """A fresh user's report: a variable-length decode batch got 2 splits, the same batch
    with one more short sequence 5 and half the time, and explain() called the count the
    reference's choice. flash-attn 3 picks a count per sequence in its varlen scheduler,
    which perfsim does not model: explain() says so for FA3's rule, not for fixed lengths."""
    from perfsim import AttentionWorkload, predict

    keys = (172, 12808, 19993, 152, 68, 76617, 9346, 208)
    w = AttentionWorkload(heads=32, kv_heads=8, head_dim=128, causal=True,
                          seqlens_q=(1,) * len(keys), seqlens_k=keys)
    text = predict(w, gpu="h100-sxm5", algorithm="fa3").explain()
    assert "splits are the reference's heuristic choice" in text
    assert "flash-attn 3's varlen scheduler (prepare_varlen_num_blocks)" in text
    fixed = AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=76617,
                              head_dim=128)
    assert "prepare_varlen_num_blocks" not in predict(fixed, gpu="h100-sxm5",
                                                      algorithm="fa3").explain()


def test_cudnn_decode_explain_names_where_its_split_count_comes_from():
    """A fresh user's report: cuDNN's decode printed num_splits=64 with no source, and
    multi-query attention (one K/V head) came out slower than two K/V heads."""
    from perfsim import AttentionWorkload, predict

    w = AttentionWorkload(batch=4, heads=64, kv_heads=1, seqlen_q=1, seqlen_k=8192,
                          head_dim=128)
    text = predict(w, gpu="h100-sxm5", algorithm="sdpa-cudnn").explain()
    assert "splits the keys 64 ways: B·H_kv·splits = 256 CTAs, at most 64" in text
    assert "fill 4 tiles of 16 rows" in text
    two = predict(w.replace(kv_heads=2), gpu="h100-sxm5", algorithm="sdpa-cudnn").explain()
    assert "splits the keys 32 ways" in two
    prefill = predict(w.replace(seqlen_q=512, seqlen_k=512), gpu="h100-sxm5",
                      algorithm="sdpa-cudnn").explain()
    assert "decode kernel" not in prefill
