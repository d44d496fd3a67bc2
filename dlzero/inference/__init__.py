"""Batched evaluation of positions: one Evaluator interface, torch and onnxruntime backends."""

from dlzero.inference.base import Evaluator, NullEvaluator
from dlzero.inference.devices import resolve_device
from dlzero.inference.loader import load_model
from dlzero.inference.onnx_backend import OnnxEvaluator
from dlzero.inference.torch_backend import TorchEvaluator

__all__ = ["Evaluator", "NullEvaluator", "OnnxEvaluator", "TorchEvaluator", "load_model", "resolve_device"]
