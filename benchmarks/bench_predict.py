"""Time one ``perfsim.predict`` call per case (issue 13; method in docs/performance.md).

    python benchmarks/bench_predict.py [--calls 300] [--profile CASE]

Median µs per call over ``--calls`` calls after 20 warm-up calls; the machine should be
otherwise idle (on the 2-core development machine numbers move 10-30 % run to run).
``--profile CASE`` prints cProfile tables (cumulative and tottime) for that case.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import perfsim

CASES = {
    "fa2-fwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True), "fa2"),
    "fa3-fwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True), "fa3"),
    "fa2-decode": (dict(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072,
                        head_dim=128), "fa2"),
    "fa2-fwd_bwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True,
                         phase="fwd_bwd"), "fa2"),
    "standard-fwd_bwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True,
                              phase="fwd_bwd"), "standard"),
}
GPU = "h100-sxm5"


def time_case(name: str, calls: int) -> float:
    wl, algo = CASES[name]
    w = perfsim.AttentionWorkload(**wl)
    for _ in range(20):
        perfsim.predict(w, gpu=GPU, algorithm=algo)
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        perfsim.predict(w, gpu=GPU, algorithm=algo)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def profile_case(name: str, calls: int = 200, top: int = 20) -> None:
    wl, algo = CASES[name]
    w = perfsim.AttentionWorkload(**wl)
    perfsim.predict(w, gpu=GPU, algorithm=algo)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        perfsim.predict(w, gpu=GPU, algorithm=algo)
    prof.disable()
    stats = pstats.Stats(prof)
    for key in ("cumulative", "tottime"):
        print(f"--- {name}: {calls} calls, sorted by {key}")
        stats.sort_stats(key).print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--profile", choices=sorted(CASES))
    args = ap.parse_args()
    if args.profile:
        profile_case(args.profile)
        return
    print(f"perfsim from {perfsim.__file__}")
    print("| case | µs per call (median) |\n|---|---|")
    for name in CASES:
        print(f"| {name} | {time_case(name, args.calls):.0f} |")


if __name__ == "__main__":
    main()
