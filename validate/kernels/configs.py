"""Launch configurations: the tiles, warps, stages and grids each kernel actually launches.

Pure Python (no torch, no triton), so perfsim can make its prediction with exactly the
configuration a kernel will use, on any machine. Each kernel module re-exports its function here
as ``launch_config`` and calls it itself before launching, so the two cannot disagree.

Every function has the signature
``f(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, *, causal=False, dtype="fp16",
phase="fwd", **knobs) -> dict`` and returns::

    algorithm, phase, causal, causal_offset (= N_k - N_q), dtype,
    block_m, block_n, num_warps, num_stages, grid   # of the main kernel; None where torch picks
    kernels: [ {name, grid, block_m, block_n, num_warps, num_stages, ...}, ... ]  # launch order
    ...                                             # the algorithm's own knobs, as used

``block_m`` tiles the queries (the papers' B_r), ``block_n`` the keys/values (B_c). An unknown knob
raises TypeError; a bad value raises ValueError saying what is allowed.
"""

from __future__ import annotations

from ._common import MAX_HEAD_DIM, MIN_HEAD_DIM, causal_offset, cdiv, is_pow2, pow2_floor

DTYPES = ("fp16", "bf16", "fp32")

#: FA2 forward tiles (head dim up to, block_m, block_n, num_warps): flash-attn v2
#: csrc/flash_attn/src/flash_fwd_launch_template.h, no-dropout path for A100/H100
#: (hdim32/64: 128x128, 4 warps; hdim96/128: 128x64, 4 warps; hdim192/256: 128x64, 8 warps).
#: These sit inside the FA2 paper's design space, blocks {64,128}x{64,128}, 4 or 8 warps (§3.3).
FA2_FWD_TILES = ((64, 128, 128, 4), (128, 128, 64, 4), (256, 128, 64, 8))
#: FA2 backward tiles, same format (block_m = query tile, block_n = key tile): flash-attn v2
#: csrc/flash_attn/src/flash_bwd_launch_template.h with >= 144 KB shared memory (A100, H100):
#: hdim32/64 128x128, hdim96/128 64x128, hdim256 64x64, all 8 warps.
FA2_BWD_TILES = ((64, 128, 128, 8), (128, 64, 128, 8), (256, 64, 64, 8))
#: Two stages: the next K/V tile is in flight while the current one is used, as FA2's CUDA main
#: loop issues the next tile's copy before computing (flash_fwd_kernel.h).
FA2_NUM_STAGES = 2

#: FA3 Hopper tiles: hopper/tile_size.h (tile_size_fwd_sm90) uses 128 x 128 (causal) or 128 x 176
#: for hdim 128, 192 x 128/192 for hdim 64, 128 x 80..128 above 128, with two consumer
#: warpgroups (8 warps) plus a producer warp. Triton tiles are powers of two, hence these.
FA3_TILES = ((128, 128, 128, 8), (256, 128, 64, 8))
#: hopper/flash_fwd_launch_template.h: ``kStages = Arch >= 90 ? 2 : ...`` (K/V smem ring).
FA3_NUM_STAGES = 2

#: FA1 Algorithm 1: SRAM budget M in elements. 51,200 = 100 KiB of 16-bit elements, the
#: "M around 100 KB" the FA1 paper quotes (§1, §3.2). Overridable.
FA1_SRAM_ELEMENTS = 51_200
#: FA1's CUDA kernels ran 4 warps per CTA; no multi-stage pipelining (Algorithm 1 is sequential).
FA1_NUM_WARPS, FA1_NUM_STAGES = 4, 1

#: FA4-style tiles: one 128-row Q tile x 128 keys, as each FA4 softmax warpgroup handles
#: (P4 §3.1.2); 8 warps and 2 stages as for FA3 on Hopper.
FA4_TILES = FA3_TILES
FA4_NUM_STAGES = 2
#: Conditional rescaling threshold tau in log2 units: log2(256) = 8 (P4 §3.1.4; flash_attn/cute
#: flash_fwd_sm100.py ``rescale_threshold = 8.0`` for 16-bit inputs).
FA4_RESCALE_THRESHOLD = 8.0
#: Fraction of each tile's exponentials computed by the polynomial: 1/8 = 12.5 %, what FA4 ships
#: for 1-CTA causal hdim 128 (P4 §3.1.3 says 10-25 % per row, tuned per configuration).
FA4_EMULATE_FRACTION = 0.125
#: Fractions the static column split can express: 2**-s emulates the last block_n / 2**s
#: columns of each tile (recursive halving of the tile), plus none and all.
FA4_EMULATE_FRACTIONS = (0.0, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)

_WARPS = (1, 2, 4, 8, 16)


def standard(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, *, causal=False,
             dtype="fp16", phase="fwd", softmax="fused", dropout_p=0.0) -> dict:
    """Eager attention (FA1 Algorithm 0; the RTX 5090 post's 5-kernel softmax): torch ops only.

    ``kernels`` lists the eager ops in launch order; torch picks their grids, so grid and tile
    fields are None. The backward runs through autograd and is not listed (``kernels`` empty).
    """
    _check_workload(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, dtype, phase,
                    triton=False)
    if softmax not in ("fused", "5kernel"):
        raise ValueError(f"softmax must be 'fused' or '5kernel', got {softmax!r}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    ops = []
    if heads != kv_heads:
        ops += [("repeat_interleave_k", "torch.repeat_interleave"),
                ("repeat_interleave_v", "torch.repeat_interleave")]
    ops += [("matmul_qk", "torch.matmul"), ("scale", "torch.mul")]
    if causal:
        ops += [("causal_mask", "torch.ones(bool).triu"), ("masked_fill", "Tensor.masked_fill")]
    if softmax == "fused":
        ops += [("softmax", "torch.softmax")]
    else:
        ops += [("max", "Tensor.max"), ("sub", "torch.sub"), ("exp", "torch.exp"),
                ("sum", "Tensor.sum"), ("div", "torch.div")]
    if causal and seqlen_q > seqlen_k:
        ops += [("zero_empty_rows", "Tensor.masked_fill")]
    if dropout_p > 0.0:
        ops += [("dropout", "torch.nn.functional.dropout")]
    ops += [("matmul_pv", "torch.matmul")]
    kernels = [] if phase == "bwd" else [dict(_kernel(name, None), op=op) for name, op in ops]
    return _record("standard", phase, causal, seqlen_q, seqlen_k, dtype, _kernel("eager", None),
                   kernels, softmax=softmax, dropout_p=dropout_p,
                   gqa="repeat_interleave (materialises H/H_kv-times expanded K and V)")


def fa1(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, *, causal=False, dtype="fp16",
        phase="fwd", sram_elements=FA1_SRAM_ELEMENTS, block_m=None, block_n=None,
        num_warps=FA1_NUM_WARPS, num_stages=FA1_NUM_STAGES) -> dict:
    """FA1 Algorithm 1 (Dao et al. 2022): one CTA per (batch, head), K/V-outer, Q-inner loop.

    Block sizes come from the SRAM budget ``M = sram_elements`` (elements, as in the paper):
    ``B_c = ceil(M / 4d)``, ``B_r = min(B_c, d)`` (Algorithm 1 line 1), then each is rounded
    down to a power of two (Triton tiles must be powers of two; rounding down keeps the tiles
    within M) and up to at least 16 (tl.dot's minimum). ``block_m``/``block_n`` override.
    """
    _check_workload(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, dtype, phase,
                    phases=("fwd",))
    if sram_elements < 4 * head_dim:
        raise ValueError(f"sram_elements M={sram_elements} must be >= 4d = {4 * head_dim}")
    b_c = cdiv(sram_elements, 4 * head_dim)
    b_r = min(b_c, head_dim)
    block_n = block_n or max(16, pow2_floor(b_c))
    block_m = block_m or max(16, pow2_floor(b_r))
    _check_launch(block_m, block_n, num_warps, num_stages)
    main = _kernel("fa1_fwd", (batch * heads,), block_m, block_n, num_warps, num_stages)
    return _record("fa1", phase, causal, seqlen_q, seqlen_k, dtype, main, [main],
                   sram_elements=sram_elements, block_c_paper=b_c, block_r_paper=b_r,
                   o_workspace_dtype="fp32", stats_dtype="fp32")


def fa2(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, *, causal=False, dtype="fp16",
        phase="fwd", block_m=None, block_n=None, num_warps=None, num_stages=FA2_NUM_STAGES,
        bwd_block_m=None, bwd_block_n=None, bwd_num_warps=None,
        bwd_num_stages=FA2_NUM_STAGES) -> dict:
    """FA2 (Dao 2023): forward grid (ceil(N_q / block_m), B*H); backward grid over K/V tiles.

    Forward knobs are ``block_m, block_n, num_warps, num_stages``; the backward's carry a
    ``bwd_`` prefix. Defaults per head dim: :data:`FA2_FWD_TILES`, :data:`FA2_BWD_TILES`.
    """
    _check_workload(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, dtype, phase)
    if phase == "fwd":
        bm, bn, nw = _pick(FA2_FWD_TILES, head_dim, block_m, block_n, num_warps)
        _check_launch(bm, bn, nw, num_stages)
        main = _kernel("fa2_fwd", (cdiv(seqlen_q, bm), batch * heads), bm, bn, nw, num_stages)
        return _record("fa2", phase, causal, seqlen_q, seqlen_k, dtype, main, [main])
    bm, bn, nw = _pick(FA2_BWD_TILES, head_dim, bwd_block_m, bwd_block_n, bwd_num_warps)
    _check_launch(bm, bn, nw, bwd_num_stages)
    main = _kernel("fa2_bwd_dkdv_dq", (cdiv(seqlen_k, bn), batch * kv_heads), bm, bn, nw,
                   bwd_num_stages, dq="fp32 tl.atomic_add into dq_accum")
    kernels = [_kernel("zero_dq_accum", None, op="torch.zeros"),
               _kernel("fa2_bwd_preprocess", (cdiv(seqlen_q, bm), batch * heads), bm, None, 4,
                       1, computes="D = rowsum(dO * O)"),
               main,
               _kernel("cast_dq", None, op="Tensor.to")]
    return _record("fa2", phase, causal, seqlen_q, seqlen_k, dtype, main, kernels,
                   gqa="each K/V CTA loops over its H/H_kv query heads (no dK/dV atomics)")


def fa3(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, *, causal=False, dtype="fp16",
        phase="fwd", block_m=None, block_n=None, num_warps=None, num_stages=FA3_NUM_STAGES,
        warp_specialize=False) -> dict:
    """FA3-style forward (Shah et al. 2024) in Triton: TMA tensor-descriptor loads, a
    ``num_stages`` software pipeline and optional ``tl.range(warp_specialize=...)``.

    Grid (ceil(N_q / block_m), B*H). See README.md for which FA3 mechanisms Triton expresses.
    """
    _check_workload(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, dtype, phase,
                    phases=("fwd",))
    bm, bn, nw = _pick(FA3_TILES, head_dim, block_m, block_n, num_warps)
    _check_launch(bm, bn, nw, num_stages)
    main = _kernel("fa3_fwd", (cdiv(seqlen_q, bm), batch * heads), bm, bn, nw, num_stages)
    return _record("fa3", phase, causal, seqlen_q, seqlen_k, dtype, main, [main],
                   loads="tensor_descriptor", warp_specialize=bool(warp_specialize))


def fa4(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, *, causal=False, dtype="fp16",
        phase="fwd", block_m=None, block_n=None, num_warps=None, num_stages=FA4_NUM_STAGES,
        rescale_threshold=FA4_RESCALE_THRESHOLD, emulate_fraction=FA4_EMULATE_FRACTION) -> dict:
    """FA4-style forward (Zadouri et al. 2026, §3.1.3-3.1.4) on the FA2 loop structure.

    ``rescale_threshold`` (tau, log2 units; 0 = always rescale) and ``emulate_fraction`` (share
    of each tile's columns whose exp2 runs as a polynomial on the FMA units; one of
    :data:`FA4_EMULATE_FRACTIONS`) are recorded with the emulated columns per tile.
    """
    _check_workload(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, dtype, phase,
                    phases=("fwd",))
    bm, bn, nw = _pick(FA4_TILES, head_dim, block_m, block_n, num_warps)
    _check_launch(bm, bn, nw, num_stages)
    max_tau = 15.0 if dtype == "fp16" else 127.0  # P <= 2**tau is cast to dtype for P V
    if not 0.0 <= rescale_threshold <= max_tau:
        raise ValueError(f"rescale_threshold must be in [0, {max_tau}] for {dtype} (P can reach "
                         f"2**threshold), got {rescale_threshold}")
    if not any(abs(emulate_fraction - f) < 1e-12 for f in FA4_EMULATE_FRACTIONS):
        raise ValueError(f"emulate_fraction must be one of {FA4_EMULATE_FRACTIONS} (a static "
                         f"even/odd column split), got {emulate_fraction}")
    period = round(1 / emulate_fraction) if emulate_fraction > 0 else 0
    if period > bn:
        raise ValueError(f"emulate_fraction {emulate_fraction} needs block_n >= {period}")
    first = bn - bn // period if period else bn
    rule = f"{first} <= j < {bn}" if period else "none"
    main = _kernel("fa4_fwd", (cdiv(seqlen_q, bm), batch * heads), bm, bn, nw, num_stages)
    return _record("fa4", phase, causal, seqlen_q, seqlen_k, dtype, main, [main],
                   rescale_threshold=float(rescale_threshold),
                   emulate_fraction=float(emulate_fraction),
                   emulate_period=period,
                   emulated_columns_per_tile=round(bn * emulate_fraction),
                   emulated_column_rule=rule,
                   rescale_granularity="per-row max; O rescaled if any row of the tile needs it")


def _check_workload(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, dtype, phase, *,
                    triton=True, phases=("fwd", "bwd")):
    if min(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim) < 1:
        raise ValueError("batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim must be >= 1")
    if heads % kv_heads:
        raise ValueError(f"heads H={heads} must be a multiple of kv_heads H_kv={kv_heads}")
    if dtype not in DTYPES or (triton and dtype == "fp32"):
        allowed = DTYPES if not triton else ("fp16", "bf16")
        raise ValueError(f"dtype must be one of {allowed}, got {dtype!r}")
    if phase not in phases:
        raise ValueError(f"phase must be one of {phases}, got {phase!r}")
    if triton and not (MIN_HEAD_DIM <= head_dim <= MAX_HEAD_DIM and is_pow2(head_dim)):
        raise ValueError(f"head_dim must be a power of two in [{MIN_HEAD_DIM}, {MAX_HEAD_DIM}]")


def _pick(table, head_dim, block_m, block_n, num_warps):
    row = next(r for r in table if head_dim <= r[0])
    return block_m or row[1], block_n or row[2], num_warps or row[3]


def _check_launch(block_m, block_n, num_warps, num_stages):
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        if not (is_pow2(value) and value >= 16):
            raise ValueError(f"{name} must be a power of two >= 16, got {value}")
    if num_warps not in _WARPS:
        raise ValueError(f"num_warps must be one of {_WARPS}, got {num_warps}")
    if int(num_stages) != num_stages or num_stages < 1:
        raise ValueError(f"num_stages must be an integer >= 1, got {num_stages}")


def _kernel(name, grid, block_m=None, block_n=None, num_warps=None, num_stages=None, **extra):
    return dict(name=name, grid=grid, block_m=block_m, block_n=block_n, num_warps=num_warps,
                num_stages=num_stages, **extra)


def _record(algorithm, phase, causal, seqlen_q, seqlen_k, dtype, main, kernels, **knobs):
    fields = {k: main[k] for k in ("block_m", "block_n", "num_warps", "num_stages", "grid")}
    return dict(algorithm=algorithm, phase=phase, causal=bool(causal),
                causal_offset=causal_offset(seqlen_q, seqlen_k), dtype=dtype, **fields,
                kernels=kernels, **knobs)
