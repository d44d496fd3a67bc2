"""Where a new run's generation 0 comes from, and the settings that go with that start.

A user who runs `dlzero loop` wants the network `dlzero usi` plays to get stronger, so a new run starts from the
default shipped network's weights unless told otherwise (KataGo and Leela Zero users resume from the latest
network, not from zero). Random weights are `--from-scratch`; `--init-from` names another start: a shipped
network (`NAME`, `network:NAME`, `default`), a model file (`.pt`), or teacher data (`.hcpe3`/`.hcpe`) that
generation 0 is trained on, or a chain folder (`dlzero.chain`: the best weights and newest self-play of
earlier runs, carried from machine to machine).

Settings tuned for random weights wash a strong network out (48-playout self-play, a learning rate of 0.02, every
candidate promoted without a match: docs/loop.md, "Starting from a trained network"), so a start from a trained
network applies the config's `loop.from_network` overrides before the user's own `--set` and flags. One of them
is `gate.mode=sprt`: every promotion of such a run is judged by a match.

The default start is taken only where the config's architecture is the network's (tiny's 5x64 is): a config
that asks for another shape (gpu-1's, a test's 1x16) keeps random weights, and stderr says why. A network named
with `--init-from` brings its own architecture instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlzero.chain import WEIGHTS, is_chain, read_ledger
from dlzero.config import Config, ModelConfig, load_config
from dlzero.errors import ConfigError
from dlzero.networks import Network, check_file, default_network, find_network, load_networks
from dlzero.player_names import parse_player
from dlzero.train.teacher_files import DATA_SUFFIXES


@dataclass(frozen=True)
class Start:
    """A new run's generation 0: `kind` is "scratch" (random weights), "model" (a trained network's weights,
    `sources[0]`) or "data" (a network trained on the teacher files `sources`); `note` is what stderr says."""

    kind: str
    sources: list[Path] = field(default_factory=list)
    note: str = ""
    architecture: ModelConfig | None = None  # set where the start brings its own shape (a named network)
    chain: Path | None = None  # a chain folder (dlzero.chain) whose replay shards the run takes in

    @property
    def trained(self) -> bool:
        """Whether generation 0 is a trained network, whose settings are `loop.from_network`'s."""
        return self.kind == "model"


def arch_overrides(arch: ModelConfig) -> list[str]:
    """`--set` lines that make a config's `model` section `arch`."""
    out = [f"model.{key}={value}" for key, value in vars(arch).items() if key != "global_pool_blocks"]
    out.append(f"model.global_pool_blocks=[{','.join(str(i) for i in arch.global_pool_blocks)}]")
    return out


def network_weights(network: Network) -> Path:
    """The network's `.pt` file (checked against its manifest): generation 0 is trained further in torch."""
    return check_file(network, "weights")


def named_network(spec: str) -> Network | None:
    """The shipped network `spec` names (`default`, `NAME`, `network:NAME`: `dlzero.player_names`), or None if
    it names something else (a file)."""
    try:
        name = parse_player(spec)
    except ValueError:
        return None
    if name.kind == "default":
        network = default_network(load_networks())
        if network is None:
            raise ConfigError("--init-from default: no network ships with this dlzero (dlzero networks list)")
        return network
    return find_network(name.value, load_networks()) if name.kind == "network" else None


def plan_start(init_from: Sequence[str] | None, from_scratch: bool, model: ModelConfig) -> Start:
    """What generation 0 of a new run is, from `--init-from`, `--from-scratch` and the config's architecture."""
    if from_scratch and init_from:
        raise ConfigError("--from-scratch and --init-from both say where generation 0 comes from: give one")
    if from_scratch:
        return Start("scratch", note="generation 0 is random weights (--from-scratch)")
    if init_from:
        paths = [Path(s) for s in init_from]
        if all(p.suffix in DATA_SUFFIXES for p in paths):
            return Start("data", paths, f"generation 0 is trained on {', '.join(p.name for p in paths)}")
        if len(paths) > 1:
            raise ConfigError("--init-from takes one network (a name or a .pt file), or teacher data files "
                              "(.hcpe3, .hcpe), not both")
        if is_chain(paths[0]):
            links = read_ledger(paths[0])["links"]
            done = f"{links[-1]['cpu_hours_total']} CPU-hours over {len(links)} link(s)" if links else "no links"
            from dlzero.model.checkpoint import check_header, read_payload

            weights = paths[0] / WEIGHTS
            arch = check_header(read_payload(weights), weights)[0]
            return Start("model", [weights], f"generation 0 is the chain {paths[0]}'s best weights ({done}); its "
                         "replay shards join the run's data", arch, chain=paths[0])
        network = named_network(init_from[0])
        if network is not None:
            return Start("model", [network_weights(network)], f"generation 0 is the shipped network "
                         f"{network.describe()} (its .pt weights)", network.architecture)
        return Start("model", paths, f"generation 0 is the model {paths[0]}")
    network = default_network(load_networks())
    if network is None:
        return Start("scratch", note="generation 0 is random weights: no network ships with this dlzero")
    if network.architecture != model:
        return Start("scratch", note=f"generation 0 is random weights: the config's network is "
                     f"{model.blocks}x{model.channels}, the shipped network {network.name} is {network.arch} "
                     f"(--init-from default takes its shape and weights; --from-scratch says random on purpose)")
    return Start("model", [network_weights(network)], f"generation 0 is the shipped network {network.describe()} "
                 "(its .pt weights); --from-scratch starts from random weights instead")


def start_config(config_path: str | None, user_overrides: Sequence[str], start: Start) -> tuple[Config, list[str]]:
    """A new run's config for `start`: defaults <- the config file <- (a trained start: the network's shape, then
    `loop.from_network`) <- the user's `--set` and flags; and the overrides that the start added."""
    cfg = load_config(config_path, user_overrides)
    if not start.trained:
        return cfg, []
    added = [*(arch_overrides(start.architecture) if start.architecture is not None else []),
             *cfg.loop.from_network]
    return load_config(config_path, [*added, *user_overrides]), added
