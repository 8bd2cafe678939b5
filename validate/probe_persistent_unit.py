"""Microbenchmark: what one work unit of a persistent attention kernel costs outside its
key (or query) loop, measured as the intercept of kernel time against loop length at a fixed
number of equal units (not a shape users run).

A persistent kernel (cuDNN's sm90 SDPA kernels: grid = 132 CTAs, one per SM) takes work units
— a 128-row query tile in the forward, a 128-key tile in the backward — one after another.
perfsim charges a persistent kernel's fixed per-CTA costs once (``perfsim.timing.edge_seconds``:
its producer warp prefetches the next unit's tiles). This probe measures what a unit does
cost beyond its loop: the forward at ``N_q = 128`` (one query tile per head) against
``N_k`` = 128 ... 4096 keys, the backward at ``N_k = 128`` (one key tile per head) against
``N_q`` = 128 ... 4096 query rows, with ``H`` = 132 and 264 heads (one and two units per SM),
B = 1, d = 128, bf16, no mask. Equal units on every SM: kernel time = units per SM ·
(fixed + loop steps · step cost), so the intercept at zero steps is the per-unit fixed cost.
SDPA flash (FA2, not persistent: one CTA per unit) runs beside it as the control.

A fourth (``turn``) repeats the third on units of 1-16 key tiles at head dims 64, 128
(keys 8 short of whole tiles, and whole), 192 and 256: the paths where cuDNN's forward runs
its MMAs and exps in turn, whose units after the first perfsim charged nothing outside the
loop (``KernelCost.unit_edges_hidden``), against its overlapping path.

A second series (``units``: ``python -m perfsim.validate.probe_persistent_unit OUT.json
units``) holds the loop length (128 or 512) and grows the units per SM from 1 to 16 (H = 132
... 2112): the slope is what one more unit costs in steady state, where the producer can
prefetch the next unit's tiles while the consumers finish the last. Both series are
HBM-bound where perfsim is (each unit moves its own Q, K, V and O); the third (``gqa``)
puts every query head on one K/V head, which stays in L2, so a unit's HBM bytes are its Q
and O tiles (64 KB) and its loop (N_k = 1024-4096) is tensor work: 2-16 units per SM.

Per row: the main kernel's mean duration from the CUDA profiler (torch.profiler, 20 calls),
the whole call's time back to back with the NVML SM clock and board power sampled after each
launch (``probe_util.back_to_back``), and the kernel's name.

Run on a CUDA GPU with perfsim importable (``validate/probe_run.sh`` arranges it):
``python -m perfsim.validate.probe_persistent_unit OUT.json``.
"""

from __future__ import annotations

import sys

HEADS = (132, 264)
LENGTHS = (128, 256, 512, 1024, 2048, 4096)
IMPLS = ("cudnn", "flash")
#: The ``units`` series: cuDNN only, 1-16 units per SM at two loop lengths.
UNITS_HEADS = (132, 264, 528, 1056, 2112)
UNITS_LENGTHS = (128, 512)
#: The ``gqa`` series: forward only, every query head on one K/V head (L2-resident), so a
#: unit moves 64 KB of Q and O over HBM whatever its loop length: 2-16 units per SM.
GQA_HEADS = (264, 528, 1056, 2112)
GQA_LENGTHS = (1024, 2048, 4096)
HEAD_DIM = 128
#: The ``turn`` series: the ``gqa`` layout (every query head on one L2-resident K/V head) on
#: short units of 1-16 key tiles, at the head dims whose cuDNN forward runs its MMAs and
#: exps in turn (64, 192, 256; ``perfsim.implementations.cudnn_fwd_pipes_in_turn``), at
#: head dim 128 with 8 keys short of whole tiles (the in-turn path of the 128 kernel) and
#: with whole tiles (its overlapping path): ``(head dim, keys short of whole tiles)``.
TURN_CASES = ((64, 0), (128, 8), (128, 0), (192, 0), (256, 0))
TURN_TILES = (1, 2, 4, 8, 16)


def _main_kernel(call, reps: int = 20) -> tuple[str, float]:
    """``(name, mean µs)`` of the longest kernel ``call`` launches (CUDA profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    times: dict = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(ev.name, []).append(ev.device_time)
    name, ts = max(times.items(), key=lambda kv: sum(kv[1]))
    return name, sum(ts) / len(ts)


def run(out_path: str, series: str = "lengths") -> list[dict]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from perfsim.validate.probe_util import back_to_back, nvml_handle, write_rows

    handle = nvml_handle()
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    rows = []
    if series == "turn":
        grid = [("cudnn", "fwd", heads, 128 * tiles - short, d)
                for d, short in TURN_CASES for heads in GQA_HEADS for tiles in TURN_TILES]
    else:
        impls, head_counts, lengths = {
            "lengths": (IMPLS, HEADS, LENGTHS),
            "units": (("cudnn",), UNITS_HEADS, UNITS_LENGTHS),
            "gqa": (IMPLS, GQA_HEADS, GQA_LENGTHS)}[series]
        grid = [(impl, phase, heads, n, HEAD_DIM) for impl in impls
                for phase in (("fwd",) if series == "gqa" else ("fwd", "bwd"))
                for heads in head_counts for n in lengths]
    kv_one = series in ("gqa", "turn")
    for impl, phase, heads, n, head_dim in grid:
        n_q, n_k = (128, n) if phase == "fwd" else (n, 128)
        q = torch.randn(1, heads, n_q, head_dim, device="cuda",
                        dtype=torch.bfloat16, requires_grad=phase == "bwd")
        k, v = (torch.randn(1, 1 if kv_one else heads, n_k, head_dim, device="cuda",
                            dtype=torch.bfloat16, requires_grad=phase == "bwd")
                for _ in range(2))
        with sdpa_kernel(backends[impl]):
            if phase == "fwd":
                def call(q=q, k=k, v=v):
                    return F.scaled_dot_product_attention(q, k, v,
                                                          enable_gqa=kv_one)
            else:
                out = F.scaled_dot_product_attention(q, k, v)
                do = torch.randn_like(out)

                def call(out=out, q=q, k=k, v=v, do=do):
                    return torch.autograd.grad(out, (q, k, v), do,
                                               retain_graph=True)
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            name, kernel_us = _main_kernel(call)
            timed = back_to_back(call, handle)
        row = {"impl": impl, "phase": phase, "heads": heads,
               "kv_heads": 1 if kv_one else heads, "seqlen_q": n_q,
               "seqlen_k": n_k, "head_dim": head_dim, "kernel": name[:160],
               "kernel_us": kernel_us, **timed}
        rows.append(row)
        print(f"{impl} {phase} d={head_dim} H={heads} N_q={n_q} N_k={n_k}: kernel "
              f"{kernel_us:.1f} us, call {timed['seconds'] * 1e6:.1f} us at "
              f"{timed['sm_clock_mhz_mean']:.0f} MHz", flush=True)
        del q, k, v
    write_rows(out_path, rows, head_dim=HEAD_DIM if series != "turn" else None,
               series=series)
    return rows


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "probe_persistent_unit.json",
        sys.argv[2] if len(sys.argv) > 2 else "lengths")
