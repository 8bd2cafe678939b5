"""The measurement loop of ``perfsim validate``: plan rows, skip finished ones, append each
result to a JSONL file as soon as it exists, stop cleanly before a wall-clock budget.

A *row* is one (shape, kernel) pair; its key is ``"<shape key>|<kernel>"``. ``results.jsonl``
holds one JSON object per finished row; on start the runner reads it and skips every key it
already holds, so an interrupted run loses at most the row in flight. The measuring itself is
a function passed in (``measure(row) -> dict``; the GPU one is
:func:`perfsim.validate.measure.make_measure`), so this module needs no torch and is tested on CPU
with a fake.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from perfsim.validate.models import EXTERNAL_MODELS, OWN_ALGORITHMS
from perfsim.validate.shapes import Shape

#: Result statuses. ``ok``: timed; ``oom``: out of GPU memory; ``unsupported``: the kernel or
#: backend refuses the shape; ``incorrect``: failed the correctness check, so not timed;
#: ``error``: anything else (the reason says what).
STATUSES = ("ok", "oom", "unsupported", "incorrect", "error")
RESULTS_FILE = "results.jsonl"
#: External backends measured after all other rows: FlexAttention compiles once per shape.
LATE_BACKENDS = ("flex",)
#: Wall-clock seconds kept in reserve for a kernel not yet seen in this run (its first row
#: compiles it); FlexAttention's first torch.compile takes longest.
FIRST_ROW_RESERVE_S = {"flex": 90.0}
DEFAULT_FIRST_ROW_RESERVE_S = 30.0
#: Later rows reserve this multiple of the longest row of the same kernel so far.
RESERVE_FACTOR = 1.5


@dataclass(frozen=True)
class Row:
    """One planned measurement: a shape and a kernel (``kind`` ``own`` or ``external``)."""

    shape: Shape
    algorithm: str
    kind: str

    @property
    def key(self) -> str:
        return f"{self.shape.key}|{self.algorithm}"


def plan(shapes: Iterable[Shape], algorithms: Iterable[str],
         external: Iterable[str] = ()) -> list[Row]:
    """Rows in measuring order, so that a run cut short has the most useful rows: the own
    kernels of every shape first (per shape, so rank agreement fills in shape by shape), then
    the external backends per shape, then those in :data:`LATE_BACKENDS` (slow to compile).

    Raises:
        ValueError: an unknown algorithm or backend name.
    """
    algorithms, external = list(algorithms), list(external)
    for name in algorithms:
        if name not in OWN_ALGORITHMS:
            raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(OWN_ALGORITHMS)}")
    for name in external:
        if name not in EXTERNAL_MODELS:
            raise ValueError(f"unknown backend {name!r}; known: {', '.join(EXTERNAL_MODELS)}")
    shapes = list(shapes)
    late = [b for b in external if b in LATE_BACKENDS]
    early = [b for b in external if b not in LATE_BACKENDS]
    return ([Row(s, a, "own") for s in shapes for a in algorithms]
            + [Row(s, b, "external") for s in shapes for b in early]
            + [Row(s, b, "external") for b in late for s in shapes])


def base_record(row: Row) -> dict:
    """The identifying fields every record starts with."""
    return {"key": row.key, **row.shape.fields(), "algorithm": row.algorithm, "kind": row.kind}


class ResultStore:
    """Append-only JSONL of result records, one per line, flushed and fsynced per record.

    Reading never raises on bad content and never drops a readable record silently: a line
    that is not UTF-8, not JSON, not an object or has no string ``key`` is skipped; two
    records run together on one line (a newline lost) are both read; a later record for a key
    replaces an earlier one (a retried row), except that a measured (``ok``) record is not
    replaced by a failed one. Every skipped or replaced line is listed in :attr:`problems`
    (the report prints them). A truncated last line (a run killed mid-write) is skipped and a
    newline is added before the next append.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.skipped_lines = 0
        #: one line of text per skipped or replaced line of the last :meth:`load`
        self.problems: list[str] = []
        #: key -> line number (1-based) of the record :meth:`load` kept
        self.lines: dict[str, int] = {}

    def load(self) -> dict[str, dict]:
        """Records by key (see the class docstring for what is skipped or replaced)."""
        records: dict[str, dict] = {}
        self.skipped_lines, self.problems, self.lines = 0, [], {}
        if not self.path.is_file():
            return records
        raw_lines = self.path.read_bytes().split(b"\n")
        for number, raw in enumerate(raw_lines, start=1):
            if not raw.strip():
                continue
            last = number == len(raw_lines)
            for rec, problem in _parse_line(raw):
                if problem:
                    self.skipped_lines += 1
                    # only a JSON line cut short can be a write a kill interrupted
                    what = (f"truncated last line ({problem})"
                            if last and problem.startswith("not JSON") else problem)
                    self.problems.append(f"line {number}: {what}; skipped")
                    continue
                key = rec["key"]
                if key in records:
                    old, old_line = records[key], self.lines[key]
                    if old.get("status") == "ok" and rec.get("status") != "ok":
                        self.problems.append(
                            f"line {number}: key {key!r} again with status "
                            f"{rec.get('status')!r}; kept the measured row of line {old_line}")
                        continue
                    self.problems.append(f"line {old_line}: key {key!r} replaced by line "
                                         f"{number}")
                    del records[key]      # file order: the replacement sits where it was read
                records[key] = rec
                self.lines[key] = number
        return records

    def append(self, record: dict) -> None:
        """Write one record as a line and force it to disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, sort_keys=True, default=_json_default)
        needs_newline = False
        if self.path.is_file() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                needs_newline = fh.read(1) != b"\n"
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(("\n" if needs_newline else "") + line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _is_time(value) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _parse_line(raw: bytes) -> list[tuple[dict | None, str]]:
    """``(record, "")`` for each record on one line, ``(None, why)`` for what is unreadable."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [(None, f"not UTF-8 (byte {exc.start})")]
    decoder, out, pos = json.JSONDecoder(), [], 0
    text = text.strip()
    while pos < len(text):
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            out.append((None, f"not JSON at column {exc.colno}: {exc.msg}"))
            break
        if not isinstance(obj, dict):
            out.append((None, f"a JSON {type(obj).__name__}, not an object"))
        elif not isinstance(obj.get("key"), str) or not obj["key"]:
            out.append((None, f"no string 'key' (got {obj.get('key')!r:.40})"))
        else:
            out.append((obj, ""))
        pos = end
        while pos < len(text) and text[pos] in " \t\r":
            pos += 1
    return out


def _json_default(value):
    if isinstance(value, tuple | set):
        return list(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    return str(value)


@dataclass
class RunSummary:
    """What a run did: rows measured now, skipped as already done, left for the next run."""

    measured: list[dict] = field(default_factory=list)
    skipped: int = 0
    remaining: int = 0
    stopped_for_time: bool = False
    aborted: str | None = None


def pending(rows: list[Row], done: dict[str, dict], retry_errors: bool = False) -> list[Row]:
    """Rows whose key has no record yet (or whose record is an ``error``, if retrying)."""
    def finished(row):
        rec = done.get(row.key)
        if rec is None or (retry_errors and rec.get("status") == "error"):
            return False
        # a measured row whose time is not a finite number > 0 (a damaged line) is measured
        # again; the report lists the damaged line
        measured = rec.get("measured_s")
        return rec.get("status") != "ok" or measured is None or _is_time(measured)
    return [r for r in rows if not finished(r)]


def run(rows: list[Row], measure: Callable[[Row], dict], store: ResultStore, *,
        limit_seconds: float | None = None, retry_errors: bool = False,
        clock: Callable[[], float] = time.monotonic,
        on_record: Callable[[int, int, dict], None] | None = None) -> RunSummary:
    """Measure every row not yet in ``store``, appending each record as soon as it is made.

    Args:
        rows: the plan (:func:`plan`).
        measure: ``measure(row) -> record``; exceptions it raises become ``error`` records.
            A record with ``abort_run`` set (e.g. the CUDA context was lost) is stored, then the
            run stops: later rows would fail for the same reason.
        store: where records go.
        limit_seconds: wall-clock budget; a row is started only if the time left exceeds its
            reserve (:data:`RESERVE_FACTOR` x the longest row of that kernel so far, or
            :data:`FIRST_ROW_RESERVE_S`).
        retry_errors: measure again rows whose stored status is ``error``.
        clock: seconds (monotonic); injectable for tests.
        on_record: called as ``on_record(index, total, record)`` after each row.
    """
    start = clock()
    todo = pending(rows, store.load(), retry_errors)
    summary = RunSummary(skipped=len(rows) - len(todo))
    longest: dict[str, float] = {}
    for i, row in enumerate(todo):
        if limit_seconds is not None:
            reserve = longest.get(row.algorithm, 0.0) * RESERVE_FACTOR or \
                FIRST_ROW_RESERVE_S.get(row.algorithm, DEFAULT_FIRST_ROW_RESERVE_S)
            if clock() - start + reserve > limit_seconds:
                summary.stopped_for_time = True
                summary.remaining = len(todo) - i
                return summary
        t0 = clock()
        try:
            record = measure(row)
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
            record = {**base_record(row), "status": "error",
                      "reason": f"{type(exc).__name__}: {exc}".splitlines()[0][:500]}
        wall = clock() - t0
        longest[row.algorithm] = max(longest.get(row.algorithm, 0.0), wall)
        record = {**base_record(row), **record, "wall_s": round(wall, 3),
                  "finished_at": datetime.now(UTC).isoformat(timespec="seconds")}
        abort = record.pop("abort_run", None)
        store.append(record)
        summary.measured.append(record)
        if on_record:
            on_record(i + 1, len(todo), record)
        if abort:
            summary.aborted = str(abort)
            summary.remaining = len(todo) - i - 1
            return summary
    return summary
