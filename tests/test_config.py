"""Typed configuration (dlzero.config): files, defaults, overrides, errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dlzero.config import (
    Config,
    ModelConfig,
    config_from_dict,
    config_to_dict,
    dump_config,
    load_config,
    parse_override,
)
from dlzero.errors import ConfigError, DlzeroError

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
CONFIG_FILES = sorted(CONFIG_DIR.glob("*.yaml"))


def test_config_files_exist():
    assert {p.stem for p in CONFIG_FILES} >= {"tiny", "gpu-1", "cluster"}


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.stem)
def test_each_config_file_loads_and_matches_its_yaml(path):
    cfg = load_config(path)
    raw = yaml.safe_load(path.read_text())
    as_dict = config_to_dict(cfg)

    def check(written: dict, loaded: dict, where: str) -> None:
        for key, value in written.items():  # a nested section (inference.quantize) holds only the keys it sets
            if isinstance(value, dict):
                check(value, loaded[key], f"{where}{key}.")
            else:
                assert loaded[key] == value, f"{path.name}: {where}{key}"

    check(raw, as_dict, "")
    # dumping and reloading gives the same config
    assert config_from_dict(yaml.safe_load(dump_config(cfg))) == cfg


def test_named_configs():
    tiny = load_config(CONFIG_DIR / "tiny.yaml")
    assert (tiny.model.blocks, tiny.model.channels) == (5, 64)
    assert tiny.inference.backend == "onnx" and tiny.inference.threads == 1
    assert tiny.inference.precision == "int8" and tiny.inference.quantize.min_top1 == 0.9  # the A/B's settings
    big = load_config(CONFIG_DIR / "gpu-1.yaml")
    assert (big.model.blocks, big.model.channels) == (10, 192)
    assert big.server.enabled and big.server.max_batch >= big.inference.max_batch
    assert big.search.c_init == 1.44  # untouched keys keep their defaults
    cluster = load_config(CONFIG_DIR / "cluster.yaml")
    assert (cluster.model.blocks, cluster.model.channels) == (20, 256)
    assert cluster.selfplay.ray == "auto" and cluster.server.enabled


def test_defaults():
    cfg = load_config()
    assert cfg == Config()
    assert cfg.model == ModelConfig(blocks=5, channels=64, value_channels=4, value_fc=256)
    assert cfg.search.c_init == 1.44 and cfg.search.c_base == 28288.0
    assert cfg.inference.providers == [] and cfg.inference.backend == "auto"
    # list defaults are not shared between instances
    a, b = Config(), Config()
    a.inference.providers.append("x")
    assert b.inference.providers == []


def test_overrides_are_typed():
    cfg = load_config(None, ["model.blocks=7", "search.c_init=2", "search.reuse_tree=no", "train.amp=off",
                             "selfplay.noise=off", "usi.playouts=0", "inference.device=cpu",
                             "inference.providers=CPUExecutionProvider,CUDAExecutionProvider",
                             "selfplay.openings=on"])
    assert cfg.model.blocks == 7 and isinstance(cfg.model.blocks, int)
    assert cfg.search.c_init == 2.0 and isinstance(cfg.search.c_init, float)  # int accepted for float
    assert cfg.search.reuse_tree is False
    assert cfg.train.amp == "off"  # YAML 1.1 reads a bare off as False; a str field takes it back as 'off'
    assert cfg.selfplay.noise is False
    assert cfg.selfplay.openings == "on"
    assert cfg.inference.device == "cpu"
    assert cfg.inference.providers == ["CPUExecutionProvider", "CUDAExecutionProvider"]
    # later overrides win, and overrides apply on top of a file
    assert load_config(None, ["model.blocks=3", "model.blocks=4"]).model.blocks == 4
    assert load_config(CONFIG_DIR / "tiny.yaml", ["model.channels=32"]).model.channels == 32


def test_yaml_off_on_in_files(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  amp: off\nselfplay:\n  noise: on\n")
    cfg = load_config(path)
    assert cfg.train.amp == "off" and cfg.selfplay.noise is True


@pytest.mark.parametrize("override,fragment", [
    ("model.blockz=3", "unknown config key 'model.blockz'"),
    ("foo.bar=1", "unknown config key 'foo'"),
    ("search.c_innit=1", "unknown config key 'search.c_innit'"),
    ("model.blocks=abc", "config key 'model.blocks': expected int, got 'abc'"),
    ("model.blocks=2.5", "config key 'model.blocks': expected int"),
    ("model.blocks=true", "config key 'model.blocks': expected int"),
    ("model.blocks=-1", "config key 'model.blocks' must be > 0"),
    ("model.blocks=0", "config key 'model.blocks' must be > 0"),
    ("search.fpu_reduction=-0.1", "config key 'search.fpu_reduction' must be >= 0"),
    ("search.dirichlet_epsilon=1.5", "config key 'search.dirichlet_epsilon' must be between 0 and 1"),
    ("search.leaf_mate_depth=2", "config key 'search.leaf_mate_depth' must be 0 (off) or an odd number"),
    ("search.c_init=fast", "config key 'search.c_init': expected float"),
    ("search.reuse_tree=3", "config key 'search.reuse_tree': expected bool"),
    ("train.amp=on", "config key 'train.amp' must be one of auto, off, bf16, fp16"),
    ("inference.backend=tensorflow", "config key 'inference.backend' must be one of"),
    ("model.blocks", "must look like section.key=value"),
    ("blocks=3", "must name a section and a key"),
    ("model.blocks=[1", "not valid YAML"),
])
def test_bad_overrides_name_the_key(override, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert fragment in str(info.value)
    assert isinstance(info.value, DlzeroError)
    assert "\n" not in str(info.value)


def test_bad_files(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(missing)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("model: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        load_config(bad_yaml)
    assert "\n" not in str(info.value) and "line 1" in str(info.value)
    not_mapping = tmp_path / "list.yaml"
    not_mapping.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(not_mapping)
    section = tmp_path / "section.yaml"
    section.write_text("model: 3\n")
    with pytest.raises(ConfigError, match="section 'model' must be a mapping"):
        load_config(section)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("model:\n  blocks: 3\n  chanels: 8\n")
    with pytest.raises(ConfigError) as info:
        load_config(unknown)
    assert "model.chanels" in str(info.value) and str(unknown) in str(info.value)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty) == Config()
    null_section = tmp_path / "null.yaml"
    null_section.write_text("model:\nsearch:\n  c_init: 1.5\n")
    cfg = load_config(null_section)
    assert cfg.model == ModelConfig() and cfg.search.c_init == 1.5


def test_parse_override():
    assert parse_override("a.b=1") == (["a", "b"], 1)
    assert parse_override("a.b=x=y") == (["a", "b"], "x=y")
    assert parse_override(" a.b = 1.5") == (["a", "b"], 1.5)
    assert parse_override("a.b=") == (["a", "b"], "")


def test_old_batch_size_key_becomes_leaves_per_tree(tmp_path, caplog):
    path = tmp_path / "old.yaml"
    path.write_text("search:\n  batch_size: 24\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="dlzero.config"):
        cfg = load_config(path)
    assert cfg.search.leaves_per_tree == 24
    assert "search.leaves_per_tree" in caplog.text
    assert load_config(None, ["search.batch_size=8"]).search.leaves_per_tree == 8
    with pytest.raises(ConfigError, match="same setting"):
        load_config(None, ["search.batch_size=8", "search.leaves_per_tree=4"])


def test_leaves_per_tree_per_stage_and_declaration_rule():
    cfg = Config()
    assert (cfg.search.leaves_per_tree, cfg.selfplay.leaves_per_tree, cfg.gate.leaves_per_tree) == (64, 1, 1)
    assert load_config(None, ["search.entering_king_rule=24"]).search.entering_king_rule == "24"
    with pytest.raises(ConfigError, match="entering_king_rule"):
        load_config(None, ["search.entering_king_rule=26"])
