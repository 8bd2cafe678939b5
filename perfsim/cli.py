"""The ``perfsim`` command line: ``gpus``, ``gpu show``, ``predict``, ``sweep``, ``validate``,
``calibrate``.

Bad input prints one line on stderr and exits with code 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable

from perfsim import algorithms
from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.files import FIGURE_EXTENSIONS, check_output, save_figure
from perfsim.gpu import DTYPES, gpus, load_gpu
from perfsim.predict import predict
from perfsim.software import DEFAULT_SOFTWARE
from perfsim.timing import TimingParams
from perfsim.workload import PHASES, AttentionWorkload

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        sys.exit(EXIT_BAD_INPUT)


def _print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)


# ------------------------------------------------------------------ gpus
def _cmd_gpus(args) -> int:
    specs = [load_gpu(g) for g in gpus()]
    if args.json:
        print(json.dumps([{"id": s.id, "name": s.name, "arch": s.arch} for s in specs]))
        return 0
    rows = [[s.id, s.name, s.arch, str(s.sm_count), f"{s.clock_hz / 1e6:.0f}",
             f"{s.peak_tensor_flops_per_s('bf16') / 1e12:.0f}" if "bf16" in
             s.tensor_flops_per_clk_per_sm else "-",
             f"{s.hbm_bandwidth_bytes_per_s / 1e12:.2f}", f"{s.hbm_bytes / 1e9:.0f}"]
            for s in specs]
    _print_table("GPU catalog", ["id", "name", "arch", "SMs", "MHz", "BF16 TFLOP/s",
                                 "DRAM TB/s", "DRAM GB"], rows)
    return 0


def _cmd_gpu_show(args) -> int:
    spec = load_gpu(args.id)
    data = spec.model_dump()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    sources = data.pop("sources")
    rows = []
    for key, value in data.items():
        if isinstance(value, dict):
            for sub, v in (value or {}).items():
                rows.append([f"{key}.{sub}", str(v),
                             sources.get(f"{key}.{sub}", sources.get(key, ""))])
        else:
            rows.append([key, str(value), sources.get(key, "")])
    _print_table(f"{spec.name} ({spec.id})", ["field", "value", "source"], rows)
    return 0


# ------------------------------------------------------------------ predict
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def int_arg(text: str) -> int:
    """An integer written with ASCII digits only (no ``1_000``, no ``1e3``, no ``١٢``)."""
    if not _INT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"invalid int value {text!r} (ASCII digits 0-9 only)")
    return int(text)


def float_arg(text: str) -> float:
    """A decimal number written with ASCII characters (no ``1_0``, ``nan`` or ``inf``)."""
    if not _FLOAT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"invalid float value {text!r} (a decimal number)")
    return float(text)


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """The ``AttentionWorkload`` fields as options (shared by predict and validate)."""
    g = p.add_argument_group("workload")
    g.add_argument("--batch", "-b", type=int_arg,
                   help="batch size B (required unless --seqlens-q/-k give the sequences)")
    g.add_argument("--heads", type=int_arg, required=True, help="query heads H")
    g.add_argument("--kv-heads", type=int_arg,
                   help="key/value heads H_kv (GQA/MQA; default H)")
    g.add_argument("--seqlen", "--seqlen-q", dest="seqlen_q", type=int_arg,
                   help="query sequence length N_q (required unless --seqlens-q is given)")
    g.add_argument("--seqlen-k", type=int_arg,
                   help="key/value sequence length N_k (default N_q)")
    g.add_argument("--head-dim", type=int_arg, required=True, help="head dimension d")
    g.add_argument("--head-dim-v", type=int_arg, help="value head dimension (default d)")
    g.add_argument("--causal", action="store_true", help="bottom-right aligned causal mask")
    g.add_argument("--dtype", default="bf16", help=f"one of {', '.join(DTYPES)}")
    g.add_argument("--phase", default="fwd", help=f"one of {', '.join(PHASES)}")
    g.add_argument("--dropout", type=float_arg, default=0.0, dest="dropout_p",
                   help="attention dropout probability, in [0, 1)")
    g.add_argument("--window", type=window_arg, default=(None, None), metavar="LEFT,RIGHT",
                   help="sliding window: query i sees keys [i+off-LEFT, i+off+RIGHT] "
                   "(off = N_k - N_q); 'none' for an unbounded side, e.g. 1023,0")
    g.add_argument("--seqlens-q", type=lengths_arg, metavar="N,N,...",
                   help="variable-length batch: one query length per sequence")
    g.add_argument("--seqlens-k", type=lengths_arg, metavar="N,N,...",
                   help="variable-length batch: one key length per sequence")
    g.add_argument("--kv-dtype", help="K/V element type (default --dtype), e.g. fp8_e4m3")
    g.add_argument("--page-size", type=int_arg,
                   help="paged KV cache: tokens per page (default: contiguous K/V)")
    g.add_argument("--softcap", type=float_arg, default=0.0,
                   help="tanh score capping value (0 = none)")


def window_arg(text: str) -> tuple:
    """``LEFT,RIGHT``: each an ASCII integer or ``none``."""
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"invalid window {text!r} (LEFT,RIGHT, e.g. 1023,0 "
                                         "or none,0)")
    out = []
    for part in parts:
        part = part.strip().lower()
        if part in ("none", "-", ""):
            out.append(None)
            continue
        if not _INT.fullmatch(part):
            raise argparse.ArgumentTypeError(f"invalid window bound {part!r} (an integer >= 0 "
                                             "or none)")
        out.append(int(part))
    return tuple(out)


def lengths_arg(text: str) -> tuple:
    """``N,N,...``: ASCII integers, one per sequence."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(_INT.fullmatch(p) for p in parts):
        raise argparse.ArgumentTypeError(f"invalid lengths {text!r} (comma-separated "
                                         "integers, one per sequence)")
    return tuple(int(p) for p in parts)


#: workload field -> the command-line flag that sets it (for error messages)
FLAGS = {"batch": "--batch", "heads": "--heads", "kv_heads": "--kv-heads",
         "seqlen_q": "--seqlen", "seqlen_k": "--seqlen-k", "head_dim": "--head-dim",
         "head_dim_v": "--head-dim-v", "dtype": "--dtype", "phase": "--phase",
         "dropout_p": "--dropout", "window": "--window", "seqlens_q": "--seqlens-q",
         "seqlens_k": "--seqlens-k", "kv_dtype": "--kv-dtype", "page_size": "--page-size",
         "softcap": "--softcap"}


def workload_from_args(args) -> AttentionWorkload:
    """The workload the flags describe. Raises PerfsimError naming the flag at fault."""
    try:
        return _workload(args)
    except PerfsimError as exc:
        text = str(exc)
        for field, flag in FLAGS.items():
            text = text.replace(f"AttentionWorkload.{field}:", f"{flag}:")
        if text.startswith("--dropout:"):       # say what is allowed, whatever was wrong
            text += "; allowed: a probability in [0, 1)"
        raise PerfsimError(text.replace("AttentionWorkload: ", "")) from None


def _workload(args) -> AttentionWorkload:
    extra = {k: getattr(args, k) for k in ("window", "seqlens_q", "seqlens_k", "kv_dtype",
                                           "page_size", "softcap") if hasattr(args, k)}
    return AttentionWorkload(
        batch=args.batch, heads=args.heads, kv_heads=args.kv_heads, seqlen_q=args.seqlen_q,
        seqlen_k=args.seqlen_k, head_dim=args.head_dim, head_dim_v=args.head_dim_v,
        causal=args.causal, dtype=args.dtype, phase=args.phase, dropout_p=args.dropout_p,
        **extra)


def _algorithm_from_args(name: str, options: list[str]):
    cls = algorithms.REGISTRY.get(name.lower())
    if cls is None:
        from perfsim.implementations import implementations, resolve_implementation

        preset = resolve_implementation(name)
        if preset is not None:
            if options:        # options of the configuration the preset runs
                return preset.model_copy(update={"options": _options(options)})
            return preset
        raise PerfsimError(f"unknown algorithm {name!r}; known: {', '.join(algorithms.names())}"
                           f", all; implementations: {', '.join(implementations())}, presets")
    return cls(**_options(options))  # Algorithm.__init__ raises one PerfsimError line


def _options(options: list[str]) -> dict:
    """``--set KEY=VALUE`` items as a dict (JSON values, else strings)."""
    values = {}
    for item in options:
        key, sep, raw = item.partition("=")
        if not sep:
            raise PerfsimError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    return values


def _clock_arg(text: str):
    """``--clock``: sustained, boost, datasheet, or a lock in MHz."""
    if text in ("sustained", "boost", "datasheet"):
        return text
    if not text.isascii() or not text.replace(".", "", 1).isdigit():
        raise PerfsimError(f"--clock must be sustained, boost, datasheet or a clock lock in MHz "
                           f"(e.g. 1830), got {text!r}")
    mhz = float(text)
    if not 100 <= mhz <= 5000:
        raise PerfsimError(f"--clock {text}: a clock lock must be 100 to 5000 MHz")
    return mhz * 1e6


def _prediction_record(p) -> dict:
    c = p.counts
    return {
        "workload": p.workload.model_dump(mode="json"),
        "algorithm": p.algorithm.label(), "gpu": p.gpu.id, "seconds": p.seconds,
        "tflops": p.tflops, "bound": p.bound, "model_flops": p.model_flops,
        "clock_hz": p.clock_hz, "power_w": p.power_w,
        "executed_flops": p.executed_flops, "peak_tflops": p.peak_flops_per_s / 1e12,
        "unit_seconds": p.unit_seconds,
        "counts": {k: float(getattr(c, k)) for k in c.__dataclass_fields__},
        "memory_bytes": p.memory_bytes, "fits_memory": p.fits_memory,
        "kernels": [{"name": k.cost.name, "seconds": float(k.seconds), "bound": str(k.bound),
                     "grid": int(k.cost.grid), "waves": int(k.waves),
                     "unit_seconds": {u: float(t) for u, t in k.unit_seconds.items()},
                     "terms": {name: float(v) for name, v in k.cost.terms.items()}}
                    for k in p.kernels],
        "term_seconds": p.term_seconds(),
    }


def _cmd_predict(args) -> int:
    w = workload_from_args(args)
    if args.plot:       # before the work: a bad path must not cost the computation
        check_output(args.plot, FIGURE_EXTENSIONS, "--plot")
    gpu = load_gpu(args.gpu)
    from perfsim.implementations import implementations

    names = {"all": algorithms.names(), "presets": implementations()}.get(
        args.algorithm, [args.algorithm])
    if len(names) > 1 and args.set:
        raise PerfsimError(f"--set applies to one algorithm, not to --algorithm {args.algorithm}")
    results = []
    for name in names:
        try:
            algo = _algorithm_from_args(name, args.set)
            timing = None
            if args.clock != "sustained" or args.kernel_only:
                floors = {"host_floor_fwd_s": 0.0, "host_floor_bwd_s": 0.0} \
                    if args.kernel_only else {}
                timing = TimingParams.for_gpu(gpu, getattr(algo, "software", DEFAULT_SOFTWARE),
                                              clock=_clock_arg(args.clock), **floors)
            results.append(predict(w, gpu=gpu, algorithm=algo, timing=timing))
        except InfeasibleError as exc:
            if len(names) == 1:
                raise
            results.append((name, str(exc)))
    if args.json:
        out = [_prediction_record(r) if not isinstance(r, tuple)
               else {"algorithm": r[0], "infeasible": r[1]} for r in results]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
    else:
        _print_predictions(w, gpu, results)
        if args.explain:
            for r in results:
                if not isinstance(r, tuple):
                    print()
                    print(r.explain())
    if args.plot:
        from perfsim import plots

        ok = [r for r in results if not isinstance(r, tuple)]
        if not ok:
            raise PerfsimError("--plot: no feasible prediction to plot")
        fig, _ = plots.time_by_unit(ok)
        save_figure(fig, args.plot, dpi=120, bbox_inches="tight")
        print(f"wrote {args.plot}")
    return 0


def _print_predictions(w, gpu, results) -> None:
    cols = ["algorithm", "time ms", "TFLOP/s", "bound", "clock MHz", "FLOPs G", "tensor G",
            "HBM GB", "exp G", "smem GB", "memory GiB", "kernels"]
    rows, notes = [], []
    for r in results:
        if isinstance(r, tuple):
            rows.append([r[0]] + ["-"] * (len(cols) - 1))
            notes.append(f"{r[0]}: infeasible: {r[1]}")
            continue
        c = r.counts
        rows.append([r.algorithm.label(), f"{r.seconds * 1e3:.3f}", f"{r.tflops:.1f}", r.bound,
                     f"{(r.clock_hz or gpu.clock_hz) / 1e6:.0f}", f"{c.flops / 1e9:.1f}",
                     f"{c.tensor_flops / 1e9:.1f}",
                     f"{c.hbm_bytes / 1e9:.3f}", f"{c.exp_ops / 1e9:.3f}",
                     f"{c.smem_bytes / 1e9:.2f}", f"{r.memory_bytes / 2**30:.3f}",
                     str(len(r.kernels))])
    for r in results:
        if not isinstance(r, tuple) and not r.fits_memory:
            notes.append(f"{r.algorithm.label()}: does not fit: needs "
                         f"{r.memory_bytes / 2**30:.1f} GiB, {gpu.id} has "
                         f"{gpu.hbm_bytes / 2**30:.1f} GiB")
    _print_table(f"{gpu.name}: {w.describe()}", cols, rows)
    print("time per call; TFLOP/s by the FlashAttention convention (4·B·H·N²·d forward, half "
          "when causal); clock: the SM clock the call runs at (--clock; by default where the "
          "power model puts it); FLOPs and exp ops in 10^9 as executed; bytes in 10^9 (GB), "
          "memory in GiB (peak footprint)")
    for note in notes:
        print(note)


# ------------------------------------------------------------------ entry point
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="perfsim", description="Analytical performance simulator for "
                     "attention kernels (standard, FlashAttention 1-4) on GPUs.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("gpus", help="list the GPU catalog")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_gpus)

    p = sub.add_parser("gpu", help="inspect one GPU")
    gsub = p.add_subparsers(dest="gpu_command", required=True, parser_class=_Parser)
    show = gsub.add_parser("show", help="every field of a GPU with its source")
    show.add_argument("id", help="catalog id or .toml profile path")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_cmd_gpu_show)

    p = sub.add_parser("predict", help="predict time, binding unit and counts",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_workload_arguments(p)
    p.add_argument("--gpu", default="h100-sxm5", help="catalog id or .toml profile path")
    p.add_argument("--algorithm", "-a", default="fa2",
                   help=f"an algorithm ({', '.join(algorithms.names())}), an implementation "
                   "preset (sdpa-flash, sdpa-cudnn, flex, flash-attn-cute, ...), all (every "
                   "algorithm side by side) or presets (every implementation)")
    p.add_argument("--kernel-only", action="store_true",
                   help="GPU time of the kernels alone: no host floor per call")
    p.add_argument("--clock", default="sustained",
                   help="SM clock: sustained (the power model), boost, datasheet, or a clock "
                   "lock in MHz (the power limit can still hold it lower)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm option, e.g. --set block_m=64 (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--explain", action="store_true", help="say in words what binds and why")
    p.add_argument("--plot", metavar="FILE", help="write a time-by-unit bar chart (PNG/SVG)")
    p.set_defaults(func=_cmd_predict)

    for register in EXTRA_COMMANDS:
        register(sub)
    return parser


#: Subcommands defined in other modules (sweep, validate, calibrate) register here.
EXTRA_COMMANDS: list[Callable] = []


def _load_extra_commands() -> None:
    from perfsim import cli_extra

    EXTRA_COMMANDS[:] = cli_extra.COMMANDS


class _Terminated(BaseException):
    """SIGTERM, raised so that ``finally`` blocks run (temporary output files are removed)."""


def _on_sigterm(signum, frame):
    raise _Terminated


def main(argv: list[str] | None = None) -> int:
    import signal

    _load_extra_commands()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:        # SIGTERM unwinds like Ctrl-C; SIGKILL cannot be caught (files.atomic_write)
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        installed = True
    except ValueError:      # not the main thread
        installed = False
    try:
        return int(args.func(args) or 0)
    except PerfsimError as exc:
        sys.stderr.write(f"perfsim: error: {exc}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("perfsim: interrupted\n")
        return 130
    except _Terminated:
        sys.stderr.write("perfsim: terminated\n")
        return 143
    except BrokenPipeError:     # output piped into a reader that stopped (| head): quietly
        try:
            sys.stdout = open(os.devnull, "w")   # no second error when Python flushes stdout
        except OSError:
            pass
        return 141
    finally:
        if installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
