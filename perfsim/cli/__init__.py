"""The ``perfsim`` command line: ``gpus``, ``gpu show``, ``predict``, ``sweep``, ``validate``,
``calibrate`` — one module per command (:data:`COMMAND_MODULES`), each with a
``register(subparsers)`` function, imported when the parser is built: a module's imports (pandas
for ``sweep``, the validation harness for ``validate``) load only with the command line, and
no command module imports this one.

Bad input prints one line on stderr and exits with code 2; no traceback.

Length: the one-line contract for every way a command can end — bad input, Ctrl-C, SIGTERM,
an output the system refuses or a reader that went away, out of memory — with what an
interrupted command kept on disk, is one mechanism: each way out is caught where the command
runs, around it.
"""

from __future__ import annotations

import importlib
import os
import sys

from perfsim.errors import PerfsimError
from perfsim.files import note_stop, noted_stop, raise_stop, signals_deferred

#: The helpers of ``perfsim.cli.common`` this package re-exports, loaded on first use (PEP 562
#: ``__getattr__``): ``common`` imports the GPU model and pydantic, and nothing heavy may load
#: before :func:`main` is running, where Ctrl-C is one line and exit 130, not a traceback.
_COMMON = ("EXIT_BAD_INPUT", "_Parser", "add_workload_arguments", "float_arg", "int_arg",
           "print_table", "workload_from_args")


def __getattr__(name: str):
    if name in _COMMON:
        from perfsim.cli import common

        return getattr(common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: The modules that define subcommands, in the order ``--help`` lists them.
COMMAND_MODULES = ("perfsim.cli.gpus", "perfsim.cli.predict_cmd", "perfsim.cli.rows_cmd",
                   "perfsim.cli.sweep", "perfsim.cli.serve_cmd", "perfsim.validate.cli")
#: command -> the module that registers it, so one command loads only its own module
#: (tests/test_cli.py checks this against what the modules register)
COMMAND_OF = {"gpus": "perfsim.cli.gpus", "gpu": "perfsim.cli.gpus",
              "predict": "perfsim.cli.predict_cmd", "rows": "perfsim.cli.rows_cmd",
              "sweep": "perfsim.cli.sweep",
              "serve": "perfsim.cli.serve_cmd", "validate": "perfsim.validate.cli",
              "calibrate": "perfsim.validate.cli"}


def build_parser(modules=COMMAND_MODULES):
    """The ``perfsim`` parser with every command of ``modules`` (default: all of
    :data:`COMMAND_MODULES`) registered."""
    from perfsim.cli.common import _Parser

    parser = _Parser(prog="perfsim", description="Analytical performance simulator for "
                     "attention kernels (standard, FlashAttention 1-4) on GPUs.")
    from perfsim import __version__

    parser.add_argument("--version", action="version", version=f"perfsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in modules:
        module = importlib.import_module(name)
        for register in getattr(module, "COMMANDS", None) or [module.register]:
            register(sub)
    return parser


def _stopped(terminated: bool, args, exc: BaseException) -> int:
    """Report a stop in its one line (SIGTERM or Ctrl-C, with what the command kept,
    :func:`_kept`) and return its exit status, 143 or 130."""
    sys.stderr.write(f"perfsim: {'terminated' if terminated else 'interrupted'}"
                     f"{_kept(args, exc)}\n")
    return 143 if terminated else 130


def _kept(args, exc: BaseException) -> str:
    """What an interrupted command left on disk, for its one line: a streamed sweep's rows
    finished so far (``perfsim.cli.sweep.write_frames``), a Dask sweep's partitions, and that
    ``--out`` itself is replaced only by a whole result (or that it was, where the signal
    came while the result was renamed into place)."""
    note = getattr(args, "interrupt_note", None)
    if note is not None:                # a command that says what it keeps (validate)
        return note(args)
    out = getattr(args, "out", None)
    if not isinstance(out, str) or not out:
        return ""
    if getattr(args, "dask", None):
        from pathlib import Path

        from perfsim.files import PART_GLOB

        parts = len(list(Path(out).glob(PART_GLOB))) if Path(out).is_dir() else 0
        return (f": {parts} finished partition(s) are kept in {out}; the same command "
                "resumes from them, and the dataset is whole only once "
                f"{out}/_manifest.json is written (perfsim.distributed.read_dataset refuses it "
                "before; other Parquet readers read the partitions there)")
    if getattr(exc, "whole", None):     # the signal waited for the rename (write_frames)
        return (f": {out} was written whole before the signal took effect (every row is "
                "there)")
    whole = (f"{out} is replaced only by a whole result, so it is as it was before this run"
             if os.path.lexists(out) else
             f"{out} is written only as a whole result, so there is none")
    if getattr(exc, "keep_error", None):
        return (f": the {exc.partial_rows:,} rows finished could not be kept "
                f"({exc.keep_error}); {whole}")
    partial = getattr(exc, "partial", None)
    if partial:
        again = ("the same command resumes after them (--restart: starts over)"
                 if getattr(exc, "resumable", False) else "a run again starts over")
        return (f": the {exc.partial_rows:,} rows finished (the sweep's first, whole blocks) "
                f"are kept in {partial}; {whole}; {again}")
    return f" ({whole})"


class _Terminated(BaseException):
    """SIGTERM, raised so that ``finally`` blocks run (temporary output files are removed)."""


def _on_sigterm(signum, frame):
    note_stop(_Terminated)      # should C code this runs inside clear the exception
    raise _Terminated


def _on_sigint(signum, frame):
    """Ctrl-C: ``KeyboardInterrupt``, as Python's own handler raises, noted as well."""
    note_stop(KeyboardInterrupt)
    raise KeyboardInterrupt


def _redeliver_signals(hook_args) -> None:
    """``sys.unraisablehook`` while a command runs: a signal's exception (``_Terminated``,
    ``KeyboardInterrupt``) that Python swallowed because its handler ran inside a ``__del__``
    or a weakref callback ("Exception ignored in ...") is raised again as the same signal, so
    it reaches the command at the next instruction; anything else goes to the previous hook.
    Without it a SIGTERM that landed there was lost and the command ran to its end."""
    import _thread
    import signal

    # marked pending by another thread (not waited for: the handler would run inside this
    # hook and be swallowed again), the signal's handler runs in the main thread at its next
    # instruction, back in the command's own code; should that again be a __del__, this hook
    # sends it once more
    for kind, signum in ((_Terminated, signal.SIGTERM), (KeyboardInterrupt, signal.SIGINT)):
        if isinstance(hook_args.exc_value, kind):
            _thread.start_new_thread(_thread.interrupt_main, (signum,))
            return
    _previous_unraisablehook(hook_args)


_previous_unraisablehook = sys.unraisablehook


def _join_dash_values(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``[OPT, "-x,..."]`` as ``["OPT=-x,..."]`` for the ``options`` whose values may begin
    with a minus sign (argparse reads such a value as another option)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and "," in argv[i + 1]:
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def _refuse_unknown_options(parser, argv: list[str]) -> None:
    """An option the command does not have is the error argparse reports first (it named
    the missing required options instead: ``perfsim predict --bogus``). Long options only,
    as argparse abbreviates them (a unique prefix is known); exits 2 with the usage line."""
    import argparse

    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not argv or not actions or argv[0] not in actions[0].choices:
        return
    sub = actions[0].choices[argv[0]]
    if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
        return                  # a command with subcommands: argparse's own order
    known = list(sub._option_string_actions)
    unknown = []
    for token in argv[1:]:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if " " in name:            # argparse takes a dash-led token with a space for a value
            continue
        if name.startswith("--") and not any(k.startswith(name) for k in known):
            unknown.append(name)
    if unknown:
        sub.error(f"unrecognized option(s): {' '.join(unknown)}")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning at the command line: one line on stderr, without the source line that
    Python's default shows (perfsim's warnings say what happened and what is done)."""
    name = "" if issubclass(category, (UserWarning, RuntimeWarning)) else f"{category.__name__}: "
    (file or sys.stderr).write(f"perfsim: warning: {name}{message}\n")


def main(argv: list[str] | None = None) -> int:
    """The ``perfsim`` command line; returns the exit code (2 for bad input, 130 after
    Ctrl-C, 143 after SIGTERM).

    From the console script (``argv`` None), once an interrupt or SIGTERM has been reported a
    second Ctrl-C ends the process at once (the default signal action): before, one pressed
    while Python shut down (joining worker threads) printed "Exception ignored" tracebacks.
    Once a command has finished otherwise (its output complete, or its error reported), a
    Ctrl-C while Python shuts down is ignored: it turned a finished run's exit status into
    130, with nothing said (SIGTERM and SIGKILL still end the process).
    """
    import signal

    console = argv is None
    try:
        code = _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:   # before _main's own handlers are in place, or inside them
        sys.stderr.write("perfsim: interrupted\n")
        code = 130
    if console:
        try:
            signal.signal(signal.SIGINT,
                          signal.SIG_DFL if code in (130, 143) else signal.SIG_IGN)
        except ValueError:          # not the main thread: leave the handlers alone
            pass
    return code


def _main(argv: list[str]) -> int:
    """:func:`main` with ``argv`` given: parse, run the command, report its errors. SIGTERM's
    and SIGINT's handlers are installed first, so that they unwind the command's imports too;
    each notes its stop (:func:`perfsim.files.note_stop`) as it raises, and a stop whose
    exception was lost inside C code is raised when the command returns (exit 143 or 130;
    a file it wrote through :func:`perfsim.files.atomic_write` was not renamed into place)."""
    import signal

    note_stop(None)
    handlers = {}       # the handlers replaced: put back when the command ends
    try:        # SIGTERM unwinds like Ctrl-C; SIGKILL cannot be caught (files.atomic_write)
        handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_sigterm)
        # Ctrl-C as Python's own handler does, noted as well (only where that handler is
        # the one in place: an ignored SIGINT, as under nohup, stays ignored)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            handlers[signal.SIGINT] = signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:      # not the main thread
        pass
    global _previous_unraisablehook
    _previous_unraisablehook, sys.unraisablehook = sys.unraisablehook, _redeliver_signals
    import warnings
    args = None
    try:
        # pydantic, which every command loads, with the signals held: pydantic_core's
        # import turned a SIGTERM into a Rust panic (a traceback, exit 1); one that arrived
        # meanwhile is raised as the block ends, here
        with signals_deferred():
            for name in ("pydantic_core", "pydantic.main", "pydantic.fields"):
                importlib.import_module(name)
        args = _parse(argv)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = int(args.func(args) or 0)
        sys.stdout.flush()          # a full disk or a failing device reports here, not at exit
        raise_stop()                # a signal whose exception C code cleared: it stops here
        return code
    except PerfsimError as exc:
        from perfsim.cli.common import EXIT_BAD_INPUT

        # one line whatever the input held (a value with a newline in it is shown escaped)
        text = str(exc).replace("\r", "\\r").replace("\n", "\\n")
        sys.stderr.write(f"perfsim: error: {text}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        return _stopped(False, args, exc)
    except MemoryError:
        # (numpy's allocation error included; a limit the OS enforces by killing the
        # process instead cannot be reported)
        sys.stderr.write("perfsim: error: out of memory (the machine, its container or "
                         "`ulimit -v` allowed no more); a sweep written with --out FILE "
                         "streams in blocks of bounded memory, or sweep fewer rows\n")
        return 1
    except _Terminated as exc:
        return _stopped(True, args, exc)
    except BrokenPipeError:     # output piped into a reader that stopped (| head): quietly
        _drop_stdout()
        return 141
    except OSError as exc:
        # an output the system would not take (a full disk, a quota, an I/O error) or a path
        # a command opened itself; the files perfsim reads and writes by name report their
        # own errors as PerfsimError before this
        where = exc.filename or "standard output"
        sys.stderr.write(f"perfsim: error: {where}: {exc.strerror or exc}\n")
        _drop_stdout()
        return 1
    except BaseException as exc:
        # a signal's exception that code it ran inside replaced with its own (pydantic's
        # class set-up wraps it in a RuntimeError from __set_name__): the stop, as noted
        kind = noted_stop()
        if kind is None:
            raise
        return _stopped(kind is _Terminated, args, exc)
    finally:
        note_stop(None)             # reported above (or the process is on its way out)
        sys.unraisablehook = _previous_unraisablehook
        for signum, previous in handlers.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)


def _drop_stdout() -> None:
    """Point ``sys.stdout`` at the null device, so that Python's flush at exit does not fail a
    second time on an output that already failed."""
    try:
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass


def _parse(argv: list[str]):
    """The parsed command line (argparse's namespace), the command's modules imported."""
    # a window value may start with "-" ("-1,0"): argparse would take it for an option and
    # say only "expected one argument"; joined, it reaches the window's own check
    argv = _join_dash_values(list(argv), ("--window",))
    argv = _gpu_shortcut(argv)
    # a known command builds only its own module's parser (its imports alone); anything else
    # (--help, --version, a typo) builds them all, so help and errors list every command
    own = COMMAND_OF.get(argv[0]) if argv else None
    parser = build_parser((own,) if own else COMMAND_MODULES)
    _refuse_unknown_options(parser, argv)
    return parser.parse_args(argv)


def _gpu_shortcut(argv: list[str]) -> list[str]:
    """``perfsim gpu ID [options]`` (options before or after the id) as ``perfsim gpu show ID
    [options]``; ``show`` and ``list`` (any case) are the subcommands themselves."""
    if not argv or argv[0] != "gpu":
        return argv
    rest = argv[1:]
    first = next((i for i, token in enumerate(rest) if not token.startswith("-")), None)
    if first is None:
        return argv
    if rest[first].lower() in ("show", "list"):     # the options go after the subcommand
        return ["gpu", rest[first].lower(), *rest[:first], *rest[first + 1:]]
    return ["gpu", "show", *rest]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
