"""Time one ``perfsim.predict`` call per case (issue 13; method in docs/performance.md).

    python benchmarks/bench_predict.py [--calls 300] [--profile CASE] [--engine ENGINE]

Per case, median µs per call over ``--calls`` calls after 20 warm-up calls; the machine
should be otherwise idle (on the 2-core development machine numbers move 10-30 % run to run).
Columns:

- ``interpreted``: ``PERFSIM_PREDICT_ENGINE=python``, the case's own workload every call;
- ``compiled``: the compiled path of ``perfsim.fastpath`` once the structures of the timed
  calls have their programs (every workload predicted twice before timing: built, checked),
  each call on another workload — batch, heads and sequence lengths drawn from
  :data:`SIZES`, so no call repeats the one before; a decode case's split count changes
  with the cache length, each count a structure — with ``.seconds`` read; ``path`` says
  how many timed calls a program answered (the rest: guard misses, evaluated interpreted);
- ``+ kernels``: the same calls also reading ``Prediction.kernels`` (built interpreted on
  first read);
- ``first program``: seconds from the structure's first call to its program answering
  (trace, IR, LLVM compile, the check), in a process that had compiled nothing for it.

``--engine python|compiled`` times only that path (the case's own workload each call).
``--profile CASE`` prints cProfile tables (cumulative and tottime) for that case.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import time

import perfsim
from perfsim import fastpath

CASES = {
    "fa2-fwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True), "fa2"),
    "fa3-fwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True), "fa3"),
    "fa2-decode": (dict(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072,
                        head_dim=128), "fa2"),
    "fa2-fwd_bwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True,
                         phase="fwd_bwd"), "fa2"),
    "standard-fwd_bwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True,
                              phase="fwd_bwd"), "standard"),
    "sdpa-cudnn-bwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True,
                            phase="bwd"), "sdpa-cudnn"),
    "flex-fwd": (dict(batch=4, heads=16, seqlen_q=4096, head_dim=128, causal=True), "flex"),
}
GPU = "h100-sxm5"
#: What the ``compiled`` column's workloads draw per call (the case's other fields kept;
#: ``seqlen_q`` of a one-token decode case stays 1 and its ``seqlen_k`` is drawn).
SIZES = {"batch": (1, 2, 4, 8, 16), "heads": (16, 32, 64),
         "seqlen": (1024, 2048, 4096, 8192, 16384)}


def _workloads(name: str, count: int, seed: int = 0) -> list:
    wl, _ = CASES[name]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        w = dict(wl, batch=rng.choice(SIZES["batch"]))
        if "kv_heads" in wl:
            w["seqlen_k"] = rng.choice(SIZES["seqlen"]) * 8
        else:
            w["heads"] = rng.choice(SIZES["heads"])
            w["seqlen_q"] = rng.choice(SIZES["seqlen"])
        out.append(perfsim.AttentionWorkload(**w))
    return out


def _median_us(calls, fn) -> float:
    samples = []
    for args in calls:
        t0 = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def time_case(name: str, calls: int, engine: str = "python") -> float:
    """Median µs of ``predict`` on the case's own workload under ``engine``."""
    wl, algo = CASES[name]
    w = perfsim.AttentionWorkload(**wl)
    os.environ["PERFSIM_PREDICT_ENGINE"] = engine
    try:
        for _ in range(20):
            perfsim.predict(w, gpu=GPU, algorithm=algo)
        fastpath.wait()
        return _median_us([()] * calls, lambda: perfsim.predict(w, gpu=GPU, algorithm=algo))
    finally:
        os.environ.pop("PERFSIM_PREDICT_ENGINE", None)


def time_compiled(name: str, calls: int) -> tuple:
    """``(first program s, µs per call, µs with kernels read, calls the program answered)``
    of the ``compiled`` columns."""
    wl, algo = CASES[name]
    os.environ["PERFSIM_PREDICT_ENGINE"] = "compiled"
    try:
        first = perfsim.AttentionWorkload(**wl)
        t0 = time.perf_counter()
        hits = fastpath.STATS["hits"]
        for _ in range(3):          # build, check, answer
            perfsim.predict(first, gpu=GPU, algorithm=algo)
        built = (time.perf_counter() - t0) if fastpath.STATS["hits"] > hits else None
        ws = _workloads(name, calls)
        for w in (*ws, *ws):    # every structure among them built, then checked
            perfsim.predict(w, gpu=GPU, algorithm=algo)
        hits = fastpath.STATS["hits"]
        seconds = _median_us([(w,) for w in ws],
                             lambda w: perfsim.predict(w, gpu=GPU, algorithm=algo).seconds)
        answered = fastpath.STATS["hits"] - hits
        kernels = _median_us([(w,) for w in ws],
                             lambda w: perfsim.predict(w, gpu=GPU, algorithm=algo).kernels)
        return built, seconds, kernels, answered
    finally:
        os.environ.pop("PERFSIM_PREDICT_ENGINE", None)


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
    def positive(text):
        value = int(text)
        if value < 1:
            raise argparse.ArgumentTypeError(f"give at least 1 call, got {value}")
        return value
    ap.add_argument("--calls", type=positive, default=300)
    ap.add_argument("--profile", choices=sorted(CASES))
    ap.add_argument("--engine", choices=("python", "compiled"))
    args = ap.parse_args()
    if args.profile:
        profile_case(args.profile)
        return
    print(f"perfsim from {perfsim.__file__}")
    if args.engine:
        print(f"| case | µs per call, {args.engine} (median) |\n|---|---|")
        for name in CASES:
            print(f"| {name} | {time_case(name, args.calls, args.engine):.0f} |")
        return
    print("| case | interpreted µs | compiled µs | + kernels µs | path | first program |\n"
          "|---|---|---|---|---|---|")
    for name in CASES:
        slow = time_case(name, args.calls)
        built, fast, kernels, answered = time_compiled(name, args.calls)
        print(f"| {name} | {slow:.0f} | {fast:.0f} | {kernels:.0f} | "
              f"{answered} of {args.calls} | "
              f"{'none (interpreted)' if built is None else f'{built:.2f} s'} |")


if __name__ == "__main__":
    main()
