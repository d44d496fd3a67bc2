"""ONNX export with a dynamic batch axis and the checkpoint's metadata.

Input `planes` (batch, 100, 9, 9) float32; outputs `policy` (batch, 2187) logits and `value`
(batch,) in [-1, 1]. The metadata prop `dlzero` holds the same JSON header a `.pt` file has, so an
ONNX file alone is a complete model.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

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


def fp16_onnx(model: bytes) -> bytes:
    """The same network computing in float16, for onnxruntime's CUDA provider (which runs each node in
    the precision of its tensors). Inputs and outputs stay float32 (a Cast at each end), so callers and
    `Evaluator` do not change. Batch-norm is already folded into the convolutions by the export."""
    proto = onnx.load_from_string(model)
    graph = proto.graph
    for init in graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == onnx.TensorProto.FLOAT:
                attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float16)))
            elif node.op_type == "Cast" and attr.name == "to" and attr.i == onnx.TensorProto.FLOAT:
                attr.i = onnx.TensorProto.FLOAT16  # e.g. the value head's cast to float32 (kept for AMP)
    renamed = {graph.input[0].name: graph.input[0].name + "_fp16"}
    renamed.update({out.name: out.name + "_fp16" for out in graph.output})
    for node in graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        node.output[:] = [renamed.get(name, name) for name in node.output]
    cast_in = helper.make_node("Cast", [graph.input[0].name], [renamed[graph.input[0].name]],
                               to=onnx.TensorProto.FLOAT16, name="input_to_fp16")
    casts_out = [helper.make_node("Cast", [renamed[out.name]], [out.name], to=onnx.TensorProto.FLOAT,
                                  name=f"{out.name}_to_fp32") for out in graph.output]
    nodes = [cast_in, *graph.node, *casts_out]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    onnx.checker.check_model(proto)
    return proto.SerializeToString()
