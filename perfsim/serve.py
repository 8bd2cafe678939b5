"""``perfsim serve``: the what-if explorer, a local web app (Panel).

Pick GPUs and an algorithm or implementation preset, edit the workload (decode and window
fields included) and scale any of the GPU rates that decide attention time — HBM bandwidth,
SM clock, MUFU rate, SM count, shared-memory bandwidth — and see at once: the side-by-side
table (time, TFLOP/s, binding unit, clock, bytes), the time per kernel, the hierarchical
roofline, TFLOP/s against sequence length and the bottleneck map over sequence length × head
dim. The URL's query string holds the whole state (copy it to share a view; a value in it
that a field refuses is named in a notice and that field keeps its default); the buttons
export the sweep behind the figures as CSV (or Parquet) and the figures as PNG or SVG.

Why Panel: it serves a Python object's parameters as widgets with no JavaScript to write,
renders the matplotlib figures perfsim already draws, syncs parameters with the URL
(``pn.state.location.sync``) and runs from ``pip install perfsim`` with one command. It is
imported only here, so ``import perfsim`` stays light.

    perfsim serve [--port 5006] [--address 127.0.0.1] [--show]

Length: the explorer's state (:class:`Explorer`, usable without a browser) and its Panel
layout (:func:`create_app`) are one feature: each view is a method of the state, and the
layout only binds them to widgets.
"""

from __future__ import annotations

import io

import param

from perfsim import algorithms as algos
from perfsim.errors import PerfsimError
from perfsim.gpu import DTYPES
from perfsim.gpu_catalog import gpus as catalog
from perfsim.gpu_catalog import load_gpu
from perfsim.implementations import implementations

#: GPU fields the explorer scales, with the slider's label.
#: The lowest power-model floor the clock scale sets (``PowerSpec.min_clock_hz`` must be
#: above 100 MHz).
MIN_POWER_FLOOR_HZ = 1.01e8
SCALED = {"hbm_bandwidth_bytes_per_s": "HBM bandwidth ×", "clock_hz": "SM clock ×",
          "mufu_ops_per_clk_per_sm": "MUFU rate ×", "sm_count": "SM count ×",
          "smem_bandwidth_bytes_per_clk_per_sm": "shared-memory bandwidth ×"}
#: Labels of the integer fields (entered as numbers).
LABELS = {"batch": "batch B", "heads": "query heads H", "kv_heads": "K/V heads (0: = H)",
          "seqlen_q": "query length N_q", "seqlen_k": "key length N_k (0: = N_q)",
          "head_dim": "head dim d", "window_left": "sliding window left (-1: none)",
          "dropout_p": "dropout probability"}
#: Sequence lengths of the TFLOP/s curve and the bottleneck map; head dims of the map.
CURVE_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
MAP_HEAD_DIMS = (64, 128, 256)


def result_id(gpu: str) -> str:
    """The HTML id of the predicted time of catalog GPU ``gpu`` in the table (the browser
    test reads it)."""
    return "result-" + "".join(c if c.isalnum() else "-" for c in gpu)


def format_seconds(seconds: float) -> str:
    """Seconds as the table prints them: µs below 1 ms, else ms, 4 significant digits."""
    return f"{seconds * 1e6:.4g} µs" if seconds < 1e-3 else f"{seconds * 1e3:.4g} ms"


def _clock_scale_top() -> float:
    """The SM-clock slider's top: the largest multiple of its 0.05 step at which every catalog
    GPU's maximum boost clock stays within the range a ``GPUSpec`` accepts
    (``perfsim.gpu.FIELD_RANGES``), so no position of it makes a GPU invalid."""
    from perfsim.gpu import FIELD_RANGES

    fastest = max(load_gpu(g).max_clock_hz for g in catalog())
    return int(FIELD_RANGES["max_clock_hz"][1] / fastest / 0.05) * 0.05


class Explorer(param.Parameterized):
    """The explorer's state: every widget is one of these parameters, and every view a
    function of them (usable without a browser: set the parameters, call the views)."""

    gpus = param.ListSelector(default=["h100-sxm5", "h200-sxm"], objects=catalog(),
                              doc="catalog GPUs side by side")
    algorithm = param.Selector(default="fa2", objects=[*algos.names(), *implementations()])
    batch = param.Integer(default=4, bounds=(1, 65536))
    heads = param.Integer(default=16, bounds=(1, 4096))
    kv_heads = param.Integer(default=0, bounds=(0, 4096), doc="0: same as heads")
    seqlen_q = param.Integer(default=4096, bounds=(1, 1 << 22))
    seqlen_k = param.Integer(default=0, bounds=(0, 1 << 22), doc="0: same as seqlen_q")
    head_dim = param.Integer(default=128, bounds=(1, 512))
    causal = param.Boolean(default=False)
    dtype = param.Selector(default="bf16", objects=list(DTYPES))
    phase = param.Selector(default="fwd", objects=["fwd", "bwd", "fwd_bwd"])
    window_left = param.Integer(default=-1, bounds=(-1, 1 << 22),
                                doc="sliding window: keys [i - left, i]; -1: none")
    dropout_p = param.Number(default=0.0, bounds=(0.0, 0.95), step=0.05,
                             doc="dropout probability (kernels without dropout refuse it)")
    hbm_bandwidth_bytes_per_s = param.Number(default=1.0, bounds=(0.1, 10), step=0.05)
    clock_hz = param.Number(default=1.0, bounds=(0.1, _clock_scale_top()), step=0.05)
    mufu_ops_per_clk_per_sm = param.Number(default=1.0, bounds=(0.1, 10), step=0.05)
    sm_count = param.Number(default=1.0, bounds=(0.1, 4), step=0.05)
    smem_bandwidth_bytes_per_clk_per_sm = param.Number(default=1.0, bounds=(0.1, 10),
                                                       step=0.05)

    def __init__(self, **params):
        super().__init__(**params)
        self._memo: dict = {}      # view name -> (state, result): one computation per state

    def _once(self, name: str, compute):
        """``compute()`` once per state of the parameters (the table and the figures of one
        update share the predictions and the sweep)."""
        state = tuple((p, tuple(v) if isinstance(v, list) else v)
                      for p, v in self.param.values().items() if p != "name")
        hit = self._memo.get(name)
        if hit is None or hit[0] != state:
            hit = self._memo[name] = (state, compute())
        return hit[1]

    # ------------------------------------------------------------------ the model
    def workload(self, **changes):
        """The ``AttentionWorkload`` of the current state (``changes`` override fields).

        Raises:
            perfsim.PerfsimError: an invalid combination (the message says which field)."""
        from perfsim.workload import AttentionWorkload

        fields = {"batch": self.batch, "heads": self.heads,
                  "kv_heads": self.kv_heads or self.heads, "seqlen_q": self.seqlen_q,
                  "seqlen_k": self.seqlen_k or self.seqlen_q, "head_dim": self.head_dim,
                  "causal": self.causal, "dtype": self.dtype, "phase": self.phase,
                  "dropout_p": self.dropout_p}
        if self.window_left >= 0:
            fields["window"] = (self.window_left, 0)
            fields["causal"] = False
        fields.update(changes)
        return AttentionWorkload(**fields)

    def overrides(self) -> dict:
        """``{field: scale}`` of the GPU fields scaled away from 1."""
        return {f: getattr(self, f) for f in SCALED if abs(getattr(self, f) - 1) > 1e-12}

    def specs(self) -> list:
        """The chosen GPUs with the scales applied (a what-if spec where any scale is not
        1; integer fields rounded, at least 1). The clock scale moves the maximum boost
        clock with ``clock_hz`` and, when it lowers them, the power model's floor
        (``power.min_clock_hz``) too, so every value of the slider is a valid GPU."""
        out = []
        for gid in self.gpus or []:
            spec = load_gpu(gid)
            changes = {}
            for field, scale in self.overrides().items():
                value = getattr(spec, field) * scale
                changes[field] = max(1, round(value)) if field == "sm_count" else value
                if field == "clock_hz":
                    changes["max_clock_hz"] = max(spec.max_clock_hz * scale, value)
                    if spec.power is not None and scale < 1:
                        # (PowerSpec takes a floor above 100 MHz)
                        changes["power.min_clock_hz"] = min(
                            max(spec.power.min_clock_hz * scale, MIN_POWER_FLOOR_HZ),
                            changes["max_clock_hz"])
            out.append(spec.replace(**changes) if changes else spec)
        return out

    def predictions(self) -> list[tuple[str, object]]:
        """``(GPU id, Prediction or the reason it cannot run)`` per chosen GPU (computed once
        per state)."""
        return self._once("predictions", self._predictions)

    def _predictions(self) -> list[tuple[str, object]]:
        from perfsim.predict import predict

        w = self.workload()
        out = []
        for gid, spec in zip(self.gpus or [], self.specs()):
            try:
                out.append((gid, predict(w, spec, self.algorithm)))
            except PerfsimError as exc:
                out.append((gid, str(exc)))
        return out

    def sweep_frame(self):
        """The sweep behind the curve and the map: the chosen GPUs (scaled) and algorithm,
        sequence lengths :data:`CURVE_SEQLENS` × head dims :data:`MAP_HEAD_DIMS` (plus the
        current one), the other fields as set (computed once per state)."""
        return self._once("sweep", self._sweep_frame)

    def _sweep_frame(self):
        from perfsim.sweep import sweep

        w = self.workload()
        dims = sorted({*MAP_HEAD_DIMS, w.head_dim})
        kwargs = {"batch": w.batch, "heads": w.heads, "kv_heads": w.kv_heads,
                  "seqlen_q": list(CURVE_SEQLENS), "head_dim": dims, "causal": w.causal,
                  "dtype": w.dtype, "phase": w.phase, "dropout_p": w.dropout_p,
                  "gpus": self.specs(), "algorithms": [self.algorithm]}
        if w.window != (None, None):
            kwargs["window"] = w.window
        return sweep(**kwargs)

    # ------------------------------------------------------------------ the views
    def table_html(self) -> str:
        """The side-by-side table as HTML; each predicted time in an element with id
        :func:`result_id`."""
        head = ("<tr><th>GPU</th><th>time</th><th>TFLOP/s</th><th>bound</th><th>clock</th>"
                "<th>HBM bytes</th><th>memory</th></tr>")
        rows = []
        for gid, p in self.predictions():
            if isinstance(p, str):
                rows.append(f"<tr><td>{gid}</td><td id='{result_id(gid)}' colspan='6'>"
                            f"cannot run: {p}</td></tr>")
                continue
            rows.append(
                f"<tr><td>{gid}</td><td id='{result_id(gid)}'>{format_seconds(p.seconds)}"
                f"</td><td>{p.tflops:.1f}</td><td>{p.bound}</td>"
                f"<td>{p.clock_hz / 1e6:.0f} MHz</td><td>{p.counts.hbm_bytes / 1e9:.3g} GB</td>"
                f"<td>{p.memory_bytes / 2**30:.3g} GiB</td></tr>")
        title = self.workload().describe()
        what = (f"; what-if: {', '.join(f'{SCALED[f]}{v:g}' for f, v in self.overrides().items())}"
                if self.overrides() else "")
        return (f"<p><b>{self.algorithm}</b> — {title}{what}</p><table class='perfsim'>"
                f"{head}{''.join(rows)}</table>")

    def feasible(self) -> list:
        """The predictions of the GPUs that can run the workload."""
        return [p for _, p in self.predictions() if not isinstance(p, str)]

    def time_figure(self):
        """``plots.time_by_unit`` of the feasible predictions (a note where none is)."""
        from perfsim import plots

        preds = self.feasible()
        return plots.time_by_unit(preds)[0] if preds else _note("no GPU can run this")

    def roofline_figure(self):
        """``plots.roofline`` of the first feasible prediction."""
        from perfsim import plots

        preds = self.feasible()
        return plots.roofline(preds[0])[0] if preds else _note("no GPU can run this")

    def curve_figure(self, frame=None):
        """``plots.tflops_vs_seqlen`` of :meth:`sweep_frame` at the current head dim."""
        from perfsim import plots

        frame = self.sweep_frame() if frame is None else frame
        part = frame[frame.head_dim == self.head_dim]
        if (part.infeasible == "").sum() == 0:
            return _note("no feasible row")
        return plots.tflops_vs_seqlen(part)[0]

    def map_figure(self, frame=None):
        """``plots.bottleneck_map`` of :meth:`sweep_frame` (sequence length × head dim)."""
        from perfsim import plots

        frame = self.sweep_frame() if frame is None else frame
        return plots.bottleneck_map(frame)[0]


def _note(text: str):
    from perfsim.plots.style import figure

    fig, ax = figure(width=5, height=1.5)
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    return fig


def _figure_bytes(fig, fmt: str) -> io.BytesIO:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120, bbox_inches="tight")
    buf.seek(0)
    return buf


def _allowed(parameter) -> str:
    """What a URL value of ``parameter`` may be, as the explorer's notice says it."""
    if isinstance(parameter, param.Boolean):
        return "true or false"
    if isinstance(parameter, param.Integer | param.Number):
        kind = "an integer" if isinstance(parameter, param.Integer) else "a number"
        low, high = (f"{b:g}" if isinstance(b, float) else str(b) for b in parameter.bounds)
        return f"{kind} from {low} to {high}"
    if isinstance(parameter, param.ListSelector):
        return "a list of catalog GPU ids (perfsim gpus)"
    if isinstance(parameter, param.Selector):
        return f"one of {', '.join(str(o) for o in parameter.objects)}"
    return "a value of its widget"


class _Refused(ValueError):
    """A URL value :func:`_query_value` refuses, with the reason."""


def _query_value(parameter, value):
    """A URL value as ``parameter`` takes it, or raise :class:`_Refused` saying why not. The URL
    writes numbers as JSON, so an integer field may come back as a whole float (Panel's
    ``parse_query`` reads ``-1`` as ``-1.0``): taken as the integer. A boolean is no number
    (``param`` would take ``True`` as 1); a GPU list must name each catalog GPU once.

    Raises:
        _Refused: the value, with the reason."""
    numeric = isinstance(parameter, param.Integer | param.Number)
    if numeric and isinstance(value, bool):
        raise _Refused("true/false is not a number")
    if isinstance(parameter, param.Integer) and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(parameter, param.ListSelector) and isinstance(value, list):
        unknown = [v for v in value if v not in parameter.objects]
        if unknown:
            raise _Refused(f"not catalog GPUs: {', '.join(map(repr, unknown))}")
        if not value:
            raise _Refused("no GPU")
        if len(set(value)) != len(value):
            raise _Refused("a GPU named twice")
    return value


def apply_query(explorer: Explorer, query: dict) -> list[str]:
    """Set ``explorer``'s parameters from a URL's query values one by one, and say which
    were not applied: each value its parameter refuses (``seqlen_q=abc``, ``batch=0``, an
    unknown GPU id) keeps the parameter's current value, and one line names it with what
    it allows. Panel's own ``Location.sync`` applies the whole query in one update, so a
    single bad value silently left every other value of a shared link at its default.
    Keys that are not parameters are ignored (other tools' query values)."""
    problems = []
    for name, value in query.items():
        if name == "name" or name not in explorer.param:
            continue
        parameter = explorer.param[name]
        try:
            value = parameter.deserialize(value) if isinstance(value, str) else value
        except Exception:  # noqa: BLE001 - left as text: the update below refuses it
            pass
        try:
            explorer.param.update({name: _query_value(parameter, value)})
            continue
        except Exception as exc:  # noqa: BLE001 - param raises ValueError/TypeError/others
            # our own reason (_Refused); param's long messages give way to what the field
            # allows
            reason = f"{exc}; " if isinstance(exc, _Refused) else ""
        problems.append(f"{name}={value!r:.60} ({reason}allowed: {_allowed(parameter)}); "
                        f"kept {getattr(explorer, name)!r:.40}")
    return problems


def create_app(explorer: Explorer | None = None):
    """The explorer as a Panel layout (one per browser session); the URL's query string is
    kept in sync with the parameters when served."""
    import panel as pn

    pn.extension(sizing_mode="stretch_width")
    ex = explorer or Explorer()
    ints = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim", "window_left")
    widgets = pn.Param(
        ex, parameters=[p for p in ex.param if p != "name"],
        widgets={"gpus": {"type": pn.widgets.MultiChoice, "css_classes": ["w-gpus"]},
                 **{f: {"type": pn.widgets.IntInput, "name": LABELS[f],
                        "css_classes": [f"w-{f}"]} for f in ints},
                 **{f: {"name": label, "css_classes": [f"w-{f}"]}
                    for f, label in SCALED.items()},
                 "dropout_p": {"name": LABELS["dropout_p"], "css_classes": ["w-dropout_p"]}},
        show_name=False, width=300, sizing_mode="fixed")

    def guarded(view):
        def run(*_):
            try:
                return view()
            except PerfsimError as exc:
                return pn.pane.Alert(str(exc), alert_type="danger")
        return run

    deps = [ex.param[p] for p in ex.param if p != "name"]
    table = pn.bind(guarded(lambda: pn.pane.HTML(ex.table_html())), *deps)
    time_fig = pn.bind(guarded(lambda: pn.pane.Matplotlib(ex.time_figure(), tight=True,
                                                           format="svg")), *deps)
    roof = pn.bind(guarded(lambda: pn.pane.Matplotlib(ex.roofline_figure(), tight=True,
                                                       format="svg")), *deps)
    curve = pn.bind(guarded(lambda: pn.pane.Matplotlib(ex.curve_figure(), tight=True,
                                                        format="svg")), *deps)
    bmap = pn.bind(guarded(lambda: pn.pane.Matplotlib(ex.map_figure(), tight=True,
                                                       format="svg")), *deps)

    def csv():
        return io.BytesIO(ex.sweep_frame().to_csv(index=False).encode())

    def parquet():
        buf = io.BytesIO()
        ex.sweep_frame().to_parquet(buf, index=False)
        buf.seek(0)
        return buf

    # a download in a state no view can show (e.g. kv_heads not dividing heads) says why
    # beside the buttons, as the views do, and hands over that message as the file
    notice = pn.pane.Alert("", alert_type="danger", visible=False)

    def download(make):
        def run():
            try:
                out = make()
            except PerfsimError as exc:
                notice.object, notice.visible = f"nothing to download: {exc}", True
                return io.BytesIO(f"perfsim: error: {exc}\n".encode())
            notice.visible = False
            return out
        return run

    exports = [pn.widgets.FileDownload(callback=download(csv), filename="perfsim-sweep.csv",
                                       label="sweep as CSV")]
    try:
        import pyarrow  # noqa: F401
        exports.append(pn.widgets.FileDownload(callback=download(parquet),
                                               filename="perfsim-sweep.parquet",
                                               label="sweep as Parquet"))
    except ImportError:
        pass
    exports += [pn.widgets.FileDownload(
        callback=download(lambda f=f: _figure_bytes(ex.time_figure(), f)),
        filename=f"perfsim-time.{f}", label=f"time figure as {f.upper()}")
        for f in ("png", "svg")]
    main = pn.Column(
        pn.pane.Markdown("## perfsim explorer — attention time on GPUs, and why"),
        table, pn.Row(*exports), notice,
        pn.Tabs(("time per kernel", time_fig), ("roofline", roof),
                ("TFLOP/s vs sequence length", curve), ("bottleneck map", bmap),
                dynamic=True))
    if pn.state.location is not None:
        # the link's values one by one first, so one bad value keeps only itself out and
        # the page says so (Location.sync's own update is all or nothing, and silent)
        rejected = apply_query(ex, dict(pn.state.location.query_params))
        if rejected:
            main.insert(1, pn.pane.Alert(
                "Not applied from the link: " + "; ".join(rejected), alert_type="warning"))
        pn.state.location.sync(ex, {p: p for p in ex.param if p != "name"},
                               on_error=lambda _values: None)
    return pn.Row(widgets, main)


def check_address(address: str, port: int) -> None:
    """Check that the explorer can listen on ``address:port``, before it starts: bind the
    sockets its server will bind (tornado's ``bind_sockets``, as Bokeh's server does) and
    close them again.

    Raises:
        perfsim.PerfsimError: the port is not 1-65535; the address is empty, not a host
            name or IP address of this machine, or an IPv6 address (Bokeh's websocket origins
            take none); the port is taken (another server listens there) or refused (below
            1024 without privileges): one line saying which and what to give instead.
    """
    import errno
    import socket

    try:
        from tornado.netutil import bind_sockets  # Panel's server (Bokeh) runs on tornado
    except ImportError:
        raise PerfsimError("perfsim serve needs panel (pip install panel)") from None
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise PerfsimError(f"port must be an integer from 1 to 65535, got {port!r}")
    hint = "127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
    if not isinstance(address, str) or not address.strip():
        raise PerfsimError(f"address must be a host name or IP address of this machine, such "
                           f"as {hint}; got {address!r}")
    if _is_ipv6(address):       # Bokeh reads "HOST:PORT" origins and has no [::1]:PORT form
        raise PerfsimError(f"address {address!r} is an IPv6 address, which the explorer's "
                           "server (Bokeh) cannot take as a websocket origin; give an IPv4 "
                           f"address or a host name, such as {hint}")
    try:
        sockets = bind_sockets(port, address)
    except (socket.gaierror, UnicodeError):     # not a name or address (idna: a bad label)
        raise PerfsimError(f"address {address!r} is not a host name or IP address this "
                           f"machine can resolve; give one of its own, such as {hint}") from None
    except OSError as exc:
        why = {errno.EADDRINUSE: "the port is in use (another server listens there); choose "
                                 "another port",
               errno.EADDRNOTAVAIL: f"{address} is not an address of this machine; give one "
                                    f"of its own, such as {hint}",
               errno.EACCES: "permission denied (ports below 1024 need privileges); choose "
                             "a port from 1024 up"}.get(exc.errno, exc.strerror)
        raise PerfsimError(f"cannot listen on {address}:{port}: {why}") from None
    for sock in sockets:
        sock.close()


def _is_ipv6(address: str) -> bool:
    """Whether ``address`` is an IPv6 literal (``::1``, ``::``, ``fe80::1%eth0``)."""
    import ipaddress

    try:
        return ipaddress.ip_address(address.strip("[]").split("%", 1)[0]).version == 6
    except ValueError:
        return False


def serve(port: int = 5006, address: str = "127.0.0.1", show: bool = False) -> None:
    """Serve the explorer at ``http://address:port/`` until interrupted.

    Raises:
        perfsim.PerfsimError: Panel missing; an address or port it cannot listen on
            (:func:`check_address`, before the server starts).
        KeyboardInterrupt: when Ctrl-C stops the server (Panel's own SIGINT handler stops
            its loop and returns; raised again here, so ``perfsim serve`` ends as every
            command does after Ctrl-C: "perfsim: interrupted", exit status 130)."""
    try:
        import panel as pn
    except ImportError:
        raise PerfsimError("perfsim serve needs panel (pip install panel)") from None
    check_address(address, port)
    from bokeh.core.validation import silence
    from bokeh.core.validation.warnings import FIXED_SIZING_MODE

    # the app's plots have fixed sizes inside stretching layouts on purpose: bokeh's W-1005
    # warning, on stderr at every page load, says nothing a user of the explorer can act on
    silence(FIXED_SIZING_MODE, True)
    pn.serve({"/": create_app}, port=port, address=address, show=show, title="perfsim",
             websocket_origin=[f"{address}:{port}", f"localhost:{port}"], threaded=False)
    raise KeyboardInterrupt
