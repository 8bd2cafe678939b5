"""validate/external_decode.py on the CPU: the grid (sizes, unique keys, memory cap, time budget)
and the float64 reference masks (causal bottom-right, sliding window, varlen) on tiny tensors."""

from __future__ import annotations

import math
import re

import pytest

from perfsim.validate import external_decode as ed

torch = pytest.importorskip("torch")


def test_plan_sizes_and_kinds():
    rows = ed.plan()
    counts = {k: sum(c.kind == k for c in rows) for k in ed.KINDS}
    assert counts == {"decode": 259, "window": 16, "varlen": 6, "paged": 20}
    assert {c.shape.phase for c in rows} == {"fwd"}
    assert {c.impl for c in rows} <= set(ed.IMPLS)
    # FlexAttention last, decode first
    flex = [i for i, c in enumerate(rows) if c.impl == "flex"]
    assert flex and flex == list(range(len(rows) - len(flex), len(rows)))
    assert rows[0].kind == "decode"
    assert ed.plan(["paged"]) == [c for c in rows if c.kind == "paged"]
    with pytest.raises(ValueError):
        ed.plan(["prefill"])


def test_keys_unique():
    rows = ed.plan()
    keys = [ed.row_key(c) for c in rows]
    assert len(keys) == len(set(keys))
    assert len(set(rows)) == len(rows)


def test_decode_grid_covers_and_caps_memory():
    rows = ed.decode_cases()
    shapes = {c.shape for c in rows}
    assert {s.seqlen_q for s in shapes} == set(ed.DECODE_NQ)
    assert {s.seqlen_k for s in shapes} == set(ed.DECODE_NK)
    assert {s.batch for s in shapes} == set(ed.DECODE_B)
    assert {s.kv_heads for s in shapes} == set(ed.DECODE_KV_HEADS)
    assert all(s.heads == 32 and s.head_dim == 128 and s.dtype == "bf16" for s in shapes)
    assert all(not s.causal or s.seqlen_q == 16 for s in shapes)
    assert all(ed.kv_bytes(c) <= ed.MEM_CAP_BYTES for c in rows)
    # the one shape over the cap (B=64, H_kv=32, N_k=128k: 137 GB of K+V) is left out
    big = ed.Case("decode", ed._shape(64, 32, 32, 1, 131072, False), "cute")
    assert ed.kv_bytes(big) > ed.MEM_CAP_BYTES and big.shape not in shapes
    assert ed.kv_bytes(ed.Case("decode", ed._shape(64, 32, 8, 1, 131072, False), "cute")) \
        == 2 * 64 * 131072 * 8 * 128 * 2
    # B = 1: every N_k x N_q; every shape has the three SDPA backends and default cute
    b1 = {(s.seqlen_q, s.seqlen_k, s.kv_heads) for s in shapes if s.batch == 1}
    assert len(b1) == 4 * 3 * 2
    for s in shapes:
        labels = {c.label for c in rows if c.shape == s}
        assert {"cute", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"} <= labels
        if s.kv_heads != s.heads:
            assert "cute[pack_gqa=False]" in labels
    splits = [c for c in rows if c.num_splits != 1]
    assert len(splits) == len(ed.SPLIT_SHAPES) * len(ed.SPLIT_VALUES)


def test_other_kinds():
    win = ed.window_cases()
    assert {c.shape.seqlen_q for c in win} == {4096, 16384, 65536}
    assert all(c.shape.causal and c.shape.seqlen_q == c.shape.seqlen_k for c in win)
    assert {(c.window_left, c.window_right) for c in win if c.impl == "cute"} == \
        {(None, None), (1023, 0), (255, 0)}
    var = ed.varlen_cases()
    assert all(c.seqlens_q and c.shape.batch == len(c.seqlens_q) for c in var)
    assert {c.shape.causal for c in var} == {False, True}
    assert all(c.fields()["seqlens_k"] == list(c.seqlens_k) for c in var)
    paged = ed.paged_cases()
    assert {c.shape.seqlen_k for c in paged} == {32, 64, 128, 256, 1024, 4096}
    assert {c.page_size for c in paged} == {None, 16, 128, 256}
    assert all(c.shape.batch == 64 and c.shape.heads == 64 and c.shape.kv_heads == 8
               and c.shape.seqlen_q == 1 for c in paged)
    # paged pool: whole pages per sequence
    c = ed.Case("paged", ed._shape(64, 64, 8, 1, 32, False), "cute", page_size=256)
    assert ed.kv_bytes(c) == 2 * 64 * 256 * 8 * 128 * 2


def test_fields_schema():
    c = ed.varlen_cases()[0]
    f = c.fields()
    for name in ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim", "causal",
                 "dtype", "phase", "kind", "window_left", "window_right", "num_splits",
                 "pack_gqa", "page_size", "seqlens_q", "seqlens_k"):
        assert name in f
    assert f["phase"] == "fwd" and f["kind"] == "varlen"
    d = ed.decode_cases()[0].fields()
    assert d["seqlens_q"] is None and d["window_left"] is None and d["num_splits"] == 1


def test_budget_estimate():
    rows = ed.plan()
    total = ed.estimate_plan_s(rows)
    assert 120 < total < 345, total  # about 5 minutes (the brief: <= 6 with start-up)
    for c in rows:
        assert 0 < ed.estimate_row_s(c) < 5
    # every timed row keeps >= 25 calls and >= 0.25 s (external.time_op's minimum)
    from perfsim.validate import external

    assert external.MIN_CALLS >= 25 and external.MIN_TIMED_S >= 0.25


# --------------------------------------------------------------------------------------------
# the hold-out grid (--grid holdout)


def test_holdout_plan_sizes_and_kinds():
    rows = ed.plan(grid="holdout")
    counts = {k: sum(c.kind == k for c in rows) for k in ed.KINDS}
    assert counts == {"decode": 147, "window": 11, "varlen": 8, "paged": 12}
    assert {c.shape.phase for c in rows} == {"fwd"}
    assert {c.impl for c in rows} <= set(ed.IMPLS)
    flex = [i for i, c in enumerate(rows) if c.impl == "flex"]
    assert flex and flex == list(range(len(rows) - len(flex), len(rows)))
    assert rows[0].kind == "decode"
    assert ed.plan(["paged"], "holdout") == [c for c in rows if c.kind == "paged"]
    assert ed.plan() == ed.plan(grid="main")
    with pytest.raises(ValueError):
        ed.plan(grid="other")


def test_holdout_keys_unique_and_disjoint_from_main():
    main, hold = ed.plan(), ed.plan(grid="holdout")
    keys = [c.key for c in hold]
    assert len(keys) == len(set(keys)) and len(set(hold)) == len(hold)
    assert not set(keys) & {c.key for c in main}
    # no shape of the hold-out grid is a shape of the main grid, whatever the kind
    assert not {c.shape for c in hold} & {c.shape for c in main}
    assert not {c.shape.key for c in hold} & {c.shape.key for c in main}


def test_gqa_holdout_shapes_are_new_and_pack_partial_groups():
    """--grid gqa-holdout: shapes in no other grid; each packs a group that does not divide a
    64-row query tile (or has one query row), causal and not, through three kernels."""
    gqa = ed.plan(grid="gqa-holdout")
    assert len(gqa) == 42 and {c.impl for c in gqa} == {"cute", "sdpa_flash", "sdpa_cudnn"}
    others = [c for g in ed.GRIDS if g != "gqa-holdout" for c in ed.plan(grid=g)]
    assert not {c.shape.key for c in gqa} & {c.shape.key for c in others}
    for c in gqa:
        rows = c.shape.seqlen_q * c.shape.heads // c.shape.kv_heads
        assert c.shape.seqlen_q == 1 or 64 % rows and rows % 64


def test_main_keys_match_stored_results():
    """--grid main keeps its keys: the stored H200 rows resume (every planned key stored)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "validate/reports/h200-decode/results.jsonl"
    if not path.exists():
        pytest.skip("no stored main-grid results")
    stored = {json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip()}
    assert {c.key for c in ed.plan()} <= stored


def test_holdout_decode_grid():
    rows = ed.holdout_decode_cases()
    shapes = {c.shape for c in rows}
    assert {s.seqlen_q for s in shapes} == set(ed.HOLDOUT_DECODE_NQ)
    assert {s.seqlen_k for s in shapes} == set(ed.HOLDOUT_DECODE_NK)
    assert {s.batch for s in shapes} == set(ed.HOLDOUT_DECODE_B)
    assert {(s.heads, s.kv_heads) for s in shapes} == set(ed.HOLDOUT_DECODE_HEADS)
    assert {s.head_dim for s in shapes} == {64, 128}
    assert sum(s.head_dim == 64 for s in shapes) == len(ed.HOLDOUT_DECODE_D64)
    assert all(s.dtype == "bf16" for s in shapes)
    causal = [s for s in shapes if s.causal]
    assert causal and all(s.seqlen_q == 8 and s.head_dim == 128 for s in causal)
    assert len(causal) == len(ed.HOLDOUT_DECODE_CAUSAL)
    # non-causal d = 128: 6 of 9 (N_q, N_k) per batch and head pair, each combination at >= 1 B
    dense = [s for s in shapes if not s.causal and s.head_dim == 128]
    assert len(dense) == 6 * len(ed.HOLDOUT_DECODE_B) * len(ed.HOLDOUT_DECODE_HEADS)
    assert {(s.seqlen_q, s.seqlen_k, s.heads, s.kv_heads) for s in dense} == {
        (nq, nk, h, hkv) for nq in ed.HOLDOUT_DECODE_NQ for nk in ed.HOLDOUT_DECODE_NK
        for h, hkv in ed.HOLDOUT_DECODE_HEADS}
    for s in shapes:
        labels = {c.label for c in rows if c.shape == s}
        want = {"cute", "sdpa_flash", "sdpa_cudnn"}
        assert labels == (want | {"sdpa_efficient"} if s.heads == s.kv_heads else want)
    assert all(c.num_splits == 1 and c.pack_gqa is None for c in rows)


def test_holdout_memory_cap():
    rows = ed.plan(grid="holdout")
    assert all(ed.kv_bytes(c) <= ed.MEM_CAP_BYTES for c in rows)
    # the largest: B = 16, H_kv = 32, N_k = 64k, d = 128 (17 GB of K + V)
    assert max(ed.kv_bytes(c) for c in rows) == 2 * 16 * 65536 * 32 * 128 * 2


def test_holdout_other_kinds():
    win = ed.holdout_window_cases()
    assert {c.shape.seqlen_q for c in win} == {8192, 32768}
    assert all(c.shape.causal and c.shape.seqlen_q == c.shape.seqlen_k for c in win)
    assert all(c.shape.batch in (1, 2) and 16 <= c.shape.heads <= 32 for c in win)
    assert sum(c.shape.heads != c.shape.kv_heads for c in win if c.impl == "cute") == 3
    assert {(c.window_left, c.window_right) for c in win if c.impl == "cute"} == \
        {(None, None), (511, 0), (2047, 0)}
    flex = [c for c in win if c.impl == "flex"]
    assert len(flex) == 2 and {(c.window_left, c.window_right) for c in flex} == {(511, 0)}
    assert {c.shape for c in flex} <= {c.shape for c in win if c.impl == "cute"}
    var = ed.holdout_varlen_cases()
    assert len(var) == 8
    assert {c.seqlens_q for c in var} == {(300, 2500, 6000), (64,) * 16 + (8192,)}
    assert all(c.seqlens_q == c.seqlens_k and c.shape.heads == 16 for c in var)
    assert {(c.shape.kv_heads, c.shape.causal) for c in var} == {
        (16, False), (16, True), (4, False), (4, True)}
    paged = ed.holdout_paged_cases()
    assert {c.shape.seqlen_k for c in paged} == {48, 512, 2048, 8192}
    assert {c.page_size for c in paged} == {None, 64, 128}
    assert all(c.shape.batch == 32 and c.shape.heads == 32 and c.shape.kv_heads == 4
               and c.shape.seqlen_q == 1 for c in paged)


def test_holdout_budget_estimate():
    rows = ed.plan(grid="holdout")
    total = ed.estimate_plan_s(rows)
    assert 120 < total < 240, total  # the brief: about 4 minutes at most
    assert all(0 < ed.estimate_row_s(c) < 5 for c in rows)
    # d = 64 compiles its own cute kernels (the estimate counts them)
    assert ed.compile_group(ed.Case("decode", ed._shape(2, 32, 32, 1, 2048, False, d=64),
                                    "cute")) != \
        ed.compile_group(ed.Case("decode", ed._shape(2, 32, 32, 1, 2048, False), "cute"))


def test_cli_plan_holdout(capsys):
    assert ed.main(["--plan", "--grid", "holdout", "--kinds", "paged"]) == 0
    out = capsys.readouterr().out
    assert "b32_h32_hkv4_q1_k48_" in out
    assert re.search(r"total\s*│\s*12\s*│", out), out[-600:]     # the plan table's last row


def test_visible_count_and_flops():
    assert ed.visible_count(4, 4, False) == 16
    assert ed.visible_count(4, 4, True) == 10
    assert ed.visible_count(2, 5, True) == 4 + 5  # bottom-right: rows see 4 and 5 keys
    assert ed.visible_count(6, 6, True, left=1) == 1 + 2 * 5
    n = 4096
    assert ed.visible_count(n, n, True, left=1023) == sum(min(i + 1, 1024) for i in range(n))
    s = ed._shape(1, 32, 8, 1, 1024, False)
    assert ed.grid_flops(ed.Case("decode", s, "cute")) == 4 * 32 * 128 * 1024
    v = ed.Case("varlen", ed._shape(2, 32, 32, 3, 3, True), "cute", seqlens_q=(2, 3),
                seqlens_k=(2, 3))
    assert ed.grid_flops(v) == 4 * 32 * 128 * (3 + 6)


def _brute_mask(n_q, n_k, causal, left, right):
    off = n_k - n_q
    m = torch.zeros(n_q, n_k, dtype=torch.bool)
    for i in range(n_q):
        for j in range(n_k):
            ok = True
            r = 0 if causal else right
            if r is not None and j > i + off + r:
                ok = False
            if left is not None and j < i + off - left:
                ok = False
            m[i, j] = ok
    return m


@pytest.mark.parametrize("n_q,n_k,causal,left,right", [
    (5, 5, True, None, None), (3, 9, True, None, None), (7, 7, True, 2, 0),
    (4, 10, True, 3, None), (6, 6, False, 1, 2), (6, 6, False, None, 1), (9, 4, True, None, None),
])
def test_visible_mask_matches_brute_force(n_q, n_k, causal, left, right):
    rows = torch.arange(n_q)
    got = ed.visible_mask(rows, n_q, n_k, causal, left, right)
    assert torch.equal(got, _brute_mask(n_q, n_k, causal, left, right))
    assert int(got.sum()) == ed.visible_count(n_q, n_k, causal, left, right)


@pytest.mark.parametrize("n_q,n_k,causal", [(4, 4, False), (4, 4, True), (3, 11, True),
                                            (1, 16, False), (16, 40, True)])
def test_reference_rows_matches_reference_attention(n_q, n_k, causal):
    from perfsim.validate.kernels.reference import reference_attention

    gen = torch.Generator().manual_seed(0)
    g, d = 4, 8
    q = torch.randn(1, g, n_q, d, generator=gen)
    k = torch.randn(1, 1, n_k, d, generator=gen)
    v = torch.randn(1, 1, n_k, d, generator=gen)
    ref, _ = reference_attention(q, k, v, causal=causal)
    rows = torch.arange(n_q)
    got = ed.reference_rows(q[0], k[0, 0], v[0, 0], rows, n_q, n_k, causal=causal)
    assert torch.allclose(got, ref[0], atol=1e-12)
    # a row subset gives the same rows
    sub = torch.tensor([0, n_q - 1])
    got_sub = ed.reference_rows(q[0][:, sub], k[0, 0], v[0, 0], sub, n_q, n_k, causal=causal)
    assert torch.allclose(got_sub, ref[0][:, sub], atol=1e-12)


def _explicit_window_attention(q, k, v, causal, left, right):
    """Softmax over the visible keys only, row by row (float64, loops)."""
    n_q, n_k = q.shape[-2], k.shape[0]
    mask = _brute_mask(n_q, n_k, causal, left, right)
    out = torch.zeros(q.shape[0], n_q, v.shape[-1], dtype=torch.float64)
    for h in range(q.shape[0]):
        for i in range(n_q):
            js = mask[i].nonzero().flatten()
            if len(js) == 0:
                continue
            s = (q[h, i].double() @ k[js].double().T) / math.sqrt(q.shape[-1])
            out[h, i] = torch.softmax(s, 0) @ v[js].double()
    return out


@pytest.mark.parametrize("n_q,n_k,causal,left,right", [
    (12, 12, True, 3, 0), (5, 12, True, 2, 0), (8, 8, False, 2, 1), (10, 10, True, 0, 0),
])
def test_reference_rows_window(n_q, n_k, causal, left, right):
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, n_q, 8, generator=gen)
    k = torch.randn(n_k, 8, generator=gen)
    v = torch.randn(n_k, 8, generator=gen)
    rows = torch.arange(n_q)
    got = ed.reference_rows(q, k, v, rows, n_q, n_k, causal=causal, left=left, right=right)
    assert torch.allclose(got, _explicit_window_attention(q, k, v, causal, left, right),
                          atol=1e-12)


def test_reference_varlen_segments():
    """Per-sequence references of a packed ragged batch equal the dense reference of each
    sequence alone (the varlen check slices (total, H, d) tensors by cu_seqlens)."""
    from perfsim.validate.kernels.reference import reference_attention

    gen = torch.Generator().manual_seed(2)
    seqlens_q, seqlens_k, h, hkv, d = (3, 7, 1), (5, 7, 4), 4, 2, 8
    q = torch.randn(sum(seqlens_q), h, d, generator=gen)
    k = torch.randn(sum(seqlens_k), hkv, d, generator=gen)
    v = torch.randn(sum(seqlens_k), hkv, d, generator=gen)
    cq, ck = [0, *ed._cumsum(seqlens_q)], [0, *ed._cumsum(seqlens_k)]
    case = ed.Case("varlen", ed._shape(3, h, hkv, 7, 7, True), "cute", seqlens_q=seqlens_q,
                   seqlens_k=seqlens_k)
    for i in range(3):
        qs = q[cq[i]:cq[i + 1]].transpose(0, 1)
        ks, vs = (t[ck[i]:ck[i + 1]].transpose(0, 1) for t in (k, v))
        ref, _ = reference_attention(qs[None], ks[None], vs[None], causal=True)
        for g in range(hkv):
            assert ed.slice_error(case, ref[0].float(), qs, ks, vs, g) < 1e-6
        # a wrong mask is caught
        bad, _ = reference_attention(qs[None], ks[None], vs[None], causal=False)
        if seqlens_q[i] > 1:  # one query row (bottom-right) sees every key anyway
            assert max(ed.slice_error(case, bad[0].float(), qs, ks, vs, g)
                       for g in range(hkv)) > 1e-3


def test_check_rows_subset():
    assert ed.check_rows(16).tolist() == list(range(16))
    r = ed.check_rows(4096)
    assert len(r) == ed.CHECK_ROWS and r[0] == 0 and r[-1] == 4095


def test_runs_and_labels():
    assert ed._runs((128,) * 32 + (16384,)) == "128x32-16384"
    s = ed._shape(1, 32, 8, 1, 1024, False)
    assert ed.Case("decode", s, "cute", pack_gqa=False).label == "cute[pack_gqa=False]"
    assert ed.Case("decode", s, "cute", num_splits=0).label == "cute[num_splits=0]"
    assert ed.Case("paged", s, "cute").label == "cute[dense]"
    assert ed.resolved_pack_gqa(ed.Case("decode", s, "cute")) is True
    assert ed.resolved_pack_gqa(ed.Case("decode", ed._shape(1, 32, 32, 1, 1024, False),
                                        "cute")) is False


def test_cli_plan(capsys):
    assert ed.main(["--plan", "--kinds", "varlen"]) == 0
    out = capsys.readouterr().out
    assert "varlen" in out and "total" in out


# --------------------------------------------------------------------------------------------
# the flash_attn.cute wiring (layouts, cu_seqlens slicing, page gathers) on the CPU, with a
# stand-in flash_attn that computes masked attention independently of external_decode


def _masked_attention(q, k, v, causal, left, right):
    """q (N_q, H, d), k/v (N_k, H_kv, d) -> (N_q, H, d), float32 via float64."""
    n_q, h, d = q.shape
    n_k, hkv = k.shape[0], k.shape[1]
    mask = _brute_mask(n_q, n_k, causal, left, right)
    kk = k.double().repeat_interleave(h // hkv, dim=1).transpose(0, 1)
    vv = v.double().repeat_interleave(h // hkv, dim=1).transpose(0, 1)
    s = q.double().transpose(0, 1) @ kk.transpose(1, 2) / math.sqrt(d)
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, -1))
    return (p @ vv).transpose(0, 1).to(q.dtype)


class _FakeCute:
    """flash_attn.cute's two entry points (forward only), with flash-attn's mask semantics."""

    def __init__(self, ignore_mask=False):
        self.ignore_mask = ignore_mask
        self.calls = []

    def _mask(self, causal, window_size):
        left, right = window_size
        if causal:
            right = 0
        return (False, None, None) if self.ignore_mask else (causal, left, right)

    def flash_attn_func(self, q, k, v, causal=False, window_size=(None, None), num_splits=1,
                        pack_gqa=None):
        self.calls.append(("func", num_splits, pack_gqa))
        if num_splits > 1:
            raise AssertionError("SplitKV not supported on SM 9.0")
        c, left, right = self._mask(causal, window_size)
        out = torch.stack([_masked_attention(q[b], k[b], v[b], c, left, right)
                           for b in range(q.shape[0])])
        return out, None

    def flash_attn_varlen_func(self, q, k, v, cu_seqlens_q=None, cu_seqlens_k=None,
                               max_seqlen_q=None, max_seqlen_k=None, seqused_k=None,
                               page_table=None, causal=False, window_size=(None, None),
                               num_splits=1, pack_gqa=None):
        self.calls.append(("varlen", page_table is not None))
        c, left, right = self._mask(causal, window_size)
        if page_table is not None:
            outs = []
            for b in range(q.shape[0]):
                n = int(seqused_k[b])
                kb = k[page_table[b].long()].reshape(-1, k.shape[2], k.shape[3])[:n]
                vb = v[page_table[b].long()].reshape(-1, v.shape[2], v.shape[3])[:n]
                outs.append(_masked_attention(q[b], kb, vb, c, left, right))
            return torch.stack(outs), None
        out = torch.empty_like(q)
        for i in range(len(cu_seqlens_q) - 1):
            a, b = int(cu_seqlens_q[i]), int(cu_seqlens_q[i + 1])
            ka, kb = int(cu_seqlens_k[i]), int(cu_seqlens_k[i + 1])
            assert b - a <= max_seqlen_q and kb - ka <= max_seqlen_k
            out[a:b] = _masked_attention(q[a:b], k[ka:kb], v[ka:kb], c, left, right)
        return out, None


@pytest.fixture
def fake_cute(monkeypatch):
    import sys
    import types

    def install(**kw):
        fake = _FakeCute(**kw)
        pkg, cute, iface = (types.ModuleType(n) for n in
                            ("flash_attn", "flash_attn.cute", "flash_attn.cute.interface"))
        cute.flash_attn_func = fake.flash_attn_func
        cute.flash_attn_varlen_func = fake.flash_attn_varlen_func
        cute.interface = iface
        pkg.cute = cute
        for name, mod in (("flash_attn", pkg), ("flash_attn.cute", cute),
                          ("flash_attn.cute.interface", iface)):
            monkeypatch.setitem(sys.modules, name, mod)
        monkeypatch.setattr(ed, "DEVICE", "cpu")
        return fake

    return install


def _small(b, h, hkv, nq, nk, causal):
    from perfsim.validate.shapes import Shape

    return Shape(batch=b, heads=h, seqlen_q=nq, head_dim=16, causal=causal, kv_heads=hkv,
                 seqlen_k=nk)


@pytest.mark.parametrize("case", [
    ed.Case("decode", _small(3, 8, 2, 1, 96, False), "cute"),
    ed.Case("decode", _small(2, 8, 2, 4, 64, True), "cute", pack_gqa=False),
    ed.Case("decode", _small(2, 4, 4, 4, 64, True), "cute"),
    ed.Case("window", _small(2, 4, 2, 40, 40, True), "cute", window_left=7, window_right=0),
    ed.Case("varlen", _small(3, 4, 2, 9, 20, True), "cute", seqlens_q=(5, 9, 2),
            seqlens_k=(5, 20, 7)),
    ed.Case("varlen", _small(2, 4, 4, 9, 9, False), "cute", seqlens_q=(3, 9), seqlens_k=(3, 9)),
    ed.Case("paged", _small(3, 8, 2, 1, 37, False), "cute", page_size=16),
    ed.Case("paged", _small(3, 8, 2, 1, 37, False), "cute", page_size=8),
    ed.Case("paged", _small(3, 8, 2, 1, 37, False), "cute"),
], ids=lambda c: c.key)
def test_cute_wiring_passes_check(fake_cute, case):
    fake = fake_cute()
    built = ed.build(case)
    rec = ed.check(case, built)
    assert rec.get("status") != "incorrect", rec
    assert rec["correctness_rel_error"] < 1e-2
    assert built.config["pack_gqa_resolved"] == ed.resolved_pack_gqa(case)
    kind = "varlen" if case.kind == "varlen" or case.page_size else "func"
    assert fake.calls[0][0] == kind


def test_cute_wrong_mask_is_caught(fake_cute):
    fake_cute(ignore_mask=True)
    for case in (ed.Case("window", _small(1, 4, 2, 40, 40, True), "cute", window_left=7,
                         window_right=0),
                 ed.Case("varlen", _small(2, 4, 4, 9, 9, True), "cute", seqlens_q=(3, 9),
                         seqlens_k=(3, 9)),
                 ed.Case("decode", _small(2, 4, 4, 4, 64, True), "cute")):
        rec = ed.check(case, ed.build(case))
        assert rec["status"] == "incorrect", case.key


def test_measure_row_records_refusal(fake_cute, monkeypatch):
    fake_cute()
    from perfsim.validate import external

    monkeypatch.setattr(external, "time_op", lambda fn, sampler: {"measured_s": 1e-3})
    case = ed.Case("decode", _small(1, 8, 2, 1, 64, False), "cute", num_splits=4)
    rec = ed.measure_row(case, None, {"torch": "x"})
    assert rec["status"] == "unsupported" and "SplitKV" in rec["reason"]
    assert rec["num_splits"] == 4 and rec["kind"] == "decode" and rec["key"] == case.key
    ok = ed.measure_row(ed.Case("decode", _small(1, 8, 2, 1, 64, False), "cute"), None, {})
    assert ok["status"] == "ok" and ok["measured_s"] == 1e-3 and ok["achieved_gbps"] > 0


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_window_wiring(monkeypatch):
    """The sliding-window mask_mod (eager flex_attention on the CPU) passes the check."""
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    from perfsim.validate import backends

    monkeypatch.setattr(ed, "DEVICE", "cpu")
    monkeypatch.setattr(backends, "_compiled_flex",
                        lambda: (fa.flex_attention, fa.create_block_mask))
    case = ed.Case("window", _small(1, 4, 2, 256, 256, True), "flex", window_left=37,
                   window_right=0)
    built = ed.build(case)
    with built.context():
        rec = ed.check(case, built)
    assert rec.get("status") != "incorrect", rec


def test_main_resumes_and_records_every_row(tmp_path, monkeypatch):
    """The driver loop (GPU parts stubbed): every planned row once, failures recorded, the
    second run skips stored keys, --retry-errors re-measures the error rows."""
    from perfsim.validate import external_run
    from perfsim.validate.runner import ResultStore

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(external_run, "versions", lambda: {"torch": "stub"})
    monkeypatch.setattr(ed, "available", lambda impl: None)
    seen = []

    def fake_measure(case, sampler, versions):
        seen.append(case.key)
        status = "error" if case.impl == "sdpa_efficient" else "ok"
        return {"key": case.key, **case.fields(), "impl": case.impl, "algorithm": case.label,
                "status": status, "reason": "", "measured_s": 1e-5, "achieved_gbps": 1.0,
                "achieved_tflops": 1.0, "wall_s": 0.0, "launch_config": versions}

    monkeypatch.setattr(ed, "measure_row", fake_measure)
    args = ["--out", str(tmp_path), "--limit-seconds", "60", "--kinds", "varlen", "paged"]
    assert ed.main(args) == 0
    planned = [c.key for c in ed.plan(["varlen", "paged"])]
    assert seen == planned
    assert set(ResultStore(tmp_path / "results.jsonl").load()) == set(planned)
    seen.clear()
    assert ed.main(args) == 0
    assert seen == []
    assert ed.main(["--out", str(tmp_path), "--kinds", "decode", "--limit-seconds", "600"]) == 0
    n_err = sum(c.impl == "sdpa_efficient" for c in ed.decode_cases())
    seen.clear()
    assert ed.main(["--out", str(tmp_path), "--kinds", "decode", "--retry-errors"]) == 0
    assert len(seen) == n_err
    # the hold-out grid in the same store: only its own keys, then nothing left
    seen.clear()
    assert ed.main(["--out", str(tmp_path), "--grid", "holdout", "--kinds", "varlen"]) == 0
    assert seen == [c.key for c in ed.plan(["varlen"], "holdout")]
    seen.clear()
    assert ed.main(["--out", str(tmp_path), "--grid", "holdout", "--kinds", "varlen"]) == 0
    assert seen == []
