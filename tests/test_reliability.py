"""Issue 10, every repro: crashes become one PerfsimError (exit 2, one line at the CLI),
silent wrong answers are fixed or refused."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

import perfsim
from perfsim import AttentionWorkload, InfeasibleError, PerfsimError, load_gpu, predict
from perfsim.algorithms import FA1, FA2, FA4
from perfsim.cli import main
from perfsim.prediction import _ms
from perfsim.timing import TimingParams
from perfsim.workload import MAX_TENSOR_BYTES

W = AttentionWorkload(batch=4, heads=16, seqlen_q=1024, head_dim=128)
FLAGS = ["--batch", "1", "--heads", "1", "--head-dim", "64"]


def _one_line_exit_2(argv, capsys, *needles):
    try:
        code = main(argv)
    except SystemExit as exc:       # argparse usage errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


# ------------------------------------------------------------------ huge integers
@pytest.mark.parametrize("make", [lambda: 10**160, lambda: 10**30, lambda: 2**45 + 1,
                                  lambda: 10**5000], ids=["1e160", "1e30", "2^45+1", "1e5000"])
def test_huge_sizes_are_refused_with_the_bound(make):
    value = make()
    with pytest.raises(PerfsimError, match=r"2\*\*45") as exc:
        AttentionWorkload(batch=1, heads=1, seqlen_q=value, head_dim=64)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 300


def test_tensor_bound_is_per_tensor_and_stated():
    AttentionWorkload(batch=1, heads=1, seqlen_q=2**45, head_dim=1, dtype="fp8_e4m3")
    with pytest.raises(PerfsimError, match="32 TiB"):
        AttentionWorkload(batch=2**20, heads=2**20, seqlen_q=2**10, head_dim=64)
    assert MAX_TENSOR_BYTES == 2**45


def test_the_tensor_bound_sizes_k_and_v_in_the_cache_dtype():
    """K and V are counted at ``kv_dtype``: a one-byte cache twice the bf16 bound's length is
    a valid call, and a sweep of it too (the bound took Q's dtype for every tensor)."""
    big = dict(batch=1, heads=1, seqlen_q=1, seqlen_k=2**45 // 64, head_dim=64)
    AttentionWorkload(**big, dtype="bf16", kv_dtype="fp8_e4m3")
    with pytest.raises(PerfsimError, match="K would hold"):
        AttentionWorkload(**big, dtype="bf16")
    import perfsim
    rows = perfsim.sweep(gpus=["h100-sxm5"], algorithms=["fa2"], batch=[1], heads=[1],
                         seqlen_q=[1], seqlen_k=[2**45 // 64], head_dim=64, dtype="bf16",
                         kv_dtype="fp8_e4m3")
    assert len(rows) == 1
    with pytest.raises(PerfsimError, match="K/V tensor"):
        perfsim.sweep(gpus=["h100-sxm5"], algorithms=["fa2"], batch=[1], heads=[1],
                      seqlen_q=[1], seqlen_k=[2**45 // 64], head_dim=64, dtype="bf16")


def test_largest_allowed_workload_predicts_finite_numbers():
    w = AttentionWorkload(batch=1, heads=1, seqlen_q=2**44, head_dim=1, dtype="fp8_e4m3",
                          phase="fwd_bwd")
    for algo in ("standard", "fa2"):
        try:
            p = predict(w, gpu="h100-sxm5", algorithm=algo)
        except PerfsimError:
            continue
        assert math.isfinite(p.seconds) and math.isfinite(p.tflops)


@pytest.mark.parametrize("seqlen", ["1e200", "1" * 200, "1_000", "١٢٨", "12.0", " 12", "0x10"])
def test_cli_rejects_huge_and_odd_integers(seqlen, capsys):
    _one_line_exit_2(["predict", *FLAGS, "--seqlen", seqlen], capsys)


# ------------------------------------------------------------------ registers
def test_register_file_too_small_for_a_cta_is_infeasible_not_a_crash():
    small = load_gpu("h100-sxm5").replace(registers_per_sm=383)
    with pytest.raises(InfeasibleError, match=r"registers per SM"):
        predict(W, gpu=small, algorithm="fa3")


@pytest.mark.parametrize("registers", [1000, 4000, 44031])
@pytest.mark.parametrize("phase", ["fwd", "bwd"])
def test_fa3_needs_the_reference_registers_like_fa1_and_fa2(registers, phase):
    """fa3 used to predict with 1 register per thread where fa1/fa2 found no CTA fits: its
    consumer warpgroups need 160 registers per thread and the producer 24 (flash-attn 3
    setmaxnreg), 128 * (2 * 160 + 24) = 44032 for the default 3 warpgroups."""
    from perfsim.algorithms.fa3 import FA3_MIN_CONSUMER_REGISTERS, FA3_MIN_PRODUCER_REGISTERS

    assert 128 * (2 * FA3_MIN_CONSUMER_REGISTERS + FA3_MIN_PRODUCER_REGISTERS) == 44032
    w = W.replace(phase=phase)
    gpu = load_gpu("h100-sxm5").replace(registers_per_sm=registers)
    for algo in ("fa2", "fa3") if registers < 44031 else ("fa3",):
        with pytest.raises(InfeasibleError, match=r"no CTA fits .*\(registers per SM\)"):
            predict(w, gpu=gpu, algorithm=algo)
    ok = predict(w, gpu=load_gpu("h100-sxm5").replace(registers_per_sm=44032), algorithm="fa3")
    assert math.isfinite(ok.seconds) and ok.seconds > 0


# ------------------------------------------------------------------ non-UTF-8 files
@pytest.fixture
def latin1_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_bytes('name = "Gr\xe4fikkarte"\n'.encode("latin-1"))
    return path


def test_non_utf8_gpu_profile_is_one_error(latin1_toml, capsys):
    with pytest.raises(PerfsimError, match="UTF-8"):
        load_gpu(str(latin1_toml))
    _one_line_exit_2(["gpu", "show", str(latin1_toml)], capsys, "UTF-8")
    _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", "--gpu", str(latin1_toml)],
                     capsys, "UTF-8")


def test_non_utf8_sweep_config_is_one_error(latin1_toml, capsys):
    _one_line_exit_2(["sweep", str(latin1_toml)], capsys, "not UTF-8")


def test_folder_as_sweep_config_is_one_error(tmp_path, capsys):
    _one_line_exit_2(["sweep", str(tmp_path)], capsys, "is a folder")


# ------------------------------------------------------------------ algorithm options
@pytest.mark.parametrize("make, option", [(lambda: FA2(block_m=10), "block_m"),
                                          (lambda: FA2(warps=3), "warps"),
                                          (lambda: FA4(block_n=15), "block_n"),
                                          (lambda: FA2(nope=1), "nope"),
                                          (lambda: FA1(skip_masked_tiles="yes"),
                                           "skip_masked_tiles"),
                                          (lambda: FA2(block_m="64"), "block_m"),
                                          (lambda: FA2(block_m=True), "block_m")])
def test_bad_algorithm_options_are_one_line_perfsim_errors(make, option):
    with pytest.raises(PerfsimError) as exc:
        make()
    text = str(exc.value)
    assert "\n" not in text and option in text and "options:" in text


def test_bad_option_in_a_sweep_config_names_the_file(tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text('algorithms = [{name = "fa2", block_m = 10}]\n'
                   "[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    _one_line_exit_2(["sweep", str(cfg)], capsys, "s.toml", "block_m")


# ------------------------------------------------------------------ explain()
def test_explain_works_whenever_predict_does():
    base = load_gpu("h100-sxm5")
    # no native (WGMMA) path; the mma.sync table given with it, as a dtype dropped from the
    # native table alone drops from the mma.sync one too (GPUSpec.replace)
    gpu = base.replace(tensor_flops_per_clk_per_sm={},
                       mma_sync_flops_per_clk_per_sm=base.mma_sync_flops_per_clk_per_sm)
    p = predict(W, gpu=gpu, algorithm="fa2")      # mma.sync: still has a path
    text = p.explain()
    assert "fa2" in text and "% of the bf16 matmul peak" in text


# ------------------------------------------------------------------ output paths
@pytest.mark.parametrize("plot, needle", [("missing/x.png", "does not exist"),
                                          ("x.unknown", "unknown extension"),
                                          (".", "is a folder")])
def test_predict_plot_path_checked_before_computing(plot, needle, tmp_path, capsys,
                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("perfsim.cli.predict_cmd.predict", _must_not_run)
    _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", "--plot", plot], capsys, needle)


def _must_not_run(*args, **kwargs):
    raise AssertionError("computed before the output path was checked")


@pytest.mark.parametrize("out, needle", [("missing/x.csv", "does not exist"),
                                         (".", "is a folder"),
                                         ("x.xlsx", "unknown extension")])
def test_sweep_out_path_checked_before_computing(out, needle, tmp_path, capsys,
                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    import sys

    monkeypatch.setattr(sys.modules["perfsim.sweep"], "sweep", _must_not_run)
    _one_line_exit_2(["sweep", str(cfg), "--out", out], capsys, needle)


def test_predict_plot_is_written(tmp_path, capsys):
    out = tmp_path / "t.svg"
    assert main(["predict", *FLAGS, "--seqlen", "128", "--plot", str(out)]) == 0
    assert out.read_bytes().lstrip().startswith(b"<?xml")
    assert not list(tmp_path.glob(".*.tmp"))


# ------------------------------------------------------------------ negative L2 hits
def test_l2_hits_never_negative_for_causal_backward_with_more_queries():
    w = AttentionWorkload(batch=1, heads=1, seqlen_q=129, seqlen_k=1, head_dim=64, causal=True,
                          phase="bwd")
    p = predict(w, gpu="h100-sxm5", algorithm="fa2")
    # was -33 280 (and 100 360 HBM read bytes): only the last query tile (row 128) sees
    # the key, so it is the only Q/dO/LSE/D read; dQ's fp32 atomics add into that row's
    # 256 accumulator bytes (512 B of L2 traffic): written back to HBM once, fetched from
    # the zeroing kernel's share of L2 (base.accumulator_traffic), 256 B of hits
    assert p.counts.l2_hit_bytes == 256
    assert p.counts.hbm_read_bytes == 66_568
    for algo in ("fa2", "fa3", "fa4", FA1(skip_masked_tiles=True), "fa1", "standard"):
        for gpu in ("h100-sxm5", "b200", "a100-sxm4-80gb"):
            for phase in ("fwd", "bwd", "fwd_bwd"):
                try:
                    q = predict(w.replace(phase=phase, seqlen_k=3), gpu=gpu, algorithm=algo)
                except InfeasibleError:
                    continue
                assert all(k.cost.l2_hit_bytes >= 0 for k in q.kernels), (algo, gpu, phase)


# ------------------------------------------------------------------ TFLOP/s vs peak
def test_tflops_never_above_the_matmul_peak():
    """Standard attention's backward runs four matmuls, the convention charges five: with
    everything but the tensor cores made free, the convention gave 376 TFLOP/s on an A100
    (peak 312); the credited FLOPs are capped at the executed matmul FLOPs."""
    gpu = load_gpu("a100-sxm4-80gb").replace(
        hbm_bandwidth_bytes_per_s=1e14, smem_bandwidth_bytes_per_clk_per_sm=1e5,
        fp32_flops_per_clk_per_sm=1e5, mufu_ops_per_clk_per_sm=1e5, alu_ops_per_clk_per_sm=1e5)
    w = AttentionWorkload(batch=16, heads=16, seqlen_q=8192, head_dim=128, phase="bwd")
    # at the datasheet clock: the power model would lower it for this what-if GPU, and the
    # test is about the FLOP credit, not the clock
    p = predict(w, gpu=gpu, algorithm="standard",
                timing=TimingParams.for_gpu(gpu, "sdpa-math", clock="datasheet"))
    assert p.tflops * 1e12 <= p.peak_flops_per_s
    assert p.peak_flops_per_s == pytest.approx(312e12, rel=0.01)
    assert p.model_flops / p.seconds > p.peak_flops_per_s        # the convention would claim it
    assert p.tflops * 1e12 * p.seconds == pytest.approx(p.counts.tensor_flops)
    assert p.executed_flops == p.counts.flops
    fwd = predict(w.replace(phase="fwd"), gpu=gpu, algorithm="standard", timing=p.timing)
    assert fwd.tflops * 1e12 * fwd.seconds == pytest.approx(fwd.model_flops)   # unchanged


# ------------------------------------------------------------------ GPU values
@pytest.mark.parametrize("fields, needle", [
    ({"clock_hz": 1830}, "in MHz? 1830 MHz is 1.83e+09 Hz"),
    ({"hbm_bandwidth_bytes_per_s": float("inf")}, "finite number of bytes/s"),
    ({"hbm_bandwidth_bytes_per_s": 1e-300}, "bytes/s"),
    ({"clock_hz": 1e-320}, "Hz"),
    ({"clock_hz": float("nan")}, "clock_hz"),
    ({"max_clock_hz": 1e9}, "max_clock_hz (1e+09 Hz) must be >= clock_hz"),
    ({"sm_count": 10**9}, "SMs"),
    ({"tensor_flops_per_clk_per_sm": {"bf16": float("inf")}}, "tensor_flops_per_clk_per_sm[bf16]"),
])
def test_absurd_gpu_values_are_refused_with_the_unit(fields, needle):
    with pytest.raises(PerfsimError) as exc:
        load_gpu("h100-sxm5").replace(**fields)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_clock_in_mhz_in_a_toml_file_is_refused(tmp_path, capsys):
    text = (perfsim.gpu_catalog._catalog_dir() / "h100-sxm5.toml").read_text()
    import re

    bad = re.sub(r"(?m)^clock_hz\s*=.*$", "clock_hz = 1830", text, count=1)
    assert bad != text
    path = tmp_path / "mhz.toml"
    path.write_text(bad)
    with pytest.raises(PerfsimError, match="clock_hz must be between"):
        load_gpu(str(path))
    _one_line_exit_2(["gpu", "show", str(path)], capsys, "MHz")


def test_every_catalog_gpu_is_in_range():
    for gpu in perfsim.gpus():
        load_gpu(gpu)


# ------------------------------------------------------------------ sweep == predict
def test_sweep_marks_only_the_rows_that_do_not_fit():
    from perfsim.sweep import sweep

    # Algorithm 1 sized for a 400 kB SRAM: its query block (cut to the sequence) fits the
    # A100's shared memory beside one query, not beside 1024
    tall = FA1(sram_bytes=400_000)
    df = sweep(batch=1, heads=1, seqlen_q=[1, 1024], seqlen_k=128, head_dim=256,
               gpus="a100-sxm4-80gb", algorithms=tall)
    one = predict(AttentionWorkload(batch=1, heads=1, seqlen_q=1, seqlen_k=128, head_dim=256),
                  gpu="a100-sxm4-80gb", algorithm=tall)
    assert df.infeasible.iloc[0] == "" and df.seconds.iloc[0] == pytest.approx(one.seconds)
    assert "shared memory" in df.infeasible.iloc[1] and math.isnan(df.seconds.iloc[1])
    with pytest.raises(InfeasibleError, match="shared memory"):
        predict(AttentionWorkload(batch=1, heads=1, seqlen_q=1024, seqlen_k=128, head_dim=256),
                gpu="a100-sxm4-80gb", algorithm=tall)


def test_resident_ctas_outside_a_sweep_still_raises_for_arrays():
    import numpy as np

    from perfsim.algorithms.base import collect_infeasible, resident_ctas

    gpu = load_gpu("a100-sxm4-80gb")
    sizes = np.array([1024, 10**6])
    with pytest.raises(InfeasibleError):
        resident_ctas(gpu, sizes, 4, 128)
    with collect_infeasible() as found:
        ctas = resident_ctas(gpu, sizes, 4, 128)
    assert ctas[0] >= 1 and len(found) == 1 and found[0][0].tolist() == [False, True]


# ------------------------------------------------------------------ strict types
@pytest.mark.parametrize("field, value", [("batch", True), ("batch", "4"), ("batch", 4.0),
                                          ("causal", "yes"), ("causal", 1),
                                          ("dropout_p", "0.1"), ("dropout_p", float("nan")),
                                          ("dtype", 16), ("seqlen_k", False)])
def test_lax_coercion_is_refused(field, value):
    args = dict(batch=1, heads=1, seqlen_q=16, head_dim=64)
    args[field] = value
    with pytest.raises(PerfsimError, match=field):
        AttentionWorkload(**args)


def test_numpy_integers_are_still_sizes():
    import numpy as np

    w = AttentionWorkload(batch=np.int64(2), heads=np.int32(4), seqlen_q=16, head_dim=64)
    assert type(w.batch) is int and w.batch == 2


def test_sweep_refuses_huge_sizes_and_too_many_rows():
    from perfsim.sweep import check_size, sweep

    with pytest.raises(PerfsimError, match=r"2\*\*45"):
        sweep(batch=1, heads=1, seqlen_q=[10**160], head_dim=64, gpus="h100-sxm5",
              algorithms="fa2")
    with pytest.raises(PerfsimError, match="32 TiB"):
        sweep(batch=[4096], heads=1, seqlen_q=[2**44], head_dim=64, gpus="h100-sxm5",
              algorithms="fa2")
    with pytest.raises(PerfsimError, match="rows need about"):
        sweep(batch=list(range(1, 1001)), heads=list(range(1, 1001)),
              seqlen_q=list(range(1, 101)), head_dim=64, gpus="h100-sxm5", algorithms="fa2",
              max_memory_bytes=2**30)
    with pytest.raises(PerfsimError, match="100,000,000 rows"):
        check_size(10**8, max_memory_bytes=2**30)
    check_size(1000, max_memory_bytes=2**30)


def test_tflops_within_the_fp32_peak_when_matmuls_run_on_the_fp32_pipes():
    """Found by fuzzing: standard fp32 backward on a B200 claimed 72.9 TFLOP/s against the
    70.1 TFLOP/s of its FP32 pipes. The SGEMMs run at the FP32 peak here (the software
    profile's K law switched off) and the head dim is 256 (the fuzzed 18520 x 128 shape no
    longer exceeds since softmax's backward has its second kernel), so the model's FLOPs over
    its time still exceed the peak and the reported TFLOP/s must be the clamped figure."""
    w = AttentionWorkload(batch=16, heads=32, seqlen_q=8192, head_dim=256, dtype="fp32",
                          phase="bwd")
    b200 = load_gpu("b200")
    p = predict(w, gpu=b200, algorithm="standard",
                timing=TimingParams.for_gpu(b200, "sdpa-math", clock="datasheet",
                                            sgemm_peak_fraction=1.0,
                                            sgemm_tile_overhead_k=0.0))
    assert p.peak_flops_per_s == pytest.approx(70.09e12, rel=1e-3)
    assert 0 < p.tflops * 1e12 <= p.peak_flops_per_s < p.model_flops / p.seconds


# ------------------------------------------------------------------ unwritable outputs
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
@pytest.mark.parametrize("argv", [["sweep", "{cfg}", "--out", "/proc/x.csv"],
                                  ["sweep", "{cfg}", "--out", "/proc/x.parquet"],
                                  ["predict", *FLAGS, "--seqlen", "128", "--plot",
                                   "/proc/x.png"]])
def test_unwritable_output_folder_is_refused_before_computing(argv, tmp_path, capsys,
                                                              monkeypatch):
    """os.access says yes to root for /proc and /sys; creating a file there fails: found by
    trying, before the work, in one line."""
    import sys

    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    monkeypatch.setattr("perfsim.cli.predict_cmd.predict", _must_not_run)
    import perfsim.sweep  # noqa: F401 - the module whose sweep must not run

    monkeypatch.setattr(sys.modules["perfsim.sweep"], "sweep", _must_not_run)
    _one_line_exit_2([a.format(cfg=cfg) for a in argv], capsys, "cannot create a file in "
                     "folder '/proc'")


def test_out_below_a_file_says_it_is_a_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("")
    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    _one_line_exit_2(["sweep", str(cfg), "--out", "f/x.csv"], capsys,
                     "'f' is a file, not a folder")


# ------------------------------------------------------------------ strict GPU numbers
@pytest.mark.parametrize("fields, needle", [
    ({"hbm_bandwidth_bytes_per_s": "3e12"}, "hbm_bandwidth_bytes_per_s: must be a number of "
     "bytes/s (1 GB/s to 100 TB/s), from 1e+09 to 1e+14, not str '3e12'"),
    ({"sm_count": True}, "sm_count: must be an integer of SMs, from 1 to 4096, not bool True"),
    ({"sm_count": "132"}, "sm_count: must be an integer of SMs, from 1 to 4096, not str"),
    ({"sm_count": 132.5}, "sm_count: must be a whole number of SMs"),
    ({"clock_hz": False}, "clock_hz: must be a number of Hz"),
    ({"tensor_flops_per_clk_per_sm": {"bf16": "x"}}, "tensor_flops_per_clk_per_sm[bf16] must "
     "be a number of FLOP per clock per SM"),
])
def test_gpu_numbers_are_strict(fields, needle):
    """No lax coercion: TOML ``true`` was a 1-SM GPU, ``"132"`` was 132 SMs."""
    with pytest.raises(PerfsimError) as exc:
        load_gpu("h100-sxm5").replace(**fields)
    assert needle in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_gpu_numbers_accept_numpy_and_integral_floats():
    import numpy as np

    gpu = load_gpu("h100-sxm5").replace(sm_count=np.int64(100), clock_hz=np.float32(1.5e9),
                                        smem_bytes_per_sm=233472.0)
    assert type(gpu.sm_count) is int and gpu.sm_count == 100
    assert type(gpu.smem_bytes_per_sm) is int and gpu.clock_hz == 1.5e9


@pytest.mark.parametrize("value, needle", [("true", "not bool True"), ('"132"', "not str")])
def test_gpu_profile_toml_refuses_non_numbers(value, needle, tmp_path, capsys):
    import re

    text = (perfsim.gpu_catalog._catalog_dir() / "h100-sxm5.toml").read_text()
    bad = re.sub(r"(?m)^sm_count\s*=.*$", f"sm_count = {value}", text, count=1)
    assert bad != text
    path = tmp_path / "p.toml"
    path.write_text(bad)
    _one_line_exit_2(["gpu", "show", str(path)], capsys, "sm_count: must be an integer of SMs",
                     needle)


@pytest.mark.parametrize("entry", ["sm_count = [true]", 'sm_count = [100, "132"]',
                                   '"tensor_flops_per_clk_per_sm.bf16" = [false]'])
def test_sweep_overrides_refuse_non_numbers(entry, tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\nbatch = 1\n'
                   f"heads = 1\nseqlen_q = 128\nhead_dim = 64\n[overrides]\n{entry}\n")
    _one_line_exit_2(["sweep", str(cfg)], capsys, "GPU override", "must be a")


def test_power_numbers_say_finite_and_the_range():
    gpu = load_gpu("h100-sxm5")
    power = gpu.power.model_dump()
    with pytest.raises(PerfsimError, match=r"power.voltage_exponent: must be a finite number "
                       r"from 0 to 4, got nan"):
        gpu.replace(power={**power, "voltage_exponent": float("nan")})
    with pytest.raises(PerfsimError, match=r"power.tdp_w: must be a number of W.*not str"):
        gpu.replace(power={**power, "tdp_w": "700"})


# ------------------------------------------------------------------ messages
def test_gpu_profile_folder_is_called_a_folder(tmp_path, capsys):
    folder = tmp_path / "profiles.toml"
    folder.mkdir()
    for arg in (str(folder), str(tmp_path)):
        with pytest.raises(PerfsimError, match="is a folder"):
            load_gpu(arg)
        _one_line_exit_2(["gpu", "show", arg], capsys, "is a folder")


@pytest.mark.parametrize("value", ["1e400", "1.5", "-0.1"])
def test_dropout_errors_give_the_allowed_range(value, capsys):
    _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", f"--dropout={value}"], capsys,
                     "--dropout", "[0, 1)")


# ------------------------------------------------------------------ sweep --json precision
def test_sweep_json_keeps_full_float_precision(tmp_path, capsys):
    import json

    from perfsim.sweep import sweep

    cfg = tmp_path / "s.toml"
    cfg.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2", "fa3"]\n[workload]\nbatch = 1\n'
                   "heads = 1\nseqlen_q = [4096, 7777]\nhead_dim = 64\n"
                   '[overrides]\nsm_count = [1, 132]\n')
    assert main(["sweep", str(cfg), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    df = sweep(batch=1, heads=1, seqlen_q=[4096, 7777], head_dim=64, gpus="h100-sxm5",
               algorithms=["fa2", "fa3"], overrides={"sm_count": [1, 132]})
    assert len(rows) == len(df)
    for row, seconds, tensor in zip(rows, df.seconds, df.tensor_seconds, strict=True):
        assert row["seconds"] == float(seconds) and row["tensor_seconds"] == float(tensor)
    assert any(len(repr(r["seconds"])) > 12 for r in rows)      # not rounded


@pytest.mark.parametrize("timing", ["boost", 1.5e9, ["clock"]])
def test_timing_that_is_not_timing_params_is_one_error(timing):
    """A string, a number or a list for ``timing`` is refused by predict and sweep with one
    PerfsimError naming timing_for (it leaked an AttributeError); a dict is a set of
    TimingParams fields (below)."""
    w = AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=64)
    for call in (lambda: predict(w, timing=timing),
                 lambda: perfsim.sweep(batch=1, heads=8, seqlen_q=1024, head_dim=64,
                                       timing=timing)):
        with pytest.raises(PerfsimError, match="timing_for"):
            call()


def test_timing_as_a_dict_sets_fields_on_the_defaults():
    """``timing={"clock": 1.5e9}`` in predict and sweep is ``timing_for(gpu, algorithm,
    clock=1.5e9)``; a field TimingParams refuses is one PerfsimError naming it."""
    # (a grid of 2048 CTAs: one split, as sweeps take the split heuristic)
    w = AttentionWorkload(batch=1, heads=32, seqlen_q=4096, head_dim=64)
    locked = predict(w, "h100-sxm5", "fa2", timing={"clock": 1.5e9})
    same = predict(w, "h100-sxm5", "fa2",
                   timing=perfsim.timing_for("h100-sxm5", "fa2", clock=1.5e9))
    assert locked.seconds == same.seconds and locked.timing == same.timing
    row = perfsim.sweep(batch=1, heads=32, seqlen_q=4096, head_dim=64, gpus=["h100-sxm5"],
                        algorithms=["fa2"], timing={"clock": 1.5e9})
    assert row["seconds"].iloc[0] == pytest.approx(same.seconds, rel=1e-12)
    for call in (lambda: predict(w, timing={"clock": "fast"}),
                 lambda: perfsim.sweep(batch=1, heads=8, seqlen_q=1024, head_dim=64,
                                       timing={"clock": "fast"})):
        with pytest.raises(PerfsimError, match="TimingParams.clock"):
            call()


def test_sweep_refuses_bad_overrides_and_memory_limits_and_takes_all_and_presets():
    kw = dict(batch=1, heads=8, seqlen_q=1024, head_dim=64, gpus=["h100-sxm5"])
    with pytest.raises(PerfsimError, match="overrides must be a dict"):
        perfsim.sweep(**kw, overrides="x")
    with pytest.raises(PerfsimError, match="max_memory_bytes must be a positive"):
        perfsim.sweep(**kw, max_memory_bytes=-1)
    assert set(perfsim.sweep(**kw, algorithms="all")["algorithm"]) == set(
        perfsim.algorithms.names())
    assert len(set(perfsim.sweep(**kw, algorithms="presets")["algorithm"])) == len(
        perfsim.implementations.implementations())


def test_sdpa_refuses_fp8_and_flash_attn_2_a_kv_dtype_of_its_own():
    fp8 = AttentionWorkload(batch=2, heads=16, seqlen_q=2048, head_dim=128, dtype="fp8_e4m3")
    for preset in ("sdpa-cudnn", "sdpa-math", "sdpa-flash"):
        with pytest.raises(InfeasibleError, match="fp16, bf16|fp8"):
            predict(fp8, "h100-sxm5", preset)
    mixed = AttentionWorkload(batch=2, heads=16, seqlen_q=2048, head_dim=128,
                              kv_dtype="fp8_e4m3")
    with pytest.raises(InfeasibleError, match="K/V dtype"):
        predict(mixed, "h100-sxm5", "flash-attn-2")


@pytest.mark.parametrize("call, needle", [
    (lambda S: S.compute_bound_seqlen("fa2", "h200-sxm", batch=0, heads=16, head_dim=128),
     "batch must be a positive integer"),
    (lambda S: S.compute_bound_seqlen("fa2", "h200-sxm", batch="4", heads=16, head_dim=128),
     "batch must be a positive integer"),
    (lambda S: S.counts("fa2", "h100-sxm5", dtype="fp64"), "dtype 'fp64'"),
    (lambda S: S.counts("fa2", "h100-sxm5", phase="x"), "phase 'x'"),
    (lambda S: S.sram_crossover("h100-sxm5", batch=1, heads=1, seqlen=1024, head_dim=-64),
     "head_dim must be a positive integer")])
def test_closed_forms_refuse_bad_sizes_dtypes_and_phases(call, needle):
    """perfsim.symbolic raised ZeroDivisionError, TypeError or KeyError, or returned zeros or
    a negative crossover, for these (found by a fresh-user review)."""
    from perfsim import symbolic

    with pytest.raises(PerfsimError, match=needle):
        call(symbolic)


def test_cli_negative_window_gets_the_windows_own_message(capsys):
    """``--window -1,0`` reached argparse as an option ("expected one argument")."""
    assert main(["predict", "-b", "1", "--heads", "8", "--seqlen", "1024", "--head-dim", "64",
                 "--window", "-1,0"]) == 2
    err = capsys.readouterr().err
    assert "window" in err and "greater than or equal to 0" in err


# ------------------------------------------------------------------ review of 2026-12-02
def test_window_right_bound_skips_query_tiles_that_see_no_key():
    """N_q > N_k with a window's right side: the leading query rows see no key (as under the
    causal mask), so they are neither read nor added into; no L2-hit term goes negative and
    one more key on the right costs no extra HBM here (it was +47 % with -7 MB of hits)."""
    w = AttentionWorkload(batch=1, heads=8, seqlen_q=1000, seqlen_k=64, head_dim=128,
                          window=(None, 1), phase="bwd")
    for algo in ("fa2", "fa3", "flex", "flash-attn-cute"):
        p = predict(w, gpu="h100-sxm5", algorithm=algo)
        assert all(v >= 0 for k in p.kernels for v in k.cost.terms.values()
                   if isinstance(v, (int, float))), algo
    a = predict(w, gpu="h100-sxm5", algorithm="fa2").counts.hbm_bytes
    b = predict(w.replace(window=(None, 0)), gpu="h100-sxm5", algorithm="fa2").counts.hbm_bytes
    assert a == b


def test_huge_padded_counts_do_not_overflow_the_power_model():
    """Tensor FLOPs past int64 as Python ints reached numpy in the power model (OverflowError
    at the CLI); the call now predicts (and says it does not fit in memory)."""
    w = AttentionWorkload(batch=1000, heads=32, seqlen_q=1048576, head_dim=96, dtype="fp16",
                          phase="bwd")
    p = predict(w, gpu="h100-sxm5", algorithm="flex")
    assert math.isfinite(p.seconds) and p.seconds > 0 and not p.fits_memory


def test_fa2_l2_window_counts_only_the_ctas_its_grid_has():
    """A 32-CTA decode grid holds 32 CTAs, not the SMs' 264 slots: its K/V re-reads fit L2
    (the K/V head is read from HBM once, 134 MB, as with 64-key tiles), not 537 MB."""
    w = AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=32768,
                          head_dim=128)
    p = predict(w, gpu="h100-sxm5", algorithm=FA2(num_splits=1, pack_gqa=False, block_n=128))
    assert p.kernels[0].cost.terms["hbm_read/K,V"] == 2 * 8 * 32768 * 128 * 2


def test_a_given_cta_overhead_replaces_the_persistent_units_charge_too():
    """``TimingParams.cta_overhead_s`` (a calibrated per-wave figure) replaces the modelled
    edges for persistent kernels as for the others: 0 and 1e-12 s agree, and the GPU's
    ``cta_wave_overhead_s`` no longer moves the prediction."""
    from perfsim import timing_for

    w = AttentionWorkload(batch=8, heads=32, kv_heads=4, seqlen_q=4096, head_dim=128,
                          causal=True)
    zero = predict(w, "h200-sxm", "sdpa-cudnn",
                   timing=timing_for("h200-sxm", "sdpa-cudnn", cta_overhead_s=0.0)).seconds
    tiny = predict(w, "h200-sxm", "sdpa-cudnn",
                   timing=timing_for("h200-sxm", "sdpa-cudnn", cta_overhead_s=1e-12)).seconds
    assert tiny == pytest.approx(zero, rel=1e-6)
    spec = load_gpu("h200-sxm")
    fast = spec.replace(cta_wave_overhead_s=10 * spec.cta_wave_overhead_s)
    params = TimingParams.for_gpu(fast, cta_overhead_s=2e-6)
    assert predict(w, fast, "sdpa-cudnn", timing=params).seconds == pytest.approx(
        predict(w, spec, "sdpa-cudnn",
                timing=TimingParams.for_gpu(spec, cta_overhead_s=2e-6)).seconds, rel=1e-9)


def test_cli_names_the_list_flag_and_entry_at_fault(capsys):
    assert main(["predict", "--gpu", "h100-sxm5", "-b", "1", "--heads", "8", "--seqlen", "100",
                 "--head-dim", "64", "--window", "-5,0"]) == 2
    err = capsys.readouterr().err
    assert "--window (entry 1):" in err and "AttentionWorkload" not in err


@pytest.mark.parametrize("algorithm,gpu", [("fa3", "h100-sxm5"), ("flash-attn-3", "h100-sxm5"),
                                           ("flash-attn-cute", "h100-sxm5"), ("fa4", "b200")])
@pytest.mark.parametrize("extra", [{"kv_dtype": "fp8_e4m3"}, {"dtype": "fp8_e4m3"},
                                   {"page_size": 256}])
def test_fa3_and_fa4_backwards_refuse_inference_only_inputs(algorithm, gpu, extra):
    """flash_attn.cute's ``_flash_attn_bwd`` (and flash-attn 3's ``mha_bwd``) take fp16/bf16
    Q, K, V of one dtype and no page table: fp8 inputs and a paged cache are forward
    (inference) paths, and the forward of the same call still predicts. A K/V dtype of its
    own the libraries refuse in the forward too (their presets); algorithm fa3 keeps it."""
    w = AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=128, phase="bwd", **extra)
    with pytest.raises(InfeasibleError):
        predict(w, gpu, algorithm)
    if "kv_dtype" in extra and algorithm in ("flash-attn-3", "flash-attn-cute"):
        # the libraries' forwards take one dtype for Q, K and V too (hopper/flash_api.cpp
        # mha_fwd: "query and key must have the same dtype"); algorithm fa3 is the what-if
        with pytest.raises(InfeasibleError, match="no K/V dtype of its own"):
            predict(w.replace(phase="fwd"), gpu, algorithm)
        return
    predict(w.replace(phase="fwd"), gpu, algorithm)


def test_cli_says_when_a_clock_lock_is_not_held(capsys):
    base = ["predict", "--gpu", "h100-sxm5", "-b", "1", "--heads", "8", "--seqlen", "1000",
            "--head-dim", "64", "-a", "fa2"]
    assert main([*base, "--clock", "5000"]) == 0
    # the same reason explain()'s clock line gives (one helper, Prediction._clock_lock)
    # 5000 MHz is above the maximum boost clock whatever the power (a fresh user's report:
    # the note named only the reason that bound last)
    assert ("clock 5000 MHz not held (above the 1980 MHz maximum boost clock, and the "
            "tensor-core clock ceiling holds it lower (perfsim.power)): runs at 1830 MHz"
            ) in capsys.readouterr().out
    assert main([*base, "--clock", "1500"]) == 0
    assert "not held" not in capsys.readouterr().out
    # the same note in --json's notes and in the API's Prediction.notes()
    assert main([*base, "--clock", "5000", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert any("not held" in n and "runs at 1830 MHz" in n for n in record["notes"])
    w = AttentionWorkload(batch=1, heads=8, seqlen_q=1000, head_dim=64)
    assert any("not held" in n for n in predict(w, "h100-sxm5", "fa2",
                                                 timing={"clock": 5e9}).notes())
    assert not any("not held" in n for n in predict(w, "h100-sxm5", "fa2",
                                                     timing={"clock": 1.5e9}).notes())


def test_cli_says_when_a_clock_taken_regardless_of_power_exceeds_the_limit(capsys):
    base = ["predict", "--gpu", "h100-sxm5", "-b", "4", "--heads", "16", "--seqlen", "8192",
            "--head-dim", "256", "-a", "fa3"]
    assert main([*base, "--clock", "boost"]) == 0
    out = capsys.readouterr().out
    assert "clock 'boost' ignores the power limit: modelled board power" in out
    assert "over the 700 W limit" in out
    small = ["predict", "--gpu", "h100-sxm5", "-b", "1", "--heads", "8", "--seqlen", "1024",
             "--head-dim", "64", "-a", "fa2", "--clock", "boost"]
    assert main(small) == 0
    assert "ignores the power limit" not in capsys.readouterr().out


def test_cli_help_states_the_window_default_in_its_own_syntax(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    out = capsys.readouterr().out
    assert "(None, None)" not in out and "none,none" in out


# ------------------------------------------------ refusals name what the user asked for
def test_a_presets_refusal_leads_with_the_preset_and_names_the_model_after():
    w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=2048, head_dim=100)
    with pytest.raises(perfsim.InfeasibleError) as exc:
        perfsim.predict(w, gpu="h100-sxm5", algorithm="sdpa-cudnn")
    text = str(exc.value)
    assert text.startswith("sdpa-cudnn needs head_dim a multiple of 8")
    assert text.endswith("(perfsim models it with fa3)") and "sdpa-cudnn: fa3" not in text


@pytest.mark.parametrize("extra, words", [
    (dict(causal=False), "causal attention only (causal=False given)"),
    (dict(causal=True, seqlen_q=1000), "N_q a multiple of 128 (its block), got 1000")])
def test_the_tutorial_backward_names_the_condition_that_failed(extra, words):
    w = perfsim.AttentionWorkload(**{**dict(batch=2, heads=8, seqlen_q=4096, head_dim=128,
                                            phase="bwd"), **extra})
    with pytest.raises(perfsim.InfeasibleError, match=re.escape(words)):
        perfsim.predict(w, gpu="h100-sxm5", algorithm="triton-tutorial")


def test_no_gpu_is_its_own_error_not_an_unknown_gpu_called_none():
    w = perfsim.AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=64)
    with pytest.raises(perfsim.PerfsimError, match=r"no GPU given \(gpu=None\)"):
        perfsim.predict(w, gpu=None, algorithm="fa2")


def test_cli_names_a_presets_stand_in_model(capsys):
    # sdpa-cudnn is modelled from cuDNN's Hopper kernels only; elsewhere the table says so
    base = ["predict", "-b", "4", "--heads", "16", "--seqlen", "8192", "--head-dim", "128",
            "-a", "sdpa-cudnn"]
    assert main([*base, "--gpu", "b200"]) == 0
    assert "sdpa-cudnn: perfsim has no model of cuDNN's Blackwell" in capsys.readouterr().out
    assert main([*base, "--gpu", "l40s"]) == 0
    assert "the FA2 loop as a stand-in" in capsys.readouterr().out
    assert main([*base, "--gpu", "h100-sxm5"]) == 0
    assert "stand-in" not in capsys.readouterr().out
    # --json carries the same notes, with or without --explain
    assert main([*base, "--gpu", "l40s", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert len(notes) == 1 and "the FA2 loop as a stand-in" in notes[0]
    assert main([*base, "--gpu", "h100-sxm5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []


def test_explain_names_the_load_path_when_it_not_hbm_sets_the_hbm_time():
    # FlexAttention at d = 256: 1.04 GB of K/V re-reads hit L2 and 0.07 GB cross HBM; the
    # 'hbm' unit's time is the CTAs' per-CTA load rate over both, and explain says so
    w = AttentionWorkload(batch=2, heads=8, seqlen_q=2048, head_dim=256)
    text = predict(w, "h100-sxm5", "flex").explain()
    assert "Bound by the CTAs' load path" in text
    assert "is its CTAs' load path, not HBM bandwidth" in text
    decode = AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072,
                               head_dim=128)
    text = predict(decode, "h100-sxm5", "fa2").explain()
    assert "Bound by HBM bandwidth" in text and "not HBM bandwidth" not in text


@pytest.mark.parametrize("gpu", ["h100-sxm5", "a100-sxm4-80gb", "rtx-4090"])
def test_fa1_tiles_fit_the_sram_at_every_head_dim(gpu):
    """Algorithm 1's B_c = ⌈M/4d⌉ can overshoot M; above d ≈ √(M/4) (B_r = B_c) its four
    tiles then needed more shared memory than a CTA may have, and FA1 was refused at most head
    dims above ~150 (d = 256 on an H100 among them). The block now shrinks to what fits."""
    spec = load_gpu(gpu)
    for d in range(8, 513, 8):
        for d_v in (d, 2 * d):
            w = AttentionWorkload(batch=2, heads=8, seqlen_q=4096, head_dim=d, head_dim_v=d_v)
            k = predict(w, spec, "fa1").kernels[0].cost
            assert k.smem_bytes_per_cta <= spec.smem_bytes_per_block
            # where the paper's ceiling fits, it is kept (B_c = ⌈M/4d⌉)
            m = spec.smem_bytes_per_block // 2
            ceil_c = -(-m // (4 * d))
            if (ceil_c + min(ceil_c, d)) * (d + d_v) * 2 <= spec.smem_bytes_per_block:
                assert k.launch["block_c"] == ceil_c


@pytest.mark.parametrize("algo, gpu", [("fa2", "h100-sxm5"), ("fa3", "h100-sxm5"),
                                       ("fa4", "b200"), ("flash-attn-cute", "h100-sxm5")])
def test_fused_kernels_refuse_a_kv_cache_wider_than_the_queries(algo, gpu):
    """A fresh user's report: fp32 K/V under bf16 queries ran fa3 at the fp32 matmul rate
    (9x slower) where no kernel converts the queries up. A narrower fp8 cache still runs."""
    w = AttentionWorkload(batch=2, heads=16, seqlen_q=1, seqlen_k=4096, head_dim=128)
    for kv in ("fp32", "fp16"):
        # the preset refuses any K/V dtype of its own, as flash_attn.cute's interface does
        says = ("no K/V dtype of its own" if algo == "flash-attn-cute"
                else f"not {kv} K/V under bf16 queries")
        with pytest.raises(InfeasibleError, match=says):
            predict(w.replace(kv_dtype=kv), gpu, algo)
    if algo != "flash-attn-cute":
        assert predict(w.replace(kv_dtype="fp8_e4m3"), gpu, algo).seconds > 0


def test_explain_prices_the_references_split_choice_against_one_split():
    """A fresh user's report: on an RTX 4090 a batch of 2 ran slower than a batch of 4
    because flash-attn 2's heuristic splits the small grid, which perfsim prices slower than
    no split; explain() now says so, with the one-split time."""
    w = AttentionWorkload(batch=2, heads=16, seqlen_q=256, head_dim=128)
    p = predict(w, "rtx-4090", "fa2")
    one = predict(w, "rtx-4090", FA2(num_splits=1))
    text = p.explain()
    assert f"with one split perfsim predicts {_ms(one.seconds)}" in text
    assert "slower (the heuristic weighs the waves" in text
    # presets compare with their own configuration; a fixed split count says nothing more
    assert "with one split" in predict(w, "rtx-4090", "sdpa-flash").explain()
    assert "with one split" not in predict(w, "rtx-4090", FA2(num_splits=2)).explain()
    decode = AttentionWorkload(batch=1, heads=8, seqlen_q=1, seqlen_k=65536, head_dim=128)
    assert re.search(r"so the split is [0-9.]+x faster \([0-9]+ % less time\)\.",
                     predict(decode, "h100-sxm5", "fa2").explain())


def test_explain_says_why_a_unit_takes_longer_than_its_terms():
    """A fresh user's report: 'tensor 0.052 ms' beside tensor terms that add up to 0.030 ms,
    with nothing to say why. explain() now names the gap where it is 10 % or more."""
    w = AttentionWorkload(batch=2, heads=16, seqlen_q=1024, head_dim=64, causal=True)
    text = predict(w, "rtx-4090", "fa2").explain()
    assert "more than what its terms add up to" in text and "padding to whole tiles" in text
    big = AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    assert "what its terms add up to" not in predict(big, "h100-sxm5", "fa2").explain()
    # a gap of many times is said as a ratio (a fresh user read "825500 % more"), and a
    # kernel whose time is half per-wave set-up says so beside its binding unit
    tiny = AttentionWorkload(batch=2**30, heads=1, seqlen_q=1, head_dim=8)
    text = predict(tiny, "h100-sxm5", "fa2").explain()
    assert re.search(r"is [0-9,]+ times what its terms add up to", text)
    assert re.search(r"for 100 % of the time; [0-9]+ % of fa2_fwd's time is its CTAs' time "
                     r"outside their loop", text)
    assert "time outside their loop (set-up" not in predict(big, "h100-sxm5", "fa2").explain()


def test_cudnn_causal_with_fewer_queries_names_its_explicit_mask():
    """torch's is_causal is top-left when N_q < N_k, so the bottom-right mask reaches cuDNN
    as an explicit attn_mask (causal_lower_right materialises it for that backend): the
    table, --json and explain() say what of that path is charged; square causal calls and
    other presets say nothing."""
    w = AttentionWorkload(batch=1, heads=32, seqlen_q=16, seqlen_k=32768, head_dim=128,
                          causal=True)
    p = predict(w, "h200-sxm", "sdpa-cudnn")
    assert any("explicit attn_mask" in n for n in p.notes())
    assert "explicit attn_mask" in p.explain()
    assert not predict(w.replace(causal=False), "h200-sxm", "sdpa-cudnn").notes()
    square = AttentionWorkload(batch=1, heads=32, seqlen_q=4096, head_dim=128, causal=True)
    assert not predict(square, "h200-sxm", "sdpa-cudnn").notes()
    assert not predict(w, "h200-sxm", "sdpa-flash").notes()


def test_cudnn_causal_with_more_queries_takes_the_explicit_mask_too():
    """With N_q > N_k torch's is_causal is top-left as well, and CausalBias takes is_causal
    only for equal lengths (torch/nn/attention/bias.py): cuDNN gets the materialised mask,
    whose first N_q - N_k rows see no key. The bias loads are charged and the note says so;
    sdpa-flash (the flash op's own bottom-right causal) is unchanged."""
    w = AttentionWorkload(batch=8, heads=16, seqlen_q=8192, seqlen_k=2048, head_dim=128,
                          causal=True)
    p = predict(w, "h200-sxm", "sdpa-cudnn")
    assert p.kernels[0].cost.launch.get("explicit_mask")
    assert any("explicit attn_mask" in n and "see no key" in n for n in p.notes())
    flash = predict(w, "h200-sxm", "sdpa-flash")
    assert not flash.notes()
    assert not any("explicit_mask" in k.cost.launch for k in flash.kernels)



def test_cudnn_explicit_mask_waits_for_a_bias_tile_per_key_tile():
    """cuDNN's forward under an explicit mask reads a 128 x 128 bias tile per key tile with
    plain LDGs (Nsight Compute: 2.1 M LDGs, 29.7 KB more L2 reads per key tile and CTA);
    each is a load latency plus its bytes at the per-CTA load rate, per CTA, on every wave.
    The H200 measured 717 against 377 us at N_q = 16, N_k = 32768."""
    from perfsim.timing import serial_load_seconds

    w = AttentionWorkload(batch=1, heads=32, seqlen_q=16, seqlen_k=32768, head_dim=128,
                          causal=True)
    masked = predict(w, "h200-sxm", "sdpa-cudnn")
    plain = predict(w.replace(causal=False), "h200-sxm", "sdpa-cudnn")
    k = masked.kernels[0].cost
    assert k.serial_loads == (256.0, 256.0 * 128 * 128 * 2) and k.launch["explicit_mask"]
    extra = serial_load_seconds(k, masked.gpu)
    # the masked call also runs its MMAs and exps in turn (FA3.fwd_pipes_in_turn: its softmax
    # masks scores), the unmasked one overlaps them: the bias loads are most of the gap
    assert k.pipeline[1] == 1 and plain.kernels[0].cost.pipeline[1] == 2
    assert extra < masked.seconds - plain.seconds < 1.5 * extra
    assert 0.9 < masked.seconds / 717e-6 < 1.1
    assert 0.9 < plain.seconds / 377e-6 < 1.1
    # a square causal call and the FA3 algorithm itself take no bias
    square = AttentionWorkload(batch=1, heads=32, seqlen_q=4096, head_dim=128, causal=True)
    assert predict(square, "h200-sxm", "sdpa-cudnn").kernels[0].cost.serial_loads == (0, 0)
    assert predict(w, "h200-sxm", "fa3").kernels[0].cost.serial_loads == (0, 0)


# ------------------------------------------------------------------ a fuzzing helper's finds
def test_edge_inputs_found_by_fuzzing_get_one_clear_error():
    """Each of these crashed with a traceback or returned inf counts (2026-12-03)."""
    import perfsim
    from perfsim.algorithms import FA1, FA4

    w = AttentionWorkload(batch=1, heads=1, seqlen_q=4096, head_dim=192, dtype="fp16")
    with pytest.raises(perfsim.InfeasibleError, match="not one row"):
        predict(w, gpu="h100-sxm5", algorithm=FA1(sram_bytes=1024))       # zero-row tile
    with pytest.raises(perfsim.InfeasibleError, match="above the largest"):
        predict(AttentionWorkload(batch=1, heads=1, seqlen_q=128, head_dim=131072),
                gpu="h100-sxm5", algorithm="sdpa-efficient")
    with pytest.raises(PerfsimError, match="finite"):
        FA4(rescales_per_row=float("inf"))
    h200 = perfsim.load_gpu("h200-sxm")
    with pytest.raises(PerfsimError, match="MAJOR.MINOR"):
        h200.replace(compute_capability="nine")
    # an architecture-specific suffix is a valid capability (FlexAttention's tables read it)
    sm90a = h200.replace(compute_capability="9.0a")
    w64 = AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=64)
    assert predict(w64, gpu=sm90a, algorithm="flex").seconds == \
        predict(w64, gpu=h200, algorithm="flex").seconds


# ------------------------------------------------------------------ a second fuzzing pass
def test_serve_refuses_a_busy_port_and_a_bad_address_in_one_line(capsys):
    """A port another server holds, an address that does not resolve or is not this
    machine's, and an empty one printed tornado's OSError traceback."""
    pytest.importorskip("panel")
    import socket

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = str(busy.getsockname()[1])
    try:
        _one_line_exit_2(["serve", "--port", port], capsys, "port is in use",
                         "choose another port")
    finally:
        busy.close()
    for address, needle in (("nonexistent.invalid", "not a host name or IP address"),
                            ("a" * 300, "not a host name or IP address"),
                            ("", "address must be a host name or IP address")):
        _one_line_exit_2(["serve", "--address", address, "--port", port], capsys, needle,
                         "127.0.0.1")


@pytest.mark.parametrize("out, needle", [("missing/ds", "folder '{tmp}/missing' does not "
                                                        "exist"),
                                         ("s.toml", "is a file, not a folder"),
                                         ("/proc/ds", "cannot create a file in folder '/proc'")])
def test_dask_out_folder_is_checked_before_any_cluster(out, needle, tmp_path, capsys,
                                                       monkeypatch):
    """``sweep --dask`` created missing parent folders (or died with a traceback in /proc)
    after starting the cluster; it now checks --out as the local path does."""
    from perfsim import distributed

    if out.startswith("/proc") and not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux /proc")
    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    monkeypatch.setattr(distributed, "_client", _must_not_run)
    target = out if out.startswith("/") else str(tmp_path / out)
    _one_line_exit_2(["sweep", str(cfg), "--dask", "local", "--out", target], capsys,
                     needle.format(tmp=tmp_path))
    assert not (tmp_path / "missing").exists()
    pytest.importorskip("distributed")
    with pytest.raises(PerfsimError, match=re.escape(needle.format(tmp=tmp_path))):
        distributed.dask_sweep({"batch": 1, "heads": 1, "seqlen_q": 128, "head_dim": 64},
                               target)


def test_dask_workers_are_bounded_by_the_cores(tmp_path, capsys, monkeypatch):
    """``--workers 1000000000`` asked the LocalCluster for a billion processes."""
    from perfsim import distributed

    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    monkeypatch.setattr(distributed, "_client", _must_not_run)
    top = distributed.max_local_workers()
    assert top == distributed.MAX_WORKERS_PER_CORE * (os.cpu_count() or 1)
    for workers in (10**9, top + 1):
        _one_line_exit_2(["sweep", str(cfg), "--dask", "local", "--workers", str(workers),
                          "--out", str(tmp_path / "ds")], capsys, f"at most {top}", "per core")
    pytest.importorskip("distributed")
    for workers in (10**9, 0, 2.5, True):
        with pytest.raises(PerfsimError, match=f"workers must be at least 1 and at most {top}"):
            distributed.dask_sweep({"batch": 1, "heads": 1, "seqlen_q": 128, "head_dim": 64},
                                   tmp_path / "ds", workers=workers)


@pytest.mark.parametrize("argv", [["predict", *FLAGS, "--seqlen", "128", "--plot", ""],
                                  ["predict", *FLAGS, "--seqlen", "128", "--plot= "],
                                  ["sweep", "{cfg}", "--out", ""],
                                  ["sweep", "{cfg}", "--plot="],
                                  ["sweep", "{cfg}", "--dask", "local", "--out="]])
def test_empty_output_paths_are_refused(argv, tmp_path, capsys, monkeypatch):
    """``--out ""`` and ``--plot ""`` read as no output: the command ran and wrote nothing."""
    import sys

    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    monkeypatch.setattr("perfsim.cli.predict_cmd.predict", _must_not_run)
    import perfsim.sweep  # noqa: F401 - the module whose sweep must not run

    monkeypatch.setattr(sys.modules["perfsim.sweep"], "sweep", _must_not_run)
    flag = "--plot" if any("--plot" in a for a in argv) else "--out"
    _one_line_exit_2([a.format(cfg=cfg) for a in argv], capsys, f"argument {flag}: needs a path")


def test_all_and_presets_are_taken_in_any_case(tmp_path, capsys):
    """``-a FA2`` was taken and ``-a ALL`` refused as an unknown algorithm."""
    for lower, other in (("all", "ALL"), ("presets", "Presets")):
        assert main(["predict", *FLAGS, "--seqlen", "128", "-a", lower, "--json"]) == 0
        want = capsys.readouterr().out
        assert main(["predict", *FLAGS, "--seqlen", "128", "-a", other, "--json"]) == 0
        assert capsys.readouterr().out == want and len(json.loads(want)) > 1
    kw = dict(batch=1, heads=8, seqlen_q=1024, head_dim=64, gpus=["h100-sxm5"])
    assert set(perfsim.sweep(**kw, algorithms="ALL")["algorithm"]) == set(
        perfsim.sweep(**kw, algorithms="all")["algorithm"])
    cfg = tmp_path / "s.toml"
    cfg.write_text('gpus = ["h100-sxm5"]\nalgorithms = "All"\n[workload]\nbatch = 1\n'
                   "heads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    assert main(["sweep", str(cfg), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(perfsim.algorithms.names())


def test_file_names_the_system_refuses_are_one_error(tmp_path, capsys, monkeypatch):
    """A name longer than the file system allows raised OSError (File name too long) from
    the config, the GPU profile, --out and --plot checks."""
    monkeypatch.chdir(tmp_path)
    long = "x" * 300
    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    _one_line_exit_2(["sweep", f"{long}.toml"], capsys, "File name too long")
    _one_line_exit_2(["sweep", str(cfg), "--out", f"{long}.csv"], capsys, "File name too long")
    # a name the file system takes (254 characters) is written: the temporary file's name is
    # cut to fit (it was refused, "File name too long", for the temporary name's sake)
    assert main(["sweep", str(cfg), "-q", "--out", f"{long[:250]}.csv"]) == 0
    assert (tmp_path / f"{long[:250]}.csv").is_file()
    capsys.readouterr()
    _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", "--plot", f"{long}.png"], capsys,
                     "File name too long")
    _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", "--gpu", long], capsys,
                     "unknown GPU")
    _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", "--gpu", f"{long}.toml"], capsys,
                     "does not exist")


@pytest.mark.parametrize("field, value, needle", [
    ("tensor_efficiency", 5e-324, "from 0.01 to 1, got 5e-324"),
    ("tensor_efficiency", 1e-300, "from 0.01 to 1"),
    ("hbm_efficiency", 5e-324, "from 0.01 to 1"),
    ("launch_overhead_s", 1e308, "from 0 to 1 s, got 1e+308"),
    ("cta_overhead_s", 1e308, "from 0 to 1 s"),
    ("host_floor_fwd_s", 1e308, "from 0 to 1 s"),
    ("host_floor_bwd_s", 2.0, "from 0 to 1 s"),
    ("host_floor_fwd_unmasked_s", 1e308, "from 0 to 1 s"),
    ("host_floor_fwd_paged_extra_s", 1e308, "from 0 to 1 s"),
    ("launch_overhead_s", 10**400, "integer too large for a float"),
    ("clock", 10**5000, "an integer of about 5001 digits")],
    ids=lambda v: "huge" if isinstance(v, int) and v > 10**100 else None)
def test_timing_params_refuse_values_that_overflow_predictions(field, value, needle):
    """A denormal efficiency or an overhead of 1e308 s gave inf, 1e294 s or a silently
    unchanged time; a huge integer raised OverflowError."""
    with pytest.raises(PerfsimError, match=re.escape(f"TimingParams.{field}: ") + ".*"
                       + re.escape(needle)):
        TimingParams(**{field: value})


def test_timing_params_at_their_bounds_predict_finite_times():
    w = AttentionWorkload(batch=2, heads=8, seqlen_q=1024, head_dim=64, phase="fwd_bwd")
    params = perfsim.timing_for("h100-sxm5", "fa2", tensor_efficiency=0.01,
                                hbm_efficiency=0.01, launch_overhead_s=1.0, cta_overhead_s=1.0,
                                host_floor_fwd_s=1.0, host_floor_bwd_s=1.0)
    p = predict(w, "h100-sxm5", "fa2", timing=params)
    assert math.isfinite(p.seconds) and 2.0 <= p.seconds < 100 and math.isfinite(p.tflops)


@pytest.mark.parametrize("field", ["softcap", "dropout_p"])
@pytest.mark.parametrize("make", [lambda: 10**400, lambda: -10**400, lambda: 10**5000],
                         ids=["1e400", "-1e400", "1e5000"])
def test_huge_integers_for_float_fields_are_one_error(field, make):
    """``softcap=10**400`` raised OverflowError (int too large to convert to float)."""
    with pytest.raises(PerfsimError, match=f"AttentionWorkload.{field}: must be a finite "
                       "number .got a.* integer of about"):
        AttentionWorkload(batch=1, heads=1, seqlen_q=8, head_dim=64, **{field: make()})


_WORKLOAD = AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=64)


@pytest.mark.parametrize("call, needle", [
    (lambda S: S.compute_bound_seqlen("fa2", "h100-sxm5", batch=1, heads=1, head_dim=64,
                                      dtype=["bf16"]), "dtype ['bf16'] is not one of"),
    (lambda S: S.compute_bound_seqlen("fa2", "h100-sxm5", batch=1, heads=1, head_dim=64,
                                      causal="yes"), "causal must be True or False"),
    (lambda S: S.compute_bound_seqlen("fa2", "h100-sxm5", batch=1, heads=1, head_dim=64,
                                      max_seqlen=10**400), "max_seqlen must be a positive "
     "integer up to 2**45, got an integer of about 401 digits"),
    (lambda S: S.compute_bound_seqlen("fa2", "h100-sxm5", batch=S.B, heads=1, head_dim=64),
     "batch must be a positive integer up to 2**45, got B"),
    (lambda S: S.compute_bound_seqlen("fa2", "x" * 300, batch=1, heads=1, head_dim=64),
     "unknown GPU"),
    (lambda S: S.sram_crossover("h100-sxm5", batch=1, heads=1, seqlen=1024, head_dim=10**400),
     "head_dim must be a positive integer up to 2**45"),
    (lambda S: S.counts("fa2", phase={}), "phase {} is not one of"),
    (lambda S: S.counts("fa2", dropout_p="x"), "dropout_p must be a probability in [0, 1)"),
    (lambda S: S.counts("fa2", dropout_p=2.0), "dropout_p must be a probability in [0, 1)"),
    (lambda S: S.counts("fa2", window=5), "window must be a (left, right) pair"),
    (lambda S: S.counts("fa2", window=(1, 2, 3)), "window must be a (left, right) pair"),
    (lambda S: S.counts("fa2", window=(0.5, 0)), "window sides must be None, an integer"),
    (lambda S: S.counts("fa2", options=[1]), "options must be a dict"),
    # H_kv must divide H, as AttentionWorkload requires (counted a 4/3 group before)
    (lambda S: S.counts("fa2", H=4, H_kv=3), "H_kv (3) must divide H (4)"),
    (lambda S: S.counts("fa2", H=4, H_kv=8), "H_kv (8) must divide H (4)"),
    (lambda S: S.counts("fa2", keep_l2="no"), "keep_l2 must be True or False"),
    (lambda S: S.unit_seconds("fa2", io_model=None), "io_model must be True or False"),
    (lambda S: S.evaluator(1 / S.N_q)(N_q=0), "N_q must be > 0"),
    (lambda S: S.evaluator(S.N_q * 2)(N_q="x"), "N_q must be a finite number"),
    (lambda S: S.evaluator(S.N_q * 2)(N_q=10**400), "N_q must be a finite number"),
    (lambda S: S.evaluator(S.N_q * S.d)(N_q=1e300, d=1e300), "not a finite float64"),
    (lambda S: S.smooth(None), "smooth: expects a sympy expression"),
    (lambda S: S.smooth("x+"), "smooth: expects a sympy expression"),
    (lambda S: S.window_pairs(None), "seqlen must be a positive integer"),
    (lambda S: S.window_pairs(128, True), "window must be an integer from 0"),
    (lambda S: S.decode_kv_bytes("fp64"), "kv_dtype 'fp64' is not one of"),
    (lambda S: S.mufu_crossover(_WORKLOAD, "b200", "fa4", rel="x"), "rel must be a finite"),
])
def test_closed_forms_refuse_bad_arguments_found_by_fuzzing(call, needle):
    """perfsim.symbolic raised TypeError, KeyError, ValueError, OverflowError, OSError or
    ZeroDivisionError for these, or read ``causal="yes"`` and ``dropout_p=2`` silently."""
    from perfsim import symbolic

    with pytest.raises(PerfsimError, match=re.escape(needle)):
        call(symbolic)


@pytest.fixture
def predict_calls(monkeypatch):
    """The predictions perfsim.symbolic makes, counted; past 200 the test fails (a
    bisection that never ends fails instead of hanging)."""
    from perfsim import symbolic

    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        if len(calls) > 200:
            raise AssertionError("the bisection did not stop")
        return predict(*args, **kwargs)

    monkeypatch.setattr(symbolic, "predict", counted)
    return calls


@pytest.mark.parametrize("rel", [0, -1e-6, float("nan"), float("inf"), True])
def test_mufu_crossover_refuses_a_tolerance_it_cannot_reach(rel, predict_calls):
    """``rel=0`` bisected forever (the interval stops shrinking at float64's resolution)."""
    from perfsim import symbolic

    w = AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    with pytest.raises(PerfsimError, match="rel must be a finite number > 0"):
        symbolic.mufu_crossover(w, "b200", "fa4", rel=rel)


def test_mufu_crossover_bisection_is_bounded(predict_calls):
    """The smallest positive tolerance ends at float64's resolution, within the step bound,
    at the crossover the default tolerance finds."""
    from perfsim import symbolic

    w = AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    rate = symbolic.mufu_crossover(w, "b200", "fa4", rel=5e-324)
    assert len(predict_calls) <= symbolic.MUFU_BISECTION_STEPS + 50
    assert rate == pytest.approx(symbolic.mufu_crossover(w, "b200", "fa4"), rel=1e-5)


@pytest.mark.parametrize("field, values, shown", [
    ("batch", [1, 1], "1"), ("seqlen_q", [1024, 2048, 1024], "1024"),
    ("heads", [8, 8], "8"), ("kv_heads", [1, 1], "1"), ("kv_heads", [None, "none"], "None"),
    ("seqlen_k", [512, 512], "512"), ("head_dim", [64, 64], "64"),
    ("head_dim_v", [64, 64], "64"), ("causal", [True, True], "True"),
    ("dtype", ["bf16", "bf16"], "'bf16'"), ("phase", ["fwd", "fwd"], "'fwd'"),
    ("dropout_p", [0.0, 0], "0"), ("softcap", [0, 0.0], "0.0"),
    ("window", [[1, 2], "1,2"], "'1,2'"), ("kv_dtype", ["bf16", "bf16"], "'bf16'"),
    ("page_size", [16, 16], "16"), ("page_size", [None, 0], "None")])
def test_sweep_refuses_a_value_given_twice_in_one_list(field, values, shown):
    """``seqlen_q = [1024, 1024]`` gave two rows no column told apart (as a GPU or an
    algorithm given twice did, which was already refused)."""
    kw = dict(batch=1, heads=8, seqlen_q=1024, head_dim=64, gpus=["h100-sxm5"],
              algorithms=["fa2"])
    with pytest.raises(PerfsimError, match=re.escape(f"sweep: {field}: {shown} given more "
                                                     "than once")):
        perfsim.sweep(**{**kw, field: values})


def test_sweep_config_and_overrides_refuse_a_value_given_twice(tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\nbatch = 1\n'
                   "heads = 1\nseqlen_q = [1024, 1024]\nhead_dim = 64\n")
    _one_line_exit_2(["sweep", str(cfg)], capsys, f"{cfg}: seqlen_q: 1024 given more than "
                     "once: its rows could not be told apart; give each once")
    kw = dict(batch=1, heads=8, seqlen_q=1024, head_dim=64, gpus=["h100-sxm5"],
              algorithms=["fa2"])
    for overrides, shown in (({"sm_count": [100, 132, 100]}, "sm_count=100"),
                             ({"sm_count": {"scale": [1, 1.0]}}, "sm_count×1")):
        with pytest.raises(PerfsimError, match=re.escape(f"GPU override 'sm_count': {shown} "
                                                         "given more than once")):
            perfsim.sweep(**kw, overrides=overrides)
    assert len(perfsim.sweep(**kw, seqlen_k=[None, 1024], overrides={"sm_count": [100, 132]})
               ) == 2           # a pair None/1024 makes is kept once, as documented


def test_gpu_replace_with_the_same_values_is_no_what_if_and_chains_stay_readable():
    """``replace(sm_count=<its own>)`` relabelled the GPU a what-if, and each chained
    replace added a ``*`` and another "(what-if: ...)" to the name."""
    h100 = load_gpu("h100-sxm5")
    same = h100.replace(sm_count=h100.sm_count, power=h100.power,
                        tensor_flops_per_clk_per_sm=dict(h100.tensor_flops_per_clk_per_sm))
    assert same == h100 and same.id == "h100-sxm5"
    chained = h100.replace(sm_count=100).replace(sm_count=120).replace(clock_hz=1.5e9)
    assert chained.id == "h100-sxm5*"
    assert chained.name == "NVIDIA H100 SXM5 80GB (what-if: clock_hz, sm_count)"
    assert chained.sm_count == 120 and chained.clock_hz == 1.5e9
    once = h100.replace(sm_count=100)
    assert once.replace(sm_count=100) == once
    assert h100.replace(id="mine").replace(sm_count=1).id == "mine*"


# ------------------------------------------------------------------ a third fuzzing pass
@pytest.mark.parametrize("address", ["::1", "::", "[::1]", "fe80::1%lo"])
def test_serve_refuses_an_ipv6_address_in_one_line(address, capsys, monkeypatch):
    """``--address ::1`` passed the listen check and died in Bokeh with a traceback
    (``Invalid host value: ::1:5098``): its websocket origins are ``HOST:PORT`` and take no
    IPv6 literal."""
    pytest.importorskip("panel")
    from perfsim import serve

    monkeypatch.setattr(serve, "serve", _must_not_run)
    _one_line_exit_2(["serve", "--address", address, "--port", "5098"], capsys,
                     f"address {address!r} is an IPv6 address", "127.0.0.1")
    with pytest.raises(PerfsimError, match="IPv6 address"):
        serve.check_address(address, 5098)


def test_a_set_option_given_twice_is_refused(capsys, monkeypatch):
    """``--set block_m=64 --set block_m=128`` kept the last value silently."""
    monkeypatch.setattr("perfsim.cli.predict_cmd.predict", _must_not_run)
    for algorithm in ("fa2", "flash-attn-2"):
        _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", "-a", algorithm, "--set",
                          "block_m=64", "--set", "block_m=128"], capsys,
                         "--set block_m given more than once")


@pytest.mark.parametrize("dask", ["--dask=", "--dask= "])
def test_an_empty_dask_scheduler_is_refused(dask, tmp_path, capsys, monkeypatch):
    """``--dask ""`` read as no --dask: the sweep ran locally and failed on the dataset
    folder as a file name ("unknown extension '(none)'")."""
    import sys

    import perfsim.sweep  # noqa: F401 - the module whose sweep must not run

    cfg = tmp_path / "s.toml"
    cfg.write_text("[workload]\nbatch = 1\nheads = 1\nseqlen_q = 128\nhead_dim = 64\n")
    monkeypatch.setattr(sys.modules["perfsim.sweep"], "sweep", _must_not_run)
    _one_line_exit_2(["sweep", str(cfg), dask, "--out", str(tmp_path / "d1")], capsys,
                     "argument --dask: needs a scheduler address (tcp://HOST:8786) or 'local'")


def test_a_boolean_option_says_true_or_false(capsys):
    """``--set serial_stations=1`` said "Input should be a valid boolean (got 1)"."""
    for algorithm in ("fa3", "flash-attn-3"):
        _one_line_exit_2(["predict", *FLAGS, "--seqlen", "128", "-a", algorithm, "--gpu",
                          "h100-sxm5", "--set", "serial_stations=1"], capsys,
                         "fa3 option serial_stations: must be true or false (got 1)")
    with pytest.raises(PerfsimError, match=re.escape("must be true or false (got 'yes')")):
        perfsim.algorithms.FA3(serial_stations="yes")


def test_sweep_override_refuses_one_number_written_twice(tmp_path, capsys):
    """``clock_hz = [1.5e9, 1500000000]`` gave two identical rows (the labels differed:
    ``=1500000000.0`` and ``=1500000000``)."""
    cfg = tmp_path / "s.toml"
    cfg.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\nbatch = 1\n'
                   "heads = 1\nseqlen_q = 128\nhead_dim = 64\n[overrides]\n"
                   "clock_hz = [1.5e9, 1500000000]\n")
    _one_line_exit_2(["sweep", str(cfg)], capsys, "GPU override 'clock_hz': clock_hz="
                     "1500000000 given more than once")
    kw = dict(batch=1, heads=8, seqlen_q=1024, head_dim=64, gpus=["h100-sxm5"],
              algorithms=["fa2"])
    with pytest.raises(PerfsimError, match="given more than once"):
        perfsim.sweep(**kw, overrides={"tensor_flops_per_clk_per_sm.bf16": [1024, 1024.0]})
    assert len(perfsim.sweep(**kw, overrides={"clock_hz": [1.5e9, 1.6e9]})) == 2


@pytest.mark.parametrize("gpu_id", ["", "   ", "a\nb", "a b", "tab\there", "nul\x00"])
def test_gpu_ids_are_one_printable_word(gpu_id):
    """``replace(id="")`` or ``id="a\\nb"`` was taken, and a sweep wrote a blank or broken
    gpu cell; construction and a profile file refuse them too."""
    from pydantic import ValidationError

    from perfsim.gpu import GPUSpec

    h100 = load_gpu("h100-sxm5")
    with pytest.raises(PerfsimError, match=r"h100-sxm5\.replace\(\): id: must be a non-empty "
                       "id without spaces or control characters"):
        h100.replace(id=gpu_id)
    with pytest.raises(ValidationError, match="must be a non-empty id"):
        GPUSpec(**{**h100.model_dump(), "id": gpu_id})
    assert h100.replace(id="b300-like*").id == "b300-like*"


@pytest.mark.parametrize("rel", [1, 1.0, 2.5, 10**400, 1e300],
                         ids=["1", "1.0", "2.5", "1e400", "1e300"])
def test_mufu_crossover_refuses_a_tolerance_of_one_or_more(rel, predict_calls):
    """``rel=10**400`` passed ``0 < rel < inf`` (an integer past float's range compares
    fine); a relative tolerance of 1 or more says nothing about the rate."""
    from perfsim import symbolic

    with pytest.raises(PerfsimError, match=re.escape("rel must be a finite number > 0 and < 1")):
        symbolic.mufu_crossover(W, "b200", "fa4", rel=rel)
    assert not predict_calls


@pytest.mark.parametrize("options, needle", [
    ({"block_m": -1}, "fa2 option block_m: Input should be a multiple of 16 (got -1)"),
    ({"block_m": 0}, "fa2 option block_m: Input should be greater than or equal to 16"),
    ({"block_m": 10**400}, "fa2 option block_m: must be at most 2**45 (as the sizes), got an "
     "integer of about 401 digits"),
    ({"nope": 1}, "fa2 has no option nope; options: block_m, block_n,"),
    ({"warps": 3}, "fa2 option warps:"),
    ({"dq_recompute": 1}, "fa2 option dq_recompute: must be true or false (got 1)")])
def test_closed_form_options_are_checked_as_the_algorithm_checks_them(options, needle):
    """``counts(options=...)`` built the config unchecked (``model_construct``): block_m -1
    gave negative shared-memory bytes, 0 fell back to 128 silently (``FA2(block_m=0)`` is
    refused), 10**400 and unknown names were taken."""
    from perfsim import symbolic

    with pytest.raises(PerfsimError, match=re.escape(needle)):
        symbolic.counts("fa2", options=options)


def test_closed_form_options_keep_symbols_and_numbers_of_any_kind():
    import numpy as np
    import sympy

    from perfsim import symbolic

    want = symbolic.counts("fa2", options={"block_m": 64})["smem_bytes"]
    for value in (np.int64(64), sympy.Integer(64)):
        assert symbolic.counts("fa2", options={"block_m": value})["smem_bytes"] == want
    free = symbolic.counts("fa2", options={"block_m": 2 * symbolic.B_r})["smem_bytes"]
    assert free.subs(symbolic.B_r, 32) == want


@pytest.mark.parametrize("make, needle", [
    (lambda t, g: t.model_copy(update={"hbm_efficiency": -5}),
     "TimingParams.hbm_efficiency: must be from 0.01 to 1, got -5"),
    (lambda t, g: t.model_copy(update={"hbm_efficiency": 0}),
     "TimingParams.hbm_efficiency: must be from 0.01 to 1, got 0"),
    (lambda t, g: t.model_copy(update={"clock": -1.0}), "TimingParams.clock: must be"),
    (lambda t, g: t.replace(tensor_efficiency=2.0), "TimingParams.tensor_efficiency: must be"),
    (lambda t, g: t.replace(nope=1), "TimingParams.nope:"),
    (lambda t, g: g.model_copy(update={"hbm_bandwidth_bytes_per_s": -1}),
     "h100-sxm5.model_copy(): hbm_bandwidth_bytes_per_s:"),
    (lambda t, g: g.model_copy(update={"sm_count": 0}), "h100-sxm5.model_copy(): sm_count:")])
def test_copies_of_timing_params_and_gpus_are_validated(make, needle):
    """``model_copy(update=...)`` (which the TimingParams docstring recommended) set values
    unchecked: an efficiency of -5 predicted, 0 raised ZeroDivisionError, a clock of -1.0
    TypeError, and a negative HBM bandwidth reached the timing model."""
    t, g = perfsim.timing_for("h100-sxm5", "fa2"), load_gpu("h100-sxm5")
    with pytest.raises(PerfsimError, match=re.escape(needle)):
        make(t, g)


def test_valid_copies_of_timing_params_and_gpus_predict_as_before():
    t, g = perfsim.timing_for("h100-sxm5", "fa2"), load_gpu("h100-sxm5")
    w = AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    slower = t.replace(hbm_efficiency=0.5, tensor_efficiency=0.5)
    assert t.model_copy(update={"hbm_efficiency": 0.5, "tensor_efficiency": 0.5}) == slower
    assert predict(w, g, "fa2", timing=slower).seconds == predict(
        w, g, "fa2", timing={"hbm_efficiency": 0.5, "tensor_efficiency": 0.5}).seconds
    assert t.model_copy() == t and g.model_copy(deep=True) == g
    fewer = g.model_copy(update={"sm_count": 100})
    assert fewer.id == g.id and fewer.sm_count == 100
    assert predict(w, fewer, "fa2").seconds == predict(
        w, g.replace(sm_count=100), "fa2").seconds


# ------------------------------------------------------------------ review of 2026-12-03
def test_cli_window_of_two_empty_bounds_is_refused(capsys):
    """``--window ,`` was read as no window at all (exit 0); each bound is an integer or
    ``none``."""
    with pytest.raises(SystemExit) as exc:      # argparse's own exit, one line on stderr
        main(["predict", "-b", "1", "--heads", "8", "--seqlen", "1024", "--head-dim", "64",
              "--window", ","])
    assert exc.value.code == 2
    assert "invalid window bound ''" in capsys.readouterr().err


def test_cli_gpu_id_is_short_for_gpu_show(capsys):
    """``perfsim gpu h100-sxm5`` failed with "choose from 'show'"."""
    assert main(["gpu", "h100-sxm5"]) == 0
    assert "H100" in capsys.readouterr().out
    assert main(["gpu", "no-such-gpu"]) == 2
    assert "unknown GPU 'no-such-gpu'" in capsys.readouterr().err


def test_timing_errors_say_dicts_are_taken_and_hint_at_mhz():
    """``timing="clock"`` was told only that a TimingParams was needed (a dict is taken too),
    and ``timing={"clock": 1500}`` got no hint that the clock is in Hz."""
    w = AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=64)
    with pytest.raises(PerfsimError, match="or a dict of its fields"):
        predict(w, gpu="h100-sxm5", algorithm="fa2", timing="clock")
    with pytest.raises(PerfsimError, match=r"in MHz\? 1500 MHz is 1\.5e\+09 Hz"):
        predict(w, gpu="h100-sxm5", algorithm="fa2", timing={"clock": 1500})
    from perfsim import symbolic

    assert set(symbolic.unit_seconds("fa2", "h100-sxm5", timing={"clock": 1.5e9})) == {
        "tensor", "fp32", "mufu", "smem", "hbm"}


def test_gpu_field_errors_give_the_value_and_the_bound_fields():
    """pydantic's own checks ("Input should be greater than 0") and the shared-memory bound
    named no value."""
    g = load_gpu("h100-sxm5")
    with pytest.raises(PerfsimError, match=r"hbm_bandwidth_bytes_per_s: .* got -1\.0"):
        g.replace(hbm_bandwidth_bytes_per_s=-1)
    with pytest.raises(PerfsimError, match=r"smem_bytes_per_block \(\d+ B.*smem_bytes_per_sm "
                                           r"\(1024 B\)"):
        g.replace(smem_bytes_per_sm=1024)


def test_sweep_rows_of_an_invalid_what_if_name_the_what_if():
    """A scale that rounds sm_count to 0 gave "sm_count: Input should be greater than 0"
    without the value or the scale behind it."""
    df = perfsim.sweep(batch=1, heads=8, seqlen_q=1024, head_dim=64, gpus="h100-sxm5",
                       algorithms="fa2", overrides={"sm_count": {"scale": [0.001, 1]}})
    bad = df.infeasible[0]
    assert "what-if GPU is invalid (sm_count×0.001)" in bad and "got 0" in bad
    assert df.infeasible[1] == "" and df.seconds[1] > 0


def test_a_costly_split_from_the_heuristic_is_noted_under_the_table():
    """The split-KV heuristic made time fall as N grew (81 µs at N = 768, 60 µs at 896 on an
    RTX 4090) with only ``--explain`` pricing the choice; ``notes()`` (the lines under the
    predict table, and ``to_dict``) now says what one split would take."""
    w = AttentionWorkload(batch=2, heads=8, seqlen_q=768, head_dim=128, dtype="bf16")
    p = predict(w, gpu="rtx-4090", algorithm="fa2")
    one = predict(w, gpu="rtx-4090", algorithm=FA2(num_splits=1))
    assert one.seconds < p.seconds
    note = [n for n in p.notes() if "one split would take" in n]
    assert note and f"{one.seconds * 1e6:.1f} µs" in note[0]
    assert not [n for n in one.notes() if "split" in n]


# ------------------------------------------------------------------ a second fresh user
def test_more_sms_never_slow_fa1s_gqa_decode():
    """FA1's K/V re-reads hit L2 while the resident CTAs' live tiles fit; the CTAs of one GQA
    group read the same tile, and counting one per CTA made 2x the SMs up to 2x slower."""
    w = AttentionWorkload(batch=8, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=32768,
                          head_dim=128, causal=True)
    for gid, more in (("rtx-3090", 164), ("h100-sxm5", 264), ("h100-sxm5", 528)):
        gpu = load_gpu(gid)
        base = predict(w, gpu, "fa1").seconds
        bigger = gpu.replace(sm_count=more, id=f"{gid}-{more}")
        assert predict(w, bigger, "fa1").seconds <= base * 1.0001, (gid, more)


def test_sram_crossover_refuses_a_baseline_with_symbolic_tiles():
    from perfsim import symbolic

    with pytest.raises(PerfsimError, match="baseline 'fa2'"):
        symbolic.sram_crossover("a100-sxm4-80gb", batch=1, heads=1, seqlen=4096, head_dim=64,
                                baseline="fa2")
    assert symbolic.sram_crossover("a100-sxm4-80gb", batch=1, heads=1, seqlen=4096,
                                   head_dim=64) > 64


def test_power_floor_above_the_maximum_clock_is_refused():
    h100 = load_gpu("h100-sxm5")
    with pytest.raises(PerfsimError, match="power.min_clock_hz"):
        h100.replace(clock_hz=1e9, max_clock_hz=1e9)
    slow = h100.replace(clock_hz=1e9, max_clock_hz=1e9,
                        power=h100.power.model_copy(update={"min_clock_hz": 5e8}))
    assert predict(AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=64), slow,
                   "fa2").clock_hz <= 1e9


def test_report_only_refuses_a_folder_it_cannot_score(tmp_path, capsys):
    """A decode folder (rows of validate/external_decode.py) or an empty results file gave
    rc 0 and an empty report; now one error naming the scorer to use."""
    folder = tmp_path / "decode"
    folder.mkdir()
    (folder / "results.jsonl").write_text(json.dumps({"kind": "decode", "key": "k"}) + "\n")
    assert main(["validate", "--report-only", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "decode_report" in err and "Traceback" not in err
    (folder / "results.jsonl").write_text("")
    assert main(["validate", "--report-only", str(folder)]) == 2
    assert "empty" in capsys.readouterr().err
    assert not (folder / "report.md").exists()


def test_sub_nanosecond_times_take_an_si_prefix():
    from perfsim.units import si

    assert si(1.02e-10, "s") == "102 ps" and si(3e-13, "s") == "300 fs"
    assert si(2.5e-9, "s") == "2.5 ns"


def test_long_times_print_in_seconds_never_with_a_prefix_above_the_unit(capsys):
    """A fresh user's report: a 6-day call printed "5.24 Ms" (read as milliseconds) in the
    table, "602,904.903 s" in explain, "602904902793.6 µs" in perfsim rows, and its
    footprint as "4.19e+06 TiB" and "4294967360.0 GiB"."""
    from perfsim.cli import main
    from perfsim.units import seconds_text, si

    assert seconds_text(2.42e-5) == "24.2 µs" and seconds_text(0.00757) == "7.57 ms"
    assert seconds_text(7.568) == "7.57 s" and seconds_text(603.2) == "603 s"
    assert seconds_text(5_236_514.2) == "5,236,514 s" and seconds_text(999.6) == "1,000 s"
    assert si(1000 * 2**20, "B", binary=True) == "0.977 GiB"       # never "1e+03 MiB"
    assert si(4.0 * 2**60, "B", binary=True) == "4,194,304 TiB"
    assert main(["predict", "--heads", "1", "--head-dim", "8", "-b", "1", "--seqlen",
                 str(2**30), "-a", "standard", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "5,236,514 s" in out and " Ms" not in out and "e+0" not in out
    assert "needs 4,194,304.06 TiB" in out


def test_tables_print_a_tiny_call_s_tflops_with_its_digits(capsys, tmp_path):
    """`perfsim rows` and the sweep summary printed a one-token decode's TFLOP/s as 0.0
    (perfsim predict printed three digits): one formatter for every table."""
    from perfsim.cli import main
    from perfsim.units import tflops_text

    assert tflops_text(412.345) == "412.3" and tflops_text(0.000169) == "0.000169"
    csv = tmp_path / "w.csv"
    csv.write_text("batch,heads,seqlen_q,seqlen_k,head_dim\n1,1,1,16,64\n")
    assert main(["rows", str(csv), "--gpu", "h100-sxm5", "--algorithm", "fa2"]) == 0
    out = capsys.readouterr().out
    assert "0.000" in out and " 0.0 " not in out


def test_flash_attn2_forward_skips_query_tiles_that_see_no_key():
    """flash-attn 2's forward returns before loading Q in a CTA whose rows all see no key
    (compute_attn_1rowblock: zero O, +inf LSE), so with N_q > N_k under the causal mask
    those CTAs leave the grid's waves and Q traffic; they still write O. FlexAttention's
    template loads Q first and keeps them. Adding only keyless rows never makes the call
    faster."""
    base = dict(batch=8, heads=16, seqlen_k=2048, head_dim=128, causal=True, dtype="bf16")
    p = predict(AttentionWorkload(seqlen_q=8192, **base), "h200-sxm", "sdpa-flash")
    k = p.kernels[0].cost
    b_r = k.launch["block_m"]
    keyless = (8192 - 2048) // b_r
    assert k.launch["keyless_ctas"] == 8 * 16 * keyless
    assert k.grid == 8 * 16 * (8192 // b_r - keyless)
    assert k.terms["hbm_read/Q"] == 2 * 8 * 16 * 2048 * 128
    assert k.terms["hbm_write/O"] == 2 * 8 * 16 * 8192 * 128
    flex = predict(AttentionWorkload(seqlen_q=8192, **base), "h200-sxm", "flex").kernels[0]
    assert "keyless_ctas" not in flex.cost.launch
    assert flex.cost.terms["hbm_read/Q"] == 2 * 8 * 16 * 8192 * 128
    for gpu in ("h200-sxm", "a100-sxm4-80gb", "rtx-4090"):
        times = [predict(AttentionWorkload(seqlen_q=n, **base), gpu, "sdpa-flash").seconds
                 for n in range(2048, 12288 + 1, 128)]
        assert all(b >= a for a, b in zip(times, times[1:])), gpu


def test_flash_attn2_keeps_its_query_tiles_when_it_drops_a_right_bound():
    """flash-attn 2's mha_fwd turns window_size_right >= seqlen_k into -1 (no right bound),
    so a window whose right side reaches N_k leaves no query row keyless there: no early
    exit (a reviewer found a 3-4x too fast forward from the exit alone)."""
    base = dict(batch=4, heads=16, seqlen_q=8192, seqlen_k=1024, head_dim=128)
    far = predict(AttentionWorkload(window=(None, 2048), **base), "h100-sxm5", "flash-attn-2")
    assert "keyless_ctas" not in far.kernels[0].cost.launch
    near = predict(AttentionWorkload(window=(None, 1023), **base), "h100-sxm5", "flash-attn-2")
    assert near.kernels[0].cost.launch["keyless_ctas"] > 0


def test_explain_names_the_memory_efficient_backward_s_key_splits():
    """Twice the heads in about the same time (a fresh user's finding, RTX 4090): PyTorch's
    key-split rule for xFormers' backward splits a 64-CTA grid 3 ways and leaves a 128-CTA
    one unsplit; explain() now says so."""
    def run(heads):
        w = perfsim.AttentionWorkload(batch=4, heads=heads, seqlen_q=2048, head_dim=128,
                                      phase="bwd")
        return perfsim.predict(w, gpu="rtx-4090", algorithm="sdpa-efficient")

    few, many = run(16), run(32)
    assert "fa2_bwd runs 3 CTAs per (batch, head) along the keys" in few.explain()
    assert "(192 CTAs in all)" in few.explain()
    assert "fa2_bwd runs one CTA per (batch, head) over all its key blocks" in many.explain()
    assert many.seconds < 1.1 * few.seconds


def test_the_sweep_summary_has_a_line_per_what_if(capsys):
    """MUFU x 0.5, x 1 and x 2 were one summary line per GPU and algorithm (a fresh user's
    report)."""
    from pathlib import Path

    from perfsim.cli import main

    config = Path(__file__).parent.parent / "examples" / "whatif.toml"
    assert main(["sweep", str(config)]) == 0
    out = capsys.readouterr().out
    assert "what-if" in out
    assert all(f"mufu_ops_per_clk_per_sm×{f}" in out for f in ("0.5", "1", "2"))
