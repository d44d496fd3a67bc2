"""The engine's layout of its cores (`dlzero.engine.layout`): threads per network call, calls in flight."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dlzero.config import Config, InferenceConfig, SearchConfig
from dlzero.engine import Engine
from dlzero.engine.layout import engine_config, engine_inference, engine_streams, usable_cores
from dlzero.engine.player import Player
from dlzero.inference import NullEvaluator, OnnxEvaluator
from dlzero.model.checkpoint import ModelMetadata, new_model, save_model
from dlzero.model.export import onnx_bytes


class _OnGpu(NullEvaluator):
    """A null network that says it runs on a GPU (no GPU here: only the layout's reading of it is tested)."""

    @property
    def on_gpu(self) -> bool:
        return True


def _cfg(threads: int = 0, streams: int = 0) -> Config:
    return Config(inference=InferenceConfig(threads=threads), search=SearchConfig(eval_streams=streams))


def _threads(n: int) -> NullEvaluator:
    ev = NullEvaluator()
    ev.threads = n
    return ev


@pytest.mark.parametrize("cores,threads,want", [(2, 1, 2), (2, 2, 1), (2, 0, 1), (16, 4, 4), (16, 1, 16),
                                                 (4, 8, 1), (1, 1, 1), (6, 4, 1)])
def test_cpu_streams_are_one_per_call_that_fits(cores, threads, want):
    assert engine_streams(_cfg(), _threads(threads), cores=cores) == want


def test_set_streams_and_gpus():
    assert engine_streams(_cfg(streams=5), _threads(1), cores=2) == 5  # as configured, whatever the machine
    assert engine_streams(_cfg(), _OnGpu(), cores=64) == 2
    assert engine_streams(_cfg(streams=1), _OnGpu(), cores=64) == 1


def test_engine_inference_gives_one_thread_a_call_only_when_both_are_automatic(monkeypatch):
    monkeypatch.setattr("dlzero.engine.layout.usable_cores", lambda: 4)
    assert engine_inference(_cfg()).inference.threads == 1
    assert engine_inference(_cfg(threads=3)).inference.threads == 3
    assert engine_inference(_cfg(streams=2)).inference.threads == 0  # a set stream count keeps the library default
    assert engine_inference(_cfg(threads=3)) == _cfg(threads=3)
    # issue 52: more threads than cores made a 1 s byoyomi move take 4-6 s (USI Threads 256 on 2 cores)
    assert engine_inference(_cfg(threads=256)).inference.threads == 4


def test_usable_cores_follow_the_affinity():
    import os

    assert usable_cores() == len(os.sched_getaffinity(0)) >= 1


def test_evaluators_report_their_threads_and_device():
    """The layout reads the real backends' own account of a call's threads and device."""
    model = new_model(Config().model, seed=0).eval()
    ev = OnnxEvaluator(onnx_bytes(model, ModelMetadata()), InferenceConfig(backend="onnx", device="cpu", threads=1))
    assert ev.threads == 1 and not ev.on_gpu
    assert engine_streams(_cfg(), ev, cores=2) == 2
    ev.close()
    assert OnnxEvaluator(onnx_bytes(model, ModelMetadata()), InferenceConfig(backend="onnx", device="cpu")).threads == 0


def test_player_and_engine_search_with_the_laid_out_streams(tmp_path):
    """One game's search runs the automatic layout; the Player keeps the config it was given (USI compares it)."""
    cfg = _cfg()
    player = Player(_threads(1), cfg)
    assert player.cfg is cfg and player.cfg.search.eval_streams == 0
    assert player.search.cfg.eval_streams == usable_cores()
    assert engine_config(cfg, _threads(1)).search.eval_streams == usable_cores()
    path = tmp_path / "m.pt"
    save_model(new_model(Config().model, seed=0).eval(), path)
    engine = Engine.load(path, dataclasses.replace(cfg, inference=InferenceConfig(backend="onnx", device="cpu")))
    assert engine.player.evaluator.threads == 1
    assert engine.player.search.cfg.eval_streams == usable_cores()
    move = engine.best_move("startpos", playouts=64)  # a stream of batches per core finds a move
    assert move != "resign"


def test_searches_the_engine_does_not_lay_out_run_one_stream():
    """Self-play and gating pass `eval_streams: 0` straight to Search: one batch in flight, not none."""
    import threading

    from dlzero.position import parse_position
    from dlzero.search import Search, Tree

    calls, peak, lock = [0], [0], threading.Lock()

    class Counting(NullEvaluator):
        backend = "counting"  # not "null": the search pipelines it

        def _run(self, planes):
            with lock:
                calls[0] += 1
                peak[0] = max(peak[0], calls[0])
            try:
                return super()._run(planes)
            finally:
                with lock:
                    calls[0] -= 1

    search = Search(Counting(), SearchConfig(eval_streams=0, root_mate_depth=0, leaf_mate_depth=0))
    trees = [Tree(parse_position("startpos")) for _ in range(8)]
    search.run(trees, 40, leaves_per_tree=1)
    search.close()
    assert all(t.playouts_done == 40 for t in trees) and peak[0] == 1
    assert np.all([t.root.visits >= 40 for t in trees])
