"""perfsim.sweep: rows equal single predict() calls; grids, what-ifs, infeasible rows, speed."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfsim
from perfsim.sweep import COUNT_COLUMNS, WORKLOAD_FIELDS, as_swept, single_split, sweep

# the module (``perfsim.sweep`` is the function)
sweep_module = importlib.import_module("perfsim.sweep")

REL = 1e-9

# Odd sizes, GQA (and kv_heads that do not divide heads), N_q != N_k, every phase.
GRID = {"batch": [1, 3], "heads": [8, 12], "kv_heads": [1, 4, 8, 12],
        "seqlen_q": [1, 100, 777, 2048], "seqlen_k": [64, 1000, 2049], "head_dim": [64, 96, 128],
        "causal": [False, True], "phase": ["fwd", "bwd", "fwd_bwd"]}


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return sweep(**GRID, gpus=["a100-sxm4-80gb", "h200-sxm", "rtx-5090"])


def _workload(row) -> perfsim.AttentionWorkload:
    # the row as it is: its page_size column's 0 (contiguous K/V) reads as None
    return perfsim.AttentionWorkload(**{k: getattr(row, k) for k in WORKLOAD_FIELDS})


def _assert_row_matches(row, p) -> None:
    assert row.seconds == pytest.approx(p.seconds, rel=REL)
    assert row.tflops == pytest.approx(p.tflops, rel=REL)
    assert row.bound == p.bound
    for unit, seconds in p.unit_seconds.items():
        assert getattr(row, f"{unit}_seconds") == pytest.approx(seconds, rel=REL, abs=1e-30)
    for name in COUNT_COLUMNS:
        assert getattr(row, name) == pytest.approx(float(getattr(p.counts, name)), rel=REL)
    assert row.memory_bytes == pytest.approx(p.memory_bytes, rel=REL)
    assert row.fits_memory == (p.memory_bytes <= p.gpu.hbm_bytes)


def test_rows_equal_predict_on_a_random_sample(frame):
    feasible = frame[frame.infeasible == ""]
    assert len(feasible) > 1000
    assert set(feasible.causal) == {False, True}
    assert (feasible.kv_heads < feasible.heads).any()
    assert (feasible.seqlen_q != feasible.seqlen_k).any()
    for row in feasible.sample(150, random_state=0).itertuples():
        p = perfsim.predict(_workload(row), gpu=row.gpu, algorithm=row.algorithm)
        _assert_row_matches(row, p)


def test_infeasible_rows_are_kept_with_their_reason(frame):
    combos = np.prod([len(v) for v in GRID.values()])
    assert len(frame) == combos * 3 * len(perfsim.algorithms.names())
    bad = frame[frame.infeasible != ""]
    assert bad.seconds.isna().all() and bad.tflops.isna().all()
    # no footprint, so no answer: missing, not False (it read False before)
    assert bad.fits_memory.isna().all() and frame.fits_memory.dtype == "boolean"
    assert frame[frame.infeasible == ""].fits_memory.notna().all()
    assert (bad.bound == "").all()
    gqa = bad[bad.heads % bad.kv_heads != 0]
    assert gqa.infeasible.str.contains("must divide heads").all()
    others = bad[bad.heads % bad.kv_heads == 0]
    for row in others.sample(min(20, len(others)), random_state=1).itertuples():
        with pytest.raises(perfsim.InfeasibleError):
            perfsim.predict(_workload(row), gpu=row.gpu, algorithm=row.algorithm)


def test_blocks_of_any_shape_give_the_same_rows(monkeypatch):
    small = dict(GRID, phase="fwd", head_dim=96, causal=True)
    expected = sweep(**small, gpus=["h200-sxm"], algorithms=["fa2", "standard"])
    for rows in (1, 5, 13, 50):   # cuts along seqlen, heads and batch
        monkeypatch.setattr(sweep_module, "CHUNK_ROWS", rows)
        got = sweep(**small, gpus=["h200-sxm"], algorithms=["fa2", "standard"])
        pd.testing.assert_frame_equal(got, expected)


def test_huge_counts_do_not_overflow():
    w = perfsim.AttentionWorkload(batch=512, heads=128, seqlen_q=2**20, head_dim=256,
                                  phase="fwd_bwd")
    df = sweep(batch=w.batch, heads=w.heads, seqlen_q=w.seqlen_q, head_dim=w.head_dim,
               phase=w.phase, gpus="b200", algorithms="fa2")
    p = perfsim.predict(w, gpu="b200", algorithm="fa2")
    _assert_row_matches(next(df.itertuples()), p)


def test_overrides_scale_and_set_gpu_fields():
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=4096, head_dim=128, causal=True)
    df = sweep(batch=2, heads=16, seqlen_q=4096, head_dim=128, causal=True, gpus="h200-sxm",
               algorithms="fa2", overrides={"hbm_bandwidth_bytes_per_s": {"scale": [0.5, 2]},
                                            "sm_count": [66, 132],
                                            "mma_sync_flops_per_clk_per_sm.bf16": [4096]})
    assert len(df) == 4
    assert set(df.hbm_bandwidth_bytes_per_s_scale) == {0.5, 2}
    assert set(df.sm_count) == {66, 132}
    base = perfsim.load_gpu("h200-sxm")
    for row in df.itertuples():
        table = dict(base.mma_sync_flops_per_clk_per_sm, bf16=4096)
        gpu = base.replace(sm_count=row.sm_count, mma_sync_flops_per_clk_per_sm=table,
                           hbm_bandwidth_bytes_per_s=base.hbm_bandwidth_bytes_per_s
                           * row.hbm_bandwidth_bytes_per_s_scale)
        _assert_row_matches(row, perfsim.predict(w, gpu=gpu, algorithm="fa2"))
        assert row.gpu == "h200-sxm" and "sm_count=" in row.overrides


def test_invalid_what_if_gpu_is_an_infeasible_row():
    df = sweep(batch=1, heads=8, seqlen_q=512, head_dim=64, gpus="h200-sxm", algorithms="fa2",
               overrides={"smem_bytes_per_sm": {"scale": [1, 0.5]}})
    assert list(df.infeasible == "") == [True, False]
    assert "what-if GPU is invalid" in df.infeasible.iloc[1]


@pytest.mark.parametrize("overrides, match", [
    ({"sm_count": [0, 132]}, r"'sm_count': must be an integer of SMs, from 1 to 4096, got 0"),
    ({"tensor_flops_per_clk_per_sm.bf16": [0]}, r"bf16': must be a number .* got 0$"),
    ({"tensor_flops_per_clk_per_sm": [{"bf16": 4096, "fp16": -1}]}, r"got -1$"),
    ({"clock_hz": [1830]}, r"got 1830 \(in MHz\? 1830 MHz is 1\.83e\+09 Hz\)"),
])
def test_a_set_what_if_value_no_gpu_could_take_is_one_error(overrides, match):
    """A value set (not scaled) outside the field's range was 'wrote rows', exit 0, every row
    infeasible (a fresh user's report); a scale stays per GPU, above."""
    with pytest.raises(perfsim.PerfsimError, match=match):
        sweep(batch=1, heads=8, seqlen_q=512, head_dim=64, gpus="h200-sxm", algorithms="fa2",
              overrides=overrides)


@pytest.mark.parametrize("kwargs, match", [
    ({"batch": 0}, "batch must be integers"),
    ({"seqlen_q": [128, 2.5]}, "seqlen_q must be integers"),
    ({"dtype": "fp64"}, "dtype"),
    ({"algorithms": "fa9"}, "unknown algorithm"),
    ({"gpus": "h900"}, "unknown GPU"),
    ({"overrides": {"warp_speed": [2]}}, "unknown GPU override"),
    ({"overrides": {"sm_count": {"times": [2]}}}, "scale"),
    # a repeated entry's rows could not be told apart (a fresh user's review)
    ({"algorithms": ["fa2", "fa2"]}, "'fa2' given more than once"),
    ({"gpus": ["h200-sxm", "h200-sxm"]}, "'h200-sxm' given more than once"),
    # dtypes and phases as the grid reads them, in any case and with spaces trimmed
    ({"dtype": ["bf16", "BF16", " bf16"]}, "dtype: 'bf16' given more than once"),
    ({"phase": ["fwd", "FWD"]}, "phase: 'fwd' given more than once"),
    ({"gpus": ["h200-sxm", str(Path(__file__).parent.parent / "hardware" / "h200-sxm.toml")]},
     "give each GPU file its own `id`"),
    ({"gpus": [perfsim.load_gpu("h200-sxm").replace(sm_count=100),
               perfsim.load_gpu("h200-sxm").replace(sm_count=120)]}, r"replace\(id="),
    # factors an integer field rounds to one value: copies under two labels (a fresh user's
    # report); 132 x 1.004 rounds to 133 and stays apart
    ({"overrides": {"sm_count": {"scale": [1, 1.003]}}},
     r"sm_count×1 and sm_count×1.003 give h200-sxm the same value \(132"),
])
def test_bad_grids_raise_one_clear_error(kwargs, match):
    args = {"batch": 1, "heads": 8, "seqlen_q": 512, "head_dim": 64, "gpus": "h200-sxm"}
    with pytest.raises(perfsim.PerfsimError, match=match):
        sweep(**{**args, **kwargs})


@pytest.mark.parametrize("field", ["window", "kv_dtype", "page_size"])
def test_empty_inference_list_is_one_clear_error(field):
    with pytest.raises(perfsim.PerfsimError, match=f"sweep: {field} is an empty list; give "
                       "at least one value"):
        sweep(batch=1, heads=32, seqlen_q=1, head_dim=128, gpus="h200-sxm", algorithms="fa2",
              **{field: []})


@pytest.mark.parametrize("window, labels", [
    ("1023,0", ["1023,0"]), ("none,0", ["none,0"]), (["1023,0", ""], ["1023,0", ""]),
    (["none", 0], ["none,0"]), ([[64, 64], "8, none"], ["64,64", "8,none"]),
    # a list of one "no window" (a fresh user's report: refused as a malformed pair)
    ([None], [""]), (["none"], [""]), (["NONE", [1023, 0]], ["", "1023,0"]),
])
def test_window_takes_the_csv_columns_format(window, labels):
    df = sweep(batch=1, heads=8, seqlen_q=1, seqlen_k=4096, head_dim=64, gpus="h200-sxm",
               algorithms="fa2", window=window)
    assert list(df.window) == labels and (df.infeasible == "").all()
    with pytest.raises(perfsim.PerfsimError, match="LEFT,RIGHT"):
        sweep(batch=1, heads=8, seqlen_q=1, head_dim=64, gpus="h200-sxm", window="1,2,3")
    for flat in ([5], [1, 2, 3], [None, 4, None]):      # sides that make no pair
        with pytest.raises(perfsim.PerfsimError, match="LEFT,RIGHT"):
            sweep(batch=1, heads=8, seqlen_q=1, head_dim=64, gpus="h200-sxm", window=flat)


def test_stand_in_column_says_what_predict_notes_say():
    """A fresh user's report: a sweep row of FlexAttention with fewer than 128 query rows
    looked fully modelled, while predict() notes that perfsim times the prefill template in
    place of flex_decoding. Each row's stand_in is the preset's note as predict() gives it
    (its first note), "" where there is none."""
    df = perfsim.sweep(batch=1, heads=16, seqlen_q=[16, 256], seqlen_k=4096, head_dim=128,
                       causal=[False, True], gpus=["h100-sxm5", "a100-sxm4-80gb"],
                       algorithms=["flex", "sdpa-cudnn", "fa2"])
    assert set(df.stand_in.astype(str)) > {""}
    for r in df.itertuples():
        p = perfsim.predict(perfsim.AttentionWorkload(
            batch=1, heads=16, seqlen_q=r.seqlen_q, seqlen_k=4096, head_dim=128,
            causal=r.causal), r.gpu, r.algorithm)
        note = p.algorithm.stand_in_note(p.gpu, p.workload) if r.algorithm != "fa2" else None
        assert str(r.stand_in) == (note or ""), (r.gpu, r.algorithm, r.seqlen_q, r.causal)
        if note:
            assert p.notes()[0] == note


def test_single_split_presets_fix_splits_and_packing():
    from perfsim.implementations import Implementation, implementations

    for name in implementations():
        assert as_swept(name) == perfsim.implementations.resolve(name)
        preset = single_split(name)
        if name in ("sdpa-math", "eager"):         # Standard: no such options
            assert preset.options == {}
        else:
            assert preset.options == {"num_splits": 1, "pack_gqa": False}
    kept = single_split(Implementation(preset="flash-attn-2", options={"num_splits": 4}))
    assert kept.options == {"num_splits": 4, "pack_gqa": False}


def test_preset_rows_equal_predict_on_decode_and_gqa_shapes():
    """Every preset's rows equal predict's, GQA and decode shapes included: the split-KV and
    packing choices, sdpa-cudnn's one-token decode kernel on Hopper and FA4's one-Q-tile
    launch on Blackwell are made per row (until 2026-12-03 a sweep took the prefill path
    there). Presets without grouped-query attention refuse H != H_kv on scalar shapes only
    (implementations.py)."""
    from perfsim.implementations import implementations

    df = sweep(batch=[1, 4], heads=32, kv_heads=[8, 32], seqlen_q=[1, 16, 1000],
               seqlen_k=4096, head_dim=128, gpus=["a100-sxm4-80gb", "h200-sxm", "b200"],
               algorithms=implementations(), phase=["fwd", "fwd_bwd"])
    feasible = df[df.infeasible == ""]
    # (the tutorial takes one sequence length for Q and K/V: none of these shapes; it has no
    # GQA either, which predict names first where H != H_kv)
    assert set(feasible.algorithm) == set(implementations()) - {"triton-tutorial"}
    tutorial = df[df.algorithm == "triton-tutorial"]
    gqa = tutorial.heads != tutorial.kv_heads
    assert tutorial[gqa].infeasible.str.contains("grouped-query").all()
    assert tutorial[~gqa].infeasible.str.contains("one sequence length").all()
    decode = feasible[(feasible.algorithm == "sdpa-cudnn") & (feasible.gpu == "h200-sxm")
                      & (feasible.seqlen_q == 1)]
    assert len(decode) == 8
    for row in feasible.itertuples():
        try:
            p = perfsim.predict(_workload(row), gpu=row.gpu, algorithm=row.algorithm)
        except perfsim.InfeasibleError as exc:
            assert row.heads != row.kv_heads and "grouped-query" in str(exc)
            continue
        _assert_row_matches(row, p)


def test_split_and_packing_choices_equal_predicts_element_by_element():
    """choice_arrays against decide on every element: the three references' rules, GQA,
    windows, dropout, masks, several GPUs; the sweep's rows against predict's on the same
    grid (split counts from 1 to the maximum appear)."""
    from perfsim.algorithms import FA2, FA3, FA4
    from perfsim.algorithms.base import Dims

    sizes = dict(batch=[1, 2, 7, 64], heads=[8, 32], kv_heads=[1, 8],
                 seqlen_q=[1, 3, 64, 200, 4096], seqlen_k=[100, 1000, 33000, 262144])
    grid = np.stack(np.meshgrid(*sizes.values(), indexing="ij")).reshape(5, -1)
    seen = set()
    for gpu_id, algo, extra in (("h100-sxm5", FA2(), {}), ("a100-sxm4-80gb", FA2(), {}),
                                ("h100-sxm5", FA3(), {}), ("h100-sxm5", FA3(), {"causal": True}),
                                ("h100-sxm5", FA3(), {"window": (256, 0)}),
                                ("h100-sxm5", FA3(), {"window": (1023, 64)}),
                                ("b200", FA4(), {}), ("b200", FA4(), {"window": (256, 0)}),
                                ("h100-sxm5", FA2(), {"dropout_p": 0.1})):
        gpu = perfsim.load_gpu(gpu_id)
        arrays = Dims(*grid, 128, 128, extra.get("causal", False), "bf16", "fwd",
                      extra.get("dropout_p", 0.0), window=extra.get("window", (None, None)))
        splits, group, _ = algo.split_choices(arrays, gpu)
        for i in range(grid.shape[1]):
            b, h, hkv, nq, nk = (int(x) for x in grid[:, i])
            one = Dims(b, h, hkv, nq, nk, 128, 128, extra.get("causal", False), "bf16", "fwd",
                       extra.get("dropout_p", 0.0), window=extra.get("window", (None, None)))
            if isinstance(algo, FA4):
                q_tiles, b_c = algo.fwd_tiles(one, gpu)
                from perfsim.algorithms.splits import decide
                chosen = decide(one, gpu, algo.num_splits, algo.pack_gqa, "cute", 128 * q_tiles,
                                b_c)
            else:
                chosen = algo.forward_dims(one, gpu)
            assert (splits.ravel()[i], group.ravel()[i]) == (chosen.splits, chosen.group), (
                gpu_id, algo.name, extra, (b, h, hkv, nq, nk))
            seen.add(int(chosen.splits))
    assert len(seen) > 5 and max(seen) > 16
    rows = sweep(**sizes, head_dim=128, gpus="h100-sxm5", algorithms=["fa2", "fa3"])
    for row in rows[rows.infeasible == ""].sample(60, random_state=2).itertuples():
        _assert_row_matches(row, perfsim.predict(_workload(row), gpu=row.gpu,
                                                 algorithm=row.algorithm))


def test_pack_gqa_true_sweeps_every_head_ratio():
    from perfsim.algorithms import FA2
    from perfsim.implementations import Implementation

    args = dict(batch=[1, 8], heads=32, kv_heads=[4, 8, 32], seqlen_q=[1, 100],
                seqlen_k=4096, head_dim=128, gpus="h200-sxm")
    configs = {a.label(): a for a in (FA2(pack_gqa=True), Implementation(
        preset="flash-attn-2", options={"pack_gqa": True}))}
    packed = sweep(**args, algorithms=list(configs.values()))
    plain = sweep(**args, algorithms=["fa2", "flash-attn-2"])
    assert list(packed.algorithm.unique()) == ["fa2(pack_gqa=True)",
                                               "flash-attn-2(pack_gqa=True)"]
    assert (packed.infeasible == "").all()
    same = (packed.heads == packed.kv_heads).to_numpy()
    np.testing.assert_array_equal(packed.seconds[same], plain.seconds[same])
    assert (packed.seconds[~same].to_numpy() != plain.seconds[~same].to_numpy()).any()
    for row in packed.itertuples():
        _assert_row_matches(row, perfsim.predict(_workload(row), gpu=row.gpu,
                                                 algorithm=configs[row.algorithm]))


def test_docstring_says_only_varlen_is_predict_only():
    doc = " ".join(sweep.__doc__.split())
    assert "only variable-length batches" in doc
    assert "softcap are ``predict``-only" not in doc


def test_progress_reports_every_block():
    calls = []
    sweep(batch=[1, 2], heads=8, seqlen_q=[128, 256], head_dim=64, gpus="h200-sxm",
          algorithms=["fa2", "fa1"], progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (8, 8) and all(t == 8 for _, t in calls)


def test_sweep_throughput(benchmark):
    """One algorithm, 2^20 predictions (FA2 forward, causal and not, on one GPU)."""
    grid = {"batch": list(range(1, 65)), "heads": [1, 2, 4, 8, 12, 16, 32, 64],
            "seqlen_q": list(range(128, 128 + 1024 * 16, 16)), "head_dim": 128,
            "causal": [False, True], "gpus": "h200-sxm", "algorithms": "fa2"}
    seconds = []

    def run():
        start = time.perf_counter()
        out = sweep(**grid)
        seconds.append(time.perf_counter() - start)
        return out

    df = benchmark(run)
    rate = len(df) / min(seconds)
    benchmark.extra_info["predictions_per_s"] = rate
    assert len(df) == 2**20 and (df.infeasible == "").all()
    print(f"\nsweep throughput: {rate / 1e6:.2f} M predictions/s")


# ------------------------------------------------------------------ CLI
CONFIG = """
gpus = ["h200-sxm"]
algorithms = ["fa2", {name = "fa2", block_m = 64}]

[workload]
batch = 2
heads = 16
seqlen_q = [512, 1024, 2048]
head_dim = [64, 128]

[overrides]
hbm_bandwidth_bytes_per_s = {scale = [0.5, 1]}
"""


def test_cli_sweep_writes_csv_and_png(tmp_path, capsys):
    from perfsim.cli import main

    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG)
    out, png = tmp_path / "rows.csv", tmp_path / "fig.png"
    assert main(["sweep", str(config), "--out", str(out), "--plot", str(png)]) == 0
    df = pd.read_csv(out, keep_default_na=False)
    assert len(df) == 3 * 2 * 2 * 2 and set(df.algorithm) == {"fa2", "fa2(block_m=64)"}
    assert png.stat().st_size > 10_000
    assert "24 predictions" in capsys.readouterr().out
    assert main(["sweep", str(config), "-q", "--plot", str(png), "--plot-kind",
                 "bottleneck"]) == 0
    assert capsys.readouterr().out == ""


def test_cli_sweep_json_records(tmp_path, capsys):
    import json

    from perfsim.cli import main

    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG)
    assert main(["sweep", str(config), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 24 and {"seconds", "bound", "infeasible"} <= set(records[0])


def test_cli_sweep_window_strings(tmp_path):
    from perfsim.cli import main

    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG.replace("head_dim = [64, 128]",
                                     "head_dim = 64\nwindow = ['1023,0', 'none,0']"))
    out = tmp_path / "rows.csv"
    assert main(["sweep", str(config), "-q", "--out", str(out)]) == 0
    df = pd.read_csv(out, keep_default_na=False)
    assert set(df.window) == {"1023,0", "none,0"} and len(df) == 3 * 2 * 2 * 2
    config.write_text(CONFIG.replace("head_dim = [64, 128]", "head_dim = 64\nwindow = '1023,0'"))
    assert main(["sweep", str(config), "-q", "--out", str(out)]) == 0
    assert set(pd.read_csv(out, keep_default_na=False).window) == {"1023,0"}


@pytest.mark.parametrize("text, match", [
    ("[workload]\nbatch = 1\n", "needs heads, seqlen_q, head_dim"),
    ("gpu = ['h200-sxm']\n", "unknown key(s) gpu"),
    ("[workload\n", "not valid TOML"),
    (CONFIG.replace("batch = 2", "batch = 'two'"), "batch must be integers"),
    (CONFIG.replace("block_m = 64", "block_q = 64"), "fa2 has no option block_q"),
    (CONFIG.replace("head_dim = [64, 128]", "head_dim = 64\nheadim = 3"), "unknown field"),
    (CONFIG.replace("head_dim = [64, 128]", "head_dim = 64\nwindow = []"),
     "bad.toml: window is an empty list; give at least one value"),
    (CONFIG.replace("head_dim = [64, 128]", "head_dim = 64\nwindow = [1, 2, 3]"),
     "got [1, 2, 3]"),
    (CONFIG.replace("h200-sxm", "h100-sxm9"), "bad.toml: unknown GPU 'h100-sxm9'"),
    (CONFIG.replace('"fa2", {', '"fa9", {'), "bad.toml: unknown algorithm 'fa9'"),
    (CONFIG.replace("head_dim = [64, 128]", "head_dim = 64\nseqlens_q = [1, 7]"),
     "variable-length batches are perfsim.predict-only (sweeps evaluate fixed-length rows)"),
    (CONFIG.replace("head_dim = [64, 128]", "head_dim = 64\nwindow = 'a,b'"), "LEFT,RIGHT"),
])
def test_cli_sweep_bad_config_is_one_line_exit_2(tmp_path, capsys, text, match):
    from perfsim.cli import main

    config = tmp_path / "bad.toml"
    config.write_text(text)
    assert main(["sweep", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err


def test_a_window_takes_the_mask_the_kernels_see_for_each_row():
    """A window side that hides nothing is dropped and a right edge of 0 is the causal mask
    (``effective_mask``), per row of the sweep as in ``predict``: with N_q = 17 and
    N_k = 64, (128, 0) is the (bottom-right) causal mask and (500, 500) no mask."""
    rows = sweep(batch=1, heads=8, kv_heads=1, seqlen_q=17, seqlen_k=[64, 4096],
                 head_dim=128, window=[(128, 0), (500, 500)], phase="fwd",
                 gpus="rtx-4090", algorithms="fa2")
    assert (rows.infeasible == "").all()
    for r in rows.itertuples():
        window = tuple(None if side == "none" else int(side) for side in r.window.split(","))
        w = perfsim.AttentionWorkload(batch=1, heads=8, kv_heads=1, seqlen_q=17,
                                      seqlen_k=r.seqlen_k, head_dim=128, window=window)
        p = perfsim.predict(w, "rtx-4090", "fa2")
        assert r.mufu_seconds == pytest.approx(p.unit_seconds["mufu"], rel=1e-9)
        assert r.exp_ops == pytest.approx(p.counts.exp_ops, rel=1e-9)


def test_overrides_take_toml_nested_tables_as_dotted_names():
    """TOML reads an unquoted dotted key as nested tables; the override means the same."""
    from perfsim.whatif import parse_overrides

    nested = parse_overrides({"tensor_flops_per_clk_per_sm": {"bf16": [8192, 16384]},
                              "mma_sync_flops_per_clk_per_sm": {"fp16": {"scale": [2]}}})
    dotted = parse_overrides({"tensor_flops_per_clk_per_sm.bf16": [8192, 16384],
                              "mma_sync_flops_per_clk_per_sm.fp16": {"scale": [2]}})
    assert nested == dotted


@pytest.mark.parametrize("factor", [float("nan"), float("inf"), -1, 0, True, "2"])
def test_scale_factors_must_be_finite_and_positive(factor):
    with pytest.raises(perfsim.PerfsimError, match="scale factors must be finite numbers > 0"):
        sweep(batch=1, heads=1, seqlen_q=64, head_dim=64, gpus="h100-sxm5",
              algorithms="fa2", overrides={"clock_hz": {"scale": [factor]}})


@pytest.mark.parametrize("kwargs, match", [
    ({"headdim": 64}, "unknown field headdim; needs head_dim; fields: batch"),
    ({"head_dim": 64, "seqlens_q": [1, 2]}, "seqlens_q .variable-length batches are "
                                            "perfsim.predict-only"),
])
def test_unknown_or_missing_fields_are_one_clear_error(kwargs, match):
    with pytest.raises(perfsim.PerfsimError, match=match):
        sweep(batch=1, heads=1, seqlen_q=64, gpus="h100-sxm5", algorithms="fa2", **kwargs)


def test_none_in_a_kv_heads_or_seqlen_k_list_follows_heads_or_seqlen_q():
    """``kv_heads=[None, 2]``: each head count as multi-head attention and with 2 K/V heads
    (a fresh user found MHA and GQA could not share one sweep); each row as ``predict``."""
    df = perfsim.sweep(batch=2, heads=[8, 16], kv_heads=[None, 2], seqlen_q=[1024, 2048],
                       seqlen_k=[None, 4096], head_dim=64, gpus="h100-sxm5",
                       algorithms="fa2")
    assert len(df) == 16
    assert sorted(set(zip(df.heads, df.kv_heads))) == [(8, 2), (8, 8), (16, 2), (16, 16)]
    assert sorted(set(zip(df.seqlen_q, df.seqlen_k))) == [(1024, 1024), (1024, 4096),
                                                          (2048, 2048), (2048, 4096)]
    for row in df.itertuples():
        w = perfsim.AttentionWorkload(batch=2, heads=row.heads, kv_heads=row.kv_heads,
                                      seqlen_q=row.seqlen_q, seqlen_k=row.seqlen_k,
                                      head_dim=64)
        assert row.seconds == pytest.approx(
            perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2").seconds, rel=1e-9)
    # a pair named twice is one row; a bad entry beside None is still refused
    assert len(perfsim.sweep(batch=1, heads=8, kv_heads=[None, 8], seqlen_q=512, head_dim=64,
                             gpus="h100-sxm5", algorithms="fa2")) == 1
    with pytest.raises(perfsim.PerfsimError, match="kv_heads must be integers"):
        perfsim.sweep(batch=1, heads=8, kv_heads=[None, 0], seqlen_q=512, head_dim=64,
                      gpus="h100-sxm5", algorithms="fa2")


def test_timing_fields_apply_to_each_group_defaults():
    """A dict of TimingParams fields is set on each (GPU, algorithm)'s own defaults — each
    keeps its software profile's other fields — and every row equals predict with the same
    fields; a TimingParams object is used as it is."""
    kernel_only = {"host_floor_fwd_s": 0.0, "host_floor_bwd_s": 0.0}
    # (grids big enough that the split-KV heuristic picks one split, as sweeps take it)
    df = sweep(batch=1, heads=[8, 16], seqlen_q=[128, 2048], head_dim=64,
               causal=[False, True], gpus=["h200-sxm", "a100-sxm4-80gb"],
               algorithms=["flex", "sdpa-flash", "fa2"], timing=kernel_only)
    assert (df["bound"] != "host").all()
    for row in df.itertuples():
        w = perfsim.AttentionWorkload(batch=1, heads=row.heads, seqlen_q=row.seqlen_q,
                                      head_dim=64, causal=row.causal)
        p = perfsim.predict(w, row.gpu, row.algorithm,
                            timing=perfsim.timing_for(row.gpu, row.algorithm, **kernel_only))
        assert row.seconds == pytest.approx(p.seconds, rel=1e-12) and row.bound == p.bound
    locked = sweep(batch=1, heads=8, seqlen_q=4096, head_dim=64, gpus=["h200-sxm"],
                   algorithms=["fa2"], timing={"clock": 1.5e9})
    assert locked["clock_hz"].iloc[0] <= 1.5e9
    with pytest.raises(perfsim.PerfsimError, match="TimingParams.clock"):
        sweep(batch=1, heads=8, seqlen_q=128, head_dim=64, timing={"clock": "fast"})
    with pytest.raises(perfsim.PerfsimError, match="TimingParams"):
        sweep(batch=1, heads=8, seqlen_q=128, head_dim=64, timing={"no_such_field": 1})


def test_a_sweep_reproduces_the_decode_example():
    """examples/decode_splits.csv was written by one predict call per point (the reference's
    split and packing choices, each alone, neither); a sweep of the same grid gives the same
    seconds to 1e-9 (sweeps took "auto" as one split and no packing until 2026-12-03)."""
    from pathlib import Path

    from perfsim.algorithms import FA2

    committed = pd.read_csv(Path(__file__).parent.parent / "examples" / "decode_splits.csv")
    configs = {"reference (auto splits, auto packing)": FA2(),
               "split-KV only": FA2(pack_gqa=False), "packing only": FA2(num_splits=1),
               "neither": FA2(num_splits=1, pack_gqa=False)}
    rows = sweep(batch=sorted(set(committed.batch)), heads=32, kv_heads=8, seqlen_q=1,
                 seqlen_k=sorted(set(committed.seqlen_k)), head_dim=128, gpus="h100-sxm5",
                 algorithms=list(configs.values()),
                 timing={"host_floor_fwd_s": 0.0, "host_floor_bwd_s": 0.0})
    rows["config"] = rows.algorithm.map({a.label(): name for name, a in configs.items()})
    both = committed.merge(rows[["batch", "seqlen_k", "config", "seconds"]],
                           on=["batch", "seqlen_k", "config"], suffixes=("", "_sweep"))
    assert len(both) == len(committed) == 108
    np.testing.assert_allclose(both.seconds_sweep, both.seconds, rtol=1e-9)
    assert both[both.config == "reference (auto splits, auto packing)"].num_splits.max() > 1


def test_counts_past_int64_and_key_tiles_past_2_to_32_stay_right():
    """A fresh user's finds (2026-12-03): a block whose split choices differ put a later
    part's counts above 2^63 into the first part's int64 column (-9.2e18), and the split
    heuristic's (query tiles, key tiles) key wrapped at 2^32 key tiles (a 194x slower row)."""
    w = perfsim.AttentionWorkload(batch=32, heads=64, seqlen_q=4 * 2**20, head_dim=128)
    rows = sweep(batch=32, heads=64, seqlen_q=[1, 2, 4, w.seqlen_q], head_dim=128,
                 gpus="b200", algorithms="fa4")
    _assert_row_matches(next(rows[rows.seqlen_q == w.seqlen_q].itertuples()),
                        perfsim.predict(w, gpu="b200", algorithm="fa4"))
    huge = perfsim.AttentionWorkload(batch=1, heads=1, seqlen_q=1, seqlen_k=2**41, head_dim=8)
    rows = sweep(batch=1, heads=1, seqlen_q=1, seqlen_k=2**41, head_dim=8, gpus="h100-sxm5",
                 algorithms=["fa2", "fa3"])
    for row in rows.itertuples():
        assert row.seconds == pytest.approx(
            perfsim.predict(huge, gpu="h100-sxm5", algorithm=row.algorithm).seconds, rel=1e-9)


def test_the_wave_scan_is_flash_attn_s_loop():
    """The vectorised wave scan (the one rule, scalars included) against flash-attn 2's
    ``num_splits_heuristic`` loop written out here (csrc/flash_attn/flash_api.cpp):
    efficiency ``waves / ceil(waves)`` per eligible count, the smallest within 85 % of the
    best."""
    import math

    from perfsim.algorithms.splits import _best_wave_split, _best_wave_split_arrays

    def loop(m, slots, n, most):
        eff = {}
        for s in range(1, min(most, slots, n) + 1):
            if s == 1 or -(-n // s) != -(-n // (s - 1)):
                eff[s] = m * s / slots / math.ceil(m * s / slots)
        best = max(eff.values(), default=0.0)
        return next((s for s, e in sorted(eff.items()) if e >= 0.85 * best), 1)

    rng = np.random.default_rng(3)
    m = rng.integers(1, 400, 3000)
    n = np.concatenate([rng.integers(0, 20, 1000), rng.integers(0, 5000, 1000),
                        rng.integers(0, 2**20, 1000)])
    for slots in (20, 132, 264, 296):
        want = [loop(int(a), slots, int(b), 128) for a, b in zip(m, n)]
        assert _best_wave_split_arrays(m, slots, n, 128).tolist() == want
        assert [_best_wave_split(int(a), slots, int(b), 128) for a, b in zip(m[:200], n[:200])] \
            == want[:200]
        # asked again, in parts, reversed and beside new pairs: the memo's lookups give the
        # loop's counts too
        for part in (slice(0, 1500), slice(None, None, -1), slice(1000, None)):
            mixed_m = np.concatenate([m[part], m[part] + 400])
            mixed_n = np.concatenate([n[part], n[part]])
            more = [loop(int(a), slots, int(b), 128) for a, b in zip(m[part] + 400, n[part])]
            assert _best_wave_split_arrays(mixed_m, slots, mixed_n, 128).tolist() == \
                np.array(want)[part].tolist() + more


def test_a_preset_built_by_hand_is_the_preset():
    """Implementation(preset=...) takes its preset's software profile and upcast (a fresh
    user's sdpa-math rows ran 86 us where the preset's floor is 190 us, labelled alike)."""
    from perfsim.implementations import Implementation, implementations, resolve

    for name in implementations():
        assert Implementation(preset=name) == resolve(name)
    assert Implementation(preset="sdpa_math").software == "sdpa-math"
    assert Implementation(preset="sdpa-math", software="pytorch").software == "pytorch"
    with pytest.raises(perfsim.PerfsimError, match="unknown preset 'nope'"):
        Implementation(preset="nope")



@pytest.mark.parametrize("field", ["kv_heads", "seqlen_k"])
def test_an_empty_follower_list_is_one_clear_error(field):
    with pytest.raises(perfsim.PerfsimError, match=f"{field}: an empty list"):
        sweep(batch=1, heads=8, seqlen_q=4, head_dim=64, gpus="h100-sxm5", algorithms="fa2",
              **{field: []})


def test_a_presets_row_reason_does_not_depend_on_the_rest_of_the_grid():
    """A row refused alone in its block and a row refused beside feasible ones read alike,
    as predict words it (a fresh user's find: the preset's name was missing in the second)."""
    w = perfsim.AttentionWorkload(batch=1, heads=32, kv_heads=8, seqlen_q=128, head_dim=64)
    with pytest.raises(perfsim.InfeasibleError) as exc:
        perfsim.predict(w, gpu="h100-sxm5", algorithm="sdpa-efficient")
    for kv in (8, [8, 32]):
        rows = sweep(batch=1, heads=32, kv_heads=kv, seqlen_q=128, head_dim=64,
                     gpus="h100-sxm5", algorithms="sdpa-efficient")
        assert rows[rows.kv_heads == 8].infeasible.tolist() == [str(exc.value)]


def test_sweep_names_the_mufu_where_predict_does_on_an_mma_sync_kernel():
    """The mma.sync warp's station takes the longer of the FP32 work and the exps
    (``timing.MUFU_BESIDE``); on arrays its binding unit was always named ``fp32``, so a
    sweep said ``fp32`` where predict said ``mufu`` (FA2 at head dim 32 on an H100)."""
    rows = sweep(batch=4, heads=16, seqlen_q=4096, head_dim=[32, 64, 128], gpus="h100-sxm5",
                 algorithms="fa2")
    for _, r in rows.iterrows():
        p = perfsim.predict(perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096,
                                                      head_dim=int(r.head_dim), dtype="bf16"),
                            gpu="h100-sxm5", algorithm="fa2")
        assert (r.bound, r.seconds) == (p.bound, pytest.approx(p.seconds, rel=1e-9))
    assert rows.bound.tolist()[0] == "mufu"


def test_csv_rows_read_back_as_their_workloads(tmp_path):
    """A fresh user's report: a sweep written to CSV and read with pandas' defaults did not
    give back its workloads — the empty ``window`` cell (no window) reads as NaN, which
    ``AttentionWorkload`` refused. Each row, read back, predicts its own seconds."""
    import pandas as pd

    df = sweep(batch=[1, 2], heads=8, seqlen_q=[128, 1024], head_dim=64, gpus="h100-sxm5",
               algorithms="fa2", window=["", "64,0"], page_size=[None, 256])
    out = tmp_path / "rows.csv"
    df.to_csv(out, index=False)
    back = pd.read_csv(out)
    assert back.window.isna().any()                 # what pandas makes of the empty cells
    fields = [f for f in perfsim.AttentionWorkload.model_fields if f in back.columns]
    for _, row in back.iterrows():
        w = perfsim.AttentionWorkload(**{f: row[f] for f in fields})
        p = perfsim.predict(w, gpu=row.gpu, algorithm=row.algorithm)
        assert p.seconds == pytest.approx(row.seconds, rel=1e-9)


def test_cli_sweep_reads_a_relative_profile_beside_its_config(tmp_path, monkeypatch, capsys):
    """A fresh user's report: ``gpus = ["mygpu.toml"]`` worked from the config's folder and
    failed from anywhere else (the path was read from the current folder). Now beside the
    config first, then the current folder; the error says where it looked."""
    import shutil

    from perfsim.cli import main
    from perfsim.gpu_catalog import _catalog_dir

    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(_catalog_dir() / "h100-sxm5.toml", sub / "mygpu.toml")
    config = sub / "cfg.toml"
    config.write_text('gpus = ["mygpu.toml"]\nalgorithms = ["fa2"]\n[workload]\nbatch = 1\n'
                      'heads = 8\nseqlen_q = 1024\nhead_dim = 64\n')
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "sub/cfg.toml", "-q", "--out", "rows.csv"]) == 0
    capsys.readouterr()
    (tmp_path / "here.toml").write_bytes((sub / "mygpu.toml").read_bytes())
    config.write_text(config.read_text().replace("mygpu.toml", "here.toml"))
    assert main(["sweep", "sub/cfg.toml", "-q", "--out", "rows.csv"]) == 0   # as before
    capsys.readouterr()
    config.write_text(config.read_text().replace("here.toml", "nothere.toml"))
    assert main(["sweep", "sub/cfg.toml", "-q", "--out", "rows.csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "beside the config (in 'sub')" in err


def test_rows_past_three_billion_keys_equal_predict():
    """Review finding: N_q·N_k past int64 (N ≈ 3.04e9) wrapped around in a sweep (negative
    FLOPs, times off by 10⁵¹) while predict, on Python integers, was right."""
    for fields in (dict(batch=1, heads=1, seqlen_q=3221225472, head_dim=64, phase="bwd"),
                   dict(batch=3, heads=5, seqlen_q=1, seqlen_k=3 * 2**31 + 7, head_dim=64)):
        for algo in ("fa2", "fa3"):
            row = sweep(**fields, gpus="h100-sxm5", algorithms=algo).iloc[0]
            p = perfsim.predict(perfsim.AttentionWorkload(**fields), gpu="h100-sxm5",
                                algorithm=algo)
            assert row.flops > 0 and row.seconds == pytest.approx(p.seconds, rel=REL)


def test_an_override_named_as_a_result_column_gets_a_column_of_its_own():
    """Review finding: a clock_hz or hbm_bytes what-if's column was overwritten by the row's
    sustained clock and HBM traffic."""
    df = sweep(batch=4, heads=16, seqlen_q=8192, head_dim=256, gpus="h100-sxm5",
               algorithms="fa3", overrides={"clock_hz": [1.83e9, 1.7e9]})
    assert list(df.gpu_clock_hz) == [1.83e9, 1.7e9]
    assert (df.clock_hz <= df.gpu_clock_hz).all() and df.clock_hz.iloc[0] < 1.83e9


def test_followers_merge_and_take_none_as_toml_writes_it():
    """Review findings: head_dim_v=[None, 64] and kv_dtype=[None, "bf16"] gave two identical
    rows (kv_heads and seqlen_k merged theirs), and TOML's "none" was refused for head_dim_v,
    kv_dtype and a window."""
    base = dict(batch=1, heads=16, seqlen_q=1024, head_dim=64, gpus="h100-sxm5",
                algorithms="fa2")
    assert len(sweep(**base, head_dim_v=[None, 64])) == 1
    assert len(sweep(**base, kv_dtype=[None, "bf16"])) == 1
    assert list(sweep(**base, kv_dtype=["none", "fp8_e4m3"]).kv_dtype) == ["bf16", "fp8_e4m3"]
    assert list(sweep(**base, head_dim_v=["none", 32]).head_dim_v) == [64, 32]
    assert list(sweep(**base, window=["none", [1023, 0]]).window) == ["", "1023,0"]


def test_a_refused_row_names_the_check_predict_meets_first():
    """Review finding: where a later check refused the whole block, rows an earlier check had
    refused took the later reason (a GQA row of the tutorial read "head_dim" where predict
    says it has no GQA)."""
    w = perfsim.AttentionWorkload(batch=8, heads=6, kv_heads=3, seqlen_q=64, seqlen_k=64,
                                  head_dim=200)
    row = sweep(batch=8, heads=6, kv_heads=3, seqlen_q=64, head_dim=200, gpus="h100-sxm5",
                algorithms="triton-tutorial").iloc[0]
    with pytest.raises(perfsim.InfeasibleError) as exc:
        perfsim.predict(w, gpu="h100-sxm5", algorithm="triton-tutorial")
    assert row.infeasible == str(exc.value) and "grouped-query" in row.infeasible


def test_grid_columns_and_group_constants_are_built_in_row_order():
    """The frame's workload columns (``_Grid.columns``: each axis repeated over the axes after
    it, tiled over those before) against the grid's C-order indices, and the group columns
    (``_constant``): strings as categoricals over the groups, zeros and other numbers
    repeated per group."""
    import importlib

    sweep_module = importlib.import_module("perfsim.sweep")
    grid = sweep_module._Grid([1, 3, 7], [8, 16], [4, 8], [100, 200, 300, 400], None)
    flat = grid.columns()
    ib, ih, is_ = (x.ravel() for x in np.indices(grid.shape))
    assert np.array_equal(flat["batch"], grid.batch[ib])
    assert np.array_equal(flat["heads"], grid.heads[ih, 0])
    assert np.array_equal(flat["kv_heads"], grid.heads[ih, 1])
    assert np.array_equal(flat["seqlen_q"], grid.seqlens[is_, 0])
    assert np.array_equal(flat["seqlen_k"], grid.seqlens[is_, 1])
    # one copy of the grid per group, for the grid and for one block of it alone
    for key, column in grid.columns(3).items():
        assert np.array_equal(column, np.tile(flat[key], 3))
    block = next(grid.blocks())
    alone = sweep_module._BlockGrid(block)
    one = alone.columns()
    for key, column in alone.columns(2).items():
        assert np.array_equal(column, np.tile(one[key], 2))
    labels = sweep_module._constant(["h100", "a100", "h100"], 2)
    assert list(labels) == ["h100", "h100", "a100", "a100", "h100", "h100"]
    assert list(sweep_module._constant(["x"], 3)) == ["x"] * 3
    for values, want in (([0.0, 0.0], [0.0] * 4), ([0.0, 0.5], [0.0, 0.0, 0.5, 0.5]),
                         ([False], [False, False]), ([64, 128], [64, 64, 128, 128])):
        column = sweep_module._constant(values, len(want) // len(values))
        assert column.dtype == np.asarray(values).dtype and list(column) == want


def test_rows_over_the_power_limit_at_the_floor_clock_are_reported_once():
    import warnings

    grid = dict(batch=32, heads=32, seqlen_q=[1024, 2048], head_dim=256, causal=True,
                dtype="fp16", algorithms="fa3", gpus=["h100-pcie"])
    with pytest.warns(UserWarning, match=r"h100-pcie: 2 rows, up to 1\.\d\dx its limit") as rec:
        df = perfsim.sweep(**grid)
    (warned,) = [str(r.message) for r in rec if "optimistic" in str(r.message)]
    tdp = perfsim.load_gpu("h100-pcie").power.tdp_w
    assert (df.power_w > tdp).all()
    assert f"up to {df.power_w.max() / tdp:.2f}x its limit" in warned
    one = perfsim.predict(perfsim.AttentionWorkload(batch=32, heads=32, seqlen_q=1024,
                                                    head_dim=256, causal=True, dtype="fp16"),
                          gpu="h100-pcie", algorithm="fa3")
    assert any("optimistic" in n for n in one.notes())
    # a clock asked for regardless of power is the caller's choice: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        perfsim.sweep(**grid, timing={"clock": "boost"})
        perfsim.sweep(**{**grid, "gpus": ["h100-sxm5"], "seqlen_q": 2048})


def test_flop_columns_do_not_wrap_at_huge_lengths():
    """N_q · N_k past 2^63 wraps in int64 columns; the sweep counts FLOPs in float64 as
    predict does in Python ints (a fresh user's report: TFLOP/s 0.0 at N = 2^32)."""
    for n in (2 ** 32, 2 ** 33 + 1):
        row = perfsim.sweep(batch=1, heads=1, seqlen_q=n, head_dim=8, gpus="h100-sxm5",
                            algorithms="fa2").iloc[0]
        one = perfsim.predict(perfsim.AttentionWorkload(batch=1, heads=1, seqlen_q=n,
                                                        head_dim=8),
                              gpu="h100-sxm5", algorithm="fa2")
        assert row["model_flops"] == pytest.approx(one.model_flops, rel=1e-12)
        assert row["tflops"] == pytest.approx(one.tflops, rel=1e-12) and row["tflops"] > 1


@pytest.mark.parametrize("name", ["sweep", "whatif"])
def test_committed_examples_are_what_their_configs_give(tmp_path, name):
    """examples/*.csv are the rows their .toml gives today (a fresh user's report: 27 of
    sweep.csv's 192 rows were 18 % stale after later model changes)."""
    from perfsim.cli import main

    root = Path(__file__).resolve().parent.parent / "examples"
    out = tmp_path / f"{name}.csv"
    assert main(["sweep", str(root / f"{name}.toml"), "--out", str(out), "-q"]) == 0
    fresh, committed = pd.read_csv(out), pd.read_csv(root / f"{name}.csv")
    assert list(committed.columns) == list(fresh.columns) and len(committed) == len(fresh)
    for col in ("seconds", "tflops", "clock_hz", "hbm_bytes"):
        np.testing.assert_allclose(committed[col], fresh[col], rtol=1e-9, err_msg=col)


def test_an_override_that_unsets_a_field_is_nan_in_a_float_column(tmp_path):
    """A fresh user's report: [0.885, None] made the override column strings ('0.885',
    'None'), in memory and in files, so it could not be filtered or plotted as numbers."""
    kwargs = dict(batch=[1, 4], heads=16, seqlen_q=4096, head_dim=128, gpus="h100-sxm5",
                  algorithms="fa2")
    for values in ([0.885, None], [None, 0.885]):
        df = sweep(**kwargs, overrides={"l2_reduction_segment_share": values})
        column = df["l2_reduction_segment_share"]
        assert column.dtype == np.float64
        assert set(column.dropna()) == {0.885} and column.isna().sum() == 2
        assert set(df["overrides"].astype(str)) == {"l2_reduction_segment_share=0.885",
                                                    "l2_reduction_segment_share=None"}
    # streamed, the frames holding only the unset groups first, the file's column is float
    pytest.importorskip("pyarrow")
    from perfsim.cli.sweep import write_frames

    frames = perfsim.sweep_frames(**kwargs, overrides={"l2_reduction_segment_share":
                                                       [None, 0.885]})
    first = next(frames)
    out = write_frames(iter([first.iloc[:1], first.iloc[1:], *frames]), tmp_path / "r.parquet")
    assert pd.read_parquet(out)["l2_reduction_segment_share"].dtype == np.float64


def test_scale_factors_of_a_field_a_gpu_has_at_zero_or_that_round_to_zero_still_run():
    """A reviewer's cases for the refusal of factors that round to one value: TMEM is 0 on
    an H100 for every factor (a sweep beside a B200 scales it there), and factors that round
    the SMs to 0 make infeasible what-ifs, not a refused sweep."""
    args = {"batch": 1, "heads": 8, "seqlen_q": 512, "head_dim": 64, "algorithms": "fa2"}
    rows = sweep(**args, gpus=["b200", "h100-sxm5"],
                 overrides={"tmem_bytes_per_sm": {"scale": [0.5, 1]}})
    assert len(rows) == 4
    rows = sweep(**args, gpus="h100-sxm5", overrides={"sm_count": {"scale": [0.001, 0.002, 1]}})
    assert list(rows["infeasible"] != "") == [True, True, False]


def test_an_option_of_another_class_refuses_rows_not_the_sweep():
    """``sdpa-cudnn`` runs FA3 on Hopper but an FA2-class kernel for one query token: an FA3
    option makes the one-token rows infeasible (named) while the other rows are predicted; a
    name no configuration has still stops the sweep before any row."""
    from perfsim.implementations import resolve

    algo = resolve("sdpa-cudnn").model_copy(
        update={"options": {"intra_warpgroup_overlap": False}})
    df = sweep(batch=1, heads=16, seqlen_q=[1, 4096], seqlen_k=4096, head_dim=128,
               gpus="h100-sxm5", algorithms=[algo])
    one = df[df.seqlen_q == 1].iloc[0]
    assert np.isnan(one.seconds)
    assert "runs fa2 for this call, which has no option intra_warpgroup_overlap" \
        in one.infeasible and "an option of fa3" in one.infeasible
    long = df[df.seqlen_q == 4096].iloc[0]
    assert long.seconds > 0 and not long.infeasible
    w = perfsim.AttentionWorkload(batch=1, heads=16, seqlen_q=4096, head_dim=128)
    assert long.seconds == pytest.approx(perfsim.predict(w, gpu="h100-sxm5",
                                                         algorithm=algo).seconds, rel=1e-9)
    with pytest.raises(perfsim.InfeasibleError, match="an option of fa3"):
        perfsim.predict(perfsim.AttentionWorkload(batch=1, heads=16, seqlen_q=1, seqlen_k=4096,
                                         head_dim=128), gpu="h100-sxm5", algorithm=algo)
    typo = resolve("sdpa-cudnn").model_copy(update={"options": {"stagse": 3}})
    with pytest.raises(perfsim.PerfsimError, match="has no option stagse"):
        sweep(batch=1, heads=16, seqlen_q=[1, 4096], seqlen_k=4096, head_dim=128,
              gpus="h100-sxm5", algorithms=[typo])


def test_a_generator_of_values_sweeps_what_it_gives_and_progress_must_be_callable():
    """A fresh user's report: ``seqlen_q=(n for n in ...)`` was refused where ``range`` was
    taken, and ``progress=5`` failed inside the first block with "'int' object is not
    callable"."""
    df = sweep(batch=1, heads=8, seqlen_q=(n for n in [128, 256]), head_dim=iter([64, 128]),
               gpus="h100-sxm5", algorithms="fa2")
    same = sweep(batch=1, heads=8, seqlen_q=[128, 256], head_dim=[64, 128], gpus="h100-sxm5",
                 algorithms="fa2")
    assert list(df.seqlen_q) == list(same.seqlen_q) == [128, 256, 128, 256]
    assert np.array_equal(df.seconds.to_numpy(), same.seconds.to_numpy())
    frames = perfsim.sweep_frames(batch=1, heads=8, seqlen_q=iter([128, 256]), head_dim=64,
                                  gpus="h100-sxm5", algorithms="fa2")
    assert sum(len(f) for f in frames) == 2
    for bad in (5, "bar"):
        with pytest.raises(perfsim.PerfsimError, match="progress must be None or a callable"):
            sweep(batch=1, heads=8, seqlen_q=128, head_dim=64, gpus="h100-sxm5",
                  algorithms="fa2", progress=bad)


def test_a_dict_set_on_a_field_that_is_not_a_table_is_refused():
    with pytest.raises(perfsim.PerfsimError, match=r"'sm_count': must be an integer .* not dict"):
        sweep(batch=1, heads=8, seqlen_q=512, head_dim=64, gpus="h200-sxm", algorithms="fa2",
              overrides={"sm_count": [{"a": 100}]})
