"""Outside engines as rating anchors: the USI client, the anchor names, and real games over USI.

The fake engine is a real program speaking USI over pipes (a short Python script using cshogi for the
rules), started as a subprocess exactly as GPS Shogi or Fairy-Stockfish are; the real engines play
where they are installed and the tests say how to install them where they are not.
"""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cshogi
import pytest
from killers import CLI_WITH_SIGINT

from dlzero.cli import main
from dlzero.config import load_config
from dlzero.errors import ConfigError
from dlzero.gating.match import play_match
from dlzero.gating.rating import load_batches, stored_game
from dlzero.play import RandomMover
from dlzero.play.game import Game
from dlzero.play.registry import ENGINE_PROGRAMS, PlayContext, build_player, engine_program
from dlzero.play.usi_client import Go, SearchResult, UsiClient, UsiClientError, _parse_info, position_command
from dlzero.play.usi_opponent import UsiOpponent, byoyomi_of
from dlzero.player_names import check_anchor, parse_anchor, parse_player
from dlzero.rundir import RunDir

FAKE_ENGINE = '''#!{python}
"""A USI engine for tests: plays the first (Pick=first) or last legal move, says a score, can crash."""
import os, sys, time
import cshogi

pid_file = os.environ.get("FAKE_USI_PID_FILE")
if pid_file:
    with open(pid_file, "a") as fh:
        fh.write(f"{{os.getpid()}}\\n")
go_log = os.environ.get("FAKE_USI_GO_LOG")  # each search's pid, start and end (monotonic), for overlap checks
go_lines = os.environ.get("FAKE_USI_GO_LINES")  # each `go` as received
options = {{"Pick": "first", "CrashAfter": "0", "DelayMs": "0"}}
board, moves_made = cshogi.Board(), 0
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "usi":
        print("id name fake-first-move")
        print("option name Pick type combo default first var first var last")
        print("option name CrashAfter type spin default 0 min 0 max 1000")
        print("option name DelayMs type spin default 0 min 0 max 10000")
        print("usiok", flush=True)
    elif words[0] == "setoption":
        name, value = line.split(" name ", 1)[1].split(" value ")
        options[name.strip()] = value.strip()
    elif words[0] == "isready":
        print("readyok", flush=True)
    elif words[0] == "position":
        rest = line[len("position "):].strip()
        head, _, moves = rest.partition(" moves ")
        board = cshogi.Board() if head == "startpos" else cshogi.Board(head[len("sfen "):])
        for usi in moves.split():
            board.push_usi(usi)
    elif words[0] == "go":
        moves_made += 1
        if int(options["CrashAfter"]) and moves_made > int(options["CrashAfter"]):
            print("fake engine: crashing on purpose", file=sys.stderr, flush=True)
            sys.exit(3)
        began = time.monotonic()
        if go_lines:
            with open(go_lines, "a") as fh:
                fh.write(line)
        time.sleep(int(options["DelayMs"]) / 1000)
        if go_log:
            with open(go_log, "a") as fh:
                fh.write(f"{{os.getpid()}} {{began}} {{time.monotonic()}}\\n")
        legal = sorted(cshogi.move_to_usi(m) for m in board.legal_moves)
        if not legal:
            print("bestmove resign", flush=True)
            continue
        move = legal[0] if options["Pick"] == "first" else legal[-1]
        print(f"info depth 1 score cp {{len(legal)}} nodes {{len(legal)}} pv {{move}}")
        print("info string thinking done")
        print(f"bestmove {{move}}", flush=True)
    elif words[0] == "quit":
        break
'''


@pytest.fixture()
def fake_engine(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """(the fake engine's executable, the file where each started instance appends its pid)."""
    path = tmp_path / "fake engine.py"  # a space in the path: names and commands must survive it
    path.write_text(FAKE_ENGINE.format(python=sys.executable))
    path.chmod(0o755)
    pids = tmp_path / "pids.txt"
    monkeypatch.setenv("FAKE_USI_PID_FILE", str(pids))
    return path, pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes: it runs nothing any more
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


# -- names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "message"), [
    ("stockfish", "is not an anchor (one of: random, alphabeta:N"),
    ("gpsshogi", "is not an anchor"),
    ("gpsshogi:depth=3", "depth=D with D from 4 to 10"),
    ("gpsshogi:depth=4:skill=1", "gpsshogi takes depth, byoyomi, time, inc, tolerance, not 'skill'"),
    ("fairy-stockfish:skill=0", "exactly one of byoyomi=MS, nodes=N and a clock"),
    ("fairy-stockfish:skill=0:byoyomi=100:nodes=5", "exactly one of byoyomi=MS, nodes=N and a clock"),
    ("fairy-stockfish:skill=21:nodes=5", "skill=S with S from -20 to 20"),
    ("fairy-stockfish:skill=ten:nodes=5", "skill must be a whole number, not 'ten'"),
    ("fairy-stockfish:byoyomi=100:skill=0", "write it as 'fairy-stockfish:skill=0:byoyomi=100'"),
    ("fairy-stockfish:skill=+3:nodes=5", "write it as 'fairy-stockfish:skill=3:nodes=5'"),
    ("fairy-stockfish:skill=0:nodes=0", "nodes must be >= 1"),
    ("fairy-stockfish:skill=0:skill=1:nodes=5", "skill is given twice"),
    ("usi:/opt/engine", "needs a limit"),
    ("usi:;byoyomi=100", "followed by the engine's command"),
    ("usi:/opt/engine;Threads;byoyomi=100", "'Threads' is not KEY=VALUE"),
    ("usi:/opt/engine;byoyomi=100;Threads=1", "write it as 'usi:/opt/engine;Threads=1;byoyomi=100'"),
])
def test_bad_anchor_names_say_what_is_wrong(name, message):
    with pytest.raises(ValueError, match=None) as info:
        parse_anchor(name)
    assert message in str(info.value) and name in str(info.value)
    assert message in check_anchor(name)
    with pytest.raises(ConfigError, match=r"rate\.anchors.*" + re.escape(message)):
        load_config(None, [f"rate.anchors=[random, '{name}']"])


def test_anchor_names_parse_to_their_settings():
    gps = parse_anchor("gpsshogi:depth=6:byoyomi=2000")
    assert (gps.kind, gps.setting("depth"), gps.setting("byoyomi")) == ("gpsshogi", 6, 2000)
    fsf = parse_anchor("fairy-stockfish:skill=-10:byoyomi=100")
    assert (fsf.setting("skill"), fsf.setting("byoyomi"), fsf.setting("nodes")) == (-10, 100, None)
    usi = parse_anchor("usi:/opt/yane/run --eval x:y;Skill Level=3;USI_Hash=64;nodes=800")
    assert usi.value == "/opt/yane/run --eval x:y" and usi.options == (("Skill Level", "3"), ("USI_Hash", "64"))
    assert usi.setting("nodes") == 800
    assert [parse_player(n).is_engine for n in ("random", "alphabeta:10", "gen-0000", "gpsshogi:depth=4",
                                   "usi:/x;depth=1")] == [False, False, False, True, True]
    cfg = load_config(None, ["rate.anchors=[random, alphabeta:10, fairy-stockfish:skill=-20:byoyomi=100, "
                             "gpsshogi:depth=4]"])
    assert cfg.rate.anchors[-1] == "gpsshogi:depth=4"


def engine_anchor(name: str, timeout_s: float = 120.0, tolerance_ms: int | None = None) -> UsiOpponent:
    """The registry's engine `name`, with the timeout and clock tolerance given (None: never flagged)."""
    never = 10**9  # no byoyomi plus this is ever reached
    cfg = load_config(None, [f"rate.engine_timeout_s={timeout_s}",
                             f"rate.clock_tolerance_ms={never if tolerance_ms is None else tolerance_ms}"])
    return build_player(parse_anchor(name), PlayContext(cfg))


# -- the client -----------------------------------------------------------------------------------
def test_client_handshake_options_and_search_result(fake_engine):
    path, pids = fake_engine
    board = cshogi.Board()
    board.push_usi("7g7f")
    with UsiClient([str(path)], options={"Pick": "last"}, timeout_s=30) as engine:
        assert engine.id_name == "fake-first-move" and "CrashAfter" in engine.available
        engine.new_game()
        result = engine.go(board, Go(depth=1))
        legal = sorted(cshogi.move_to_usi(m) for m in board.legal_moves)
        assert result.bestmove == legal[-1] and result.pv == [legal[-1]]
        assert (result.score_cp, result.nodes, result.depth, result.mate) == (len(legal), len(legal), 1, None)
        engine.set_option("Pick", "first")  # takes effect from the next search
        assert engine.go(position_command(board)[len("position "):], "depth 1").bestmove == legal[0]
        pid = _pids(pids)[0]
        assert _alive(pid)
    assert not _alive(pid)
    assert position_command(board) == "position startpos moves 7g7f"
    assert position_command(cshogi.Board()) == "position startpos"
    start = "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1"
    handicap = cshogi.Board(start)
    handicap.push_usi("P*5e")
    assert position_command(handicap) == f"position sfen {start} moves P*5e"
    assert Go(byoyomi_ms=100).command() == "btime 0 wtime 0 byoyomi 100"
    assert Go(nodes=800, depth=3).command() == "nodes 800 depth 3"


def test_client_errors_name_the_engine_and_the_cause(fake_engine, tmp_path):
    path, pids = fake_engine
    with pytest.raises(UsiClientError, match=r"has no option 'Skill Level' \(it has: CrashAfter, DelayMs, Pick\)"):
        UsiClient([str(path)], name="fake", options={"Skill Level": 3}).start()
    assert not _alive(_pids(pids)[-1])  # refused at the handshake, and still closed
    with pytest.raises(UsiClientError, match="cannot start.*No such file"):
        UsiClient([str(tmp_path / "missing")]).start()
    crashing = UsiClient([str(path)], name="fake", options={"CrashAfter": 2}, timeout_s=30)
    board = cshogi.Board()
    for _ in range(2):
        board.push_usi(crashing.go(board, "depth 1").bestmove)
    with pytest.raises(UsiClientError, match=r"'fake'.*exited with status 3 while we waited for 'bestmove'.*"
                                             r"stderr: fake engine: crashing on purpose"):
        crashing.go(board, "depth 1")
    assert not crashing.running
    slow = UsiClient([str(path)], name="slow", options={"DelayMs": 3000}, timeout_s=30)
    with pytest.raises(UsiClientError, match="'slow'.*no 'bestmove' within 0.3 s"):
        slow.go(board, "depth 1", timeout_s=0.3)
    assert not slow.running and not _alive(_pids(pids)[-1])


# -- the fake engine as an anchor -----------------------------------------------------------------
def _run(tmp_path: Path, anchors: list[str], games: int = 2, max_moves: int = 60) -> tuple[RunDir, object]:
    quoted = ", ".join(f'"{a}"' for a in anchors)
    cfg = load_config(None, [f"rate.anchors=[{quoted}]", f"rate.games={games}", f"gate.max_moves={max_moves}",
                             "rate.engine_timeout_s=60"])
    return RunDir.create(tmp_path / "run", cfg), cfg


def test_fake_engine_anchor_is_rated_against_random_through_dlzero_rate(fake_engine, tmp_path, capsys):
    path, pids = fake_engine
    name = f"usi:{sys.executable} '{path}';Pick=first;depth=1"  # a command line with arguments
    rd, _ = _run(tmp_path, ["random", "alphabeta:1"], games=4)
    cli = ["rate", "--run", str(rd.root), "--no-progress", "--anchors", f"random,{name}"]  # --anchors wins
    assert main([*cli, "--json"]) == 0
    rows = {row["player"]: row for row in csv.DictReader((rd.metrics_dir / "elo.csv").open())}
    assert set(rows) == {"random", name} and rows[name]["anchor"] == "1" and rows[name]["games"] == "4"
    assert name in capsys.readouterr().out
    [(file, batch)], problems = load_batches(rd)
    assert problems == [] and set(batch.players) == {"random", name}
    assert file.parent == rd.rating_dir and " " not in file.name  # the path's slashes and spaces made safe
    for game in batch.games:  # the fake engine's every move is the first legal one in USI order
        board = cshogi.Board(game["start_sfen"])
        moves = game["moves"].split()
        for ply, usi in enumerate(moves):
            if ply >= game["opening_plies"] and board.turn == (cshogi.BLACK if game["black"] == name
                                                               else cshogi.WHITE):
                assert usi == min(cshogi.move_to_usi(m) for m in board.legal_moves)
            board.push_usi(usi)
        assert len(moves) - game["opening_plies"] >= 10 or game["reason"] == "mate"
    assert len(_pids(pids)) == 1 and not _alive(_pids(pids)[0])  # one process for the session, then closed
    # rating again plays nothing new: the pairing is full
    assert main(cli) == 0
    assert len(_pids(pids)) == 1


def test_ctrl_c_during_a_rating_closes_the_engine(fake_engine, tmp_path):
    path, pids = fake_engine
    rd, _ = _run(tmp_path, ["random", f"usi:'{path}';DelayMs=200;depth=1"], games=20, max_moves=200)
    # SIGINT's handler set explicitly (CLI_WITH_SIGINT): in a suite started in the background the rating played on
    # after the signal (found by the thread dump below)
    proc = subprocess.Popen([sys.executable, "-c", CLI_WITH_SIGINT, "rate", "--run", str(rd.root), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"})  # a hang's report: see below
    deadline = time.monotonic() + 180  # start-up (imports, the model) only: a slow spell of the VM took over 60 s once
    while not _pids(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _pids(pids), "the rating never started the engine"
    time.sleep(1.0)  # mid-game
    proc.send_signal(signal.SIGINT)  # to dlzero only: closing the engine is its job
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # every thread's stack (faulthandler), so that a hang says where it hangs
        proc.send_signal(signal.SIGABRT)
        pytest.fail("dlzero rate did not end within 30 s of SIGINT; its threads:\n" + proc.communicate(timeout=30)[1])
    assert proc.returncode == 130, err
    pid = _pids(pids)[0]
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), err


def test_engine_games_run_at_once_each_with_processes_of_its_own(fake_engine, tmp_path, monkeypatch):
    """Two outside engines with parallel 2: two threads, a process of each engine per thread, searches that
    overlap in time, and the very games (openings, colours, moves, results) that one game at a time plays."""
    path, pids = fake_engine
    go_log = tmp_path / "go.log"
    monkeypatch.setenv("FAKE_USI_GO_LOG", str(go_log))
    cfg = load_config(None, ["gate.max_moves=40"])

    def match(parallel: int):
        first = engine_anchor(f"usi:'{path}';Pick=first;DelayMs=30;depth=1")
        last = engine_anchor(f"usi:'{path}';Pick=last;DelayMs=30;depth=1")
        try:
            return play_match(first, last, 4, cfg, parallel=parallel, names=("first", "last"), seed=3)
        finally:
            first.close()
            last.close()

    one = match(1)
    assert len(_pids(pids)) == 2  # one game at a time: a process an engine
    go_log.unlink()
    both = match(2)
    started = _pids(pids)[2:]
    assert len(started) == 4 and not any(_alive(p) for p in started)  # a process an engine a thread, all closed
    key = lambda r: [(g.index, g.a_is_black, g.start_sfen, g.moves, g.winner, g.reason)  # noqa: E731
                     for g in sorted(r.games, key=lambda g: g.index)]
    assert key(both) == key(one) and (both.wins, both.draws, both.losses) == (one.wins, one.draws, one.losses)
    searches = [(int(p), float(a), float(b)) for p, a, b in (line.split() for line in go_log.read_text().splitlines())]
    overlapping = sum(1 for p, a, b in searches for q, c, d in searches if p < q and a < d and c < b)
    assert overlapping > 0, "no two searches of different processes ran at the same time"


# -- the clock ------------------------------------------------------------------------------------
def _clocked_match(path: Path, delay_ms: int, byoyomi_ms: int, tolerance_ms: int, tmp_path: Path):
    engine = engine_anchor(f"usi:'{path}';DelayMs={delay_ms};byoyomi={byoyomi_ms}", 60, tolerance_ms)
    try:
        return play_match(engine, RandomMover(0), 2, load_config(None, ["gate.max_moves=30"]),
                          names=("engine", "random"), record_dir=tmp_path / "csa")
    finally:
        engine.close()


def test_an_engine_answering_after_its_byoyomi_loses_on_time_and_the_record_says_when(fake_engine, tmp_path):
    """300 ms for a byoyomi of 100 (tolerance 50): its first answer is too late, the move is not played,
    the game is lost on time, and the record keeps the late answer's time (a CSA %TIME_UP, the rating
    batch's move_ms)."""
    path, _ = fake_engine
    result = _clocked_match(path, 300, 100, 50, tmp_path)
    assert (result.wins, result.draws, result.losses) == (0, 0, 2)
    for game in result.games:
        assert game.reason == "time" and game.winner == (cshogi.WHITE if game.a_is_black else cshogi.BLACK)
        assert len(game.move_ms) == len(game.moves) + 1 and game.move_ms[-1] >= 300
        assert all(ms is None for ms in game.move_ms[:-1])  # the opening's and the random mover's moves
        assert stored_game(game, "engine", "random")["move_ms"] == game.move_ms
        csa = (tmp_path / "csa" / f"game-{game.index:03d}.csa").read_text()
        assert "%TIME_UP" in csa and f"the move came after {game.move_ms[-1]} ms" in csa


def test_an_engine_answering_in_time_keeps_playing_with_each_move_timed(fake_engine, tmp_path):
    path, _ = fake_engine
    result = _clocked_match(path, 0, 1000, 50, tmp_path)
    assert result.n_games == 2 and all(g.reason != "time" for g in result.games)
    for game in result.games:
        board = cshogi.Board(game.start_sfen)
        engine_side = cshogi.BLACK if game.a_is_black else cshogi.WHITE
        assert len(game.move_ms) == len(game.moves)
        for ply, (move, ms) in enumerate(zip(game.moves, game.move_ms, strict=True)):
            if ply >= game.opening_plies and board.turn == engine_side:
                assert ms is not None and 0 <= ms < 1050
            else:
                assert ms is None
            board.push(move)


def test_dlzero_match_plays_an_engine_on_the_clock_and_says_what_it_lost_on_time(fake_engine, capsys):
    path, _ = fake_engine
    slow = f"usi:{sys.executable} '{path}';DelayMs=200;byoyomi=100"
    assert main(["match", "random", slow, "--games", "2", "--tolerance", "20", "--set", "gate.max_moves=30"]) == 0
    out, err = capsys.readouterr()
    assert "W-D-L 2-0-0 (for A)" in out
    [line] = [x for x in out.splitlines() if x.startswith("B on the clock:")]
    assert line.startswith("B on the clock: 2 moves") and line.endswith("lost on time: 2")
    assert "game ends: time 2" in err and "cpu flags: " in out


# -- a game clock: main time, Fischer increment ------------------------------------------------------
def test_clock_names_parse_and_bad_ones_say_why():
    fsf = parse_anchor("fairy-stockfish:skill=20:time=10000:inc=100")
    assert (fsf.setting("time"), fsf.setting("inc"), fsf.setting("byoyomi")) == (10000, 100, None)
    assert parse_anchor("gpsshogi:depth=6:byoyomi=1000:time=60000:tolerance=500").setting("time") == 60000
    assert parse_anchor("usi:/x;Threads=1;time=3000").canonical() == "usi:/x;Threads=1;time=3000"
    for name, message in [("usi:/x;time=3000;inc=0", "inc must be >= 1"),
                          ("usi:/x;byoyomi=100;time=3000;inc=100", "inc=MS is a Fischer increment"),
                          ("usi:/x;depth=3;inc=100", "inc=MS is a Fischer increment"),
                          ("fairy-stockfish:skill=0:nodes=5:time=3000", "exactly one of byoyomi=MS, nodes=N"),
                          ("usi:/x;inc=100;time=3000", "write it as 'usi:/x;time=3000;inc=100'"),
                          ("usi:/x;depth=3;tolerance=10", "needs byoyomi=MS or time=MS")]:
        assert message in check_anchor(name), name


def test_go_sends_both_sides_remaining_time_and_the_increment():
    assert Go(time_ms=10000, inc_ms=100).command((9500.4, 10000)) == "btime 9500 wtime 10000 binc 100 winc 100"
    assert Go(time_ms=60000, byoyomi_ms=1000).command() == "btime 60000 wtime 60000 byoyomi 1000"
    assert Go(time_ms=5000).command((-3, 12.6)) == "btime 0 wtime 13"
    assert Go(byoyomi_ms=1000).command() == "btime 0 wtime 0 byoyomi 1000"
    assert Go(time_ms=5000, inc_ms=10, clocks_swapped=True).command((100, 200)) == "btime 200 wtime 100 binc 10 winc 10"


def _fischer_match(path: Path, delay_ms: int, clock: str, tmp_path: Path, monkeypatch):
    lines = tmp_path / "go.txt"
    monkeypatch.setenv("FAKE_USI_GO_LINES", str(lines))
    engine = engine_anchor(f"usi:'{path}';DelayMs={delay_ms};{clock}", 60, 50)
    try:
        result = play_match(engine, RandomMover(0), 2, load_config(None, ["gate.max_moves=40"]),
                            names=("engine", "random"))
    finally:
        engine.close()
    return result, lines.read_text().splitlines()


def test_an_engine_that_empties_its_game_clock_loses_on_time(fake_engine, tmp_path, monkeypatch):
    """1,000 ms a game and no increment, 150 ms a move: the clock the match keeps runs down move by move (each
    `go` says what is left), and the move that takes more than is left (plus the 50 ms tolerance) loses."""
    path, _ = fake_engine
    result, gos = _fischer_match(path, 150, "time=1000", tmp_path, monkeypatch)
    assert (result.wins, result.draws, result.losses) == (0, 0, 2)
    for game in result.games:
        timed = [ms for ms in game.move_ms if ms is not None]
        assert game.reason == "time" and 6 <= len(timed) <= 8
        assert sum(timed[:-1]) <= 1000 + 50 < sum(timed)  # each move in time until the clock was out
    black = [int(g.split()[2]) for g in gos]  # `go btime B wtime W`
    assert black[0] == 1000 and black[1] < 1000  # the first game's Black is the engine: its clock runs down
    assert all("binc" not in g and "byoyomi" not in g for g in gos)


def test_an_increment_keeps_an_engine_on_its_clock(fake_engine, tmp_path, monkeypatch):
    """The same engine with 200 ms added after each move never runs out: the clock grows by ~50 ms a move."""
    from dlzero.commands.match import clock_left

    path, _ = fake_engine
    result, gos = _fischer_match(path, 150, "time=1000;inc=200", tmp_path, monkeypatch)
    assert result.n_games == 2 and all(g.reason != "time" for g in result.games)
    for game in result.games:
        timed = [ms for ms in game.move_ms if ms is not None]
        assert len(timed) >= 10 and clock_left(timed, 1000, 200) > 1000
    assert all(g.startswith("go btime ") and g.rstrip().endswith("binc 200 winc 200") for g in gos)


def test_dlzero_match_plays_dlzero_on_a_fischer_clock_and_says_what_was_left(model, capsys):
    """`--time/--inc` put a dlzero player on a game clock as `dlzero usi`; the match prints what each game left
    of it; a clock no GUI keeps is refused in one line."""
    assert main(["match", model, "random", "--time", "3000", "--inc", "100", "--games", "2",
                 "--set", "gate.max_moves=24"]) == 0
    out, err = capsys.readouterr()
    assert "3000 ms a game + 100 ms a move (Fischer), Threads 1, EvalStreams 1" in err
    [line] = [x for x in out.splitlines() if x.startswith("A on the clock:")]
    assert "lost on time: 0" in line and "clock left at the end: median " in line and "of 3,000" in line
    assert main(["match", model, "random", "--inc", "100"]) == 2
    assert "--inc is a Fischer increment" in capsys.readouterr().err


def test_what_a_move_searched_is_its_last_scored_info_lines_nps_times_time():
    result = SearchResult(bestmove="")
    _parse_info("info depth 3 seldepth 3 nodes 900 nps 2000 time 750 score cp 12 pv 7g7f", result)
    assert (result.nodes, result.nps, result.engine_ms, result.score_cp) == (900, 2000, 750, 12)
    opponent = UsiOpponent("x", "engine", "byoyomi 1000")
    assert opponent.searched_per_move() is None
    opponent.searched += [1500, 2500]
    opponent.replica(1).searched.append(2000)
    assert opponent.searched_per_move() == 2000


def test_the_clock_is_the_byoyomi_of_go_and_only_with_a_tolerance():
    assert byoyomi_of(Go(byoyomi_ms=700)) == 700 and byoyomi_of(Go(nodes=5)) is None
    assert byoyomi_of("btime 0 wtime 0 byoyomi 1000") == 1000 and byoyomi_of("movetime 300") == 300
    assert byoyomi_of("nodes 800") is None and byoyomi_of("byoyomi") is None
    assert UsiOpponent("x", "engine", "byoyomi 1000", tolerance_ms=50).flag_ms == 1050
    assert UsiOpponent("x", "engine", "byoyomi 1000").flag_ms is None
    assert UsiOpponent("x", "engine", "nodes 800", tolerance_ms=50).flag_ms is None


def test_an_engine_that_dies_in_one_thread_ends_the_match_with_its_error(fake_engine, tmp_path):
    path, pids = fake_engine
    cfg = load_config(None, ["gate.max_moves=200"])
    crashing = engine_anchor(f"usi:'{path}';CrashAfter=5;DelayMs=20;depth=1")
    steady = engine_anchor(f"usi:'{path}';Pick=last;DelayMs=20;depth=1")
    try:
        with pytest.raises(UsiClientError, match="crashing on purpose"):
            play_match(crashing, steady, 8, cfg, parallel=2, names=("crashing", "steady"))
    finally:
        crashing.close()
        steady.close()
    assert len(_pids(pids)) == 4 and not any(_alive(p) for p in _pids(pids))


def test_missing_engine_program_fails_before_any_game(monkeypatch):
    monkeypatch.setitem(ENGINE_PROGRAMS, "gpsshogi", ("gpsshogi", "gpsusi-that-is-not-installed"))
    with pytest.raises(UsiClientError, match="needs gpsusi-that-is-not-installed.*apt-get install gpsshogi"):
        engine_anchor("gpsshogi:depth=4")
    with pytest.raises(UsiClientError, match="no engine at '/nonexistent/engine'"):
        engine_anchor("usi:/nonexistent/engine --flag;depth=1")


# -- the real engines -----------------------------------------------------------------------------
def _installed(kind: str) -> bool:
    try:
        engine_program(kind)
    except UsiClientError:
        return False
    return True


@pytest.mark.skipif(not _installed("fairy-stockfish"), reason="apt-get install fairy-stockfish")
def test_fairy_stockfish_reads_its_own_clock_as_black():
    """Black to move with 300 ms left against White's minute: it answers within its own time (Fairy-Stockfish 11.1
    reads USI's clocks the other way round; sent in USI's order it thinks ~4 s here, on White's minute)."""
    player = build_player("fairy-stockfish:skill=20:time=60000:inc=100", PlayContext(load_config(None)))
    try:
        game = Game(cshogi.Board())
        game.clock_ms.update({cshogi.BLACK: 300.0, cshogi.WHITE: 60000.0})
        assert player.choose([game]) != [None] and game.end is None
        assert game.move_ms[0] < 350 + 50 and game.clock_ms[cshogi.BLACK] < 400
    finally:
        player.close()


@pytest.mark.parametrize(("name", "package"), [("gpsshogi:depth=4", "gpsshogi"),
                                               ("fairy-stockfish:skill=-10:byoyomi=100", "fairy-stockfish")])
def test_real_engine_anchor_beats_random(name, package, tmp_path):
    if not _installed(package):
        pytest.skip(f"{package} is not installed (apt-get install {package})")
    cfg = load_config(None, ["gate.max_moves=256"])
    engine = engine_anchor(name)
    try:
        result = play_match(engine, RandomMover(5), 2, cfg, parallel=2, names=(name, "random"))
    finally:
        engine.close()
    assert not engine.engine.running
    assert result.n_games == 2 and result.wins == 2, [(g.reason, len(g.moves)) for g in result.games]
    for game in result.games:
        board = cshogi.Board(game.start_sfen)
        for move in game.moves:
            assert board.is_legal(move)
            board.push(move)
        assert game.reason in ("mate", "declaration"), game.reason  # a real win, not an illegal reply


def test_dlzero_match_at_equal_time_plays_dlzero_as_its_usi_engine_keeps_games_and_a_csv_row(model, tmp_path,
                                                                                             capsys):
    """`--byoyomi` turns a dlzero player into `dlzero usi` on one core at that clock; `--sprt` looks every
    `--step` games and truncates at `--games`; every game's record is kept and the match is one CSV row."""
    records, table = tmp_path / "games", tmp_path / "m.csv"
    assert main(["match", model, "random", "--byoyomi", "300", "--games", "4", "--step", "2", "--sprt", "0,50",
                 "--parallel", "2", "--records", str(records), "--csv", str(table),
                 "--set", "gate.max_moves=24"]) == 0
    out, err = capsys.readouterr()
    assert "byoyomi 300 ms, Threads 1, EvalStreams 1" in err and "load average" in err
    assert "after 2 games:" in err and "after 4 games:" in err and "SPRT(0, 50" in out
    [line] = [x for x in out.splitlines() if x.startswith("A on the clock:")]
    assert "nodes a move" in line
    assert sorted(p.name for p in records.glob("*.csa")) == [f"game-{i:03d}.csa" for i in range(4)]
    text = (records / "game-000.csa").read_text()  # the record says who played, how, where, and what each searched
    assert f"'A: {model} ({Path(model).name}), played as usi:" in text and "'B: random\n" in text
    assert "'time control: byoyomi 300 ms, Threads 1, EvalStreams 1\n" in text and " cores, cpu flags " in text
    every = "".join(p.read_text() for p in records.glob("*.csa"))
    timed = re.findall(r"^'dlzero: (\d+) ms(?:, (\d+) nodes)?$", every, re.M)
    assert timed and any(nodes for _, nodes in timed)
    [row] = list(csv.DictReader(table.open()))
    assert int(row["wins"]) + int(row["draws"]) + int(row["losses"]) == 4
    assert row["time_control"] == "byoyomi 300 ms, Threads 1, EvalStreams 1" and float(row["a_searched_per_move"]) > 0
    assert main(["match", model, "random", "--sprt", "50,0"]) == 2
    assert "ELO0 < ELO1" in capsys.readouterr().err
