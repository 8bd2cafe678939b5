"""Every committed grid of the kernels users call, scored at once: the default path today.

Each ``reports/<device>-external*/results.jsonl`` (the main grid and every hold-out, as
``external_report`` scores one) is scored with the catalog GPU of the device it was measured
on (``h200-sxm``, ``h100-sxm5``: :func:`external_report.measured_gpu`) and default options,
with the model as it is now. The committed ``score-*`` folder of each grid is the record of
the model it was frozen at; this table is the same rows under today's model, pooled, so a
change that helps one grid and hurts the others shows. Left out: the re-timings of main-grid
shapes under other warm-up rules (:data:`RETIMINGS`), which repeat shapes already counted.

    python -m perfsim.validate.pooled_report [--out FILE.md]

Per GPU and grid kind (main grid, hold-outs): rows, median |error|, median signed error,
share within ±10 %, median |error| of the predicted SM clock against the sampled one
(``external_report.score``'s ``clock_error``: NVML's mean times the tick ratio for tensor-core
calls), per (implementation, phase); then per GPU the fastest implementation
right on how many (shape, phase) pairs (``external_report.ranking``, a pair being a shape
of one grid), main grid, hold-outs and pooled. Errors are (predicted − measured) / measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfsim.errors import PerfsimError
from perfsim.validate.external_report import group_table, load_rows, measured_gpu, ranking, score

REPORTS = Path(__file__).resolve().parent / "reports"
#: Folders that re-time main-grid shapes with a longer warm-up (validate/README, "cuDNN on
#: the H200 at a settled clock" and the H100 runs beside it): their shapes are counted once,
#: in the main grid.
RETIMINGS = ("h100-rebase-external", "h100-settled-external", "h200-settled-external")


def grids(root: Path | None = None) -> list[Path]:
    """The grid folders pooled under ``root`` (default :data:`REPORTS`): ``*-external`` (a
    main grid) and ``*-external-holdout*``, each with a ``results.jsonl``, sorted by name."""
    root = REPORTS if root is None else root
    return sorted(p for p in root.glob("*-external*")
                  if p.is_dir() and (p / "results.jsonl").is_file() and p.name not in RETIMINGS)


def kind(folder: Path) -> str:
    """``"main"`` for a main grid (``<device>-external``), else ``"hold-out"``."""
    return "main" if folder.name.endswith("-external") else "hold-out"


def pooled(root: Path | None = None) -> dict:
    """``{(gpu id, kind): [scored rows]}`` over :func:`grids` of ``root`` (default
    :data:`REPORTS`); each scored row (as
    ``external_report.score`` gives it) carries its grid's folder name in ``grid``.

    Raises:
        perfsim.PerfsimError: a folder whose rows name no device the catalog knows."""
    out: dict = {}
    for folder in grids(root):
        gpu = measured_gpu(folder)
        rows = [r for r in load_rows(folder / "results.jsonl") if "_skipped_lines" not in r]
        scored = score(rows, gpu)
        for s in scored:
            s["grid"] = folder.name
        out.setdefault((gpu, kind(folder)), []).extend(scored)
    return out


def _rank(scored: list[dict]) -> dict:
    # a shape is one grid's: the same shape measured in two grids is two pairs
    by_grid: dict = {}
    for s in scored:
        by_grid.setdefault(s["grid"], []).append(s)
    total = {"shapes": 0, "agree": 0, "near": 0}
    for rows in by_grid.values():
        r = ranking(rows)
        total["shapes"] += r["shapes"]
        total["agree"] += r["agree"]
        total["near"] += sum(gap < 0.05 for *_, gap in r["misses"])
    return total


def _commit() -> str:
    """The repository's commit (short hash, ``+`` when the tree has changes), or ``"?"``
    outside a git checkout."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "perfsim", "hardware"], capture_output=True, text=True,
                               check=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def markdown(data: dict, commit: str | None = None) -> str:
    """The report's text (see the module docstring); ``commit`` names the model scored
    (default: :func:`_commit`)."""
    lines = ["# The default path on every committed grid of the kernels users call", "",
             f"Scored with the model at {commit or _commit()} (a `+`: with uncommitted changes "
             "to `perfsim/` or `hardware/`), the catalog GPU of each grid's device and default "
             "options (`python -m perfsim.validate.pooled_report`). Errors: (predicted − "
             "measured) / measured.", ""]
    for (gpu, grid_kind) in sorted(data):
        scored = data[(gpu, grid_kind)]
        n_grids = len({s["grid"] for s in scored})
        lines += [f"## {gpu}, {grid_kind} ({n_grids} grid{'s' if n_grids > 1 else ''})", "",
                  "| implementation | phase | rows | median \\|err\\| | median signed | "
                  "within ±10 % | clock median \\|err\\| |", "|---|---|---|---|---|---|---|"]
        for g in group_table(scored):
            clock = ("-" if g["clock_median_abs"] is None
                     else f"{100 * g['clock_median_abs']:.1f} %")
            lines.append(f"| {g['impl']} | {g['phase']} | {g['n']} | "
                         f"{100 * g['median_abs']:.1f} % | {100 * g['median_signed']:+.1f} % | "
                         f"{100 * g['within_10']:.0f} % | {clock} |")
        lines.append("")
    lines += ["## Fastest implementation right", "",
              "| GPU | grids | pairs | right | share | misses within 5 % |",
              "|---|---|---|---|---|---|"]
    for gpu in sorted({g for g, _ in data}):
        parts = [(k, data[(gpu, k)]) for k in ("main", "hold-out") if (gpu, k) in data]
        parts.append(("pooled", [s for _, rows in parts for s in rows]))
        for name, rows in parts:
            r = _rank(rows)
            # no pair where a grid timed one implementation per shape
            share = f"{100 * r['agree'] / r['shapes']:.1f} %" if r["shapes"] else "-"
            lines.append(f"| {gpu} | {name} | {r['shapes']} | {r['agree']} | {share} | "
                         f"{r['near']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsim.validate.pooled_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="write the markdown here (default: print it)")
    args = parser.parse_args(argv)
    try:
        text = markdown(pooled())
    except PerfsimError as exc:
        print(f"pooled_report: {exc}", file=sys.stderr)
        return 2
    if args.out is None:
        print(text, end="")
        return 0
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"pooled_report: cannot write {str(args.out)!r}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
