"""The calibrated profile without a GPU: TOML writer round trip, per-clock conversion, sources,
[calibration] table, and that perfsim.load_gpu / predict accept the file."""

from __future__ import annotations

import math
import tomllib

import pytest

import perfsim
from perfsim.timing import TimingParams
from perfsim.validate.calibrate import build_profile, write_profile
from perfsim.validate.microbench import Measurement, smem_bandwidth
from perfsim.validate.tomlwrite import dumps, write_atomic

DEVICE = {"device": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0",
          "triton": "3.6.0", "cuda": "13.0", "compute_capability": "9.0", "sm_count": "132"}
MEASURED = [
    Measurement("hbm_copy", 4.3e12, "B/s", "copy"),
    Measurement("matmul_bf16", 790e12, "FLOP/s", "torch.mm bf16"),
    Measurement("matmul_fp16", 800e12, "FLOP/s", "torch.mm fp16"),
    Measurement("matmul_tf32", None, "FLOP/s", "not measured: test"),
    Measurement("matmul_fp8_e4m3", 1.3e15, "FLOP/s", "torch._scaled_mm"),
    Measurement("mufu_exp2", 4.0e12, "results/s", "exp2 chains"),
    Measurement("fp32_fma", 60e12, "FLOP/s", "fma chains"),
    Measurement("launch_overhead", 3.5e-6, "s", "noop kernel"),
    Measurement("load_latency_s", 4.0e-7, "s", "load chain fit"),
    Measurement("cta_load_bandwidth", 7.0e10, "B/s", "load chain fit"),
    smem_bandwidth(),
]


def test_toml_round_trip():
    data = {"id": "x", "name": 'quote " back\\slash\nnewline\ttab é \x01',
            "n": 132, "f": 1.83e9, "tiny": 1e-5, "big": 1e22, "neg": -0.5, "inf": math.inf,
            "yes": True, "no": False, "list": [1, 2.5, "three"], "skip": None,
            "table": {"plain": 1, "dotted.key": "v", "nested": {"deep": 2.0}},
            "empty": {}}
    back = tomllib.loads(dumps(data))
    expected = {k: v for k, v in data.items() if v is not None}
    assert back == expected


def test_toml_rejects_unsupported_values():
    with pytest.raises(TypeError):
        dumps({"a": object()})


def test_write_atomic_replaces_whole_file(tmp_path):
    path = tmp_path / "sub" / "p.toml"
    write_atomic(path, "a = 1\n")
    write_atomic(path, "a = 2\n")
    assert path.read_text() == "a = 2\n"
    assert [p.name for p in path.parent.iterdir()] == ["p.toml"]


def test_calibrated_profile_loads_and_holds_measured_rates(tmp_path):
    base = perfsim.load_gpu("h200-sxm")
    data = build_profile(base, MEASURED, DEVICE, "2026-11-29",
                         {"sm_count": 132, "l2_bytes": base.l2_bytes})
    path = write_profile(tmp_path / "h200-calibrated.toml", data)
    spec = perfsim.load_gpu(str(path))
    per_s = 132 * base.clock_hz
    assert spec.clock_hz == base.clock_hz and spec.sm_count == 132
    assert spec.hbm_bandwidth_bytes_per_s == pytest.approx(4.3e12)
    assert spec.peak_tensor_flops_per_s("bf16") == pytest.approx(790e12)
    assert spec.tensor_flops_per_clk_per_sm["fp16"] == pytest.approx(800e12 / per_s)
    assert spec.mufu_ops_per_s == pytest.approx(4.0e12)
    assert spec.fp32_flops_per_s == pytest.approx(60e12)
    assert spec.smem_bandwidth_bytes_per_clk_per_sm == base.smem_bandwidth_bytes_per_clk_per_sm
    assert spec.mma_sync_flops_per_clk_per_sm == base.mma_sync_flops_per_clk_per_sm
    tag = "M: measured by perfsim calibrate on NVIDIA H200 2026-11-29: "
    for key in ("hbm_bandwidth_bytes_per_s", "tensor_flops_per_clk_per_sm.bf16",
                "tensor_flops_per_clk_per_sm.fp8_e4m3", "mufu_ops_per_clk_per_sm",
                "fp32_flops_per_clk_per_sm"):
        assert spec.sources[key].startswith(tag), key
    assert spec.sources["tensor_flops_per_clk_per_sm.tf32"].startswith("I: not measured here")
    cal = spec.calibration
    assert all(isinstance(v, str) for v in cal.values())
    assert cal["device"] == "NVIDIA H200" and cal["driver"] == "580.159.04"
    assert cal["date"] == "2026-11-29" and cal["base"] == "h200-sxm" and "method" in cal
    assert "smem_bandwidth: not measured" in cal["not_measured"]
    assert "matmul_tf32" in cal["not_measured"]
    params = TimingParams.for_gpu(spec)
    assert params.launch_overhead_s == pytest.approx(3.5e-6) and params.hbm_efficiency == 1.0
    assert spec.load_latency_s == pytest.approx(4.0e-7)
    assert spec.cta_load_bandwidth_bytes_per_s == pytest.approx(7.0e10)
    assert spec.sources["load_latency_s"].startswith(tag)
    assert spec.tensor_sustained_fraction == 1.0
    # whole measured GEMMs already run below the pipe, near one Triton CTA's share: not twice
    assert base.wgmma_one_cta_fraction < 1 and spec.wgmma_one_cta_fraction == 1.0
    assert spec.sources["wgmma_one_cta_fraction"].startswith(tag)
    # tf32 was not measured: its datasheet rate times the measured GEMMs' median share of
    # their datasheet rates (bf16, fp16, fp8 here)
    table, base_table = spec.tensor_flops_per_clk_per_sm, base.tensor_flops_per_clk_per_sm
    shares = sorted(table[dt] / base_table[dt] for dt in ("bf16", "fp16", "fp8_e4m3"))
    assert 0.7 < shares[1] < 1.0
    assert table["tf32"] == pytest.approx(base_table["tf32"] * shares[1])
    assert "median share" in spec.sources["tensor_flops_per_clk_per_sm.tf32"]
    # the measured rates ran at whatever clock the power limit allowed: no second cap
    assert base.power_capped_clock_hz and spec.power_capped_clock_hz is None
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=8448, head_dim=128,
                                  dtype="fp16")
    assert "power_capped" not in perfsim.predict(w, gpu=spec, algorithm="fa3").explain()
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    assert perfsim.predict(w, gpu=spec, algorithm="fa2").seconds > 0


def test_different_device_sm_count_replaces_base(tmp_path):
    base = perfsim.load_gpu("h200-sxm")
    data = build_profile(base, MEASURED[:2], DEVICE, "2026-11-29", {"sm_count": 114})
    assert data["sm_count"] == 114
    assert data["tensor_flops_per_clk_per_sm"]["bf16"] == pytest.approx(
        790e12 / (114 * base.clock_hz))
    assert data["sources"]["sm_count"].startswith("M: measured by perfsim calibrate")


@pytest.mark.parametrize("out, needle", [("adir", "is a folder"),
                                         ("nodir/x.toml", "folder 'nodir' does not exist"),
                                         ("profile.txt", "unknown extension '.txt'")])
def test_calibrate_checks_out_before_measuring(tmp_path, monkeypatch, capsys, out, needle):
    """A bad ``--out`` was found only when the profile was written, after every
    microbenchmark had run: now it is bad input (exit 2) before any, GPU or not."""
    from perfsim.cli import main
    from perfsim.validate import calibrate as calibrate_module
    from perfsim.validate import session

    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(session, "no_gpu_reason", lambda: None)      # as on a GPU machine

    def measured(*args, **kwargs):
        raise AssertionError("the microbenchmarks ran before --out was checked")

    monkeypatch.setattr(calibrate_module, "calibrate", measured)
    assert main(["calibrate", "--out", out, "--base", "h200-sxm"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
