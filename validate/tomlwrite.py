"""A small TOML writer (the GPU machine has no ``tomli_w``): enough for GPU profiles.

Writes top-level keys, then one ``[table]`` per dict (nested dicts become ``[a.b]``), with
strings, ints, floats (``inf``/``nan`` included), bools and flat arrays of those. ``None``
values are left out (TOML has no null). Keys that are not bare (``A-Za-z0-9_-``) are quoted.
Round-trips through :mod:`tomllib` (tested).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from pathlib import Path

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _key(key: str) -> str:
    return key if _BARE.match(key) else _string(key)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as TOML")


def dumps(data: dict) -> str:
    """TOML text for ``data`` (a dict of scalars, flat arrays and nested dicts).

    Raises:
        TypeError: a value of another type (e.g. a list of dicts).
    """
    lines: list[str] = []
    _emit(lines, [], data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _emit(lines: list[str], path: list[str], table: dict) -> None:
    if path:
        lines += ["", "[" + ".".join(_key(p) for p in path) + "]"]
    for key, value in table.items():
        if value is not None and not isinstance(value, dict):
            lines.append(f"{_key(str(key))} = {_value(value)}")
    for key, value in table.items():
        if isinstance(value, dict):
            _emit(lines, [*path, str(key)], value)


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temporary file in the same folder, fsync,
    rename), so a reader never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
