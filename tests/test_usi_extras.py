"""USI extras for players: win/draw/loss in `info` lines (USI_ShowWDL, off by default), and the
declaration rule (EnteringKingRule, YaneuraOu's names) deciding when the engine answers `bestmove win`."""

from __future__ import annotations

import io
import re

from dlzero.config import Config
from dlzero.search import cp_to_winrate
from dlzero.usi import UsiEngine


def _session(model: str, *commands: str) -> list[str]:
    """Run commands through a USI engine; every `go` is waited for before the next command."""
    out = io.StringIO()
    cfg = Config()
    cfg.inference.threads = 1
    engine = UsiEngine(cfg, model, out)
    for command in commands:
        engine.handle(command)
        if command.startswith("go"):
            engine._finish_search(wait=True)
    engine.handle("quit")
    return out.getvalue().splitlines()


def test_wdl_only_when_asked(model):
    plain = _session(model, "usi", "isready", "position startpos", "go nodes 60")
    assert "option name USI_ShowWDL type check default false" in plain
    assert not any(" wdl " in line for line in plain)
    lines = _session(model, "setoption name USI_ShowWDL value true", "setoption name MultiPV value 3", "isready",
                     "position startpos moves 7g7f", "go nodes 120")
    infos = [line for line in lines if line.startswith("info depth")]
    assert infos and all(" wdl " in line for line in infos)
    for line in infos:
        m = re.search(r" score cp (-?\d+) wdl (\d+) (\d+) (\d+) ", line)
        win, draw, loss = int(m.group(2)), int(m.group(3)), int(m.group(4))
        assert draw == 0 and win + loss == 1000
        assert abs(win - 1000 * cp_to_winrate(int(m.group(1)))) <= 2  # the same win rate as the score
    assert any(" multipv 2 " in line for line in infos)


# Black's king is in the enemy camp with 10 pieces there: 30 points (27-point rule: 28 needed for Black;
# 24-point rule: 31 needed), and 31 with one more pawn in hand.
POINTS_30 = "sfen +P+P+P+P+P+P+P+P+P/9/4KG3/9/9/9/9/9/4k4 b 2R2B 1"
POINTS_31 = "sfen +P+P+P+P+P+P+P+P+P/9/4KG3/9/9/9/9/9/4k4 b 2R2BP 1"


def _bestmove(model: str, rule: str | None, position: str) -> str:
    commands = ([f"setoption name EnteringKingRule value {rule}"] if rule else []) + [
        "isready", f"position {position}", "go nodes 30"]
    return [line for line in _session(model, *commands) if line.startswith("bestmove")][-1]


def test_entering_king_rule_decides_when_bestmove_win(model):
    lines = _session(model, "usi")
    assert ("option name EnteringKingRule type combo default CSARule27 var NoEnteringKing var CSARule24 "
            "var CSARule27") in lines
    assert _bestmove(model, None, POINTS_30) == "bestmove win"  # default: the 27-point (CSA) rule
    assert _bestmove(model, "CSARule27", POINTS_30) == "bestmove win"
    assert _bestmove(model, "CSARule24", POINTS_30) != "bestmove win"
    assert _bestmove(model, "CSARule24", POINTS_31) == "bestmove win"
    assert _bestmove(model, "NoEnteringKing", POINTS_31) != "bestmove win"
    bad = _session(model, "setoption name EnteringKingRule value TryRule")
    assert any("EnteringKingRule must be one of" in line for line in bad)
