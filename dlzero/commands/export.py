"""`dlzero export`: a `.pt` model file to ONNX (dynamic batch, same metadata), checked against torch.

With `--int8` it also writes the calibrated int8 model beside it (`X.int8.onnx`, see
`dlzero.inference.int8`): positions from `--calibration` (or `inference.quantize.data`), else the
run the model lies in, else random games. The search gate decides (`dlzero.engine.int8_gate`:
does a search with int8 play what fp32's plays?); its figures and the raw ones (policy top-1,
|value difference|) are printed and stored in the file.
"""

from __future__ import annotations

import argparse
import sys

from dlzero.commands.common import add_config_args, config_from_args


def register(sub) -> None:
    p = sub.add_parser("export", help="export a .pt model to ONNX (and --int8: a calibrated int8 model beside it)")
    add_config_args(p)
    p.add_argument("model", help="input .pt model file")
    p.add_argument("--out", required=True, help="output .onnx file")
    p.add_argument("--no-check", action="store_true", help="skip the torch vs onnxruntime comparison")
    p.add_argument("--int8", action="store_true",
                   help="also write OUT's int8 model (OUT with .int8.onnx), accepted only if its search plays "
                        "like fp32's (the search gate, inference.quantize.gate_* and min_play_agreement, "
                        "max_winrate_error)")
    p.add_argument("--calibration", dest="quantize_data", metavar="PATH",
                   help="positions for --int8: hcpe3 shard(s), hcpe file, or a folder of shards or CSA/KIF "
                        "records (inference.quantize.data)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from dlzero.config import InferenceConfig
    from dlzero.engine.int8_gate import SearchJudge
    from dlzero.errors import ModelFileError
    from dlzero.inference import OnnxEvaluator, TorchEvaluator
    from dlzero.inference.int8 import calibration_for, make_int8
    from dlzero.model import load_model_file
    from dlzero.model.export import export_onnx

    cfg = config_from_args(args, {"quantize_data": "inference.quantize.data"})
    model, meta = load_model_file(args.model)
    path = export_onnx(model, args.out, meta)
    if args.no_check:
        print(f"wrote {path}", file=sys.stderr)
    else:
        cpu = InferenceConfig(device="cpu", optimize="none")
        x = np.random.default_rng(0).random((16, 100, 9, 9), dtype=np.float32)
        p1, v1 = TorchEvaluator(model, cpu, meta).evaluate(x)
        p2, v2 = OnnxEvaluator(path, cpu).evaluate(x)
        diff = max(float(np.abs(p1 - p2).max()), float(np.abs(v1 - v2).max()))
        if diff > 1e-4:
            raise ModelFileError(f"{path}: ONNX output differs from torch by {diff:.2e} (> 1e-4)")
        print(f"wrote {path} (max |torch - onnx| = {diff:.1e})", file=sys.stderr)
    if args.int8:
        # positions are looked up from the .pt file: it is the one that lies in a run's models/ folder
        data = calibration_for(args.model, cfg.inference.quantize)
        judge = SearchJudge(cfg.search, cfg.inference.quantize)
        target, report = make_int8(path, cfg.inference.quantize, data=data, judge=judge)
        print(f"wrote {target}: {report.summary()}", file=sys.stderr)
    return 0
