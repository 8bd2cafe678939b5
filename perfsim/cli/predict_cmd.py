"""``perfsim predict``: time, binding unit, clock and counts of one workload, for one
algorithm, an implementation preset, ``all`` algorithms or every ``presets``."""

from __future__ import annotations

import json
import sys

from perfsim import algorithms
from perfsim.cli.common import (
    DefaultsFormatter,
    _algorithm_from_args,
    add_workload_arguments,
    path_arg,
    print_table,
    seconds_text,
    si,
    tflops_text,
    timing_fields,
    workload_from_args,
)
from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.files import FIGURE_EXTENSIONS, check_output, save_figure
from perfsim.gpu_catalog import load_gpu
from perfsim.implementations import algorithm_group, implementations
from perfsim.predict import predict, timing_for


def _cmd_predict(args) -> int:
    w = workload_from_args(args)
    if args.plot:       # before the work: a bad path must not cost the computation
        check_output(args.plot, FIGURE_EXTENSIONS, "--plot")
    elif args.plot_kind != "time":
        raise PerfsimError("--plot-kind goes with --plot FILE")
    gpu = load_gpu(args.gpu)
    # "all" and "presets" in any case, as algorithm names are taken
    names = algorithm_group(args.algorithm) or [args.algorithm]
    if len(names) > 1 and args.set:
        raise PerfsimError(f"--set applies to one algorithm, not to --algorithm {args.algorithm}")
    results = []
    for name in names:
        try:
            algo = _algorithm_from_args(name, args.set)
            fields = timing_fields(args)
            timing = timing_for(gpu, algo, **fields) if fields else None
            results.append(predict(w, gpu=gpu, algorithm=algo, timing=timing))
        except InfeasibleError as exc:
            if len(names) == 1:
                raise
            results.append((name, str(exc)))
    if args.json:
        out = [r.to_dict() if not isinstance(r, tuple)
               else {"algorithm": r[0], "infeasible": r[1]} for r in results]
        if args.explain:
            for rec, r in zip(out, results):
                if not isinstance(r, tuple):
                    rec["explanation"] = r.explain()
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
        if args.plot_kind == "roofline":
            fig, _ = plots.roofline(ok)
        else:
            fig, _ = plots.time_by_unit(ok)
        save_figure(fig, args.plot, dpi=120, bbox_inches="tight")
        # beside --json the note goes to stderr, so stdout stays one JSON document
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    if all(isinstance(r, tuple) for r in results):
        # every algorithm refused the call: the table (or JSON) says why, and a script must
        # not read the exit status as success (one algorithm alone exits 2 the same way)
        print(f"perfsim: error: no algorithm of --algorithm {args.algorithm} can run this "
              "call (each is infeasible, above)", file=sys.stderr)
        return 2
    return 0


def _print_predictions(w, gpu, results) -> None:
    cols = ["algorithm", "time", "TFLOP/s", "bound", "clock", "FLOPs", "tensor", "HBM",
            "exps", "smem", "memory", "kernels"]
    rows, notes = [], []
    for r in results:
        if isinstance(r, tuple):
            rows.append([r[0]] + ["-"] * (len(cols) - 1))
            reason = r[1][len(r[0]) + 2:] if r[1].startswith(f"{r[0]}: ") else r[1]
            notes.append(f"{r[0]}: infeasible: {reason}")
            continue
        c = r.counts
        tflops = tflops_text(r.tflops)
        rows.append([r.algorithm.label(), seconds_text(r.seconds), tflops, r.bound,
                     f"{(r.clock_hz or gpu.clock_hz) / 1e6:.0f} MHz", si(c.flops, "FLOP"),
                     si(c.tensor_flops, "FLOP"), si(c.hbm_bytes, "B"), si(c.exp_ops, ""),
                     si(c.smem_bytes, "B"), si(r.memory_bytes, "B", binary=True),
                     str(len(r.kernels))])
    for r in results:
        if not isinstance(r, tuple):
            notes.extend(f"{r.algorithm.label()}: {note}" for note in r.notes())
    print_table(f"{gpu.name}: {w.describe()}", cols, rows)
    print("time per call; TFLOP/s by the FlashAttention convention (forward 2·B·H·(d + d_v) "
          "FLOPs per score element the mask leaves: 4·B·H·N²·d, half when causal and "
          "N_q = N_k; backward 2.5x, fwd_bwd 3.5x; at most the matmul FLOPs the kernels run); "
          "clock: "
          "the SM clock the call runs at (--clock; by default where the power model puts "
          "it); FLOPs (matmul and FP32 slots) and exps of the visited tiles (padding to "
          "whole tiles and compiled head dims is timed, not counted; a backward's fp32 dQ "
          "accumulator, and a GQA backward's fp32 dK, dV accumulators where the kernel keeps "
          "them, are counted at the kernel's width); HBM and shared-memory bytes moved; "
          "memory: peak footprint")
    for note in notes:
        print(note)


def register(sub) -> None:
    """Add ``perfsim predict`` to the ``perfsim`` parser."""
    p = sub.add_parser("predict", help="predict time, binding unit and counts",
                       formatter_class=DefaultsFormatter)
    add_workload_arguments(p)
    p.add_argument("--gpu", default="h100-sxm5", help="catalog id, .toml profile path, or "
                   "auto (the GPU this machine has)")
    p.add_argument("--algorithm", "-a", default="fa2",
                   help=f"an algorithm ({', '.join(algorithms.names())}), an implementation "
                   f"preset ({', '.join(implementations())}), all (every algorithm side by "
                   "side), presets (every implementation), or a label --json wrote, e.g. "
                   "'fa2(block_m=64)'")
    p.add_argument("--kernel-only", action="store_true",
                   help="GPU time of the kernels alone: no host floor per call")
    p.add_argument("--clock", default="sustained", type=str.lower,   # BOOST as boost
                   help="SM clock: sustained (the power model), boost, datasheet, or a clock "
                   "lock in MHz (the power limit can still hold it lower)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm option, e.g. --set block_m=64 (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--explain", action="store_true", help="say in words what binds and why")
    p.add_argument("--plot", metavar="FILE", type=path_arg,
                   help="write a figure (PNG/SVG/PDF): see --plot-kind")
    p.add_argument("--plot-kind", choices=("time", "roofline"), default="time",
                   help="time: a bar of the time per kernel, each kernel coloured by the unit "
                   "that binds it; roofline: each kernel on the hierarchical roofline, placed "
                   "by FLOPs per byte at HBM, L2 (where the GPU's L2 bandwidth is known) and "
                   "shared memory, under those ceilings and the compute peaks")
    p.set_defaults(func=_cmd_predict)
