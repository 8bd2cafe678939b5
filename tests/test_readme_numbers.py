"""The README's table of published numbers states what the model gives today: each row's
perfsim column is recomputed here and must read as printed (a model change that moves one
fails here until the README is updated; a fresh-user review found the table stale)."""

from __future__ import annotations

from pathlib import Path

import test_fa3_fa4 as fa34  # the test modules sit on sys.path (pytest rootdir-relative)
import test_papers as papers

import perfsim
from perfsim import AttentionWorkload as W
from perfsim.algorithms import FA1, FA2, FA3, Standard
from perfsim.timing import TimingParams

README = (Path(__file__).parent.parent / "README.md").read_text()


def _row(claim_start: str) -> str:
    rows = [line for line in README.splitlines() if line.startswith(f"| {claim_start}")]
    assert len(rows) == 1, f"README has no single row starting {claim_start!r}"
    return rows[0].rsplit("|", 2)[-2]          # the perfsim column


def test_gpt2_row():
    gpu = perfsim.load_gpu("a100-sxm4-40gb")
    std = perfsim.predict(papers.GPT2, gpu=gpu,
                          algorithm=Standard(scale_in_matmul=True, mask_op="add_float"))
    fa1 = perfsim.predict(papers.GPT2, gpu=gpu, algorithm=FA1(block_c=256))
    want = (f"{std.counts.hbm_bytes / 1e9:.1f} GB / {std.seconds * 1e3:.1f} ms; "
            f"{fa1.counts.hbm_bytes / 1e9:.1f} GB / {fa1.seconds * 1e3:.1f} ms")
    assert _row("GPT-2 medium").strip() == want


def test_fa2_a100_row():
    fwd = fa34._best_fwd_tflops("a100-sxm4-80gb", "fa2", dims=(64, 128))
    bwd = max(perfsim.predict(W(batch=max(16384 // n, 1), heads=2048 // d, seqlen_q=n,
                                head_dim=d, dtype="bf16", phase="bwd"),
                              gpu="a100-sxm4-80gb", algorithm="fa2").tflops
              for d in (64, 128) for n in (512, 1024, 2048, 4096, 8192, 16384))
    row = _row("FA2 up to 230")
    assert row.strip().startswith(f"{fwd:.0f} ({100 * (fwd / 230 - 1):.0f} %); "
                                  f"{bwd:.0f} ({100 * (bwd / (0.63 * 312) - 1):.0f} %)"
                                  .replace("-", "−"))


def test_fa3_and_fa4_headline_rows():
    fa3 = fa34._best_fwd_tflops(fa34._H100, "fa3", timing=fa34.LOCK_1830)
    assert _row("FA3 up to 740").strip().startswith(
        f"{fa3:.0f} ({100 * (fa3 / 740 - 1):.1f} %".replace("-", "−"))
    fa4 = fa34._best_fwd_tflops("b200", "fa4", dims=(64, 128), total=32768)
    assert _row("FA4 up to 1613").strip() == \
        f"{fa4:.0f} ({100 * (fa4 / 1613 - 1):+.1f} %)".replace("-", "−")


def test_fa3_table2_row():
    got = [fa34._tflops(c) for c in (FA3(), FA3(intra_warpgroup_overlap=False),
                                     FA3(warp_specialized=False))]
    assert _row("FA3 Table 2").strip() == " / ".join(f"{x:.0f}" for x in got)


def test_fa3_over_fa2_row():
    h100 = perfsim.load_gpu("h100-sxm5")
    lock = TimingParams.for_gpu(h100, clock=1.83e9)
    ratio = {}
    for phase in ("fwd", "bwd"):
        w = W(batch=4, heads=16, seqlen_q=8192, head_dim=128, dtype="bf16", phase=phase)
        ratio[phase] = (perfsim.predict(w, gpu=h100, algorithm="fa3", timing=lock).tflops
                        / perfsim.predict(w, gpu=h100, algorithm=FA2(), timing=lock).tflops)
    assert _row("FA3 1.5–2.0×").strip() == \
        f"forward {ratio['fwd']:.2f}×; backward {ratio['bwd']:.2f}×"


def test_own_kernel_report_figures_quoted_as_the_report_gives_them():
    # the README quotes the SDPA rows of validate/reports/h200/report.md; a rescoring moved
    # them (13.9 -> 17.0 %, 52.3 -> 55.9 %) and the README kept the old figures
    report = (Path(__file__).parent.parent / "validate/reports/h200/report.md").read_text()

    def median(impl, phase):
        rows = [line.split("|") for line in report.splitlines()
                if line.startswith(f"| {impl} (vs ") and f"| {phase} |" in line]
        assert len(rows) == 1, (impl, phase)
        return rows[0][4].strip().rstrip("%")
    for words, impl, phase in (("cuDNN backward", "sdpa_cudnn", "bwd"),
                               ("SDPA flash backward", "sdpa_flash", "bwd"),
                               ("the memory-efficient forward", "sdpa_efficient", "fwd")):
        assert f"{words} {median(impl, phase)} %" in README, words


def test_first_example_rows_read_as_printed(capsys):
    """The README's first command prints the rows its first output block shows (a fresh
    user's report found the standard row 5 % stale)."""
    import re

    from perfsim.cli import main

    assert main(["predict", "--gpu", "a100-sxm4-80gb", "--algorithm", "all", "--batch", "64",
                 "--heads", "16", "--seqlen", "1024", "--head-dim", "64", "--dtype", "fp16",
                 "--phase", "fwd_bwd"]) == 0
    printed = capsys.readouterr().out

    def rows(text):
        return [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()
                if re.match(r"│ (standard|fa\d) ", line)]

    block = README[README.index("NVIDIA A100 SXM4 80GB: B=64"):]
    block = block[:block.index("```")]
    assert rows(printed) and rows(block) == rows(printed)
