"""Correctness of the validation kernels (perfsim.validate.kernels) on CPU, for CI.

The Triton kernels run under Triton's interpreter: ``TRITON_INTERPRET=1`` must be in the
environment *before* triton (and so any kernel module) is imported, because ``@triton.jit``
decides at decoration time whether it builds an interpreted function; this module sets it first
thing. Every kernel is compared with the float64 ``reference_attention`` on small, awkward shapes:
N not a multiple of the tile, N_q != N_k in both directions (so the bottom-right causal offset is
positive and negative, and some rows see no key), GQA and MQA, d = 16 and 32. Each case draws
fresh random inputs from its own seed, and outputs are allocated NaN-poisoned
(``_common.POISON_OUTPUTS``) so a tile the kernel forgets to write fails the test.

Tolerances are relative Frobenius errors. fp16 (unit roundoff u = 2**-11 = 4.9e-4): the kernels
round O, and P and dS before the tensor-core dots, to fp16, so errors are a few u (about 3e-4
measured); 1e-2 leaves a 20x margin for summation order, while an indexing or masking bug (one
wrong row or key) gives errors near 1e-1. bf16 (u = 2**-8 = 3.9e-3): 4e-3 to 8e-3 measured for
eager attention with gradients; 2e-2 is about 5u. fp32 (eager only): 1e-5.

Triton 3.6's interpreter cannot run ``tl.dot`` on bf16 (its ``create_dot`` multiplies the raw
uint16 storage), so the Triton kernels are checked in fp16 here and in bf16 on the GPU only;
the eager ``standard`` path is checked in fp32, fp16 and bf16.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"

import zlib

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from perfsim.validate.kernels import _common, configs, load
from perfsim.validate.kernels._exp2 import exp2_mixed, exp2_poly3
from perfsim.validate.kernels._online_softmax import kv_block_range, q_block_range
from perfsim.validate.kernels.reference import reference_attention, relative_error

pytestmark = [
    pytest.mark.interpreter,
    # Triton 3.6's interpreter turns loop bounds into ints via a deprecated numpy conversion.
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning"),
]


TOL = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5}
LSE_ABS_TOL = 1e-3  # natural-log units; fp32 statistics, plus fa4's 8.8e-5 polynomial error

# (B, H, H_kv, N_q, N_k, d, causal)
CASES = [
    (1, 4, 2, 67, 100, 16, True),   # GQA, causal offset +33
    (1, 4, 2, 100, 67, 32, True),   # causal offset -33: rows 0..32 see no key
    (2, 2, 2, 67, 67, 16, False),   # MHA, square, ragged last tile
    (1, 4, 1, 100, 67, 32, False),  # MQA, N_q > N_k
]
TILES = {"block_m": 16, "block_n": 32}
FA4_KNOBS = [
    {},                                                    # tau = 8, 1/8 emulated (defaults)
    {"rescale_threshold": 0.0, "emulate_fraction": 0.5},   # always rescale, half emulated
    {"rescale_threshold": 8.0, "emulate_fraction": 0.0},   # no emulation
    {"rescale_threshold": 2.0, "emulate_fraction": 1.0},   # every exp2 in software
]


@pytest.fixture(autouse=True, scope="module")
def kernels_are_interpreted():
    assert isinstance(load("fa2")._fa2_fwd, triton.runtime.interpreter.InterpretedFunction), (
        "perfsim.validate.kernels was imported before TRITON_INTERPRET=1 was set; run this "
        "module in a fresh process or export TRITON_INTERPRET=1")


@pytest.fixture(autouse=True)
def poison_outputs(monkeypatch):
    monkeypatch.setattr(_common, "POISON_OUTPUTS", True)


def _inputs(request, case, dtype=torch.float16, requires_grad=False):
    """Fresh q, k, v ~ N(0, 1) from a seed unique to this test case (never zeros)."""
    b, h, h_kv, n_q, n_k, d, _ = case
    gen = torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))
    shapes = [(b, h, n_q, d), (b, h_kv, n_k, d), (b, h_kv, n_k, d)]
    tensors = [torch.randn(s, generator=gen).to(dtype) for s in shapes]
    assert all(t.abs().sum() > 0 for t in tensors)
    return [t.requires_grad_(requires_grad) for t in tensors], gen


def _check_forward(o, lse, q, k, v, causal, **kw):
    ref_o, ref_lse = reference_attention(q, k, v, causal=causal, **kw)
    assert o.shape == q.shape and o.dtype == q.dtype
    assert not torch.isnan(o).any(), "output not fully written (NaN poison left)"
    assert relative_error(o, ref_o) < TOL[q.dtype]
    empty = torch.isinf(ref_lse)
    assert (o[empty] == 0).all(), "rows that see no key must be 0"
    if lse is not None:
        assert not torch.isnan(lse).any(), "lse not fully written (NaN poison left)"
        assert torch.equal(torch.isinf(lse), empty)
        assert (lse[~empty].double() - ref_lse[~empty]).abs().max() < LSE_ABS_TOL
    return ref_o


def _fwd_config(algorithm, case):
    if algorithm == "fa1":
        return {"sram_elements": 128 * case[5]}  # Algorithm 1: B_c = ceil(M / 4d) = 32
    return dict(TILES)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("algorithm", ["fa1", "fa2", "fa3", "fa4"])
def test_forward_matches_reference(request, algorithm, case):
    (q, k, v), _ = _inputs(request, case)
    o, lse = load(algorithm).forward(q, k, v, causal=case[6], **_fwd_config(algorithm, case))
    _check_forward(o, lse, q, k, v, case[6])


@pytest.mark.parametrize("knobs", FA4_KNOBS, ids=str)
@pytest.mark.parametrize("case", CASES[:2], ids=str)
def test_fa4_knobs_keep_the_result(request, case, knobs):
    (q, k, v), _ = _inputs(request, case)
    o, lse = load("fa4").forward(q, k, v, causal=case[6], **TILES, **knobs)
    _check_forward(o, lse, q, k, v, case[6])


def test_forward_tall_tiles_and_custom_scale(request):
    case = (1, 2, 2, 100, 67, 32, True)
    (q, k, v), _ = _inputs(request, case)
    for algorithm in ("fa2", "fa3", "fa4"):
        o, lse = load(algorithm).forward(q, k, v, causal=True, sm_scale=0.3, block_m=32,
                                         block_n=16)
        _check_forward(o, lse, q, k, v, True, sm_scale=0.3)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_fa2_backward_matches_reference(request, case):
    (q, k, v), gen = _inputs(request, case, requires_grad=True)
    causal = case[6]
    o = load("fa2").attention(q, k, v, causal, **TILES, bwd_block_m=16, bwd_block_n=32)
    do = torch.randn(o.shape, generator=gen).to(o.dtype)
    grads = torch.autograd.grad(o, (q, k, v), do)
    ref_o, _ = reference_attention(q, k, v, causal=causal)
    ref_grads = torch.autograd.grad(ref_o, (q, k, v), do.double())
    for name, g, ref in zip("qkv", grads, ref_grads, strict=True):
        assert g.shape == ref.shape and not torch.isnan(g).any(), f"d{name} not fully written"
        assert relative_error(g, ref) < TOL[torch.float16], f"d{name}"


@pytest.mark.parametrize("softmax", ["fused", "5kernel"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_standard_matches_reference(request, case, dtype, softmax):
    (q, k, v), gen = _inputs(request, case, dtype=dtype, requires_grad=True)
    o, stats = load("standard").forward(q, k, v, causal=case[6], softmax=softmax)
    assert stats is None
    ref_o = _check_forward(o, None, q, k, v, case[6])
    do = torch.randn(o.shape, generator=gen).to(dtype)
    grads = torch.autograd.grad(o, (q, k, v), do)
    ref_grads = torch.autograd.grad(ref_o, (q, k, v), do.double())
    for g, ref in zip(grads, ref_grads, strict=True):
        assert relative_error(g, ref) < TOL[dtype]


def test_standard_dropout_is_seeded_and_unbiased(request):
    (q, k, v), _ = _inputs(request, (1, 2, 2, 67, 100, 16, False), dtype=torch.float32)
    standard = load("standard")
    torch.manual_seed(1)
    a, _ = standard.forward(q, k, v, causal=False, dropout_p=0.5)
    torch.manual_seed(1)
    b, _ = standard.forward(q, k, v, causal=False, dropout_p=0.5)
    plain, _ = standard.forward(q, k, v, causal=False)
    assert torch.equal(a, b) and not torch.allclose(a, plain)
    mean = torch.stack([standard.forward(q, k, v, causal=False, dropout_p=0.5)[0]
                        for _ in range(200)]).mean(0)
    assert relative_error(mean, plain) < 0.2  # E[dropout(P)] = P; 200 draws, std ~ 1/sqrt(200)


@triton.jit
def _exp2_probe(X, Y_POLY, Y_MIXED, ROWS: tl.constexpr, COLS: tl.constexpr,
                LOG2_PERIOD: tl.constexpr):
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    x = tl.load(X + offs)
    tl.store(Y_POLY + offs, exp2_poly3(x))
    tl.store(Y_MIXED + offs, exp2_mixed(x, True, LOG2_PERIOD))


@pytest.mark.parametrize("log2_period", [0, 1, 3])
def test_exp2_emulation_accuracy_and_column_split(log2_period):
    x = torch.linspace(-30.0, 8.0, 16 * 64).reshape(16, 64)
    x[0, :4] = torch.tensor([float("-inf"), -127.0, -200.0, 0.0])
    y_poly, y_mixed = torch.empty_like(x), torch.empty_like(x)
    _exp2_probe[(1,)](x, y_poly, y_mixed, 16, 64, log2_period)
    exact = torch.exp2(x.double())
    finite = exact > 2.0 ** -126
    rel = ((y_poly.double() - exact).abs() / exact)[finite]
    assert rel.max() < 1.5e-4  # FA4 Table 2: 8.8e-5 on [0, 1), plus fp32 rounding
    assert (y_poly[0, :3] == 0).all() and y_poly[0, 3] == 1.0
    emulated = (torch.arange(64) >= 64 - 64 // 2 ** log2_period).expand(16, 64)
    assert torch.equal(y_mixed[emulated], y_poly[emulated])
    mufu = torch.from_numpy(np.exp2(x.numpy()))  # the interpreter's tl.exp2 is np.exp2
    assert torch.equal(y_mixed[~emulated], mufu[~emulated])


@triton.jit
def _range_probe(OUT, seqlen_q, seqlen_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr):
    pid = tl.program_id(0)
    full_hi, hi = kv_block_range(pid * BLOCK_M, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
    lo, full_lo, q_hi = q_block_range(pid * BLOCK_N, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N,
                                      CAUSAL)
    tl.store(OUT + pid * 5 + 0, full_hi)
    tl.store(OUT + pid * 5 + 1, hi)
    tl.store(OUT + pid * 5 + 2, lo)
    tl.store(OUT + pid * 5 + 3, full_lo)
    tl.store(OUT + pid * 5 + 4, q_hi)


SIZES = [(67, 100), (100, 67), (67, 67), (5, 100), (100, 5), (1, 1)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_m,block_n", [(16, 32), (32, 16)])
@pytest.mark.parametrize("seqlen_q,seqlen_k", SIZES)
def test_tile_ranges_match_brute_force_and_device(seqlen_q, seqlen_k, block_m, block_n, causal):
    n_prog = max(_common.cdiv(seqlen_q, block_m), _common.cdiv(seqlen_k, block_n))
    device = torch.empty(n_prog * 5, dtype=torch.int32)
    _range_probe[(n_prog,)](device, seqlen_q, seqlen_k, block_m, block_n, causal)
    args = (block_m, block_n, seqlen_q, seqlen_k, causal)
    for pid in range(n_prog):
        host = (*_common.kv_block_range(pid * block_m, *args),
                *_common.q_block_range(pid * block_n, *args))
        assert tuple(device[pid * 5:pid * 5 + 5].tolist()) == host
    for start_m in range(0, seqlen_q, block_m):
        full_hi, hi = _common.kv_block_range(start_m, *args)
        rows = range(start_m, min(start_m + block_m, seqlen_q))
        seen = [j for j in range(seqlen_k) if any(_common.visible(i, j, seqlen_q, seqlen_k,
                                                                  causal) for i in rows)]
        assert not seen or max(seen) < hi
        assert all(_common.visible(i, j, seqlen_q, seqlen_k, causal) for i in rows
                   for j in range(full_hi))
        assert hi - full_hi <= (block_m if causal else 0) + 2 * block_n
    for start_n in range(0, seqlen_k, block_n):
        lo, full_lo, hi = _common.q_block_range(start_n, *args)
        keys = range(start_n, min(start_n + block_n, seqlen_k))
        seers = [i for i in range(seqlen_q) if any(_common.visible(i, j, seqlen_q, seqlen_k,
                                                                   causal) for j in keys)]
        assert all(lo <= i < hi for i in seers)
        assert all(_common.visible(i, j, seqlen_q, seqlen_k, causal)
                   for i in range(full_lo, min(hi, seqlen_q)) for j in keys)


def test_launch_configs_report_what_runs():
    dims = (2, 16, 4, 1000, 1000, 64)
    required = {"algorithm", "phase", "block_m", "block_n", "num_warps", "num_stages", "grid",
                "kernels", "causal", "causal_offset", "dtype"}
    for algorithm in ("standard", "fa1", "fa2", "fa3", "fa4"):
        cfg = getattr(configs, algorithm)(*dims, causal=True)
        assert required <= cfg.keys() and cfg["kernels"], algorithm
    fa1 = configs.fa1(*dims)  # M = 51200: B_c = ceil(51200 / 256) = 200 -> 128, B_r = 64
    assert (fa1["block_c_paper"], fa1["block_r_paper"]) == (200, 64)
    assert (fa1["block_n"], fa1["block_m"], fa1["grid"]) == (128, 64, (32,))
    fa2 = configs.fa2(*dims)
    assert (fa2["block_m"], fa2["block_n"], fa2["num_warps"], fa2["grid"]) == (128, 128, 4,
                                                                              (8, 32))
    bwd = configs.fa2(*dims, phase="bwd")
    assert [kn["name"] for kn in bwd["kernels"]] == ["zero_dq_accum", "fa2_bwd_preprocess",
                                                      "fa2_bwd_dkdv_dq", "cast_dq"]
    assert bwd["grid"] == (8, 8)
    fa4 = configs.fa4(*dims, emulate_fraction=0.25, rescale_threshold=0.0)
    assert (fa4["emulated_columns_per_tile"], fa4["rescale_threshold"]) == (32, 0.0)
    assert fa4["emulated_column_rule"] == "96 <= j < 128"
    eager = configs.standard(*dims, causal=True, softmax="5kernel")
    assert [kn["name"] for kn in eager["kernels"]][-6:] == ["max", "sub", "exp", "sum", "div",
                                                            "matmul_pv"]
    with pytest.raises(TypeError):
        configs.fa2(*dims, block_size=64)
    with pytest.raises(ValueError):
        configs.fa4(*dims, emulate_fraction=0.3)
    with pytest.raises(ValueError):
        configs.fa3(*dims, block_m=48)


@pytest.mark.parametrize("variant", ["shipped", "reciprocal"])
def test_fa1_probe_variants_match_the_reference(variant):
    """The FA1 variants timed by ``validate/probes.py`` compute attention (non-causal, fp16,
    whole tiles), so their timings describe FlashAttention, not a broken kernel."""
    from perfsim.validate.probes import FA1_VARIANTS, _fa1_variant

    stages, warps, recip, hbm, math_on = FA1_VARIANTS[variant]
    g = torch.Generator().manual_seed(zlib.crc32(variant.encode()))
    b, h, n, d, bm, bn = 1, 2, 64, 16, 16, 32
    q, k, v = (torch.randn(b, h, n, d, generator=g).to(torch.float16) for _ in range(3))
    o_ws, l_ws = torch.zeros(b, h, n, d), torch.zeros(b, h, n)
    m_ws, sink = torch.full((b, h, n), -1e30), torch.empty(b * h, bm, d)
    _fa1_variant[(b * h,)](q, k, v, o_ws, l_ws, m_ws, sink, d**-0.5 * _common.LOG2_E, n,
                           HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, RECIP=recip, HBM=hbm,
                           MATH=math_on, num_stages=stages, num_warps=warps)
    ref, _ = reference_attention(q, k, v, causal=False)
    assert relative_error(o_ws, ref) < TOL[torch.float16]
