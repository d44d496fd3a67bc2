"""Time management: how long to think, so that the engine never loses on time.

Budget (dlshogi's rule): remaining / (14 + max(0, 30 - ply)) + increment, at least the byoyomi.
The hard limit is everything the clock allows minus the margins, and never less than zero. The
search may stop early once the best move cannot be overtaken, and may extend up to twice the
budget when the position is critical (the top two moves are close). It never stops early where the time
cannot be saved (`TimeBudget.spend_all`): a byoyomi with no main time left, or `movetime`. What such a move
leaves unsearched is lost, while the playouts it does make stay in the tree that the next move reuses; so it
searches to its limit, as the YaneuraOu family does in byoyomi (its time manager's "final push": optimum and
maximum both the byoyomi less the network delay).

Margins. `byoyomi_margin` (USI `ByoyomiMargin`) comes off a byoyomi or `movetime`: the engine answers
at byoyomi - margin (target and hard limit alike: there is nothing to save a byoyomi for), so the margin
is what the search may run past its limit on this machine plus the pipe to the GUI (measured by
`dlzero bench search --byoyomi`, docs/usi-options.md). `time_margin` (`TimeMargin`) is main time never
planned: the reserve that absorbs a move slower than planned, and what a game on main time leaves when
it ends. On main time every move also costs about MOVE_COST_MS beyond its plan (root checks, the step
that notices the limit, the drain, the pipe): the increment pays for it first (a Fischer move is planned
at its share of the main time plus increment - MOVE_COST_MS, so the overshoot of every move does not
bleed the reserve), and what the increments do not pay is held back for this side's moves still to come
up to GAME_PLIES. Without that, dlshogi's divisor spends the main time geometrically, and a 300-ply
sudden-death game flagged once the spendable time was gone (tests/test_timeman.py plays the clock out).
"""

from __future__ import annotations

from dataclasses import dataclass

import cshogi

# The game length the main time is planned for: the cost of this side's moves up to this ply is kept
# back. 320 plies: the longest rule in use (WCSC's; floodgate's 256), beyond the 300.
GAME_PLIES = 320
# What a move on main time costs beyond its plan: two search steps of the shipped network on a loaded
# machine (64 leaves a step, about 45 ms at load 10 on 2 cores; 13 ms idle) and the pipe (under 15 ms).
MOVE_COST_MS = 100
# The least a move is planned: move at once (a plan of 0 would be no clock at all).
MIN_PLAN_MS = 10


@dataclass
class Limits:
    """What `go` asked for. Times in milliseconds; 0 means not given.

    `searchmoves`: the root moves (cshogi move ints) the search may choose from; empty: all.
    """

    playouts: int = 0
    btime: int = 0
    wtime: int = 0
    byoyomi: int = 0
    binc: int = 0
    winc: int = 0
    movetime: int = 0
    infinite: bool = False
    ponder: bool = False
    searchmoves: tuple[int, ...] = ()

    @property
    def timed(self) -> bool:
        return bool(self.btime or self.wtime or self.byoyomi or self.binc or self.winc or self.movetime)

    @property
    def open_ended(self) -> bool:
        """`go infinite` with no limit beside it: search, and answer only after `stop`.

        A limit given with `infinite` (`go nodes 800 infinite`, as shogiarena's `analyze --nodes`
        sends) bounds the search and the answer comes at the limit, as YaneuraOu and Stockfish do.
        """
        return self.infinite and not (self.playouts or self.timed)


@dataclass
class TimeBudget:
    """Soft target and hard limit in milliseconds (None: no clock, stop by playouts only). `spend_all`: no
    time this move leaves is ever used again (byoyomi alone, `movetime`), so it searches to its hard limit."""

    target_ms: float | None
    hard_ms: float | None
    spend_all: bool = False


def allocate(limits: Limits, turn: int, ply: int, byoyomi_margin: int, time_margin: int) -> TimeBudget:
    """Time for this move from the clock, following dlshogi's formula with safety margins."""
    if limits.open_ended or limits.ponder:
        return TimeBudget(None, None)
    if limits.movetime:
        t = max(limits.movetime - byoyomi_margin, 1)
        return TimeBudget(t, t, spend_all=True)
    if not limits.timed:
        return TimeBudget(None, None)
    remaining = limits.btime if turn == cshogi.BLACK else limits.wtime
    inc = limits.binc if turn == cshogi.BLACK else limits.winc
    byoyomi = max(limits.byoyomi - byoyomi_margin, 0)
    # the increment less a move's cost: what a move may take beyond its share of the main time
    increment = max(inc - MOVE_COST_MS, 0) if not limits.byoyomi else 0
    # The main time may be spent down to `time_margin` and the cost of the moves still to come (what their
    # increments do not pay); after that only byoyomi/increment remain.
    moves_left = max(GAME_PLIES - ply, 0) // 2
    held_back = 0 if limits.byoyomi else moves_left * max(MIN_PLAN_MS + MOVE_COST_MS - inc, 0)
    spendable = max(remaining - time_margin - held_back, 0)
    target = spendable / (14 + max(0, 30 - ply)) + increment
    target = max(target, byoyomi)
    # never past the clock this move starts with, less its cost: a GUI that adds the increment after the move
    # (as CSA servers do) flags a move that counted on it; one that adds it before has put it in `remaining`
    hard = min(spendable + increment, max(remaining - MOVE_COST_MS, 0)) + byoyomi
    hard = max(hard, MIN_PLAN_MS)  # nothing left to plan: move at once
    target = min(target, hard)
    return TimeBudget(max(target, MIN_PLAN_MS), hard, spend_all=bool(limits.byoyomi) and spendable == 0)


def can_stop_early(best_visits: float, second_visits: float, playouts_per_ms: float, ms_left: float) -> bool:
    """True when the runner-up cannot catch the best move in the time left at the current rate."""
    return best_visits - second_visits > playouts_per_ms * ms_left


def is_critical(best_visits: float, second_visits: float, best_q: float, second_q: float) -> bool:
    """Top two moves close in visits, or the runner-up looks better: worth more time."""
    return best_visits < 1.5 * second_visits or best_q < second_q
