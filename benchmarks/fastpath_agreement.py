"""Random ``predict`` calls through ``perfsim.fastpath``'s programs against the interpreted
path (docs/performance.md, "One ``predict`` in a loop").

    python benchmarks/fastpath_agreement.py [--seed 11] [--structures 100] [--rows 12]

Per structure (a random catalog GPU, algorithm or preset, head dim, mask, dtype and phase),
``--rows`` random workloads (batch, heads, GQA, sequence lengths: prefill and one-token or
four-token decode against caches up to 131 072 keys) are predicted with
``PERFSIM_PREDICT_ENGINE=compiled`` and each result is compared, output by output, with the
interpreted prediction of the same call (relative 1e-12, the bound exactly). Prints every
difference and a summary line; exits 1 if any.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import warnings

ALGORITHMS = ("fa2", "fa3", "fa4", "standard", "fa1", "sdpa-flash", "sdpa-cudnn", "flex",
              "flash-attn-cute", "triton-tutorial", "sdpa-math", "sdpa-efficient", "eager",
              "flash-attn-2", "flash-attn-3")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--structures", type=int, default=100)
    ap.add_argument("--rows", type=int, default=12)
    args = ap.parse_args(argv)
    os.environ["PERFSIM_PREDICT_ENGINE"] = "compiled"
    import perfsim
    from perfsim import fastpath
    from perfsim.algorithms import Dims
    from perfsim.implementations import resolve
    from perfsim.predict import _interpreted, timing_for

    rng = random.Random(args.seed)
    gpus = perfsim.gpus()
    rows = answered = bad = 0
    t0 = time.perf_counter()
    for _ in range(args.structures):
        gpu, algorithm = rng.choice(gpus), rng.choice(ALGORITHMS)
        d, causal = rng.choice((64, 96, 128, 256)), rng.random() < 0.5
        phase = rng.choice(("fwd", "fwd", "bwd", "fwd_bwd"))
        dtype = rng.choice(("bf16", "fp16"))
        window = rng.choice([(None, None)] * 4 + [(256, 0), (128, 128)])
        for _ in range(args.rows):
            heads = rng.choice((8, 16, 32, 40))
            kv = rng.choice((heads, heads, heads // 8 if heads % 8 == 0 else heads))
            n_q = rng.choice((1, 1, 4, 128, 333, 512, 1000, 2048, 4096, 8192, 16384))
            n_k = (rng.choice((n_q, n_q, 4096, 65536, 131072)) if n_q > 4
                   else rng.choice((1024, 8192, 65536, 100000, 131072)))
            try:
                w = perfsim.AttentionWorkload(
                    batch=rng.choice((1, 2, 3, 8, 16, 64)), heads=heads, kv_heads=kv,
                    seqlen_q=n_q, seqlen_k=n_k, head_dim=d, causal=causal, phase=phase,
                    dtype=dtype, window=window)
                with warnings.catch_warnings():
                    warnings.simplefilter("error")      # a program that disagrees warns
                    p = perfsim.predict(w, gpu=gpu, algorithm=algorithm)
            except perfsim.PerfsimError:
                continue
            spec, algo = perfsim.load_gpu(gpu), resolve(algorithm)
            ref = _interpreted(w, Dims.of(w), spec, algo, timing_for(spec, algo))
            rows += 1
            answered += "_build_kernels" in p.__dict__
            for name, x, y in zip(fastpath.OUTPUTS, fastpath._reference(p),
                                  fastpath._reference(ref)):
                if name == "bound":
                    ok = x == y
                elif x is None or y is None:
                    ok = x is y
                else:
                    ok = x == y or abs(x - y) <= 1e-12 * abs(y)
                if not ok:
                    bad += 1
                    print(f"DIFF {gpu} {algorithm} {w}: {name} {x!r} against {y!r}")
                    break
    print(f"seed {args.seed}: {rows} calls, {answered} answered by a program, {bad} differ; "
          f"{fastpath.STATS}; {time.perf_counter() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
