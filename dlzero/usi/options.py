"""USI options: each one is a typed view of a config key, so `setoption` goes through the same
validation as `--set` and a bad value can never reach the search.

Units follow dlshogi where it has the option: ResignThreshold and DrawValueBlack/White are in
permille (10 = a 1% win rate), times are in milliseconds. DrawPly 0 means "no draw by move count"
(stored as a very large `search.max_moves`, since that key must be positive). USI_Hash (MiB) is the
search tree's memory budget, `search.hash_mb` (0: none but the node limit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlzero.config import Config, config_from_dict, config_to_dict
from dlzero.errors import ConfigError

NO_DRAW_PLY = 1_000_000


@dataclass(frozen=True)
class UsiOption:
    """One option as the GUI sees it and the config key it sets (None: kept by the USI loop)."""

    name: str
    kind: str                      # spin, check, string, combo
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


# YaneuraOu's EnteringKingRule names -> search.entering_king_rule (dlzero.game_end's declaration rules).
ENTERING_KING_RULES = {"NoEnteringKing": "none", "CSARule24": "24", "CSARule27": "27"}
_EKR_NAMES = {rule: name for name, rule in ENTERING_KING_RULES.items()}

OPTIONS: tuple[UsiOption, ...] = (
    UsiOption("ModelPath", "string", None),
    UsiOption("Backend", "combo", "inference.backend", choices=("auto", "torch", "onnx")),
    UsiOption("Device", "string", "inference.device"),
    UsiOption("Precision", "combo", "inference.precision", choices=("auto", "fp32", "fp16", "bf16", "int8")),
    UsiOption("Threads", "spin", "inference.threads", 0, 256),
    UsiOption("EvalStreams", "spin", "search.eval_streams", 0, 64),
    UsiOption("BatchSize", "spin", "search.leaves_per_tree", 1, 4096),
    UsiOption("Playouts", "spin", "usi.playouts", 0, 1_000_000_000),
    UsiOption("SearchAlgorithm", "combo", "search.algorithm", choices=("puct", "gumbel")),
    UsiOption("ByoyomiMargin", "spin", "usi.byoyomi_margin_ms", 0, 60_000),
    UsiOption("TimeMargin", "spin", "usi.time_margin_ms", 0, 60_000),
    UsiOption("ResignThreshold", "spin", "usi.resign_threshold", 0, 1000, to_config=_permille,
              from_config=_to_permille),
    UsiOption("MultiPV", "spin", "usi.multipv", 1, 100),
    UsiOption("USI_ShowWDL", "check", "usi.show_wdl"),
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
    UsiOption("RootMateDepth", "spin", "search.root_mate_depth", 0, 31),
    UsiOption("LeafMateDepth", "spin", "search.leaf_mate_depth", 0, 15),
    UsiOption("USI_Ponder", "check", None),
    UsiOption("USI_Hash", "spin", "search.hash_mb", 0, 1 << 20),
)
BY_NAME = {o.name.lower(): o for o in OPTIONS}
# Sent by GUIs to every engine: accepted quietly, not offered (dlzero has no opening book).
IGNORED = frozenset({"usi_ownbook"})
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
    """The `option name ...` lines `usi` answers with, defaults taken from the current config."""
    lines = []
    for opt in OPTIONS:
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
        line = f"option name {opt.name} type {opt.kind} default {default}"
        if opt.kind == "spin":
            line += f" min {opt.lo} max {opt.hi}"
        elif opt.kind == "combo":
            line += "".join(f" var {c}" for c in opt.choices)
        lines.append(line)
    return lines
