"""``perfsim.validate.clock_scaling`` on the committed two-clock profiles (an H100,
``validate/reports/h100/probes/clock-scaling/``): what validate/README.md says they show."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsim.validate import clock_scaling

FOLDER = Path(__file__).resolve().parent.parent / "validate/reports/h100/probes/clock-scaling"


@pytest.fixture(scope="module")
def entries():
    return {e["case"]: e for e in clock_scaling.summarize(FOLDER, "h100-sxm5")}


def test_the_attention_kernels_keep_their_cycles_and_the_hbm_chain_does_not(entries):
    for case, e in entries.items():
        ratio = e["measured_cycles_base_over_none"]
        assert e["clock_none_over_base"] > 1.15, case
        if case.startswith("chain"):
            assert 0.84 < ratio < 0.87, case        # mostly nanoseconds
        else:
            assert 0.99 < ratio < 1.005, case       # SM cycles


def test_perfsim_keeps_the_cycles_as_the_profiles_do(entries):
    """Every attention kernel profiled keeps its cycles between the two clocks, and perfsim's
    do too. cuDNN's head-dim-256 forward once dropped 7-8 % of its cycles at the base clock in
    perfsim (its one-stage K/V ring, timed at the HBM chain's nanoseconds, bound the cycle);
    with its MMAs and exps in turn (``FA3.fwd_pipes_in_turn``) the cycle is longer than the
    ring's loads and keeps its cycles, as the profile does (validate/README.md, "cuDNN's
    forward: MMAs and exps in turn")."""
    for case, e in entries.items():
        if case.startswith("chain"):
            assert "model_error_none" not in e
            continue
        assert abs(e["model_cycles_base_over_none"]
                   - e["measured_cycles_base_over_none"]) < 0.01, case
        assert abs(e["model_error_base"] - e["model_error_none"]) < 0.01, case


def test_a_missing_folder_is_one_line(capsys, tmp_path):
    assert clock_scaling.main([str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_chain_fit_gives_the_hbm_step_in_cycles_and_nanoseconds(entries):
    """The committed HBM chain (8 and 64 KiB tiles): two sizes, so the line goes through
    both steps; its latency is ~460-490 ns at both clocks but fewer cycles at the lower one
    (validate/README.md: mostly nanoseconds). No L2 cases are committed, so no L2 fit."""
    fits = clock_scaling.chain_fits(list(entries.values()))
    assert {f["source"] for f in fits} == {"HBM"}
    by = {f["control"]: f for f in fits}
    for f in fits:
        for x, cycles in zip(f["tile_bytes"], f["per_step_cycles"]):
            assert f["latency_cycles"] + x / f["bytes_per_cycle"] == pytest.approx(cycles)
        assert 440e-9 < f["latency_seconds"] < 510e-9
    assert by["base"]["latency_cycles"] < 0.9 * by["none"]["latency_cycles"]
    assert "| HBM | 1980 |" in clock_scaling.chain_table(fits)
    assert clock_scaling.chain_table([]) == ""
