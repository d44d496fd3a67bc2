"""Which model file an engine loads: a file named, a shipped network named, or the default network.

`bestmove`, `analyze`, `review`, `match` and the USI engine (`ModelPath`) take a model as a file, as a run
directory (its best generation), as the name of a shipped network (`NAME` or `network:NAME`), as `default`, or
not at all; the last two mean the default
network (dlzero.networks). A network's file is chosen for the inference settings (`model_role`) and checked
against its manifest before it is loaded. With no network in the package and no model named, there is nothing
to load: callers keep asking for one, as before networks shipped.
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

NETWORK_PREFIX = "network:"
DEFAULT = "default"
MODEL_SUFFIXES = (".pt", ".onnx")


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


def _is_file_spec(spec: str) -> bool:
    """Whether `spec` names a model file rather than a network: it exists, ends like one, or has a folder."""
    p = Path(spec)
    return p.is_file() or p.suffix.lower() in MODEL_SUFFIXES or len(p.parts) > 1


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


def resolve_model(spec: str | None, cfg: Config) -> ModelChoice | None:
    """What `spec` (a `--model` value or a match player) names; None: no spec and no network ships."""
    if spec is not None and Path(spec).is_dir():
        return run_best_choice(Path(spec), cfg)
    if spec is not None and _is_file_spec(spec):
        return ModelChoice(Path(spec))
    networks = load_networks()
    if spec is None or spec == DEFAULT:
        network = default_network(networks)
        if network is None:
            if spec is None:
                return None
            raise NetworkError(f"'{DEFAULT}' names the default network, but none is in {networks_dir()}")
    else:
        name = spec.removeprefix(NETWORK_PREFIX)
        if name == spec and name not in {n.name for n in networks}:
            raise ModelFileError(f"'{spec}' is neither a model file (.pt or .onnx) nor a network "
                                 f"({', '.join(n.name for n in networks) or 'none ships'})")
        network = find_network(name, networks)
    return network_choice(network, cfg)


def require_model(spec: str | None, cfg: Config, flag: str = "--model") -> ModelChoice:
    """`resolve_model`, with an error asking for `flag` where there is nothing to load."""
    choice = resolve_model(spec, cfg)
    if choice is None:
        raise ModelFileError(f"no model: give {flag} FILE (.pt or .onnx); no network ships in {networks_dir()}")
    return choice
