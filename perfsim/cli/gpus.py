"""``perfsim gpus`` and ``perfsim gpu show``: the catalog and one GPU with its sources."""

from __future__ import annotations

import json

from perfsim.cli.common import _Parser, print_table
from perfsim.gpu_catalog import gpus, load_gpu


def _cmd_gpus(args) -> int:
    specs = [load_gpu(g) for g in gpus()]
    if args.json:
        # the table's columns, in base units (``perfsim gpu show ID --json``: every field)
        print(json.dumps([{"id": s.id, "name": s.name, "arch": s.arch, "sm_count": s.sm_count,
                           "clock_hz": s.clock_hz, "max_clock_hz": s.max_clock_hz,
                           "bf16_tensor_flops_per_s": (
                               s.peak_tensor_flops_per_s("bf16")
                               if "bf16" in s.tensor_flops_per_clk_per_sm else None),
                           "hbm_bandwidth_bytes_per_s": s.hbm_bandwidth_bytes_per_s,
                           "hbm_bytes": s.hbm_bytes} for s in specs], indent=1))
        return 0
    rows = [[s.id, s.name, s.arch, str(s.sm_count), f"{s.clock_hz / 1e6:.0f}",
             f"{s.max_clock_hz / 1e6:.0f}",
             f"{s.peak_tensor_flops_per_s('bf16') / 1e12:.0f}" if "bf16" in
             s.tensor_flops_per_clk_per_sm else "-",
             f"{s.hbm_bandwidth_bytes_per_s / 1e12:.2f}", f"{s.hbm_bytes / 2**30:.1f}"]
            for s in specs]
    print_table("GPU catalog", ["id", "name", "arch", "SMs", "tensor MHz", "boost MHz",
                                 "BF16 TFLOP/s", "DRAM TB/s", "DRAM GiB"], rows)
    print("tensor MHz: the clock the tensor peak is quoted at (clock_hz; BF16 TFLOP/s is at "
          "it), the ceiling of calls with tensor-core work; boost MHz: the maximum boost clock "
          "(max_clock_hz), for calls without. Under load the power model sets the clock "
          "(perfsim predict's clock column). DRAM GiB: the capacity the device reports, in GiB "
          "(2^30 bytes)")
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
    print_table(f"{spec.name} ({spec.id})", ["field", "value", "source"], rows)
    return 0


def register(sub) -> None:
    """Add ``perfsim gpus``, ``perfsim gpu show`` and ``perfsim gpu list`` (``perfsim gpus``
    under the ``gpu`` command) to the ``perfsim`` parser."""
    p = sub.add_parser("gpus", help="list the GPU catalog")
    p.add_argument("--json", action="store_true", help="the catalog as JSON")
    p.set_defaults(func=_cmd_gpus)

    p = sub.add_parser("gpu", help="inspect one GPU: perfsim gpu ID (short for gpu show ID)")
    gsub = p.add_subparsers(dest="gpu_command", required=True, parser_class=_Parser,
                            metavar="ID")
    show = gsub.add_parser("show", help="every field of a GPU with its source")
    show.add_argument("id", help="catalog id or .toml profile path")
    show.add_argument("--json", action="store_true", help="the GPU's fields as JSON")
    show.set_defaults(func=_cmd_gpu_show)
    listing = gsub.add_parser("list", help="the GPU catalog (as perfsim gpus)")
    listing.add_argument("--json", action="store_true", help="the catalog as JSON")
    listing.set_defaults(func=_cmd_gpus)
