"""Issue 10, data safety: outputs written atomically (kill tests), Parquet, robust reading of
validation results, and ``--report-only --repredict`` never overwriting committed results."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from perfsim.cli import main
from perfsim.errors import PerfsimError
from perfsim.files import atomic_write, check_output, read_text

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "validate" / "reports" / "h200"


# ------------------------------------------------------------------ atomic writes
def test_atomic_write_keeps_the_previous_file_on_error(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("previous\n")
    with pytest.raises(RuntimeError), atomic_write(path) as tmp:
        tmp.write_text("half a fi")
        raise RuntimeError("disk full")
    assert path.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv"]
    with atomic_write(path) as tmp:
        tmp.write_text("new\n")
    assert path.read_text() == "new\n" and (path.stat().st_mode & 0o777) != 0o600


def test_read_text_errors_are_one_line(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_bytes(b"a = 1\n\xff\xfe")
    for path, needle in ((bad, "not UTF-8 text (byte 6"), (tmp_path, "is a folder"),
                         (tmp_path / "nope", "does not exist"),
                         (Path(os.devnull), "is not a regular file")):
        with pytest.raises(PerfsimError, match=re.escape(needle)):
            read_text(path)
    with pytest.raises(PerfsimError, match="unknown extension"):
        check_output(tmp_path / "x.txt", (".csv",))


SWEEP = """
gpus = ["h100-sxm5"]
algorithms = ["fa2"]
[workload]
batch = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
heads = [1, 2, 4, 8, 16]
seqlen_q = {seqlens}
head_dim = 64
"""


def _sweep_config(tmp_path, n_seqlens: int) -> Path:
    cfg = tmp_path / "big.toml"
    cfg.write_text(SWEEP.format(seqlens=list(range(1, n_seqlens + 1))))
    return cfg


def _write_started(folder) -> bool:
    """A ``.rows.csv.*.tmp`` in ``folder`` holds bytes: the sweep's write has begun (an empty
    one may be check_output's probe of the folder, there for microseconds before the sweep is
    computed; a file may also go between the listing and its size)."""
    for p in folder.glob(".rows.csv.*.tmp"):
        try:
            if p.stat().st_size:
                return True
        except FileNotFoundError:
            pass
    return False


def test_sigkill_during_sweep_out_leaves_the_previous_file(tmp_path):
    """Killed while the CSV is being written, the previous file at --out is intact and no
    partial file takes its place."""
    cfg = _sweep_config(tmp_path, 4000)                     # 200 000 rows, seconds of CSV
    out = tmp_path / "rows.csv"
    previous = b"batch,seconds\n1,0.5\n"
    out.write_bytes(previous)
    proc = subprocess.Popen([sys.executable, "-m", "perfsim.cli", "sweep", str(cfg), "--out",
                             str(out), "--quiet"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while not _write_started(tmp_path):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert out.read_bytes() == previous


def test_sweep_out_parquet_and_csv_hold_the_same_rows(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    cfg = _sweep_config(tmp_path, 3)
    csv, parquet = tmp_path / "r.csv", tmp_path / "r.parquet"
    assert main(["sweep", str(cfg), "--out", str(csv), "--quiet"]) == 0
    assert main(["sweep", str(cfg), "--out", str(parquet), "--quiet"]) == 0
    a, b = pd.read_csv(csv), pd.read_parquet(parquet)
    assert len(a) == len(b) == 150
    assert list(a.columns) == list(b.columns)
    assert (a.seconds.values == b.seconds.values).all()


def test_a_streamed_and_a_whole_parquet_sweep_share_one_schema(tmp_path):
    """A fresh user's report: the whole-frame Parquet file held its categoricals with 8-bit
    dictionary codes, the streamed one with 32-bit codes, so the two did not concatenate as
    one dataset. Both are written with the same schema now."""
    pd = pytest.importorskip("pandas")
    pq = pytest.importorskip("pyarrow.parquet")
    cfg = _sweep_config(tmp_path, 3)
    whole, streamed = tmp_path / "w.parquet", tmp_path / "s.parquet"
    assert main(["sweep", str(cfg), "--out", str(whole), "--quiet"]) == 0
    assert main(["sweep", str(cfg), "--out", str(streamed), "--stream", "--quiet"]) == 0
    assert pq.read_schema(whole).equals(pq.read_schema(streamed), check_metadata=False)
    pd.testing.assert_frame_equal(pd.read_parquet(whole), pd.read_parquet(streamed))


def test_sweep_write_rows_chunks_report_progress(tmp_path, monkeypatch):
    from perfsim.cli import sweep as cli_sweep
    from perfsim.sweep import sweep

    monkeypatch.setattr(cli_sweep, "WRITE_CHUNK_ROWS", 7)
    df = sweep(batch=[1, 2, 3], heads=1, seqlen_q=[64, 128, 256, 512, 1024], head_dim=64,
               gpus="h100-sxm5", algorithms="fa2")
    seen = []
    path = cli_sweep.write_rows(df, tmp_path / "r.csv", seen.append)
    assert seen == [7, 14, 15]
    lines = path.read_text().splitlines()
    assert len(lines) == 16 and lines[0].startswith("batch,")


def test_too_large_sweep_is_refused_before_any_work(tmp_path, capsys):
    cfg = tmp_path / "huge.toml"
    cfg.write_text("[workload]\nbatch = " + str(list(range(1, 1001))) + "\nheads = "
                   + str(list(range(1, 1001))) + "\nseqlen_q = " + str(list(range(1, 1001)))
                   + "\nhead_dim = 64\n")
    start = time.perf_counter()
    assert main(["sweep", str(cfg), "--quiet"]) == 2
    assert "rows need about" in capsys.readouterr().err
    assert time.perf_counter() - start < 10


# ------------------------------------------------------------------ validation results
def _rec(key, **fields):
    base = {"key": f"{key}|fa2", "batch": 1, "heads": 2, "kv_heads": 2, "seqlen_q": 128,
            "seqlen_k": 128, "head_dim": 64, "causal": False, "dtype": "bf16", "phase": "fwd",
            "algorithm": "fa2", "kind": "own", "status": "ok", "predicted_s": 1.0e-3,
            "measured_s": 1.1e-3, "gpu_profile": "h200-sxm"}
    base.update(fields)
    return json.dumps(base)


@pytest.fixture
def messy_results(tmp_path):
    """Every kind of damage the issue lists, around rows that must all survive."""
    lines = [
        _rec("a").encode(),
        (_rec("b") + _rec("c")).encode(),                     # a newline lost: both kept
        b'{"key": "x|fa2", "status": "o',                    # a torn write mid-file
        _rec("a", status="error", measured_s=None).encode(),  # duplicate: keep measured a
        _rec("e", measured_s="abc").encode(),                 # non-numeric measured_s
        _rec("f").replace("0.0011", "NaN").encode(),          # NaN measured_s
        _rec("g", batch=None).encode(),                       # missing shape field
        b'{"key": "h|fa2", "note": "\xff"}',                  # not UTF-8
        json.dumps({"key": 123, "status": "ok"}).encode(),    # key of the wrong type
        _rec("i").encode(),
        _rec("i", measured_s=1.2e-3).encode(),                # a retry replaces
        b"[1, 2]",
    ]
    (tmp_path / "results.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return tmp_path


def test_messy_results_keep_every_valid_row_and_list_every_problem(messy_results):
    from perfsim.validate import analysis, report

    records, problems = report.load_checked(messy_results)
    keys = [r["key"].split("|")[0] for r in records]
    assert keys == ["a", "b", "c", "e", "f", "i"]
    by = {r["key"].split("|")[0]: r for r in records}
    assert by["a"]["status"] == "ok" and by["i"]["measured_s"] == 1.2e-3
    assert by["e"]["status"] == by["f"]["status"] == "invalid"
    assert by["e"]["measured_s"] is None and by["f"]["measured_s"] is None
    assert {r["key"] for r in analysis.compared(records)} == {"a|fa2", "b|fa2", "c|fa2",
                                                              "i|fa2"}
    text = "\n".join(problems)
    for needle in ("line 3: not JSON", "line 4: key 'a|fa2' again", "line 5 ('e|fa2')",
                   "line 6 ('f|fa2')", "line 7 ('g|fa2'): missing or invalid batch",
                   "line 8: not UTF-8", "line 9: no string 'key'", "line 10: key 'i|fa2' "
                   "replaced by line 11", "line 12: a JSON list"):
        assert needle in text, (needle, text)
    assert len(problems) == 9


def test_report_only_lists_the_problems_and_exits_0(messy_results, capsys):
    assert main(["validate", "--report-only", str(messy_results)]) == 0
    out = capsys.readouterr().out
    assert "9 problem(s) on 9 line(s) of results.jsonl" in out
    md = (messy_results / "report.md").read_text()
    assert "## Lines of results.jsonl skipped or replaced" in md
    assert "line 8: not UTF-8" in md and "invalid" in md


def test_non_utf8_results_file_does_not_crash_the_report(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_bytes(b"\xff\xfe\x00garbage\n" + _rec("a").encode())
    assert main(["validate", "--report-only", str(tmp_path)]) == 0
    assert "line 1: not UTF-8" in (tmp_path / "report.md").read_text()


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from perfsim.validate.runner import ResultStore, Row, run
    from perfsim.validate.shapes import Shape
    rows = [Row(Shape(1, 2, 64 * (i + 1), 64, False), "fa2", "own") for i in range(500)]
    def measure(row):
        time.sleep(0.01)
        return {"status": "ok", "measured_s": 1e-3, "predicted_s": 1e-3,
                "padding": "x" * 20000}
    run(rows, measure, ResultStore(sys.argv[1]))
""")


def test_sigkill_during_validate_keeps_every_earlier_row(tmp_path):
    results = tmp_path / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(results)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while not results.exists() or results.read_bytes().count(b"\n") < 5:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.005)
        snapshot = results.read_bytes()
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    after = results.read_bytes()
    complete = snapshot[:snapshot.rindex(b"\n") + 1]
    assert after.startswith(complete)                   # nothing earlier changed
    from perfsim.validate.runner import ResultStore

    store = ResultStore(results)
    loaded = store.load()
    assert len(loaded) >= complete.count(b"\n")
    assert store.skipped_lines <= 1                     # at most the row in flight


def test_interrupted_report_write_keeps_the_previous_files(tmp_path, monkeypatch):
    from perfsim.validate import report

    (tmp_path / "results.jsonl").write_text(_rec("a") + "\n")
    report.write_report(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", boom)
    with pytest.raises(KeyboardInterrupt):
        report.write_report(tmp_path)
    assert (tmp_path / "scatter.png").read_bytes() == before["scatter.png"]
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("blocked", ["report.md", "results.csv", "scatter.png"])
def test_a_report_file_that_cannot_be_replaced_leaves_all_three_old(tmp_path, blocked):
    """A fresh user's report: with a folder where report.md goes, results.csv and
    scatter.png were replaced before the error ("the previous file there is unchanged")."""
    from perfsim.validate import report

    (tmp_path / "results.jsonl").write_text(_rec("a") + "\n")
    for name in ("report.md", "results.csv", "scatter.png"):
        if name == blocked:
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("OLD")
    with pytest.raises(PerfsimError, match="it is a folder"):
        report.write_report(tmp_path)
    for name in ("report.md", "results.csv", "scatter.png"):
        assert name == blocked or (tmp_path / name).read_text() == "OLD"
    assert not list(tmp_path.glob(".*.tmp"))


# ------------------------------------------------------------------ --repredict
@pytest.fixture
def committed_copy(tmp_path):
    """The committed H200 run, first 30 rows (for speed)."""
    run = tmp_path / "h200"
    run.mkdir()
    lines = (COMMITTED / "results.jsonl").read_text().splitlines()[:30]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    for name in ("report.md", "results.csv", "scatter.png"):
        shutil.copy(COMMITTED / name, run / name)
    return run


def test_repredict_never_overwrites_committed_results(committed_copy, capsys):
    before = {p.name: p.read_bytes() for p in committed_copy.iterdir() if p.is_file()}
    assert main(["validate", "--report-only", str(committed_copy), "--repredict"]) == 0
    out = capsys.readouterr().out
    assert "--force to replace it" in out
    after = {p.name: p.read_bytes() for p in committed_copy.iterdir() if p.is_file()}
    assert after == before
    new = (committed_copy / "repredicted" / "report.md").read_text()
    # the profile the rows were measured with, found in validate/profiles/
    assert "(profile h200-sxm-calibrated)" in new
    assert "h200-sxm-calibrated.toml" in new
    assert (committed_copy / "repredicted" / "scatter.png").is_file()


def test_repredict_with_force_replaces_in_place(committed_copy, capsys):
    old = (committed_copy / "report.md").read_bytes()
    assert main(["validate", "--report-only", str(committed_copy), "--repredict", "--force",
                 "--gpu", "h200-sxm"]) == 0
    assert (committed_copy / "report.md").read_bytes() != old
    assert "(profile h200-sxm)" in (committed_copy / "report.md").read_text()
    assert not (committed_copy / "repredicted").exists()


def test_repredict_for_another_gpu_says_so(committed_copy, capsys):
    """H200 rows re-predicted for an RTX 4090 were scored without a word."""
    assert main(["validate", "--report-only", str(committed_copy), "--repredict",
                 "--gpu", "rtx-4090"]) == 0
    err = capsys.readouterr().err
    assert "measured on NVIDIA H200; --repredict --gpu rtx-4090 predicts them for" in err
    assert main(["validate", "--report-only", str(committed_copy), "--repredict",
                 "--gpu", "h200-sxm"]) == 0
    assert "another GPU" not in capsys.readouterr().err


@pytest.mark.parametrize("device, gpu, other", [
    ("NVIDIA H100 80GB HBM3", "a100-sxm4-80gb", True),       # a shared '80GB' hid it
    ("NVIDIA GeForce RTX 4090", "rtx-5090", True),           # a shared 'RTX' hid it
    ("NVIDIA H100 PCIe", "a100-pcie-40gb", True),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb", False),      # hyphens: the same GPU
    ("NVIDIA H200", "h200-sxm", False), ("NVIDIA GeForce RTX 4090", "rtx-4090", False)])
def test_other_device_compares_model_numbers(device, gpu, other):
    from perfsim.gpu_catalog import load_gpu
    from perfsim.validate.cli import _other_device

    assert (_other_device([{"device": device}], load_gpu(gpu)) is not None) == other


def test_repredict_without_a_recorded_profile_asks_for_gpu(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_text(_rec("a", gpu_profile="my-lab-gpu") + "\n")
    assert main(["validate", "--report-only", str(tmp_path), "--repredict"]) == 2
    assert "--gpu" in capsys.readouterr().err


def test_committed_results_are_untouched_by_the_test_suite():
    assert os.access(COMMITTED / "report.md", os.R_OK)


def test_a_damaged_measured_row_is_measured_again(tmp_path):
    from perfsim.validate.runner import ResultStore, Row, pending
    from perfsim.validate.shapes import Shape

    rows = [Row(Shape(1, 2, 64, 64, False), "fa2", "own"),
            Row(Shape(1, 2, 128, 64, False), "fa2", "own")]
    store = ResultStore(tmp_path / "results.jsonl")
    store.append({"key": rows[0].key, "status": "ok", "measured_s": float("nan")})
    store.append({"key": rows[1].key, "status": "ok", "measured_s": 1e-3})
    assert pending(rows, store.load()) == [rows[0]]


# ------------------------------------------------------------------ failed writes
def _one_line(err: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err


def test_a_failed_write_is_one_line_and_keeps_the_previous_file(tmp_path, capsys,
                                                                 monkeypatch):
    """A write that fails after the computation (a full disk) is one line, exit 2; the
    temporary file is removed and the previous file is intact."""
    pd = pytest.importorskip("pandas")
    cfg = _sweep_config(tmp_path, 3)
    out = tmp_path / "rows.csv"
    out.write_text("previous\n")

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_disk)
    assert main(["sweep", str(cfg), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    _one_line(err)
    assert "cannot write" in err and "No space left on device" in err
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.toml", "rows.csv"]


def test_sigterm_during_sweep_out_removes_the_temporary_file(tmp_path):
    """SIGTERM unwinds like Ctrl-C: no ``.rows.csv.*.tmp`` is left and the previous file is
    intact (only SIGKILL, which no process can catch, may leave the temporary file)."""
    cfg = _sweep_config(tmp_path, 4000)
    out = tmp_path / "rows.csv"
    previous = b"batch,seconds\n1,0.5\n"
    out.write_bytes(previous)
    proc = subprocess.Popen([sys.executable, "-m", "perfsim.cli", "sweep", str(cfg), "--out",
                             str(out), "--quiet"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while not _write_started(tmp_path):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, proc.stderr.read().decode()
    assert out.read_bytes() == previous
    assert not list(tmp_path.glob(".*.tmp"))


def _lost(handler):
    """Run a CLI signal handler as C code that clears errors does (CPython compiling a
    module's source during an import did so): its exception never reaches the command."""
    try:
        handler(0, None)
    except BaseException:       # noqa: BLE001 - the loss being simulated
        pass


@pytest.mark.parametrize("handler, code, said", [("_on_sigterm", 143, "terminated"),
                                                 ("_on_sigint", 130, "interrupted")])
def test_a_signal_whose_exception_is_lost_still_stops_before_the_rename(
        handler, code, said, tmp_path, monkeypatch, capsys):
    """A SIGTERM that landed while ``import perfsim.compiled`` compiled its source ran the
    sweep to its end and replaced --out, exit status 0 (CI, about one signal in four in that
    window): the noted stop is raised before the rename."""
    import perfsim.cli as cli

    sweep_module = importlib.import_module("perfsim.sweep")   # the package binds the function
    cfg = _sweep_config(tmp_path, 3)
    out = tmp_path / "rows.csv"
    previous = b"batch,seconds\n1,0.5\n"
    out.write_bytes(previous)
    real = sweep_module.sweep

    def sweep_losing_a_signal(**kwargs):
        _lost(getattr(cli, handler))
        return real(**kwargs)

    monkeypatch.setattr(sweep_module, "sweep", sweep_losing_a_signal)
    assert main(["sweep", str(cfg), "--out", str(out), "--quiet"]) == code
    assert said in capsys.readouterr().err
    assert out.read_bytes() == previous
    assert not list(tmp_path.glob(".*.tmp"))
    monkeypatch.setattr(sweep_module, "sweep", real)
    assert main(["sweep", str(cfg), "--out", str(out), "--quiet"]) == 0     # nothing left over
    assert out.read_bytes() != previous


def test_a_lost_signal_in_a_streamed_sweep_keeps_the_finished_rows(tmp_path, monkeypatch,
                                                                   capsys):
    """Streamed, the stop lands after the first block is written: those rows are kept in
    NAME.partial.csv (and a run again resumes from them), as a SIGTERM that arrives does."""
    import perfsim.cli as cli
    import perfsim.cli.sweep as cli_sweep

    cfg = _sweep_config(tmp_path, 3)
    out = tmp_path / "rows.csv"
    real = cli_sweep.write_frames

    def losing_a_signal(frames, *args, **kwargs):
        def first_then_lost():
            for i, frame in enumerate(frames):
                if i == 1:
                    _lost(cli._on_sigterm)
                yield frame
        return real(first_then_lost(), *args, **kwargs)

    monkeypatch.setattr(cli_sweep, "write_frames", losing_a_signal)
    monkeypatch.setattr(importlib.import_module("perfsim.sweep"), "CHUNK_ROWS", 40)
    code = main(["sweep", str(cfg), "--out", str(out), "--stream", "--quiet"])
    err = capsys.readouterr().err
    assert code == 143, err
    assert "terminated" in err and "kept" in err, err
    assert not out.exists()
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("handler, code, said", [("_on_sigterm", 143, "perfsim: terminated"),
                                                 ("_on_sigint", 130, "perfsim: interrupted")])
def test_a_signal_whose_exception_is_replaced_still_stops_in_one_line(
        handler, code, said, tmp_path, monkeypatch, capsys):
    """A fresh user's break attempt: a Ctrl-C landing in pydantic's class set-up came out as
    ``RuntimeError: Error calling __set_name__ ...`` (a traceback, exit 1). A noted stop
    turns whatever exception replaced it into the stop's own line and exit status."""
    import perfsim.cli as cli

    sweep_module = importlib.import_module("perfsim.sweep")
    cfg = _sweep_config(tmp_path, 3)
    out = tmp_path / "rows.csv"
    real = sweep_module.sweep

    def replaced(**kwargs):
        try:
            getattr(cli, handler)(0, None)
        except BaseException as exc:        # noqa: BLE001 - the replacement simulated
            raise RuntimeError("Error calling __set_name__") from exc
        return real(**kwargs)

    monkeypatch.setattr(sweep_module, "sweep", replaced)
    assert main(["sweep", str(cfg), "--out", str(out), "--quiet"]) == code
    err = capsys.readouterr().err
    assert err.startswith(said + " (") and err.count("\n") == 1       # one line, as any stop
    assert "written only as a whole result" in err
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    monkeypatch.setattr(sweep_module, "sweep", real)
    with pytest.raises(RuntimeError):       # a replacement with no stop noted is a bug: raised
        def failing(**kwargs):
            raise RuntimeError("a bug")
        monkeypatch.setattr(sweep_module, "sweep", failing)
        main(["sweep", str(cfg), "--out", str(out), "--quiet"])


def test_signals_deferred_holds_sigterm_to_the_end_of_the_block():
    """pydantic_core's import (pyo3) turned a SIGTERM landing in it into a Rust panic; the CLI
    imports it with the signals held, and one that arrived meanwhile is raised after."""
    from perfsim.files import signals_deferred

    if not hasattr(signal, "pthread_sigmask"):
        pytest.skip("no pthread_sigmask on this platform")
    seen = []

    class Stop(BaseException):
        pass

    def handler(signum, frame):
        seen.append(signum)
        raise Stop

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        inside = None
        with pytest.raises(Stop):
            with signals_deferred():
                # to this thread: one sent to the process may go to another thread of the
                # test run, which the mask does not hold (the CLI defers with none running)
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
                time.sleep(0.05)                    # delivered here without the block
                inside = list(seen)
        assert inside == [] and seen == [signal.SIGTERM]
        assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_raise_stop_inside_the_handling_of_its_own_exception_raises_nothing():
    """Keeping a partial file (its record written through atomic_write) runs inside the
    ``except`` that caught the signal's exception: the stop has arrived there."""
    from perfsim.files import note_stop, raise_stop

    class Stop(BaseException):
        pass

    note_stop(Stop)
    try:
        try:
            raise Stop
        except Stop:
            raise_stop()                     # arrived: nothing raised, still noted
        with pytest.raises(Stop):
            raise_stop()                     # outside it: lost, so raised now, and forgotten
        raise_stop()
    finally:
        note_stop(None)


# ------------------------------------------------------------------ wrong types in results
@pytest.mark.parametrize("field, value", [("status", None), ("status", 5), ("device", None),
                                          ("phase", None), ("phase", "sideways"),
                                          ("finished_at", 5), ("gpu_profile", 7),
                                          ("kind", None), ("dtype", 16)])
def test_a_wrongly_typed_field_skips_that_line_only(field, value, tmp_path, capsys):
    """Was ``TypeError: '<' not supported between 'str' and 'NoneType'`` in the report."""
    (tmp_path / "results.jsonl").write_text(
        _rec("a", device="H200", finished_at="2026-01-01T00:00:00Z") + "\n"
        + _rec("b", **{field: value}) + "\n")
    assert main(["validate", "--report-only", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"line 2 ('b|fa2'): missing or invalid {field}=" in out
    md = (tmp_path / "report.md").read_text()
    assert f"line 2 ('b|fa2'): missing or invalid {field}=" in md
    assert "1 rows" in md and "B=1 H=2 N=128" in md         # the valid row is kept


def test_wrongly_typed_optional_fields_become_null(tmp_path):
    from perfsim.validate import report

    (tmp_path / "results.jsonl").write_text(
        _rec("a", reason=5, launch_config="x", predicted_s=1e300) + "\n")
    records, problems = report.load_checked(tmp_path)
    assert len(records) == 1 and records[0]["reason"] is None
    assert records[0]["launch_config"] is None and records[0]["predicted_s"] is None
    assert len(problems) == 1 and "set to null" in problems[0]
    # each field's rule, not one list that contradicts the value (1e300 is a finite number)
    assert "predicted_s=1e+300 (a time of 1e-12 to 1e+06 s allowed)" in problems[0]
    assert "reason=5 (text allowed)" in problems[0]
    assert "launch_config='x' (an object allowed)" in problems[0]
    report.write_report(tmp_path)                   # 1e300 s no longer breaks the plot


@pytest.mark.parametrize("units", [{"hbm": float("nan")}, {"hbm": -1.0}, {"hbm": "1"}])
def test_a_damaged_unit_time_becomes_null(units, tmp_path):
    """A NaN inside ``predicted_unit_s`` reached results.csv unflagged."""
    from perfsim.validate import report

    (tmp_path / "results.jsonl").write_text(
        _rec("a", predicted_unit_s={"tensor": 1e-4, **units}) + "\n")
    records, problems = report.load_checked(tmp_path)
    assert records[0]["predicted_unit_s"] is None
    # the bad entry itself, not the object cut at 30 characters
    assert problems == [f"line 1 ('a|fa2'): predicted_unit_s['hbm']={units['hbm']!r} (an "
                        "object of unit (tensor, fp32, mufu, smem, hbm, latency) to seconds "
                        "from 0 to 1e+06 allowed) not valid; set to null"]


@pytest.mark.parametrize("fields, needle", [
    # OverflowError tracebacks: JSON integers beyond a float
    ({"measured_s": 10**400}, "measured_s=10000000000"),
    # a list's repr starts with '[', which the message had taken for a table entry
    ({"measured_s": [1]}, "measured_s=[1] (a time of 1e-12 to 1e+06 s allowed)"),
    ({"predicted_unit_s": {"hbm": 10**400}}, "predicted_unit_s['hbm']=10000000000"),
    # kept before, and shown as -3.0 TFLOP/s in report.md
    ({"achieved_tflops": -3}, "achieved_tflops=-3 (a finite number ≥ 0 allowed)"),
    ({"hbm_bytes": -5}, "hbm_bytes=-5 (a finite number ≥ 0 allowed)"),
    ({"predicted_unit_s": {"not a unit": 1.0}}, "predicted_unit_s['not a unit']=1.0"),
    ({"predicted_unit_s": {"hbm": 1e300}}, "predicted_unit_s['hbm']=1e+300"),
])
def test_damaged_numbers_are_nulled_with_their_rule(fields, needle, tmp_path):
    from perfsim.validate import report

    (tmp_path / "results.jsonl").write_text(_rec("a", **fields) + "\n")
    records, problems = report.load_checked(tmp_path)
    assert len(problems) == 1 and needle in problems[0], problems
    assert all(records[0][f] is None for f in fields)


def test_a_damaged_time_takes_what_was_computed_from_it(tmp_path):
    from perfsim.validate import report

    (tmp_path / "results.jsonl").write_text(
        _rec("a", measured_s=-1, error=0.1, achieved_tflops=3.0) + "\n")
    records, problems = report.load_checked(tmp_path)
    assert [records[0][f] for f in ("measured_s", "error", "achieved_tflops")] == [None] * 3
    assert problems == ["line 1 ('a|fa2'): measured_s=-1 (a time of 1e-12 to 1e+06 s allowed) "
                        "not valid; set to null, with error, achieved_tflops computed from "
                        "it, status 'invalid' (not compared)"]


def test_a_damaged_dropout_probability_skips_the_row(tmp_path):
    from perfsim.validate import report

    (tmp_path / "results.jsonl").write_text(_rec("a", dropout_p="x") + "\n" + _rec("b") + "\n")
    records, problems = report.load_checked(tmp_path)
    assert [r["key"] for r in records] == ["b|fa2"]
    assert "missing or invalid dropout_p='x'" in problems[0]


@pytest.mark.parametrize("fields, needle", [
    ({"kind": None}, "missing or invalid kind=None"),
    ({"launch_config": {"block_m": "x"}}, "does not map to a model (missing 'block_n')"),
    ({"dtype": "int4"}, "cannot be re-predicted: shape: AttentionWorkload.dtype"),
    ({"seqlen_q": 10**30}, "cannot be re-predicted: shape: AttentionWorkload.seqlen_q"),
    ({"kind": "external"}, "unknown external backend 'fa2'"),
    # was: the damaged configuration set to null and the stored (older) prediction kept
    ({"launch_config": "x"}, "its launch_config is missing or damaged"),
    # was: TypeError: object of type 'int' has no len()
    ({"compiled": {"ptx_mma": 5}, "launch_config": {"block_m": "x"}}, "does not map to a model"),
])
def test_repredict_skips_and_lists_a_row_it_cannot_predict(fields, needle, tmp_path, capsys):
    """Was KeyError 'fa2' / 'block_n', or exit 2 for the whole report because of one row."""
    cfg = {"block_m": 64, "block_n": 64, "num_warps": 4, "phase": "fwd"}
    (tmp_path / "results.jsonl").write_text(
        _rec("a", launch_config=cfg) + "\n" + _rec("b", **{"launch_config": cfg, **fields})
        + "\n")
    assert main(["validate", "--report-only", str(tmp_path), "--repredict", "--gpu",
                 "h200-sxm"]) == 0
    out = capsys.readouterr().out
    assert "line 2 ('b|fa2')" in out and needle in out, out
    md = (tmp_path / "report.md").read_text()
    assert needle in md and "1 rows" in md and "(profile h200-sxm)" in md


@pytest.mark.parametrize("run", ["h200-external", "h200-external-holdout"])
def test_report_only_sends_external_rows_to_their_scorer(run, tmp_path, capsys):
    """Was ``KeyError: 'triton_tutorial'``; these rows are scored by external_report."""
    copy = tmp_path / run
    copy.mkdir()
    lines = (ROOT / "validate" / "reports" / run / "results.jsonl").read_text().splitlines()
    (copy / "results.jsonl").write_text("\n".join(lines[:50]) + "\n")
    for extra in ([], ["--repredict", "--gpu", "h200-sxm"]):
        assert main(["validate", "--report-only", str(copy), *extra]) == 2
        err = capsys.readouterr().err
        _one_line(err)
        assert "python -m perfsim.validate.external_report" in err
    assert sorted(p.name for p in copy.iterdir()) == ["results.jsonl"]


def test_one_line_non_utf8_results_is_not_called_truncated(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_bytes(b'{"key": "a|fa2", "x": "\xff"}')
    # no readable row at all: one error that names the line (not an empty report)
    assert main(["validate", "--report-only", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "line 1: not UTF-8 (byte 23); skipped" in err and "truncated" not in err
    (tmp_path / "results.jsonl").write_bytes(_rec("a").encode() + b'\n{"key": "b|fa2", "st')
    from perfsim.validate import report

    assert "line 2: truncated last line (not JSON" in report.load_checked(tmp_path)[1][0]


# ------------------------------------------------------------------ validate flags
@pytest.mark.parametrize("argv, needle", [
    (["--limit-seconds", "-5"], "--limit-seconds: must be a number of seconds > 0"),
    (["--limit-seconds", "0"], "--limit-seconds: must be a number of seconds > 0"),
    (["--repredict"], "--repredict only applies with --report-only"),
    (["--force"], "--force only applies with --report-only"),
    (["--repredict", "--force"], "--repredict and --force only apply with --report-only"),
])
def test_validate_refuses_meaningless_flags(argv, needle, tmp_path, capsys):
    try:
        code = main(["validate", "--dry-run", "--grid", "quick", "--out", str(tmp_path), *argv])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    _one_line(err)
    assert needle in err, err


# ------------------------------------------------------------ streamed sweeps (issue 13)
STREAM_CONFIG = """
gpus = ["h100-sxm5", "a100-sxm4-80gb"]
algorithms = ["fa2", "fa3"]
[workload]
batch = [1, 2, 4]
heads = [8, 16]
seqlen_q = [256, 1000, 4096]
head_dim = [64, 128]
causal = [false, true]
[overrides]
hbm_bandwidth_bytes_per_s = {scale = [0.5, 1]}
"""


def test_sweep_frames_concatenate_to_the_sweep(monkeypatch):
    pd = pytest.importorskip("pandas")
    import numpy as np

    sweep_module = importlib.import_module("perfsim.sweep")   # the package binds the function

    kwargs = dict(batch=[1, 2, 4], heads=[8, 16], seqlen_q=[256, 1000, 4096],
                  head_dim=[64, 128], causal=[False, True], gpus=["h100-sxm5", "a100-sxm4-80gb"],
                  algorithms=["fa2", "fa3"],
                  overrides={"hbm_bandwidth_bytes_per_s": {"scale": [0.5, 1]}})
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", 5)        # several blocks per group
    whole = sweep_module.sweep(**kwargs)
    seen = []
    frames = list(sweep_module.sweep_frames(**kwargs, progress=lambda d, t: seen.append((d, t))))
    assert all(len(f) <= 5 for f in frames) and len(frames) > 16
    assert seen[-1] == (len(whole), len(whole))
    streamed = pd.concat(frames, ignore_index=True)
    assert list(streamed.columns) == list(whole.columns)
    for column in whole.columns:
        a, b = whole[column], streamed[column]
        if a.dtype.kind == "f":
            assert np.array_equal(a.to_numpy(), b.to_numpy(), equal_nan=True), column
        else:
            assert a.astype("string").fillna("<NA>").tolist() == \
                b.astype("string").fillna("<NA>").tolist(), column


def test_streamed_sweep_writes_what_the_in_memory_sweep_writes(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    cfg = tmp_path / "s.toml"
    cfg.write_text(STREAM_CONFIG)
    for ext in ("csv", "parquet"):
        held, streamed = tmp_path / f"held.{ext}", tmp_path / f"streamed.{ext}"
        assert main(["sweep", str(cfg), "--out", str(held), "--quiet"]) == 0
        assert main(["sweep", str(cfg), "--out", str(streamed), "--stream"]) == 0
        out = capsys.readouterr().out
        assert "576 predictions (144 infeasible)" in out and "streamed" in out
        if ext == "csv":
            assert streamed.read_bytes() == held.read_bytes()
        else:
            a, b = pd.read_parquet(held), pd.read_parquet(streamed)
            assert list(a.columns) == list(b.columns) and len(a) == len(b) == 576
            assert a.seconds.equals(b.seconds)
            assert (a.bound.astype(str) == b.bound.astype(str)).all()
            # pandas' dtypes come back alike: the streamed file had lost the nullable
            # boolean (fits_memory read back as object, so df[df.fits_memory] raised)
            assert b.fits_memory.dtype == a.fits_memory.dtype == "boolean"
            assert b.fits_memory.isna().sum() == 144


@pytest.mark.parametrize("extra, words", [
    ([], "--stream needs --out FILE"),
    (["--out", "r.csv", "--json"], "--plot and --json need every row at once")])
def test_stream_refuses_what_needs_every_row(tmp_path, capsys, extra, words):
    cfg = tmp_path / "s.toml"
    cfg.write_text(STREAM_CONFIG)
    extra = [str(tmp_path / e) if e.endswith(".csv") else e for e in extra]
    assert main(["sweep", str(cfg), "--stream", *extra]) == 2
    assert words in capsys.readouterr().err


def test_a_sweep_larger_than_memory_streams_to_its_out_file(tmp_path, capsys, monkeypatch):
    sweep_module = importlib.import_module("perfsim.sweep")

    monkeypatch.setattr(sweep_module, "available_memory_bytes", lambda: 100_000)
    cfg = tmp_path / "s.toml"
    cfg.write_text(STREAM_CONFIG)
    out = tmp_path / "r.csv"
    assert main(["sweep", str(cfg), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "576 rows need about" in text and "streaming them to" in text
    assert len(out.read_text().splitlines()) == 577
    # without --out the same sweep is refused before any work, as before
    assert main(["sweep", str(cfg), "--quiet"]) == 2
    assert "rows need about" in capsys.readouterr().err


def test_an_interrupted_stream_leaves_the_previous_file(tmp_path):
    from perfsim.cli.sweep import write_frames
    from perfsim.sweep import sweep_frames

    out = tmp_path / "r.csv"
    out.write_text("previous\n")

    def frames():
        for frame in sweep_frames(batch=[1, 2], heads=8, seqlen_q=[256, 512], head_dim=64,
                                  gpus="h100-sxm5", algorithms=["fa2", "fa3"]):
            yield frame
            raise KeyboardInterrupt           # after the first frame went to the file

    with pytest.raises(KeyboardInterrupt) as caught:
        write_frames(frames(), out)
    assert out.read_text() == "previous\n"
    # the frame finished before the interrupt is kept beside it (a fresh user's report: an
    # interrupted stream threw away every row it had computed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.partial.csv"]
    assert caught.value.partial == str(tmp_path / "r.partial.csv")


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
@pytest.mark.parametrize("signal_class", ["KeyboardInterrupt", "_Terminated"])
def test_an_interrupted_stream_keeps_its_finished_blocks(tmp_path, ext, signal_class):
    """Ctrl-C or SIGTERM while a frame is written or the next one is computed: the frames
    finished are the partial file's rows, whole and in the sweep's order, the file valid;
    the command's line says where; a whole result later removes the partial file."""
    if ext == ".parquet":
        pytest.importorskip("pyarrow")
    import numpy as np
    import pandas as pd

    import perfsim.cli as cli
    from perfsim.cli.sweep import partial_path, write_frames
    from perfsim.sweep import sweep_frames

    stop = KeyboardInterrupt if signal_class == "KeyboardInterrupt" else cli._Terminated
    kwargs = dict(batch=[1, 2, 3], heads=8, seqlen_q=[256, 512, 1024], head_dim=64,
                  gpus=["h100-sxm5", "a100-sxm4-80gb"], algorithms=["fa2", "standard"])
    rows = pd.concat(list(sweep_frames(**kwargs)), ignore_index=True)
    every = [rows.iloc[i:i + 12].reset_index(drop=True) for i in range(0, len(rows), 12)]
    assert len(every) >= 3
    out = tmp_path / f"r{ext}"

    def frames():
        yield every[0]
        yield every[1]
        raise stop                             # while the third is being computed

    with pytest.raises(stop) as caught:
        write_frames(frames(), out)
    kept = partial_path(out)
    assert not out.exists() and caught.value.partial == str(kept)
    assert caught.value.partial_rows == len(every[0]) + len(every[1])
    read = pd.read_csv(kept) if ext == ".csv" else pd.read_parquet(kept)
    want = pd.concat(every[:2], ignore_index=True)
    assert len(read) == len(want)
    assert np.allclose(read["seconds"], want["seconds"], rtol=1e-12, equal_nan=True)
    assert list(read["gpu"].astype(str)) == list(want["gpu"].astype(str))
    message = cli._kept(type("A", (), {"out": str(out), "dask": None})(), caught.value)
    assert str(kept) in message and f"{len(want):,} rows" in message
    # a whole result replaces it
    write_frames(iter(every), out)
    assert out.exists() and not kept.exists()


def test_stream_keeps_a_mixed_type_override_column_as_the_held_sweep_does(tmp_path):
    # a what-if column holding a string and a number is a string column in the held sweep;
    # the streamed Parquet file casts every frame to one schema, so its frames must agree
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    cfg = tmp_path / "d.toml"
    cfg.write_text('gpus = ["h200-sxm"]\nalgorithms = ["fa2"]\n[workload]\nbatch = [1, 4]\n'
                   'heads = 16\nseqlen_q = [512, 1024]\nhead_dim = 64\n[overrides]\n'
                   'native_tensor_family = ["wgmma", 3]\n')
    held, streamed = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main(["sweep", str(cfg), "--out", str(held), "-q"]) == 0
    assert main(["sweep", str(cfg), "--out", str(streamed), "-q", "--stream"]) == 0
    a, b = pd.read_parquet(held), pd.read_parquet(streamed)
    assert list(a.native_tensor_family.astype(str)) == list(b.native_tensor_family.astype(str))
    assert (b.infeasible.astype(str).str.contains("what-if GPU is invalid")).sum() == 4


def test_sweep_frames_checks_its_arguments_when_called():
    import perfsim

    with pytest.raises(PerfsimError, match="batch"):
        perfsim.sweep_frames(batch=-1, heads=8, seqlen_q=128, head_dim=64)


def test_sweep_frames_batches_small_groups_into_one_frame():
    import perfsim

    frames = list(perfsim.sweep_frames(batch=1, heads=8, seqlen_q=1024, head_dim=[64, 128],
                                       softcap=[float(x) for x in range(50)],
                                       gpus="h200-sxm", algorithms="fa2"))
    assert [len(f) for f in frames] == [100]


def test_stream_with_dask_and_the_memory_refusal_say_what_to_do(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "s.toml"
    cfg.write_text(STREAM_CONFIG)
    assert main(["sweep", str(cfg), "--stream", "--dask", "local", "--out",
                 str(tmp_path / "rows")]) == 2
    assert "--stream goes without --dask" in capsys.readouterr().err
    sweep_module = importlib.import_module("perfsim.sweep")
    monkeypatch.setattr(sweep_module, "available_memory_bytes", lambda: 100_000)
    assert main(["sweep", str(cfg), "--json"]) == 2
    assert "write the rows to a file instead" in capsys.readouterr().err


def test_stream_summary_counts_each_gpu_and_algorithm_of_a_batched_frame():
    # a small grid streams as frames of several whole groups (sweep_frames): the summary
    # must count every group of a frame under its own GPU and algorithm, as the held sweep
    import numpy as np

    import perfsim
    from perfsim.cli.sweep import _StreamSummary

    kwargs = dict(batch=[1, 2], heads=8, seqlen_q=[256, 1024], head_dim=64,
                  gpus=["h100-sxm5", "a100-sxm4-80gb"], algorithms=["fa2", "fa3"])
    frames = list(perfsim.sweep_frames(**kwargs))
    assert len(frames) == 1 and frames[0].gpu.nunique() == 2
    summary = _StreamSummary()
    list(summary.watch(frames))
    held = perfsim.sweep(**kwargs)
    for (gpu, algo), part in held.groupby(["gpu", "algorithm"], observed=True):
        n, bad, best, bounds = summary.parts[(gpu, algo)]
        good = part[part.infeasible == ""]
        assert (n, bad) == (len(part), len(part) - len(good))
        assert best == (good.tflops.max() if len(good) else float("-inf"))
        assert bounds == {b: int(k) for b, k in good.bound.astype(str).value_counts().items()}
    assert np.isneginf(summary.parts[("a100-sxm4-80gb", "fa3")][2])   # all infeasible


def test_the_committed_report_is_what_repredict_gives_today(tmp_path, capsys):
    """Issue 9: ``validate --report-only --repredict`` reproduces the committed H200 report
    (every table row: the summary and each measured row's prediction), so a model change
    that moves it fails here until the report is regenerated with the command it states."""
    run = tmp_path / "h200"
    run.mkdir()
    shutil.copy(COMMITTED / "results.jsonl", run / "results.jsonl")
    assert main(["validate", "--report-only", str(run), "--repredict"]) == 0
    capsys.readouterr()
    rows = [line for line in (run / "report.md").read_text().splitlines()
            if line.startswith("|")]
    committed = {line for line in (COMMITTED / "report.md").read_text().splitlines()
                 if line.startswith("|")}
    assert len(rows) > 400
    stale = [line for line in rows if line not in committed]
    assert not stale, stale[:5]


#: Script lines that make ``perfsim.cli.main`` run the script's own ``command(args)`` (defined
#: above them) as the command, through the CLI's signal and error handling.
_STUB_COMMAND = ("class Args:\n"
                 "    func = staticmethod(command)\n"
                 "class Parser:\n"
                 "    _actions = []\n"
                 "    def parse_args(self, argv):\n"
                 "        return Args()\n"
                 "cli._parse = lambda argv: Parser().parse_args(argv)\n")


def _run_stub_command(tmp_path, command: str, console: bool) -> subprocess.CompletedProcess:
    """Run ``command`` (script lines: imports, then ``def command(args): ...``) as a perfsim
    command in a fresh Python, through ``perfsim.cli.main`` — from the console script's path
    (``sys.argv``, ``main()``) if ``console``, else as ``main(argv)``."""
    script = tmp_path / "stub_command.py"
    script.write_text(command + _STUB_COMMAND
                      + ("sys.argv = ['perfsim', 'gpus']\nsys.exit(cli.main())\n" if console
                         else "sys.exit(cli.main(['gpus']))\n"))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("signum, code, line", [(signal.SIGTERM, 143, "perfsim: terminated"),
                                                (signal.SIGINT, 130, "perfsim: interrupted")])
def test_a_signal_that_lands_in_a_finalizer_still_stops_the_command(tmp_path, signum, code,
                                                                     line):
    """A signal whose handler runs inside a ``__del__`` raised there, where Python swallows
    exceptions ("Exception ignored in ..."), and the command ran to its end with exit 0 (the
    cause of a rare failure of the SIGTERM test above under load). The CLI sends it again
    (``perfsim.cli._redeliver_signals``), so it stops the command at its next instruction."""
    done = _run_stub_command(tmp_path, (
        "import os, signal, sys, threading, time\n"
        "import perfsim.cli as cli\n"
        "class Slow:\n"
        "    def __del__(self):                  # the signal lands in here\n"
        "        end = time.monotonic() + 5\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "def command(args):\n"
        f"    threading.Timer(0.3, os.kill, (os.getpid(), {int(signum)})).start()\n"
        "    Slow()\n"
        "    end = time.monotonic() + 5\n"
        "    while time.monotonic() < end:\n"
        "        pass\n"
        "    print('ran to the end')\n"
        "    return 0\n"
        ), console=False)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "ran to the end" not in done.stdout
    assert done.stderr.strip().splitlines() == [line]


def test_an_output_through_a_symbolic_link_replaces_the_file_it_points_to(tmp_path):
    """A fresh user's report: ``--out link.csv`` (a link to ``target.csv``) replaced the link
    with a regular file and left the target as it was."""
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("previous\n")
    link.symlink_to(target.name)
    check_output(link, (".csv",))
    with atomic_write(link) as tmp:
        tmp.write_text("new\n")
    assert link.is_symlink() and os.readlink(link) == "target.csv"
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "target.csv"]


def test_an_output_name_as_long_as_the_file_system_allows_is_written(tmp_path):
    """A 254-character name (legal) was refused: "File name too long" was about the hidden
    temporary file's name, ``.NAME.XXXXXXXX.tmp``, not the user's."""
    out = tmp_path / ("a" * 250 + ".csv")
    check_output(out, (".csv",))
    with atomic_write(out) as tmp:
        tmp.write_text("rows\n")
    assert out.read_text() == "rows\n"
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_a_ctrl_c_while_python_shuts_down_after_a_finished_command_is_ignored(tmp_path):
    """A fresh user's report: a Ctrl-C landing after the output was written, while Python
    shut down, made the finished run exit 130 (or print "Exception ignored" tracebacks).
    From the console script, a finished command's shutdown ignores Ctrl-C."""
    done = _run_stub_command(tmp_path, (
        "import atexit, os, signal, sys, threading, time\n"
        "import perfsim.cli as cli\n"
        "def command(args):\n"
        "    print('done', flush=True)\n"
        "    atexit.register(time.sleep, 1.5)      # a slow shutdown\n"
        "    # registered last, run first at exit: the Ctrl-C lands during the shutdown, never\n"
        "    # before main() has put its shutdown handler in place (a fixed delay raced it)\n"
        "    atexit.register(lambda: threading.Timer(0.2, os.kill,\n"
        "                                            (os.getpid(), signal.SIGINT)).start())\n"
        "    return 0\n"
        ), console=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")


def test_a_replaced_output_keeps_its_permissions_and_a_fifo_is_refused(tmp_path):
    """A fresh user's report: a private (0600) file at --out came back 0644, and a FIFO at
    --out was replaced by a regular file (its reader never saw the rows)."""
    private = tmp_path / "private.csv"
    private.write_text("previous\n")
    private.chmod(0o600)
    with atomic_write(private) as tmp:
        tmp.write_text("new\n")
    assert private.read_text() == "new\n" and (private.stat().st_mode & 0o777) == 0o600
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    for attempt in (lambda: check_output(fifo, (".csv",)), lambda: atomic_write(fifo).__enter__()):
        with pytest.raises(PerfsimError, match="not a regular file"):
            attempt()
    with pytest.raises(PerfsimError, match="--out is empty"):
        check_output("", (".csv",), "--out")


# ------------------------------------------------------------------ review of 2026-12-05
def test_external_report_refuses_an_unknown_gpu_before_writing(tmp_path, capsys):
    from perfsim.validate import external_report

    copy = tmp_path / "ho"
    copy.mkdir()
    lines = (ROOT / "validate/reports/h200-external-holdout50/results.jsonl").read_text()
    (copy / "results.jsonl").write_text("\n".join(lines.splitlines()[:6]) + "\n")
    assert external_report.main([str(copy), "--gpu", "bogus"]) == 2
    assert "unknown GPU 'bogus'" in capsys.readouterr().err
    assert sorted(p.name for p in copy.iterdir()) == ["results.jsonl"]
    # scored for another GPU, the report says so
    assert external_report.main([str(copy), "--gpu", "h100-sxm5"]) == 0
    report = (copy / "score-h100-sxm5" / "report.md").read_text()
    assert "measured on NVIDIA H200; the predictions are for NVIDIA H100" in report


def test_report_only_refuses_the_options_of_a_measuring_run(tmp_path, capsys):
    # (a fresh user's report: the rest of a measuring run's options, even an unknown
    # algorithm, went by without a word)
    for extra in (["--gpu", "bogus"], ["--dry-run"], ["--json"], ["--grid", "quick"],
                  ["--algorithms", "fa9"], ["--phase", "bwd"], ["--out", "x"], ["--seed", "5"],
                  ["--limit-seconds", "3"], ["--retry-errors"], ["--no-external"],
                  ["--backends", "sdpa_flash"]):
        assert main(["validate", "--report-only", str(tmp_path), *extra]) == 2
        err = capsys.readouterr().err
        assert f"{extra[0]}" in err and "not used with --report-only" in err, err


def test_validate_json_without_dry_run_and_a_grid_file_phase_are_refused(tmp_path, capsys):
    assert main(["validate", "--json"]) == 2
    assert "--json only applies with --dry-run" in capsys.readouterr().err
    grid = tmp_path / "g.json"
    grid.write_text('[{"batch": 2, "heads": 12, "seqlen_q": 512, "head_dim": 128, '
                    '"causal": false, "phase": "bwd"}]')
    assert main(["validate", "--dry-run", "--grid", str(grid), "--no-external"]) == 2
    assert "a grid file names no phase" in capsys.readouterr().err


def test_a_torch_that_fails_to_import_is_no_gpu_not_a_traceback(tmp_path, monkeypatch):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        'raise OSError("libcudnn.so.9: cannot open shared object file")\n')
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    from perfsim.validate.session import no_gpu_reason

    reason = no_gpu_reason()
    assert reason.startswith("torch failed to import: OSError: libcudnn.so.9")


def test_dask_port_out_of_range_is_one_error(tmp_path):
    pytest.importorskip("distributed")
    from perfsim.distributed import dask_sweep

    small = {"gpus": ["h100-sxm5"], "algorithms": ["fa2"], "batch": 1, "heads": 8,
             "seqlen_q": 128, "head_dim": 64}
    with pytest.raises(PerfsimError, match="the port must be 1 to 65535"):
        dask_sweep(small, tmp_path / "x", "tcp://127.0.0.1:99999")


def test_flash_attn_3_and_cute_presets_refuse_a_k_v_dtype_of_its_own():
    import perfsim
    from perfsim import AttentionWorkload
    from perfsim.errors import InfeasibleError

    w = AttentionWorkload(batch=8, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=32768,
                          head_dim=128, kv_dtype="fp8_e4m3")
    for preset in ("flash-attn-3", "flash-attn-cute"):
        with pytest.raises(InfeasibleError, match="no K/V dtype of its own"):
            perfsim.predict(w, gpu="h200-sxm", algorithm=preset)
    assert perfsim.predict(w, gpu="h200-sxm", algorithm="fa3").seconds > 0   # the what-if


def test_symbolic_counts_refuse_a_split_or_packing_they_would_drop():
    from perfsim import symbolic
    from perfsim.algorithms import FA2, FA3

    sizes = dict(B=4, H=32, H_kv=8, N_q=1, N_k=8192, d=128, d_v=128)
    with pytest.raises(PerfsimError, match="num_splits=4"):
        symbolic.counts(FA3(), "h100-sxm5", options={"block_m": 128, "block_n": 128,
                                                      "num_splits": 4}, **sizes)
    with pytest.raises(PerfsimError, match="pack_gqa=True"):
        symbolic.counts(FA2(pack_gqa=True), "h100-sxm5", **sizes)


def test_a_copy_of_the_fitted_results_is_known_by_its_content(tmp_path):
    from perfsim.validate.cli import _fitted_on

    method = "fitted on validate/reports/h200/results.jsonl (half the shapes)"
    copy = tmp_path / "results.jsonl"
    shutil.copy(COMMITTED / "results.jsonl", copy)
    assert _fitted_on(copy, method)
    copy.write_text(copy.read_text().splitlines()[0] + "\n")     # other rows
    assert not _fitted_on(copy, method)


def test_an_interrupted_dask_sweep_says_what_its_folder_holds(tmp_path):
    """A fresh user's report: an interrupted ``--dask`` run said its folder was as before,
    where it held the finished partitions (which the same command resumes from)."""
    import perfsim.cli as cli

    out = tmp_path / "rows"
    out.mkdir()
    for i in range(2):
        (out / f"part-{i:05d}.parquet").write_bytes(b"")
    args = type("A", (), {"out": str(out), "dask": "local"})()
    message = cli._kept(args, KeyboardInterrupt())
    assert "2 finished partition(s) are kept" in message and "resumes" in message
    assert "_manifest.json" in message and "as it was before" not in message


def test_an_interrupt_before_any_result_says_there_is_no_file(tmp_path):
    """The interrupt's line said a new --out file was "as it was before this run" (a fresh
    user's report: it never existed); it now says which of the two it is."""
    from types import SimpleNamespace

    from perfsim.cli import _kept

    out = tmp_path / "new.csv"
    args = SimpleNamespace(out=str(out), dask=None)
    assert _kept(args, KeyboardInterrupt()) == (
        f" ({out} is written only as a whole result, so there is none)")
    out.write_text("previous\n")
    assert "so it is as it was before this run" in _kept(args, KeyboardInterrupt())


def test_report_only_says_when_it_replaces_a_regenerated_report(tmp_path, capsys):
    """``--report-only`` keeps a committed report and writes to DIR/regenerated/; a second
    run replaced that folder's report without a word."""
    (tmp_path / "results.jsonl").write_text(_rec("a") + "\n")
    (tmp_path / "report.md").write_text("the committed report\n")
    assert main(["validate", "--report-only", str(tmp_path)]) == 0
    assert "replacing" not in capsys.readouterr().err
    assert main(["validate", "--report-only", str(tmp_path)]) == 0
    assert "note: replacing the earlier report in" in capsys.readouterr().err
    assert (tmp_path / "report.md").read_text() == "the committed report\n"


def test_repredict_clears_the_stored_prediction_of_a_row_it_keeps(tmp_path, capsys):
    """A row whose time and launch_config were both damaged (status 'invalid') kept the
    stored prediction of the model that ran it in repredicted/results.csv."""
    (tmp_path / "results.jsonl").write_text(
        _rec("a", launch_config={"block_m": 64, "block_n": 64, "num_warps": 4,
                                 "phase": "fwd"}) + "\n"
        + _rec("b", measured_s="x", launch_config="y", predicted_s=2e-3, error=-0.2,
               gpu_profile="h200-sxm-calibrated") + "\n")
    assert main(["validate", "--report-only", str(tmp_path), "--repredict", "--gpu",
                 "h200-sxm"]) == 0
    out = capsys.readouterr().out
    assert "1 problem(s) on 1 line(s)" in out, out        # the damaged time, once
    import csv

    rows = {r["key"]: r for r in csv.DictReader(open(tmp_path / "results.csv"))}
    assert rows["b|fa2"]["predicted_s"] == "" and rows["b|fa2"]["error"] == ""
    assert rows["b|fa2"]["gpu_profile"] == "h200-sxm"
