"""Writing GPU profiles as TOML: ``tomli_w`` (the reader is the standard library's
``tomllib``), with ``None`` values left out (TOML has no null), and an atomic file write.
"""

from __future__ import annotations

from pathlib import Path

from perfsim.files import atomic_write


def _without_none(data):
    if isinstance(data, dict):
        return {k: _without_none(v) for k, v in data.items() if v is not None}
    return data


def dumps(data: dict) -> str:
    """TOML text for ``data`` (scalars, arrays and nested dicts; ``None`` values dropped).

    Raises:
        TypeError: a value TOML cannot hold (e.g. an arbitrary object).
    """
    import tomli_w

    return tomli_w.dumps(_without_none(data))


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (``perfsim.files.atomic_write``: a temporary
    file in the same folder, flushed to disk and renamed), creating the folder; a reader never
    sees a half-written file.

    Raises:
        perfsim.PerfsimError: the file cannot be written (one line with the reason).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path
