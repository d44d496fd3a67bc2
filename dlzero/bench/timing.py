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


def paired_rates(fn_a: Callable[[], int], fn_b: Callable[[], int], min_seconds: float = 1.0,
                 warmup: int = 2) -> tuple[float, float]:
    """Items per second of `fn_a` and `fn_b`, measured in alternation.

    On a shared machine the load changes from second to second; timing the two interleaved, call by
    call, exposes both to the same load, so their ratio is fair even when the absolute rates are not.
    """
    for _ in range(warmup):
        fn_a()
        fn_b()
    items = [0, 0]
    spent = [0.0, 0.0]
    while sum(spent) < 2 * min_seconds:
        for i, fn in enumerate((fn_a, fn_b)):
            start = time.perf_counter()
            items[i] += fn()
            spent[i] += time.perf_counter() - start
    return items[0] / spent[0], items[1] / spent[1]
