"""The learning loop: self-play -> train -> gate -> promote, generation after generation.

Two ways to share the machine (`loop.mode`):

- **sequential**: self-play plays `selfplay.games_per_generation` games, then training, int8
  calibration, the gate and ratings run one after another, each with every core. Right where training
  is far faster than self-play (a GPU that trains a generation in seconds).
- **async**: self-play never stops. Its worker processes start once (in a thread of this process)
  and play on; this process trains a generation each time `selfplay.games_per_generation` new games
  are on disk, calibrates its int8 model, gates or promotes it and rates it, with
  `loop.train_threads` compute threads, while the workers pick a promoted model up between games.
  The workers run at a lower priority (`loop.selfplay_nice`): while a generation trains its
  threads get their cores, and while it waits for games the workers have every core.
  On a CPU the scarce thing is self-play evaluations: in the sequential hour self-play ran a third
  of the time (self-play 37 s, training 34 s, calibration 15 s, gate 28 s an iteration).

`gate.mode` decides which candidates play a gate match (`gate_due`): all (sprt), none (off: each
candidate becomes the best at once, as in AlphaZero and dlshogi, so self-play always uses the
latest model), or every N-th generation (every-N). An ungated promotion plays no games and writes
no ratings.csv row; `dlzero rate` can still place any generation on the anchored scale.

Progress is kept in `runs/NAME/loop.json` (written atomically after each phase), so Ctrl-C or a
crash at any point and the same command again continues where it stopped: a finished phase is
never redone, the trainer resumes from its checkpoint, and self-play only tops up the games the
current iteration still lacks (async: the games not yet trained on count towards the next
generation, whoever played them).

Every phase is a row of `metrics/timeline.csv` (`dlzero.progress.timeline`), and each iteration's
line in the log says where its time went and how much of the loop's wall time self-play ran.

With `rate.loop`, a promoted candidate is also rated against the anchor pool (`dlzero rate`, topped
up to `rate.games` per pairing, every `rate.every`-th promotion), so `progress.png` and
`metrics/elo.csv` follow the run on the anchored scale.

With `train.relabel` (a teacher spec), each generation first has the teacher relabel the self-play
shards that have no relabelled twin yet (`dlzero.teacher.relabel_run`), and trains on the twins:
self-play picks the positions, the teacher labels them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dlzero.config import Config
from dlzero.errors import RunDirError
from dlzero.gate_modes import gate_interval
from dlzero.progress.timeline import Timeline
from dlzero.rundir import RunDir, generation_name
from dlzero.runfiles import LOOP_STATE

if TYPE_CHECKING:
    from dlzero.selfplay.parent import Collector

log = logging.getLogger("dlzero.loop")

PHASES = ("selfplay", "train", "gate", "rate")
ENDLESS_GAMES = 10**9  # async self-play plays until it is told to stop


@dataclass
class LoopState:
    """Where the loop stands: iteration number, next phase, and what the iteration produced."""

    iteration: int = 0
    phase: str = "selfplay"
    games_done: int = 0
    candidate: int | None = None

    @classmethod
    def load(cls, rd: RunDir) -> LoopState:
        """The saved state (a fresh one without loop.json); a RunDirError that names a damaged file's field."""
        data = rd.read_json(LOOP_STATE, {})  # missing: {}; [] or 0 is damage that state_problem names
        problem = state_problem(data)
        if problem:
            raise RunDirError(f"{rd.loop_state_path}: {problem}; fix it, or delete the file (the loop then begins "
                              "its next iteration with self-play, keeping every file already written)")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def save(self, rd: RunDir) -> None:
        rd.write_json(LOOP_STATE, vars(self))


def state_problem(data: Any) -> str:
    """What is wrong with the content of a loop.json, or "" (`dlzero doctor` reports the same)."""
    if not isinstance(data, dict):
        return "not a JSON object"

    def count(key: str) -> bool:
        return type(data.get(key, 0)) is int and data.get(key, 0) >= 0

    checks = [(count("iteration"), f"iteration {data.get('iteration')!r} is not a count"),
              (data.get("phase", "selfplay") in PHASES,
               f"phase {data.get('phase')!r} is not one of {', '.join(PHASES)}"),
              (count("games_done"), f"games_done {data.get('games_done')!r} is not a count"),
              (data.get("candidate") is None or count("candidate"),
               f"candidate {data.get('candidate')!r} is not a generation")]
    return next((problem for ok, problem in checks if not ok), "")


def gate_due(mode: str, generation: int) -> bool:
    """Whether candidate `generation` plays a gate match under `gate.mode` (else it is promoted)."""
    interval = gate_interval(mode)
    return interval is not None and generation % interval == 0


def run_loop(rd: RunDir, cfg: Config, generations: int, progress: bool = True) -> None:
    """Run `generations` more iterations (each: self-play, train a candidate, gate it)."""
    from dlzero.engine.int8_gate import prepare_searched_int8
    from dlzero.selfplay.bootstrap import ensure_best_model

    ensure_best_model(rd, cfg, cfg.train.seed)
    timeline = Timeline(rd.timeline_csv)
    with timeline.phase("calibrate", rd.best().generation):
        prepare_searched_int8(rd.best_model_path(), cfg)  # once here, not in every worker or gate side
    if cfg.loop.mode == "async":
        _run_async(rd, cfg, generations, timeline, progress)
    else:
        _run_sequential(rd, cfg, generations, timeline, progress)


def _run_sequential(rd: RunDir, cfg: Config, generations: int, timeline: Timeline, progress: bool) -> None:
    from dlzero.selfplay.session import run_selfplay

    state = LoopState.load(rd)
    stop_at = state.iteration + generations
    while state.iteration < stop_at:
        t0 = time.perf_counter()
        if state.phase == "selfplay":
            wanted = cfg.selfplay.games_per_generation - state.games_done
            if wanted > 0:
                with timeline.phase("selfplay", rd.best().generation):
                    summary = run_selfplay(rd, cfg, wanted, cfg.selfplay.workers, progress=progress)
                state.games_done += summary.games
            state.phase = "train"
            state.save(rd)
        state = _train_gate_rate(rd, cfg, state, timeline, t0, progress)


def _train_gate_rate(rd: RunDir, cfg: Config, state: LoopState, timeline: Timeline, t0: float,
                     progress: bool) -> LoopState:
    """The phases after self-play, from `state.phase` on; returns the next iteration's state."""
    from dlzero.engine.int8_gate import prepare_searched_int8
    from dlzero.gating.promotion import finish_interrupted_gate, gate_and_promote
    from dlzero.gating.rating import promoted_generations, rate
    from dlzero.progress.plots import plot_progress
    from dlzero.train.generation import train_generation

    best = rd.best()
    if state.phase == "train":
        if cfg.train.relabel:
            from dlzero.teacher.relabel_run import relabel_shards

            with timeline.phase("relabel", (rd.latest_generation() or 0) + 1):
                relabel_shards(rd, cfg.train.relabel, progress=progress)
        with timeline.phase("train", (rd.latest_generation() or 0) + 1):
            result = train_generation(rd, cfg, progress=progress)
        state.candidate = result.generation
        with timeline.phase("calibrate", result.generation):
            prepare_searched_int8(rd.model_path(result.generation), cfg)
        state.phase = "gate"
        state.save(rd)
    if state.phase == "gate":
        if (finished := finish_interrupted_gate(rd, state.candidate)) is not None:
            line = finished
        elif gate_due(cfg.gate.mode, state.candidate):
            with timeline.phase("gate", state.candidate):
                gate = gate_and_promote(rd, cfg, state.candidate, progress=progress, report=False)
            verdict = "promoted" if gate.promoted else "kept best"
            line = (f"candidate gen {state.candidate} vs best gen {best.generation}: "
                    f"{gate.wins}-{gate.draws}-{gate.losses}, score {gate.score:.3f}, Elo {gate.elo:+.0f} "
                    f"[{gate.elo_low:+.0f}, {gate.elo_high:+.0f}] -> {verdict}")
        else:
            rd.set_best(state.candidate, f"gate.mode {cfg.gate.mode}: promoted without a gate match")
            line = f"candidate gen {state.candidate} promoted without a gate match (gate.mode {cfg.gate.mode})"
        minutes = (time.perf_counter() - t0) / 60.0
        print(f"[iteration {state.iteration}] {line} ({minutes:.1f} min; {timeline.describe(state.candidate)})",
              flush=True)
        state.phase = "rate"
        state.save(rd)
    if state.phase == "rate":
        best_now = rd.best()
        promoted = best_now is not None and best_now.generation == state.candidate
        if cfg.rate.loop and promoted and (len(promoted_generations(rd, cfg.gate.mode)) - 1) % cfg.rate.every == 0:
            with timeline.phase("rate", state.candidate):
                rated = rate(rd, cfg, [state.candidate], progress=progress).ratings
            mine = rated.by_player().get(generation_name(state.candidate)) if rated else None
            if mine is not None:
                print(f"[iteration {state.iteration}] gen {state.candidate} {rated.label(mine.reference)} "
                      f"{mine.elo:+.0f} [{mine.elo_low:+.0f}, {mine.elo_high:+.0f}] over {mine.games} games",
                      flush=True)
        plot_progress(rd)
        state = LoopState(iteration=state.iteration + 1)
        state.save(rd)
    return state


# ---------------------------------------------------------------- async: self-play never waits


class BackgroundSelfplay:
    """Self-play workers that play until `stop()`, driven from a thread of the loop's process.

    The workers are the usual processes (`selfplay.parent.run_local`); they save each finished game
    and switch to a promoted model between games. A worker that dies is restarted as always; an
    error of the whole session ends the thread and is raised again by `check()`.
    """

    def __init__(self, rd: RunDir, cfg: Config, timeline: Timeline) -> None:
        self.rd, self.cfg, self.timeline = rd, cfg, timeline
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="selfplay", daemon=True)
        self.started = time.perf_counter()
        self._collector: Collector | None = None

    @property
    def unsaved_games(self) -> int:
        """Games the workers have played that no shard holds yet (0 before the session starts)."""
        return self._collector.unsaved_games if self._collector is not None else 0

    def start(self) -> None:
        self.started = time.perf_counter()
        self._thread.start()

    def _run(self) -> None:
        from dlzero.selfplay.parent import run_local

        try:
            with self.timeline.phase("selfplay", self.rd.best().generation):
                run_local(self.rd, self.cfg, ENDLESS_GAMES, self.cfg.selfplay.workers, progress=False,
                          stop=self._stop, on_start=self._keep)
        except BaseException as exc:  # handed to the loop's thread by check()
            self._error = exc

    def _keep(self, collector: Collector) -> None:
        self._collector = collector

    def check(self) -> None:
        """Raise what ended self-play early (an error, or all its workers gone)."""
        if self._error is not None:
            raise self._error
        if not self._thread.is_alive() and not self._stop.is_set():
            raise RuntimeError("self-play stopped by itself (every worker died); see the messages above")

    def stop(self) -> None:
        """Tell every worker to save its finished games and exit, and wait until they have."""
        self._stop.set()
        self._thread.join()


def new_games(rd: RunDir) -> tuple[int, int]:
    """(games no generation has trained on, all games) in the run's shards, from their sidecars."""
    from dlzero.data.hcpe3 import read_sidecar
    from dlzero.errors import DlzeroError
    from dlzero.train.generation import seen_shards

    seen = seen_shards(rd)
    new = total = 0
    for path in rd.shards():
        try:
            games = int(read_sidecar(path).get("games", 0))
        except (OSError, ValueError, DlzeroError):
            continue  # a shard being replaced, or one the trainer will skip with its own warning
        total += games
        if path.relative_to(rd.data_dir).as_posix() not in seen:
            new += games
    return new, total


def _wait_for_games(rd: RunDir, cfg: Config, selfplay: BackgroundSelfplay, loop_start: float) -> None:
    """Until `selfplay.games_per_generation` untrained games are on disk, with a status line now and then."""
    wanted = cfg.selfplay.games_per_generation
    last_status = time.perf_counter()
    first_total: int | None = None
    while True:
        selfplay.check()
        new, total = new_games(rd)
        first_total = total if first_total is None else first_total
        if new >= wanted:
            return
        now = time.perf_counter()
        if now - last_status >= cfg.loop.status_every_s:
            rate = (total - first_total) / max((now - last_status) / 3600.0, 1e-9)
            print(f"[{(now - loop_start) / 60:.1f} min] waiting for games: {new}/{wanted} new in shards "
                  f"(+{selfplay.unsaved_games} played, not yet in a shard of {cfg.selfplay.games_per_shard}), "
                  f"{total} in all (about {rate:,.0f} games/h lately)", flush=True)
            last_status, first_total = now, total
        time.sleep(1.0)


def _run_async(rd: RunDir, cfg: Config, generations: int, timeline: Timeline, progress: bool) -> None:
    import torch

    threads = cfg.loop.train_threads
    torch.set_num_threads(threads)
    # training, calibration, the gate and ratings run here with the loop's threads; workers keep their own
    mine = dataclasses.replace(cfg, inference=dataclasses.replace(cfg.inference, threads=threads))
    state = LoopState.load(rd)
    stop_at = state.iteration + generations
    workers = dataclasses.replace(cfg, selfplay=dataclasses.replace(cfg.selfplay, nice=cfg.loop.selfplay_nice))
    selfplay = BackgroundSelfplay(rd, workers, timeline)
    selfplay.start()
    loop_start = time.perf_counter()
    print(f"async loop: self-play runs on in {cfg.selfplay.workers} worker process(es); training, calibration "
          f"and gating here with {threads} thread(s), a generation every {cfg.selfplay.games_per_generation} "
          "new games", flush=True)
    try:
        while state.iteration < stop_at:
            t0 = time.perf_counter()
            if state.phase == "selfplay":
                with timeline.phase("wait", (rd.latest_generation() or 0) + 1):
                    _wait_for_games(rd, cfg, selfplay, loop_start)
                state.phase = "train"
                state.save(rd)
            state = _train_gate_rate(rd, mine, state, timeline, t0, progress=False)
            selfplay.check()
    finally:
        print("stopping self-play: the workers save their finished games", flush=True)
        selfplay.stop()
