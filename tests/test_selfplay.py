"""Self-play: lockstep games, hcpe3 shards in the run directory, workers, promotion, resignation."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import cshogi
import numpy as np
import pytest
from conftest import TINY_MODEL_SETS
from killers import (
    CLI_WITH_SIGINT,
    ShardKiller,
    assert_restarted_once,
    report_and_exit,
    report_then_die_mid_message,
)

from dlzero.config import Config, load_config
from dlzero.data.hcpe3 import (
    BLACK_WIN,
    FLAG_MAX_MOVES,
    FLAG_NYUGYOKU,
    FLAG_REPETITION,
    RESULT_DRAW,
    WHITE_WIN,
    ShardWriter,
    read_hcpe3,
    read_sidecar,
)
from dlzero.inference import load_model
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.rundir import RunDir
from dlzero.selfplay.bootstrap import ensure_best_model
from dlzero.selfplay.games import FinishedRecord, ResignController, play_selfplay_games
from dlzero.selfplay.parent import gather
from dlzero.selfplay.session import run_selfplay
from dlzero.selfplay.worker import Worker

TINY = [
    *TINY_MODEL_SETS,
    "inference.backend=torch", "inference.optimize=none", "inference.threads=1",
    "search.root_mate_depth=3",
    "selfplay.playouts=8", "selfplay.cheap_playouts=4", "selfplay.full_search_prob=0.5",
    "selfplay.random_plies=2", "selfplay.max_moves=40", "selfplay.games_in_parallel=3",
    "selfplay.games_per_shard=2",
]


def tiny_config(*extra: str) -> Config:
    return load_config(None, [*TINY, *extra])


def tiny_evaluator(cfg: Config, tmp_path: Path, seed: int = 0):
    path = save_model(new_model(cfg.model, seed=seed), tmp_path / f"m{seed}.pt", ModelMetadata())
    return load_model(path, cfg.inference)


def _winner_of(colour: int) -> int:
    return BLACK_WIN if colour == cshogi.BLACK else WHITE_WIN


def check_game(game: FinishedRecord, cfg: Config) -> None:
    """The record replays legally and its result agrees with how the game ended.

    max_moves counts plies from the record's start, which is where an opening line starts.
    """
    rec = game.record
    board = rec.start_board()
    for move in rec.moves:
        legal = {cshogi.move16(m) for m in board.legal_moves}
        assert move.move16 in legal
        assert set(move.candidates[:, 0].tolist()) <= legal
        board.push_move16(move.move16)
    assert game.full_searches == sum(m.is_target for m in rec.moves)
    last_mover = 1 - board.turn
    if game.reason == "mate":
        assert not any(True for _ in board.legal_moves) and rec.result == _winner_of(last_mover)
    elif game.reason == "mate_found":
        assert rec.result == _winner_of(last_mover) and rec.moves[-1].eval == 30000
        assert not rec.moves[-1].is_target
    elif game.reason == "repetition":
        assert rec.result == RESULT_DRAW | FLAG_REPETITION
        assert board.is_draw(16) == cshogi.REPETITION_DRAW
    elif game.reason == "max_moves":
        assert rec.result == RESULT_DRAW | FLAG_MAX_MOVES
        assert len(rec.moves) >= cfg.selfplay.max_moves
    elif game.reason == "declaration":
        assert rec.result == _winner_of(board.turn) | FLAG_NYUGYOKU
    elif game.reason == "resign":
        assert rec.result == _winner_of(last_mover)
    else:
        assert game.reason == "perpetual_check" and rec.winner in (BLACK_WIN, WHITE_WIN)
        assert rec.result == rec.winner | FLAG_REPETITION  # a loss for the checker, ended by sennichite


def test_lockstep_games_write_valid_shards(tmp_path):
    cfg = tiny_config("selfplay.resign_threshold=0.2", "selfplay.no_resign_fraction=0.5")
    ev = tiny_evaluator(cfg, tmp_path)
    done: list[FinishedRecord] = []
    writer = ShardWriter(tmp_path / "data", "t", cfg.selfplay.games_per_shard, {"generation": 0})

    def on_done(game: FinishedRecord) -> None:
        done.append(game)
        writer.add(game.record)

    stats = play_selfplay_games(ev, cfg, 7, on_done, np.random.default_rng(1))
    writer.close()
    assert stats.games == len(done) == 7
    assert stats.evaluations > 0 and stats.eval_seconds > 0
    games = [g for p in writer.written for g in read_hcpe3(p)]  # validates legality by replay
    assert games == [g.record for g in done]
    assert sum(read_sidecar(p)["games"] for p in writer.written) == 7
    targets = [m for g in games for m in g.moves if m.is_target]
    cheap = [m for g in games for m in g.moves if not m.is_target]
    assert targets and cheap
    assert all(m.candidates[:, 1].sum() >= 1 for m in targets)
    for game in done:
        check_game(game, cfg)
        assert (game.false_positive is None) == (game.would_resign is None)


def test_openings_start_at_the_opening_position(tmp_path):
    line = "startpos moves 7g7f 3c3d 2g2f"
    (tmp_path / "open.txt").write_text(f"# comment\n{line}\n")
    cfg = tiny_config(f"selfplay.openings={tmp_path / 'open.txt'}", "selfplay.max_moves=12")
    done: list[FinishedRecord] = []
    play_selfplay_games(tiny_evaluator(cfg, tmp_path), cfg, 2, done.append, np.random.default_rng(0))
    board = cshogi.Board()
    hcp = np.zeros(32, np.uint8)
    board.to_hcp(hcp)
    opening = []
    for usi in line.split()[2:]:
        board.push_usi(usi)
        opening.append(cshogi.move16(board.peek()))
    assert len(done) == 2
    for game in done:
        # the record holds the whole game: the opening line as replay-only plies, then self-play
        assert np.array_equal(game.record.start_hcp, hcp)
        assert [m.move16 for m in game.record.moves[:3]] == opening
        assert not any(m.is_target for m in game.record.moves[:3])
        assert game.opening_plies == 3 and game.plies == len(game.record.moves) - 3 > 0
        check_game(game, cfg)


def test_resign_controller_tracks_false_positive_rate():
    ctl = ResignController(0.05, target=0.05, min_samples=10)
    for _ in range(9):
        ctl.observe(True)
    assert ctl.threshold == 0.05  # too few samples to act on
    ctl.observe(True)
    assert ctl.threshold < 0.05
    for _ in range(200):
        ctl.observe(True)
    assert ctl.threshold == pytest.approx(ctl.lowest)
    low = ctl.threshold
    for _ in range(400):
        ctl.observe(False)
    assert low < ctl.threshold <= ctl.highest
    assert ctl.fp_rate == 0.0 and ctl.checked == 610 and ctl.false_positives == 210
    back = ResignController.from_dict(ctl.to_dict(), 0.05, 0.05)
    assert (back.threshold, back.checked) == (ctl.threshold, ctl.checked)
    assert list(back.history) == list(ctl.history)
    off = ResignController(0.0, 0.05, min_samples=1)
    off.observe(False)
    assert off.threshold == 0.0


class _PromotingQueue:
    """Stands in for the worker's queue; promotes generation 1 when the first game is reported."""

    def __init__(self, rd: RunDir, cfg: Config) -> None:
        self.rd, self.cfg, self.messages = rd, cfg, []

    def put(self, msg: tuple) -> None:
        self.messages.append(msg)
        if msg[0] == "game" and self.rd.best().generation == 0:
            save_model(new_model(self.cfg.model, seed=5), self.rd.model_path(1), ModelMetadata(generation=1))
            self.rd.set_best(1, "test")


def test_worker_picks_up_promoted_model(tmp_path):
    cfg = tiny_config("selfplay.games_in_parallel=1", "selfplay.games_per_shard=1", "selfplay.max_moves=10")
    rd = RunDir.create(tmp_path / "run", cfg)
    ensure_best_model(rd, cfg, seed=0)
    q = _PromotingQueue(rd, cfg)
    Worker(rd, cfg, 0, q, seed=0, check_interval=0.0).run(3)
    gens = [m[2]["generation"] for m in q.messages if m[0] == "game"]
    assert gens == [0, 1, 1]
    assert q.messages[-1][0] == "done"
    for gen, n in ((0, 1), (1, 2)):
        shards = sorted(rd.data_dir_for(gen).glob("*.hcpe3"))
        assert len(shards) == n
        assert all(read_sidecar(p)["meta"]["generation"] == gen for p in shards)
        assert all(len(read_hcpe3(p)) == 1 for p in shards)


def _dlzero() -> list[str]:
    exe = Path(sys.executable).with_name("dlzero")
    return [str(exe)] if exe.is_file() else [shutil.which("dlzero") or "dlzero"]


@pytest.mark.slow
def test_cli_selfplay_creates_run(tmp_path):
    run = tmp_path / "run"
    sets = [a for s in TINY for a in ("--set", s)]
    proc = subprocess.run([*_dlzero(), "selfplay", "--run", str(run), "--games", "4", "--workers", "2",
                           "--quiet", *sets], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rd = RunDir.open(run)
    assert rd.best().generation == 0 and rd.model_path(0).is_file()
    shards = rd.shards()
    assert shards and sum(len(read_hcpe3(p)) for p in shards) == 4
    assert {read_sidecar(p)["meta"]["worker"] for p in shards} == {0, 1}
    assert "4 games" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("server", [False, True], ids=["in-process", "server"])
def test_ctrl_c_stops_selfplay_and_saves_every_finished_game(tmp_path, server):
    """Ctrl-C, a SIGINT to the whole process group as a terminal sends it, ends self-play in seconds,
    and every game the progress bar had counted is in a shard, though no shard was due yet. With
    the inference server, the server keeps serving until its parent stops it."""
    run = tmp_path / "run"
    sets = [a for s in (*TINY, "selfplay.games_per_shard=1000", f"server.enabled={str(server).lower()}")
            for a in ("--set", s)]
    # SIGINT's handler is set explicitly: a CI job run in the background starts with SIGINT ignored
    proc = subprocess.Popen([sys.executable, "-c", CLI_WITH_SIGINT, "selfplay", "--run", str(run),
                             "--games", "400", "--workers", "2", *sets],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    err = bytearray()

    def read_stderr() -> None:
        while chunk := proc.stderr.read1(4096):
            err.extend(chunk)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    seen, deadline = 0, time.monotonic() + 120
    while seen < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        counts = re.findall(rb"(\d+)/400 \[", bytes(err))
        seen = int(counts[-1]) if counts else 0
    assert seen >= 2, bytes(err).decode(errors="replace")[-2000:]
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    reader.join(timeout=10)
    text = bytes(err).decode(errors="replace")
    assert "interrupted" in text and "Traceback" not in text, text[-3000:]
    shards = RunDir.open(run).shards()
    assert sum(len(read_hcpe3(p)) for p in shards) == sum(read_sidecar(p)["games"] for p in shards) >= seen
    # each worker says how it stopped; one still starting when Ctrl-C came had nothing to save
    said = {int(w) for w in re.findall(r"self-play worker (\d) stopped (?:by SIG\w+: its finished games are saved"
                                       r"|before it began playing: it had no games to save)", text)}
    assert said == {0, 1}, text[-3000:]
    if server:
        assert "[inference server" in text and "stopped:" in text


def _kill_worker_0(tmp_path: Path, games: int, *overrides: str):
    """Self-play with two workers, worker 0 SIGKILLed once its first shard is on disk."""
    cfg = tiny_config("selfplay.games_in_parallel=2", "selfplay.games_per_shard=1", "selfplay.max_moves=30",
                      *overrides)
    rd = RunDir.create(tmp_path / "run", cfg)
    killer = ShardKiller(rd, worker=0)
    killer.start()
    summary = run_selfplay(rd, cfg, games=games, workers=2, progress=False, seed=0)
    killer.join()
    return rd, summary, killer


def test_a_worker_dead_after_saving_its_whole_share_is_not_failed(tmp_path, capfd):
    """A worker (or its node) can die after its last shard is on disk but before it reports "done"
    (seen on a Ray node lost at that moment). Its share is played, so it is neither restarted nor
    listed as failed; a worker one game short in the same session is restarted for that game."""
    from shards import selfplay_games

    from dlzero.selfplay.parent import Collector
    from dlzero.selfplay.worker import shard_prefix

    cfg = tiny_config("selfplay.max_restarts=2")
    rd = RunDir.create(tmp_path / "run", cfg)
    games = selfplay_games(5, plies=6, seed=3)
    for w, n in ((0, 3), (1, 2)):  # worker 0 saved its 3 games, worker 1 one of its 2 (and one of another session)
        with ShardWriter(rd.data_dir_for(0), shard_prefix(w), 1, {"worker": w, "session": "s1"}) as writer:
            for game in games[:n - w]:
                writer.add(game)
        with ShardWriter(rd.data_dir_for(0), shard_prefix(w), 1, {"worker": w, "session": "s0"}) as writer:
            writer.add(games[4])
    collector = Collector(rd, cfg, games=5, n_workers=2, progress=False)
    assert collector.replay_share(0, "s1", 3, 1, "node lost") == 0
    assert collector.replay_share(1, "s1", 2, 1, "node lost") == 1
    summary = collector.finish(["a", "b"])
    assert summary.failed_workers == [1] and summary.restarts == 1  # worker 1's replacement never reported
    err = capfd.readouterr().err
    assert "worker 0 died (node lost) after saving all its 3 games" in err and "restarting it for its 1" in err


def test_the_collector_counts_games_played_but_not_yet_in_a_shard(tmp_path):
    """The async loop's status line adds these to the games on disk: with 32 games to a shard, the disk
    alone says "0 new" until a worker's first shard is written. A dead worker's unsaved games are lost."""
    from dlzero.selfplay.parent import Collector

    cfg = tiny_config()
    collector = Collector(RunDir.create(tmp_path / "run", cfg), cfg, games=20, n_workers=2, progress=False)
    game = {"plies": 10, "winner": BLACK_WIN, "reason": "resign", "generation": 0, "targets": 5,
            "false_positive": None}
    for w in (0, 0, 0, 1, 1):
        collector.handle(("game", w, game))
    assert collector.unsaved_games == 5
    collector.handle(("shard", 0, {"path": str(tmp_path / "a.hcpe3"), "games": 2}))
    assert collector.unsaved_games == 3
    collector.worker_died(1, "killed")
    assert collector.unsaved_games == 1 and collector.per[1].games == 2  # its tally still shows what it played


@pytest.mark.slow
def test_killed_worker_leaves_only_complete_shards(tmp_path, capfd):
    rd, summary, killer = _kill_worker_0(tmp_path, 120, "selfplay.max_restarts=0")
    assert killer.killed, "no shard appeared to trigger the kill"
    assert summary.failed_workers == [0] and summary.restarts == 0
    assert "worker 0" in capfd.readouterr().err
    written = list(rd.data_dir.glob("gen-*/*.hcpe3"))
    assert written and sorted(written) == sorted(rd.shards())
    for p in written:
        assert len(read_hcpe3(p)) == read_sidecar(p)["games"] == 1
    # the survivor saved its whole share; the killed worker saved at least the shard that triggered
    # the kill, perhaps without reporting it (it died between writing and reporting)
    w0 = [p for p in written if p.name.startswith("selfplay-w0-")]
    assert len(written) - len(w0) == 60 and w0
    assert 60 <= summary.games <= len(written)


def test_killed_worker_is_restarted_for_its_unsaved_games(tmp_path, capfd):
    rd, summary, killer = _kill_worker_0(tmp_path, 12)
    assert_restarted_once(rd, summary, killer, 12, capfd.readouterr().err)


@pytest.mark.timeout(60)
def test_worker_dying_mid_message_neither_blocks_nor_loses_the_others_reports(capfd):
    """A worker killed while sending leaves half a message; the parent keeps every whole one and ends.

    With one multiprocessing.Queue shared by all workers this wedged: the dead worker kept the
    queue's write lock and the survivors blocked on their next report.
    """
    ctx = mp.get_context("spawn")
    running = {}
    for w, (target, args) in enumerate(((report_then_die_mid_message, (3,)), (report_and_exit, (1, 5)))):
        reader, writer = ctx.Pipe(duplex=False)
        p = ctx.Process(target=target, args=(writer, *args))
        p.start()
        writer.close()
        running[w] = (p, reader)
    got: list[tuple] = []
    exitcodes = gather(running, got.append, poll_s=0.05)
    assert exitcodes == {0: 9, 1: 0} and not running
    assert sorted((w, d["i"]) for _, w, d in got) == [(0, i) for i in range(3)] + [(1, i) for i in range(5)]
    assert "self-play worker 0" in capfd.readouterr().err
