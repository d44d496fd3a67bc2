"""Where a run's time went: `metrics/timeline.csv`, one row per phase of the loop.

Phases: selfplay, wait (the async loop's trainer waiting for games), train (held-out validation
included), calibrate (int8), gate, rate. A row is written when its phase ends, so a killed loop loses
only the phase it was in. In the async loop self-play is one long row beside the others; in the
sequential loop the phases follow each other. `shares` turns the rows into the fraction of the loop's
wall time each phase was running (phases may overlap, so the shares need not sum to 1).

A row's start and end are both cut down to the millisecond before they are written (start as an
ISO time, end as start plus `seconds`), so a phase that ended before the next began still ends no
later than it starts in the file: sequential phases never overlap there, and their shares sum to at
most 1. (Starts cut to the whole second made the sequential loop's short phases overlap by up to 1 s.)
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dlzero.runfiles import TIMELINE_COLUMNS, csv_number


class Timeline:
    """Appends phase rows to `path` (a run's `RunDir.timeline_csv`); safe to use from several threads."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.clock = clock  # wall-clock seconds; a test passes its own to place phases exactly
        self.started = clock()
        self._open: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def phase(self, name: str, generation: int | None) -> Iterator[None]:
        """Time the body as phase `name` of `generation` (the row is written even if it raises)."""
        start = self.clock()
        key = id(threading.current_thread()) ^ hash(name)
        with self._lock:
            self._open[key] = (name, start)
        try:
            yield
        finally:
            with self._lock:
                self._open.pop(key, None)
            self._append(name, generation, start, self.clock())

    def _append(self, name: str, generation: int | None, start: float, end: float) -> None:
        start_ms, end_ms = _millis(start), max(_millis(start), _millis(end))
        with self._lock:
            new = not self.path.is_file() or self.path.stat().st_size == 0
            with self.path.open("a", newline="") as fh:
                w = csv.writer(fh, lineterminator="\n")
                if new:
                    w.writerow(TIMELINE_COLUMNS)
                stamp = _dt.datetime.fromtimestamp(start_ms / 1000, _dt.timezone.utc)
                w.writerow([name, "" if generation is None else generation, stamp.isoformat(timespec="milliseconds"),
                            f"{(end_ms - start_ms) / 1000:.3f}"])

    def describe(self, generation: int | None) -> str:
        """`train 21 s, calibrate 6 s, ...` for `generation`'s rows, and self-play's share of this process's time."""
        parts = [f"{r['phase']} {float(r['seconds']):.0f} s" for r in read_rows(self.path)
                 if r["generation"] == str(generation) and r["phase"] != "selfplay"]
        now = self.clock()
        with self._lock:
            running = [now - start for name, start in self._open.values() if name == "selfplay"]
        if running:
            parts.append(f"self-play running {min(1.0, running[0] / max(now - self.started, 1e-9)):.0%} "
                         "of the loop's time")
        return ", ".join(parts)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The well-formed rows of a timeline.csv: a torn last line, and a row whose seconds are not a finite
    number (`inf`, edited by hand), are skipped."""
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if _is_number(r.get("seconds"))]


def _is_number(text: str | None) -> bool:
    try:
        return csv_number(text) is not None
    except ValueError:
        return False


def _millis(seconds: float) -> int:
    """`seconds` cut down to whole milliseconds: the grid rows are written and read on."""
    return math.floor(seconds * 1000)


def shares(rows: list[dict[str, str]]) -> dict[str, float]:
    """Each phase's running time (the union of its intervals) over the wall time all rows span.

    Intervals are summed in whole milliseconds (integers), so that phases which touch in the file do
    not overlap by a float's rounding."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for r in rows:
        try:
            start = round(_dt.datetime.fromisoformat(r["start"]).timestamp() * 1000)
            length = round(float(r["seconds"]) * 1000)
        except (TypeError, ValueError, OverflowError):  # a row a person edited (inf, nan), or a torn one: left out
            continue
        spans.setdefault(r["phase"], []).append((start, start + length))
    every = [s for v in spans.values() for s in v]
    if not every:
        return {}
    wall = _union(every)
    return {phase: _union(v) / wall if wall > 0 else 0.0 for phase, v in spans.items()}


def _union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, min((a for a, _ in intervals), default=0)
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total
