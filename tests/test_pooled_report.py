"""The pooled default-path table over every committed grid (validate/pooled_report.py), on
grids made here (no GPU)."""

import json

from perfsim.validate import pooled_report as pr


def _row(impl, phase, measured_s, device="NVIDIA H200", **shape):
    s = {"batch": 2, "heads": 16, "kv_heads": 16, "seqlen_q": 4096, "seqlen_k": 4096,
         "head_dim": 128, "causal": False, "dtype": "bf16", **shape}
    return {"key": f"{impl}|{phase}|{json.dumps(s, sort_keys=True)}", "impl": impl,
            "phase": phase, "status": "ok", "measured_s": measured_s,
            "sm_clock_mean_hz": 1.9e9, "power_mean_w": 650.0, "grid_flops": 2.2e12,
            "launch_config": {"device": device}, **s}


def _grid(root, name, rows):
    (root / name).mkdir()
    (root / name / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_pools_main_and_holdouts_per_gpu_and_leaves_out_retimings(tmp_path):
    _grid(tmp_path, "h200-external", [_row("sdpa_flash", "fwd", 5e-3),
                                      _row("sdpa_cudnn", "fwd", 3e-3)])
    # the predicted fastest (cuDNN on Hopper) measured slower here: a miss in this grid
    _grid(tmp_path, "h200-external-holdout7", [_row("sdpa_flash", "fwd", 2e-3, head_dim=64),
                                               _row("sdpa_cudnn", "fwd", 3e-3, head_dim=64)])
    _grid(tmp_path, "h200-settled-external", [_row("sdpa_flash", "fwd", 1.0)])
    _grid(tmp_path, "h100-external-holdout50",
          [_row("sdpa_flash", "bwd", 9e-3, device="NVIDIA H100 80GB HBM3")])
    assert [p.name for p in pr.grids(tmp_path)] == [
        "h100-external-holdout50", "h200-external", "h200-external-holdout7"]
    data = pr.pooled(tmp_path)
    assert set(data) == {("h200-sxm", "main"), ("h200-sxm", "hold-out"),
                         ("h100-sxm5", "hold-out")}
    assert len(data[("h200-sxm", "main")]) == 2
    assert {s["grid"] for s in data[("h200-sxm", "hold-out")]} == {"h200-external-holdout7"}
    main = pr._rank(data[("h200-sxm", "main")])
    held = pr._rank(data[("h200-sxm", "hold-out")])
    assert main["shapes"] == held["shapes"] == 1
    # a shape is counted per grid; the pooled row adds the grids' pairs
    both = pr._rank(data[("h200-sxm", "main")] + data[("h200-sxm", "hold-out")])
    assert both["shapes"] == 2 and both["agree"] == main["agree"] + held["agree"]
    text = pr.markdown(data)
    assert "## h200-sxm, hold-out (1 grid)" in text
    assert "| h200-sxm | pooled | 2 |" in text
    assert "| h100-sxm5 | hold-out | 0 | 0 | - | 0 |" in text   # one implementation


def test_unknown_device_is_one_error(tmp_path, monkeypatch, capsys):
    _grid(tmp_path, "x-external", [_row("sdpa_flash", "fwd", 5e-3, device="Some GPU")])
    monkeypatch.setattr(pr, "REPORTS", tmp_path)
    assert pr.main([]) == 2
    assert "Some GPU" in capsys.readouterr().err
