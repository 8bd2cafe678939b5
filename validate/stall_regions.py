"""Where a kernel's warps wait, by region of its code: Nsight Compute's warp-state samples per
SASS instruction (``validate/probe_ncu_source.sh``, the source page as CSV) summed over the
code before the main loop (prologue and unrolled masked iterations), the main loop (the
longest backward branch, as ``sass_loops.py`` finds it) and the code after it.

    python -m perfsim.validate.stall_regions CASE-source.csv.gz [...]

For each file: per region its bytes of code, instructions executed (warp level), and samples
by stall reason (``stall_*``: all samples, issued or not), the largest first, with each
reason's share of the region's samples. Errors (a file that is not such a page) are one line.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys

from perfsim.validate import sass_loops
from perfsim.validate.sass_loops import INSTRUCTION_BYTES

#: Stall reasons listed per region (the largest first).
TOP_REASONS = 6


def read_page(path: str) -> tuple[str, list[dict]]:
    """``(kernel name, rows)`` of a source page (``ncu --page source --csv --print-source
    sass``, gzip or plain): each row the page's columns, ``Address`` as an int.

    Raises:
        ValueError: no ``Address`` / ``Source`` header, or no instruction under it."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    lines = text.splitlines()
    kernel = ""
    for i, line in enumerate(lines):
        if line.startswith('"Kernel Name"'):
            kernel = next(csv.reader([line]))[1]
        if line.startswith('"Address"'):
            reader = csv.DictReader(io.StringIO("\n".join(lines[i:])))
            rows = [dict(r, Address=int(r["Address"], 16)) for r in reader
                    if r.get("Address", "").startswith("0x")]
            if not rows:
                raise ValueError(f"{path}: a source page without instructions")
            return kernel, rows
    raise ValueError(f"{path}: no 'Address' header (not an ncu source page as CSV)")


def _number(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return 0.0


def main_loop(rows: list[dict]) -> tuple[int, int] | None:
    """``(first address, branch address)`` of the page's main loop
    (:func:`sass_loops.main_loop` on its SASS), else None."""
    loop = sass_loops.main_loop([(r["Address"], r["Source"]) for r in rows])
    return loop[:2] if loop else None


def regions(rows: list[dict]) -> dict:
    """Per region (``before``, ``loop``, ``after``): bytes, instructions executed and
    ``stall_*`` samples (all samples)."""
    loop = main_loop(rows)
    reasons = [k for k in rows[0] if k.startswith("stall_") and "(Not Issued)" not in k]
    out = {name: {"bytes": 0, "executed": 0.0, "samples": 0.0,
                  **{k: 0.0 for k in reasons}} for name in ("before", "loop", "after")}
    for r in rows:
        if loop is None or r["Address"] < loop[0]:
            name = "before"
        elif r["Address"] <= loop[1]:
            name = "loop"
        else:
            name = "after"
        region = out[name]
        region["bytes"] += INSTRUCTION_BYTES
        region["executed"] += _number(r.get("Instructions Executed"))
        region["samples"] += _number(r.get("Warp Stall Sampling (All Samples)"))
        for k in reasons:
            region[k] += _number(r[k])
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m perfsim.validate.stall_regions CASE-source.csv[.gz] [...]",
              file=sys.stderr)
        return 2
    for path in argv:
        try:
            kernel, rows = read_page(path)
        except (OSError, ValueError) as exc:
            print(f"stall_regions: {exc}", file=sys.stderr)
            return 1
        total = sum(_number(r.get("Warp Stall Sampling (All Samples)")) for r in rows)
        print(f"{path}: {kernel[:100]}\n  {len(rows)} instructions, {total:.0f} samples")
        for name, region in regions(rows).items():
            samples = region["samples"] or 1.0
            top = sorted(((v, k) for k, v in region.items() if k.startswith("stall_")),
                         reverse=True)[:TOP_REASONS]
            share = 100 * region["samples"] / (total or 1)
            print(f"  {name:6s} {region['bytes']:7d} B  executed {region['executed']:12.0f}  "
                  f"samples {region['samples']:7.0f} ({share:4.1f} %)  "
                  + ", ".join(f"{k[6:]} {100 * v / samples:.0f} %" for v, k in top if v))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
