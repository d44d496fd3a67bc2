"""Training and inference see the same 100 planes for the same position and history (issue 10,
defects 3 and 8).

Real self-play games (the project's own `play_selfplay_games`, a tiny random model, openings from a file,
one of them with a repetition in it) are written as an hcpe3 shard, read back and turned into
training batches. Every training position's planes must equal, plane for plane, what the inference
encoder gives on a board that replayed the game, and what the search actually sent to the network.
"""

from __future__ import annotations

import cshogi
import numpy as np
import pytest
from conftest import TINY_MODEL_SETS

from dlzero.config import load_config
from dlzero.data.hcpe3 import ShardWriter, read_hcpe3
from dlzero.encoding import encode_position
from dlzero.encoding.features import PLANE_LAST_TO, PLANE_PROGRESS, PLANE_REPETITION
from dlzero.inference import load_model
from dlzero.inference.base import Evaluator
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.selfplay.games import FinishedRecord, play_selfplay_games
from dlzero.train.buffer import BatchDecoder
from dlzero.train.dataset import buffer_from_games

# the king steps out and back twice: the final position is the start position's third occurrence
REPEATING = "startpos moves 5i5h 5a5b 5h5i 5b5a 5i5h 5a5b 5h5i 5b5a"
PLAIN = "startpos moves 7g7f 3c3d 2g2f 8c8d"


class Recording(Evaluator):
    """Wraps an evaluator and keeps every input plane set it evaluated."""

    backend = "recording"

    def __init__(self, inner: Evaluator) -> None:
        super().__init__(inner.max_batch)
        self.inner = inner
        self.seen: set[bytes] = set()

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.seen.update(p.tobytes() for p in planes)
        return self.inner.evaluate(planes)


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parity")
    (tmp / "openings.txt").write_text(f"{REPEATING}\n{PLAIN}\n")
    cfg = load_config(None, [
        *TINY_MODEL_SETS,
        "inference.backend=torch", "inference.optimize=none", "inference.threads=1",
        "search.root_mate_depth=0", f"selfplay.openings={tmp / 'openings.txt'}",
        "selfplay.playouts=8", "selfplay.full_search_prob=1.0", "selfplay.random_plies=6",
        "selfplay.max_moves=40", "selfplay.games_in_parallel=4", "selfplay.resign_threshold=0",
    ])
    path = save_model(new_model(cfg.model, seed=4), tmp / "m.pt", ModelMetadata())
    ev = Recording(load_model(path, cfg.inference))
    done: list[FinishedRecord] = []
    play_selfplay_games(ev, cfg, 6, done.append, np.random.default_rng(7))
    with ShardWriter(tmp / "data", "t", 100) as writer:
        for game in done:
            writer.add(game.record)
    return read_hcpe3(writer.written[0]), ev.seen


def _inference_planes(games) -> list[np.ndarray]:
    """The inference encoder on a board replaying each game, at each position with a policy target."""
    out = []
    for game in games:
        board = game.start_board()
        for move in game.moves:
            if move.is_target:
                out.append(encode_position(board))
            board.push_move16(move.move16)
    return out


def test_training_planes_equal_inference_planes(games):
    records, evaluated = games
    buf = buffer_from_games(records, 0.0)
    batch = BatchDecoder(len(buf)).decode(buf, np.arange(len(buf)))
    training = batch.planes.numpy()
    expected = _inference_planes(records)
    assert len(training) == len(expected) > 50
    for i, want in enumerate(expected):
        for plane in range(100):
            assert np.array_equal(training[i, plane], want[plane]), f"position {i}, plane {plane}"
        assert want.tobytes() in evaluated  # and it is what the search fed the network

    # the checks above cover the planes that used to differ
    reps = training[:, PLANE_REPETITION, 0, 0]
    assert (reps == 1).any()  # a game from the repeating opening: its first position occurred twice
    first = [i for i in range(len(training)) if training[i, PLANE_PROGRESS, 0, 0] == pytest.approx(8 / 512)]
    assert first and all(training[i, PLANE_LAST_TO].sum() == 1 for i in first)  # ply 8, after the opening


def test_openings_are_recorded_from_the_start_of_the_line(games):
    records, _ = games
    for game in records:
        openings = [REPEATING.split()[2:], PLAIN.split()[2:]]
        board = game.start_board()
        assert board.sfen() == "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
        head = []
        for move in game.moves[:8]:
            head.append(cshogi.move_to_usi(board.move_from_move16(move.move16)))
            board.push_move16(move.move16)
        assert any(head[: len(line)] == line for line in openings)
        n = len(next(line for line in openings if head[: len(line)] == line))
        assert not any(m.is_target for m in game.moves[:n]) and all(m.is_target for m in game.moves[n:])
