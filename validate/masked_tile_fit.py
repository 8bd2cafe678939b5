"""What a causal diagonal tile costs SDPA flash's forward, read from measured times alone (a
lead for a profile to confirm; nothing in the model is set from it).

    python -m perfsim.validate.masked_tile_fit validate/reports/h200-external \
        validate/reports/h100-external

The main grid's forwards keep B·N fixed (16 384 tokens), so at one head dim every call
launches the same number of CTAs (B·H·N / B_r) and the non-causal calls differ only in their
tiles. Per SM, ``t = F + u · tiles`` (``F``: the calls' fixed cost, ``u``: one unmasked tile)
is fitted by least squares to the non-causal forwards with N ≤ 4096, and each causal
forward then gives what one masked tile costs, ``m = (t − F − u · unmasked) / masked``, both
counts per SM. The tile counts are flash-attn 2's (``flash_fwd_kernel.h``): a query tile
visits the key tiles up to its last row, and masks the last ``⌈B_r / B_c⌉`` of them (one more
when N is not a multiple of both tiles, ``n_masking_steps``); the tiles are what flash-attn 2
launches on sm80+ for head dims 64 / 128 / 256 without dropout (``run_mha_fwd_hdim*``:
128 × 128, 128 × 64, 64 × 64). The fit ignores the causal grid's uneven last wave, which
grows with N, so only the short calls (N ≤ 1024) read a masked tile's cost cleanly.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

#: (B_r, B_c) of flash-attn 2's forward by head dim (sm80+, no dropout).
FWD_TILES = {64: (128, 128), 128: (128, 64), 256: (64, 64)}
TOKENS = 16384
SMS = 132


def tile_counts(n: int, b_r: int, b_c: int, causal: bool) -> tuple[int, int]:
    """(visited, masked) tiles of one (batch, head) of an N × N forward."""
    t_r, t_c = math.ceil(n / b_r), math.ceil(n / b_c)
    if not causal:
        return t_r * t_c, 0
    visited = [min(t_c, math.ceil(min(n, (m + 1) * b_r) / b_c)) for m in range(t_r)]
    steps = math.ceil(b_r / b_c) + (0 if n % b_r == 0 and n % b_c == 0 else 1)
    return sum(visited), sum(min(v, steps) for v in visited)


def fit(rows: list[dict], head_dim: int) -> dict:
    """``F``, ``u`` and ``m / u`` per causal N for one head dim's main-grid forwards."""
    b_r, b_c = FWD_TILES[head_dim]
    pick = [r for r in rows if r["impl"] == "sdpa_flash" and r["phase"] == "fwd"
            and r["status"] == "ok" and r["head_dim"] == head_dim and r["dtype"] == "bf16"
            and r["kv_heads"] == r["heads"] and r["seqlen_q"] == r["seqlen_k"]
            and r["batch"] * r["seqlen_q"] == TOKENS and r["seqlen_q"] <= 4096
            and not r.get("dropout_p")]
    plain = [r for r in pick if not r["causal"]]
    if len(plain) < 2:
        return {}
    per_sm = [r["batch"] * r["heads"] / SMS for r in plain]
    a = np.array([[1.0, tile_counts(r["seqlen_q"], b_r, b_c, False)[0] * s]
                  for r, s in zip(plain, per_sm)])
    y = np.array([r["measured_s"] * 1e6 for r in plain])
    (f, u), *_ = np.linalg.lstsq(a, y, rcond=None)
    ratios = {}
    for r in sorted((r for r in pick if r["causal"]), key=lambda r: r["seqlen_q"]):
        visited, masked = tile_counts(r["seqlen_q"], b_r, b_c, True)
        s = r["batch"] * r["heads"] / SMS
        m = (r["measured_s"] * 1e6 - f - (visited - masked) * s * u) / (masked * s)
        ratios[r["seqlen_q"]] = m / u
    return {"F_us": f, "u_us": u, "masked_over_unmasked": ratios}


def main(argv=None) -> int:
    dirs = (argv if argv is not None else sys.argv[1:]) or ["validate/reports/h200-external"]
    for folder in dirs:
        rows = [json.loads(line) for line in (Path(folder) / "results.jsonl").open()]
        for d in sorted(FWD_TILES):
            out = fit(rows, d)
            if not out:
                continue
            ratios = "  ".join(f"N={n}: {v:.2f}" for n, v in out["masked_over_unmasked"].items())
            print(f"{folder}  d={d}: F {out['F_us']:.1f} µs, u {out['u_us']:.3f} µs per tile "
                  f"per SM; masked / unmasked tile  {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
