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

A second mode, ``--prologue``, asks what flash-attn 2's causal forward does once per CTA: it
runs its masked iterations as unrolled straight-line copies of the loop body (one to three,
each 20-39 kB of sm_90 code) before its ~19-26 kB main loop (``validate/sass_loops.py`` on
torch 2.11's kernels). Each CTA here runs ``VIRTUAL`` units of: ``P`` FMAs of straight-line
code executed once, then a loop body of :data:`LOOP_FMAS` FMAs repeated :data:`LOOP_REPS`
times; ``P`` from 0 to 6144 FMAs (0-96 kB), 2 or 4 CTAs of 4 warps per SM (a grid of exactly
that many CTAs per SM; flash-attn 2's forward at head dims 64-128 holds two). The time per
unit against ``P`` gives what straight-line code costs beyond issuing its FMAs, and whether
the cost depends on the kernel's whole code size (an instruction cache's capacity).

    python -m perfsim.validate.probe_icache OUT.json                 # on the GPU
    python -m perfsim.validate.probe_icache OUT.json --prologue      # the per-CTA straight line
"""

from __future__ import annotations

import sys

#: FMAs per body (straight-line instructions): 4 KB to 128 KB of code at 16 bytes each.
BODY_FMAS = (256, 512, 1024, 2048, 4096, 8192)
#: FMAs per thread per call (the loop repeats the body to this many).
FMAS_PER_THREAD = 65536
CTAS_PER_SM = 16
THREADS = 128
#: ``--prologue``: straight-line FMAs run once per unit (0-96 kB of code), the loop body after
#: it (16 kB), its repetitions per unit, units per CTA and the CTAs per SM tried.
PROLOGUE_FMAS = (0, 512, 1024, 2048, 3072, 4096, 6144)
LOOP_FMAS, LOOP_REPS, VIRTUAL = 1024, 4, 16
PROLOGUE_CTAS_PER_SM = (2, 4)


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

    @triton.jit
    def prologue(out, units, reps, P: tl.constexpr, L: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = offs.to(tl.float32) * 1e-3 + pid.to(tl.float32)
        for _ in range(units):
            if P > 0:
                x = body(x, P, 1)
            for _ in range(reps):
                x = body(x, L, 0)
        tl.store(out + pid * BLOCK + offs, x)

    from perfsim.validate.probe_util import smid_reader

    smid = smid_reader()

    # (``bodies`` not specialised: Triton compiles an integer argument equal to 1 as a
    # constant, which at K = 1 left one body and 21 registers against 255 for K >= 2 —
    # reports/h100/probes/icache/probe_icache_phases.json; now every K runs one binary)
    @triton.jit(do_not_specialize=["bodies"])
    def phases(out, sm_out, units, reps, ctas_per_sm, bodies, P: tl.constexpr,
               L: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = offs.to(tl.float32) * 1e-3 + pid.to(tl.float32)
        slot = pid // (tl.num_programs(0) // ctas_per_sm)
        for u in range(units):
            which = (u + slot) % bodies
            if which == 0:
                x = body(x, P, 1)
            elif which == 1:
                x = body(x, P, 2)
            elif which == 2:
                x = body(x, P, 3)
            else:
                x = body(x, P, 4)
            for _ in range(reps):
                x = body(x, L, 0)
        tl.store(out + pid * BLOCK + offs, x)
        tl.store(sm_out + pid, smid(pid))

    return icache, prologue, phases


def _code(compiled) -> dict:
    """A compiled Triton kernel's cubin bytes, FMAs in its PTX and registers per thread."""
    return {"cubin_bytes": len(compiled.asm.get("cubin", b"")),
            "ptx_fmas": compiled.asm.get("ptx", "").count("fma.rn.f32"),
            "registers": getattr(compiled, "n_regs", None)}


def measure_prologue(out_path: str) -> None:
    """``--prologue``: time per unit (straight line of ``P`` FMAs, then the loop) against
    ``P``, at each of :data:`PROLOGUE_CTAS_PER_SM`."""
    import torch

    from perfsim.validate.probe_util import back_to_back, nvml_handle, write_rows

    _, prologue, _ = _kernels()
    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for per_sm in PROLOGUE_CTAS_PER_SM:
        grid = sms * per_sm
        out = torch.empty(grid * THREADS, device="cuda", dtype=torch.float32)
        for p in PROLOGUE_FMAS:
            def call(p=p, grid=grid, out=out):
                return prologue[(grid,)](out, VIRTUAL, LOOP_REPS, P=p, L=LOOP_FMAS,
                                         BLOCK=THREADS, num_warps=4)

            compiled = call()
            torch.cuda.synchronize()
            got = back_to_back(call, handle, 0.3)
            fmas_per_thread = VIRTUAL * (p + LOOP_FMAS * LOOP_REPS)
            clock = got["sm_clock_mhz_mean"] * 1e6
            cycles_per_unit = got["seconds"] * clock / VIRTUAL
            row = {"mode": "prologue", "ctas_per_sm": per_sm, "prologue_fmas": p,
                   "loop_fmas": LOOP_FMAS, "loop_reps": LOOP_REPS, "units": VIRTUAL,
                   "grid": grid, **got, "cycles_per_unit": cycles_per_unit,
                   "fmas_per_thread": fmas_per_thread,
                   "fma_per_clock_per_sm": grid * THREADS * fmas_per_thread / got["seconds"]
                   / clock / sms, **_code(compiled)}
            rows.append(row)
            print(f"{per_sm} CTA/SM P {p:5d} cubin {row['cubin_bytes']:7d} B "
                  f"{got['seconds'] * 1e6:8.1f} us {got['sm_clock_mhz_mean']:5.0f} MHz "
                  f"{cycles_per_unit:9.0f} cycles/unit "
                  f"{row['fma_per_clock_per_sm']:6.1f} FMA/clk/SM", flush=True)
            write_rows(out_path, rows, prologue_fmas=list(PROLOGUE_FMAS),
                       loop_fmas=LOOP_FMAS, loop_reps=LOOP_REPS, units=VIRTUAL,
                       threads=THREADS)


#: ``--phases``: straight-line FMAs per body (4-64 kB), distinct bodies K (each CTA runs them in
#: turn, the CTAs of one SM offset by one, so co-resident warps run different code when K > 1)
PHASE_FMAS = (256, 512, 1024, 2048, 4096)
PHASE_BODIES = (1, 2, 4)


def measure_phases(out_path: str) -> None:
    """``--phases``: time per unit (one of ``K`` straight-line bodies of ``P`` FMAs, then the
    loop) with two CTAs of 4 warps per SM, the CTA in the second slot a body ahead of the
    first: at K = 1 both run the same code, at K ≥ 2 different code (the causal flash-attn 2
    forward's CTAs in its masked copies and its main loop). Records each CTA's SM."""
    import torch

    from perfsim.validate.probe_util import back_to_back, nvml_handle, write_rows

    _, _, phases = _kernels()
    handle = nvml_handle()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_sm = 2
    grid = sms * per_sm
    out = torch.empty(grid * THREADS, device="cuda", dtype=torch.float32)
    sm_of = torch.empty(grid, device="cuda", dtype=torch.int32)
    rows = []
    for p in PHASE_FMAS:
        for k in PHASE_BODIES:
            def call(p=p, k=k):
                # (the body count is an argument: one compile per P, all four bodies in it)
                return phases[(grid,)](out, sm_of, VIRTUAL, LOOP_REPS, per_sm, k, P=p,
                                       L=LOOP_FMAS, BLOCK=THREADS, num_warps=4)

            compiled = call()
            torch.cuda.synchronize()
            ctas = sm_of.tolist()
            # CTAs sharing an SM whose slots differ (so they run different bodies at K > 1)
            by_sm = {}
            for pid, sm in enumerate(ctas):
                by_sm.setdefault(sm, set()).add(pid // sms)
            mixed = sum(1 for slots in by_sm.values() if len(slots) > 1)
            got = back_to_back(call, handle, 0.3)
            clock = got["sm_clock_mhz_mean"] * 1e6
            cycles_per_unit = got["seconds"] * clock / VIRTUAL
            row = {"mode": "phases", "ctas_per_sm": per_sm, "body_fmas": p, "bodies": k,
                   "loop_fmas": LOOP_FMAS, "loop_reps": LOOP_REPS, "units": VIRTUAL,
                   "grid": grid, **got, "cycles_per_unit": cycles_per_unit,
                   "sms_with_both_slots": mixed, "sms_used": len(by_sm), **_code(compiled)}
            rows.append(row)
            print(f"P {p:5d} K {k} cubin {row['cubin_bytes']:7d} B {got['seconds'] * 1e6:8.1f} "
                  f"us {got['sm_clock_mhz_mean']:5.0f} MHz {cycles_per_unit:9.0f} cycles/unit "
                  f"SMs with both slots {mixed}/{len(by_sm)}", flush=True)
            write_rows(out_path, rows, phase_fmas=list(PHASE_FMAS),
                       bodies=list(PHASE_BODIES), loop_fmas=LOOP_FMAS, loop_reps=LOOP_REPS,
                       units=VIRTUAL, threads=THREADS)


def measure(out_path: str) -> None:
    import torch

    from perfsim.validate.probe_util import back_to_back, nvml_handle, write_rows

    icache, _, _ = _kernels()
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
            row = {"body_fmas": k, "variant": variant, "fmas_per_body": body, "reps": reps,
                   "grid": grid, **got, "fma_per_clock_per_sm": per_clock_sm,
                   "fp32_lane_share": per_clock_sm / 128, **_code(compiled)}
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
    flags = [a for a in argv if a.startswith("--")]
    paths = [a for a in argv if not a.startswith("--")]
    modes = {"--prologue": measure_prologue, "--phases": measure_phases}
    if len(paths) != 1 or len(flags) > 1 or set(flags) - set(modes):
        print("usage: python -m perfsim.validate.probe_icache OUT.json "
              "[--prologue | --phases]", file=sys.stderr)
        return 2
    (modes[flags[0]] if flags else measure)(paths[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
