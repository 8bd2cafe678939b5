"""FlexAttention's forward bound checks by the class of the sequence lengths (issue 9): the
model's table is the Nsight Compute census's, the classes order the predicted times as the
census orders the work, and sweeps (numpy and compiled) give the rows ``predict`` gives."""

from __future__ import annotations

import pytest

import perfsim
from perfsim import AttentionWorkload
from perfsim.algorithms import softmax_costs as sc
from perfsim.algorithms.fa2 import FA2
from perfsim.algorithms.fa3 import FA3
from perfsim.validate import flex_length_census


def test_table_is_the_census():
    """Each row of ``FLEX_FWD_BOUND_CHECK_CLASSES`` is the census's mean for that tile and
    class (0.01 instructions, 0.1 B), and the census has no class the table leaves out."""
    census = flex_length_census.classes()
    assert set(census) == set(sc.FLEX_FWD_BOUND_CHECK_CLASSES)
    for tile, rows in sc.FLEX_FWD_BOUND_CHECK_CLASSES.items():
        assert {row[0] for row in rows} == set(census[tile])
        for cls, alu, fma, spill in rows:
            got = census[tile][cls]
            assert (alu, fma, spill) == pytest.approx(got, abs=0.051), (tile, cls)


def test_classes_follow_the_largest_power_of_two_divisor():
    assert [sc.length_class(n) for n in (2688, 2704, 2720, 2690, 2700, 2689)] \
        == [16, 16, 16, 2, 2, 1]
    # the model's rule on arrays (sweeps) picks the row of the same class, length by length
    import dataclasses

    import numpy as np

    from perfsim.algorithms.base import Dims
    table = sc.flex_fwd_bound_check_classes((128, 128, 4, 64))
    algo = FA2(bound_checks="flex", bound_check_unless_multiple=128, bound_check_classes=table)
    lengths = np.arange(2688, 2822)
    dims = dataclasses.replace(
        Dims.of(AttentionWorkload(batch=1, heads=1, seqlen_q=2688, head_dim=64)),
        N_q=lengths, N_k=lengths)
    alu = algo._by_length_class(dims)[0]
    rows = {row[0]: row[1] for row in table}
    assert list(alu) == [rows[sc.length_class(int(n))] for n in lengths]
    # a tile profiled at one class fills the others from the next larger one, or the
    # generic figure for a missing class 16
    rows = sc.flex_fwd_bound_check_classes((64, 32, 4, 256))
    assert rows[0] == (16, sc.BOUND_CHECK_ALU_OPS_PER_SCORE, 0.0, 0.0)
    assert rows[1][1:] == rows[2][1:] == sc.FLEX_FWD_BOUND_CHECK_CLASSES[(64, 32, 4, 256)][0][1:]
    assert sc.flex_fwd_bound_check_classes((64, 64, 4, 128)) is None


def _flex_fwd(n, d=64, gpu="h100-sxm5"):
    w = AttentionWorkload(batch=3, heads=8, seqlen_q=n, head_dim=d, dtype="bf16")
    return perfsim.predict(w, gpu=gpu, algorithm="flex")


@pytest.mark.parametrize("d", [64, 160])
def test_odd_lengths_cost_more_than_even_ones_than_multiples_of_16(d):
    """At one length's work the predicted time grows from a multiple of 16 to an even length
    to an odd one, and only the two latter reload spilled registers (the census: 0 local
    bytes at 2704 and 2720, 16-81 B per thread and step at 2689-2700)."""
    times = {n: _flex_fwd(n, d) for n in (2704, 2702, 2703)}
    assert times[2704].seconds < times[2702].seconds <= times[2703].seconds

    def local_bytes(p):
        return sum(k.cost.local_load_bytes for k in p.kernels)

    assert local_bytes(times[2704]) == 0
    assert 0 < local_bytes(times[2702]) <= local_bytes(times[2703])
    # a multiple of 128 runs the unchecked kernel: no census at all
    assert local_bytes(_flex_fwd(2688, d)) == 0


def test_off_sm90_and_unprofiled_tiles_keep_one_figure():
    """The A100's FlexAttention (sm_80 tiles) and the sm_90 default tile at dots of 128 (head
    dims 65-127, not profiled by class) take the generic census for every length class."""
    for gpu, d in (("a100-sxm4-80gb", 64), ("h100-sxm5", 96)):
        even, odd = _flex_fwd(2702, d, gpu), _flex_fwd(2703, d, gpu)
        assert odd.seconds / even.seconds == pytest.approx((2703 / 2702) ** 2, rel=0.01)


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_sweep_rows_equal_predict_across_classes(engine):
    lengths = [2688, 2689, 2690, 2700, 2704, 2720]
    rows = perfsim.sweep(batch=3, heads=8, seqlen_q=lengths, head_dim=[64, 160, 256],
                         gpus="h100-sxm5", algorithms="flex", engine=engine)
    for r in rows.itertuples():
        p = _flex_fwd(r.seqlen_q, r.head_dim)
        assert r.seconds == pytest.approx(p.seconds, rel=1e-9), (r.seqlen_q, r.head_dim)


def test_bad_class_rows_are_refused():
    table = sc.flex_fwd_bound_check_classes((128, 128, 4, 64))
    ok = dict(bound_checks="flex", bound_check_unless_multiple=128)
    assert FA2(**ok, bound_check_classes=[list(row) for row in table]).bound_check_classes \
        == table                                              # JSON/TOML lists
    with pytest.raises(ValueError, match="three rows"):
        FA2(**ok, bound_check_classes=((2, 1.0, 0.0, 0.0),))
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite and at least 0"):
            FA2(**ok, bound_check_classes=((16, 1.0, 0.0, 0.0), (2, bad, 0.0, 0.0),
                                           (1, 1.0, 0.0, 0.0)))
    with pytest.raises(ValueError, match="bound_check_unless_multiple"):
        FA2(bound_checks="flex", bound_check_classes=table)
    with pytest.raises(ValueError, match="fa3 does not take it"):
        FA3(bound_check_classes=table)


def test_a_launch_other_than_the_profiled_one_takes_the_generic_figure():
    """``flex`` with its launch changed (``--set warps=8``) compiles another kernel: the
    class table of the default tile no longer applies (no spills, one figure)."""
    from perfsim.implementations import resolve

    w = AttentionWorkload(batch=3, heads=8, seqlen_q=2689, head_dim=64, dtype="bf16")
    from perfsim.algorithms.base import Dims

    impl = resolve("flex(warps=8)")
    assert impl.config(Dims.of(w), perfsim.load_gpu("h100-sxm5")).bound_check_classes is None
    p = perfsim.predict(w, gpu="h100-sxm5", algorithm=impl)
    assert sum(k.cost.local_load_bytes for k in p.kernels) == 0


def test_explain_names_the_length_class_and_prices_longer_lengths():
    text = _flex_fwd(2700).explain()
    assert "The lengths are even, not multiples of 16" in text
    assert " at 2704, " in text and " at 2816 " in text
    assert "The lengths are multiples of 16" in _flex_fwd(2704).explain()
    assert "The lengths are" not in _flex_fwd(2688).explain()          # no check runs
    assert "The lengths are" not in _flex_fwd(2700, gpu="a100-sxm4-80gb").explain()
    # one price where the multiple of 16 is already the multiple of 128
    text = perfsim.predict(AttentionWorkload(batch=2, heads=16, seqlen_q=4095, head_dim=64),
                           gpu="h100-sxm5", algorithm="flex").explain()
    assert text.count(" at 4096") == 1
