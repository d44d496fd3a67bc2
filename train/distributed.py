"""Data-parallel training across processes: torch DDP, launched by `torchrun`.

`torchrun --nproc_per_node=K -m dlzero.cli train --run-dir DIR` starts K copies of the same command;
torchrun sets WORLD_SIZE, RANK and LOCAL_RANK (and the rendezvous address) in each one's
environment. Each process then joins one process group: NCCL when it trains on CUDA (one GPU per
local rank), gloo on the CPU. Rank 0 alone writes checkpoints, metrics and models. A rank that
has done its work leaves through `exit_rank`, not through the interpreter's teardown (see there).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, NoReturn

import torch
import torch.distributed as dist

from dlzero.inference.devices import resolve_device

EXIT_JOIN_S = 10.0  # how long a finished rank waits, in all, for its other threads before it exits


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands among the training processes (world 1: a plain single process)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1


def launched_by_torchrun() -> bool:
    """True when torchrun (or another launcher using its variables) started this process."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def current() -> DistInfo:
    """This process's rank and world size, from the process group if one is running."""
    if dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
        return DistInfo(rank, dist.get_world_size(), int(os.environ.get("LOCAL_RANK", rank)))
    return DistInfo()


def set_threads(threads: int) -> None:
    """`train.threads`: torch's CPU compute threads, when set (0 leaves torch's default, one a core)."""
    if threads:
        torch.set_num_threads(threads)


def train_device(name: str, info: DistInfo) -> torch.device:
    """The device this process trains on: `name` resolved at run time; under DDP on CUDA, its own GPU."""
    device = resolve_device(name)
    if device.type == "cuda" and info.enabled and device.index is None:
        device = torch.device("cuda", info.local_rank % torch.cuda.device_count())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def init_from_env(device_name: str) -> tuple[DistInfo, torch.device]:
    """Join the process group torchrun described (NCCL on CUDA, gloo on CPU); pick this rank's device."""
    env = os.environ
    local = DistInfo(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)))
    device = train_device(device_name, local)
    if local.enabled and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return current(), device


def shutdown(done: bool = True) -> None:
    """Leave the process group: together when this rank's work is `done`, at once when it failed.

    Why the barrier: a rank tearing gloo down while rank 0 still writes aborts. Why none after a
    failure: the other ranks are still at their own work, so the barrier would hold the failed rank
    (and its error) until they finish or gloo times out (30 minutes); leaving at once lets torchrun see
    the failure and stop the job.
    """
    if dist.is_available() and dist.is_initialized():
        if done:
            dist.barrier()
        dist.destroy_process_group()


def joined_by_torchrun() -> bool:
    """True when torchrun started this process as one of several ranks (so it joins a process group)."""
    return launched_by_torchrun() and int(os.environ["WORLD_SIZE"]) > 1


def exit_rank(code: int, join_s: float | None = None) -> NoReturn:
    """End this rank's process with `code` after `shutdown`, skipping only the interpreter's teardown.

    Why: DDP keeps its gloo process group alive past `destroy_process_group()` (nothing joins the
    group's worker threads), and a worker thread may still be releasing a finished collective when
    the main thread starts tearing the interpreter down. Such a collective holds a Python object
    (torch's thread-local state captured during backward), and a thread that needs the GIL during
    teardown is ended by CPython in the middle of that C++ destructor: the C++ runtime aborts the
    process ("terminate called without an active exception", SIGABRT), and a rank whose work was
    done and written exits failed (4 runs in 31 of a minimal two-rank DDP script; 0 in 50 with this). So everything a
    normal exit does before teardown is done here (other Python threads joined, exit handlers run:
    logging, temporary files; output flushed), then the process ends; what is skipped is freeing
    memory the OS takes back anyway.

    The other threads get `join_s` seconds in all (default EXIT_JOIN_S): a thread that never ends
    must not keep a rank whose work is done from exiting (torchrun would wait on it for ever).
    Whatever a join, an exit handler or a flush raises, the process still ends here, with `code`.
    """
    join_s = EXIT_JOIN_S if join_s is None else join_s
    try:
        deadline = time.monotonic() + join_s
        left = []
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    left.append(thread.name)
        if left:
            print(f"dlzero: thread(s) {', '.join(left)} still running after {join_s:g} s; the rank exits "
                  "without them", file=sys.stderr)
        atexit._run_exitfuncs()  # what teardown would run first (CPython's own entry point for it)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or broken stream must not stop the exit
                stream.flush()
        os._exit(code)


def broadcast(obj: Any, info: DistInfo) -> Any:
    """Rank 0's `obj` on every rank (plain picklable data)."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]
