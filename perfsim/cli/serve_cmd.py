"""``perfsim serve``: the what-if explorer in the browser (:mod:`perfsim.serve`)."""

from __future__ import annotations

from perfsim.errors import PerfsimError


def _cmd_serve(args) -> int:
    from perfsim.serve import check_address, serve

    if not 1 <= args.port <= 65535:
        raise PerfsimError(f"--port must be 1-65535, got {args.port}")
    check_address(args.address, args.port)    # before the banner: a busy port is one line
    import importlib.util

    try:                                                # before the banner too
        found = importlib.util.find_spec("panel") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise PerfsimError("perfsim serve needs panel (pip install panel)")
    print(f"perfsim explorer at http://{args.address}:{args.port}/ (Ctrl-C stops it)",
          flush=True)
    serve(port=args.port, address=args.address, show=args.show)
    return 0


def register(subparsers) -> None:
    """Add ``perfsim serve`` to the ``perfsim`` parser."""
    p = subparsers.add_parser(
        "serve", help="the what-if explorer: a local web app (Panel)",
        description="Serve the explorer: pick GPUs and an algorithm or preset, edit the "
        "workload and scale GPU rates, and see the table, time per kernel, roofline, TFLOP/s "
        "curve and bottleneck map update; the URL holds the state.")
    p.add_argument("--port", type=int, default=5006, help="TCP port (default 5006)")
    p.add_argument("--address", default="127.0.0.1",
                   help="interface to listen on: an IPv4 address or a host name (default "
                   "127.0.0.1: this machine only; 0.0.0.0: every interface)")
    p.add_argument("--show", action="store_true", help="open a browser tab")
    p.set_defaults(func=_cmd_serve)
