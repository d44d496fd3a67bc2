"""How good are self-play's policy targets? Agreement with a stronger engine's moves (a benchmark, not a test).

    python scripts/target_quality.py [--onnx NET.onnx] [--positions 1024] [--playouts 2,64,256,800,1600] \
        [--teacher /path/to/miniosl/pretrained/eval.onnx] [--csv out.csv]

The loop learns its policy from the visits of its own searches. Those targets can only make the network
stronger where the search picks better moves than the network's raw policy, and they can only take it past its
teacher where they pick better moves than the teacher's policy did. This measures both on the positions of
configs/validation/fairy-stockfish-n20k.hcpe3 (Fairy-Stockfish 11.1, classical evaluation, 20,000 nodes a move,
games from the gate suite): the share of positions where each source plays Fairy-Stockfish's move. Sources: the
network's search at each `--playouts` (tiny's search settings, as self-play runs them, without root noise; 2
playouts play the raw policy's favourite move), and with `--teacher` miniosl's network, the teacher of the shipped
networks, by its raw policy. The same positions for every source, so differences are paired.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cshogi  # noqa: E402
import numpy as np  # noqa: E402

from dlzero.config import InferenceConfig, load_config  # noqa: E402
from dlzero.cpu import cpu_flags  # noqa: E402
from dlzero.data.hcpe3 import read_hcpe3  # noqa: E402
from dlzero.inference.onnx_backend import OnnxEvaluator  # noqa: E402
from dlzero.networks import default_network, load_networks  # noqa: E402
from dlzero.search import Search, Tree, chosen_index  # noqa: E402

DATA = ROOT / "configs" / "validation" / "fairy-stockfish-n20k.hcpe3"


def labelled_positions(path: Path, count: int) -> list[tuple[cshogi.Board, str, int]]:
    """`count` positions spread evenly over the file's labelled plies: (board with its history, its USI
    `position` text, the reference engine's move as move16)."""
    out = []
    for game in read_hcpe3(path):
        board = game.start_board()
        start, moves = board.sfen(), []
        for ply in game.moves:
            if ply.is_target and not board.is_game_over():
                best = int(ply.candidates[np.argmax(ply.candidates[:, 1]), 0])
                text = f"sfen {start}" + (f" moves {' '.join(moves)}" if moves else "")
                out.append((board.copy(), text, best))
            moves.append(cshogi.move_to_usi(board.move_from_move16(ply.move16)))
            board.push_move16(ply.move16)
    picks = np.linspace(0, len(out) - 1, min(count, len(out))).round().astype(int)
    return [out[i] for i in picks]


def search_agreement(onnx: Path, positions: list, playouts: int) -> float:
    """The share of `positions` where the network's search at `playouts` plays the reference move."""
    search_cfg = replace(load_config(ROOT / "configs" / "tiny.yaml").search, pipeline=False, leaves_per_tree=1,
                         mate_guard_nodes=0)
    evaluator = OnnxEvaluator(onnx.read_bytes(), InferenceConfig(device="cpu", threads=1), source=str(onnx))
    search = Search(evaluator, search_cfg, np.random.default_rng(0))
    try:
        trees = [Tree(board.copy()) for board, _, _ in positions]
        search.run(trees, playouts, leaves_per_tree=1)
        return float(np.mean([cshogi.move16(int(tree.root.moves[chosen_index(tree)])) == best
                              for tree, (_, _, best) in zip(trees, positions, strict=True)]))
    finally:
        search.close()
        evaluator.close()


def teacher_agreement(model: str, positions: list) -> float:
    """The share of `positions` where miniosl's raw policy (its most probable move) is the reference move."""
    from dlzero.inference.miniosl import MinioslNetwork

    net = MinioslNetwork(model)
    hits: list[bool] = []
    try:
        for i in range(0, len(positions), 64):
            chunk = positions[i:i + 64]
            verdicts = net.evaluate([(text, board) for board, text, _ in chunk])
            hits += [v.best() == best for v, (_, _, best) in zip(verdicts, chunk, strict=True)]
    finally:
        net.close()
    return float(np.mean(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--onnx", type=Path, help="the network (default: the default network's int8 file)")
    parser.add_argument("--positions", type=int, default=1024)
    parser.add_argument("--playouts", default="2,64,256,800,1600")
    parser.add_argument("--teacher", help="miniosl's eval.onnx (0.1.9: from its wheel) to score its raw policy")
    parser.add_argument("--csv", type=Path, help="append one row a source to this CSV file")
    args = parser.parse_args()
    onnx = args.onnx
    if onnx is None:
        net = default_network(load_networks())
        if net is None or "int8" not in net.files:
            parser.error("no default network with an int8 file: give --onnx")
        onnx = net.files["int8"].path
    positions = labelled_positions(DATA, args.positions)
    print(f"{len(positions)} positions of {DATA.name}; cpu flags: {cpu_flags()}", flush=True)
    se = 1.96 * (0.25 / len(positions)) ** 0.5
    rows = []
    for playouts in [int(p) for p in args.playouts.split(",")]:
        t0 = time.perf_counter()
        share = search_agreement(onnx, positions, playouts)
        rows.append((f"{onnx.name} search", playouts, share))
        print(f"{onnx.name}, search at {playouts:>5} playouts: plays Fairy-Stockfish's move on {share:.1%} "
              f"(+-{se:.1%}; {time.perf_counter() - t0:.0f} s)", flush=True)
    if args.teacher:
        share = teacher_agreement(args.teacher, positions)
        rows.append(("miniosl raw policy", 0, share))
        print(f"miniosl ({args.teacher}), raw policy: plays Fairy-Stockfish's move on {share:.1%}", flush=True)
    if args.csv:
        new = not args.csv.exists()
        with args.csv.open("a", newline="") as f:
            out = csv.writer(f)
            if new:
                out.writerow(["source", "playouts", "positions", "agreement", "cpu_flags"])
            out.writerows([(s, p, len(positions), f"{a:.4f}", cpu_flags()) for s, p, a in rows])


if __name__ == "__main__":
    main()
