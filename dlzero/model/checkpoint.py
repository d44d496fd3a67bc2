"""Model files: a checkpoint carries its config and metadata, so `load` needs nothing else.

Layout of a `.pt` file (a dict saved with `torch.save`, loadable with `weights_only=True`):
`format` ("dlzero-model"), `format_version`, `encoder_version`, `model_config` (dict),
`metadata` (generation, parent, created, games, positions, name), `state_dict`.

Loading checks each of these and turns torch's low-level failures (a truncated zip, a state dict
of another shape) into one `ModelFileError` that names the file and the problem.
"""

from __future__ import annotations

import datetime as _dt
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dlzero.config import ConfigError, ModelConfig, config_to_dict, model_config_from_dict
from dlzero.data.atomic import atomic_write_bytes
from dlzero.data.regular import open_regular, special_kind
from dlzero.encoding import ENCODER_VERSION
from dlzero.errors import ModelFileError
from dlzero.model.resnet import PolicyValueNet

FORMAT = "dlzero-model"
FORMAT_VERSION = 1


@dataclass
class ModelMetadata:
    """Where a model came from; travels with the weights into checkpoints and ONNX files."""

    generation: int = 0
    parent: str | None = None
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    games: int = 0
    positions: int = 0
    name: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelMetadata:
        known = {k: data[k] for k in ("generation", "parent", "created", "games", "positions", "name") if k in data}
        return cls(**known)


def model_name(cfg: ModelConfig) -> str:
    """KataGo-style architecture name, e.g. `b5c64`."""
    return f"b{cfg.blocks}c{cfg.channels}"


def new_model(cfg: ModelConfig, seed: int | None = None) -> PolicyValueNet:
    """A freshly initialised network (deterministic when `seed` is given)."""
    if seed is not None:
        torch.manual_seed(seed)
    return PolicyValueNet(cfg)


def checkpoint_payload(model: PolicyValueNet, meta: ModelMetadata) -> dict[str, Any]:
    """The dict stored in a `.pt` model file."""
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "encoder_version": ENCODER_VERSION,
        "model_config": config_to_dict(model.cfg),
        "metadata": vars(meta).copy(),
        "state_dict": state,
    }


def save_model(model: PolicyValueNet, path: str | Path, meta: ModelMetadata | None = None) -> Path:
    """Write a model file atomically (temp file + rename): a crash never leaves half a file."""
    meta = meta or ModelMetadata(name=model_name(model.cfg))
    if not meta.name:
        meta.name = model_name(model.cfg)
    buf = io.BytesIO()
    torch.save(checkpoint_payload(model, meta), buf)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def check_header(payload: Any, path: str | Path) -> tuple[ModelConfig, ModelMetadata]:
    """Validate the non-weight fields of a model payload; return its config and metadata."""
    check_format(payload, path, FORMAT, FORMAT_VERSION, "dlzero model file")
    if payload.get("encoder_version") != ENCODER_VERSION:
        raise ModelFileError(
            f"{path}: model was trained on input encoding v{payload.get('encoder_version')}, "
            f"this dlzero encodes v{ENCODER_VERSION}")
    try:
        cfg = model_config_from_dict(payload.get("model_config") or {})
    except ConfigError as exc:
        raise ModelFileError(f"{path}: bad model config inside the file: {exc}") from None
    return cfg, ModelMetadata.from_dict(payload.get("metadata") or {})


def check_format(payload: Any, path: str | Path, fmt: str, version: int, what: str) -> None:
    """ModelFileError naming `path` unless `payload` is a `fmt` file (`what`, in the message) whose format
    version this dlzero reads (at most `version`): the one header check of every file `read_payload` reads,
    model files and the trainer's resume file alike."""
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        raise ModelFileError(f"{path}: not a {what}")
    found = payload.get("format_version")
    if not isinstance(found, int) or found > version:
        raise ModelFileError(f"{path}: {what} format version {found} is newer than this dlzero understands "
                             f"({version}); upgrade dlzero")


def read_payload(path: str | Path) -> dict[str, Any]:
    """torch.load a model or training file safely, with errors that say what is wrong."""
    p = Path(path)
    kind = special_kind(p)
    if kind is not None:  # a FIFO blocked torch.load for ever
        raise ModelFileError(f"{p}: {kind}, not a regular file")
    if not p.is_file():
        raise ModelFileError(f"model file '{p}' does not exist")
    if p.stat().st_size == 0:
        raise ModelFileError(f"{p}: the file is empty")
    try:
        with open_regular(p) as fh:
            return torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, EOFError, UnpicklingError... for bad files
        raise ModelFileError(
            f"{p}: cannot be read as a checkpoint (truncated or corrupt?): {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    """torch.load's failure as one short line.

    Its weights-only errors run over many lines and advise `weights_only=False`, which would run
    whatever code the file holds; keep only what was found.
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    found = re.search(r"WeightsUnpickler error:\s*(.*?)(?:\. |\n\n|$)", text, re.S)
    if found:
        text = f"content other than tensors and plain data ({found.group(1)})"
    text = " ".join(text.split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def load_model_file(path: str | Path) -> tuple[PolicyValueNet, ModelMetadata]:
    """Rebuild the network stored in a `.pt` model file, in eval mode on the CPU."""
    payload = read_payload(path)
    cfg, meta = check_header(payload, path)
    model = PolicyValueNet(cfg)
    load_state(model, payload.get("state_dict"), path)
    model.eval()
    return model, meta


def load_state(model: torch.nn.Module, state: Any, path: str | Path) -> None:
    """Load weights, reporting missing, unexpected or mis-shaped tensors by name."""
    if not isinstance(state, dict):
        raise ModelFileError(f"{path}: has no weights (state_dict)")
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    shapes = [f"{k} {tuple(state[k].shape)} != {tuple(v.shape)}" for k, v in own.items()
              if k in state and tuple(state[k].shape) != tuple(v.shape)]
    if missing or extra or shapes:
        parts = []
        if missing:
            parts.append(f"missing {missing[:3]}{'...' if len(missing) > 3 else ''}")
        if extra:
            parts.append(f"unexpected {extra[:3]}{'...' if len(extra) > 3 else ''}")
        if shapes:
            parts.append(f"shape mismatch {shapes[:3]}")
        raise ModelFileError(f"{path}: weights do not fit the architecture in the file ({'; '.join(parts)})")
    model.load_state_dict(state)
