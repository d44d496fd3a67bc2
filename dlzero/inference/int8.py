"""`inference.precision: int8`: the quantized model file beside a model, made on demand, and loaded.

`prepare_int8` is where that setting becomes a file: the loop calls it after training, self-play
before its workers start, and the loader whenever it loads a model, so a model is quantized once
and every later load finds the file ready. The loop and self-play pass the search gate's `Judge`
(`dlzero.engine.int8_gate`, which lives above this layer), so the networks they play with are judged
by what their search plays, as `dlzero export --int8` judges them; the loader, given none, judges by
the raw figures, and a file the raw gate made is made again the next time a judge is given.
(The benchmark's int8 rows measure speed, so `ungated_int8` quantizes with the gate's first recipe
whatever its accuracy, in memory.)

`X.pt` or `X.onnx` has its int8 model at `X.int8.onnx` in the same folder. The file always runs:
it holds the quantized graph when the accuracy gate accepted it, else the fp32 graph, and its
`dlzero_quant` metadata says which and why (`dlzero.model.quantize`). It is (re)made when it is
missing, older than its model, or made with other `inference.quantize` settings.

Calibration positions, in order of preference: `inference.quantize.data` when set; the run's own
newest self-play shards when the model lies in a run's `models/` folder; positions from random
games (a fallback that makes int8 available anywhere, e.g. for a bare model file).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from pathlib import Path

import onnx

from dlzero.config import InferenceConfig, QuantizeConfig
from dlzero.data.atomic import atomic_write_bytes
from dlzero.errors import BackendError, DataError, ModelFileError
from dlzero.model.calibration import CalibrationSet, from_path, from_random_games, from_shards
from dlzero.model.checkpoint import load_model_file
from dlzero.model.export import onnx_bytes
from dlzero.model.quantize import (
    QUANT_KEY,
    Accuracy,
    Judge,
    QuantReport,
    measure,
    outputs,
    prepare,
    quantize,
    quantize_with_gate,
    read_report,
    recipes,
    session,
)
from dlzero.rundir import RunDir
from dlzero.runfiles import MODELS_DIR

INT8_SUFFIX = ".int8.onnx"

log = logging.getLogger("dlzero.int8")


def int8_path(model: str | Path) -> Path:
    """Where the int8 model of `model` lives (an int8 file is its own int8 model)."""
    p = Path(model)
    if p.name.endswith(INT8_SUFFIX):
        return p
    return p.with_name(p.stem + INT8_SUFFIX)


def fp32_bytes(model: str | Path) -> bytes:
    """The fp32 ONNX model of a `.pt` or `.onnx` file."""
    p = Path(model)
    if p.suffix.lower() == ".onnx":
        return p.read_bytes()
    net, meta = load_model_file(p)
    return onnx_bytes(net, meta)


def _run_shards(model: Path, limit: int) -> list[Path]:
    """The newest self-play shards of the run `model` belongs to (runs/NAME/models/gen-XXXX.pt)."""
    rd = RunDir(model.resolve().parent.parent)
    if model.resolve().parent.name != MODELS_DIR or not rd.info_path.is_file():
        return []
    return rd.shards()[:limit]


def calibration_for(model: str | Path, cfg: QuantizeConfig) -> CalibrationSet:
    """Positions to calibrate and check `model`'s int8 version on (see the module docstring)."""
    n_cal, n_hold = cfg.calibration_positions, cfg.holdout_positions
    if cfg.data:
        return from_path(cfg.data, n_cal, n_hold)
    shards = _run_shards(Path(model), cfg.shards)
    if shards:
        try:
            return from_shards(shards, n_cal, n_hold)
        except DataError as exc:  # e.g. one game so far: not enough to split; say so and carry on
            log.warning("int8 calibration: cannot use the run's self-play (%s); using random games", exc)
    return from_random_games(n_cal, n_hold)


def make_int8(model: str | Path, cfg: QuantizeConfig, out: str | Path | None = None,
              data: CalibrationSet | None = None, judge: Judge | None = None) -> tuple[Path, QuantReport]:
    """Quantize `model`, gate it (by the search with `judge`, else by the raw figures), write the result
    (atomically) to `out` or beside `model`, log the verdict."""
    target = Path(out) if out else int8_path(model)
    data = data or calibration_for(model, cfg)
    log.info("int8: quantizing %s on %d positions (%s), checking on %d others", model, len(data.calibration),
             data.source, len(data.holdout))
    payload, report = quantize_with_gate(fp32_bytes(model), data, cfg, progress=True, judge=judge)
    atomic_write_bytes(target, payload)
    (log.info if report.accepted else log.warning)("%s: %s", target, report.summary())
    return target, report


def stored_report(path: str | Path) -> QuantReport | None:
    """The quantization report stored in an ONNX file, or None when it has none."""
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and friends on a damaged file
        raise ModelFileError(f"{path}: not a readable ONNX model ({exc})") from None
    return read_report({p.key: p.value for p in proto.metadata_props})


def _is_fresh(model: Path, target: Path, cfg: QuantizeConfig, searched: bool) -> bool:
    """Whether `target` is `model`'s int8 file as these settings make it; with `searched`, only a file the
    search gate decided counts (a raw-gate file may have fallen back to fp32 where the search gate passes)."""
    if not target.is_file() or target.stat().st_mtime < model.stat().st_mtime:
        return False
    report = stored_report(target)
    return report is not None and report.settings == asdict(cfg) and (not searched or report.gate == "search")


def ensure_int8(model: str | Path, cfg: QuantizeConfig, judge: Judge | None = None) -> Path:
    """The int8 model of `model`, made now (gated by `judge`, else by the raw figures) if it is missing or
    stale."""
    p = Path(model)
    target = int8_path(p)
    if target == p:  # an int8 file given directly: use it as it is
        if stored_report(p) is None:
            raise ModelFileError(f"{p}: named like an int8 model but has no '{QUANT_KEY}' metadata; "
                                 "make it with `dlzero export --int8`")
        return p
    if not _is_fresh(p, target, cfg, searched=judge is not None):
        make_int8(p, cfg, judge=judge)
    return target


def prepare_int8(model: str | Path, cfg: InferenceConfig, judge: Judge | None = None) -> Path | None:
    """With `inference.precision: int8`, the int8 file that runs for `model`, made now when it is missing or
    stale (gated by `judge` when given); None at any other precision. The one place that turns the setting
    into a file (module docstring)."""
    if cfg.precision != "int8":
        return None
    if cfg.backend == "torch":
        raise BackendError("precision int8 runs on onnxruntime: use backend onnx (or auto), not torch")
    return ensure_int8(model, cfg.quantize, judge)


def load_int8(path: Path, cfg: InferenceConfig):
    """An OnnxEvaluator on an int8 file from `prepare_int8` (running fp32, with a warning, when the gate
    rejected int8)."""
    from dlzero.inference.onnx_backend import OnnxEvaluator

    evaluator = OnnxEvaluator(path, replace(cfg, backend="onnx"))
    report = evaluator.quant_report
    if report is not None and not report.accepted:
        log.warning("%s: %s", path, report.summary())
    return evaluator


def ungated_int8(fp32: bytes, data: CalibrationSet, cfg: QuantizeConfig) -> tuple[bytes, str, Accuracy]:
    """`fp32` quantized by the first recipe the gate would try, kept whatever its accuracy: (model, the
    recipe in words, its accuracy against fp32 on `data.holdout`). For a speed benchmark, which must
    run int8 even where the gate would fall back to fp32 (a random network, say)."""
    method, keep = recipes(cfg)[0][0]
    model = quantize(prepare(fp32), data.calibration, method, keep, cfg.activations)
    accuracy = measure(outputs(session(fp32), data.holdout), model, data.holdout, data.holdout_legal)
    return model, f"{method}, fp32 kept: {keep}", accuracy
