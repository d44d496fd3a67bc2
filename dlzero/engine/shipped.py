"""Which model file an engine loads: a file named, a shipped network named, or the default network.

`bestmove`, `analyze`, `review`, `match`, `Engine.load` and the USI engine (`ModelPath`) take a model as a file,
as a run directory (its best generation), as the name of a shipped network (`NAME` or `network:NAME`), as
`default`, or not at all; the last two mean the default network (dlzero.networks). The names are players'
names (`dlzero.player_names`, parsed once there); this module says which file each names. A network's file is
chosen for the inference settings (`model_role`) and checked against its manifest before it is loaded. With no
network in the package and no model named, there is nothing to load: callers keep asking for one, as before
networks shipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlzero.config import Config
from dlzero.cpu import native_int8
from dlzero.errors import ModelFileError, NetworkError
from dlzero.networks import (
    Network,
    check_file,
    default_network,
    find_network,
    load_networks,
    model_role,
    networks_dir,
)
from dlzero.player_names import MODEL_FORMS, MODEL_KINDS, PlayerName, parse_player


@dataclass(frozen=True)
class ModelChoice:
    """The model file to load and, when it is a shipped network's, that network and which of its files."""

    path: Path
    network: Network | None = None
    role: str = ""

    def label(self) -> str:
        """How logs and headers name the model: the network's name, else the file's."""
        return self.network.name if self.network is not None else self.path.name

    def note(self, choose: str) -> str:
        """The line that says a shipped network plays, and how to choose another (`choose`: '--model')."""
        assert self.network is not None, "note() is for shipped networks"
        return f"using the shipped network {self.network.describe()}, {self.role} file; {choose} to choose another"


def _int8_fast(cfg: Config) -> bool:
    """int8 pays here: a VNNI CPU, and the ONNX session would run on the CPU (not a GPU provider)."""
    from dlzero.engine.layout import engine_inference
    from dlzero.inference.onnx_backend import choose_providers

    return native_int8() and choose_providers(engine_inference(cfg).inference)[0] == "CPUExecutionProvider"


def network_choice(network: Network, cfg: Config) -> ModelChoice:
    """`network`'s file for `cfg`'s inference settings, checked against the manifest."""
    inference = cfg.inference
    passed = network.int8_gate is not None and network.int8_gate.passed
    fast = passed and inference.precision == "auto" and inference.backend != "torch" and _int8_fast(cfg)
    role = model_role(network, inference.backend, inference.precision, fast)
    return ModelChoice(check_file(network, role), network, role)


def run_best_choice(root: Path, cfg: Config) -> ModelChoice:
    """The best generation of the run directory `root` (`dlzero loop --run`): the int8 file the loop made for it
    where int8 pays here and the settings leave the choice open, else its `.pt` weights; so that `dlzero usi
    --model runs/NAME` plays what the loop has promoted so far."""
    from dlzero.rundir import RunDir

    weights = RunDir.open(root).best_model_path()
    int8 = weights.with_suffix(".int8.onnx")
    inference = cfg.inference
    if int8.is_file() and inference.precision == "auto" and inference.backend != "torch" and _int8_fast(cfg):
        return ModelChoice(int8)
    return ModelChoice(weights)


def resolve_model(spec: str | PlayerName | None, cfg: Config) -> ModelChoice | None:
    """What `spec` (a `--model` value or a player name, `dlzero.player_names`) names; None: no spec and no
    network ships. A name of another kind of player (random, usi:..., ...) is a ModelFileError."""
    if spec is None:
        network = default_network(load_networks())
        return None if network is None else network_choice(network, cfg)
    try:
        name = spec if isinstance(spec, PlayerName) else parse_player(spec)
    except ValueError as exc:
        raise ModelFileError(str(exc)) from None
    if name.kind not in MODEL_KINDS:
        raise ModelFileError(f"'{name.canonical()}' is a {name.kind} player, not a model (one of: {MODEL_FORMS})")
    if name.kind == "run":
        return run_best_choice(Path(name.value), cfg)
    if name.kind == "model":
        return ModelChoice(Path(name.value))
    networks = load_networks()
    if name.kind == "default":
        network = default_network(networks)
        if network is None:
            raise NetworkError(f"'default' names the default network, but none is in {networks_dir()}")
    elif name.written == name.value and name.value not in {n.name for n in networks}:  # a bare word: both readings
        raise ModelFileError(f"'{name.value}' is neither a model file (.pt or .onnx) nor a network "
                             f"({', '.join(n.name for n in networks) or 'none ships'})")
    else:
        network = find_network(name.value, networks)
    return network_choice(network, cfg)


def require_model(spec: str | PlayerName | None, cfg: Config, flag: str = "--model") -> ModelChoice:
    """`resolve_model`, with an error asking for `flag` where there is nothing to load."""
    choice = resolve_model(spec, cfg)
    if choice is None:
        raise ModelFileError(f"no model: give {flag} FILE (.pt or .onnx); no network ships in {networks_dir()}")
    return choice
