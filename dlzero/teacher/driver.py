"""`dlzero teach`: label N positions with a teacher into one hcpe3 file, by many workers, resumably.

Parts. The work is cut into parts of `part_games` games, each written by the worker that labelled it
as `OUT.parts/part-NNNNN.hcpe3` (atomically; its sidecar, written after it, commits it). A committed part
is never redone: a killed run goes on where it stopped. Part k of the teacher's own games
plays with seed (seed, k), and fewer games when fewer positions are still wanted (what they need at the
positions a game gave so far, shared by the workers, at least one: `--positions 64` plays one game, not
32); parts of existing games are consecutive slices of the source games shuffled
by the seed. `OUT.parts/manifest.json` records what the parts were made with, and a rerun with other
settings or other source games is refused (only `--positions` may change: more parts are added, or
fewer used). Once the parts hold N positions, they are joined in order into OUT (atomically). The
parts are kept, so a later run with a larger N continues from them.

Workers. W spawned processes, each with its own teacher (one engine process, or one ONNX session
with one thread: on a CPU, W single-threaded processes beat one process with W threads). The parent
keeps W parts in flight while the positions done plus those expected from the parts in flight fall
short of N, and shows a progress bar with positions/s; the workers report each labelled batch.
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing as mp
import multiprocessing.util
import queue
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from dlzero.data.atomic import atomic_write_text
from dlzero.data.hcpe3 import Hcpe3Record, is_committed, read_hcpe3, read_sidecar, write_hcpe3
from dlzero.teacher.base import Teacher, TeacherError
from dlzero.teacher.label import PlaySettings, play_teacher_games, relabel_games
from dlzero.teacher.sources import SourceRecord, opening_lines, read_source_games
from dlzero.teacher.spec import open_teacher, parse_spec

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
GUESS_PLIES = 100  # positions a teacher game is assumed to give until some parts are done


@dataclass(frozen=True)
class TeachSettings:
    """What `teach` does; everything but `positions`, `out`, `workers` and `allow_rating_openings` (which
    changes no label) goes into the manifest."""

    teacher: str
    positions: int
    out: Path
    workers: int = 1
    sources: tuple[str, ...] = ()  # empty: the teacher plays itself
    openings: str | None = None  # suite for the teacher's games (None: the shipped one; "startpos")
    allow_rating_openings: bool = False  # `openings` may hold the rating suite's start positions
    play: PlaySettings = field(default_factory=PlaySettings)
    part_games: int = 32
    seed: int = 1


@dataclass
class TeachReport:
    out: Path
    positions: int  # in OUT
    games: int  # in OUT
    parts: int  # joined into OUT
    reused_parts: int  # done by an earlier run
    labelled: int  # positions labelled by this run
    seconds: float

    @property
    def rate(self) -> float:
        """Positions labelled per second by this run."""
        return self.labelled / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class _Task:
    index: int
    path: str
    seed: int
    n_games: int
    games: tuple[SourceRecord, ...] | None  # None: the teacher's own games


@dataclass(frozen=True)
class _PartDone:
    index: int
    positions: int
    games: int
    seconds: float


def part_path(parts_dir: Path, index: int) -> Path:
    return parts_dir / f"part-{index:05d}.hcpe3"


def parts_dir_of(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


# ---------------------------------------------------------------- the worker side

_WORKER: dict = {}


def _worker_init(spec: str, openings: list[str], play: PlaySettings, progress: mp.Queue) -> None:
    _WORKER.update(spec=spec, openings=openings, play=play, progress=progress, teacher=None)


def _worker_teacher() -> Teacher:
    """The worker's teacher, made on its first part (so a failure reaches the parent as an error)."""
    if _WORKER["teacher"] is None:
        teacher = open_teacher(_WORKER["spec"])
        _WORKER["teacher"] = teacher
        multiprocessing.util.Finalize(None, teacher.close, exitpriority=10)  # quit the engine with the worker
    return _WORKER["teacher"]


def _run_part(task: _Task) -> _PartDone:
    teacher = _worker_teacher()
    started = time.perf_counter()
    report = _WORKER["progress"].put
    if task.games is None:
        games, positions = play_teacher_games(teacher, _WORKER["openings"], task.n_games, task.seed, _WORKER["play"],
                                              report)

    else:
        games, positions = relabel_games(teacher, task.games, report)
    seconds = time.perf_counter() - started
    write_hcpe3(task.path, games, meta={"teacher": _WORKER["spec"], "part": task.index, "positions": positions,
                                        "seconds": round(seconds, 3)})
    return _PartDone(task.index, positions, len(games), seconds)


# ---------------------------------------------------------------- the parent side


def _manifest(settings: TeachSettings, games: list[SourceRecord] | None) -> dict:
    return {"teacher": settings.teacher, "sources": [str(Path(s).resolve()) for s in settings.sources],
            "openings": settings.openings, "play": asdict(settings.play), "part_games": settings.part_games,
            "seed": settings.seed,
            "source_games": None if games is None else [len(games), sum(len(g.moves) for g in games)]}


def _check_manifest(parts_dir: Path, manifest: dict) -> None:
    path = parts_dir / MANIFEST
    if path.is_file():
        old = json.loads(path.read_text())
        changed = sorted(k for k in set(old) | set(manifest) if old.get(k) != manifest.get(k))
        if changed:
            raise TeacherError(f"{parts_dir} holds parts made with other settings ({', '.join(changed)} differ); "
                               "use another --out, or remove that folder to start afresh")
    else:
        parts_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def teach(settings: TeachSettings, progress: bool = True) -> TeachReport:
    """Label `settings.positions` positions (at least; whole parts) into `settings.out`."""
    if settings.positions < 1 or settings.workers < 1 or settings.part_games < 1:
        raise TeacherError("positions, workers and part_games must be >= 1")
    parse_spec(settings.teacher)  # a bad spec fails here, before any worker starts
    out = Path(settings.out)
    parts_dir = parts_dir_of(out)
    games: list[SourceRecord] | None = None
    openings: list[str] = []
    if settings.sources:
        games = read_source_games(settings.sources)
        if not games:
            raise TeacherError(f"no games in {', '.join(settings.sources)}")
        order = np.random.default_rng(settings.seed).permutation(len(games))
        games = [games[i] for i in order]
    else:
        openings = opening_lines(settings.openings, settings.allow_rating_openings)
    _check_manifest(parts_dir, _manifest(settings, games))
    plan = None if games is None else [tuple(games[i:i + settings.part_games])
                                       for i in range(0, len(games), settings.part_games)]

    def task(k: int, n_games: int) -> _Task:
        seed = int(np.random.SeedSequence([settings.seed, k]).generate_state(1)[0])
        chunk = None if plan is None else plan[k]
        return _Task(k, str(part_path(parts_dir, k)), seed, n_games, chunk)

    done: dict[int, _PartDone] = {}
    in_flight: dict[Future, int] = {}
    sizes: dict[int, int] = {}  # games of each part of the teacher's own games in flight
    total = labelled = reused = k = 0
    started = time.perf_counter()

    def per_game() -> float:  # positions a teacher game gave so far
        games = sum(d.games for d in done.values())
        positions = sum(d.positions for d in done.values())
        return positions / games if games and positions else GUESS_PLIES  # parts of no positions: the guess

    def expected(index: int) -> float:
        if plan is not None:
            return sum(len(g.moves) for g in plan[index])
        return sizes[index] * per_game()

    def part_size() -> int:
        """Games of the next part of the teacher's own games: those the positions still wanted need, shared
        by the workers, at least 1 and at most part_games (64 positions asked: one game, not 32)."""
        still = settings.positions - total - sum(expected(i) for i in in_flight.values())
        return min(settings.part_games, max(1, math.ceil(still / (per_game() * settings.workers))))

    def more() -> bool:
        if plan is not None and k >= len(plan):
            return False
        return total + sum(expected(i) for i in in_flight.values()) < settings.positions

    ctx = mp.get_context("spawn")
    reports: mp.Queue = ctx.Queue()
    bar = tqdm(total=settings.positions, unit="pos", desc=f"teach ({settings.workers} workers)",
               disable=not progress, smoothing=0.1)

    def drain() -> None:
        while True:
            try:
                bar.update(reports.get_nowait())
            except queue.Empty:
                return

    with ProcessPoolExecutor(settings.workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(settings.teacher, openings, settings.play, reports)) as pool:
        try:
            while True:
                while len(in_flight) < settings.workers and more():
                    path = part_path(parts_dir, k)
                    if is_committed(path):  # done by an earlier run
                        side = read_sidecar(path)
                        done[k] = _PartDone(k, int(side["meta"]["positions"]), int(side["games"]), 0.0)
                        total += done[k].positions
                        reused += 1
                        bar.update(done[k].positions)
                    else:
                        sizes[k] = settings.part_games if plan is not None else part_size()
                        in_flight[pool.submit(_run_part, task(k, sizes[k]))] = k
                    k += 1
                if not in_flight:
                    break
                finished, _ = wait(in_flight, timeout=0.5, return_when=FIRST_COMPLETED)
                drain()
                for future in finished:
                    in_flight.pop(future)
                    part = future.result()
                    done[part.index] = part
                    total += part.positions
                    labelled += part.positions
                    if not progress:
                        log.info("part %d: %d positions in %d games, %.1f s (%.0f positions/s)", part.index,
                                 part.positions, part.games, part.seconds, part.positions / max(part.seconds, 1e-9))
                    bar.set_postfix(parts=len(done))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            bar.close()
    seconds = time.perf_counter() - started
    if plan is not None and total < settings.positions:
        log.warning("the sources hold only %d positions (asked for %d)", total, settings.positions)
    joined: list[Hcpe3Record] = []
    for i in range(k):
        joined += read_hcpe3(part_path(parts_dir, i))  # replayed: every move and candidate legal
    write_hcpe3(out, joined, meta={"teacher": settings.teacher, "positions": total, "parts": k,
                                   "sources": list(settings.sources) or "teacher self-play"})
    report = TeachReport(out, total, len(joined), k, reused, labelled, seconds)
    log.info("teach: labelled %d positions in %.1f s (%.1f positions/s, %d workers); %s holds %d positions "
             "in %d games (%d parts, %d from an earlier run)", labelled, seconds, report.rate, settings.workers,
             out, total, len(joined), k, reused)
    return report
