"""Driver: time the attention kernels users call on a grid, resumable, within a time limit.

    python3 -m perfsim.validate.external_run --grid external --out DIR --limit-seconds S
        [--impls cute sdpa_cudnn ...] [--retry-errors]
    python3 -m perfsim.validate.external_run --summary DIR/results.jsonl   # no GPU needed

Rows go to ``DIR/results.jsonl`` (one JSON object per line, fsynced as each finishes); keys
already there are skipped, so a run cut short loses at most the row in flight. A row starts
only if the time left exceeds its reserve (1.5x the longest row of that implementation so far;
:data:`FIRST_ROW_RESERVE_S` before the first); rows that do not fit are skipped and cheaper
ones tried. An implementation that cannot run here at all (flash_attn.cute not installed,
``.ext`` not carried) is left out of this run without writing rows. After an error that leaves
the CUDA context unusable the run stops with exit code 3 (run again: it resumes).
See :mod:`perfsim.validate.external` for what one row measures.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

from perfsim.validate import external
from perfsim.validate.runner import ResultStore

FIRST_ROW_RESERVE_S = {"cute": 60.0, "triton_tutorial": 45.0, "flex": 60.0}
DEFAULT_FIRST_RESERVE_S, RESERVE_FACTOR, MIN_RESERVE_S = 15.0, 1.5, 4.0


def versions() -> dict:
    import torch

    out = {"torch": torch.__version__, "cuda": str(torch.version.cuda),
           "device": torch.cuda.get_device_name(0)}
    try:
        out["cudnn"] = str(torch.backends.cudnn.version())
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton

        out["triton_version"] = triton.__version__
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        out["flash_attn_4"] = version("flash-attn-4")
    except Exception:  # noqa: BLE001
        pass
    return out


SUMMARY_COLUMNS = ["impl", "phase", "statuses", "mean SM MHz", "mean W"]


def summary_rows(records) -> list[list[str]]:
    """Counts by impl x phase x status, and the mean SM clock and power of the ok rows
    (:data:`SUMMARY_COLUMNS`)."""
    counts = defaultdict(lambda: defaultdict(int))
    clocks, powers = defaultdict(list), defaultdict(list)
    for r in records:
        k = (r.get("impl") or r.get("algorithm"), r.get("phase"))
        counts[k][r.get("status")] += 1
        if r.get("status") == "ok":
            if r.get("sm_clock_mean_hz"):
                clocks[k].append(r["sm_clock_mean_hz"])
            if r.get("power_mean_w"):
                powers[k].append(r["power_mean_w"])
    rows = []
    for k in sorted(counts, key=lambda x: (str(x[0]), str(x[1]))):
        st = ", ".join(f"{s} {n}" for s, n in sorted(counts[k].items()))
        c = f"{sum(clocks[k]) / len(clocks[k]) / 1e6:.0f}" if clocks[k] else "-"
        p = f"{sum(powers[k]) / len(powers[k]):.0f}" if powers[k] else "-"
        rows.append([str(k[0]), str(k[1]), st, c, p])
    return rows


def print_summary(records, title: str = "rows by implementation and phase") -> None:
    """Print :func:`summary_rows` as a rich table."""
    from perfsim.cli.common import print_table

    print_table(title, SUMMARY_COLUMNS, summary_rows(records))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m perfsim.validate.external_run")
    ap.add_argument("--grid", default="external")
    ap.add_argument("--out")
    ap.add_argument("--limit-seconds", type=float, default=540.0)
    ap.add_argument("--impls", nargs="+", default=list(external.DEFAULT_IMPLS),
                    help=f"implementations (default {' '.join(external.DEFAULT_IMPLS)}; "
                    f"also: {' '.join(external.EXTRA_IMPLS)})")
    ap.add_argument("--retry-errors", action="store_true")
    ap.add_argument("--summary", help="print the summary of a results.jsonl and exit")
    args = ap.parse_args(argv)
    if args.summary:
        print_summary(ResultStore(args.summary).load().values())
        return 0
    if not args.out:
        ap.error("--out is required")
    t_start = time.monotonic()
    deadline = t_start + args.limit_seconds
    import torch

    if not torch.cuda.is_available():
        print("external_run: no CUDA GPU found; nothing was timed", file=sys.stderr)
        return 1
    store = ResultStore(Path(args.out) / "results.jsonl")
    done = store.load()
    retry = {"error"} if args.retry_errors else set()
    rows = external.plan(args.grid, args.impls)
    skip_impls = {}
    for impl in dict.fromkeys(i for _, i in rows):
        why = external.available(impl)
        if why:
            skip_impls[impl] = why
            print(f"[skip impl] {impl}: {why}", flush=True)
    todo = [(s, i) for s, i in rows if i not in skip_impls
            and (external.row_key(s, i) not in done
                 or done[external.row_key(s, i)].get("status") in retry)]
    print(f"grid {args.grid}: {len(rows)} rows planned, {len(done)} in store, {len(todo)} to "
          f"measure now (limit {args.limit_seconds:.0f} s)", flush=True)
    try:
        from perfsim.validate.nvml_sampler import NvmlSampler

        sampler = NvmlSampler(period_s=external.SAMPLE_PERIOD_S)
    except Exception as exc:  # noqa: BLE001
        print(f"NVML unavailable ({type(exc).__name__}: {exc}); rows carry no clock samples",
              flush=True)
        sampler = None
    vers = versions()
    longest = defaultdict(float)
    measured = skipped_time = 0
    for shape, impl in todo:
        left = deadline - time.monotonic()
        if left < MIN_RESERVE_S:
            break
        reserve = (RESERVE_FACTOR * longest[impl] if impl in longest
                   else FIRST_ROW_RESERVE_S.get(impl, DEFAULT_FIRST_RESERVE_S))
        if left < max(reserve, MIN_RESERVE_S):
            skipped_time += 1
            continue
        rec = external.measure_row(shape, impl, sampler, vers)
        store.append(rec)
        measured += 1
        longest[impl] = max(longest[impl], rec["wall_s"])
        clk = rec.get("sm_clock_mean_hz")
        print(f"{time.monotonic() - t_start:6.1f}s {rec['key']:62s} {rec['status']:11s} "
              + (f"{rec['measured_s'] * 1e3:9.3f} ms {rec['achieved_tflops']:6.1f} TF "
                 f"{(clk or 0) / 1e6:5.0f} MHz {rec.get('power_mean_w') or 0:4.0f} W "
                 f"err {rec.get('correctness_rel_error') or 0:.1e}"
                 if rec["status"] == "ok" else rec.get("reason", "")[:110])
              + f" [{rec['wall_s']:.1f}s]", flush=True)
        if rec.get("fatal"):
            print("fatal CUDA error: stopping; run again to resume", flush=True)
            return 3
    left_rows = len(todo) - measured
    print(f"measured {measured} rows now; {left_rows} left ({skipped_time} skipped for time); "
          f"{time.monotonic() - t_start:.0f} s", flush=True)
    print_summary(store.load().values())
    return 0


if __name__ == "__main__":
    sys.exit(main())
