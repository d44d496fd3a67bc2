"""The networks that ship with dlzero: their manifests, their files, and which one plays by default.

Users of an engine query moves before anything else, so dlzero carries trained networks as package data:
`configs/networks/` in a checkout, `dlzero/configs/networks/` in a wheel (`dlzero.resources`); the environment
variable DLZERO_NETWORKS_DIR names another folder instead (a user's own collection, a test's). Each network is
one manifest `NAME.json` beside its files, which it names (docs/networks.md has an example):

    format        1
    name, date    the manifest's file name without `.json`, and the day the network was made (YYYY-MM-DD)
    default       true on the one network commands use when given no model
    architecture  its model config (dlzero.config.ModelConfig's keys: blocks, channels, ...)
    files         fp32 (ONNX, required), int8 (`X.int8.onnx`, with its accuracy gate's verdict), weights (the `.pt`
                  model file training resumes from): each {path, sha256, size}, path a file name in the folder
    provenance    commands, teacher {name, version, licence} (null: none), positions, steps, minutes, machine,
                  parent (the network it was trained from, or null)
    strength      a list of {opponent, time_control, opening_suite, wins, draws, losses}

Reading manifests needs neither torch nor onnxruntime, so `dlzero networks list` stays quick. A file is checked
(size, then sha256) before it is used: a truncated copy or a Git LFS pointer is reported as that, not as an
unreadable model from deep inside onnxruntime. Every problem is a `NetworkError` of one line that names the
manifest and the field.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from dlzero.config import ModelConfig, config_from_dict
from dlzero.data.jsonfile import read_json
from dlzero.data.regular import special_kind
from dlzero.errors import ConfigError, DataError, NetworkError
from dlzero.resources import config_path

ENV_DIR = "DLZERO_NETWORKS_DIR"
FORMAT = 1
MAX_MANIFEST_BYTES = 1 << 20  # a manifest is a few KiB; a larger file named *.json is no manifest of dlzero's
log = logging.getLogger(__name__)
# role -> how its file name must end (the int8 file follows dlzero.inference.int8's naming, so the loader
# recognises it as an int8 model and never tries to make one beside it)
ROLES = {"fp32": ".onnx", "int8": ".int8.onnx", "weights": ".pt"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TOP = {"format", "name", "date", "default", "architecture", "files", "provenance", "strength"}
_FILE = {"path", "sha256", "size"}
_GATE = {"passed", "top1", "value_mae"}
_PROVENANCE = {"commands", "teacher", "positions", "steps", "minutes", "machine", "parent"}
_TEACHER = {"name", "version", "licence"}
_RESULT = {"opponent", "time_control", "opening_suite", "wins", "draws", "losses"}
_MISSING = object()


@dataclass(frozen=True)
class NetworkFile:
    """One file of a network, as its manifest records it."""

    role: str  # fp32, int8 or weights
    path: Path
    sha256: str
    size: int


@dataclass(frozen=True)
class Int8Gate:
    """The accuracy gate's verdict on the int8 file (dlzero.model.quantize): only a passed one plays by default."""

    passed: bool
    top1: float | None
    value_mae: float | None


@dataclass(frozen=True)
class Teacher:
    """The outside player whose labels the network learnt from; its licence travels with the network."""

    name: str
    version: str
    licence: str


@dataclass(frozen=True)
class Provenance:
    """How the network was made, so an attempt can be repeated and its hours added up."""

    commands: tuple[str, ...]
    teacher: Teacher | None
    positions: int
    steps: int
    minutes: float
    machine: str
    parent: str | None


@dataclass(frozen=True)
class Result:
    """One measured match: the network's wins, draws and losses against an opponent."""

    opponent: str
    time_control: str
    opening_suite: str
    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """Wins plus half the draws, a game."""
        return (self.wins + self.draws / 2) / self.games if self.games else 0.0

    def brief(self) -> str:
        """One terminal column: the score first, then the opponent's name and the time control without their
        glosses, e.g. '49-2-49 (50.0 %, 100 games) vs gpsshogi:depth=10:byoyomi=1000, byoyomi 1000 ms'.
        The glosses (how GPS keeps time, where the games are) stay in the manifest and `networks show`."""
        opponent = self.opponent.split(" (", 1)[0]
        clock = self.time_control.split(",", 1)[0].split(" (", 1)[0]
        return (f"{self.wins}-{self.draws}-{self.losses} ({100 * self.score:.1f} %, {self.games} games) "
                f"vs {opponent}, {clock}")


@dataclass(frozen=True)
class Network:
    """A shipped network: its manifest, validated, with its files' paths resolved."""

    name: str
    date: _dt.date
    default: bool
    architecture: ModelConfig
    files: dict[str, NetworkFile]
    int8_gate: Int8Gate | None
    provenance: Provenance
    strength: tuple[Result, ...]
    manifest: Path
    raw: dict[str, Any]

    @property
    def arch(self) -> str:
        """Blocks x channels, e.g. '5x64'."""
        return f"{self.architecture.blocks}x{self.architecture.channels}"

    @property
    def size(self) -> int:
        """Bytes of all its files together."""
        return sum(f.size for f in self.files.values())

    def describe(self) -> str:
        """One line for logs: 'NAME (2026-12-10, 5x64)'."""
        return f"{self.name} ({self.date.isoformat()}, {self.arch})"

    def headline(self) -> str:
        """Its first measured result, briefly (manifests list the most telling first), or that none was measured."""
        return self.strength[0].brief() if self.strength else "strength not measured"


def networks_dir() -> Path:
    """The folder of shipped networks: DLZERO_NETWORKS_DIR when set, else the package's own."""
    override = os.environ.get(ENV_DIR)
    return Path(override) if override else config_path("networks")


def _fail(where: str, problem: str) -> NoReturn:
    raise NetworkError(f"{where}: {problem}")


def _get(data: dict, key: str, where: str, ok: Callable[[Any], bool], want: str, default: Any = _MISSING) -> Any:
    """`data[key]` when it passes `ok`; its default when missing and it has one; else a one-line error."""
    if key not in data:
        if default is _MISSING:
            _fail(where, f"missing key '{key}'")
        return default
    value = data[key]
    if not ok(value):
        _fail(where, f"'{key}' must be {want}, got {json.dumps(value)[:80]}")
    return value


def _section(data: Any, where: str, allowed: set[str]) -> dict:
    """`data` as a JSON object with only `allowed` keys (a misspelt key is an error, not a silent default)."""
    if not isinstance(data, dict):
        _fail(where, f"must be a JSON object, got {json.dumps(data)[:80]}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        _fail(where, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(allowed))})")
    return data


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _date(v: Any) -> bool:
    try:
        _dt.date.fromisoformat(v)
    except (TypeError, ValueError):
        return False
    return re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) is not None


def _file(role: str, data: Any, folder: Path, where: str) -> tuple[NetworkFile, Int8Gate | None]:
    where = f"{where}: files.{role}"
    entry = _section(data, where, _FILE | ({"gate"} if role == "int8" else set()))
    name = _get(entry, "path", where, lambda v: isinstance(v, str) and _NAME.fullmatch(v) is not None,
                "a file name in the manifest's folder (no '/')")
    if not name.endswith(ROLES[role]) or (role == "fp32" and name.endswith(ROLES["int8"])):
        _fail(where, f"path '{name}' must end in {ROLES[role]}" + (" (not .int8.onnx)" if role == "fp32" else ""))
    sha = _get(entry, "sha256", where, lambda v: isinstance(v, str) and _SHA256.fullmatch(v) is not None,
               "64 lowercase hex digits")
    size = _get(entry, "size", where, _count, "a size in bytes")
    gate = None
    if role == "int8":
        g = _section(_get(entry, "gate", where, lambda v: True, ""), f"{where}.gate", _GATE)
        gate = Int8Gate(_get(g, "passed", f"{where}.gate", lambda v: isinstance(v, bool), "true or false"),
                        _get(g, "top1", f"{where}.gate", _number, "a number", None),
                        _get(g, "value_mae", f"{where}.gate", _number, "a number", None))
    return NetworkFile(role, folder / name, sha, size), gate


def _provenance(data: Any, where: str) -> Provenance:
    where = f"{where}: provenance"
    p = _section(data, where, _PROVENANCE)
    teacher_raw = _get(p, "teacher", where, lambda v: v is None or isinstance(v, dict), "an object or null")
    teacher = None
    if teacher_raw is not None:
        t = _section(teacher_raw, f"{where}.teacher", _TEACHER)
        teacher = Teacher(*(_get(t, k, f"{where}.teacher", _text, "a non-empty string")
                            for k in ("name", "version", "licence")))
    commands = _get(p, "commands", where, lambda v: isinstance(v, list) and bool(v) and all(_text(c) for c in v),
                    "a non-empty list of command lines")
    return Provenance(tuple(commands), teacher,
                      _get(p, "positions", where, _count, "a count"),
                      _get(p, "steps", where, _count, "a count"),
                      float(_get(p, "minutes", where, _number, "a number of minutes")),
                      _get(p, "machine", where, _text, "a non-empty string (cores, CPU model, GPU)"),
                      _get(p, "parent", where, lambda v: v is None or _text(v), "a network name or null", None))


def _result(data: Any, where: str) -> Result:
    r = _section(data, where, _RESULT)
    return Result(*(_get(r, k, where, _text, "a non-empty string") for k in ("opponent", "time_control",
                                                                             "opening_suite")),
                  *(_get(r, k, where, _count, "a count") for k in ("wins", "draws", "losses")))


def load_manifest(path: str | Path) -> Network:
    """Read and validate one manifest `NAME.json` (every problem a NetworkError naming the file and field)."""
    path = Path(path)
    where = str(path)
    try:  # bounded: a manifest nested 100,000 deep was a RecursionError traceback, a FIFO hung the reader
        raw = read_json(path, MAX_MANIFEST_BYTES)
    except OSError as exc:
        _fail(where, f"cannot be read ({exc.strerror or exc})")
    except DataError as exc:
        _fail(where, exc.reason)
    data = _section(raw, where, _TOP)
    _get(data, "format", where, lambda v: v == FORMAT, f"{FORMAT} (the manifest format this dlzero reads)")
    name = _get(data, "name", where, lambda v: isinstance(v, str) and _NAME.fullmatch(v) is not None,
                "letters, digits, '.', '_' or '-'")
    if name != path.stem:
        _fail(where, f"name '{name}' must be the manifest's file name without .json ('{path.stem}')")
    date = _dt.date.fromisoformat(_get(data, "date", where, _date, "a date YYYY-MM-DD"))
    default = _get(data, "default", where, lambda v: isinstance(v, bool), "true or false", False)
    try:
        arch = config_from_dict({"model": _get(data, "architecture", where, lambda v: isinstance(v, dict),
                                               "an object of model config keys")}).model
    except ConfigError as exc:
        _fail(where, f"architecture: {exc}")
    files_raw = _section(_get(data, "files", where, lambda v: True, ""), f"{where}: files", set(ROLES))
    if "fp32" not in files_raw:
        _fail(f"{where}: files", "missing key 'fp32' (the ONNX file every backend can load)")
    files: dict[str, NetworkFile] = {}
    gate = None
    for role in ROLES:
        if role in files_raw:
            files[role], found = _file(role, files_raw[role], path.parent, where)
            gate = gate or found
    strength = _get(data, "strength", where, lambda v: isinstance(v, list), "a list of results")
    return Network(name, date, default, arch, files, gate, _provenance(_get(data, "provenance", where,
                                                                            lambda v: True, ""), where),
                   tuple(_result(r, f"{where}: strength[{i}]") for i, r in enumerate(strength)), path, raw)


def load_networks(folder: str | Path | None = None) -> list[Network]:
    """Every network in `folder` (default: `networks_dir()`), newest first; none when the package ships none."""
    where = Path(folder) if folder is not None else networks_dir()
    if not where.is_dir():
        if folder is None and os.environ.get(ENV_DIR):
            raise NetworkError(f"{ENV_DIR}={where}: no such folder")
        return []
    networks = [load_manifest(p) for p in sorted(where.glob("*.json")) if not _special(p)]
    return sorted(networks, key=lambda n: (n.date, n.name), reverse=True)


def _special(path: Path) -> bool:
    """Whether `path`, named like a manifest, is no regular file (a FIFO, a device, a symlink loop): it is
    no manifest, so it is skipped, with one logged line naming it, and the other networks still load."""
    kind = special_kind(path)
    if kind is not None:
        log.warning("%s: %s, not a regular file: skipped", path, kind)
    return kind is not None


def find_network(name: str, networks: list[Network]) -> Network:
    """The network called `name`, or an error that lists those there are."""
    for net in networks:
        if net.name == name:
            return net
    shipped = ", ".join(n.name for n in networks) or f"none in {networks_dir()}"
    raise NetworkError(f"no network named '{name}' (networks: {shipped}; see `dlzero networks list`)")


def default_network(networks: list[Network]) -> Network | None:
    """The network marked default; a lone network is the default unmarked; None when there is none."""
    marked = [n for n in networks if n.default]
    if len(marked) > 1:
        raise NetworkError(f"several networks are marked default ({', '.join(n.name for n in marked)}); "
                           "mark one in its manifest")
    if marked:
        return marked[0]
    if len(networks) > 1:
        raise NetworkError(f"no network is marked default among {', '.join(n.name for n in networks)}; "
                           "set \"default\": true in one manifest")
    return networks[0] if networks else None


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """A file's sha256, computed once per version of it (the USI engine checks its file at each reload)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_file(network: Network, role: str) -> Path:
    """The path of `network`'s `role` file once its size and sha256 match the manifest (else a NetworkError)."""
    entry = network.files.get(role)
    if entry is None:
        raise NetworkError(f"network {network.name} has no {role} file")
    if not entry.path.is_file():
        raise NetworkError(f"network {network.name}: {entry.path} is missing")
    stat = entry.path.stat()
    if stat.st_size != entry.size:
        raise NetworkError(f"network {network.name}: {entry.path.name} has {stat.st_size} bytes, its manifest "
                           f"says {entry.size} (a truncated copy, or a Git LFS pointer?)")
    digest = _sha256(str(entry.path), stat.st_size, stat.st_mtime_ns)
    if digest != entry.sha256:
        raise NetworkError(f"network {network.name}: {entry.path.name} has sha256 {digest}, its manifest says "
                           f"{entry.sha256}")
    return entry.path


def model_role(network: Network, backend: str, precision: str, int8_fast: bool) -> str:
    """Which of `network`'s files plays with these inference settings (`inference.backend`, `.precision`).

    torch (or bf16, a torch precision) needs the `.pt` weights; int8 asked for needs the int8 file; otherwise the
    int8 file plays when its accuracy gate passed and `int8_fast` (a CPU with VNNI running the ONNX backend, where
    it is about 3x fp32, docs/int8.md), else the fp32 ONNX file.
    """
    if backend == "torch" or precision == "bf16":
        if "weights" not in network.files:
            raise NetworkError(f"network {network.name} ships no .pt weights, which backend torch and precision "
                               "bf16 need; use the onnx backend")
        return "weights"
    if precision == "int8":
        if "int8" not in network.files:
            raise NetworkError(f"network {network.name} ships no int8 file; use precision fp32 or auto")
        return "int8"
    if precision == "auto" and int8_fast and network.int8_gate is not None and network.int8_gate.passed:
        return "int8"
    return "fp32"
