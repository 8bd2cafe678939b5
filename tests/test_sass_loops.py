"""validate/sass_loops.py reads a cuobjdump dump: the main loop of a flash-attn 2 forward is
its longest backward branch, and the code before it the prologue and masked copies."""

from perfsim.validate import sass_loops

NAME = ("_ZN13pytorch_flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4E"
        "Lb0ELb0EN7cutlass10bfloat16_tE19Flash_kernel_traitsILi128ELi128ELi64ELi4ES3_EELb0ELb1"
        "ELb0ELb0ELb0ELb1ELb0ELb0EEEvNS_16Flash_fwd_paramsE")


def _dump(name, branches, last):
    """A dump of one function: NOPs to ``last`` with ``(at, target)`` branches."""
    lines = [f"\t\tFunction : {name}"]
    at_branch = dict(branches)
    for addr in range(0, last + 16, 16):
        text = f"@!P0 BRA 0x{at_branch[addr]:x}" if addr in at_branch else "NOP"
        lines.append(f"        /*{addr:04x}*/                   {text} ;   /* 0x0 */")
    return "\n".join(lines) + "\n"


def test_the_main_loop_is_the_longest_backward_branch():
    # an inner loop 0x2000-0x2400, the main loop 0x1000-0x5000, a forward branch ignored
    text = _dump(NAME, [(0x2400, 0x2000), (0x5000, 0x1000), (0x0800, 0x3000)], 0x6000)
    (row,) = sass_loops.rows(text)
    assert (row["head_dim"], row["block_m"], row["block_n"], row["warps"]) == (128, 128, 64, 4)
    assert row["causal"] and not row["local"] and not row["even_mn"]
    assert row["bytes"] == 0x6010
    assert row["main_loop_bytes"] == 0x5010 - 0x1000
    assert row["before_main_loop_bytes"] == 0x1000
    assert [size for *_, size in row["loops"]] == [0x410, 0x4010]


def test_other_kernels_and_fp16_are_left_out():
    other = _dump(NAME.replace("16flash_fwd_kernel", "24flash_fwd_splitkv_kernel"),
                  [(0x40, 0)], 0x100)
    half = _dump(NAME.replace("10bfloat16_t", "6half_t"), [(0x40, 0)], 0x100)
    assert sass_loops.rows(other + half) == []


def test_a_missing_dump_is_one_line(tmp_path, capsys):
    assert sass_loops.main([str(tmp_path / "none.sass")]) == 1
    assert "sass_loops:" in capsys.readouterr().err
    assert sass_loops.main([]) == 2
