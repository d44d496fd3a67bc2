"""The network, its files (checkpoints with metadata) and its ONNX export."""

from dlzero.model.checkpoint import (
    ModelMetadata,
    load_model_file,
    model_name,
    new_model,
    save_model,
)
from dlzero.model.resnet import PolicyValueNet, count_parameters

__all__ = [
    "ModelMetadata",
    "PolicyValueNet",
    "count_parameters",
    "load_model_file",
    "model_name",
    "new_model",
    "save_model",
]
