"""The command line: tables, --json, one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from perfsim.cli import main

PREDICT = ["predict", "--gpu", "a100-sxm4-80gb", "--batch", "64", "--heads", "16",
           "--seqlen", "1024", "--head-dim", "64", "--dtype", "fp16", "--phase", "fwd_bwd"]


def test_predict_all_prints_side_by_side(capsys):
    assert main([*PREDICT, "--algorithm", "all"]) == 0
    out = capsys.readouterr().out
    for name in ("standard", "fa1", "fa2", "TFLOP/s", "HBM", "memory", " ms ", " GB "):
        assert name in out


def test_predict_json(capsys):
    assert main([*PREDICT, "--algorithm", "fa2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["algorithm"] == "fa2" and data["seconds"] > 0 and data["kernels"]


def test_predict_set_option(capsys):
    assert main([*PREDICT, "--algorithm", "fa2", "--set", "block_m=64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "fa2(block_m=64)"


@pytest.mark.parametrize("algorithm, options", [
    ("fa2", ["block_m=64"]),
    ("fa3", ["block_m=64", "block_n=96", "stages=1", "compiled_head_dims=cudnn-sm90"]),
    ("sdpa-cudnn", ["pack_gqa=false"]),
    ("flash-attn-cute", ["pack_gqa=false", "block_n=128"]),
])
def test_json_algorithm_label_runs_again(capsys, algorithm, options):
    """The "algorithm" --json writes is a label perfsim takes back (-a and the API): it named
    an unknown algorithm before."""
    import perfsim
    from perfsim.workload import AttentionWorkload

    args = [*PREDICT, "--gpu", "h100-sxm5", "--json"]
    assert main([*args, "-a", algorithm, *[x for o in options for x in ("--set", o)]]) == 0
    first = json.loads(capsys.readouterr().out)
    assert "(" in first["algorithm"]
    assert main([*args, "-a", first["algorithm"]]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["algorithm"], again["seconds"]) == (first["algorithm"], first["seconds"])
    w = AttentionWorkload(**first["workload"])
    assert perfsim.predict(w, gpu="h100-sxm5", algorithm=first["algorithm"]).seconds == \
        first["seconds"]


@pytest.mark.parametrize("extra", [[], ["--kernel-only"], ["--clock", "boost"],
                                   ["--clock", "1500", "--kernel-only"]])
def test_json_record_repeats_its_prediction(capsys, extra):
    """--json did not record --kernel-only or --clock, so predicting the record again gave
    other seconds; its 'timing' now holds what differs from the defaults."""
    import perfsim

    assert main([*PREDICT, "--gpu", "h200-sxm", "--json", *extra]) == 0
    d = json.loads(capsys.readouterr().out)
    assert bool(d["timing"]) == bool(extra)
    again = perfsim.predict(perfsim.AttentionWorkload(**d["workload"]), d["gpu"],
                            d["algorithm"], timing=d["timing"] or None)
    assert again.seconds == d["seconds"]


def test_labels_round_trip_preset_fields_inf_and_json_literals():
    """A reviewer's cases: a preset with another software profile labelled as the plain preset
    (104 against 24 us back), 'inf' not read back as a float, JSON's false refused, a stray
    comma accepted silently."""
    import perfsim
    from perfsim.algorithms import FA4
    from perfsim.errors import PerfsimError
    from perfsim.implementations import Implementation, resolve

    w = perfsim.AttentionWorkload(batch=1, heads=1, seqlen_q=64, head_dim=64)
    odd = Implementation(preset="flash-attn-2", software="flex")
    assert odd.label() == "flash-attn-2(software=flex)"
    assert perfsim.predict(w, "h100-sxm5", odd.label()).seconds == \
        perfsim.predict(w, "h100-sxm5", odd).seconds
    assert resolve("fa4(rescale_threshold=inf)") == FA4(rescale_threshold=float("inf"))
    assert resolve("fa2(pack_gqa=false)").label() == "fa2(pack_gqa=False)"
    assert resolve("fa2()").label() == "fa2"
    with pytest.raises(PerfsimError, match="an empty item between commas"):
        resolve("fa2(block_m=64,,)")


@pytest.mark.parametrize("algorithm, needle", [
    ("fa2(block_m=64", "must read name(key=value, ...)"),
    ("fa2(x)", "'x' is not key=value"),
    ("fa2(block_m=(64)", "unbalanced brackets"),
    ("nope(a=1)", "unknown algorithm 'nope'"),
    ("fa2(block_m=0)", "fa2 option block_m"),
])
def test_malformed_algorithm_labels_are_one_error(capsys, algorithm, needle):
    assert main([*PREDICT, "-a", algorithm]) == 2
    assert needle in capsys.readouterr().err


def test_label_and_set_may_not_name_one_option_twice(capsys):
    assert main([*PREDICT, "-a", "fa2(block_m=64)", "--set", "block_m=128"]) == 2
    err = capsys.readouterr().err
    assert "block_m given both in the label 'fa2(block_m=64)' and in --set" in err


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--batch", "1"], "required"),
    ([*PREDICT, "--gpu", "h900"], "unknown GPU 'h900'"),
    ([*PREDICT, "--dtype", "fp64"], "dtype"),
    ([*PREDICT, "--kv-heads", "3"], "must divide heads"),
    ([*PREDICT, "--algorithm", "fa9"], "unknown algorithm"),
    ([*PREDICT, "--set", "block_m=abc"], "block_m"),
    ([*PREDICT, "--batch", "x"], "invalid int"),
    (["gpu", "show", "nope"], "unknown GPU"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_gpus_and_gpu_show(capsys):
    assert main(["gpus"]) == 0
    assert "h200-sxm" in capsys.readouterr().out
    assert main(["gpu", "show", "b200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sm_count"] == 148
    # ``perfsim gpu list`` is the catalog, not a GPU named "list" (it was an unknown id)
    assert main(["gpus", "--json"]) == 0
    catalog = json.loads(capsys.readouterr().out)
    # the table's columns too (it held id, name and arch only)
    b200 = next(g for g in catalog if g["id"] == "b200")
    assert b200["sm_count"] == 148 and b200["hbm_bandwidth_bytes_per_s"] > 7e12
    assert main(["gpu", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == catalog


def test_version(capsys):
    import perfsim

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"perfsim {perfsim.__version__}"


# ---------------------------------------------------------------- a new user's findings
SMALL = ["--batch", "1", "--heads", "4", "--seqlen", "128", "--head-dim", "64"]


def test_json_with_plot_and_explain_stays_one_document(tmp_path, capsys):
    assert main(["predict", *SMALL, "--gpu", "h200-sxm", "--json", "--explain",
                 "--plot", str(tmp_path / "p.svg")]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["explanation"].startswith("fa2 on") and "wrote" in captured.err


@pytest.mark.parametrize("argv, needle", [
    (["predict", *SMALL, "-a", "fa1", "--set", "warps=3"], "power of two"),
    (["predict", *SMALL, "--set", "=1"], "non-empty KEY"),
    (["predict", "--heads", "8", "--head-dim", "64", "--seqlens-q", "100,200", "-a", "fa4",
      "--gpu", "h200-sxm"], "needs tcgen05"),
    (["predict", *SMALL, "-a", "fa3", "--gpu", "h200-sxm", "--set", "warps=4"],
     "fa3 has no option warps; options:"),
    # a fresh user's reports: a near miss is named, and a GPU field is sent where it belongs
    (["predict", *SMALL, "--gpu", "h100_sxm5"], "unknown GPU 'h100_sxm5' (did you mean "
     "'h100-sxm5'?)"),
    (["predict", *SMALL, "-a", "fa2", "--set", "num_split=2"],
     "fa2 has no option num_split (did you mean 'num_splits'?)"),
    (["predict", *SMALL, "-a", "fa3", "--gpu", "h200-sxm", "--set",
      "hbm_bandwidth_bytes_per_s=6e12"], "is a GPU field, not an algorithm option: a GPU "
     "what-if is a .toml profile"),
    (["predict", *SMALL, "-a", "sdpa-flash", "--set", "power.tdp_w=300"],
     "power.tdp_w is a GPU field"),
])
def test_more_bad_input_is_one_line(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_an_empty_gpu_or_algorithm_list_is_refused(tmp_path, capsys):
    cfg = tmp_path / "e.toml"
    cfg.write_text("gpus = []\n[workload]\nbatch = 1\nheads = 4\nseqlen_q = 128\n"
                   "head_dim = 64\n")
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "e.csv")]) == 2
    assert "gpus: an empty list" in capsys.readouterr().err


def test_a_lock_above_the_maximum_clock_says_so(capsys):
    assert main(["predict", *SMALL, "--gpu", "a100-sxm4-80gb", "-a", "standard",
                 "--clock", "3000", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "clock of 1410 MHz (clock locked at 3000 MHz, above the 1410 MHz maximum" in out


@pytest.mark.parametrize("given", ["1.83e9", "1830000000"])
def test_a_clock_given_in_hz_gets_the_mhz_it_meant(capsys, given):
    """A reviewer's ``--clock 1.83e9`` got the generic error; the Python API's clock in MHz
    already got the reverse hint."""
    assert main(["predict", *SMALL, "--gpu", "h100-sxm5", "-a", "fa2", "--clock", given]) == 2
    assert f"(in Hz? {given} Hz is --clock 1830)" in capsys.readouterr().err


def test_each_command_names_the_module_that_registers_it():
    """``perfsim.cli.COMMAND_OF`` (one command loads one module) matches what the modules
    register, and covers every command."""
    import argparse
    import importlib

    from perfsim.cli import COMMAND_MODULES, COMMAND_OF

    found = {}
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        sub = argparse.ArgumentParser().add_subparsers()
        for register in getattr(module, "COMMANDS", None) or [module.register]:
            register(sub)
        found.update({command: name for command in sub.choices})
    assert found == COMMAND_OF


def test_sweep_takes_options_on_an_implementation_preset(tmp_path):
    """``{name = "flash-attn-3", compiled_head_dims = "exact"}`` in a sweep's algorithms: the
    options go to the configuration the preset runs (as ``perfsim predict --set``)."""
    import perfsim
    from perfsim.cli.sweep import _algorithm
    from perfsim.implementations import Implementation

    algo = _algorithm({"name": "flash-attn-3", "compiled_head_dims": "exact"}, tmp_path)
    assert isinstance(algo, Implementation) and algo.options == {"compiled_head_dims": "exact"}
    w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=2048, head_dim=72)
    exact = perfsim.predict(w, "h100-sxm5", algo).seconds
    assert exact < perfsim.predict(w, "h100-sxm5", "flash-attn-3").seconds   # 72 runs as 96


def test_sweep_takes_a_label_as_a_name(tmp_path):
    """A label --json wrote is a sweep algorithm too, alone or with more options in a table
    (a table's options had replaced the label's)."""
    from perfsim.cli.sweep import _algorithm
    from perfsim.errors import PerfsimError

    assert _algorithm("fa2(block_m=64)", tmp_path).label() == "fa2(block_m=64)"
    assert _algorithm({"name": "fa2(block_m=64)", "block_n": 64}, tmp_path).label() == \
        "fa2(block_m=64, block_n=64)"
    assert _algorithm({"name": "sdpa-flash(block_m=64)", "block_n": 64}, tmp_path).label() \
        == "sdpa-flash(block_m=64, block_n=64)"
    with pytest.raises(PerfsimError, match="given both in the label .* and in the table"):
        _algorithm({"name": "fa2(block_m=64)", "block_m": 32}, tmp_path)


def test_dtype_and_phase_take_any_case_as_algorithm_and_gpu_do(capsys):
    from perfsim.cli import main

    assert main(["predict", "-b", "1", "--heads", "8", "--seqlen", "1024", "--head-dim", "64",
                 "--dtype", "FP16", "--phase", "FWD", "--json"]) in (0, None)
    out = capsys.readouterr().out
    assert '"dtype": "fp16"' in out and '"phase": "fwd"' in out


def test_power_over_the_limit_is_a_note_saying_why(capsys):
    """A call whose modelled power stays over the limit says why, in the table's notes and in
    --json: at the sustained clock, the power model's floor; at boost, a clock taken
    regardless of power."""
    import json

    shape = ["-b", "4", "--heads", "16", "--seqlen", "8192", "--head-dim", "128", "--causal",
             "-a", "fa3"]
    assert main(["predict", "--gpu", "h100-pcie", *shape]) == 0
    text = capsys.readouterr().out
    assert "even at the power model's floor clock" in text and "optimistic" in text
    assert "ignores the power limit" not in text
    assert main(["predict", "--gpu", "h100-pcie", *shape, "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("floor clock" in n for n in notes)
    assert main(["predict", "--gpu", "h100-sxm5", *shape, "--clock", "boost"]) == 0
    assert "clock 'boost' ignores the power limit" in capsys.readouterr().out


def test_sweep_kernel_only_and_clock_as_predict(tmp_path, capsys):
    """``perfsim sweep --kernel-only --clock MHz``: each row as ``perfsim predict`` with the
    same flags (no host floor, the lock)."""
    import json

    import perfsim

    config = tmp_path / "s.toml"
    config.write_text('gpus = ["h200-sxm"]\nalgorithms = ["flex"]\n[workload]\nbatch = [1]\n'
                      'heads = [8]\nseqlen_q = [128]\nhead_dim = [64]\n')
    assert main(["sweep", str(config), "--kernel-only", "--clock", "1500", "--json",
                 "--quiet"]) in (0, None)
    row, = json.loads(capsys.readouterr().out)
    w = perfsim.AttentionWorkload(batch=1, heads=8, seqlen_q=128, head_dim=64)
    p = perfsim.predict(w, "h200-sxm", "flex", timing=perfsim.timing_for(
        "h200-sxm", "flex", host_floor_fwd_s=0.0, host_floor_bwd_s=0.0, clock=1.5e9))
    assert row["seconds"] == pytest.approx(p.seconds, rel=1e-12) and row["bound"] != "host"
    assert main(["sweep", str(config), "--clock", "fast", "--quiet"]) == 2


def _sweep_csv(tmp_path, workload: str):
    """Rows of ``perfsim sweep`` on fa2 / H100 with the TOML ``[workload]`` lines given."""
    import pandas as pd

    config = tmp_path / "s.toml"
    config.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\n' + workload)
    out = tmp_path / "rows.csv"
    assert main(["sweep", str(config), "--out", str(out), "--quiet"]) in (0, None)
    return pd.read_csv(out)


def test_sweep_rows_take_the_automatic_split_count_as_predict_does(tmp_path, capsys):
    """A decode shape whose small grid flash-attn 2 splits: the sweep's row is predict's
    (sweeps took "auto" as one split until 2026-12-03 and printed a note saying so)."""
    import json

    row = _sweep_csv(tmp_path, "batch = [1]\nheads = [8]\nkv_heads = [1]\nseqlen_q = [1]\n"
                     "seqlen_k = [10000]\nhead_dim = [64]\n").iloc[0]
    assert "note:" not in capsys.readouterr().out
    assert main(["predict", "--gpu", "h100-sxm5", "-a", "fa2", "--batch", "1", "--heads", "8",
                 "--kv-heads", "1", "--seqlen-q", "1", "--seqlen-k", "10000", "--head-dim", "64",
                 "--json"]) in (0, None)
    p = json.loads(capsys.readouterr().out)
    assert row.seconds == pytest.approx(p["seconds"], rel=1e-9)
    assert [k["name"] for k in p["kernels"]] == ["fa2_fwd", "fa2_fwd_combine"]   # split


def test_a_toml_list_follows_heads_with_none(tmp_path):
    """TOML has no null: "none" in a kv_heads or seqlen_k list is the follower."""
    rows = _sweep_csv(tmp_path, 'batch = [1]\nheads = [8]\nkv_heads = ["none", 1]\n'
                      'seqlen_q = [128]\nseqlen_k = ["None", 256]\nhead_dim = [64]\n')
    assert sorted(zip(rows.kv_heads, rows.seqlen_k)) == [(1, 128), (1, 256), (8, 128), (8, 256)]


@pytest.mark.parametrize("names", ['"presets"', '"all"'])
def test_a_sweep_file_takes_all_and_presets_as_the_api_does(tmp_path, names):
    """``algorithms = "presets"`` / ``"all"`` in a sweep TOML (a fresh user's review: the
    file refused them as unknown algorithm names while perfsim.sweep takes them)."""
    import pandas as pd

    from perfsim import algorithms
    from perfsim.implementations import implementations

    config = tmp_path / "s.toml"
    config.write_text(f'gpus = ["h200-sxm"]\nalgorithms = {names}\n[workload]\nbatch = 1\n'
                      'heads = 8\nseqlen_q = 1024\nhead_dim = 64\n')
    out = tmp_path / "rows.csv"
    assert main(["sweep", str(config), "--out", str(out), "--quiet"]) in (0, None)
    want = implementations() if names == '"presets"' else algorithms.names()
    assert len(pd.read_csv(out)) == len(want)


def test_a_sweep_file_expands_all_and_presets_inside_a_list(tmp_path):
    """``algorithms = ["presets", {name = "fa2", block_m = 64}]``: the group name expands
    where it stands (a fresh user's review: it was refused as an unknown algorithm)."""
    import pandas as pd

    from perfsim.implementations import implementations

    config = tmp_path / "s.toml"
    config.write_text('gpus = ["h200-sxm"]\nalgorithms = ["presets", {name = "fa2", '
                      'block_m = 64}]\n[workload]\nbatch = 1\nheads = 8\nseqlen_q = 1024\n'
                      'head_dim = 64\n')
    out = tmp_path / "rows.csv"
    assert main(["sweep", str(config), "--out", str(out), "--quiet"]) in (0, None)
    assert list(pd.read_csv(out).algorithm) == [*implementations(), "fa2(block_m=64)"]


def test_a_quoted_option_in_a_sweep_file_gets_a_hint(tmp_path, capsys):
    """``{name = "fa2", block_m = "64"}``: TOML keeps the string, which --set would have
    read as a number; the error says to drop the quotes."""
    config = tmp_path / "s.toml"
    config.write_text('gpus = ["h200-sxm"]\nalgorithms = [{name = "fa2", block_m = "64"}]\n'
                      '[workload]\nbatch = 1\nheads = 8\nseqlen_q = 1024\nhead_dim = 64\n')
    assert main(["sweep", str(config), "--out", str(tmp_path / "r.csv"), "--quiet"]) == 2
    assert "write block_m = 64 without quotes" in capsys.readouterr().err


def test_predict_all_exits_2_when_every_algorithm_refuses(capsys):
    """A table of refusals is not a success: ``-a all`` exits 2 as one algorithm does."""
    assert main(["predict", "-b", "4", "--heads", "16", "--seqlen", "4096", "--head-dim",
                 "128", "--dtype", "fp8_e4m3", "--phase", "bwd", "-a", "all"]) == 2
    captured = capsys.readouterr()
    assert "infeasible" in captured.out and "no algorithm of --algorithm all" in captured.err


def test_an_unknown_option_is_the_error_reported(capsys, tmp_path, monkeypatch):
    """``perfsim predict --bogus`` named the missing required options, not the typo."""
    with pytest.raises(SystemExit) as exc:
        main(["predict", "--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized option(s): --bogus" in err and "required" not in err
    # a value with a space is a value, as argparse reads it, whatever its first characters
    monkeypatch.chdir(tmp_path)
    assert main(["predict", "-b", "1", "--heads", "8", "--head-dim", "64", "--seqlen", "128",
                 "--plot", "--a b.png"]) == 0
    assert (tmp_path / "--a b.png").is_file()
    # a unique prefix of a known option is still that option (argparse's abbreviations)
    assert main(["predict", "-b", "1", "--heads", "8", "--head-dim", "64", "--seqlen", "128",
                 "--kern"]) == 0


@pytest.mark.parametrize("signal_name, code, line", [("SIGINT", 130, "perfsim: interrupted"),
                                                     ("SIGTERM", 143, "perfsim: terminated")])
def test_a_signal_while_the_command_imports_is_one_line(signal_name, code, line):
    """Ctrl-C while the command's modules load (numpy, pydantic, the model: most of a short
    command's wall time) was a Python traceback, and SIGTERM then ended the process with no
    word (its handler came after the imports): one line and exit 130 / 143, as later."""
    import subprocess
    import sys

    code_text = ("import os, signal, sys, time\n"
                 "import perfsim.cli as cli\n"
                 "assert 'perfsim.cli.common' not in sys.modules   # nothing heavy imported\n"
                 "class Signalled:      # the signal arrives as the command's helpers import\n"
                 "    def find_spec(self, name, path=None, target=None):\n"
                 "        if name == 'perfsim.cli.common':\n"
                 f"            os.kill(os.getpid(), signal.{signal_name})\n"
                 "            time.sleep(1)\n"
                 "sys.meta_path.insert(0, Signalled())\n"
                 "sys.argv = ['perfsim', 'gpus']\n"
                 "sys.exit(cli.main())\n")
    done = subprocess.run([sys.executable, "-c", code_text], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == code, done.stderr
    assert done.stderr == line + "\n"


def test_the_gpu_shortcut_takes_options_before_the_id_and_any_case(capsys):
    """``perfsim gpu --json ID`` (as the usage line reads) and ``perfsim gpu LIST`` failed."""
    assert main(["gpu", "--json", "h100-sxm5"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "h100-sxm5"
    assert main(["gpus", "--json"]) == 0
    catalog = json.loads(capsys.readouterr().out)
    for argv in (["gpu", "LIST", "--json"], ["gpu", "--json", "list"]):
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out) == catalog


def test_an_error_is_one_line_even_when_the_input_holds_a_newline(capsys):
    """``--set $'blo\\nck_m=64'`` printed a two-line error: the value is shown escaped."""
    assert main(["predict", "-b", "1", "--heads", "8", "--seqlen", "128", "--head-dim", "64",
                 "--set", "blo\nck_m=64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "blo\\nck_m" in err


def test_clock_names_are_case_insensitive_as_the_other_names(capsys):
    args = ["predict", "-b", "1", "--heads", "8", "--seqlen", "1024", "--head-dim", "64",
            "--json"]
    assert main(args + ["--clock", "BOOST"]) == 0
    upper = json.loads(capsys.readouterr().out)
    assert main(args + ["--clock", "boost"]) == 0
    assert json.loads(capsys.readouterr().out) == upper


def test_options_on_all_and_a_label_closed_twice_say_what_is_wrong(capsys):
    """Review findings: ``-a 'all(block_m=64)'`` said "unknown algorithm 'all'", and
    ``fa2(block_m=64)(x)`` was read as block_m = "64)(x"."""
    base = ["predict", "-b", "1", "--heads", "8", "--seqlen", "64", "--head-dim", "64"]
    assert main([*base, "-a", "all(block_m=64)"]) == 2
    assert "options go with one algorithm or preset, not with all" in capsys.readouterr().err
    assert main([*base, "-a", "fa2(block_m=64)(x)"]) == 2
    assert "must read name(key=value, ...)" in capsys.readouterr().err


def test_a_gpu_what_if_may_change_one_feature_or_power_entry():
    import perfsim

    g = perfsim.load_gpu("h100-sxm5")
    assert g.replace(features={"tma": False}).features.wgmma is True
    assert g.replace(power={"tdp_w": 500.0}).power.static_w == g.power.static_w


def test_running_out_of_memory_is_one_line(capsys, monkeypatch):
    # numpy's allocation error (a MemoryError) under `ulimit -v` or a container's limit
    import perfsim.cli.predict_cmd as predict_cmd

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 76.3 MiB")
    monkeypatch.setattr(predict_cmd, "predict", exhausted)
    assert main([*PREDICT, "--algorithm", "fa2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("perfsim: error: out of memory")


def test_the_memory_budget_reads_the_address_space_limit():
    # `ulimit -v` (RLIMIT_AS) counts, not only the machine's free memory: a sweep that does
    # not fit under it is refused or streamed instead of dying in an allocation
    import subprocess
    import sys
    code = ("import importlib, resource; s = importlib.import_module('perfsim.sweep'); "
            "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY)); "
            "print(s.available_memory_bytes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert 0 <= int(out) < 3 * 2**30


def test_help_names_no_default_where_there_is_none(capsys):
    # "(default H) (default: None)": argparse's formatter named None and [] as defaults
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    out = capsys.readouterr().out
    assert "(default: None)" not in out and "(default: [])" not in out
    assert "(default: bf16)" in " ".join(out.split())


def test_the_cgroup_headroom_walks_up_and_leaves_out_the_page_cache(tmp_path):
    import importlib
    sweep_module = importlib.import_module("perfsim.sweep")
    (tmp_path / "cgroup").write_text("0::/job_42/step_0\n")
    job, step = tmp_path / "v2" / "job_42", tmp_path / "v2" / "job_42" / "step_0"
    step.mkdir(parents=True)
    (step / "memory.max").write_text("max\n")                  # the limit sits on the job
    (job / "memory.max").write_text(f"{8 * 2**30}\n")
    (job / "memory.current").write_text(f"{8 * 2**30}\n")       # at the limit, but ...
    (job / "memory.stat").write_text(f"anon 1\ninactive_file {3 * 2**30}\n")   # ... cache
    got = sweep_module._cgroup_available(str(tmp_path / "cgroup"), str(tmp_path / "v2"),
                                         str(tmp_path / "v1"))
    assert got == 3 * 2**30
    (job / "memory.stat").write_text("anon 1\n")                # nothing to reclaim: none left
    assert sweep_module._cgroup_available(str(tmp_path / "cgroup"), str(tmp_path / "v2"),
                                          str(tmp_path / "v1")) == 0


def test_no_memory_left_is_a_budget_of_none(monkeypatch):
    # 0 bytes available fell through to the 16 GiB used where the OS says nothing
    import importlib
    sweep_module = importlib.import_module("perfsim.sweep")
    monkeypatch.setattr(sweep_module, "available_memory_bytes", lambda: 0)
    assert sweep_module.memory_budget_bytes() == 0


def test_sweep_json_too_large_for_memory_is_refused_before_the_work(tmp_path, capsys,
                                                                    monkeypatch):
    # --json holds every row as Python objects (~9 kB a row): under a small budget pyarrow
    # ran out of memory with a 49-line traceback
    import importlib
    sweep_module = importlib.import_module("perfsim.sweep")
    monkeypatch.setattr(sweep_module, "memory_budget_bytes", lambda: 10**6)
    config = tmp_path / "s.toml"
    config.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\n'
                      'batch = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nheads = [8, 16, 32]\n'
                      'seqlen_q = [128, 256, 512, 1024]\nhead_dim = [64]\n')
    assert main(["sweep", str(config), "--json", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--json: 120 rows need about" in err[0]


def test_a_tile_too_large_says_which_option_set_it(capsys):
    """A fresh user's report: --set block_m=100000 reported the shared-memory shortfall
    without naming the tile or the option."""
    base = ["predict", "--gpu", "h100-sxm5", "-a", "fa2", "-b", "1", "--heads", "8",
            "--seqlen", "1024", "--head-dim", "64"]
    assert main([*base, "--set", "block_m=100000"]) == 2
    err = capsys.readouterr().err
    assert "the forward tile of 100000 x" in err and "set by block_m=100000" in err
    assert main([*base, "--phase", "bwd", "--set", "bwd_block_n=4096"]) == 2
    err = capsys.readouterr().err
    assert "the backward tile of" in err and "set by bwd_block_n=4096" in err


class _FullDisk:
    """A standard output the system refuses (a full disk, ``> /dev/full``)."""

    def write(self, text):
        import errno

        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass


def test_an_output_the_disk_refuses_is_one_line_not_a_traceback(monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys, "stdout", _FullDisk())
    assert main(["gpus", "--json"]) == 1
    err = capsys.readouterr().err
    assert err == "perfsim: error: standard output: No space left on device\n"


def test_a_head_dim_above_the_kernels_is_refused_as_the_user_gave_it(capsys):
    """sdpa-flash and flash-attn-2 pad a head dim to a multiple of 8; above 256 nothing is
    padded and the error quotes the call's head dim, not the padded one."""
    for preset in ("sdpa-flash", "flash-attn-2"):
        assert main(["predict", "-b", "1", "--heads", "8", "--seqlen", "1024",
                     "--head-dim", "300", "-a", preset]) == 2
        err = capsys.readouterr().err
        assert "got 300" in err
        # the library pads 12 or 33 to a multiple of 8: only the ceiling refuses
        assert "at most 256" in err and "a multiple of 8 up to" not in err


def test_an_interrupted_dry_run_claims_nothing_about_files():
    from perfsim.cli import _kept, _parse

    assert _kept(_parse(["validate", "--dry-run"]), KeyboardInterrupt()) == ""
    note = _kept(_parse(["validate", "--out", "results-x"]), KeyboardInterrupt())
    assert "kept in results-x" in note and "resumes" in note


def test_a_negative_page_size_says_what_is_allowed(capsys):
    assert main(["predict", "-b", "1", "--heads", "8", "--seqlen", "1024", "--head-dim", "64",
                 "--page-size", "-1"]) == 2
    assert "or 0 (or None) for contiguous K/V" in capsys.readouterr().err


def test_a_sweep_config_with_a_byte_order_mark_and_a_folder_named_as_a_profile(tmp_path,
                                                                             capsys):
    config = tmp_path / "c.toml"
    config.write_text('\ufeffgpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\n'
                      "batch = 1\nheads = 8\nseqlen_q = 512\nhead_dim = 64\n", encoding="utf-8")
    assert main(["sweep", str(config), "-q", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["head_dim"] == 64
    (tmp_path / "d.toml").mkdir()
    config.write_text('gpus = ["d.toml"]\nalgorithms = ["fa2"]\n[workload]\n'
                      "batch = 1\nheads = 8\nseqlen_q = 512\nhead_dim = 64\n", encoding="utf-8")
    assert main(["sweep", str(config), "-q"]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_a_quiet_sweep_with_nowhere_to_go_says_so(tmp_path, capsys):
    """``perfsim sweep CONFIG -q`` with no --out, --plot or --json computes rows nobody sees:
    it says so on stderr (a fresh user's run printed nothing and exited 0)."""
    config = tmp_path / "c.toml"
    config.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2"]\n[workload]\n'
                      "batch = 1\nheads = 8\nseqlen_q = 512\nhead_dim = 64\n")
    assert main(["sweep", str(config), "-q"]) == 0
    captured = capsys.readouterr()
    assert "shows nothing of it" in captured.err and captured.out == ""
    assert main(["sweep", str(config), "-q", "--json"]) == 0
    assert "shows nothing" not in capsys.readouterr().err
