"""A player is one name (issue 50): every spelling parses once, to its kind, and back to its canonical name; the
registry has one builder per kind, and each builds the player it names; a bad name says the forms there are."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from test_networks import ARCH, NAME, manifest

from dlzero.cli import main as cli_main
from dlzero.config import Config, load_config
from dlzero.engine import Engine
from dlzero.errors import ModelFileError, NetworkError, RunDirError
from dlzero.inference import Evaluator
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.model.export import export_onnx
from dlzero.networks import ENV_DIR
from dlzero.play import RandomMover
from dlzero.play.alphabeta import AlphaBeta
from dlzero.play.registry import BUILDERS, PlayContext, build_player
from dlzero.play.usi_opponent import UsiOpponent
from dlzero.player_names import (
    ANCHOR_KINDS,
    KINDS,
    PLAYER_FORMS,
    parse_anchor,
    parse_engine_entry,
    parse_player,
    parse_teacher,
)
from dlzero.rundir import RunDir

ENGINES = {"gpsshogi": "/usr/games/gpsusi", "fairy-stockfish": "/usr/games/fairy-stockfish"}


@pytest.fixture()
def run(tmp_path) -> RunDir:
    """A run with a tiny generation 0 and 1 (1x16, random weights), generation 1 the best."""
    rd = RunDir.create(tmp_path / "run", load_config(None, ["model.blocks=1", "model.channels=16"]))
    for gen in (0, 1):
        save_model(new_model(ARCH, seed=gen), rd.model_path(gen))
    rd.set_best(1)
    return rd


@pytest.fixture()
def shipped(tmp_path, monkeypatch) -> Path:
    """A networks folder with one default network, its weights and fp32 ONNX (no int8: the torch backend plays)."""
    folder = tmp_path / "networks"
    folder.mkdir()
    net, meta = new_model(ARCH, seed=0), ModelMetadata(name=NAME)
    save_model(net, folder / f"{NAME}.pt", meta)
    export_onnx(net, folder / f"{NAME}.onnx", meta)
    manifest(folder, roles=("fp32", "weights"))
    monkeypatch.setenv(ENV_DIR, str(folder))
    return folder


TORCH = ["inference.backend=torch", "inference.threads=1"]


def test_every_spelling_parses_to_its_kind_and_back(run, model):
    spellings = {
        "random": "random",
        "alphabeta:300": "alphabeta",
        "gen-0001": "gen",
        "miniosl:sample=12": "miniosl",
        "miniosl:sample=0:model=/nets/eval.onnx": "miniosl",
        "gpsshogi:depth=4": "gpsshogi",
        "gpsshogi:depth=6:byoyomi=2000": "gpsshogi",
        "gpsshogi:depth=10:byoyomi=1000:tolerance=1000": "gpsshogi",
        "fairy-stockfish:skill=-10:byoyomi=100": "fairy-stockfish",
        "fairy-stockfish:skill=3:nodes=800": "fairy-stockfish",
        "usi:/opt/yane/run --eval x:y;Threads=1;byoyomi=1000": "usi",
        "yane=/opt/yane/run --threads 2": "engine",
        "default": "default",
        "network:tiny-test": "network",
        model: "model",
        "missing/m.onnx": "model",
        str(run.root): "run",
    }
    assert set(spellings.values()) == set(KINDS)  # a spelling of every kind
    for text, kind in spellings.items():
        name = parse_player(text)
        assert name.kind == kind, text
        assert name.canonical() == text and parse_player(name.canonical()) == name
    bare = parse_player("tiny-test")  # a shipped network's bare name is its network:NAME
    assert bare == parse_player("network:tiny-test") and bare.canonical() == "network:tiny-test"
    assert parse_engine_entry("yane=/opt/yane/run --threads 2").label() == "yane"
    # anchors keep their spelling (ratings files and CSVs key on it), and are the fixed players only
    assert parse_anchor("fairy-stockfish:skill=3:nodes=800").canonical() == "fairy-stockfish:skill=3:nodes=800"
    assert {parse_anchor(t).kind for t in spellings if parse_player(t).kind in ANCHOR_KINDS} == set(ANCHOR_KINDS)
    with pytest.raises(ValueError, match="'default' is not an anchor"):
        parse_anchor("default")


def test_a_teacher_spec_names_the_same_engine_as_a_player():
    teacher = parse_teacher("usi:/opt/yane/run --eval x:y; Threads=1 ;go=nodes 10;byoyomi=1000")
    player = parse_player("usi:/opt/yane/run --eval x:y;Threads=1;go=nodes 10;byoyomi=1000")
    assert teacher == player  # spaces around keys are a teacher's leniency; the engine is one
    assert parse_teacher("miniosl") == parse_teacher("onnx:miniosl")
    assert parse_teacher("onnx:miniosl;batch=8").canonical() == "miniosl;batch=8"
    with pytest.raises(ValueError, match="batch=x is not a int"):
        parse_teacher("miniosl;batch=x")


@pytest.mark.parametrize(("text", "message"), [
    ("stockfish 16", f"'stockfish 16' is not a player (one of: {PLAYER_FORMS})"),
    ("gpsshogi", "'gpsshogi' is not a player (one of: random, alphabeta:N, gen-NNNN"),
    ("alphabeta:0", "alphabeta:N takes N >= 1"),
    ("network:no such", "network:NAME takes a network's name"),
    ("random=/opt/x", "a NAME that is no other player's"),
    ("fairy-stockfish:byoyomi=100:skill=0", "write it as 'fairy-stockfish:skill=0:byoyomi=100'"),
    ("gpsshogi:depth=4:tolerance=100", "tolerance=MS is the time past its clock"),
    ("fairy-stockfish:skill=0:byoyomi=100:tolerance=-1", "needs byoyomi=MS or time=MS, and a whole number >= 0"),
])
def test_a_bad_name_says_what_is_wrong_in_one_line(text, message):
    with pytest.raises(ValueError) as info:
        parse_player(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_registry_has_one_builder_per_kind():
    assert list(BUILDERS) == list(KINDS)


def test_each_kind_builds_its_player(run, model, shipped):
    cfg = load_config(None, TORCH)
    ctx = PlayContext(cfg, seed=3, run=run)
    assert isinstance(build_player("random", ctx), RandomMover)
    assert isinstance(build_player("alphabeta:30", ctx), AlphaBeta)
    notes: list[str] = []
    for text in ("gen-0000", model, str(run.root), "default", "network:tiny-test", NAME):
        player = build_player(text, PlayContext(cfg, run=run, note=notes.append))
        assert isinstance(player, Evaluator), text
        player.close()
    assert len(notes) == 3 and all(f"using the shipped network {NAME}" in n for n in notes)
    engines = [build_player("usi:'" + sys.executable + "' -c pass;depth=1", ctx),
               build_player(f"py={sys.executable} -c pass", ctx)]
    for kind, program in ENGINES.items():
        if shutil.which(program):
            name = "gpsshogi:depth=4" if kind == "gpsshogi" else "fairy-stockfish:skill=0:nodes=10"
            engines.append(build_player(name, ctx))
    for engine in engines:
        assert isinstance(engine, UsiOpponent) and not engine.engine.running  # started on its first move
        engine.close()
    assert engines[1].name == "py" and engines[1].go == cfg.rate.engine_go


def test_an_engine_loses_on_time_past_its_own_tolerance_or_the_matchs():
    """The flag falls at byoyomi + the name's tolerance=MS where it gives one, else + rate.clock_tolerance_ms;
    an engine without a byoyomi has no clock."""
    ctx = PlayContext(load_config(None, ["rate.clock_tolerance_ms=40"]))
    py = "usi:'" + sys.executable + "' -c pass"
    flags = {text: build_player(text, ctx).flag_ms for text in
             (f"{py};byoyomi=1000", f"{py};byoyomi=1000;tolerance=700", f"{py};byoyomi=300;tolerance=0",
              f"{py};depth=3")}
    assert list(flags.values()) == [1040, 1700, 300, None]
    # on a game clock the flag moves with what is left (UsiOpponent._move); the tolerance is the name's or the match's
    clocks = [build_player(text, ctx) for text in (f"{py};time=5000;inc=100", f"{py};time=5000;inc=100;tolerance=9",
                                                   f"{py};depth=3")]
    assert [(p.game_clock, p.flag_ms, p.tolerance_ms) for p in clocks] == [(True, None, 40), (True, None, 9),
                                                                          (False, None, None)]


def test_a_generation_needs_its_run_and_a_model_name_needs_a_model(none_shipped):
    with pytest.raises(RunDirError, match="no run is given here"):
        build_player("gen-0000", PlayContext(Config()))
    with pytest.raises(NetworkError, match="'default' names the default network, but none is in"):
        build_player("default", PlayContext(Config()))
    with pytest.raises(ModelFileError, match="'random' is a random player, not a model"):
        Engine.load("random")


def test_engine_load_takes_a_name_as_match_does(shipped, run):
    cfg = load_config(None, TORCH)
    for name in ("default", NAME, str(run.root)):
        assert Engine.load(name, cfg).best_move("startpos", playouts=2) != ""



def test_match_says_a_bad_player_name_in_one_line(capsys):
    assert cli_main(["match", "stockfish 16", "random", "--games", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"dlzero match: error: player A: 'stockfish 16' is not a player (one of: {PLAYER_FORMS})"
