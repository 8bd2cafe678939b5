"""perfsim validate without a GPU: plan, JSONL append/resume, time limit, CLI exits, dry run.

The measuring function is a fake here; the GPU one is exercised on the H200 only.
"""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

from perfsim import cli
from perfsim.validate.runner import (
    RESULTS_FILE,
    ResultStore,
    Row,
    pending,
    plan,
    run,
)
from perfsim.validate.shapes import GRIDS, TOKENS_PER_CALL, Shape, grid

ALGOS = ("fa1", "fa2")


def _rows(n_shapes=3):
    shapes = [Shape(batch=2, heads=4, seqlen_q=128 * (i + 1), head_dim=64, causal=bool(i % 2))
              for i in range(n_shapes)]
    return plan(shapes, ALGOS, ["sdpa_flash"])


def _fake(calls):
    def measure(row: Row) -> dict:
        calls.append(row.key)
        return {"status": "ok", "predicted_s": 1e-3, "measured_s": 1.25e-3}
    return measure


class _Clock:
    """Fake monotonic clock: each reading advances by ``step`` seconds."""

    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        self.t += self.step
        return self.t


# ------------------------------------------------------------------ plan and grids
def test_plan_orders_own_kernels_first_and_flex_last():
    shapes = [Shape(2, 4, 128, 64, False), Shape(2, 4, 256, 64, True)]
    rows = plan(shapes, ALGOS, ["flex", "sdpa_flash", "sdpa_cudnn"])
    assert [(r.shape.seqlen_q, r.algorithm) for r in rows] == [
        (128, "fa1"), (128, "fa2"), (256, "fa1"), (256, "fa2"),
        (128, "sdpa_flash"), (128, "sdpa_cudnn"), (256, "sdpa_flash"), (256, "sdpa_cudnn"),
        (128, "flex"), (256, "flex")]
    assert {r.kind for r in rows[:4]} == {"own"} and {r.kind for r in rows[4:]} == {"external"}
    assert len({r.key for r in rows}) == len(rows)


def test_plan_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown algorithm"):
        plan([Shape(1, 1, 64, 64, False)], ["fa9"])
    with pytest.raises(ValueError, match="unknown backend"):
        plan([Shape(1, 1, 64, 64, False)], [], ["sdpa_magic"])


def test_default_grid_is_the_fa2_fa3_benchmark_grid_plus_extras():
    bench = grid("bench")
    assert len(bench) == 6 * 2 * 2
    assert all(s.batch * s.seqlen_q == TOKENS_PER_CALL for s in bench)
    assert {(s.head_dim, s.heads) for s in bench} == {(64, 32), (128, 16)}
    assert {s.heads * s.head_dim for s in bench} == {2048}
    default = grid("default")
    assert len(default) == 24 + 8 + 8 + 4 == len(GRIDS["default"]())
    assert any(s.kv_heads == 8 and s.heads == 32 for s in default)
    assert {(s.batch, s.seqlen_q) for s in grid("small-batch")} == {(1, 2048), (1, 8192)}
    assert len(grid("quick")) == 6
    assert all(s.phase == "bwd" for s in grid("quick", phase="bwd"))


def test_grid_from_json_file(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps([{"batch": 1, "heads": 2, "seqlen_q": 96, "head_dim": 32,
                                 "causal": True}]))
    (shape,) = grid(str(path))
    assert shape.key == "b1_h2_hkv2_q96_k96_d32_causal_bf16_fwd"


# ------------------------------------------------------------------ store and resume
@pytest.mark.parametrize("text, needle", [
    ("[]", "expected a non-empty JSON list of shapes"),
    ('{"shapes": 3}', "expected a non-empty JSON list of shapes"),
    ("{}", 'got {} (a JSON object)'),
    ("null", "got null (a JSON null)"),
    ('""', 'got "" (a JSON string)'),
    ("[[1, 2]]", "shape 1 is [1, 2], not an object with the fields batch"),
    ('[{"batch": 1}]', "shape 1: missing heads, seqlen_q, head_dim, causal"),
    ('[{"batch": 1, "heads": 8, "seqlen": 128, "head_dim": 64, "causal": false}]',
     "shape 1: unknown field(s) seqlen; missing seqlen_q"),
    ('[{"batch": 1, "heads": 8, "seqlen_q": 128, "head_dim": 64, "causal": false},'
     ' {"batch": 0, "heads": 8, "seqlen_q": 128, "head_dim": 64, "causal": false}]',
     "shape 2: AttentionWorkload.batch"),
])
def test_malformed_grid_files_name_the_shape_and_field(tmp_path, text, needle):
    """Python's own messages came through before ("Shape() argument after ** must be a
    mapping, not str", "Shape.__init__() got an unexpected keyword argument 'seqlen'"), and
    an empty list read as "no algorithms and no external backends selected"."""
    from perfsim.errors import PerfsimError

    path = tmp_path / "g.json"
    path.write_text(text)
    with pytest.raises(PerfsimError, match=re.escape(needle)):
        grid(str(path))


def test_store_appends_one_line_per_record_and_reads_last_per_key(tmp_path):
    store = ResultStore(tmp_path / RESULTS_FILE)
    store.append({"key": "a", "status": "error"})
    store.append({"key": "b", "status": "ok"})
    store.append({"key": "a", "status": "ok", "measured_s": (1, 2)})
    lines = (tmp_path / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)
    loaded = store.load()
    assert loaded["a"]["status"] == "ok" and loaded["a"]["measured_s"] == [1, 2]


def test_store_survives_a_truncated_last_line(tmp_path):
    path = tmp_path / RESULTS_FILE
    path.write_text('{"key": "a", "status": "ok"}\n{"key": "b", "sta')
    store = ResultStore(path)
    assert list(store.load()) == ["a"] and store.skipped_lines == 1
    store.append({"key": "c", "status": "ok"})
    assert list(store.load()) == ["a", "c"]


def test_interrupted_run_resumes_without_repeating_rows(tmp_path):
    rows = _rows(3)
    store = ResultStore(tmp_path / RESULTS_FILE)
    calls = []

    def dies_on_fourth(row):
        if len(calls) == 3:
            raise KeyboardInterrupt
        return _fake(calls)(row)

    with pytest.raises(KeyboardInterrupt):
        run(rows, dies_on_fourth, store)
    assert len(store.load()) == 3
    again = []
    summary = run(rows, _fake(again), store)
    assert summary.skipped == 3 and len(summary.measured) == len(rows) - 3
    assert set(again).isdisjoint(calls[:3])
    assert set(store.load()) == {r.key for r in rows}
    assert len((tmp_path / RESULTS_FILE).read_text().splitlines()) == len(rows)


def test_records_carry_identity_wall_time_and_errors(tmp_path):
    rows = _rows(1)
    store = ResultStore(tmp_path / RESULTS_FILE)

    def flaky(row):
        if row.algorithm == "fa2":
            raise RuntimeError("boom\nsecond line")
        return {"status": "ok"}

    summary = run(rows, flaky, store)
    rec = store.load()[rows[1].key]
    assert rec["status"] == "error" and rec["reason"] == "RuntimeError: boom"
    assert rec["algorithm"] == "fa2" and rec["seqlen_q"] == 128 and rec["kind"] == "own"
    assert "wall_s" in rec and "finished_at" in rec
    assert len(summary.measured) == 3
    assert pending(rows, store.load()) == []
    assert pending(rows, store.load(), retry_errors=True) == [rows[1]]
    retried = []
    run(rows, _fake(retried), store, retry_errors=True)
    assert retried == [rows[1].key] and store.load()[rows[1].key]["status"] == "ok"


def test_abort_record_is_stored_and_stops_the_run(tmp_path):
    rows = _rows(2)
    store = ResultStore(tmp_path / RESULTS_FILE)
    summary = run(rows, lambda row: {"status": "error", "abort_run": "context lost"}, store)
    assert summary.aborted == "context lost" and summary.remaining == len(rows) - 1
    (rec,) = store.load().values()
    assert "abort_run" not in rec


def test_limit_seconds_stops_cleanly_and_the_rest_runs_later(tmp_path):
    rows = _rows(3)  # 9 rows
    store = ResultStore(tmp_path / RESULTS_FILE)
    # Each clock reading advances 1 s, three readings per row. The first row of a kernel
    # reserves 30 s, later ones 1.5 x its longest row (1 s): fa1 starts at 1 s elapsed
    # (31 <= 35), fa2 at 4 s (34), the other four own rows by 16 s, then sdpa_flash at 19 s
    # (49 > 35): the run stops there.
    summary = run(rows, _fake([]), store, limit_seconds=35, clock=_Clock(1.0))
    assert summary.stopped_for_time and len(summary.measured) == 6
    assert summary.remaining == len(rows) - 6
    rest = run(rows, _fake([]), store, limit_seconds=1e9, clock=_Clock(1.0))
    assert not rest.stopped_for_time and len(rest.measured) == summary.remaining
    assert len(store.load()) == len(rows)


def test_limit_too_small_for_any_row_measures_nothing(tmp_path):
    summary = run(_rows(1), _fake([]), ResultStore(tmp_path / RESULTS_FILE), limit_seconds=5)
    assert summary.stopped_for_time and summary.measured == [] and summary.remaining == 3


# ------------------------------------------------------------------ CLI
def _no_torch_cuda(monkeypatch):
    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(is_available=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", fake)


@pytest.mark.parametrize("argv", [["validate", "--grid", "quick"],
                                  ["calibrate", "--out", "x.toml"]])
def test_no_gpu_prints_one_line_and_exits_1(argv, tmp_path, monkeypatch, capsys):
    _no_torch_cuda(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err == (f"perfsim {argv[0]}: no CUDA GPU found (torch.cuda.is_available() is "
                   "False); nothing was timed\n")
    assert not (tmp_path / "validate-results").exists() and not (tmp_path / "x.toml").exists()


def test_no_gpu_message_without_torch(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert cli.main(["validate", "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err == ("perfsim validate: no CUDA GPU found (torch is not "
                                       "installed); nothing was timed\n")


def test_dry_run_lists_rows_and_marks_finished_ones(tmp_path, capsys):
    rows = plan(grid("quick"), ("fa2",), ["sdpa_flash"])
    ResultStore(tmp_path / RESULTS_FILE).append({"key": rows[0].key, "status": "ok"})
    assert cli.main(["validate", "--dry-run", "--json", "--grid", "quick", "--algorithms",
                     "fa2", "--backends", "sdpa_flash", "--out", str(tmp_path)]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in listing] == [r.key for r in rows]
    assert listing[0]["state"] == "ok" and {r["state"] for r in listing[1:]} == {"planned"}
    fa2 = [r for r in listing if r["algorithm"] == "fa2"]
    assert all(r["predicted_s"] > 0 and r["model"].startswith("fa2(") for r in fa2)


def test_dry_run_text_without_external(tmp_path, capsys):
    assert cli.main(["validate", "--dry-run", "--grid", "quick", "--no-external",
                     "--algorithms", "fa1,fa2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("│")]      # the plan table's body
    assert len(rows) == 6 * 2 and out[-1].startswith("12 rows: 12 planned")


@pytest.mark.parametrize("argv, message", [
    (["validate", "--dry-run", "--grid", "nope"], "unknown grid"),
    (["validate", "--dry-run", "--algorithms", "fa9"], "unknown algorithm"),
    (["validate", "--dry-run", "--gpu", "nope"], "unknown GPU"),
    (["validate", "--report-only", "/nonexistent"], "no results.jsonl"),
])
def test_bad_input_is_one_line_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_register_functions_add_subcommands():
    from perfsim.cli import _Parser
    from perfsim.validate import cli as vcli

    parser = _Parser(prog="perfsim")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for register in vcli.COMMANDS:
        register(sub)
    args = parser.parse_args(["validate", "--no-external", "--limit-seconds", "420"])
    assert args.func is vcli.cmd_validate and args.external is False
    assert args.limit_seconds == 420 and args.phase == "fwd"
    args = parser.parse_args(["calibrate", "--out", "p.toml"])
    assert args.func is vcli.cmd_calibrate and args.base == "auto"
