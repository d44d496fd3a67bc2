"""The C heap's free pages go back to the system while a search grows its tree, so that the process's
resident memory follows the bytes the search holds (`search.hash_mb` bounds those).

Why: each network call frees megabytes of temporaries to glibc's heap; where the tree's small arrays are
allocated between the calls from the same heap, they are carved out of those free blocks, the next call's
temporaries no longer fit, the heap grows again, and the free blocks left between the tree's arrays stay
resident. The main way in (the network's outputs freed by the search's thread) is closed in
`Search._evaluate`; what is left still comes to 2.3x the tree's bytes with torch when the network runs in
the search's own thread (`search.pipeline` off), and to occasional stretches with it on. `malloc_trim(0)`
hands every whole free page back (madvise), so the holes cost nothing until they are used again.
Trimming after every call cost about 10 % of a call (the network then touches its temporaries' pages
afresh), so a search trims only when the resident size has outgrown its start plus what its trees and
cache gained by more than a slack, and takes its new baseline one batch after a trim, once the network's
working set is back. Linux with glibc only; elsewhere (no /proc/self/statm, no malloc_trim) nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable

__all__ = ["HeapTrimmer", "rss_bytes", "trim_heap", "trim_slack"]

# budget 0 (no memory budget, only the node limit): the slack of the default budget, 2 GiB
_NO_BUDGET = 2 << 30
_MIN_SLACK = 1 << 20
# reading the resident size costs ~9 us: once a batch would cost a null-network search ~1 %
CHECK_EVERY_S = 0.01


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int | None:
    """The process's resident memory in bytes (Linux: /proc/self/statm), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def trim_heap() -> bool:
    """Hand the C heap's free pages back to the system now; False where that cannot be done here."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def trim_slack(budget: int) -> int:
    """Resident bytes a search lets the heap's free pages add before it trims: a 16th of the memory budget
    `budget` (bytes; 0: none), at least 1 MiB. A tree at its budget then leaves the process at most that much
    above it, besides what comes once (the network's working memory); fewer trims, each costing about a
    tenth of a network call, than a tighter bound would take."""
    return max(_MIN_SLACK, (budget or _NO_BUDGET) // 16)


class HeapTrimmer:
    """Trims the C heap when the process's resident memory exceeds a baseline plus the bytes the search
    tracks (its trees and cache) by more than the slack. `begin` at the start of a search, `check` after
    each batch (it looks at most every CHECK_EVERY_S); `trims` counts the trims done."""

    def __init__(self) -> None:
        self.trims = 0
        self._base: int | None = None  # resident bytes minus tracked bytes; None: not measurable here
        self._slack = 0
        self._rebase = False
        self._last = 0.0

    def begin(self, tracked: int, slack: int) -> None:
        rss = rss_bytes() if _TRIM is not None else None
        self._base = None if rss is None else rss - tracked
        self._slack = slack
        self._rebase = False

    def due(self) -> bool:
        """Whether `check` would look now: a search adds up its trees' bytes only then, not every batch."""
        return self._base is not None and time.perf_counter() - self._last >= CHECK_EVERY_S

    def check(self, tracked: int) -> None:
        if not self.due():
            return
        self._last = time.perf_counter()
        rss = rss_bytes()
        if rss is None:
            return
        if self._rebase:
            self._base, self._rebase = rss - tracked, False
        elif rss - tracked - self._base > self._slack:
            trim_heap()
            self.trims += 1
            self._rebase = True
