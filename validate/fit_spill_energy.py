"""The energy of a register-spill reload, from a power microbenchmark (issue 9; no attention).

    python -m perfsim.validate.fit_spill_energy [POWER.json] [SPILL_COST.json]

``power_probe.py``'s ``spill_*`` benches run ``probe_spill_cost``'s MMA loop back to back:
one 4-warp CTA per SM accumulating into two fp32 tiles too large for 255 registers, so ptxas
spills them and every step reloads and stores them back through local memory (Nsight Compute:
``lts__t_bytes`` holds those bytes, so they cross the L2), and a control of the same FLOPs that
does not spill. For each pair::

    E_FLOP  = (W_control - static) / FLOP/s_control, carried from the control's NVML clock
              to the spilling run's by the catalog's voltage exponent
    E_spill = (W_spill - static - E_FLOP x FLOP/s_spill) / reloaded bytes per second

where ``static`` is the idle board power of the same session and the reloaded bytes per call
come from the profile of the same compiled kernel (``probe_spill_cost.json``: the H200's
Nsight Compute counts; ``n_regs`` and ``n_spills`` of both compiles are checked equal). The
figure is per *reloaded* byte, its store back included (the loop stores each reloaded byte
once: stores / loads = 1.00 in that profile). Defaults: the committed H100 run
(``reports/h100/probes/spill/power-spill.json``) and the H200 profile.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPORTS = Path(__file__).resolve().parent / "reports"
POWER = REPORTS / "h100" / "probes" / "spill" / "power-spill.json"
SPILL_COST = REPORTS / "h200" / "probes" / "probe_spill_cost.json"
#: spilling bench -> its control (power_probe.py; probe_spill_cost.CONTROLS)
PAIRS = {"spill_m128_n128": "nospill_m64_n128", "spill_m64_n256": "nospill_m128_n64"}
PICO = 1e-12


def _steady(bench: dict) -> tuple[float, float, float]:
    st = bench["steady"]
    return st["sm_mhz_mean"] * 1e6, st.get("power_inst_w_mean") or st["power_avg_w_mean"], \
        st.get("ops_per_s")


def _compile(description: str) -> tuple[int, int]:
    m = re.search(r"n_regs (\d+), n_spills (\d+)", description or "")
    if not m:
        raise ValueError(f"no n_regs/n_spills in {description!r}")
    return int(m.group(1)), int(m.group(2))


def fit(power: dict, spill_cost: dict, voltage_exponent: float) -> dict:
    """One row per spilling bench, and their mean (pJ per reloaded byte)."""
    by = {b["name"]: b for b in power["benchmarks"]}
    static = _steady(by["idle"])[1]
    profiled = {r["variant"]: r for r in spill_cost["rows"]}
    rows = []
    for spill, control in PAIRS.items():
        f_s, w_s, flops_s = _steady(by[spill])
        f_c, w_c, flops_c = _steady(by[control])
        prof = profiled[spill]
        if _compile(by[spill]["description"]) != (prof["n_regs"], prof["n_spills"]):
            raise ValueError(f"{spill}: compiled differently from the profiled kernel")
        e_flop = (w_c - static) / flops_c * (f_s / f_c) ** voltage_exponent
        calls = flops_s / prof["flops"]
        reload_rate = prof["local_load_bytes"] * calls
        rest = w_s - static - e_flop * flops_s
        rows.append({"bench": spill, "control": control, "static_w": static,
                     "spill_w": w_s, "spill_clock_mhz": f_s / 1e6, "control_w": w_c,
                     "control_clock_mhz": f_c / 1e6,
                     "control_pj_per_flop_at_spill_clock": e_flop / PICO,
                     "flop_per_s": flops_s, "reloaded_bytes_per_s": reload_rate,
                     "stored_over_reloaded": prof["local_store_bytes"] / prof["local_load_bytes"],
                     "watts_beyond_the_flops": rest,
                     "pj_per_reloaded_byte": rest / reload_rate / PICO})
    mean = sum(r["pj_per_reloaded_byte"] for r in rows) / len(rows)
    return {"rows": rows, "pj_per_reloaded_byte": mean}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import perfsim

    power = json.loads(Path(argv[0] if argv else POWER).read_text())
    spill_cost = json.loads(Path(argv[1] if len(argv) > 1 else SPILL_COST).read_text())
    gamma = perfsim.load_gpu("h200-sxm").power.voltage_exponent
    out = fit(power, spill_cost, gamma)
    from perfsim.cli.common import print_table

    print_table(f"energy of a spilled byte ({power['device']}; voltage exponent {gamma:.3f})",
                ["bench", "W", "MHz", "control W @ MHz", "control pJ/FLOP", "TFLOP/s",
                 "reloaded TB/s", "W beyond FLOPs", "pJ / reloaded B"],
                [[r["bench"], f"{r['spill_w']:.0f}", f"{r['spill_clock_mhz']:.0f}",
                  f"{r['control_w']:.0f} @ {r['control_clock_mhz']:.0f}",
                  f"{r['control_pj_per_flop_at_spill_clock']:.3f}",
                  f"{r['flop_per_s'] / 1e12:.0f}", f"{r['reloaded_bytes_per_s'] / 1e12:.2f}",
                  f"{r['watts_beyond_the_flops']:.0f}", f"{r['pj_per_reloaded_byte']:.1f}"]
                 for r in out["rows"]])
    print(f"mean: {out['pj_per_reloaded_byte']:.1f} pJ per reloaded byte (its store included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
