"""`dlzero export`: a `.pt` model file to ONNX (dynamic batch, same metadata), checked against torch."""

from __future__ import annotations

import argparse
import sys


def register(sub) -> None:
    p = sub.add_parser("export", help="export a .pt model to ONNX")
    p.add_argument("model", help="input .pt model file")
    p.add_argument("--out", required=True, help="output .onnx file")
    p.add_argument("--no-check", action="store_true", help="skip the torch vs onnxruntime comparison")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from dlzero.config import InferenceConfig
    from dlzero.errors import ModelFileError
    from dlzero.inference import OnnxEvaluator, TorchEvaluator
    from dlzero.model import load_model_file
    from dlzero.model.export import export_onnx

    model, meta = load_model_file(args.model)
    path = export_onnx(model, args.out, meta)
    if args.no_check:
        print(f"wrote {path}", file=sys.stderr)
        return 0
    cpu = InferenceConfig(device="cpu", optimize="none")
    x = np.random.default_rng(0).random((16, 100, 9, 9), dtype=np.float32)
    p1, v1 = TorchEvaluator(model, cpu, meta).evaluate(x)
    p2, v2 = OnnxEvaluator(path, cpu).evaluate(x)
    diff = max(float(np.abs(p1 - p2).max()), float(np.abs(v1 - v2).max()))
    if diff > 1e-4:
        raise ModelFileError(f"{path}: ONNX output differs from torch by {diff:.2e} (> 1e-4)")
    print(f"wrote {path} (max |torch - onnx| = {diff:.1e})", file=sys.stderr)
    return 0
