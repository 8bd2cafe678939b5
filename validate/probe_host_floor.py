"""The host floor per forward call, measured twice in one process by both row harnesses.

``python -m perfsim.validate.probe_host_floor OUT.json`` times, with the timing code of
``external.py`` (CUDA events around each call, NVML sampled beside it), calls whose GPU work
is a few microseconds — the calls a software profile's ``host_floor_fwd_s`` comes from — for
SDPA flash, cuDNN and memory-efficient and flash_attn.cute: the external grid's
B=1, H=1, N=64, d=64 row (``external.measure_row``) and a decode row with a short cache
(``external_decode.measure_row``, B=1, H=32, H_kv=8 or 32, N_q=1, N_k=1024), each
``REPEATS`` times, alternating. It answers whether the two committed measurements of the
same floor differ by harness or by session (their tiny rows disagree by up to 40 %), from
repeated host-bound calls, not from attention timings.

``--impls flex --phases fwd,bwd --causal`` widens it: other implementations, the backward
(of one saved forward, as the rows time it) and the causal tiny row beside the unmasked one
(FlexAttention builds a causal ``BlockMask`` once per shape and, without one, an empty mask
inside every call).
"""

from __future__ import annotations

import json
import sys

REPEATS = 3
IMPLS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "cute")


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="probe_host_floor.json")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--phases", default="fwd")
    ap.add_argument("--seqlen", type=int, default=64,
                    help="N of the tiny external row (FlexAttention decodes below 128)")
    ap.add_argument("--no-decode", action="store_true", help="skip the decode-harness rows")
    ap.add_argument("--causal", action="store_true",
                    help="also the causal tiny row (external harness)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    out_path, impls = args.out, args.impls.split(",")
    phases = args.phases.split(",")
    from perfsim.validate import external, external_decode
    from perfsim.validate.external_run import versions as get_versions
    from perfsim.validate.nvml_sampler import NvmlSampler
    from perfsim.validate.shapes import Shape

    versions = get_versions()
    n = args.seqlen
    tinies = [Shape(1, 1, n, 64, causal, phase=phase) for phase in phases
              for causal in ((False, True) if args.causal else (False,))]

    def sampler():
        return NvmlSampler(period_s=external.SAMPLE_PERIOD_S)
    rows = []
    for rep in range(REPEATS):
        first = len(rows)
        for impl in impls:
            for tiny in tinies:
                rec = external.measure_row(tiny, impl, sampler(), versions)
                rows.append({"harness": "external", "rep": rep, "impl": impl,
                             "phase": tiny.phase, "causal": tiny.causal,
                             "shape": f"B1 H1 N{n} d64" + (" causal" if tiny.causal else ""),
                             "status": rec.get("status"), "measured_s": rec.get("measured_s"),
                             "reason": rec.get("reason", "")})
            for hkv in (() if args.no_decode else (8, 32)):
                shape = external_decode._shape(1, 32, hkv, 1, 1024, False)
                case = external_decode.Case("decode", shape, impl)
                rec = external_decode.measure_row(case, sampler(), versions)
                rows.append({"harness": "decode", "rep": rep, "impl": impl,
                             "shape": f"B1 H32 Hkv{hkv} q1 k1024",
                             "status": rec.get("status"), "measured_s": rec.get("measured_s"),
                             "reason": rec.get("reason", "")})
        for r in rows[first:]:
            t = r["measured_s"]
            print(f"rep {rep} {r['harness']:8s} {r['impl']:15s} {r.get('phase', 'fwd')} "
                  f"{r['shape']:24s} "
                  f"{r['status']:12s} {'' if t is None else f'{t * 1e6:8.1f} us'}", flush=True)
    with open(out_path, "w") as f:
        json.dump({"versions": versions, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
