"""Shipped networks: manifests checked field by field, files against their sha256, `dlzero networks`, and the commands
(bestmove, usi, match) playing the default network when given no model. The networks here are real: a 1x16 ResNet
saved as `.pt`, exported to ONNX and quantized to int8 by dlzero's own code, in a folder DLZERO_NETWORKS_DIR names."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cshogi
import pytest
from cshogi.usi import Engine

from dlzero.cli import main as cli_main
from dlzero.commands import bestmove
from dlzero.config import Config, ModelConfig, QuantizeConfig, config_to_dict, load_config
from dlzero.cpu import native_int8
from dlzero.engine.shipped import network_choice, resolve_model
from dlzero.errors import DlzeroError, ModelFileError, NetworkError
from dlzero.networks import (
    ENV_DIR,
    check_file,
    default_network,
    load_manifest,
    load_networks,
    model_role,
)

ARCH = ModelConfig(blocks=1, channels=16)
NAME = "tiny-test"
USI_LINE = (("id name ", "id author ", "option name ", "info ", "bestmove "), ("usiok", "readyok"))


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One real network's three files: weights, fp32 ONNX, and an int8 ONNX its (loosened) gate accepted."""
    from dlzero.inference.int8 import make_int8
    from dlzero.model import ModelMetadata, new_model, save_model
    from dlzero.model.calibration import from_random_games
    from dlzero.model.export import export_onnx

    folder = tmp_path_factory.mktemp("made")
    model, meta = new_model(ARCH, seed=0), ModelMetadata(name=NAME)
    save_model(model, folder / f"{NAME}.pt", meta)
    export_onnx(model, folder / f"{NAME}.onnx", meta)
    lenient = QuantizeConfig(calibration="minmax", keep_fp32="none", min_top1=0.0, max_value_error=1.0)
    _, report = make_int8(folder / f"{NAME}.onnx", lenient, data=from_random_games(32, 16))
    assert report.accepted
    return folder


def _entry(path: Path) -> dict:
    return {"path": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "size": path.stat().st_size}


def manifest(folder: Path, name: str = NAME, roles: tuple[str, ...] = ("fp32", "int8", "weights"),
             default: bool = True, **changes) -> dict:
    """A complete manifest of the files of `name` in `folder` (their real sha256 and sizes), with `changes`."""
    names = {"fp32": f"{name}.onnx", "int8": f"{name}.int8.onnx", "weights": f"{name}.pt"}
    files = {role: _entry(folder / names[role]) for role in roles}
    if "int8" in files:
        files["int8"]["gate"] = {"passed": True, "top1": 1.0, "value_mae": 0.0001}
    data = {
        "format": 1, "name": name, "date": "2026-12-10", "default": default,
        "architecture": config_to_dict(ARCH), "files": files,
        "provenance": {"commands": ["dlzero init-model --out m.pt --set model.blocks=1 --set model.channels=16"],
                       "teacher": {"name": "miniosl", "version": "0.1.9", "licence": "BSD-2-Clause (Team GPS)"},
                       "positions": 0, "steps": 0, "minutes": 0.5, "machine": "2 cores, test", "parent": None},
        "strength": [{"opponent": "random mover", "time_control": "16 playouts", "opening_suite": "gate",
                      "wins": 9, "draws": 0, "losses": 1}],
    }
    data.update(changes)
    (folder / f"{name}.json").write_text(json.dumps(data, indent=2))
    return data


@pytest.fixture()
def shipped(made, tmp_path, monkeypatch) -> Path:
    """A networks folder holding the one network, default, and named by DLZERO_NETWORKS_DIR."""
    folder = tmp_path / "networks"
    shutil.copytree(made, folder)
    manifest(folder)
    monkeypatch.setenv(ENV_DIR, str(folder))
    return folder


def test_a_manifest_loads_into_typed_fields(shipped):
    net = load_manifest(shipped / f"{NAME}.json")
    assert (net.name, net.date.isoformat(), net.default, net.arch) == (NAME, "2026-12-10", True, "1x16")
    assert net.architecture == ARCH and set(net.files) == {"fp32", "int8", "weights"}
    assert net.files["int8"].path == shipped / f"{NAME}.int8.onnx" and net.int8_gate.passed
    assert net.provenance.teacher.version == "0.1.9" and net.provenance.minutes == 0.5
    assert net.size == sum(p.stat().st_size for p in shipped.glob(f"{NAME}.*") if p.suffix != ".json")
    assert net.headline() == "9-0-1 (90.0 %, 10 games) vs random mover, 16 playouts"
    assert net.describe() == f"{NAME} (2026-12-10, 1x16)"


def _broken(folder: Path, what: str) -> None:
    """Write a manifest of NAME with one defect."""
    data = manifest(folder)
    if what == "json":
        (folder / f"{NAME}.json").write_text(json.dumps(data)[:-5])
        return
    if what == "no fp32":
        del data["files"]["fp32"]
    elif what == "sha":
        data["files"]["fp32"]["sha256"] = "abc"
    elif what == "name":
        data["name"] = "other"
    elif what == "typo":
        data["provenence"] = data.pop("provenance")
    elif what == "folder":
        data["files"]["weights"]["path"] = f"../{NAME}.pt"
    elif what == "int8 name":
        data["files"]["int8"]["path"] = f"{NAME}.onnx"
    elif what == "arch":
        data["architecture"]["blocks"] = 0
    elif what == "date":
        data["date"] = "10/12/2026"
    elif what == "losses":
        data["strength"][0]["losses"] = -1
    elif what == "gate":
        del data["files"]["int8"]["gate"]
    (folder / f"{NAME}.json").write_text(json.dumps(data))


@pytest.mark.parametrize("what, words", [
    ("json", "not valid JSON"), ("no fp32", "files: missing key 'fp32'"), ("sha", "'sha256' must be 64"),
    ("name", "must be the manifest's file name"), ("typo", "unknown key(s) provenence"),
    ("folder", "files.weights: 'path' must be a file name"), ("int8 name", "must end in .int8.onnx"),
    ("arch", "architecture: config key 'model.blocks'"), ("date", "'date' must be a date YYYY-MM-DD"),
    ("losses", "strength[0]: 'losses' must be a count"), ("gate", "files.int8: missing key 'gate'"),
])
def test_a_bad_manifest_is_one_line_naming_file_and_field(shipped, what, words):
    _broken(shipped, what)
    with pytest.raises(NetworkError) as err:
        load_manifest(shipped / f"{NAME}.json")
    message = str(err.value)
    assert message.startswith(str(shipped / f"{NAME}.json")) and words in message and "\n" not in message


def test_which_network_is_the_default(made, shipped, tmp_path, monkeypatch):
    assert default_network(load_networks()).name == NAME
    other = "older-net"
    for suffix in (".onnx", ".pt"):
        shutil.copy(made / f"{NAME}{suffix}", shipped / f"{other}{suffix}")
    manifest(shipped, other, roles=("fp32", "weights"), default=True, date="2026-11-01")
    networks = load_networks()
    assert [n.name for n in networks] == [NAME, other]  # newest first
    with pytest.raises(NetworkError, match="several networks are marked default"):
        default_network(networks)
    manifest(shipped, other, roles=("fp32", "weights"), default=False)
    manifest(shipped, NAME, default=False)
    with pytest.raises(NetworkError, match="no network is marked default"):
        default_network(load_networks())
    (shipped / f"{other}.json").unlink()
    assert default_network(load_networks()).name == NAME  # a lone network needs no mark
    assert load_networks(tmp_path / "nowhere") == [] and default_network([]) is None
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "nowhere"))
    with pytest.raises(NetworkError, match=f"{ENV_DIR}=.*nowhere: no such folder"):
        load_networks()


def test_a_tampered_truncated_or_missing_file_is_caught(shipped):
    net = load_manifest(shipped / f"{NAME}.json")
    assert check_file(net, "fp32") == shipped / f"{NAME}.onnx"
    data = bytearray((shipped / f"{NAME}.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    (shipped / f"{NAME}.onnx").write_bytes(bytes(data))
    with pytest.raises(NetworkError, match=f"{NAME}.onnx has sha256 [0-9a-f]{{64}}, its manifest says "
                                           f"{net.files['fp32'].sha256}"):
        check_file(net, "fp32")
    (shipped / f"{NAME}.pt").write_bytes(b"version https://git-lfs.github.com/spec/v1\n")
    with pytest.raises(NetworkError, match=r"has 43 bytes, its manifest says \d+ \(a truncated copy, or a Git LFS"):
        check_file(net, "weights")
    (shipped / f"{NAME}.int8.onnx").unlink()
    with pytest.raises(NetworkError, match="int8.onnx is missing"):
        check_file(net, "int8")


def test_the_file_that_plays_follows_backend_precision_gate_and_cpu(shipped):
    net = load_manifest(shipped / f"{NAME}.json")
    assert model_role(net, "auto", "auto", int8_fast=True) == "int8"
    assert model_role(net, "auto", "auto", int8_fast=False) == "fp32"
    assert model_role(net, "onnx", "fp32", int8_fast=True) == "fp32"
    assert model_role(net, "auto", "int8", int8_fast=False) == "int8"
    assert model_role(net, "torch", "auto", int8_fast=True) == "weights"
    assert model_role(net, "auto", "bf16", int8_fast=True) == "weights"
    manifest(shipped, files={**net.raw["files"], "int8": {**net.raw["files"]["int8"], "gate": {"passed": False}}})
    failed = load_manifest(shipped / f"{NAME}.json")
    assert model_role(failed, "auto", "auto", int8_fast=True) == "fp32"
    manifest(shipped, roles=("fp32",))
    bare = load_manifest(shipped / f"{NAME}.json")
    with pytest.raises(NetworkError, match="ships no int8 file"):
        model_role(bare, "auto", "int8", int8_fast=True)
    with pytest.raises(NetworkError, match="ships no .pt weights"):
        model_role(bare, "torch", "auto", int8_fast=True)


def test_a_model_is_a_file_a_network_name_or_the_default(shipped, tmp_path):
    cfg = Config()
    default = resolve_model(None, cfg)
    assert default.network.name == NAME and default.role == ("int8" if native_int8() else "fp32")
    assert default.path == shipped / (f"{NAME}.int8.onnx" if native_int8() else f"{NAME}.onnx")
    fp32 = load_config(None, ["inference.precision=fp32"])
    assert resolve_model(NAME, fp32).path == shipped / f"{NAME}.onnx"
    assert resolve_model(f"network:{NAME}", fp32).path == shipped / f"{NAME}.onnx"
    assert resolve_model("default", fp32).network.name == NAME
    torch_cfg = load_config(None, ["inference.backend=torch"])
    assert network_choice(default.network, torch_cfg).path == shipped / f"{NAME}.pt"
    assert resolve_model(str(tmp_path / "m.pt"), cfg).network is None  # a file stays a file, even a missing one
    with pytest.raises(ModelFileError, match=f"'no-such' is neither a model file .* nor a network \\({NAME}\\)"):
        resolve_model("no-such", cfg)
    with pytest.raises(NetworkError, match="no network named 'no-such'"):
        resolve_model("network:no-such", cfg)


def test_no_network_no_model_keeps_asking_for_one(none_shipped):
    assert resolve_model(None, Config()) is None
    with pytest.raises(NetworkError, match="'default' names the default network, but none is in"):
        resolve_model("default", Config())


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_each_network_without_loading_torch(shipped, none_shipped, monkeypatch):
    code = ("import sys\nfrom dlzero.cli import main\nrc = main(['networks', 'list'])\n"
            "assert not {'torch', 'onnxruntime', 'onnx'} & set(sys.modules), 'networks list imported a model library'\n"
            "sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, ENV_DIR: str(shipped)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"networks in {shipped}:"
    assert lines[1].split() == ["NAME", "DATE", "ARCH", "SIZE", "STRENGTH"]
    size = sum(p.stat().st_size for p in shipped.glob(f"{NAME}.*") if p.suffix != ".json")
    assert lines[2].split()[:5] == ["*", NAME, "2026-12-10", "1x16", f"{size / 1e6:.1f}"]
    assert lines[2].endswith("  9-0-1 (90.0 %, 10 games) vs random mover, 16 playouts")
    proc = subprocess.run([sys.executable, "-m", "dlzero.cli", "networks", "list"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, ENV_DIR: str(none_shipped)})
    assert proc.returncode == 0 and proc.stdout.startswith(f"no networks in {none_shipped}")


def test_list_still_lists_when_no_network_is_the_one_default(made, shipped, capsys):
    """Issue 41: two manifests marked default made `networks list`, the command that shows which, fail too.
    It lists them, marked, and says why there is no default; the commands that play the default still refuse."""
    other = "older-net"
    for suffix in (".onnx", ".pt"):
        shutil.copy(made / f"{NAME}{suffix}", shipped / f"{other}{suffix}")
    manifest(shipped, other, roles=("fp32", "weights"), default=True, date="2026-11-01")
    code, out, err = _cli(capsys, "networks", "list")
    lines = out.splitlines()
    assert code == 0 and err == "", err
    assert [line.split()[:2] for line in lines[2:4]] == [["!", NAME], ["!", other]]
    assert lines[-1] == (f"! no default network: several networks are marked default ({NAME}, {other}); mark one in "
                         "its manifest; until then bestmove, usi, analyze, review and match need --model")
    code, _, err = _cli(capsys, "networks", "show")  # the default network: there is none to show
    assert code == 2 and "several networks are marked default" in err and err.count("\n") == 1
    manifest(shipped, other, roles=("fp32", "weights"), default=False, date="2026-11-01")
    manifest(shipped, NAME, default=False)
    code, out, _ = _cli(capsys, "networks", "list")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[2:4]] == [NAME, other]  # none marked
    assert out.splitlines()[-1].startswith("! no default network: no network is marked default")


def test_show_prints_the_manifest(shipped, capsys):
    code, out, _ = _cli(capsys, "networks", "show", NAME)
    assert code == 0 and json.loads(out) == json.loads((shipped / f"{NAME}.json").read_text())
    code, out, _ = _cli(capsys, "networks", "show")  # the default network
    assert code == 0 and json.loads(out)["name"] == NAME
    code, _, err = _cli(capsys, "networks", "show", "nope")
    assert code == 2 and err.count("\n") == 1 and "no network named 'nope'" in err


def test_verify_passes_a_sound_network_and_fails_a_tampered_one(shipped, capsys):
    code, out, _ = _cli(capsys, "networks", "verify")
    assert code == 0, out
    assert f"{NAME}: int8 {NAME}.int8.onnx" in out and "int8 accepted" in out and out.endswith(f"{NAME}: ok\n")
    assert f"{NAME}: weights {NAME}.pt: " in out and "loads in torch" in out
    data = bytearray((shipped / f"{NAME}.onnx").read_bytes())
    data[-10] ^= 0x01
    (shipped / f"{NAME}.onnx").write_bytes(bytes(data))
    code, _, err = _cli(capsys, "networks", "verify", NAME)
    assert code == 2 and err.count("\n") == 1 and "has sha256" in err


@pytest.mark.parametrize("lie, words", [
    ({"architecture": config_to_dict(ModelConfig(blocks=2, channels=16))}, "holds a 1x16 network"),
    ("gate failed", "holds an int8 report that says int8 accepted"),
])
def test_verify_checks_the_files_hold_what_the_manifest_says(shipped, capsys, lie, words):
    data = json.loads((shipped / f"{NAME}.json").read_text())
    if lie == "gate failed":
        data["files"]["int8"]["gate"]["passed"] = False
    else:
        data.update(lie)
    (shipped / f"{NAME}.json").write_text(json.dumps(data))
    code, _, err = _cli(capsys, "networks", "verify")
    assert code == 2 and words in err and err.count("\n") == 1


def _bestmove(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    bestmove.register(parser.add_subparsers())
    args = parser.parse_args(["bestmove", "--threads", "1", *argv])
    return args.func(args)


def test_bestmove_plays_the_default_network_and_says_so(shipped, capsys):
    manifest(shipped, roles=("fp32", "weights"))  # no int8 file: the fp32 one plays on any CPU
    assert _bestmove(["--position", "startpos moves 7g7f", "--playouts", "16"]) == 0
    out, err = capsys.readouterr()
    board = cshogi.Board()
    board.push_usi("7g7f")
    assert board.is_legal(board.move_from_usi(out.strip()))
    assert err == (f"dlzero bestmove: using the shipped network {NAME} (2026-12-10, 1x16), fp32 file; "
                   "--model to choose another\n")
    assert _bestmove(["--model", NAME, "--position", "startpos", "--playouts", "8", "--backend", "torch"]) == 0
    assert "weights file" in capsys.readouterr().err


def test_bestmove_without_network_or_model_asks_for_a_model(none_shipped):
    with pytest.raises(DlzeroError, match="no model: give --model FILE"):
        _bestmove(["--position", "startpos"])


def test_analyze_and_review_play_the_default_network(shipped, tmp_path, capsys):
    query = json.dumps({"id": "q", "position": "startpos", "maxVisits": 8})
    proc = subprocess.run([sys.executable, "-m", "dlzero.cli", "analyze", "--threads", "1"], input=query + "\n",
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, ENV_DIR: str(shipped), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["id"] == "q" and cshogi.Board().is_legal(cshogi.Board().move_from_usi(answer["bestmove"]))
    assert f"dlzero analyze: using the shipped network {NAME}" in proc.stderr
    record, out = tmp_path / "g.csa", tmp_path / "g.kif"
    exporter = cshogi.CSA.Exporter(str(record))
    exporter.info(init_board=cshogi.Board(), names=["b", "w"])
    board = cshogi.Board()
    for usi in ("7g7f", "3c3d"):
        exporter.move(board.move_from_usi(usi))
        board.push_usi(usi)
    exporter.endgame("%TORYO")
    exporter.close()
    code, _, err = _cli(capsys, "review", str(record), "--out", str(out), "--playouts", "4", "--no-progress",
                        "--threads", "1")
    assert code == 0 and f"dlzero review: using the shipped network {NAME}" in err
    assert f"dlzero review of g.csa: model {NAME}, 4 playouts" in out.read_text(encoding="cp932")


def _usi_session(commands: list[str], folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlzero.usi", "--threads", "1"], input="\n".join(commands) + "\n",
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, ENV_DIR: str(folder), "OMP_NUM_THREADS": "1"})


def test_usi_without_a_model_plays_the_default_network(shipped):
    proc = _usi_session(["usi", "isready", "position startpos moves 2g2f", "go nodes 16", "quit"], shipped)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0
    assert all(line.startswith(USI_LINE[0]) or line in USI_LINE[1] for line in lines), lines
    note = next(i for i, line in enumerate(lines) if line.startswith("info string using the shipped network"))
    assert lines[note].startswith(f"info string using the shipped network {NAME} (2026-12-10, 1x16), ")
    assert lines[note].endswith("file; setoption name ModelPath to choose another")
    assert lines.index("usiok") < note < lines.index("readyok")
    assert f"using the shipped network {NAME}" in proc.stderr
    board = cshogi.Board()
    board.push_usi("2g2f")
    assert board.is_legal(board.move_from_usi(lines[-1].split()[1]))


def test_usi_library_client_plays_a_network_named_by_model_path(shipped, tmp_path):
    """cshogi's USI client (as a GUI would): the network chosen by name through ModelPath, then a search."""
    script = tmp_path / "dlzero-usi"
    script.write_text(f"#!/bin/sh\nexport OMP_NUM_THREADS=1 {ENV_DIR}={shipped}\n"
                      f"exec {sys.executable} -m dlzero.usi --threads 1\n")
    script.chmod(0o755)
    engine = Engine(str(script))
    try:
        engine.setoption("ModelPath", f"network:{NAME}")
        lines: list[str] = []
        engine.isready(listener=lines.append)
        assert any(line.startswith(f"info string using the shipped network {NAME}") for line in lines), lines
        engine.position(["7g7f"])
        best, _ = engine.go(nodes=16)
        board = cshogi.Board()
        board.push_usi("7g7f")
        assert board.is_legal(board.move_from_usi(best))
    finally:
        engine.quit()


def test_usi_reports_a_missing_model_or_a_damaged_network_and_stays_alive(shipped, none_shipped):
    proc = _usi_session(["isready", "position startpos", "go nodes 8", "quit"], none_shipped)
    assert proc.stdout.splitlines() == [
        "info string error: no model (and no network ships): setoption name ModelPath value <file.pt|file.onnx>",
        "readyok", "info string error: no model (and no network ships): setoption name ModelPath value "
        "<file.pt|file.onnx>", "bestmove resign"]
    manifest(shipped, roles=("fp32", "weights"))
    (shipped / f"{NAME}.onnx").write_bytes(b"\0" * (shipped / f"{NAME}.onnx").stat().st_size)
    proc = _usi_session(["isready", "quit"], shipped)
    lines = proc.stdout.splitlines()
    assert lines[-1] == "readyok" and lines[0].startswith(f"info string error: network {NAME}: {NAME}.onnx has sha256")


def test_match_takes_the_default_network_as_a_player(shipped, capsys):
    code, out, err = _cli(capsys, "match", "default", "random", "--games", "2", "--playouts", "4", "--parallel", "2",
                          "--threads", "1", "--set", "gate.max_moves=16")
    assert code == 0 and out.startswith("A=default vs B=random: 2 games")
    assert f"dlzero match: A: using the shipped network {NAME}" in err
    code, _, err = _cli(capsys, "match", "randm", "random", "--games", "2")
    assert code == 2 and "'randm' is neither a model file" in err
