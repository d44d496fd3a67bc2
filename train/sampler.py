"""Which positions make up each training batch: a pure function of (seed, cursor).

The stream of sample indices is epoch after epoch of a fresh permutation of the buffer, each epoch's
permutation seeded by (seed, epoch). A batch is the next `batch_size` entries of that stream from
the cursor. Because nothing else is random, the cursor (an int in the checkpoint) is the whole
sampler state: a resumed run draws exactly the batches an uninterrupted run would have drawn.

Under DDP every rank walks the same global stream and takes its own contiguous slice of each global
batch, so the ranks see disjoint samples and together see exactly what one process would see.
"""

from __future__ import annotations

import numpy as np


class EpochSampler:
    """Global batches of indices into a buffer of `n` positions, without replacement within an epoch."""

    def __init__(self, n: int, seed: int) -> None:
        if n <= 0:
            raise ValueError("cannot sample from an empty buffer")
        self.n = n
        self.seed = seed
        self._epoch = -1
        self._perm = np.empty(0, dtype=np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._epoch = epoch
        return self._perm

    def take(self, cursor: int, count: int) -> np.ndarray:
        """Stream entries [cursor, cursor + count), crossing epoch boundaries as needed."""
        out = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            epoch, offset = divmod(cursor + filled, self.n)
            chunk = min(count - filled, self.n - offset)
            out[filled:filled + chunk] = self._permutation(epoch)[offset:offset + chunk]
            filled += chunk
        return out

    def batch(self, cursor: int, global_batch: int, rank: int = 0, world: int = 1) -> np.ndarray:
        """This rank's slice of the global batch starting at `cursor` (world must divide global_batch)."""
        per_rank = global_batch // world
        return self.take(cursor + rank * per_rank, per_rank)
