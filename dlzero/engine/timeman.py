"""Time management: how long to think, so that the engine never loses on time.

Budget (dlshogi's rule): remaining / (14 + max(0, 30 - ply)) + increment, at least the byoyomi.
The hard limit is everything the clock allows minus the margins, and never less than zero. The
search may stop early once the best move cannot be overtaken, and may extend up to twice the
budget when the position is critical (the top two moves are close).
"""

from __future__ import annotations

from dataclasses import dataclass

import cshogi


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
    """Soft target and hard limit in milliseconds (None: no clock, stop by playouts only)."""

    target_ms: float | None
    hard_ms: float | None


def allocate(limits: Limits, turn: int, ply: int, byoyomi_margin: int, time_margin: int) -> TimeBudget:
    """Time for this move from the clock, following dlshogi's formula with safety margins."""
    if limits.open_ended or limits.ponder:
        return TimeBudget(None, None)
    if limits.movetime:
        t = max(limits.movetime - byoyomi_margin, 1)
        return TimeBudget(t, t)
    if not limits.timed:
        return TimeBudget(None, None)
    remaining = limits.btime if turn == cshogi.BLACK else limits.wtime
    inc = limits.binc if turn == cshogi.BLACK else limits.winc
    byoyomi = max(limits.byoyomi - byoyomi_margin, 0)
    # The main time may be spent down to `time_margin`; after that only byoyomi/increment remain.
    spendable = max(remaining - time_margin, 0)
    target = spendable / (14 + max(0, 30 - ply)) + inc
    target = max(target, byoyomi)
    hard = spendable + byoyomi + (max(inc - byoyomi_margin, 0) if not limits.byoyomi else 0)
    if hard <= 0:
        hard = max(min(remaining, 100) - 50, 10)  # nearly flagged: move at once
    target = min(target, hard)
    return TimeBudget(max(target, 10.0), max(hard, 10.0))


def can_stop_early(best_visits: float, second_visits: float, playouts_per_ms: float, ms_left: float) -> bool:
    """True when the runner-up cannot catch the best move in the time left at the current rate."""
    return best_visits - second_visits > playouts_per_ms * ms_left


def is_critical(best_visits: float, second_visits: float, best_q: float, second_q: float) -> bool:
    """Top two moves close in visits, or the runner-up looks better: worth more time."""
    return best_visits < 1.5 * second_visits or best_q < second_q
