"""The player a name names: one builder per kind of `dlzero.player_names.PlayerName` (issue 50).

`build_player` turns a name into what a match plays (`dlzero.gating.match.Side`): a `MoveChooser`
(random, alpha-beta, miniosl's network, an outside USI engine) or an `Evaluator` that the match searches
(gen-NNNN, a shipped network, a model file, a run's best). `dlzero rate`, `dlzero match` and the gate build
every player here, so a new kind of player is a spelling in `dlzero.player_names` and one row in `BUILDERS`.
Two users of the same names sit elsewhere by the layers: `Engine.load` (the engine layer, below this one)
resolves a model name by `dlzero.engine.shipped.resolve_model`, as the model rows here do, and teachers (which
label positions, not play them) are built by `dlzero.teacher.spec` from the same parse.

- `random`: `RandomMover`, seeded by the context. `alphabeta:N`: `AlphaBeta` (deterministic and frozen).
- `miniosl:sample=N[:model=PATH]`: `MinioslPlayer` (the optional `teacher` extra, `pip install -e '.[teacher]'`).
- `gpsshogi:...`, `fairy-stockfish:...`: the Debian packages' engines (`apt-get install gpsshogi
  fairy-stockfish`) on one thread, GPS Shogi without its opening book; `usi:COMMAND;...` any USI engine with
  the options given; `NAME=COMMAND` an engine whose `go` is `rate.engine_go`. Engines start on their first
  move; a missing program is an error when the player is built, before any game. Time limits (byoyomi) make
  strength depend on the machine and its load; `nodes=N` does not.
- `gen-NNNN`: the context's run's model; `default`, `network:NAME`, files and run directories: the model
  `dlzero.engine.shipped.resolve_model` chooses for the inference settings.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from dlzero.config import Config
from dlzero.engine.shipped import require_model
from dlzero.errors import RunDirError
from dlzero.inference import Evaluator, load_model
from dlzero.inference.miniosl import MinioslNetwork
from dlzero.play.alphabeta import AlphaBeta
from dlzero.play.game import MoveChooser
from dlzero.play.players import MinioslPlayer, RandomMover
from dlzero.play.usi_client import Go, UsiClientError
from dlzero.play.usi_opponent import UsiOpponent
from dlzero.player_names import PlayerName, parse_player
from dlzero.rundir import RunDir

GPS_BYOYOMI_CAP_MS = 10_000  # GPS Shogi stops at its depth (0.1-3 s at depth 4); this only bounds a runaway
# kind -> (the Debian package, its executable); looked up on PATH, then in /usr/games (not on root's PATH)
ENGINE_PROGRAMS = {"gpsshogi": ("gpsshogi", "gpsusi"), "fairy-stockfish": ("fairy-stockfish", "fairy-stockfish")}

Player = MoveChooser | Evaluator


@dataclass(frozen=True)
class PlayContext:
    """What a name leaves to the caller: the config (inference settings, the engines' timeout and clock
    tolerance from `rate`), the seed of a random or sampling player, the run whose gen-NNNN models play, and
    where to say which shipped network plays (`note`, None: silently)."""

    cfg: Config
    seed: int = 0
    run: RunDir | None = None
    note: Callable[[str], None] | None = None


Builder = Callable[[PlayerName, PlayContext], Player]


def engine_program(kind: str) -> str:
    """The executable of a packaged engine kind; UsiClientError (with the apt-get line) if it is missing."""
    package, program = ENGINE_PROGRAMS[kind]
    found = shutil.which(program) or shutil.which(program, path="/usr/games")
    if not found:
        raise UsiClientError(f"player '{kind}' needs {program}, which is not installed here (Debian/Ubuntu: "
                             f"apt-get install {package})")
    return found


def _clock(name: PlayerName, ctx: PlayContext) -> int | None:
    """An engine whose name gives a byoyomi or a game clock (`time=MS`) loses on time past it plus the tolerance:
    its name's own (`tolerance=MS`), else the match's. GPS Shogi's default cap, which its name does not give, only
    bounds a runaway search: no clock."""
    if not name.setting("byoyomi") and not name.setting("time"):
        return None
    own = name.setting("tolerance")
    return ctx.cfg.rate.clock_tolerance_ms if own is None else own


def _random(name: PlayerName, ctx: PlayContext) -> Player:
    return RandomMover(ctx.seed)


def _alphabeta(name: PlayerName, ctx: PlayContext) -> Player:
    return AlphaBeta(int(name.value))


def _miniosl(name: PlayerName, ctx: PlayContext) -> Player:
    return MinioslPlayer(MinioslNetwork(name.option("model")), name.canonical(), int(name.value), ctx.seed)


def _gpsshogi(name: PlayerName, ctx: PlayContext) -> Player:
    options = {"LimitDepth": name.setting("depth"), "BookDepth": 0, "Thread": 1}
    go = Go(byoyomi_ms=name.setting("byoyomi") or (None if name.setting("time") else GPS_BYOYOMI_CAP_MS),
            time_ms=name.setting("time"), inc_ms=name.setting("inc"))
    return UsiOpponent(name.canonical(), [engine_program(name.kind)], go, ctx.cfg.rate.engine_timeout_s, options,
                       _clock(name, ctx))


def _fairy_stockfish(name: PlayerName, ctx: PlayContext) -> Player:
    options = {"UCI_Variant": "shogi", "Skill Level": name.setting("skill"), "Threads": 1}
    # Debian's Fairy-Stockfish 11.1 takes USI's `btime` for the side that moves second (its UCI colours): told
    # `btime 300 wtime 60000` as Black it thinks ~4 s, told the reverse ~0.1 s (2026-12-06), and at 10 s + 0.1 s
    # it lost 19 of 22 games on time with the clocks as USI orders them. So each side's time goes in the other's field.
    go = Go(byoyomi_ms=name.setting("byoyomi"), nodes=name.setting("nodes"), time_ms=name.setting("time"),
            inc_ms=name.setting("inc"), clocks_swapped=True)
    return UsiOpponent(name.canonical(), [engine_program(name.kind)], go, ctx.cfg.rate.engine_timeout_s, options,
                       _clock(name, ctx))


def _usi(name: PlayerName, ctx: PlayContext) -> Player:
    argv = shlex.split(name.value)
    if not argv or shutil.which(argv[0]) is None:
        raise UsiClientError(f"player '{name.canonical()}': no engine at '{argv[0] if argv else name.value}'")
    go = Go(byoyomi_ms=name.setting("byoyomi"), nodes=name.setting("nodes"), depth=name.setting("depth"),
            time_ms=name.setting("time"), inc_ms=name.setting("inc"))
    return UsiOpponent(name.canonical(), argv, go, ctx.cfg.rate.engine_timeout_s, dict(name.options),
                       _clock(name, ctx))


def _named_engine(name: PlayerName, ctx: PlayContext) -> Player:
    rate = ctx.cfg.rate
    return UsiOpponent(name.label(), name.value, rate.engine_go, rate.engine_timeout_s,
                       tolerance_ms=rate.clock_tolerance_ms)


def _generation(name: PlayerName, ctx: PlayContext) -> Player:
    if ctx.run is None:
        raise RunDirError(f"'{name.canonical()}' is a generation of a run, and no run is given here: name its "
                          "model file (RUN/models/gen-NNNN.pt) or the run directory (its best)")
    path = ctx.run.model_path(int(name.value))
    if not path.is_file():
        raise RunDirError(f"'{name.canonical()}': {path} does not exist")
    return load_model(path, ctx.cfg.inference)


def _model(name: PlayerName, ctx: PlayContext) -> Player:
    choice = require_model(name, ctx.cfg)
    if choice.network is not None and ctx.note is not None:
        ctx.note(choice.note("another player name"))
    return load_model(choice.path, ctx.cfg.inference)


BUILDERS: dict[str, Builder] = {
    "random": _random,
    "alphabeta": _alphabeta,
    "gen": _generation,
    "miniosl": _miniosl,
    "gpsshogi": _gpsshogi,
    "fairy-stockfish": _fairy_stockfish,
    "usi": _usi,
    "engine": _named_engine,
    "default": _model,
    "network": _model,
    "model": _model,
    "run": _model,
}


def build_player(name: str | PlayerName, ctx: PlayContext) -> Player:
    """The player `name` names (a string is parsed first: ValueError if it names none). Engines are not
    started yet; a model is loaded now."""
    parsed = parse_player(name) if isinstance(name, str) else name
    return BUILDERS[parsed.kind](parsed, ctx)
