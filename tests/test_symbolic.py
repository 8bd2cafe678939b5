"""perfsim.symbolic: closed forms equal the numeric counts; crossovers are where they say."""

from __future__ import annotations

import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import perfsim
from perfsim import algorithms, symbolic
from perfsim.sweep import single_split
from perfsim.symbolic import L_2, B_c, B_r, H, M, N_q, d

pytestmark = pytest.mark.slow      # sympy closed forms: ~40 s (run with -m slow; CI runs them)

REL = 1e-9
#: Explicit tiles, so that the numeric path (which picks tiles from d) and the symbolic path
#: (which cannot) run the same configuration. Algorithms not listed run their defaults.
OPTIONS = {
    "fa1": {"q_splits": 1},
    # the closed forms leave out the per-tile bound checks of lengths that are not a multiple
    # of the tile (perfsim.symbolic's docstring): compared without them here, and with them
    # at tile multiples in test_bound_checks_vanish_at_tile_multiples
    "fa2": {"block_m": 128, "block_n": 64, "warps": 4, "bwd_block_m": 64, "bwd_block_n": 128,
            "bwd_warps": 8, "bound_checks": "none"},
    # the call's own head dim: flash-attn 3 runs d = 32 on its 64 kernel, whose dQ
    # accumulator predict counts at 64 (the closed forms keep d: perfsim.symbolic's docstring)
    "fa3": {"block_m": 128, "block_n": 128, "bwd_block_m": 64, "bwd_block_n": 128,
            "compiled_head_dims": "exact"},
    "fa4": {"emulate_fraction": 0.25},
}
GPU = {"fa4": "b200"}
_cache: dict = {}


def _closed_forms(name: str, causal: bool, phase: str):
    """One evaluator per configuration, with the L2 size a symbol (``L_2 = 1``: IO model)."""
    key = (name, causal, phase)
    if key not in _cache:
        _cache[key] = symbolic.evaluator(symbolic.counts(
            name, GPU.get(name, "h200-sxm"), causal=causal, phase=phase, keep_l2=True,
            options=OPTIONS.get(name, {})))
    return _cache[key]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(algorithms.names()), causal=st.booleans(),
       phase=st.just("fwd_bwd"), io_model=st.booleans(),
       batch=st.integers(1, 3), kv_heads=st.integers(1, 3), group=st.sampled_from([1, 2, 4]),
       seqlen_q=st.integers(1, 700), seqlen_k=st.integers(1, 700),
       head_dim=st.sampled_from([32, 64, 96, 128]))
def test_closed_forms_equal_numeric_counts(name, causal, phase, io_model, batch, kv_heads,
                                           group, seqlen_q, seqlen_k, head_dim):
    w = perfsim.AttentionWorkload(batch=batch, heads=kv_heads * group, kv_heads=kv_heads,
                                  seqlen_q=seqlen_q, seqlen_k=seqlen_k, head_dim=head_dim,
                                  causal=causal, phase=phase)
    gpu = perfsim.load_gpu(GPU.get(name, "h200-sxm"))
    algo = algorithms.REGISTRY[name](**OPTIONS.get(name, {}))
    try:
        p = perfsim.predict(w, gpu.replace(l2_bytes=1) if io_model else gpu, single_split(algo))
    except perfsim.InfeasibleError:
        assume(False)
    values = {"B": batch, "H": w.heads, "H_kv": kv_heads, "N_q": seqlen_q, "N_k": seqlen_k,
              "d": head_dim, "d_v": head_dim, "M": gpu.smem_bytes_per_block // 2,
              "L_2": 1 if io_model else gpu.l2_bytes}
    for count, value in _closed_forms(name, causal, phase)(**values).items():
        numeric = p.memory_bytes if count == "memory_bytes" else float(getattr(p.counts, count))
        assert abs(value - numeric) <= REL * abs(numeric) + 1e-6, (count, name)


@pytest.mark.slow
def test_bound_checks_vanish_at_tile_multiples():
    """With flash-attn 2's bound checks on (FA2's default), counts equal the closed forms at
    lengths that fill whole tiles, and exceed them by the checks elsewhere."""
    options = {k: v for k, v in OPTIONS["fa2"].items() if k != "bound_checks"}
    algo = single_split(algorithms.FA2(**options))
    forms = _closed_forms("fa2", False, "bwd")
    for n, equal in ((1024, True), (1000, False)):
        w = perfsim.AttentionWorkload(batch=2, heads=4, seqlen_q=n, head_dim=64, phase="bwd")
        p = perfsim.predict(w, "h200-sxm", algo)
        closed = forms(B=2, H=4, H_kv=4, N_q=n, N_k=n, d=64, d_v=64,
                       M=perfsim.load_gpu("h200-sxm").smem_bytes_per_block // 2,
                       L_2=perfsim.load_gpu("h200-sxm").l2_bytes)["flops"]
        assert (abs(closed - float(p.counts.flops)) <= 1e-9 * closed) == equal, n


def test_tile_symbols_appear_and_fa2_counts_match_at_any_tile():
    exprs = symbolic.counts("fa2", "h200-sxm", N_k=N_q, d_v=d, H_kv=H)
    assert {B_r, B_c} <= exprs["hbm_bytes"].free_symbols
    f = symbolic.evaluator(exprs["smem_bytes"])
    w = perfsim.AttentionWorkload(batch=2, heads=4, seqlen_q=1000, head_dim=64)
    for b_r, b_c in ((64, 64), (128, 32), (128, 128)):
        p = perfsim.predict(w, "h200-sxm", algorithms.FA2(block_m=b_r, block_n=b_c, warps=4,
                                                            num_splits=1, pack_gqa=False))
        assert f(B=2, H=4, N_q=1000, d=64, B_r=b_r, B_c=b_c) == p.counts.smem_bytes


def test_l2_rule_is_piecewise_and_io_model_drops_it():
    kept = symbolic.counts("fa2", "h200-sxm", keep_l2=True)["hbm_bytes"]
    on_gpu = symbolic.counts("fa2", "h200-sxm")["hbm_bytes"]
    io = symbolic.counts("fa2", "h200-sxm", io_model=True)["hbm_bytes"]
    assert L_2 in kept.free_symbols and kept.has(sympy.Piecewise)
    assert L_2 not in on_gpu.free_symbols | io.free_symbols
    at = {"B": 2, "H": 8, "H_kv": 8, "N_q": 4096, "N_k": 4096, "d": 128, "d_v": 128,
          "B_r": 128, "B_c": 64}
    kept_at = symbolic.evaluator(kept)
    assert symbolic.evaluator(on_gpu)(**at) == kept_at(**at, L_2=60 * 2**20) < kept_at(**at, L_2=1)
    assert symbolic.evaluator(io)(**at) == kept_at(**at, L_2=1)


def test_fa1_theorem_2_shapes():
    """Standard: Θ(N d + N²) HBM accesses; FlashAttention: Θ(N² d² / M) (FA1 Theorem 2)."""
    std = symbolic.counts("standard", "a100-sxm4-80gb", N_k=N_q, d_v=d, H_kv=H)["hbm_bytes"]
    assert sympy.degree(sympy.expand(std), N_q) == 2 and sympy.degree(sympy.expand(std), d) == 1
    fa1 = symbolic.smooth(symbolic.counts("fa1", "a100-sxm4-80gb", io_model=True, N_k=N_q,
                                          d_v=d, H_kv=H)["hbm_bytes"])
    at = {symbolic.B: 1, H: 1}

    def traffic(n, dim, m):
        return float(fa1.subs(at).subs({N_q: n, d: dim, M: m}))

    assert abs(traffic(2**16, 64, 2**15) / traffic(2**15, 64, 2**15) - 4) < 0.01   # ∝ N²
    assert abs(traffic(2**16, 128, 2**15) / traffic(2**16, 64, 2**15) - 4) < 0.2   # ∝ d²
    ratio = traffic(2**16, 64, 2**15) / traffic(2**16, 64, 2**16)
    assert abs(ratio - 2) < 0.01                                                     # ∝ 1/M


def test_compute_bound_seqlen_is_where_tensor_time_reaches_hbm_time():
    kw = {"batch": 4, "heads": 16, "head_dim": 128}
    n = symbolic.compute_bound_seqlen("fa2", "h200-sxm", **kw)
    assert n is not None and n > 1
    gpu, fa2 = perfsim.load_gpu("h200-sxm"), algorithms.FA2()

    def times(seqlen):
        dims = algorithms.Dims(4, 16, 16, seqlen, seqlen, 128, 128, False, "bf16", "fwd")
        return symbolic._unit_totals(fa2.kernels(dims, gpu), gpu, perfsim.TimingParams())

    assert times(n)["tensor"] >= times(n)["hbm"] and times(n - 1)["tensor"] < times(n - 1)["hbm"]
    assert symbolic.compute_bound_seqlen("standard", "h200-sxm", **kw) is None


def test_sram_crossover_is_about_2_d_squared():
    """FA1 / standard traffic ≈ 2 d² / M (Theorem 2's constants, forward), so they cross
    near M = 2 d² = 8192 elements at d = 64."""
    m = symbolic.sram_crossover("a100-sxm4-80gb", batch=64, heads=16, seqlen=1024, head_dim=64)
    assert 0.9 * 2 * 64**2 < m < 1.2 * 2 * 64**2
    kw = {"B": 64, "H": 16, "H_kv": 16, "N_q": 1024, "N_k": 1024, "d": 64, "d_v": 64,
          "io_model": True}
    fa1 = symbolic.evaluator(symbolic.counts("fa1", "a100-sxm4-80gb", **kw)["hbm_bytes"])
    std = float(symbolic.counts("standard", "a100-sxm4-80gb", **kw)["hbm_bytes"])
    assert fa1(M=m) <= std < fa1(M=m - 1)


def test_mufu_crossover_for_fa4():
    if "fa4" not in algorithms.names():
        pytest.skip("fa4 is not registered")
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=8192, head_dim=64)
    gpu = perfsim.load_gpu("b200")
    rate = symbolic.mufu_crossover(w, gpu, "fa4")
    assert rate > gpu.mufu_ops_per_clk_per_sm       # d = 64: exps are FA4's bottleneck on B200

    def exp_minus_others(r):
        k = perfsim.predict(w, gpu.replace(mufu_ops_per_clk_per_sm=r), "fa4").kernels[0]
        return k.unit_seconds["mufu"] - max(t for u, t in k.unit_seconds.items()
                                            if u not in ("mufu", "fp32"))

    assert exp_minus_others(rate * 0.999) > 0 > exp_minus_others(rate * 1.001)
    assert symbolic.mufu_crossover(w.replace(head_dim=128), gpu, "fa4") < \
        gpu.mufu_ops_per_clk_per_sm                 # d = 128: already past it at 16/clk


def test_unknown_size_and_unsolvable_branch_are_clear_errors():
    with pytest.raises(perfsim.PerfsimError, match="unknown size"):
        symbolic.counts("fa2", "h200-sxm", N=3)
    if "fa4" in algorithms.names():
        with pytest.raises(perfsim.PerfsimError, match="give that size a number"):
            symbolic.counts("fa4", "b200", options={})


def test_windowed_closed_forms_equal_numeric_counts():
    """A causal sliding window: the closed forms (sums over query tiles) equal predict's
    counts at odd sizes; the convention's pairs are linear in N·w (``window_pairs``)."""
    import sympy

    w_sym = sympy.Symbol("w", integer=True, nonnegative=True)
    forms = symbolic.counts("fa3", "h100-sxm5", causal=True, window=(w_sym, 0), keep_l2=True,
                            options={"num_splits": 1, "pack_gqa": False})
    ev = symbolic.evaluator(forms)
    gpu = perfsim.load_gpu("h100-sxm5")
    for n, window, heads in ((1000, 255, 4), (777, 31, 2), (4096, 1023, 1)):
        wl = perfsim.AttentionWorkload(batch=1, heads=heads, seqlen_q=n, head_dim=128,
                                       causal=True, window=(window, 0))
        p = perfsim.predict(wl, gpu, algorithms.FA3(num_splits=1, pack_gqa=False))
        values = ev(B=1, H=heads, H_kv=heads, N_q=n, N_k=n, d=128, d_v=128, w=window,
                    L_2=gpu.l2_bytes)
        for count in ("tensor_flops", "exp_ops", "hbm_bytes"):
            numeric = float(getattr(p.counts, count))
            assert abs(values[count] - numeric) <= 1e-9 * numeric + 1e-6, (count, n, window)
        pairs = symbolic.window_pairs().subs({symbolic.N_q: n, w_sym: window})
        assert p.model_flops == 2 * heads * int(pairs) * 256


def test_decode_kv_bytes_is_the_floor_of_a_packed_decode():
    w = perfsim.AttentionWorkload(batch=4, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=8192,
                                  head_dim=128)
    p = perfsim.predict(w, "h100-sxm5", algorithms.FA3(num_splits=1, pack_gqa=True))
    floor = symbolic.decode_kv_bytes().subs({symbolic.B: 4, symbolic.H_kv: 8,
                                             symbolic.N_k: 8192, symbolic.d: 128,
                                             symbolic.d_v: 128})
    assert p.counts.hbm_read_bytes >= floor
    assert p.counts.hbm_read_bytes <= floor * 1.01          # + Q, a few KB


@pytest.mark.parametrize("name", ["fa2", "sdpa-flash"])
def test_fa2_closed_forms_keep_d_and_d_v_apart(name):
    """Symbolic dims run as themselves (no compiled head dim): a closed form with d and d_v
    both left free builds (it once compared them)."""
    counts = symbolic.counts(name, "h200-sxm", phase="fwd")
    assert {s.name for s in counts["tensor_flops"].free_symbols} >= {"d", "d_v"}


def test_a_configured_algorithm_keeps_its_tiles_and_missing_sizes_are_named():
    """``counts(FA2(block_m=128, block_n=64))`` keeps the tiles the caller set (no ``B_r``,
    ``B_c`` left) and equals ``predict`` with that config; the evaluator names the sizes it
    was not given."""
    from perfsim.algorithms import FA2

    algo = FA2(block_m=128, block_n=64, num_splits=1, pack_gqa=False)
    c = symbolic.counts(algo, "h200-sxm", d=64, d_v=64)
    free = set().union(*(sympy.sympify(v).free_symbols for v in c.values()))
    assert {str(s) for s in free} == {"B", "H", "H_kv", "N_q", "N_k"}
    f = symbolic.evaluator(c)
    with pytest.raises(perfsim.PerfsimError, match="give H, H_kv, N_k, N_q"):
        f(B=2)
    got = f(B=2, H=8, H_kv=8, N_q=1024, N_k=1024)
    p = perfsim.predict(perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=1024,
                                                  head_dim=64), gpu="h200-sxm", algorithm=algo)
    assert got["tensor_flops"] == p.counts.tensor_flops
    assert got["smem_bytes"] == p.counts.smem_bytes


@pytest.mark.parametrize("algorithm, window", [("fa3", (None, None)),
                                               ("sdpa-flash", (None, None)),
                                               ("fa3", (256, 0)), ("flex", (100, 100))])
def test_a_causal_backward_with_its_lengths_given_equals_predicts_counts(algorithm, window):
    """Given numeric lengths, a causal (or windowed) backward's tile sums are integers:
    they are summed exactly (sympy's Sum of a floor raised 'cannot determine truth value of
    Relational ... Derivative(floor ...)' from its Euler-Maclaurin estimate)."""
    causal = window[1] != 100
    got = symbolic.counts(algorithm, "h100-sxm5", causal=causal, phase="bwd", N_q=4096,
                          N_k=4096, d=128, d_v=128, window=window)
    p = perfsim.predict(perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=4096,
                                                  head_dim=128, causal=causal, window=window,
                                                  phase="bwd"),
                        gpu="h100-sxm5", algorithm=algorithm)
    sizes = {"B": 2, "H": 16, "H_kv": 16}
    for name in ("flops", "hbm_bytes", "exp_ops", "smem_bytes"):
        expr = sympy.sympify(got[name])
        value = float(expr.subs({s: sizes[s.name] for s in expr.free_symbols}))
        assert value == pytest.approx(float(getattr(p.counts, name)), rel=1e-12), name
