"""The trainer's resume file (`train/checkpoint.pt` in a run): everything needed to continue exactly.

Contents (a dict saved with `torch.save`, loaded with `weights_only=True`): `format`
("dlzero-train"), `format_version`, `model_config`, `trainer` (model, optimizer, AMP scaler, EMA,
global step), `segment` (generation, step, planned steps, sampler seed and cursor, the replay-window
plan, done), `meter` (metric sums since the last row) and `rng` (torch CPU/CUDA generator states).
The sampler needs no RNG state: its batches are a function of (seed, cursor).

Writes are atomic (temp file + rename), so a kill leaves the previous checkpoint. Reading checks the
file before anything is written: a corrupt file or one for another network architecture is a
`ModelFileError` naming it, and the caller stops with the file untouched.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import torch

from dlzero.config import ConfigError, ModelConfig, config_to_dict, model_config_from_dict
from dlzero.data.atomic import atomic_write_bytes
from dlzero.errors import ModelFileError
from dlzero.model.checkpoint import check_format, model_name, read_payload

FORMAT = "dlzero-train"
FORMAT_VERSION = 1


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, model_cfg: ModelConfig, parts: dict[str, Any]) -> None:
    """Write the checkpoint atomically; `parts` holds trainer, segment, meter (rng is added here)."""
    payload = {"format": FORMAT, "format_version": FORMAT_VERSION, "model_config": config_to_dict(model_cfg),
               "rng": rng_state(), **parts}
    buf = io.BytesIO()
    torch.save(payload, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path: Path, model_cfg: ModelConfig) -> dict[str, Any]:
    """Read and check a checkpoint for a network of `model_cfg`; ModelFileError names what is wrong."""
    payload = read_payload(path)
    check_format(payload, path, FORMAT, FORMAT_VERSION, "dlzero training checkpoint")
    theirs, ours = payload.get("model_config"), config_to_dict(model_cfg)
    with contextlib.suppress(ConfigError):  # fill in keys added since it was written; unreadable: a mismatch
        theirs = config_to_dict(model_config_from_dict(theirs))
    if theirs != ours:
        raise ModelFileError(
            f"{path}: checkpoint is for another network ({theirs}) but the config asks for "
            f"{model_name(model_cfg)} ({ours}); move the checkpoint away to start fresh, or train with "
            "the config it was made with")
    for key in ("trainer", "segment", "meter", "rng"):
        if key not in payload:
            raise ModelFileError(f"{path}: checkpoint is missing '{key}' (truncated or from another tool)")
    return payload
