"""Closed queueing networks behind perfsim's overlap rules (product-form mean-value
analysis): a two-station cycle with ``k`` customers (tiles, CTAs or warps in flight) and an
unpipelined CTA's delay → load → compute loop. Works on numbers and numpy arrays (sweeps)."""

from __future__ import annotations

import numpy as np

from perfsim.mathops import asarray, maximum, where

#: Bits of a customer count that :func:`busy_fraction` reads when the count varies along an
#: array it is compiled for (``perfsim.compiled``): the fewest of these that hold every
#: sampled row's count — 4 (counts to 15: the catalog's kernels hold 1-8, a few resident
#: CTAs per SM times 1 + 2 operand slices), 8, or 32 for what-if GPUs that hold thousands.
#: Each bit costs ~11 operations per row and call, and the bits above a count's own are
#: no-ops (``S`` stays 0, ``ρ^0`` stays 1), so reading fewer gives the same doubles. The
#: row's count is a guard either way: a row past the bits read is evaluated by numpy, which
#: reads them all.
CUSTOMER_BIT_TIERS = (4, 8, 32)
CUSTOMER_BITS = CUSTOMER_BIT_TIERS[1]


def busy_fraction(rho, k):
    """Fraction of the time the slower station of a closed two-station cycle is busy:
    ``U = (1 − ρ^k) / (1 − ρ^(k+1))`` for ``ρ`` (fast / slow service time, in [0, 1]) and ``k``
    customers (a whole number ≥ 1; numbers or numpy arrays).

    Computed without the formula's cancellation near ρ = 1 (where ``1 − ρ^k`` loses its
    digits): ``U = S_k / (1 + ρ · S_k)`` with the geometric sum ``S_k = 1 + ρ + … + ρ^(k−1)``
    (every term ≥ 0), built from the bits of ``k`` as exponentiation by squaring builds a
    power: a doubling step ``S_2n = S_n + ρ^n · S_n``, a set bit ``S_n+1 = 1 + ρ · S_n``. So ρ = 1
    gives ``k / (k + 1)`` and ρ = 0 gives 1 with no special case, and the steps are
    multiplications and additions, which compile to the same doubles as numpy gives (no
    ``pow`` call). Leading zero bits leave ``S = 0``, ``ρ^0 = 1`` exactly, so every path (one
    call, numpy arrays, a compiled row that reads :data:`CUSTOMER_BITS` bits) gives the same
    result.

    Raises:
        ValueError: ``k`` (a number or a numpy array) below 1 or not a whole number.
    """
    traced = getattr(type(k), "_perfsim_general_path", False)
    if traced:
        # the fewest bits that hold the sampled rows' counts (read from the sample, not
        # recorded), and a guard that every row's count is under them
        sample = k.view(np.ndarray)
        top = int(sample.max()) if sample.size else 0
        bits = next((b for b in CUSTOMER_BIT_TIERS if top < 1 << b), CUSTOMER_BIT_TIERS[-1])
        bool((k < (1 << bits)).all())
    else:
        if np.ndim(k) > 0 and not isinstance(k, np.ndarray):
            k = np.asarray(k)                   # a list or tuple of counts
        whole = np.asarray(k)
        if whole.size and (not np.all(np.isfinite(whole)) or np.min(whole) < 1
                           or not np.all(np.floor(whole) == whole)):
            raise ValueError(f"a closed cycle needs a whole number of customers, at least "
                             f"1; got {k!r}")
        bits = (int(np.max(whole)) if whole.size else 1).bit_length()
    total, power = 0.0, 1.0                   # S_n and ρ^n for n = the bits read so far
    varying = np.ndim(k) > 0
    plain = int(k) if not varying else None
    if varying and k.dtype.kind not in "iu":
        k = k.astype(np.int64)               # whole numbers (checked above): bits by shifts
    for bit in range(bits - 1, -1, -1):
        total = total + power * total
        power = power * power
        if not varying:
            if plain >> bit & 1:
                total, power = 1.0 + rho * total, power * rho
            continue
        on = (k >> bit) & 1 == 1
        total = np.where(on, 1.0 + rho * total, total)
        power = np.where(on, power * rho, power)
    return total / (1.0 + rho * total)


def closed_cycle(a, b, k):
    """Seconds of a closed cycle of two stations with total service times ``a`` and ``b`` and
    ``k`` customers (tiles, CTAs) in flight: ``max(a, b) / U`` with
    ``U = (1 − ρ^k) / (1 − ρ^(k+1))``, ``ρ = min / max`` (:func:`busy_fraction`;
    ``perfsim.timing.cycle_time``); ``k = 1`` gives ``a + b``. Works on numpy arrays, ``k``
    included.

    Raises:
        ValueError: ``k`` below 1 or not a whole number."""
    slow = maximum(a, b)
    fast = a + b - slow
    rho = fast / where(slow > 0, slow, 1) if isinstance(slow, np.ndarray) else (
        fast / slow if slow else 0.0)
    return slow / busy_fraction(rho, k)


def unpipelined_time(latency, load, compute, k):
    """Exact mean-value analysis of a closed network: ``k`` customers (resident CTAs) cycle
    through a delay station (total ``latency``: waits overlap across customers) and two
    single-server stations (total ``load`` and ``compute``: one customer at a time), the
    totals being those of the whole run on one SM. Product-form (exponential service)
    assumption, as :func:`closed_cycle`. ``k = 1`` gives ``latency + load + compute``; many
    customers give ``max(load, compute)``.

    Returns:
        ``(seconds, (latency, load residence, compute residence))`` — the residences per
        cycle scaled to the run, for naming the binding station. Works on numpy arrays.
    """
    k = asarray(k)
    q_load = q_comp = 0.0
    x = r_load = r_comp = None
    for n in range(1, max(int(np.max(k)), 1) + 1):
        rl, rc = load * (1 + q_load), compute * (1 + q_comp)
        cycle = asarray(latency + rl + rc, dtype=float)
        xn = n / np.where(cycle > 0, cycle, 1.0)
        q_load, q_comp = xn * rl, xn * rc
        first = x is None
        x = xn if first else np.where(k == n, xn, x)
        r_load = rl if first else np.where(k == n, rl, r_load)
        r_comp = rc if first else np.where(k == n, rc, r_comp)
    total = asarray(latency + load + compute, dtype=float)
    seconds = np.where(total > 0, 1 / np.where(x > 0, x, 1.0), 0.0)
    if seconds.ndim == 0:
        return float(seconds), (float(latency), float(r_load), float(r_comp))
    return seconds, (latency, r_load, r_comp)
