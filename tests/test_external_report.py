"""The default-path scorer of the kernels users call (validate/external_report.py), on rows
made here (no GPU) and on the committed H200 rows."""

import json
from pathlib import Path

import pytest

from perfsim.validate import external_report as er

ROOT = Path(__file__).resolve().parent.parent


def _row(impl, phase, measured_s, clock=1.9e9, **shape):
    s = {"batch": 2, "heads": 16, "kv_heads": 16, "seqlen_q": 4096, "seqlen_k": 4096,
         "head_dim": 128, "causal": False, "dtype": "bf16", **shape}
    return {"key": f"{impl}|{phase}|{json.dumps(s, sort_keys=True)}", "impl": impl,
            "phase": phase, "status": "ok", "measured_s": measured_s,
            "sm_clock_mean_hz": clock, "power_mean_w": 650.0, "grid_flops": 2.2e12, **s}


def test_scores_rows_ranks_and_skips_what_cannot_be_compared(tmp_path):
    import perfsim

    rows = [_row("sdpa_flash", "fwd", 5e-3), _row("sdpa_cudnn", "fwd", 3e-3),
            _row("flex", "fwd", float("nan")), {**_row("cute", "fwd", 3e-3), "status": "oom"}]
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows)
                                            + "\n{torn line\n")
    text = er.write(tmp_path, tmp_path / "out", "h200-sxm")
    assert "1 unreadable lines skipped" in text
    scored = er.score(er.load_rows(tmp_path / "results.jsonl")[:-1], "h200-sxm")
    assert {s["impl"] for s in scored} == {"sdpa_flash", "sdpa_cudnn"}     # NaN, oom skipped
    flash = [s for s in scored if s["impl"] == "sdpa_flash"][0]
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=4096, head_dim=128)
    assert flash["predicted_s"] == pytest.approx(
        perfsim.predict(w, "h200-sxm", "sdpa-flash").seconds)
    assert er.ranking(scored) == {"shapes": 1, "agree": 1, "misses": []}
    # the clock criterion: against the clock the SMs tick at under tensor-core work
    assert flash["measured_nvml_clock_hz"] == 1.9e9
    assert flash["measured_clock_hz"] == pytest.approx(1.9e9 * er.TENSOR_TICK_OVER_NVML)
    assert flash["clock_error"] == pytest.approx(
        flash["predicted_clock_hz"] / (1.9e9 * er.TENSOR_TICK_OVER_NVML) - 1)
    # the H100's attention kernels ticked at NVML's clock (reports/h100/probes/tick): its
    # rows are compared with NVML's reading as it is, a device not probed takes the H200's
    probe = json.loads((ROOT / "validate/reports/h100/probes/tick/tick-clock.json").read_text())
    ratios = sorted(c["tick_over_nvml"] for c in probe["cases"]
                    if c["case"].startswith(("sdpa", "flex")))
    assert probe["device"] == "NVIDIA H100 80GB HBM3"
    assert er._tick_rule(probe["device"])[0] == pytest.approx(ratios[len(ratios) // 2],
                                                              abs=0.002)
    assert er._tick_rule("NVIDIA H200") == er._tick_rule(None) == (er.TENSOR_TICK_OVER_NVML,
                                                                   None)
    # ... up to the clock its tensor-core kernels tick at alone, with no power limit reached
    # (Nsight Compute's cycles over duration, reports/h100/probes/ncu/summary-clocks.json):
    # per implementation and phase the longest such kernel of each profiled call, else the
    # median of all nine
    ncu = json.loads((ROOT / "validate/reports/h100/probes/ncu/summary-clocks.json")
                     .read_text())
    tensor = {case: [k for k in kernels if (k.get("tensor_pipe_pct") or 0) >= 10]
              for case, kernels in ncu["cases"].items()}
    clocks = sorted(k["effective_clock_hz"] for ks in tensor.values() for k in ks)
    ceilings = er.kernel_ceilings(er.H100_NCU_CLOCKS)
    assert len(clocks) == 9 and ceilings[None] == clocks[4]
    bwd = max(tensor["cudnn-bwd-d128"], key=lambda k: k["duration_s"])
    assert "bprop" in bwd["kernel"] and ceilings["sdpa_cudnn", "bwd"] == \
        bwd["effective_clock_hz"]
    assert ceilings["sdpa_cudnn", "fwd"] == pytest.approx(1.706e9, rel=1e-3)
    assert ceilings["sdpa_flash", "fwd"] == pytest.approx(1.832e9, rel=1e-3)   # d 64 and 128
    h100 = {"launch_config": {"device": "NVIDIA H100 80GB HBM3"}}
    for impl, phase in (("sdpa_flash", "fwd"), ("sdpa_cudnn", "fwd"), ("cute", "bwd")):
        row = {**_row(impl, "fwd", 5e-3), "phase": phase, **h100}
        scored_row = er.score([row], "h100-sxm5")[0]                    # NVML read 1.9 GHz
        assert scored_row["measured_clock_hz"] == ceilings.get((impl, phase), ceilings[None])
        capped = er.score([{**row, "sm_clock_mean_hz": 1.6e9}], "h100-sxm5")[0]
        assert capped["measured_clock_hz"] == pytest.approx(1.6e9)         # under: NVML's
    assert "at most the clock its tensor-core kernels tick at alone" in er._ratios_text([h100])
    assert er._ratios_text([]) == f"{er.TENSOR_TICK_OVER_NVML:g}"
    assert er.tensor_tick_clock("NVIDIA H200", 1.9e9) == pytest.approx(
        1.9e9 * er.TENSOR_TICK_OVER_NVML)
    # a calibrated profile's rates are per NVML clock: its clock is compared with NVML's
    profile = ROOT / "validate/profiles/h200-sxm-calibrated.toml"
    calibrated = er.score(er.load_rows(tmp_path / "results.jsonl")[:-1], str(profile))
    assert {s["measured_clock_hz"] for s in calibrated} == {1.9e9}
    assert (tmp_path / "out" / "rows.csv").is_file()
    assert (tmp_path / "out" / "scatter.png").stat().st_size > 10_000


@pytest.mark.parametrize("grid, gpu", [("h200-external", "h200-sxm"),
                                       ("h200-external-holdout4", "h200-sxm"),
                                       ("h200-external-holdout5", "h200-sxm"),
                                       ("h200-external-holdout52", "h200-sxm"),
                                       ("h100-external", "h100-sxm5"),
                                       ("h100-external-holdout51", "h100-sxm5"),
                                       ("h100-external-holdout52", "h100-sxm5"),
                                       ("h100-external-holdout54", "h100-sxm5"),
                                       # FlexAttention's forward by length class (2026-12-06)
                                       ("h200-external-holdout13", "h200-sxm"),
                                       ("h200-external-holdout15", "h200-sxm"),
                                       ("h100-external-holdout53", "h100-sxm5"),
                                       ("h100-external-holdout56", "h100-sxm5"),
                                       ("h100-external-holdout57", "h100-sxm5"),
                                       # a random draw, measured 2026-12-06 (11th session)
                                       ("h100-external-holdout58", "h100-sxm5"),
                                       # another, measured 2026-12-06 (12th session)
                                       ("h100-external-holdout59", "h100-sxm5"),
                                       # head dims between flash-attn 2's compiled ones
                                       ("h100-external-holdout60", "h100-sxm5"),
                                       # drawn after cuDNN's forward took its pipes in turn
                                       ("h100-external-holdout63", "h100-sxm5"),
                                       # and the calibrated profile's score
                                       ("h200-external", "calibrated"),
                                       ("h200-external-holdout13", "calibrated")])
def test_committed_default_path_scores_are_reproducible(grid, gpu):
    """The committed score of the external rows (the H200's, and the H100's measured
    2026-12-05; the calibrated H200 profile's too) is what the current model gives."""
    folder = "h200-sxm-calibrated" if gpu == "calibrated" else gpu
    if gpu == "calibrated":
        gpu = str(ROOT / "validate/profiles/h200-sxm-calibrated.toml")
    committed = (ROOT / f"validate/reports/{grid}/score-{folder}/report.md").read_text()
    rows = er.load_rows(ROOT / f"validate/reports/{grid}/results.jsonl")
    table = er.group_table(er.score(rows, gpu))
    for t in table:
        assert f"| {t['impl']}" in committed
        assert f"{100 * t['median_abs']:.1f} %" in committed, t
        if t["clock_median_abs"] is not None:     # and the clock comparison (tick rules)
            assert f"{100 * t['clock_median_abs']:.1f} %" in committed, t


def test_a_ranking_miss_carries_the_measured_gap():
    """Each miss says how much longer the predicted fastest measured (most misses of the
    committed grid are near ties: the report counts them)."""
    base = {"phase": "fwd", "batch": 1, "heads": 8, "kv_heads": 8, "seqlen_q": 1024,
            "head_dim": 64, "causal": False, "dtype": "bf16"}
    scored = [{**base, "impl": "a", "measured_s": 1.00, "predicted_s": 1.1},
              {**base, "impl": "b", "measured_s": 1.02, "predicted_s": 1.0}]
    (miss,) = er.ranking(scored)["misses"]
    assert miss[1:3] == ("a", "b") and miss[3] == pytest.approx(0.02)


def test_rescoring_keeps_a_committed_score_unless_forced(tmp_path, capsys):
    """A fresh user's report: rescoring a hold-out rewrote its committed score (the record of
    the model it was frozen at) in place. Now an existing ``score-GPU`` is kept and the new
    score goes to ``score-GPU/regenerated`` unless ``--force``."""
    rows = [_row("sdpa_flash", "fwd", 5e-3), _row("sdpa_cudnn", "fwd", 3e-3)]
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    committed = tmp_path / "score-h200-sxm"
    assert er.main([str(tmp_path), "--gpu", "h200-sxm"]) == 0
    first = (committed / "report.md").read_text()
    (committed / "report.md").write_text("the frozen record\n")
    assert er.main([str(tmp_path), "--gpu", "h200-sxm"]) == 0
    assert (committed / "report.md").read_text() == "the frozen record\n"
    assert (committed / "regenerated" / "report.md").read_text() == first
    assert "--force overwrites the score itself" in capsys.readouterr().err
    # a second rescoring replaces the regenerated one, and says so
    assert er.main([str(tmp_path), "--gpu", "h200-sxm"]) == 0
    assert "replacing the earlier one there" in capsys.readouterr().err
    assert er.main([str(tmp_path), "--gpu", "h200-sxm", "--force"]) == 0
    assert (committed / "report.md").read_text() == first
    # naming the committed folder with --out is no way around it
    (committed / "report.md").write_text("the frozen record\n")
    assert er.main([str(tmp_path), "--gpu", "h200-sxm", "--out", str(committed)]) == 0
    assert (committed / "report.md").read_text() == "the frozen record\n"
    # an --out that cannot be a folder is one line, exit 2 (a traceback, or a folder made
    # anywhere, before)
    (tmp_path / "a-file").write_text("x")
    for out, needle in ((tmp_path / "a-file", "is a file"),
                        (tmp_path / "missing" / "x", "does not exist")):
        capsys.readouterr()
        assert er.main([str(tmp_path), "--gpu", "h200-sxm", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "missing").exists()


def test_the_default_gpu_is_the_one_the_rows_were_measured_on(tmp_path, capsys):
    """Without --gpu the rows' own device picks the catalog entry (an H100's rows were
    scored against the H200 before)."""
    import shutil

    src = ROOT / "validate/reports/h100-external-holdout56/results.jsonl"
    (tmp_path / "rows").mkdir()
    shutil.copy(src, tmp_path / "rows" / "results.jsonl")
    assert er.measured_gpu(tmp_path / "rows") == "h100-sxm5"
    assert er.main([str(tmp_path / "rows")]) == 0
    assert (tmp_path / "rows" / "score-h100-sxm5" / "report.md").is_file()
    assert er.main([str(tmp_path / "nothing")]) == 2
    assert "no results.jsonl" in capsys.readouterr().err


def test_scoring_rows_against_another_gpu_says_so(tmp_path, capsys):
    """A fresh user's report: ``--gpu rtx-4090`` on the H200's rows scored them (+250 %)
    without a word. A profile of another device now gets a warning; the measured device's
    own entry and its calibrated profile get none."""
    import shutil

    src = ROOT / "validate/reports/h100-external-holdout56/results.jsonl"
    (tmp_path / "rows").mkdir()
    shutil.copy(src, tmp_path / "rows" / "results.jsonl")
    assert er.main([str(tmp_path / "rows"), "--gpu", "rtx-4090"]) == 0
    err = capsys.readouterr().err
    assert "warning: the rows were measured on 'NVIDIA H100 80GB HBM3'" in err
    assert er.main([str(tmp_path / "rows"), "--gpu", "h100-sxm5", "--force"]) == 0
    assert "warning" not in capsys.readouterr().err
