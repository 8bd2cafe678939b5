"""Register-spill reloads per thread and dK/dV step of the backward kernels, from the
Nsight Compute profiles (issue 9; no attention timing is used).

    python -m perfsim.validate.spill_facts            # prints the table the presets cite

The two Triton backwards users call that hold dK and dV for a key block in fp32 registers of
four warps — Triton's fused-attention tutorial at head dim 128 (``B_c = 128``) and
FlexAttention at head dims 192 and 256 (``BLOCK_N1 = 64``) — need ``2 · B_c · d / 128``
registers per thread for the two accumulators alone (256, 256 and 192), against the 255 a
thread can address, and their profiles show local-memory (spill) traffic of 12.8-23.7 GB per
call where the same kernels at smaller head dims show none or ~0.03 GB. Each profiled number
is divided by the steps of the dK/dV loop (``Dims.tile_visits`` of the kernel's
``BLOCK_M1 x BLOCK_N1`` tiles, the count perfsim's backward uses) and the threads of a CTA:
the bytes one thread reloads per step. Only the dK/dV programs hold the two accumulators;
FlexAttention's dQ programs (the other half of its grid) hold one and are taken not to
spill, and so is the tutorial's dQ loop.

Sources: ``reports/h200/probes/ncu/summary.json`` (tutorial-bwd-d64/d128, flex-bwd-d128) and
``summary-spills.json`` (flex-bwd-d64/d192/d256, ``probe_spills.sh``, 2026-12-01); kernel
configurations in ``reports/h200/probes/flex_bwd_configs.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

PROBES = Path(__file__).resolve().parent / "reports" / "h200" / "probes"

#: (case, summary file, (B, H, N, d, causal), (BLOCK_M1, BLOCK_N1, warps)) — the profiled
#: shapes of validate/probe_ncu.py (B = 1, H·d = 4096, N = 4096; the tutorial's backward is
#: causal) and each kernel's dK/dV tile.
CASES = (
    ("tutorial-bwd-d64", "ncu/summary.json", (1, 64, 4096, 64, True), (32, 128, 4)),
    ("tutorial-bwd-d128", "ncu/summary.json", (1, 32, 4096, 128, True), (32, 128, 4)),
    ("flex-bwd-d64", "ncu/summary-spills.json", (1, 64, 4096, 64, False), (64, 128, 8)),
    ("flex-bwd-d128", "ncu/summary.json", (1, 32, 4096, 128, False), (64, 128, 8)),
    ("flex-bwd-d192", "ncu/summary-spills.json", (1, 21, 4096, 192, False), (64, 64, 4)),
    ("flex-bwd-d256", "ncu/summary-spills.json", (1, 16, 4096, 256, False), (64, 64, 4)),
    # PyTorch's copy of flash-attn 2 (SDPA flash), Flash_bwd_kernel_traits on sm_90
    ("flash-bwd-d64", "ncu/summary.json", (1, 64, 4096, 64, False), (128, 128, 8)),
    ("flash-bwd-d128", "ncu/summary.json", (1, 32, 4096, 128, False), (64, 128, 8)),
    ("flash-bwd-d256", "ncu/summary.json", (1, 16, 4096, 256, False), (64, 64, 8)),
)
#: the backward's main kernel in each profile
MAIN = ("_attn_bwd", "flex_attention_backward_1", "flash_bwd_dq_dk_dv_loop")


def facts() -> list[dict]:
    """One row per profiled case: local bytes loaded and stored, the dK/dV steps, and the
    bytes reloaded per thread and step."""
    from perfsim import AttentionWorkload
    from perfsim.algorithms.base import Dims

    rows = []
    for case, path, (b, h, n, d, causal), (b_r, b_c, warps) in CASES:
        kernels = json.loads((PROBES / path).read_text())["cases"][case]
        main = next(k for k in kernels if k["kernel"] in MAIN
                    or any(name in k["kernel"] for name in MAIN[1:]))
        dims = Dims.of(AttentionWorkload(batch=b, heads=h, seqlen_q=n, head_dim=d,
                                         causal=causal, phase="bwd"))
        steps = b * h * dims.tile_visits(b_r, b_c).tiles
        threads = warps * 32
        rows.append({
            "case": case, "registers_per_thread": main["registers_per_thread"],
            # Nsight Compute leaves the local-memory counters empty where there was none
            "local_load_bytes": main["local_load_bytes"] or 0.0,
            "local_store_bytes": main["local_store_bytes"] or 0.0,
            "dkdv_steps": int(steps), "threads": threads,
            "accumulator_registers": 2 * b_c * d // threads,
            "reload_bytes_per_thread_step": (main["local_load_bytes"] or 0.0) / (steps * threads)})
    return rows


def main() -> int:
    from perfsim.cli.common import print_table

    print_table("register spills of the backwards (Nsight Compute, H200)",
                ["case", "registers", "accumulator registers", "local loads GB",
                 "local stores GB", "dK/dV steps", "reloaded B / thread / step"],
                [[r["case"], f"{r['registers_per_thread']:.0f}", str(r["accumulator_registers"]),
                  f"{r['local_load_bytes'] / 1e9:.3f}", f"{r['local_store_bytes'] / 1e9:.3f}",
                  str(r["dkdv_steps"]), f"{r['reload_bytes_per_thread_step']:.1f}"]
                 for r in facts()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
