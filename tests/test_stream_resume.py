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
    (8, 6.0, "a whole number"),
    (8, True, "a whole number")])
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
    assert "sm_count = 132" in text and rows_key({**KWARGS, "gpus": [str(profile)]}) != first
    with pytest.raises(PerfsimError, match="batch"):
        rows_key({**KWARGS, "batch": -1})


# ------------------------------------------------------------------ resuming on the CLI
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_an_interrupted_stream_resumes_to_the_uninterrupted_file(
        tmp_path, config, capsys, monkeypatch, small_blocks, evaluations, ext):
    if ext == "parquet":
        pytest.importorskip("pyarrow")
    whole = reference(tmp_path, config, ext)
    out = tmp_path / f"r.{ext}"
    partial, record = tmp_path / f"r.partial.{ext}", tmp_path / f"r.partial.{ext}.json"
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
    partial, record = tmp_path / f"r.partial.{ext}", tmp_path / f"r.partial.{ext}.json"
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
    partial, record = tmp_path / "r.partial.csv", tmp_path / "r.partial.csv.json"
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    before = partial.read_bytes(), record.read_bytes()

    def half_a_copy(source, target):
        target.write_bytes(source.read_bytes()[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_sweep.shutil, "copyfile", half_a_copy)
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
            and "starting over" in text and "resuming" not in text)
    assert evaluations[0] == ROWS // FRAME
    same_file(out, narrow, "csv")
    assert not partial.exists()
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
    ("edited", "it was changed after it was kept")])
def test_a_partial_that_cannot_be_vouched_for_is_not_resumed(
        tmp_path, config, capsys, monkeypatch, small_blocks, evaluations, damage, words):
    whole = reference(tmp_path, config, "csv")
    out = tmp_path / "r.csv"
    partial, record = tmp_path / "r.partial.csv", tmp_path / "r.partial.csv.json"
    interrupt_after(monkeypatch, 5)
    assert main(["sweep", str(config), "--out", str(out), "--stream", "-q"]) == 130
    if damage == "model":
        monkeypatch.setattr(sweep_module, "model_digest", lambda: "another model")
    elif damage == "no record":
        record.unlink()
    elif damage == "bad record":
        record.write_text("{")
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
    assert "r.partial.parquet: not resumed (--restart); starting over (its 30 rows" in text
    assert evaluations[0] == ROWS // FRAME
    same_file(out, whole, "parquet")
    assert not (tmp_path / "r.partial.parquet").exists()


@pytest.mark.parametrize("extra", [[], ["--json"], ["--dask", "local", "--out", "d/"]])
def test_restart_goes_with_a_streamed_out_sweep(tmp_path, config, capsys, extra):
    assert main(["sweep", str(config), "--restart", *extra]) == 2
    assert "--restart goes with a streamed sweep" in capsys.readouterr().err


def test_write_frames_refuses_rows_it_cannot_resume(tmp_path):
    from perfsim.cli.sweep import write_frames
    from perfsim.sweep import rows_key

    out = tmp_path / "r.csv"
    with pytest.raises(PerfsimError, match="no partial file recorded with this identity"):
        write_frames(iter([]), out, identity=rows_key(KWARGS), resume_rows=6)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
