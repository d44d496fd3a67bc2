"""Run-time device choice: nothing assumes a GPU."""

from __future__ import annotations

import torch

from dlzero.errors import BackendError


def resolve_device(name: str) -> torch.device:
    """`auto` -> CUDA when available, else CPU; an explicit CUDA request without CUDA is an error."""
    if name in ("", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise BackendError(f"unknown device '{name}' (use auto, cpu, cuda or cuda:N)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise BackendError(f"device '{name}' requested but this torch build sees no CUDA GPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise BackendError(f"device '{name}' requested but only {torch.cuda.device_count()} GPU(s) exist")
    elif device.type != "cpu":
        raise BackendError(f"device type '{device.type}' is not supported (use cpu or cuda)")
    return device


def resolve_precision(precision: str, device: torch.device) -> torch.dtype:
    """`auto` -> fp16 on CUDA, fp32 on CPU. Half precision on CPU is refused (slow, not useful)."""
    if precision == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    if precision == "int8":
        raise BackendError("precision int8 runs on onnxruntime (backend onnx), not on torch")
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    if device.type == "cpu" and dtype != torch.float32:
        raise BackendError(f"precision {precision} is for CUDA; on the CPU use fp32")
    return dtype
