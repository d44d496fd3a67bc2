"""Self-play: G games in lockstep through `dlzero.play` (its driver, rules, openings and search player),
plus what is self-play's own: playout caps, root noise, training targets and resignation.

Per move (KataGo's playout cap randomization): with probability `full_search_prob` a full search
(`playouts`, root Dirichlet noise if `noise`) whose visit counts are stored as a policy target;
otherwise a cheap search (`cheap_playouts`, no noise) stored with k = 0 candidates (replay only).
The first `random_plies` plies sample the move proportionally to visits^(1/temperature); later plies
play the most visited move (a proven win first). The subtree of the played move is kept.

With `search.algorithm: gumbel` (Gumbel AlphaZero, `dlzero.search.gumbel`), a full search draws the
Gumbel sample instead of Dirichlet noise, its policy target is the improved policy pi' stored as
integer pseudo-visits (round(pi' * 10 000), see `PSEUDO_VISITS`), and the move played is the
search's choice (argmax g + logits + sigma(q) among the moves the halving left); the first
`random_plies` plies sample from pi'^(1/temperature) instead, for variety.

Game ends: the rules of every game (`dlzero.play.play_rules` with `selfplay.max_moves`: sennichite at
the fourth occurrence, mate, declaration, the move cap), checked at each root before searching, plus
two of self-play's own:
- a mate within `search.root_mate_depth` plies: the mating move is recorded (eval +30000, k = 0) and
  the game is adjudicated as a win for the mover, as dlshogi does, instead of playing it out;
- resignation: the side to move resigns when its best win rate is below the resign threshold.

Openings: when `selfplay.openings` names a file of `startpos moves ...` lines, each game starts at
the final position of a random line. The hcpe3 record starts where the line starts and holds the
opening's moves as replay-only plies (k = 0 candidates: not ours to train on), so training sees the
same ply count (progress plane, move cap), last move and repetition history as the search did at
every position. `random_plies` counts the plies played after the opening. An SFEN line's move
number cannot be kept (an hcp has none): training counts plies from the line's start position.
A file holding start positions of the rating suite (configs/openings/rating.txt) is refused unless
`selfplay.allow_rating_openings`: the models are rated from there.

Resignation false positives (AlphaZero): a `no_resign_fraction` share of games never resign but
note the first side that would have; if that side then did not lose, it was a false positive.
`ResignController` turns those observations into the threshold (see its docstring).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import cshogi
import numpy as np

from dlzero.config import Config, SearchConfig
from dlzero.data.hcpe3 import Hcpe3Record, MoveRecord
from dlzero.game_end import END_MATE as END_MATE  # re-exported: reasons a FinishedRecord may carry
from dlzero.game_end import END_PERPETUAL_CHECK as END_PERPETUAL_CHECK
from dlzero.game_end import Verdict
from dlzero.inference.base import Evaluator
from dlzero.play import END_RESIGN as END_RESIGN  # re-exported too
from dlzero.play import Game, SearchPlayer, play_lockstep, play_rules
from dlzero.play.openings import load_openings, refuse_rating_openings
from dlzero.play.record import opening_record, result_byte, win_code
from dlzero.position import parse_position
from dlzero.search.gumbel import pseudo_visits
from dlzero.search.result import MAX_CP, child_proof, chosen_index, root_winrate, winrate_to_cp
from dlzero.search.target import pruned_visits
from dlzero.search.tree import Tree

MAX_VISITS = 0xFFFF  # hcpe3 stores visits as u16

# how a game ended -> stored in FinishedRecord.reason (and counted by the worker's summary): the rules'
# own reasons come from dlzero.game_end, resignation's from dlzero.play; this one is self-play's
END_MATE_FOUND = "mate_found"


@dataclass
class FinishedRecord:
    """A finished game as handed to `on_game_done`: the hcpe3 record plus how it ended."""

    record: Hcpe3Record
    reason: str
    full_searches: int
    would_resign: int | None  # colour that would have resigned in a no-resign game, else None
    false_positive: bool | None  # None unless `would_resign` is set
    opening_plies: int = 0  # the record's first plies that came from the openings file

    @property
    def plies(self) -> int:
        """Plies self-play played (the opening's excluded)."""
        return len(self.record.moves) - self.opening_plies


@dataclass(eq=False, kw_only=True)
class SelfPlayGame(Game):
    """One game in progress (`dlzero.play.Game`: the board, the search tree) and its hcpe3 record so far."""

    record: Hcpe3Record
    no_resign: bool
    full: bool = False          # the current move gets a full search
    full_searches: int = 0
    would_resign: int | None = None

    def finished(self) -> FinishedRecord:
        """The game for `on_game_done` (once `end` is set), its result byte set from how it ended."""
        self.record.result = result_byte(self.end)
        fp = None
        if self.would_resign is not None:
            fp = (self.record.result & 0x3) != win_code(1 - self.would_resign)
        return FinishedRecord(self.record, self.end.reason, self.full_searches, self.would_resign, fp,
                            self.opening_plies)


@dataclass
class PlayStats:
    """What `play_selfplay_games` did: for benchmarks and progress lines."""

    steps: int = 0
    moves: int = 0
    games: int = 0
    seconds: float = 0.0
    eval_seconds: float = 0.0
    evaluations: int = 0
    lengths: list[int] = field(default_factory=list)


class ResignController:
    """The resign threshold, steered by the false-positive rate of no-resign games.

    Each observation is one no-resign game in which some side fell below the threshold: a false
    positive when that side did not go on to lose. Over the last `window` observations, if the
    false-positive rate exceeds `target` the threshold is multiplied by `down` (resign less
    eagerly); otherwise by `up`, slowly, so that resigning saves more compute while it stays safe.
    The threshold stays within [`lowest`, `highest`]; 0 means resignation is off and stays off.
    """

    def __init__(self, threshold: float, target: float, window: int = 200, min_samples: int = 10,
                 down: float = 0.8, up: float = 1.02, lowest: float = 0.001, highest: float = 0.2) -> None:
        self.threshold = threshold
        self.target = target
        self.min_samples = min_samples
        self.down, self.up, self.lowest, self.highest = down, up, lowest, highest
        self.history: deque[bool] = deque(maxlen=window)
        self.checked = 0
        self.false_positives = 0

    @property
    def fp_rate(self) -> float:
        return sum(self.history) / len(self.history) if self.history else 0.0

    def observe(self, false_positive: bool) -> float:
        """Record one checked game and return the adjusted threshold."""
        self.history.append(bool(false_positive))
        self.checked += 1
        self.false_positives += int(false_positive)
        if self.threshold > 0 and len(self.history) >= self.min_samples:
            factor = self.down if self.fp_rate > self.target else self.up
            self.threshold = min(self.highest, max(self.lowest, self.threshold * factor))
        return self.threshold

    def to_dict(self) -> dict:
        return {"resign_threshold": self.threshold, "checked": self.checked,
                "false_positives": self.false_positives, "recent": [int(x) for x in self.history]}

    @classmethod
    def from_dict(cls, data: dict | None, threshold: float, target: float) -> ResignController:
        """Restore from `to_dict` output; missing data starts from the configured threshold."""
        ctl = cls(threshold, target)
        if data:
            ctl.threshold = float(data.get("resign_threshold", threshold)) if threshold > 0 else 0.0
            ctl.checked = int(data.get("checked", 0))
            ctl.false_positives = int(data.get("false_positives", 0))
            ctl.history.extend(bool(x) for x in data.get("recent", []))
        return ctl


def selfplay_search_config(cfg: Config) -> SearchConfig:
    """The search settings self-play uses: the game's move cap must be the search's draw horizon, and
    the mate guard runs only if `selfplay.mate_guard` asks (a df-pn a move, against searches of tens
    of playouts)."""
    return dataclasses.replace(cfg.search, max_moves=min(cfg.search.max_moves, cfg.selfplay.max_moves),
                               mate_guard_nodes=cfg.search.mate_guard_nodes if cfg.selfplay.mate_guard else 0)


def _candidates(tree: Tree, cfg: SearchConfig) -> np.ndarray:
    """Root children with visits as (k, 2) uint16 [move16, visits], visits clipped to u16.

    The visits are the search's own choice: those caused by root noise or carried over by tree
    reuse are pruned (`dlzero.search.target`). A Gumbel search's target is instead its improved
    policy pi' as pseudo-visits (no noise to prune; reused visits only sharpen its Q).
    """
    root = tree.root
    if tree.gumbel is not None:
        visits = pseudo_visits(tree.gumbel.policy(root.n, root.w))
    else:
        visits = np.rint(pruned_visits(root, tree.clean_prior, cfg)).astype(np.int64)
    idx = np.nonzero(visits > 0)[0]
    out = np.empty((len(idx), 2), np.uint16)
    out[:, 0] = [cshogi.move16(int(m)) for m in root.moves[idx]]
    out[:, 1] = np.minimum(visits[idx], MAX_VISITS)
    return out


def _choose(tree: Tree, ply: int, cfg: Config, rng: np.random.Generator) -> int:
    """Index of the root move to play: sampled in the opening plies (by visits, or by pi' for a Gumbel
    search), else the search's choice."""
    root = tree.root
    if ply < cfg.selfplay.random_plies:
        weights = tree.gumbel.policy(root.n, root.w) if tree.gumbel is not None else np.maximum(root.n, 0.0)
        if weights.sum() > 0:
            weights = weights ** (1.0 / cfg.selfplay.temperature)
            return int(rng.choice(len(weights), p=weights / weights.sum()))
    return chosen_index(tree)


def _move_winrate(tree: Tree, i: int) -> float:
    """Win rate of root move `i` for the mover: proven if known, else its Q, else the root's."""
    root = tree.root
    proof = child_proof(root, i)
    if proof is not None:
        return proof
    n = root.n[i]
    if n > 0:
        return float(root.w[i] / n)
    return root_winrate(tree)


class SelfPlayer(SearchPlayer):
    """The search as self-play plays it (`dlzero.play.SearchPlayer` plus what is self-play's own): a
    found mate is recorded and adjudicated; each move gets a full search (noise, a policy target) or
    a cheap one; the side to move resigns below `threshold()` unless the game is a no-resign one."""

    def __init__(self, evaluator: Evaluator, cfg: Config, rng: np.random.Generator,
                 threshold: Callable[[], float]) -> None:
        super().__init__(evaluator, selfplay_search_config(cfg), cfg.selfplay.playouts, rng,
                         leaves_per_tree=cfg.selfplay.leaves_per_tree, name="selfplay")
        self.config = cfg
        self.rng = rng
        self.threshold = threshold

    def mate_found(self, game: SelfPlayGame, move: int) -> int:
        game.record.moves.append(MoveRecord(cshogi.move16(move), MAX_CP))
        game.end = Verdict(game.board.turn, END_MATE_FOUND)
        return move

    def prepare(self, game: SelfPlayGame, tree: Tree) -> int:
        sp = self.config.selfplay
        game.full = self.rng.random() < sp.full_search_prob
        tree.noise = game.full and sp.noise
        if tree.noise:
            self.search.add_root_noise(tree)  # a reused root is already expanded
        return self.playouts if game.full else sp.cheap_playouts  # self.playouts: selfplay.playouts

    def pick(self, game: SelfPlayGame, tree: Tree) -> int | None:
        """Resign, or record the chosen move with its eval and (full search) its policy target."""
        resign_at = self.threshold()
        turn = game.board.turn
        if resign_at > 0 and root_winrate(tree) < resign_at:
            if not game.no_resign:
                return None
            if game.would_resign is None:
                game.would_resign = turn
        i = _choose(tree, game.played, self.config, self.rng)
        move = int(tree.root.moves[i])
        cands = _candidates(tree, self.config.search) if game.full else np.zeros((0, 2), np.uint16)
        game.full_searches += int(game.full)
        game.record.moves.append(MoveRecord(cshogi.move16(move), winrate_to_cp(_move_winrate(tree, i)), cands))
        return move


def play_selfplay_games(evaluator: Evaluator, cfg: Config, n_games: int,
                        on_game_done: Callable[[FinishedRecord], None], rng: np.random.Generator, *,
                        resign_threshold: Callable[[], float] | None = None,
                        refresh: Callable[[], Evaluator | None] | None = None, max_steps: int | None = None,
                        should_stop: Callable[[], bool] | None = None) -> PlayStats:

    """Play `n_games` games, `games_in_parallel` at a time in lockstep; returns what was done.

    `on_game_done` gets each finished game. `resign_threshold()` gives the current threshold
    (default: the config's). `refresh()` is called after each finished game; if it returns an
    Evaluator, the search switches to it (a new best model) for every game from then on.
    `max_steps` (plies per game slot) and `should_stop()` end the run early; unfinished games are
    dropped, which is what a killed worker loses too.
    """
    sp = cfg.selfplay
    player = SelfPlayer(evaluator, cfg, rng, resign_threshold or (lambda: sp.resign_threshold))
    openings = load_openings(sp.openings) if sp.openings else []
    if openings and not sp.allow_rating_openings:
        refuse_rating_openings(openings, sp.openings, "--set selfplay.allow_rating_openings=true")
    stats = PlayStats()
    started = 0

    def start() -> SelfPlayGame | None:
        nonlocal started
        if started >= n_games:
            return None
        started += 1
        board = parse_position(openings[rng.integers(len(openings))]) if openings else cshogi.Board()
        no_resign = rng.random() < sp.no_resign_fraction
        return SelfPlayGame(board, opening_plies=len(board.history), record=opening_record(board),
                            no_resign=no_resign)

    def on_end(game: SelfPlayGame) -> None:
        stats.games += 1
        stats.lengths.append(game.played)
        if game.played > 0:  # nothing to train on in an opening that is already over
            on_game_done(game.finished())
        if refresh is not None and (new := refresh()) is not None:
            player.search.evaluator = new
            player.search.cache.clear()

    def stop(steps: int) -> bool:
        return (max_steps is not None and steps >= max_steps) or (should_stop is not None and should_stop())

    begin = time.perf_counter()
    played = play_lockstep([player], start, on_end, play_rules(sp.max_moves, cfg.search.entering_king_rule),
                           parallel=sp.games_in_parallel, reuse_trees=player.search.cfg.reuse_tree,
                           should_stop=stop)
    stats.steps = played.steps
    stats.moves = sum(stats.lengths) + sum(g.played for g in played.unfinished)
    stats.seconds = time.perf_counter() - begin
    stats.eval_seconds = player.search.stats.eval_seconds
    stats.evaluations = player.search.stats.evaluations
    return stats
