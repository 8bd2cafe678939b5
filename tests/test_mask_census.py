"""validate/mask_census.py (what a causal masked tile adds per score element, from Nsight
Compute counters of causal / non-causal pairs) and the warp stall reasons
validate/ncu_summary.py reads."""

import json

import pytest

from perfsim.validate import mask_census, ncu_summary
from perfsim.validate.masked_tile_fit import tile_counts


def _record(tiles, masked, per_tile, extra, opcodes=None, seconds=1e-4):
    """A summary kernel record whose counters are ``per_tile`` warp instructions per pipe on
    every visited tile and ``extra`` more on each masked one."""
    rec = {"kernel": "flash_fwd_kernel", "duration_s": seconds, "issue_active_pct": 40.0,
           "stalls": {"no_instruction": 0.5 if masked else 0.1, "wait": 1.0}}
    for pipe in mask_census.PIPES:
        rec[f"inst_pipe_{pipe}"] = tiles * per_tile[pipe] + masked * extra.get(pipe, 0.0)
    rec["instructions"] = sum(rec[f"inst_pipe_{p}"] for p in mask_census.PIPES)
    if opcodes:
        rec["opcodes"] = {op: int(tiles * n + masked * opcodes.get(op + "+", 0))
                          for op, n in opcodes.items() if not op.endswith("+")}
    return rec


def test_census_recovers_the_instructions_planted_on_masked_tiles():
    # d 128, N 256, B 64, H 16: 128 x 64 tiles, flash-attn 2 masks two per query tile
    b_r, b_c, bh = 128, 64, 64 * 16
    t_n, _ = tile_counts(256, b_r, b_c, False)
    t_c, m = tile_counts(256, b_r, b_c, True)
    per_tile = {"alu": 900.0, "fma": 1200.0, "xu": 256.0, "lsu": 300.0, "uniform": 20.0}
    extra = {"alu": 1024.0, "fma": 256.0}       # warp instructions per masked tile
    plain = _record(bh * t_n, 0, per_tile, {}, {"FSEL": 10, "ISETP": 4})
    causal = _record(bh * t_c, bh * m, per_tile, extra,
                     {"FSEL": 10, "ISETP": 4, "FSEL+": 256, "ISETP+": 256})
    got = mask_census.census(causal, plain, bh * t_c, bh * t_n, bh * m, b_r * b_c)
    el = b_r * b_c
    assert got["pipes"]["alu"] == pytest.approx(1024 * 32 / el)
    assert got["pipes"]["fma"] == pytest.approx(256 * 32 / el)
    assert got["pipes"]["xu"] == pytest.approx(0.0, abs=1e-12)
    assert got["instructions"] == pytest.approx((1024 + 256) * 32 / el)
    assert got["opcodes"]["FSEL"] == pytest.approx(1.0)
    assert got["opcodes"]["ISETP"] == pytest.approx(1.0)


def test_census_refuses_a_pair_without_masked_tiles():
    rec = _record(8, 0, dict.fromkeys(mask_census.PIPES, 1.0), {})
    with pytest.raises(ValueError, match="masked"):
        mask_census.census(rec, rec, 8, 8, 0, 128 * 64)


def test_pairs_and_command_line(tmp_path, capsys):
    b_r, b_c, bh = 128, 128, 13 * 40
    t_n, _ = tile_counts(512, b_r, b_c, False)
    t_c, m = tile_counts(512, b_r, b_c, True)
    per_tile = dict.fromkeys(mask_census.PIPES, 100.0)
    cases = {"flash-fwd-d64-n512-b13-h40": [_record(bh * t_n, 0, per_tile, {})],
             "flash-fwd-d64-n512-b13-h40-c": [_record(bh * t_c, bh * m, per_tile,
                                                      {"alu": 512.0}, seconds=9e-5)],
             "cudnn-fwd-d64": [_record(1, 0, per_tile, {})]}      # no pair: left out
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"source": "test", "cases": cases}))
    (found,) = mask_census.pairs(mask_census._load([path]))
    assert found["masked"] == bh * m and not found["uneven"]
    assert found["census"]["pipes"]["alu"] == pytest.approx(512 * 32 / (b_r * b_c))
    assert found["time_ratio"] == pytest.approx(0.9)
    assert mask_census.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "alu +1.00" in out and "no_instruction 0.50 / 0.10" in out
    assert "selected" not in out           # the issuing warp is no stall
    # clear messages on stderr, no traceback, for a missing file, a file that is not JSON or
    # not a summary, and a summary without pairs
    assert mask_census.main([str(tmp_path / "none.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    for name, text in (("bad.json", "{bad"), ("list.json", "[1, 2]"),
                       ("nocases.json", '{"x": 1}'), ("rows.json", '{"cases": {"a": [1]}}')):
        (tmp_path / name).write_text(text)
        assert mask_census.main([str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("mask_census: ") and name in err
    lone = tmp_path / "lone.json"
    lone.write_text(json.dumps({"cases": {"cudnn-fwd-d64": cases["cudnn-fwd-d64"]}}))
    assert mask_census.main([str(lone)]) == 1
    assert "no flash-fwd" in capsys.readouterr().err


def test_missing_counters_give_no_figure_and_unknown_head_dims_are_named(tmp_path, capsys):
    per_tile = dict.fromkeys(mask_census.PIPES, 100.0)
    plain = _record(8 * 16, 0, per_tile, {})
    causal = _record(8 * 10, 8 * 4, per_tile, {"alu": 64.0})
    del causal["inst_pipe_fma"], causal["duration_s"], causal["issue_active_pct"]
    causal["stalls"] = plain["stalls"] = {}
    got = mask_census.census(causal, plain, 80, 128, 32, 128 * 128)
    assert got["pipes"]["fma"] is None and got["pipes"]["alu"] is not None
    cases = {"flash-fwd-d64-n512-b2-h4": [plain], "flash-fwd-d64-n512-b2-h4-c": [causal],
             "flash-fwd-d96-n512-b2-h4": [plain], "flash-fwd-d96-n512-b2-h4-c": [causal]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"cases": cases}))
    assert mask_census.main([str(path)]) == 0
    out, err = capsys.readouterr()
    assert "fma n/a" in out and "time causal / non-causal n/a" in out
    assert "issue active n/a" in out and "none in these summaries" in out
    assert "skipped flash-fwd-d96-n512-b2-h4: head dim 96" in err


def test_ncu_summary_reads_the_stall_reasons():
    header = ('"ID","Kernel Name","gpu__time_duration.sum",'
              '"smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio",'
              '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
              '"smsp__average_warp_latency_issue_stalled_wait"')
    text = "==PROF== noise\n" + header + '\n"","","nsecond","ratio","ratio",""\n' \
        + '"0","flash_fwd_kernel","1,500","2.68","0.22","9"\n'
    (kernel,) = ncu_summary.summarise({"ncu-x.csv": text})["x"]
    assert kernel["stalls"] == {"no_instruction": 2.68, "long_scoreboard": 0.22}
    assert kernel["duration_s"] == pytest.approx(1.5e-6)


def _mask_terms(algorithm, head_dim, causal=True, gpu="h200-sxm"):
    import perfsim

    w = perfsim.AttentionWorkload(batch=4, heads=8, seqlen_q=1024, head_dim=head_dim,
                                  causal=causal, dtype="bf16", phase="fwd")
    (kernel,) = [k for k in perfsim.predict(w, gpu=gpu, algorithm=algorithm).kernels
                 if k.cost.name.endswith("_fwd")]
    return {k: v for k, v in kernel.cost.terms.items() if "mask" in k}, kernel.cost.launch


@pytest.mark.parametrize("algorithm", ["sdpa-flash", "flash-attn-2", "fa2"])
def test_flash_attn_2s_causal_forward_takes_the_mask_census(algorithm):
    from perfsim.algorithms import softmax_costs as sc

    for head_dim, (alu, fma) in ((64, (2.49, 0.63)), (128, (4.11, 1.32))):
        terms, launch = _mask_terms(algorithm, head_dim)
        masked = launch["masked_tiles"] * launch["block_m"] * launch["block_n"]
        assert masked > 0
        assert terms["alu/mask"] == pytest.approx(masked * alu)
        assert terms["fp32/mask (census)"] == pytest.approx(masked * sc.FMA_SLOTS * fma)
    # no census above head dim 128: the assumed one ALU instruction per element
    terms, launch = _mask_terms(algorithm, 256)
    masked = launch["masked_tiles"] * launch["block_m"] * launch["block_n"]
    assert terms == {"alu/mask": pytest.approx(masked * sc.MASK_ALU_OPS_PER_SCORE)}
    # no mask, no mask work
    terms, _ = _mask_terms(algorithm, 64, causal=False)
    assert not any(terms.values())


def test_kernels_that_are_not_flash_attn_2s_code_keep_the_assumed_mask():
    from perfsim.algorithms import softmax_costs as sc
    from perfsim.gpu_catalog import load_gpu
    from perfsim.validate import models

    for algorithm in ("flex", "triton-tutorial", "sdpa-cudnn", "sdpa-efficient"):
        terms, launch = _mask_terms(algorithm, 64)
        masked = launch["masked_tiles"] * launch["block_m"] * launch["block_n"]
        assert masked > 0, algorithm
        assert terms == {"alu/mask": pytest.approx(masked * sc.MASK_ALU_OPS_PER_SCORE)}
    # the project's own Triton FA2 kernel and the external FlexAttention mapping
    gpu = load_gpu("h200-sxm")
    own = models.kernel_config_to_algorithm(
        "fa2", {"block_m": 128, "block_n": 64, "num_warps": 4}, gpu)
    assert own.bound_checks == "none"
    assert models.external_algorithm("flex", gpu, 64).bound_checks == "flex"
    import perfsim

    w = perfsim.AttentionWorkload(batch=4, heads=8, seqlen_q=1024, head_dim=64, causal=True,
                                  dtype="bf16", phase="fwd")
    (kernel,) = perfsim.predict(w, gpu=gpu, algorithm=own).kernels
    assert "fp32/mask (census)" not in kernel.cost.terms
    assert kernel.cost.terms["alu/mask"] > 0
