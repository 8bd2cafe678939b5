"""Split-KV and GQA packing for decode-shaped forward passes (flash-attn 2 and 3 sources).

* **Split-KV** (flash-decoding): the key range of each query tile is cut into ``num_splits``
  parts, each a CTA of its own that writes an un-normalised fp32 partial ``O`` and its
  logsumexp; a combine kernel reads the partials and writes ``O``. Total matmul and softmax
  work is unchanged; the grid grows ``num_splits``-fold, Q is loaded once per split and the
  partials cross memory twice.
* **GQA packing** (flash-attn 3 ``PackGQA``; flash-attn 2's ``seqlenq_ngroups_swapped`` for
  one query token): the ``H / H_kv`` query heads that share a K/V head become rows of one
  query tile, so each K/V tile is read once per K/V head instead of once per query head
  (:meth:`perfsim.algorithms.base.Dims.packed`).

The ``"auto"`` choices follow the references (facts read from their sources):

* flash-attn 2 ``csrc/flash_attn/flash_api.cpp`` ``set_params_splitkv``: key tile 256 / 128 / 64
  for head dims ≤ 64 / ≤ 128 / larger, query tiles of 64 rows, ``num_splits_heuristic`` with
  twice the SM count (two 128-thread CTAs per SM) and at most 128 splits; no splits with
  dropout. ``mha_fwd`` packs the heads of one query token (``seqlenq_ngroups_swapped``:
  ``N_q = 1``, ``H > H_kv``, no window, no dropout). Its variable-length entry point
  (``mha_varlen_fwd``) splits only those swapped calls; every other variable-length batch
  runs unsplit.
* flash-attn 3 ``hopper/heuristics.h``: ``should_pack_gqa`` (pack when the query tile's row
  use without packing is below 0.9 of the packed one; always for varlen) and its
  ``num_splits_heuristic`` (one split once the query tiles fill 80 % of the SMs — unless one
  K/V head exceeds a 50 MB L2 with many query tiles and no mask —, none for ≤ 4 key tiles,
  else the smallest count within 85 % of the best wave efficiency); ``hopper/flash_api.cpp``
  packs whenever it splits, and the grid counts the SMs once (one CTA per SM).
* flash-attn 4 (``flash_attn/cute/interface.py``, read for the H200 runs): packs whenever
  ``H > H_kv`` (except head dim 256 on sm100); ``num_splits_heuristic``: one split for ≤ 4
  key tiles, else ``max(1, min(SMs // total_mblocks, 128, key tiles))``, the key tiles of a
  window counting ``left + right + 1 + B_r`` keys; sm90 refuses splits
  (``assert not is_split_kv``).

Length: each rule is written twice, once per shape (:func:`decide`) and once for every
element of a sweep block at a time (:func:`choice_arrays`), and the two must be read side by
side; ``tests/test_sweep.py`` checks that they agree element by element.
"""

from __future__ import annotations

import functools

import numpy as np

from perfsim.algorithms.base import FP32_BYTES, STAT_BYTES, Dims, l2_hit_share
from perfsim.algorithms.softmax_costs import FMA_SLOTS
from perfsim.frozen import replace
from perfsim.kernel import KernelCost
from perfsim.mathops import cdiv, maximum, minimum, one_value

#: Most splits the references take (``num_splits <= 128``).
MAX_SPLITS = 128
#: L2 size flash-attn 3's heuristic assumes (``size_l2 = 50 * 1024 * 1024``).
FA3_ASSUMED_L2_BYTES = 50 * 1024 * 1024
#: Query rows one CTA of the combine kernel handles (flash-attn's ``flash_fwd_combine``
#: works on small row blocks; 16 rows, a stated approximation).
COMBINE_ROWS_PER_CTA = 16


def check_num_splits(v):
    """The ``num_splits`` option: ``"auto"`` or an integer in [1, MAX_SPLITS]."""
    if v == "auto":
        return v
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SPLITS:
        raise ValueError(f"num_splits must be 'auto' or an integer in [1, {MAX_SPLITS}], "
                         f"got {v!r}")
    return v


def check_pack_gqa(v):
    """The ``pack_gqa`` option: ``True``, ``False`` or ``"auto"``."""
    if v == "auto" or isinstance(v, bool):
        return v
    raise ValueError(f"pack_gqa must be true, false or 'auto', got {v!r}")


def _eligible(n_blocks: int, splits: int) -> bool:
    return splits == 1 or cdiv(n_blocks, splits) != cdiv(n_blocks, splits - 1)


@functools.lru_cache(maxsize=1024)
def _best_wave_split(mblocks: int, slots: int, n_blocks: int, max_splits: int,
                     filtered: bool = True) -> int:
    """The smallest eligible split count whose wave efficiency is within 85 % of the best
    (:func:`_best_wave_split_arrays` on one element). A function of its integers alone,
    kept for the last 1024 of them (a serving loop asks the same shapes again)."""
    return int(_best_wave_split_arrays(np.array([mblocks]), slots, np.array([n_blocks]),
                                       max_splits, filtered)[0])


#: Results of :func:`_best_wave_split_arrays` by ``(slots, max_splits, filtered)``: the sorted keys
#: ``mblocks · 2^32 + n_blocks`` and their split counts. A sweep asks the scan of a block's
#: pairs to choose its parts (``perfsim.sweep._split_parts``), then of each split part's
#: pairs again when the part is evaluated: the second asking is a lookup.
_SCAN_MEMO: dict = {}
#: Pairs kept per ``(slots, max_splits)`` (16 bytes each; past it the memo of that key starts
#: again, and one call's pairs beyond it are not kept), and keys kept (past it: all cleared).
_SCAN_MEMO_PAIRS = 1 << 20
_SCAN_MEMO_KEYS = 64


def _best_wave_split_arrays(mblocks, slots: int, n_blocks, max_splits: int,
                            filtered: bool = True):
    """flash-attn 2's and 3's wave scan for arrays of ``mblocks`` (query tiles of the grid)
    and ``n_blocks`` (key tiles): for each element, the smallest eligible split count
    (``filtered``, flash-attn 2's ``is_split_eligible``: ``1`` or one that changes
    ``⌈n_blocks / splits⌉``; flash-attn 3's hopper/heuristics.h scores every count;
    at most ``min(max_splits, slots,
    n_blocks)``) whose wave efficiency ``waves / ⌈waves⌉``, ``waves = mblocks · splits /
    slots``, is within 85 % of the best; 1 where none is eligible. Pairs scanned before for
    the same ``slots`` and ``max_splits`` are looked up (:data:`_SCAN_MEMO`); the others are
    scanned, every candidate count at once, in row blocks that bound memory."""
    mblocks = np.asarray(mblocks, dtype=np.int64).ravel()
    n_blocks = np.asarray(n_blocks, dtype=np.int64).ravel()
    if len(mblocks) < 64 or not (0 <= mblocks.min() and mblocks.max() < 1 << 31
                                 and 0 <= n_blocks.min() and n_blocks.max() < 1 << 32):
        return _scan_waves(mblocks, slots, n_blocks, max_splits, filtered)
    keys = (mblocks << 32) | n_blocks
    out = np.empty(len(keys), dtype=np.int64)
    memo_key = (slots, max_splits, bool(filtered))
    memo = _SCAN_MEMO.get(memo_key)
    missing = np.ones(len(keys), bool)
    if memo is not None:
        known, best = memo
        at = np.minimum(np.searchsorted(known, keys), len(known) - 1)
        hit = known[at] == keys
        out[hit] = best[at[hit]]
        missing = ~hit
    if missing.any():
        new_keys = keys[missing]
        new = _scan_waves(mblocks[missing], slots, n_blocks[missing], max_splits,
                          filtered)
        out[missing] = new
        if len(new_keys) > _SCAN_MEMO_PAIRS:
            return out
        if memo is not None and len(memo[0]) + len(new_keys) <= _SCAN_MEMO_PAIRS:
            new_keys, new = np.concatenate([memo[0], new_keys]), np.concatenate([memo[1], new])
        order = np.argsort(new_keys, kind="stable")
        new_keys, new = new_keys[order], new[order]
        first = np.ones(len(new_keys), bool)
        first[1:] = new_keys[1:] != new_keys[:-1]
        if memo_key not in _SCAN_MEMO and len(_SCAN_MEMO) >= _SCAN_MEMO_KEYS:
            _SCAN_MEMO.clear()
        _SCAN_MEMO[memo_key] = (new_keys[first], new[first])
    return out


def _scan_waves(mblocks, slots: int, n_blocks, max_splits: int, filtered: bool = True):
    """:func:`_best_wave_split_arrays`' scan itself, without the memo."""
    out = np.ones(len(mblocks), dtype=np.int64)
    counts = np.arange(1, max_splits + 1, dtype=np.int64)[None, :]
    for lo in range(0, len(mblocks), 8192):
        m = np.asarray(mblocks[lo:lo + 8192], dtype=np.int64)[:, None]
        n = np.asarray(n_blocks[lo:lo + 8192], dtype=np.int64)[:, None]
        limit = np.minimum(min(max_splits, slots), n)
        previous = np.maximum(counts - 1, 1)
        eligible = ((counts == 1) | (-(-n // counts) != -(-n // previous)) if filtered
                    else True)
        valid = (counts <= limit) & eligible
        waves = m * counts / slots
        with np.errstate(invalid="ignore", divide="ignore"):    # (no grid: m = 0)
            eff = np.where(valid, waves / np.ceil(waves), -np.inf)
        best = np.maximum(eff.max(axis=1), 0.0)[:, None]
        ok = valid & (eff >= 0.85 * best)
        out[lo:lo + 8192] = np.where(ok.any(axis=1), ok.argmax(axis=1) + 1, 1)
    return out


def fa2_window_unbounded(window_given, n_k):
    """Whether flash-attn 2 runs a call with no window (True, or a boolean array over ``n_k``):
    ``mha_fwd`` (``csrc/flash_attn/flash_api.cpp``) sets a window side to −1 only where it
    is at least ``seqlen_k``, and swaps a decode step's query heads into rows
    (``seqlenq_ngroups_swapped``) only when both sides are then −1 — a window given with a
    side under the key count keeps the heads apart, even one that hides no key (a right side
    of 0 for one query at the end)."""
    unbounded = True
    for side in window_given:
        if side is not None:
            unbounded = unbounded & (np.asarray(n_k) <= side)
    return unbounded


def fa2_num_splits(mblocks: int, sm_count: int, n_blocks: int) -> int:
    """flash-attn 2's ``num_splits_heuristic`` (called with ``2 × SMs`` slots)."""
    slots = 2 * sm_count
    if mblocks >= 0.8 * slots:
        return 1
    return _best_wave_split(mblocks, slots, n_blocks, MAX_SPLITS)


def fa3_num_splits(mblocks: int, sm_count: int, n_blocks: int, m_blocks: int,
                   kv_head_bytes: int, masked: bool) -> int:
    """flash-attn 3's ``num_splits_heuristic`` (one CTA slot per SM; hopper/heuristics.h
    scores every split count up to ``min(128, SMs, n_blocks)``, without flash-attn 2's
    ``is_split_eligible`` filter)."""
    if mblocks >= 0.8 * sm_count:
        if (kv_head_bytes > FA3_ASSUMED_L2_BYTES and m_blocks >= 2 * sm_count
                and not masked):
            return min(cdiv(kv_head_bytes, FA3_ASSUMED_L2_BYTES), MAX_SPLITS)
        return 1
    if n_blocks <= 4:
        return 1
    return _best_wave_split(mblocks, sm_count, n_blocks, MAX_SPLITS, False)


def fa3_keys_loaded(dims: Dims, block_m, n_q=None, n_k=None):
    """The keys flash-attn 3's ``get_num_splits`` counts its key tiles over
    (``seqlen_k_loaded``, hopper/flash_api.cpp): every key, or under a local window (the
    launch's ``is_local``: a window side set after ``base.effective_mask``) at most
    ``left + right + 1 + kBlockM``, a side left open counting as ``set_params_fprop`` fills
    it (``left = N_k − 1``, ``right = N_q − 1``; a causal call's right edge is 0).
    ``n_q``, ``n_k``: the lengths (arrays in a sweep; ``dims``' own by default)."""
    n_q = dims.N_q if n_q is None else n_q
    n_k = dims.N_k if n_k is None else n_k
    left, right = dims.window
    if left is None and right is None:
        return n_k
    left = n_k - 1 if left is None else left
    right = (0 if dims.causal else n_q - 1) if right is None else right
    return maximum(0, minimum(n_k, left + right + 1 + block_m))


def cute_num_splits(mblocks: int, sm_count: int, n_blocks: int) -> int:
    """flash-attn 4's ``num_splits_heuristic`` (``flash_attn/cute/interface.py``)."""
    if n_blocks <= 4:
        return 1
    return max(1, min(sm_count // max(mblocks, 1), MAX_SPLITS, n_blocks))


def should_pack_gqa(varlen: bool, seqlen_q: int, group: int, block_m: int) -> bool:
    """flash-attn 3's ``should_pack_gqa``."""
    if varlen:
        return True
    def use(rows):
        return rows / (cdiv(rows, block_m) * block_m)
    return use(seqlen_q) < 0.9 * use(seqlen_q * group)


def any_split(splits) -> bool:
    """Whether a forward is split (``Dims.splits`` > 1; on arrays, any element)."""
    return splits > 1 if type(splits) is int else bool(np.any(np.asarray(splits) > 1))


def split_forward(cost: KernelCost, dims: Dims, splits: int) -> KernelCost:
    """A forward kernel's cost with its key range cut into ``splits`` CTAs per query tile.

    Changes: the grid; Q loaded once per split (the extra loads hit L2: the splits of a
    query tile run together); each row normalised and stored per split, as an fp32 partial
    ``O`` plus its logsumexp instead of ``O`` in the input dtype (those writes counted to
    HBM, a stated simplification: small decode partials may stay in L2).
    """
    if not any_split(splits):
        return cost
    e, rows = dims.e, dims.B * dims.H * dims.N_q
    extra_q = (splits - 1) * e * rows * dims.d
    writes = rows * (splits * FP32_BYTES * (dims.d_v + 1) - (e * dims.d_v + STAT_BYTES))
    fixed = {"fp32": FMA_SLOTS * (splits - 1) * rows * dims.d_v,
             "smem": (splits - 1) * 2 * e * rows * dims.d}
    executed = {u: v + fixed.get(u, 0) for u, v in cost.sm_demand().items()}
    return cost.with_terms(
        {"l2_hit/Q once per split": extra_q,
         "hbm_write/fp32 partials of O and logsumexp per split": writes,
         "fp32/normalise each split's partial": fixed["fp32"],
         "smem_read/Q once per split": fixed["smem"] / 2,
         "smem_write/Q once per split": fixed["smem"] / 2},
        grid=cost.grid * splits, executed=executed,
        launch={**cost.launch, "num_splits": splits})


def combine_kernel(dims: Dims, splits: int, name: str, gpu) -> KernelCost:
    """The split-KV combine kernel: per query row read ``splits`` fp32 partials and
    logsumexps, rescale and sum them (exp of each logsumexp difference), write ``O`` and the
    logsumexp. The partials were written by the kernel just before: where they fit in the
    usable L2 of ``gpu`` they are read from there (``base.l2_filtered``'s rule; their
    write-back to HBM stays counted in the split kernel), else from HBM."""
    rows = dims.B * dims.H * dims.N_q
    partials = rows * splits * FP32_BYTES * (dims.d_v + 1)
    # all of them live at once, written by the kernel before: l2_filtered's step for written
    # data (its own live set is capped at the bytes a kernel reads from HBM, none here, which
    # read every partial from L2 however large)
    hits = partials * l2_hit_share(partials, gpu, gpu.l2_usable_fraction, written=True)
    hbm = partials - hits
    return KernelCost(
        name=name, grid=cdiv(rows, COMBINE_ROWS_PER_CTA), warps_per_cta=4,
        # per part and row: d_v FMAs of the weighted sum (2 slots each) and the max, the
        # logsumexp difference and the weight (2 FMA-pipe instructions and an ALU max)
        fp32_flops=rows * splits * FMA_SLOTS * (dims.d_v + 2), alu_ops=rows * splits,
        exp_ops=rows * splits, hbm_read_bytes=hbm, l2_hit_bytes=hits,
        hbm_write_bytes=rows * (dims.e_o * dims.d_v + STAT_BYTES),
        overlap=(("hbm",), ("fp32", "mufu")))


def decide(dims: Dims, gpu, num_splits, pack_gqa, rule: str, block_m: int, block_n: int,
           can_split: bool = True, pack_always=False) -> Dims:
    """The forward dims with the packing and split choice applied (``"auto"``: the
    reference's rule, ``rule`` = ``"fa2"``, ``"fa3"`` or ``"cute"``), as ``Dims.group`` /
    ``Dims.splits``. ``pack_always``: the query heads are packed wherever ``H > H_kv``,
    whatever ``pack_gqa`` says (flash-attn 3's kernel for a paged cache it gathers without
    TMA, ``PackGQA_ || ... || PagedKVNonTMA``; a bool, an array in sweeps).
    Symbolic dims keep one split and no packing."""
    if dims.symbolic:
        return dims
    if any(isinstance(x, np.ndarray) for x in (dims.B, dims.H, dims.H_kv, dims.N_q, dims.N_k)):
        return _decide_arrays(dims, gpu, num_splits, pack_gqa, rule, block_m, block_n,
                              can_split, pack_always)
    group = dims.H // dims.H_kv
    if bool(pack_always):
        pack = group > 1
    elif pack_gqa == "auto":
        if rule == "fa2":
            pack = bool(dims.N_q == 1 and group > 1 and dims.window == (None, None)
                        and fa2_window_unbounded(dims.window_given, dims.N_k)
                        and not dims.dropout_p)
        elif rule == "cute":
            pack = group > 1 and not (max(dims.d, dims.d_v) > 192
                                      and gpu.native_tensor_family == "tcgen05")
        else:
            pack = group > 1 and (num_splits not in ("auto", 1) or should_pack_gqa(
                dims.seqlens is not None, dims.N_q, group, block_m))
    else:
        pack = bool(pack_gqa) and group > 1
    out = dims.packed() if pack else dims
    if not can_split or dims.bwd and not dims.fwd:
        return out
    if num_splits == "auto":
        # flash-attn 2 splits whenever there is no dropout (set_params_splitkv: "SplitKV is
        # not implemented for dropout"); a window does not stop it (only the head packing).
        # Its variable-length entry point splits only the calls whose query heads it swaps
        # into rows (mha_varlen_fwd calls set_params_splitkv under seqlenq_ngroups_swapped:
        # one query token, H > H_kv, no window, no dropout; PyTorch's copy also for a paged
        # cache, which SDPA does not pass)
        if rule == "fa2" and (dims.dropout_p or dims.seqlens is not None and not (
                dims.N_q == 1 and group > 1 and dims.window == (None, None))):
            splits = 1
        else:
            n_blocks = cdiv(dims.N_k, block_n)
            m_blocks = cdiv(out.N_q, block_m)
            mblocks = dims.B * out.H * m_blocks
            if rule == "fa2":
                splits = fa2_num_splits(mblocks, gpu.sm_count, n_blocks)
            elif rule == "cute":
                left, right = dims.window
                if left is not None and right is not None:
                    n_blocks = min(n_blocks, cdiv(left + right + 1 + block_m, block_n))
                splits = cute_num_splits(mblocks, gpu.sm_count, n_blocks)
            else:
                n_blocks = cdiv(fa3_keys_loaded(dims, block_m), block_n)
                splits = fa3_num_splits(mblocks, gpu.sm_count, n_blocks, m_blocks,
                                        dims.N_k * (dims.d + dims.d_v) * dims.e_kv,
                                        dims.masked)
    else:
        # taken as given: splits past the key tiles launch CTAs that find no key and exit
        splits = int(num_splits)
    if splits > 1 and rule == "fa3" and pack_gqa == "auto" and group > 1:
        out = dims.packed()            # flash-attn 3 packs whenever it splits
    return replace(out, splits=max(splits, 1))


def _decide_arrays(dims: Dims, gpu, num_splits, pack_gqa, rule: str, block_m: int,
                   block_n: int, can_split: bool, pack_always=False) -> Dims:
    """:func:`decide` on array dims (sweeps): every element's choice is :func:`decide`'s for
    that element alone (:func:`choice_arrays`), and one kernel structure must serve the whole
    block: one packing group, and either no element split or every element split (the
    split count itself may differ by element, ``Dims.splits`` an array). ``perfsim.sweep``
    groups a block's elements so (``sweep._choice_parts``).

    Raises:
        PerfsimError: a block that mixes packing groups, or split and unsplit elements.
    """
    from perfsim.errors import PerfsimError

    if num_splits != "auto" and pack_gqa is False:
        # the choice is fixed: no packing, ``num_splits`` parts everywhere (what the general
        # path below finds element by element; this path keeps the rows' values out of the
        # decision, so a traced evaluation, perfsim.compiled, holds for any rows)
        if not can_split or dims.bwd and not dims.fwd:
            return dims
        return replace(dims, splits=max(int(num_splits), 1))
    if num_splits != "auto" and pack_gqa is True and dims.group == 1:
        # fixed too: the query heads of a K/V head packed wherever there are several (what
        # choice_arrays finds for each element), one packing group per block — held by a
        # guard when traced (perfsim.fastpath runs split and packed rows so)
        g = one_value(np.maximum(dims.H // dims.H_kv, 1))
        if g is None:
            raise PerfsimError("the GQA packing choice differs across this block of rows "
                               "(perfsim.sweep evaluates each packing group apart)")
        out = replace(dims, H=dims.H_kv, N_q=dims.N_q * g, group=g) if g > 1 else dims
        if not can_split or dims.bwd and not dims.fwd:
            return out
        return replace(out, splits=max(int(num_splits), 1))
    splits, group = choice_arrays(dims, gpu, num_splits, pack_gqa, rule, block_m, block_n,
                                  can_split, pack_always=pack_always)
    groups = np.unique(group)
    if len(groups) != 1:
        raise PerfsimError("the GQA packing choice differs across this block of rows "
                           "(perfsim.sweep evaluates each packing group apart)")
    g = int(groups[0])
    out = replace(dims, H=dims.H_kv, N_q=dims.N_q * g, group=g) if g > 1 and dims.group == 1 \
        else dims
    if not can_split or dims.bwd and not dims.fwd:
        return out
    first = int(splits.flat[0])
    if np.all(splits == first):
        return replace(out, splits=first)
    if np.any(splits == 1):
        raise PerfsimError("this block of rows mixes split and unsplit forwards "
                           "(perfsim.sweep evaluates them apart)")
    return replace(out, splits=splits)


def choice_arrays(dims: Dims, gpu, num_splits, pack_gqa, rule: str, block_m: int,
                  block_n: int, can_split: bool = True, pack_always=False):
    """:func:`decide` for every element of array dims at once (sweeps): ``(splits, group)``,
    integer arrays of the broadcast shape of ``B, H, H_kv, N_q, N_k`` — the split count and
    the packing group (``H / H_kv`` where the heads are packed, else 1) that :func:`decide`
    picks for that element alone (``tests/test_sweep.py`` checks them element by element).
    Fixed-length rows only (the sweep has no variable-length batches). The wave-efficiency
    scan (flash-attn 2 and 3) runs once per distinct ``(query tiles, key tiles)`` pair."""
    # each field at its own shape (a sweep block's (b, 1, 1), (1, h, 1), (1, 1, s)): the work
    # on one axis alone is done once per value, numpy broadcasting the rest
    B, H, H_kv, N_q, N_k = (np.asarray(x, dtype=np.int64) for x in (
        dims.B, dims.H, dims.H_kv, dims.N_q, dims.N_k))
    shape = np.broadcast_shapes(B.shape, H.shape, H_kv.shape, N_q.shape, N_k.shape,
                                np.shape(block_m), np.shape(block_n))
    # (an element whose H_kv does not divide H is refused by the evaluation; its group of 0
    # must not raise here)
    group = np.maximum(H // H_kv, 1)
    gqa = group > 1
    if pack_gqa == "auto":
        if rule == "fa2":
            pack = ((N_q == 1) & gqa & fa2_window_unbounded(dims.window_given, N_k)
                    if dims.window == (None, None) and not dims.dropout_p
                    else np.zeros(gqa.shape, bool))
        elif rule == "cute":
            pack = gqa & (not (max(dims.d, dims.d_v) > 192
                               and gpu.native_tensor_family == "tcgen05"))
        elif num_splits not in ("auto", 1):
            pack = gqa
        else:
            def use(rows):
                return rows / (-(-rows // block_m) * block_m)
            pack = gqa & (use(N_q) < 0.9 * use(N_q * group))
    else:
        pack = gqa & bool(pack_gqa)
    pack = pack | (gqa & np.asarray(pack_always, dtype=bool))
    rows_q = np.where(pack, N_q * group, N_q)
    heads = np.where(pack, H_kv, H)
    splits = np.ones(shape, np.int64)
    if can_split and not (dims.bwd and not dims.fwd):
        if num_splits != "auto":
            splits[...] = int(num_splits)
        elif not (rule == "fa2" and dims.dropout_p):
            n_blocks = -(-N_k // block_n)
            m_blocks = -(-rows_q // block_m)
            mblocks = B * heads * m_blocks
            sms = gpu.sm_count
            if rule == "cute":
                left, right = dims.window
                if left is not None and right is not None:
                    n_blocks = np.minimum(n_blocks, -(-(left + right + 1 + block_m) // block_n))
                fill = np.maximum(1, np.minimum(np.minimum(sms // np.maximum(mblocks, 1),
                                                           MAX_SPLITS), n_blocks))
                splits = np.where(n_blocks <= 4, 1, fill)
            else:
                slots = 2 * sms if rule == "fa2" else sms
                scan = mblocks < 0.8 * slots
                if rule != "fa2":
                    kv_head_bytes = N_k * (dims.d + dims.d_v) * dims.e_kv
                    big = ((~scan) & (kv_head_bytes > FA3_ASSUMED_L2_BYTES)
                           & (m_blocks >= 2 * sms) & (not dims.masked))
                    splits = np.where(big, np.minimum(-(-kv_head_bytes // FA3_ASSUMED_L2_BYTES),
                                                      MAX_SPLITS), 1)
                    n_blocks = -(-fa3_keys_loaded(dims, block_m, N_q, N_k) // block_n)
                    scan = scan & (n_blocks > 4)
                if scan.any():
                    # one key per (query tiles, key tiles) pair: the scanned query tiles are
                    # fewer than 2 x SMs; the key tiles are taken at most 2^20, which gives the
                    # same choice (from 128 x 127 key tiles on every count up to 128 is
                    # eligible, and the limit is the 128 splits)
                    scan = np.broadcast_to(scan, shape)
                    pair = (np.broadcast_to(mblocks, shape)[scan] * (1 << 32)
                            + np.minimum(np.broadcast_to(n_blocks, shape)[scan], 1 << 20))
                    uniq, inverse = np.unique(pair, return_inverse=True)
                    best = _best_wave_split_arrays(uniq >> 32, slots, uniq & 0xFFFFFFFF,
                                                   MAX_SPLITS, rule == "fa2")
                    splits = np.array(np.broadcast_to(splits, shape), dtype=np.int64)
                    splits[scan] = best[inverse.ravel()]
    splits = np.broadcast_to(np.asarray(splits, dtype=np.int64), shape)
    if rule == "fa3" and pack_gqa == "auto":
        pack = pack | ((splits > 1) & gqa)          # flash-attn 3 packs whenever it splits
    return (np.array(np.maximum(splits, 1)),
            np.array(np.broadcast_to(np.where(pack, group, 1), shape)))


def varlen_batch_dims(dims: Dims) -> Dims:
    """A variable-length batch as the launch sees it: ``B`` sequences, the longest lengths
    (``max_seqlen_q``/``max_seqlen_k`` of the ``cu_seqlens`` kernels), ``seqlens`` kept so the
    rules know it is varlen."""
    q = max(p[0] for p in dims.seqlens)
    k = max(p[1] for p in dims.seqlens)
    return replace(dims, B=len(dims.seqlens), N_q=q, N_k=k, phase="fwd")


def frozen_choice(algo, fdims: Dims):
    """``algo`` with the split and packing choice of ``fdims`` (from ``decide``) fixed."""
    return type(algo)(**{**algo.model_dump(), "num_splits": max(int(fdims.splits), 1),
                         "pack_gqa": fdims.group > 1})
