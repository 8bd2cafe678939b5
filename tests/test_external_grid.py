"""The grids of validate/external.py (CPU only): they load, keys are unique, the hold-out shares
no shape with the main grid, and the plan puts the late implementations last."""

from __future__ import annotations

import pytest

from perfsim.validate import external
from perfsim.validate.shapes import Shape


def _base(shape):
    """A shape's identity without the phase."""
    return shape.with_phase("fwd")


def test_grids_load_and_validate():
    main, hold = external.grid("external"), external.grid("external-holdout")
    assert len(main) == 42
    assert len(hold) == 12
    for s in main + hold:
        s.workload()  # validates the fields
        assert s.seqlen_q == s.seqlen_k


def test_keys_unique():
    for name in ("external", "external-holdout"):
        rows = external.plan(name)
        keys = [external.row_key(s, i) for s, i in rows]
        assert len(keys) == len(set(keys))
        assert {s.phase for s, _ in rows} == {"fwd", "bwd"}


def test_holdout_disjoint_from_main():
    main = {_base(s) for s in external.grid("external")}
    hold = {_base(s) for s in external.grid("external-holdout")}
    assert not main & hold
    assert any(s.kv_heads != s.heads for s in hold)
    assert any(s.dtype == "fp16" for s in hold)
    assert any(s.causal for s in hold) and any(not s.causal for s in hold)


def test_plan_order_and_flex_subset():
    rows = external.plan("external")
    impls = [i for _, i in rows]
    first_late = min(impls.index("sdpa_math"), impls.index("flex"))
    assert all(i in external.MAIN_IMPLS for i in impls[:first_late])
    assert all(i in external.LATE_IMPLS for i in impls[first_late:])
    flex = {_base(s) for s, i in rows if i == "flex"}
    assert flex == set(external.FLEX_SUBSET)
    assert len(flex) == 12
    assert flex <= {_base(s) for s in external.grid("external")}
    # the d = 128 shapes come before the others among the main implementations
    dims = [s.head_dim for s, i in rows if i == "cute"]
    assert dims[: dims.index(64)] and set(dims[: dims.index(64)]) == {128}


def test_benchmark_flops_convention():
    s = external.grid("external")[0]
    fwd = external.benchmark_flops(s)
    assert fwd == 4 * s.batch * s.heads * s.seqlen_q**2 * s.head_dim
    assert external.benchmark_flops(s.with_phase("bwd")) == 2.5 * fwd


def test_benchmark_flops_count_the_bottom_right_mask_when_lengths_differ():
    """A causal call with N_q != N_k counts the pairs its bottom-right mask leaves (brute
    force), not half the rectangle: with N_q > N_k its first N_q - N_k rows see no key."""
    for n_q, n_k in ((4, 2), (2, 4), (8192, 2048), (1000, 3333)):
        s = Shape(batch=2, heads=3, seqlen_q=n_q, seqlen_k=n_k, head_dim=8, causal=True)
        pairs = sum(min(n_k, max(0, i + n_k - n_q + 1)) for i in range(n_q))
        assert external.benchmark_flops(s) == 4 * 2 * 3 * pairs * 8


def test_holdout48_has_more_queries_than_keys():
    """Hold-out 48 exists for the backward's causal tail with N_q > N_k."""
    shapes = external.grid("external-holdout48")
    assert shapes and all(s.causal and s.seqlen_q > s.seqlen_k for s in shapes)


def test_sdpa_lower_right_mask_matches_the_reference():
    """SDPA with N_q != N_k gets the bottom-right mask of perfsim's workloads (not torch's
    top-left ``is_causal``); a boolean mask that would leave rows without keys is refused."""
    torch = pytest.importorskip("torch")
    from perfsim.validate import backends, measure
    from perfsim.validate.kernels.reference import reference_attention, relative_error
    from perfsim.validate.runner import Row

    gen = torch.Generator().manual_seed(0)
    for n_q, n_k in ((8, 24), (24, 24)):
        s = Shape(batch=1, heads=2, seqlen_q=n_q, seqlen_k=n_k, head_dim=16, causal=True,
                  dtype="fp32")
        q, k, v = (torch.randn(1, 2, n, 16, generator=gen) for n in (n_q, n_k, n_k))
        got = backends.impl(Row(s, "sdpa_math", "external"), q, k, v)
        with got.context():
            o = got.forward()
        assert relative_error(o, reference_attention(q, k, v, causal=True)[0]) < 1e-5
        assert got.launch_config["is_causal"] == (n_q == n_k)
    s = Shape(batch=1, heads=2, seqlen_q=24, seqlen_k=8, head_dim=16, causal=True, dtype="fp32")
    q, k, v = (torch.randn(1, 2, n, 16, generator=gen) for n in (24, 8, 8))
    with pytest.raises(measure.Unsupported, match="see no key"):
        backends.impl(Row(s, "sdpa_math", "external"), q, k, v)


def test_every_holdout_is_new():
    """Each hold-out grid (measured after a freeze) shares no shape with the main grid or an
    earlier hold-out, and validates."""
    seen = {_base(s).key for s in external.grid("external")}
    assert list(external.HOLDOUTS) == ["external-holdout"] + [
        f"external-holdout{i}" for i in range(2, len(external.HOLDOUTS) + 1)]
    for name in external.HOLDOUTS:
        shapes = external.grid(name)
        keys = {_base(s).key for s in shapes}
        assert len(keys) == len(shapes), name
        assert not keys & seen, name
        for s in shapes:
            s.workload()
        seen |= keys


def test_a_dropout_shape_keeps_the_keys_of_shapes_without():
    """Hold-out 38 times dropout: a shape with ``dropout_p`` gets its own key and field, and a
    shape without keeps the key and fields earlier runs recorded (their rows resume)."""
    plain = Shape(batch=2, heads=8, seqlen_q=1024, head_dim=64, causal=True)
    drop = Shape(batch=2, heads=8, seqlen_q=1024, head_dim=64, causal=True, dropout_p=0.1)
    assert plain.key == "b2_h8_hkv8_q1024_k1024_d64_causal_bf16_fwd"
    assert drop.key == plain.key + "_drop0.1"
    assert "dropout_p" not in plain.fields()
    assert drop.fields()["dropout_p"] == 0.1
    assert drop.with_phase("bwd").dropout_p == 0.1
    assert drop.workload().dropout_p == 0.1


def test_a_dropout_row_must_differ_from_the_reference_by_a_dropout_sized_amount():
    """The mask is drawn inside the kernel: a row whose outputs match the no-dropout reference
    (dropout ignored) or miss it wildly (a broken kernel) is incorrect."""
    from perfsim.validate.external import _check_dropout

    shape = Shape(batch=1, heads=1, seqlen_q=128, head_dim=64, causal=False, dropout_p=0.1)
    ok = _check_dropout(shape, {}, {"o": 0.3}, 2e-2)
    assert "status" not in ok and ok["correctness_tolerance"] == [2e-2, pytest.approx(4 / 3)]
    for bad in (0.01, 5.0):
        assert _check_dropout(shape, {}, {"o": bad}, 2e-2)["status"] == "incorrect"
