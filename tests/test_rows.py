"""perfsim.predict_rows: each row equals predict() of its workload; input forms; errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfsim
from perfsim.sweep import COUNT_COLUMNS, WORKLOAD_FIELDS

REL = 1e-9


def _random_rows(n: int, seed: int) -> pd.DataFrame:
    """Rows that form no grid: every field drawn per row, decode and GQA among them."""
    rng = np.random.default_rng(seed)
    heads = rng.choice([8, 12, 16, 32], n)
    kv = np.where(rng.random(n) < 0.5, heads, rng.choice([1, 2, 4], n))     # divisors
    seqlen_q = np.where(rng.random(n) < 0.25, 1, rng.integers(1, 5000, n))
    return pd.DataFrame({
        "batch": rng.integers(1, 17, n), "heads": heads, "kv_heads": kv,
        "seqlen_q": seqlen_q, "seqlen_k": rng.integers(1, 9000, n),
        "head_dim": rng.choice([64, 96, 128], n), "causal": rng.random(n) < 0.5,
        "phase": rng.choice(["fwd", "bwd", "fwd_bwd"], n),
        "dtype": rng.choice(["bf16", "fp16"], n),
        "window": [None if rng.random() < 0.7 else (int(rng.integers(0, 512)), 0)
                   for _ in range(n)],
    }, index=pd.RangeIndex(100, 100 + n))


def _workload(row) -> perfsim.AttentionWorkload:
    return perfsim.AttentionWorkload(**{k: getattr(row, k) for k in WORKLOAD_FIELDS})


@pytest.mark.parametrize("gpu, algorithm", [
    ("h100-sxm5", "fa2"), ("h100-sxm5", "fa3"), ("h200-sxm", "sdpa-cudnn"),
    ("b200", "fa4"), ("a100-sxm4-80gb", "standard"), ("rtx-4090", "flash-attn-2"),
    ("h200-sxm", "flex"), ("l40s", "flex"), ("rtx-5090", "flex"),
])
def test_each_row_equals_predict_of_its_workload(gpu, algorithm):
    rows = _random_rows(300, seed=len(gpu) + len(algorithm))
    out = perfsim.predict_rows(rows, gpu=gpu, algorithm=algorithm)
    assert list(out.index) == list(rows.index)
    assert (out[["batch", "heads", "seqlen_q"]].to_numpy()
            == rows[["batch", "heads", "seqlen_q"]].to_numpy()).all()
    checked = refused = 0
    for row in out.sample(60, random_state=1).itertuples():
        w = _workload(row)
        try:
            p = perfsim.predict(w, gpu=gpu, algorithm=algorithm)
        except perfsim.InfeasibleError as exc:
            assert row.infeasible == str(exc) and np.isnan(row.seconds)
            refused += 1
            continue
        assert row.infeasible == ""
        assert row.seconds == pytest.approx(p.seconds, rel=REL)
        assert row.tflops == pytest.approx(p.tflops, rel=REL)
        assert row.bound == p.bound
        assert row.clock_hz == pytest.approx(p.clock_hz, rel=REL)
        for unit, seconds in p.unit_seconds.items():
            assert getattr(row, f"{unit}_seconds") == pytest.approx(seconds, rel=REL,
                                                                    abs=1e-30)
        for name in COUNT_COLUMNS:
            assert getattr(row, name) == pytest.approx(float(getattr(p.counts, name)),
                                                       rel=REL)
        assert row.memory_bytes == pytest.approx(p.memory_bytes, rel=REL)
        checked += 1
    assert checked >= 20, (checked, refused)


def test_the_three_input_forms_give_the_same_rows():
    # algorithm fa3, not the flash-attn-3 preset: the library refuses the fp8 K/V row
    workloads = [
        perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True),
        perfsim.AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072,
                                  head_dim=128),
        perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=1000, head_dim=64,
                                  window=(128, 0), kv_dtype="fp8_e4m3", page_size=256),
        perfsim.AttentionWorkload(batch=3, heads=16, seqlen_q=2048, head_dim=128,
                                  phase="fwd_bwd", dtype="fp16"),
    ]
    from_list = perfsim.predict_rows(workloads, gpu="h100-sxm5", algorithm="fa3")
    columns = {k: [getattr(w, k) for w in workloads] for k in WORKLOAD_FIELDS}
    from_mapping = perfsim.predict_rows(columns, gpu="h100-sxm5", algorithm="fa3")
    from_frame = perfsim.predict_rows(pd.DataFrame(columns), gpu="h100-sxm5",
                                      algorithm="fa3")
    pd.testing.assert_frame_equal(from_list, from_mapping)
    pd.testing.assert_frame_equal(from_list, from_frame)
    for w, row in zip(workloads, from_list.itertuples()):
        p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa3")
        assert (row.seconds, row.bound) == (pytest.approx(p.seconds, rel=REL), p.bound)
    assert list(from_list.window) == ["", "", "128,0", ""]
    assert list(from_list.page_size) == [0, 0, 256, 0]
    assert list(from_list.kv_dtype) == ["bf16", "bf16", "fp8_e4m3", "fp16"]


def test_missing_values_take_the_workloads_defaults():
    frame = pd.DataFrame({"batch": [2, 2], "heads": [16, 16], "kv_heads": [np.nan, 4],
                          "seqlen_q": [512, 512], "seqlen_k": [None, 2048],
                          "head_dim": [128, 128]})
    out = perfsim.predict_rows(frame, gpu="h200-sxm", algorithm="fa2")
    assert list(out.kv_heads) == [16, 4] and list(out.seqlen_k) == [512, 2048]
    assert list(out.head_dim_v) == [128, 128] and list(out.dtype) == ["bf16", "bf16"]
    first = perfsim.predict(perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=512,
                                                      head_dim=128), gpu="h200-sxm",
                            algorithm="fa2")
    assert out.seconds.iloc[0] == pytest.approx(first.seconds, rel=REL)


def test_a_row_the_model_refuses_keeps_its_reason():
    out = perfsim.predict_rows({"batch": [1, 1], "heads": [6, 5], "kv_heads": [2, 2],
                                "seqlen_q": [128, 128], "head_dim": [64, 64]},
                               gpu="h100-sxm5", algorithm="fa2")
    assert out.infeasible.iloc[0] == "" and out.seconds.iloc[0] > 0
    assert out.infeasible.iloc[1] == "kv_heads (2) must divide heads (5)"
    assert np.isnan(out.seconds.iloc[1]) and pd.isna(out.fits_memory.iloc[1])


@pytest.mark.parametrize("rows, words", [
    ([], "no rows"),
    ({"batch": [1], "heads": [8], "seqlen_q": [64]}, "needs column head_dim"),
    ({"batch": [1], "heads": [8], "seqlen_q": [64], "head_dim": [64], "seqlen": [3]},
     "unknown column 'seqlen'"),
    ({"batch": [1, 2], "heads": [8], "seqlen_q": [64], "head_dim": [64]},
     "columns of different lengths"),
    ({"batch": [1, 0], "heads": [8, 8], "seqlen_q": [64, 64], "head_dim": [64, 64]},
     "row 1: batch must be an integer"),
    ({"batch": [1, 2.5], "heads": [8, 8], "seqlen_q": [64, 64], "head_dim": [64, 64]},
     "row 1: batch must be an integer"),
    ({"batch": [1], "heads": [True], "seqlen_q": [64], "head_dim": [64]},
     "row 0: heads must be an integer"),
    ({"batch": [1], "heads": [8], "seqlen_q": [np.nan], "head_dim": [64]},
     "row 0: seqlen_q is missing"),
    ({"batch": [1, 1], "heads": [8, 8], "seqlen_q": [64, 64], "head_dim": [64, 64],
      "dtype": ["bf16", "bf17"]}, "row 1: "),
    ({"batch": [1], "heads": [8], "seqlen_q": [64], "head_dim": [64], "window": ["1,2,3"]},
     "row 0: window"),
    ({"batch": [2**40], "heads": [2**20], "seqlen_q": [2**20], "head_dim": [64]},
     "row 0: the Q/O tensor would hold"),
    ([perfsim.AttentionWorkload(batch=2, heads=8, seqlens_q=[10, 20], head_dim=64)],
     "variable-length batch"),
    (["not a workload"], "row 0 is a str"),
    ("batch=1", "give a pandas DataFrame"),
    ({"batch": 1, "heads": [8], "seqlen_q": [64], "head_dim": [64]},
     "column 'batch' must be a sequence"),
])
def test_bad_input_is_one_clear_error(rows, words):
    with pytest.raises(perfsim.PerfsimError, match=words.replace("(", r"\(")):
        perfsim.predict_rows(rows, gpu="h100-sxm5", algorithm="fa2")


def test_a_dataframe_index_labels_the_bad_row():
    frame = pd.DataFrame({"batch": [1], "heads": [8], "seqlen_q": [64], "head_dim": [64],
                          "phase": ["forward"]}, index=["request-7"])
    with pytest.raises(perfsim.PerfsimError, match="row 'request-7': "):
        perfsim.predict_rows(frame, gpu="h100-sxm5", algorithm="fa2")


def test_the_rows_command_reads_a_file_and_writes_every_row(tmp_path, capsys):
    from perfsim.cli import main

    trace = tmp_path / "trace.csv"
    trace.write_text("batch,heads,kv_heads,seqlen_q,seqlen_k,head_dim,causal,window\n"
                     "1,32,8,1,131072,128,False,\n"
                     "4,16,,4096,,128,False,\"1023,0\"\n"
                     "2,5,2,64,64,64,False,\n")
    out = tmp_path / "out.csv"
    assert main(["rows", str(trace), "--gpu", "h200-sxm", "-a", "fa2", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "3 rows (1 infeasible)" in shown and "window 1023,0" in shown
    rows = pd.read_csv(out)
    assert list(rows.kv_heads) == [8, 16, 2]
    assert list(rows.window.fillna("")) == ["", "1023,0", ""]
    assert rows.infeasible.iloc[2] == "kv_heads (2) must divide heads (5)"
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128,
                                  window=(1023, 0))
    p = perfsim.predict(w, gpu="h200-sxm", algorithm="fa2")
    assert rows.seconds.iloc[1] == pytest.approx(p.seconds, rel=REL)


@pytest.mark.parametrize("name, text, words", [
    ("none.csv", None, "no such file"),
    ("rows.txt", "batch\n1\n", "give a .csv, .parquet, .jsonl file"),
    ("empty.csv", "", "empty"),
    ("short.csv", "batch,heads\n1,8\n", "needs columns seqlen_q, head_dim"),
    ("ragged.csv", "batch,heads,seqlen_q,head_dim\n1,8,128,64,99\n",
     "a line has more fields than the header"),
    ("array.jsonl", '[{"batch": 1}]\n', "one JSON object per line, not one array"),
    # pandas reads a repeated column as "batch.1", then refused as an unknown field
    ("twice.csv", "batch,batch ,heads,seqlen_q,head_dim\n1,1,8,128,64\n",
     "the header names 'batch' more than once"),
    ("na.csv", "batch,heads,seqlen_q,head_dim\n1,8,128,64\nNA,8,128,64\n",
     "line 3: batch is missing (an empty cell, NA or NaN)"),
    ("bad.jsonl", "{not json\n", "line 1 is not JSON (Expecting property name"),
    # one bad cell made the column text, and the first row was blamed with a good value
    ("cell.csv", "batch,heads,seqlen_q,head_dim\n1,8,128,64\n2,8,128,64\n8x,8,128,64\n",
     "line 4, column batch: '8x' is not a number"),
    ("flag.csv", "batch,heads,seqlen_q,head_dim,causal\n1,8,128,64,1\n1,8,128,64,maybe\n",
     "line 3, column causal: 'maybe' is not true or false"),
    # errors name the file's line (a fresh user's report: 0-based data rows, and a JSON
    # error by character position), blank lines counted as the file has them
    ("gap.csv", "batch,heads,seqlen_q,head_dim\n1,8,128,64\n\n2,x,128,64\n",
     "line 4, column heads: 'x' is not a number"),
    ("gap.jsonl", '{"batch": 1, "heads": 8, "seqlen_q": 128, "head_dim": 64}\n\n{"batch": 2,}\n',
     "line 3 is not JSON"),
    ("number.jsonl", '{"batch": 1, "heads": 8, "seqlen_q": 128, "head_dim": 64}\n5\n',
     "line 2 is a JSON int, not an object of workload fields"),
    # a column perfsim does not read: said for a file, not for a Python call
    ("extra.csv", "batch,heads,seqlen_q,head_dim,request_id\n1,8,128,64,7\n",
     "unknown column 'request_id'; perfsim rows reads batch, heads"),
    ("varlen.csv", "batch,heads,seqlen_q,head_dim,seqlens_q\n1,8,128,64,7\n",
     "variable-length batches are perfsim predict-only"),
    # "nan" in a file is not a gap (an empty cell is): it ran with dropout 0 (a fresh
    # user's report), as did a JSON NaN; infinities were read as numbers
    ("nan.csv", "batch,heads,seqlen_q,head_dim,dropout_p\n1,16,1024,64,nan\n",
     "line 2, column dropout_p: 'nan' is not a finite number (leave the cell empty"),
    ("inf.csv", "batch,heads,seqlen_q,head_dim,dropout_p\n1,16,1024,64,inf\n",
     "line 2, column dropout_p: inf is not a finite number"),
    ("nan.jsonl", '{"batch": 1, "heads": 8, "seqlen_q": 128, "head_dim": 64, '
     '"dropout_p": NaN}\n', "line 1, field dropout_p: nan is not a finite number"),
])
def test_the_rows_command_gives_one_line_for_a_bad_file(tmp_path, capsys, name, text, words):
    from perfsim.cli import main

    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    assert main(["rows", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_every_missing_group_field_takes_its_default_and_pandas_na_is_missing():
    """Review findings: a gap in causal, dtype, phase, dropout_p or softcap (or pandas' NA
    anywhere) was refused instead of taking the default the docs promise."""
    base = dict(batch=[1, 2], heads=[8, 8], seqlen_q=[128, 256], head_dim=[64, 64])
    out = perfsim.predict_rows(pd.DataFrame({
        **base, "causal": pd.array([None, True], dtype="boolean"),
        "dtype": [None, "fp16"], "phase": [np.nan, "bwd"], "dropout_p": [np.nan, 0.1],
        "softcap": [None, 30.0], "kv_dtype": pd.array([None, "fp16"], dtype="string"),
        "window": [pd.NA, "128,0"]}), gpu="h100-sxm5", algorithm="fa2")
    first = out.iloc[0]
    fields = ("causal", "dtype", "phase", "dropout_p", "softcap", "kv_dtype", "window")
    assert [first[k] for k in fields] == [False, "bf16", "fwd", 0.0, 0.0, "bf16", ""]
    p = perfsim.predict(perfsim.AttentionWorkload(batch=1, heads=8, seqlen_q=128,
                                                  head_dim=64), gpu="h100-sxm5")
    assert first.seconds == pytest.approx(p.seconds, rel=REL)


def test_window_pairs_as_arrays_and_flags_checked_row_by_row():
    """Review findings: a window pair as a numpy array (a Parquet list column) raised
    TypeError; causal=[True, 1] was accepted as two flags (True == 1 grouped them)."""
    base = dict(batch=[1, 1], heads=[8, 8], seqlen_q=[512, 512], head_dim=[64, 64])
    out = perfsim.predict_rows({**base, "causal": [True, True],
                                "window": [np.array([128, 0]), None]})
    assert list(out.window) == ["128,0", ""]
    with pytest.raises(perfsim.PerfsimError, match="row 1: .*causal"):
        perfsim.predict_rows({**base, "causal": [True, 1]})


def test_errors_name_the_index_label_and_the_memory_limit_given():
    frame = pd.DataFrame(dict(batch=[1, 0], heads=[8, 8], seqlen_q=[128, 128],
                              head_dim=[64, 64]), index=["req-a", "req-b"])
    with pytest.raises(perfsim.PerfsimError, match="row 'req-b': batch must be an integer"):
        perfsim.predict_rows(frame)
    with pytest.raises(perfsim.PerfsimError, match="^predict_rows: .*max_memory_bytes"):
        perfsim.predict_rows(frame.iloc[:1], max_memory_bytes=10)


def test_the_rows_table_shows_the_fields_that_tell_its_rows_apart(tmp_path, capsys):
    # two rows that differ only in a field away from its default must not print alike
    from perfsim.cli import main

    path = tmp_path / "rows.csv"
    path.write_text("batch,heads,kv_heads,seqlen_q,seqlen_k,head_dim,head_dim_v,dtype,"
                    "kv_dtype,page_size,softcap\n"
                    "1,32,8,1,8192,128,128,bf16,fp8_e4m3,,\n"
                    "1,32,8,1,8192,128,128,bf16,,256,\n"
                    "1,32,8,1,8192,128,128,fp16,,,30\n"
                    "1,32,8,1,8192,192,128,bf16,,,\n")
    assert main(["rows", str(path), "--gpu", "h100-sxm5", "-a", "fa3"]) == 0
    shown = capsys.readouterr().out
    for words in ("K/V fp8_e4m3", "page 256", "softcap 30", "fp16", "192/128", "also",
                  "dtype"):
        assert words in shown, words
    # without such fields the column is left out
    path.write_text("batch,heads,seqlen_q,head_dim\n1,8,256,64\n")
    assert main(["rows", str(path)]) == 0
    assert "also" not in capsys.readouterr().out


def test_a_rows_csv_may_write_causal_as_0_and_1(tmp_path, capsys):
    from perfsim.cli import main

    path = tmp_path / "bits.csv"
    out = tmp_path / "out.csv"
    # (a gap makes pandas read 1.0 and 0.0; a header may have spaces after its commas)
    for body, want in (("1\n1,8,1024,64,0", [True, False]), ("TRUE\n1,8,1024,64,", [True, False]),
                       ("0\n1,8,1024,64,1.0", [False, True]), ("no\n1,8,1024,64,Yes",
                                                               [False, True])):
        path.write_text(f"batch, heads, seqlen_q, head_dim, causal\n1,8,1024,64,{body}\n")
        assert main(["rows", str(path), "--gpu", "h100-sxm5", "-a", "fa2", "--out", str(out),
                     "-q"]) == 0
        assert list(pd.read_csv(out).causal) == want, body


def test_a_jsonl_rows_file_may_write_causal_as_0_and_1_and_names_a_field_once(tmp_path,
                                                                           capsys):
    """A fresh user's report: ``"causal": 1`` in a JSON line was refused although the CSV
    reader and the docs take 1/0, and a line naming a field twice kept the last value
    silently (JSON's own rule) where a CSV header naming a column twice is refused."""
    from perfsim.cli import main

    path, out = tmp_path / "w.jsonl", tmp_path / "out.csv"
    row = '"batch": 1, "heads": 8, "seqlen_q": 1024, "head_dim": 64'
    path.write_text("".join(f'{{{row}, "causal": {c}}}\n'
                            for c in ("1", "0", "true", '"yes"', "null")))
    assert main(["rows", str(path), "--gpu", "h100-sxm5", "-a", "fa2", "--out", str(out),
                 "-q"]) == 0
    assert list(pd.read_csv(out).causal) == [True, False, True, True, False]
    path.write_text(f'{{{row}, "causal": 2}}\n')
    assert main(["rows", str(path)]) == 2
    assert "line 1, column causal: 2 is not true or false" in capsys.readouterr().err
    path.write_text(f'{{{row}, "batch": 2}}\n')
    assert main(["rows", str(path)]) == 2
    assert "line 1 names 'batch' more than once" in capsys.readouterr().err
    # a Parquet file's integer causal column reads the same way
    pytest.importorskip("pyarrow")
    parquet = tmp_path / "w.parquet"
    pd.DataFrame({"batch": [1, 1], "heads": 8, "seqlen_q": 1024, "head_dim": 64,
                  "causal": [1, 0]}).to_parquet(parquet)
    assert main(["rows", str(parquet), "--gpu", "h100-sxm5", "-a", "fa2", "--out", str(out),
                 "-q"]) == 0
    assert list(pd.read_csv(out).causal) == [True, False]


def test_rows_will_not_write_over_its_own_rows_file(tmp_path, capsys):
    """A fresh user's report: ``perfsim rows w.csv --out w.csv`` replaced the workloads with
    the results, which perfsim rows then could not read."""
    from perfsim.cli import main

    path = tmp_path / "w.csv"
    text = "batch,heads,seqlen_q,head_dim\n1,8,1024,64\n"
    path.write_text(text)
    (tmp_path / "sub").mkdir()
    for out in (path, tmp_path / "sub" / ".." / "w.csv"):
        assert main(["rows", str(path), "--out", str(out)]) == 2
        assert "is the rows file itself" in capsys.readouterr().err
    assert path.read_text() == text


def test_rows_quiet_with_nowhere_to_put_them_is_refused(tmp_path, capsys):
    from perfsim.cli import main

    path = tmp_path / "w.csv"
    path.write_text("batch,heads,seqlen_q,head_dim\n1,8,1024,64\n")
    assert main(["rows", str(path), "-q"]) == 2
    assert "--quiet without --out or --json" in capsys.readouterr().err


def test_rows_out_json_points_at_the_json_flag(tmp_path, capsys):
    from perfsim.cli import main

    path = tmp_path / "w.csv"
    path.write_text("batch,heads,seqlen_q,head_dim\n1,8,1024,64\n")
    for name in ("rows.json", "rows.JSONL"):
        assert main(["rows", str(path), "--out", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert "--json flag prints the rows" in err and "Traceback" not in err
        assert not (tmp_path / name).exists()


def test_a_rows_csv_takes_empty_and_na_cells_as_the_default(tmp_path):
    from perfsim.cli.rows_cmd import read_rows

    path = tmp_path / "gaps.csv"
    path.write_text("batch,heads,seqlen_q,head_dim,dropout_p\n1,8,128,64,\n2,8,128,64,NA\n")
    frame = read_rows(str(path))
    assert frame["dropout_p"].isna().all()
    rows = perfsim.predict_rows(frame, gpu="h100-sxm5", algorithm="fa2")
    assert (rows["dropout_p"] == 0).all()
