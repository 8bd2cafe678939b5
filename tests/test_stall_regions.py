"""validate/stall_regions.py splits Nsight Compute's per-instruction warp samples at the main
loop (the longest backward branch) and sums them by stall reason."""

import gzip

from perfsim.validate import stall_regions

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_no_inst","stall_wait","stall_no_inst (Not Issued)"')


def _page(path, lines):
    text = '"Kernel Name","k"\n' + HEADER + "\n" + "\n".join(lines) + "\n"
    with gzip.open(path, "wt") as fh:
        fh.write(text)


def _line(addr, source, samples, no_inst, wait):
    return f'"0x{addr:x}","{source}","{samples}","1","{no_inst}","{wait}","0"'


def test_samples_split_at_the_main_loop(tmp_path):
    base = 0x7f0000000000
    lines = [_line(base + a, "FFMA R0, R0, R1, R2", 1, 1, 0) for a in range(0, 0x800, 16)]
    lines += [_line(base + a, "FFMA R0, R0, R1, R2", 2, 0, 2) for a in range(0x800, 0xc00, 16)]
    lines.append(_line(base + 0xc00, f"@P0 BRA 0x{base + 0x800:x}", 0, 0, 0))
    lines += [_line(base + a, "EXIT", 1, 0, 1) for a in range(0xc10, 0xd00, 16)]
    path = tmp_path / "case-source.csv.gz"
    _page(path, lines)
    kernel, rows = stall_regions.read_page(str(path))
    assert kernel == "k"
    assert stall_regions.main_loop(rows) == (base + 0x800, base + 0xc00)
    got = stall_regions.regions(rows)
    assert got["before"]["bytes"] == 0x800 and got["before"]["stall_no_inst"] == 0x80
    assert got["loop"]["bytes"] == 0x410 and got["loop"]["stall_wait"] == 2 * 0x40
    assert got["after"]["samples"] == (0xd00 - 0xc10) // 16
    assert "stall_no_inst (Not Issued)" not in got["loop"]


def test_a_file_that_is_no_source_page_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    assert stall_regions.main([str(bad)]) == 1
    assert "no 'Address' header" in capsys.readouterr().err
    assert stall_regions.main([]) == 2


def test_a_page_without_instructions_is_one_line(tmp_path, capsys):
    path = tmp_path / "empty-source.csv.gz"
    _page(path, [])
    assert stall_regions.main([str(path)]) == 1
    assert "without instructions" in capsys.readouterr().err
