"""A variable-length batch's groups built once on arrays (``perfsim.algorithms.base.
group_kernels``) predict what building them one group at a time predicts.

The array build is a speed path (a batch of 5 000 distinct lengths: ~4.4 s → ~0.7 s for
flash-attn 2's forward and backward on the H100, docs/performance.md); the per-group build is
the reference. Every feasible case below must take the array path (no silent fallback) and
agree to 1e-12."""

from __future__ import annotations

import math
import random

import pytest

import perfsim
from perfsim.algorithms import base

#: the threshold as shipped (each case below sets it, then the per-group one)
THRESHOLD = base.ARRAY_GROUPS
ALGORITHMS = ("fa2", "fa3", "fa4", "fa1", "standard", "sdpa-flash", "sdpa-cudnn",
              "sdpa-efficient", "sdpa-math", "flex", "flash-attn-cute")


def _summary(p: perfsim.Prediction) -> tuple:
    c = p.counts
    return (p.seconds, p.clock_hz, p.power_w or 0.0, p.bound,
            *(p.unit_seconds[u] for u in sorted(p.unit_seconds)),
            c.flops, c.tensor_flops, c.exp_ops, c.hbm_bytes, c.smem_bytes, p.memory_bytes)


def _close(a: tuple, b: tuple) -> bool:
    return all(x == y if isinstance(x, str) else math.isclose(x, y, rel_tol=1e-12, abs_tol=0)
               for x, y in zip(a, b, strict=True))


def _both(monkeypatch, w, gpu, algorithm):
    """``(array path, one-group path, groups the array path built on arrays, groups whose
    array build fell back)``; each result an error's type and text where predict raises."""
    results = []
    stats = dict(base.GROUP_STATS)
    for threshold in (THRESHOLD, 10 ** 9):
        monkeypatch.setattr(base, "ARRAY_GROUPS", threshold)
        try:
            results.append(_summary(perfsim.predict(w, gpu=gpu, algorithm=algorithm)))
        except perfsim.PerfsimError as e:
            results.append((type(e).__name__, str(e)))
        if threshold == THRESHOLD:
            built = base.GROUP_STATS["arrays"] - stats["arrays"]
            fell = base.GROUP_STATS["fallback"] - stats["fallback"]
    return results[0], results[1], built, fell


@pytest.mark.parametrize("gpu", ["h100-sxm5", "b200", "a100-sxm4-80gb", "rtx-5090"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_array_groups_predict_as_one_group_at_a_time(monkeypatch, gpu, algorithm):
    rng = random.Random(f"{gpu}/{algorithm}")
    for phase in ("fwd", "bwd", "fwd_bwd"):
        causal = rng.random() < 0.5
        # short sequences (one query tile, a single row) beside long ones
        sq = [rng.choice([1, rng.randint(2, 130), rng.randint(131, 6000)]) for _ in range(24)]
        sk = [q + rng.randint(0, 2000) if causal else rng.randint(1, 6000) for q in sq]
        heads = rng.choice([8, 16, 32])
        fields = dict(heads=heads, kv_heads=rng.choice([heads, heads // 4]),
                      head_dim=rng.choice([64, 128]), seqlens_q=sq, seqlens_k=sk,
                      causal=causal, dtype=rng.choice(["bf16", "fp16"]), phase=phase)
        extra = rng.random()
        if extra < 0.2:
            fields["window"] = (rng.randint(16, 512), 0)
        elif extra < 0.4:
            fields["page_size"] = rng.choice([16, 256])
        w = perfsim.AttentionWorkload(**fields)
        arrays, groups, built, fell = _both(monkeypatch, w, gpu, algorithm)
        if isinstance(groups[0], str) and groups[0].endswith("Error"):
            assert arrays == groups            # the same error, raised by the per-group path
            continue
        # (a part of fewer than ARRAY_GROUPS groups is built one group at a time)
        assert not fell, f"{algorithm} {phase} on {gpu}: the array build fell back"
        assert _close(arrays, groups), (algorithm, phase, gpu, arrays[:4], groups[:4])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_batch_of_one_part_is_built_on_arrays(monkeypatch, algorithm):
    rng = random.Random(algorithm)
    lengths = [rng.randint(200, 8000) for _ in range(30)]
    gpu = "b200" if algorithm == "fa4" else "h100-sxm5"
    for phase in ("fwd", "bwd"):
        w = perfsim.AttentionWorkload(heads=16, head_dim=128, seqlens_q=lengths, phase=phase)
        arrays, groups, built, fell = _both(monkeypatch, w, gpu, algorithm)
        assert built == 30 and not fell and _close(arrays, groups), (algorithm, phase)


def test_flash_attn_4_short_sequences_keep_their_one_q_tile(monkeypatch):
    """flash-attn 4 on sm100 launches one Q tile per CTA where a sequence's rows fit one
    128-row tile and two otherwise: the array build parts the groups by that key (as
    ``perfsim.sweep`` parts a block) — built as one part, the short groups took two."""
    rng = random.Random(5)
    sq = [rng.randint(1, 6000) if i % 3 else rng.randint(1, 128) for i in range(60)]
    for algorithm in ("fa4", "flash-attn-cute"):
        w = perfsim.AttentionWorkload(heads=16, head_dim=128, seqlens_q=sq, dtype="bf16")
        arrays, groups, built, fell = _both(monkeypatch, w, "b200", algorithm)
        assert built and not fell and _close(arrays, groups)


def test_few_groups_are_built_one_at_a_time():
    before = dict(base.GROUP_STATS)
    w = perfsim.AttentionWorkload(heads=8, head_dim=64,
                                  seqlens_q=list(range(100, 100 + THRESHOLD - 1)))
    perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    assert base.GROUP_STATS["arrays"] == before["arrays"]
    assert base.GROUP_STATS["one_by_one"] == before["one_by_one"] + THRESHOLD - 1


def test_sizes_past_int64_are_built_one_at_a_time(monkeypatch):
    """A reviewer's case: 8 sequences of about 2^24 tokens, H = 128, d = 256 — the products
    of int64 lengths wrapped (3.0e15 tensor FLOPs against 1.03e21); such batches count in
    Python integers, one group at a time."""
    lengths = [2 ** 24 + 977 * i for i in range(THRESHOLD)]
    w = perfsim.AttentionWorkload(heads=128, head_dim=256, seqlens_q=lengths, phase="fwd_bwd")
    arrays, groups, built, _ = _both(monkeypatch, w, "h100-sxm5", "fa2")
    assert not built and _close(arrays, groups) and arrays[10] > 1e21   # tensor FLOPs


def test_mixed_parts_build_the_small_ones_one_at_a_time(monkeypatch):
    """A serving batch: 12 sequences, half of them one-token decode steps (causal: their
    own part), the rest prefills — the part of 6 is built one group at a time."""
    lengths = [1] * 6 + [512 + 97 * i for i in range(6)]
    keys = [4096 + 11 * i for i in range(12)]
    w = perfsim.AttentionWorkload(heads=16, head_dim=128, seqlens_q=lengths, seqlens_k=keys,
                                  causal=True)
    arrays, groups, built, _ = _both(monkeypatch, w, "h100-sxm5", "fa2")
    assert not built and _close(arrays, groups)
