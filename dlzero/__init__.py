"""dlzero: an AlphaZero / dlshogi-style shogi engine.

Public names other tools rely on:
- `encode_position(board) -> np.ndarray` (100, 9, 9) float32 planes, side to move's view
- `move_to_label(board, move) -> int` policy index in 0..2186 (dlshogi's labelling)
- `load_model(path, cfg=None) -> Evaluator` for `.pt` and `.onnx` files alike
- `Engine` the search-backed player: `Engine.load(name).best_move(sfen, playouts=800)`, `name` a `.pt`/`.onnx`
  file, a run directory, `default` or a shipped network (`dlzero.player_names`)

Torch and onnxruntime are imported only when a model is loaded, so encoding-only users start fast.
"""

from __future__ import annotations

from typing import Any

from dlzero.encoding import encode_position, move_to_label
from dlzero.version import __version__

__all__ = ["Engine", "__version__", "encode_position", "load_model", "move_to_label"]


def __getattr__(name: str) -> Any:
    if name == "load_model":
        from dlzero.inference import load_model

        return load_model
    if name == "Engine":
        from dlzero.engine import Engine

        return Engine
    raise AttributeError(f"module 'dlzero' has no attribute {name!r}")
