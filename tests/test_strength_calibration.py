"""scripts/strength_calibration.py: its tally, CSV and CSA records on stored games, and the committed table.

Why the committed table is tested: docs/usi-options.md quotes it as the proof that the `Strength` levels are
monotone, so a rerun that writes a level measurably weaker than the level below it must fail here."""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import cshogi

from dlzero.engine.strength import level_playouts, level_temperature

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "benchmarks" / "strength-levels.csv"


def _script():
    spec = importlib.util.spec_from_file_location("strength_calibration", ROOT / "scripts" / "strength_calibration.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("strength_calibration", module)
    spec.loader.exec_module(module)
    return module


sc = _script()
L3, L4 = sc.level_player(3, 5000, "dlzero"), sc.level_player(4, 5000, "dlzero")
GAME = "7g7f 3c3d 8h2b+ 3a2b 2g2f 8c8d"  # six legal plies: a bishop exchange


def _game(index: int, black: str, winner: str | None, move_ms: list | None = None) -> dict:
    return {"game": index, "black": black, "white": "?", "winner": winner,
            "reason": "resign" if winner else "max_moves", "plies": 6, "start_sfen": cshogi.STARTING_SFEN,
            "opening_plies": 2, "moves": GAME, "move_ms": move_ms or []}


RUNG = "alphabeta:1000"
LADDER = [{"player": RUNG, "opponent": "random", "wins": "5", "draws": "0", "losses": "1"}]


def _batches(draw: bool = True) -> list:
    """L4 vs L3: 2 wins and a loss for L4; L3 vs alphabeta:1000: a win and a draw (`draw`) or two wins; the
    slowest L4 move 900 ms."""
    levels = SimpleNamespace(players=(L4, L3), games=[_game(0, L4, "black", [900, 50, 10, 20, 30, 40]),
                                                      _game(1, L3, "white"), _game(2, L3, "black")])
    rung = SimpleNamespace(players=(L3, RUNG), games=[_game(0, L3, "black"),
                                                      _game(1, RUNG, None if draw else "white")])
    return [(Path("a.json"), levels), (Path("b.json"), rung)]


def test_level_names_round_trip() -> None:
    assert sc.player_level(L3) == 3 and sc.player_level("alphabeta:100") is None
    assert sc.opponent_label(L4) == "strength:4" and sc.opponent_label("random") == "random"
    assert sc.parse_levels("1-3,7") == [1, 2, 3, 7]


def test_rows_count_each_game_once_from_the_stronger_level() -> None:
    rows = sc.pairing_rows(_batches(), LADDER)
    by = {(r["level"], r["opponent"]): r for r in rows}
    assert set(by) == {(3, RUNG), (4, "strength:3")}  # no row of L3 against L4: that game is L4's row
    four = by[(4, "strength:3")]
    assert (four["wins"], four["draws"], four["losses"], four["score"]) == (2, 0, 1, "0.667")
    # 900 ms is L4's own move (ply 0, Black)
    assert four["playouts"] == level_playouts(4) and four["slowest_move_ms"] == 900
    three = by[(3, RUNG)]
    assert (three["wins"], three["draws"], three["losses"], three["elo_diff"]) == (1, 1, 0, "+191")
    assert int(four["level_elo"]) > int(three["level_elo"]) > 0  # on the ladder's scale, through its row
    assert int(three["level_elo_low"]) < int(three["level_elo"]) < int(three["level_elo_high"])
    assert sc.pairing_rows(_batches())[0]["level_elo"] == ""  # without the ladder nothing joins them to random


def test_a_sweep_has_no_point_elo_and_leaves_the_levels_off_the_scale() -> None:
    by = {(r["level"], r["opponent"]): r for r in sc.pairing_rows(_batches(draw=False), LADDER)}
    three = by[(3, RUNG)]
    assert (three["wins"], three["elo_diff"], three["elo_diff_high"]) == (2, "", "+inf")
    assert float(three["score_low"]) > 0.0 and three["level_elo"] == ""  # only a sweep joins them to the ladder


def test_csv_round_trip_and_monotonicity_check(tmp_path: Path) -> None:
    rows = sc.pairing_rows(_batches())
    sc.write_csv(tmp_path / "t.csv", rows)
    back = sc.read_csv(tmp_path / "t.csv")
    assert list(back[0]) == sc.COLUMNS and [r["opponent"] for r in back] == [RUNG, "strength:3"]
    assert sc.not_monotone(back) == []
    losing = dict(back[1], wins="0", losses="20", score="0.000", score_low="0.000", score_high="0.161")
    assert sc.not_monotone([losing]) == ["level 4 scores 0.000 [0.000, 0.161] against level 3"]


def test_csa_records_read_back_with_their_result(tmp_path: Path) -> None:
    records = sc.csa_records(_batches())
    assert len(records) == 5
    sc.write_tar(tmp_path / "g.tar.xz", records)
    with tarfile.open(tmp_path / "g.tar.xz") as tar:
        names = tar.getnames()
        text = tar.extractfile(names[0]).read().decode()
    parser = cshogi.CSA.Parser()
    parser.parse_csa_str(text)
    assert len(parser.moves) == 6 and parser.names[0] in ("strength:3", "strength:4", RUNG)
    assert io.StringIO(text).readline().startswith("V2.2")


def test_games_carried_from_a_tar_count_as_before_and_changed_levels_drop_out(tmp_path: Path) -> None:
    """`--carry`: an earlier table's games read back from its tar give the same rows; a level left out of
    `--carry-levels` (its knobs changed) takes its games with it; carried and new games of one pairing are
    numbered apart in the new tar."""
    batches = _batches()
    for _, batch in batches:  # a CSA resignation is by the side to move: Black wins after an odd ply count
        for g in batch.games:
            if g["winner"] == "black":
                g["moves"], g["plies"] = " ".join(GAME.split()[:5]), 5
    sc.write_tar(tmp_path / "g.tar.xz", sc.csa_records(batches))
    carried = sc.carried_batches(tmp_path / "g.tar.xz", [3, 4], 5000)
    assert len(carried) == 5
    keys = ("level", "opponent", "wins", "draws", "losses", "slowest_move_ms")
    before = [{k: r[k] for k in keys} for r in sc.pairing_rows(batches, LADDER)]
    assert [{k: r[k] for k in keys} for r in sc.pairing_rows(carried, LADDER)] == before
    only_three = sc.carried_batches(tmp_path / "g.tar.xz", [3], 5000)
    assert [(r["level"], r["opponent"], r["wins"], r["draws"]) for r in sc.pairing_rows(only_three, LADDER)] \
        == [(3, RUNG, 1, 1)]
    names = [name for name, _ in sc.csa_records(carried + batches)]
    assert len(names) == len(set(names)) == 10


def test_committed_table_is_monotone_by_level() -> None:
    rows = sc.read_csv(TABLE)
    assert rows and list(rows[0]) == sc.COLUMNS
    assert sc.not_monotone(rows) == []
    chain = {int(r["level"]) for r in rows if r["opponent"] == f"strength:{int(r['level']) - 1}"}
    levels = {int(r["level"]) for r in rows}
    assert chain == levels - {min(levels)}  # every measured level above the first was played against the one below
    # the cap, not the clock, ended each search: a clock-bound move would end at 4,700 ms (byoyomi 5,000 less the
    # 300 ms ByoyomiMargin of the day it was measured)
    for r in rows:
        assert r["slowest_move_ms"] == "" or int(r["slowest_move_ms"]) < 4700
    # the table measures the levels as the engine plays them now: a change of knobs needs the games again
    for r in rows:
        level = int(r["level"])
        assert (int(r["playouts"]), float(r["temperature"])) == (level_playouts(level),
                                                                 round(level_temperature(level), 3)), r


class _Recorder:
    """A Session that plays nothing: each top-up is recorded and scored even (no rung moves)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    def top_up(self, me: str, opponent: str, games: int) -> tuple[int, int, int]:
        self.calls.append((sc.short(me), sc.short(opponent), games))
        return games // 2, 0, games - games // 2


def test_chain_games_top_up_only_the_level_below_pairings_last() -> None:
    session = _Recorder()
    sc.measure(session, [1, 2, 3], 5000, [6, 12], "alphabeta:10", chain_games=30)
    assert session.calls[:3] == [("L1", "alphabeta:10", 6), ("L2", "alphabeta:10", 6), ("L3", "alphabeta:10", 6)]
    assert session.calls[-2:] == [("L2", "L1", 30), ("L3", "L2", 30)]  # the neighbours, after every phase
    assert ("L2", "L1", 12) in session.calls and not any(g == 30 and "L" not in o for _, o, g in session.calls)
