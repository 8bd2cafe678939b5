"""The H200's power table is what ``validate/fit_power.py`` fits from the committed
microbenchmarks, at the clock the SMs tick at (``--tick``), with the energy of the bytes L2
serves split from the GEMM's (``--l2``)."""

import json
from pathlib import Path

import pytest

import perfsim
from perfsim.validate import fit_power

PROBES = Path(__file__).resolve().parent.parent / "validate/reports/h200/probes"


def _load(name):
    return json.loads((PROBES / name).read_text())


def test_tick_ratios_map_the_probe_cases_to_the_benchmarks():
    ratios = fit_power.tick_ratios([_load(f"tick/{n}") for n in
                                    ("tick-clock-attention.json", "tick-clock-cute.json",
                                     "tick-clock-power.json")])
    # tensor-core work ticks ~10 % under NVML's clock, the other loops at it
    for name in ("gemm_bf16", "gemm_bf16_half_duty", "mma_sync", "wgmma_smem_1cta"):
        assert 0.88 < ratios[name] < 0.92, name
    for name in ("fp32_fma", "mufu_exp2", "hbm_copy", "l2_read"):
        assert ratios[name] > 0.995, name


def test_committed_h200_power_table_is_the_tick_fit():
    ratios = fit_power.tick_ratios([_load(f"tick/{n}") for n in
                                    ("tick-clock-attention.json", "tick-clock-cute.json",
                                     "tick-clock-power.json")])
    fitted = fit_power.fit(_load("power-microbench.json"), _load("probe_mma_sync_power.json"),
                           _load("power-l2-wgmma.json"), ratios)
    values, power = fitted["values"], perfsim.load_gpu("h200-sxm").power
    assert power.voltage_exponent == pytest.approx(values["voltage_exponent"], rel=1e-5)
    assert power.l2_pj_per_byte == pytest.approx(values["l2_pj_per_byte"], rel=1e-5)
    for family in ("wgmma", "mma_sync"):
        assert power.tensor_pj_per_flop[family] == pytest.approx(
            values["tensor_pj_per_flop"][family], rel=1e-5)
    # the whole cuBLAS GEMM per tick: 0.92 of the WGMMA peak, its padding (1.016) and wave
    # tail (1.031) included, which perfsim counts per kernel itself; the catalog's
    # tensor_sustained_fraction is the pipe's rate in a loop (1.0)
    whole = fitted["checks"]["gemm_bf16_per_clock_fraction"]
    assert whole == pytest.approx(0.92, abs=0.01)
    assert whole * 1.016 * 1.031 < perfsim.load_gpu("h200-sxm").tensor_sustained_fraction


def test_a_missing_tensor_ratio_is_refused():
    with pytest.raises(SystemExit, match="no measured clock ratio"):
        fit_power.fit(_load("power-microbench.json"), None, None, {"fp32_fma": 1.0})


@pytest.mark.parametrize("algorithm, kw", [
    ("sdpa-cudnn", dict(batch=4, heads=16, seqlen_q=4096, head_dim=128)),
    ("flash-attn-cute", dict(batch=2, heads=8, seqlen_q=1000, head_dim=256, causal=True,
                             phase="fwd_bwd")),
    ("sdpa-math", dict(batch=1, heads=4, seqlen_q=512, head_dim=64)),
])
def test_power_at_measured_splits_the_model_power(algorithm, kw):
    """``validate/power_at_measured.py``'s terms add up to ``perfsim.power.power_w`` of the
    same call at the same clock and seconds: the diagnostic reads the model, not a copy."""
    from perfsim.gpu_catalog import load_gpu
    from perfsim.power import call_energy_j, power_w
    from perfsim.validate.power_at_measured import power_terms

    gpu = load_gpu("h200-sxm")
    p = perfsim.predict(perfsim.AttentionWorkload(dtype="bf16", **kw), gpu=gpu,
                        algorithm=algorithm)
    costs = [k.cost for k in p.kernels]
    for seconds, clock in ((p.seconds, p.clock_hz), (2 * p.seconds, 1.5e9)):
        terms = power_terms(gpu, costs, seconds, clock)
        model = power_w(gpu, call_energy_j(gpu, costs), float(seconds), float(clock))
        assert sum(terms.values()) == pytest.approx(model, rel=1e-9)


def test_power_at_measured_refuses_what_it_cannot_score(tmp_path, capsys):
    """One line and exit 2 (tracebacks, or an empty table with exit 0, before)."""
    from perfsim.validate.power_at_measured import main

    (tmp_path / "notes.md").write_text("# not results\n")
    for argv, needle in (([str(tmp_path / "missing.jsonl")], "does not exist"),
                         ([str(tmp_path)], "is a folder"),
                         ([str(tmp_path / "notes.md")], "no ok rows")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
