"""The evaluation cache: the network's output for inputs seen before, least recently used out first.

Its own class so that it knows its bytes: `search.hash_mb` bounds the tree and this cache together
(`Search.tree_full`), since both grow the process while a search runs; the cache gives way to the tree (`shrink`),
since an entry can be computed again and a node's statistics cannot.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

import numpy as np

__all__ = ["EvalCache"]

# The entries' bytes as the allocators hold them (tests/test_usi_hash.py checks them against tracemalloc and the
# resident size): CPython's object allocator serves requests of up to 512 bytes in 16-byte steps; larger ones,
# numpy's buffers and an array's shape and strides come from the C library's malloc, which adds an 8-byte header
# and rounds up to 16.
_PYMALLOC_MAX = 512
_ARRAY_OBJECT = np.ndarray.__basicsize__  # an ndarray object, without its shape and strides


def c_block(size: int) -> int:
    """Bytes glibc's malloc holds for a request of `size` bytes (at least 32)."""
    return max(32, (size + 8 + 15) & ~15)


def py_block(size: int) -> int:
    """Bytes CPython's allocator holds for a request of `size` bytes (PyObject_Malloc, PyMem_Malloc)."""
    return (size + 15) & ~15 if size <= _PYMALLOC_MAX else c_block(size)


def array_bytes(nbytes: int) -> int:
    """A one-dimensional numpy array owning `nbytes` of data: the object, its shape and strides, the data."""
    return py_block(_ARRAY_OBJECT) + c_block(16) + c_block(max(nbytes, 1))


# An entry: the key (`input_key`: a 4-tuple whose Zobrist hash and move are int objects of their own), the value
# (a 2-tuple of the prior and a float) and the OrderedDict's share of its hash table and links (75-105 bytes an
# entry from 1k to 100k entries, measured with tracemalloc); the prior's bytes are added per entry.
_ODICT_ENTRY = 96
ENTRY_BYTES = (py_block(sys.getsizeof((0, 0, 0, 0))) + py_block(sys.getsizeof(1 << 62))
               + py_block(sys.getsizeof(1 << 20)) + py_block(sys.getsizeof((0, 0))) + py_block(sys.getsizeof(0.5))
               + _ODICT_ENTRY)


# an entry's bytes but its prior's data (`array_bytes` less the data's block), summed once: `put` runs for every
# new leaf, and the four calls of the sum cost a quarter of it
_ENTRY_FIXED = ENTRY_BYTES + py_block(_ARRAY_OBJECT) + c_block(16)


def entry_bytes(prior: np.ndarray) -> int:
    """Bytes of one entry whose prior is `prior` (an array of its own): `ENTRY_BYTES + array_bytes(prior.nbytes)`."""
    return _ENTRY_FIXED + max(32, (max(prior.nbytes, 1) + 23) & ~15)  # + c_block(max(nbytes, 1))


class EvalCache:
    """(prior, value) by input key, least recently used first, with `memory` the bytes the entries hold.

    An entry keeps a copy of its prior: a view would keep its whole batch's priors alive for as long as
    any entry of the batch lives, bytes no count would see.
    """

    def __init__(self) -> None:
        self.memory = 0
        self._entries: OrderedDict[tuple, tuple[np.ndarray, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple) -> tuple[np.ndarray, float] | None:
        """The entry of `key`, now the most recently used, or None."""
        hit = self._entries.get(key)
        if hit is not None:
            self._entries.move_to_end(key)
        return hit

    def put(self, key: tuple, prior: np.ndarray, value: float, capacity: int) -> None:
        """Set the entry of `key` (one already there keeps its place in the order), then drop the least
        recently used while more than `capacity` are held."""
        old = self._entries.get(key)
        if old is not None:
            self.memory -= entry_bytes(old[0])
        prior = prior.copy()
        self._entries[key] = (prior, value)
        self.memory += entry_bytes(prior)
        while len(self._entries) > capacity:
            self._drop_oldest()

    def shrink(self, limit: int) -> None:
        """Drop the least recently used entries until at most `limit` bytes are held (none below zero)."""
        while self._entries and self.memory > limit:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        """Drop the least recently used entry and its bytes: the one eviction both limits (count, bytes) use."""
        _, (dropped, _) = self._entries.popitem(last=False)
        self.memory -= entry_bytes(dropped)

    def clear(self) -> None:
        self._entries.clear()
        self.memory = 0
