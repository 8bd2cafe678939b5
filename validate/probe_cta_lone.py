"""Microbenchmark: when the short CTAs resident beside a long one finish, does the long one
speed up (not attention)?

``perfsim.algorithms.base.in_order_tail`` charges the busiest SM of a causal grid launched
in index order ``w · avg + (max − avg) · min(ctas_per_sm, w)`` CTA-lengths of work at the
rate of ``ctas_per_sm`` resident CTAs. When every CTA of that SM is resident at once
(``w ≤ ctas_per_sm``) this is ``w · max``: the longest CTA is taken to progress at its share
of the SM (``1 / w``) for its whole life, even after its short neighbours have left. Whether it
does is a hardware question: a CTA alone progresses at the rate its own work in flight allows
(one CTA per SM), which lies between that share and the whole SM.

Kernel: the GEMM → softmax → GEMM loop of ``probe_mma_exp`` (mode ``attn``: ``S = A B``, one
online-softmax tile of FP32 work and exps, ``acc += P C``), with a per-program iteration
count: ``LONG`` iterations for the long programs, ``SHORT`` for the others. Tiles: BM = 32
with 4 warps (``mma.sync``, as FA2) and BM = 64 with 4 warps (WGMMA on sm_90). Rows, for
``c`` CTAs per SM (a grid of ``c · SMs`` programs):

- ``alone``: ``SMs`` programs, all long (one per SM): ``t1`` per iteration of a lone CTA;
- ``all_long``: ``c · SMs`` programs, all long: ``tc`` per iteration with ``c`` resident;
- ``all_short``: ``c · SMs`` programs, all short;
- ``first_long``: the first ``SMs`` programs long, the rest short;
- ``even_long``: the even-numbered programs long (with CTA ``i`` on SM ``i mod SMs`` the
  long ones pair up on even SMs and this reads as ``all_long``; with consecutive CTAs on
  one SM it reads as ``first_long``).

Readings of ``first_long`` (one long and ``c − 1`` short CTAs per SM under round-robin
placement): the current rule ``tc · LONG``; processor sharing with the measured rates
``tc · SHORT + t1 · (LONG − SHORT)``; and an SM that keeps its throughput to the end
``tc · (LONG + (c − 1) · SHORT) / c``.

    python -m perfsim.validate.probe_cta_lone OUT.json

torch, triton and pynvml are imported inside ``main``.
"""

from __future__ import annotations

import argparse

#: (BM, BN, D, warps): BM = 32 lowers to mma.sync on sm_90, BM = 64 with 4 warps to WGMMA.
CONFIGS = ((32, 128, 64, 4), (64, 128, 64, 4))
LONG, SHORT = 4096, 512
PATTERNS = ("alone", "all_long", "all_short", "first_long", "even_long")


def _placement(stamps) -> dict:
    """What one launch's per-CTA stamps ``[(start ns, end ns, SM id), ...]`` (index order)
    show: each CTA's SM, start and end (µs from the first start), the CTAs of each SM, and
    how far apart in index order the CTAs that share an SM are (a histogram)."""
    first = min(start for start, _, _ in stamps)
    by_sm: dict[int, list[int]] = {}
    for i, (_, _, sm) in enumerate(stamps):
        by_sm.setdefault(int(sm), []).append(i)
    gaps: dict[int, int] = {}
    for ctas in by_sm.values():
        for lo, hi in zip(ctas, ctas[1:]):
            gaps[hi - lo] = gaps.get(hi - lo, 0) + 1
    return {"cta_sm": [int(sm) for _, _, sm in stamps],
            "cta_start_us": [round((st - first) / 1e3, 2) for st, _, _ in stamps],
            "cta_end_us": [round((en - first) / 1e3, 2) for _, en, _ in stamps],
            "sms_used": len(by_sm), "ctas_per_sm_max": max(map(len, by_sm.values())),
            "index_gaps_on_one_sm": dict(sorted(gaps.items(), key=lambda kv: -kv[1])[:8])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--per-sm", default="2,3,4")
    args = ap.parse_args(argv)

    import torch
    import triton
    import triton.language as tl

    from perfsim.validate.probe_util import (
        abc_tiles,
        attn_tile_step,
        back_to_back,
        nvml_handle,
        smid_reader,
        tick_readers,
        write_rows,
    )

    step = attn_tile_step()
    gtimer, _clock = tick_readers()
    smid = smid_reader()

    @triton.jit
    def loop(A, B, C, Y, T, long_iters, short_iters, sms, PATTERN: tl.constexpr,
             BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
        pid = tl.program_id(0)
        if PATTERN == 0 or PATTERN == 1:          # alone, all_long
            iters = long_iters
        elif PATTERN == 2:                        # all_short
            iters = short_iters
        elif PATTERN == 3:                        # first_long
            iters = tl.where(pid < sms, long_iters, short_iters)
        else:                                     # even_long
            iters = tl.where(pid % 2 == 0, long_iters, short_iters)
        t0 = gtimer(pid)
        sm = smid(pid)
        rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
        a = tl.load(A + rm[:, None] * D + rd[None, :])
        b = tl.load(B + rd[:, None] * BN + rn[None, :])
        c = tl.load(C + rn[:, None] * D + rd[None, :])
        acc = tl.zeros((BM, D), dtype=tl.float32)
        m_i = tl.zeros((BM,), dtype=tl.float32) - 1.0e30
        l_i = tl.zeros((BM,), dtype=tl.float32)
        s = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(iters):
            s, acc, m_i, l_i = step(a, b, c, s, acc, m_i, l_i)
        acc = acc / l_i[:, None]
        tl.store(Y + pid.to(tl.int64) * BM * D + rm[:, None] * D + rd[None, :], acc)
        # the loop's result is needed before the end stamp
        t1 = gtimer(pid + (tl.sum(l_i, 0) > 1e30).to(tl.int32))
        tl.store(T + pid * 3, t0)
        tl.store(T + pid * 3 + 1, t1)
        tl.store(T + pid * 3 + 2, sm.to(tl.int64))

    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for bm, bn, d, warps in CONFIGS:
        a, b, c_tile = abc_tiles(bm, bn, d)
        for per_sm in (int(x) for x in args.per_sm.split(",")):
            seconds = {}
            for index, pattern in enumerate(PATTERNS):
                grid = sms if pattern == "alone" else per_sm * sms
                y = torch.empty(grid * bm * d, device="cuda", dtype=torch.float32)
                stamps = torch.zeros(grid * 3, device="cuda", dtype=torch.int64)

                def call(grid=grid, y=y, stamps=stamps, index=index, tiles=(a, b, c_tile),
                         shape=(bm, bn, d, warps)):
                    return loop[(grid,)](*tiles, y, stamps, LONG, SHORT, sms, PATTERN=index,
                                         BM=shape[0], BN=shape[1], D=shape[2],
                                         num_warps=shape[3])

                compiled = call()
                torch.cuda.synchronize()
                t = back_to_back(call, handle)
                seconds[pattern] = t["seconds"]
                call()                      # one more launch: its stamps are kept
                torch.cuda.synchronize()
                t.update(_placement(stamps.view(grid, 3).cpu().tolist()))
                rows.append({"bm": bm, "bn": bn, "d": d, "warps": warps,
                             "ctas_per_sm": per_sm, "pattern": pattern, "grid": grid,
                             "long": LONG, "short": SHORT,
                             "registers": getattr(compiled, "n_regs", None),
                             "shared_bytes": getattr(compiled, "metadata", None) and
                             getattr(compiled.metadata, "shared", None), **t})
                print(bm, bn, d, warps, per_sm, pattern, round(t["seconds"] * 1e6, 1), "us",
                      "gaps", t["index_gaps_on_one_sm"], flush=True)
            t1 = seconds["alone"] / LONG
            tc = seconds["all_long"] / LONG
            rows[-2]["readings_s"] = {
                "all_longest (current rule)": tc * LONG,
                "processor sharing": tc * SHORT + t1 * (LONG - SHORT),
                "throughput kept": tc * (LONG + (per_sm - 1) * SHORT) / per_sm}
            write_rows(args.out, rows, long=LONG, short=SHORT,
                       method="Triton GEMM-softmax-GEMM loop (probe_mma_exp's attn mode) with "
                              "per-program iteration counts; back_to_back timing with NVML")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
