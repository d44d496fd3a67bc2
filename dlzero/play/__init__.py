"""Playing games: every game dlzero plays (self-play, the teacher's own games, the gate, ratings,
`dlzero match`) is played here.

- `game`: a game in progress, the `MoveChooser` protocol every player follows, the rules profile
  (`play_rules`) and the one way a move is played (`play_move`);
- `driver`: many games in lockstep (`play_lockstep`), each player moving in all its games at once, or
  on threads of their own for players that think one position at a time (`play_concurrently`);
- `players`: the search over a network (`SearchPlayer`), the random mover (`RandomMover`) and miniosl's
  network without search (`MinioslPlayer`, the optional `teacher` extra);
- `alphabeta`: the classical alpha-beta anchor (`AlphaBeta`, `alphabeta:N`);
- `usi_client`, `usi_opponent`: a client for outside USI engines (`UsiClient`, also the teacher's) and
  such an engine as a player (`UsiOpponent`);
- `record`: how a played game is stored: the hcpe3 result of a verdict and the opening record (self-play
  and the teacher);
- `openings`: reading openings files and making and using opening suites;
- `material`: the piece values and material count (the alpha-beta anchor's, shared with the suites).

What is not play stays with its stage: training targets, resignation and playout caps in self-play
(`dlzero.selfplay.games`); promotion, SPRT, ratings and the Elo fit in `dlzero.gating`.
"""

from dlzero.play.driver import Played, concurrent_slots, play_concurrently, play_lockstep
from dlzero.play.game import END_RESIGN, END_TIME, Game, MoveChooser, play_move, play_rules
from dlzero.play.players import RANDOM, RandomMover, SearchPlayer

__all__ = [
    "END_RESIGN", "END_TIME", "RANDOM", "Game", "MoveChooser", "Played", "RandomMover", "SearchPlayer",
    "concurrent_slots", "play_concurrently", "play_lockstep", "play_move", "play_rules",
]
