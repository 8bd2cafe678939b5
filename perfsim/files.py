"""Reading input files and writing output files safely.

* :func:`read_text` reads a UTF-8 text file or raises one :class:`~perfsim.PerfsimError` line
  (missing file, a folder, unreadable, not UTF-8 — with the byte offset).
* :func:`check_output` checks an output path *before* any work is done: its folder exists, it
  is not a folder itself, and its extension is one the writer knows; :func:`check_output_folder`
  the same for an output that is a folder of files (a Parquet dataset).
* :func:`atomic_write` writes through a temporary file in the same folder and renames it over
  the target (``os.replace``, atomic on POSIX and Windows), so a write that is interrupted —
  an exception, Ctrl-C, SIGTERM (the CLI turns it into an exception), a full disk — never
  leaves a truncated file and never destroys the previous file at that path. The temporary
  file (``.NAME.*.tmp`` beside the target) is removed on every error path Python can see; only
  SIGKILL (or a power loss) can leave it behind, since no process can clean up after SIGKILL.
  Delete such a file by hand: it is never the result.
* :func:`note_stop` / :func:`raise_stop`: a stop a signal handler asked for, kept until it is
  acted on. Python runs a signal's handler between bytecodes, sometimes inside C code that
  clears the exception the handler raised (observed on CPython 3.11: a SIGTERM landing while
  ``import perfsim.compiled`` compiled its source, about one signal in four in that ~20 ms
  window, ran the command to its end with exit status 0). The CLI's handlers note the stop as
  well as raise it; :func:`atomic_write` raises a noted stop before it renames (so the previous
  file is kept), the sweep writers after each block, and the CLI when a command returns.
  :func:`signals_deferred` holds the two signals over imports that would turn them into
  other exceptions.

Length: reading, checking and writing files is one contract (one error line, nothing half
written, an interrupt acted on before a rename), and the stop a signal noted is part of it:
:func:`atomic_write` consults it before each rename.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from perfsim.errors import PerfsimError

#: The stop a signal handler asked for and nothing has acted on yet: the exception class it
#: raised (the CLI's SIGTERM exception, ``KeyboardInterrupt``), or None.
_pending_stop: type[BaseException] | None = None


def note_stop(kind: type[BaseException] | None) -> None:
    """Note that a signal asked the run to stop with ``kind`` raised (a handler calls this
    before it raises ``kind``); None forgets a noted stop (the CLI, once it has reported it)."""
    global _pending_stop
    _pending_stop = kind


def noted_stop() -> type[BaseException] | None:
    """The stop a signal handler noted (:func:`note_stop`) and nothing has forgotten, or
    None."""
    return _pending_stop


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM at the operating system (``pthread_sigmask``, this thread)
    over the block and deliver them after it, where their handlers run in Python code. For
    imports of extension modules that turn a handler's exception into one of their own:
    pydantic_core's (pyo3) raised ``PanicException`` ("failed to import datetime C API")
    with a Rust panic message when a SIGTERM landed in it, and pydantic's class set-up a
    ``RuntimeError`` from ``__set_name__``. The mask is this thread's: where other threads
    run, the system may hand a signal sent to the process to one of them, and Python then
    runs the handler in the main thread at once (the CLI defers at a command's start, when
    it has no other thread). Where ``pthread_sigmask`` is missing (Windows) the block runs
    as it is."""
    import signal

    held = {signal.SIGINT, signal.SIGTERM}
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def raise_stop() -> None:
    """Raise the stop a signal handler noted (:func:`note_stop`) whose exception was lost
    (cleared by C code the handler ran inside), and forget it. Called while that exception is
    being handled (an ``except`` or ``finally`` clause it reached, or one handling an
    exception raised there), it raises nothing: the stop has arrived, and what runs there
    (keeping a partial result, with its record) runs to its end."""
    global _pending_stop
    kind = _pending_stop
    if kind is None:
        return
    handled = sys.exc_info()[1]
    while handled is not None:
        if isinstance(handled, kind):
            return
        handled = handled.__context__
    _pending_stop = None
    raise kind


def read_text(path: str | Path, what: str = "file") -> str:
    """The text of a UTF-8 file.

    Raises:
        perfsim.PerfsimError: the file is missing, a folder or another non-regular file (a
            device, a FIFO), unreadable or not UTF-8.
    """
    path = Path(path)
    try:
        folder, found = path.is_dir(), path.is_file()
    except OSError as exc:          # a name the system refuses (too long)
        raise PerfsimError(f"{what} {str(path)!r} cannot be read: {_why(exc)}") from None
    if folder:
        raise PerfsimError(f"{what} {str(path)!r} is a folder, not a file")
    if not found:
        if path.exists():       # a device, a FIFO, a socket: it exists but holds no text
            raise PerfsimError(f"{what} {str(path)!r} is not a regular file")
        raise PerfsimError(f"{what} {str(path)!r} does not exist")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PerfsimError(f"{what} {str(path)!r} cannot be read: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PerfsimError(f"{what} {str(path)!r} is not UTF-8 text (byte {exc.start}: "
                           f"{data[exc.start:exc.start + 1]!r})") from None


def check_output(path: str | Path, extensions: Iterable[str], what: str = "output") -> Path:
    """Check that ``path`` can be written, before the work that produces it starts.

    Args:
        extensions: allowed suffixes, lower case with the dot (``.csv``).

    Raises:
        perfsim.PerfsimError: the path is empty, a folder or another non-regular file (a
            FIFO, a device), the folder is missing, the extension is not one of
            ``extensions``, or the folder is not writable.
    """
    extensions = tuple(extensions)
    if not str(path).strip():           # Path("") would read as the current folder
        raise PerfsimError(f"{what} is empty; give a file name ending in "
                           f"{', '.join(extensions)}")
    path = Path(path)
    if str(path).endswith(("/", os.sep)) or _is_dir(path, what):
        raise PerfsimError(f"{what} {str(path)!r} is a folder; give a file name ending in "
                           f"{', '.join(extensions)}")
    if path.suffix.lower() not in extensions:
        raise PerfsimError(f"{what} {str(path)!r}: unknown extension {path.suffix or '(none)'!r}"
                           f"; allowed: {', '.join(extensions)}")
    # the probe is named as atomic_write's temporary file (in the folder a link points into)
    target = _followed(path)
    _refuse_special(target, what)
    _check_folder(target.parent if str(target.parent) else Path("."), path, what,
                  prefix=_temporary_prefix(target))
    return path


#: Characters of the output's name kept in its temporary file's name: the name, a dot, eight
#: random characters and ``.tmp`` then fit the 255 bytes of a file name even when the output's
#: own name is as long as a file system allows.
TEMPORARY_NAME_CHARS = 200
#: The file names of a Dask sweep's partitions in its folder (``part-00000.parquet``, ...):
#: ``perfsim.distributed`` writes them, the CLI counts them when a run is interrupted.
PART_GLOB = "part-*.parquet"


def _temporary_prefix(path: Path) -> str:
    """``.NAME.`` — the prefix of :func:`atomic_write`'s temporary file beside ``path``
    (``NAME`` cut to :data:`TEMPORARY_NAME_CHARS` characters)."""
    return f".{path.name[:TEMPORARY_NAME_CHARS]}."


def check_output_folder(path: str | Path, what: str = "output folder") -> Path:
    """Check that the folder ``path`` (an output of several files, such as a Parquet
    dataset) can be created, or written into where it exists, before the work that fills it
    starts: as :func:`check_output` checks a file's folder. Nothing is created.

    Raises:
        perfsim.PerfsimError: ``path`` is a file; the folder above a new ``path`` is missing
            or is a file; the folder (``path`` itself, else the one above) is not writable.
    """
    path = Path(path)
    exists = _is_dir(path, what)
    if not exists and path.exists():
        raise PerfsimError(f"{what} {str(path)!r} is a file, not a folder")
    _check_folder(path if exists else (path.parent if str(path.parent) else Path(".")),
                  path, what)
    return path


def _is_dir(path: Path, what: str) -> bool:
    """``path.is_dir()``, or one PerfsimError where the system refuses the name (too long)."""
    try:
        return path.is_dir()
    except OSError as exc:
        raise PerfsimError(f"{what} {str(path)!r}: {_why(exc)}") from None


def _check_folder(folder: Path, path: Path, what: str, prefix: str = ".perfsim-probe.") -> None:
    """``folder`` exists, is a folder, and a file named ``prefix...`` can be created in it
    (for ``path``)."""
    for above in (folder, *folder.parents):     # 'f/x.csv' with f a file: say so
        if _is_dir(above, what):
            continue
        if above.exists():
            raise PerfsimError(f"{what} {str(path)!r}: {str(above)!r} is a file, not a folder")
    if not folder.is_dir():
        raise PerfsimError(f"{what} {str(path)!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PerfsimError(f"{what} {str(path)!r}: folder {str(folder)!r} is not writable")
    # os.access says yes to root everywhere, and /proc or /sys refuse new files to anyone:
    # create (and remove) a file there, as atomic_write will
    try:
        fd, probe = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=folder)
    except OSError as exc:
        raise PerfsimError(f"{what} {str(path)!r}: cannot create a file in folder "
                           f"{str(folder)!r} ({_why(exc)})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _why(exc: OSError) -> str:
    """The reason of an OSError in a few words (``No space left on device``)."""
    return exc.strerror or type(exc).__name__


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on a normal exit rename it onto ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was. A process
    killed by SIGKILL inside the block leaves a ``.NAME.*.tmp`` file beside ``path`` (nothing
    can remove it then; the previous file at ``path`` is intact). A symbolic link at ``path``
    is followed: the file it points to is replaced and the link stays. A file replaced keeps
    its permission bits (a new one gets ``0666`` less the umask, as ``open()`` gives).

    Raises:
        perfsim.PerfsimError: ``path`` is something other than a regular file (a folder, a
            FIFO, a device: replacing it would not reach its reader); the temporary file
            cannot be created, written or renamed (an ``OSError``: no permission, a
            read-only or full disk); one line with the reason.
        BaseException: a stop noted by a signal handler (:func:`note_stop`) whose exception
            did not arrive: raised in place of the rename, the temporary file removed.
    """
    path = _followed(Path(path))        # write where a link points, not over the link
    _refuse_special(path, "cannot write")
    if path.is_dir():
        # refused before anything is written, so that several files replaced together
        # (validate's report) are all refused before any of them is renamed
        raise PerfsimError(f"cannot write {str(path)!r}: it is a folder; give a file path")
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(path), suffix=".tmp", dir=folder)
    except OSError as exc:
        raise PerfsimError(f"cannot write {str(path)!r}: cannot create a file in folder "
                           f"{str(folder)!r} ({_why(exc)})") from None
    os.close(fd)
    tmp = Path(tmp)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)        # the replaced file's permissions
    except OSError:                                     # a new file: as open() makes it
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        os.chmod(tmp, mode)                 # mkstemp makes 0600
        yield tmp
        raise_stop()                        # a signal whose exception was lost: no rename
        with open(tmp, "rb+") as fh:        # the data reaches the disk before the rename
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise PerfsimError(f"cannot write {str(path)!r} ({_why(exc)}); the previous file "
                               "there, if any, is unchanged") from None
        raise


def _followed(path: Path) -> Path:
    """``path``, or the file a symbolic link at ``path`` points to."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _refuse_special(path: Path, what: str) -> None:
    """A ``PerfsimError`` where ``path`` exists and is neither a regular file nor a folder (a
    FIFO, a device, a socket); :func:`check_output` names folders itself."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise PerfsimError(f"{what} {str(path)!r}: it is not a regular file (a FIFO, device "
                           "or socket); give a file path")


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through :func:`atomic_write`."""
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


#: Figure formats ``--plot`` accepts (matplotlib's writers that need no extra package).
FIGURE_EXTENSIONS = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff")


def save_figure(fig, path: str | Path, **kwargs) -> None:
    """``fig.savefig`` through :func:`atomic_write`, the format from the extension."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    with atomic_write(path) as tmp:
        fig.savefig(tmp, format={"jpeg": "jpg", "tiff": "tif"}.get(fmt, fmt), **kwargs)
