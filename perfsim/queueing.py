"""Closed queueing networks behind perfsim's overlap rules (product-form mean-value
analysis): a two-station cycle with ``k`` customers (tiles, CTAs or warps in flight) and an
unpipelined CTA's delay → load → compute loop. Works on numbers and numpy arrays (sweeps)."""

from __future__ import annotations

import numpy as np

from perfsim.mathops import asarray, maximum, where


def closed_cycle(a, b, k):
    """Seconds of a closed cycle of two stations with total service times ``a`` and ``b`` and
    ``k`` customers (tiles, CTAs) in flight: ``max(a, b) / U`` with
    ``U = (1 − ρ^k) / (1 − ρ^(k+1))``, ``ρ = min / max`` (``perfsim.timing.cycle_time``); ``k = 1``
    gives ``a + b``. Works on numpy arrays, ``k`` included."""
    slow = maximum(a, b)
    fast = a + b - slow
    rho = fast / where(slow > 0, slow, 1) if isinstance(slow, np.ndarray) else (
        fast / slow if slow else 0.0)
    near_one = abs(1 - rho) < 1e-9
    safe = where(near_one, 0.5, rho) if isinstance(rho, np.ndarray) else (
        0.5 if near_one else rho)
    busy = (1 - safe**k) / (1 - safe ** (k + 1))
    busy = where(near_one, k / (k + 1), busy) if isinstance(rho, np.ndarray) else (
        k / (k + 1) if near_one else busy)
    return slow / busy


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
