"""What a run's files are called and which columns its CSV logs hold (the layout is in `dlzero.rundir`).

Every writer and reader of a run file takes its name and columns from here, so a renamed file or
an added column is one edit that every role sees. Paths come from `RunDir`'s attributes, which
join these names; a module that gets only a folder (the trainer's log gets `metrics/`) joins the
name itself. Nothing here touches the disk, so any layer may import it.
"""

from __future__ import annotations

import math

# -- the run's root
RUN_INFO = "run.json"  # format version, created, dlzero version
CONFIG_YAML = "config.yaml"  # the run's one config (see dlzero.commands.common.run_from_args)
LOOP_STATE = "loop.json"  # where `dlzero loop` resumes (dlzero.loop.LoopState)
SELFPLAY_STATE = "selfplay_state.json"  # resign threshold: self-play's parent writes it, workers read it

# -- folders of the root
MODELS_DIR = "models"
DATA_DIR = "data"
TRAIN_DIR = "train"
GAMES_DIR = "games"
RATING_DIR = "rating"
LOCKS_DIR = "locks"
METRICS_DIR = "metrics"
TEACHER_DIR = "teacher"  # the run's copies of its teacher files (dlzero.train.teacher_files)
RELABELLED_DIR = "relabelled"  # self-play shards relabelled by a teacher (train.relabel: dlzero.teacher.relabel_run)

# -- models/
BEST_JSON = "best.json"

# -- train/
CHECKPOINT_NAME = "checkpoint.pt"  # the trainer's resume state
SEEN_SHARDS = "seen-shards.json"  # shards some generation's window was planned over
SHARD_COUNTS = "shard-counts.json"  # positions per shard, so a window is planned without reading them

# -- metrics/
TRAIN_CSV = "metrics.csv"  # training losses per logged step (dlzero.train.meters)
RATINGS_CSV = "ratings.csv"  # one row per gate match (dlzero.gating.promotion)
ELO_CSV = "elo.csv"  # anchored ratings of the last fit (dlzero.gating.rating)
VALIDATION_CSV = "validation.csv"  # held-out figures of every model (dlzero.train.validation)
TIMELINE_CSV = "timeline.csv"  # where the loop's time went (dlzero.progress.timeline)
PROGRESS_PNG = "progress.png"  # the progress plot (dlzero.progress.plots)
TENSORBOARD_DIR = "tb"  # TensorBoard events of training and validation

# -- columns of the CSV logs, in file order
TRAIN_COLUMNS = ("step", "generation", "samples", "policy_loss", "value_loss", "policy_acc", "value_acc", "lr",
                 "samples_per_s", "reply_loss")
RATINGS_COLUMNS = ("generation", "opponent", "games", "wins", "draws", "losses", "score", "elo", "elo_low",
                   "elo_high", "llr", "decision", "promoted", "timestamp")
# elo.csv: `elo` is relative to the player `relative_to` (random where connected to it) with `prior_draws`
# virtual draws per pairing, and empty for a player of no informative pairing; wins, draws and losses count
# all its games, as `games` does. Files written before the last five columns existed read as random = 0
# with the prior not recorded, so readers require only ELO_REQUIRED.
ELO_COLUMNS = ("player", "generation", "elo", "elo_low", "elo_high", "games", "anchor", "wall_seconds",
               "relative_to", "prior_draws", "wins", "draws", "losses")
ELO_REQUIRED = ELO_COLUMNS[:8]
VALIDATION_FIGURES = ("policy_loss", "policy_acc", "value_loss", "value_acc")
VALIDATION_COLUMNS = ("time", "step", "model", "set", "data", "games", "positions", *VALIDATION_FIGURES)
TIMELINE_COLUMNS = ("phase", "generation", "start", "seconds")


def csv_number(text: str | None) -> float | None:
    """A numeric cell of a run's CSV log: None when empty or `nan` (what the writers put where a figure does
    not exist), a ValueError for anything else that is not a finite number (text, `inf`, `1e400`). Every
    reader of these logs takes its numbers through here, so one edited or damaged cell can never carry an
    infinity into a chart, a plot or the dashboard's JSON (which has no infinity)."""
    if text is None or not text.strip():
        return None
    value = float(text)  # ValueError for text
    if math.isinf(value):
        raise ValueError(f"{text.strip()[:20]!r} is not a finite number")
    return None if math.isnan(value) else value
