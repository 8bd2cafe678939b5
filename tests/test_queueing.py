"""perfsim.queueing.busy_fraction: the closed cycle's busy fraction, exact to rounding.

The product-form result ``U = (1 − ρ^k) / (1 − ρ^(k+1))`` is checked against exact rational
arithmetic (``fractions.Fraction``), including the ρ close to 1 where evaluating that formula
in doubles cancels; the paths (one number, numpy arrays of integer or float counts, a count
per row or one for all) give the same doubles; bad counts are refused."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsim.queueing import CUSTOMER_BITS, busy_fraction, closed_cycle


def _exact(rho: float, k: int) -> Fraction:
    r = Fraction(rho)
    if r == 1:
        return Fraction(k, k + 1)
    return (1 - r**k) / (1 - r ** (k + 1))


@settings(max_examples=300, deadline=None)
@given(rho=st.floats(0.0, 1.0), k=st.integers(1, (1 << CUSTOMER_BITS) - 1))
def test_busy_fraction_is_the_exact_value_to_rounding(rho, k):
    got = busy_fraction(rho, k)
    assert abs(Fraction(got) - _exact(rho, k)) <= 1e-14 * _exact(rho, k)


@pytest.mark.parametrize("gap", [2.0**-20, 2.0**-33, 2.0**-45, 2.0**-52])
@pytest.mark.parametrize("k", [2, 3, 8, 96])
def test_near_one_where_the_closed_form_cancels(gap, k):
    """ρ = 1 − gap: ``1 − ρ^k`` in doubles keeps only ~log2(1/gap) fewer digits, the
    geometric sum keeps them all."""
    rho = 1.0 - gap
    assert abs(Fraction(busy_fraction(rho, k)) - _exact(rho, k)) <= 1e-15 * _exact(rho, k)


def test_limits():
    assert busy_fraction(1.0, 7) == 7 / 8
    assert busy_fraction(0.0, 5) == 1.0
    assert busy_fraction(0.3, 1) == 1 / 1.3
    assert closed_cycle(3.0, 5.0, 1) == 8.0
    assert closed_cycle(0.0, 5.0, 4) == 5.0


def test_every_path_gives_the_same_doubles():
    rng = np.random.default_rng(7)
    rho = np.concatenate([rng.random(200), 1 - rng.random(50) * 1e-9, [0.0, 1.0]])
    k = rng.integers(1, 100, rho.size)
    one_by_one = np.array([busy_fraction(float(r), int(n)) for r, n in zip(rho, k)])
    assert np.array_equal(busy_fraction(rho, k), one_by_one)
    assert np.array_equal(busy_fraction(rho, k.astype(float)), one_by_one)
    assert np.array_equal(busy_fraction(rho, 5), [busy_fraction(float(r), 5) for r in rho])


def test_counts_past_the_compiled_bits_are_exact_too():
    """A what-if GPU may hold more customers than :data:`CUSTOMER_BITS` covers; numbers and
    numpy arrays read every bit."""
    for k in (256, 600, 2000):
        assert abs(Fraction(busy_fraction(0.999, k)) - _exact(0.999, k)) <= (
            1e-14 * _exact(0.999, k))
    assert np.array_equal(busy_fraction(np.array([0.5, 0.999]), np.array([300, 70000])),
                          [busy_fraction(0.5, 300), busy_fraction(0.999, 70000)])


def test_a_list_of_counts_is_an_array_of_counts():
    assert np.array_equal(busy_fraction(np.array([0.5, 0.9]), [3, 300]),
                          busy_fraction(np.array([0.5, 0.9]), np.array([3, 300])))


@pytest.mark.parametrize("k", [0, 2.5, -1, np.array([1, 0]), np.array([1.0, 1.5]),
                               float("nan"), float("inf"), np.array([2.0, np.inf])])
def test_a_count_that_is_not_a_whole_number_of_customers_is_refused(k):
    with pytest.raises(ValueError, match="whole number of customers"):
        busy_fraction(0.5, k)
