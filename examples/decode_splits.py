"""Decode latency against context length and batch: where split-KV and GQA packing pay off.

    python examples/decode_splits.py          # writes examples/decode_splits.csv and .png

One query token per sequence (a decode step), Llama-3-8B-like heads (H = 32, H_kv = 8,
d = 128, bf16) on an H100 SXM5, flash-attn 2 (``FA2``) four ways: the reference's choices
(``num_splits="auto"``, ``pack_gqa="auto"``), split-KV alone, packing alone, and neither.
Kernel time only (``host_floor_*_s = 0``), so the launch floor does not hide the kernels.
Each point is one ``perfsim.predict`` call, for the main kernel's grid, split count and packing,
which sweep rows do not carry; ``perfsim.sweep`` over the same grid gives the same seconds (it
makes the split and packing choices per row as ``predict`` does).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import perfsim
from perfsim import AttentionWorkload, TimingParams
from perfsim.algorithms import FA2

HERE = Path(__file__).parent
GPU = "h100-sxm5"
CONFIGS = {"reference (auto splits, auto packing)": FA2(),
           "split-KV only": FA2(pack_gqa=False),
           "packing only": FA2(num_splits=1),
           "neither": FA2(num_splits=1, pack_gqa=False)}
CONTEXTS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
BATCHES = [1, 8, 64]
#: line style per config: distinct dashes, markers and widths, slightly transparent, so lines
#: that coincide (packing only = neither at batch 1; several configs at batch 8 and 64) stay
#: visible on top of each other
STYLES = {"reference (auto splits, auto packing)": dict(ls="-", marker="o", ms=7, lw=3.5),
          "split-KV only": dict(ls="--", marker="s", ms=9, lw=2.5, mfc="none", mew=1.5),
          "packing only": dict(ls=":", marker="^", ms=6, lw=2.5),
          "neither": dict(ls="-.", marker="x", ms=6, lw=1.5)}


def main() -> None:
    spec = perfsim.load_gpu(GPU)
    timing = TimingParams.for_gpu(spec, host_floor_fwd_s=0.0, host_floor_bwd_s=0.0)
    rows = []
    for batch in BATCHES:
        for n_k in CONTEXTS:
            w = AttentionWorkload(batch=batch, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=n_k,
                                  head_dim=128)
            for label, algo in CONFIGS.items():
                p = perfsim.predict(w, spec, algo, timing=timing)
                main_kernel = p.kernels[0].cost
                rows.append({"batch": batch, "seqlen_k": n_k, "config": label,
                             "seconds": p.seconds, "bound": p.bound,
                             "grid": main_kernel.grid,
                             "num_splits": main_kernel.launch.get("num_splits", 1),
                             "packed_heads": main_kernel.launch.get("packed_heads", 1),
                             "hbm_gbps": p.hbm_gbps})
    df = pd.DataFrame(rows)
    df.to_csv(HERE / "decode_splits.csv", index=False)
    plot(df, HERE / "decode_splits.png")


def plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(BATCHES), figsize=(13, 4.2), sharey=False)
    for ax, batch in zip(axes, BATCHES):
        part = df[df.batch == batch]
        for label in CONFIGS:
            s = part[part.config == label]
            ax.plot(s.seqlen_k, s.seconds * 1e6, label=label, alpha=0.75, **STYLES[label])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"batch {batch}")
        ax.set_xlabel("context length N_k (keys)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("decode step, kernel time (µs)")
    axes[-1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"FA2 decode on {GPU}: H=32, H_kv=8, d=128, bf16, one query token "
                 "(perfsim predictions)\nconfigs with equal times draw on top of each other "
                 "(distinct line styles and markers show where lines coincide)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


if __name__ == "__main__":
    main()
