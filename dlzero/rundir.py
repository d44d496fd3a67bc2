"""The run directory: the only place where roles (self-play, training, gating) meet.

```
runs/NAME/run.json          format version, created, dlzero version
runs/NAME/config.yaml       resolved config
runs/NAME/loop.json         where `dlzero loop` resumes
runs/NAME/selfplay_state.json  the resign threshold self-play calibrates
runs/NAME/models/           gen-0000.pt ... (and their .int8.onnx); best.json names the current best
runs/NAME/data/gen-XXXX/    hcpe3 shards from self-play with that generation's model
runs/NAME/relabelled/gen-XXXX/  the same shards relabelled by a teacher (train.relabel), which training reads
runs/NAME/train/            trainer checkpoint (resume state), seen-shards.json, shard-counts.json
runs/NAME/games/            CSA records of gating games
runs/NAME/rating/           games of `dlzero rate` against the anchors
runs/NAME/locks/            one lock file per part with a single writer (dlzero.runlock)
runs/NAME/metrics/          metrics.csv, ratings.csv, elo.csv, validation.csv, timeline.csv, progress.png,
                            TensorBoard events (tb/)
```

The names (and the CSV columns) are constants of `dlzero.runfiles`; `RunDir` joins them into paths.

Every write here is atomic, so any process may be killed at any moment and the folder stays
consistent; roles can run in one process, many processes, or on many machines sharing it.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlzero.config import Config, config_from_dict, dump_config, read_yaml
from dlzero.data.atomic import atomic_write_text
from dlzero.data.hcpe3 import is_listed, shard_glob
from dlzero.data.jsonfile import read_json
from dlzero.errors import DataError, RunDirError
from dlzero.runfiles import (
    BEST_JSON,
    CONFIG_YAML,
    DATA_DIR,
    ELO_CSV,
    GAMES_DIR,
    LOOP_STATE,
    METRICS_DIR,
    MODELS_DIR,
    PROGRESS_PNG,
    RATING_DIR,
    RATINGS_CSV,
    RELABELLED_DIR,
    RUN_INFO,
    SELFPLAY_STATE,
    TIMELINE_CSV,
    TRAIN_CSV,
    TRAIN_DIR,
    VALIDATION_CSV,
)
from dlzero.version import __version__

RUN_FORMAT_VERSION = 1
_GEN_RE = re.compile(r"gen-(\d{4,})\.pt$")
GENERATION_GLOB = "gen-*"


def generation_name(generation: int) -> str:
    """The name of a generation's model, ONNX file and data folder: `gen-0003`."""
    return f"gen-{generation:04d}"


@dataclass
class BestInfo:
    """What best.json says: the generation now used by self-play, and how it got there."""

    generation: int
    model: str  # path relative to the run root
    promoted_at: str
    reason: str = ""


class RunDir:
    """Paths and atomic bookkeeping of one training run."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.models_dir = self.root / MODELS_DIR
        self.data_dir = self.root / DATA_DIR
        self.relabelled_dir = self.root / RELABELLED_DIR  # made by the first relabelling, not here
        self.train_dir = self.root / TRAIN_DIR
        self.games_dir = self.root / GAMES_DIR
        self.rating_dir = self.root / RATING_DIR  # made by the first rating, not here
        self.metrics_dir = self.root / METRICS_DIR
        self.config_path = self.root / CONFIG_YAML
        self.best_path = self.models_dir / BEST_JSON
        self.info_path = self.root / RUN_INFO
        self.loop_state_path = self.root / LOOP_STATE
        self.selfplay_state_path = self.root / SELFPLAY_STATE  # resign threshold: self-play's parent writes it
        self.train_csv = self.metrics_dir / TRAIN_CSV
        self.ratings_csv = self.metrics_dir / RATINGS_CSV
        self.elo_csv = self.metrics_dir / ELO_CSV
        self.validation_csv = self.metrics_dir / VALIDATION_CSV
        self.timeline_csv = self.metrics_dir / TIMELINE_CSV
        self.progress_png = self.metrics_dir / PROGRESS_PNG

    # -- creation and opening -------------------------------------------------------------------
    @classmethod
    def create(cls, root: str | Path, cfg: Config) -> RunDir:
        """Make a new run (folders, config.yaml, run.json). An existing run is opened instead."""
        rd = cls(root)
        if rd.info_path.exists():
            return cls.open(root)
        for d in (rd.models_dir, rd.data_dir, rd.train_dir, rd.games_dir, rd.metrics_dir):
            d.mkdir(parents=True, exist_ok=True)
        atomic_write_text(rd.config_path, dump_config(cfg))
        info = {"format_version": RUN_FORMAT_VERSION,
                "created": _now(),
                "dlzero_version": __version__}
        atomic_write_text(rd.info_path, json.dumps(info, indent=2) + "\n")
        return rd

    @classmethod
    def open(cls, root: str | Path) -> RunDir:
        """Open an existing run; refuses one written by a newer dlzero (nothing is touched)."""
        rd = cls(root)
        if not rd.info_path.is_file():
            raise RunDirError(f"'{rd.root}' is not a dlzero run directory (no run.json); "
                              "start one with `dlzero selfplay --run` or `dlzero loop --run`")
        info = _read_json(rd.info_path)
        if not isinstance(info, dict):
            raise RunDirError(f"{rd.info_path}: not what run.json holds (an object with format_version)")
        version = info.get("format_version")
        if not isinstance(version, int) or version > RUN_FORMAT_VERSION:
            raise RunDirError(
                f"{rd.root} was written by a newer dlzero (run format {version}, this one reads up to "
                f"{RUN_FORMAT_VERSION}); upgrade dlzero. Nothing was changed.")
        for d in (rd.models_dir, rd.data_dir, rd.train_dir, rd.games_dir, rd.metrics_dir):
            d.mkdir(parents=True, exist_ok=True)
        return rd

    def config(self) -> Config:
        """The run's stored config."""
        return config_from_dict(read_yaml(self.config_path))

    def save_config(self, cfg: Config) -> None:
        """Replace the stored config (e.g. after CLI overrides), atomically."""
        atomic_write_text(self.config_path, dump_config(cfg))

    # -- models ---------------------------------------------------------------------------------
    def model_path(self, generation: int) -> Path:
        return self.models_dir / f"{generation_name(generation)}.pt"

    def generations(self) -> list[int]:
        """Generations that have a model file, ascending."""
        return sorted(int(m.group(1)) for p in self.models_dir.glob(f"{GENERATION_GLOB}.pt")
                      if (m := _GEN_RE.search(p.name)))

    def latest_generation(self) -> int | None:
        gens = self.generations()
        return gens[-1] if gens else None

    def best(self) -> BestInfo | None:
        """The current best model per best.json, or None when no model was promoted yet."""
        if not self.best_path.is_file():
            return None
        data = _read_json(self.best_path)
        sound = (isinstance(data, dict) and set(data) <= set(BestInfo.__dataclass_fields__)
                 and type(data.get("generation")) is int and data["generation"] >= 0
                 and isinstance(data.get("model"), str) and data["model"]
                 and all(isinstance(data.get(k, ""), str) for k in ("promoted_at", "reason")))
        if not sound:
            raise RunDirError(f"{self.best_path}: not what best.json holds "
                              '({"generation": N >= 0, "model": "models/gen-NNNN.pt", "promoted_at": "...", '
                              '"reason": "..."})')
        return BestInfo(**{"promoted_at": "", **data})

    def best_model_path(self) -> Path:
        best = self.best()
        if best is None:
            raise RunDirError(f"{self.root}: no best model yet (models/best.json is missing)")
        return self.root / best.model

    def set_best(self, generation: int, reason: str = "") -> BestInfo:
        """Point best.json at `generation` (atomic: a crash leaves the old best)."""
        path = self.model_path(generation)
        if not path.is_file():
            raise RunDirError(f"cannot promote generation {generation}: {path} does not exist")
        info = BestInfo(generation=generation, model=str(path.relative_to(self.root)),
                        promoted_at=_now(), reason=reason)
        atomic_write_text(self.best_path, json.dumps(vars(info), indent=2) + "\n")
        return info

    # -- data -----------------------------------------------------------------------------------
    def data_dir_for(self, generation: int) -> Path:
        d = self.data_dir / generation_name(generation)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def shards(self, prefix: str | None = None) -> list[Path]:
        """Every complete hcpe3 shard of the run (only `prefix`'s, if given), newest first (temp files
        are never listed, nor shards whose sidecar was never written: see dlzero.data.hcpe3)."""
        pattern = f"{GENERATION_GLOB}/{shard_glob(prefix)}"
        shards = [p for p in self.data_dir.glob(pattern) if is_listed(p)]
        return sorted(shards, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)

    def relabelled(self, shard: Path) -> Path:
        """Where `train.relabel` keeps the teacher's relabelling of self-play shard `shard` (under data/)."""
        return self.relabelled_dir / shard.relative_to(self.data_dir)

    def read_json(self, name: str, default: Any = None) -> Any:
        """The JSON value of the run's file `name` (bounded and finite: `dlzero.data.jsonfile`), `default`
        when there is none; a damaged file is a RunDirError naming it (the caller checks the schema)."""
        path = self.root / name
        if not path.is_file():
            return default
        return _read_json(path)

    def write_json(self, name: str, data: Any) -> None:
        atomic_write_text(self.root / name, json.dumps(data, indent=2) + "\n")


def _read_json(path: Path) -> Any:
    """`dlzero.data.jsonfile.read_json` with every failure one RunDirError that names the file."""
    try:
        return read_json(path)
    except DataError as exc:
        raise RunDirError(str(exc)) from None
    except OSError as exc:
        raise RunDirError(f"{path}: unreadable ({exc.strerror})") from None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

