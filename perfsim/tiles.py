"""Which (query tile, key tile) pairs a tiled attention kernel visits.

The score matrix ``S`` (``N_q x N_k``) is cut into ``T_r = ⌈N_q/B_r⌉`` query tiles and
``T_c = ⌈N_k/B_c⌉`` key tiles; the last of each may be partial. Without a mask every tile is
visited. With the (bottom-right aligned) causal mask a tile is *visited* iff it holds at least
one unmasked element and *masked* (a diagonal tile, as the "on-band" loop of the Triton
fused-attention tutorial) iff it also holds a masked one; tiles entirely above the diagonal are
skipped (FA2 §3.1.1 "Causal masking").

All counts are closed forms built from :func:`clamped_floor_sum`, so they evaluate on Python
ints, numpy arrays (vectorised sweeps) and sympy symbols (closed forms). The tests check them
against a brute-force enumeration of tiles at odd sizes.

Length: the one tile-range rule (issue 11) in one module — the closed forms, the enumeration
for bands and packed rows and its symbolic twin share the same per-tile formulas, which split
apart would have to be kept equal by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfsim.frozen import fast_init
from perfsim.mathops import asarray, cdiv, elementwise, fdiv, is_symbolic, maximum, minimum


def _floor_sum_scalar(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n-1} ⌊(a·i + b)/m⌋ for n, a, b ≥ 0, m > 0 (Euclid-like reduction)."""
    total = 0
    while True:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return total
        n, b, m, a = y_max // m, y_max % m, a, m


@elementwise(_floor_sum_scalar)
def _floor_sum_array(n, m, a, b):
    """Vectorised :func:`_floor_sum_scalar`; every argument broadcast to one shape."""
    n, m, a, b = (np.array(x, dtype=np.int64) for x in np.broadcast_arrays(n, m, a, b))
    total = np.zeros_like(n)
    active = n > 0
    while active.any():
        q = np.where(active, a // m, 0)
        total += np.where(active, (n - 1) * n // 2 * q, 0)
        a = np.where(active, a % m, a)
        q = np.where(active, b // m, 0)
        total += np.where(active, n * q, 0)
        b = np.where(active, b % m, b)
        y_max = a * n + b
        active &= y_max >= m
        n, b, m, a = (np.where(active, y_max // m, n), np.where(active, y_max % m, b),
                      np.where(active, a, m), np.where(active, m, a))
    return total


def _given_integers(*values) -> list[int] | None:
    """``values`` as Python ints where every one is an integer (a sympy ``Integer`` from a
    symbolic call whose sizes were all given), else None. Such a call's tile sums are taken
    exactly: sympy's ``Sum`` of a floor cannot always be evaluated (its Euler-Maclaurin
    estimate of the floor's derivative raises "cannot determine truth value of
    Relational")."""
    if not all(getattr(v, "is_Integer", isinstance(v, int)) for v in values):
        return None
    return [int(v) for v in values]


def clamped_floor_sum(count, a, b, c, upper):
    """Σ_{m=0}^{count-1} clamp(⌊(a·m + b)/c⌋, 0, upper) and how many terms hit ``upper``.

    ``a, c > 0``; ``b`` any integer; ``upper ≥ 0``. Exact in O(log) steps (no loop over m).

    Returns:
        ``(total, saturated)``.
    """
    # Python ints (``predict``) are neither sympy nor numpy: skip both checks
    ints = (type(count) is int and type(a) is int and type(b) is int and type(c) is int
            and type(upper) is int)
    if not ints and is_symbolic(count, a, b, c, upper):
        import sympy
        given = _given_integers(count, a, b, c, upper)
        if given is not None:
            return tuple(sympy.Integer(x) for x in clamped_floor_sum(*given))
        m = sympy.Dummy("m", integer=True, nonnegative=True)
        f = sympy.floor((a * m + b) / c)
        term = sympy.Min(sympy.Max(f, 0), upper)
        hit = sympy.Piecewise((1, f >= upper), (0, True))
        return (sympy.Sum(term, (m, 0, count - 1)), sympy.Sum(hit, (m, 0, count - 1)))
    array = not ints and any(isinstance(x, np.ndarray) for x in (count, a, b, c, upper))
    clip = np.clip if array else (lambda x, lo, hi: min(max(x, lo), hi))
    m_lo = clip(cdiv(c - b, a), 0, count)          # first m with f(m) >= 1
    m_hi = clip(cdiv(upper * c - b, a), m_lo, count)  # first m with f(m) >= upper
    length = m_hi - m_lo
    start = maximum(a * m_lo + b, 0)  # ≥ c whenever length > 0
    if array:
        partial = _floor_sum_array(length, c, a, start)
    else:
        partial = _floor_sum_scalar(int(length), int(c), int(a), int(start))
    saturated = count - m_hi
    return partial + upper * saturated, saturated


@fast_init
@dataclass(frozen=True)
class TileVisits:
    """Counts of the tiles a causal-aware tiled kernel visits (ints, arrays or sympy).

    Attributes:
        q_tiles: ``T_r``.   kv_tiles: ``T_c``.
        tiles: visited (query tile, key tile) pairs.
        masked_tiles: visited tiles that need the causal mask.
        elements: Σ over visited tiles of rows × columns (clipped to the matrix): score
            elements computed, masked ones on diagonal tiles included.
        q_outer_cols: Σ over query tiles of key columns visited — K/V rows a Q-outer loop
            (FA2/FA3/FA4 forward) loads.
        kv_outer_rows: Σ over key tiles of query rows visited — Q/dO rows a KV-outer loop
            (FA1 forward, FA2 backward) loads.
    """

    q_tiles: object
    kv_tiles: object
    tiles: object
    masked_tiles: object
    elements: object
    q_outer_cols: object
    kv_outer_rows: object
    #: most key tiles one query tile visits (``None``: ``kv_tiles``, as with no mask or the
    #: causal mask, where the last query tile sees every key)
    widest: object = None
    #: most query tiles visit one key tile (``None``: ``q_tiles``, as with no mask): the
    #: longest CTA of a KV-outer grid (a backward). Under the causal mask with
    #: ``N_q > N_k`` the first ``N_q − N_k`` query rows see no key, so even key tile 0 is
    #: visited by fewer than ``q_tiles``.
    tallest: object = None


def visits(seqlen_q, seqlen_k, block_r, block_c, causal: bool, offset=None) -> TileVisits:
    """Tile-visit counts for an ``N_q x N_k`` score matrix in ``B_r x B_c`` tiles;
    ``offset``: where the causal diagonal sits (query ``i`` sees key ``j ≤ i + offset``),
    ``N_k − N_q`` unless given — the call's own lengths' when ``N_q`` and ``N_k`` have been
    rounded up to whole tiles (``base.whole_tile_dims``), as the kernels place the mask."""
    t_r, t_c = cdiv(seqlen_q, block_r), cdiv(seqlen_k, block_c)
    if not causal:
        return TileVisits(t_r, t_c, t_r * t_c, 0 * t_r, seqlen_q * seqlen_k,
                          t_r * seqlen_k, t_c * seqlen_q)
    if offset is None:
        offset = seqlen_k - seqlen_q      # query i sees key j iff j <= i + offset
    pad = t_c * block_c - seqlen_k        # missing columns of the last key tile
    # Q-outer: a full query tile m visits ⌊((m+1)·B_r + offset - 1)/B_c⌋ + 1 key tiles
    # (clamped to [0, T_c]); the last query tile always visits all T_c.
    full, saturated = clamped_floor_sum(t_r - 1, block_r, block_r + offset - 1 + block_c,
                                        block_c, t_c)
    full_cols = block_c * full - pad * saturated
    last_rows = seqlen_q - (t_r - 1) * block_r
    tiles = full + t_c
    # KV-outer: key tile n is first seen by query tile clamp(⌊(n·B_c - offset)/B_r⌋, 0, T_r-1);
    # every key tile is seen by the last query row (bottom-right alignment).
    first_q, _ = clamped_floor_sum(t_c, block_c, -offset, block_r, t_r - 1)
    # Unmasked tiles per query tile m: non-last key tiles with (n+1)·B_c <= m·B_r + offset + 1,
    # plus the last key tile when m·B_r >= N_q - 1.
    unmasked, _ = clamped_floor_sum(t_r, block_r, offset + 1, block_c, t_c - 1)
    unmasked = unmasked + maximum(t_r - cdiv(seqlen_q - 1, block_r), 0)
    return TileVisits(
        q_tiles=t_r, kv_tiles=t_c, tiles=tiles, masked_tiles=tiles - unmasked,
        elements=block_r * full_cols + last_rows * seqlen_k,
        q_outer_cols=full_cols + seqlen_k,
        kv_outer_rows=t_c * seqlen_q - block_r * first_q,
        # key tile 0 is first seen by the query tile holding row N_q − N_k (every row from
        # it on sees key 0); with N_q <= N_k, by query tile 0
        tallest=t_r - fdiv(maximum(-offset, 0), block_r),
    )


#: Largest number of query tiles :func:`banded_visits` enumerates (a window, a sliding band
#: or packed GQA rows with a mask). Beyond it predictions raise instead of looping for long.
MAX_ENUMERATED_TILES = 2**22


def visible_pairs(seqlen_q, seqlen_k, left=None, right=None, group: int = 1):
    """Score elements a mask leaves visible: Σ over query rows of the keys they see.

    Query row ``i`` (position ``p = i // group`` when ``group`` query heads are packed
    into the rows, GQA packing) sees key ``j`` iff ``p + off − left <= j <= p + off + right``
    with ``off = N_k − N_q`` (bottom-right alignment); ``None`` is unbounded on that side
    (``right = 0`` alone is the causal mask). ``seqlen_q`` counts positions, not packed rows.
    A closed form (ints, numpy arrays or sympy): Σ clamp(p + off + right + 1, 0, N_k) −
    Σ clamp(p + off − left, 0, N_k), both :func:`clamped_floor_sum`, times ``group``.
    """
    off = seqlen_k - seqlen_q
    if right is None:
        upper = seqlen_q * seqlen_k
    else:
        upper, _ = clamped_floor_sum(seqlen_q, 1, off + right + 1, 1, seqlen_k)
    if left is None:
        lower = 0
    else:
        lower, _ = clamped_floor_sum(seqlen_q, 1, off - left, 1, seqlen_k)
    return group * (upper - lower)


def banded_visits(seqlen_q, seqlen_k, block_r, block_c, left=None, right=None,
                  group: int = 1, rows=None, offset=None) -> TileVisits:
    """Tile-visit counts for any band mask ``[p + off − left, p + off + right]`` (see
    :func:`visible_pairs`), by enumerating the query tiles (one numpy pass; exact).

    The tile range of query tile ``m`` follows flash_attn.cute's ``BlockInfo``
    (``get_n_block_min_max``): from the key tile of the first row's leftmost visible key to
    the key tile of the last row's rightmost one; a visited tile is *masked* when some of its
    elements inside the matrix are not visible. With ``group > 1`` the rows are the packed
    (position, head) rows of GQA packing: ``N_q · group`` rows, position ``row // group``;
    ``rows`` caps them where whole-tile padding has rounded the packed rows up to a count
    that is not a multiple of ``group`` (``⌈rows / group⌉ · group`` would add a query tile
    the kernel never runs); ``offset`` the band's diagonal, ``off`` (as :func:`visits`).

    Raises:
        PerfsimError: more than :data:`MAX_ENUMERATED_TILES` query tiles.
    """
    from perfsim.errors import PerfsimError

    rows = seqlen_q * group if rows is None else min(rows, seqlen_q * group)
    t_r, t_c = cdiv(rows, block_r), cdiv(seqlen_k, block_c)
    if t_r > MAX_ENUMERATED_TILES:
        raise PerfsimError(f"a windowed or packed mask over {t_r} query tiles (seqlen_q "
                           f"{seqlen_q} x {group} packed heads in {block_r}-row tiles): at "
                           f"most {MAX_ENUMERATED_TILES} are enumerated; give a shorter seqlen_q")
    off = seqlen_k - seqlen_q if offset is None else offset
    big = seqlen_q + seqlen_k + 1
    lft = big if left is None else left
    rgt = big if right is None else right
    m = np.arange(t_r, dtype=np.int64)
    r0 = m * block_r
    r1 = np.minimum(r0 + block_r, rows) - 1
    nrows = r1 - r0 + 1
    p0, p1 = r0 // group, r1 // group
    # visible key range of the tile's rows: [p0 + off − left, p1 + off + right] ∩ [0, N_k)
    k_lo = np.clip(p0 + off - lft, 0, seqlen_k)
    k_hi = np.clip(p1 + off + rgt, -1, seqlen_k - 1)
    n_lo = k_lo // block_c
    n_hi = np.where(k_hi >= k_lo, k_hi // block_c, n_lo - 1)
    count = np.maximum(n_hi - n_lo + 1, 0)
    cols = np.where(count > 0, np.minimum((n_hi + 1) * block_c, seqlen_k) - n_lo * block_c, 0)
    # fully visible key tiles for every row of the tile: c0 >= p1 + off − left and
    # c1 <= p0 + off + right, where c0 = n·B_c and c1 = min((n+1)·B_c, N_k) − 1
    need_lo = p1 + off - lft
    u_lo = np.maximum(-(-need_lo // block_c), n_lo)
    right_edge = p0 + off + rgt
    u_hi = np.minimum(np.where(right_edge >= seqlen_k - 1, t_c - 1,
                               (right_edge + 1) // block_c - 1), n_hi)
    unmasked = np.maximum(u_hi - u_lo + 1, 0)
    # KV-outer loads: Σ over visited (query tile, key tile) pairs of the query tile's rows
    kv_outer_rows = int((count * nrows).sum())
    # query tiles per key tile: both ends of the tile ranges grow with m, so the query
    # tiles visiting key tile n are those with n_lo <= n, less those with n_hi < n, and
    # the most visit a key tile where some range starts
    lo, hi = n_lo[count > 0], n_hi[count > 0]
    tallest = (int((np.searchsorted(lo, lo, "right") - np.searchsorted(hi, lo, "left")).max())
               if len(lo) else 0)
    return TileVisits(
        q_tiles=int(t_r), kv_tiles=int(t_c), tiles=int(count.sum()),
        masked_tiles=int((count - unmasked).sum()),
        elements=int((cols * nrows).sum()), q_outer_cols=int(cols.sum()),
        kv_outer_rows=kv_outer_rows, widest=int(count.max()) if len(count) else 0,
        tallest=tallest)


def mask_visits(seqlen_q, seqlen_k, block_r, block_c, causal: bool, window=(None, None),
                group: int = 1, rows=None, offset=None) -> TileVisits:
    """:func:`visits` for any mask: the closed forms for none and plain causal (ints, arrays,
    sympy), :func:`banded_visits` for a window or packed GQA rows under a mask (ints;
    numpy arrays element by element). ``rows``: the packed rows when whole-tile padding made
    them fewer than ``seqlen_q · group`` (:func:`banded_visits`); ``offset``: the mask's
    diagonal where the lengths were padded to whole tiles (:func:`visits`), never symbolic."""
    left, right = window
    if causal:
        right = 0 if right is None else min(right, 0)
    if left is None and (right is None or (right == 0 and group == 1)):
        if group == 1:
            return visits(seqlen_q, seqlen_k, block_r, block_c, right == 0, offset)
        if right is None:
            return visits(seqlen_q * group if rows is None else minimum(rows, seqlen_q * group),
                          seqlen_k, block_r, block_c, False)
    if is_symbolic(seqlen_q, seqlen_k, block_r, block_c, left, right):
        given = _given_integers(seqlen_q, seqlen_k, block_r, block_c, group,
                                *(x for x in (left, right) if x is not None))
        if given is None:
            # (closed forms: lengths never padded to whole tiles, so no cap on the rows)
            return _banded_visits_symbolic(seqlen_q, seqlen_k, block_r, block_c, left, right,
                                           group)
        import sympy

        exact = banded_visits(*given[:4], None if left is None else int(left),
                              None if right is None else int(right), given[4])
        return TileVisits(*(sympy.Integer(int(getattr(exact, f)))
                            for f in TileVisits.__dataclass_fields__))
    if (isinstance(seqlen_q, np.ndarray) or isinstance(seqlen_k, np.ndarray)
            or isinstance(rows, np.ndarray)):
        cap = seqlen_q * group if rows is None else rows
        off = seqlen_k - seqlen_q if offset is None else offset
        nq, nk, nr, no = np.broadcast_arrays(asarray(seqlen_q), asarray(seqlen_k),
                                             asarray(cap), asarray(off))
        # a sweep block repeats its (N_q, N_k) pairs along the other axes: enumerate each
        # distinct pair (and row cap, and diagonal) once
        pairs, inverse = np.unique(np.stack([nq.ravel(), nk.ravel(), nr.ravel(), no.ravel()],
                                            axis=1), axis=0, return_inverse=True)
        parts = [banded_visits(int(a), int(b), block_r, block_c, left, right, group, int(c),
                               int(o)) for a, b, c, o in pairs]
        inverse = inverse.reshape(-1)
        return TileVisits(*(np.array([getattr(p, f) for p in parts])[inverse].reshape(nq.shape)
                            for f in TileVisits.__dataclass_fields__))
    return banded_visits(int(seqlen_q), int(seqlen_k), block_r, block_c, left, right, group,
                         None if rows is None else int(rows),
                         None if offset is None else int(offset))


def _banded_visits_symbolic(seqlen_q, seqlen_k, block_r, block_c, left, right,
                            group: int = 1) -> TileVisits:
    """:func:`banded_visits` as sympy ``Sum``\\ s over the query tile index ``m`` (the same
    per-tile rule, with ``floor``/``Min``/``Max``), for closed forms (``perfsim.symbolic``).
    ``widest`` is the band's bound ``⌈(left + right + B_r) / B_c⌉ + 1`` (at most ``T_c``),
    ``tallest`` its transpose over the packed rows, ``⌈(left + right + B_c) · group / B_r⌉ + 1``
    (at most ``T_r``)."""
    import sympy
    from sympy import Max, Min, Sum, floor

    m = sympy.Dummy("m", integer=True, nonnegative=True)
    rows = seqlen_q * group
    t_r, t_c = cdiv(rows, block_r), cdiv(seqlen_k, block_c)
    off = seqlen_k - seqlen_q
    big = seqlen_q + seqlen_k + 1
    lft = big if left is None else left
    rgt = big if right is None else right
    r0 = m * block_r
    r1 = Min(r0 + block_r, rows) - 1
    nrows = r1 - r0 + 1
    p0, p1 = floor(r0 / group), floor(r1 / group)
    k_lo = Min(Max(p0 + off - lft, 0), seqlen_k)
    k_hi = Min(Max(p1 + off + rgt, -1), seqlen_k - 1)
    n_lo = floor(k_lo / block_c)
    n_hi = floor(k_hi / block_c)
    count = Max(n_hi - n_lo + 1, 0)
    cols = Max(Min((n_hi + 1) * block_c, seqlen_k) - n_lo * block_c, 0)
    u_lo = Max(-floor(-(p1 + off - lft) / block_c), n_lo)
    edge = p0 + off + rgt
    u_hi = Min(sympy.Piecewise((t_c - 1, edge >= seqlen_k - 1),
                               (floor((edge + 1) / block_c) - 1, True)), n_hi)
    unmasked = Max(u_hi - u_lo + 1, 0)

    def total(expr):
        return Sum(expr, (m, 0, t_r - 1))
    band = (left if left is not None else seqlen_k) + (right if right is not None else
                                                      seqlen_k)
    return TileVisits(
        q_tiles=t_r, kv_tiles=t_c, tiles=total(count), masked_tiles=total(count - unmasked),
        elements=total(cols * nrows), q_outer_cols=total(cols), kv_outer_rows=total(count * nrows),
        widest=Min(t_c, cdiv(band + block_r, block_c) + 1),
        tallest=Min(t_r, cdiv((band + block_c) * group, block_r) + 1))
