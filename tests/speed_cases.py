"""Seeded sample of (workload, GPU, algorithm) cases for ``test_speed_equivalence.py``.

``python -m tests.speed_cases`` writes ``tests/data/speed_golden.json`` (run it only when a
model change is *meant* to move the numbers; the file pins predictions across speedups).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import perfsim
from perfsim.errors import PerfsimError

GOLDEN = Path(__file__).parent / "data" / "speed_golden.json"
ALGORITHMS = ("standard", "fa1", "fa2", "fa3", "fa4", "sdpa-flash", "sdpa-cudnn",
              "flash-attn-cute", "flash-attn-2", "sdpa-efficient")
N_CASES = 500
SEED = 13


def _workload(rng: random.Random) -> dict:
    kind = rng.choice(("dense", "dense", "dense", "decode", "window", "varlen"))
    heads = rng.choice((8, 16, 32))
    kv = rng.choice((None, heads, heads // 4 if heads >= 4 else 1, 1))
    d = rng.choice((64, 128, 256)) if kind != "decode" else rng.choice((64, 128))
    dtype = rng.choice(("bf16", "fp16", "bf16", "fp16", "bf16", "fp16", "bf16", "fp8_e4m3"))
    base = dict(heads=heads, kv_heads=kv, head_dim=d, dtype=dtype)
    if kind == "decode":
        return {**base, "batch": rng.choice((1, 4, 16)), "seqlen_q": rng.choice((1, 1, 4)),
                "seqlen_k": rng.choice((1024, 8192, 131072)), "causal": rng.random() < 0.5,
                "phase": "fwd"}
    phase = rng.choice(("fwd", "fwd", "bwd", "fwd_bwd"))
    causal = rng.random() < 0.5
    if kind == "varlen":
        n = rng.randint(2, 5)
        q = tuple(rng.choice((128, 500, 1024, 2048, 3000)) for _ in range(n))
        return {**base, "seqlens_q": q, "seqlens_k": q, "causal": causal, "phase": phase}
    n = rng.choice((512, 1024, 2048, 4096, 8192, 16384))
    out = {**base, "batch": rng.choice((1, 2, 4, 8)), "seqlen_q": n, "causal": causal,
           "phase": phase}
    if kind == "window":
        out["window"] = (rng.choice((128, 256, 1024)), 0 if causal else rng.choice((0, 128)))
    if rng.random() < 0.15 and phase == "fwd":
        out["dropout_p"] = 0.1
    return out


def cases() -> list[tuple[dict, str, str]]:
    rng = random.Random(SEED)
    gpus = perfsim.gpus()
    return [(_workload(rng), rng.choice(gpus), rng.choice(ALGORITHMS)) for _ in range(N_CASES)]


def outcome(wl: dict, gpu: str, algorithm: str) -> dict:
    """What the golden file pins for one case: seconds, counts, clock, or the refusal."""
    try:
        w = perfsim.AttentionWorkload(**wl)
        p = perfsim.predict(w, gpu=gpu, algorithm=algorithm)
    except PerfsimError as exc:
        return {"error": type(exc).__name__}
    c = p.counts
    return {"seconds": float(p.seconds), "tflops": float(p.tflops), "bound": p.bound,
            "clock_hz": float(p.clock_hz),
            "power_w": None if p.power_w is None else float(p.power_w),
            "memory_bytes": float(p.memory_bytes),
            "kernels": [k.cost.name for k in p.kernels],
            "counts": {f: float(getattr(c, f)) for f in (
                "flops", "tensor_flops", "fp32_flops", "exp_ops", "emulated_exp_ops",
                "hbm_bytes", "l2_hit_bytes", "smem_bytes", "atomics")},
            "bound_max_seconds": max(float(v) for v in p.bound_seconds.values())}


def main() -> None:
    rows = [{"workload": wl, "gpu": g, "algorithm": a, "expected": outcome(wl, g, a)}
            for wl, g, a in cases()]
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(rows, separators=(",", ":")) + "\n")
    ok = sum("error" not in r["expected"] for r in rows)
    print(f"{GOLDEN}: {len(rows)} cases, {ok} predicted, {len(rows) - ok} refused, "
          f"{GOLDEN.stat().st_size} bytes")


if __name__ == "__main__":
    main()
