"""Probe: FlexAttention's time and compiled code as the sequence length steps off a multiple of 128.

The committed external grids time FlexAttention at lengths that are and are not multiples of
128, and lengths that are not are 10-20 points slower than modelled (``validate/README.md``,
"FlexAttention at lengths off a multiple of 128"); two near-identical shapes differ by 35 %
(``B = 3, H = 8, d = 160``: N = 2700 in 583 µs, N = 2720 in 433 µs). This probe steps N by a
few rows around 2688 = 21 · 128 at fixed B, H and d, times each call back to back with NVML
sampled beside it (``probe_util.back_to_back``) and records a census of the PTX Triton emitted
for it (the files a shape's compile adds to ``TRITON_CACHE_DIR``): global loads by width, the
``cp.async`` copies by size, the WGMMAs, predicate and select instructions, lines in all.
The census says what the compiler made of the length; the times, what it costs.

    [PROBE_PTX_DIR=DIR] python3 validate/probe_flex_lengths.py OUT.json [fwd|bwd|both]

torch, triton and pynvml are imported inside the functions (no GPU needed to import this).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import time

#: Shapes: (phase, batch, heads, head_dim, lengths). The lengths step 1-128 rows past
#: 2688 = 21 · 128; their residues mod 8/16/32/64/128 differ.
CASES = (
    ("fwd", 3, 8, 64, (2688, 2689, 2692, 2696, 2700, 2704, 2712, 2720, 2752, 2816)),
    ("fwd", 3, 8, 160, (2688, 2696, 2700, 2704, 2720, 2752, 2816)),
    ("bwd", 3, 8, 64, (2688, 2696, 2700, 2704, 2720, 2752)),
)
#: Regular expressions counted in each kernel's PTX.
PTX_PATTERNS = {
    "cp_async_16": r"cp\.async\.\w+\.shared\.global(?:\.\w+)*\s+\[[^\]]+\],\s*\[[^\]]+\],\s*16",
    "cp_async_8": r"cp\.async\.\w+\.shared\.global(?:\.\w+)*\s+\[[^\]]+\],\s*\[[^\]]+\],\s*8\b",
    "cp_async_4": r"cp\.async\.\w+\.shared\.global(?:\.\w+)*\s+\[[^\]]+\],\s*\[[^\]]+\],\s*4\b",
    "cp_async_any": r"cp\.async\.\w+\.shared\.global",
    "cp_async_bulk": r"cp\.async\.bulk",
    "ld_global_v4": r"ld\.global(?:\.\w+)*\.v4",
    "ld_global_v2": r"ld\.global(?:\.\w+)*\.v2",
    "ld_global_any": r"ld\.global",
    "st_global_v4": r"st\.global(?:\.\w+)*\.v4",
    "st_global_any": r"st\.global",
    "wgmma": r"wgmma\.mma_async",
    "mma_sync": r"mma\.sync",
    "setp": r"\bsetp\.",
    "selp": r"\bselp\.",
    "ex2": r"ex2\.approx",
}


def _ptx_census(path: str) -> dict:
    text = open(path).read()
    out = {name: len(re.findall(pat, text)) for name, pat in PTX_PATTERNS.items()}
    out["lines"] = text.count("\n")
    entry = re.search(r"\.entry\s+(\w+)", text)
    out["kernel"] = entry.group(1) if entry else os.path.basename(path)
    return out


def _ptx_files(cache: str) -> set:
    return set(glob.glob(os.path.join(cache, "**", "*.ptx"), recursive=True))


def _caller(torch, flex, phase, q, k, v, do):
    """The timed call: the forward, or the backward of one saved forward."""
    if phase == "fwd":
        return lambda: flex(q, k, v)
    for t in (q, k, v):
        t.requires_grad_(True)
    out = flex(q, k, v)
    return lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)


def main(out_path: str, phases: str = "both") -> None:
    cache = os.environ.setdefault("TRITON_CACHE_DIR", "/tmp/probe_flex_lengths_triton")
    import torch
    from probe_util import back_to_back, nvml_handle, write_rows
    from torch.nn.attention.flex_attention import flex_attention

    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), 512))
    flex = torch.compile(flex_attention, dynamic=False)
    handle = nvml_handle()
    rows = []
    for phase, batch, heads, d, lengths in CASES:
        if phases != "both" and phase != phases:
            continue
        for n in lengths:
            gen = torch.Generator(device="cuda").manual_seed(n)
            q, k, v, do = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16,
                                       generator=gen) for _ in range(4))
            before = _ptx_files(cache)
            t0 = time.time()
            call = _caller(torch, flex, phase, q, k, v, do)
            call()
            torch.cuda.synchronize()
            compile_s = time.time() - t0
            new = sorted(_ptx_files(cache) - before)
            census = [_ptx_census(p) for p in new]
            keep = os.environ.get("PROBE_PTX_DIR")
            if keep:  # the template kernels' PTX, named by shape, for diffing
                os.makedirs(keep, exist_ok=True)
                for path, c in zip(new, census):
                    if "tem" in c["kernel"]:
                        name = f"{phase}_d{d}_n{n}_{c['kernel']}.ptx"
                        shutil.copy(path, os.path.join(keep, name))
            back_to_back(call, handle, 0.3)  # warm-up, back to back
            timed = back_to_back(call, handle, 0.25)
            flops = 4.0 * batch * heads * n * n * d * (2.5 if phase == "bwd" else 1.0)
            row = {"phase": phase, "batch": batch, "heads": heads, "head_dim": d, "seqlen": n,
                   "residues": {m: n % m for m in (8, 16, 32, 64, 128)},
                   "compile_s": compile_s, **timed,
                   "tflops": flops / timed["seconds"] / 1e12,
                   "kernels": census}
            rows.append(row)
            write_rows(out_path, rows, source="validate/probe_flex_lengths.py",
                       timing="back_to_back 0.25 s after 0.3 s warm-up; NVML beside each "
                              "launch")  # after every row: a cut-off run keeps what it had
            print(f"{phase} d={d} N={n}: {timed['seconds'] * 1e6:.1f} us "
                  f"{row['tflops']:.0f} TFLOP/s {timed['sm_clock_mhz_mean']:.0f} MHz "
                  f"{timed['power_w_mean']:.0f} W; new ptx {len(new)}", flush=True)
            for c in census:
                if "flex" in c["kernel"] or "tem" in c["kernel"]:
                    print("   ", {key: val for key, val in c.items() if val}, flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "both")
