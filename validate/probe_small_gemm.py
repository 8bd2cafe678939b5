"""cuBLAS batched GEMMs with one or a few output rows: what eager attention runs in decode
(``S = q Kᵀ``: [1, d] x [d, N_k]; ``O = p V``: [1, N_k] x [N_k, d], per batch and head).

    python -m perfsim.validate.probe_small_gemm OUT.json

For each shape: the median time (do_bench), the kernel cuBLAS launches and its grid
(torch.profiler), the operand bytes per second (A + B read, C written) and the FLOP rate —
evidence of whether these run as bandwidth-bound GEMV-like kernels or as padded tiles.
"""

from __future__ import annotations

import json
import sys


def main(argv=None) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile
    from triton.testing import do_bench

    out = (sys.argv[1:] if argv is None else argv)[0]
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for bh in (8, 256):
            for n in (4096, 100000):
                for d in (64, 128):
                    for m in (1, 16):
                        for kind in ("qk", "pv"):
                            if kind == "qk":     # [bh, m, d] x [bh, d, n]
                                a = torch.randn(bh, m, d, device="cuda", dtype=dtype)
                                b = torch.randn(bh, n, d, device="cuda", dtype=dtype)

                                def fn(a=a, b=b):
                                    return torch.bmm(a, b.transpose(1, 2))
                                shape = (m, n, d)
                            else:                # [bh, m, n] x [bh, n, d]
                                a = torch.randn(bh, m, n, device="cuda", dtype=dtype)
                                b = torch.randn(bh, n, d, device="cuda", dtype=dtype)

                                def fn(a=a, b=b):
                                    return torch.bmm(a, b)
                                shape = (m, d, n)
                            t = do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3
                            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                                fn()
                                torch.cuda.synchronize()
                            kernels = [e.key[:120] for e in prof.key_averages()
                                       if e.device_time_total > 0]
                            mm, nn, kk = shape
                            nbytes = a.element_size() * bh * (mm * kk + kk * nn + mm * nn)
                            rows.append({"dtype": str(dtype).split(".")[-1], "kind": kind,
                                         "batch_heads": bh, "m": mm, "n": nn, "k": kk,
                                         "seconds": t, "bytes_per_s": nbytes / t,
                                         "flop_per_s": 2 * bh * mm * nn * kk / t,
                                         "kernels": kernels})
                            print(json.dumps(rows[-1]), flush=True)
                            del a, b
    json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "rows": rows}, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
