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
from dlzero.model.export import INPUT_NAME, METADATA_KEY, OUTPUT_NAMES, fp16_onnx
from dlzero.model.quantize import QuantReport, read_report

_GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")


def _device_id(device: str) -> int:
    """The N of `cuda:N` (0 for plain `cuda` or `auto`)."""
    _, _, index = device.partition(":")
    if index and not index.isdigit():
        raise BackendError(f"unknown device '{device}' (use auto, cpu, cuda or cuda:N)")
    return int(index or 0)


def with_device(providers: list[str], device: str, precision: str = "fp32") -> list:
    """Providers as onnxruntime takes them, GPU ones bound to the GPU that `device` names.

    Without the device_id option every session would land on GPU 0, whatever `cuda:N` said.
    TensorRT builds its engine in the precision asked for: fp16 kernels for fp16, and for int8 the
    QDQ model's own scales (explicit quantization) with fp16 for the layers left unquantized.
    """
    gpu = _device_id(device) if device.startswith("cuda") else 0
    trt = {"device_id": gpu}
    if precision in ("fp16", "int8"):
        trt["trt_fp16_enable"] = True
    if precision == "int8":
        trt["trt_int8_enable"] = True
    return [(p, trt if p == "TensorrtExecutionProvider" else {"device_id": gpu}) if p in _GPU_PROVIDERS else p
            for p in providers]


def session_precision(precision: str, providers: list[str]) -> str:
    """fp32, fp16 or int8: what `inference.precision` means for onnxruntime with these providers.

    auto is fp16 on a GPU provider and fp32 on the CPU, as for torch; half precision on the CPU and
    bf16 anywhere are refused rather than silently run in fp32.
    """
    gpu = providers[0] in _GPU_PROVIDERS
    if precision == "auto":
        return "fp16" if gpu else "fp32"
    if precision == "bf16":
        raise BackendError("precision bf16 is for the torch backend; onnxruntime runs fp32, fp16 (GPU) or int8")
    if precision == "fp16" and not gpu:
        raise BackendError("precision fp16 is for CUDA or TensorRT; on the CPU use fp32 or int8")
    return precision


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
        if not cfg.spin:
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        providers = choose_providers(cfg)
        self.precision = session_precision(cfg.precision, providers)
        try:
            target = model if isinstance(model, bytes) else str(model)
            if self.precision == "fp16" and providers[0] == "CUDAExecutionProvider":
                target = fp16_onnx(target if isinstance(target, bytes) else Path(target).read_bytes())
            self.session = ort.InferenceSession(target, sess_options=opts,
                                                providers=with_device(providers, cfg.device, self.precision))
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf/NoSuchFile types
            raise ModelFileError(f"{self.source}: onnxruntime cannot load it: {exc}") from None
        self._check_signature()
        super().__init__(cfg.max_batch, metadata or self._read_metadata())
        self.threads = cfg.threads
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

    @property
    def on_gpu(self) -> bool:
        return self.providers[0] in _GPU_PROVIDERS

    def describe(self) -> str:
        report = self.quant_report
        if report is not None:
            precision = " int8" if report.accepted else " fp32 (int8 rejected)"
        else:
            precision = "" if self.precision == "fp32" else f" {self.precision}"
        return f"onnx {','.join(self.providers)}{precision}"
