"""Fit the H200's power model from the NVML microbenchmarks, and derive every catalog GPU's.

    python -m perfsim.validate.fit_power validate/reports/h200/probes/power-microbench.json \
        [--mma-sync validate/reports/h200/probes/probe_mma_sync_power.json] \
        [--l2 validate/reports/h200/probes/power-l2-wgmma.json] [--write]

The model (``perfsim.gpu.PowerSpec``, :mod:`perfsim.power`):
``P = static + Σ_u e_u · (f / f_ref)^γ · rate_u + e_hbm · bytes/s``, ``f_ref`` = the max
boost clock. Each microbenchmark runs one unit flat out, so each gives one energy:

* ``static_w``: the one-CTA spin kernel (clock up, almost no work);
* ``hbm_pj_per_byte``: the HBM copy (bytes read + written per second);
* ``tensor_pj_per_flop.wgmma`` and ``voltage_exponent`` (γ): the bf16 GEMM on random data
  settled at its power-capped clock, and the same GEMM at half duty (4096^3 alternating with a
  sleep), which stays at the boost clock — two clocks, energy per FLOP at each, two equations
  (the first 150 ms of the full GEMM are not used: its power readings and its per-clock rate
  are still ramping there);
* ``mufu_pj_per_op``, ``fp32_pj_per_flop``: the exp2 and FMA register loops;
* ``tensor_pj_per_flop.mma_sync``: the mma.sync loop of ``probe_mma_smem.run_power``
  (operands from shared memory, so its shared-memory reads are in it), if given;
* ``smem_pj_per_byte``: 0 — no shared-memory-only microbenchmark exists in Triton; the
  GEMM energies include their own operand reads (stated in the source);
* ``l2_pj_per_byte`` (with ``--l2``): an L2-resident read walk (``power_probe.py l2_read``),
  less its FADDs; the WGMMA energy is then the GEMM's less its L2-served and HBM bytes per FLOP
  (:data:`GEMM_TRAFFIC`, Nsight Compute), checked against a WGMMA loop whose operands stay in
  shared memory (``wgmma_smem_*``).

The fp16 and fp8 GEMMs are not fitted: their predicted power at their own settled clock and
rate is printed as a check (fp8 also checks ``TENSOR_ENERGY_SCALE``).

Every other catalog GPU (no measurement): GH100 parts (H100, H20, GH200) take the H200's
per-operation energies (same SM and process); the others scale the H200's SM energies by the
factor that makes a dense GEMM at ``clock_hz`` draw exactly ``tdp_w`` — i.e. they take the
vendor's peak clock as sustainable for dense tensor work (ASSUMED; on the H200 it is not:
1.5 GHz under a GEMM against the 1.83 GHz of the quoted peak). ``static_w`` is the H200's
share of its limit times the GPU's limit; HBM energy per byte the H200's (both ASSUMED).
``--write`` rewrites the ``[power]`` tables and their sources in ``hardware/*.toml``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

PICO = 1e-12
#: Bytes per FLOP a cuBLAS bf16 GEMM moves, from Nsight Compute on the H200
#: (``validate/probe_gemm_l2.py``; ``reports/h200/probes/ncu/ncu-gemm.tgz``): the SMs' L2
#: traffic (``lts__t_sectors_srcunit_tex`` x 32 B) less what HBM supplied (``dram__bytes``) is
#: the L2-served part; ``dram__bytes`` the HBM part. 4096^3 (the half-duty GEMM; cuBLAS kernel
#: ``nvjet_sm90_tst_256x128_64x4_1x2``): 892.5 MB from L2, 175.9 MB from HBM over 137.4
#: GFLOP; 8192^3 (the settled GEMM; ``nvjet_sm90_tst_320x128_64x3_1x2``): 6968.7 MB and
#: 1380.3 MB over 1099.5 GFLOP.
GEMM_TRAFFIC = {"gemm_bf16_half_duty": {"l2": (892.5 - 175.9) / 137.4e3,
                                        "hbm": 175.9 / 137.4e3},
                "gemm_bf16": {"l2": (6968.7 - 1380.3) / 1099.5e3, "hbm": 1380.3 / 1099.5e3}}
#: FP32 lane instructions per byte of the L2 read walk (one FADD per fp32 element loaded).
L2_WALK_FMA_OPS_PER_BYTE = 0.25
HARDWARE = Path(__file__).resolve().parent.parent / "hardware"
#: GH100-based catalog GPUs: the H200's per-operation energies apply (same SM, same process).
GH100 = ("h100-sxm5", "h100-pcie", "gh200", "h20")
#: The original entries' limits and base clocks (the breadth entries carry their own).
LIMITS = {
    "h100-sxm5": (700, 1.2e9, "D: NVIDIA H100 datasheet (SXM5: max TDP 700 W); min clock "
                  "ASSUMED as the H200's (the same GH100 ran GEMMs at 1.43-1.49 GHz on the "
                  "H200, under the 1590 MHz base clock, so the base clock is no floor)"),
    "a100-sxm4-80gb": (400, 1.095e9, "D: NVIDIA A100 datasheet (SXM4 max TDP 400 W); base "
                       "clock 1095 MHz (A100 whitepaper table 'GPU Boost/base clock')"),
    "a100-sxm4-40gb": (400, 1.095e9, "D: NVIDIA A100 datasheet (SXM4 40GB: 400 W); base clock "
                       "1095 MHz (A100 whitepaper)"),
    "b200": (1000, 1.2e9, "D: NVIDIA HGX B200 datasheet (1,000 W per GPU); min clock ASSUMED "
             "1.2 GHz (no published base clock)"),
    "rtx-5090": (575, 2.017e9, "D: NVIDIA GeForce RTX 5090 specifications (total graphics "
                 "power 575 W, base clock 2.01 GHz)"),
}


def _bench(doc: dict, name: str) -> dict | None:
    for rec in doc.get("benchmarks", []):
        if rec.get("name") == name and "error" not in rec:
            return rec
    return None


def _nvml_phase(rec: dict, which: str):
    """``(NVML clock Hz, power W, ops/s)`` of a benchmark's ``steady`` or ``burst`` phase."""
    st = rec.get(which) or {}
    watts = st.get("power_inst_w_mean") or st.get("power_avg_w_mean")
    mhz, ops = st.get("sm_mhz_mean"), st.get("ops_per_s")
    if not (watts and mhz and ops is not None):
        return None
    return mhz * 1e6, watts, ops


#: Microbenchmarks that run tensor-core work: with ``--tick`` each needs its measured ratio of
#: the cores' clock to NVML's (the others run at NVML's clock: measured 0.997-1.000).
TENSOR_BENCHES = ("gemm_bf16", "gemm_fp16", "gemm_bf16_zeros", "gemm_fp8_e4m3",
                  "gemm_bf16_half_duty", "wgmma_smem_1cta", "wgmma_smem_2cta", "mma_sync")


def tick_ratios(docs: list[dict]) -> dict:
    """``{benchmark: cores' clock / NVML's clock}`` from ``probe_tick_clock`` documents: each
    ``power:NAME`` case gives NAME's; the ``gemm`` case (``torch.mm`` bf16 8192^3 on random
    data, the workload of ``power_probe``'s ``gemm_bf16``) gives ``gemm_bf16``'s (mean over
    the documents); the mma.sync loop of ``probe_mma_smem`` was not run beside the probe, so
    ``mma_sync`` takes the mean of the mma.sync kernels that were (SDPA flash, flash-attn 2's
    ``mma.sync`` code: ``sdpa_flash-*``; ASSUMED the same stretch)."""
    found: dict = {}
    for doc in docs:
        for case in doc.get("cases", []):
            ratio = case.get("tick_over_nvml")
            if case.get("status") != "ok" or not ratio:
                continue
            name = case["case"]
            key = (name.split(":", 1)[1] if name.startswith("power:") else
                   "gemm_bf16" if name == "gemm" else
                   "mma_sync" if name.startswith("sdpa_flash-") else None)
            if key:
                found.setdefault(key, []).append(ratio)
    return {k: sum(v) / len(v) for k, v in found.items()}


def fit(doc: dict, mma_sync: dict | None = None, l2: dict | None = None,
        tick: dict | None = None) -> dict:
    """The H200 ``[power]`` values and a source string for each (``{"values", "sources",
    "checks"}``). ``l2``: a microbenchmark document with the ``l2_read`` walk (and the
    ``wgmma_smem_*`` loops, reported as a check): the WGMMA energy is then the GEMM's less its
    L2 and HBM traffic (:data:`GEMM_TRAFFIC`) and ``l2_pj_per_byte`` is fitted. ``tick``
    (:func:`tick_ratios`): each benchmark's clock is the cores' clock, NVML's times its
    measured ratio (tensor-core work ticks at ~0.90 of what NVML reports, everything else at
    it; ``validate/probe_tick_clock.py``), so the energies and the exponent are per cycle the
    cores execute — the clock perfsim's per-clock rates are measured in."""
    f_ref = doc["limits"].get("max_sm_clock_hz") or 1.98e9
    tick = dict(tick or {})
    if tick:
        missing = [b for b in ("gemm_bf16", "gemm_bf16_half_duty", "mma_sync")
                   if b not in tick and (_bench(doc, b) or (b == "mma_sync" and mma_sync))]
        if missing:
            raise SystemExit(f"fit_power --tick: no measured clock ratio for {missing} "
                             "(run validate/probe_tick_run.sh with those power:NAME cases)")

    def _phase(rec, which):
        got = _nvml_phase(rec, which)
        if got is None or not tick:
            return got
        if rec["name"] in TENSOR_BENCHES and rec["name"] not in tick:
            return None         # a check without its ratio: skipped
        ratio = tick[rec["name"]] if rec["name"] in TENSOR_BENCHES else 1.0
        return got[0] * ratio, got[1], got[2]

    clock_word = ("MHz (the cores' clock: NVML's x its measured ratio, validate/"
                  "probe_tick_clock.py)" if tick else "MHz")

    tdp = doc["limits"].get("enforced_power_limit_w") or doc["limits"].get(
        "power_limit_w") or 700.0
    spin = _phase(_bench(doc, "spin_1cta"), "steady")
    static = spin[1]
    src = {"static_w": f"M: one-CTA FMA spin kernel, steady 2 s: {static:.1f} W at "
                       f"{spin[0] / 1e6:.0f} MHz (validate/power_probe.py spin_1cta)"}
    copy = _phase(_bench(doc, "hbm_copy"), "steady")
    e_hbm = (copy[1] - static) / copy[2] / PICO
    src["hbm_pj_per_byte"] = (f"M: HBM copy (read + written bytes), steady: "
                              f"({copy[1]:.0f} W - static) / {copy[2] / 1e12:.2f} TB/s = "
                              f"{e_hbm:.2f} pJ/B (the copy kernel's own SM work included)")
    settled = _phase(_bench(doc, "gemm_bf16"), "steady")
    hot = _phase(_bench(doc, "gemm_bf16_half_duty"), "steady")
    l2_run = _bench(l2, "l2_read") if l2 else None
    if l2 and not (l2_run and _phase(l2_run, "steady")):
        raise SystemExit("fit_power --l2: the document has no finished l2_read benchmark with a "
                         "steady phase (run validate/probe_energy_run.sh, or power_probe.py "
                         "--only l2_read)")
    fl, wl, rl = _phase(l2_run, "steady") if l2 else (f_ref, static, 1.0)
    # the walk's FADDs (about 8 % of its energy) at the FMA register loop's energy per FLOP
    # slot, taken at the loop's own clock: both must have run at the same clock (the boost
    # clock, under the power limit, in the committed documents)
    f_f, w_f, r_f = _phase(_bench(doc, "fp32_fma"), "steady")
    if l2 and abs(fl / f_f - 1) > 0.01:
        raise SystemExit(f"fit_power --l2: the L2 walk ran at {fl / 1e6:.0f} MHz and the FMA "
                         f"loop at {f_f / 1e6:.0f} MHz; the FADD correction needs one clock")
    e_fp32 = (w_f - static) / r_f
    e_l2 = ((wl - static) / rl - 2 * L2_WALK_FMA_OPS_PER_BYTE * e_fp32) if l2 else 0.0
    traffic = {name: (GEMM_TRAFFIC[name]["l2"] * e_l2 + GEMM_TRAFFIC[name]["hbm"]
                      * e_hbm * PICO) if l2 else 0.0 for name in GEMM_TRAFFIC}
    per_flop = [(w - static) / r - traffic[name] for name, (_, w, r) in
                (("gemm_bf16_half_duty", hot), ("gemm_bf16", settled))]
    gamma = math.log(per_flop[1] / per_flop[0]) / math.log(settled[0] / hot[0])
    e_tensor = per_flop[0] / (hot[0] / f_ref) ** gamma / PICO
    src["voltage_exponent"] = (
        f"M: bf16 GEMM energy per FLOP at two clocks: half duty (4096^3 + sleep) "
        f"{hot[0] / 1e6:.0f} {clock_word} {hot[1]:.0f} W {hot[2] / 1e12:.0f} TFLOP/s on "
        f"average; 8192^3 settled {settled[0] / 1e6:.0f} MHz {settled[1]:.0f} W "
        f"{settled[2] / 1e12:.0f} TFLOP/s: ln(e2/e1)/ln(f2/f1) = {gamma:.2f} (weaker than "
        "the V ~ f of a full DVFS range: over 1.5-2.0 GHz the voltage moves little)")
    if l2:
        src["tensor_pj_per_flop.wgmma"] = (
            f"M: the half-duty bf16 GEMM at {hot[0] / 1e6:.0f} MHz: ({hot[1]:.0f} W - static) / "
            f"{hot[2] / 1e12:.0f} TFLOP/s, less its L2-served bytes "
            f"({GEMM_TRAFFIC['gemm_bf16_half_duty']['l2']:.5f} B/FLOP) at l2_pj_per_byte and "
            f"its HBM bytes ({GEMM_TRAFFIC['gemm_bf16_half_duty']['hbm']:.5f} B/FLOP) at "
            "hbm_pj_per_byte (Nsight Compute, validate/probe_gemm_l2.py); includes its "
            "shared-memory operand reads")
        src["l2_pj_per_byte"] = (
            f"M: L2 read walk (validate/power_probe.py l2_read, 16 MiB L2-resident buffer), "
            f"steady: ({wl:.0f} W - static) / {rl / 1e12:.2f} TB/s at {fl / 1e6:.0f} MHz, less "
            f"its FADD per 4 B at fp32_pj_per_flop: {e_l2 / PICO:.1f} pJ/B "
            "(validate/reports/h200/probes/power-l2-wgmma.json); not scaled with the SM clock "
            "(ASSUMED, as HBM)")
    else:
        src["tensor_pj_per_flop.wgmma"] = (
            f"M: the half-duty bf16 GEMM at {hot[0] / 1e6:.0f} {clock_word}: ({hot[1]:.0f} W - "
            f"static) / {hot[2] / 1e12:.0f} TFLOP/s, scaled to {f_ref / 1e6:.0f} MHz; includes "
            "the GEMM's shared-memory operand reads and its HBM traffic")
        src["l2_pj_per_byte"] = (
            "ASSUMED 0: the tensor energies are GEMM energies with their own L2 traffic in "
            "them; the H200's split (22.85 pJ/B from an L2 read walk) is measured but not "
            "applied (validate/README.md, Energy per byte from L2)")
    values = {"tdp_w": tdp, "static_w": static, "reference_clock_hz": f_ref,
              "voltage_exponent": gamma, "hbm_pj_per_byte": e_hbm,
              "l2_pj_per_byte": e_l2 / PICO}
    tensor = {"wgmma": e_tensor}
    for key, bench, label in (("mufu_pj_per_op", "mufu_exp2", "MUFU ex2 register loop"),
                              ("fp32_pj_per_flop", "fp32_fma", "FP32 FMA register loop")):
        f, w, r = _phase(_bench(doc, bench), "steady")
        e = (w - static) / r / (f / f_ref) ** gamma / PICO
        values[key] = e
        src[key] = (f"M: {label} (validate/_bench_kernels.py), steady: ({w:.0f} W - static) / "
                    f"{r / 1e12:.2f} T/s at {f / 1e6:.0f} MHz, scaled to {f_ref / 1e6:.0f} MHz")
    if mma_sync:
        f, w, r = (mma_sync["sm_clock_mean_hz"] * tick.get("mma_sync", 1.0),
                   mma_sync["power_mean_w"], mma_sync["flop_per_s"])
        tensor["mma_sync"] = (w - static) / r / (f / f_ref) ** gamma / PICO
        src["tensor_pj_per_flop.mma_sync"] = (
            f"M: mma.sync loop fed by ldmatrix (validate/probe_mma_smem.py run_power), steady: "
            f"({w:.0f} W - static) / {r / 1e12:.0f} TFLOP/s at {f / 1e6:.0f} "
            + ("MHz (the cores' clock: NVML's x the ratio measured beside SDPA flash's "
               "mma.sync kernels, ASSUMED for this loop, which was not run beside the probe)"
               if tick else "MHz")
            + f", scaled to {f_ref / 1e6:.0f} MHz; includes its shared-memory operand reads")
    else:
        tensor["mma_sync"] = e_tensor
        src["tensor_pj_per_flop.mma_sync"] = "ASSUMED: the WGMMA energy per FLOP (no probe)"
    values["tensor_pj_per_flop"] = tensor
    values["smem_pj_per_byte"] = 0.0
    src["smem_pj_per_byte"] = ("ASSUMED 0: no shared-memory-only microbenchmark (Triton has "
                               "no explicit shared-memory access); the measured GEMM energies "
                               "include their operand reads")
    src["tdp_w"] = f"M: NVML enforced power limit {tdp:.0f} W"
    src["reference_clock_hz"] = "M: NVML max SM clock (= max_clock_hz)"
    checks = {}
    import perfsim
    from perfsim.gpu import TENSOR_ENERGY_SCALE

    # the whole dense GEMM's tensor rate per clock (0.92 per tick on the H200, its tile padding
    # and wave tail included; not GPUSpec.tensor_sustained_fraction, the pipe's rate), at the
    # clock the benchmark's clocks are in (the cores' with ``tick``)
    h200 = perfsim.load_gpu("h200-sxm")
    peak = h200.sm_count * h200.tensor_flops_per_clk("bf16", "wgmma")
    for name in ("gemm_bf16", "gemm_bf16_zeros", "gemm_fp16"):
        bench = _bench(doc, name)
        if bench and _phase(bench, "steady"):
            f, _, r = _phase(bench, "steady")
            checks[f"{name}_per_clock_fraction"] = r / (peak * f)

    # (with ``tick``, a check whose ratio was not measured is left out: fp8's)
    for name, dtype in (("gemm_fp16", "fp16"), ("gemm_fp8_e4m3", "fp8_e4m3")):
        bench = _bench(doc, name)
        if bench and _phase(bench, "steady"):
            f, w, r = _phase(bench, "steady")
            # its traffic taken as the bf16 8192^3 GEMM's per FLOP scaled by the operand width
            # (fp8: half; not profiled per dtype)
            width = 0.5 if dtype == "fp8_e4m3" else 1.0
            model = (static + (e_tensor * TENSOR_ENERGY_SCALE[dtype] * PICO
                               * (f / f_ref) ** gamma + width * traffic["gemm_bf16"]) * r)
            checks[name] = {"measured_w": w, "model_w": model, "clock_mhz": f / 1e6}
    for name in ("wgmma_smem_1cta", "wgmma_smem_2cta"):
        bench = _bench(l2, name) if l2 else None
        if bench and _phase(bench, "steady"):
            f, w, r = _phase(bench, "steady")
            checks[name] = {"measured_pj_per_flop_at_reference_clock":
                            (w - static) / r / (f / f_ref) ** gamma / PICO,
                            "fitted_wgmma_pj_per_flop": e_tensor, "clock_mhz": f / 1e6}
    return {"values": values, "sources": src, "checks": checks}


# ------------------------------------------------------------------ the catalog rule
def catalog_power(gpu, h200: dict) -> tuple[dict, dict]:
    """``(values, sources)`` of ``gpu``'s ``[power]`` table from the H200's fitted values."""
    hv = h200
    tdp, min_clock, limit_src = (LIMITS[gpu.id] if gpu.id in LIMITS else
                                 (gpu.power.tdp_w, gpu.power.min_clock_hz, None))
    share = hv["static_w"] / hv["tdp_w"]
    values = {"tdp_w": tdp, "static_w": round(share * tdp, 1),
              "reference_clock_hz": gpu.max_clock_hz, "min_clock_hz": min_clock,
              "voltage_exponent": hv["voltage_exponent"],
              "hbm_pj_per_byte": hv["hbm_pj_per_byte"], "smem_pj_per_byte": 0.0,
              "l2_pj_per_byte": hv.get("l2_pj_per_byte", 0.0)}
    src = {"static_w": f"ASSUMED: the H200's measured static share of its limit "
                       f"({100 * share:.1f} %) times tdp_w",
           "voltage_exponent": ("ASSUMED: the H200's measured value" if hv.get("l2_pj_per_byte")
                                else "ASSUMED: the H200's value from its GEMM-inclusive fit "
                                "(the GEMM's L2 and HBM energy left in its tensor energy, as "
                                "this GPU's energies are; the H200's own L2-split fit gives "
                                "a larger one)"),
           "hbm_pj_per_byte": "ASSUMED: the H200's measured energy per HBM byte",
           "smem_pj_per_byte": "ASSUMED 0, as the H200 (GEMM energies include operand reads)",
           "l2_pj_per_byte": ("ASSUMED: the H200's measured energy per byte L2 serves"
                              if hv.get("l2_pj_per_byte") else
                              "ASSUMED 0, as the H200 (GEMM energies include their L2 "
                              "traffic)"),
           "reference_clock_hz": "= max_clock_hz"}
    if gpu.id in GH100:
        # the same SM's energies hold at the clock they were measured at; quoted at a lower
        # top clock (the H100 PCIe's 1755 MHz) they would charge 1980-MHz energies there
        values["reference_clock_hz"] = hv["reference_clock_hz"]
        src["reference_clock_hz"] = ("I: the clock the H200's energies were measured at "
                                     f"({hv['reference_clock_hz'] / 1e6:.0f} MHz), as they are "
                                     "taken for the same GH100 SM; at a lower top clock they "
                                     "scale by (f / that clock)^voltage_exponent like the "
                                     "H200's own")
    if limit_src:
        src["tdp_w"] = limit_src
        src["min_clock_hz"] = limit_src
    family = gpu.native_tensor_family
    if gpu.id in GH100:
        scale, why = 1.0, "I: same GH100 SM and process as the measured H200"
    else:
        # a dense GEMM at clock_hz meets tdp_w: e_native at f_ref from that balance
        rate = (gpu.tensor_flops_per_clk("bf16", family) * gpu.tensor_sustained_fraction
                * gpu.sm_count * gpu.clock_hz)
        # with the H200's energies split (fit --l2), the GEMM's own L2 and HBM traffic (the
        # H200's cuBLAS figures) at their energies; otherwise they are in the tensor energy
        half = GEMM_TRAFFIC["gemm_bf16_half_duty"]
        moved = ((half["l2"] * values["l2_pj_per_byte"] + half["hbm"]
                  * values["hbm_pj_per_byte"]) * PICO if values["l2_pj_per_byte"] else 0.0)
        e_native = (((tdp - values["static_w"]) / rate - moved)
                    / (gpu.clock_hz / gpu.max_clock_hz) ** hv["voltage_exponent"] / PICO)
        scale = e_native / hv["tensor_pj_per_flop"]["wgmma"]
        traffic = (" (its L2 and HBM traffic as the H200's cuBLAS GEMM's)" if moved else "")
        why = (f"ASSUMED: the H200's energies x {scale:.3f}, the factor that makes a dense "
               f"bf16 GEMM{traffic} at clock_hz "
               f"({gpu.clock_hz / 1e6:.0f} MHz) draw tdp_w (the "
               "vendor's peak clock taken as sustainable; the H200 measurement shows it is "
               "optimistic there)")
    tensor = {family: hv["tensor_pj_per_flop"]["wgmma"] * scale}
    if family != "mma_sync":
        tensor["mma_sync"] = hv["tensor_pj_per_flop"]["mma_sync"] * scale
    else:
        tensor["mma_sync"] = hv["tensor_pj_per_flop"]["wgmma"] * scale
    values["tensor_pj_per_flop"] = tensor
    values["mufu_pj_per_op"] = hv["mufu_pj_per_op"] * scale
    values["fp32_pj_per_flop"] = hv["fp32_pj_per_flop"] * scale
    for key in ("mufu_pj_per_op", "fp32_pj_per_flop"):
        src[key] = why
    for fam in tensor:
        src[f"tensor_pj_per_flop.{fam}"] = why
    return values, src


# ------------------------------------------------------------------ TOML rewriting
def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if v != int(v) or abs(v) >= 1e6 else f"{v:.1f}"
    return str(v)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _kept_sources(path: Path, keys) -> dict:
    """The ``power.KEY`` source strings ``path`` has for ``keys`` (those it has)."""
    text = path.read_text(encoding="utf-8")
    keep = {}
    for key in keys:
        m = re.search(rf'"power\.{key}" = "((?:[^"\\]|\\.)*)"', text)
        if m:
            keep[key] = m.group(1).replace('\\"', '"')
    return keep


def rewrite(path: Path, values: dict, sources: dict) -> None:
    """Replace ``path``'s ``[power]`` tables and ``power.*`` sources (insert them if absent)."""
    text = path.read_text(encoding="utf-8")
    # the old block and the blank lines before it (the new one goes in with one)
    text = re.sub(r"\n+\[power\]\n.*?(?=\n\[(?!power))", "", text, flags=re.S)
    text = re.sub(r'\n"power\.[^"]*" = "(?:[^"\\]|\\.)*"', "", text)
    tensor = values["tensor_pj_per_flop"]
    block = ["[power]"] + [f"{k} = {_fmt(v)}" for k, v in values.items()
                           if k != "tensor_pj_per_flop"]
    block += ["", "[power.tensor_pj_per_flop]"] + [f"{k} = {_fmt(v)}" for k, v in
                                                   tensor.items()]
    text = re.sub(r"\n+\[features\]", "\n\n" + "\n".join(block).replace("\\", "\\\\")
                  + "\n\n[features]", text, count=1)
    sources = {"tensor_pj_per_flop": "energy per tensor FLOP by instruction family: see the "
               "power.tensor_pj_per_flop.<family> entries", **sources}
    lines = [f'"power.{k}" = "{_escape(v)}"' for k, v in sources.items()]
    text = text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfsim.validate.fit_power")
    ap.add_argument("microbench", type=Path)
    ap.add_argument("--mma-sync", type=Path, default=None)
    ap.add_argument("--l2", type=Path, default=None,
                    help="microbenchmark document with the l2_read walk (power-l2-wgmma.json)")
    ap.add_argument("--tick", type=Path, nargs="+", default=None,
                    help="probe_tick_clock documents: fit at the cores' clock, not NVML's")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    doc = json.loads(args.microbench.read_text(encoding="utf-8"))
    mma = json.loads(args.mma_sync.read_text(encoding="utf-8")) if args.mma_sync else None
    l2 = json.loads(args.l2.read_text(encoding="utf-8")) if args.l2 else None
    tick = (tick_ratios([json.loads(p.read_text(encoding="utf-8")) for p in args.tick])
            if args.tick else None)
    fitted = fit(doc, mma, l2, tick)
    if tick:
        fitted["tick_ratios"] = tick
    h200 = fitted["values"]
    # GPUs outside GH100 derive their energies from a dense GEMM meeting their limit; the
    # L2 and HBM bytes per FLOP of that GEMM are the H200 cuBLAS kernel's (128 x 256 tiles),
    # which do not carry over to other tile shapes (Blackwell's 2-CTA 256-wide tiles move
    # about half): they take the H200's GEMM-inclusive fit, L2 bytes at 0 (ASSUMED)
    inclusive = fit(doc, mma, None, tick)["values"] if l2 else h200
    print(json.dumps(fitted, indent=1))
    if not args.write:
        return 0
    import perfsim

    old = perfsim.load_gpu("h200-sxm").power
    h200["min_clock_hz"] = old.min_clock_hz if old else 1.2e9
    fitted["sources"].setdefault("min_clock_hz", "ASSUMED: floor for the power controller's "
                                 "clock (below every clock measured under load, 1.46 GHz)")
    order = ["tdp_w", "static_w", "reference_clock_hz", "min_clock_hz", "voltage_exponent",
             "fp32_pj_per_flop", "mufu_pj_per_op", "smem_pj_per_byte", "hbm_pj_per_byte",
             "l2_pj_per_byte", "spill_pj_per_byte", "tensor_pj_per_flop"]
    # the spill energy is not fitted here (validate/fit_spill_energy.py): every entry keeps
    # its value and its source
    h200["spill_pj_per_byte"] = old.spill_pj_per_byte if old else 0.0
    kept = _kept_sources(HARDWARE / "h200-sxm.toml", ("spill_pj_per_byte",))
    rewrite(HARDWARE / "h200-sxm.toml", {k: h200[k] for k in order},
            {**fitted["sources"], **kept})
    for gid in perfsim.gpus():
        if gid == "h200-sxm":
            continue
        gpu = perfsim.load_gpu(gid)
        values, src = catalog_power(gpu, h200 if gid in GH100 else inclusive)
        values["spill_pj_per_byte"] = gpu.power.spill_pj_per_byte if gpu.power else 0.0
        # the breadth entries' own limit sources, and every entry's spill energy source
        keep = _kept_sources(HARDWARE / f"{gid}.toml", ("spill_pj_per_byte",) + (
            ("tdp_w", "min_clock_hz") if gid not in LIMITS else ()))
        rewrite(HARDWARE / f"{gid}.toml", {k: values[k] for k in order}, {**src, **keep})
    return 0


if __name__ == "__main__":
    sys.exit(main())
