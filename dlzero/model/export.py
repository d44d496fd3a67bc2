"""ONNX export with a dynamic batch axis and the checkpoint's metadata.

Input `planes` (batch, 100, 9, 9) float32; outputs `policy` (batch, 2187) logits and `value`
(batch,) in [-1, 1]. The metadata prop `dlzero` holds the same JSON header a `.pt` file has, so an
ONNX file alone is a complete model.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import onnx
import torch

from dlzero.data.atomic import atomic_write_bytes
from dlzero.encoding import NUM_PLANES
from dlzero.model.checkpoint import ModelMetadata, checkpoint_payload
from dlzero.model.resnet import PolicyValueNet

INPUT_NAME = "planes"
OUTPUT_NAMES = ("policy", "value")
METADATA_KEY = "dlzero"
OPSET = 17


def onnx_header(model: PolicyValueNet, meta: ModelMetadata) -> dict:
    """The JSON header stored in an ONNX file's metadata (a checkpoint payload without weights)."""
    payload = checkpoint_payload(model, meta)
    payload.pop("state_dict")
    return payload


class _UserOutputs(torch.nn.Module):
    """planes -> (policy, tanh value) only: the exporter would turn forward's `value_logit`
    keyword into a graph input otherwise."""

    def __init__(self, net: PolicyValueNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(x)


def onnx_bytes(model: PolicyValueNet, meta: ModelMetadata) -> bytes:
    """The serialized ONNX model (float32, batch axis dynamic) with the metadata header."""
    model = model.eval().cpu()
    dummy = torch.zeros(2, NUM_PLANES, 9, 9)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            _UserOutputs(model).eval(), (dummy,), buf,
            input_names=[INPUT_NAME], output_names=list(OUTPUT_NAMES),
            dynamic_axes={INPUT_NAME: {0: "batch"}, "policy": {0: "batch"}, "value": {0: "batch"}},
            opset_version=OPSET, dynamo=False,
        )
    proto = onnx.load_from_string(buf.getvalue())
    entry = proto.metadata_props.add()
    entry.key = METADATA_KEY
    entry.value = json.dumps(onnx_header(model, meta))
    proto.producer_name = "dlzero"
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def export_onnx(model: PolicyValueNet, path: str | Path, meta: ModelMetadata) -> Path:
    """Write `model` as ONNX to `path`, atomically (temp file + rename)."""
    atomic_write_bytes(path, onnx_bytes(model, meta))
    return Path(path)
