"""FlexAttention's forward bound checks by the sequence length's largest power-of-two divisor
(issue 9; Nsight Compute instruction censuses and local-memory bytes, no attention timing).

    python -m perfsim.validate.flex_length_census      # prints the table

``torch.compile(flex_attention, dynamic=False)`` bakes the sequence lengths into the kernel as
constants, and Triton compiles the key bound check (``CHECK_BLOCK_BOUNDARY``: the −inf select
on keys past ``N_k`` and the masked K/V and Q loads) from what it can prove about them. The
census of the same forward kernel at B = 3, H = 8 and N = 2688 (= 21 · 128, no check) and at
lengths a few rows past it (``reports/h100/probes/ncu/summary-flex-lengths.json``, a lent H100,
2026-12-06; ``validate/probe_flex_lengths.py`` has the PTX of every length) falls into three
classes, decided by the largest power of two dividing N:

- **a multiple of 16** (2704, 2720; and the H200's N = 4000 of ``summary-flexdiv.json``): the
  checks perfsim had counted, ~1.5 ALU lane instructions per score element;
- **even, not a multiple of 16** (2690, 2696, 2700: identical censuses): more ALU work, one
  FMA-pipe instruction in ~1.4 more per score, and at the two 4-warp tiles that held 236-240
  registers the compiler spills (255 registers, local loads in the loop);
- **odd** (2689): a little more again, and more spilled bytes.

For each compiled forward tile (``implementations.FLEX_FWD_CONFIGS["sm90"]`` by the call's
head dim: ``(BLOCK_M, BLOCK_N, num_warps, dots' head dim)``) and class: ALU- and FMA-pipe lane
instructions per score element of the padded tiles beyond the same kernel at a multiple of 128,
and the local-memory bytes a thread reloads per K/V step (``l1tex__t_bytes`` of local loads
over the CTAs' threads and their key steps; every CTA visits every key tile, no mask).
Baselines: the same H100 census at N = 2688 for head dims 64 and 160; the H200's at
N = 4096 (``reports/h200/probes/ncu/summary.json`` and ``summary-flexfwd.json``, the same
sm_90 code: at head dims 64 and 192/160 the two GPUs' baselines agree within 0.12
instructions per score) for 128 and 256. The literal table the model uses is
``softmax_costs.FLEX_FWD_BOUND_CHECK_CLASSES``; ``tests/test_flex_lengths.py`` checks it against
this module.
"""

from __future__ import annotations

import json
from math import ceil
from pathlib import Path

from perfsim.algorithms.softmax_costs import length_class

from .address_census import ALU_OPCODES, FMA_OPCODES, KERNEL_MARK

REPORTS = Path(__file__).resolve().parent / "reports"
SUMMARY = REPORTS / "h100" / "probes" / "ncu" / "summary-flex-lengths.json"
H200 = REPORTS / "h200" / "probes" / "ncu"

#: The call's head dim profiled -> the compiled forward tile on sm_90
#: ``(BLOCK_M, BLOCK_N, num_warps, dots' head dim)`` (``FLEX_FWD_CONFIGS["sm90"]``, the default
#: 64 x 64 tile at head dim 160, its dots 256 wide).
TILES = {64: (128, 128, 4, 64), 128: (128, 64, 8, 128), 160: (64, 64, 4, 256),
         256: (64, 32, 4, 256)}
#: Each tile's census at a length with no bound check: (summary file, case, B, H, N).
BASELINES = {
    64: (SUMMARY, "flex-fwd-d64-n2688-b3-h8", 3, 8, 2688),
    128: (H200 / "summary.json", "flex-fwd-d128", 1, 32, 4096),
    160: (SUMMARY, "flex-fwd-d160-n2688-b3-h8", 3, 8, 2688),
    256: (H200 / "summary-flexfwd.json", "flex-fwd-d256", 1, 16, 4096),
}
#: The classes, by the smallest power-of-two divisor they admit (16: multiples of 16; 2: even
#: lengths that are not; 1: odd ones).
CLASSES = (16, 2, 1)


def _kernel(path: Path, case: str) -> dict:
    kernels = json.loads(path.read_text())["cases"][case]
    return next(k for k in kernels if k["kernel"].startswith(KERNEL_MARK))


def _per_score(path: Path, case: str, b: int, h: int, n: int, tile: tuple) -> dict:
    """ALU and FMA lane instructions per score element of the padded tiles, and the local
    bytes a thread reloads per key step, of one profiled forward."""
    block_m, block_n, warps, _ = tile
    kernel = _kernel(path, case)
    ops = kernel["opcodes"]

    def lanes(names):
        return 32 * sum(c for op, c in ops.items() if op.split(".")[0] in names)

    q_tiles, k_tiles = ceil(n / block_m), ceil(n / block_n)
    scores = b * h * q_tiles * block_m * k_tiles * block_n
    threads = b * h * q_tiles * warps * 32
    return {"alu": lanes(ALU_OPCODES) / scores, "fma": lanes(FMA_OPCODES) / scores,
            "spill": (kernel["local_load_bytes"] or 0.0) / (threads * k_tiles),
            "registers": kernel["registers_per_thread"]}


def census() -> list[dict]:
    """One row per profiled length that is not a multiple of 128: its tile, class, and the
    instructions per score element and spilled bytes per thread and key step beyond the
    tile's baseline."""
    cases = json.loads(SUMMARY.read_text())["cases"]
    rows = []
    for case in sorted(cases):
        _, phase, d, n, b, h = case.split("-")
        d, n, b, h = int(d[1:]), int(n[1:]), int(b[1:]), int(h[1:])
        if phase != "fwd" or n % 128 == 0:
            continue
        tile = TILES[d]
        got = _per_score(SUMMARY, case, b, h, n, tile)
        base = _per_score(*BASELINES[d], tile)
        rows.append({"case": case, "head_dim": d, "seqlen": n, "tile": tile,
                     "class": length_class(n), "registers": got["registers"],
                     "alu": got["alu"] - base["alu"], "fma": got["fma"] - base["fma"],
                     "spill": got["spill"] - base["spill"]})
    return rows


def classes() -> dict:
    """``{tile: {class: (ALU, FMA, spill bytes)}}``: the mean of each tile's profiled lengths
    of a class (FMA differences below zero, −0.14 at the 64 x 64 tile's multiples of 16, as
    0: the checks do not remove FMA-pipe work)."""
    groups: dict = {}
    for r in census():
        groups.setdefault(r["tile"], {}).setdefault(r["class"], []).append(r)
    out = {}
    for tile, by_class in groups.items():
        out[tile] = {}
        for cls, rows in sorted(by_class.items(), reverse=True):
            mean = [sum(r[k] for r in rows) / len(rows) for k in ("alu", "fma", "spill")]
            out[tile][cls] = (mean[0], max(mean[1], 0.0), mean[2])
    return out


def main() -> int:
    from perfsim.cli.common import print_table

    print_table("FlexAttention's forward bound checks by length class (Nsight Compute, H100; "
                "beyond the same kernel at a multiple of 128)",
                ["case", "tile (BM, BN, warps, dots)", "class", "registers",
                 "ALU / score", "FMA / score", "spilled B / thread / step"],
                [[r["case"], str(r["tile"]), str(r["class"]), f"{r['registers']:.0f}",
                  f"{r['alu']:+.2f}", f"{r['fma']:+.2f}", f"{r['spill']:.1f}"]
                 for r in census()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
