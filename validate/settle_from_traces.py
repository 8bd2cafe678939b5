"""Clock and power of the power-capped microbenchmarks in the window where ``external.py`` times
its rows, against the settled run (no new measurement: the committed ``power_probe`` traces).

``external.py`` warms each call up back to back for at least 0.4 s and then times it for about
0.25 s; ``power_probe.py`` runs a benchmark back to back for 3-3.5 s with NVML sampled every
5 ms. For every benchmark whose steady power is within 40 W of the 700 W limit this prints the
mean SM clock and instant power over 0.4-0.65 s after its start ("early") and from 1.5 s to
its end ("settled"), and the ratio of the two clocks.

    python -m perfsim.validate.settle_from_traces [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

PROBES = Path(__file__).resolve().parent / "reports/h200/probes"
EARLY = (0.4, 0.65)
SETTLED_FROM = 1.5


def _window(trace, start, end):
    rows = [s for s in trace if start <= s["t"] < end and s.get("sm_mhz")]
    if not rows:
        return None
    return (sum(s["sm_mhz"] for s in rows) / len(rows),
            sum(s.get("p_inst_w") or s.get("p_avg_w") or 0 for s in rows) / len(rows))


def rows() -> list[tuple]:
    """``(file, benchmark, early MHz, early W, settled MHz, settled W)`` per capped run."""
    out = []
    for path in sorted(PROBES.glob("power*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for bench in doc.get("benchmarks", []):
            trace, steady = bench.get("trace"), bench.get("steady") or {}
            if not trace or (steady.get("power_inst_w_mean") or 0) < 660:
                continue
            early = _window(trace, *EARLY)
            settled = _window(trace, SETTLED_FROM, (bench.get("run_s") or 3.5) - 0.05)
            if early and settled and settled[0] < 1975:      # the clock moved: capped
                out.append((path.name, bench["name"], *early, *settled))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    table = rows()
    lines = ["| file | benchmark | early MHz | early W | settled MHz | settled W | clock ratio |",
             "|---|---|---|---|---|---|---|"]
    for f, name, em, ew, sm, sw in table:
        lines.append(f"| {f} | {name} | {em:.0f} | {ew:.0f} | {sm:.0f} | {sw:.0f} | "
                     f"{em / sm:.3f} |")
    ratios = [em / sm for _, _, em, _, sm, _ in table]
    watts = [ew - sw for _, _, _, ew, _, sw in table]
    lines.append("")
    lines.append(f"{len(table)} runs: early / settled clock median {statistics.median(ratios):.3f} "
                 f"({min(ratios):.3f}-{max(ratios):.3f}); early − settled instant power median "
                 f"{statistics.median(watts):+.0f} W ({min(watts):+.0f} to {max(watts):+.0f}).")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
