"""How fast PyTorch's head-dim padding copies run, against a plain device-to-device copy
(issue 9; ``implementations.HEAD_DIM_PADDING``): no attention in it.

``python -m perfsim.validate.probe_pad_copy --out FILE.json`` times, on bf16 tensors of
B = 4, H = 16, N = 2048 rows of ``d`` elements (d = 36, 60, 90, 100, 124 and, as controls, 64
and 128), with CUDA events (median of 20 calls after 5 warm-up calls):

- ``clone``: a contiguous copy of the tensor (read + write), the baseline rate;
- ``pad``: ``F.pad(x, (0, d8 − d))`` — ``constant_pad_nd``: an empty tensor, a fill and a
  narrowing copy (what SDPA's flash path and flash-attn 2 do to Q, K and V);
- ``fill``: ``torch.zeros`` of the padded shape alone (the fill's share);
- ``unpad``: ``y[..., :d].clone()`` of the padded tensor (SDPA's gradients copied out);
- ``permute``: ``x.transpose(1, 2).contiguous()`` (the layout copy SDPA flash's backward
  makes, ``bwd_layout_copies``), for comparison with the profile's measured rate.

Each row gives the kernel time and the bytes it reads and writes, and the rate as a fraction
of ``clone``'s. Structural and bandwidth facts only; nothing here is fitted to attention.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

HEAD_DIMS = (36, 60, 90, 100, 124, 64, 128)
SHAPE = (4, 16, 2048)


def _time(fn, reps: int = 20, warm: int = 5) -> float:
    """Median seconds of ``fn`` over ``reps`` calls timed one by one with CUDA events."""
    import torch

    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / 1e3)
    return statistics.median(out)


def run() -> dict:
    """Every case at every head dim: ``{"device": ..., "rows": [...]}``."""
    import torch
    import torch.nn.functional as F

    rows = []
    for d in HEAD_DIMS:
        d8 = -(-d // 8) * 8
        x = torch.randn(*SHAPE, d, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(*SHAPE, d8, device="cuda", dtype=torch.bfloat16)
        elems, padded = x.numel(), y.numel()
        cases = {
            "clone": (lambda x=x: x.clone(), 2 * 2 * elems),
            "pad": (lambda x=x, d=d, d8=d8: F.pad(x, (0, d8 - d)),
                    2 * (elems + padded) if d8 != d else 0),
            "fill": (lambda d8=d8: torch.zeros(*SHAPE, d8, device="cuda", dtype=torch.bfloat16),
                     2 * padded),
            "unpad": (lambda y=y, d=d: y[..., :d].clone(), 2 * 2 * elems),
            "permute": (lambda x=x: x.transpose(1, 2).contiguous(), 2 * 2 * elems),
        }
        times = {name: _time(fn) for name, (fn, _) in cases.items()}
        for name, (_, nbytes) in cases.items():
            rows.append({"head_dim": d, "padded_head_dim": d8, "case": name,
                         "seconds": times[name], "bytes": nbytes,
                         "bytes_per_s": nbytes / times[name] if nbytes else None,
                         "fraction_of_clone": ((nbytes / times[name])
                                               / (2 * 2 * elems / times["clone"])
                                               if nbytes else None)})
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "shape": [*SHAPE, "d"], "dtype": "bf16", "rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    try:
        import torch
    except Exception as exc:        # noqa: BLE001 - a torch that fails to import: no GPU
        print(f"probe_pad_copy: needs torch with a CUDA GPU ({exc})", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("probe_pad_copy: needs a CUDA GPU", file=sys.stderr)
        return 1
    result = run()
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for r in result["rows"]:
        frac = r["fraction_of_clone"]
        print(f"d={r['head_dim']:4d} {r['case']:8s} {r['seconds'] * 1e6:8.1f} us "
              f"{'' if frac is None else f'{frac:.3f} of clone'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
