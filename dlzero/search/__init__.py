"""PUCT search over many trees with batched leaf evaluation, and readers of the result."""

from dlzero.search.mcts import Search, SearchStats, softmax_priors, split_leaves
from dlzero.search.node import Node
from dlzero.search.result import (
    MoveStat,
    best_index,
    chosen_index,
    cp_to_winrate,
    mate_distance,
    move_stats,
    principal_variation,
    root_winrate,
    winrate_to_cp,
)
from dlzero.search.rules import find_mate, leaf_result
from dlzero.search.tree import Tree

__all__ = [
    "MoveStat", "Node", "Search", "SearchStats", "Tree", "best_index", "chosen_index", "cp_to_winrate", "find_mate",
    "leaf_result", "mate_distance", "move_stats", "principal_variation", "root_winrate", "softmax_priors",
    "split_leaves", "winrate_to_cp",
]
