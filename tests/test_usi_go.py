"""`go` as the engines users compare against answer it (issue 25): a limit given with `infinite`
ends the search at the limit, `infinite` alone waits for `stop`, `searchmoves` restricts the root
and reports bad moves while the rest of the command stands; and the option names other tools use
(YaneuraOu's, dlshogi's) and the search constants as USI options."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time

import cshogi
import pytest

from dlzero.config import Config
from dlzero.encoding.labels import move_to_label
from dlzero.engine import Limits, Player
from dlzero.inference import NullEvaluator
from dlzero.usi import UsiEngine
from dlzero.usi.options import ALIASES, BY_NAME


class Session:
    """A UsiEngine in this process, its output kept (the engine's writer is locked, so a
    StringIO is safe to share with the search thread)."""

    def __init__(self, model: str) -> None:
        self.out = io.StringIO()
        cfg = Config()
        cfg.inference.threads = 1
        self.engine = UsiEngine(cfg, model, self.out)
        self.engine.handle("isready")

    def lines(self) -> list[str]:
        return self.out.getvalue().splitlines()

    def bestmoves(self) -> list[str]:
        return [line.split()[1] for line in self.lines() if line.startswith("bestmove")]

    def wait_bestmoves(self, count: int, timeout: float) -> float:
        start = time.perf_counter()
        while len(self.bestmoves()) < count:
            assert time.perf_counter() - start < timeout, f"no bestmove in {timeout} s: {self.lines()[-5:]}"
            time.sleep(0.005)
        return time.perf_counter() - start

    def last_nodes(self) -> int:
        infos = [line for line in self.lines() if line.startswith("info depth")]
        return int(infos[-1].split(" nodes ")[1].split()[0])


@pytest.fixture()
def session(model):
    s = Session(model)
    yield s
    s.engine.handle("quit")


def test_a_limit_given_with_infinite_ends_the_search_and_infinite_alone_waits(session):
    session.engine.handle("position startpos")
    session.engine.handle("go nodes 200 infinite")  # shogiarena's `run analyze --nodes 200`
    session.wait_bestmoves(1, timeout=20.0)
    assert 200 <= session.last_nodes() < 200 + 2 * 64 * 4  # the limit, and the batches in flight at it
    session.engine.handle("go movetime 300 infinite")
    assert session.wait_bestmoves(2, timeout=5.0) < 2.0
    session.engine.handle("go infinite")
    time.sleep(0.4)
    assert len(session.bestmoves()) == 2  # still searching: `infinite` alone answers at `stop`
    session.engine.handle("stop")
    assert len(session.bestmoves()) == 3


def test_go_ponder_with_a_node_limit_answers_at_ponderhit(session):
    session.engine.handle("position startpos moves 7g7f")
    session.engine.handle("go ponder nodes 50")
    time.sleep(0.5)  # long enough for 50 playouts: the search is over, the answer waits
    assert session.bestmoves() == []
    session.engine.handle("ponderhit")
    session.wait_bestmoves(1, timeout=2.0)


def test_searchmoves_restricts_the_root_and_names_bad_moves(session):
    session.engine.handle("setoption name MultiPV value 5")
    session.engine.handle("position startpos moves 7g7f 3c3d")
    session.engine.handle("go searchmoves 2g2f 8h2b+ 2g2e zz nodes 150")  # the node limit after the list stands
    session.wait_bestmoves(1, timeout=20.0)
    lines = session.lines()
    assert "info string error: searchmoves: '2g2e' is not a legal move here; left out" in lines
    assert "info string error: searchmoves: 'zz' is not a USI move; left out" in lines
    assert session.bestmoves()[0] in ("2g2f", "8h2b+")
    assert session.last_nodes() >= 150
    root = session.engine._player.tree.root
    assert sorted(cshogi.move_to_usi(int(m)) for m in root.moves) == ["2g2f", "8h2b+"]
    multipv = [re.search(r" pv (\S+)", line).group(1) for line in lines if " multipv " in line]
    assert multipv and set(multipv) <= {"2g2f", "8h2b+"}
    # the next search of the same position is not held to the list
    session.engine.handle("go nodes 100")
    session.wait_bestmoves(2, timeout=20.0)
    board = cshogi.Board()
    board.push_usi("7g7f")
    board.push_usi("3c3d")
    assert len(session.engine._player.tree.root.moves) == len(list(board.legal_moves))


def test_searchmoves_with_no_legal_move_searches_every_move(session):
    session.engine.handle("position startpos")
    session.engine.handle("go searchmoves 5e5d nodes 60")
    session.wait_bestmoves(1, timeout=20.0)
    assert "info string error: searchmoves lists no legal move; searching every move" in session.lines()
    board = cshogi.Board()
    assert board.is_legal(board.move_from_usi(session.bestmoves()[0]))


def test_searchmoves_holds_a_mate_at_the_root_to_the_list(session):
    session.engine.handle("position sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1")  # G*5b mates
    session.engine.handle("go nodes 30")
    session.wait_bestmoves(1, timeout=20.0)
    session.engine.handle("go nodes 30 searchmoves 5i4h")
    session.wait_bestmoves(2, timeout=20.0)
    session.engine.handle("go nodes 30 searchmoves 5i4h G*5b")
    session.wait_bestmoves(3, timeout=20.0)
    assert session.bestmoves() == ["G*5b", "5i4h", "G*5b"]


def test_go_mate_nodes_and_go_depth(session):
    session.engine.handle("position sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1")
    session.engine.handle("go mate nodes 20000")  # shogiarena's `run mate --node-limit`
    session.engine._finish_search(wait=True)
    session.engine.handle("position startpos")
    session.engine.handle("go depth 3 nodes 40")
    session.wait_bestmoves(1, timeout=20.0)
    lines = session.lines()
    assert "checkmate G*5b" in lines
    assert any("go depth is not supported" in line for line in lines)
    assert not any("unknown go argument" in line for line in lines)


def _options(session: Session) -> dict[str, str]:
    """`usi`'s option lines: name -> the rest of the line."""
    session.engine.handle("usi")
    found = {}
    for line in session.lines():
        m = re.match(r"option name (\S+) (type .*)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_aliases_are_offered_and_set_the_same_setting(session, model):
    offered = _options(session)
    for alias, name in ALIASES.items():
        assert offered[alias] == offered[name], alias
    engine = session.engine
    engine.handle("setoption name MaxMovesToDraw value 0")
    assert engine.cfg.search.max_moves >= 1_000_000
    engine.handle("setoption name Draw_Ply value 320")
    assert engine.cfg.search.max_moves == 320
    engine.handle("setoption name NetworkDelay2 value 150")
    engine.handle("setoption name NodesLimit value 77")
    engine.handle("setoption name DNN_Batch_Size value 16")
    engine.handle("setoption name UCT_Threads value 2")
    engine.handle("setoption name DNN_Model value /nowhere/m.pt")
    assert (engine.cfg.usi.byoyomi_margin_ms, engine.cfg.usi.playouts) == (150, 77)
    assert (engine.cfg.search.leaves_per_tree, engine.cfg.search.eval_streams) == (16, 2)
    assert engine.model_path == "/nowhere/m.pt"
    engine.handle(f"setoption name ModelPath value {model}")
    after = _options(session)
    assert after["MaxMovesToDraw"].startswith("type spin default 320 ")
    assert after["NetworkDelay2"].startswith("type spin default 150 ")
    engine.handle("setoption name Draw_Ply value -1")
    assert "info string error: DrawPly must be between 0 and 1000000, got -1; DrawPly keeps its value" \
        in session.lines()
    engine.handle("isready")
    engine.handle("position startpos")
    engine.handle("go")  # NodesLimit caps the search with no limit in `go`
    session.wait_bestmoves(1, timeout=20.0)
    assert 77 <= session.last_nodes() < 77 + 2 * 16 * 4


def test_search_constants_are_spin_options_whose_defaults_change_nothing(session):
    offered = _options(session)
    expected = {"C_init": "144", "C_base": "28288", "C_fpu_reduction": "27", "C_init_root": "116",
                "C_base_root": "25617", "C_fpu_reduction_root": "0", "Softmax_Temperature": "174",
                "DrawValueBlack": "500", "DrawValueWhite": "500"}
    for name, default in expected.items():
        assert offered[name].startswith(f"type spin default {default} min "), name
    engine = session.engine
    before = engine.cfg
    for name, rest in offered.items():  # every spin set to what `usi` says it is: the same config, bit for bit
        if rest.startswith("type spin"):
            engine.handle(f"setoption name {name} value {rest.split()[3]}")
    assert engine.cfg == before
    assert not any("error" in line for line in session.lines())
    engine.handle("setoption name C_init value 250")
    engine.handle("setoption name C_base_root value 10000")
    engine.handle("setoption name C_fpu_reduction value 40")
    assert (engine.cfg.search.c_init, engine.cfg.search.c_base_root, engine.cfg.search.fpu_reduction) \
        == (2.5, 10000.0, 0.4)
    engine.handle("setoption name C_init value 0")
    assert any("C_init must be between 1 and 1000, got 0" in line for line in session.lines())


def test_softmax_temperature_reaches_the_search(session):
    """A higher temperature flattens the root priors the search works with."""
    def top_prior(temperature: int) -> float:
        session.engine.handle(f"setoption name Softmax_Temperature value {temperature}")
        session.engine.handle("position startpos")
        session.engine.handle("go nodes 20")
        session.engine._finish_search(wait=True)
        player = session.engine._player
        assert player.search.cfg.softmax_temperature == temperature / 100
        return float(player.tree.root.prior.max())

    sharp, flat = top_prior(50), top_prior(1000)
    assert flat < sharp and flat < 1.5 / 30


def test_clear_hash_drops_the_tree_and_usi_tunables_lists_the_search_constants(session):
    """shogiarena's SPSA handshake: `usi_tunables` answers with the tunables' JSON and `usi_tunablesok`,
    and `Clear Hash` (a button it presses between games) leaves no tree for the next search to reuse."""
    offered = _options(session)
    engine = session.engine
    assert "option name Clear Hash type button" in session.lines()
    engine.handle("position startpos")
    engine.handle("go nodes 40")
    engine._finish_search(wait=True)
    assert engine._player.tree is not None
    engine.handle("setoption name Clear Hash")
    assert engine._player.tree is None
    engine.handle("setoption name C_init value 200")
    engine.handle("usi_tunables")
    lines = session.lines()
    assert lines[-1] == "usi_tunablesok"
    manifest = json.loads(lines[-2].removeprefix("info string shogiarena_tunables_json "))
    assert manifest["schema_version"] == "shogiarena.usi_tunables.v1"
    by_option = {t["option"]: t for t in manifest["tunables"]}
    assert set(by_option) == {"C_init", "C_base", "C_fpu_reduction", "C_init_root", "C_base_root",
                              "C_fpu_reduction_root", "Softmax_Temperature"}
    for name, tunable in by_option.items():
        default = 200 if name == "C_init" else int(offered[name].split()[3])
        assert (tunable["default"], tunable["value_type"]) == (default, "int"), name
        assert f"min {tunable['min']} max {tunable['max']}" in offered[name]
        assert BY_NAME[name.lower()].key == f"search.{tunable['id']}" and tunable["schedule"]["c_end"] > 0


def test_quit_ends_the_process_at_once(model):
    """The engine answers its search and is gone well within the few seconds match runners allow
    after `quit` (shogiarena kills it after 5 s); unloading torch alone took 2 s here."""
    proc = subprocess.Popen([sys.executable, "-m", "dlzero.usi", "--model", model], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        proc.stdin.write("usi\nisready\nposition startpos\ngo btime 0 wtime 0 byoyomi 2000\n")
        proc.stdin.flush()
        while proc.stdout.readline().strip() != "readyok":
            pass
        time.sleep(0.2)
        start = time.perf_counter()
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        rest = proc.stdout.read()
        assert proc.wait(timeout=10) == 0
        assert time.perf_counter() - start < 1.5
        assert any(line.startswith("bestmove ") for line in rest.splitlines())
    finally:
        if proc.poll() is None:
            proc.kill()


class _SlowNetwork(NullEvaluator):
    """A network whose every call takes 120 ms, as a loaded machine's does: the search's steps are long."""

    def _run(self, planes):
        time.sleep(0.12)
        return super()._run(planes)


class _SureNetwork(NullEvaluator):
    """A network sure of one move (7g7f's label at the root), 10 ms a call: its search could stop once the
    runner-up cannot catch up, about halfway through its time."""

    def _run(self, planes):
        time.sleep(0.01)
        policy, value = super()._run(planes)
        policy[:, move_to_label(cshogi.Board(), cshogi.Board().move_from_usi("7g7f"))] = 20.0
        return policy, value


def test_a_byoyomi_alone_is_searched_to_its_limit_even_when_the_move_is_sure():
    """Nothing a byoyomi move leaves is used again, and what it searches stays in the tree for the next move:
    it does not stop early. With main time beside it, stopping early saves that time, and it does."""
    cfg = Config()
    player = Player(_SureNetwork(), cfg)
    player.set_position(cshogi.Board())
    result = player.think(Limits(byoyomi=1000))
    hard = 1000 - cfg.usi.byoyomi_margin_ms
    # it could have stopped at about half (450 ms); it ends a step or two before its hard limit
    assert result.bestmove == "7g7f" and result.time_ms >= 0.7 * hard, result.time_ms
    player.set_position(cshogi.Board())
    main_time = player.think(Limits(btime=60_000, wtime=60_000, byoyomi=1000))  # plans 59,000 / 43 = 1,372 ms
    assert main_time.bestmove == "7g7f" and main_time.time_ms < 1_100, main_time.time_ms


def test_a_slow_network_still_answers_within_the_byoyomi():
    """The hard limit is kept a step or two ahead of the steps the search is still to take and drain
    (on a loaded machine two moves of a 20-game match took 1.6 s at byoyomi 1000 and lost on time)."""
    cfg = Config()
    cfg.search.eval_streams = 2
    player = Player(_SlowNetwork(), cfg)
    board = cshogi.Board()
    for _ in range(3):
        player.set_position(board)
        start = time.perf_counter()
        result = player.think(Limits(byoyomi=1000))  # hard limit: 1000 - ByoyomiMargin
        assert (time.perf_counter() - start) * 1000 < 1000 - cfg.usi.byoyomi_margin_ms + 40, result.time_ms
        board.push_usi(result.bestmove)
