"""Opening suites: the shipped suite, balance, generation, one distinct start per pair, `dlzero openings`."""

from __future__ import annotations

import cshogi
import numpy as np
import pytest
from conftest import TINY_MODEL

from dlzero.cli import main
from dlzero.config import ModelConfig, SearchConfig
from dlzero.errors import ConfigError
from dlzero.inference import load_model
from dlzero.model import new_model, save_model
from dlzero.play.material import SUITE_VALUES, material
from dlzero.play.openings import (
    SuiteSettings,
    generate_suite,
    is_balanced,
    load_openings,
    match_starts,
    material_balance,
    network_policy,
    position_key,
)
from dlzero.position import parse_position
from dlzero.search import Search


def test_shipped_suite_is_large_distinct_and_balanced():
    lines = load_openings(None)
    assert len(lines) >= 1000
    boards = [parse_position(line) for line in lines]
    assert len({position_key(b) for b in boards}) == len(lines)  # no duplicates, no transpositions
    assert all(is_balanced(b, 0.0) for b in boards)
    assert {b.turn for b in boards} == {cshogi.BLACK, cshogi.WHITE}


def test_material_and_balance_by_hand():
    """Material in centipawns by the suite's values (gold 600, rook 1000), the balance in pawns."""
    assert material(cshogi.Board(), SUITE_VALUES) == 0
    assert material(cshogi.Board("4k4/9/9/9/9/9/9/9/4K4 b GR2p 1"), SUITE_VALUES) == 600 + 1000 - 200
    assert material(cshogi.Board("4k4/9/9/9/9/9/9/9/4K4 w GR2p 1"), SUITE_VALUES) == -(600 + 1000 - 200)
    assert material_balance(parse_position("startpos moves 7g7f 3c3d 8h2b+")) == 0.0  # 3a2b takes back
    # White's bishop went to 7g unprotected: 8h takes the horse (10) and gains a bishop in hand (8)
    hung = parse_position("startpos moves 7g7f 3c3d 2h7h 2b7g+")
    assert material_balance(hung) == 10 + 8 - 2 and not is_balanced(hung, 1.0)
    # in check, or able to mate: not a fair start whatever the material
    assert not is_balanced(cshogi.Board("4k4/4G4/9/9/9/9/9/9/4K4 w - 1"), 100.0)
    assert not is_balanced(cshogi.Board("4k4/9/4P4/9/9/9/9/9/4K4 b G 1"), 100.0)


def test_generated_suites_are_reproducible_distinct_and_filtered():
    settings = SuiteSettings(min_plies=3, max_plies=6, margin=0.0)
    lines = generate_suite(60, 7, settings, progress=False)
    assert lines == generate_suite(60, 7, settings, progress=False)
    assert lines != generate_suite(60, 8, settings, progress=False)
    boards = [parse_position(line) for line in lines]
    assert len({position_key(b) for b in boards}) == 60
    assert all(3 <= len(b.history) <= 6 and is_balanced(b, 0.0) for b in boards)
    white_only = generate_suite(20, 7, settings, value_ok=lambda b: b.turn == cshogi.WHITE, progress=False)
    assert all(len(parse_position(line).history) % 2 == 1 for line in white_only)
    with pytest.raises(ConfigError, match="found only"):
        generate_suite(5, 0, settings, value_ok=lambda b: False, max_tries=50, progress=False)


def test_generation_can_start_from_given_lines():
    start = "startpos moves 2g2f 8c8d 2f2e 8d8e"
    lines = generate_suite(30, 1, SuiteSettings(2, 2, 0.0), starts=[start], progress=False)
    prefix = list(parse_position(start).history)
    for line in lines:
        moves = list(parse_position(line).history)
        assert 2 <= len(moves) <= 6
        assert moves[:-2] == prefix[: len(moves) - 2]  # a prefix of the start line, then two sampled plies


def test_network_policy_follows_the_priors_and_temperature(tmp_path):
    cfg = ModelConfig(**TINY_MODEL)
    save_model(new_model(cfg, seed=0), tmp_path / "m.pt")
    evaluator = load_model(tmp_path / "m.pt")
    search = Search(evaluator, SearchConfig(root_mate_depth=0, leaf_mate_depth=0))
    board = cshogi.Board()
    moves, sharp = network_policy(search, 0.5)(board)
    moves_flat, flat = network_policy(search, 2.0)(board)
    assert moves == moves_flat and sorted(moves) == sorted(board.legal_moves)
    assert sharp.sum() == pytest.approx(1.0) and flat.sum() == pytest.approx(1.0)
    assert sharp.max() > flat.max() and np.argmax(sharp) == np.argmax(flat)
    lines = generate_suite(5, 0, SuiteSettings(2, 4, 0.0), policy=network_policy(search, 1.0), progress=False)
    assert len(lines) == 5


def test_match_starts_use_each_line_once_and_vary_beyond():
    suite = generate_suite(10, 3, SuiteSettings(4, 6, 0.0), progress=False)
    first = match_starts(suite, 6, seed=1)
    second = match_starts(suite, 4, seed=1, offset=6)  # the next gate
    keys = [position_key(b) for b in first + second]
    assert len(set(keys)) == 10 == len(keys)  # together they use the whole suite, each line once
    assert {position_key(parse_position(line)) for line in suite} == set(keys)
    long = match_starts(suite, 35, seed=1)
    assert len({position_key(b) for b in long}) == 35  # 25 seeded variations, all new
    assert [position_key(b) for b in long] == [position_key(b) for b in match_starts(suite, 35, seed=1)]
    assert match_starts(suite, 3, seed=2) != match_starts(suite, 3, seed=1)


def test_load_openings_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_openings(tmp_path / "none.txt")
    (tmp_path / "empty.txt").write_text("# only a comment\n\n")
    with pytest.raises(ConfigError, match="holds no positions"):
        load_openings(tmp_path / "empty.txt")


def test_openings_command(tmp_path, capsys):
    out = tmp_path / "suite.txt"
    assert main(["openings", "--out", str(out), "--count", "25", "--seed", "4", "--max-plies", "6",
                 "--set", "gate.suite_min_plies=2"]) == 0
    text = out.read_text()
    assert text.startswith("# dlzero opening suite")
    assert "made by: dlzero openings --count 25 --seed 4 --max-plies 6 --set gate.suite_min_plies=2" in text
    lines = load_openings(out)
    assert len(lines) == 25 and all(2 <= len(parse_position(line).history) <= 6 for line in lines)
    assert main(["openings", "--out", str(out), "--count", "0"]) == 2
    assert "--count must be > 0" in capsys.readouterr().err
