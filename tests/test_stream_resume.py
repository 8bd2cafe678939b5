"""``perfsim sweep --out FILE --stream`` resumes an interrupted run from ``NAME.partial.EXT``:
``sweep_frames(skip_rows=...)`` passes over whole frames without evaluating them, the
partial's record (``NAME.partial.EXT.json``) names the sweep that kept it, and the resumed
file is the uninterrupted run's (CSV byte for byte, Parquet value for value)."""

from __future__ import annotations

import importlib
import importlib.resources
import json

import numpy as np
import pytest

from perfsim.cli import main
from perfsim.errors import PerfsimError

sweep_module = importlib.import_module("perfsim.sweep")     # the package binds the function

#: 18 rows per group (3 batches x 2 head counts x 3 lengths), 32 groups: 576 rows
CONFIG = """
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
KWARGS = dict(batch=[1, 2, 4], heads=[8, 16], seqlen_q=[256, 1000, 4096], head_dim=[64, 128],
              causal=[False, True], gpus=["h100-sxm5", "a100-sxm4-80gb"],
              algorithms=["fa2", "fa3"],
              overrides={"hbm_bandwidth_bytes_per_s": {"scale": [0.5, 1]}})
ROWS, FRAME = 576, 6        # with CHUNK_ROWS 8: frames of one 6-row block, 3 per group


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 6 rows (CHUNK_ROWS 8): 96 frames, three per group."""
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", 8)


@pytest.fixture
def evaluations(monkeypatch):
    """The number of blocks evaluated since the fixture was made (a list of one count)."""
    count = [0]
    real = sweep_module._evaluate

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "_evaluate", counted)
    return count


def interrupt_after(monkeypatch, frames: int) -> None:
    """Make the next ``perfsim sweep`` stream raise KeyboardInterrupt once ``frames`` frames
    went to its file (as Ctrl-C while the next one is computed)."""
    real = sweep_module.sweep_frames

    def stopping(**kwargs):
        stream = real(**kwargs)

        def gen():
            for i, frame in enumerate(stream):
                if i == frames:
                    monkeypatch.setattr(sweep_module, "sweep_frames", real)
                    raise KeyboardInterrupt
                yield frame
            raise AssertionError("the stream ended before the interrupt")
        return gen()

    monkeypatch.setattr(sweep_module, "sweep_frames", stopping)


def same_file(a, b, ext: str) -> None:
    if ext == "csv":
        assert a.read_bytes() == b.read_bytes()
        return
    import pyarrow.parquet as pq

    x, y = pq.read_table(a), pq.read_table(b)
    assert x.schema.equals(y.schema, check_metadata=True)
    assert x.num_rows == y.num_rows == ROWS and x.to_pylist() == y.to_pylist()


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(CONFIG)
    return path


def reference(tmp_path, config, ext: str, *extra):
    """The file an uninterrupted stream writes."""
    whole = tmp_path / f"whole{len(extra)}.{ext}"
    assert main(["sweep", str(config), "--out", str(whole), "--stream", "-q", *extra]) == 0
    return whole


# ------------------------------------------------------------------ sweep_frames(skip_rows)
@pytest.mark.parametrize("chunk, frame_ends", [
    (8, [30, 18]),          # a frame per 6-row block: in the middle of a group, at its end
    (40, [72])])            # frames of two whole 18-row groups
def test_skip_rows_gives_the_remaining_frames_without_evaluating_the_skipped(
        monkeypatch, evaluations, chunk, frame_ends):
    import pandas as pd

    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", chunk)
    every = list(sweep_module.sweep_frames(**KWARGS))
    blocks = evaluations[0]
    ends = np.cumsum([len(f) for f in every]).tolist()
    assert ends[-1] == ROWS and len(every) > 5
    for skip in [*frame_ends, 0, ROWS]:
        evaluations[0] = 0
        seen: list = []
        frames = list(sweep_module.sweep_frames(**KWARGS, skip_rows=skip,
                                                progress=lambda d, t, seen=seen:
                                                seen.append((d, t))))
        first = ends.index(skip) + 1 if skip else 0
        assert len(frames) == len(every) - first
        for got, want in zip(frames, every[first:]):
            pd.testing.assert_frame_equal(got, want)
        # one block per frame (chunk 8), or one per group of a frame (chunk 40)
        per_frame = 1 if chunk == 8 else 2
        assert evaluations[0] == blocks - first * per_frame
        # the progress starts at the rows skipped
        assert seen[0] == ((skip, ROWS) if skip else (len(every[0]), ROWS))
        assert seen[-1] == (ROWS, ROWS)


@pytest.mark.parametrize("chunk, skip, words", [
    (8, 7, "7 is not at the end of a frame of this sweep (the nearest frames end at rows 6 "
           "and 12)"),
    (8, 20, "the nearest frames end at rows 18 and 24"),
    (40, 18, "the nearest frames end at rows 0 and 36"),
    (40, 590, "from 0 to the sweep's 576"),
    (8, -1, "from 0 to the sweep's 576"),
    (8, 6.0, "skip_rows must be an int (a count of rows, from 0 to the sweep's 576), got 6.0, "
             "a float"),
    (8, True, "must be an int (a count of rows, from 0 to the sweep's 576), got True, a bool"),
    (8, np.int64(7), "7 is not at the end of a frame")])
def test_skip_rows_off_a_frame_end_is_refused_when_called(monkeypatch, evaluations, chunk,
                                                          skip, words):
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", chunk)
    with pytest.raises(PerfsimError, match="skip_rows") as caught:
        sweep_module.sweep_frames(**KWARGS, skip_rows=skip)     # not iterated: eager
    assert words in str(caught.value) and evaluations[0] == 0


# ------------------------------------------------------------------ the identity
def test_rows_key_names_the_rows_not_the_engine(tmp_path, monkeypatch):
    from perfsim.sweep import rows_key

    key = rows_key(KWARGS)
    assert rows_key({**KWARGS, "engine": "compiled", "progress": print}) == key
    assert rows_key({**KWARGS, "columns": ["bound", "seconds"]}) == \
        rows_key({**KWARGS, "columns": ["seconds", "bound"]}) != key
    assert rows_key({**KWARGS, "head_dim": [64]}) != key
    assert rows_key({**KWARGS, "timing": {"clock": "boost"}}) != key
    # an argument given at its default is the sweep that leaves it out (the CLI passes
    # overrides=None and timing=None; a reviewer found a CLI dataset refused by the API)
    plain = {k: v for k, v in KWARGS.items() if k != "overrides"}
    assert rows_key({**plain, "overrides": None, "timing": None, "dtype": "bf16",
                     "phase": "fwd", "softcap": 0.0}) == rows_key(plain) != key
    assert rows_key({**plain, "softcap": 1.0}) != rows_key(plain)
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", 8)          # frames end elsewhere
    assert rows_key(KWARGS) != key
    monkeypatch.setattr(sweep_module, "model_digest", lambda: "another model")
    assert json.loads(rows_key(KWARGS))["model"] == "another model"
    # a GPU profile file is read by its content: edited between two runs, another sweep
    profile = tmp_path / "gpu.toml"
    source = importlib.resources.files("perfsim.catalog") / "h100-sxm5.toml"
    text = source.read_text()
    profile.write_text(text)
    first = rows_key({**KWARGS, "gpus": [str(profile)]})
    profile.write_text(text.replace("sm_count = 132", "sm_count = 100"))
    with pytest.warns(UserWarning, match="is a catalog GPU's, but its values differ"):
        edited = rows_key({**KWARGS, "gpus": [str(profile)]})
    assert "sm_count = 132" in text and edited != first
    with pytest.raises(PerfsimError, match="batch"):
        rows_key({**KWARGS, "batch": -1})


# ------------------------------------------------------------------ resuming on the CLI
def partial_files(tmp_path, ext):
    """``r.partial.EXT`` and its record beside an ``--out r.EXT``."""
    return tmp_path / f"r.partial.{ext}", tmp_path / f"r.partial.{ext}.json"


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_an_interrupted_stream_resumes_to_the_uninterrupted_file(
        tmp_path, config, capsys, monkeypatch, small_blocks, evaluations, ext):
    if ext == "parquet":
        pytest.importorskip("pyarrow")
    whole = reference(tmp_path, config, ext)
    out = tmp_path / f"r.{ext}"
    partial, record = partial_files(tmp_path, ext)
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    err = capsys.readouterr().err
    assert "30 rows finished" in err and "the same command resumes after them" in err
    assert not out.exists() and partial.exists()
    kept = json.loads(record.read_text())
    assert kept["rows"] == 30 and kept["bytes"] == partial.stat().st_size
    if ext == "csv":            # whole frames, in the sweep's order
        assert whole.read_bytes().startswith(partial.read_bytes())
    evaluations[0] = 0
    assert main(["sweep", str(config), "--out", str(out), "--stream"]) == 0
    text = capsys.readouterr().out
    assert f"resuming from {partial}: its 30 rows are not computed again" in text
    assert "546 predictions" in text and "after 30 rows resumed" in text
    assert evaluations[0] == ROWS // FRAME - 5       # the partial's 5 blocks not evaluated
    same_file(out, whole, ext)
    assert not partial.exists() and not record.exists()


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_a_resumed_run_interrupted_again_keeps_every_finished_row(
        tmp_path, config, capsys, monkeypatch, small_blocks, evaluations, ext):
    if ext == "parquet":
        pytest.importorskip("pyarrow")
    import pandas as pd

    whole = reference(tmp_path, config, ext)
    out = tmp_path / f"r.{ext}"
    partial, record = partial_files(tmp_path, ext)
    run = ["sweep", str(config), "--out", str(out), "--stream", "-q"]
    interrupt_after(monkeypatch, 3)
    assert main(run) == 130
    # interrupted before a new frame: the partial and its record stay as they were
    before = partial.read_bytes(), record.read_bytes()
    interrupt_after(monkeypatch, 0)
    assert main(run) == 130
    assert "the 18 rows finished" in capsys.readouterr().err
    assert (partial.read_bytes(), record.read_bytes()) == before
    # interrupted after 4 new frames: the 3 resumed and the 4 new are kept, with a record
    interrupt_after(monkeypatch, 4)
    assert main(run) == 130
    assert "the 42 rows finished" in capsys.readouterr().err
    assert json.loads(record.read_text())["rows"] == 42
    if ext == "csv":
        assert whole.read_bytes().startswith(partial.read_bytes())
    else:
        kept, want = pd.read_parquet(partial), pd.read_parquet(whole).iloc[:42]
        pd.testing.assert_frame_equal(kept, want, check_categorical=False)
    evaluations[0] = 0
    assert main(run) == 0
    assert evaluations[0] == ROWS // FRAME - 7
    same_file(out, whole, ext)
    assert not partial.exists() and not record.exists()


def test_an_interrupt_while_the_partial_is_copied_leaves_it_as_it_was(
        tmp_path, config, capsys, monkeypatch, small_blocks):
    import perfsim.cli.sweep as cli_sweep

    out = tmp_path / "r.csv"
    partial, record = partial_files(tmp_path, "csv")
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    before = partial.read_bytes(), record.read_bytes()

    real = cli_sweep._copy_counting_lines

    def half_a_copy(source, target=None):
        if target is None:                  # resumable_rows counting the lines
            return real(source)
        target.write_bytes(source.read_bytes()[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_sweep, "_copy_counting_lines", half_a_copy)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    assert f"the 30 rows finished (the sweep's first, whole blocks) are kept in {partial}" \
        in capsys.readouterr().err
    assert (partial.read_bytes(), record.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "r.partial.csv", "r.partial.csv.json", "s.toml"]


def test_a_partial_of_another_grid_is_not_resumed(tmp_path, config, capsys, monkeypatch,
                                                 small_blocks, evaluations):
    out = tmp_path / "r.csv"
    partial = tmp_path / "r.partial.csv"
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    kept = partial.read_bytes()
    # other columns: another sweep
    narrow = reference(tmp_path, config, "csv", "--columns", "seconds")
    evaluations[0] = 0
    assert main(["sweep", str(config), "--out", str(out), "--stream",
                 "--columns", "seconds"]) == 0
    text = capsys.readouterr().out
    assert (f"{partial}: not resumed: it holds rows of another sweep" in text
            and "resuming" not in text)
    # what becomes of it, as the line says (it said the file stayed until a whole result)
    assert ("columns); starting over: this run's whole result removes it, and if this run is "
            "interrupted, the rows it finished by then replace it (it stays where there are "
            "none)\n") in text
    assert evaluations[0] == ROWS // FRAME
    same_file(out, narrow, "csv")
    assert not partial.exists()
    # interrupted after rows of its own: they replace the other sweep's
    partial.write_bytes(kept)
    (tmp_path / "r.partial.csv.json").write_text(json.dumps({"rows": 30}))
    interrupt_after(monkeypatch, 2)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q",
                 "--columns", "seconds"]) == 130
    assert narrow.read_bytes().startswith(partial.read_bytes()) and partial.read_bytes() != kept
    assert json.loads((tmp_path / "r.partial.csv.json").read_text())["rows"] == 12
    # another grid, interrupted with no new row: the other sweep's partial stays
    partial.write_bytes(kept)
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    config.write_text(CONFIG.replace("head_dim = [64, 128]", "head_dim = [64, 96]"))
    interrupt_after(monkeypatch, 0)
    assert main(["sweep", str(config), "--out", str(out), "--stream"]) == 130
    assert "not resumed: it holds rows of another sweep" in capsys.readouterr().out
    assert partial.read_bytes() == kept


@pytest.mark.parametrize("damage, words", [
    ("model", "it was kept by another perfsim version or model"),
    ("no record", "it has no record (r.partial.csv.json: kept by an older perfsim"),
    ("bad record", "its record r.partial.csv.json cannot be read"),
    ("deep record", "its record r.partial.csv.json cannot be read"),     # 100 kB of "["
    ("nested record", "its record r.partial.csv.json cannot be read"),   # RecursionError
    ("list record", "its record r.partial.csv.json cannot be read"),
    ("no model", "its record r.partial.csv.json is incomplete (no model)"),
    ("fewer rows", "it was changed after it was kept"),      # rows of the record edited:
    ("more rows", "it was changed after it was kept"),       # the CSV's lines counted
    ("edited", "it was changed after it was kept")])
def test_a_partial_that_cannot_be_vouched_for_is_not_resumed(
        tmp_path, config, capsys, monkeypatch, small_blocks, evaluations, damage, words):
    whole = reference(tmp_path, config, "csv")
    out = tmp_path / "r.csv"
    partial, record = partial_files(tmp_path, "csv")
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    if damage == "model":
        monkeypatch.setattr(sweep_module, "model_digest", lambda: "another model")
    elif damage == "no record":
        record.unlink()
    elif damage == "bad record":
        record.write_text("{")
    elif damage == "deep record":
        record.write_text("[" * 100_000)
    elif damage == "nested record":
        record.write_text("[" * 5_000 + "]" * 5_000)
    elif damage == "list record":
        record.write_text("[30]")
    elif damage in ("no model", "fewer rows", "more rows"):
        kept = json.loads(record.read_text())
        if damage == "no model":
            del kept["model"]
        else:       # at frame ends, the file's size as recorded
            kept["rows"] += -6 if damage == "fewer rows" else 6
        record.write_text(json.dumps(kept))
    else:
        with partial.open("a") as fh:
            fh.write(partial.read_text().splitlines()[-1] + "\n")
    evaluations[0] = 0
    assert main(["sweep", str(config), "--out", str(out), "--stream"]) == 0
    assert f"{partial}: not resumed: {words}" in capsys.readouterr().out
    assert evaluations[0] == ROWS // FRAME
    same_file(out, whole, "csv")


def test_restart_starts_over_from_a_partial_it_could_resume(tmp_path, config, capsys,
                                                            monkeypatch, small_blocks,
                                                            evaluations):
    pytest.importorskip("pyarrow")
    whole = reference(tmp_path, config, "parquet")
    out = tmp_path / "r.parquet"
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    evaluations[0] = 0
    assert main(["sweep", str(config), "--out", str(out), "--stream", "--restart"]) == 0
    text = capsys.readouterr().out
    assert ("r.partial.parquet: not resumed (--restart): starting over, its 30 rows unused; "
            "this run's whole result removes it, and if this run is interrupted, the rows it "
            "finished by then replace it (it stays where there are none)") in text
    assert evaluations[0] == ROWS // FRAME
    same_file(out, whole, "parquet")
    assert not (tmp_path / "r.partial.parquet").exists()


@pytest.mark.parametrize("extra", [[], ["--json"], ["--dask", "local", "--out", "d/"],
                                   ["--out", "r.csv"]])
def test_restart_goes_with_a_streamed_out_sweep(tmp_path, config, capsys, monkeypatch,
                                                evaluations, extra):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(config), "--restart", *extra]) == 2
    assert "--restart goes with a streamed sweep" in capsys.readouterr().err
    assert evaluations[0] == 0 and not (tmp_path / "r.csv").exists()


def test_restart_is_refused_where_the_sweep_is_held_in_memory(tmp_path, config, capsys,
                                                              monkeypatch, small_blocks,
                                                              evaluations):
    """A usable partial file and --restart without --stream: the sweep fits in memory,
    which resumes nothing; one line says to add --stream, before any work."""
    out = tmp_path / "r.csv"
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    kept = (tmp_path / "r.partial.csv").read_bytes()
    capsys.readouterr()
    evaluations[0] = 0
    assert main(["sweep", str(config), "--out", str(out), "--restart"]) == 2
    err = capsys.readouterr().err
    assert ("--restart goes with a streamed sweep: this one fits in memory and is computed "
            "there, resuming nothing (add --stream" in err and err.count("\n") == 1)
    assert evaluations[0] == 0 and (tmp_path / "r.partial.csv").read_bytes() == kept


def test_write_frames_refuses_rows_it_cannot_resume(tmp_path):
    from perfsim.cli.sweep import write_frames
    from perfsim.sweep import rows_key

    out = tmp_path / "r.csv"
    with pytest.raises(PerfsimError, match="no partial file recorded with this identity"):
        write_frames(iter([]), out, identity=rows_key(KWARGS), resume_rows=6)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ------------------------------------------------------------------ interrupts at each step
def raising_signal(monkeypatch, owner, name: str, signum, when: str = "after", calls=None):
    """Replace ``owner.name`` with a function that sends this process ``signum`` before or
    after running the real one (a signal arriving at that exact point; ``calls``: only on
    those calls, counted from 1)."""
    import signal

    real = getattr(owner, name)
    count = [0]

    def sending(*args, **kwargs):
        count[0] += 1
        now = calls is None or count[0] in calls
        if now and when == "before":
            signal.raise_signal(signum)
        result = real(*args, **kwargs)
        if now and when == "after":
            signal.raise_signal(signum)
        return result

    monkeypatch.setattr(owner, name, sending)


def kept_rows(partial, ext: str) -> int:
    """The data rows a partial file holds (CSV: lines less the header)."""
    if ext == "csv":
        return len(partial.read_bytes().splitlines()) - 1
    import pyarrow.parquet as pq

    return pq.read_metadata(partial).num_rows


def assert_prefix(partial, whole, ext: str, rows: int) -> None:
    """``partial`` holds the first ``rows`` rows of the whole result, no row twice."""
    import pandas as pd

    if ext == "csv":
        assert whole.read_bytes().startswith(partial.read_bytes())
        assert kept_rows(partial, ext) == rows
        return
    got, want = pd.read_parquet(partial), pd.read_parquet(whole).iloc[:rows]
    assert len(got) == rows
    pd.testing.assert_frame_equal(got, want, check_categorical=False)


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_at_a_parquet_row_group_write_keeps_each_row_once(
        tmp_path, config, capsys, monkeypatch, small_blocks, when, signame):
    """A signal that lands as a row group is written (before it, or after it and before the
    frames are taken off the pending list) waits for the write: the partial file holds each
    finished row once and its record counts them (a reviewer found the flush repeated)."""
    pytest.importorskip("pyarrow")
    import signal

    import pyarrow.parquet as pq

    import perfsim.cli.sweep as cli_sweep

    whole = reference(tmp_path, config, "parquet")
    out = tmp_path / "r.parquet"
    partial, record = partial_files(tmp_path, "parquet")
    monkeypatch.setattr(cli_sweep, "ROW_GROUP_ROWS", 12)        # a write every 2 frames
    raising_signal(monkeypatch, pq.ParquetWriter, "write_table", getattr(signal, signame),
                   when, calls={3})
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == (
        130 if signame == "SIGINT" else 143)
    assert "the 36 rows finished" in capsys.readouterr().err    # 3 row groups of 12
    assert json.loads(record.read_text())["rows"] == kept_rows(partial, "parquet") == 36
    assert_prefix(partial, whole, "parquet", 36)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # put back
    monkeypatch.undo()
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", 8)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 0
    same_file(out, whole, "parquet")


def test_a_parquet_write_cut_short_keeps_no_row_it_cannot_count(tmp_path, config, capsys,
                                                                 monkeypatch, small_blocks):
    """An interrupt raised out of a row group's write after its rows reached the file (no
    signal: nothing can hold it) leaves a count that the file read back contradicts: no
    partial file is kept rather than one with rows twice or a wrong record."""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    import perfsim.cli.sweep as cli_sweep

    out = tmp_path / "r.parquet"
    monkeypatch.setattr(cli_sweep, "ROW_GROUP_ROWS", 12)
    real = pq.ParquetWriter.write_table
    count = [0]

    def cut(self, table, *args, **kwargs):
        real(self, table, *args, **kwargs)
        count[0] += 1
        if count[0] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(pq.ParquetWriter, "write_table", cut)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    assert "rows finished" not in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


@pytest.mark.parametrize("ext, step", [
    ("csv", "truncate"), ("csv", "replace"), ("csv", "record"),
    ("parquet", "write"), ("parquet", "close"), ("parquet", "replace"),
    ("parquet", "record")])
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_second_signal_while_the_rows_are_kept_changes_nothing(
        tmp_path, config, capsys, monkeypatch, small_blocks, evaluations, ext, step, signame):
    """Ctrl-C, then Ctrl-C or SIGTERM again while the finished rows are closed, cut back,
    moved to the partial file or recorded: the second signal waits for the keep step and
    then is dropped (the run is stopping already); the partial file and its record are
    whole, and the next run resumes from them."""
    if ext == "parquet":
        pytest.importorskip("pyarrow")
    import signal

    import perfsim.cli.sweep as cli_sweep

    whole = reference(tmp_path, config, ext)
    out = tmp_path / f"r.{ext}"
    partial, record = partial_files(tmp_path, ext)
    signum = getattr(signal, signame)
    if step in ("write", "close"):
        import pyarrow.parquet as pq

        raising_signal(monkeypatch, pq.ParquetWriter, step.replace("write", "write_table"),
                       signum)
    elif step == "record":
        raising_signal(monkeypatch, cli_sweep, "write_text_atomic", signum, "before")
    else:
        raising_signal(monkeypatch, cli_sweep.os, step, signum, "before")
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    err = capsys.readouterr().err
    assert "the 30 rows finished" in err and "the same command resumes after them" in err
    assert json.loads(record.read_text())["rows"] == kept_rows(partial, ext) == 30
    assert_prefix(partial, whole, ext, 30)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    monkeypatch.undo()
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", 8)
    assert main(["sweep", str(config), "--out", str(out), "--stream"]) == 0
    assert "its 30 rows are not computed again" in capsys.readouterr().out
    same_file(out, whole, ext)


@pytest.mark.parametrize("ext", ["csv", "parquet"])
@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_signal_during_the_final_rename_waits_for_the_whole_result(
        tmp_path, config, capsys, monkeypatch, small_blocks, ext, step):
    """Ctrl-C after the last frame, while the result is synced to disk and renamed into
    place: the rename goes ahead, the partial file of an earlier run goes, and the interrupt
    then ends the run saying that the file is whole (it deleted every row before)."""
    if ext == "parquet":
        pytest.importorskip("pyarrow")
    import signal

    import perfsim.files as files

    whole = reference(tmp_path, config, ext)
    out = tmp_path / f"r.{ext}"
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    capsys.readouterr()
    raising_signal(monkeypatch, files.os, step, signal.SIGINT, "before", calls={1})
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    assert (f"perfsim: interrupted: {out} was written whole before the signal took "
            "effect") in capsys.readouterr().err
    same_file(out, whole, ext)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["s.toml", whole.name, out.name])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_write_frames_outside_the_main_thread(tmp_path):
    """Signals reach the main thread only: there write_frames leaves the handlers alone."""
    import threading

    from perfsim.cli.sweep import write_frames

    out, failed = tmp_path / "r.csv", []

    def run():
        try:
            write_frames(sweep_module.sweep_frames(**KWARGS), out)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not failed and len(out.read_text().splitlines()) == ROWS + 1


# ------------------------------------------------------------------ the record, the path
def test_a_csv_partial_whose_lines_are_not_the_rows_is_not_copied(tmp_path, small_blocks):
    """write_frames counts a CSV partial's lines as it copies it (resumable_rows compared
    only the size): rows the record misstates write nothing."""
    from perfsim.cli.sweep import partial_path, record_path, resumable_rows, write_frames
    from perfsim.sweep import rows_key

    out = tmp_path / "r.csv"
    every = list(sweep_module.sweep_frames(**KWARGS))

    def five():
        yield from every[:5]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_frames(five(), out, identity=rows_key(KWARGS))
    partial = partial_path(out)
    kept = json.loads(record_path(partial).read_text())
    kept["rows"] = 24
    record_path(partial).write_text(json.dumps(kept))
    assert resumable_rows(out, rows_key(KWARGS), count_lines=False) == (24, "")
    assert resumable_rows(out, rows_key(KWARGS))[0] == 0
    with pytest.raises(PerfsimError, match=r"cannot resume 24 rows from it: it holds 30"):
        write_frames(iter(every[4:]), out, identity=rows_key(KWARGS), resume_rows=24)
    assert not out.exists() and len(partial.read_text().splitlines()) == 31


def test_rows_off_a_frame_end_start_over_with_one_line(tmp_path, config, capsys, monkeypatch,
                                                       small_blocks, evaluations):
    """A partial file and record that agree on rows that do not end a frame (both edited):
    one line says so and the run starts over (it said "resuming", then exited 2)."""
    whole = reference(tmp_path, config, "csv")
    out = tmp_path / "r.csv"
    partial, record = partial_files(tmp_path, "csv")
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    lines = partial.read_bytes().splitlines(keepends=True)[:28]         # 27 rows
    partial.write_bytes(b"".join(lines))
    kept = json.loads(record.read_text())
    record.write_text(json.dumps({**kept, "rows": 27, "bytes": partial.stat().st_size}))
    evaluations[0] = 0
    assert main(["sweep", str(config), "--out", str(out), "--stream"]) == 0
    text = capsys.readouterr().out
    assert (f"{partial}: not resumed: its 27 rows are not whole blocks of this sweep; "
            "starting over" in text and "resuming" not in text)
    assert evaluations[0] == ROWS // FRAME
    same_file(out, whole, "csv")


@pytest.mark.parametrize("folder", ["r.partial.csv", "r.partial.csv.json"])
def test_a_partial_path_that_is_a_folder_is_refused_before_any_work(
        tmp_path, config, capsys, evaluations, folder):
    """Where an interrupted run would keep its rows is a folder: one line, before any work
    (an interrupt lost every finished row, the move to a folder failing)."""
    (tmp_path / folder).mkdir()
    out = tmp_path / "r.csv"
    assert main(["sweep", str(config), "--out", str(out), "--stream"]) == 2
    err = capsys.readouterr().err
    assert err == (f"perfsim: error: {tmp_path / folder} is a folder: an interrupted stream "
                   f"to {out} keeps its finished rows there; move it away or give another "
                   "--out\n")
    assert evaluations[0] == 0 and not out.exists()


def test_the_progress_bar_shows_the_resumed_rows_before_they_are_copied(
        tmp_path, config, monkeypatch, small_blocks):
    from contextlib import contextmanager

    import perfsim.cli.sweep as cli_sweep

    out = tmp_path / "r.csv"
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    shown: list = []

    @contextmanager
    def bars(args):
        def track(label, total=None):
            shown.append((label, None, total))
            return lambda done, total=None: shown.append((label, done, total))
        yield track

    seen: list = []
    real = cli_sweep.write_frames

    def writing(*args, **kwargs):
        seen.extend(shown)                  # before the partial's rows are copied
        return real(*args, **kwargs)

    monkeypatch.setattr(cli_sweep, "_progress_bars", bars)
    monkeypatch.setattr(cli_sweep, "write_frames", writing)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 0
    assert seen == [("sweep", None, ROWS), ("sweep", 30, None)]
    assert shown[-1] == ("sweep", ROWS, ROWS)


# ------------------------------------------------------------------ without --stream
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_an_out_sweep_resumes_a_partial_file_of_it_without_stream(
        tmp_path, config, capsys, monkeypatch, small_blocks, evaluations, ext):
    """A sweep that fits in memory, run with --out and without --stream beside a partial
    file of the same sweep: it streams and resumes, saying so in one line, instead of
    computing every row again and leaving the partial file behind."""
    if ext == "parquet":
        pytest.importorskip("pyarrow")
    whole = reference(tmp_path, config, ext)
    out = tmp_path / f"r.{ext}"
    partial, record = partial_files(tmp_path, ext)
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    evaluations[0] = 0
    assert main(["sweep", str(config), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert (f"resuming from {partial}: its 30 rows are not computed again (streaming to "
            f"{out}, as --stream)\n") in text
    assert evaluations[0] == ROWS // FRAME - 5
    same_file(out, whole, ext)
    assert not partial.exists() and not record.exists()


@pytest.mark.parametrize("extra, words", [
    (["--columns", "seconds"], "it holds rows of another sweep (other grid, GPUs, algorithms, "
                               "what-ifs, timing or columns)"),
    (["--json"], "--plot and --json hold every row in memory")])
def test_a_whole_result_held_in_memory_removes_the_partial_file(
        tmp_path, config, capsys, monkeypatch, small_blocks, extra, words):
    """A partial file an --out sweep held in memory does not resume: one line says so, and
    the whole result removes it and its record, as a streamed result does."""
    out = tmp_path / "r.csv"
    partial, record = partial_files(tmp_path, "csv")
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    capsys.readouterr()
    assert main(["sweep", str(config), "--out", str(out), *extra]) == 0
    captured = capsys.readouterr()
    line = (f"{partial}: not resumed: {words}; the sweep is computed in memory and its whole "
            "result removes it\n")
    if "--json" in extra:       # stdout holds the JSON alone
        assert line in captured.err and len(json.loads(captured.out)) == ROWS
    else:
        assert line in captured.out
    assert len(out.read_text().splitlines()) == ROWS + 1
    assert not partial.exists() and not record.exists()


def test_a_partial_file_that_cannot_be_moved_into_place_is_said(tmp_path, config, capsys,
                                                                monkeypatch, small_blocks):
    """The move of the finished rows to NAME.partial.EXT fails (an OSError): the interrupt is
    still reported as one, saying the rows could not be kept and why (it became "cannot
    write"), and no temporary file is left."""
    import perfsim.cli.sweep as cli_sweep

    out = tmp_path / "r.csv"
    real = cli_sweep.os.replace

    def refused(source, target):
        if str(target).endswith("r.partial.csv"):
            raise PermissionError(13, "Permission denied")
        return real(source, target)

    monkeypatch.setattr(cli_sweep.os, "replace", refused)
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    assert (f"perfsim: interrupted: the 30 rows finished could not be kept ({tmp_path}/"
            "r.partial.csv: Permission denied)") in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_a_resumed_stream_s_power_warning_says_it_counts_this_run_s_rows(monkeypatch):
    """The over-the-limit warning counts the rows a run evaluates; a resumed stream does not
    evaluate the rows it resumes, so its warning says which rows it counted (a fresh user's
    resumed run named one GPU where the whole run named two)."""
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", 2)
    hot = dict(batch=[4], heads=[16], seqlen_q=[4096, 8192], head_dim=[128], causal=True,
               gpus=["h100-pcie"], algorithms=["fa3"])
    with pytest.warns(UserWarning, match=r"^sweep: modelled board power stays over") as whole:
        frames = list(sweep_module.sweep_frames(**hot))
    assert len(frames) == 1 and "h100-pcie: 2 rows" in str(whole[0].message)
    monkeypatch.setattr(sweep_module, "CHUNK_ROWS", 1)
    with pytest.warns(UserWarning, match=r"the rows computed in this run; the rows resumed "
                      r"from an interrupted run are not counted here") as resumed:
        frames = list(sweep_module.sweep_frames(**hot, skip_rows=1))
    assert len(frames) == 1 and "h100-pcie: 1 row," in str(resumed[0].message)
