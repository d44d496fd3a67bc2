"""One self-play session: local worker processes (`selfplay.parent`) or Ray tasks (`selfplay.cluster`)."""

from __future__ import annotations

from dlzero.config import Config
from dlzero.rundir import RunDir
from dlzero.selfplay.parent import SelfplaySummary, run_local


def run_selfplay(rd: RunDir, cfg: Config, games: int, workers: int | None = None, progress: bool = True,
                 seed: int | None = None) -> SelfplaySummary:
    """Play `games` games into the run with `workers` workers (default `selfplay.workers`).

    With `selfplay.ray` set the workers are Ray tasks placed by Ray, otherwise spawned processes on
    this machine; either way the summary is the same (see `selfplay.parent.run_local`).
    """
    if cfg.selfplay.ray:
        from dlzero.selfplay.cluster import run_selfplay_ray  # Ray is optional: imported only when asked for

        return run_selfplay_ray(rd, cfg, games, cfg.selfplay.ray, workers, progress, seed)
    return run_local(rd, cfg, games, workers, progress, seed)
