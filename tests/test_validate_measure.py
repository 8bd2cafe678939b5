"""The correctness gate of perfsim validate on CPU tensors (needs torch; no GPU, no Triton):
the eager ``standard`` kernel passes, broken outputs are flagged ``incorrect``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from perfsim.validate import measure
from perfsim.validate.runner import Row
from perfsim.validate.shapes import Shape


def _row(phase="fwd", causal=True):
    # odd sizes: N = 72 is not a multiple of any tile; GQA group of 2
    return Row(Shape(2, 4, 72, 32, causal, kv_heads=2, phase=phase), "standard", "own")


def test_inputs_are_fresh_random_and_reproducible_per_row():
    q, k, _ = measure.make_inputs(_row(), device="cpu")
    q2, _, _ = measure.make_inputs(_row(), device="cpu")
    q3, _, _ = measure.make_inputs(_row(causal=False), device="cpu")
    assert q.dtype == torch.bfloat16 and tuple(k.shape) == (2, 2, 72, 32)
    assert torch.equal(q, q2) and not torch.equal(q, q3)
    assert (q != 0).float().mean() > 0.99 and q.float().std() > 0.5


@pytest.mark.parametrize("phase", ["fwd", "bwd"])
def test_standard_kernel_passes_the_check(phase):
    row = _row(phase)
    q, k, v = measure.make_inputs(row, device="cpu")
    impl = measure.own_impl(row, q, k, v)
    # its own generator: the global one's state depends on the tests that ran before
    do = (torch.randn(q.shape, generator=torch.Generator().manual_seed(7)).to(q.dtype)
          if phase == "bwd" else None)
    rec = measure.check(row, impl, q, k, v, do)
    assert "status" not in rec
    assert 0 < rec["correctness_rel_error"] < rec["correctness_tolerance"] == 2e-2
    assert rec["correctness_checked"].startswith("2 of 4 (batch, kv-head) slices")
    assert impl.launch_config["algorithm"] == "standard"


def _broken(row, q, k, v, damage):
    impl = measure.own_impl(row, q, k, v)
    good = impl.forward

    def forward():
        o = good().clone()
        damage(o)
        return o

    impl.forward = forward
    return impl


@pytest.mark.parametrize("damage, reason", [
    (lambda o: o[0, 0, 5].fill_(float("nan")), "NaN/inf"),
    (lambda o: o[-1, -1].copy_(o[-1, -1].flip(0)), "relative error"),
])
def test_broken_outputs_are_incorrect(damage, reason):
    row = _row()
    q, k, v = measure.make_inputs(row, device="cpu")
    rec = measure.check(row, _broken(row, q, k, v, damage), q, k, v, None)
    assert rec["status"] == "incorrect" and reason in rec["reason"]


def test_poisoned_outputs_switch_is_restored():
    from perfsim.validate.kernels import _common

    before = _common.POISON_OUTPUTS
    with measure.poisoned_outputs(True):
        assert _common.POISON_OUTPUTS is True
        assert torch.isnan(_common.new_output((2,), torch.float32, "cpu")).all()
    assert _common.POISON_OUTPUTS == before


def test_reference_slices_first_and_last():
    assert measure.reference_slices(_row()) == [(0, 0), (1, 1)]
    one = Row(Shape(1, 2, 64, 32, False), "standard", "own")
    assert measure.reference_slices(one) == [(0, 0), (0, 1)]
    single = Row(Shape(1, 1, 64, 32, False), "standard", "own")
    assert measure.reference_slices(single) == [(0, 0)]
