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

    A truncated last line (a run killed mid-write) is skipped when reading and a newline is
    added before the next append.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.skipped_lines = 0

    def load(self) -> dict[str, dict]:
        """Records by key; a later line for a key replaces an earlier one."""
        records: dict[str, dict] = {}
        self.skipped_lines = 0
        if not self.path.is_file():
            return records
        for line in self.path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                self.skipped_lines += 1
                continue
            if isinstance(rec, dict) and "key" in rec:
                records[rec["key"]] = rec
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
        return rec is not None and not (retry_errors and rec.get("status") == "error")
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
