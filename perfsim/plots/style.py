"""What every perfsim figure shares: pyplot-free ``Figure`` objects, one colour per unit,
legends of unit patches."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

#: One colour per binding unit ("" = infeasible).
UNIT_COLORS = {"tensor": "#4C72B0", "fp32": "#DD8452", "mufu": "#C44E52", "smem": "#8172B3",
               "hbm": "#55A868", "latency": "#64B5CD", "launch": "#937860",
               "host": "#B0B0B0",
               "": "#DDDDDD"}
MARKERS = "osD^vP*Xph<>8"


def figure(nrows: int = 1, ncols: int = 1, width: float = 6.4, height: float = 4.2):
    """A ``Figure`` (no pyplot: no global state, PNG through Agg) and its axes, squeezed as
    ``plt.subplots`` does. ``width``/``height`` are per panel, in inches."""
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=True)


def color_legend(ax, colors: dict, names, **kwargs) -> None:
    """A legend of colour patches for ``names`` ("" reads "infeasible")."""
    ax.legend(handles=[Patch(color=colors[n], label=n or "infeasible") for n in names],
              **kwargs)
