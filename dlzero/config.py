"""Typed configuration: plain YAML files in `configs/`, defaults here, overrides from the CLI.

A config is a tree of dataclasses. `load_config` reads a YAML file, checks every key and value
against the dataclass fields (an unknown key or a value of the wrong type is a `ConfigError` that
names the dotted key), then applies `--set section.key=value` overrides, which are parsed as YAML
scalars so `--set search.c_init=1.5` and `--set train.amp=off` both work.

Constraints a value must meet are declared beside the field (`_field(..., check=...)`), so the
rule and the default live together.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dlzero.errors import ConfigError
from dlzero.game_end import DECLARATION_RULES
from dlzero.gate_modes import GATE_MODES, gate_interval
from dlzero.player_names import parse_anchor, parse_engine_entry

Check = Callable[[Any], str | None]
logger = logging.getLogger(__name__)


def _field(default: Any, check: Check | None = None, doc: str = "") -> Any:
    """A dataclass field with an optional validity check and a one-line description."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"check": check, "doc": doc})
    return field(default=default, metadata={"check": check, "doc": doc})


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def _non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _between(least: int, most: int) -> Check:
    """An integer of least..most: for a value handed on to a C size or count (a read's length, a thread
    count), where a larger one ends in an OverflowError or TypeError traceback instead of one line."""
    def check(v: Any) -> str | None:
        return None if least <= v <= most else f"must be between {least} and {most:,}"
    return check


def _unit(v: Any) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be between 0 and 1"


def _one_of(*options: str) -> Check:
    def check(v: Any) -> str | None:
        return None if v in options else f"must be one of {', '.join(options)}"

    return check


def _gate_mode(v: Any) -> str | None:
    try:
        gate_interval(v)
    except ValueError:
        return f"must be {GATE_MODES}"
    return None


def _odd_or_zero(v: Any) -> str | None:
    return None if v == 0 or (v > 0 and v % 2 == 1) else "must be 0 (off) or an odd number of plies"


# The deepest mate searches the engine can run and still answer `stop` and `isready` within a second.
# cshogi's mate_move holds the GIL and cannot be stopped: up to 7 plies it took at most 60 ms (rook,
# bishop and more in hand against a bare king), 9 plies up to 0.3 s, 11 plies 4 s; a leaf search runs
# at every new node. The root search goes on beyond 7 plies with df-pn in a helper process the engine
# kills when it must answer (dlzero.search.mate), to cshogi DfPn's depth of 31 plies.
MATE_MOVE_MAX_PLIES = 7
ROOT_MATE_MAX_PLIES = 31
# How the USI engine chooses among a position's book moves (book.pick, BookPick): dlzero.data.book.pick.
BOOK_PICKS = ("best", "weighted")
# The ranges the engine offers for its compute threads and its batch (USI Threads and BatchSize, the --threads
# flag of every command, inference.threads, and bestmove's --batch): more only makes a move late.
MAX_THREADS = 256
MAX_LEAVES_PER_TREE = 4096
MAX_LINE_BYTES = 1 << 30  # analysis.max_line_bytes: a read's length must fit a C ssize_t; no query needs 1 GiB
DFPN_NODES_MAX = (1 << 31) - 1  # cshogi's DfPn takes its node limit as a C int (`set_max_search_node`)


def _dfpn_nodes(v: Any) -> str | None:
    """A df-pn node budget: past a C int, cshogi raises OverflowError (after the search, in the mate guard)."""
    return _non_negative(v) or (None if v <= DFPN_NODES_MAX else f"must be at most {DFPN_NODES_MAX} (cshogi's "
                                                                    "df-pn node limit is a C int)")


def _mate_plies(most: int) -> Check:
    def check(v: Any) -> str | None:
        return _odd_or_zero(v) or (None if v <= most else f"must be at most {most} plies")

    return check


def _block_indices(v: Any) -> str | None:
    ok = all((isinstance(i, int) and not isinstance(i, bool) and i >= 0) or (isinstance(i, str) and i.isdigit())
             for i in v)
    return None if ok else "must be a list of block indices (0 = the first block), e.g. [2, 4]"


def _anchor_list(v: Any) -> str | None:
    for name in v:
        try:
            parse_anchor(str(name))
        except ValueError as exc:
            return f"has {exc}"
    if "random" not in v:
        return "must include 'random' (the rating scale's zero)"
    return None if len(set(v)) == len(v) else "must not name an anchor twice"


def _engine_list(v: Any) -> str | None:
    for entry in v:
        try:
            parse_engine_entry(str(entry))
        except ValueError as exc:
            return f"has {exc}"
    return None


def _data_files(v: Any) -> str | None:
    ok = all(isinstance(p, str) and p.endswith((".hcpe3", ".hcpe")) for p in v)
    return None if ok else "must be a list of .hcpe3 or .hcpe files"


def _below_one(v: Any) -> str | None:
    return None if 0.0 <= v < 1.0 else "must be at least 0 and below 1 (a batch keeps room for self-play data)"


def _override_list(v: Any) -> str | None:
    if not isinstance(v, list):
        return "must be a list of 'section.key=value' lines"
    for item in v:
        if not isinstance(item, str) or "=" not in item or "." not in item.split("=", 1)[0]:
            return f"must be a list of 'section.key=value' lines ({item!r} is not one)"
        if item.split("=", 1)[0].strip().startswith("loop.from_network"):
            return "cannot set itself"
    return None


def _even(v: Any) -> str | None:
    return None if v > 0 and v % 2 == 0 else "must be an even number > 0 (games come in colour-swapped pairs)"


# The largest network dlzero builds: 2 GiB of fp32 weights (dlshogi-class networks have tens of millions).
MAX_MODEL_PARAMETERS = 500_000_000


@dataclass
class ModelConfig:
    """ResNet shape: stem, `blocks` residual blocks of `channels`, policy and value heads."""

    blocks: int = _field(5, _positive, "number of residual blocks")
    channels: int = _field(64, _positive, "channels of the trunk")
    value_channels: int = _field(4, _positive, "1x1 conv channels at the start of the value head")
    value_fc: int = _field(256, _positive, "hidden units of the value head")
    global_pool_blocks: list = _field([], _block_indices, "residual blocks (0-based) that are KataGo global-pooling "
                                      "bias blocks; empty: none (dlshogi's plain ResNet)")

    def __post_init__(self) -> None:
        self.global_pool_blocks = sorted({int(i) for i in self.global_pool_blocks})
        if self.global_pool_blocks and self.global_pool_blocks[-1] >= self.blocks:
            raise ConfigError(f"config key 'model.global_pool_blocks' names block {self.global_pool_blocks[-1]}, "
                              f"but the tower has blocks 0..{self.blocks - 1}")
        size = self.parameters()
        if size > MAX_MODEL_PARAMETERS:  # refused before anything is allocated (blocks=100000 took 22 GB, then died)
            raise ConfigError(f"model.blocks={self.blocks}, model.channels={self.channels}, "
                              f"model.value_fc={self.value_fc} make a network of {size:,} parameters "
                              f"({size * 4 / 2**30:,.1f} GiB of fp32 weights, about 4 times that to train); "
                              f"dlzero builds at most {MAX_MODEL_PARAMETERS:,}: use fewer blocks or channels")

    def parameters(self) -> int:
        """The parameter count of the network this config builds (dlzero.model.resnet; a test checks the two
        agree), computed from the shape alone so that a size check needs no allocation."""
        c, planes, labels = self.channels, 100, 2187  # dlzero.encoding's NUM_PLANES and NUM_LABELS
        bn = 2 * c  # a batch norm's weight and bias (its running statistics are buffers)
        pooled = max(1, c // 4)  # dlzero.model.blocks.pooled_channels
        plain_block = 2 * (9 * c * c + bn)
        pool_block = 9 * c * c + bn + (2 * pooled + 1) * (c - pooled) + 9 * (c - pooled) * c + bn
        n_pool = len(self.global_pool_blocks)
        tower = (self.blocks - n_pool) * plain_block + n_pool * pool_block
        policy = c * c + bn + c * (labels // 81) + labels
        value = (c + 2) * self.value_channels + (81 * self.value_channels + 1) * self.value_fc + self.value_fc + 1
        return 9 * planes * c + bn + tower + policy + value


@dataclass
class QuantizeConfig:
    """int8 models (`inference.precision: int8`): calibration and the gate they must pass (the search gate in
    `dlzero export --int8`, the loop and `dlzero selfplay`, the raw gate where the loader makes them on its own:
    dlzero.model.quantize)."""

    calibration: str = _field("auto", _one_of("auto", "minmax", "percentile", "entropy"),
                              "how activation ranges are chosen; auto: try all, keep the most accurate")
    keep_fp32: str = _field("auto", _one_of("auto", "none", "stem", "heads", "stem+heads"),
                            "layers left in fp32; auto: none, then heads, stem, stem+heads until the gate passes")
    activations: str = _field("uint8", _one_of("uint8", "int8"), "activation type (weights: int8 per channel)")
    calibration_positions: int = _field(1024, _positive, "positions that set the activation ranges")
    holdout_positions: int = _field(512, _positive, "other positions (other games) the gate measures on")
    shards: int = _field(16, _positive, "newest self-play shards of the run to draw positions from")
    data: str = _field("", None, "positions when the model is not in a run: hcpe3/hcpe file, shard folder or "
                       "record (CSA/KIF) folder; empty: positions from random games")
    min_top1: float = _field(0.99, _unit, "raw gate (int8 files the loader makes on its own): least policy "
                             "top-1 agreement (legal moves) with fp32; where the search gate decides (export, loop, "
                             "selfplay) it is printed beside")
    max_value_error: float = _field(0.01, _non_negative, "raw gate: largest mean |value difference| from fp32")
    # The search gate (dlzero export --int8; dlzero.engine.int8_gate, docs/int8.md for the figures these rest on)
    gate_positions: int = _field(256, _positive, "search gate: held-out positions searched with fp32 and with "
                                 "each int8 recipe (at most holdout_positions)")
    gate_playouts: int = _field(64, _positive, "search gate: playouts of each search (self-play's full search), "
                                "one leaf a tree a network call")
    gate_near: float = _field(0.8, _unit, "search gate: int8's move plays like fp32 when it is fp32's move or "
                              "fp32's search gave it at least this share of its chosen move's visits")
    min_play_agreement: float = _field(0.97, _unit, "search gate: least share of positions where int8's search "
                                       "plays like fp32's (gate_near)")
    max_winrate_error: float = _field(0.02, _unit, "search gate: largest mean |root win rate int8 - fp32| "
                                      "(win rate (v + 1) / 2)")


@dataclass
class InferenceConfig:
    """How positions are evaluated: backend, device, precision."""

    backend: str = _field("auto", _one_of("auto", "torch", "onnx"), "auto: by model file type")
    device: str = _field("auto", None, "auto, cpu, cuda or cuda:N")
    precision: str = _field("auto", _one_of("auto", "fp32", "fp16", "bf16", "int8"),
                            "auto: fp16 on CUDA, fp32 on CPU; int8: a calibrated quantized ONNX model (onnxruntime)")
    threads: int = _field(0, _between(0, MAX_THREADS), "intra-op compute threads (0: library default)")
    spin: bool = _field(True, None, "onnxruntime's intra-op threads spin-wait between calls (quicker back-to-back "
                        "calls; off leaves their cores to the search's tree between calls)")
    optimize: str = _field(
        "auto", _one_of("auto", "none", "freeze", "compile", "cuda_graphs"),
        "torch graph optimisation; auto: freeze on CPU, none on CUDA",
    )
    providers: list = _field([], None, "onnxruntime providers in order; empty: best available")
    max_batch: int = _field(256, _positive, "largest batch one call may carry")
    quantize: QuantizeConfig = field(default_factory=QuantizeConfig)


@dataclass
class SearchConfig:
    """PUCT search constants (dlshogi's defaults) and search limits."""

    leaves_per_tree: int = _field(64, _positive, "leaves one tree adds to each network call, kept apart by virtual "
                                  "loss (engine, analysis, bench search); was search.batch_size")
    playouts: int = _field(800, _positive, "playouts of a search of one position that sets no limit of its own: "
                           "dlzero bestmove and dlzero analyze (their --playouts), the Python Engine, and a USI "
                           "`go` with no clock, no nodes and usi.playouts 0")
    # The PUCT constants and the temperature are also USI spins under dlshogi's names (C_init, C_base,
    # C_fpu_reduction, the _root variants, Softmax_Temperature; hundredths where fractional), so a
    # tuner such as shogiarena's SPSA can move them: docs/usi-options.md.
    c_init: float = _field(1.44, _positive, "c(N) = c_init + ln((N + c_base + 1) / c_base) below the root "
                           "(USI C_init, hundredths)")
    c_base: float = _field(28288.0, _positive, "see c_init (USI C_base)")
    c_init_root: float = _field(1.16, _positive, "c_init at the root (USI C_init_root)")
    c_base_root: float = _field(25617.0, _positive, "c_base at the root (USI C_base_root)")
    fpu_reduction: float = _field(0.27, _non_negative, "first-play urgency reduction below the root: an "
                                  "unvisited move is worth parent Q - this * sqrt(visited prior) (USI C_fpu_reduction)")
    fpu_reduction_root: float = _field(0.0, _non_negative, "fpu_reduction at the root (USI C_fpu_reduction_root)")
    softmax_temperature: float = _field(1.74, _positive, "policy temperature for priors (USI Softmax_Temperature)")
    virtual_loss: int = _field(1, _positive)
    draw_value_black: float = _field(0.5, _unit, "win rate of a draw for Black when Black makes the drawing move")
    draw_value_white: float = _field(0.5, _unit, "win rate of a draw for White when White makes the drawing move")
    max_moves: int = _field(512, _positive, "ply at which a game is a draw")
    entering_king_rule: str = _field("27", _one_of(*DECLARATION_RULES),
                                     "declaration rule: 27 (CSA, 28/27 points), 24 (31 points) or none")
    leaf_mate_depth: int = _field(3, _mate_plies(MATE_MOVE_MAX_PLIES), "mate search at new leaves (odd plies, "
                                  "at most 7: cshogi's mate_move, which nothing interrupts)")
    root_mate_depth: int = _field(7, _mate_plies(ROOT_MATE_MAX_PLIES), "mate search at the root before "
                                  "searching (odd plies, at most 31; beyond 7 df-pn in a helper process, for at "
                                  "most 30 % of the move's time, 1 s without a clock: dlzero.search.mate)")
    mate_guard_nodes: int = _field(0, _dfpn_nodes, "after a search, df-pn checks the move to be played for a "
                                   "mate it hands the opponent; a move that does is proven lost and the next is "
                                   "tried, within this many df-pn nodes a move in all (0: off; dlzero.search.guard)")
    node_limit: int = _field(2_000_000, _positive, "tree size cap; search stops when reached")
    hash_mb: int = _field(2048, _non_negative, "memory budget in MiB of the search tree and the evaluation cache "
                          "(USI_Hash): a tree node is a 72-byte record and 12 bytes a legal move, 0.4-0.6 KB "
                          "(dlzero bench search); the search stops when reached; 0: none but node_limit")
    reuse_tree: bool = _field(True, None, "keep the played move's subtree between moves")
    nn_cache_size: int = _field(200_000, _non_negative, "entries of the evaluation cache, the network's output "
                                "for inputs seen before (0: off): a transposition or a line seen on an earlier "
                                "move costs no network call, 1.3-1.4x the playouts a move at 1 s "
                                "(docs/benchmarks/playouts-1s.md); it gives way to the tree under search.hash_mb")
    pipeline: bool = _field(True, None, "evaluate one batch in a helper thread while collecting the next")
    eval_streams: int = _field(0, _non_negative, "batches in flight at once with pipeline on, each in its own "
                               "helper thread; 0: laid out for the cores (the engine's one game: on a CPU one "
                               "thread a call, one call per core; on a GPU 2; self-play and gating: 1), see "
                               "dlzero.engine.layout")
    dirichlet_alpha: float = _field(0.15, _positive, "root noise concentration (self-play)")
    dirichlet_epsilon: float = _field(0.25, _unit, "root noise weight (self-play)")
    algorithm: str = _field("puct", _one_of("puct", "gumbel"),
                            "root search: puct (dlshogi, Dirichlet noise) or gumbel (Gumbel AlphaZero: "
                            "Sequential Halving at the root, improved-policy targets, no Dirichlet noise)")
    gumbel_considered: int = _field(16, _positive, "gumbel: root moves sampled for Sequential Halving (m)")
    gumbel_c_visit: float = _field(50.0, _positive, "gumbel: sigma(q) = (c_visit + max N) * c_scale * q")
    gumbel_c_scale: float = _field(1.0, _positive, "gumbel: sigma(q) = (c_visit + max N) * c_scale * q")


@dataclass
class SelfplayConfig:
    """Self-play workers: games in lockstep, exploration, resignation, shards."""

    games_in_parallel: int = _field(32, _positive, "games each worker plays at once (G)")
    leaves_per_tree: int = _field(1, _positive, "leaves each game's tree adds to a network call (1: no virtual loss)")
    workers: int = _field(1, _positive, "worker processes")
    playouts: int = _field(64, _positive, "playouts of a full search")
    cheap_playouts: int = _field(16, _positive, "playouts of a cheap search (playout cap randomization)")
    full_search_prob: float = _field(0.25, _unit, "share of moves searched fully; only those are policy targets")
    random_plies: int = _field(12, _non_negative, "plies whose move is sampled by visit counts")
    temperature: float = _field(1.0, _positive, "sampling temperature over visits during random plies")
    noise: bool = _field(True, None, "explore on full searches: Dirichlet noise (puct) or the Gumbel sample (gumbel)")
    openings: str = _field("", None, "file of 'startpos moves ...' lines; empty: start position")
    allow_rating_openings: bool = _field(False, None, "let `openings` hold start positions of the rating suite "
                                         "(configs/openings/rating.txt; refused by default: ratings would be "
                                         "played from positions the model trained on)")
    resign_threshold: float = _field(0.03, _unit, "resign when the best move's win rate is below this")
    no_resign_fraction: float = _field(0.1, _unit, "share of games that never resign (false-positive check)")
    resign_fp_target: float = _field(0.05, _unit, "target rate of wrong resignations")
    max_moves: int = _field(320, _positive, "ply at which a self-play game is a draw")
    mate_guard: bool = _field(False, None, "self-play's searches run the mate guard too (search.mate_guard_nodes; "
                              "a df-pn a move, beside searches of tens of playouts)")
    games_per_generation: int = _field(128, _positive, "games each generation adds (loop)")
    games_per_shard: int = _field(32, _positive, "games per hcpe3 shard file")
    ray: str = _field("", None, "Ray cluster for workers: '' (local processes), local, auto, or an address")
    max_restarts: int = _field(3, _non_negative, "times a dead self-play worker is restarted for its unsaved games")
    first_model_wait_s: float = _field(600.0, _non_negative, "seconds `dlzero selfplay` on a new run waits while "
                                       "another command writes its generation 0 (several machines started on one "
                                       "run), before it stops naming that command")
    nice: int = _field(0, _non_negative, "niceness added to worker processes (the async loop sets "
                       "loop.selfplay_nice here, so that training beside them gets its core)")


def _or_minus_one(check: Check, meaning: str) -> Check:
    """`check`, with -1 (take the value of another key, `meaning`) allowed as well."""

    def inner(v: Any) -> str | None:
        problem = check(v)
        return None if v == -1 or problem is None else f"{problem}, or -1 ({meaning})"

    return inner


def _or_selfplay(check: Check) -> Check:
    """`check`, with -1 (take the matching `selfplay.*` key) allowed as well."""
    return _or_minus_one(check, "self-play's value")


@dataclass
class TrainConfig:
    """Trainer: replay window, optimiser, schedule, checkpoints."""

    batch_size: int = _field(256, _positive)
    optimizer: str = _field("sgd", _one_of("sgd", "adamw"))
    lr: float = _field(0.02, _positive)
    momentum: float = _field(0.9, _unit)
    weight_decay: float = _field(1e-4, _non_negative)
    lr_schedule: str = _field("constant", _one_of("constant", "cosine"), "LR schedule of each self-play "
                              "generation: constant, or cosine from lr towards 0 over the generation")
    supervised_lr_schedule: str = _field("cosine", _one_of("constant", "cosine"),
                                         "LR schedule of training on teacher data or records (dlzero loop "
                                         "--init-from, dlzero train --hcpe), over the whole run; the loop's "
                                         "generations use train.lr_schedule")
    warmup_steps: int = _field(0, _non_negative)
    steps_per_generation: int = _field(400, _positive, "steps of a generation: the cap when reuse > 0, the "
                                       "fixed count when reuse is 0")
    reuse: float = _field(4.0, _non_negative, "times each new training position is sampled on average (KataGo's "
                          "reuse ratio): steps = new positions x reuse / batch_size; 0: steps_per_generation")
    min_steps: int = _field(10, _positive, "fewest steps of a generation when reuse > 0")
    value_weight: float = _field(1.0, _non_negative, "weight of the value loss (policy: 1)")
    supervised_value_weight: float = _field(
        -1.0, _or_minus_one(_non_negative, "train.value_weight"),
        "value_weight when training on teacher data or records (dlzero loop --init-from, dlzero train --hcpe): "
        "half a million labelled positions are not a small self-play window; -1: train.value_weight")
    validation_set: str = _field("fairy-stockfish-n20k.hcpe3", None, "fixed held-out games every model is scored "
                                 "on: a file in configs/validation/ or a path; empty: none")
    validation_positions: int = _field(4096, _non_negative, "most positions scored per held-out set (0: no "
                                       "held-out validation)")
    window_min: int = _field(20_000, _positive, "replay window (positions) at the start of a run")
    window_max: int = _field(2_000_000, _positive, "largest replay window (positions)")
    window_exponent: float = _field(0.75, _positive, "window grows like positions_seen ** exponent")
    val_lambda: float = _field(0.333, _unit, "weight of the search eval in the value target")
    value_plies: str = _field("full", _one_of("full", "searched"),
                              "which self-play plies are value targets: full searches only (each also a policy "
                              "target), or every searched ply, cheap searches included (value only; mates as "
                              "proven, draws as the search scored them)")
    grad_clip: float = _field(10.0, _non_negative, "max gradient norm (0: off)")
    amp: str = _field("auto", _one_of("auto", "off", "bf16", "fp16"),
                      "auto: bf16 on CUDA and on CPUs with bf16 instructions (AVX512_BF16, AMX), off on other CPUs")
    channels_last: bool = _field(True, None, "train in the channels-last memory layout (faster convolutions on "
                                 "CPU and GPU; the saved model is the same)")
    ema: bool = _field(False, None, "export an exponential moving average of the weights")
    ema_decay: float = _field(0.999, _unit)
    checkpoint_every: int = _field(200, _positive, "steps between checkpoints")
    log_every: int = _field(50, _positive, "steps between metric rows")
    holdout_fraction: float = _field(0.05, _unit, "supervised mode: share of the games held out to score the "
                                     "model on (whole games of hcpe3 files, runs of consecutive records of hcpe "
                                     "files; train/holdout.py); unused when train.val_files names a held-out set")
    val_files: list = _field([], _data_files, "supervised mode: hcpe3/hcpe files to score the model on instead "
                             "of holding games out of the training files (`dlzero train --val FILE`)")
    value_of_capped_games: str = _field("drop", _one_of("drop", "draw"),
                                        "positions of games that hit the move cap: drop (no value target; their "
                                        "policy targets stay, as dlshogi leaves such games out) or draw (a value "
                                        "target of 1/2)")
    seed: int = _field(0, _non_negative)
    device: str = _field("auto", None, "training device: auto, cpu, cuda or cuda:N (torchrun: one GPU per rank)")
    threads: int = _field(0, _non_negative, "`dlzero train` and `dlzero score`: CPU compute threads (0: torch's "
                          "default, one a core); 1 beside an engine that holds a core, where two threads that "
                          "wait on each other ran a step ~10x slower (the loop's async mode: loop.train_threads)")
    aux_reply_weight: float = _field(0.0, _non_negative, "loss weight of KataGo's auxiliary head predicting the "
                                     "opponent's reply (0: no head; KataGo: 0.15); training only")
    surprise_weight: float = _field(0.0, _unit, "share of each sample's loss weight proportional to its policy "
                                    "surprise KL(target || net policy) (0: uniform; KataGo: 0.5)")
    teacher_data: list = _field([], _data_files, "teacher files (.hcpe3 from `dlzero teach`, .hcpe) mixed into "
                                "training; a relative path is relative to the run directory (`dlzero loop "
                                "--init-from F` copies F into the run's teacher/ and lists it here)")
    teacher_fraction: float = _field(0.0, _below_one, "share of every training batch drawn from teacher_data "
                                     "(0, the default: self-play data alone, the teacher files are only "
                                     "recorded; 0.25: a quarter of each batch)")
    relabel: str = _field("", None, "teacher that relabels every self-play shard before training reads it "
                          "(`miniosl`, `usi:COMMAND[;Option=value...]`, as `dlzero teach --teacher`): the run's own "
                          "positions with the teacher's moves and values; kept in runs/NAME/relabelled/; "
                          "empty (the default): train on self-play's own targets")




@dataclass
class TeachConfig:
    """`dlzero teach`: label positions with a teacher into an hcpe3 file; each flag of the command sets its key."""

    teacher: str = _field("", None, "usi:COMMAND[;Option=value...] or onnx:miniosl[;key=value...] (miniosl); "
                          "empty: --teacher must name one")
    positions: int = _field(100_000, _positive, "positions to label (whole parts: a few more)")
    out: str = _field("", None, "the .hcpe3 file to write (its parts go to OUT.parts/); empty: --out must name one")
    workers: int = _field(1, _positive, "teacher processes in parallel")
    source: list = _field([], None, "games to relabel (hcpe3 files, run directories, CSA/KIF/KI2 records, "
                          "folders); empty: the teacher plays itself")
    openings: str = _field("", None, "suite of the teacher's own games; empty: configs/openings/gate.txt; "
                           "startpos: the start position")
    allow_rating_openings: bool = _field(False, None, "let `openings` hold start positions of the rating suite "
                                         "(configs/openings/rating.txt; refused by default: ratings would be "
                                         "played from positions the student learnt)")
    sample_plies: int = _field(-1, _or_selfplay(_non_negative), "teacher moves per game drawn from its policy "
                               "(-1: selfplay.random_plies)")
    max_moves: int = _field(-1, _or_selfplay(_positive), "move number at which a teacher game is a draw "
                            "(-1: selfplay.max_moves)")
    part_games: int = _field(32, _positive, "games per part, the unit of resumption (the teacher's own games: "
                             "fewer while few positions are still wanted)")
    seed: int = _field(1, _non_negative, "seed of openings, sampled moves and source order")


@dataclass
class GateConfig:
    """Gating match: candidate against best over colour-swapped pairs from an opening suite, decided by a
    pentanomial SPRT; the `suite_*` keys say how `dlzero openings` makes a suite."""

    mode: str = _field("sprt", _gate_mode, "sprt: gate every candidate; off: promote every candidate without a "
                       "match (AlphaZero, dlshogi); every-N: gate only generations divisible by N, promote the rest")
    playouts: int = _field(64, _positive)
    max_games: int = _field(100, _positive)
    games_in_parallel: int = _field(16, _positive, "games a match plays at once (one network call per side per step)")
    leaves_per_tree: int = _field(1, _positive, "leaves each game's tree adds to a network call (as selfplay's)")
    elo0: float = _field(0.0, None, "SPRT null hypothesis (Elo)")
    elo1: float = _field(35.0, None, "SPRT alternative hypothesis (Elo)")
    alpha: float = _field(0.05, _unit)
    beta: float = _field(0.05, _unit)
    cap_pass_score: float = _field(0.55, _unit, "score needed to pass when the game cap is reached")
    openings: str = _field("", None, "opening suite: a file of 'startpos moves ...' / 'sfen ...' lines, one per "
                           "colour-swapped pair; empty: the shipped configs/openings/gate.txt")
    variation_plies: int = _field(2, _positive, "random plies added to a suite line once a match has used every one")
    max_moves: int = _field(320, _positive)
    suite_min_plies: int = _field(4, _positive, "dlzero openings: fewest plies sampled from the policy")
    suite_max_plies: int = _field(10, _positive, "dlzero openings: most plies sampled from the policy")
    suite_margin: float = _field(0.0, _non_negative, "dlzero openings (and variations): most material imbalance "
                                 "(pawns) after the best move and captures")
    suite_temperature: float = _field(1.0, _positive, "dlzero openings --model: policy temperature (>1 flatter)")
    suite_playouts: int = _field(0, _non_negative, "dlzero openings --model: playouts of the balance search (0: none)")
    suite_value_margin: float = _field(0.1, _unit, "dlzero openings --model: keep if |win rate - 1/2| <= this")


@dataclass
class RateConfig:
    """Ratings on an anchored scale (`dlzero rate`): the run's models against a fixed anchor pool."""

    anchors: list = _field(["random", "alphabeta:100", "alphabeta:1000", "alphabeta:10000", "gen-0000"],
                           _anchor_list, "anchor pool, weakest first: random (Elo 0), alphabeta:N (node budget), "
                           "gen-NNNN, USI engines (gpsshogi:depth=D, fairy-stockfish:skill=S:byoyomi=MS, "
                           "usi:PATH:...); each model plays each anchor, and neighbouring anchors play each other")
    engines: list = _field([], _engine_list, "outside USI engines as NAME=COMMAND; they join the anchor pool")
    engine_go: str = _field("byoyomi 1000", None, "what follows 'go' for outside engines (e.g. nodes 800)")
    engine_timeout_s: float = _field(120.0, _positive, "an outside engine silent this long is an error")
    clock_tolerance_ms: int = _field(50, _non_negative, "an outside engine given a byoyomi loses on time when "
                                     "its move takes longer than the byoyomi plus this (the pipe's allowance)")
    openings: str = _field("", None, "opening suite of rating games and `dlzero match`; empty: the shipped "
                           "configs/openings/rating.txt, which no teacher or self-play game starts from")
    games: int = _field(20, _even, "games per pairing; `dlzero rate` tops every pairing up to this many")
    playouts: int = _field(64, _positive, "playouts per move of the run's models (a different count is "
                           "a different player: games at other counts are left out of the fit)")
    models: str = _field("promoted", _one_of("promoted", "all"), "which generations to rate")
    sample: int = _field(0, _non_negative, "rate at most this many of them, evenly spread (0: all)")
    parallel: int = _field(16, _positive, "games of a pairing played at once")
    prior_draws: float = _field(1.0, _non_negative, "virtual draws per pair that met (keeps all-win "
                                "players finite; 0: plain maximum likelihood)")
    loop: bool = _field(False, None, "the loop rates each promoted model as it goes")
    every: int = _field(1, _positive, "the loop rates every Nth promoted model")


@dataclass
class ServerConfig:
    """Shared inference servers: one process per device owns the model and batches for many workers."""

    enabled: bool = _field(False, None, "self-play workers evaluate through inference servers")
    devices: list = _field([], None, "one server per entry (cuda:0, cuda:1, cpu); empty: one per GPU, else cpu")
    max_batch: int = _field(1024, _positive, "most positions the server evaluates in one network call")
    max_wait_ms: float = _field(2.0, _non_negative, "how long a request waits for others to fill the batch")
    timeout_s: float = _field(600.0, _positive, "a worker gives up on a server silent this long")
    check_interval_s: float = _field(2.0, _positive, "how often the server looks for a newly promoted model")


@dataclass
class UsiConfig:
    """USI engine defaults (each is also a `setoption`)."""

    byoyomi_margin_ms: int = _field(100, _non_negative, "ms before the byoyomi deadline a move is sent "
                                    "(docs/usi-options.md, 'The margins, measured')")
    time_margin_ms: int = _field(1000, _non_negative)
    resign_threshold: float = _field(0.01, _unit)
    pv_interval_ms: int = _field(500, _non_negative)
    multipv: int = _field(1, _positive)
    playouts: int = _field(0, _non_negative, "fixed playouts per move (0: by time)")
    show_wdl: bool = _field(False, None, "info lines carry 'wdl W D L' (permille; D is 0: the value head has no draw)")
    strength: int = _field(20, _between(1, 20), "level for people, 1 (weakest) to 20 (full strength): fewer "
                           "playouts and a temperature over the root's visits (dlzero.engine.strength)")


@dataclass
class BookConfig:
    """The opening book: how the USI engine plays from one (USI_OwnBook, BookFile, BookMoves, BookPick)
    and how `dlzero book make` builds one (docs/usi-options.md)."""

    enabled: bool = _field(False, None, "play book moves when the position is in the book (USI_OwnBook)")
    file: str = _field("", None, "a YaneuraOu-format book (.db) to play from (BookFile; empty: none)")
    max_ply: int = _field(16, _non_negative, "the book is consulted up to this ply, and `book make` fills "
                          "positions up to it (BookMoves; the start position is ply 1)")
    pick: str = _field("weighted", _one_of(*BOOK_PICKS),
                       "best: the most chosen move (then the higher value); weighted: a move drawn with "
                       "probability proportional to its count (BookPick)")
    min_count: int = _field(1, _positive, "`book make --records`: moves played fewer times are left out")
    playouts: int = _field(800, _positive, "`book make --think`: playouts per position searched")
    share: float = _field(0.2, _unit, "`book make --think`: a move besides the best enters the book (and its "
                          "line is followed) when it got at least this share of the root's visits")
    positions: int = _field(1000, _positive, "`book make --think`: most positions searched in one run")
    save_every: int = _field(50, _positive, "`book make --think`: the book is written after this many "
                             "searches (a stopped run resumes from it)")


@dataclass
class ReviewConfig:
    """`dlzero review`: every position of a game record searched, the record written back annotated."""

    playouts: int = _field(400, _positive, "playouts per position")
    blunder_threshold: float = _field(0.2, _unit, "a move losing more win rate than this (mover's view) is a blunder")
    positions_per_batch: int = _field(32, _positive, "positions searched together (they share network batches)")


@dataclass
class AnalysisConfig:
    """`dlzero analyze`: bounds on what a client may send."""

    max_line_bytes: int = _field(1 << 20, _between(1, MAX_LINE_BYTES), "longest query line read; a longer one "
                                 "gets an error answer and is skipped without being held in memory")


@dataclass
class LoopConfig:
    """`dlzero loop`: how self-play, training, gating and rating share the machine."""

    mode: str = _field("sequential", _one_of("sequential", "async"),
                       "sequential: self-play, train, gate, rate one after another (all cores for each; a "
                       "GPU that trains far faster than it self-plays); async: self-play never stops, and "
                       "training, calibration, gating and rating run beside it in the loop's process")
    train_threads: int = _field(1, _positive, "async: compute threads of training, calibration and gating "
                                "(self-play keeps its selfplay.workers processes)")
    selfplay_nice: int = _field(5, _non_negative, "async: niceness of the self-play workers, so that the "
                                "trainer's threads get their cores while it trains and the workers get "
                                "every core while it waits (0: all equal)")
    status_every_s: float = _field(60.0, _positive, "async: seconds between status lines while waiting for games")
    from_network: list = _field(["gate.mode=sprt", "gate.playouts=1024", "train.lr=0.002"], _override_list,
                                "`section.key=value` overrides a new run gets when its generation 0 is a trained "
                                "network (the shipped one by default; dlzero.loop_start), applied before --set "
                                "and flags: settings for improving a strong network rather than learning from "
                                "random weights (a gate near the depth users search: a shallow one cannot see "
                                "a spoilt value head, docs/loop.md)")


@dataclass
class Config:
    """The whole configuration of a run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    selfplay: SelfplayConfig = field(default_factory=SelfplayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    teach: TeachConfig = field(default_factory=TeachConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    rate: RateConfig = field(default_factory=RateConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    usi: UsiConfig = field(default_factory=UsiConfig)
    book: BookConfig = field(default_factory=BookConfig)
    review: ReviewConfig = field(default_factory=ReviewConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)


def _type_of(cls: type, name: str) -> Any:
    return _type_hints(cls)[name]


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """A config class's field types, resolved once: resolving them at every field cost 120 ms a config
    (a USI `setoption` builds one), half a second on a loaded machine, while the engine's reader waited."""
    return typing.get_type_hints(cls)


def _coerce(value: Any, typ: Any, key: str) -> Any:
    """Check `value` against a field type, allowing int where float is expected."""
    origin = typing.get_origin(typ)
    if typ is bool:
        if isinstance(value, bool):
            return value
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif typ is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):  # `entering_king_rule: 27`
            return str(value)
        if value is None:
            return ""
        if isinstance(value, bool):  # YAML 1.1 reads a bare off/on as a boolean
            return "on" if value else "off"
    elif typ is list or origin is list:
        if isinstance(value, list):
            return list(value)
        if isinstance(value, str):
            return [v for v in value.split(",") if v]
    elif origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(typ):
            try:
                return _coerce(value, arg, key)
            except ConfigError:
                continue
    name = getattr(typ, "__name__", str(typ))
    raise ConfigError(f"config key '{key}': expected {name}, got {value!r}")


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"config section '{prefix or '<top>'}' must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            where = f"{prefix}.{key}" if prefix else key
            known = ", ".join(sorted(fields))
            raise ConfigError(f"unknown config key '{where}' (known keys here: {known})")
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        typ = _type_of(cls, name)
        if dataclasses.is_dataclass(typ):
            kwargs[name] = _build(typ, data.get(name, {}) or {}, key)
            continue
        if name not in data:
            continue
        value = _coerce(data[name], typ, key)
        check = f.metadata.get("check")
        problem = check(value) if check else None
        if problem:
            raise ConfigError(f"config key '{key}' {problem} (got {value!r})")
        kwargs[name] = value
    return cls(**kwargs)


def config_to_dict(cfg: Any) -> dict:
    """The config as plain data, ready for YAML or a checkpoint."""
    return dataclasses.asdict(cfg)


# Keys that were renamed: old dotted key -> new one. Old files still load; the value moves over
# and a warning names the new key.
RENAMED_KEYS = {"search.batch_size": "search.leaves_per_tree"}


def _rename_old_keys(data: dict) -> dict:
    """A copy of `data` with renamed keys moved to their new names (both given: an error)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for old, new in RENAMED_KEYS.items():
        (old_sec, old_key), (new_sec, new_key) = old.split("."), new.split(".")
        section = out.get(old_sec)
        if not isinstance(section, dict) or old_key not in section:
            continue
        target = out.setdefault(new_sec, {})
        if isinstance(target, dict) and new_key in target:
            raise ConfigError(f"config keys '{old}' and '{new}' are the same setting: keep only '{new}'")
        logger.warning("config key '%s' is now '%s' (leaves one tree adds to each network call); "
                       "please rename it", old, new)
        target[new_key] = section.pop(old_key)
    return out


def config_from_dict(data: dict | None) -> Config:
    """Build and validate a `Config` from plain data (e.g. a parsed YAML file)."""
    return _build(Config, _rename_old_keys(data or {}), "")


def model_config_from_dict(data: Any) -> ModelConfig:
    """The `model` section as a file stored it (a model file, the trainer's resume file), checked key by
    key as a loaded config is; keys added since it was written take their defaults. ConfigError says
    what does not fit."""
    return _build(ModelConfig, data, "model")


def _one_line(exc: Exception) -> str:
    """A parser's multi-line message (with a caret drawing) squeezed onto one line for the CLI."""
    return " ".join(str(exc).split())


def parse_override(text: str) -> tuple[list[str], Any]:
    """`section.key=value` -> (['section', 'key'], value parsed as a YAML scalar)."""
    if "=" not in text:
        raise ConfigError(f"override '{text}' must look like section.key=value")
    key, raw = text.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if len(path) < 2:
        raise ConfigError(f"override '{text}': the key must name a section and a key, e.g. model.blocks")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override '{text}': value is not valid YAML ({_one_line(exc)})") from None
    return path, value


def apply_overrides(data: dict, overrides: Iterable[str]) -> dict:
    """Return a copy of `data` with each `section.key=value` override applied."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{text}': '{part}' is not a section")
        node[path[-1]] = value
    return out


def read_yaml(path: str | Path) -> dict:
    """Parse a YAML config file into a dict, with errors that name the file."""
    from dlzero.data.regular import NotRegularFile, read_regular_text

    p = Path(path)
    try:
        data = yaml.safe_load(read_regular_text(p))
    except NotRegularFile as exc:  # a FIFO would block the read for ever, a link to /dev/zero never end
        raise ConfigError(f"config file '{p}' is {exc.kind}, not a regular file") from None
    except FileNotFoundError:
        raise ConfigError(f"config file '{p}' does not exist") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file '{p}' is not valid YAML: {_one_line(exc)}") from None
    except RecursionError:  # a damaged or hostile file: a config nests two levels
        raise ConfigError(f"config file '{p}' is nested too deeply to be a config") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{p}' must contain a mapping of sections")
    return data


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Config:
    """Defaults, then the YAML file (if any), then overrides; validated at every step."""
    data = read_yaml(path) if path else {}
    try:
        return config_from_dict(apply_overrides(data, overrides))
    except ConfigError as exc:
        if path:
            raise ConfigError(f"{path}: {exc}") from None
        raise


def dump_config(cfg: Config) -> str:
    """The config as YAML text (what a run directory stores as config.yaml)."""
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False)
