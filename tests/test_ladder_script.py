"""scripts/ladder.py: it refuses a ladder without `random` before any game; its report puts the scores first
and gives an Elo only across informative pairings; its default rungs are spaced to avoid sweeps."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from dlzero.gating.elo_fit import GameResult
from dlzero.player_names import parse_anchor

ROOT = Path(__file__).resolve().parents[1]


def test_a_ladder_without_random_is_refused_before_any_game(tmp_path):
    work = tmp_path / "ladder"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "ladder.py"), "--rungs", "alphabeta:1,alphabeta:10",
                           "--extra", "alphabeta:1,alphabeta:10", "--work", str(work), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "'random' pinned at 0" in proc.stderr and "Traceback" not in proc.stderr
    assert not work.exists() and not (tmp_path / "out.csv").exists()  # nothing played, nothing written


def _ladder_module():
    spec = importlib.util.spec_from_file_location("ladder_script", ROOT / "scripts" / "ladder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_report_gives_scores_first_and_elo_only_across_informative_pairings():
    ladder = _ladder_module()
    wdl = {("alphabeta:1", "random"): (20, 0, 0), ("alphabeta:10", "alphabeta:1"): (15, 0, 5),
           ("alphabeta:100", "alphabeta:10"): (19, 0, 1), ("gpsshogi:depth=4", "alphabeta:100"): (20, 0, 0)}
    rows, games = [], []
    for (player, opponent), (w, d, lo) in wdl.items():
        score, low, high = ladder.score_interval(w, d, lo)
        rows.append({"player": player, "opponent": opponent, "wins": w, "draws": d, "losses": lo,
                     "score": f"{score:.3f}", "score_low": f"{low:.3f}", "score_high": f"{high:.3f}",
                     "informative": int(w + d > 0 and lo + d > 0)})
        games += [GameResult(player, opponent, 1.0)] * w + [GameResult(player, opponent, 0.0)] * lo
    lines = ladder.report_tables(rows, games, ["random", "alphabeta:1", "alphabeta:10", "alphabeta:100",
                                               "gpsshogi:depth=4"], 1.0)
    table = lines.index("| player | opponent | W-D-L | score | 95 % interval | informative |")
    assert lines[table + 2] == "| `alphabeta:1` | `random` | 20-0-0 | 1.000 | [0.839, 1.000] | no: a sweep |"
    assert lines[table + 3] == "| `alphabeta:10` | `alphabeta:1` | 15-0-5 | 0.750 | [0.531, 0.888] | yes |"
    # 15-5 and 19-1 join three rungs under one fit with alphabeta:1 at 0; the sweeps' ends get no Elo
    elo = next(i for i, line in enumerate(lines) if line.startswith("Elo ("))
    assert elo > table + 5 and lines[elo].startswith("Elo (1 virtual draw per pairing, alphabeta:1 = 0): one "
                                                     "maximum-likelihood fit over the 3 rungs'")
    assert "not connected to random" in lines[elo]
    rated = [line.split("|")[1].strip(" `") for line in lines[elo + 4:elo + 7]]
    assert rated == ["alphabeta:1", "alphabeta:10", "alphabeta:100"] and "(pinned)" in lines[elo + 4]
    assert lines[-1] == ("Not connected (sweeps only), so no Elo: `gpsshogi:depth=4` 20-0-0; `random` 0-0-20 "
                         "(W-D-L over all its games).")
    assert sum(line.startswith("Elo (") for line in lines) == 1


def test_default_rungs_are_anchor_names_and_neighbours_are_spaced_in_time():
    ladder = _ladder_module()
    for name in ladder.RUNGS + [n for pair in ladder.EXTRA for n in pair.split(",")]:
        parse_anchor(name)
    skill20 = [int(r.rpartition("=")[2]) for r in ladder.RUNGS if r.startswith("fairy-stockfish:skill=20:byoyomi=")]
    # the 2026-12-02 pass swept 100 -> 300 -> 1000 ms: no neighbour is now more than ~2.5x the last one's
    # thinking time (the engine keeps ~75 ms of a byoyomi back)
    assert skill20 == sorted(skill20) and {100, 300, 1000} <= set(skill20)
    assert all((b - 75) / (a - 75) <= 2.5 for a, b in zip(skill20, skill20[1:], strict=False))
