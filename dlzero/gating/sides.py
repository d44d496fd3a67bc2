"""What a side of a match can be besides a searched network: anything that picks moves for boards.

Anchors (the random mover, the classical alpha-beta reference, outside USI engines) implement
`MoveChooser`; the arena asks a chooser for the moves of all games where it is to move at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import cshogi


@runtime_checkable
class MoveChooser(Protocol):
    """A player that needs no tree: given boards (full game history, side to move = this player),
    return one move per board, or None to resign. It must leave the boards as it found them."""

    name: str

    def choose(self, boards: Sequence[cshogi.Board]) -> list[int | None]: ...
