"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def rate(fn: Callable[[], int], min_seconds: float = 1.0, warmup: int = 2, max_calls: int = 100_000) -> float:
    """Items per second of `fn` (which returns how many items one call processed).

    Runs `warmup` untimed calls, then repeats until `min_seconds` have passed.
    """
    for _ in range(warmup):
        fn()
    items = 0
    calls = 0
    start = time.perf_counter()
    while True:
        items += fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds or calls >= max_calls:
            return items / elapsed
