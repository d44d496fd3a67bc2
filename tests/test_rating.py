"""`dlzero rate`: anchored ratings of a run's models, stored games, top-ups, elo.csv, outside engines."""

from __future__ import annotations

import csv
import json
import re
import sys

import cshogi
import pytest
from conftest import TINY_MODEL_SETS

from dlzero.cli import main
from dlzero.config import load_config
from dlzero.errors import ConfigError
from dlzero.gating.elo_fit import GameResult, fit_connected
from dlzero.gating.match import play_match
from dlzero.gating.rating import (
    RatingBatch,
    fit_run,
    load_batches,
    pair_tally,
    plan_pairings,
    promoted_generations,
    rate,
    select_generations,
    write_elo_csv,
)
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.play import Game, RandomMover
from dlzero.play.usi_opponent import UsiClientError, UsiOpponent
from dlzero.player_names import parse_engine_entry
from dlzero.rundir import RunDir
from dlzero.runfiles import ELO_COLUMNS

SMALL = [*TINY_MODEL_SETS, "inference.threads=1", "gate.max_moves=40", "rate.games=2",
         "rate.playouts=4", "rate.anchors=[random,alphabeta:100,gen-0000]"]


@pytest.fixture()
def run(tmp_path):
    cfg = load_config(None, SMALL)
    rd = RunDir.create(tmp_path / "run", cfg)
    for g in (0, 1):
        save_model(new_model(cfg.model, seed=g), rd.model_path(g), ModelMetadata(generation=g))
    rd.set_best(1)
    return rd, cfg


def _games_per_pair(rd: RunDir) -> dict[frozenset, int]:
    out: dict[frozenset, int] = {}
    for _, batch in load_batches(rd)[0]:
        key = frozenset(batch.players)
        out[key] = out.get(key, 0) + len(batch.games)
    return out


def test_rate_tops_up_accumulates_and_refits_reproducibly(run):
    rd, cfg = run
    first = rate(rd, cfg, [1], progress=False)
    pairs = {frozenset(p) for p in [("alphabeta:100", "random"), ("gen-0000", "random"),
                                    ("gen-0000", "alphabeta:100"), ("gen-0001", "random"),
                                    ("gen-0001", "alphabeta:100"), ("gen-0001", "gen-0000")]}
    assert _games_per_pair(rd) == dict.fromkeys(pairs, 2)
    assert first.played == 12 and first.problems == []
    by = first.ratings.by_player()
    assert set(by) == {"random", "alphabeta:100", "gen-0000", "gen-0001"} and by["random"].elo == 0.0

    again = rate(rd, cfg, [1], progress=False)  # nothing missing: no game played, the same list
    assert again.played == 0 and again.ratings == first.ratings

    cfg.rate.games = 4  # raising the target adds games; the old ones stay
    more = rate(rd, cfg, [1], progress=False)
    assert more.played == 12 and _games_per_pair(rd) == dict.fromkeys(pairs, 4)
    # every game is stored with colours swapped in pairs, and the top-up moved on to other openings
    for _, batch in load_batches(rd)[0]:
        assert [g["black"] for g in batch.games] == [batch.players[0], batch.players[1]]
        a, b = batch.games
        assert a["start_sfen"] == b["start_sfen"]
        assert a["moves"].split()[:a["opening_plies"]] == b["moves"].split()[:b["opening_plies"]]
        board = cshogi.Board(a["start_sfen"])
        for usi in a["moves"].split():
            move = board.move_from_usi(usi)
            assert board.is_legal(move)
            board.push(move)
    openings = {}
    for _, batch in load_batches(rd)[0]:
        g = batch.games[0]
        opening = (g["start_sfen"], " ".join(g["moves"].split()[:g["opening_plies"]]))
        openings.setdefault(frozenset(batch.players), []).append(opening)
    assert all(len(set(v)) == 2 for v in openings.values())

    with (rd.metrics_dir / "elo.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert tuple(reader.fieldnames) == ELO_COLUMNS
    by_row = {r["player"]: r for r in rows}
    assert by_row["gen-0001"]["generation"] == "1" and by_row["gen-0001"]["anchor"] == "0"
    assert by_row["gen-0000"]["anchor"] == "1" and by_row["gen-0000"]["wall_seconds"] == "0"
    assert by_row["alphabeta:100"]["generation"] == "" and by_row["alphabeta:100"]["wall_seconds"] == ""
    assert by_row["random"]["elo"] == "0.0" and int(by_row["random"]["games"]) == 12
    assert float(by_row["gen-0001"]["elo_low"]) <= float(by_row["gen-0001"]["elo"]) \
        <= float(by_row["gen-0001"]["elo_high"])


def test_elo_csv_gives_an_elo_only_where_informative_pairings_connect(run):
    rd, _ = run

    def games(a: str, b: str, w: int, d: int, lo: int) -> list[GameResult]:
        return [GameResult(a, b, 1.0)] * w + [GameResult(a, b, 0.5)] * d + [GameResult(a, b, 0.0)] * lo

    fit = fit_connected(games("alphabeta:100", "random", 20, 0, 0) + games("gen-0000", "alphabeta:100", 8, 2, 10)
                        + games("gen-0001", "gen-0000", 12, 0, 8) + games("gen-0001", "random", 20, 0, 0),
                        prior_draws=0.5, order=["random", "alphabeta:100", "gen-0000"])
    write_elo_csv(rd, fit, {"random", "alphabeta:100", "gen-0000"})
    with rd.elo_csv.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = {r["player"]: r for r in reader}
    assert tuple(reader.fieldnames) == ELO_COLUMNS and list(rows) == ["gen-0000", "gen-0001", "alphabeta:100",
                                                                      "random"]
    # random took no game and drew none: no Elo, its record instead
    assert {k: rows["random"][k] for k in ("elo", "elo_low", "elo_high", "relative_to", "games", "wins", "draws",
                                           "losses")} == {"elo": "", "elo_low": "", "elo_high": "",
                                                          "relative_to": "", "games": "40", "wins": "0",
                                                          "draws": "0", "losses": "40"}
    # the others are measured from the first anchor connected to them, under the fit's prior
    assert all(rows[p]["relative_to"] == "alphabeta:100" and rows[p]["prior_draws"] == "0.5"
               for p in ("alphabeta:100", "gen-0000", "gen-0001"))
    assert rows["alphabeta:100"]["elo"] == "0.0" and float(rows["gen-0001"]["elo"]) > float(rows["gen-0000"]["elo"])
    assert (rows["gen-0001"]["games"], rows["gen-0001"]["wins"], rows["gen-0001"]["losses"]) == ("40", "32", "8")


def test_corrupt_file_is_reported_and_the_rest_still_counts(run):
    rd, cfg = run
    rate(rd, cfg, [0], progress=False)
    good = fit_run(rd, cfg)
    bad = rd.rating_dir / "zz-broken.json"
    bad.write_text('{"format": "dlzero-rating-games", "version": 1, "players": ["a"')
    other = rd.rating_dir / "zz-wrong.json"
    other.write_text(json.dumps({"format": "dlzero-rating-games", "version": 1, "players": ["x", "random"],
                                 "settings": {}, "games": [{"black": "x", "white": "y", "winner": "black"}]}))
    report = fit_run(rd, cfg)
    assert report.ratings == good.ratings
    assert len(report.problems) == 2 and str(bad) in report.problems[0] and "zz-wrong.json" in report.problems[1]
    assert "game 0 is malformed" in report.problems[1]


def test_games_at_other_playouts_are_left_out(run):
    rd, cfg = run
    rate(rd, cfg, [0], progress=False)
    cfg.rate.playouts = 8
    report = fit_run(rd, cfg)
    assert report.left_out == 4  # gen-0000 vs random and vs alphabeta:100: another player now
    assert [(p.player, p.opponent, p.games) for p in report.ratings.pairings] == [("alphabeta:100", "random", 2)]


def test_games_at_other_search_settings_are_left_out_and_old_batches_still_count(run):
    rd, cfg = run
    rate(rd, cfg, [0], progress=False)
    stored = [path for path, batch in load_batches(rd)[0] if "gen-0000" in batch.players]
    assert stored and all(json.loads(p.read_text())["settings"]["search"]["leaf_mate_depth"] == 3 for p in stored)
    cfg.search.leaf_mate_depth = 7  # another player now, as another playout count would be
    report = fit_run(rd, cfg)
    assert report.left_out == 4
    assert rate(rd, cfg, [0], progress=False).played == 4  # the pairings are played again at the new settings
    cfg.search.eval_streams = 3  # speed only: the same player
    assert fit_run(rd, cfg).left_out == 4
    # a batch stored before the search settings were recorded matches on its playouts, as it always did
    for path in stored:
        data = json.loads(path.read_text())
        del data["settings"]["search"]
        path.write_text(json.dumps(data))
    assert fit_run(rd, cfg).left_out == 0


def test_cli_json_and_table(run, capsys):
    rd, _ = run
    args = ["rate", "--run", str(rd.root), "--generations", "1", "--no-progress"] + \
        [x for kv in SMALL for x in ("--set", kv)]
    assert main(args + ["--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    rows = [json.loads(line) for line in lines]
    assert {r["player"] for r in rows} == {"random", "alphabeta:100", "gen-0000", "gen-0001"}
    assert all(set(r) == {"player", "games", "wins", "draws", "losses", "elo", "elo_low", "elo_high", "relative_to",
                          "prior_draws"} for r in rows)
    assert all(r["games"] == r["wins"] + r["draws"] + r["losses"] and r["prior_draws"] == 1.0 for r in rows)
    # an Elo names its zero, and only a player of no informative pairing has none
    assert all((r["elo"] is None) == (r["relative_to"] is None) for r in rows)
    assert main(args + ["--fit-only"]) == 0
    out = capsys.readouterr().out.splitlines()
    # what the games say first: a W-D-L, score and interval line per pairing (6), then Elo under its prior
    # and zero, or "not connected" for players of sweeps only
    assert out[0].split()[:4] == ["player", "opponent", "W-D-L", "score"]
    pairing = re.compile(r"\S+ +\S+ +\d+-\d+-\d+ +[01]\.\d{3}  \[[01]\.\d{3}, [01]\.\d{3}\]")
    assert all(pairing.match(line) for line in out[1:7]) and out[7] == ""
    headers = [line for line in out[8:] if line.startswith(("Elo (", "not connected"))]
    assert headers and out[8] == headers[0]
    assert all(h.startswith(("Elo (1 virtual draw per pairing, ", "not connected (sweeps only)")) for h in headers)
    # the one-config rule of every --run command: flags land in the run's config.yaml, --config is ignored
    other = rd.root.parent / "other.yaml"
    other.write_text("rate:\n  games: 9\n")
    assert main(["rate", "--run", str(rd.root), "--fit-only", "--sample", "3", "--config", str(other)]) == 0
    assert "using its config.yaml" in capsys.readouterr().err
    saved = RunDir.open(rd.root).config().rate
    assert (saved.sample, saved.games, saved.playouts) == (3, 2, 4)


def test_pairings_and_model_selection(run):
    rd, cfg = run
    pairs = plan_pairings(["random", "alphabeta:100", "alphabeta:1000", "gen-0000"], ["yane"], ["gen-0003"])
    assert pairs[:3] == [("alphabeta:100", "random"), ("alphabeta:1000", "alphabeta:100"),
                         ("yane", "alphabeta:1000")]
    assert ("gen-0000", "random") in pairs and ("gen-0003", "gen-0000") in pairs and ("gen-0003", "yane") in pairs
    assert len(pairs) == len({frozenset(p) for p in pairs}) == 3 + 4 + 5
    for g in range(2, 9):
        save_model(new_model(cfg.model, seed=g), rd.model_path(g), ModelMetadata(generation=g))
    rd.metrics_dir.mkdir(parents=True, exist_ok=True)
    (rd.metrics_dir / "ratings.csv").write_text(
        "generation,opponent,decision,promoted\n" + "".join(
            f"{g},0,x,{int(g % 2 == 0)}\n" for g in range(2, 9)))
    assert promoted_generations(rd) == [0, 1, 2, 4, 6, 8]  # 1 is best.json's
    rd.set_best(6)
    # every-3: generations not divisible by 3 were promoted without a match, up to the best (6)
    assert promoted_generations(rd, "every-3") == [0, 1, 2, 4, 5, 6, 8]
    assert promoted_generations(rd, "off") == [0, 1, 2, 3, 4, 5, 6, 8]
    cfg.rate.sample = 3
    assert select_generations(rd, cfg) == [0, 4, 8]
    cfg.rate.models, cfg.rate.sample = "all", 0
    assert select_generations(rd, cfg) == list(range(9))


def test_engine_spec():
    engine = parse_engine_entry("yane=/opt/y/run --threads 2")
    assert (engine.label(), engine.value, engine.canonical()) == ("yane", "/opt/y/run --threads 2",
                                                                  "yane=/opt/y/run --threads 2")
    for bad in ("noequals", "=cmd", "random=cmd", "alphabeta:5=x", "a b=x"):
        with pytest.raises(ValueError, match="engine"):
            parse_engine_entry(bad)
        with pytest.raises(ConfigError, match="rate.engines"):
            load_config(None, [f"rate.engines=['{bad}']"])


def test_outside_usi_engine_plays_whole_games(run):
    """`dlzero usi` on a tiny random model, driven as an outside engine."""
    rd, cfg = run
    command = f"{sys.executable} -m dlzero.usi --model {rd.model_path(0)} --threads 1"
    engine = UsiOpponent("dlzero-usi", command, go="nodes 4", timeout_s=60)
    cfg.gate.max_moves = 24
    try:
        result = play_match(engine, RandomMover(1), 2, cfg, parallel=2, names=("usi", "random"))
    finally:
        engine.close()
    assert result.n_games == 2
    for game in result.games:
        # an illegal or missing reply would end the game as "resign" at once
        assert game.reason != "resign" and len(game.moves) - game.opening_plies >= 10
        board = cshogi.Board(game.start_sfen)
        for move in game.moves:
            assert board.is_legal(move)
            board.push(move)


def test_outside_engine_failures_are_clear():
    with pytest.raises(UsiClientError, match="cannot start"):
        UsiOpponent("nope", "/nonexistent/engine").start()
    dead = UsiOpponent("dead", f"{sys.executable} -c \"import sys; print('boom', file=sys.stderr)\"", timeout_s=10)
    with pytest.raises(UsiClientError, match="dead.*exited.*boom"):
        dead.choose([Game(cshogi.Board())])
    dead.close()
    mute = UsiOpponent("mute", f"{sys.executable} -c \"import time; time.sleep(30)\"", timeout_s=0.5)
    with pytest.raises(UsiClientError, match="no 'usiok' within 0.5 s"):
        mute.start()
    mute.close()


def test_random_mover_is_seeded_and_legal():
    games = [Game(cshogi.Board()), Game(cshogi.Board("4k4/9/9/9/9/9/9/9/4K4 b R 1"))]
    first = [RandomMover(3).choose(games) for _ in range(2)]
    assert first[0] == first[1]
    assert all(g.board.is_legal(m) for g, m in zip(games, first[0], strict=True))
    mated = cshogi.Board("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1")
    assert not list(mated.legal_moves) and RandomMover().choose([Game(mated)]) == [None]
    picks = {RandomMover(s).choose([Game(cshogi.Board())])[0] for s in range(20)}
    assert len(picks) > 5  # it really varies with the seed


def test_a_batch_of_two_long_usi_names_gets_a_file_name_the_disk_takes(run):
    """Two `usi:` anchors with absolute paths and options made a batch name of over 255 bytes: the first game's
    write failed with ENAMETOOLONG and ended the rating. Long names are cut and told apart by a hash."""
    from dlzero.data.atomic import atomic_write_text
    from dlzero.gating.rating import _batch_path

    rd, _ = run
    engine = "usi:/work/a/rather/long/path/to/a/virtual/env/bin/dlzero usi --model b5c64-miniosl019-2026-12-04"
    a, b = f"{engine};Threads=1;EvalStreams=1;byoyomi=1000", f"{engine};Threads=1;Precision=fp32;byoyomi=1000"
    paths = {_batch_path(rd, x, y, {"playouts": 1}, 0) for x, y in ((a, b), (b, a), (a, a + "x"))}
    assert len(paths) == 3 and all(len(p.name) < 160 for p in paths)
    rd.rating_dir.mkdir(parents=True, exist_ok=True)
    for p in paths:
        atomic_write_text(p, "{}")  # the temporary name beside it fits too
        assert p.read_text() == "{}"
    assert _batch_path(rd, "random", "alphabeta:100", {"playouts": 1}, 0).name.startswith("random--alphabeta-100--")


def test_pair_tally_counts_one_pairing_from_either_side_with_its_time_losses():
    games = [{"black": "a", "winner": "black"}, {"black": "b", "winner": "black", "reason": "time"},
             {"black": "a", "winner": None}, {"black": "b", "winner": "white", "reason": "time"}]
    batches = [(None, RatingBatch(("a", "b"), {}, games)),
               (None, RatingBatch(("a", "c"), {}, [{"black": "a", "winner": "black"}]))]  # another pairing
    # a: won as black, lost as white (b won black, on time), drew, won as white (b lost on time)
    assert pair_tally(batches, "a", "b") == (2, 1, 1, 1, 1)
    assert pair_tally(batches, "b", "a") == (1, 1, 2, 1, 1)
    assert pair_tally(batches, "a", "d") == (0, 0, 0, 0, 0)
