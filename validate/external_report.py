"""Score perfsim on the kernels users call (``external.py`` rows): the default path first.

For each measured row (implementation × shape × phase) the prediction is
``perfsim.predict(workload, gpu=GPU, algorithm=<implementation preset>)`` with default options
— what a user who names the implementation gets (:mod:`perfsim.implementations`). The report
gives, per (implementation, phase): rows, median and max |error|, median signed error, rows
within ±10 %; the predicted sustained SM clock against the clock the SMs ticked at in each
row (NVML's mean times :data:`TENSOR_TICK_OVER_NVML` for tensor-core calls, or the device's
own rule, :func:`tensor_tick_clock`: on the H100 NVML's mean up to the clock the row's
kernel ticks at alone); and per
(shape, phase) whether the predicted fastest implementation is the measured fastest.

    python -m perfsim.validate.external_report DIR [--gpu h200-sxm] [--out DIR/score-GPU]

Writes ``report.md``, ``rows.csv`` and ``scatter.png`` (forward and backward in separate
panels) under ``--out``; never over the measurements. Pure Python (pandas, matplotlib).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
from pathlib import Path

from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.validate.probe_ncu import NCU_IMPLS

#: ``impl`` field of a measured row -> implementation preset (perfsim.implementations).
PRESETS = {"sdpa_flash": "sdpa-flash", "sdpa_cudnn": "sdpa-cudnn",
           "sdpa_efficient": "sdpa-efficient", "sdpa_math": "sdpa-math", "flex": "flex",
           "cute": "flash-attn-cute", "triton_tutorial": "triton-tutorial", "eager": "eager"}
#: The clock the SMs tick at while tensor-core work runs, over the clock NVML reports (the
#: rows' ``sm_clock_mean_hz``): 0.908, the median of the 15 tensor-core runs on the project's
#: H200 (cuBLAS GEMMs, WGMMA loops, SDPA flash / cuDNN / FlexAttention / tutorial / cute
#: forward and backward; range 0.889-0.916) timed beside a resident clock64/globaltimer probe,
#: where FMA, MUFU, HBM-copy and L2 loops ticked at NVML's clock (0.997-1.000;
#: ``probe_tick_clock.py``, ``reports/h200/probes/tick/``). perfsim's clock is the one the SMs
#: tick at, so the clock criterion compares it with NVML's reading times this ratio. A call
#: that also runs kernels without tensor-core work (math, eager: softmax, masking) ticks at
#: NVML's clock during those, so its converted clock is low by up to the ratio's 10 %. A
#: calibrated profile (``perfsim calibrate``) measured its rates per NVML clock: its clock is
#: compared with NVML's reading as it is.
TENSOR_TICK_OVER_NVML = 0.908
#: The same measurement on other GPUs, by the device name the rows record
#: (``launch_config.device``): ``(ratio, ceilings)``, the cores' clock under tensor-core work
#: being ``min(NVML's clock x ratio, ceiling)`` with the ceiling of the row's implementation
#: and phase (:func:`kernel_ceilings`); a device not listed takes the H200's ratio and no
#: ceiling (ASSUMED). The H100 SXM5: beside the resident probe (``probe_tick_clock.py``,
#: ``reports/h100/probes/tick/tick-clock.json``, 2026-12-05) SDPA flash forward and backward,
#: cuDNN forward and backward and FlexAttention's forward held at the 700 W limit (NVML
#: 1515-1853 MHz) ticked at 0.988-1.001 of NVML's clock (median 1.000), while a cuBLAS bf16
#: GEMM ticked at 0.913, as on the H200. Below the limit NVML reads its 1980 MHz maximum, and
#: the cores of tensor-core kernels do not follow it: Nsight Compute's cycle counters over each
#: kernel's duration, each kernel launched alone with the power limit not reached
#: (``validate/h100_power_run.sh``, :data:`H100_NCU_CLOCKS`, 2026-12-06), have the nine
#: attention kernels with tensor-core work tick at 1.706-1.836 GHz (median 1.802) and the
#: calls' elementwise kernels at 1.90-2.05; WGMMA loops on shared-memory operands with NVML at
#: 1980 MHz ticked at 0.904-0.908 of it beside the probe (1789-1798 MHz,
#: ``tick-clock-power.json``). So on the H100 a tensor-core call ticks at NVML's clock up to its
#: kernel's own ceiling. (The H200's 0.908 x 1980 = 1798 MHz is the same order.)
#: Nsight Compute's per-kernel clocks on the H100 (:data:`TICK_BY_DEVICE`).
H100_NCU_CLOCKS = (Path(__file__).resolve().parent
                   / "reports/h100/probes/ncu/summary-clocks.json")
TICK_BY_DEVICE = {"NVIDIA H100 80GB HBM3": (1.000, H100_NCU_CLOCKS)}


@functools.cache
def kernel_ceilings(path: Path) -> dict:
    """``{(impl, phase): Hz}`` and ``{None: Hz}``: the clock a GPU's tensor-core kernels tick
    at alone, from an ``ncu_summary`` document (``path``, e.g. :data:`H100_NCU_CLOCKS`). Per
    profiled implementation and phase, the median over its cases of the longest kernel with
    tensor-core work (a case ``flash-bwd-d128`` runs the forward before the backward: the
    backward kernel is the longest); ``None``: the median of every such kernel, for the
    implementations and phases not profiled (on the H100: cute, SDPA mem-efficient,
    FlexAttention's and the tutorial's backward; ASSUMED)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    every, per = [], {}
    for case, kernels in doc["cases"].items():
        tensor = [k for k in kernels if (k.get("tensor_pipe_pct") or 0) >= 10]
        if not tensor:
            continue
        every += [k["effective_clock_hz"] for k in tensor]
        impl, phase = NCU_IMPLS.get(case.split("-")[0]), case.split("-")[1]
        longest = max(tensor, key=lambda k: k["duration_s"])
        per.setdefault((impl, phase), []).append(longest["effective_clock_hz"])
    out = {key: statistics.median(v) for key, v in per.items() if key[0]}
    out[None] = statistics.median(every)
    return out


def _tick_rule(device: str | None) -> tuple:
    """``(ratio, ceilings document or None)`` of tensor-core calls on ``device`` (a row's
    ``launch_config.device``): :data:`TICK_BY_DEVICE`, else the H200's
    :data:`TENSOR_TICK_OVER_NVML` and no ceiling."""
    return TICK_BY_DEVICE.get(device or "", (TENSOR_TICK_OVER_NVML, None))


def tensor_tick_clock(device: str | None, nvml_hz: float, impl: str | None = None,
                      phase: str | None = None) -> float:
    """The clock (Hz) the SMs of ``device`` tick at during a tensor-core call of ``impl``
    (a row's implementation) in ``phase`` whose NVML SM clock read ``nvml_hz``:
    ``min(nvml_hz x ratio, ceiling)`` (:func:`_tick_rule`, :func:`kernel_ceilings`)."""
    ratio, ceilings = _tick_rule(device)
    if ceilings is None:
        return nvml_hz * ratio
    table = kernel_ceilings(ceilings)
    return min(nvml_hz * ratio, table.get((impl, phase), table[None]))


def measured_gpu(directory: Path) -> str:
    """The catalog id of the GPU the rows of ``directory/results.jsonl`` were measured on
    (their recorded device name, ``perfsim.gpu_catalog.catalog_id_for``).

    Raises:
        PerfsimError: no results file, rows from several GPUs or none named, or a device the
            catalog lacks (then ``--gpu`` says which model to use)."""
    from perfsim.gpu_catalog import catalog_id_for

    results = Path(directory) / "results.jsonl"
    if not results.is_file():
        raise PerfsimError(f"{directory}: no results.jsonl there (the rows of "
                           "perfsim.validate.external_run)")
    names = {d for d in map(_device, load_rows(results)) if d}
    if len(names) != 1:
        found = ", ".join(sorted(names)) or "none named"
        raise PerfsimError(f"{directory}: the rows name {len(names)} devices ({found}); give "
                           "--gpu, the catalog id or .toml profile to predict with")
    name = names.pop()
    try:
        return catalog_id_for(name)
    except PerfsimError:
        raise PerfsimError(f"{directory}: the rows were measured on {name!r}, which no "
                           "catalog entry matches; give --gpu, the catalog id or .toml "
                           "profile to predict with") from None


def _other_device(directory: Path, spec) -> str | None:
    """The measured device names of ``directory``'s rows that ``spec`` (a ``GPUSpec``) does
    not match by its ``device_name_pattern``, quoted and joined, or None (all match, or the
    spec or the rows name none: nothing to compare)."""
    import re

    results = Path(directory) / "results.jsonl"
    pattern = spec.device_name_pattern
    if not pattern or not results.is_file():
        return None
    names = sorted({d for d in map(_device, load_rows(results)) if d})
    other = [n for n in names if not re.search(pattern, n, re.IGNORECASE)]
    return ", ".join(map(repr, other)) or None


def _device(row: dict) -> str | None:
    config = row.get("launch_config")
    return config.get("device") if isinstance(config, dict) else None
#: Implementations whose model is known to miss part of the kernel (said in the report).
NOT_MODELLED = {"sdpa_efficient": "xFormers' kernel: above head dim 128 its forward's "
                "output round trips are not modelled and its split-key backward reads "
                "about 20 % slow"}


def _ratios_text(rows: list[dict]) -> str:
    """The tick ratio(s) the rows' devices take, for the report's header."""
    devices = sorted({d for d in (_device(r) for r in rows) if d})

    def text(device):
        ratio, ceilings = _tick_rule(device)
        if ceilings is None:
            return f"{ratio:g}"
        clocks = kernel_ceilings(ceilings).values()
        where = Path(ceilings).relative_to(Path(__file__).resolve().parent.parent).as_posix()
        return (f"{ratio:g}, at most the clock its tensor-core kernels tick at alone "
                f"({min(clocks) / 1e6:.0f}-{max(clocks) / 1e6:.0f} MHz by implementation and "
                f"phase: Nsight Compute, {where})")

    texts = sorted({text(d) for d in devices} or {text(None)})
    if len(texts) == 1:
        return texts[0]
    return " / ".join(f"{text(d)} ({d})" for d in devices)


def load_rows(path: Path) -> list[dict]:
    """The JSONL rows (the last line per key wins; unreadable lines are skipped and
    counted in the report)."""
    rows, bad = {}, 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
            rows[rec["key"]] = rec
        except (json.JSONDecodeError, KeyError, TypeError):
            bad += bool(line.strip())
    out = list(rows.values())
    if bad:
        out.append({"_skipped_lines": bad})
    return out


def score(rows: list[dict], gpu: str = "h200-sxm", timing=None) -> list[dict]:
    """One dict per ok row: measured, predicted, error, clocks (predicted vs sampled)."""
    import perfsim
    from perfsim.power import uses_tensor_cores

    out = []
    for r in rows:
        if r.get("status") != "ok" or r.get("impl") not in PRESETS:
            continue
        measured = r.get("measured_s")
        if not isinstance(measured, (int, float)) or not measured > 0 or math.isnan(measured):
            continue
        w = workload_of(r)
        try:
            p = perfsim.predict(w, gpu=gpu, algorithm=PRESETS[r["impl"]], timing=timing)
        except (InfeasibleError, PerfsimError) as exc:
            out.append({**_ids(r), "measured_s": measured, "predicted_s": None,
                        "reason": str(exc)})
            continue
        nvml = r.get("sm_clock_mean_hz")
        # a calibrated profile's rates were measured per NVML clock, so its clock is NVML's
        tick = uses_tensor_cores([k.cost for k in p.kernels]) and p.gpu.calibration is None
        clock = ((tensor_tick_clock(_device(r), nvml, r.get("impl"), r.get("phase")) if tick
                  else nvml) if nvml else None)
        measured_tflops = r.get("grid_flops", 0) / measured / 1e12
        # the GPU's dense matmul peak at the clock the row ran at: above it is impossible
        peak = p.peak_flops_per_s / (p.clock_hz or 1) * (clock or p.clock_hz or 0) / 1e12
        out.append({**_ids(r), "measured_s": measured, "predicted_s": p.seconds,
                    "impossible": bool(peak and measured_tflops > peak),
                    "error": (p.seconds - measured) / measured, "bound": p.bound,
                    "predicted_clock_hz": p.clock_hz, "measured_clock_hz": clock,
                    "measured_nvml_clock_hz": nvml,
                    "clock_error": (p.clock_hz - clock) / clock if clock and p.clock_hz
                    else None,
                    "predicted_power_w": p.power_w, "measured_power_w": r.get("power_mean_w"),
                    "measured_tflops": measured_tflops})
    return out


def workload_of(r: dict):
    """The ``perfsim.AttentionWorkload`` of a measured row (its shape, dtype, phase and
    dropout)."""
    import perfsim

    return perfsim.AttentionWorkload(
        batch=r["batch"], heads=r["heads"], kv_heads=r["kv_heads"], seqlen_q=r["seqlen_q"],
        seqlen_k=r["seqlen_k"], head_dim=r["head_dim"], causal=r["causal"], dtype=r["dtype"],
        phase=r["phase"], dropout_p=r.get("dropout_p", 0.0))


def _ids(r: dict) -> dict:
    return {**{k: r[k] for k in ("impl", "phase", "batch", "heads", "kv_heads", "seqlen_q",
                                 "seqlen_k", "head_dim", "causal", "dtype")},
            **({"dropout_p": r["dropout_p"]} if r.get("dropout_p") else {})}


def _median(values):
    values = sorted(values)
    n = len(values)
    if not n:
        return float("nan")
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def group_table(scored: list[dict]) -> list[dict]:
    """Per (implementation, phase): n, median |error|, max |error|, median signed error,
    share within ±10 %, median |clock error|."""
    groups: dict = {}
    for s in scored:
        if s.get("predicted_s") is None:
            continue
        groups.setdefault((s["impl"], s["phase"]), []).append(s)
    table = []
    for (impl, phase), rows in sorted(groups.items(), key=lambda x: (x[0][1], x[0][0])):
        errs = [s["error"] for s in rows]
        clocks = [abs(s["clock_error"]) for s in rows if s.get("clock_error") is not None]
        table.append({"impl": impl, "phase": phase, "n": len(rows),
                      "median_abs": _median([abs(e) for e in errs]),
                      "max_abs": max(abs(e) for e in errs),
                      "median_signed": _median(errs),
                      "within_10": sum(abs(e) <= 0.10 for e in errs) / len(errs),
                      "clock_median_abs": _median(clocks) if clocks else None,
                      "clock_within_5": (sum(c <= 0.05 for c in clocks) / len(clocks)
                                         if clocks else None)})
    return table


#: A miss of the ranking whose two implementations measured within this fraction of each
#: other is reported as a near tie (the timed calls' run-to-run spread is 1-4 %; the
#: criterion itself counts every miss).
NEAR_TIE = 0.05


def ranking(scored: list[dict]) -> dict:
    """Per (shape, phase) with at least two implementations: is the predicted fastest the
    measured fastest? Returns ``{"shapes": n, "agree": k, "misses": [...]}``, each miss
    ``(shape key, measured fastest, predicted fastest, gap)`` where ``gap`` is how much longer
    the predicted fastest measured than the measured fastest (0.02: 2 % — a near tie, inside
    the calls' run-to-run spread, where any ranking is a coin toss)."""
    by_shape: dict = {}
    for s in scored:
        if s.get("predicted_s") is None:
            continue
        key = tuple(s[k] for k in ("phase", "batch", "heads", "kv_heads", "seqlen_q",
                                   "head_dim", "causal", "dtype"))
        if s.get("dropout_p"):            # a dropout call is another shape
            key += (f"dropout {s['dropout_p']:g}",)
        by_shape.setdefault(key, []).append(s)
    n = agree = 0
    misses = []
    for key, rows in by_shape.items():
        if len(rows) < 2:
            continue
        n += 1
        fastest_m = min(rows, key=lambda s: s["measured_s"])
        fastest_p = min(rows, key=lambda s: s["predicted_s"])
        best_m, best_p = fastest_m["impl"], fastest_p["impl"]
        agree += best_m == best_p
        if best_m != best_p:
            misses.append((key, best_m, best_p,
                           fastest_p["measured_s"] / fastest_m["measured_s"] - 1))
    return {"shapes": n, "agree": agree, "misses": misses}


def write(directory: Path, out: Path, gpu: str) -> str:
    """Score ``directory/results.jsonl`` against ``gpu`` and write the report under ``out``.

    Raises:
        perfsim.PerfsimError: no results file.
    """
    path = directory / "results.jsonl"
    if not path.is_file():
        raise PerfsimError(f"{path} does not exist")
    rows = load_rows(path)
    skipped = sum(r.get("_skipped_lines", 0) for r in rows)
    scored = score([r for r in rows if "_skipped_lines" not in r], gpu)
    table = group_table(scored)
    rank = ranking(scored)
    from perfsim.gpu_catalog import load_gpu
    from perfsim.validate.cli import _other_device

    spec = load_gpu(gpu)
    other = _other_device([{"device": (r.get("launch_config") or {}).get("device")}
                           for r in rows if isinstance(r.get("launch_config"), dict)], spec)
    across = (f" **The rows were measured on {other}; the predictions are for {spec.name}, "
              "another GPU.**" if other else "")
    out.mkdir(parents=True, exist_ok=True)
    _csv(out / "rows.csv", scored)
    _scatter(out / "scatter.png", scored, gpu)
    lines = [f"# perfsim vs the kernels users call — {gpu}, default options", "",
             f"Measurements: `{path}` ({len(rows) - bool(skipped)} rows"
             + (f", {skipped} unreadable lines skipped" if skipped else "") + "). "
             "Predictions: `perfsim.predict(w, gpu=" + repr(gpu) + ", algorithm=<preset>)` "
             "(perfsim.implementations), sustained clock from the power model. Clock error: "
             f"against NVML's mean x {_ratios_text(rows)} for calls with tensor-core work "
             "(the clock the SMs tick at then; validate/probe_tick_clock.py), against NVML's "
             "mean for a calibrated profile (its rates are per NVML clock)." + across, "",
             "| implementation | phase | rows | median \\|err\\| | max \\|err\\| | "
             "median signed | within ±10 % | clock median \\|err\\| | clock within 5 % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        clock = ("–" if t["clock_median_abs"] is None else
                 f"{100 * t['clock_median_abs']:.1f} %")
        within = ("–" if t["clock_within_5"] is None else f"{100 * t['clock_within_5']:.0f} %")
        note = f" ({NOT_MODELLED[t['impl']]})" if t["impl"] in NOT_MODELLED else ""
        lines.append(f"| {t['impl']}{note} | {t['phase']} | {t['n']} | "
                     f"{100 * t['median_abs']:.1f} % | {100 * t['max_abs']:.1f} % | "
                     f"{100 * t['median_signed']:+.1f} % | {100 * t['within_10']:.0f} % | "
                     f"{clock} | {within} |")
    share = rank["agree"] / rank["shapes"] if rank["shapes"] else float("nan")
    lines += ["", f"Fastest implementation predicted right on {rank['agree']} of "
              f"{rank['shapes']} (shape, phase) pairs ({100 * share:.0f} %).", ""]
    if rank["misses"]:
        near = sum(gap < NEAR_TIE for *_, gap in rank["misses"])
        lines.append(f"Misses (phase, B, H, H_kv, N, d, causal, dtype: measured fastest / "
                     f"predicted fastest, and how much longer the predicted fastest measured); "
                     f"{near} of the {len(rank['misses'])} are near ties, the two measured "
                     f"within {100 * NEAR_TIE:.0f} % of each other:")
        lines += [f"- {k}: {m} / {p} (+{100 * gap:.1f} %)" for k, m, p, gap in rank["misses"]]
    impossible = [s for s in scored if s.get("impossible")]
    lines += ["", f"Rows whose measured TFLOP/s exceed the GPU's matmul peak at their own clock "
              f"(impossible, so a timing or FLOP-count error): {len(impossible)}."]
    lines += [f"- {s['impl']} {s['phase']} B={s['batch']} H={s['heads']} N={s['seqlen_q']} "
              f"d={s['head_dim']}: {s['measured_tflops']:.0f} TFLOP/s" for s in impossible]
    infeasible = [s for s in scored if s.get("predicted_s") is None]
    if infeasible:
        lines += ["", "Rows the model calls infeasible:"]
        lines += [f"- {s['impl']} {s['phase']} B={s['batch']} H={s['heads']} "
                  f"N={s['seqlen_q']} d={s['head_dim']}: {s['reason']}" for s in infeasible]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text, encoding="utf-8")
    return text


def _csv(path: Path, scored: list[dict]) -> None:
    import csv

    keys = sorted({k for s in scored for k in s})
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(scored)


def _scatter(path: Path, scored: list[dict], gpu: str) -> None:
    from perfsim.plots.style import MARKERS, figure

    fig, axes = figure(1, 2, width=5.2, height=4.6)
    impls = sorted({s["impl"] for s in scored})
    for ax, phase in zip(axes, ("fwd", "bwd")):
        lo, hi = math.inf, 0.0
        for i, impl in enumerate(impls):
            pts = [(s["measured_s"], s["predicted_s"]) for s in scored
                   if s["impl"] == impl and s["phase"] == phase and s.get("predicted_s")]
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.scatter([x * 1e3 for x in xs], [y * 1e3 for y in ys], s=14,
                       marker=MARKERS[i % len(MARKERS)], label=impl, alpha=0.8)
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
        if hi > 0:
            span = [lo * 1e3 * 0.8, hi * 1e3 * 1.25]
            ax.plot(span, span, color="black", lw=0.8)
            for f in (0.9, 1.1):
                ax.plot(span, [v * f for v in span], color="grey", lw=0.5, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured (ms)")
        ax.set_ylabel("predicted (ms)")
        ax.set_title(f"{'forward' if phase == 'fwd' else 'backward'} — {gpu} (±10 % dashed)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
    from perfsim.validate.report import save_png

    save_png(fig, path, dpi=130)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsim.validate.external_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--gpu", default=None,
                        help="catalog id or .toml profile to predict with (default: the GPU "
                        "the rows were measured on, by its device name)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for report.md, rows.csv and scatter.png (default: "
                        "DIRECTORY/score-GPU); one that already holds a report.md is kept and "
                        "the new score goes to its regenerated/ unless --force")
    parser.add_argument("--force", action="store_true",
                        help="overwrite the score already in the output folder (a committed "
                        "score)")
    args = parser.parse_args(argv)
    try:
        if args.gpu is None:
            args.gpu = measured_gpu(args.directory)
    except PerfsimError as exc:
        print(f"external_report: {exc}", file=sys.stderr)
        return 2
    out = args.out or args.directory / f"score-{Path(args.gpu).stem}"
    try:
        from perfsim.gpu_catalog import load_gpu

        spec = load_gpu(args.gpu)   # an unknown GPU is one error, not every row "infeasible"
        other = _other_device(args.directory, spec)
        if other:
            print(f"external_report: warning: the rows were measured on {other}, which "
                  f"{args.gpu!r} ({spec.name}) does not describe; the score compares that "
                  "device's times with another GPU's model", file=sys.stderr)
        if out.exists() and not out.is_dir():
            raise PerfsimError(f"--out {str(out)!r} is a file; give a folder")
        if not out.exists() and not out.parent.is_dir():
            raise PerfsimError(f"--out {str(out)!r}: folder {str(out.parent)!r} does not exist")
        if (out / "report.md").is_file() and not args.force:
            # a committed score is the record of the model it was frozen at: rescoring with
            # today's model goes beside it, as perfsim validate --report-only does
            out = out / "regenerated"
            again = (" (replacing the earlier one there, made from the same rows)"
                     if (out / "report.md").is_file() else "")
            print(f"external_report: {out.parent} holds a score; writing to {out}{again} "
                  "(--force overwrites the score itself)", file=sys.stderr)
        print(write(args.directory, out, args.gpu), end="")
    except PerfsimError as exc:
        print(f"external_report: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"external_report: cannot write {str(out)!r}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
