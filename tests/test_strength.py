"""Levels for people (USI `Strength`, dlzero.engine.strength): the knobs are monotone in the level, the draw
follows its weights over the level's candidate moves and never throws away a proven result, and a real engine
session plays fewer playouts and varied, legal moves at a low level."""

from __future__ import annotations

import io
import random
import re
from collections import Counter

import cshogi
import pytest

from dlzero.config import Config
from dlzero.engine.player import Analysis
from dlzero.engine.strength import FULL, level_candidates, level_playouts, level_temperature, weaken
from dlzero.search.result import MoveStat
from dlzero.usi import UsiEngine


def test_playouts_grow_and_temperature_falls_with_the_level():
    caps = [level_playouts(level) for level in range(1, FULL)]
    assert caps == sorted(caps) and len(set(caps)) == len(caps) and caps[0] <= 2 and caps[-1] >= 2000
    assert level_playouts(FULL) is None
    temps = [level_temperature(level) for level in range(1, FULL + 1)]
    assert temps == sorted(temps, reverse=True) and temps[0] > 0.5 and temps[-2] == temps[-1] == 0.0
    # the bottom draws hot over a few plausible moves, more of them level by level; the top over every move
    narrow = [level_candidates(level) for level in range(1, FULL + 1) if level_candidates(level) is not None]
    assert narrow == sorted(narrow) and narrow[0] >= 3 and temps[0] > 1.0
    assert level_candidates(FULL - 1) is None and level_candidates(FULL) is None
    for bad in (0, 21):
        with pytest.raises(ValueError, match="from 1"):
            level_playouts(bad)


def analysis(mate: int | None = None) -> Analysis:
    moves = [MoveStat(1, "7g7f", 60, 0.55, 0.5, None), MoveStat(2, "2g2f", 30, 0.52, 0.3, None),
             MoveStat(3, "5i5h", 10, 0.40, 0.1, None), MoveStat(4, "1g1f", 0, 0.1, 0.1, 0.0)]
    return Analysis(bestmove="7g7f", ponder="3c3d", pv=["7g7f", "3c3d"], moves=moves, mate=mate)


def test_the_draw_follows_visits_and_priors_at_the_levels_temperature():
    rng = random.Random(7)
    level = 1
    t = level_temperature(level)
    drawn = Counter(weaken(analysis(), level, rng).bestmove for _ in range(4000))
    weights = {"7g7f": 60.5 ** (1 / t), "2g2f": 30.3 ** (1 / t), "5i5h": 10.1 ** (1 / t)}
    total = sum(weights.values())
    assert set(drawn) == set(weights)  # 1g1f is proven lost: never drawn
    for move, w in weights.items():
        assert abs(drawn[move] / 4000 - w / total) < 0.03, (move, drawn)
    changed = weaken(analysis(), level, random.Random(3))
    while changed.bestmove == "7g7f":
        changed = weaken(analysis(), level, rng)
    assert changed.ponder is None and changed.pv == [changed.bestmove]
    for kept in (weaken(analysis(), 19, rng), weaken(analysis(mate=3), 1, rng)):
        assert kept.bestmove == "7g7f" and kept.ponder == "3c3d"  # temperature 0, and a proven win


def test_a_bottom_level_draws_only_among_its_candidates():
    """Level 1 considers `level_candidates(1)` moves: the most visited first, then by prior; the rest of the
    root's moves, however many, are never played."""
    k = level_candidates(1)
    files = "987654321"
    moves = [MoveStat(i, f"{files[i % 9]}g{files[i % 9]}f" if i < 9 else f"{files[i % 9]}i{files[i % 9]}h",
                      1 if i == 0 else 0, 0.5, 0.3 / (i + 1), None) for i in range(12)]
    result = Analysis(bestmove=moves[0].usi, ponder=None, pv=[moves[0].usi], moves=moves[::-1], mate=None)
    rng = random.Random(5)
    drawn = Counter(weaken(result, 1, rng).bestmove for _ in range(3000))
    assert set(drawn) == {m.usi for m in moves[:k]}, drawn


def session(model: str, strength: int, goes: int) -> list[str]:
    out = io.StringIO()
    cfg = Config()
    cfg.inference.threads = 1
    engine = UsiEngine(cfg, model, out)
    for command in ("usi", f"setoption name Strength value {strength}", "isready", "position startpos"):
        engine.handle(command)
    for _ in range(goes):
        engine.handle("go byoyomi 1000")
        engine._finish_search(wait=True)
    engine.handle("quit")
    return out.getvalue().splitlines()


def test_a_low_level_searches_little_and_varies_its_legal_moves(model):
    lines = session(model, 1, 12)
    assert "option name Strength type spin default 20 min 1 max 20" in lines
    moves = [line.split()[1] for line in lines if line.startswith("bestmove")]
    board = cshogi.Board()
    assert len(moves) == 12 and all(board.is_legal(board.move_from_usi(m)) for m in moves)
    assert len(set(moves)) > 1, moves  # the draw, not the search's one choice
    nodes = [int(m.group(1)) for line in lines if (m := re.search(r" nodes (\d+) ", line))]
    # the root's visits: each search adds at most the level's playouts to the tree it reuses
    assert nodes and nodes[0] <= level_playouts(1) + 1 and max(nodes) <= 12 * level_playouts(1) + 1, nodes
    assert any(line.startswith("info string Strength 1: plays") for line in lines)  # and it says so
    full = session(model, FULL, 3)
    assert sum(line.startswith("bestmove") for line in full) == 3
    assert not any("info string Strength" in line for line in full)  # the search's own move every time
    refused = session(model, 0, 0)
    assert any("Strength" in line and "error" in line for line in refused), refused
