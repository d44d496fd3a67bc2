"""Handicap starts (駒落ち): the table against cshogi's own, the shipped suite, `dlzero match --start`, and the
shipped network, as the side with more pieces, beating `alphabeta:1000` from each of the four common starts."""

from __future__ import annotations

import csv

import cshogi
import cshogi.KIF
import pytest

from dlzero.cli import main
from dlzero.config import load_config
from dlzero.errors import ConfigError
from dlzero.gating.match import play_match
from dlzero.play.alphabeta import AlphaBeta
from dlzero.play.handicap import ENGLISH, HANDICAPS, handicap_line, handicap_sfen
from dlzero.play.openings import load_openings

FULL_ARMY = 20


def test_every_start_is_cshogis_and_the_giver_lacks_exactly_the_named_pieces():
    oracle = {k: v for k, v in cshogi.KIF.Parser.HANDYCAP_SFENS.items() if v and k != "平手"}
    assert oracle == HANDICAPS
    removed = {"香落ち": 1, "右香落ち": 1, "角落ち": 1, "飛車落ち": 1, "飛香落ち": 2, "二枚落ち": 2, "三枚落ち": 3,
               "四枚落ち": 4, "五枚落ち": 5, "左五枚落ち": 5, "六枚落ち": 6, "八枚落ち": 8, "十枚落ち": 10}
    for name, sfen in HANDICAPS.items():
        board = cshogi.Board(sfen)
        assert board.turn == cshogi.WHITE and board.legal_moves, name
        pieces = board.pieces
        black = sum(1 for p in pieces if 0 < p < 16)
        white = sum(1 for p in pieces if p > 16)
        assert (black, FULL_ARMY - white) == (FULL_ARMY, removed[name]), name
    assert handicap_sfen("rook") == handicap_sfen("飛車落ち") == handicap_sfen("ROOK")
    assert set(ENGLISH.values()) == set(HANDICAPS)


def test_a_name_that_is_no_start_lists_the_starts():
    with pytest.raises(ConfigError, match="飛車落ち \\(rook\\)"):
        handicap_sfen("queen")


def test_the_shipped_suite_holds_every_start_by_its_bare_name():
    assert load_openings("handicap.txt") == [handicap_line(name) for name in HANDICAPS]


def test_dlzero_match_plays_from_a_handicap_start(tmp_path, capsys):
    records = tmp_path / "games"
    assert main(["match", "random", "random", "--start", "飛車落ち", "--games", "2", "--records", str(records),
                 "--csv", str(tmp_path / "m.csv"), "--set", "gate.max_moves=8"]) == 0
    [row] = list(csv.DictReader((tmp_path / "m.csv").open(encoding="utf-8")))
    assert row["start"] == "飛車落ち"  # the CSV says which start its figure is from
    out = capsys.readouterr().out
    assert "2 games" in out
    # one game each way: A gives the handicap in the pair's second game (White) and takes it in the first
    assert sum(int(x) for x in out.split("giving it ")[1].split(",")[0].split("-")) == 1
    assert sum(int(x) for x in out.split("taking it ")[1].split()[0].split("-")) == 1
    for path in sorted(records.glob("*.csa")):
        [game] = cshogi.CSA.Parser.parse_file(str(path))
        assert game.sfen == HANDICAPS["飛車落ち"], path
    assert main(["match", "random", "random", "--start", "queen"]) == 2


@pytest.mark.parametrize("name", ["香落ち", "角落ち", "飛車落ち", "二枚落ち"])
def test_the_shipped_network_with_more_pieces_beats_alphabeta_1000(name):
    from dlzero.engine.shipped import resolve_model
    from dlzero.inference import load_model

    cfg = load_config(None, ["gate.max_moves=320", "gate.playouts=64", "inference.threads=1"])
    choice = resolve_model(None, cfg)
    if choice is None:
        pytest.skip("no network ships in this checkout")
    net = load_model(choice.path, cfg.inference)
    try:
        result = play_match(net, AlphaBeta(1000), 2, cfg, openings=[handicap_line(name)], parallel=2)
    finally:
        net.close()
    [black] = [g for g in result.games if g.a_is_black]  # the network on the side with the full army
    assert black.winner == cshogi.BLACK, (name, black.reason, len(black.moves))
