"""Game review: every position of a record searched, blunders marked, the record written back annotated.

A game of n moves has n + 1 positions; they are analysed `positions_per_batch` at a time through
the analysis engine (one query with `analyzeTurns`), so their searches share network batches.
Position k's evaluation becomes the comment of move k (ShogiHome's convention: the comment below a
move judges the position it leads to). A move is a blunder when the engine preferred another move
and the mover's win rate fell by more than `blunder_threshold`: from the win rate of the position
before the move (the mover to play) to one minus that of the position after it (the opponent to
play).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import cshogi
from tqdm import tqdm

from dlzero.analysis import AnalysisEngine
from dlzero.data.annotated_kif import PositionNote, write_annotated_kif
from dlzero.data.atomic import atomic_write_png
from dlzero.data.records import KifuRecord


@dataclass
class PlyEval:
    """The engine's answer for the position after `ply` moves (win rate for the side to move there)."""

    ply: int
    black_to_move: bool
    winrate: float
    score_cp: int
    mate: int | None
    bestmove: str          # USI move, "win" (declaration) or "resign" (no legal move)
    pv: list[str]
    nodes: int

    @property
    def black_winrate(self) -> float:
        return self.winrate if self.black_to_move else 1.0 - self.winrate


@dataclass
class Blunder:
    move_number: int       # 1-based
    played: str            # USI
    best: str              # the engine's choice
    loss: float            # win rate the mover gave away


@dataclass
class GameReview:
    game: KifuRecord
    plies: list[PlyEval]   # len(game.moves) + 1
    blunders: list[Blunder]


def evaluate_positions(engine: AnalysisEngine, game: KifuRecord, playouts: int, per_batch: int,
                       progress: bool = True) -> list[PlyEval]:
    """Search every position of `game` (start and after each move), `per_batch` at a time."""
    usi = [cshogi.move_to_usi(m) for m in game.moves]
    turns = list(range(len(usi) + 1))
    black_first = game.sfen.split()[1] == "b"
    out: list[PlyEval] = []
    with tqdm(total=len(turns), file=sys.stderr, disable=not progress, unit="pos", desc="review") as bar:
        for start in range(0, len(turns), per_batch):
            chunk = turns[start:start + per_batch]
            tasks = engine.reader.game_tasks(f"sfen {game.sfen}", usi, chunk, playouts, multipv=1, task_id=start)
            for result in engine.analyse(tasks):
                a, ply = result.analysis, result.task.turn
                assert a is not None  # only a terminated turn has no analysis, and nothing terminates these
                out.append(PlyEval(ply, black_first == (ply % 2 == 0), a.winrate, a.score_cp, a.mate, a.bestmove,
                                   list(a.pv), a.nodes))
            bar.update(len(chunk))
    return out


def find_blunders(game: KifuRecord, plies: list[PlyEval], threshold: float) -> list[Blunder]:
    """Moves that lost more than `threshold` of the mover's win rate where the engine wanted another."""
    out = []
    for k, move in enumerate(game.moves, start=1):
        before, after = plies[k - 1], plies[k]
        played = cshogi.move_to_usi(move)
        if before.bestmove in ("win", "resign") or before.bestmove == played:
            continue
        loss = before.winrate - (1.0 - after.winrate)
        if loss > threshold:
            out.append(Blunder(k, played, before.bestmove, loss))
    return out


def position_notes(review: GameReview) -> list[PositionNote]:
    """What the annotated record says about each position."""
    marked = {b.move_number: b for b in review.blunders}
    notes = []
    for p in review.plies:
        previous = review.plies[p.ply - 1] if p.ply else None
        better = previous.bestmove if previous and previous.bestmove not in ("win", "resign") else None
        if better is not None and better == cshogi.move_to_usi(review.game.moves[p.ply - 1]):
            better = None
        notes.append(PositionNote(p.score_cp, p.mate, p.pv if p.bestmove not in ("win", "resign") else [],
                                  p.nodes, p.ply in marked, better))
    return notes


def plot_review(review: GameReview, path: str | os.PathLike[str], title: str = "") -> None:
    """The evaluation graph: Black's win rate per ply, blunders marked; written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plies = [p.ply for p in review.plies]
    black = [100.0 * p.black_winrate for p in review.plies]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.axhline(50, color="grey", lw=0.8)
    ax.fill_between(plies, 50, black, color="tab:blue", alpha=0.25)
    ax.plot(plies, black, color="tab:blue", lw=1.2, label="Black's win rate")
    if review.blunders:
        xs = [b.move_number for b in review.blunders]
        ax.scatter(xs, [black[x] for x in xs], color="tab:red", zorder=3, label="blunder")
        for x in xs:
            ax.annotate(str(x), (x, black[x]), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ax.set(xlim=(0, max(plies[-1], 1)), ylim=(0, 100), xlabel="ply", ylabel="Black win rate (%)")
    ax.set_title(title.encode("ascii", "replace").decode("ascii"))  # the default font has no kana
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    atomic_write_png(path, fig)


def review_game(engine: AnalysisEngine, game: KifuRecord, playouts: int, per_batch: int, threshold: float,
                progress: bool = True) -> GameReview:
    plies = evaluate_positions(engine, game, playouts, per_batch, progress)
    return GameReview(game, plies, find_blunders(game, plies, threshold))


def default_out(record: str | os.PathLike[str]) -> Path:
    """`game.csa` -> `game-review.kif` beside it."""
    path = Path(record)
    return path.with_name(f"{path.stem}-review.kif")


def write_review(review: GameReview, out: str | os.PathLike[str], header: list[str]) -> None:
    write_annotated_kif(out, review.game, position_notes(review), header)
