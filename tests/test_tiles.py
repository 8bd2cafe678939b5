"""Closed-form tile-visit counts against a brute-force enumeration of tiles."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsim.tiles import visits


def brute_force(n_q, n_k, b_r, b_c, causal):
    """Enumerate every (query tile, key tile); a tile is visited iff it holds an unmasked
    element (bottom-right causal alignment) and masked iff it also holds a masked one."""
    offset = n_k - n_q
    tiles = masked = elements = q_cols = kv_rows = 0
    for m in range(-(-n_q // b_r)):
        r0, r1 = m * b_r, min((m + 1) * b_r, n_q)
        for n in range(-(-n_k // b_c)):
            c0, c1 = n * b_c, min((n + 1) * b_c, n_k)
            if causal and c0 > r1 - 1 + offset:
                continue
            tiles += 1
            masked += causal and (c1 - 1 > r0 + offset)
            elements += (r1 - r0) * (c1 - c0)
            q_cols += c1 - c0
            kv_rows += r1 - r0
    return tiles, masked, elements, q_cols, kv_rows


def as_tuple(v):
    return tuple(int(x) for x in (v.tiles, v.masked_tiles, v.elements, v.q_outer_cols,
                                  v.kv_outer_rows))


def test_odd_sizes_match_brute_force():
    # N not a multiple of the tile, N_q != N_k in both directions, tiles of 1
    for n_q, n_k, b_r, b_c in [(232, 232, 64, 64), (100, 37, 16, 32), (37, 100, 32, 16),
                               (1, 1000, 128, 64), (1000, 1, 64, 128), (129, 257, 128, 128),
                               (300, 300, 7, 5), (17, 17, 1, 1)]:
        for causal in (False, True):
            assert as_tuple(visits(n_q, n_k, b_r, b_c, causal)) == \
                brute_force(n_q, n_k, b_r, b_c, causal), (n_q, n_k, b_r, b_c, causal)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400), st.integers(1, 400), st.integers(1, 130), st.integers(1, 130),
       st.booleans())
def test_random_sizes_match_brute_force(n_q, n_k, b_r, b_c, causal):
    assert as_tuple(visits(n_q, n_k, b_r, b_c, causal)) == brute_force(n_q, n_k, b_r, b_c,
                                                                       causal)


def test_numpy_arrays_match_scalars():
    rng = np.random.default_rng(0)
    n_q = rng.integers(1, 5000, 200)
    n_k = rng.integers(1, 5000, 200)
    vec = visits(n_q, n_k, 128, 64, True)
    for i in range(200):
        assert as_tuple(visits(int(n_q[i]), int(n_k[i]), 128, 64, True)) == tuple(
            int(getattr(vec, f)[i]) for f in ("tiles", "masked_tiles", "elements",
                                              "q_outer_cols", "kv_outer_rows"))


def test_causal_square_visits_about_half():
    v = visits(8192, 8192, 128, 128, True)
    t = 64
    assert v.tiles == t * (t + 1) // 2 and v.masked_tiles == t
