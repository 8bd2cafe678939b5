"""FA4's softmax mechanisms as numbers: the FMA cost of a software exp2, the emulated share
the reference ships, and the expected number of conditional rescales (P4 §3.1.3–3.1.4)."""

from __future__ import annotations

import numpy as np

LOG2_E = 1.4426950408889634

#: FMA-pipe operations of one emulated exp2 besides the polynomial (P4 §3.1.3): clamp
#: x >= -127 (1), round down by adding and subtracting 2^23 + 2^22 (2), the fraction
#: f = x − ⌊x⌋ (1), shift ⌊x⌋ into the exponent field and add it to p(f)'s bits (2).
EXP2_RANGE_REDUCTION_OPS = 6


def emulated_exp_fma_ops(poly_degree: int) -> int:
    """Operations on the FMA pipes per software exp2: ``poly_degree`` Horner FMAs plus the
    Cody–Waite range reduction and exponent assembly (each op one FMA-pipe issue)."""
    return poly_degree + EXP2_RANGE_REDUCTION_OPS


#: Emulated share of each row's exps in the reference's tuning table, from flash-attn
#: flash_attn/cute/flash_fwd_sm100.py ``_TUNING_CONFIG`` (``ex2_emu_freq``) and
#: softmax.py ``apply_exp2_convert`` (the fractions are computed from that code's rule):
#: (head dim, causal) -> fraction for 16-bit inputs.
SHIPPED_EMULATION = {(128, False): 0.1875, (128, True): 0.125, (192, False): 0.1875,
                     (192, True): 0.0625}
#: FP8 causal hd128 (``_FP8_TUNING_CONFIG``).
SHIPPED_EMULATION_FP8 = 0.25
#: MUFU rate (ops/clk/SM) at which the reference turns emulation off (SM103 / B300, 32).
NO_EMULATION_MUFU_RATE = 32


def shipped_emulation_fraction(head_dim, causal: bool, dtype: str, mufu_rate: float) -> float:
    """The fraction of exps the reference emulates for this configuration (0 on GPUs whose
    MUFU does 32 ops/clk/SM, as the reference does on B300); head dims are rounded up to a
    tuned one (128 or 192); above 192 the 192 entry is used."""
    if mufu_rate >= NO_EMULATION_MUFU_RATE:
        return 0.0
    if dtype == "fp8_e4m3":
        return SHIPPED_EMULATION_FP8
    tuned = 128 if head_dim <= 128 else 192
    return SHIPPED_EMULATION[(tuned, bool(causal))]


def estimate_rescales(kv_tiles: int, block_n: int = 128, score_std: float = 1.0,
                      threshold: float = 8.0, drift: float = 0.0, rows: int = 4096,
                      seed: int = 0) -> float:
    """Expected conditional rescales per row (P4 §3.1.4), by simulation.

    Scores of a row are drawn i.i.d. normal with standard deviation ``score_std`` (natural-log
    units, after the 1/sqrt(d) scale) plus a linear ``drift`` per key tile; a rescale happens
    when a tile's max exceeds the reference max by more than ``threshold`` (log2 units). The
    first tile only initialises the reference and is not counted.

    Returns:
        Mean rescales per row (float).
    """
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((rows, kv_tiles, block_n)) * score_std
    scores += drift * np.arange(kv_tiles)[None, :, None]
    tile_max = scores.max(axis=2) * LOG2_E
    ref = tile_max[:, 0].copy()
    count = np.zeros(rows)
    for j in range(1, kv_tiles):
        jump = tile_max[:, j] - ref > threshold
        count += jump
        ref = np.where(jump, tile_max[:, j], ref)
    return float(count.mean())


__all__ = ["emulated_exp_fma_ops", "estimate_rescales", "shipped_emulation_fraction"]
