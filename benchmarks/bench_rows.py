"""predict_rows against a loop of predict() over the same workloads (docs/performance.md).

    python benchmarks/bench_rows.py [--rows N] [--algorithms fa2,fa3,...] [--gpu ID]

Rows are drawn per row (B 1-32, H 8-64 with GQA on half of them, N_q 1-16k, N_k 1-32k,
d 64/128, causal or not, fwd/bwd/fwd_bwd), so they form no grid; the loop runs on the first
``--loop`` of them. Prints µs per row for each and the largest relative difference of
``seconds`` between the two."""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import perfsim
from perfsim.sweep import WORKLOAD_FIELDS


def rows(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    heads = rng.choice([8, 16, 32, 64], n)
    return pd.DataFrame({
        "batch": rng.integers(1, 33, n), "heads": heads,
        "kv_heads": np.where(rng.random(n) < 0.5, heads, rng.choice([1, 2, 4, 8], n)),
        "seqlen_q": np.where(rng.random(n) < 0.2, 1, rng.integers(1, 16385, n)),
        "seqlen_k": rng.integers(1, 32769, n), "head_dim": rng.choice([64, 128], n),
        "causal": rng.random(n) < 0.5, "phase": rng.choice(["fwd", "bwd", "fwd_bwd"], n)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--loop", type=int, default=1000)
    ap.add_argument("--algorithms", default="fa2,fa3,sdpa-cudnn")
    ap.add_argument("--gpu", default="h100-sxm5")
    args = ap.parse_args()
    frame = rows(args.rows)
    print("| algorithm | rows | predict_rows µs/row (first call, again) | predict() loop µs/call "
          "| max rel. diff |")
    print("|---|---|---|---|---|")
    for algo in args.algorithms.split(","):
        t = time.perf_counter()
        out = perfsim.predict_rows(frame, gpu=args.gpu, algorithm=algo, engine="numpy")
        first = time.perf_counter() - t
        t = time.perf_counter()
        out = perfsim.predict_rows(frame, gpu=args.gpu, algorithm=algo, engine="numpy")
        again = time.perf_counter() - t
        worst, t, calls = 0.0, time.perf_counter(), 0
        for row in out.head(args.loop).itertuples():
            w = perfsim.AttentionWorkload(**{k: getattr(row, k) for k in WORKLOAD_FIELDS})
            try:
                p = perfsim.predict(w, gpu=args.gpu, algorithm=algo)
            except perfsim.InfeasibleError:
                continue
            calls += 1
            worst = max(worst, abs(row.seconds / p.seconds - 1))
        loop = (time.perf_counter() - t) / max(calls, 1)
        print(f"| {algo} | {len(frame)} | {first / len(frame) * 1e6:.2f}, "
              f"{again / len(frame) * 1e6:.2f} | {loop * 1e6:.0f} | {worst:.1e} |")


if __name__ == "__main__":
    main()
