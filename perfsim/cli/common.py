"""What every ``perfsim`` subcommand shares: the one-line-error parser, tables, number and
workload arguments.

Bad input prints one line on stderr and exits with code 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING

from perfsim.errors import PerfsimError
from perfsim.gpu import DTYPES
from perfsim.units import seconds_text, si, tflops_text  # noqa: F401 - the CLI tables format with them

if TYPE_CHECKING:
    from perfsim.workload import AttentionWorkload
# perfsim.workload (and numpy with it) loads inside the functions that use it, so commands
# without a workload (``perfsim gpus``) start without them

EXIT_BAD_INPUT = 2
#: Table width when stdout is not a terminal.
PIPED_WIDTH = 200


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that names each option's default, except where there is none to name (``None``:
    the option's own help says what its absence means; a flag's ``False``; a repeatable
    option's empty list)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        sys.exit(EXIT_BAD_INPUT)


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """Print a rich table: the terminal's width on a terminal, 200 columns when piped."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    # the terminal's width on a terminal; a wide, stable layout when piped or redirected
    # (logs, files, the README's example output)
    Console(width=None if sys.stdout.isatty() else PIPED_WIDTH).print(table)


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


def path_arg(text: str) -> str:
    """An output path (``--out``, ``--plot``): not empty or blank, which read as "no output"
    and silently wrote nothing."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"needs a path (a file name), got {text!r}")
    return text


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """The ``AttentionWorkload`` fields as options (shared by predict and validate)."""
    from perfsim.workload import PHASES

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
    # names in any case, as --algorithm and --gpu take them
    g.add_argument("--dtype", default="bf16", type=str.lower,
                   help=f"one of {', '.join(DTYPES)}")
    g.add_argument("--phase", default="fwd", type=str.lower,
                   help=f"one of {', '.join(PHASES)} (fwd_bwd: one call at one clock, where "
                        "the power limit meets both phases' energy over their time together, "
                        "so it can differ from the fwd and bwd predictions summed)")
    g.add_argument("--dropout", type=float_arg, default=0.0, dest="dropout_p",
                   help="attention dropout probability, in [0, 1)")
    g.add_argument("--window", type=window_arg, default=argparse.SUPPRESS,
                   metavar="LEFT,RIGHT",
                   help="sliding window: query i sees keys [i+off-LEFT, i+off+RIGHT] "
                   "(off = N_k - N_q); 'none' for an unbounded side, e.g. 1023,0 "
                   "(default: none,none — no window)")
    g.add_argument("--seqlens-q", type=lengths_arg, metavar="N,N,...",
                   help="variable-length batch: one query length per sequence")
    g.add_argument("--seqlens-k", type=lengths_arg, metavar="N,N,...",
                   help="variable-length batch: one key length per sequence")
    g.add_argument("--kv-dtype", type=str.lower,
                   help="K/V element type (default --dtype), e.g. fp8_e4m3")
    g.add_argument("--page-size", type=int_arg,
                   help="paged KV cache: tokens per page (default, or 0: contiguous K/V, "
                        "as a sweep's page_size column writes it)")
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
        if part in ("none", "-"):
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
        import re

        text = str(exc)
        for field, flag in FLAGS.items():
            # an entry of a list-valued flag (--window's sides, --seqlens-q's sequences)
            text = re.sub(rf"AttentionWorkload\.{field}\.(\d+):",
                          lambda m, flag=flag: f"{flag} (entry {int(m.group(1)) + 1}):", text)
            text = text.replace(f"AttentionWorkload.{field}:", f"{flag}:")
            # a rule across fields names them by their Python names: say the flags
            text = re.sub(rf"\b{field} is required\b", f"{flag} is required", text)
            text = re.sub(rf"\bgive {field}\b", f"give {flag}", text)
        if text.startswith("--dropout:"):       # say what is allowed, whatever was wrong
            text += "; allowed: a probability in [0, 1)"
        raise PerfsimError(text.replace("AttentionWorkload: ", "")) from None


def _workload(args) -> AttentionWorkload:
    from perfsim.workload import AttentionWorkload

    extra = {k: getattr(args, k) for k in ("window", "seqlens_q", "seqlens_k", "kv_dtype",
                                           "page_size", "softcap") if hasattr(args, k)}
    return AttentionWorkload(
        batch=args.batch, heads=args.heads, kv_heads=args.kv_heads, seqlen_q=args.seqlen_q,
        seqlen_k=args.seqlen_k, head_dim=args.head_dim, head_dim_v=args.head_dim_v,
        causal=args.causal, dtype=args.dtype, phase=args.phase, dropout_p=args.dropout_p,
        **extra)


def _algorithm_from_args(name: str, options: list[str]):
    from perfsim import algorithms
    from perfsim.implementations import (
        configured,
        implementations,
        parse_label,
        resolve_implementation,
    )

    # a name, or a label as --json's "algorithm" writes it ("fa2(block_m=64)")
    name = name.strip()
    label = parse_label(name)
    if label is not None and label[0].lower() in ("all", "presets"):
        raise PerfsimError(f"--algorithm {name}: options go with one algorithm or preset, "
                           f"not with {label[0]} (e.g. fa2(block_m=64))")
    if (label is None and name.lower() not in algorithms.REGISTRY
            and resolve_implementation(name) is None):
        raise PerfsimError(f"unknown algorithm {name!r}; known: {', '.join(algorithms.names())}"
                           f", all; implementations: {', '.join(implementations())}, presets")
    return configured(name, _options(options), where="--set")


def _options(options: list[str]) -> dict:
    """``--set KEY=VALUE`` items as a dict (JSON values, else strings); a KEY given twice is
    refused (the last value was kept silently)."""
    values = {}
    for item in options:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise PerfsimError(f"--set expects KEY=VALUE with a non-empty KEY, got {item!r}")
        if key in values:
            raise PerfsimError(f"--set {key} given more than once; give each option once")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    return values


def _clock_arg(text: str):
    """``--clock``: sustained, boost, datasheet, or a lock in MHz."""
    if text in ("sustained", "boost", "datasheet"):
        return text
    number = text[1:] if text[:1] in "+-" else text
    if not number.isascii() or not number.replace(".", "", 1).isdigit():
        raise PerfsimError(f"--clock must be sustained, boost, datasheet or a clock lock in MHz "
                           f"(e.g. 1830), got {text!r}{_hz_hint(text)}")
    mhz = float(text)
    if not 100 <= mhz <= 5000:
        raise PerfsimError(f"--clock {text}: a clock lock must be 100 to 5000 MHz"
                           f"{_hz_hint(text)}")
    return mhz * 1e6


def _hz_hint(text: str) -> str:
    """For ``--clock`` given as a clock in Hz (``1.83e9``), the MHz it meant; else ""."""
    try:
        value = float(text)
    except ValueError:
        return ""
    return f" (in Hz? {text} Hz is --clock {value / 1e6:g})" if 1e8 <= value <= 5e9 else ""


def timing_fields(args) -> dict:
    """The :class:`perfsim.TimingParams` fields ``--kernel-only`` and ``--clock`` set (empty
    for the defaults): no host floor per call; the SM clock (:func:`_clock_arg`)."""
    fields = {"host_floor_fwd_s": 0.0, "host_floor_bwd_s": 0.0} if args.kernel_only else {}
    if args.clock != "sustained":
        fields["clock"] = _clock_arg(args.clock)
    return fields
