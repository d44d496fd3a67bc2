"""Training: replay window over self-play shards (or hcpe files) -> Trainer (AMP, EMA, DDP) -> models.

Entry points: `train_generation` (one generation of the loop, on a run directory) and
`train_supervised` (hcpe files to a model file). Modules: `buffer` (compact positions, batch
decoding), `dataset` (replay window, hcpe), `sampler`, `trainer`, `checkpoint`, `metrics`,
`distributed`, `generation`, `supervised`, `holdout` (supervised mode's held-out games), `teacher_files` (a
run's teacher data).
"""

from dlzero.train.generation import TrainResult, train_generation
from dlzero.train.supervised import SupervisedResult, train_supervised

__all__ = ["SupervisedResult", "TrainResult", "train_generation", "train_supervised"]
