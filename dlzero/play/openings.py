"""Openings: reading them (`load_openings`), and opening suites, many distinct, balanced start positions,
so that a match never plays a game twice.

**Reading** (`load_openings`): a file of `startpos moves ...` or `sfen ... [moves ...]` lines (blank
lines and `#` comments skipped), each checked when read, so a bad line fails before any game is played.
Self-play starts each game at a random line of `selfplay.openings`; matches use a suite (below).

Two searchers without noise are deterministic: from the same start position with the same colours
they replay the same game. A match therefore starts every colour-swapped pair of games from its own
position. The positions come from a suite file, one `startpos moves ...` or `sfen ... [moves ...]` line
each. Two ship with the repo, both made by `dlzero openings` (`GATE_SUITE`, `RATING_SUITE`):

- `configs/openings/gate.txt`: the gate's (`gate.openings` names another), and the teacher's own games
  start from it too;
- `configs/openings/rating.txt`: ratings and matches (`rate.openings`). Made with `--exclude gate.txt`,
  so none of its lines ends at a position along a gate.txt line and none passes through a gate.txt
  line's end. No teacher or self-play game may start from it (`refuse_rating_openings`), so no model
  is rated from a start position its training games started from.

**Making a suite** (`generate_suite`): from the start position (or a random prefix of a line of
`starts`, e.g. the first plies of real games), play a random number of plies in
[`suite_min_plies`, `suite_max_plies`], each sampled from a policy: uniformly over the legal moves,
or, given a network, from its priors sharpened or flattened by `suite_temperature`. Keep the
position if it is new (no transposition of one already kept), clear of another suite's lines
(`exclude`: it neither ends where they pass nor passes where they end) and balanced:

- material: the side to move is not in check, has no mate within 3 plies, and the best it can
  reach in material after one move of its own and any sequence of captures (a small quiescence
  search over `dlzero.play.material.SUITE_VALUES`) is within `suite_margin` pawns of even, so no
  piece hangs for either side;
- with a network and `suite_playouts > 0`, also its value: the win rate of a short search is within
  `suite_value_margin` of 1/2.

**Using a suite** (`match_starts`): a match shuffles the suite with its seed and takes consecutive
lines from slot `offset` on, one per pair, so every opening is used at most once per match and
successive gates (offset by generation) use different ones. When the slots run past the suite's
end, a line is played again with `variation_plies` extra random plies (seeded by the slot, kept only
if still balanced and new to the match), so a long match still never repeats a start position.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import cshogi
import numpy as np
from tqdm import tqdm

from dlzero.data.atomic import atomic_write_text
from dlzero.errors import ConfigError, PositionError
from dlzero.play.material import PAWN, SUITE_VALUES, captures, material
from dlzero.position import parse_position, position_string, start_board, start_position
from dlzero.resources import config_path
from dlzero.search import Search, Tree, root_winrate

GATE_SUITE = config_path("openings", "gate.txt")      # the gate's; the teacher's games start from it too
RATING_SUITE = config_path("openings", "rating.txt")  # ratings and matches; no training game starts from it
QUIESCENCE_DEPTH = 8   # captures followed at most this deep (opening positions hold few)
MATE_CHECK_PLIES = 3


def position_key(board: cshogi.Board) -> str:
    """The position without its move number: equal for transpositions, so they count as one."""
    return " ".join(board.sfen().split()[:3])


def line_keys(line: str) -> list[str]:
    """`position_key` of every position along an openings line: its start (ply 0) first, its end last."""
    return _board_keys(parse_position(line))


def _board_keys(board: cshogi.Board) -> list[str]:
    """`position_key` of every position `board` went through, its first position first, itself last."""
    first = start_board(board)
    keys = [position_key(first)]
    for move in board.history:
        first.push(move)
        keys.append(position_key(first))
    return keys


def load_openings(path: str | Path | None, default: Path = GATE_SUITE) -> list[str]:
    """The lines of an openings file, each checked with `parse_position` (and not already a finished
    game) so that a bad one fails now; a leading `position ` is dropped. Empty path: the shipped suite
    `default`; a bare name that is no file here but a shipped suite's (`handicap.txt`): that suite."""
    p = Path(path) if path else default
    if path and not p.is_file() and len(p.parts) == 1 and config_path("openings", p.name).is_file():
        p = config_path("openings", p.name)
    if not p.is_file():
        hint = " (the shipped suite is missing: is this a full checkout?)" if not path else ""
        raise ConfigError(f"openings file '{p}' does not exist{hint}")
    lines = []
    for n, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("position ")
        try:
            board = parse_position(line)
        except PositionError as exc:
            raise ConfigError(f"{p}:{n}: {exc}") from None
        if board.is_game_over():
            raise ConfigError(f"{p}:{n}: the opening ends in a finished game")
        lines.append(line)
    if not lines:
        raise ConfigError(f"openings file '{p}' holds no positions")
    return lines


def suite_tag(lines: Sequence[str], path: str | Path) -> str:
    """A suite's file name and the digest of its lines (`rating.txt:0123456789`): games stored with it say
    which suite they started from, so games from another suite, or an edited copy, are told apart."""
    digest = hashlib.sha1("\n".join(lines).encode()).hexdigest()[:10]
    return f"{Path(path).name}:{digest}"


@cache
def _rating_end_keys() -> frozenset[str]:
    """Where the shipped rating suite's games start (read once per process)."""
    return frozenset(position_key(parse_position(line)) for line in load_openings(RATING_SUITE))


def refuse_rating_openings(lines: Sequence[str], source: str, override: str) -> None:
    """A ConfigError when a line of `lines` (read from `source`) ends where a line of the rating suite
    ends. Checked by position, not by file name, so a copy or a subset of rating.txt is caught too: a
    model trained on games from those positions would be rated on positions it has learnt. `override`
    names the switch that allows it anyway, for the error to say."""
    rating = _rating_end_keys()
    hits = [n for n, line in enumerate(lines, 1) if position_key(parse_position(line)) in rating]
    if hits:
        raise ConfigError(f"{source}: {len(hits)} of its {len(lines)} openings are start positions of the rating "
                          f"suite {RATING_SUITE.name} (opening {hits[0]} first), which no training game may start "
                          f"from; use another suite, or {override} to allow it")


# -- balance -------------------------------------------------------------------------------------
def _quiesce(board: cshogi.Board, alpha: float, beta: float, depth: int) -> float:
    """Material after the best sequence of captures (standing pat allowed), side to move's view (centipawns)."""
    stand = material(board, SUITE_VALUES)
    if stand >= beta or depth == 0:
        return stand
    alpha = max(alpha, stand)
    for move in captures(board):
        board.push(move)
        score = -_quiesce(board, -beta, -alpha, depth - 1)
        board.pop()
        if score >= beta:
            return score
        alpha = max(alpha, score)
    return alpha


def material_balance(board: cshogi.Board) -> float:
    """What the side to move can keep in material: its best move, then captures only (in pawns)."""
    best = -float("inf")
    for move in board.legal_moves:
        board.push(move)
        best = max(best, -_quiesce(board, -float("inf"), -best, QUIESCENCE_DEPTH))
        board.pop()
    return best / PAWN


def is_balanced(board: cshogi.Board, margin: float) -> bool:
    """A fair start: game not over, side to move not in check and not mating in 3, material even
    within `margin` pawns after the side to move's best move and the captures that follow."""
    if board.is_game_over() or board.is_check() or board.is_nyugyoku():
        return False
    if board.mate_move(MATE_CHECK_PLIES):
        return False
    return abs(material_balance(board)) <= margin


# -- making a suite ------------------------------------------------------------------------------
Policy = Callable[[cshogi.Board], tuple[list[int], np.ndarray]]


def uniform_policy(board: cshogi.Board) -> tuple[list[int], np.ndarray]:
    """Every legal move equally likely."""
    moves = list(board.legal_moves)
    return moves, np.full(len(moves), 1.0 / max(len(moves), 1))


def network_policy(search: Search, temperature: float) -> Policy:
    """The network's priors (one evaluation of the position) raised to 1 / `temperature`."""
    def policy(board: cshogi.Board) -> tuple[list[int], np.ndarray]:
        tree = Tree(board.copy())
        search.run([tree], 1, leaves_per_tree=1)
        prior = tree.root.prior.astype(np.float64) ** (1.0 / temperature)
        return [int(m) for m in tree.root.moves], prior / prior.sum()

    return policy


def value_filter(search: Search, playouts: int, leaves_per_tree: int, margin: float) -> Callable[[cshogi.Board], bool]:
    """True when a `playouts` search of the position finds a win rate within `margin` of 1/2."""
    def ok(board: cshogi.Board) -> bool:
        tree = Tree(board.copy())
        search.run([tree], playouts, leaves_per_tree=leaves_per_tree)
        return abs(root_winrate(tree) - 0.5) <= margin

    return ok


@dataclass
class SuiteSettings:
    """How `generate_suite` samples and filters (the `gate.suite_*` config keys)."""

    min_plies: int = 4
    max_plies: int = 10
    margin: float = 0.0


def generate_suite(count: int, seed: int, settings: SuiteSettings, *, policy: Policy = uniform_policy,
                   value_ok: Callable[[cshogi.Board], bool] | None = None, starts: Sequence[str] = (),
                   exclude: Sequence[str] = (), max_tries: int | None = None, progress: bool = True) -> list[str]:
    """`count` distinct balanced opening lines; the same arguments give the same lines.

    `policy` gives moves and their probabilities; `value_ok` (optional) is a last filter, e.g. a
    short search's win rate near 1/2. `starts` are lines to begin from (a random prefix of one,
    chosen per sample); without them every sample begins at the start position. `exclude`: lines of
    another suite to keep clear of, so that the two share no start position either way: no new line
    ends at a position along one of them (their first position included), and none passes through
    where one of them ends.
    """
    if settings.min_plies < 1 or settings.max_plies < settings.min_plies:
        raise ConfigError(f"opening plies must satisfy 1 <= min <= max, got {settings.min_plies}.."
                          f"{settings.max_plies}")
    rng = np.random.default_rng(seed)
    prefixes = [parse_position(line) for line in starts] or [cshogi.Board()]
    seen: set[str] = set()
    along: set[str] = set()
    ends: set[str] = set()
    for line in exclude:
        keys = line_keys(line)
        along.update(keys)
        ends.add(keys[-1])
    lines: list[str] = []
    tries = 0
    limit = max_tries if max_tries is not None else 200 * count
    bar = tqdm(total=count, desc="openings", unit="pos", file=sys.stderr, disable=not progress)
    while len(lines) < count and tries < limit:
        tries += 1
        board = _random_prefix(prefixes[int(rng.integers(len(prefixes)))], rng)
        start_sfen = start_position(board)
        plies = int(rng.integers(settings.min_plies, settings.max_plies + 1))
        if not _sample_plies(board, plies, policy, rng):
            continue
        key = position_key(board)
        if key in seen or (exclude and not _clear_of(board, along, ends)):
            continue
        if not is_balanced(board, settings.margin):
            continue
        if value_ok is not None and not value_ok(board):
            continue
        seen.add(key)
        lines.append(position_string(board, start_sfen))
        bar.update(1)
    bar.close()
    if len(lines) < count:
        raise ConfigError(f"found only {len(lines)} distinct balanced openings in {tries} tries (wanted {count}); "
                          "widen the plies range or the margin")
    return lines


def _clear_of(board: cshogi.Board, along: set[str], ends: set[str]) -> bool:
    """Whether the line `board` went through ends at none of `along` and passes through none of
    `ends` after its first position."""
    keys = _board_keys(board)
    return keys[-1] not in along and ends.isdisjoint(keys[1:])


def _random_prefix(start: cshogi.Board, rng: np.random.Generator) -> cshogi.Board:
    """`start` with a random number of its last moves taken back (all, none, or between)."""
    board = start.copy()
    for _ in range(int(rng.integers(len(start.history) + 1))):
        board.pop()
    return board


def _sample_plies(board: cshogi.Board, plies: int, policy: Policy, rng: np.random.Generator) -> bool:
    """Push `plies` sampled moves; False if the game ended on the way."""
    for _ in range(plies):
        if board.is_game_over():
            return False
        moves, probs = policy(board)
        board.push(moves[int(rng.choice(len(moves), p=probs))])
    return True


def write_suite(path: str | Path, lines: Iterable[str], header: Sequence[str]) -> None:
    """The suite as a text file: `# ` header lines saying how it was made, then one line each."""
    text = "".join(f"# {h}\n" for h in header) + "".join(f"{line}\n" for line in lines)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


# -- using a suite -------------------------------------------------------------------------------
def match_starts(suite: Sequence[str], pairs: int, seed: int, *, offset: int = 0, variation_plies: int = 2,
                 margin: float = 0.0, max_tries: int = 200) -> list[cshogi.Board]:
    """One distinct start position per pair: suite slots `offset .. offset + pairs - 1` of the
    suite shuffled by `seed`; slots past its end add `variation_plies` seeded random plies."""
    if not suite:
        raise ConfigError("the opening suite is empty")
    order = np.random.default_rng(seed).permutation(len(suite))
    used: set[str] = set()
    boards: list[cshogi.Board] = []
    for slot in range(offset, offset + pairs):
        line = suite[order[slot % len(suite)]]
        board = parse_position(line)
        if slot < len(suite) and position_key(board) not in used:
            chosen = board
        else:
            chosen = _variation(line, used, np.random.default_rng([seed, slot]), variation_plies, margin,
                                max_tries)
        used.add(position_key(chosen))
        boards.append(chosen)
    return boards


def _variation(line: str, used: set[str], rng: np.random.Generator, plies: int, margin: float,
               max_tries: int) -> cshogi.Board:
    """`line` plus `plies` random moves, new to `used` and still balanced if the line was (a line
    a user chose unbalanced stays allowed); one ply deeper after every 50 failed tries."""
    fair = is_balanced(parse_position(line), margin)
    for attempt in range(max_tries):
        board = parse_position(line)
        extra = max(plies, 1) + attempt // 50
        if not _sample_plies(board, extra, uniform_policy, rng) or board.is_game_over():
            continue
        if position_key(board) not in used and (not fair or is_balanced(board, margin)):
            return board
    raise ConfigError(f"no new balanced variation of opening '{line}' in {max_tries} tries")
