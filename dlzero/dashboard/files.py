"""Reading run files while other processes write them: cached, read-only, failures become warnings.

A run directory changes under the dashboard all the time. Every write there is atomic, but a
person may still copy in a broken file, a disk may fill, or a newer dlzero may add columns. So each
reader here returns what it could read plus warnings that name the file; nothing raises to the page.
Parsed results are cached per path and reused while the file's (mtime, size) is unchanged, which
makes a refresh every few seconds cheap even for a run with thousands of shards.
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from dlzero.data.jsonfile import read_json
from dlzero.data.regular import read_regular_text
from dlzero.runfiles import csv_number

T = TypeVar("T")


class FileCache:
    """path -> parsed value, re-parsed only when the file's (mtime_ns, size) changes."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[tuple[int, int], Any]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, kind: str, parse: Callable[[Path], T]) -> T:
        """`parse(path)`, cached; exceptions propagate (and are not cached) so callers can warn."""
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        key = (kind, str(path))
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = parse(path)
        with self._lock:
            self._entries[key] = (stamp, value)
        return value


class Warnings:
    """Problems found while reading, shown at the top of the page (one line per file and problem)."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: Path | str, problem: str) -> None:
        line = f"{where}: {problem}"
        if line not in self.items:
            self.items.append(line)


def read_text(path: Path) -> str:
    """The file as UTF-8 text; a decoding error is reported like any other corruption, and so is a file
    that is no regular file (`dlzero.data.regular`)."""
    return read_regular_text(path)


def parse_csv(path: Path, required: Iterable[str]) -> list[dict[str, str]]:
    """Rows of a CSV file with a header; ValueError when the header lacks a `required` column.

    A last line without its newline is dropped: a writer that appends in place may be mid-line.
    """
    text = read_text(path)
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in required if c not in header]
    if missing:
        raise ValueError(f"not a CSV with the expected header (missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)})")
    rows = list(reader)
    for n, row in enumerate(rows, start=2):
        if None in row or any(v is None for v in row.values()):
            raise ValueError(f"line {n} has {'more' if None in row else 'fewer'} fields than the header")
    return rows


def parse_json(path: Path) -> Any:
    """A run's JSON file through the one bounded reader (size, depth, finite numbers): DataError if damaged."""
    return read_json(path)


def number(value: str | None, *, line: int, column: str, allow_empty: bool = False) -> float | None:
    """A CSV cell as a finite float (`runfiles.csv_number`); '' and 'nan' are None when `allow_empty`; anything
    else (text, inf, or where a number is due, nan) is a ValueError naming the line and column."""
    if value is None or value.strip() == "":
        if allow_empty:
            return None
        raise ValueError(f"line {line}: column {column} is empty")
    try:
        x = csv_number(value)
    except ValueError:
        x = None
    if x is None and not (allow_empty and value.strip().lower() == "nan"):
        what = "a finite number" if _is_float(value) else "a number"
        raise ValueError(f"line {line}: column {column} is not {what} ({value[:20]!r})")
    return x


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
