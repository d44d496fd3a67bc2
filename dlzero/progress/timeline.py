"""Where a run's time went: `metrics/timeline.csv`, one row per phase of the loop.

Phases: selfplay, wait (the async loop's trainer waiting for games), train (held-out validation
included), calibrate (int8), gate, rate. A row is written when its phase ends, so a killed loop loses
only the phase it was in. In the async loop self-play is one long row beside the others; in the
sequential loop the phases follow each other. `shares` turns the rows into the fraction of the loop's
wall time each phase was running (phases may overlap, so the shares need not sum to 1).
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from dlzero.runfiles import TIMELINE_COLUMNS


class Timeline:
    """Appends phase rows to `path` (a run's `RunDir.timeline_csv`); safe to use from several threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.started = time.time()
        self._open: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def phase(self, name: str, generation: int | None) -> Iterator[None]:
        """Time the body as phase `name` of `generation` (the row is written even if it raises)."""
        start = time.time()
        key = id(threading.current_thread()) ^ hash(name)
        with self._lock:
            self._open[key] = (name, start)
        try:
            yield
        finally:
            with self._lock:
                self._open.pop(key, None)
            self._append(name, generation, start, time.time() - start)

    def _append(self, name: str, generation: int | None, start: float, seconds: float) -> None:
        with self._lock:
            new = not self.path.is_file() or self.path.stat().st_size == 0
            with self.path.open("a", newline="") as fh:
                w = csv.writer(fh, lineterminator="\n")
                if new:
                    w.writerow(TIMELINE_COLUMNS)
                stamp = _dt.datetime.fromtimestamp(start, _dt.timezone.utc).isoformat(timespec="seconds")
                w.writerow([name, "" if generation is None else generation, stamp, f"{seconds:.2f}"])

    def describe(self, generation: int | None) -> str:
        """`train 21 s, calibrate 6 s, ...` for `generation`'s rows, and self-play's share of this process's time."""
        parts = [f"{r['phase']} {float(r['seconds']):.0f} s" for r in read_rows(self.path)
                 if r["generation"] == str(generation) and r["phase"] != "selfplay"]
        now = time.time()
        with self._lock:
            running = [now - start for name, start in self._open.values() if name == "selfplay"]
        if running:
            parts.append(f"self-play running {min(1.0, running[0] / max(now - self.started, 1e-9)):.0%} "
                         "of the loop's time")
        return ", ".join(parts)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The well-formed rows of a timeline.csv (a torn last line is skipped)."""
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if r.get("seconds") and _is_number(r["seconds"])]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def shares(rows: list[dict[str, str]]) -> dict[str, float]:
    """Each phase's running time (the union of its intervals) over the wall time all rows span."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        try:
            start = _dt.datetime.fromisoformat(r["start"]).timestamp()
        except (TypeError, ValueError):  # a row a person edited, or a torn one: left out
            continue
        spans.setdefault(r["phase"], []).append((start, start + float(r["seconds"])))
    every = [s for v in spans.values() for s in v]
    if not every:
        return {}
    wall = _union(every)
    return {phase: _union(v) / wall if wall > 0 else 0.0 for phase, v in spans.items()}


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total
