"""Figures: roofline, time by unit and cycle charts of predictions; TFLOP/s vs sequence
length, bottleneck and winner maps, predicted vs measured from sweep frames
(``perfsim.plots.sweep``, re-exported here).

Each function returns ``(fig, ax)`` (``ax``: an array of axes for faceted plots, squeezed as
``plt.subplots`` does) and never shows anything; ``fig.savefig(path)`` writes it. Figures are
``matplotlib.figure.Figure`` objects built without pyplot. Units are converted only here: ms,
TFLOP/s, FLOP/byte.

Length: one module for the figures of predictions because they share the label, colour and
argument rules (``_predictions``, ``_labels``, ``UNIT_COLORS``); the sweep-frame figures live
in ``perfsim.plots.sweep``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from perfsim.errors import PerfsimError
from perfsim.errors import short_repr as _short
from perfsim.kernel import UNITS
from perfsim.plots.style import MARKERS, UNIT_COLORS, color_legend, figure
from perfsim.plots.sweep import (
    bottleneck_map,
    predicted_vs_measured,
    tflops_vs_seqlen,
    winner_map,
)
from perfsim.predict import BOUNDS

__all__ = ["UNIT_COLORS", "bottleneck_map", "cycle_chart", "predicted_vs_measured", "roofline",
           "tflops_vs_seqlen", "time_by_unit", "unit_times", "winner_map"]


#: Memory levels of the hierarchical roofline (as Nsight Compute draws it): name, colour,
#: marker fill. Each kernel is placed once per level at FLOPs per byte moved at that level.
LEVELS = (("HBM", "black", "full"), ("L2", "tab:cyan", "left"),
          ("shared memory", "tab:olive", "none"))


def roofline(predictions, dtype: str | None = None):
    """Every kernel of each prediction placed by arithmetic intensity on the GPU's
    hierarchical roofline (Williams et al. 2009; Nsight Compute's hierarchical roofline; the
    RTX 5090 post, Fig. 3-5).

    y: achieved FLOP/s (executed tensor + FP32 FLOPs, an exp counted as one FLOP, as
    profilers count it, over the kernel's time). x: those FLOPs per byte moved at each memory
    level — HBM (filled markers, coloured by the unit that binds the kernel), L2 (HBM traffic
    plus L2 hits; only where the GPU's ``l2_load_peak_bytes_per_s`` or
    ``l2_bandwidth_bytes_per_s`` is known) and shared memory (open markers). Ceilings: each
    level's bandwidth (HBM at its datasheet rate; L2 at the most the SMs pull from it,
    ``l2_load_peak_bytes_per_s``, a floor under every kernel's load time in perfsim's timing,
    or else its measured large-buffer rate, ``l2_bandwidth_bytes_per_s``, which the timing does
    not use; shared memory at ``smem_bandwidth_bytes_per_clk_per_sm`` × SMs × the clock),
    the ``dtype`` tensor-core peak (none for fp32) and the FP32-pipe peak, at the SM clock the
    first prediction runs at (the title says which). A kernel sits under its HBM,
    shared-memory and compute ceilings; its L2 point (which counts its HBM writes too) sits
    about under the L2 line where that line is ``l2_load_peak_bytes_per_s``, and above a
    large-buffer line only if it re-reads a set small enough to be served faster. Kernels
    without FLOPs (copies, casts) have no intensity to place them at; a line under the axes
    names them.

    Args:
        predictions: a ``Prediction`` or a list of them on the same GPU.
        dtype: the tensor roof's dtype; default the first workload's.

    Raises:
        PerfsimError: no prediction, or predictions on more than one GPU (each GPU has its
            own ceilings).
    """
    preds = _predictions(predictions, "roofline")
    gpus = list(dict.fromkeys(p.gpu.id for p in preds))
    if len(gpus) > 1:
        raise PerfsimError(f"roofline: one GPU's ceilings per figure, got predictions on "
                           f"{', '.join(gpus)}; draw one roofline per GPU")
    gpu, dtype = preds[0].gpu, dtype or preds[0].workload.dtype
    fig, ax = figure(width=7.5, height=5)
    # compute and shared-memory ceilings at the clock the (first) prediction runs at
    clock = float(preds[0].clock_hz)
    at_clock = clock / gpu.clock_hz
    bandwidth = {"HBM": gpu.hbm_bandwidth_bytes_per_s,
                 "L2": gpu.l2_load_peak_bytes_per_s or gpu.l2_bandwidth_bytes_per_s,
                 "shared memory": gpu.smem_bandwidth_bytes_per_s * at_clock}
    labels: dict[tuple, list[str]] = {}   # kernels at the same spot share one label
    bounds: set[str] = set()
    levels_shown: set[str] = set()
    xs = []
    unplaced: list[str] = []
    for i, p in enumerate(preds):
        for k in p.kernels:
            c = k.cost   # operations: matmul FLOPs, FMA-pipe slots, ALU instructions, exps
            flops = float(c.tensor_flops + c.fp32_flops + c.alu_ops + c.exp_ops)
            moved = {"HBM": float(c.hbm_bytes), "L2": float(c.hbm_bytes + c.l2_hit_bytes),
                     "shared memory": float(c.smem_bytes)}
            if flops <= 0 or float(k.seconds) <= 0:
                unplaced.append(k.cost.name)      # no intensity to place it at: said below
                continue
            y = flops / float(k.seconds) / 1e12
            for level, color, _ in LEVELS:
                if moved[level] <= 0 or bandwidth[level] is None:
                    continue
                if level == "L2" and moved["L2"] == moved["HBM"]:
                    continue                       # no L2 hits: the HBM point says it
                x = flops / moved[level]
                xs.append(x)
                levels_shown.add(level)
                face = UNIT_COLORS[str(k.bound)] if level == "HBM" else "white"
                ax.scatter(x, y, marker=MARKERS[i % len(MARKERS)], s=45,
                           zorder=4 if level == "HBM" else 3,
                           facecolors=face, edgecolors=UNIT_COLORS[str(k.bound)]
                           if level == "HBM" else color, linewidths=1.2)
                if level == "HBM":
                    bounds.add(str(k.bound))
                    labels.setdefault((round(np.log10(x), 1), round(np.log10(y), 1), x, y),
                                      []).append(k.cost.name)
    notes = []
    for (_, _, x, y), names in _merge(labels).items():
        names = list(dict.fromkeys(names))
        text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        notes.append(ax.annotate(text, (x, y), fontsize=7, xytext=(5, -3),
                                 textcoords="offset points"))
    roofs: dict[float, list[str]] = {}
    peaks = [("FP32 pipes", gpu.fp32_flops_per_s * at_clock)]
    if dtype in gpu.tensor_flops_per_clk_per_sm:            # fp32 has no tensor-core path
        peaks.insert(0, (f"{dtype} tensor cores", gpu.peak_tensor_flops_per_s(dtype) * at_clock))
    for name, peak in peaks:
        roofs.setdefault(peak, []).append(name)
    top = max(roofs)
    hbm = bandwidth["HBM"]
    xs = xs or [1.0]
    grid = np.logspace(np.log10(min(min(xs), 1) / 4),
                       np.log10(max(max(xs), top / hbm) * 4), 200)
    for peak, names in roofs.items():
        ax.plot(grid, np.full_like(grid, peak / 1e12), color="black" if peak == top
                else "gray", lw=1.5 if peak == top else 1, ls="-" if peak == top else "--")
        ax.annotate(f"{' = '.join(names)}: {peak / 1e12:.0f} TFLOP/s, ridge {peak / hbm:.0f} "
                    "FLOP/B at HBM", (grid[-1], peak / 1e12), ha="right", va="bottom",
                    fontsize=8)
    ceilings = []
    for level, color, _ in LEVELS:
        bw = bandwidth[level]
        if bw is None or level not in levels_shown:
            continue
        ceiling = grid * bw
        keep = ceiling <= top
        ceilings += ax.plot(grid[keep], ceiling[keep] / 1e12, color=color,
                            lw=1.5 if level == "HBM" else 1,
                            label=f"{level} ceiling {bw / 1e12:.3g} TB/s (ridge "
                            f"{top / bw:.0f} FLOP/B)")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte moved at "
           "each memory level)", ylabel="achieved TFLOP/s",
           title=f"{gpu.name} at {clock / 1e6:.0f} MHz: HBM {hbm / 1e12:.2f} TB/s")
    handles = [Line2D([], [], marker=MARKERS[i % len(MARKERS)], color="gray", ls="",
                      label=p.algorithm.label()) for i, p in enumerate(preds)]
    handles += [Line2D([], [], marker="o", ls="", markerfacecolor="gray" if fill == "full"
                       else "white", markeredgecolor=color if level != "HBM" else "gray",
                       label=f"at {level}: " + ("filled" if fill == "full" else
                                                 f"open, {color.removeprefix('tab:')}"))
                for level, color, fill in LEVELS
                if level in levels_shown]
    handles += [Patch(color=UNIT_COLORS[u], label=f"bound: {u}") for u in BOUNDS if u in bounds]
    ax.legend(handles=handles + ceilings, loc="upper left", bbox_to_anchor=(1.01, 1),
              fontsize=8)
    if unplaced:
        names = list(dict.fromkeys(unplaced))
        ax.text(0, -0.16, "not on the roofline (no FLOPs: time spent moving data only): "
                + ", ".join(names), transform=ax.transAxes, fontsize=7, va="top")
    _spread(fig, ax.texts + notes, notes)
    return fig, ax


def _spread(fig, fixed, movable, step: float = 9.0, tries: int = 12) -> None:
    """Move each of ``movable`` (annotations in offset points) down, then up, in ``step``-point
    steps until its box overlaps no earlier label of ``fixed`` (at most ``tries`` steps each
    way; a label that finds no free place stays where it was)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()                    # run the layout engine first: it moves the axes
    renderer = canvas.get_renderer()
    for note in movable:             # laid out as data, not as space to reserve
        note.set_in_layout(False)
    placed = [t.get_window_extent(renderer) for t in fixed if t not in movable]
    for note in movable:
        x0, y0 = note.xyann
        for k in [0] + [sign * i for i in range(1, tries + 1) for sign in (-1, 1)]:
            note.xyann = (x0, y0 + k * step)
            box = note.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
        else:
            note.xyann = (x0, y0)
            box = note.get_window_extent(renderer)
        placed.append(box)


def time_by_unit(predictions, by: str = "kernel"):
    """Stacked horizontal bars of time, one bar per prediction (FA1 paper, Fig. 1 right); the
    legend, outside the axes, lists only the units that bind some segment.

    Args:
        predictions: a ``Prediction`` or a list of them.
        by: ``"kernel"`` — one segment per kernel in launch order, coloured by the unit that
            binds it, then the rest of the call (the host's per-call floor, where it binds);
            ``"unit"`` — one segment per binding unit (``Prediction.bound_seconds``).

    Raises:
        PerfsimError: no prediction, something that is not a ``Prediction``, or ``by``
            neither ``"kernel"`` nor ``"unit"``.
    """
    preds = _predictions(predictions, "time_by_unit")
    if by not in ("kernel", "unit"):
        raise PerfsimError(f"time_by_unit: by must be 'kernel' or 'unit', got {by!r}")
    fig, ax = figure(width=8, height=1.2 + 0.7 * len(preds))
    total = max((p.seconds for p in preds), default=1.0) * 1e3
    # a 7-point label takes about 1/110 of the 8-inch axis per character: a segment shows its
    # name only where the name fits inside it, so labels never overlap
    per_char = total * 1.2 / 110
    shown: set[str] = set()
    for row, p in enumerate(preds):
        if by == "kernel":
            parts = [(k.cost.name, float(k.seconds), str(k.bound)) for k in p.kernels]
            # the rest of the call is the host's per-call floor (each kernel's time already
            # holds its launch gap)
            rest = p.seconds - sum(s for _, s, _ in parts)
            if rest > 1e-3 * p.seconds:
                parts.append(("host floor", rest, "host"))
        else:
            parts = [(b, s, b) for b, s in p.bound_seconds.items() if s > 0]
        left = 0.0
        for name, seconds, unit in parts:
            ms = seconds * 1e3
            ax.barh(row, ms, left=left, color=UNIT_COLORS[unit], edgecolor="white")
            shown.add(unit)
            if ms > (len(name) + 2) * per_char:
                ax.text(left + ms / 2, row, name, ha="center", va="center", fontsize=7)
            left += ms
        ax.text(left, row, f" {left:.3g} ms", va="center", fontsize=8)
    ax.set_yticks(range(len(preds)), _labels(preds))
    ax.invert_yaxis()
    ax.set(xlabel="time (ms)", xlim=(0, total * 1.2), title=preds[0].workload.describe())
    # outside the axes (right), only the units that bind some segment
    color_legend(ax, UNIT_COLORS, [u for u in BOUNDS if u in shown], loc="upper left",
                 bbox_to_anchor=(1.01, 1), fontsize=7,
                 title="bound by" if by == "kernel" else "unit", title_fontsize=7)
    return fig, ax


def cycle_chart(rows: dict, unit_label: str = "cycles", title: str = ""):
    """Grouped horizontal bars: for each row label, one bar per unit (the FA4 post's chart of
    cycles per tile: MMA, exp, shared memory on H100 and B200).

    Args:
        rows: ``{row label: {unit or bar label: value}}``; colours follow the unit names
            (``tensor``/``mma``, ``mufu``/``exp``, ``smem``, ``fp32``, ``hbm``).

    Raises:
        PerfsimError: ``rows`` empty or not a dict of dicts of finite numbers.
    """
    if not isinstance(rows, dict) or not rows or not all(
            isinstance(bars, dict) and bars and all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                for v in bars.values()) for bars in rows.values()):
        raise PerfsimError("cycle_chart: rows must be a non-empty dict {row label: {bar label: "
                           "number}} with finite numbers, e.g. {'H100': {'mma': 1024, "
                           f"'exp': 768}}}}; got {_short(rows)}")
    alias = {"mma": "tensor", "exp": "mufu"}
    fig, ax = figure(width=7.5, height=0.8 + 0.3 * sum(len(v) + 1 for v in rows.values()))
    y, ticks = 0.0, []
    for label, bars in rows.items():
        ticks.append((y + (len(bars) - 1) / 2, label))
        for name, value in bars.items():
            ax.barh(y, value, color=UNIT_COLORS.get(alias.get(name, name), "gray"), height=0.9)
            ax.text(value, y, f" {name} {value:.4g}", va="center", fontsize=7)
            y += 1
        y += 1
    ax.set_yticks([t for t, _ in ticks], [label for _, label in ticks])
    ax.invert_yaxis()
    ax.set(xlabel=unit_label, title=title)
    return fig, ax


def unit_times(predictions, scale: float = 1e3, unit_label: str = "ms"):
    """Each unit's time had it run alone (``Prediction.unit_seconds × scale``) as a
    :func:`cycle_chart`, one group per prediction (``scale=gpu.clock_hz``: cycles).

    Raises:
        PerfsimError: no prediction, or something that is not a ``Prediction``."""
    preds = _predictions(predictions, "unit_times")
    rows = {label: {u: p.unit_seconds[u] * scale for u in UNITS}
            for label, p in zip(_labels(preds), preds)}
    return cycle_chart(rows, unit_label=f"time on each unit alone ({unit_label})")


def _predictions(predictions, who: str) -> list:
    """``predictions`` as a non-empty list of ``Prediction`` objects (one is taken as a list
    of one), else one clear error naming the plot."""
    from perfsim.prediction import Prediction

    preds = (list(predictions) if isinstance(predictions, (list, tuple))
             else [predictions])
    if not preds:
        raise PerfsimError(f"{who}: no prediction to plot (give one Prediction or a list)")
    bad = [p for p in preds if not isinstance(p, Prediction)]
    if bad:
        raise PerfsimError(f"{who}: plots Prediction objects (perfsim.predict(...)), got "
                           f"{type(bad[0]).__name__} {_short(bad[0])}")
    return preds


def _labels(preds) -> list[str]:
    """``algorithm\\nGPU`` per prediction, plus the workload where those repeat."""
    short = [f"{p.algorithm.label()}\n{p.gpu.id}" for p in preds]
    if len(set(short)) == len(short):
        return short
    return [f"{s}\n{p.workload.describe()}" for s, p in zip(short, preds)]


def _merge(labels: dict) -> dict:
    """Label positions with the names of every kernel within 0.1 decade of them."""
    merged: dict = {}
    for key, names in labels.items():
        home = next((k for k in merged if k[:2] == key[:2]), key)
        merged.setdefault(home, []).extend(names)
    return merged


