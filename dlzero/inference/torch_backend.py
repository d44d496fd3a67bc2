"""Evaluator on torch: CPU (channels-last, traced and frozen) or CUDA (fp16/bf16, optional
torch.compile or CUDA graphs)."""

from __future__ import annotations

import threading

import numpy as np
import torch

from dlzero.config import InferenceConfig
from dlzero.encoding import NUM_PLANES
from dlzero.inference.base import Evaluator
from dlzero.inference.devices import resolve_device, resolve_precision
from dlzero.model.checkpoint import ModelMetadata
from dlzero.model.resnet import PolicyValueNet


class _GraphRunner:
    """CUDA graphs per padded batch size: batches are padded up to a power of two and replayed."""

    def __init__(self, module: torch.nn.Module, device: torch.device, dtype: torch.dtype, max_batch: int) -> None:
        self.module, self.device, self.dtype, self.max_batch = module, device, dtype, max_batch
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]] = {}

    def _bucket(self, n: int) -> int:
        size = 1
        while size < n:
            size *= 2
        return min(size, self.max_batch)

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = x.shape[0]
        size = self._bucket(n)
        if size not in self.graphs:
            static_in = torch.zeros((size, NUM_PLANES, 9, 9), device=self.device, dtype=self.dtype)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # warm up outside the graph, as capture requires
                    self.module(static_in)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = self.module(static_in)
            self.graphs[size] = (graph, static_in, static_out)
        graph, static_in, (policy, value) = self.graphs[size]
        static_in[:n].copy_(x)
        graph.replay()
        return policy[:n], value[:n]


class TorchEvaluator(Evaluator):
    """Runs a PolicyValueNet with torch on the device chosen at run time."""

    backend = "torch"

    def __init__(self, model: PolicyValueNet, cfg: InferenceConfig, metadata: ModelMetadata | None = None) -> None:
        super().__init__(cfg.max_batch, metadata)
        self.device = resolve_device(cfg.device)
        self.dtype = resolve_precision(cfg.precision, self.device)
        if cfg.threads > 0 and self.device.type == "cpu":
            torch.set_num_threads(cfg.threads)
            self.threads = cfg.threads
        optimize = cfg.optimize
        if optimize == "auto":
            optimize = "freeze" if self.device.type == "cpu" else "none"
        self.optimize = optimize
        self._pinned: torch.Tensor | None = None
        # CUDA calls share one pinned staging buffer (and CUDA graphs their static tensors), so calls
        # from several search streams take turns; on the CPU they run side by side
        self._cuda_lock = threading.Lock() if self.device.type == "cuda" else None
        model = model.eval().to(self.device)
        if self.device.type == "cuda":
            model = model.to(self.dtype)  # BN in eval mode is an affine map: safe in half precision
        self._module = self._prepare(model, optimize)

    def _prepare(self, model: torch.nn.Module, optimize: str):
        if optimize == "freeze":
            model = model.to(memory_format=torch.channels_last)
            example = torch.zeros(8, NUM_PLANES, 9, 9, device=self.device, dtype=self._input_dtype())
            example = example.to(memory_format=torch.channels_last)
            with torch.no_grad():
                traced = torch.jit.trace(model, example, check_trace=False)
                return torch.jit.freeze(traced)
        if optimize == "compile":
            return torch.compile(model, dynamic=True)
        if optimize == "cuda_graphs":
            if self.device.type != "cuda":
                raise ValueError("optimize=cuda_graphs needs a CUDA device")
            return _GraphRunner(model, self.device, self.dtype, self.max_batch)
        return model

    def _input_dtype(self) -> torch.dtype:
        return self.dtype if self.device.type == "cuda" else torch.float32

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._cuda_lock is None:
            return self._forward(planes)
        with self._cuda_lock:
            return self._forward(planes)

    def _forward(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = torch.from_numpy(planes)
        if self.device.type == "cuda":
            # one pinned staging buffer, reused: pinning memory on every call costs more than the copy
            # (the outputs' .cpu() below waits for the stream, so the buffer is free again by then)
            if self._pinned is None:
                self._pinned = torch.empty((self.max_batch, NUM_PLANES, 9, 9), dtype=torch.float32).pin_memory()
            staged = self._pinned[:x.shape[0]]
            staged.copy_(x)
            x = staged.to(self.device, non_blocking=True).to(self.dtype)
        if self.optimize == "freeze":
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            policy, value = self._module(x)
        return (policy.float().cpu().numpy().astype(np.float32, copy=False),
                value.float().cpu().numpy().astype(np.float32, copy=False))

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def describe(self) -> str:
        precision = str(self.dtype).replace("torch.", "")
        return f"torch {self.device} {precision} optimize={self.optimize}"
