"""Player names: the one grammar of every player dlzero names (issue 50, "a player is one name").

A name is the player, wherever it is written: a rating anchor (`rate.anchors`), an outside engine of
`rate.engines` (`NAME=COMMAND`), a `dlzero match` player or `--model`, a teacher (`--teacher`), the model
of `Engine.load`. `parse_player` takes any spelling apart once into a `PlayerName`; the players are built
from it by one table, `dlzero.play.registry` (teachers, which label positions instead of playing them,
by `dlzero.teacher.spec` from the same parse). The spellings (`FORMS`):

    random                                    a uniformly random legal move
    alphabeta:N                               the built-in alpha-beta at N positions a move
    gen-NNNN                                  generation N of a run (`dlzero rate`, the gate)
    miniosl:sample=N[:model=/ABS/PATH.onnx]   miniosl's network without search, its first N plies sampled
    gpsshogi:depth=D[:byoyomi=MS]             GPS Shogi to LimitDepth D
    fairy-stockfish:skill=S:byoyomi=MS        Fairy-Stockfish's shogi at Skill Level S (or :nodes=N)
    usi:COMMAND[;OPTION=VALUE]...;byoyomi=MS  any USI engine (or nodes=N, depth=N)
    ...:time=MS[:inc=MS]                      an engine on a game clock instead of byoyomi: main time a game,
                                              Fischer increment a move (see below)
    ...:byoyomi=MS:tolerance=MS               an engine with its own clock tolerance (see below)
    NAME=COMMAND                              an outside USI engine called NAME (`rate.engines`)
    default, network:NAME, NAME               a shipped network (dlzero.networks)
    FILE.pt, FILE.onnx, RUN_DIRECTORY         a model file, a run's best generation

Ratings files and CSVs key on the name, so a player has one spelling: `canonical()` writes it back and
`parse_player` refuses any other (a teacher spec, which nothing keys on, is read leniently by
`parse_teacher`). An engine with a byoyomi loses a move that arrives later than the byoyomi plus the
match's tolerance (`rate.clock_tolerance_ms`); `tolerance=MS` after the byoyomi gives that engine its own,
for an engine that cannot keep the clock (GPS Shogi counts whole seconds and answers a 1 s byoyomi after
1.0-1.5 s). It is part of the name, since the time an engine may take is part of its strength. `time=MS` gives
an engine a game clock (`btime`/`wtime`), with `inc=MS` a Fischer increment (`binc`/`winc`) or with
`byoyomi=MS` a byoyomi after it: the match keeps each side's clock and the move that empties it loses.

This module sits at the config layer, without torch or cshogi, because the config checks
every `rate.anchors` entry when it is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ENGINE_KINDS = ("gpsshogi", "fairy-stockfish", "usi")  # outside programs a name fixes completely
MODEL_KINDS = ("default", "network", "model", "run")  # dlzero's own networks, searched
ANCHOR_KINDS = ("random", "alphabeta", "gen", "miniosl", *ENGINE_KINDS)  # fixed opponents of the rating scale
FORMS = {
    "random": "random",
    "alphabeta": "alphabeta:N",
    "gen": "gen-NNNN",
    "miniosl": "miniosl:sample=N[:model=/ABSOLUTE/PATH.onnx]",
    "gpsshogi": "gpsshogi:depth=D[:byoyomi=MS][:time=MS[:inc=MS]][:tolerance=MS]",
    "fairy-stockfish": "fairy-stockfish:skill=S:byoyomi=MS[:tolerance=MS] (or :nodes=N, or :time=MS[:inc=MS])",
    "usi": "usi:COMMAND[;OPTION=VALUE]...;byoyomi=MS[;tolerance=MS] (or nodes=N, depth=N, time=MS[;inc=MS])",
    "engine": "NAME=COMMAND",
    "default": "default",
    "network": "network:NAME (or NAME)",
    "model": "a .pt or .onnx file",
    "run": "a run directory",
}
KINDS = tuple(FORMS)
ANCHOR_FORMS = ", ".join(FORMS[k] for k in ANCHOR_KINDS)
PLAYER_FORMS = ", ".join(FORMS.values())
MODEL_FORMS = ", ".join(FORMS[k] for k in MODEL_KINDS)
TEACHER_FORMS = "usi:COMMAND[;Key=value...] or onnx:miniosl[;Key=value...]"
MODEL_SUFFIXES = (".pt", ".onnx")
# a miniosl teacher's keys and their types (the adapter's batch, threads, softmax temperature, ONNX file)
MINIOSL_TEACHER_KEYS = {"model": str, "batch": int, "threads": int, "temperature": float}

_LIMITS = ("byoyomi", "nodes", "depth")  # `go` limits, in the order a name lists them
_CLOCK = ("time", "inc")  # a game clock: main time a game, Fischer increment a move
# per engine kind: its keys in the order a name lists them (usi: its USI options come first, as written)
_ENGINE_KEYS = {"gpsshogi": ("depth", "byoyomi", *_CLOCK, "tolerance"),
                "fairy-stockfish": ("skill", "byoyomi", "nodes", *_CLOCK, "tolerance"),
                "usi": (*_LIMITS, *_CLOCK, "tolerance")}
_GENERATION = re.compile(r"gen-(\d{4,})")
_ENGINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # NAME of NAME=COMMAND
_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # as dlzero.networks' manifests allow


class UnknownPlayer(ValueError):
    """A name in none of the spellings (not one with a known prefix and a wrong setting)."""


@dataclass(frozen=True)
class PlayerName:
    """A player's name taken apart by `parse_player` (or a teacher's by `parse_teacher`).

    `kind`: one of `KINDS`. `value`: the N of alphabeta:N, gen-NNNN and miniosl:sample=N (empty: miniosl
    as a teacher), the command line of usi:COMMAND and NAME=COMMAND, the NAME of a network, the path of a
    model file or run directory. `settings`: an engine's whole-number keys (depth, skill, and the `go`
    limits byoyomi, nodes, depth) in the order its name lists them. `options`: a usi: engine's USI
    options as written, a miniosl player's `model` (the file is part of the name, so ratings never mix two
    networks) or a miniosl teacher's keys, the NAME of NAME=COMMAND. `written`: the text parsed, for messages
    only (a bare NAME may be a missing file as much as a network: dlzero.engine.shipped says both).
    """

    kind: str
    value: str = ""
    settings: tuple[tuple[str, int], ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    written: str = field(default="", compare=False, repr=False)

    def setting(self, key: str) -> int | None:
        return dict(self.settings).get(key)

    def option(self, key: str) -> str | None:
        return dict(self.options).get(key)

    @property
    def is_engine(self) -> bool:
        """Whether the player is an outside program (a process to start and close)."""
        return self.kind in (*ENGINE_KINDS, "engine")

    def label(self) -> str:
        """What ratings and logs call the player: NAME for NAME=COMMAND, else the canonical name."""
        if self.kind == "engine":
            return self.option("name") or ""
        return self.canonical()

    def canonical(self) -> str:
        """The one spelling of the name (`parse_player(p.canonical()) == p`)."""
        if self.kind in ("random", "default"):
            return self.kind
        if self.kind == "alphabeta":
            return f"alphabeta:{self.value}"
        if self.kind == "gen":
            return f"gen-{self.value}"
        if self.kind == "network":
            return f"network:{self.value}"
        if self.kind in ("model", "run"):
            return self.value
        if self.kind == "engine":
            return f"{self.option('name')}={self.value}"
        if self.kind == "miniosl":
            if not self.value:  # the teacher: keys as a usi: teacher's, after `;`
                return "".join(["miniosl", *(f";{k}={v}" for k, v in self.options)])
            return "".join([f"miniosl:sample={self.value}", *(f":{k}={v}" for k, v in self.options)])
        fields = [f"{k}={v}" for k, v in self.options] + [f"{k}={v}" for k, v in self.settings]
        if self.kind == "usi":  # `;`: a command line may hold ':'
            return ";".join([f"usi:{self.value}", *fields])
        return ":".join([self.kind, *fields])


def parse_player(name: str) -> PlayerName:
    """`name` in any of its spellings (`FORMS`) taken apart; a one-line ValueError says what is wrong.

    The spellings with a prefix are read first, so `random` or `usi:...` never depends on the files in the
    working directory; then a folder is a run, a path (or a `.pt`/`.onnx` name) a model file, and a bare word
    a shipped network's name (whether one ships is for `dlzero.engine.shipped` to say).
    """
    if name in ("random", "default"):
        return PlayerName(name)
    if m := _GENERATION.fullmatch(name):
        return PlayerName("gen", m.group(1))
    kind, colon, rest = name.partition(":")
    if colon and kind == "alphabeta":
        if not re.fullmatch(r"[1-9]\d*", rest):
            raise ValueError(f"'{name}': alphabeta:N takes N >= 1, the positions it searches a move")
        return PlayerName("alphabeta", rest)
    if colon and kind == "miniosl":
        return _miniosl_player(name)
    if colon and kind in ENGINE_KINDS and rest:
        return _engine(name, kind, rest)
    if colon and kind == "network":
        if not _NETWORK_NAME.fullmatch(rest):
            raise ValueError(f"'{name}': network:NAME takes a network's name (letters, digits, . _ -)")
        return PlayerName("network", rest)
    path = Path(name)
    engine, eq, command = name.partition("=")
    if eq and not path.exists() and _ENGINE_NAME.fullmatch(engine):
        if engine in ("random", "default") or _GENERATION.fullmatch(engine) or not command.strip():
            raise ValueError(f"'{name}': NAME=COMMAND needs a command, and a NAME that is no other player's "
                             "(random, default, gen-NNNN)")
        return PlayerName("engine", command.strip(), options=(("name", engine),))
    if name and path.is_dir():
        return PlayerName("run", name)
    if name and (path.is_file() or path.suffix.lower() in MODEL_SUFFIXES or len(path.parts) > 1):
        return PlayerName("model", name)
    if _NETWORK_NAME.fullmatch(name) and kind not in ANCHOR_KINDS:
        return PlayerName("network", name, written=name)
    raise UnknownPlayer(f"'{name}' is not a player (one of: {PLAYER_FORMS})")


def parse_anchor(name: str) -> PlayerName:
    """`name` as a `rate.anchors` entry (`ANCHOR_FORMS`): a player of the rating scale, fixed by its name alone."""
    try:
        parsed = parse_player(name)
    except UnknownPlayer:
        parsed = None
    if parsed is None or parsed.kind not in ANCHOR_KINDS:
        raise ValueError(f"'{name}' is not an anchor (one of: {ANCHOR_FORMS})")
    return parsed


def check_anchor(name: str) -> str | None:
    """Why `name` is not an anchor name, or None if it is one."""
    try:
        parse_anchor(name)
    except ValueError as exc:
        return str(exc)
    return None


def model_generation(name: str) -> int | None:
    """The generation of a model player name (`gen-0003` -> 3), or None for other players."""
    m = _GENERATION.fullmatch(name)
    return int(m.group(1)) if m else None


def parse_engine_entry(entry: str) -> PlayerName:
    """A `rate.engines` entry, `NAME=COMMAND`; ValueError unless it is one."""
    try:
        parsed = parse_player(entry)
    except ValueError as exc:
        raise ValueError(f"engine {exc}") from None
    if parsed.kind != "engine":
        raise ValueError(f"engine '{entry}' must look like NAME=COMMAND (e.g. yane=/opt/yaneuraou/run), NAME "
                         "letters, digits, _ . + - and not a built-in player name (random, gen-NNNN)")
    return parsed


def parse_teacher(spec: str) -> PlayerName:
    """A teacher spec (`TEACHER_FORMS`): a usi: engine or miniosl's network, keys after `;`, read leniently.

    The same kinds as players: `usi:COMMAND;Key=value` is the engine a usi: anchor names (its USI options,
    and the limits byoyomi/nodes/depth as whole numbers), but needs no limit and no canonical order, since
    nothing keys on a teacher spec; its own keys (go, eval_scale, ...) stay options for the teacher to take.
    `miniosl` and `onnx:miniosl` are miniosl's network (no sample=: a teacher plays no game).
    """
    head, *parts = [p.strip() for p in spec.split(";")]
    if head in ("miniosl", "onnx:miniosl"):
        options = _pairs(spec, parts)
        unknown = sorted(set(options) - set(MINIOSL_TEACHER_KEYS))
        if unknown:
            raise ValueError(f"teacher '{spec}': unknown key(s) {', '.join(unknown)} "
                             f"(known: {', '.join(MINIOSL_TEACHER_KEYS)})")
        for key, value in options.items():
            try:
                MINIOSL_TEACHER_KEYS[key](value)
            except ValueError:
                raise ValueError(f"teacher '{spec}': {key}={value} is not a {MINIOSL_TEACHER_KEYS[key].__name__}") \
                    from None
        return PlayerName("miniosl", options=tuple(options.items()))
    kind, colon, target = head.partition(":")
    if colon and kind == "onnx":
        raise ValueError(f"teacher '{spec}': no ONNX adapter '{target}' (known: miniosl)")
    if not colon or kind != "usi" or not target.strip():
        raise ValueError(f"teacher '{spec}': expected {TEACHER_FORMS}")
    options = _pairs(spec, parts)
    limits: dict[str, int] = {}
    for key in [k for k in _LIMITS if k in options]:
        try:
            limits[key] = int(options.pop(key))
        except ValueError:
            raise ValueError(f"teacher '{spec}': {key} must be a whole number") from None
    return PlayerName("usi", target.strip(), tuple(limits.items()), tuple(options.items()))


def _pairs(spec: str, parts: list[str]) -> dict[str, str]:
    """A teacher spec's `Key=value` parts (split at the first `=`, blanks dropped)."""
    options: dict[str, str] = {}
    for part in filter(None, parts):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"teacher '{spec}': '{part}' is not Key=value")
        options[key.strip()] = value.strip()
    return options


def _miniosl_player(name: str) -> PlayerName:
    m = re.fullmatch(r"miniosl:sample=(0|[1-9]\d*)(?::model=(.*))?", name)
    if m is None:
        raise ValueError(f"'{name}' is not a player: miniosl plays as {FORMS['miniosl']}")
    model = m.group(2)
    if model is None:
        return PlayerName("miniosl", m.group(1))
    if not model.startswith("/") or model != model.strip():
        raise ValueError(f"'{name}': model= takes the ONNX file's absolute path (the name is the player, "
                         "so it must not depend on the working directory)")
    return PlayerName("miniosl", m.group(1), options=(("model", model),))


def _engine(name: str, kind: str, rest: str) -> PlayerName:
    """An outside engine's name. Named engines separate their keys with `:`; `usi:` takes a command line
    (arguments allowed) and separates its keys with `;`, as teacher specs do, so the same text names an
    engine in both places. Ranges are the engines' own: GPS Shogi's LimitDepth 4..10, Fairy-Stockfish's
    Skill Level -20..20. A named engine needs its strength and a fixed limit (fairy-stockfish exactly one
    of byoyomi and nodes; gpsshogi stops at its depth, byoyomi only caps it), a usi: engine at least one
    limit, so that the name alone defines the player."""
    fields = rest.split(";" if kind == "usi" else ":")
    value = ""
    if kind == "usi":
        value, fields = fields[0], fields[1:]
        if not value.strip() or value != value.strip():
            raise ValueError(f"'{name}': usi: is followed by the engine's command (e.g. "
                             "usi:/opt/yane/run;Threads=1;byoyomi=1000)")
    allowed = _ENGINE_KEYS[kind]
    numbers: dict[str, int] = {}
    options: dict[str, str] = {}
    for part in fields:
        key, sep, text = part.partition("=")
        if not sep or not key or not text:
            raise ValueError(f"'{name}': '{part}' is not KEY=VALUE")
        if key in numbers or key in options:
            raise ValueError(f"'{name}': {key} is given twice")
        if key not in allowed and kind != "usi":
            raise ValueError(f"'{name}': {kind} takes {', '.join(allowed)}, not '{key}'")
        if key not in allowed:
            options[key] = text
            continue
        try:
            numbers[key] = int(text)
        except ValueError:
            raise ValueError(f"'{name}': {key} must be a whole number, not '{text}'") from None
    limits = [k for k in (*_LIMITS, "time") if k in numbers and (kind != "gpsshogi" or k != "depth")]
    bad = [k for k in (*limits, "inc") if k in numbers and numbers[k] < 1]
    if bad:
        raise ValueError(f"'{name}': {bad[0]} must be >= 1")
    if "inc" in numbers and ("time" not in numbers or "byoyomi" in numbers):
        raise ValueError(f"'{name}': inc=MS is a Fischer increment: it needs time=MS and no byoyomi (a clock has "
                         "one or the other)")
    if "tolerance" in numbers and (not {"byoyomi", "time"} & set(numbers) or numbers["tolerance"] < 0):
        raise ValueError(f"'{name}': tolerance=MS is the time past its clock before a move loses on time: it "
                         "needs byoyomi=MS or time=MS, and a whole number >= 0")
    if kind == "gpsshogi" and not 4 <= numbers.get("depth", 0) <= 10:
        raise ValueError(f"'{name}': gpsshogi needs depth=D with D from 4 to 10 (its LimitDepth)")
    if kind == "fairy-stockfish":
        if "skill" not in numbers or not -20 <= numbers["skill"] <= 20:
            raise ValueError(f"'{name}': fairy-stockfish needs skill=S with S from -20 to 20 (its Skill Level)")
        if len([k for k in limits if k != "byoyomi" or "time" not in numbers]) != 1:
            raise ValueError(f"'{name}': fairy-stockfish needs exactly one of byoyomi=MS, nodes=N and a clock "
                             "(time=MS, with inc=MS or byoyomi=MS)")
    if kind == "usi" and not limits:
        raise ValueError(f"'{name}': a usi: engine needs a limit: byoyomi=MS, nodes=N, depth=N or time=MS")
    parsed = PlayerName(kind, value, tuple((k, numbers[k]) for k in allowed if k in numbers), tuple(options.items()))
    if parsed.canonical() != name:
        raise ValueError(f"'{name}': write it as '{parsed.canonical()}' (one spelling per player: rating "
                         f"files and CSVs go by the name)")
    return parsed
