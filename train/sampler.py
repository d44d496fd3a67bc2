"""Which positions make up each training batch: a pure function of (seed, cursor).

The stream of sample indices is epoch after epoch of a fresh permutation of the buffer, each epoch's
permutation seeded by (seed, epoch). A batch is the next `batch_size` entries of that stream from
the cursor. Because nothing else is random, the cursor (an int in the checkpoint) is the whole
sampler state: a resumed run draws exactly the batches an uninterrupted run would have drawn.

Under DDP every rank walks the same global stream and takes its own contiguous slice of each global
batch, so the ranks see disjoint samples and together see exactly what one process would see.

With teacher data mixed in (`train.teacher_fraction`), `MixSampler` draws a fixed share of every batch
from the teacher positions appended to the window, by the same rule: a pure function of (seed, cursor).
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


def teacher_per_batch(fraction: float, global_batch: int) -> int:
    """Entries of a global batch drawn from teacher data: `fraction` of it, rounded half up, at least one
    entry left for self-play."""
    return min(global_batch - 1, int(fraction * global_batch + 0.5))


def _sub_seed(seed: int, stream: int) -> int:
    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])


class MixSampler:
    """Global batches over a buffer of `n_main` self-play positions followed by `n_teacher` teacher positions,
    of which exactly `teacher_per_batch(fraction, batch)` come from the teacher part.

    Two epoch streams, one per part, each as `EpochSampler`'s: global batch b (cursor = b x batch) takes
    entries [b x m, (b + 1) x m) of the self-play stream (m = batch - k) and [b x k, (b + 1) x k) of the
    teacher stream (k teacher entries), so the cursor is still the whole state. The two are shuffled
    together by a permutation seeded by (seed, b), so that each DDP rank's slice holds both kinds (its
    batch-norm statistics see the same mix as a single process's).
    """

    def __init__(self, n_main: int, n_teacher: int, fraction: float, seed: int) -> None:
        self.n_main = n_main
        self.fraction = fraction
        self.main = EpochSampler(n_main, seed)
        self.teacher = EpochSampler(n_teacher, _sub_seed(seed, 1))
        self.shuffle_seed = _sub_seed(seed, 2)

    def global_batch(self, cursor: int, global_batch: int) -> np.ndarray:
        """The whole global batch at `cursor`: indices < n_main are self-play, the others teacher."""
        k = teacher_per_batch(self.fraction, global_batch)
        b = cursor // global_batch
        m = global_batch - k
        mixed = np.concatenate([self.main.take(b * m, m), self.n_main + self.teacher.take(b * k, k)])
        return mixed[np.random.default_rng([self.shuffle_seed, b]).permutation(global_batch)]

    def batch(self, cursor: int, global_batch: int, rank: int = 0, world: int = 1) -> np.ndarray:
        """This rank's slice of the global batch at `cursor` (world must divide global_batch)."""
        per_rank = global_batch // world
        return self.global_batch(cursor, global_batch)[rank * per_rank:(rank + 1) * per_rank]
