"""int8 models: onnxruntime static quantization (QDQ), accepted only when it plays like fp32.

On a CPU the network call is the cost of self-play, and onnxruntime's int8 kernels (VNNI) run
the small nets about three times faster than fp32. Quantization is worth it only if the engine
still plays the same moves, so every attempt is measured on held-out positions against the fp32
model. Two gates, one of which decides:

- the search gate, when a `Judge` is given (`dlzero export --int8`, the loop and `dlzero selfplay` give
  `dlzero.engine.int8_gate.SearchJudge`; the search lives above this layer): the positions are
  searched with fp32 and with the candidate, and the candidate passes when the move its search
  plays is one fp32's search would also play (`min_play_agreement`) and its root win rate is
  close (`max_winrate_error`). This is what matters: a trained network's raw policy has near-ties
  (two moves a search weighs alike) whose argmax any rounding flips, yet the search plays the
  same move or one fp32's search rated as high;
- the raw gate otherwise (the int8 files the loader makes on its own): policy
  top-1 agreement over the legal moves (`min_top1`) and mean |value difference|
  (`max_value_error`). Its figures are measured and stored in both cases.

`quantize_with_gate` tries recipes (calibration method x layers kept in fp32) from the cheapest
graph up and returns the first level's most accurate recipe that passes; when none passes it
returns the fp32 graph instead, so the file written always runs and its metadata (key
`dlzero_quant`, beside the usual `dlzero` header) says what was tried, the figures, and why.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import onnx
import onnxruntime as ort

from dlzero.config import QuantizeConfig
from dlzero.model.calibration import CalibrationSet
from dlzero.model.export import INPUT_NAME, OUTPUT_NAMES

QUANT_KEY = "dlzero_quant"
METHODS = ("percentile", "entropy", "minmax")
KEEP_LEVELS = ("none", "heads", "stem", "stem+heads")
_CALIB_BATCH = 32

log = logging.getLogger("dlzero.int8")


@dataclass
class Accuracy:
    """How closely a quantized model follows fp32 on the held-out positions."""

    top1: float  # share of positions whose best legal move is the same
    value_mae: float  # mean |value int8 - value fp32|
    value_max: float  # largest |value int8 - value fp32|
    positions: int


@dataclass
class PlayFigures:
    """How a search with the quantized model plays against one with fp32, on the same held-out positions."""

    agreement: float  # share of positions where int8's move is one fp32's search would play (`Judge`)
    same_move: float  # share of positions where it is fp32's very move
    winrate_mae: float  # mean |root win rate int8 - fp32| (win rate: (v + 1) / 2, for the side to move)
    winrate_max: float
    positions: int
    playouts: int  # of each search


class Judge(Protocol):
    """The search gate's measure (`dlzero.engine.int8_gate.SearchJudge`): `start` searches the held-out
    positions with fp32 once, `judge` searches them with a candidate and compares."""

    def start(self, fp32: bytes, data: CalibrationSet) -> None: ...

    def judge(self, candidate: bytes) -> PlayFigures: ...


@dataclass
class Attempt:
    """One recipe tried, with its figures."""

    method: str
    keep_fp32: str
    accuracy: Accuracy
    passed: bool
    play: PlayFigures | None = None  # the search gate's figures (None: the raw gate decided)


@dataclass
class QuantReport:
    """What `quantize_with_gate` did; stored as JSON in the output model's metadata."""

    accepted: bool
    reason: str
    method: str = ""  # the accepted recipe (empty when rejected)
    keep_fp32: str = ""
    accuracy: Accuracy | None = None  # of the accepted recipe, or of the best rejected one
    play: PlayFigures | None = None  # the same recipe's search gate figures (None: the raw gate decided)
    gate: str = "raw"  # which gate decided: "search" (`Judge`) or "raw" (top-1 and |dv|)
    attempts: list[Attempt] = field(default_factory=list)
    calibration: str = ""  # where the positions came from
    calibration_positions: int = 0
    holdout_positions: int = 0
    settings: dict = field(default_factory=dict)  # the QuantizeConfig it was made with

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> QuantReport:
        data = json.loads(text)  # reports written before the search gate have no "play" and no "gate"
        acc, play = data.pop("accuracy", None), data.pop("play", None)
        attempts = [Attempt(**{**a, "accuracy": Accuracy(**a["accuracy"]),
                               "play": PlayFigures(**a["play"]) if a.get("play") else None})
                    for a in data.pop("attempts", [])]
        return cls(**data, accuracy=Accuracy(**acc) if acc else None, play=PlayFigures(**play) if play else None,
                   attempts=attempts)

    def summary(self) -> str:
        """One line for logs."""
        acc = self.accuracy
        figures = (f"top-1 {acc.top1:.2%}, mean |dv| {acc.value_mae:.4f} (max {acc.value_max:.4f}) "
                   f"on {acc.positions} held-out positions" if acc else "no figures")
        if self.accepted:
            if self.play is not None:
                figures = f"{play_line(self.play)}; raw {figures}"
            return f"int8 accepted: {self.method} calibration, fp32 kept: {self.keep_fp32}; {figures}"
        if self.play is not None:  # the reason names the search's figures; the raw ones are still printed
            return f"int8 rejected, running fp32: {self.reason} (its raw {figures})"
        return f"int8 rejected, running fp32: {self.reason}"


def play_line(play: PlayFigures) -> str:
    """The search gate's figures in words."""
    return (f"plays like fp32 on {play.agreement:.2%} (same move {play.same_move:.2%}), mean |win rate "
            f"difference| {play.winrate_mae:.4f} (max {play.winrate_max:.4f}) on {play.positions} positions "
            f"at {play.playouts} playouts")


def session(model: bytes | str) -> ort.InferenceSession:
    """A one-thread CPU session (calibration and the gate's comparison run here, whatever runs later)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])


def outputs(sess: ort.InferenceSession, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Policy logits and values of all `planes`, in chunks."""
    policies, values = [], []
    for start in range(0, len(planes), 256):
        p, v = sess.run(list(OUTPUT_NAMES), {INPUT_NAME: planes[start:start + 256]})
        policies.append(p)
        values.append(v)
    return np.concatenate(policies), np.concatenate(values)


def measure(reference: tuple[np.ndarray, np.ndarray], model: bytes | str, holdout: np.ndarray,
            legal: np.ndarray) -> Accuracy:
    """Top-1 agreement over legal moves and value error of `model` against fp32 outputs `reference`."""
    ref_p, ref_v = reference
    p, v = outputs(session(model), holdout)
    masked_ref = np.where(legal, ref_p, -np.inf).argmax(1)
    masked = np.where(legal, p, -np.inf).argmax(1)
    dv = np.abs(v - ref_v)
    return Accuracy(top1=float((masked == masked_ref).mean()), value_mae=float(dv.mean()),
                    value_max=float(dv.max()), positions=len(holdout))


class _Reader:
    """onnxruntime's CalibrationDataReader protocol over an array of planes, in batches of one size.

    onnxruntime's percentile and entropy collectors stack every batch's outputs into one array, so a short last
    batch (a young run with fewer positions than asked for: 70 positions are 32 + 32 + 6) made it fail
    with "inhomogeneous shape". The positions are split into as few equal batches of at most
    `_CALIB_BATCH` as fit; the few left over (fewer than the number of batches) are not used.
    """

    def __init__(self, planes: np.ndarray) -> None:
        count = -(-len(planes) // _CALIB_BATCH)  # ceil
        size = len(planes) // count if count else 0
        self._batches = iter([{INPUT_NAME: planes[i * size:(i + 1) * size]} for i in range(count)])

    def get_next(self) -> dict | None:
        return next(self._batches, None)

    def __iter__(self) -> Iterator[dict]:  # some onnxruntime versions iterate the reader
        return iter(self.get_next, None)


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """onnxruntime's quantizer logs advice on the root logger and prints histogram progress to stdout
    (which would corrupt a USI engine's output); keep both quiet."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sys.stderr if log.isEnabledFor(logging.DEBUG) else io.StringIO()):
            yield
    finally:
        root.setLevel(level)


def prepare(fp32: bytes) -> onnx.ModelProto:
    """The fp32 graph as the quantizer wants it: shape-inferred and optimised (Identity bias feeds folded,
    so every convolution's bias is an initializer and can be quantized with it)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory(prefix="dlzero-q-") as tmp, _quiet_quantizer():
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "prep.onnx"
        src.write_bytes(fp32)
        quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
        return onnx.load(str(dst))


def _ancestors(graph: onnx.GraphProto, tensor: str) -> set[str]:
    """Names of the nodes `tensor` depends on."""
    producer = {out: node for node in graph.node for out in node.output}
    seen: set[str] = set()
    todo = [tensor]
    while todo:
        node = producer.get(todo.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        todo.extend(node.input)
    return seen


def layer_nodes(graph: onnx.GraphProto) -> dict[str, set[str]]:
    """Node names of the stem (everything before the first residual block) and of the heads (everything
    after the last one), found from the graph's shape, so renamed modules do not silently break it."""
    tower = [n for n in graph.node if "/tower/" in n.name]
    if not tower:
        raise ValueError("cannot find the residual tower (nodes named /tower/...) in the ONNX graph")
    first_input = tower[0].input[0]
    trunk = _ancestors(graph, tower[-1].output[0])
    stem = _ancestors(graph, first_input)
    heads = {n.name for n in graph.node if n.name not in trunk}
    return {"none": set(), "stem": stem, "heads": heads, "stem+heads": stem | heads}


def quantize(prepared: onnx.ModelProto, calibration: np.ndarray, method: str, keep_fp32: str = "none",
             activations: str = "uint8") -> bytes:
    """One QDQ int8 model: weights int8 per output channel, activations `activations`, ranges from
    `calibration` by `method`, the `keep_fp32` layers left in fp32."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    calib = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
             "entropy": CalibrationMethod.Entropy}[method]
    act = {"uint8": QuantType.QUInt8, "int8": QuantType.QInt8}[activations]
    exclude = sorted(layer_nodes(prepared.graph)[keep_fp32])
    with tempfile.TemporaryDirectory(prefix="dlzero-q-") as tmp, _quiet_quantizer():
        src, dst = Path(tmp) / "prep.onnx", Path(tmp) / "int8.onnx"
        onnx.save(prepared, str(src))
        quantize_static(str(src), str(dst), _Reader(calibration), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=act, weight_type=QuantType.QInt8, calibrate_method=calib,
                        nodes_to_exclude=exclude, calibration_providers=["CPUExecutionProvider"])
        return dst.read_bytes()


def recipes(cfg: QuantizeConfig) -> list[list[tuple[str, str]]]:
    """Levels of (method, keep_fp32), cheapest graph first; within a level the most accurate wins."""
    methods = METHODS if cfg.calibration == "auto" else (cfg.calibration,)
    levels = KEEP_LEVELS if cfg.keep_fp32 == "auto" else (cfg.keep_fp32,)
    return [[(m, keep) for m in methods] for keep in levels]


def _passes(acc: Accuracy, play: PlayFigures | None, cfg: QuantizeConfig) -> bool:
    if play is not None:
        return play.agreement >= cfg.min_play_agreement and play.winrate_mae <= cfg.max_winrate_error
    return acc.top1 >= cfg.min_top1 and acc.value_mae <= cfg.max_value_error


def _why_not(acc: Accuracy, play: PlayFigures | None, cfg: QuantizeConfig) -> str:
    problems = []
    if play is not None:
        if play.agreement < cfg.min_play_agreement:
            problems.append(f"plays like fp32 on {play.agreement:.2%} < {cfg.min_play_agreement:.2%} of the positions")
        if play.winrate_mae > cfg.max_winrate_error:
            problems.append(f"mean |win rate difference| {play.winrate_mae:.4f} > {cfg.max_winrate_error}")
        return " and ".join(problems)
    if acc.top1 < cfg.min_top1:
        problems.append(f"top-1 agreement {acc.top1:.2%} < {cfg.min_top1:.2%}")
    if acc.value_mae > cfg.max_value_error:
        problems.append(f"mean |value difference| {acc.value_mae:.4f} > {cfg.max_value_error}")
    return " and ".join(problems)


def _rank(attempt: Attempt) -> tuple[float, ...]:
    """Higher is better: the search gate's figures when there are some, then the raw ones."""
    acc, play = attempt.accuracy, attempt.play
    searched = (play.agreement, play.same_move, -play.winrate_mae) if play is not None else ()
    return (*searched, acc.top1, -acc.value_mae)


def with_metadata(model: bytes | onnx.ModelProto, props: dict[str, str]) -> bytes:
    """`model` with metadata props set (replacing same-named ones)."""
    proto = onnx.load_from_string(model) if isinstance(model, bytes) else model
    kept = [(p.key, p.value) for p in proto.metadata_props if p.key not in props]
    del proto.metadata_props[:]
    for key, value in [*kept, *props.items()]:
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    return proto.SerializeToString()


def quantize_with_gate(fp32: bytes, data: CalibrationSet, cfg: QuantizeConfig, progress: bool = False,
                       judge: Judge | None = None) -> tuple[bytes, QuantReport]:
    """The model to run at precision int8 (quantized, or fp32 when no recipe passes the gate) and the report.

    With `judge` the search gate decides, else the raw gate (module docstring); the raw figures are
    measured either way. The returned bytes carry the fp32 model's metadata plus `dlzero_quant` (the
    report as JSON).
    """
    prepared = prepare(fp32)
    reference = outputs(session(fp32), data.holdout)
    header = {p.key: p.value for p in onnx.load_from_string(fp32).metadata_props}
    report = QuantReport(accepted=False, reason="", gate="raw" if judge is None else "search",
                         calibration=data.source, calibration_positions=len(data.calibration),
                         holdout_positions=len(data.holdout), settings=asdict(cfg))
    if judge is not None:
        judge.start(fp32, data)
    best: Attempt | None = None  # the most accurate attempt, for the rejection message
    for level in recipes(cfg):
        passing: list[tuple[Attempt, bytes]] = []
        for method, keep in level:
            model = quantize(prepared, data.calibration, method, keep, cfg.activations)
            acc = measure(reference, model, data.holdout, data.holdout_legal)
            play = judge.judge(model) if judge is not None else None
            attempt = Attempt(method, keep, acc, _passes(acc, play, cfg), play)
            report.attempts.append(attempt)
            if progress:
                log.info("int8 %s calibration, fp32 kept: %s: %sraw top-1 %.2f%%, mean |dv| %.4f%s", method, keep,
                         f"{play_line(play)}; " if play is not None else "", 100 * acc.top1, acc.value_mae,
                         "" if attempt.passed else f" (fails: {_why_not(acc, play, cfg)})")
            if attempt.passed:
                passing.append((attempt, model))
            if best is None or _rank(attempt) > _rank(best):
                best = attempt
        if passing:
            attempt, model = max(passing, key=lambda t: _rank(t[0]))
            report.accepted, report.method, report.keep_fp32 = True, attempt.method, attempt.keep_fp32
            report.accuracy, report.play = attempt.accuracy, attempt.play
            report.reason = ("passed the search gate (plays like fp32 >= "
                             f"{cfg.min_play_agreement:.2%}, mean |win rate difference| <= {cfg.max_winrate_error})"
                             if judge is not None else
                             f"passed the gate (top-1 >= {cfg.min_top1:.2%}, mean |dv| <= {cfg.max_value_error})")
            return with_metadata(model, {**header, QUANT_KEY: report.to_json()}), report
    assert best is not None
    report.accuracy, report.play = best.accuracy, best.play
    report.reason = (f"no recipe passed the {'search' if judge is not None else 'accuracy'} gate; the best of "
                     f"{len(report.attempts)} tried ({best.method} calibration, fp32 kept: {best.keep_fp32}) had "
                     f"{_why_not(best.accuracy, best.play, cfg)}")
    return with_metadata(fp32, {QUANT_KEY: report.to_json()}), report


def read_report(metadata: dict[str, str]) -> QuantReport | None:
    """The `dlzero_quant` report from an ONNX model's metadata map, or None when it was not made here."""
    raw = metadata.get(QUANT_KEY)
    return QuantReport.from_json(raw) if raw else None
