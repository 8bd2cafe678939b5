"""What a causal diagonal tile costs SDPA flash's forward, read from measured times alone (a
lead for a profile to confirm; nothing in the model is set from it).

    python -m perfsim.validate.masked_tile_fit validate/reports/h200-external \
        validate/reports/h100-external
    python -m perfsim.validate.masked_tile_fit --predicted \
        validate/reports/h200-external/score-h200-sxm     # the same fit to the model's times

The main grid's forwards keep B·N fixed (16 384 tokens), so at one head dim every call
launches the same number of CTAs (B·H·N / B_r) and the non-causal calls differ only in their
tiles. Per SM, ``t = F + u · tiles`` (``F``: the calls' fixed cost, ``u``: one unmasked tile)
is fitted by least squares to the non-causal forwards with N ≤ 4096, and each causal
forward then gives what one masked tile costs, ``m = (t − F − u · unmasked) / masked``, both
counts per SM. The tile counts are flash-attn 2's (``flash_fwd_kernel.h``): a query tile
visits the key tiles up to its last row, and masks the last ``⌈B_r / B_c⌉`` of them (one more
when N is not a multiple of both tiles, ``n_masking_steps``); the tiles are what flash-attn 2
launches on sm90 (H100, H200: 132 SMs) for head dims 64 / 128 / 256 without dropout
(``run_mha_fwd_hdim*``: 128 × 128, 128 × 64, 64 × 64; the A100 and sm86/89 launch others, so
the tool reads H100/H200 rows only). The fit ignores the causal grid's uneven last wave, so
only the short calls (N ≤ 1024) read a masked tile's cost cleanly; at head dims 64 and 256
it rests on three non-causal calls (N = 256, 1024, 4096).

A folder holds ``results.jsonl`` (measured rows, ``measured_s``) or, with ``--predicted``,
a score's ``rows.csv`` (``validate/external_report.py``), whose ``predicted_s`` is fitted.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import numpy as np

from perfsim.tiles import visits

#: (B_r, B_c) of flash-attn 2's forward by head dim (sm80+, no dropout).
FWD_TILES = {64: (128, 128), 128: (128, 64), 256: (64, 64)}
TOKENS = 16384
SMS = 132


def tile_counts(n: int, b_r: int, b_c: int, causal: bool) -> tuple[int, int]:
    """(visited, masked) tiles of one (batch, head) of an N × N forward."""
    if not causal:
        return int(visits(n, n, b_r, b_c, False).tiles), 0
    # per query tile: the key tiles up to its last row (perfsim.tiles.visits sums these), of
    # which flash-attn 2 masks the last n_masking_steps
    t_c = math.ceil(n / b_c)
    visited = [min(t_c, math.ceil(min(n, (m + 1) * b_r) / b_c)) for m in range(math.ceil(n / b_r))]
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


def _predicted_rows(path: Path) -> list[dict]:
    """A score's rows.csv as records whose time is the model's."""
    out = []
    for r in csv.DictReader(path.open()):
        out.append({"impl": r["impl"], "phase": r["phase"], "status": "ok",
                    "head_dim": int(r["head_dim"]), "dtype": r["dtype"],
                    "kv_heads": int(r["kv_heads"]), "heads": int(r["heads"]),
                    "seqlen_q": int(r["seqlen_q"]), "seqlen_k": int(r["seqlen_k"]),
                    "batch": int(r["batch"]), "causal": r["causal"] == "True",
                    "measured_s": float(r["predicted_s"])})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--predicted", action="store_true",
                    help="fit the model's times from a score folder's rows.csv")
    args = ap.parse_args(argv)
    name = "rows.csv" if args.predicted else "results.jsonl"
    for folder in args.folders:
        path = folder / name
        if not path.is_file():
            ap.error(f"{path} not found (a folder holding {name} is expected"
                     f"{'' if args.predicted else '; --predicted reads a score folder'})")
        rows = (_predicted_rows(path) if args.predicted
                else [json.loads(line) for line in path.open() if line.strip()])
        fitted = [(d, fit(rows, d)) for d in sorted(FWD_TILES)]
        if not any(out for _, out in fitted):
            print(f"{folder}: no SDPA flash main-grid forwards (B·N = {TOKENS}, bf16, "
                  "non-causal at two lengths or more) to fit")
        for d, out in fitted:
            if not out:
                continue
            ratios = "  ".join(f"N={n}: {v:.2f}" for n, v in out["masked_over_unmasked"].items())
            print(f"{folder}  d={d}: F {out['F_us']:.1f} µs, u {out['u_us']:.3f} µs per tile "
                  f"per SM; masked / unmasked tile  {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
