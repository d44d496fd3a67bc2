"""Self-play: G games in lockstep per process (`games`), worker processes writing hcpe3 shards (`worker`).

Only the CLI layer (`dlzero.commands`, the loop orchestrator) imports this package.
"""

from selfplay.games import FinishedGame, PlayStats, ResignController, SelfPlayGame, play_games
from selfplay.worker import SelfplaySummary, run_selfplay

__all__ = [
    "FinishedGame",
    "PlayStats",
    "ResignController",
    "SelfPlayGame",
    "SelfplaySummary",
    "play_games",
    "run_selfplay",
]
