"""Score of one engine against another in a shogiarena run, read from the run's game.db.

shogiarena's own summary counts games; a match that plays each opening twice with colours
swapped is better judged by pairs (pentanomial), as the gate does. This reads every finished game
of the run, keys each to its opening pair, and prints W-D-L, the per-game Elo interval and the
pair Elo interval (dlzero.gating.sprt), plus how many pairs were the same moves twice (two
deterministic engines that search alike repeat each other's games move for move).

    python scripts/arena_result.py RUN_DIR/game.db --engine tuned --versus default [--csv out.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

from dlzero.gating.sprt import elo_interval, pair_category, pair_elo_interval


def _sides(meta: dict) -> dict[str, str]:
    """{"black": name, "white": name}: the engine's name (SPSA variants share it; their display names differ)."""
    parts = json.loads(meta["_arena_participation"])
    return {p["role"]: p.get("engine_name") or p["engine_display_name"] for p in parts}


def read_games(db: Path) -> list[dict]:
    """Every game: its opening pair, sides, result and moves (shogiarena's move codes)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    moves: dict[int, list[int]] = defaultdict(list)
    for game_id, move in con.execute("select game_id, next_move from game_move order by game_id, ply"):
        moves[game_id].append(move)
    rows = con.execute("select id, game_result, initial_position_sfen, metadata_attributes_json from game")
    games = []
    for game_id, result, sfen, meta_text in rows:
        meta = json.loads(meta_text)
        schedule = json.loads(meta.get("_arena_schedule", "{}"))
        games.append({"result": result, "sides": _sides(meta),
                      "moves": tuple(moves[game_id]), "pair": (sfen, schedule.get("pair_index"))})
    con.close()
    return games


def points(game: dict, engine: str) -> float | None:
    """`engine`'s points in `game` (1, 0.5, 0), or None for an unfinished or unknown result."""
    result = game["result"]  # shogiarena's names: BLACK_WIN[_BY_...], WHITE_WIN[_BY_...], DRAW_BY_..., ERROR, ...
    if result.startswith("DRAW"):
        return 0.5
    for winner in ("black", "white"):
        if result.startswith(f"{winner.upper()}_WIN"):
            return 1.0 if game["sides"][winner] == engine else 0.0
    return None


def summarise(games: list[dict], engine: str, versus: str) -> dict:
    """W-D-L of `engine`, per-game and per-pair Elo intervals, and the count of pairs whose two games
    are the same moves (with colours swapped, so one win each)."""
    mine = [g for g in games if set(g["sides"].values()) == {engine, versus}]
    scored = [(g, points(g, engine)) for g in mine]
    unknown = sorted({g["result"] for g, p in scored if p is None})
    scored = [(g, p) for g, p in scored if p is not None]
    w = sum(p == 1.0 for _, p in scored)
    d = sum(p == 0.5 for _, p in scored)
    l = sum(p == 0.0 for _, p in scored)
    by_pair: dict[tuple, list[tuple[float, tuple]]] = defaultdict(list)  # (points, moves) of each game
    for g, p in scored:
        by_pair[g["pair"]].append((p, g["moves"]))
    complete = [games for games in by_pair.values() if len(games) == 2]
    pentanomial = [0] * 5
    for (p1, _), (p2, _) in complete:
        pentanomial[pair_category(p1 + p2)] += 1
    same = sum(1 for (_, m1), (_, m2) in complete if m1 == m2)
    return {"engine": engine, "versus": versus, "games": len(scored), "wins": w, "draws": d, "losses": l,
            "elo": elo_interval(w, d, l), "pairs": pentanomial, "pair_elo": pair_elo_interval(pentanomial),
            "identical_pairs": same, "unknown_results": unknown}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path, help="a shogiarena run's game.db")
    ap.add_argument("--engine", required=True, help="the engine whose score is printed")
    ap.add_argument("--versus", required=True, help="its opponent")
    ap.add_argument("--csv", type=Path, help="append one row (engine, versus, games, wins, draws, losses, Elo ...)")
    args = ap.parse_args()
    if args.engine == args.versus:
        raise SystemExit("--engine and --versus name one engine: give the match's two engines distinct names")
    s = summarise(read_games(args.db), args.engine, args.versus)
    elo, lo, hi = s["elo"]
    pelo, plo, phi = s["pair_elo"]
    print(f"{s['engine']} vs {s['versus']}: {s['games']} games, {s['wins']}-{s['draws']}-{s['losses']}; "
          f"Elo {elo:+.0f} [{lo:+.0f}, {hi:+.0f}] by games, {pelo:+.0f} [{plo:+.0f}, {phi:+.0f}] by "
          f"{sum(s['pairs'])} colour-swapped pairs {s['pairs']} (0..2 points); "
          f"{s['identical_pairs']} pairs the same moves twice")
    if s["unknown_results"]:
        print(f"warning: results not scored: {', '.join(s['unknown_results'])}")
    if args.csv:
        new = not args.csv.exists()
        with args.csv.open("a", newline="") as f:
            out = csv.writer(f)
            if new:
                out.writerow(["engine", "versus", "games", "wins", "draws", "losses", "elo", "elo_low", "elo_high",
                              "pairs", "pair_elo", "pair_elo_low", "pair_elo_high"])
            out.writerow([s["engine"], s["versus"], s["games"], s["wins"], s["draws"], s["losses"],
                          f"{elo:.1f}", f"{lo:.1f}", f"{hi:.1f}", " ".join(map(str, s["pairs"])),
                          f"{pelo:.1f}", f"{plo:.1f}", f"{phi:.1f}"])


if __name__ == "__main__":
    main()
