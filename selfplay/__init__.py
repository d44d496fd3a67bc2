"""Self-play, one module per process role: G games in lockstep (`games`), what runs inside a worker
process (`worker`), what its parent runs to start, collect and restart workers (`parent`; Ray
tasks: `cluster`), a session choosing between the two (`session`), and the first model (`bootstrap`).

Only the wiring layer (`dlzero.commands`, `dlzero.loop`, `dlzero.bench`) imports this package;
`tests/test_layers.py` checks it.
"""

from dlzero.selfplay.games import FinishedRecord, PlayStats, ResignController, SelfPlayGame, play_selfplay_games
from dlzero.selfplay.parent import SelfplaySummary
from dlzero.selfplay.session import run_selfplay

__all__ = [
    "FinishedRecord",
    "PlayStats",
    "ResignController",
    "SelfPlayGame",
    "SelfplaySummary",
    "play_selfplay_games",
    "run_selfplay",
]
