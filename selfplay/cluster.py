"""Self-play across a Ray cluster: the same workers as `run_selfplay`, placed by Ray.

Roles still meet only through the run directory, which every node must see at the same path
(NFS, a shared volume): workers read `models/best.json` and write shards there.

- Workers are Ray tasks (`num_cpus` = their compute threads). A task that dies (its process is
  killed, its node is lost) is started again, wherever Ray finds room, for the games its shards do
  not hold yet (counted from the sidecars on the shared disk, not from its messages), up to
  `selfplay.max_restarts` times per worker, as local workers are; games it had played but not yet
  written are lost, shards it wrote stay. Ray's own task retries are off (`max_retries=0`): a retry
  would replay the whole share, the games already saved included.
- The workers' message queue is an actor pinned to the driver's node, so that losing any other
  node cannot take the queue (and every report in it) down with it.
- A disk that refuses writes stops the session as it does locally (`selfplay.parent`): the
  running tasks are cancelled, none is resubmitted, and one StorageError is raised.
- With `server.enabled`, one inference server runs per GPU of the cluster (an actor holding one
  GPU, which spawns the server process), or one on the CPU when the cluster has no GPU; workers
  are pinned to their server's node, since they meet it through shared memory.
- `address`: `local` starts a private Ray instance on this machine (tests, laptops); `auto` joins
  the cluster this machine belongs to (`ray start` ran here); anything else is passed to
  `ray.init(address=...)` (e.g. `ray://head:10001`). A local instance starts its workers at the
  priority local worker processes have (niceness 0, plus `selfplay.nice`), not at Ray's default
  niceness 15, behind which any other busy process on the machine starves them.

Ray is an optional extra: `pip install 'dlzero[cluster]'`.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from dlzero.config import Config, config_to_dict
from dlzero.data.hcpe3 import storage_error
from dlzero.errors import DlzeroError
from dlzero.inference.server import ModelSource, ServerAddress, start_server
from dlzero.rundir import RunDir
from dlzero.selfplay.bootstrap import ensure_best_model
from dlzero.selfplay.parent import Collector, SelfplaySummary, split_evenly
from dlzero.selfplay.worker import play_worker


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise DlzeroError("Ray is not installed: pip install 'dlzero[cluster]' (or pip install ray)") from None
    return ray


def connect(address: str, num_cpus: int | None = None) -> bool:
    """Join or start Ray; True when this call started it (so the caller shuts it down)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address == "local":
        # a small object store: workers pass only a few messages through Ray, data goes to disk;
        # workers at niceness 0 (Ray's 15 gave them ~3 % of a core each beside two busy processes on two);
        # address "local", not None: given none, ray.init joins any Ray it finds running on the machine (another
        # job's, or one a killed run left behind) and then refuses num_cpus with a ValueError
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, object_store_memory=256 << 20,
                 log_to_driver=True, configure_logging=False, _system_config={"worker_niceness": 0})
    else:
        ray.init(address=address, log_to_driver=True, configure_logging=False)
    return True


class _ServerActor:
    """Holds one inference server process on its node (and its GPU, when it has one)."""

    def __init__(self, root: str, cfg_data: dict, device: str) -> None:
        from dlzero.config import config_from_dict

        cfg = config_from_dict(cfg_data)
        self.proc = start_server(ModelSource.run(root), cfg.inference, cfg.server, device)

    def where(self) -> tuple[ServerAddress, str]:
        import ray

        return self.proc.address, ray.get_runtime_context().get_node_id()

    def stats(self) -> dict:
        return self.proc.stats()

    def stop(self) -> None:
        self.proc.stop()


def _start_servers(ray: Any, rd: RunDir, cfg: Config) -> list[tuple[Any, ServerAddress, str]]:
    """(actor, address, node id) per server: one per GPU in the cluster, else one CPU server."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    actor_cls = ray.remote(_ServerActor)
    if gpus:
        # Ray gives each actor one GPU and hides the others (CUDA_VISIBLE_DEVICES): it is cuda:0
        actors = [actor_cls.options(num_gpus=1, num_cpus=1).remote(str(rd.root), config_to_dict(cfg), "cuda:0")
                  for _ in range(gpus)]
    else:
        actors = [actor_cls.options(num_cpus=1).remote(str(rd.root), config_to_dict(cfg), "cpu")]
    places = ray.get([a.where.remote() for a in actors])
    return [(a, addr, node) for a, (addr, node) in zip(actors, places, strict=True)]


def run_selfplay_ray(rd: RunDir, cfg: Config, games: int, address: str = "local", workers: int | None = None,
                     progress: bool = True, seed: int | None = None) -> SelfplaySummary:
    """Play `games` games with `workers` Ray tasks (default `selfplay.workers`); see the module docstring.

    In local mode Ray is told the machine has at least one CPU per worker thread plus one for the
    server: Ray's CPUs are scheduling tokens, and the point is to run every worker at once.
    """
    ray = import_ray()
    from ray.util.queue import Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ensure_best_model(rd, cfg, seed)
    n_workers = max(1, min(workers or cfg.selfplay.workers, games))
    threads = cfg.inference.threads or 1
    started = connect(address, num_cpus=max(os.cpu_count() or 1, n_workers * threads + 1))
    servers: list[tuple[Any, ServerAddress, str]] = []
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    queue = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here})
    collector = Collector(rd, cfg, games, n_workers, progress)
    task = ray.remote(play_worker)
    assigned = split_evenly(games, n_workers)
    session = secrets.token_hex(6)
    attempts = [0] * n_workers
    running: dict[Any, int] = {}
    where = [""] * n_workers

    def submit(w: int, n: int) -> None:
        wseed = None if seed is None else seed + 1000 * w + attempts[w]
        options: dict[str, Any] = {}
        addr = None
        if servers:
            _, addr, node = servers[w % len(servers)]
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
            where[w] = f"node {node[:8]}"
        ref = task.options(num_cpus=threads, max_retries=0, **options).remote(
            str(rd.root), config_to_dict(cfg), w, n, queue, wseed, addr, session)
        running[ref] = w
        attempts[w] += 1

    def drain() -> None:  # this loop is the queue's only consumer, so qsize items are there to take
        while queue.qsize():
            for msg in queue.get_nowait_batch(queue.qsize()):
                collector.handle(msg)

    def stop_others(failed: int | None) -> None:  # each task saves what it can and ends; none is resubmitted
        for ref, w in running.items():
            if w != failed:
                ray.cancel(ref)

    collector.on_fatal = stop_others

    try:
        if cfg.server.enabled:
            servers = _start_servers(ray, rd, cfg)
        for w, n in enumerate(assigned):
            submit(w, n)
        while running:
            done, _ = ray.wait(list(running), num_returns=1, timeout=0.25)
            drain()
            for ref in done:
                w = running.pop(ref)
                try:
                    ray.get(ref)
                except Exception as exc:
                    drain()
                    fatal = storage_error(getattr(exc, "cause", None) or exc)  # a RayTaskError wraps it
                    if fatal is not None:
                        collector.fail(str(fatal), w)
                    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    collector.worker_died(w, reason)
                    left = collector.replay_share(w, session, assigned[w], attempts[w], reason)
                    if left:
                        submit(w, left)
                    elif not collector.per[w].done:
                        collector.per[w].error = collector.per[w].error or reason
        drain()
    finally:
        for actor, _, _ in servers:
            try:
                collector.summary.servers.append(ray.get(actor.stats.remote(), timeout=30))
                ray.get(actor.stop.remote(), timeout=30)
            except Exception as exc:  # a lost node: its server's counters are gone with it
                collector.summary.servers.append({"device": "?", "error": str(exc)})
        queue.shutdown()
        if started:
            ray.shutdown()
    return collector.finish([where[w] or f"ray task, {attempts[w]} attempt(s)" for w in range(n_workers)])
