"""The fixed opponents of the rating scale, by name (the names ratings files and CSVs use).

- `random`: a uniformly random legal move (`dlzero.play.RandomMover`, seeded). Pinned at Elo 0: the
  floor any learning must beat.
- `alphabeta:N`: the built-in classical reference at a budget of N positions per move
  (`dlzero.play.alphabeta`; deterministic and frozen, so `alphabeta:1000` means the same in every run).
- `gen-NNNN`: a model of the run itself (usually `gen-0000`, the untrained start).
- `miniosl:sample=N`: miniosl's pretrained network without search (`pip install -e '.[teacher]'`), its
  first N plies of a game drawn from its policy, then its own move: the teacher a student distilled
  from (`dlzero teach`), as a yardstick. `miniosl:sample=N:model=PATH` plays another ONNX file with
  miniosl's inputs instead of the installed package's (e.g. a later miniosl's raw network); the path is
  part of the name, so its ratings stay apart from the default network's.
- real engines over USI, above the alpha-beta rungs (`apt-get install gpsshogi fairy-stockfish`):
  `gpsshogi:depth=D` is GPS Shogi (world champion 2009 and 2012) searching to LimitDepth D (4..10) with
  no opening book on one thread (`go` carries a byoyomi that only caps a runaway search:
  `gpsshogi:depth=D:byoyomi=MS` sets it); `fairy-stockfish:skill=S:byoyomi=MS` (or `:nodes=N`) is
  Fairy-Stockfish's shogi at Skill Level S (-20..20) on one thread;
  `usi:COMMAND;OPTION=VALUE...;byoyomi=MS` (or `nodes=N`, `depth=N`) is any USI engine with the
  options given (`;` as in the teachers' specs). Why names and not config sections: the name is the
  player, so two runs that name the same anchor play the same opponent.
  Time limits (byoyomi) make strength depend on the machine and its load; `nodes=N` does not.
- outside USI engines named by the user: `NAME=COMMAND` (`rate.engines`, `go` from `rate.engine_go`).

The grammar of the names is `dlzero.anchor_names.parse_anchor` (the config checks every entry when loaded).
"""

from __future__ import annotations

import re
import shlex
import shutil

from dlzero.anchor_names import ANCHOR_FORMS, ENGINE_KINDS, parse_anchor
from dlzero.errors import ConfigError
from dlzero.inference.miniosl import MinioslNetwork
from dlzero.play import RANDOM, MoveChooser, RandomMover
from dlzero.play.alphabeta import AlphaBeta
from dlzero.play.players import MinioslPlayer
from dlzero.play.usi_client import Go, UsiClientError
from dlzero.play.usi_opponent import UsiOpponent

_ALPHABETA = re.compile(r"alphabeta:([1-9]\d*)$")
GPS_BYOYOMI_CAP_MS = 10_000  # GPS Shogi stops at its depth (0.1-3 s at depth 4); this only bounds a runaway
# kind -> (the Debian package, its executable); looked up on PATH, then in /usr/games (not on root's PATH)
ENGINE_PROGRAMS = {"gpsshogi": ("gpsshogi", "gpsusi"), "fairy-stockfish": ("fairy-stockfish", "fairy-stockfish")}
_MODEL = re.compile(r"gen-(\d{4,})$")
_ENGINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def model_generation(name: str) -> int | None:
    """The generation of a model player name (`gen-0003` -> 3), or None for other players."""
    m = _MODEL.match(name)
    return int(m.group(1)) if m else None


def check_anchor(name: str) -> str | None:
    """Why `name` is not an anchor name (see the module docstring), or None if it is one."""
    try:
        parse_anchor(name)
    except ValueError as exc:
        return str(exc)
    return None


def is_engine(name: str) -> bool:
    """Whether anchor `name` is an outside engine (a process to start and close)."""
    try:
        return parse_anchor(name).kind in ENGINE_KINDS
    except ValueError:
        return False


def engine_program(kind: str) -> str:
    """The executable of a packaged engine kind; UsiClientError (with the apt-get line) if it is missing."""
    package, program = ENGINE_PROGRAMS[kind]
    found = shutil.which(program) or shutil.which(program, path="/usr/games")
    if not found:
        raise UsiClientError(f"anchor '{kind}' needs {program}, which is not installed here (Debian/Ubuntu: "
                             f"apt-get install {package})")
    return found


def engine_anchor(name: str, timeout_s: float = 120.0, tolerance_ms: int | None = None) -> UsiOpponent:
    """The chooser of an engine anchor (not started: the process starts on its first move). A missing
    executable is an error now, before any game is played. `tolerance_ms`: an anchor whose name gives a
    byoyomi loses on time past it plus this (None: never flagged; GPS Shogi's cap is no clock)."""
    spec = parse_anchor(name)
    clock = tolerance_ms if spec.setting("byoyomi") else None
    if spec.kind == "gpsshogi":
        options: dict[str, object] = {"LimitDepth": spec.setting("depth"), "BookDepth": 0, "Thread": 1}
        go = Go(byoyomi_ms=spec.setting("byoyomi") or GPS_BYOYOMI_CAP_MS)
        return UsiOpponent(name, [engine_program(spec.kind)], go, timeout_s, options, clock)
    if spec.kind == "fairy-stockfish":
        options = {"UCI_Variant": "shogi", "Skill Level": spec.setting("skill"), "Threads": 1}
        go = Go(byoyomi_ms=spec.setting("byoyomi"), nodes=spec.setting("nodes"))
        return UsiOpponent(name, [engine_program(spec.kind)], go, timeout_s, options, clock)
    if spec.kind == "usi":
        argv = shlex.split(spec.value)
        if not argv or shutil.which(argv[0]) is None:
            raise UsiClientError(f"anchor '{name}': no engine at '{argv[0] if argv else spec.value}'")
        go = Go(byoyomi_ms=spec.setting("byoyomi"), nodes=spec.setting("nodes"), depth=spec.setting("depth"))
        return UsiOpponent(name, argv, go, timeout_s, dict(spec.options), clock)
    raise ValueError(f"'{name}' is not an engine anchor (one of: {ANCHOR_FORMS})")


def builtin_chooser(name: str, seed: int = 0) -> MoveChooser:
    """The chooser of a tree-less built-in anchor (`random`, `alphabeta:N`, `miniosl:sample=N[:model=PATH]`);
    MinioslError if a miniosl anchor's model file is missing or unreadable."""
    if name == RANDOM:
        return RandomMover(seed)
    if name.startswith("miniosl:"):
        spec = parse_anchor(name)
        return MinioslPlayer(MinioslNetwork(dict(spec.options).get("model")), name, int(spec.value), seed)
    m = _ALPHABETA.match(name)
    if m:
        return AlphaBeta(int(m.group(1)))
    raise ValueError(f"'{name}' is not a built-in anchor")


def parse_engine(spec: str) -> tuple[str, str]:
    """`NAME=COMMAND` -> (NAME, COMMAND); the name must not look like a built-in player."""
    name, sep, command = spec.partition("=")
    name, command = name.strip(), command.strip()
    if not sep or not name or not command:
        raise ConfigError(f"engine '{spec}' must look like NAME=COMMAND (e.g. yane=/opt/yaneuraou/run)")
    if not _ENGINE_NAME.match(name) or check_anchor(name) is None:
        raise ConfigError(f"engine name '{name}' must be letters, digits, _ . + - and not a built-in player "
                          "name (random, alphabeta:N, gen-NNNN)")
    return name, command
