"""Pick an Evaluator at run time from the model file's type and the inference settings."""

from __future__ import annotations

from pathlib import Path

from dlzero.config import InferenceConfig
from dlzero.errors import ModelFileError
from dlzero.inference.base import Evaluator
from dlzero.inference.int8 import load_int8, prepare_int8
from dlzero.inference.onnx_backend import OnnxEvaluator
from dlzero.inference.torch_backend import TorchEvaluator
from dlzero.model.checkpoint import load_model_file
from dlzero.model.export import onnx_bytes


def load_model(path: str | Path, cfg: InferenceConfig | None = None) -> Evaluator:
    """An Evaluator for a `.pt` or `.onnx` model file.

    backend `auto`: torch for `.pt`, onnxruntime for `.onnx`. A `.pt` file with backend `onnx` is
    exported in memory first (onnxruntime is about twice as fast as eager torch on CPUs). An
    `.onnx` file cannot run on the torch backend (its weights are not a torch module).
    Precision int8 runs the model's calibrated int8 file (`X.int8.onnx`, made on demand) on onnxruntime.
    """
    cfg = cfg or InferenceConfig()
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".pt", ".onnx"):
        raise ModelFileError(f"model file '{p}' must end in .pt (checkpoint) or .onnx")
    if not p.is_file():
        raise ModelFileError(f"model file '{p}' does not exist")
    int8 = prepare_int8(p, cfg)
    if int8 is not None:
        return load_int8(int8, cfg)
    if suffix == ".onnx":
        if cfg.backend == "torch":
            raise ModelFileError(f"{p}: an ONNX model runs on the onnx backend, not torch")
        return OnnxEvaluator(p, cfg)
    model, meta = load_model_file(p)
    if cfg.backend == "onnx":
        return OnnxEvaluator(onnx_bytes(model, meta), cfg, meta, source=str(p))
    return TorchEvaluator(model, cfg, meta)

