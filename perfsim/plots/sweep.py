"""Figures from ``perfsim.sweep`` frames (re-exported by ``perfsim.plots``): TFLOP/s vs
sequence length, bottleneck and winner maps, predicted vs measured. Each returns ``(fig, ax)``;
faceted ones an array of axes (squeezed as ``plt.subplots`` does).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap, to_rgba

from perfsim.errors import PerfsimError
from perfsim.plots.style import MARKERS, UNIT_COLORS, color_legend, figure

_WORKLOAD = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim", "head_dim_v",
             "causal", "dtype", "phase", "dropout_p", "window", "kv_dtype", "page_size",
             "softcap")
#: Most panels a faceted figure draws; more is refused with the fields to filter on.
MAX_PANELS = 48
#: Most series (lines or bar groups) a TFLOP/s panel draws, one legend entry each: past this
#: the legend no longer fits beside the figure (a 96-series decode sweep collapsed its axes),
#: so more is refused with the fields to filter on.
MAX_SERIES = 40


def _tflops_label(v: float) -> str:
    """A TFLOP/s value for a bar or cell: whole numbers from 10 up, two significant figures
    below (a decode step's 0.42 TFLOP/s is not "0")."""
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2g}"


def _facets(df: pd.DataFrame, fields: list[str], always: tuple = ()) -> list[tuple]:
    """The combinations of ``fields`` present in ``df`` (fields with one value are left out,
    unless in ``always``), each as ``((field, value), ...)``."""
    present = [f for f in fields if f in df and (f in always or df[f].nunique() > 1)]
    keys = df[present].drop_duplicates().itertuples(index=False) if present else [()]
    return [tuple(zip(present, k)) for k in keys]


def _varying(df: pd.DataFrame, keys: list[str], fields) -> list[str]:
    """``fields`` that take several values for some fixed value of ``keys`` (a field paired
    with a key, such as ``seqlen_k`` left equal to ``seqlen_q``, does not vary)."""
    if df.empty:
        return []
    counts = df.groupby(keys, observed=True)[list(fields)].nunique().max()
    return [f for f in fields if counts[f] > 1]


def _select(df: pd.DataFrame, facet) -> pd.DataFrame:
    mask = np.ones(len(df), bool)
    for field, value in facet:
        mask &= (df[field] == value).to_numpy()
    return df[mask]


def _title(facet, width: int | None = None) -> str:
    """A panel's title: its facet's values, wrapped at ``width`` characters between items
    (a long title would run into the next panel's)."""
    items = [f"{v}" if f in ("gpu", "algorithm", "overrides") else
             f"{f}={v if v != '' else 'none'}" for f, v in facet]
    if width is None:
        return ", ".join(items)
    lines, line = [], ""
    for item in items:
        if line and len(line) + 2 + len(item) > width:
            lines.append(line + ",")
            line = item
        else:
            line = f"{line}, {item}" if line else item
    return "\n".join([*lines, line] if line else lines)


#: Characters per line of a panel's title (panels 4.5 inches wide, 8-point type).
TITLE_WIDTH = 48
#: A sweep's text columns whose empty cells a CSV reader gives back as NaN.
_TEXT_COLUMNS = ("infeasible", "bound", "window", "overrides", "kv_dtype")


def _as_swept(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the empty text cells a sweep wrote (``""``: feasible, no window, no
    override) restored where a CSV reader turned them into NaN (``pd.read_csv`` without
    ``keep_default_na=False``), so a frame read back from ``perfsim sweep --out rows.csv``
    plots as the sweep's own frame does; a ``fits_memory`` read as objects (True, False,
    NaN) as the nullable boolean it was."""
    text = [c for c in _TEXT_COLUMNS if c in df and df[c].isna().any()]
    out = df.assign(**{c: df[c].astype(object).fillna("") for c in text}) if text else df
    if "fits_memory" in out and out["fits_memory"].dtype == object:
        # a CSV's empty cells (infeasible rows) made the column objects: pandas' nullable
        # boolean again, as the sweep wrote it
        out = out.assign(fits_memory=out["fits_memory"].astype("boolean"))
    return out


def tflops_vs_seqlen(df: pd.DataFrame, x: str = "seqlen_q"):
    """TFLOP/s against sequence length, one series per algorithm (FA2/FA3 papers' benchmark
    figures): a panel per GPU (and what-if) and per (causal, head_dim); grouped bars when
    there are at most 8 lengths, lines otherwise. Infeasible rows and rows that do not fit
    in GPU memory are left out (as the papers leave out out-of-memory runs).

    Args:
        df: a ``perfsim.sweep`` frame; fields other than these may vary and become series.
        x: the column on the x axis: ``seqlen_q`` or any numeric column, such as an override
            (``mufu_ops_per_clk_per_sm``; the what-if then moves along x, not across rows).
    """
    df = _as_swept(df)
    ok = df[(df.infeasible == "") & df.fits_memory]
    rows = _facets(df, ["gpu", "overrides"] if x in _WORKLOAD else ["gpu"])
    cols = _facets(df, ["causal", "head_dim"])
    fig, axes = figure(len(rows), len(cols), width=5.5, height=3.6)
    grid = np.asarray(axes, dtype=object).reshape(len(rows), len(cols))
    series_fields = ["algorithm"] + _varying(
        df, [x, "gpu", "overrides", "causal", "head_dim", "algorithm"],
        [f for f in _WORKLOAD if f not in (x, "causal", "head_dim")])
    xs = sorted(df[x].unique())
    bars = len(xs) <= 8 and len(series_fields) == 1
    count = len(_facets(df, series_fields, always=("algorithm",)))
    if count > MAX_SERIES:
        raise PerfsimError(f"{count} series per panel (more than {MAX_SERIES}: one per value "
                           f"of {', '.join(series_fields)}); filter the frame to fewer values "
                           f"of: {', '.join(series_fields)}")
    for r, row_facet in enumerate(rows):
        for c, col_facet in enumerate(cols):
            ax, part = grid[r, c], _select(ok, row_facet + col_facet)
            series = _facets(df, series_fields, always=("algorithm",))
            width = 0.8 / max(len(series), 1)
            for i, s in enumerate(series):
                line = _select(part, s).groupby(x, observed=True).tflops.mean()
                if line.empty:
                    continue
                label = _title(s)
                if bars:
                    pos = [xs.index(v) + (i - (len(series) - 1) / 2) * width for v in line.index]
                    ax.bar(pos, line.values, width=width * 0.95, label=label, color=f"C{i % 10}")
                    for px, v in zip(pos, line.values):
                        ax.text(px, v, _tflops_label(v), ha="center", va="bottom", fontsize=6)
                else:   # ten colours, then the next marker shape: every series its own
                    ax.plot(line.index, line.values, marker=MARKERS[(i // 10) % len(MARKERS)],
                            markersize=4, label=label, color=f"C{i % 10}")
            if bars:
                ax.set_xticks(range(len(xs)), [_k(v) for v in xs])
            else:
                ax.set_xscale("log", base=2)
            ax.set(xlabel=x, ylabel="TFLOP/s")
            ax.set_title(_title(row_facet + col_facet, TITLE_WIDTH), fontsize=8)
            if not ax.get_legend_handles_labels()[0]:   # every row infeasible: say so
                ax.text(0.5, 0.5, "no feasible rows", ha="center", va="center",
                        transform=ax.transAxes)
    # one legend for every panel, beside the top-right one (not over any data)
    seen: dict = {}
    for ax in grid.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        grid[0, -1].legend(list(seen.values()), list(seen), fontsize=7, loc="upper left",
                           bbox_to_anchor=(1.01, 1))
    return fig, axes


def _k(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def bottleneck_map(df: pd.DataFrame, x: str = "seqlen_q", y: str = "head_dim"):
    """Which unit binds, on an ``x`` × ``y`` grid: a panel per GPU, override and every other
    workload field that varies (row, e.g. ``causal``) and per algorithm (column); each cell
    coloured by its binding unit and labelled with its TFLOP/s.

    Raises:
        perfsim.PerfsimError: ``x`` or ``y`` is not a column of the frame.
    """
    return _category_map(_as_swept(df), "bound", UNIT_COLORS, ["algorithm"], x, y)


def winner_map(df: pd.DataFrame, x: str = "seqlen_q", y: str = "head_dim"):
    """The fastest feasible algorithm that fits in memory, on an ``x`` × ``y`` grid, a panel
    per GPU; each cell labelled with the winner's TFLOP/s.

    Raises:
        perfsim.PerfsimError: ``x`` or ``y`` is not a column of the frame.
    """
    df = _as_swept(df)
    ok = df[(df.infeasible == "") & df.fits_memory]
    keys = [k for k in ("gpu", "overrides", *_others(df, x, y), x, y) if k in ok]
    best = ok.loc[ok.groupby(keys, observed=True).seconds.idxmin()]
    best = best.assign(winner=best.algorithm.astype(str))
    names = [str(a) for a in df.algorithm.unique()]
    colors = {a: f"C{i % 10}" for i, a in enumerate(names)} | {"": UNIT_COLORS[""]}
    return _category_map(best, "winner", colors, [], x, y)


def _others(df: pd.DataFrame, x: str, y: str) -> list[str]:
    """Workload fields besides ``x`` and ``y`` that vary in ``df`` (paired fields that follow
    ``x`` or ``y``, such as ``seqlen_k`` equal to ``seqlen_q``, left out)."""
    for axis in (x, y):
        if axis not in df:
            raise PerfsimError(f"no column {axis!r} to draw along; columns: "
                               f"{', '.join(df.columns)}")
    fields = [f for f in _WORKLOAD if f in df and f not in (x, y) and df[f].nunique() > 1]
    return _varying(df, [x, y], fields) if fields else []


def _category_map(df, column: str, colors: dict, col_fields: list, x: str, y: str):
    # every other varying field gets its own row of panels, so each cell holds one row
    others = _others(df, x, y)
    rows = _facets(df, ["gpu", "overrides", *others])
    cols = _facets(df, col_fields)
    if len(rows) * len(cols) > MAX_PANELS:
        raise PerfsimError(f"{len(rows) * len(cols)} panels (more than {MAX_PANELS}); filter "
                           f"the frame to fewer values of: "
                           f"{', '.join(['gpu', *col_fields, *others])}")
    fig, axes = figure(len(rows), len(cols), width=4.5, height=3.4)
    grid = np.asarray(axes, dtype=object).reshape(len(rows), len(cols))
    xs, ys = sorted(df[x].unique()), sorted(df[y].unique())
    codes = {name: i for i, name in enumerate(colors)}
    cmap = ListedColormap([to_rgba(c) for c in colors.values()])
    for r, row_facet in enumerate(rows):
        for c, col_facet in enumerate(cols):
            ax, part = grid[r, c], _select(df, row_facet + col_facet)
            if part.duplicated([x, y]).any():
                varying = _varying(part, [x, y], [f for f in _WORKLOAD if f not in (x, y)])
                raise PerfsimError(f"several rows per ({x}, {y}) cell; filter the frame to "
                                   f"one value of: {', '.join(varying)}")
            image = np.full((len(ys), len(xs)), codes[""])
            for row in part.itertuples():
                i, j = ys.index(getattr(row, y)), xs.index(getattr(row, x))
                image[i, j] = codes[str(getattr(row, column))]
                if getattr(row, column):
                    ax.text(j, i, _tflops_label(row.tflops), ha="center", va="center",
                            fontsize=6)
            ax.imshow(image, cmap=cmap, vmin=0, vmax=len(codes) - 1, aspect="auto",
                      origin="lower")
            ax.set_xticks(range(len(xs)), [_k(v) for v in xs], rotation=45, fontsize=7)
            ax.set_yticks(range(len(ys)), ys, fontsize=7)
            ax.set(xlabel=x, ylabel=y)
            ax.set_title(_title(row_facet + col_facet, TITLE_WIDTH) or column, fontsize=8)
    shown = [n for n in colors if n and (df[column].astype(str) == n).any()]
    if "infeasible" in df and (df["infeasible"].astype(str) != "").any():
        shown.append("")                               # the grey cells: "infeasible"
    color_legend(grid[0, -1], colors, shown, loc="upper left", bbox_to_anchor=(1.02, 1),
                 fontsize=7, title=f"{'bound by' if column == 'bound' else column}\n"
                 "(numbers: TFLOP/s)", title_fontsize=7)
    return fig, axes


def predicted_vs_measured(df: pd.DataFrame, predicted: str = "predicted_s",
                          measured: str = "measured_s", hue: str | None = "algorithm",
                          band: float = 0.25):
    """Predicted against measured time (log-log) with the y = x line and a ±``band`` band;
    the title gives the median and largest |error| (error = predicted / measured − 1).

    Rows without a finite, positive predicted and measured time (an infeasible prediction,
    a failed measurement) are left out; the title counts the rows drawn.

    Raises:
        perfsim.PerfsimError: the frame lacks the ``predicted``, ``measured`` or ``hue``
            column, or has no row with both times.
    """
    missing = [c for c in (predicted, measured, hue) if c is not None and c not in df]
    if missing:
        raise PerfsimError(f"predicted_vs_measured: no column {', '.join(missing)}; "
                           f"columns: {', '.join(map(str, df.columns))} (hue=None draws "
                           "without groups)")
    times = df[[predicted, measured]].apply(pd.to_numeric, errors="coerce")
    usable = np.isfinite(times).all(axis=1) & (times > 0).all(axis=1)
    df = df[usable]
    if df.empty:
        raise PerfsimError(f"predicted_vs_measured: no row with a finite, positive "
                           f"{predicted} and {measured}")
    fig, ax = figure(width=5.5, height=5)
    groups = df.groupby(hue, observed=True) if hue else [("", df)]
    for i, (name, part) in enumerate(groups):
        ax.scatter(part[measured] * 1e3, part[predicted] * 1e3, s=18, label=str(name) or None,
                   marker=MARKERS[i % len(MARKERS)])
    lo = min(df[measured].min(), df[predicted].min()) * 1e3 / 1.5
    hi = max(df[measured].max(), df[predicted].max()) * 1e3 * 1.5
    ax.plot([lo, hi], [lo, hi], color="black", lw=1)
    for f in (1 - band, 1 + band):
        ax.plot([lo, hi], [lo * f, hi * f], color="gray", lw=0.8, ls="--")
    error = (df[predicted] / df[measured] - 1).abs()
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured (ms)",
           ylabel="predicted (ms)",
           title=f"|error| median {error.median():.0%}, max {error.max():.0%} (n={len(df)})")
    if hue:
        ax.legend(fontsize=8)
    return fig, ax
