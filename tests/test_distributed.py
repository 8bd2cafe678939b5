"""perfsim.distributed: the Dask sweep gives the rows of the single-machine sweep, resumes
after an interruption and refuses to mix configs (issue 13, "Past one machine")."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from perfsim.cli import main
from perfsim.distributed import count_rows, dask_sweep, partitions, read_dataset
from perfsim.errors import PerfsimError
from perfsim.sweep import sweep

pytest.importorskip("distributed")
pytestmark = pytest.mark.slow      # local Dask clusters: ~25 s (run with -m slow; CI runs them)

# 2 GPUs x 2 algorithms x 10 x 5 x 63 x 2 x 2 x 2 = 100 800 rows
BIG = {"gpus": ["h100-sxm5", "rtx-5090"], "algorithms": ["fa2", "fa3"],
       "batch": list(range(1, 11)), "heads": [4, 8, 16, 32, 40],
       "seqlen_q": [64 * i for i in range(1, 64)], "head_dim": [64, 128],
       "causal": [False, True], "dtype": ["bf16", "fp16"]}
KEYS = ["gpu", "algorithm", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
        "head_dim_v", "causal", "dtype", "phase", "window"]


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for column in df.columns:
        if str(df[column].dtype) == "category":
            df[column] = df[column].astype(str)
    return df.sort_values(KEYS, kind="stable").reset_index(drop=True)


def test_dask_rows_equal_the_local_sweep_on_1e5_rows(tmp_path):
    """A LocalCluster of 2 workers, at least 8 partitions: every value equal to the local
    run's."""
    assert count_rows(BIG) == 100_800
    out = dask_sweep(BIG, tmp_path / "ds", "local", workers=2, rows_per_partition=10_000)
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["rows"] == 100_800 and len(manifest["partitions"]) >= 8
    pd.testing.assert_frame_equal(_canonical(read_dataset(out)), _canonical(sweep(**BIG)),
                                  check_exact=True)
    # Parquet readers take the folder as it is (the manifest's "_" name is skipped)
    assert len(pd.read_parquet(out)) == 100_800
    # a dataset written before the manifest's rename still reads
    (out / "_manifest.json").rename(out / "manifest.json")
    assert len(read_dataset(out)) == 100_800


def test_partitions_cover_the_grid_once():
    """Pairs that follow their partner (kv_heads, seqlen_k left out), a list of windows and
    several scalar lists: the partitions' row counts add up to the sweep's."""
    kwargs = {"gpus": ["h200-sxm"], "algorithms": ["fa2", "standard"], "batch": [1, 3],
              "heads": [8, 12], "seqlen_q": [100, 200, 300], "head_dim": [64, 128],
              "window": [(None, None), (31, 0)], "phase": ["fwd", "bwd"]}
    rows = len(sweep(**kwargs))
    assert count_rows(kwargs) == rows
    parts = partitions(kwargs, rows_per_partition=7)
    assert all(1 <= count_rows(p) <= 7 for p in parts)
    together = pd.concat([sweep(**p) for p in parts], ignore_index=True)
    pd.testing.assert_frame_equal(_canonical(together), _canonical(sweep(**kwargs)),
                                  check_exact=True)


@pytest.mark.parametrize("follower", [
    {"seqlen_q": [1024, 2048], "seqlen_k": ["none", 1024, 2048, 4096]},
    {"heads": [8, 16], "kv_heads": [None, 8, 1]},
    {"head_dim": [64, 128], "head_dim_v": [None, 64, 128]},
])
def test_a_following_entry_is_not_cut_from_its_list(follower):
    """A fresh user's report: "none" (follow the partner) beside an explicit value equal to
    the partner's gives one row locally; cut into two partitions it gave two (7 rows for 6).
    Such a list is left whole; the partner may be cut."""
    kwargs = {"gpus": ["h100-sxm5"], "algorithms": ["fa2"], "batch": [1, 2], "heads": 16,
              "seqlen_q": 2048, "head_dim": 128, **follower}
    local = sweep(**kwargs)
    for limit in (1, 2, 5):
        parts = partitions(kwargs, rows_per_partition=limit)
        assert sum(count_rows(p) for p in parts) == len(local) == count_rows(kwargs)
        together = pd.concat([sweep(**p) for p in parts], ignore_index=True)
        pd.testing.assert_frame_equal(_canonical(together), _canonical(local),
                                      check_exact=True)


def test_an_interrupted_run_resumes_and_other_configs_are_refused(tmp_path):
    small = {**BIG, "batch": [1, 2], "seqlen_q": [256, 512, 1024]}
    out = dask_sweep(small, tmp_path / "ds", "local", workers=1, rows_per_partition=20)
    first = read_dataset(out)
    lost = out / "part-00003.parquet"
    lost.unlink()
    (out / "_manifest.json").unlink()
    with pytest.raises(PerfsimError, match="has not finished"):
        read_dataset(out)
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*.parquet")}
    dask_sweep(small, out, "local", workers=1, rows_per_partition=20)
    assert lost.exists()
    assert all(p.stat().st_mtime_ns == kept[p.name] for p in out.glob("part-*.parquet")
               if p.name in kept)                       # not recomputed
    pd.testing.assert_frame_equal(read_dataset(out), first, check_exact=True)
    with pytest.raises(PerfsimError, match=r"another sweep: the config \(grid"):
        dask_sweep({**small, "batch": [4]}, out, "local", workers=1, rows_per_partition=20)


def test_cli_dask_flags(tmp_path, capsys):
    config = tmp_path / "s.toml"
    config.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\nbatch = 2\n'
                      'heads = 16\nseqlen_q = [512, 1024]\nhead_dim = 128\n')
    out = tmp_path / "rows"
    assert main(["sweep", str(config), "--dask", "local", "--workers", "1", "--out", str(out),
                 "--rows-per-partition", "1"]) == 0
    assert "wrote 2 rows in 2 Parquet partitions" in capsys.readouterr().out
    assert len(read_dataset(out)) == 2
    for argv, message in ((["--dask", "local"], "--dask needs --out"),
                          (["--workers", "2"], "--workers goes with --dask"),
                          (["--dask", "local", "--out", str(out), "--json"], "dataset only"),
                          (["--dask", "tcp://x:1", "--workers", "2", "--out", str(out)],
                           "--workers must be at least 1 and goes with --dask local"),
                          (["--dask", "local", "--out", str(out), "--rows-per-partition", "0"],
                           "--rows-per-partition must be at least 1"),
                          (["--dask", "local", "--out", str(tmp_path / "rows.csv")],
                           "a folder of Parquet files")):
        assert main(["sweep", str(config), *argv]) == 2
        assert message in capsys.readouterr().err


def test_datasets_of_two_configs_are_never_mixed(tmp_path):
    """A copy of a dataset (without its hidden marker) and two what-if GPUs that share a
    label are both recognised as other configs."""
    import shutil

    import perfsim

    small = {"gpus": ["h100-sxm5"], "algorithms": ["fa2"], "batch": [1, 2], "heads": 8,
             "seqlen_q": [128, 256], "head_dim": 64}
    first = dask_sweep(small, tmp_path / "a", "local", workers=1, rows_per_partition=2)
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in first.glob("*"):                  # `cp a/* copy/`: the hidden marker stays behind
        if not f.name.startswith("."):
            shutil.copy(f, copy / f.name)
    with pytest.raises(PerfsimError, match=r"another sweep: the config \(grid"):
        dask_sweep({**small, "batch": [4, 8]}, copy, "local", workers=1, rows_per_partition=2)
    b200 = perfsim.load_gpu("b200")
    slow = {**small, "gpus": [b200.replace(mufu_ops_per_clk_per_sm=8)]}
    fast = {**small, "gpus": [b200.replace(mufu_ops_per_clk_per_sm=64)]}
    assert slow["gpus"][0].id == fast["gpus"][0].id               # same label, "b200*"
    dask_sweep(slow, tmp_path / "w", "local", workers=1, rows_per_partition=2)
    with pytest.raises(PerfsimError, match=r"another sweep: the config \(grid"):
        dask_sweep(fast, tmp_path / "w", "local", workers=1, rows_per_partition=2)


def test_a_bad_scheduler_is_one_error_in_bounded_time(tmp_path, monkeypatch):
    import socket
    import threading
    import time

    from perfsim import distributed

    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT_S", 2)
    small = {"gpus": ["h100-sxm5"], "algorithms": ["fa2"], "batch": 1, "heads": 8,
             "seqlen_q": 128, "head_dim": 64}
    with pytest.raises(PerfsimError, match="give 'local' or a scheduler address"):
        dask_sweep(small, tmp_path / "x", "LOCAL")
    silent = socket.socket()                  # accepts and never answers (not a scheduler)
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    threading.Thread(target=lambda: [silent.accept() for _ in range(4)], daemon=True).start()
    talker = socket.socket()                  # answers with another protocol's greeting
    talker.bind(("127.0.0.1", 0))
    talker.listen(4)

    def greet():
        for _ in range(4):
            conn, _ = talker.accept()
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
    threading.Thread(target=greet, daemon=True).start()
    for address, says, within in (
            (f"tcp://127.0.0.1:{talker.getsockname()[1]}",
             "something answered there, but not a Dask scheduler", 15),
            ("tcp://127.0.0.1:1", r"no Dask scheduler there \(connection refused\)", 2),
            ("tcp://nosuchhost.invalid:8786", r"no Dask scheduler there \(unknown host\)", 15),
            (f"tcp://127.0.0.1:{silent.getsockname()[1]}",
             "no Dask scheduler answered within 2 s", 15)):
        start = time.time()
        with pytest.raises(PerfsimError, match=says):
            dask_sweep(small, tmp_path / "x", address)
        assert time.time() - start < within      # a refused address is said at once
    assert not (tmp_path / "x").exists()          # nothing written before a cluster answered


def test_window_pairs_empty_lists_and_damaged_partitions(tmp_path):
    pair = {"gpus": ["h200-sxm"], "algorithms": ["fa2"], "batch": 1, "heads": 16,
            "seqlen_q": [1024, 2048, 4096], "head_dim": 128, "causal": True,
            "window": ["none", 0]}                          # one pair, not two windows
    assert count_rows(pair) == len(sweep(**pair)) == 3
    out = dask_sweep(pair, tmp_path / "p", "local", workers=1, rows_per_partition=1)
    first = read_dataset(out)
    assert len(first) == 3
    (out / "part-00001.parquet").write_bytes(b"")          # a damaged partition
    (out / "_manifest.json").unlink()
    dask_sweep(pair, out, "local", workers=1, rows_per_partition=1)
    pd.testing.assert_frame_equal(read_dataset(out), first, check_exact=True)
    for empty in ({**pair, "gpus": []}, {**pair, "algorithms": []}, {**pair, "seqlen_q": []}):
        with pytest.raises(PerfsimError) as local:       # the sweep's own message, no cluster
            sweep(**empty)
        with pytest.raises(PerfsimError) as partitioned:
            dask_sweep(empty, tmp_path / "e", "local", workers=1)
        assert str(partitioned.value) == str(local.value)
        assert not (tmp_path / "e").exists()
    with pytest.raises(PerfsimError, match="workers must be at least 1"):
        dask_sweep(pair, tmp_path / "e", "local", workers=0)


def test_local_workers_leave_ctrl_c_to_the_command():
    """``--dask local``: the workers start with SIGINT ignored, so an interrupt reaches the
    perfsim process alone (one line, no worker tracebacks); this process keeps its own
    handler."""
    import signal

    import distributed

    from perfsim.distributed import _client

    before = signal.getsignal(signal.SIGINT)
    client, cluster = _client(distributed, "local", 1)
    try:
        assert signal.getsignal(signal.SIGINT) is before
        handlers = client.run(lambda: signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
        assert handlers and all(handlers.values())
    finally:
        client.close()
        cluster.close()


def test_a_dataset_of_another_model_is_refused_naming_it(tmp_path, monkeypatch):
    """The dataset's identity holds the perfsim version and the model's digest: a run under
    an edited model (or a dataset that did not record them) is refused with the reason, not
    resumed into a mix of two models' rows."""
    import importlib

    sweep_module = importlib.import_module("perfsim.sweep")   # the module, not perfsim.sweep()

    small = {"gpus": ["h100-sxm5"], "algorithms": ["fa2"], "batch": [1, 2], "heads": 8,
             "seqlen_q": [128, 256], "head_dim": 64}
    out = dask_sweep(small, tmp_path / "ds", "local", workers=1, rows_per_partition=2)
    (out / "part-00001.parquet").unlink()                  # an interrupted run
    (out / "_manifest.json").unlink()
    monkeypatch.setattr(sweep_module, "model_digest", lambda: "an edited model")
    with pytest.raises(PerfsimError, match=r"another sweep: the model \(a digest of perfsim's "
                                           r"code and catalog\) differs;"):
        dask_sweep(small, out, "local", workers=1, rows_per_partition=2)
    assert not (out / "part-00001.parquet").exists()       # nothing written under the new one
    monkeypatch.undo()
    # as the code before 2026-12-06 recorded it: the config unresolved, no version or model
    (out / ".config.json").write_text(sweep_module.config_key(small, rows_per_partition=2))
    with pytest.raises(PerfsimError, match="written by a perfsim before 2026-12-06"):
        dask_sweep(small, out, "local", workers=1, rows_per_partition=2)
    for garbage in (b"\xff\xfe", b"[1, 2]", b"", b'{"key": 5}'):
        (out / ".config.json").write_bytes(garbage)
        with pytest.raises(PerfsimError, match="another sweep: its record cannot be read"):
            dask_sweep(small, out, "local", workers=1, rows_per_partition=2)
    (out / ".config.json").unlink()
    (out / "_manifest.json").write_text('{"key": 5}')
    with pytest.raises(PerfsimError, match="its record cannot be read"):
        dask_sweep(small, out, "local", workers=1, rows_per_partition=2)
    (out / "_manifest.json").unlink()
    with pytest.raises(PerfsimError, match="no record in it says which"):
        dask_sweep(small, out, "local", workers=1, rows_per_partition=2)
    dask_sweep(small, tmp_path / "fresh", "local", workers=1, rows_per_partition=2)
    with pytest.raises(PerfsimError, match="another sweep: the partition size differs;"):
        dask_sweep(small, tmp_path / "fresh", "local", workers=1, rows_per_partition=3)


def test_the_workers_power_warnings_add_up_to_the_local_sweeps_one(tmp_path, capfd):
    """A fresh user's break attempt: every --dask run printed the workers' power-limit
    warning on stderr in Python's raw two-line format, once per worker. The workers now
    return their counts, and the client gives one warning with their sum: the local
    sweep's."""
    import warnings

    from perfsim.sweep import PowerLimitWarning

    kwargs = dict(batch=[1, 2, 7, 64], heads=[8, 32], kv_heads=[1, 8],
                  seqlen_q=[1, 3, 64, 200, 4096], seqlen_k=[100, 1000, 33000, 262144],
                  head_dim=128, gpus="h100-sxm5", algorithms=["fa2", "fa3"])
    with warnings.catch_warnings(record=True) as local:
        warnings.simplefilter("always")
        sweep(**kwargs)
    local = [w.message for w in local if isinstance(w.message, PowerLimitWarning)]
    assert len(local) == 1 and local[0].over        # the grid has rows over the limit
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as dask:
        warnings.simplefilter("always")
        dask_sweep(kwargs, tmp_path / "ds", "local", workers=2, rows_per_partition=100)
    dask = [w.message for w in dask if isinstance(w.message, PowerLimitWarning)]
    assert len(dask) == 1 and dask[0].over == local[0].over
    assert str(dask[0]) == str(local[0])
    assert "UserWarning" not in capfd.readouterr().err
