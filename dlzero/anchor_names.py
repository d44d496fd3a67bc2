"""Names of rating anchors and outside engines: the grammar of a `rate.anchors` entry.

A name is the player (`random`, `alphabeta:N`, `gen-NNNN`, `miniosl:sample=N[:model=PATH]`, an engine such as
`gpsshogi:depth=D` or `usi:COMMAND;...`), so two runs that name the same anchor play the same
opponent, and ratings files and CSVs key on it. Its own module at the config layer: the config checks
every entry when it is loaded (`dlzero.config`), and the gate builds the players from the same
parse (`dlzero.gating.anchors`), without either holding the other's job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ENGINE_KINDS = ("gpsshogi", "fairy-stockfish", "usi")
_LIMITS = ("byoyomi", "nodes", "depth")  # `go` limits, in the order a name lists them
# per engine kind: its keys in the order a name lists them (usi: its USI options come first, as written)
_ENGINE_KEYS = {"gpsshogi": ("depth", "byoyomi"), "fairy-stockfish": ("skill", "byoyomi", "nodes"), "usi": _LIMITS}
ANCHOR_FORMS = ("random, alphabeta:N, gen-NNNN, miniosl:sample=N[:model=/ABSOLUTE/PATH.onnx], "
                "gpsshogi:depth=D[:byoyomi=MS], "
                "fairy-stockfish:skill=S:byoyomi=MS (or :nodes=N), usi:COMMAND[;OPTION=VALUE]...;byoyomi=MS "
                "(or nodes=N, depth=N)")


@dataclass(frozen=True)
class AnchorName:
    """A `rate.anchors` entry taken apart by `parse_anchor`.

    `kind`: random, alphabeta, gen, miniosl, or an engine (`ENGINE_KINDS`). `value`: the N of
    alphabeta:N, gen-NNNN and miniosl:sample=N, the command line of usi:COMMAND. `settings`: an
    engine's whole-number keys (depth, skill, and the `go` limits byoyomi, nodes, depth) in the order
    its name lists them; `options`: a usi: anchor's USI options, as written, or a miniosl: anchor's
    `model` (another ONNX file with miniosl's inputs, e.g. a later miniosl's network; absent: the
    installed package's, so the file is part of the name and ratings never mix two networks). The name is what ratings
    files and CSVs key on, so it has one spelling: `canonical()` writes it back, and `parse_anchor`
    refuses any other spelling.
    """

    kind: str
    value: str = ""
    settings: tuple[tuple[str, int], ...] = ()
    options: tuple[tuple[str, str], ...] = ()

    def setting(self, key: str) -> int | None:
        return dict(self.settings).get(key)

    def canonical(self) -> str:
        if self.kind == "random":
            return "random"
        if self.kind == "gen":
            return f"gen-{self.value}"
        if self.kind == "miniosl":
            return "".join([f"miniosl:sample={self.value}", *(f":{k}={v}" for k, v in self.options)])
        fields = [f"{k}={v}" for k, v in self.options] + [f"{k}={v}" for k, v in self.settings]
        if self.kind == "usi":  # `;` as in a teacher's usi:COMMAND;Key=value: a command line may hold ':'
            return ";".join([f"usi:{self.value}", *fields])
        return ":".join([self.kind, *fields])


def parse_anchor(name: str) -> AnchorName:
    """`name` (a `rate.anchors` entry, see `ANCHOR_FORMS`) taken apart; ValueError says what is wrong.

    Named engines separate their keys with `:`; `usi:` takes a command line (arguments allowed) and
    separates its keys with `;`, as the teachers' `usi:COMMAND;Key=value` specs do, so the same text
    names an engine in both places (limits aside). Ranges are the engines' own: GPS Shogi's LimitDepth
    4..10, Fairy-Stockfish's Skill Level -20..20. A named engine needs its strength and a fixed limit
    (fairy-stockfish exactly one of byoyomi and nodes; gpsshogi stops at its depth, byoyomi only caps
    it), a usi: engine at least one limit, so that the name alone defines the player.
    """
    if name == "random":
        return AnchorName("random")
    if m := re.fullmatch(r"alphabeta:([1-9]\d*)", name):
        return AnchorName("alphabeta", m.group(1))
    if m := re.fullmatch(r"gen-(\d{4,})", name):
        return AnchorName("gen", m.group(1))
    if m := re.fullmatch(r"miniosl:sample=(0|[1-9]\d*)(?::model=(.*))?", name):
        model = m.group(2)
        if model is None:
            return AnchorName("miniosl", m.group(1))
        if not model.startswith("/") or model != model.strip():
            raise ValueError(f"'{name}': model= takes the ONNX file's absolute path (the name is the player, "
                             "so it must not depend on the working directory)")
        return AnchorName("miniosl", m.group(1), options=(("model", model),))
    kind, _, rest = name.partition(":")
    if kind not in ENGINE_KINDS or not rest:
        raise ValueError(f"'{name}' is not an anchor (one of: {ANCHOR_FORMS})")
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
    limits = [k for k in _LIMITS if k in numbers and (kind != "gpsshogi" or k != "depth")]
    bad = [k for k in limits if numbers[k] < 1]
    if bad:
        raise ValueError(f"'{name}': {bad[0]} must be >= 1")
    if kind == "gpsshogi" and not 4 <= numbers.get("depth", 0) <= 10:
        raise ValueError(f"'{name}': gpsshogi needs depth=D with D from 4 to 10 (its LimitDepth)")
    if kind == "fairy-stockfish":
        if "skill" not in numbers or not -20 <= numbers["skill"] <= 20:
            raise ValueError(f"'{name}': fairy-stockfish needs skill=S with S from -20 to 20 (its Skill Level)")
        if len(limits) != 1:
            raise ValueError(f"'{name}': fairy-stockfish needs exactly one of byoyomi=MS and nodes=N")
    if kind == "usi" and not limits:
        raise ValueError(f"'{name}': a usi: engine needs a limit: byoyomi=MS, nodes=N or depth=N")
    parsed = AnchorName(kind, value, tuple((k, numbers[k]) for k in allowed if k in numbers),
                        tuple(options.items()))
    if parsed.canonical() != name:
        raise ValueError(f"'{name}': write it as '{parsed.canonical()}' (one spelling per player: rating "
                         f"files and CSVs go by the name)")
    return parsed
