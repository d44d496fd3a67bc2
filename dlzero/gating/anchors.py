"""The fixed opponents of the rating scale, by name.

- `random`: a uniformly random legal move (seeded). Pinned at Elo 0: the floor any learning must beat.
- `alphabeta:N`: the built-in classical reference at a budget of N positions per move
  (`dlzero.gating.alphabeta`; deterministic and frozen, so `alphabeta:1000` means the same in every run).
- `gen-NNNN`: a model of the run itself (usually `gen-0000`, the untrained start).
- outside USI engines, named by the user: `NAME=COMMAND` (`dlzero.gating.usi_opponent`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import cshogi
import numpy as np

from dlzero.errors import ConfigError
from dlzero.gating.alphabeta import AlphaBeta
from dlzero.gating.sides import MoveChooser

RANDOM = "random"
_ALPHABETA = re.compile(r"alphabeta:([1-9]\d*)$")
_MODEL = re.compile(r"gen-(\d{4,})$")
_ENGINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*$")


class RandomMover:
    """A `MoveChooser` playing a uniformly random legal move; reproducible from its seed."""

    name = RANDOM

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def choose(self, boards: Sequence[cshogi.Board]) -> list[int | None]:
        out: list[int | None] = []
        for board in boards:
            moves = list(board.legal_moves)
            out.append(int(moves[self._rng.integers(len(moves))]) if moves else None)
        return out


def model_generation(name: str) -> int | None:
    """The generation of a model player name (`gen-0003` -> 3), or None for other players."""
    m = _MODEL.match(name)
    return int(m.group(1)) if m else None


def check_anchor(name: str) -> str | None:
    """Why `name` is not a built-in anchor name (random, alphabeta:N, gen-NNNN), or None if it is one."""
    if name == RANDOM or _ALPHABETA.match(name) or _MODEL.match(name):
        return None
    return f"'{name}' is not an anchor (random, alphabeta:N with N >= 1, gen-NNNN; engines go in rate.engines)"


def builtin_chooser(name: str, seed: int = 0) -> MoveChooser:
    """The chooser of a tree-less built-in anchor (`random`, `alphabeta:N`)."""
    if name == RANDOM:
        return RandomMover(seed)
    m = _ALPHABETA.match(name)
    if m:
        return AlphaBeta(int(m.group(1)))
    raise ValueError(f"'{name}' is not a built-in anchor")


def parse_engine(spec: str) -> tuple[str, str]:
    """`NAME=COMMAND` -> (NAME, COMMAND); the name must not look like a built-in player."""
    name, sep, command = spec.partition("=")
    name, command = name.strip(), command.strip()
    if not sep or not name or not command:
        raise ConfigError(f"engine '{spec}' must look like NAME=COMMAND (e.g. yane=/opt/yaneuraou/run)")
    if not _ENGINE_NAME.match(name) or check_anchor(name) is None:
        raise ConfigError(f"engine name '{name}' must be letters, digits, _ . + - and not a built-in player "
                          "name (random, alphabeta:N, gen-NNNN)")
    return name, command
