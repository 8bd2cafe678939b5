"""The validation report from a synthetic results.jsonl: the numbers it prints, rank agreement,
Kendall tau, the derived "main cause" sentences, CSV and plot files."""

from __future__ import annotations

import csv
import json

import pytest

from perfsim import cli
from perfsim.validate import analysis, report
from perfsim.validate.runner import RESULTS_FILE, ResultStore
from perfsim.validate.shapes import Shape


def _rec(algorithm, shape: Shape, predicted_ms, measured_ms, *, kind="own", status="ok",
         bound="tensor", model_name=None):
    return {"key": f"{shape.key}|{algorithm}", **shape.fields(), "algorithm": algorithm,
            "kind": kind, "model_name": model_name or algorithm, "model": algorithm,
            "status": status, "reason": "" if status == "ok" else "CUDA out of memory",
            "predicted_s": predicted_ms * 1e-3 if predicted_ms else None,
            "measured_s": measured_ms * 1e-3 if measured_ms else None,
            "measured_p20_s": measured_ms * 0.99e-3 if measured_ms else None,
            "measured_p80_s": measured_ms * 1.01e-3 if measured_ms else None,
            "achieved_tflops": 100.0, "achieved_gbps": 900.0, "predicted_bound": bound,
            "device": "NVIDIA H200", "gpu_profile": "h200-sxm-calibrated",
            "finished_at": "2026-11-29T12:00:00+00:00"}


A = Shape(4, 16, 4096, 128, False)
B = Shape(4, 16, 4096, 128, True)
C = Shape(16, 32, 1024, 64, False)


@pytest.fixture
def records():
    return [
        # fa2 errors: +10 %, -20 %, +5 %  -> median |err| 10 %, max 20 %, median signed +5 %
        _rec("fa2", A, 1.10, 1.0), _rec("fa2", B, 0.40, 0.5), _rec("fa2", C, 0.21, 0.2),
        # fa1 errors: +50 % (A), 0 % (B), -40 % (C, bound hbm)
        _rec("fa1", A, 3.0, 2.0), _rec("fa1", B, 1.0, 1.0), _rec("fa1", C, 0.6, 1.0,
                                                                   bound="hbm"),
        _rec("standard", A, 5.0, None, status="oom"),
        _rec("sdpa_flash", A, 0.9, 1.2, kind="external", model_name="fa2"),
    ]


def _write(tmp_path, records):
    store = ResultStore(tmp_path / RESULTS_FILE)
    for r in records:
        store.append(r)


def test_error_stats_numbers(records):
    stats = {(s["group"], s["phase"]): s for s in analysis.error_stats(records)}
    fa2 = stats[("fa2", "fwd")]
    assert fa2["compared"] == 3 and fa2["within_target"] == 2
    assert fa2["median_abs"] == pytest.approx(0.10)
    assert fa2["max_abs"] == pytest.approx(0.20)
    assert fa2["median_signed"] == pytest.approx(0.05)
    assert stats[("standard", "fwd")]["statuses"] == {"oom": 1}
    ext = stats[("sdpa_flash (vs fa2 model)", "fwd")]
    assert ext["kind"] == "external" and ext["median_signed"] == pytest.approx(-0.25)


def test_kendall_tau():
    assert analysis.kendall_tau([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert analysis.kendall_tau([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert analysis.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert analysis.kendall_tau([1], [1]) is None
    assert analysis.kendall_tau([1, 1], [2, 3]) is None


def test_rank_agreement(records):
    ra = analysis.rank_agreement(records)
    # A: predicted fa2 1.1 < fa1 3.0, measured fa2 1.0 < fa1 2.0 -> agree; B: predicted fa2 0.4
    # < fa1 1.0, measured fa2 0.5 < fa1 1.0 -> agree; C: predicted fa2 0.21 < fa1 0.6, measured
    # fa2 0.2 < fa1 1.0 -> agree. External rows are not ranked.
    assert ra["n_shapes"] == 3 and ra["fraction_fastest"] == 1.0 and ra["mean_tau"] == 1.0
    flipped = [dict(r, measured_s=5e-3) if r["algorithm"] == "fa2" and r["key"].startswith(
        C.key) else r for r in records]
    ra = analysis.rank_agreement(flipped)
    assert ra["fraction_fastest"] == pytest.approx(2 / 3)
    assert ra["mean_tau"] == pytest.approx(1 / 3)


def test_main_cause_offset_vs_trend():
    shapes = [Shape(1, 8, n, 64, c) for n in (512, 1024, 2048, 4096) for c in (False, True)]
    offset = [_rec("fa3", s, 1.3, 1.0) for s in shapes]
    text = analysis.main_cause(offset)
    assert "median error +30.0% over 8 rows" in text and "offset common to all shapes" in text
    assert "tensor in 8 of 8 rows" in text
    # error grows with N: -10 % at 512 to +20 % at 4096, causal does not matter
    errors = {512: -0.10, 1024: 0.0, 2048: 0.10, 4096: 0.20}
    trend = [_rec("fa3", s, 1.0 + errors[s.seqlen_q], 1.0) for s in shapes]
    text = analysis.main_cause(trend)
    assert "follows sequence length N" in text
    assert "512: -10% (2)" in text and "4096: +20% (2)" in text
    assert "+10.0% per doubling" in text


def test_markdown_and_files(tmp_path, records):
    _write(tmp_path, records)
    paths = report.write_report(tmp_path)
    md = paths["md"].read_text()
    assert "| fa2 | fwd | 3 | 10.0% | 20.0% | +5.0% | 2/3 | – |" in md
    assert "| standard | fwd | 0 | – | – | – | – | oom 1 |" in md
    assert "sdpa_flash (vs fa2 model)" in md
    assert "fastest kernel is the measured fastest on 100% of 3 shapes" in md
    assert "| standard | oom | CUDA out of memory | 1 |" in md
    assert "B=4 H=16 N=4096 d=128 causal fwd | fa2 | fa2 | 0.4 | 0.5 (0.495–0.505) | -20.0%" in md
    assert "**fa1, fwd**" in md and "Main cause" in md
    with open(paths["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(records) and rows[0]["algorithm"] == "fa2"
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_only_cli(tmp_path, records, capsys):
    _write(tmp_path, records)
    assert cli.main(["validate", "--report-only", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fa2" in out and "10.0%" in out and "20.0%" in out
    assert (tmp_path / "report.md").is_file() and (tmp_path / "scatter.png").is_file()


def test_report_with_no_compared_rows(tmp_path):
    _write(tmp_path, [_rec("fa2", A, 1.0, None, status="unsupported")])
    md = report.write_report(tmp_path)["md"].read_text()
    assert "No shape has two or more compared own kernels" in md
    assert json.loads((tmp_path / RESULTS_FILE).read_text())["status"] == "unsupported"


def test_an_interrupted_report_leaves_the_old_one_whole(tmp_path, records, monkeypatch):
    """A fresh user's break attempt: a Ctrl-C while the scatter plot was drawn left report.md
    and results.csv new beside the old scatter.png. The three files are renamed together."""
    _write(tmp_path, records)
    paths = report.write_report(tmp_path)
    before = {k: p.read_bytes() for k, p in paths.items()}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "save_png", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.write_report(tmp_path, note="a new note")
    assert {k: p.read_bytes() for k, p in paths.items()} == before
    assert not list(tmp_path.glob(".*.tmp"))
    monkeypatch.undo()
    report.write_report(tmp_path, note="a new note")
    assert "a new note" in paths["md"].read_text()
