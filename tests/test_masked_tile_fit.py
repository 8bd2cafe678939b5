"""flash-attn 2's forward tile counts used by validate/masked_tile_fit.py, against the
kernel's loop structure (flash_fwd_kernel.h: a query tile visits the key tiles up to its last
row and masks the last ⌈B_r/B_c⌉ of them, one more when N is off a tile multiple)."""

from perfsim.tiles import visits
from perfsim.validate.masked_tile_fit import fit, tile_counts


def test_tile_counts_follow_the_kernels_loops():
    assert tile_counts(256, 128, 128, False) == (4, 0)
    assert tile_counts(256, 128, 128, True) == (3, 2)      # tiles 1 + 2, one masked each
    assert tile_counts(256, 128, 64, True) == (6, 4)       # 2 + 4, two masked each
    # N = 448 is off the 128 tile: query tiles visit 1, 2, 3, 4 key tiles, masking two each
    # after the first
    assert tile_counts(448, 128, 128, True) == (10, 7)
    # the visited tiles are perfsim's own count
    for n in (192, 256, 448, 700, 1024, 4096):
        for b_r, b_c in ((128, 128), (128, 64), (64, 64)):
            assert tile_counts(n, b_r, b_c, True)[0] == visits(n, n, b_r, b_c, True).tiles


def test_fit_recovers_a_planted_masked_cost():
    rows = []
    f, u, m = 30.0, 1.5, 2.4
    for n in (256, 512, 1024):
        b, h = 16384 // n, 16
        for causal in (False, True):
            visited, masked = tile_counts(n, 128, 64, causal)
            per_sm = b * h / 132
            t = f + per_sm * ((visited - masked) * u + masked * (m if causal else u))
            rows.append({"impl": "sdpa_flash", "phase": "fwd", "status": "ok", "head_dim": 128,
                         "dtype": "bf16", "kv_heads": h, "heads": h, "seqlen_q": n,
                         "seqlen_k": n, "batch": b, "causal": causal, "measured_s": t * 1e-6})
    out = fit(rows, 128)
    assert abs(out["F_us"] - f) < 1e-6 and abs(out["u_us"] - u) < 1e-9
    assert all(abs(r - m / u) < 1e-9 for r in out["masked_over_unmasked"].values())
