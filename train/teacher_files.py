"""A run's teacher files: where `train.teacher_data` entries live, and copying them into the run.

`dlzero loop --init-from F.hcpe3` trains generation 0 on F and then lists it in `train.teacher_data`,
from which `train.teacher_fraction` of every later batch is drawn (train.dataset). The run keeps a
copy, `runs/NAME/teacher/F.hcpe3`, and its config names it relative to the run directory, rather
than the absolute path of the original, because a run outlives its inputs: `dlzero teach` rewrites
OUT in place when rerun with more positions (the batches of a resumed generation would change under
it), the original may be moved or deleted, and a run directory moved to another machine takes its
teacher data along. So a relative entry is relative to the run directory; an absolute one (set by
hand) is used as it is.

Teacher files never live under `data/`: its shards are self-play's, and held-out validation scores
the shards no generation has trained on as the "next" games (train.generation), which teacher
positions must never be.
"""

from __future__ import annotations

import contextlib
import filecmp
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from dlzero.config import Config
from dlzero.data.atomic import atomic_open
from dlzero.data.hcpe3 import sidecar_path
from dlzero.errors import ConfigError
from dlzero.rundir import RunDir
from dlzero.runfiles import TEACHER_DIR

log = logging.getLogger(__name__)

DATA_SUFFIXES = (".hcpe3", ".hcpe")


def teacher_path(rd: RunDir, entry: str) -> Path:
    """The file a `train.teacher_data` entry names (see the module docstring); a ConfigError if it is
    missing or inside the run's data/."""
    path = Path(entry) if Path(entry).is_absolute() else rd.root / entry
    if not path.is_file():
        raise ConfigError(f"train.teacher_data: {path} does not exist (a relative entry is relative to the run "
                          f"directory {rd.root})")
    if path.resolve().is_relative_to(rd.data_dir.resolve()):
        raise ConfigError(f"train.teacher_data: {path} is inside {rd.data_dir}, whose shards are self-play's "
                          "(they would be scored as held-out next games); keep teacher files elsewhere")
    return path


def _copy(src: Path, dst: Path) -> None:
    """`src` to `dst` atomically, and its sidecar after it (the sidecar commits the shard, as in data.hcpe3)."""
    if dst.is_file() and filecmp.cmp(src, dst, shallow=False) and (
            not sidecar_path(src).is_file() or sidecar_path(dst).is_file()):
        return  # copied by an earlier call that stopped before generation 0 was made
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sidecar_path(dst))  # describes other bytes
    with src.open("rb") as fin, atomic_open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    if sidecar_path(src).is_file():
        with sidecar_path(src).open("rb") as fin, atomic_open(sidecar_path(dst), "wb") as fout:
            shutil.copyfileobj(fin, fout)


def adopt_teacher_data(rd: RunDir, cfg: Config, sources: Sequence[str | Path]) -> tuple[Config, list[Path]]:
    """For `--init-from`: copy teacher data files into the run, list them in `train.teacher_data` (saved
    to the run's config.yaml) and return (that config, the copies to train generation 0 on).

    Nothing happens (and `sources` comes back as given) when the run already has a best model (the
    warm start is ignored then) or `sources` is not all .hcpe3/.hcpe files (a model file to start from).
    """
    paths = [Path(s) for s in sources]
    if rd.best() is not None or not paths or any(p.suffix not in DATA_SUFFIXES for p in paths):
        return cfg, paths
    names = [p.name for p in paths]
    if len(set(names)) < len(names):
        raise ConfigError(f"--init-from: two teacher files share a name ({', '.join(names)}); rename one "
                          f"(the run keeps them side by side in {rd.root / TEACHER_DIR})")
    folder = rd.root / TEACHER_DIR
    folder.mkdir(exist_ok=True)
    entries = list(cfg.train.teacher_data)
    copies = []
    for src in paths:
        if not src.is_file():
            raise ConfigError(f"--init-from: {src} does not exist")
        dst = folder / src.name
        _copy(src, dst)
        copies.append(dst)
        entry = f"{TEACHER_DIR}/{src.name}"
        if entry not in entries:
            entries.append(entry)
    cfg = replace(cfg, train=replace(cfg.train, teacher_data=entries))
    rd.save_config(cfg)
    log.info("teacher data kept in %s and listed in train.teacher_data (train.teacher_fraction %g of each batch)",
             folder, cfg.train.teacher_fraction)
    return cfg, copies
