"""Instruction-fetch cost of long straight-line code, and of warps of one SM in different code
(issue 9: flash-attn 2's causal forward stalls on ``no_instruction`` where its unrolled
masking loop puts the warps of an SM in different copies of a long loop body;
validate/README.md, "The causal mask as flash-attn 2 executes it").

A Triton kernel runs a chain of ``K`` dependent FP32 FMAs per thread (one element per thread,
4 warps per CTA, every FMA a distinct immediate pair, so the body is ``K`` FFMA instructions
of straight-line code, ~16 bytes each), repeated in a loop so every variant executes the same
number of FMAs:

- ``one``: every CTA runs one body of ``K`` FMAs, ``REPS`` times;
- ``double``: one body of ``2K``, ``REPS / 2`` times (the footprint of ``two``, all warps in
  the same code);
- ``two``: two different bodies of ``K`` FMAs, even CTAs one and odd CTAs the other (the
  footprint of ``double``, warps of one SM in different code, as a causal flash-attn 2
  forward's CTAs are in its masked and unmasked copies).

The grid fills every SM with 16 CTAs (64 warps) several times over. Each variant is timed back
to back with the SM clock and power sampled (NVML); the rows give FMAs per clock per SM and
their share of the FP32 pipe's 128 lanes, and the kernel's code size (its cubin, and the FMAs
its PTX holds). Where ``two`` falls below ``one`` and ``double`` stays level, the cost is
warps fetching different code; where ``double`` falls as well, the footprint alone.

    python -m perfsim.validate.probe_icache OUT.json     # on the GPU
"""

from __future__ import annotations

import sys

#: FMAs per body (straight-line instructions): 4 KB to 128 KB of code at 16 bytes each.
BODY_FMAS = (256, 512, 1024, 2048, 4096, 8192)
#: FMAs per thread per call (the loop repeats the body to this many).
FMAS_PER_THREAD = 65536
CTAS_PER_SM = 16
THREADS = 128


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def body(x, K: tl.constexpr, SALT: tl.constexpr):
        for i in tl.static_range(K):
            # a distinct immediate pair per FMA, and per SALT, so no two bodies share code
            x = x * (1.0 - (i + 1) * 1e-9 - SALT * 3e-7) + (i * 1e-9 + SALT * 1e-7)
        return x

    @triton.jit
    def icache(out, reps, K: tl.constexpr, TWO: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = offs.to(tl.float32) * 1e-3 + pid.to(tl.float32)
        for _ in range(reps):
            if TWO and pid % 2 == 1:
                x = body(x, K, 1)
            else:
                x = body(x, K, 0)
        tl.store(out + pid * BLOCK + offs, x)

    return icache


def measure(out_path: str) -> None:
    import torch

    from perfsim.validate.probe_util import back_to_back, nvml_handle, write_rows

    icache = _kernels()
    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = sms * CTAS_PER_SM * 4
    out = torch.empty(grid * THREADS, device="cuda", dtype=torch.float32)
    rows = []
    for k in BODY_FMAS:
        for variant, body, two in (("one", k, False), ("double", 2 * k, False),
                                   ("two", k, True)):
            reps = FMAS_PER_THREAD // body

            def call(body=body, two=two, reps=reps):
                return icache[(grid,)](out, reps, K=body, TWO=two, BLOCK=THREADS, num_warps=4)

            compiled = call()
            torch.cuda.synchronize()
            got = back_to_back(call, handle, 0.3)
            fmas = grid * THREADS * reps * body
            clock = got["sm_clock_mhz_mean"] * 1e6
            per_clock_sm = fmas / got["seconds"] / clock / sms
            ptx = compiled.asm.get("ptx", "")
            row = {"body_fmas": k, "variant": variant, "fmas_per_body": body, "reps": reps,
                   "grid": grid, **got, "fma_per_clock_per_sm": per_clock_sm,
                   "fp32_lane_share": per_clock_sm / 128,
                   "cubin_bytes": len(compiled.asm.get("cubin", b"")),
                   "ptx_fmas": ptx.count("fma.rn.f32"),
                   "registers": getattr(compiled, "n_regs", None)}
            rows.append(row)
            print(f"K {k:5d} {variant:6s} body {body:5d} cubin {row['cubin_bytes']:7d} B "
                  f"ptx fma {row['ptx_fmas']:5d}  {got['seconds'] * 1e3:7.3f} ms "
                  f"{got['sm_clock_mhz_mean']:5.0f} MHz  {per_clock_sm:6.1f} FMA/clk/SM "
                  f"({100 * per_clock_sm / 128:5.1f} % of 128 lanes)", flush=True)
            # written after every row: a run cut short keeps what it measured
            write_rows(out_path, rows, body_fmas=list(BODY_FMAS), ctas_per_sm=CTAS_PER_SM,
                       threads=THREADS, fmas_per_thread=FMAS_PER_THREAD)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m perfsim.validate.probe_icache OUT.json", file=sys.stderr)
        return 2
    measure(argv[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
