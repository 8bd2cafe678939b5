"""Microbenchmark: what keeps two Triton CTAs per SM from overlapping (not attention)?

The committed Nsight Compute profiles of FlexAttention's forward (validate/README.md,
"FlexAttention's forward: a second CTA per SM buys little overlap") take 0.81-0.96 of the sum
of the model's two stations whether an SM holds one CTA of eight warps or two CTAs of four,
while the bare loop of ``probe_wgmma_exp.py`` (GEMM, exps, GEMM on fixed tiles) overlaps two
CTAs per SM as a closed cycle does. This probe adds what that loop lacks, one part at a time,
on the tiles FlexAttention launches on sm_90, and times each loop with one and with two CTAs
per SM:

* ``full``: ``s = A B`` (the last ``s`` times zero as its accumulator, so it is not hoisted),
  ``p = exp2(s · 2^-10)``, ``acc += p C`` — ``probe_wgmma_exp``'s loop;
* ``attn``: the same with the online softmax (row max, ``exp2(s − m)``, row sum, rescale of
  ``acc``: ``probe_util.attn_tile_step``);
* ``load``: ``full`` with a new K and V tile loaded from an L2-resident ring of 64 tiles each
  iteration (``s = Q Kᵀ``, ``acc += p V``), pipelined as Triton pipelines a loop's loads
  (``num_stages`` 3, as FlexAttention's forward);
* ``flash``: ``attn`` with those loads — FlexAttention's inner loop without its mask and
  index arithmetic;
* ``index``: ``flash`` with each step's K/V tile number read from an int32 table first (the
  block-sparse ``kv_indices`` lookup FlexAttention makes before every K/V load);
* ``masked``: ``flash`` with the K/V loads masked to the first 3/4 of the head dim (a head
  dim of 96 run in a 128-wide tile, as FlexAttention pads it, the rest filled with zeros);
* ``index+masked``: both.

Per configuration ``(BM, BN, D, warps)`` and CTAs per SM: cycles per loop iteration per SM at
NVML's clock, the compiled shared memory and registers, and how many such CTAs an SM holds
(shared memory and registers; a second CTA that does not fit runs in a second wave, and the
row says so). The measure of overlap is ``gain = 2 · cycles(1 CTA) / cycles(2 CTAs)``
per SM and iteration of each CTA: 1 when the second CTA adds nothing, 2 when it doubles the
SM's throughput.

    python3 validate/probe_flex_loop.py OUT.json     (a CUDA GPU; torch, triton, pynvml)
"""

from __future__ import annotations

import sys

#: FlexAttention's sm_90 forward tiles (``BM, BN, D, warps``; torch/_inductor flex templates,
#: as the committed profiles launch them): head dim 64 (128 x 128, 4 warps, 2 CTAs per SM);
#: 96-112, padded to 128 (64 x 64, 4 warps, 2 CTAs per SM); 128 (128 x 64, 8 warps, 1 CTA);
#: and the tutorial's 128 x 64 with 4 warps at 128.
CONFIGS = ((128, 128, 64, 4), (64, 64, 128, 4), (128, 64, 128, 8), (128, 64, 128, 4))
MODES = ("full", "attn", "load", "flash", "index", "masked", "index+masked")
CTAS_PER_SM = (1, 2)
ITERS = 1024
#: K/V tiles in the ring each CTA walks (L2-resident: 64 x BN x D x 2 B x 2 <= 4 MiB).
RING = 64
STAGES = 3
#: Hopper's shared memory per SM for CTAs (228 KiB less 1 KiB reserved per CTA) and registers.
SMEM_PER_SM, SMEM_RESERVED, REGS_PER_SM = 233472, 1024, 65536


def _kernel():
    import triton
    import triton.language as tl

    from perfsim.validate.probe_util import attn_tile_step, online_softmax, tile_loader

    step, softmax, load = attn_tile_step(), online_softmax(), tile_loader()

    @triton.jit
    def loop(A, B, C, K, V, IDX, Y, iters, BM: tl.constexpr, BN: tl.constexpr,
             D: tl.constexpr, MODE: tl.constexpr, RING: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
        a, b, c = load(A, B, C, BM, BN, D)
        acc = tl.zeros((BM, D), dtype=tl.float32)
        s = tl.zeros((BM, BN), dtype=tl.float32)
        m_i = tl.zeros((BM,), dtype=tl.float32) - 1e30
        l_i = tl.zeros((BM,), dtype=tl.float32)
        for i in range(iters):
            if MODE == 0:                       # full: GEMM, exp, GEMM
                s = tl.dot(a, b, s * 0.0)
                p = tl.exp2(s * 0.0009765625)
                acc = tl.dot(p.to(tl.bfloat16), c, acc)
            elif MODE == 1:                     # attn: with the online softmax
                s, acc, m_i, l_i = step(a, b, c, s, acc, m_i, l_i)
            else:                               # load, flash, ...: new K and V tiles
                t = (pid + i) % RING
                if MODE == 4 or MODE == 6:      # the tile's number from a table first
                    t = tl.load(IDX + t).to(tl.int64)
                rows = t * BN + rn
                if MODE == 5 or MODE == 6:      # 3/4 of the columns, the rest zeros
                    cols = rd[None, :] < (3 * D // 4)
                    k = tl.load(K + rows[:, None] * D + rd[None, :], mask=cols, other=0.0)
                    v = tl.load(V + rows[:, None] * D + rd[None, :], mask=cols, other=0.0)
                else:
                    k = tl.load(K + rows[:, None] * D + rd[None, :])
                    v = tl.load(V + rows[:, None] * D + rd[None, :])
                s = tl.dot(a, tl.trans(k))
                if MODE == 2:
                    p = tl.exp2(s * 0.0009765625)
                else:
                    p, acc, m_i, l_i = softmax(s, acc, m_i, l_i)
                acc = tl.dot(p.to(tl.bfloat16), v, acc)
        acc = acc + l_i[:, None]
        tl.store(Y + pid * BM * D + rm[:, None] * D + rd[None, :], acc)

    return loop


def fits(shared: int, regs: int, warps: int) -> int:
    """CTAs of ``shared`` bytes and ``regs`` registers per thread one SM holds."""
    by_smem = SMEM_PER_SM // (shared + SMEM_RESERVED) if shared else 32
    by_regs = REGS_PER_SM // max(regs * 32 * warps, 1)
    return int(min(by_smem, by_regs))


def run(out_path: str) -> list[dict]:
    """Time every configuration, mode and CTA count back to back, NVML beside it; the file is
    written after each configuration."""
    import torch

    from perfsim.validate.probe_util import abc_tiles, back_to_back, nvml_handle, write_rows

    kernel = _kernel()
    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for bm, bn, d, warps in CONFIGS:
        a, b, c = abc_tiles(bm, bn, d)
        k, v = (torch.randn(RING * bn, d, device="cuda", dtype=torch.bfloat16) / 8
                for _ in range(2))
        idx = torch.randperm(RING, device="cuda", dtype=torch.int32)
        for mode_index, mode in enumerate(MODES):
            for ctas in CTAS_PER_SM:
                grid = ctas * sms
                y = torch.empty(grid * bm * d, device="cuda", dtype=torch.float32)
                launch = {"BM": bm, "BN": bn, "D": d, "MODE": mode_index, "RING": RING,
                          "num_warps": warps, "num_stages": STAGES}
                base = {"bm": bm, "bn": bn, "d": d, "warps": warps, "mode": mode,
                        "ctas_per_sm": ctas}
                try:
                    compiled = kernel[(grid,)](a, b, c, k, v, idx, y, 4, **launch)
                    torch.cuda.synchronize()
                except Exception as exc:        # noqa: BLE001 - shared memory, registers
                    rows.append({**base, "error": str(exc)[:200]})
                    continue

                def call(grid=grid, args=(a, b, c, k, v, idx, y, ITERS), launch=launch):
                    kernel[(grid,)](*args, **launch)

                call()
                torch.cuda.synchronize()
                timed = back_to_back(call, handle, 0.25)
                shared = compiled.metadata.shared
                regs = getattr(compiled, "n_regs", 0) or 0
                rows.append({**base, "grid": grid, "iters": ITERS, **timed, "regs": regs,
                             "spills": getattr(compiled, "n_spills", None), "shared": shared,
                             "ctas_fit_per_sm": fits(shared, regs, warps),
                             "cycles_per_iter_per_sm": timed["seconds"]
                             * timed["sm_clock_mhz_mean"] * 1e6 / ITERS})
                print({x: rows[-1][x] for x in ("bm", "bn", "d", "warps", "mode", "ctas_per_sm",
                                                "ctas_fit_per_sm", "cycles_per_iter_per_sm")},
                      flush=True)
        write_rows(out_path, rows, ring=RING, stages=STAGES)
    return rows


def gains(rows: list[dict]) -> list[dict]:
    """Per configuration and mode: cycles per iteration per SM with one and two CTAs and the
    gain ``2 · one / two`` (None where a CTA count failed or two CTAs do not fit)."""
    out = {}
    for r in rows:
        if "error" in r:
            continue
        key = (r["bm"], r["bn"], r["d"], r["warps"], r["mode"])
        out.setdefault(key, {})[r["ctas_per_sm"]] = r
    table = []
    for (bm, bn, d, warps, mode), by in out.items():
        one, two = by.get(1), by.get(2)
        ok = one and two and two["ctas_fit_per_sm"] >= 2
        table.append({"bm": bm, "bn": bn, "d": d, "warps": warps, "mode": mode,
                      "one": one and one["cycles_per_iter_per_sm"],
                      "two": two and two["cycles_per_iter_per_sm"],
                      "gain": 2 * one["cycles_per_iter_per_sm"] / two["cycles_per_iter_per_sm"]
                      if ok else None})
    return table


if __name__ == "__main__":
    result = run(sys.argv[1] if len(sys.argv) > 1 else "probe_flex_loop.json")
    for g in gains(result):
        print(g)
