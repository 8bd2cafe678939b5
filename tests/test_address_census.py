"""FlexAttention's integer arithmetic (issue 9; a finding, not in the model): what
``perfsim.validate.address_census`` reads from the committed Nsight Compute censuses."""

from __future__ import annotations

import pytest

from perfsim.validate import address_census


@pytest.fixture(scope="module")
def census():
    return {r["case"]: r for r in address_census.census()}


def test_every_profiled_case_is_read(census):
    assert set(census) == {case for case, *_ in address_census.CASES}
    for r in census.values():
        assert r["alu"] > 0 and r["fma"] > 0 and 0 <= r["imad"] <= r["fma"], r["case"]


def test_calls_that_run_one_kernel_issue_the_same(census):
    """96, 104 and 112 run the forward compiled for 128 with the default 64 x 64 tile, 144,
    192 and 216 the one for 256: per score element they issue the same instructions."""
    for group in (("flex-fwd-d96", "flex-fwd-d104", "flex-fwd-d112-b2-h16"),
                  ("flex-fwd-d144", "flex-fwd-d192", "flex-fwd-d216")):
        first = census[group[0]]
        for case in group[1:]:
            for key in ("alu", "fma", "imad", "extra_alu", "extra_fma"):
                assert census[case][key] == pytest.approx(first[key], abs=0.01), (case, key)


def test_the_model_counts_the_softmax_and_misses_the_integer_work(census):
    """The FMA pipe's count less its IMADs is the model's within 0.6 per score element (the
    softmax's FP32 work is counted); the ALU pipe issues 0.5-6.7 more than the model counts,
    and the default tile at dots 128 and 256 wide one IMAD per 16-byte copy."""
    for case, r in census.items():
        assert abs(r["fma"] - r["imad"] - r["model_fma"]) < 0.6, case
        assert 0.5 < r["extra_alu"] < 7, case
    assert census["flex-fwd-d96"]["imad"] == pytest.approx(0.5, abs=0.05)
    assert census["flex-fwd-d192"]["imad"] == pytest.approx(1.0, abs=0.1)
    assert census["flex-fwd-d128"]["imad"] < 0.05      # the 128 x 64 tile: almost none
