"""Engine layer: Player (search + time management) and the Python API."""

from dlzero.engine.engine import Engine
from dlzero.engine.player import Analysis, Player
from dlzero.engine.timeman import Limits, TimeBudget, allocate

__all__ = ["Analysis", "Engine", "Limits", "Player", "TimeBudget", "allocate"]
