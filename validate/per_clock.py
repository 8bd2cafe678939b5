"""The timing model alone: perfsim's time for each kernel Nsight Compute profiled, at the SM
clock that kernel ran at, against the profiled duration.

The external reports compare a predicted time at a predicted clock with a measured time at a
measured clock, so an error of the timing model (cycles) and one of the power model (the
clock) can cancel: a kernel predicted in too few cycles is predicted to draw more power, so
the power limit holds its predicted clock lower, and its predicted time can come out right at
the wrong clock. Here the clock is taken from the profile instead of predicted: every case of
``validate/reports/{h200,h100}/probes/ncu/summary*.json`` (``validate/probe_ncu.sh``; shapes
as ``validate/probe_ncu.py`` names them, ``parse_case``) is predicted with its preset
(``external_report.PRESETS``) at the main kernel's **effective** SM clock (Nsight Compute's
``sm__cycles_elapsed`` over ``gpu__time_duration``, the cycles the SMs ticked), the board
power limit lifted (the clock is measured, not solved for; a kernel that ticked above the
model's tensor-core clock ceiling runs at the ceiling, and the table says so), and the main
kernel's predicted seconds (perfsim's longest kernel) are compared with the profiled duration
of the longest kernel of the call. No NVML reading and no external-grid timing is used.

A case profiled more than once (the same name in several summaries) is one case: its error is
the mean of its profiles' (they agree within ~1 % in cycles), so the group medians weigh each
shape once.

What the profile's conditions are: ``--clock-control none`` (the clock the GPU chose; each
kernel's effective clock differs), one launch per kernel replayed per metric pass with the
caches flushed before each pass (so the L2 starts cold: a few microseconds at most of these
54 µs - 17 ms kernels), and kernels serialised (no overlap between a call's kernels).
Left out, and listed in the report: decode (``dec``) and few-query (``pre``) cases, which
profile other kernels than the grids' (split-KV, decode templates); implementations perfsim
does not model as one main kernel (``math``: a chain of kernels); and profiles without a
cycle counter or duration (no effective clock to run the model at).

    python -m perfsim.validate.per_clock [--gpu h200|h100] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from perfsim.validate.probe_ncu import NCU_IMPLS, parse_case

REPORTS = Path(__file__).resolve().parent / "reports"
#: Folder under ``REPORTS`` -> catalog GPU.
GPUS = {"h200": "h200-sxm", "h100": "h100-sxm5"}
PHASES = ("fwd", "bwd")
#: Fragments of the profiled kernels' names by phase: the pairing check of the tests (the
#: longest kernel of a backward call must be a backward kernel, not its forward or a helper).
KERNEL_MARKS = {"fwd": ("fwd", "fprop", "cutlassF", "flex_attention"),
                "bwd": ("bwd", "bprop", "cutlassB", "backward")}


def unlimited(gpu):
    """A copy of the ``GPUSpec`` ``gpu`` with its board power limit (``power.tdp_w``) lifted
    to the schema's ceiling, 5000 W, so that a clock lock holds (``TimingParams.clock`` as a
    number otherwise yields to the power limit); ``gpu`` itself when it has no power table."""
    if gpu.power is None:
        return gpu
    return gpu.model_copy(update={"power": gpu.power.model_copy(update={"tdp_w": 5000.0})})


def _folder(folder: str) -> str:
    if folder not in GPUS:
        from perfsim.errors import PerfsimError

        raise PerfsimError(f"unknown profile folder {folder!r}; allowed: {', '.join(GPUS)}")
    return folder


def cases(folder: str) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """The profiles of ``REPORTS/folder/probes/ncu/summary*.json`` (``folder``: ``"h200"`` or
    ``"h100"``) this report scores, and those it leaves out.

    Returns:
        ``(kept, skipped)``: ``kept`` one dict per profile — its ``file``, case name, the
        shape of :func:`probe_ncu.parse_case`, the main (longest) kernel's name, its
        ``measured_s`` (seconds) and ``clock_hz`` (effective SM clock, Hz); ``skipped``
        ``(file, case, reason)`` for every case left out.

    Raises:
        PerfsimError: an unknown ``folder``."""

    kept, skipped = [], []
    for path in sorted((REPORTS / _folder(folder) / "probes" / "ncu").glob("summary*.json")):
        for name, kernels in json.loads(path.read_text())["cases"].items():
            try:
                shape = parse_case(name)
            except ValueError:
                skipped.append((path.name, name, "name not in probe_ncu.py's form"))
                continue
            if shape["phase"] not in PHASES:
                skipped.append((path.name, name, f"phase {shape['phase']} (other kernels)"))
                continue
            if shape["impl"] not in NCU_IMPLS:
                skipped.append((path.name, name, f"{shape['impl']}: no single main kernel"))
                continue
            if not kernels:
                skipped.append((path.name, name, "no kernel in the profile"))
                continue
            main = max(kernels, key=lambda k: k.get("duration_s") or 0.0)
            # (ncu_summary writes it where the profile has the cycle counter and duration)
            clock = main.get("effective_clock_hz")
            if not clock:
                skipped.append((path.name, name, "no cycle counter or duration"))
                continue
            kept.append({"file": path.name, "case": name, **shape,
                         "kernel": main["kernel"], "measured_s": main["duration_s"],
                         "clock_hz": clock})
    return kept, skipped


def predict_case(case: dict, gpu) -> dict:
    """``case`` (one of :func:`cases`'s) with perfsim's main kernel at the case's clock on
    ``gpu`` (a ``GPUSpec``, :func:`unlimited`): ``predicted_s`` (seconds), ``error``
    (``predicted_s / measured_s − 1``, a fraction), ``model_kernel`` (its name), ``bound`` and
    ``model_clock_hz`` (the clock it ran at, Hz)."""
    import perfsim
    from perfsim.validate.external_report import PRESETS

    # the tutorial's backward has no non-causal mode (validate/probe_ncu.py)
    causal = case["causal"] or (case["impl"] == "tutorial" and case["phase"] == "bwd")
    w = perfsim.AttentionWorkload(batch=case["batch"], heads=case["heads"],
                                  seqlen_q=case["seqlen"], head_dim=case["head_dim"],
                                  causal=causal, dtype="bf16", phase=case["phase"],
                                  dropout_p=case["dropout_p"])
    p = perfsim.predict(w, gpu=gpu, algorithm=PRESETS[NCU_IMPLS[case["impl"]]],
                        timing={"clock": case["clock_hz"]})
    main = max(p.kernels, key=lambda k: k.seconds)
    return {**case, "predicted_s": main.seconds, "model_kernel": main.cost.name,
            "bound": main.bound, "model_clock_hz": p.clock_hz,
            "error": main.seconds / case["measured_s"] - 1}


def rows(folder: str) -> list[dict]:
    """:func:`predict_case` for every profile :func:`cases` keeps in ``folder`` (``"h200"``
    or ``"h100"``), on that folder's catalog GPU with the power limit lifted.

    Raises:
        PerfsimError: an unknown ``folder``."""
    from perfsim.gpu_catalog import load_gpu

    gpu = unlimited(load_gpu(GPUS[_folder(folder)]))
    return [predict_case(c, gpu) for c in cases(folder)[0]]


def by_case(scored: list[dict]) -> list[dict]:
    """One entry per case name: the first profile's fields, ``error`` the mean of its
    profiles' errors, ``profiles`` how many there were."""
    merged: dict = {}
    for r in scored:
        merged.setdefault((r["case"]), []).append(r)
    return [{**rs[0], "error": statistics.fmean(r["error"] for r in rs), "profiles": len(rs)}
            for rs in merged.values()]


def group_table(scored: list[dict]) -> str:
    """Markdown: per (implementation, phase) the median error over cases and its range."""
    groups: dict = {}
    for r in by_case(scored):
        groups.setdefault((r["impl"], r["phase"]), []).append(r["error"])
    lines = ["| implementation | phase | cases | median error | median \\|error\\| | min … max |",
             "|---|---|---|---|---|---|"]
    for (impl, phase), errs in sorted(groups.items()):
        lines.append(f"| {NCU_IMPLS[impl]} | {phase} | {len(errs)} | "
                     f"{100 * statistics.median(errs):+.1f} % | "
                     f"{100 * statistics.median(abs(e) for e in errs):.1f} % | "
                     f"{100 * min(errs):+.1f} … {100 * max(errs):+.1f} % |")
    return "\n".join(lines)


def case_table(scored: list[dict]) -> str:
    """Markdown: one line per profiled kernel."""
    lines = ["| case | file | clock MHz | profiled µs | perfsim µs | error | perfsim's unit |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(scored, key=lambda r: (r["impl"], r["phase"], r["head_dim"], r["case"])):
        clock = f"{r['clock_hz'] / 1e6:.0f}"
        if abs(r["model_clock_hz"] - r["clock_hz"]) > 0.5e6:
            clock += f" (perfsim {r['model_clock_hz'] / 1e6:.0f})"
        lines.append(f"| {r['case']} | {r['file']} | {clock} | "
                     f"{r['measured_s'] * 1e6:.1f} | {r['predicted_s'] * 1e6:.1f} | "
                     f"{100 * r['error']:+.1f} % | {r['bound']} |")
    return "\n".join(lines)


def report(folder: str) -> str:
    """The markdown report of ``folder``'s profiled kernels (``"h200"`` or ``"h100"``).

    Raises:
        PerfsimError: an unknown ``folder``, or one without a profile to score."""
    scored = rows(folder)
    skipped = cases(folder)[1]
    if not scored:
        from perfsim.errors import PerfsimError

        raise PerfsimError(f"no profiled fwd/bwd cases under {REPORTS / folder / 'probes/ncu'}")
    left = "\n".join(f"- {case} (`{file}`): {why}" for file, case, why in skipped)
    return (f"# The timing model alone, at each profiled kernel's clock — {GPUS[folder]}\n\n"
            f"{len(by_case(scored))} cases ({len(scored)} profiles) of Nsight Compute "
            f"(`{folder}/probes/ncu/summary*.json`), each predicted by the catalog GPU with its "
            "implementation's preset at the main kernel's effective SM clock, the power limit "
            "lifted; error = perfsim's main kernel / the profiled duration − 1, a case's "
            "profiles averaged (`python -m perfsim.validate.per_clock`).\n\n"
            + group_table(scored) + "\n\n" + case_table(scored) + "\n\n"
            + f"Left out ({len(skipped)}):\n\n" + (left or "- none") + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfsim.validate.per_clock",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", choices=sorted(GPUS), default="h200",
                    help="whose profiles (default h200)")
    ap.add_argument("--out", type=Path, help="write the markdown report here too")
    args = ap.parse_args(argv)
    from perfsim.errors import PerfsimError
    from perfsim.files import check_output, write_text_atomic

    try:
        if args.out is not None:
            check_output(args.out, (".md",), "--out")
        text = report(args.gpu)
    except PerfsimError as exc:
        sys.stderr.write(f"per_clock: {exc}\n")
        return 2
    sys.stdout.write(text)
    if args.out is not None:
        write_text_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
