"""Decode, sliding-window, varlen and paged-KV attention calls, forward only, timed like
:mod:`perfsim.validate.external` (same row schema, same timing and NVML sampling).

    python -m perfsim.validate.external_decode --out DIR --limit-seconds S
        [--grid main|holdout|mask-holdout|paged-holdout|gqa-holdout]
        [--kinds decode window varlen paged] [--retry-errors]
    python -m perfsim.validate.external_decode --plan [--grid ...] [--kinds ...]  # no GPU
    python -m perfsim.validate.external_decode --summary DIR/results.jsonl

Rows go to ``DIR/results.jsonl`` (fsynced per row, resumable: keys already stored are skipped);
each row is measured inside try/except, so a failure is an ``error`` / ``unsupported`` /
``oom`` row and the run goes on; after a fatal CUDA error the run stops with exit code 3 (run
again: it resumes). A global time limit applies (a row starts only if the time left exceeds
its reserve, as in ``external_run.py``).

Row fields: those of ``external.py`` rows (``key``, the :class:`Shape` fields with
``phase = 'fwd'``, ``impl``, ``algorithm``, ``status``, ``reason``, ``measured_s``,
``measured_p20_s``, ``measured_p80_s``, NVML ``sm_clock_mean_hz`` / ``power_mean_w`` ...,
``correctness_rel_error``, ``launch_config`` with the versions) plus ``kind``
(decode | window | varlen | paged), ``window_left`` / ``window_right`` (None = unbounded),
``num_splits``, ``pack_gqa`` (the requested value, None = the library default), ``page_size``,
``seqlens_q`` / ``seqlens_k`` (lists, varlen only), ``io_bytes`` (Q, K, V read once and O
written once) and ``achieved_gbps``. For varlen rows ``batch`` is the number of sequences and
``seqlen_q`` / ``seqlen_k`` the longest ones. Causal masks are bottom-right aligned (query
``i`` sees key ``j <= i + N_k - N_q``); a window ``(l, r)`` lets query ``i`` see keys
``i + N_k - N_q - l <= j <= i + N_k - N_q + r`` (flash-attn's convention).

Implementations (``impl``; ``algorithm`` adds the variant, e.g. ``cute[pack_gqa=False]``):

* ``sdpa_flash``, ``sdpa_cudnn``, ``sdpa_efficient``: ``F.scaled_dot_product_attention``
  inside ``sdpa_kernel([backend])``, ``enable_gqa=True`` for GQA, inputs (B, H, N, d)
  contiguous. Causal with ``N_q < N_k`` (bottom-right): ``sdpa_flash`` gets
  ``torch.nn.attention.bias.causal_lower_right`` (its dispatch calls the flash op with
  ``is_causal=True``, which is lower-right there; the row is ``unsupported`` unless
  ``can_use_flash_attention`` holds, so it never silently runs another kernel); ``sdpa_cudnn``
  and ``sdpa_efficient`` get a boolean lower-right ``attn_mask`` of shape (N_q, N_k).
* ``cute``: flash-attn-4 ``flash_attn.cute.flash_attn_func`` (dense decode, window) or
  ``flash_attn_varlen_func`` (``cu_seqlens_q/k`` + ``max_seqlen_q/k``; paged: ``page_table``
  + ``seqused_k``), inputs (B, N, H, d). ``pack_gqa`` None / True / False and ``num_splits``
  are passed through; the resolved values and the tile (``interface._get_fwd_config``) are
  recorded in ``launch_config``. On sm90 ``num_splits > 1`` (explicit, or chosen by the
  heuristic when ``num_splits = 0``) is refused (``SplitKV not supported on SM 9.0``): such rows
  are recorded ``unsupported`` with the library's message.
* ``flex``: ``torch.compile(flex_attention, dynamic=False)`` (``backends._compiled_flex``,
  recompile limits raised before the grid) with a sliding-window ``BlockMask`` built once per
  row outside the timed calls.

Grid (:func:`plan`; H = 32, d = 128, bf16 unless said):

* decode: N_q in {1, 4, 16}, N_k in {1024, 8192, 32768, 131072}, B in {1, 8, 64},
  H_kv in {8, 32}; N_q = 16 both non-causal and causal, the others non-causal. Subsample
  (:data:`DECODE_SUBSAMPLE`): B = 1 every N_k and N_q; B = 8 N_k in {8192, 131072} and
  N_q in {1, 16}; B = 64 N_k in {1024, 32768, 131072} and N_q in {1, 16}; at B = 8 and 64 the
  MHA case (H_kv = 32) only with N_q = 1. Shapes whose K+V cache exceeds
  :data:`MEM_CAP_BYTES` (40 GB) are left out (B = 64, H_kv = 32, N_k = 131072). Per shape:
  the three SDPA backends and ``cute`` (default pack_gqa); for GQA also
  ``cute[pack_gqa=False]``, and at B = 1 ``cute[pack_gqa=True]`` (equal to the default on sm90,
  measured as a check). ``cute`` with ``num_splits = 0`` (the split heuristic) and
  ``num_splits = 4`` on :data:`SPLIT_SHAPES` records what sm90 accepts.
* window: flash-attn-4 causal with ``window_size = (1023, 0)`` and ``(255, 0)`` and the plain
  causal call as baseline on :data:`WINDOW_SHAPES` (B 1..4, H 16..32, N in {4096, 16384,
  65536}); FlexAttention with the same sliding window on :data:`FLEX_WINDOW_SUBSET`.
* varlen: ``flash_attn_varlen_func`` on :data:`VARLEN_CASES` (ragged batches, causal and not,
  one chunked-prefill case with N_q < N_k per sequence).
* paged: decode N_q = 1, B = 64, H = 64, H_kv = 8, N_k in {32, 64, 128, 256, 1024, 4096} with
  ``page_size`` 256 (cp.async path on sm90: page != tile_n), 128 (= tile_n for d = 128: the
  TMA path) and 16 (N_k >= 1024 only), and the dense ``flash_attn_func`` call as baseline
  (``page_size`` None). Pages are a random permutation of the pool; ``seqused_k`` = N_k.

Hold-out grid (``--grid holdout``, :data:`HOLDOUT_CASES`; the HOLDOUT_* constants): shapes
none of which is in the main grid, same row schema and keys of the same form:

* decode: N_q in {1, 2, 8}, N_k in {2048, 16384, 65536}, B in {2, 16}, (H, H_kv) in
  {(64, 8), (16, 2), (32, 32)}, d = 128, non-causal, 6 of the 9 (N_q, N_k) per batch and head
  pair (:data:`HOLDOUT_DECODE_SKIP`); causal N_q = 8 on :data:`HOLDOUT_DECODE_CAUSAL`; d = 64
  on :data:`HOLDOUT_DECODE_D64`. Per shape ``cute`` (default pack_gqa), ``sdpa_flash``,
  ``sdpa_cudnn``, and ``sdpa_efficient`` when H == H_kv.
* window: ``cute`` plain causal, ``(511, 0)`` and ``(2047, 0)`` on
  :data:`HOLDOUT_WINDOW_SHAPES` (N in {8192, 32768}); flex ``(511, 0)`` on two of them.
* varlen: H = 16, H_kv in {16, 4}, seqlens (300, 2500, 6000) and (64,) * 16 + (8192,),
  causal and not.
* paged: B = 32, H = 32, H_kv = 4, N_q = 1, N_k in {48, 512, 2048, 8192}, page_size 128, 64
  and dense.

Correctness (before timing): every output element finite and the relative Frobenius error
against a float64 reference (:func:`reference_rows`, masks included) on the first and the last
(batch or sequence, kv-head group) slice, on all query rows when N_q <= 512 and on the first
and last 256 rows otherwise, within ``external.TOLERANCE``.

Estimated run time (:func:`estimate_plan_s`, CPU-side model of warm-up + timing + compile):
about 5 minutes for all kinds on an H200 (hold-out grid: under 4); see ``--plan``.

torch, pynvml and flash_attn are imported inside functions.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from perfsim.validate.shapes import Shape

KINDS = ("decode", "window", "varlen", "paged")
SDPA_BACKENDS = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION",
                 "sdpa_efficient": "EFFICIENT_ATTENTION"}
IMPLS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "cute", "flex")
HEADS, HEAD_DIM, DTYPE = 32, 128, "bf16"
#: K+V cache bytes above which a decode shape is left out of the grid.
MEM_CAP_BYTES = 40e9

DECODE_NQ = (1, 4, 16)
DECODE_NK = (1024, 8192, 32768, 131072)
DECODE_B = (1, 8, 64)
DECODE_KV_HEADS = (8, 32)
#: batch -> (N_k values, N_q values, N_q values measured for MHA H_kv = 32).
DECODE_SUBSAMPLE = {
    1: (DECODE_NK, (1, 4, 16), (1, 4, 16)),
    8: ((8192, 131072), (1, 16), (1,)),
    64: ((1024, 32768, 131072), (1, 16), (1,)),
}
#: (B, N_q, N_k, H_kv) decode shapes also run with num_splits 0 (heuristic) and 4.
SPLIT_SHAPES = ((1, 1, 32768, 8), (8, 1, 131072, 8), (64, 1, 32768, 8), (1, 16, 8192, 32))
SPLIT_VALUES = (0, 4)

#: (B, H, H_kv, N) of the window kind (self-attention N_q = N_k = N, causal).
WINDOW_SHAPES = ((4, 32, 32, 4096), (2, 32, 32, 16384), (1, 32, 8, 16384), (1, 16, 16, 65536))
WINDOWS = ((1023, 0), (255, 0))
#: (B, H, H_kv, N, window_left) run with FlexAttention's sliding-window block mask.
FLEX_WINDOW_SUBSET = ((4, 32, 32, 4096, 1023), (2, 32, 32, 16384, 1023),
                      (1, 16, 16, 65536, 1023), (2, 32, 32, 16384, 255))

#: (seqlens_q, seqlens_k, H_kv, causal values) of the varlen kind (H = 32, d = 128).
_RAGGED = (512, 4096, 1000, 7000)
_LONG_TAIL = (128,) * 32 + (16384,)
VARLEN_CASES = (
    (_RAGGED, _RAGGED, 32, (False, True)),
    (_LONG_TAIL, _LONG_TAIL, 32, (False, True)),
    (_RAGGED, _RAGGED, 8, (True,)),
    ((512, 512, 512, 512), (4096, 8192, 1024, 16384), 8, (True,)),  # chunked prefill
)

PAGED_B, PAGED_H, PAGED_HKV = 64, 64, 8
PAGED_NK = (32, 64, 128, 256, 1024, 4096)
#: page sizes per N_k (None: the dense flash_attn_func baseline).
PAGED_SIZES = (256, 128, None)
PAGED_SMALL_PAGE, PAGED_SMALL_PAGE_NK = 16, (1024, 4096)

# hold-out grid (``--grid holdout``): new shapes, none of them in the main grid above
HOLDOUT_DECODE_NQ = (1, 2, 8)
HOLDOUT_DECODE_NK = (2048, 16384, 65536)
HOLDOUT_DECODE_B = (2, 16)
#: (H, H_kv) pairs of the hold-out decode grid (d = 128 unless in HOLDOUT_DECODE_D64).
HOLDOUT_DECODE_HEADS = ((64, 8), (16, 2), (32, 32))
#: batch -> residue: the non-causal (N_q, N_k, (H, H_kv)) combination with indices (i, j, h)
#: is left out at that batch when (i + j + h) % 3 equals it (6 of the 9 (N_q, N_k) per batch
#: and head pair; every combination is measured at one batch at least).
HOLDOUT_DECODE_SKIP = {2: 2, 16: 0}
#: (B, H, H_kv, N_k) also measured causal with N_q = 8 (bottom-right).
HOLDOUT_DECODE_CAUSAL = ((2, 64, 8, 65536), (16, 16, 2, 2048), (16, 32, 32, 16384),
                         (2, 16, 2, 16384))
#: (B, H, H_kv, N_q, N_k) measured with d = 64 (non-causal).
HOLDOUT_DECODE_D64 = ((16, 64, 8, 1, 16384), (2, 16, 2, 8, 65536), (16, 32, 32, 2, 2048),
                      (2, 32, 32, 1, 65536))
#: (B, H, H_kv, N) of the hold-out window kind; its windows; its FlexAttention subset.
HOLDOUT_WINDOW_SHAPES = ((2, 32, 32, 8192), (1, 32, 4, 32768), (2, 16, 16, 32768))
HOLDOUT_WINDOWS = ((511, 0), (2047, 0))
HOLDOUT_FLEX_WINDOW_SUBSET = ((2, 32, 32, 8192, 511), (2, 16, 16, 32768, 511))
#: hold-out varlen: H = HOLDOUT_VARLEN_HEADS; (seqlens_q, seqlens_k, H_kv, causal values).
HOLDOUT_VARLEN_HEADS = 16
_RAGGED_HO = (300, 2500, 6000)
_LONG_TAIL_HO = (64,) * 16 + (8192,)
HOLDOUT_VARLEN_CASES = (
    (_RAGGED_HO, _RAGGED_HO, 16, (False, True)),
    (_LONG_TAIL_HO, _LONG_TAIL_HO, 16, (False, True)),
    (_RAGGED_HO, _RAGGED_HO, 4, (False, True)),
    (_LONG_TAIL_HO, _LONG_TAIL_HO, 4, (False, True)),
)
HOLDOUT_PAGED_B, HOLDOUT_PAGED_H, HOLDOUT_PAGED_HKV = 32, 32, 4
HOLDOUT_PAGED_NK = (48, 512, 2048, 8192)
HOLDOUT_PAGED_SIZES = (128, 64, None)

#: Where inputs are made (the tests run the wiring on "cpu" with a stand-in flash_attn).
DEVICE = "cuda"
#: Rows of the float64 check: all when N_q <= CHECK_ROWS, else the first and last half.
CHECK_ROWS = 512
FIRST_ROW_RESERVE_S = {"cute": 30.0, "flex": 40.0}
DEFAULT_FIRST_RESERVE_S, RESERVE_FACTOR, MIN_RESERVE_S = 10.0, 1.5, 4.0
#: Estimate (not a measurement): H200 HBM and dense bf16 rates, per-call and per-row overheads,
#: compile seconds per new kernel configuration (``cute``, ``flex``) or per shape (cuDNN graph).
EST_HBM_BPS, EST_FLOPS, EST_CALL_OVERHEAD_S = 3.3e12, 450e12, 8e-6
EST_ROW_OVERHEAD_S, EST_INIT_GBPS = 0.12, 1.0e12
EST_COMPILE_S = {"cute": 4.0, "flex": 8.0, "sdpa_cudnn": 0.2}


# --------------------------------------------------------------------------------------------
# the grid (pure Python)


@dataclass(frozen=True)
class Case:
    """One row: a shape (phase fwd), the kind, the implementation and its options."""

    kind: str
    shape: Shape
    impl: str
    window_left: int | None = None
    window_right: int | None = None
    num_splits: int = 1
    pack_gqa: bool | None = None
    page_size: int | None = None
    seqlens_q: tuple | None = None
    seqlens_k: tuple | None = None

    @property
    def label(self) -> str:
        """``impl`` plus the non-default options, e.g. ``cute[pack_gqa=False]``."""
        opts = []
        if self.pack_gqa is not None:
            opts.append(f"pack_gqa={self.pack_gqa}")
        if self.num_splits != 1:
            opts.append(f"num_splits={self.num_splits}")
        if self.window_left is not None or self.window_right is not None:
            opts.append(f"window=({self.window_left},{self.window_right})")
        if self.kind == "paged":
            opts.append(f"page={self.page_size}" if self.page_size else "dense")
        return self.impl + (f"[{','.join(opts)}]" if opts else "")

    @property
    def key(self) -> str:
        """``<kind>|<shape key>|<label>[|<seqlens>]``: unique per row."""
        key = f"{self.kind}|{self.shape.key}|{self.label}"
        if self.seqlens_q is not None:
            key += f"|q{_runs(self.seqlens_q)}|k{_runs(self.seqlens_k)}"
        return key

    def fields(self) -> dict:
        return {**self.shape.fields(), "kind": self.kind, "window_left": self.window_left,
                "window_right": self.window_right, "num_splits": self.num_splits,
                "pack_gqa": self.pack_gqa, "page_size": self.page_size,
                "seqlens_q": list(self.seqlens_q) if self.seqlens_q is not None else None,
                "seqlens_k": list(self.seqlens_k) if self.seqlens_k is not None else None}

    def sequences(self) -> list[tuple[int, int]]:
        """(N_q, N_k) of every sequence (B copies for the non-varlen kinds)."""
        if self.seqlens_q is not None:
            return list(zip(self.seqlens_q, self.seqlens_k, strict=True))
        return [(self.shape.seqlen_q, self.shape.seqlen_k)] * self.shape.batch


def _runs(seq) -> str:
    """Run-length text of a sequence: (128, 128, 16384) -> ``128x2-16384``."""
    out, i = [], 0
    while i < len(seq):
        j = i
        while j < len(seq) and seq[j] == seq[i]:
            j += 1
        out.append(f"{seq[i]}x{j - i}" if j - i > 1 else str(seq[i]))
        i = j
    return "-".join(out)


def visible_count(n_q: int, n_k: int, causal: bool, left: int | None = None,
                  right: int | None = None) -> int:
    """Number of (query, key) pairs the mask lets through (closed form per row, summed)."""
    off = n_k - n_q
    right_eff = 0 if causal else right
    total = 0
    for i in range(n_q):
        hi = n_k - 1 if right_eff is None else min(n_k - 1, i + off + right_eff)
        lo = 0 if left is None else max(0, i + off - left)
        total += max(0, hi - lo + 1)
    return total


def grid_flops(case: Case) -> float:
    """4 * H * d * (visible pairs), summed over the sequences (the FA benchmark convention,
    with exact mask counts instead of the 1/2 for causal)."""
    s = case.shape
    pairs = 0
    cache = {}
    for n_q, n_k in case.sequences():
        if (n_q, n_k) not in cache:
            cache[(n_q, n_k)] = visible_count(n_q, n_k, s.causal, case.window_left,
                                              case.window_right)
        pairs += cache[(n_q, n_k)]
    return 4.0 * s.heads * s.head_dim * pairs


def kv_bytes(case: Case) -> int:
    """Bytes of the K and V tensors (the pool for paged rows)."""
    s = case.shape
    elem = 2
    tokens = sum(n_k for _, n_k in case.sequences())
    if case.kind == "paged" and case.page_size:
        tokens = s.batch * math.ceil(s.seqlen_k / case.page_size) * case.page_size
    return 2 * tokens * s.kv_heads * s.head_dim * elem


def io_bytes(case: Case) -> int:
    """Q, K, V read once and O written once (K/V of paged rows: the pages in use)."""
    s = case.shape
    q_tokens = sum(n_q for n_q, _ in case.sequences())
    k_tokens = sum(n_k for _, n_k in case.sequences())
    return 2 * (2 * q_tokens * s.heads * s.head_dim + 2 * k_tokens * s.kv_heads * s.head_dim)


def _shape(b, h, hkv, nq, nk, causal, d=HEAD_DIM) -> Shape:
    return Shape(batch=b, heads=h, seqlen_q=nq, head_dim=d, causal=causal, kv_heads=hkv,
                 seqlen_k=nk, dtype=DTYPE)


def decode_cases() -> list[Case]:
    out = []
    for b in DECODE_B:
        nks, nqs, nqs_mha = DECODE_SUBSAMPLE[b]
        for nk in nks:
            for hkv in DECODE_KV_HEADS:
                for nq in (nqs if hkv != HEADS else nqs_mha):
                    for causal in ((False, True) if nq == 16 else (False,)):
                        s = _shape(b, HEADS, hkv, nq, nk, causal)
                        base = Case("decode", s, "cute")
                        if kv_bytes(base) > MEM_CAP_BYTES:
                            continue
                        out += [Case("decode", s, i) for i in
                                ("cute", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient")]
                        if hkv != HEADS:
                            out.append(Case("decode", s, "cute", pack_gqa=False))
                            if b == 1:
                                out.append(Case("decode", s, "cute", pack_gqa=True))
                        if (b, nq, nk, hkv) in SPLIT_SHAPES and not causal:
                            out += [Case("decode", s, "cute", num_splits=n) for n in SPLIT_VALUES]
    return out


def window_cases() -> list[Case]:
    out = []
    for b, h, hkv, n in WINDOW_SHAPES:
        s = _shape(b, h, hkv, n, n, True)
        out.append(Case("window", s, "cute"))
        out += [Case("window", s, "cute", window_left=wl, window_right=wr) for wl, wr in WINDOWS]
    for b, h, hkv, n, wl in FLEX_WINDOW_SUBSET:
        out.append(Case("window", _shape(b, h, hkv, n, n, True), "flex", window_left=wl,
                        window_right=0))
    return out


def varlen_cases() -> list[Case]:
    out = []
    for sq, sk, hkv, causals in VARLEN_CASES:
        for causal in causals:
            s = _shape(len(sq), HEADS, hkv, max(sq), max(sk), causal)
            out.append(Case("varlen", s, "cute", seqlens_q=tuple(sq), seqlens_k=tuple(sk)))
    return out


def paged_cases() -> list[Case]:
    out = []
    for nk in PAGED_NK:
        s = _shape(PAGED_B, PAGED_H, PAGED_HKV, 1, nk, False)
        sizes = PAGED_SIZES + ((PAGED_SMALL_PAGE,) if nk in PAGED_SMALL_PAGE_NK else ())
        out += [Case("paged", s, "cute", page_size=p) for p in sizes]
    return out


def holdout_decode_cases() -> list[Case]:
    """Hold-out decode: the subsample of N_q x N_k x (H, H_kv) per batch
    (:data:`HOLDOUT_DECODE_SKIP`), then the causal N_q = 8 shapes and the d = 64 shapes; per
    shape ``cute`` (default pack_gqa), ``sdpa_flash``, ``sdpa_cudnn`` and, when H == H_kv,
    ``sdpa_efficient``."""
    shapes = []
    for b in HOLDOUT_DECODE_B:
        for ih, (h, hkv) in enumerate(HOLDOUT_DECODE_HEADS):
            for i, nq in enumerate(HOLDOUT_DECODE_NQ):
                for j, nk in enumerate(HOLDOUT_DECODE_NK):
                    if (i + j + ih) % 3 != HOLDOUT_DECODE_SKIP[b]:
                        shapes.append(_shape(b, h, hkv, nq, nk, False))
    shapes += [_shape(b, h, hkv, 8, nk, True) for b, h, hkv, nk in HOLDOUT_DECODE_CAUSAL]
    shapes += [_shape(b, h, hkv, nq, nk, False, d=64)
               for b, h, hkv, nq, nk in HOLDOUT_DECODE_D64]
    out = []
    for s in shapes:
        if kv_bytes(Case("decode", s, "cute")) > MEM_CAP_BYTES:
            continue
        impls = ("cute", "sdpa_flash", "sdpa_cudnn") + (
            ("sdpa_efficient",) if s.heads == s.kv_heads else ())
        out += [Case("decode", s, i) for i in impls]
    return out


def holdout_window_cases() -> list[Case]:
    out = []
    for b, h, hkv, n in HOLDOUT_WINDOW_SHAPES:
        s = _shape(b, h, hkv, n, n, True)
        out.append(Case("window", s, "cute"))
        out += [Case("window", s, "cute", window_left=wl, window_right=wr)
                for wl, wr in HOLDOUT_WINDOWS]
    for b, h, hkv, n, wl in HOLDOUT_FLEX_WINDOW_SUBSET:
        out.append(Case("window", _shape(b, h, hkv, n, n, True), "flex", window_left=wl,
                        window_right=0))
    return out


def holdout_varlen_cases() -> list[Case]:
    out = []
    for sq, sk, hkv, causals in HOLDOUT_VARLEN_CASES:
        for causal in causals:
            s = _shape(len(sq), HOLDOUT_VARLEN_HEADS, hkv, max(sq), max(sk), causal)
            out.append(Case("varlen", s, "cute", seqlens_q=tuple(sq), seqlens_k=tuple(sk)))
    return out


def holdout_paged_cases() -> list[Case]:
    out = []
    for nk in HOLDOUT_PAGED_NK:
        s = _shape(HOLDOUT_PAGED_B, HOLDOUT_PAGED_H, HOLDOUT_PAGED_HKV, 1, nk, False)
        out += [Case("paged", s, "cute", page_size=p) for p in HOLDOUT_PAGED_SIZES]
    return out


#: Mask hold-out (``--grid mask-holdout``; measured after the per-key-tile bias loads of
#: cuDNN's explicit lower-right mask were frozen at 1bf11bd): (B, H, H_kv, N_q, N_k, d), each
#: through SDPA cuDNN causal (the boolean lower-right ``attn_mask``) and not; N_q 4-128, none
#: of these shapes in the grids above.
MASK_HOLDOUT_SHAPES = ((2, 32, 8, 4, 16384, 128), (4, 32, 8, 32, 8192, 128),
                       (1, 16, 16, 64, 65536, 128), (8, 32, 32, 16, 4096, 64),
                       (2, 64, 8, 8, 32768, 128), (16, 16, 4, 32, 2048, 128),
                       (1, 32, 8, 128, 16384, 128), (4, 8, 8, 16, 65536, 64))


def mask_holdout_cases() -> list[Case]:
    return [Case("decode", _shape(b, h, hkv, nq, nk, causal, d), "sdpa_cudnn")
            for b, h, hkv, nq, nk, d in MASK_HOLDOUT_SHAPES for causal in (False, True)]


#: Paged hold-out (``--grid paged-holdout``; measured after flash_attn.cute's paged host
#: time, ``host_floor_fwd_paged_extra_s``, was frozen, 2026-12-03): (B, H, H_kv, N_k), each
#: through flash_attn.cute with pages of 64 and 256 tokens and on a contiguous cache; none of
#: these shapes in the grids above.
PAGED_HOLDOUT_SHAPES = ((16, 48, 6, 40), (16, 48, 6, 600), (16, 48, 6, 3000),
                        (128, 32, 8, 100), (4, 64, 8, 12000))
PAGED_HOLDOUT_SIZES = (64, 256, None)


def paged_holdout_cases() -> list[Case]:
    return [Case("paged", _shape(b, h, hkv, 1, nk, False), "cute", page_size=p)
            for b, h, hkv, nk in PAGED_HOLDOUT_SHAPES for p in PAGED_HOLDOUT_SIZES]


#: GQA hold-out (``--grid gqa-holdout``; measured after the packed-row cap under a mask and
#: flash-attn 2's one-query causal launch were frozen, 2026-12-04): (B, H, H_kv, N_q, N_k, d)
#: whose packed query rows (N_q · H / H_kv) are not a whole number of query groups per tile:
#: groups of 3, 5 and 7 at N_q 2-6, and N_q = 1; each causal (bottom-right) and not, through
#: flash_attn.cute (default pack_gqa), SDPA flash and SDPA cuDNN; none of these shapes in the
#: grids above.
GQA_HOLDOUT_SHAPES = ((4, 28, 4, 2, 16384, 128), (2, 40, 8, 3, 32768, 128),
                      (8, 24, 8, 4, 8192, 128), (1, 56, 8, 5, 65536, 128),
                      (16, 12, 4, 6, 4096, 64), (8, 32, 8, 1, 16384, 128),
                      (32, 16, 16, 1, 4096, 64))


def gqa_holdout_cases() -> list[Case]:
    return [Case("decode", _shape(b, h, hkv, nq, nk, causal, d), impl)
            for b, h, hkv, nq, nk, d in GQA_HOLDOUT_SHAPES for causal in (False, True)
            for impl in ("cute", "sdpa_flash", "sdpa_cudnn")]


def _none() -> list[Case]:
    return []


CASES = {"decode": decode_cases, "window": window_cases, "varlen": varlen_cases,
         "paged": paged_cases}
HOLDOUT_CASES = {"decode": holdout_decode_cases, "window": holdout_window_cases,
                 "varlen": holdout_varlen_cases, "paged": holdout_paged_cases}
#: ``--grid`` name -> kind -> case builder.
GRIDS = {"main": CASES, "holdout": HOLDOUT_CASES,
         "mask-holdout": {"decode": mask_holdout_cases, "window": _none, "varlen": _none,
                          "paged": _none},
         "paged-holdout": {"decode": _none, "window": _none, "varlen": _none,
                           "paged": paged_holdout_cases},
         "gqa-holdout": {"decode": gqa_holdout_cases, "window": _none, "varlen": _none,
                         "paged": _none}}


def plan(kinds=KINDS, grid: str = "main") -> list[Case]:
    """Rows of ``grid`` in measuring order: decode, paged, varlen, window (FlexAttention
    last)."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    if grid not in GRIDS:
        raise ValueError(f"unknown grid {grid!r}; known: {', '.join(GRIDS)}")
    rows = []
    for kind in ("decode", "paged", "varlen", "window"):
        if kind in kinds:
            rows += GRIDS[grid][kind]()
    return [c for c in rows if c.impl != "flex"] + [c for c in rows if c.impl == "flex"]


def row_key(case: Case) -> str:
    return case.key


def resolved_pack_gqa(case: Case) -> bool:
    """flash-attn-4's default on sm90 (``interface._flash_attn_fwd``): pack when H > H_kv."""
    if case.pack_gqa is not None:
        return case.pack_gqa
    return case.shape.heads > case.shape.kv_heads


def known_refusal(case: Case) -> bool:
    """Rows refused without running (estimate only): efficient SDPA with GQA, explicit splits."""
    s = case.shape
    if case.impl == "sdpa_efficient" and s.heads != s.kv_heads:
        return True
    return case.impl == "cute" and case.num_splits > 1


def compile_group(case: Case):
    """What a new compilation (or cuDNN graph) is keyed on, roughly (estimate only)."""
    s = case.shape
    if case.impl == "cute":
        local = case.window_left is not None or case.window_right is not None
        paged = None if case.page_size is None else case.page_size == 128
        return ("cute", s.causal and not local, local, resolved_pack_gqa(case),
                s.heads // s.kv_heads, case.kind == "varlen", paged, case.num_splits,
                s.head_dim)
    if case.impl == "flex":
        return ("flex", case.key)
    if case.impl == "sdpa_cudnn":
        return ("sdpa_cudnn", s.key)
    return None


def estimate_call_s(case: Case) -> float:
    return EST_CALL_OVERHEAD_S + max(io_bytes(case) / EST_HBM_BPS, grid_flops(case) / EST_FLOPS)


def estimate_row_s(case: Case) -> float:
    """Seconds one row takes without compiles: inputs, check, warm-up, timed calls."""
    from perfsim.validate import external as ext

    init = EST_ROW_OVERHEAD_S + (kv_bytes(case) + io_bytes(case)) / EST_INIT_GBPS
    if known_refusal(case):
        return init
    t = estimate_call_s(case)
    warm = ext.WARM_S
    if t > ext.SLOW_CALL_S:
        warm = max(ext.WARM_S, min(ext.SLOW_WARM_CALLS * t, ext.MAX_WARM_S))
    n = max(ext.MIN_CALLS, math.ceil(ext.MIN_TIMED_S / t))
    n = min(n, ext.MAX_CALLS, max(ext.MIN_CALLS_SLOW, math.ceil(ext.MAX_TIMED_S / t)))
    return init + warm + n * t


def estimate_plan_s(cases) -> float:
    """Rows plus one compile per new :func:`compile_group` (not counting process start)."""
    groups = {compile_group(c) for c in cases if not known_refusal(c)} - {None}
    return (sum(estimate_row_s(c) for c in cases)
            + sum(EST_COMPILE_S.get(g[0], 0.0) for g in groups))


# --------------------------------------------------------------------------------------------
# float64 reference on a subset of query rows (torch; CPU or GPU)


def visible_mask(rows, n_q: int, n_k: int, causal: bool, left: int | None = None,
                 right: int | None = None):
    """Boolean (R, N_k): query ``rows[r]`` may see key ``j``; bottom-right aligned causal and
    window (flash-attn's ``window_size = (left, right)``; causal sets right = 0)."""
    import torch

    off = n_k - n_q
    i = rows.reshape(-1, 1).to(torch.int64)
    j = torch.arange(n_k, device=rows.device).reshape(1, -1)
    vis = torch.ones(i.shape[0], n_k, dtype=torch.bool, device=rows.device)
    right_eff = 0 if causal else right
    if right_eff is not None:
        vis &= j <= i + off + right_eff
    if left is not None:
        vis &= j >= i + off - left
    return vis


def reference_rows(q, k, v, rows, n_q: int, n_k: int, *, causal: bool,
                   left: int | None = None, right: int | None = None, sm_scale=None):
    """Float64 attention for the query rows ``rows`` of one kv-head group.

    Args:
        q: (G, R, d), the G query heads of one kv head, rows ``rows`` (absolute indices).
        k, v: (N_k, d) of that kv head.
    Returns:
        (G, R, d) float64; a row that sees no key is 0.
    """
    import torch

    q, k, v = q.double(), k.double(), v.double()
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = torch.matmul(q, k.transpose(0, 1)) * scale
    vis = visible_mask(rows, n_q, n_k, causal, left, right)
    s = s.masked_fill(~vis, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    denom = e.sum(dim=-1, keepdim=True)
    return torch.matmul(e / torch.where(denom == 0, torch.ones_like(denom), denom), v)


def check_rows(n_q: int):
    """Query rows checked: all if N_q <= CHECK_ROWS, else the first and last CHECK_ROWS/2."""
    import torch

    if n_q <= CHECK_ROWS:
        return torch.arange(n_q)
    half = CHECK_ROWS // 2
    return torch.cat([torch.arange(half), torch.arange(n_q - half, n_q)])


def slice_error(case: Case, o, q, k, v, g: int) -> float:
    """Relative error of one kv-head group ``g`` of one sequence: o, q (H, N_q, d);
    k, v (H_kv, N_k, d)."""
    from perfsim.validate.kernels.reference import relative_error

    n_q, n_k = q.shape[1], k.shape[1]
    group = q.shape[0] // k.shape[0]
    rows = check_rows(n_q).to(q.device)
    hs = slice(g * group, (g + 1) * group)
    ref = reference_rows(q[hs][:, rows], k[g], v[g], rows, n_q, n_k, causal=case.shape.causal,
                         left=case.window_left, right=case.window_right)
    return relative_error(o[hs][:, rows], ref)


# --------------------------------------------------------------------------------------------
# implementations (GPU side)


class Unsupported(Exception):
    """The implementation refuses this row (recorded ``unsupported``)."""


class Built:
    """``forward()`` returns the output; ``sequences(out)`` the (o, q, k, v) of the first and
    last sequence, each (heads, tokens, d), for the check; ``config`` the launch config."""

    def __init__(self, forward, sequences, config, context=None):
        from contextlib import nullcontext

        self.forward = forward
        self.sequences = sequences
        self.config = config
        self.context = context or nullcontext


def _randn(gen, *dims):
    import torch

    return torch.randn(*dims, generator=gen, device=DEVICE, dtype=torch.bfloat16)


def _generator(case: Case):
    import torch

    return torch.Generator(device=DEVICE).manual_seed(zlib.crc32(case.key.encode()))


def _dense_bhnd(case: Case):
    s = case.shape
    gen = _generator(case)
    q = _randn(gen, s.batch, s.heads, s.seqlen_q, s.head_dim)
    k = _randn(gen, s.batch, s.kv_heads, s.seqlen_k, s.head_dim)
    v = _randn(gen, s.batch, s.kv_heads, s.seqlen_k, s.head_dim)
    return q, k, v


def _dense_bshd(case: Case):
    s = case.shape
    gen = _generator(case)
    q = _randn(gen, s.batch, s.seqlen_q, s.heads, s.head_dim)
    k = _randn(gen, s.batch, s.seqlen_k, s.kv_heads, s.head_dim)
    v = _randn(gen, s.batch, s.seqlen_k, s.kv_heads, s.head_dim)
    return q, k, v


def _first_last(n):
    return list(dict.fromkeys([0, n - 1]))


def _sdpa(case: Case) -> Built:
    import warnings
    from contextlib import contextmanager

    import torch
    import torch.nn.functional as F

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as exc:
        raise Unsupported(f"torch.nn.attention.sdpa_kernel missing: {exc}") from None
    name = SDPA_BACKENDS[case.impl]
    backend = getattr(SDPBackend, name, None)
    if backend is None:
        raise Unsupported(f"SDPBackend.{name} does not exist in torch {torch.__version__}")
    s = case.shape
    q, k, v = _dense_bhnd(case)
    gqa = s.kv_heads != s.heads
    kw = {"enable_gqa": True} if gqa else {}
    cfg = {"backend": f"SDPBackend.{name}", "torch": torch.__version__, "layout": "bhnd", **kw}
    if s.causal and s.seqlen_q == s.seqlen_k:
        kw["is_causal"] = True
        cfg["mask"] = "is_causal=True"
    elif s.causal and case.impl == "sdpa_flash":
        from perfsim.validate import backends, measure

        try:
            kw["attn_mask"] = backends.flash_lower_right(q, k, v, gqa=gqa)
        except measure.Unsupported as exc:
            raise Unsupported(str(exc)) from None
        cfg["mask"] = ("CausalBias lower_right -> aten._scaled_dot_product_flash_attention"
                       "(is_causal=True)")
    elif s.causal:
        kw["attn_mask"] = torch.ones(s.seqlen_q, s.seqlen_k, dtype=torch.bool,
                                     device=DEVICE).tril(s.seqlen_k - s.seqlen_q)
        cfg["mask"] = "boolean lower-right attn_mask (N_q, N_k)"

    def forward():
        return F.scaled_dot_product_attention(q, k, v, **kw)

    @contextmanager
    def context():
        with sdpa_kernel([backend]), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            except RuntimeError as exc:
                if not any(m in str(exc) for m in ("No available kernel",
                                                   "No viable backend")):
                    raise
                why = "; ".join(str(w.message).splitlines()[0] for w in caught)[:400]
                raise Unsupported(f"SDPBackend.{name}: no available kernel"
                                  + (f" ({why})" if why else "")) from None

    def sequences(out):
        return [(out[b], q[b], k[b], v[b]) for b in _first_last(s.batch)]

    return Built(forward, sequences, cfg, context=context)


def _flex(case: Case) -> Built:
    from contextlib import contextmanager

    import torch

    from perfsim.validate import backends

    try:
        flex, create_block_mask = backends._compiled_flex()
    except Exception as exc:  # noqa: BLE001 - any import/compile setup failure
        raise Unsupported(f"flex_attention unavailable: {type(exc).__name__}: {exc}") from None
    s = case.shape
    q, k, v = _dense_bhnd(case)
    off, left = s.seqlen_k - s.seqlen_q, case.window_left
    right = 0 if s.causal else case.window_right

    def mask_mod(b, h, q_idx, kv_idx):
        # a side without a bound (None) keeps every key on that side
        keep = kv_idx >= 0
        if right is not None:
            keep = keep & (kv_idx <= q_idx + off + right)
        if left is not None:
            keep = keep & (kv_idx >= q_idx + off - left)
        return keep

    # no mask at all: no BlockMask, as an unmasked call passes it (block_mask=None)
    block_mask = (None if left is None and right is None else
                  create_block_mask(mask_mod, B=None, H=None, Q_LEN=s.seqlen_q,
                                    KV_LEN=s.seqlen_k, device=DEVICE))
    extra = {"enable_gqa": True} if s.kv_heads != s.heads else {}
    cfg = {"backend": "torch.compile(flex_attention, dynamic=False)", "torch": torch.__version__,
           "block_mask": (None if block_mask is None else
                          f"sliding window ({left}, {right}) bottom-right"), "layout": "bhnd",
           **extra}
    try:
        if block_mask is not None:
            cfg["block_mask_sparsity_pct"] = float(block_mask.sparsity())
            cfg["block_mask_block_size"] = list(block_mask.BLOCK_SIZE)
    except Exception:  # noqa: BLE001
        pass

    def forward():
        return flex(q, k, v, block_mask=block_mask, **extra)

    @contextmanager
    def context():
        try:
            yield
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
                first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                raise Unsupported(f"torch.compile(flex_attention) failed: "
                                  f"{type(exc).__name__}: {first}") from None
            raise

    def sequences(out):
        return [(out[b], q[b], k[b], v[b]) for b in _first_last(s.batch)]

    return Built(forward, sequences, cfg, context=context)


def _cute_config(case: Case, fi, max_q: int, max_k: int) -> dict:
    s = case.shape
    local = case.window_left is not None or case.window_right is not None
    cfg = {"pack_gqa_requested": case.pack_gqa, "pack_gqa_resolved": resolved_pack_gqa(case),
           "pack_gqa_rule": "interface._flash_attn_fwd: pack_gqa=None -> H/H_kv > 1 (sm90)",
           "num_splits_requested": case.num_splits}
    try:
        from importlib.metadata import version

        cfg["flash_attn_4"] = version("flash-attn-4")
        cfg["nvidia_cutlass_dsl"] = version("nvidia-cutlass-dsl")
    except Exception:  # noqa: BLE001
        pass
    try:
        import torch

        arch = fi._get_device_arch()
        # as _flash_attn_fwd resolves them (_resolve_causal_local_window)
        causal = s.causal
        wl, wr = case.window_left, case.window_right
        if causal:
            wr = 0
        if wl is not None or wr is not None:
            if wl is None and wr == 0:
                causal, local, wr = True, False, None
            else:
                causal, local = False, True
        fwd = fi._get_fwd_config(
            arch=arch, head_dim=s.head_dim, head_dim_v=s.head_dim, max_seqlen_q=max_q,
            max_seqlen_k=max_k, num_head_kv=s.kv_heads, qhead_per_kvhead=s.heads // s.kv_heads,
            pack_gqa=resolved_pack_gqa(case), batch_size=s.batch, causal=causal, local=local,
            window_size_left=wl, window_size_right=wr, num_splits=case.num_splits,
            device=torch.device(DEVICE))
        cfg["arch"] = arch
        cfg["fwd_config"] = asdict(fwd)
        cfg["fwd_config_source"] = "interface._get_fwd_config (tile, resolved num_splits)"
        if case.page_size is not None:
            cfg["paged_kv_tma"] = case.page_size == fwd.n_block_size
    except Exception as exc:  # noqa: BLE001
        cfg["fwd_config_source"] = f"unreadable: {type(exc).__name__}: {exc}"[:200]
    return cfg


def _cute(case: Case) -> Built:
    try:
        from flash_attn.cute import flash_attn_func, flash_attn_varlen_func
        from flash_attn.cute import interface as fi
    except Exception as exc:  # noqa: BLE001 - not installed on this machine
        raise Unsupported(f"flash_attn.cute does not import: {type(exc).__name__}: "
                          f"{str(exc).strip()[:200]}") from None
    import torch

    s = case.shape
    max_k = s.seqlen_k  # paged: pages per sequence x page size, as _flash_attn_fwd bounds it
    kw = {"causal": s.causal, "num_splits": case.num_splits, "pack_gqa": case.pack_gqa}
    if case.window_left is not None or case.window_right is not None:
        kw["window_size"] = (case.window_left, case.window_right)

    def first(r):
        return r[0] if isinstance(r, (tuple, list)) else r

    def bhnd(t):  # (N, H, d) -> (H, N, d) view
        return t.transpose(0, 1)

    if case.kind == "varlen":
        gen = _generator(case)
        tq, tk = sum(case.seqlens_q), sum(case.seqlens_k)
        q = _randn(gen, tq, s.heads, s.head_dim)
        k = _randn(gen, tk, s.kv_heads, s.head_dim)
        v = _randn(gen, tk, s.kv_heads, s.head_dim)
        cu_q = torch.tensor([0, *_cumsum(case.seqlens_q)], dtype=torch.int32, device=DEVICE)
        cu_k = torch.tensor([0, *_cumsum(case.seqlens_k)], dtype=torch.int32, device=DEVICE)
        cq, ck = [0, *_cumsum(case.seqlens_q)], [0, *_cumsum(case.seqlens_k)]

        def forward():
            return first(flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                                max_seqlen_q=s.seqlen_q,
                                                max_seqlen_k=s.seqlen_k, **kw))

        def sequences(out):
            return [(bhnd(out[cq[i]:cq[i + 1]]), bhnd(q[cq[i]:cq[i + 1]]),
                     bhnd(k[ck[i]:ck[i + 1]]), bhnd(v[ck[i]:ck[i + 1]]))
                    for i in _first_last(s.batch)]

        call = "flash_attn_varlen_func(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)"
    elif case.kind == "paged" and case.page_size is not None:
        gen = _generator(case)
        page = case.page_size
        per_seq = math.ceil(s.seqlen_k / page)
        pool, max_k = s.batch * per_seq, per_seq * page
        q = _randn(gen, s.batch, s.seqlen_q, s.heads, s.head_dim)
        k = _randn(gen, pool, page, s.kv_heads, s.head_dim)
        v = _randn(gen, pool, page, s.kv_heads, s.head_dim)
        perm = torch.randperm(pool, generator=torch.Generator().manual_seed(zlib.crc32(
            case.key.encode())))
        page_table = perm.reshape(s.batch, per_seq).to(torch.int32).to(DEVICE).contiguous()
        seqused_k = torch.full((s.batch,), s.seqlen_k, dtype=torch.int32, device=DEVICE)

        def forward():
            return first(flash_attn_varlen_func(q, k, v, page_table=page_table,
                                                seqused_k=seqused_k, **kw))

        def gather(pool_t, b):
            pages = pool_t[page_table[b].long()]  # (per_seq, page, H_kv, d)
            return pages.reshape(-1, s.kv_heads, s.head_dim)[:s.seqlen_k]

        def sequences(out):
            return [(bhnd(out[b]), bhnd(q[b]), bhnd(gather(k, b)), bhnd(gather(v, b)))
                    for b in _first_last(s.batch)]

        call = "flash_attn_varlen_func(page_table, seqused_k) on (num_pages, page_size, H_kv, d)"
    else:
        q, k, v = _dense_bshd(case)

        def forward():
            return first(flash_attn_func(q, k, v, **kw))

        def sequences(out):
            return [(bhnd(out[b]), bhnd(q[b]), bhnd(k[b]), bhnd(v[b]))
                    for b in _first_last(s.batch)]

        call = "flash_attn_func"
    cfg = {"backend": f"flash_attn.cute.{call} (flash-attn-4)", "layout": "bshd",
           "causal": s.causal, "window_size": kw.get("window_size"),
           **_cute_config(case, fi, s.seqlen_q, max_k)}
    if case.kind == "paged" and case.page_size is not None:
        cfg["pages_per_seq"], cfg["num_pages"] = per_seq, pool
    return Built(forward, sequences, cfg)


def _cumsum(xs):
    out, t = [], 0
    for x in xs:
        t += x
        out.append(t)
    return out


def build(case: Case) -> Built:
    if case.impl in SDPA_BACKENDS:
        return _sdpa(case)
    if case.impl == "flex":
        return _flex(case)
    if case.impl == "cute":
        return _cute(case)
    raise Unsupported(f"unknown implementation {case.impl!r}")


def available(impl: str) -> str | None:
    """Why ``impl`` cannot run on this machine at all (None if it can)."""
    if impl == "cute":
        try:
            import flash_attn.cute  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return f"flash_attn.cute does not import: {type(exc).__name__}: {exc}"[:300]
    return None


def check(case: Case, built: Built) -> dict:
    """Run once; every output element finite; relative error vs float64 on the first and the
    last (sequence, kv-head group) slice (rows: :func:`check_rows`)."""
    import torch

    from perfsim.validate.external import TOLERANCE

    out = built.forward()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    if not bool(torch.isfinite(out).all()):
        return {"status": "incorrect", "reason": "o has NaN/inf elements",
                "correctness_rel_error": None, "outputs_finite": False}
    seqs = built.sequences(out)
    picks = [(seqs[0], 0), (seqs[-1], case.shape.kv_heads - 1)]
    if len(seqs) == 1 and case.shape.kv_heads == 1:
        picks = picks[:1]
    errors = [slice_error(case, o, q, k, v, g) for (o, q, k, v), g in picks]
    worst, tol = max(errors), TOLERANCE[case.shape.dtype]
    rec = {"correctness_rel_error": worst, "correctness_rel_errors": {"o": worst},
           "correctness_tolerance": tol, "outputs_finite": True,
           "correctness_checked": f"{len(picks)} (sequence, kv-head group) slices (first, last) "
                                  f"vs float64 with the row's mask, query rows: all if "
                                  f"N_q <= {CHECK_ROWS} else first and last {CHECK_ROWS // 2}; "
                                  "every element of o finite"}
    if not worst <= tol:
        rec.update(status="incorrect", reason=f"relative error {worst:.3g} > {tol:g}")
    return rec


def _classify(exc: BaseException) -> dict:
    text = str(exc).strip()
    first = text.splitlines()[0][:400] if text else ""
    low = text.lower()
    name = type(exc).__name__
    if "out of memory" in low:
        return {"status": "oom", "reason": f"{name}: {first}"}
    if isinstance(exc, (AssertionError, NotImplementedError)) and (
            "not supported" in low or "only supports" in low or "unsupported" in low):
        return {"status": "unsupported", "reason": f"{name}: {first}"}
    return {"status": "error", "reason": f"{name}: {first}"}


def measure_row(case: Case, sampler, versions: dict) -> dict:
    """One row, never raising (a fatal CUDA error is marked ``fatal``)."""
    import torch

    from perfsim.validate import external

    rec = {"key": case.key, **case.fields(), "impl": case.impl, "algorithm": case.label,
           "grid_flops": grid_flops(case), "io_bytes": io_bytes(case),
           "kv_cache_bytes": kv_bytes(case)}
    t0 = time.perf_counter()
    built = None
    try:
        built = build(case)
        with built.context():
            rec.update(check(case, built))
            if rec.get("status") != "incorrect":
                rec.update(external.time_op(built.forward, sampler))
                rec["status"], rec["reason"] = "ok", ""
                rec["achieved_tflops"] = rec["grid_flops"] / rec["measured_s"] / 1e12
                rec["achieved_gbps"] = rec["io_bytes"] / rec["measured_s"] / 1e9
    except Unsupported as exc:
        rec.update(status="unsupported", reason=str(exc)[:500])
    except torch.cuda.OutOfMemoryError as exc:
        rec.update(status="oom", reason=str(exc).splitlines()[0][:300])
    except Exception as exc:  # noqa: BLE001 - recorded
        rec.update(_classify(exc))
        try:
            from perfsim.validate.measure import FATAL_CUDA
        except Exception:  # noqa: BLE001
            FATAL_CUDA = ("illegal memory access", "unspecified launch failure",  # noqa: N806
                          "misaligned address", "device-side assert", "illegal instruction")
        if any(m in str(exc).lower() for m in FATAL_CUDA):
            rec["fatal"] = True
    finally:
        rec["launch_config"] = {**(built.config if built is not None else {}), **versions}
        rec["wall_s"] = time.perf_counter() - t0
        rec["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        built = None
        if rec.get("status") == "oom" or rec["kv_cache_bytes"] > 4e9:
            torch.cuda.empty_cache()
    return rec


# --------------------------------------------------------------------------------------------
# driver


SUMMARY_COLUMNS = ["kind", "algorithm", "statuses", "SM MHz", "W"]


def summary_rows(records) -> list[list[str]]:
    """Counts by kind x algorithm x status, mean of the ok rows' mean SM clock and power
    (:data:`SUMMARY_COLUMNS`)."""
    counts = defaultdict(lambda: defaultdict(int))
    clocks, powers = defaultdict(list), defaultdict(list)
    for r in records:
        k = (str(r.get("kind")), str(r.get("algorithm") or r.get("impl")))
        counts[k][r.get("status")] += 1
        if r.get("status") == "ok":
            if r.get("sm_clock_mean_hz"):
                clocks[k].append(r["sm_clock_mean_hz"])
            if r.get("power_mean_w"):
                powers[k].append(r["power_mean_w"])
    rows = []
    for k in sorted(counts):
        st = ", ".join(f"{s} {n}" for s, n in sorted(counts[k].items(), key=str))
        c = f"{sum(clocks[k]) / len(clocks[k]) / 1e6:.0f}" if clocks[k] else "-"
        p = f"{sum(powers[k]) / len(powers[k]):.0f}" if powers[k] else "-"
        rows.append([k[0], k[1], st, c, p])
    return rows


def print_summary(records, title: str = "rows by kind and algorithm") -> None:
    """Print :func:`summary_rows` as a rich table."""
    from perfsim.cli.common import print_table

    print_table(title, SUMMARY_COLUMNS, summary_rows(records))


def print_plan(cases) -> None:
    """Rows and estimated device seconds per kind, as a rich table."""
    from perfsim.cli.common import print_table

    by = defaultdict(list)
    for c in cases:
        by[c.kind].append(c)
    rows = [[kind, str(len(cs)), f"{estimate_plan_s(cs):.0f}"] for kind, cs in by.items()]
    rows.append(["total", str(len(cases)), f"{estimate_plan_s(cases):.0f}"])
    print_table("plan", ["kind", "rows", "estimate s"], rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfsim.validate.external_decode")
    ap.add_argument("--out")
    ap.add_argument("--limit-seconds", type=float, default=360.0)
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--grid", default="main", choices=tuple(GRIDS),
                    help="main (default), or a hold-out grid of new shapes (holdout, "
                    "mask-holdout, paged-holdout, gqa-holdout)")
    ap.add_argument("--retry-errors", action="store_true")
    ap.add_argument("--plan", action="store_true", help="print the rows and estimate; no GPU")
    ap.add_argument("--summary", help="print the summary of a results.jsonl and exit")
    args = ap.parse_args(argv)
    from perfsim.validate.runner import ResultStore

    if args.summary:
        print_summary(ResultStore(args.summary).load().values())
        return 0
    rows = plan(args.kinds, args.grid)
    if args.plan:
        for c in rows:
            print(f"{estimate_row_s(c):6.2f} s  {c.key}")
        print_plan(rows)
        return 0
    if not args.out:
        ap.error("--out is required")
    t_start = time.monotonic()
    deadline = t_start + args.limit_seconds
    import torch

    if not torch.cuda.is_available():
        print("external_decode: no CUDA GPU found; nothing was timed", file=sys.stderr)
        return 1
    from perfsim.validate.external_run import versions

    store = ResultStore(Path(args.out) / "results.jsonl")
    done = store.load()
    retry = {"error"} if args.retry_errors else set()
    skip_impls = {}
    for impl in dict.fromkeys(c.impl for c in rows):
        why = available(impl)
        if why:
            skip_impls[impl] = why
            print(f"[skip impl] {impl}: {why}", flush=True)
    todo = [c for c in rows if c.impl not in skip_impls
            and (c.key not in done or done[c.key].get("status") in retry)]
    print(f"grid {args.grid}, kinds {' '.join(args.kinds)}: {len(rows)} rows planned, "
          f"{len(done)} in store, {len(todo)} to measure now (limit {args.limit_seconds:.0f} s, "
          f"estimate {estimate_plan_s(todo):.0f} s)", flush=True)
    if any(c.impl == "flex" for c in todo):
        from perfsim.validate import backends

        try:
            backends._compiled_flex()  # raises the dynamo recompile / cache-size limits
        except Exception as exc:  # noqa: BLE001 - the flex rows record it
            print(f"flex setup failed: {type(exc).__name__}: {exc}", flush=True)
    try:
        from perfsim.validate.external import SAMPLE_PERIOD_S
        from perfsim.validate.nvml_sampler import NvmlSampler

        sampler = NvmlSampler(period_s=SAMPLE_PERIOD_S)
    except Exception as exc:  # noqa: BLE001
        print(f"NVML unavailable ({type(exc).__name__}: {exc}); rows carry no clock samples",
              flush=True)
        sampler = None
    vers = versions()
    longest = defaultdict(float)
    measured = skipped_time = 0
    for case in todo:
        left = deadline - time.monotonic()
        if left < MIN_RESERVE_S:
            break
        reserve = (RESERVE_FACTOR * longest[case.impl] if case.impl in longest
                   else FIRST_ROW_RESERVE_S.get(case.impl, DEFAULT_FIRST_RESERVE_S))
        if left < max(reserve, MIN_RESERVE_S):
            skipped_time += 1
            continue
        rec = measure_row(case, sampler, vers)
        store.append(rec)
        measured += 1
        longest[case.impl] = max(longest[case.impl], rec["wall_s"])
        clk = rec.get("sm_clock_mean_hz")
        print(f"{time.monotonic() - t_start:6.1f}s {rec['key'][:88]:88s} {rec['status']:11s} "
              + (f"{rec['measured_s'] * 1e6:9.1f} us {rec['achieved_gbps']:6.0f} GB/s "
                 f"{rec['achieved_tflops']:6.1f} TF {(clk or 0) / 1e6:5.0f} MHz "
                 f"{rec.get('power_mean_w') or 0:4.0f} W "
                 f"err {rec.get('correctness_rel_error') or 0:.1e}"
                 if rec["status"] == "ok" else rec.get("reason", "")[:110])
              + f" [{rec['wall_s']:.1f}s]", flush=True)
        if rec.get("fatal"):
            print("fatal CUDA error: stopping; run again to resume", flush=True)
            return 3
    print(f"measured {measured} rows now; {len(todo) - measured} left ({skipped_time} skipped "
          f"for time); {time.monotonic() - t_start:.0f} s", flush=True)
    print_summary(store.load().values())
    return 0


if __name__ == "__main__":
    sys.exit(main())
