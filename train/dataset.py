"""Training data: the replay window over a run's hcpe3 shards, and hcpe files for supervised mode.

Replay window (KataGo-style): the trainer samples from the newest `window` training positions of
the run, where `window` grows sublinearly with everything self-play has produced so far:

    window = min(window_max, max(window_min, window_min * (total / window_min) ** window_exponent))

so early generations, whose data comes from weak nets, drop out fast, while late ones keep a large
and diverse window. Shards are read newest first until the window is filled (the oldest shard in
it contributes its newest games only). A corrupt shard is skipped with a warning naming it, also one
that rotted in place after it was counted (found when the window is loaded: the window is planned again).

Which plies are positions: only plies with visit counts (`candidateNum > 0`, the full searches).
Others (random opening plies, forced moves, cheap searches under playout cap randomisation) are
dropped entirely, as dlshogi does: their eval comes from a weak search, and a value target on every
ply of a game would repeat one result over dozens of highly correlated positions (the overfitting
AlphaGo's value net showed). So every sample has both a policy and a value target.

`train.value_plies: searched` (KataGo's way) keeps the full searches as they are and adds every other
searched ply as a value-only sample (no policy target: its row of the policy target is zero, and the
policy loss and top-1 count only rows that have one). A searched ply is one with a recorded eval: the
cheap searches of playout cap randomisation, and a mate found at the root. Opening and other replay-only
plies are recorded with eval 0 and stay out (a cheap search that scored exactly 0 cp is lost with them).
In that mode two labels change too: a position whose eval is a proven result (+-30000 cp: a mate found,
or a proven child chosen) is labelled 1 or 0 whatever the game did later, and a position of a drawn game
takes the search's win rate instead of 0.5 (a draw says little about who stood better on the way).
The window and `train.reuse` count every row, value-only ones included (as KataGo counts rows): at
`selfplay.full_search_prob` 0.25 a game gives about four times the rows, so the same training steps
need about a quarter of the reuse.

Move-capped games (result flag FLAG_MAX_MOVES): a game stopped at the move cap has no result, and a
draw's 1/2 on each of its positions would teach the value head that long games are even whatever the
board says. With `train.value_of_capped_games: drop` (the default; dlshogi's self-play leaves such games
out) their positions keep their policy targets and get no value target (NaN in the buffer, masked in
the loss, train.buffer), and a value-only row of such a game is no row at all; `draw` keeps the 1/2.

Teacher data (`train.teacher_data`, `train.teacher_fraction` > 0): the positions of the teacher files
are appended to the window, after its self-play positions, and `train.teacher_fraction` of every
batch is drawn from them (train.sampler.MixSampler), however large the window or the files. The
window formula and `total` count self-play positions only, and the plan records which teacher files
and how many positions each held, so a resumed generation draws the same batches.

Relabelled data (`train.relabel`): the window reads each shard's twin under `relabelled/`, the same
games with a teacher's labels on every ply (dlzero.teacher.relabel_run makes them before a generation
trains), so `total` and the window count the twins' positions. A shard without a current twin yet
(written after the relabelling) waits for the next generation. The plan records `source`, so a
resumed generation reads the same files.

Counting `total` needs every shard's position count; counts are cached in
`train/shard-counts.json` keyed by size and mtime, so each shard is parsed for counting once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlzero.config import TrainConfig
from dlzero.data.atomic import atomic_write_text
from dlzero.data.hcpe import read_hcpe
from dlzero.data.hcpe3 import (
    FLAG_MAX_MOVES,
    Hcpe3Record,
    MoveRecord,
    TrainingPosition,
    is_committed,
    iter_training_positions,
    read_hcpe3,
)
from dlzero.data.jsonfile import read_json
from dlzero.encoding import labels_of, repetition_count
from dlzero.errors import ConfigError, DataError, RunDirError
from dlzero.rundir import RunDir
from dlzero.runfiles import DATA_DIR, RELABELLED_DIR, SHARD_COUNTS
from dlzero.search.result import MAX_CP
from dlzero.train.buffer import PositionBuffer, value_target
from dlzero.train.sampler import EpochSampler, MixSampler, teacher_per_batch
from dlzero.train.teacher_files import teacher_path

log = logging.getLogger(__name__)


def window_size(total: int, cfg: TrainConfig) -> int:
    """Positions in the replay window after `total` positions were produced (formula above)."""
    grown = cfg.window_min * (max(total, 1) / cfg.window_min) ** cfg.window_exponent
    return int(min(cfg.window_max, max(cfg.window_min, grown)))


# ---------------------------------------------------------------- hcpe3 games -> positions


def buffer_from_games(games: Iterable[Hcpe3Record], val_lambda: float, source: str = "",
                      value_plies: str = "full", capped: str = "drop") -> PositionBuffer:
    """The training positions of `games` (plies with visit counts; with `value_plies` "searched" every
    searched ply, see the module docstring), in game and ply order. `capped`: `train.value_of_capped_games`.

    Policy target: visit counts normalised over the candidates, labelled from the side to move (none for
    a value-only ply).
    Repetition counts come from a board replaying the whole game, as the search's board holds it.
    Reply target (train.aux_reply_weight): the next ply's move, labelled from its mover's side; -1 at
    the game's last ply.
    """
    searched = _searched(value_plies)
    base_hcp, last_move, ply, value_z, evals, counts, labels, probs, reps = [], [], [], [], [], [], [], [], []
    reply: list[int] = []
    no_value: list[bool] = []
    for g, game in enumerate(games):
        prev_hcp, prev_move = None, 0
        board = game.start_board()  # the whole history, for the repetition planes (train.buffer)
        dropped = value_dropped(game, capped)
        for pos in iter_training_positions(game):
            full = _has_policy(pos)
            if _is_row(pos, searched and not dropped):
                visits = pos.candidates[:, 1].astype(np.float64)
                lab = labels_of(pos.candidates[:, 0], pos.turn) if full else np.zeros(0, np.int64)
                if (lab < 0).any():
                    raise DataError(source, None, f"game {g}, ply {pos.ply}: a candidate has no policy label")
                base_hcp.append(pos.hcp if prev_hcp is None else prev_hcp)
                last_move.append(prev_move)
                ply.append(pos.ply)
                reps.append(repetition_count(board))
                value_z.append(pos.result)
                evals.append(pos.eval)
                counts.append(len(lab))
                labels.append(lab)
                probs.append(visits / visits.sum() if full else np.zeros(0))
                reply.append(_reply_label(game, pos.ply, pos.turn))
                no_value.append(dropped)
            prev_hcp, prev_move = pos.hcp, pos.move16
            board.push_move16(pos.move16)
    if not base_hcp:
        return PositionBuffer.empty()
    value = value_target(value_z, evals, val_lambda)
    if searched:
        value = searched_value_target(value, np.array(value_z), np.array(evals))
    value[np.array(no_value)] = np.nan
    return PositionBuffer(
        np.stack(base_hcp), np.array(last_move), np.array(ply), value,
        np.array(value_z), np.concatenate([[0], np.cumsum(counts)]), np.concatenate(labels),
        np.concatenate(probs), np.array(reps), np.array(reply))


def _capped_check(capped: str) -> None:
    if capped not in ("drop", "draw"):
        raise ConfigError(f"train.value_of_capped_games must be 'drop' or 'draw', not {capped!r}")


def value_dropped(game: Hcpe3Record, capped: str) -> bool:
    """Whether `game`'s positions get no value target: it hit the move cap and `capped` is "drop"."""
    _capped_check(capped)
    return capped == "drop" and bool(game.result & FLAG_MAX_MOVES)


def _has_policy(ply: MoveRecord | TrainingPosition) -> bool:
    """A full search's ply: visit counts, so a policy target."""
    return ply.is_target and int(ply.candidates[:, 1].sum()) > 0


def _is_row(ply: MoveRecord | TrainingPosition, searched: bool) -> bool:
    """Whether a ply is a training position: a full search, or (`searched`) any ply with a search's eval."""
    return _has_policy(ply) or (searched and not ply.is_target and ply.eval != 0)


def _searched(value_plies: str) -> bool:
    if value_plies not in ("full", "searched"):
        raise ConfigError(f"train.value_plies must be 'full' or 'searched', not {value_plies!r}")
    return value_plies == "searched"


def searched_value_target(blended: np.ndarray, result: np.ndarray, eval_cp: np.ndarray) -> np.ndarray:
    """`value_plies: searched`'s labels: a proven eval (+-MAX_CP) as 1 or 0, a drawn game's position as the
    search's win rate (eval alone), the blend elsewhere (module docstring)."""
    out = np.asarray(blended, dtype=np.float32).copy()
    draw = np.asarray(result) == 0.5
    out[draw] = value_target(np.full(int(draw.sum()), 0.5), eval_cp[draw], 1.0)
    out[eval_cp >= MAX_CP] = 1.0
    out[eval_cp <= -MAX_CP] = 0.0
    return out


def _reply_label(game: Hcpe3Record, ply: int, turn: int) -> int:
    """Label of the move after ply `ply` (played by the side not on `turn`), or -1 when the game ends first."""
    if ply + 1 >= len(game.moves):
        return -1
    return int(labels_of(np.array([game.moves[ply + 1].move16]), 1 - turn)[0])


def rows_per_game(games: list[Hcpe3Record], value_plies: str = "full", capped: str = "drop") -> np.ndarray:
    """Training positions of each game, by the rule of `buffer_from_games` (without replaying)."""
    searched = _searched(value_plies)
    return np.array([sum(1 for m in game.moves if _is_row(m, searched and not value_dropped(game, capped)))
                     for game in games], dtype=np.int64)


def count_positions(games: list[Hcpe3Record], value_plies: str = "full", capped: str = "drop") -> int:
    """Training positions in `games`, by the rule of `buffer_from_games` (without replaying)."""
    return int(rows_per_game(games, value_plies, capped).sum())


# ---------------------------------------------------------------- the replay window


@dataclass
class WindowPlan:
    """Which shards (relative to the run's data dir) and how many of their newest positions to use."""

    shards: list[tuple[str, int]]
    window: int
    total_positions: int
    total_games: int
    teacher: list[tuple[str, int]] = field(default_factory=list)  # train.teacher_data entries, their positions
    teacher_fraction: float = 0.0  # share of each batch drawn from them (0 when `teacher` is empty)
    source: str = DATA_DIR  # the run's folder the shards are read from: data/, or relabelled/ (train.relabel)

    @property
    def window_positions(self) -> int:
        """Self-play positions in the window (the buffer's first ones; the teacher's follow)."""
        return sum(n for _, n in self.shards)

    def teacher_per_batch(self, batch_size: int) -> int:
        """Teacher positions in each batch of `batch_size`."""
        return teacher_per_batch(self.teacher_fraction, batch_size) if self.teacher else 0

    def sampler(self, seed: int) -> EpochSampler | MixSampler:
        """The batches of a generation over the buffer this plan loads (see train.sampler)."""
        if not self.teacher:
            return EpochSampler(self.window_positions, seed)
        return MixSampler(self.window_positions, sum(n for _, n in self.teacher), self.teacher_fraction, seed)

    def to_dict(self) -> dict:
        return {"shards": [list(s) for s in self.shards], "window": self.window,
                "total_positions": self.total_positions, "total_games": self.total_games,
                "teacher": [list(t) for t in self.teacher], "teacher_fraction": self.teacher_fraction,
                "source": self.source}

    @classmethod
    def from_dict(cls, data: dict) -> WindowPlan:
        """A plan from `to_dict` (one saved before teacher mixing or relabelling existed lacks those parts)."""
        return cls([(str(p), int(n)) for p, n in data["shards"]], int(data["window"]),
                   int(data["total_positions"]), int(data["total_games"]),
                   [(str(p), int(n)) for p, n in data.get("teacher", [])], float(data.get("teacher_fraction", 0.0)),
                   str(data.get("source", DATA_DIR)))


@dataclass
class _ShardCounts:
    """The per-shard count cache (a JSON file in the run's train dir)."""

    path: Path
    entries: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> _ShardCounts:
        try:
            entries = read_json(path) if path.is_file() else {}
        except (OSError, DataError):
            entries = {}  # a cache: rebuilt when unreadable
        return cls(path, entries if isinstance(entries, dict) else {})

    def get(self, rel: str, stamp: list[int | str]) -> dict | None:
        entry = self.entries.get(rel)
        if not isinstance(entry, dict) or entry.get("stamp") != stamp:
            return None
        sound = isinstance(entry.get("error"), str) or all(type(entry.get(k)) is int for k in ("games", "positions"))
        return entry if sound else None  # an entry edited by hand is counted again

    def put(self, rel: str, stamp: list[int | str], **values: object) -> None:
        self.entries[rel] = {"stamp": stamp, **values}

    def save(self, live: set[str]) -> None:
        self.entries = {k: v for k, v in self.entries.items() if k in live}
        atomic_write_text(self.path, json.dumps(self.entries, indent=0, sort_keys=True) + "\n")


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def build_window(rd: RunDir, cfg: TrainConfig, shards: list[Path] | None = None) -> tuple[PositionBuffer, WindowPlan]:
    """Plan the replay window from every shard of the run (or `shards`, newest first) and load it (newest
    positions last). The loop passes the shards its held-out validation listed, so that a shard written in
    between is neither trained on unscored nor scored after training."""
    counts = _ShardCounts.load(rd.train_dir / SHARD_COUNTS)
    shards = rd.shards() if shards is None else shards  # newest first
    source = RELABELLED_DIR if cfg.relabel else DATA_DIR
    loaded: dict[str, PositionBuffer] = {}
    sizes: list[tuple[str, int]] = []
    stamps: dict[str, list[int | str]] = {}
    total_games = total = 0
    waiting = 0
    for shard in shards:
        rel = shard.relative_to(rd.data_dir).as_posix()
        path = rd.root / source / rel
        if cfg.relabel and not is_committed(path):
            waiting += 1
            continue
        try:  # counts depend on the rule too: a run that changes train.value_plies counts its shards again
            # (and, under "searched", train.value_of_capped_games: a capped game's value-only plies are no rows)
            stamp = [*_stamp(path), *([] if cfg.value_plies == "full" else [cfg.value_plies,
                                                                            cfg.value_of_capped_games])]
        except FileNotFoundError:  # removed since it was listed
            continue
        stamps[rel] = stamp
        entry = counts.get(rel, stamp)
        if entry is None:
            try:
                games = read_hcpe3(path)
                if total < cfg.window_max:  # likely inside the window: keep the positions, not just the count
                    loaded[rel] = buffer_from_games(games, cfg.val_lambda, str(path), cfg.value_plies,
                                                    cfg.value_of_capped_games)
                n = len(loaded[rel]) if rel in loaded else count_positions(games, cfg.value_plies,
                                                                          cfg.value_of_capped_games)
                entry = {"games": len(games), "positions": n}
            except DataError as exc:
                entry = {"error": str(exc)}
            counts.put(rel, stamp, **entry)
        if "error" in entry:
            log.warning("skipping corrupt shard %s: %s", path, entry["error"])
            continue
        total_games += entry["games"]
        total += entry["positions"]
        sizes.append((rel, entry["positions"]))
    counts.save({p.relative_to(rd.data_dir).as_posix() for p in shards})
    if waiting:
        log.info("%d shard(s) not relabelled yet: left for the next generation", waiting)
    if total == 0:
        raise RunDirError(f"{rd.root / source}: no training data ({len(sizes)} usable shard(s), 0 positions "
                          "with visit counts); run self-play first" + (" and relabel it" if cfg.relabel else ""))
    window = window_size(total, cfg)
    plan_shards: list[tuple[str, int]] = []
    need = window
    for rel, n in sizes:
        if need <= 0:
            break
        if n:
            plan_shards.append((rel, min(n, need)))
            need -= n
    plan = WindowPlan(plan_shards, window, total, total_games, source=source)
    if cfg.teacher_fraction > 0:
        if not cfg.teacher_data:
            raise ConfigError(f"train.teacher_fraction is {cfg.teacher_fraction:g} but train.teacher_data lists no "
                              "teacher files (`dlzero loop --init-from F.hcpe3` lists F)")
        plan.teacher = [(e, len(teacher_buffer(rd, e, cfg.val_lambda, cfg.value_of_capped_games)))
                        for e in cfg.teacher_data]
        plan.teacher_fraction = cfg.teacher_fraction
        if not sum(n for _, n in plan.teacher):
            raise DataError(", ".join(cfg.teacher_data), None, "no training positions in the teacher data")
    try:
        return load_window(rd, plan, cfg.val_lambda, loaded, cfg.value_plies, cfg.value_of_capped_games), plan
    except DataError as exc:  # a shard counted before that has rotted in place since (same size and mtime)
        rotten = next((rel for rel, _ in plan.shards if exc.path == str(rd.root / source / rel)), None)
        if rotten is None:
            raise
        log.warning("skipping corrupt shard %s: %s", exc.path, exc.reason)
        counts.put(rotten, stamps[rotten], error=str(exc))  # skipped from now on, as one found when counted
        counts.save({p.relative_to(rd.data_dir).as_posix() for p in shards})
        return build_window(rd, cfg, shards)  # planned again without it


def load_window(rd: RunDir, plan: WindowPlan, val_lambda: float, loaded: dict[str, PositionBuffer] | None = None,
                value_plies: str = "full", capped: str = "drop") -> PositionBuffer:
    """The buffer a plan describes, oldest shard first. A shard that is now unreadable is a DataError.
    `value_plies` applies to the self-play shards; teacher files keep their labelled plies. `capped`:
    `train.value_of_capped_games`, for both."""
    parts = []
    for rel, take in reversed(plan.shards):
        buf = (loaded or {}).get(rel)
        if buf is None:
            path = rd.root / plan.source / rel
            buf = buffer_from_games(read_hcpe3(path), val_lambda, str(path), value_plies, capped)
        if len(buf) < take:
            raise DataError(str(rd.root / plan.source / rel), None,
                            f"holds {len(buf)} positions, the plan expects {take}")
        parts.append(buf.tail(take))
    for entry, n in plan.teacher:
        buf = teacher_buffer(rd, entry, val_lambda, capped)
        if len(buf) != n:
            raise DataError(str(teacher_path(rd, entry)), None, f"holds {len(buf)} positions, the plan expects {n}")
        parts.append(buf)
    return PositionBuffer.concat(parts)


_TEACHER_CACHE: dict[str, tuple[tuple, PositionBuffer]] = {}  # resolved path -> (stamp, λ, capped; positions)


def teacher_buffer(rd: RunDir, entry: str, val_lambda: float, capped: str = "drop") -> PositionBuffer:
    """The training positions of a `train.teacher_data` file (hcpe3 or hcpe).

    Kept in memory while the file is unchanged: the async loop trains every generation in one process,
    and replaying a large teacher file for each would cost more than the generation's training.
    """
    path = teacher_path(rd, entry)
    key = str(path.resolve())
    stamp = (*_stamp(path), val_lambda, capped)
    cached = _TEACHER_CACHE.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    if path.suffix == ".hcpe3":
        buf = buffer_from_games(read_hcpe3(path), val_lambda, str(path), capped=capped)
    else:
        buf = load_hcpe([path], val_lambda, capped)
    _TEACHER_CACHE[key] = (stamp, buf)
    return buf


# ---------------------------------------------------------------- hcpe (supervised)


def buffer_from_hcpe(records: np.ndarray, val_lambda: float, capped: str = "drop") -> PositionBuffer:
    """hcpe records as positions: one-hot policy on bestMove16; value from gameResult blended with eval.

    Records with every eval 0 carry no evals at all (game records imported from CSA/KIF), so their
    value target is the game result alone: blending in sigmoid(0) would pull every target to 0.5.
    A record flagged as a move-capped game (hcpe2's FLAG_MAX_MOVES) has no value target when `capped`
    (`train.value_of_capped_games`) is "drop".
    """
    _capped_check(capped)
    if not records["eval"].any():
        val_lambda = 0.0
    hcp = records["hcp"]
    turn = (hcp[:, 0] & 1).astype(np.int64)  # bit 0 of an hcp is the side to move (0 Black)
    winner = records["gameResult"].astype(np.int64) & 0x3
    z = np.where(winner == 0, 0.5, np.where(winner == turn + 1, 1.0, 0.0))
    n = len(records)
    labels = labels_of(records["bestMove16"].astype(np.int64) & 0xFFFF, turn)
    value = value_target(z, records["eval"], val_lambda)
    if capped == "drop":
        value[(records["gameResult"] & FLAG_MAX_MOVES) != 0] = np.nan
    return PositionBuffer(hcp, np.zeros(n), np.zeros(n), value, z, np.arange(n + 1), labels, np.ones(n))


def load_hcpe(paths: Iterable[str | Path], val_lambda: float, capped: str = "drop") -> PositionBuffer:
    """Every record of the given hcpe files (validated; a corrupt file is a DataError naming it)."""
    return PositionBuffer.concat([buffer_from_hcpe(read_hcpe(p), val_lambda, capped) for p in paths])  # λ per file

