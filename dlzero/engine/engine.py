"""Python API: `Engine.load(name).best_move(sfen)`, `search.playouts` playouts unless `playouts=N` says otherwise.

`name` is a model as every command names one (`dlzero.player_names`): a `.pt`/`.onnx` file, a run directory,
`default`, `network:NAME` or a shipped network's NAME."""

from __future__ import annotations

from pathlib import Path

from dlzero.config import Config, load_config
from dlzero.engine.layout import load_engine_model
from dlzero.engine.player import Analysis, Player
from dlzero.engine.shipped import require_model
from dlzero.engine.timeman import Limits
from dlzero.inference import Evaluator
from dlzero.position import parse_position


class Engine:
    """A loaded model plus a Player; positions are SFEN strings or `startpos moves ...`."""

    def __init__(self, evaluator: Evaluator, cfg: Config | None = None) -> None:
        self.cfg = cfg or Config()
        self.player = Player(evaluator, self.cfg)

    @classmethod
    def load(cls, name: str | Path, config: str | Path | Config | None = None,
             overrides: list[str] | tuple[str, ...] = ()) -> Engine:
        """Load the model `name` names (a file, a run directory, `default` or another shipped network, whose
        file is chosen for the inference settings); `config` is a YAML path or a Config (default: built-in)."""
        cfg = config if isinstance(config, Config) else load_config(config, overrides)
        return cls(load_engine_model(require_model(str(name), cfg).path, cfg), cfg)

    def analyze(self, position: str, playouts: int | None = None, limits: Limits | None = None) -> Analysis:
        """Search `position` and return the full analysis (best move, PV, win rate, visits) after `playouts`
        playouts (default `search.playouts`), or within `limits` (a USI `go`'s) when given."""
        self.player.set_position(parse_position(position))
        return self.player.think(limits or Limits(playouts=self.cfg.search.playouts if playouts is None else playouts))

    def best_move(self, position: str, playouts: int | None = None) -> str:
        """The move to play as a USI string (`resign` or `win` when that is the answer)."""
        return self.analyze(position, playouts).bestmove
