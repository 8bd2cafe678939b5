"""The timing model alone at each profiled kernel's clock (issue 9): what
``perfsim.validate.per_clock`` reads from the committed Nsight Compute profiles, and the case
names ``validate/probe_ncu.py`` gives them."""

from __future__ import annotations

from pathlib import Path

import pytest

import perfsim
from perfsim.gpu_catalog import load_gpu
from perfsim.validate import per_clock
from perfsim.validate.probe_ncu import parse_case

ROOT = Path(__file__).resolve().parents[1]


def test_case_names_give_the_profiled_shape():
    assert parse_case("cudnn-bwd-d128-n256-b64-h16-c") == {
        "impl": "cudnn", "phase": "bwd", "head_dim": 128, "seqlen": 256, "batch": 64,
        "heads": 16, "causal": True, "dropout_p": 0.0,
        "extra": {"n": 256, "b": 64, "h": 16, "q": 16, "g": None, "p": 0}}
    # defaults: B = 1, H = 4096 // d, N = 4096, non-causal; -pP is dropout in percent
    shape = parse_case("flash-fwd-d96-p10")
    assert (shape["batch"], shape["heads"], shape["seqlen"], shape["causal"],
            shape["dropout_p"]) == (1, 42, 4096, False, 0.1)
    for bad in ("flash", "flash-fwd-96", "flash-fwd-d64-x3", "flash-fwd-d64-nfour",
                "flash-fwd-d\u00b2"):
        with pytest.raises(ValueError, match="expected IMPL-PHASE-dD"):
            parse_case(bad)
    with pytest.raises(ValueError, match="at least 1"):
        parse_case("flash-fwd-d0")


def test_a_clock_lock_holds_once_the_power_limit_is_lifted():
    """A lock below the ceiling yields to the power limit on the catalog GPU (a long
    tensor-bound call draws more than 700 W at 1.8 GHz) but holds on ``unlimited``'s copy."""
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=8192, head_dim=128,
                                  dtype="bf16", phase="fwd")
    gpu = load_gpu("h200-sxm")
    capped = perfsim.predict(w, gpu=gpu, algorithm="sdpa-cudnn", timing={"clock": 1.8e9})
    assert capped.clock_hz < 1.8e9
    free = perfsim.predict(w, gpu=per_clock.unlimited(gpu), algorithm="sdpa-cudnn",
                           timing={"clock": 1.8e9})
    assert free.clock_hz == pytest.approx(1.8e9)
    assert free.seconds < capped.seconds


@pytest.mark.parametrize("folder", sorted(per_clock.GPUS))
def test_every_profiled_case_is_scored_at_its_own_clock(folder):
    rows = per_clock.rows(folder)
    assert len(rows) >= 20
    for r in rows:
        # (at most the model's tensor-core clock ceiling: 1830 MHz, which one H100 kernel
        # passed by 0.35 %)
        assert 0.99 * r["clock_hz"] < r["model_clock_hz"] <= r["clock_hz"] + 1, r["case"]
        assert 1.0e9 < r["clock_hz"] < 2.0e9 and r["measured_s"] > 0, r["case"]
        assert r["error"] == pytest.approx(r["predicted_s"] / r["measured_s"] - 1)
    assert {r["phase"] for r in rows} == {"fwd", "bwd"}


@pytest.mark.parametrize("folder", sorted(per_clock.GPUS))
def test_the_pair_compared_is_the_phase_s_attention_kernel_on_both_sides(folder):
    """The profiled call's longest kernel is its phase's attention kernel (not a fill, a
    preprocess or the forward inside a backward call), and perfsim's longest is its main
    kernel of that phase (not a preprocess, a dQ conversion or a layout copy)."""
    for r in per_clock.rows(folder):
        assert r["model_kernel"] in (f"fa2_{r['phase']}", f"fa3_{r['phase']}"), r["case"]
        assert any(m in r["kernel"] for m in per_clock.KERNEL_MARKS[r["phase"]]), r["kernel"]
        other = "bwd" if r["phase"] == "fwd" else "fwd"
        assert not any(m in r["kernel"] for m in per_clock.KERNEL_MARKS[other]
                       if m != "flex_attention"), r["kernel"]


def test_repeat_profiles_of_a_case_count_once():
    rows = [{"case": "a", "error": 0.1, "impl": "flash", "phase": "fwd"},
            {"case": "a", "error": 0.3, "impl": "flash", "phase": "fwd"},
            {"case": "b", "error": -0.2, "impl": "flash", "phase": "fwd"}]
    merged = {r["case"]: r for r in per_clock.by_case(rows)}
    assert merged["a"]["error"] == pytest.approx(0.2) and merged["a"]["profiles"] == 2
    assert "| sdpa_flash | fwd | 2 | +0.0 % | 20.0 % | -20.0 … +20.0 % |" in (
        per_clock.group_table(rows))


def test_left_out_profiles_are_listed_with_a_reason():
    kept, skipped = per_clock.cases("h200")
    reasons = {why for _f, _c, why in skipped}
    assert "no cycle counter or duration" in reasons        # summary-dq-reductions.json
    assert any(c.startswith("math-") for _f, c, _w in skipped)
    assert not {(f, c) for f, c, _w in skipped} & {(k["file"], k["case"]) for k in kept}
    text = per_clock.report("h200")
    for _file, case, _why in skipped:
        assert f"- {case} (" in text
    with pytest.raises(perfsim.PerfsimError, match="allowed: h200, h100"):
        per_clock.rows("x")


@pytest.mark.parametrize("folder", sorted(per_clock.GPUS))
def test_the_committed_report_is_what_the_current_model_gives(folder):
    committed = (ROOT / f"validate/reports/{folder}/per-clock.md").read_text()
    assert committed == per_clock.report(folder)


def test_the_cli_refuses_a_wrong_output_in_one_line(tmp_path, capsys):
    assert per_clock.main(["--out", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "allowed: .md" in err
