"""``sweep(columns=...)``: the result columns a caller keeps are the full sweep's, value for
value, on both engines; the compiled kernel of a column subset computes and writes that
subset alone; bad selections are one clear error (issue 13: memory per row and rows/s of a
sweep that needs only its times)."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from perfsim.errors import PerfsimError
from perfsim.sweep import RESULT_COLUMNS, check_columns, sweep, sweep_frames

sweep_module = importlib.import_module("perfsim.sweep")

# Split-KV and GQA-packing choices that differ per row (decode-like N_q = 1 beside prefill),
# causal and not, two algorithms and a preset: the parts of a block are merged as in a full
# sweep.
GRID = {"batch": [1, 3], "heads": [8, 32], "kv_heads": [8], "seqlen_q": [1, 100, 2048],
        "seqlen_k": [512, 4096], "head_dim": [64, 128], "causal": [False, True],
        "gpus": ["h100-sxm5", "a100-sxm4-80gb"], "algorithms": ["fa2", "sdpa-flash"]}
KEPT = ["bound", "seconds", "memory_bytes"]     # given out of order: kept in table order


def _engines():
    out = ["numpy"]
    try:
        import llvmlite  # noqa: F401
        import numba  # noqa: F401
        out.append("compiled")
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("engine", _engines())
def test_kept_columns_are_the_full_sweeps(engine):
    full = sweep(**GRID, engine=engine)
    part = sweep(**GRID, engine=engine, columns=KEPT)
    dropped = [c for c in RESULT_COLUMNS if c not in KEPT]
    assert list(part.columns) == [c for c in full.columns if c not in dropped]
    assert [c for c in part.columns if c in RESULT_COLUMNS] == ["seconds", "bound",
                                                                  "memory_bytes"]
    pd.testing.assert_frame_equal(part, full[list(part.columns)])
    assert (part.infeasible != "").any() or len(part) == len(full)


def test_the_compiled_kernel_of_some_columns_writes_those_alone():
    pytest.importorskip("llvmlite")
    pytest.importorskip("numba")
    from perfsim import compiled

    grid = {"batch": [1, 2, 4], "heads": [16, 32], "seqlen_q": list(range(512, 8193, 512)),
            "head_dim": [128], "causal": True, "gpus": "h100-sxm5", "algorithms": "fa2"}
    before = compiled.STATS["rows"]
    part = sweep(**grid, engine="compiled", columns=["seconds"])
    assert compiled.STATS["rows"] - before >= len(part)   # the compiled path ran (and checks)
    programs = [p for entry in sweep_module._PROGRAMS.values()
                for (binding, kept), p in entry["programs"].items()
                if kept == ("seconds",) and p]
    assert programs and all(set(p.plan) == {"seconds"} for p in programs)
    full = sweep(**grid, engine="compiled")
    assert np.array_equal(part.seconds.to_numpy(), full.seconds.to_numpy())


def test_frames_keep_the_same_columns():
    frames = list(sweep_frames(**GRID, columns=["tflops", "fits_memory"]))
    streamed = pd.concat(frames, ignore_index=True)
    whole = sweep(**GRID, columns=["tflops", "fits_memory"])
    assert list(streamed.columns) == list(whole.columns)
    assert np.array_equal(streamed.tflops.to_numpy(), whole.tflops.to_numpy(), equal_nan=True)
    assert streamed.fits_memory.equals(whole.fits_memory)


def test_fewer_columns_take_less_memory():
    grid = {"batch": list(range(1, 21)), "heads": [16, 32], "seqlen_q": [512 * i for i in
                                                                          range(1, 51)],
            "head_dim": [64, 128], "gpus": "h100-sxm5", "algorithms": "fa2"}
    full = sweep(**grid).memory_usage(deep=True).sum()
    kept = sweep(**grid, columns=["seconds", "bound"]).memory_usage(deep=True).sum()
    # 17 float64 columns fewer and fits_memory (a nullable boolean: 2 bytes): 138 a row
    assert full - kept == 4000 * (17 * 8 + 2)


@pytest.mark.parametrize("columns, match", [
    (["secs"], "'secs' is not a result column; choose from seconds"),
    (["seconds", "gpu"], "'gpu' is not a result column"),
    (["seconds", "seconds"], "seconds given more than once"),
    ([], "give at least one of"),
    (3, "a list of result column names"),
    ({"seconds": True}, "a list of result column names"),
    (b"seconds", "a list of result column names"),
    (["seconds", 3], r"a list of result column names \(strings\)"),
    ([np.array(["seconds", "bound"])], r"\(strings\)"),
])
def test_a_bad_selection_is_one_clear_error(columns, match):
    with pytest.raises(PerfsimError, match=match):
        sweep(batch=1, heads=8, seqlen_q=512, head_dim=64, gpus="h100-sxm5",
              algorithms="fa2", columns=columns)


def test_one_name_may_be_a_string():
    assert check_columns("seconds") == ("seconds",)
    assert check_columns(None) is RESULT_COLUMNS
    assert check_columns(reversed(RESULT_COLUMNS)) is RESULT_COLUMNS


CONFIG = """gpus = ["h100-sxm5"]
algorithms = ["fa2"]
columns = ["seconds", "bound"]
[workload]
batch = [1, 4]
heads = 16
seqlen_q = [512, 2048]
head_dim = 128
"""


def test_cli_takes_the_configs_columns_and_the_flag_over_them(tmp_path, capsys):
    from perfsim.cli import main

    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG)
    out = tmp_path / "rows.csv"
    assert main(["sweep", str(config), "--out", str(out), "-q"]) == 0
    header = out.read_text().splitlines()[0].split(",")
    assert [c for c in header if c in RESULT_COLUMNS] == ["seconds", "bound"]
    assert main(["sweep", str(config), "--out", str(out), "-q", "--columns",
                 "tflops, seconds"]) == 0
    header = out.read_text().splitlines()[0].split(",")
    assert [c for c in header if c in RESULT_COLUMNS] == ["seconds", "tflops"]
    # the summary reads "-" where a column it reports was left out
    assert main(["sweep", str(config)]) == 0
    assert "4 predictions" in capsys.readouterr().out


@pytest.mark.parametrize("args, match", [
    (["--columns", "secs"], "'secs' is not a result column"),
    (["--plot", "fig.png"], "--plot-kind tflops draws tflops, fits_memory: keep them"),
    (["--columns", "bound,fits_memory", "--plot", "fig.png", "--plot-kind", "bottleneck"],
     "--plot-kind bottleneck draws tflops: keep it"),
    (["--columns", "seconds,tflops", "--plot", "fig.png"],
     "--plot-kind tflops draws fits_memory: keep it"),
])
def test_cli_bad_columns_are_one_line_exit_2(tmp_path, capsys, args, match):
    from perfsim.cli import main

    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG)
    args = [str(tmp_path / a) if a.endswith(".png") else a for a in args]
    assert main(["sweep", str(config), *args]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
    assert not (tmp_path / "fig.png").exists()


def test_a_config_with_bad_columns_names_the_file(tmp_path, capsys):
    from perfsim.cli import main

    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG.replace('"bound"]', '"bound", "watts"]'))
    assert main(["sweep", str(config)]) == 2
    assert f"{config}: columns: 'watts' is not a result column" in capsys.readouterr().err


def test_dask_partitions_carry_the_columns(tmp_path):
    pytest.importorskip("pyarrow")
    from perfsim.distributed import partitions, run_partition

    kwargs = {"batch": [1, 2, 3, 4], "heads": 8, "seqlen_q": [512, 1024], "head_dim": 64,
              "gpus": ["h100-sxm5"], "algorithms": ["fa2"], "columns": ["seconds"]}
    parts = partitions(kwargs, rows_per_partition=4)
    assert len(parts) == 2 and all(p["columns"] == ["seconds"] for p in parts)
    path = tmp_path / "part.parquet"
    assert run_partition(parts[0], str(path)) == (4, {}, [])
    df = pd.read_parquet(path)
    assert [c for c in df.columns if c in RESULT_COLUMNS] == ["seconds"]


def test_the_bottleneck_map_draws_from_its_columns(tmp_path):
    from perfsim.cli import main

    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG)
    png = tmp_path / "map.png"
    assert main(["sweep", str(config), "-q", "--columns", "bound,tflops,fits_memory",
                 "--plot", str(png), "--plot-kind", "bottleneck"]) == 0
    assert png.stat().st_size > 10_000


def test_fewer_columns_pass_a_memory_limit_all_of_them_would_not():
    from perfsim.sweep import BYTES_PER_ROW, bytes_per_row

    assert bytes_per_row(RESULT_COLUMNS) == BYTES_PER_ROW
    assert bytes_per_row(("seconds", "bound")) == BYTES_PER_ROW - 2 * (17 * 8 + 2)
    grid = dict(batch=list(range(1, 11)), heads=[8, 16], seqlen_q=[512 * i for i in
                                                                    range(1, 101)],
                head_dim=64, gpus="h100-sxm5", algorithms="fa2")      # 2 000 rows
    limit = 2000 * 300
    with pytest.raises(PerfsimError, match="512 B per row"):
        sweep(**grid, max_memory_bytes=limit)
    assert len(sweep(**grid, max_memory_bytes=limit, columns=["seconds", "bound"])) == 2000


def test_dask_partitions_check_and_order_the_columns():
    from perfsim.distributed import partitions

    kwargs = {"batch": [1, 2], "heads": 8, "seqlen_q": 512, "head_dim": 64,
              "gpus": ["h100-sxm5"], "algorithms": ["fa2"]}
    parts = partitions({**kwargs, "columns": ["bound", "seconds"]})
    assert [p["columns"] for p in parts] == [["seconds", "bound"]]
    with pytest.raises(PerfsimError, match="'nope' is not a result column"):
        partitions({**kwargs, "columns": ["nope"]})


@pytest.fixture
def background_always(monkeypatch):
    """Every table builds its frame's columns in the background thread."""
    monkeypatch.setattr(sweep_module, "BACKGROUND_ROWS", 1)


SMALL = dict(batch=[1, 2], heads=[8, 16], seqlen_q=[512, 1024], head_dim=64,
             gpus="h100-sxm5", algorithms="fa2")


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_sweeps_after_its_parent_did(background_always):
    """The child inherits the background executor but not its thread: it makes its own
    (else its frame waits forever)."""
    import multiprocessing

    want = len(sweep(**SMALL))              # the parent's executor and thread exist now
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=lambda: queue.put(len(sweep(**SMALL))))
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and queue.get(timeout=5) == want


def test_a_sweep_when_no_thread_can_start_builds_its_frame_itself(background_always,
                                                                  monkeypatch):
    """As at interpreter shutdown: the executor refuses new work."""
    from concurrent.futures import ThreadPoolExecutor

    closed = ThreadPoolExecutor(1)
    closed.shutdown()
    monkeypatch.setattr(sweep_module, "_BACKGROUND", closed)
    got = sweep(**SMALL)
    monkeypatch.setattr(sweep_module, "BACKGROUND_ROWS", 1 << 40)
    pd.testing.assert_frame_equal(got, sweep(**SMALL))
