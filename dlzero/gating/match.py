"""Matches between two players, many games in lockstep: gating, and measuring a model's strength.

A side is an `Evaluator` (searched by `dlzero.play.SearchPlayer` with fixed playouts, no noise, the
most visited move), a `MoveChooser`, or the string "random" (`dlzero.play.RandomMover` seeded by the
match: the floor any learning must beat). The games are played by `dlzero.play.play_lockstep`: N at
once, each side moving in all the games where it is to move at once, so its network sees one batch per
step instead of one position at a time. Each tree adds the same number of leaves to a batch
(`gate.leaves_per_tree`, 1 as in self-play) however many games are running, so the search a gate
judges does not change over a match.

Fairness and no repeats: games 2k and 2k+1 form a pair that starts from one opening, side A Black in
the first and White in the second. Every pair gets its own start position from the opening suite
(`dlzero.play.openings.match_starts`: each suite line at most once per match, seeded variations
beyond), since two deterministic searchers replay the same game from the same start. A pair counts
once it is complete: the SPRT (`sprt=True`) and the Elo interval use the pentanomial pair scores.

Game end, checked after every move by the rules every game is played by (`dlzero.play.play_rules`,
self-play's too): repetition at the fourth occurrence (draw, or a loss for the side that gave
perpetual check), no legal move (mated), the entering-king declaration (the side to move wins), the
move cap (draw), and resignation; an outside engine that answers after its byoyomi loses on time
(`dlzero.play.usi_opponent`), and each game's record keeps every timed move's wall time.

Each finished game can be written as a CSA V2.2 record, atomically, for people to replay.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cshogi
import cshogi.CSA
import numpy as np

from dlzero.config import Config, SearchConfig
from dlzero.data.atomic import atomic_write_text
from dlzero.errors import DataError
from dlzero.gating.sprt import elo_interval, pair_category, pair_elo_interval, pair_sprt_decision
from dlzero.inference.base import Evaluator
from dlzero.play import (
    END_TIME,
    RANDOM,
    Game,
    MoveChooser,
    RandomMover,
    SearchPlayer,
    concurrent_slots,
    play_concurrently,
    play_lockstep,
    play_rules,
)
from dlzero.play.openings import load_openings, match_starts
from dlzero.position import start_position
from dlzero.runfiles import RATINGS_COLUMNS

Side = Evaluator | MoveChooser | str


@dataclass
class MatchRecord:
    """One finished game of a match. `moves` start from `start_sfen` and include the opening plies."""

    index: int
    a_is_black: bool
    start_sfen: str
    opening_plies: int
    moves: list[int]
    winner: int | None  # cshogi.BLACK, cshogi.WHITE, or None for a draw
    reason: str         # mate, resign, repetition, perpetual_check, declaration, max_moves, time
    # wall ms of each move by a clocked player (an outside engine), aligned with `moves` (None: not timed),
    # and one more entry after them, the late answer, when the game was lost on time
    move_ms: list[int | None] = field(default_factory=list)
    # what the clocked engine searched for each of its moves (`Game.move_nodes`), aligned with `moves`
    move_nodes: list[int | None] = field(default_factory=list)

    @property
    def score_a(self) -> float:
        """1, 1/2 or 0 from side A's point of view."""
        if self.winner is None:
            return 0.5
        return 1.0 if (self.winner == cshogi.BLACK) == self.a_is_black else 0.0

    def csa(self, name_a: str = "A", name_b: str = "B", header: Sequence[str] = ()) -> str:
        """The game as CSA V2.2 text; the end code lets any CSA reader recover the result. `header`: comment
        lines after the game's names (the players in full, the time control, the machine), so that the record
        alone says how the game was played."""
        black, white = (name_a, name_b) if self.a_is_black else (name_b, name_a)
        out = io.StringIO()
        out.write(f"V2.2\nN+{black}\nN-{white}\n$EVENT:dlzero match game {self.index}\n")
        out.writelines(f"'{line}\n" for line in header)
        board = cshogi.Board(self.start_sfen)
        out.write("PI\n+\n" if self.start_sfen == cshogi.STARTING_SFEN else board.csa_pos())
        for ply, move in enumerate(self.moves):
            out.write(("+" if board.turn == cshogi.BLACK else "-") + cshogi.move_to_csa(move) + "\n")
            if ply < len(self.move_ms) and self.move_ms[ply] is not None:
                nodes = self.move_nodes[ply] if ply < len(self.move_nodes) else None
                out.write(f"'dlzero: {self.move_ms[ply]} ms" + (f", {nodes} nodes" if nodes is not None else "") + "\n")
            board.push(move)
        out.write(_end_code(self, board.turn) + "\n")
        late = f", the move came after {self.move_ms[-1]} ms" if self.reason == END_TIME and self.move_ms else ""
        out.write(f"'dlzero: {self.reason}{late}, opening {self.opening_plies} plies\n")
        return out.getvalue()


_MOVE_NOTE = re.compile(r"'dlzero: (\d+) ms(?:, (\d+) nodes)?")
_END_NOTE = re.compile(r"'dlzero: (\w+)(?:, the move came after (\d+) ms)?, opening (\d+) plies")
_INDEX = re.compile(r"\$EVENT:dlzero match game (\d+)")
_CSA_MOVE = re.compile(r"[+-]\d{4}[A-Z]{2}")
_WINNERS = {1: cshogi.BLACK, 2: cshogi.WHITE}  # cshogi's Parser.win codes (0 or none: a draw)


def read_record(text: str, source: str, name_a: str = "A") -> MatchRecord:
    """A game kept by `MatchRecord.csa` read back (a match resumed counts the games it kept): the moves, start
    and result through cshogi's CSA reader, the game's number, reason and each move's time and nodes from the
    lines dlzero wrote. A DataError names `source` when the text is not such a game."""
    try:
        [game] = cshogi.CSA.Parser.parse_str(text)
    except (ValueError, IndexError) as exc:
        raise DataError(source, None, f"not one CSA game ({exc})") from None
    lines = text.splitlines()
    index = next((int(m.group(1)) for line in lines if (m := _INDEX.fullmatch(line))), None)
    end = next((m for line in lines if (m := _END_NOTE.fullmatch(line))), None)
    if index is None or end is None or name_a not in game.names:
        raise DataError(source, None, f"not a game of a dlzero match with a player {name_a!r}")
    moves = list(game.moves)
    ms: dict[int, int] = {}
    nodes: dict[int, int] = {}
    ply = -1
    for line in lines:
        if _CSA_MOVE.fullmatch(line):
            ply += 1
        elif ply >= 0 and (m := _MOVE_NOTE.fullmatch(line)):
            ms[ply] = int(m.group(1))
            if m.group(2) is not None:
                nodes[ply] = int(m.group(2))
    reason, late = end.group(1), end.group(2)
    if late is not None:
        ms[len(moves)] = int(late)
    timed = len(moves) + (reason == END_TIME)
    return MatchRecord(index, game.names[0] == name_a, game.sfen, int(end.group(3)), moves,
                       _WINNERS.get(game.win), reason,
                       [ms.get(i) for i in range(timed)] if ms else [],
                       [nodes.get(i) for i in range(timed)] if nodes else [])


def _end_code(game: MatchRecord, to_move: int) -> str:
    """CSA end line. The side to move at the end resigns (also when mated) or declares."""
    if game.reason in ("mate", "resign"):
        return "%TORYO"
    if game.reason == "declaration":
        return "%KACHI"
    if game.reason == END_TIME:  # the side to move did not move in time
        return "%TIME_UP"
    if game.reason == "repetition":
        return "%SENNICHITE"
    if game.reason == "perpetual_check":  # V2.2 has no code of its own: an illegal action by the checker
        return "%+ILLEGAL_ACTION" if game.winner == cshogi.WHITE else "%-ILLEGAL_ACTION"
    return "%JISHOGI"  # the move cap: a draw


@dataclass
class MatchResult:
    """Results of a match from side A's point of view, with the SPRT state after the last pair.

    `pairs[k]`: complete colour-swapped pairs in which A scored k/2 points (pentanomial counts).
    """

    games: list[MatchRecord] = field(default_factory=list)
    wins: int = 0
    draws: int = 0
    losses: int = 0
    llr: float = 0.0
    decision: str = "continue"
    bounds: tuple[float, float] = (0.0, 0.0)
    pairs: list[int] = field(default_factory=lambda: [0] * 5)

    @property
    def n_games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.n_games if self.n_games else 0.5

    @property
    def n_pairs(self) -> int:
        return sum(self.pairs)

    def elo(self, confidence: float = 0.95) -> tuple[float, float, float]:
        """(Elo, low, high) of A relative to B: from the pairs, or from the games if no pair is complete."""
        if self.n_pairs:
            return pair_elo_interval(self.pairs, confidence)
        return elo_interval(self.wins, self.draws, self.losses, confidence)

    def add(self, game: MatchRecord) -> None:
        self.games.append(game)
        s = game.score_a
        self.wins += s == 1.0
        self.draws += s == 0.5
        self.losses += s == 0.0

    def add_pair(self, first: MatchRecord, second: MatchRecord) -> None:
        """Count a complete pair (its games are added separately)."""
        self.pairs[pair_category(first.score_a + second.score_a)] += 1


@dataclass(eq=False, kw_only=True)
class _Playing(Game):
    """A match game in progress (`seats`: side A plays Black in the even games)."""

    index: int
    a_is_black: bool
    start_sfen: str


def _player(side: Side, cfg: SearchConfig, playouts: int, rng: np.random.Generator, resign_threshold: float,
            random_mover: RandomMover) -> MoveChooser:
    """The player of a side: a chooser as it is, "random" as the match's random mover, an Evaluator searched."""
    if isinstance(side, str):
        if side != RANDOM:
            raise ValueError(f"a side is an Evaluator, a MoveChooser or '{RANDOM}', not {side!r}")
        return random_mover
    if isinstance(side, MoveChooser):
        return side
    return SearchPlayer(side, cfg, playouts, rng, resign_threshold=resign_threshold)


def play_match(side_a: Side, side_b: Side, n_games: int, cfg: Config, *, playouts: int | None = None,
               parallel: int | None = None, openings: Sequence[str] | None = None, sprt: bool = False, seed: int = 0,
               resign_threshold: float = 0.0, record_dir: str | Path | None = None,
               names: tuple[str, str] = ("A", "B"), header: Sequence[str] = (),
               on_game: Callable[[MatchRecord, MatchResult], None] | None = None,
               opening_offset: int = 0, first_record: int = 0) -> MatchResult:
    """Play up to `n_games` between `side_a` and `side_b` (see `Side`), `parallel` at a time: in lockstep
    (a searching side's games share its network calls), or, when both sides are outside engines or
    miniosl's network, each game in a thread of its own with engine processes of its own
    (`dlzero.play.driver`), so that games between engines really run at once.

    Search settings come from `cfg.search` with `cfg.gate.max_moves` as the move cap and
    `cfg.gate.leaves_per_tree` leaves per tree and network call (as self-play searches, however many
    games are running); `playouts` defaults to `cfg.gate.playouts`, `parallel` to
    `cfg.gate.games_in_parallel`, `openings` (suite lines) to the file `cfg.gate.openings` (or the
    shipped suite). The suite is shuffled by `seed` and pairs take
    its lines from slot `opening_offset` on (a gate passes generation x pairs, so successive gates
    use different lines). Games count when their pair is complete (a last unpaired game of an odd
    `n_games` counts alone); they are written as CSA files to `record_dir` (if given, with `header`'s
    comment lines; numbered from `first_record`, so that a match played in parts keeps every game) and reported
    to `on_game` then. With `sprt`, the pentanomial test (`cfg.gate` elo0/elo1/alpha/beta) runs
    after every complete pair and the match stops once it decides; games still running or waiting
    for their partner are dropped. Both sides named "random" share one random mover, seeded by `seed`.
    """
    gate = cfg.gate
    search_cfg = dataclasses.replace(cfg.search, max_moves=gate.max_moves, leaves_per_tree=gate.leaves_per_tree)
    rng = np.random.default_rng(seed)  # the searches': without root noise they draw nothing from it
    lines = list(openings) if openings is not None else load_openings(gate.openings)
    starts = match_starts(lines, (n_games + 1) // 2, seed, offset=opening_offset,
                          variation_plies=gate.variation_plies, margin=gate.suite_margin)
    random_mover = RandomMover(seed)
    players = [_player(side, search_cfg, playouts or gate.playouts, rng, resign_threshold, random_mover)
               for side in (side_a, side_b)]
    out_dir = Path(record_dir) if record_dir is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    result = MatchResult()
    waiting: dict[int, MatchRecord] = {}  # finished games whose partner is still playing, by index
    started = 0

    def count(record: MatchRecord) -> None:
        result.add(record)
        if out_dir is not None:
            path = out_dir / f"game-{record.index:03d}.csa"
            atomic_write_text(path, record.csa(*names, header=header))

    def start() -> _Playing | None:
        nonlocal started
        if started >= n_games or result.decision != "continue":
            return None
        board = starts[started // 2].copy()
        a_is_black = started % 2 == 0
        game = _Playing(board, seats=(0, 1) if a_is_black else (1, 0), opening_plies=len(board.history),
                        index=started, a_is_black=a_is_black, start_sfen=start_position(board))
        started += 1
        return game

    def finish(game: _Playing) -> None:
        if result.decision != "continue":
            return  # the test has decided: games still running are dropped
        moves = list(game.board.history)
        timed = len(moves) + (game.end.reason == END_TIME)
        move_ms = [round(game.move_ms[i]) if i in game.move_ms else None for i in range(timed)] \
            if game.move_ms else []
        move_nodes = [game.move_nodes.get(i) for i in range(timed)] if game.move_nodes else []
        # numbered in the whole match (`first_record` on), paired by the number in this part
        record = MatchRecord(first_record + game.index, game.a_is_black, game.start_sfen, game.opening_plies,
                             moves, game.end.winner, game.end.reason, move_ms, move_nodes)
        partner = game.index ^ 1
        if partner >= n_games:  # the last game of an odd count: no pair, counts alone
            count(record)
            if on_game:
                on_game(record, result)
            return
        if partner not in waiting:
            waiting[game.index] = record
            return
        first, second = sorted((waiting.pop(partner), record), key=lambda g: g.index)
        count(first)
        if on_game:
            on_game(first, result)
        count(second)
        result.add_pair(first, second)
        if sprt:
            result.decision, result.llr, result.bounds = pair_sprt_decision(
                result.pairs, gate.elo0, gate.elo1, gate.alpha, gate.beta)
        if on_game:
            on_game(second, result)

    rules = play_rules(gate.max_moves, cfg.search.entering_king_rule)
    parallel = parallel or gate.games_in_parallel

    def stop(_steps: int) -> bool:
        return result.decision != "continue"

    if (slots := concurrent_slots(players, parallel)) is not None:  # engines: a process a game, games at once
        play_concurrently(slots, start, finish, rules, reuse_trees=search_cfg.reuse_tree, should_stop=stop)
    else:
        play_lockstep(players, start, finish, rules, parallel=parallel, reuse_trees=search_cfg.reuse_tree,
                      should_stop=stop)
    return result


def append_rating(path: str | Path, row: dict) -> None:
    """Add a row to ratings.csv (header written once); the file is rewritten atomically."""
    p = Path(path)
    old = p.read_text(encoding="utf-8") if p.is_file() else ""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RATINGS_COLUMNS, extrasaction="ignore", lineterminator="\n")
    if not old:
        writer.writeheader()
    writer.writerow(row)
    if old and not old.endswith("\n"):
        old += "\n"
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(p, old + buf.getvalue())
