"""The one reader of a run's JSON files (run.json, best.json, loop.json, selfplay_state.json, train/*.json).

These files are written by dlzero (atomically) and hold a few flat fields, but a person may edit one,
a copy may cut it short, or a hostile file may take its place. Read plainly, a 100,000-deep array makes
`json.loads` raise RecursionError (a traceback, or a 500 in the dashboard), a number like 1e400 reads
as an infinity that no JSON answer can carry, and a file of gigabytes is read whole. So every reader
goes through `read_json`, which bounds the size and the nesting, takes only finite numbers, and turns
any of these into one DataError naming the file; what each file must hold (its schema) is checked by
its own reader on top (`RunDir.open`, `RunDir.best`, `LoopState.load`, the self-play resign state).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dlzero.data.regular import read_regular
from dlzero.errors import DataError

MAX_JSON_BYTES = 16 << 20  # the largest run file, train/seen-shards.json, is ~100 bytes a shard
MAX_JSON_DEPTH = 16  # run files nest 2 levels at most; a deeper one was not written by dlzero


def read_json(path: str | Path, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value in `path`; a DataError naming it when it is larger than `max_bytes` (no more is
    read), not UTF-8, not JSON, holds NaN/Infinity or a number too large for a float, or nests deeper
    than `max_depth`, or is no regular file (`dlzero.data.regular.NotRegularFile`). OSError (a missing or
    unreadable file) is left to the caller."""
    raw = read_regular(path, max_bytes)
    if len(raw) > max_bytes:
        raise DataError(str(path), None, f"larger than {max_bytes:,} bytes: not a file dlzero wrote")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except UnicodeDecodeError as exc:
        raise DataError(str(path), exc.start, "not UTF-8 text") from None
    except RecursionError:
        raise DataError(str(path), None, f"JSON nested too deeply (more than {max_depth} levels)") from None
    except ValueError as exc:  # bad JSON, NaN/Infinity, 1e400, an integer of more digits than Python converts
        raise DataError(str(path), None, f"not valid JSON: {exc}") from None
    if json_depth(data) > max_depth:
        raise DataError(str(path), None, f"JSON nested too deeply (more than {max_depth} levels)")
    return data


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is too large for a float")
    return value


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), counted without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level + 1)
            stack.extend((child, level + 1) for child in item)
    return deepest
