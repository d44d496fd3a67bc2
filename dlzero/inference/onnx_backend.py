"""Evaluator on onnxruntime: CPU, CUDA or TensorRT execution providers.

Providers are chosen from what this onnxruntime build offers. Asking for one it lacks (CUDA on the
CPU-only package, say) is a `BackendError` that says what is available and what to install,
rather than onnxruntime's silent fallback to the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort

from dlzero.config import InferenceConfig
from dlzero.encoding import NUM_LABELS, NUM_PLANES
from dlzero.errors import BackendError, ModelFileError
from dlzero.inference.base import Evaluator
from dlzero.model.checkpoint import ModelMetadata, check_header
from dlzero.model.export import INPUT_NAME, METADATA_KEY, OUTPUT_NAMES
from dlzero.model.quantize import QuantReport, read_report

_GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")


def _device_id(device: str) -> int:
    """The N of `cuda:N` (0 for plain `cuda` or `auto`)."""
    _, _, index = device.partition(":")
    if index and not index.isdigit():
        raise BackendError(f"unknown device '{device}' (use auto, cpu, cuda or cuda:N)")
    return int(index or 0)


def with_device(providers: list[str], device: str) -> list:
    """Providers as onnxruntime takes them, GPU ones bound to the GPU that `device` names.

    Without the device_id option every session would land on GPU 0, whatever `cuda:N` said.
    """
    gpu = _device_id(device) if device.startswith("cuda") else 0
    return [(p, {"device_id": gpu}) if p in _GPU_PROVIDERS else p for p in providers]


def choose_providers(cfg: InferenceConfig) -> list[str]:
    """The provider list for a session, validated against this onnxruntime build."""
    available = ort.get_available_providers()
    if cfg.providers:
        for name in cfg.providers:
            if name not in available:
                hint = " (pip install onnxruntime-gpu, and uninstall onnxruntime)" if name in _GPU_PROVIDERS else ""
                raise BackendError(
                    f"onnxruntime provider '{name}' was requested but is not available here; "
                    f"available: {', '.join(available)}{hint}")
        return list(cfg.providers)
    if cfg.device == "cpu":
        return ["CPUExecutionProvider"]
    if cfg.device.startswith("cuda"):
        if "CUDAExecutionProvider" not in available:
            raise BackendError(
                f"device '{cfg.device}' requested for onnxruntime, but this build has only "
                f"{', '.join(available)} (pip install onnxruntime-gpu)")
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    # auto: CUDA when present (TensorRT only on request: its engine build takes minutes), else CPU
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]


class OnnxEvaluator(Evaluator):
    """Runs an ONNX model (from a file or bytes) with onnxruntime."""

    backend = "onnx"

    def __init__(self, model: str | Path | bytes, cfg: InferenceConfig, metadata: ModelMetadata | None = None,
                 source: str = "") -> None:
        self.source = source or (str(model) if not isinstance(model, bytes) else "<in-memory ONNX>")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if cfg.threads > 0:
            opts.intra_op_num_threads = cfg.threads
            opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        providers = choose_providers(cfg)
        try:
            target = model if isinstance(model, bytes) else str(model)
            self.session = ort.InferenceSession(target, sess_options=opts,
                                                providers=with_device(providers, cfg.device))
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf/NoSuchFile types
            raise ModelFileError(f"{self.source}: onnxruntime cannot load it: {exc}") from None
        self._check_signature()
        super().__init__(cfg.max_batch, metadata or self._read_metadata())
        self.providers = self.session.get_providers()
        #: how the model was quantized (None: a plain fp32 export); see dlzero.inference.int8
        self.quant_report: QuantReport | None = read_report(self.session.get_modelmeta().custom_metadata_map)

    def _check_signature(self) -> None:
        inputs = self.session.get_inputs()
        outputs = {o.name: o for o in self.session.get_outputs()}
        if len(inputs) != 1 or inputs[0].name != INPUT_NAME or list(inputs[0].shape[1:]) != [NUM_PLANES, 9, 9]:
            got = [(i.name, i.shape) for i in inputs]
            raise ModelFileError(f"{self.source}: expected one input '{INPUT_NAME}' of shape "
                                 f"[batch, {NUM_PLANES}, 9, 9], found {got}")
        if set(outputs) != set(OUTPUT_NAMES) or list(outputs["policy"].shape[1:]) != [NUM_LABELS] \
                or len(outputs["value"].shape) != 1:
            got = [(o.name, o.shape) for o in outputs.values()]
            raise ModelFileError(f"{self.source}: expected outputs policy [batch, {NUM_LABELS}] and "
                                 f"value [batch], found {got}")

    def _read_metadata(self) -> ModelMetadata:
        raw = self.session.get_modelmeta().custom_metadata_map.get(METADATA_KEY)
        if raw is None:
            return ModelMetadata(name=Path(self.source).stem)
        try:
            header = json.loads(raw)
        except json.JSONDecodeError:
            raise ModelFileError(f"{self.source}: its '{METADATA_KEY}' metadata is not JSON") from None
        return check_header(header, self.source)[1]

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        policy, value = self.session.run(list(OUTPUT_NAMES), {INPUT_NAME: planes})
        return policy, value

    def describe(self) -> str:
        report = self.quant_report
        precision = "" if report is None else " int8" if report.accepted else " fp32 (int8 rejected)"
        return f"onnx {','.join(self.providers)}{precision}"
