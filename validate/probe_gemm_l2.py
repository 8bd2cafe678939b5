"""Target program for Nsight Compute: one cuBLAS GEMM (``torch.mm``, bf16, random normal),
so that the profile says how many bytes it moves through L2 and HBM per FLOP (not attention).

    ncu --profile-from-start off --metrics lts__t_bytes.sum,dram__bytes.sum,... \\
        python3 validate/probe_gemm_l2.py N

runs ``torch.mm`` of two N x N matrices three times unprofiled, then once between
``cudaProfilerStart`` / ``cudaProfilerStop``. ``perfsim.power`` needs it to split a measured
GEMM energy into its tensor-core part and its L2 traffic (``PowerSpec.l2_pj_per_byte``).
"""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    import torch

    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0]) if argv else 4096
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.mm(a, b, out=out)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    torch.mm(a, b, out=out)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"torch.mm {n}^3 bf16 done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
