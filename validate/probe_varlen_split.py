"""Does PyTorch's flash-attn 2 split a variable-length batch's keys? (a profile, not a fit)

``perfsim.algorithms.splits.decide`` reads flash-attn 2's ``mha_varlen_fwd`` as splitting the
keys only where it swaps a decode's query heads into rows (one query token, ``H > H_kv``, no
window, no dropout; PyTorch's copy also for a paged cache). This probe runs SDPA's flash
backend on jagged nested tensors (PyTorch's variable-length path) and lists the kernels each
call launches (``torch.profiler``): a split call runs ``flash_fwd_splitkv_kernel`` and its
combine kernel, an unsplit one ``flash_fwd_kernel``. It also times each call (CUDA events,
back to back, median) for the record.

    python -m perfsim.validate.probe_varlen_split OUT.json

torch is imported inside functions (a CUDA machine).
"""

from __future__ import annotations

import json
import statistics
import sys

#: (name, heads, head dim, query lengths, key lengths): an MHA decode against long caches, a
#: short one, and a prefill batch of two sequences.
CASES = (("mha-decode", 32, 128, (1, 1), (64000, 60000)),
         ("mha-decode-short", 32, 128, (1, 1, 1, 1), (4096, 3000, 2048, 1000)),
         ("prefill", 2, 128, (2048, 2048), (2048, 2048)))


def _jagged(lengths, heads, d, gen):
    import torch

    return torch.nested.nested_tensor(
        [torch.randn(n, heads, d, generator=gen, device="cuda", dtype=torch.bfloat16)
         for n in lengths], layout=torch.jagged).transpose(1, 2)


def run_case(name, heads, d, lens_q, lens_k) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    gen = torch.Generator(device="cuda").manual_seed(0)
    q = _jagged(lens_q, heads, d, gen)
    k = _jagged(lens_k, heads, d, gen)
    v = _jagged(lens_k, heads, d, gen)
    rec = {"case": name, "heads": heads, "head_dim": d, "seqlens_q": list(lens_q),
           "seqlens_k": list(lens_k)}
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            def call():
                return F.scaled_dot_product_attention(q, k, v)
            for _ in range(10):
                call()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                call()
                torch.cuda.synchronize()
            rec["kernels"] = sorted({e.name[:120] for e in prof.events()
                                     if e.device_type.name == "CUDA"})
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(50)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(50)]
            for s, e in zip(starts, ends):
                s.record()
                call()
                e.record()
            torch.cuda.synchronize()
            rec["events_s"] = statistics.median(s.elapsed_time(e) * 1e-3
                                                for s, e in zip(starts, ends))
        rec["split"] = any("splitkv" in n for n in rec["kernels"])
        rec["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - recorded per case
        rec.update(status="error", reason=f"{type(exc).__name__}: {str(exc)[:300]}")
    return rec


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = args[0] if args else "probe_varlen_split.json"
    import torch

    rows = []
    for case in CASES:
        rows.append(run_case(*case))
        print(json.dumps(rows[-1]), flush=True)
    with open(out, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
