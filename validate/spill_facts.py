"""Register-spill reloads per thread and dK/dV step of the backward kernels, from the
Nsight Compute profiles (issue 9; no attention timing is used).

    python -m perfsim.validate.spill_facts            # prints the table the presets cite
    python -m perfsim.validate.spill_facts --uneven   # flash-attn 2's shared-memory wavefronts
                                                      # below its compiled head dims

The two Triton backwards users call that hold dK and dV for a key block in fp32 registers of
four warps — Triton's fused-attention tutorial at head dim 128 (``B_c = 128``) and
FlexAttention above head dim 128 (``BLOCK_N1 = 64``, its tiles padded to head dim 256) — need
``2 · B_c · d / 128`` registers per thread for the two accumulators alone (256 in both),
against the 255 a thread can address, and their profiles show local-memory (spill) traffic of
12.8-23.7 GB per call where the same kernels at smaller head dims show none or ~0.03 GB. Each
profiled number
is divided by the steps of the dK/dV loop (``Dims.tile_visits`` of the kernel's
``BLOCK_M1 x BLOCK_N1`` tiles, the count perfsim's backward uses) and the threads of a CTA:
the bytes one thread reloads per step. Only the dK/dV programs hold the two accumulators;
FlexAttention's dQ programs (the other half of its grid) hold one and are taken not to
spill, and so is the tutorial's dQ loop.

cuDNN's sm90 kernels spill only with dropout (the Philox state and keep mask beside the
accumulators, 168 registers per thread): their rows are the loads per thread of all 384 and
per tile step of the forward (128 x 128 tiles) and of the backward's dK/dV loop.

FlexAttention's kernel compiled with a block mask (causal) spills at head dim 128, where the
kernel without one does not (255 registers against 253): ``summary-short-shapes.json``
(flex-bwd-d128-n1024-b16-h16-c).

Sources: ``reports/h200/probes/ncu/summary-dropout.json`` and
``summary-dropout-spills.json`` (cuDNN, 2026-12-03); ``summary.json`` (tutorial-bwd-d64/d128,
flex-bwd-d128) and ``summary-spills.json`` (flex-bwd-d64/d192/d256, ``probe_spills.sh``,
2026-12-01); kernel configurations in ``reports/h200/probes/flex_bwd_configs.json``;
FlexAttention at head dims 160 and 224 and causal at 160, 192 and 256 on a lent H100
(``reports/h100/probes/spill/summary-flex-spills.json``, ``probe_spill_power.sh``, 2026-12-06).
FlexAttention's dK/dV accumulators are counted at its compiled head dim (a power of two).
"""

from __future__ import annotations

import json
from pathlib import Path

REPORTS = Path(__file__).resolve().parent / "reports"
#: the H200's probes (a case's file is relative to it; an absolute path stays as it is)
PROBES = REPORTS / "h200" / "probes"
#: FlexAttention's backward profiled on a lent H100 (validate/probe_spill_power.sh)
H100_FLEX_SPILLS = REPORTS / "h100" / "probes" / "spill" / "summary-flex-spills.json"

#: (case, summary file, (B, H, N, d, causal), (B_r, B_c, warps)) — the profiled shapes of
#: validate/probe_ncu.py (B = 1, H = 4096 // d, N = 4096; the tutorial's backward is causal)
#: and each kernel's tile (the dK/dV tile of a backward; flash-attn 2's from the launched
#: kernel's traits in the profile, at the compiled head dim its name shows).
CASES = (
    ("tutorial-bwd-d64", "ncu/summary.json", (1, 64, 4096, 64, True), (32, 128, 4)),
    ("tutorial-bwd-d128", "ncu/summary.json", (1, 32, 4096, 128, True), (32, 128, 4)),
    ("flex-bwd-d64", "ncu/summary-spills.json", (1, 64, 4096, 64, False), (64, 128, 8)),
    ("flex-bwd-d128", "ncu/summary.json", (1, 32, 4096, 128, False), (64, 128, 8)),
    # ... and its causal kernel (a block mask's mask_mod compiled in), which spills at d 128
    ("flex-bwd-d128-n1024-b16-h16-c", "ncu/summary-short-shapes.json",
     (16, 16, 1024, 128, True), (64, 128, 8)),
    ("flex-bwd-d192", "ncu/summary-spills.json", (1, 21, 4096, 192, False), (64, 64, 4)),
    ("flex-bwd-d256", "ncu/summary-spills.json", (1, 16, 4096, 256, False), (64, 64, 4)),
    # ... and on a lent H100 (the same sm_90 code): between the profiled head dims, and the
    # kernel compiled with a causal block mask above 128 (validate/probe_spill_power.sh)
    *((case, H100_FLEX_SPILLS, (1, 4096 // d, 4096, d, c), (64, 64, 4))
      for case, d, c in (("flex-bwd-d160", 160, False), ("flex-bwd-d224", 224, False),
                         ("flex-bwd-d160-c", 160, True), ("flex-bwd-d192-c", 192, True),
                         ("flex-bwd-d256-c", 256, True))),
    # PyTorch's copy of flash-attn 2 (SDPA flash) on sm_90, at compiled head dims (64 ... 256)
    # and between them (40, 80, 112, 160, 176, 200, 224: run by the next compiled kernel)
    *((f"flash-bwd-d{d}", "ncu/summary.json" if d in (64, 128, 256) else
       "ncu/summary-headdims.json", (1, 4096 // d, 4096, d, False), tile)
      for d, tile in ((40, (128, 128, 8)), (64, (128, 128, 8)), (80, (64, 128, 8)),
                      (96, (64, 128, 8)), (112, (64, 128, 8)), (128, (64, 128, 8)),
                      (160, (64, 64, 8)), (192, (64, 64, 8)), (224, (64, 64, 8)),
                      (256, (64, 64, 8)))),
    *((f"flash-fwd-d{d}", "ncu/summary.json" if d in (64, 128, 256) else
       "ncu/summary-headdims.json", (1, 4096 // d, 4096, d, False), tile)
      for d, tile in ((40, (128, 128, 4)), (64, (128, 128, 4)), (80, (128, 64, 4)),
                      (96, (128, 64, 4)), (112, (128, 64, 4)), (128, (128, 64, 4)),
                      (160, (128, 64, 8)), (176, (128, 64, 8)), (192, (128, 64, 8)),
                      (200, (64, 64, 4)), (224, (64, 64, 4)), (256, (64, 64, 4)))),
    # cuDNN's sm90 kernels with dropout 0.1 (384 threads: a producer and two consumer
    # warpgroups; perfsim.implementations.CUDNN_SM90_FWD_TILE / CUDNN_SM90_BWD_TILES)
    *((f"cudnn-fwd-d{d}-p10", path, (1, 4096 // d, 4096, d, False), (128, 128, 12))
      for d, path in ((64, "ncu/summary-dropout.json"), (128, "ncu/summary-dropout.json"),
                      (192, "ncu/summary-dropout-spills.json"),
                      (256, "ncu/summary-dropout-spills.json"))),
    *((f"cudnn-bwd-d{d}-p10", path, (1, 4096 // d, 4096, d, False), tile)
      for d, path, tile in ((64, "ncu/summary-dropout-spills.json", (64, 128, 12)),
                            (128, "ncu/summary-dropout.json", (64, 128, 12)),
                            (192, "ncu/summary-dropout-spills.json", (64, 64, 12)),
                            (256, "ncu/summary-dropout-spills.json", (64, 64, 12)))),
    # ... and its causal kernels at d = 256 (per visited tile)
    ("cudnn-fwd-d256-p10-c", "ncu/summary-dropout-causal.json", (1, 16, 4096, 256, True),
     (128, 128, 12)),
    ("cudnn-bwd-d256-p10-c", "ncu/summary-dropout-causal.json", (1, 16, 4096, 256, True),
     (64, 64, 12)),
)
#: the main kernel in each profile (a backward call's; a forward call's)
MAIN = ("_attn_bwd", "flex_attention_backward_1", "flash_bwd_dq_dk_dv_loop", "_bprop_",
        "flash_fwd_kernel", "_fprop_")


def _main_kernel(case: str, path, shape: tuple, tile: tuple) -> tuple[dict, int]:
    """A :data:`CASES` entry's main kernel (its profile's dict) and the tile steps it runs
    (``Dims.tile_visits`` of the kernel's ``B_r x B_c`` tiles over the profiled shape)."""
    from perfsim import AttentionWorkload
    from perfsim.algorithms.base import Dims

    b, h, n, d, causal = shape
    kernels = json.loads((PROBES / path).read_text())["cases"][case]
    # the tutorial's "_attn_bwd" by its exact name (its preprocess kernel shares the prefix);
    # the others by a part of theirs
    names = MAIN[4:] if "-fwd-" in case else MAIN[1:4]
    main = next(k for k in kernels if k["kernel"] == MAIN[0]
                or any(name in k["kernel"] for name in names))
    dims = Dims.of(AttentionWorkload(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=causal,
                                     phase="bwd"))
    return main, int(b * h * dims.tile_visits(tile[0], tile[1]).tiles)


def facts() -> list[dict]:
    """One row per profiled case: local bytes loaded and stored, the dK/dV steps, and the
    bytes reloaded per thread and step."""
    rows = []
    for case, path, (b, h, n, d, causal), (b_r, b_c, warps) in CASES:
        main, steps = _main_kernel(case, path, (b, h, n, d, causal), (b_r, b_c, warps))
        threads = warps * 32
        # FlexAttention's template pads the head dim to a power of two (FLEX_HEAD_DIMS)
        compiled = 1 << (d - 1).bit_length() if case.startswith("flex-") else d
        rows.append({
            "case": case, "registers_per_thread": main["registers_per_thread"],
            # Nsight Compute leaves the local-memory counters empty where there was none
            "local_load_bytes": main["local_load_bytes"] or 0.0,
            "local_store_bytes": main["local_store_bytes"] or 0.0,
            "steps": int(steps), "threads": threads,
            # a backward's dK and dV accumulators (none in a forward)
            "accumulator_registers": 0 if "-fwd-" in case else 2 * b_c * compiled // threads,
            "reload_bytes_per_thread_step": (main["local_load_bytes"] or 0.0) / (steps * threads)})
    return rows


#: flash-attn 2's compiled head dim for each profiled head dim below one (PyTorch's copy:
#: ``fa2_launch.PYTORCH_HEAD_DIM_TEMPLATES``), by phase
UNEVEN_CASES = {"fwd": {40: 64, 80: 96, 112: 128, 160: 192, 176: 192, 200: 256, 224: 256},
                "bwd": {40: 64, 80: 96, 112: 128, 160: 192, 224: 256}}


def uneven_wavefronts() -> dict:
    """Shared-memory wavefronts each warp of flash-attn 2's kernels adds per tile step when
    the call's head dim is below the compiled kernel's (``fa2.REFERENCE_UNEVEN_SMEM_WAVEFRONTS``):
    ``{phase: {compiled head dim: row}}``, a row holding the wavefronts per warp and tile step
    at the kernel's own head dim (``even``), the calls below it (``below``: head dim → figure),
    their mean less ``even`` (``extra``) and the extra ``LDS`` and ``STS`` per CTA and tile step
    (means over the calls below). From the profiles of :data:`CASES` (Nsight Compute's
    ``smem_wavefronts`` and opcode counts; tile steps as :func:`facts` counts them)."""
    per = {}
    for case, path, shape, tile in CASES:
        if not case.startswith("flash-"):
            continue
        phase, d, warps = ("fwd" if "-fwd-" in case else "bwd"), shape[3], tile[2]
        main, steps = _main_kernel(case, path, shape, tile)
        ops = main.get("opcodes") or {}
        per[(phase, d)] = {"wavefronts": main["smem_wavefronts"] / (steps * warps),
                           "lds": ops.get("LDS", 0) / steps, "sts": ops.get("STS", 0) / steps}
    out = {}
    for phase, below in UNEVEN_CASES.items():
        for kd in sorted(set(below.values())):
            calls = [d for d, k in below.items() if k == kd]
            even = per[(phase, kd)]
            mean = sum(per[(phase, d)]["wavefronts"] for d in calls) / len(calls)
            out.setdefault(phase, {})[kd] = {
                "even": even["wavefronts"],
                "below": {d: per[(phase, d)]["wavefronts"] for d in calls},
                "extra": mean - even["wavefronts"],
                "extra_lds": sum(per[(phase, d)]["lds"] for d in calls) / len(calls) - even["lds"],
                "extra_sts": sum(per[(phase, d)]["sts"] for d in calls) / len(calls) - even["sts"]}
    return out


def main(argv=None) -> int:
    import sys

    from perfsim.cli.common import print_table

    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print("usage: python -m perfsim.validate.spill_facts [--uneven]\n\n"
              "Prints the register-spill table the presets cite; --uneven: flash-attn 2's extra "
              "shared-memory wavefronts below its compiled head dims.")
        return 0
    if args == ["--uneven"]:
        print_table("flash-attn 2 below its compiled head dim: shared-memory wavefronts per warp "
                    "and tile step (Nsight Compute, H200)",
                    ["phase", "kernel", "at its head dim", "below it (head dim: figure)",
                     "extra", "extra LDS / CTA step", "extra STS / CTA step"],
                    [[phase, str(kd), f"{r['even']:.1f}",
                      ", ".join(f"{d}: {v:.1f}" for d, v in r["below"].items()),
                      f"{r['extra']:.1f}", f"{r['extra_lds']:.0f}", f"{r['extra_sts']:.0f}"]
                     for phase, rows in uneven_wavefronts().items()
                     for kd, r in rows.items()])
        return 0
    if args:
        print("usage: python -m perfsim.validate.spill_facts [--uneven]", file=sys.stderr)
        return 2
    print_table("register spills (Nsight Compute, H200 and H100)",
                ["case", "registers", "dK,dV accumulator registers", "local loads GB",
                 "local stores GB", "tile steps", "reloaded B / thread / step"],
                [[r["case"], f"{r['registers_per_thread']:.0f}", str(r["accumulator_registers"]),
                  f"{r['local_load_bytes'] / 1e9:.3f}", f"{r['local_store_bytes'] / 1e9:.3f}",
                  str(r["steps"]), f"{r['reload_bytes_per_thread_step']:.1f}"]
                 for r in facts()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
