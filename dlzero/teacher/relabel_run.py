"""`train.relabel`: a run's own self-play games, relabelled by a teacher before training reads them.

On-policy distillation (the idea of DAgger, and of dlshogi relabelling engine games with a model):
the student's self-play chooses which positions are seen, the teacher says what to play there and
who stands better. Self-play targets from a 48-playout search of a small student are weaker than a
teacher's; training on the teacher's labels of the teacher's own games leaves the student in
positions it never learnt from. Measured in docs/benchmarks/teacher.md ("Levers").

Each shard `data/gen-X/S.hcpe3` gets a twin `relabelled/gen-X/S.hcpe3` (`RunDir.relabelled`): the
same games, moves and results, every ply labelled by the teacher (`label.relabel_games`). The twin's
sidecar records the spec and the source's size and mtime, and a twin made from other bytes or by
another teacher is made again. Written atomically, sidecar last (`data.hcpe3`), so a killed
relabelling redoes at most the shard it was writing. The training window (`train.dataset`) reads
the twins; held-out validation keeps scoring the self-play shards themselves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from dlzero.data.hcpe3 import is_committed, read_hcpe3, read_sidecar, write_hcpe3
from dlzero.errors import DataError, DlzeroError
from dlzero.rundir import RunDir
from dlzero.teacher.label import relabel_games
from dlzero.teacher.sources import source_record
from dlzero.teacher.spec import open_teacher, parse_spec

log = logging.getLogger(__name__)


@dataclass
class RelabelReport:
    shards: int  # relabelled by this call
    positions: int  # labelled by this call
    kept: int  # shards whose twin was already up to date
    seconds: float


def _source_stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def is_current(rd: RunDir, shard: Path, spec: str) -> bool:
    """Whether `shard`'s twin exists and was made by `spec` from the shard's present bytes."""
    twin = rd.relabelled(shard)
    if not is_committed(twin):
        return False
    try:
        meta = read_sidecar(twin).get("meta", {})
        return meta.get("teacher") == spec and meta.get("source_stamp") == _source_stamp(shard)
    except (OSError, DlzeroError):
        return False


def relabel_shards(rd: RunDir, spec: str, shards: Sequence[Path] | None = None,
                   progress: bool = False) -> RelabelReport:
    """Give every self-play shard (or `shards`) a current twin labelled by the teacher `spec`.

    One teacher serves the whole call (an engine process, or an ONNX session). A shard that cannot be
    read is skipped with a warning, as the trainer skips it; a teacher that fails raises TeacherError.
    """
    parse_spec(spec)  # a bad spec fails before anything is read
    listed = rd.shards() if shards is None else shards
    todo = [p for p in listed if not is_current(rd, p, spec)]
    kept = len(listed) - len(todo)
    started = time.perf_counter()
    if not todo:
        return RelabelReport(0, 0, kept, 0.0)
    done = positions = 0
    with open_teacher(spec) as teacher, tqdm(unit="pos", desc="relabel", disable=not progress) as bar:
        for shard in todo:
            try:
                stamp = _source_stamp(shard)
                games = [source_record(g) for g in read_hcpe3(shard)]
            except (OSError, DataError) as exc:
                log.warning("not relabelling %s: %s", shard, exc)
                continue
            labelled, n = relabel_games(teacher, games, bar.update)
            twin = rd.relabelled(shard)
            twin.parent.mkdir(parents=True, exist_ok=True)
            write_hcpe3(twin, labelled, meta={"teacher": spec, "source_stamp": stamp, "positions": n})
            done += 1
            positions += n
    seconds = time.perf_counter() - started
    log.info("relabelled %d shard(s), %d positions in %.1f s (%.0f positions/s) with %s; %d already done",
             done, positions, seconds, positions / max(seconds, 1e-9), spec, kept)
    return RelabelReport(done, positions, kept, seconds)
