"""USI options: each one is a typed view of a config key, so `setoption` goes through the same
validation as `--set` and a bad value can never reach the search.

Units follow dlshogi where it has the option: ResignThreshold and DrawValueBlack/White are in
permille (10 = a 1% win rate), times are in milliseconds. DrawPly 0 means "no draw by move count"
(stored as a very large `search.max_moves`, since that key must be positive). USI_Hash (MiB) is the
memory budget of the search tree and the evaluation cache, `search.hash_mb` (0: none but the node limit).

The search constants carry dlshogi's option names and units: USI spins are integers, so C_init,
C_fpu_reduction and Softmax_Temperature are in hundredths (144 = 1.44), which also gives an SPSA
tuner integer steps to move. 144 / 100 is the same double as the literal 1.44, so the defaults
search exactly as the config's floats do.

Match runners and GUIs set options by the names of the engines they were written for
(shogiarena syncs its move cap through YaneuraOu's MaxMovesToDraw or dlshogi's Draw_Ply and
refuses an engine that offers neither). ALIASES lists those names; each is offered beside its
dlzero option with the same type and range and sets the same config key. docs/usi-options.md has
the table.

The opening book takes YaneuraOu's names (USI_OwnBook, BookFile, BookMoves) and sets the `book` config
section; BookPick (best | weighted) chooses among a position's book moves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlzero.config import (
    BOOK_PICKS,
    MATE_MOVE_MAX_PLIES,
    MAX_LEAVES_PER_TREE,
    MAX_THREADS,
    ROOT_MATE_MAX_PLIES,
    Config,
    config_from_dict,
    config_to_dict,
)
from dlzero.engine.player import MAX_PLAYOUTS
from dlzero.errors import ConfigError

NO_DRAW_PLY = 1_000_000


@dataclass(frozen=True)
class UsiOption:
    """One option as the GUI sees it and the config key it sets (None: kept by the USI loop)."""

    name: str
    kind: str                      # spin, check, string, combo, button
    key: str | None
    lo: int = 0
    hi: int = 0
    choices: tuple[str, ...] = ()
    to_config: Callable[[Any], Any] = lambda v: v
    from_config: Callable[[Any], Any] = lambda v: v


def _permille(v: int) -> float:
    return v / 1000.0


def _to_permille(v: float) -> int:
    return int(round(v * 1000))


def _hundredths(v: int) -> float:
    return v / 100.0


def _to_hundredths(v: float) -> int:
    return int(round(v * 100))


# YaneuraOu's EnteringKingRule names -> search.entering_king_rule (dlzero.game_end's declaration rules).
ENTERING_KING_RULES = {"NoEnteringKing": "none", "CSARule24": "24", "CSARule27": "27"}
_EKR_NAMES = {rule: name for name, rule in ENTERING_KING_RULES.items()}

OPTIONS: tuple[UsiOption, ...] = (
    UsiOption("ModelPath", "string", None),
    UsiOption("Backend", "combo", "inference.backend", choices=("auto", "torch", "onnx")),
    UsiOption("Device", "string", "inference.device"),
    UsiOption("Precision", "combo", "inference.precision", choices=("auto", "fp32", "fp16", "bf16", "int8")),
    UsiOption("Threads", "spin", "inference.threads", 0, MAX_THREADS),
    UsiOption("EvalStreams", "spin", "search.eval_streams", 0, 64),
    UsiOption("BatchSize", "spin", "search.leaves_per_tree", 1, MAX_LEAVES_PER_TREE),
    UsiOption("Playouts", "spin", "usi.playouts", 0, MAX_PLAYOUTS),
    UsiOption("SearchAlgorithm", "combo", "search.algorithm", choices=("puct", "gumbel")),
    UsiOption("ByoyomiMargin", "spin", "usi.byoyomi_margin_ms", 0, 60_000),
    UsiOption("TimeMargin", "spin", "usi.time_margin_ms", 0, 60_000),
    UsiOption("ResignThreshold", "spin", "usi.resign_threshold", 0, 1000, to_config=_permille,
              from_config=_to_permille),
    UsiOption("MultiPV", "spin", "usi.multipv", 1, 100),
    UsiOption("USI_ShowWDL", "check", "usi.show_wdl"),
    UsiOption("Strength", "spin", "usi.strength", 1, 20),
    UsiOption("EnteringKingRule", "combo", "search.entering_king_rule", choices=tuple(ENTERING_KING_RULES),
              to_config=ENTERING_KING_RULES.__getitem__, from_config=_EKR_NAMES.__getitem__),
    UsiOption("DrawPly", "spin", "search.max_moves", 0, NO_DRAW_PLY,
              to_config=lambda v: v or NO_DRAW_PLY, from_config=lambda v: 0 if v >= NO_DRAW_PLY else v),
    UsiOption("DrawValueBlack", "spin", "search.draw_value_black", 0, 1000, to_config=_permille,
              from_config=_to_permille),
    UsiOption("DrawValueWhite", "spin", "search.draw_value_white", 0, 1000, to_config=_permille,
              from_config=_to_permille),
    UsiOption("PVInterval", "spin", "usi.pv_interval_ms", 0, 60_000),
    UsiOption("ReuseTree", "check", "search.reuse_tree"),
    # the deepest mate searches the engine can run and still answer within a second (dlzero.config)
    UsiOption("RootMateDepth", "spin", "search.root_mate_depth", 0, ROOT_MATE_MAX_PLIES),
    UsiOption("LeafMateDepth", "spin", "search.leaf_mate_depth", 0, MATE_MOVE_MAX_PLIES),
    UsiOption("MateGuardNodes", "spin", "search.mate_guard_nodes", 0, 10_000_000),
    UsiOption("USI_Ponder", "check", None),
    UsiOption("USI_Hash", "spin", "search.hash_mb", 0, 1 << 20),
    UsiOption("Clear Hash", "button", None),
    # PUCT constants (dlshogi's names): c(N) = C_init + ln((N + C_base + 1) / C_base) below the root,
    # the _root pair at the root; first-play urgency of an unvisited move = parent Q - C_fpu_reduction
    # * sqrt(prior of the visited moves).
    UsiOption("C_init", "spin", "search.c_init", 1, 1000, to_config=_hundredths, from_config=_to_hundredths),
    UsiOption("C_base", "spin", "search.c_base", 1, 1_000_000, to_config=float, from_config=lambda v: int(round(v))),
    UsiOption("C_fpu_reduction", "spin", "search.fpu_reduction", 0, 200, to_config=_hundredths,
              from_config=_to_hundredths),
    UsiOption("C_init_root", "spin", "search.c_init_root", 1, 1000, to_config=_hundredths,
              from_config=_to_hundredths),
    UsiOption("C_base_root", "spin", "search.c_base_root", 1, 1_000_000, to_config=float,
              from_config=lambda v: int(round(v))),
    UsiOption("C_fpu_reduction_root", "spin", "search.fpu_reduction_root", 0, 200, to_config=_hundredths,
              from_config=_to_hundredths),
    UsiOption("Softmax_Temperature", "spin", "search.softmax_temperature", 1, 1000, to_config=_hundredths,
              from_config=_to_hundredths),
    # the opening book (dlzero.engine.book): YaneuraOu's names; BookPick is dlzero's (best | weighted by count)
    UsiOption("USI_OwnBook", "check", "book.enabled"),
    UsiOption("BookFile", "string", "book.file", to_config=lambda v: "" if v == "<empty>" else v),
    UsiOption("BookMoves", "spin", "book.max_ply", 0, 10_000),
    UsiOption("BookPick", "combo", "book.pick", choices=BOOK_PICKS),
)
# Other engines' names for dlzero options: alias -> the dlzero option it sets (same type, range, key).
ALIASES = {
    "MaxMovesToDraw": "DrawPly",          # YaneuraOu; shogiarena's move-cap sync
    "Draw_Ply": "DrawPly",                # dlshogi; shogiarena's move-cap sync
    "NodesLimit": "Playouts",             # YaneuraOu: a node cap per move, the clock still applies
    "Const_Playout": "Playouts",          # dlshogi
    "NetworkDelay": "TimeMargin",         # YaneuraOu (see docs/usi-options.md for how they differ)
    "NetworkDelay2": "ByoyomiMargin",     # YaneuraOu: how early before the byoyomi deadline a move is sent
    "Byoyomi_Margin": "ByoyomiMargin",    # dlshogi
    "Time_Margin": "TimeMargin",          # dlshogi
    "DNN_Model": "ModelPath",             # dlshogi
    "UCT_Threads": "EvalStreams",         # dlshogi: search threads, each with its batch in flight
    "DNN_Batch_Size": "BatchSize",        # dlshogi: positions per network call of one search thread
    "Resign_Threshold": "ResignThreshold",  # dlshogi
    "Draw_Value_Black": "DrawValueBlack",   # dlshogi
    "Draw_Value_White": "DrawValueWhite",   # dlshogi
    "PV_Interval": "PVInterval",          # dlshogi
    "ReuseSubtree": "ReuseTree",          # dlshogi
}
BY_NAME = {o.name.lower(): o for o in OPTIONS}
BY_NAME.update({alias.lower(): BY_NAME[name.lower()] for alias, name in ALIASES.items()})

# The search constants an SPSA tuner may move, with the perturbation it ends with (c_end, in the
# option's units): about a twentieth of a sensible range, as fishtest-style tuners suggest. Draw
# values are left out: an engine tuned against itself cannot learn a contempt.
SPSA_STEPS = {"C_init": 15, "C_base": 3000, "C_fpu_reduction": 5, "C_init_root": 15, "C_base_root": 3000,
              "C_fpu_reduction_root": 5, "Softmax_Temperature": 10}
SPSA_R_END = 0.002
# Options whose change means the model must be loaded again at the next `isready`.
MODEL_KEYS = ("inference.backend", "inference.device", "inference.threads", "inference.precision")


def get_key(cfg: Config, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def parse_value(opt: UsiOption, text: str) -> Any:
    """The option's value from `setoption` text, in GUI units; ValueError names what is wrong."""
    if opt.kind == "spin":
        try:
            v = int(text)
        except ValueError:
            raise ValueError(f"{opt.name} must be an integer, got '{text}'") from None
        if not opt.lo <= v <= opt.hi:
            raise ValueError(f"{opt.name} must be between {opt.lo} and {opt.hi}, got {v}")
        return v
    if opt.kind == "check":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{opt.name} must be true or false, got '{text}'")
        return text.lower() == "true"
    if opt.kind == "combo" and text not in opt.choices:
        raise ValueError(f"{opt.name} must be one of {', '.join(opt.choices)}, got '{text}'")
    return text


def with_option(cfg: Config, opt: UsiOption, value: Any) -> Config:
    """A copy of `cfg` with the option applied, validated like any config override."""
    assert opt.key is not None
    data = config_to_dict(cfg)
    section, name = opt.key.split(".")
    data[section][name] = opt.to_config(value)
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def option_lines(cfg: Config, model_path: str | None, ponder: bool) -> list[str]:
    """The `option name ...` lines `usi` answers with, defaults taken from the current config;
    dlzero's own options first, then the aliases (a tool checks the list for the names it knows)."""
    lines = []
    named = [(opt.name, opt) for opt in OPTIONS] + [(alias, BY_NAME[name.lower()]) for alias, name in ALIASES.items()]
    for name, opt in named:
        if opt.kind == "button":
            lines.append(f"option name {name} type button")
            continue
        if opt.name == "ModelPath":
            default: Any = model_path or "<empty>"
        elif opt.name == "USI_Ponder":
            default = ponder
        else:
            default = opt.from_config(get_key(cfg, opt.key))
        if opt.kind == "check":
            default = "true" if default else "false"
        elif opt.kind == "string" and default == "":
            default = "<empty>"
        line = f"option name {name} type {opt.kind} default {default}"
        if opt.kind == "spin":
            line += f" min {opt.lo} max {opt.hi}"
        elif opt.kind == "combo":
            line += "".join(f" var {c}" for c in opt.choices)
        lines.append(line)
    return lines


def tunables_manifest(cfg: Config) -> dict:
    """The answer to shogiarena's `usi_tunables`: the search constants as SPSA tunables (id: the
    config key, option: the USI spin, default from `cfg`), so a space file can `select` them by id."""
    tunables = []
    for name, step in SPSA_STEPS.items():
        opt = BY_NAME[name.lower()]
        tunables.append({"id": opt.key.split(".")[1], "option": name, "value_type": "int", "encoding": "integer",
                         "default": opt.from_config(get_key(cfg, opt.key)), "min": opt.lo, "max": opt.hi,
                         "schedule": {"c_end": step, "r_end": SPSA_R_END}})
    return {"schema_version": "shogiarena.usi_tunables.v1", "tunables": tunables}
