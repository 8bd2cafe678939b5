"""The SASS opcodes of the power microbenchmarks' register loops (not attention): which
instructions, how many per step, so that an energy per op divides by the right count.

    python -m perfsim.validate.probe_sass_ops OUT.json

Compiles ``_bench_kernels.alu_loop``, ``fma_loop`` and ``exp2_loop`` as ``power_probe`` launches
them (4 warps, 8 chains per thread) and counts the opcodes in the disassembly of each
(``CompiledKernel.asm["sass"]``, Triton's call of ``nvdisasm``). torch and triton are imported
inside ``main``.
"""

from __future__ import annotations

import argparse
import collections
import json
import re


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    args = ap.parse_args(argv)
    import torch
    import triton

    from perfsim.validate import _bench_kernels as bk

    warps, chains = 4, 8
    block = warps * 32 * chains
    xf = torch.rand(block, device="cuda")
    xi = torch.randint(0, 1 << 30, (block,), device="cuda", dtype=torch.int32)
    launches = {
        "alu_loop": lambda: bk.alu_loop[(1,)](xi, torch.empty_like(xi), 4, 0x5A5A5A5, 12345,
                                              BLOCK=block, UNROLL=bk.UNROLL, num_warps=warps),
        "fma_loop": lambda: bk.fma_loop[(1,)](xf, torch.empty_like(xf), 4, 0.9999, 1e-4,
                                              BLOCK=block, UNROLL=bk.UNROLL, num_warps=warps),
        "exp2_loop": lambda: bk.exp2_loop[(1,)](xf, torch.empty_like(xf), 4, BLOCK=block,
                                                UNROLL=bk.UNROLL, num_warps=warps),
    }
    doc = {"triton": triton.__version__, "device": torch.cuda.get_device_name(0),
           "warps": warps, "chains": chains, "unroll": bk.UNROLL, "kernels": {}}
    for name, launch in launches.items():
        compiled = launch()
        torch.cuda.synchronize()
        try:
            sass = compiled.asm["sass"]
        except Exception as exc:  # noqa: BLE001 - recorded
            doc["kernels"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        ops = collections.Counter()
        for line in sass.splitlines():
            m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
            if m:
                ops[m.group(1).split(".")[0]] += 1
        doc["kernels"][name] = {"static_opcodes": dict(ops.most_common())}
        print(name, dict(ops.most_common(12)), flush=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
