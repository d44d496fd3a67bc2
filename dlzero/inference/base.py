"""The one interface search and self-play use to evaluate positions.

An Evaluator maps a batch of encoded positions (B, 100, 9, 9) float32 to policy logits
(B, 2187) float32 and values (B,) float32 in [-1, 1] (from the side to move). Inputs and outputs
are numpy arrays on the host, so callers never care which framework or device runs the network.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from dlzero.encoding import NUM_LABELS, NUM_PLANES
from dlzero.model.checkpoint import ModelMetadata


class Evaluator(ABC):
    """Batch of planes -> (policy logits, values). Subclasses implement `_run` on one chunk."""

    #: short backend name for logs and benchmarks ("torch", "onnx", "null")
    backend: str = "?"
    #: compute threads one call uses on a CPU (0: the library's default, every core); the engine lays out its
    #: calls by it (`dlzero.engine.layout`)
    threads: int = 0

    def __init__(self, max_batch: int, metadata: ModelMetadata | None = None) -> None:
        self.max_batch = max_batch
        self.metadata = metadata or ModelMetadata()

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate `planes` (B, 100, 9, 9); batches above `max_batch` are split into chunks."""
        if planes.ndim != 4 or planes.shape[1:] != (NUM_PLANES, 9, 9):
            raise ValueError(f"expected planes of shape (B, {NUM_PLANES}, 9, 9), got {planes.shape}")
        n = planes.shape[0]
        if n <= self.max_batch:
            return self._run(np.ascontiguousarray(planes, dtype=np.float32))
        policy = np.empty((n, NUM_LABELS), dtype=np.float32)
        value = np.empty(n, dtype=np.float32)
        for start in range(0, n, self.max_batch):
            chunk = np.ascontiguousarray(planes[start:start + self.max_batch], dtype=np.float32)
            policy[start:start + len(chunk)], value[start:start + len(chunk)] = self._run(chunk)
        return policy, value

    @abstractmethod
    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate one chunk of at most `max_batch` positions."""

    def describe(self) -> str:
        """One line for logs: backend, device, precision."""
        return self.backend

    @property
    def on_gpu(self) -> bool:
        """Whether the network runs on a GPU (the engine lays out its calls by it, `dlzero.engine.layout`)."""
        return False

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing to release
        """Release device memory or sessions; the default holds nothing."""


class NullEvaluator(Evaluator):
    """Uniform policy and value 0: measures search bookkeeping without a network."""

    backend = "null"

    def __init__(self, max_batch: int = 1 << 16) -> None:
        super().__init__(max_batch)

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = planes.shape[0]
        return np.zeros((n, NUM_LABELS), dtype=np.float32), np.zeros(n, dtype=np.float32)
