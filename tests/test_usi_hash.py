"""USI_Hash bounds the search tree's memory; USI_Hash, USI_Ponder and USI_OwnBook are accepted
quietly (issue 10, defect 9). Driven as a GUI would: the engine in a subprocess, USI on its pipes."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

from dlzero.config import SearchConfig
from dlzero.engine.layout import usable_cores
from dlzero.inference import NullEvaluator
from dlzero.position import parse_position
from dlzero.search import Search, Tree

MIDGAME = "sfen ln1g3nl/1r1sk1gs1/p1pppp1pp/1p4p2/9/2P4P1/PP1PPPP1P/1SG2S1R1/LN2KG1NL b Bb 21"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    from dlzero.config import ModelConfig
    from dlzero.model import new_model, save_model

    path = tmp_path_factory.mktemp("usi-hash") / "m.pt"
    save_model(new_model(ModelConfig(blocks=1, channels=16), seed=0), path)
    return str(path)


class Gui:
    """The engine process with a reader thread, as a GUI runs it."""

    def __init__(self, model: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "dlzero.usi", "--model", model, "--threads", "1"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def until(self, predicate, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            self.seen.append(line)
            if predicate(line):
                return line

    def close(self) -> None:
        self.send("quit")
        self.proc.wait(timeout=30)


def test_gui_options_are_accepted_and_a_small_hash_bounds_the_tree(model):
    gui = Gui(model)
    try:
        gui.send("usi")
        gui.until(lambda line: line == "usiok")
        assert any(line.startswith("option name USI_Hash type spin") for line in gui.seen)
        for option in ("USI_Hash value 1", "USI_Ponder value true", "USI_OwnBook value false"):
            gui.send(f"setoption name {option}")
        gui.send("isready")
        gui.until(lambda line: line == "readyok")
        gui.send("position startpos")
        gui.send("go infinite")
        note = gui.until(lambda line: "memory budget" in line)
        assert note.startswith("info string ") and "hash 1 MiB" in note
        time.sleep(0.5)  # the engine keeps waiting for `stop`: no bestmove yet, no second note
        gui.send("stop")
        gui.until(lambda line: line.startswith("bestmove"))
        gui.close()
        assert not [line for line in gui.seen if "error" in line or "unknown" in line]
        assert sum("memory budget" in line for line in gui.seen) == 1
        nodes = [int(line.split(" nodes ")[1].split()[0]) for line in gui.seen if " nodes " in line]
        # 1 MiB at about 2 KB a node at the start position, plus a batch of leaves for each batch in flight (their
        # expansions are counted when they come back; the engine's layout keeps one per core going) and the
        # one being collected
        streams = usable_cores()
        assert 0 < max(nodes) < 1 + (1 << 20) // 1900 + 64 * (streams + 1)
    finally:
        if gui.proc.poll() is None:
            gui.proc.kill()


def test_the_memory_estimate_tracks_allocated_memory():
    tree = Tree(parse_position(MIDGAME))
    search = Search(NullEvaluator(), SearchConfig(root_mate_depth=0, leaf_mate_depth=0, hash_mb=0))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        search.run([tree], 3000, leaves_per_tree=64)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert tree.nodes >= 3000
    assert 0.85 < used / tree.memory < 1.15
    assert tree.root.size() == (tree.nodes, tree.memory)  # what tree reuse recounts agrees


def test_hash_budget_stops_the_search_and_zero_means_none():
    cfg = SearchConfig(root_mate_depth=0, leaf_mate_depth=0, hash_mb=1)
    tree = Tree(parse_position(MIDGAME))
    search = Search(NullEvaluator(), cfg)
    search.run([tree], 100_000, leaves_per_tree=8)
    assert search.tree_full(tree) and tree.memory < (1 << 20) + 2 * 8 * 4000  # two batches in flight at most
    assert tree.playouts_done < 1000
    unbounded = Search(NullEvaluator(), SearchConfig(root_mate_depth=0, leaf_mate_depth=0, hash_mb=0))
    assert not unbounded.tree_full(tree)
