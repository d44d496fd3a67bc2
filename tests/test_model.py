"""The network (dlzero.model): shapes, parameter count, checkpoint files, ONNX export."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from nets import perturbed_model

from dlzero.config import ModelConfig
from dlzero.encoding import ENCODER_VERSION, NUM_LABELS, NUM_PLANES
from dlzero.errors import DlzeroError, ModelFileError
from dlzero.model import (
    ModelMetadata,
    PolicyValueNet,
    count_parameters,
    load_model_file,
    model_name,
    new_model,
    save_model,
)
from dlzero.model.checkpoint import FORMAT_VERSION, checkpoint_payload
from dlzero.model.export import METADATA_KEY, export_onnx
from dlzero.train.train_state import FORMAT as TRAIN_FORMAT
from dlzero.train.train_state import FORMAT_VERSION as TRAIN_VERSION
from dlzero.train.train_state import load_checkpoint

SMALL = ModelConfig(blocks=2, channels=16, value_channels=2, value_fc=32)


def _trained_like(cfg: ModelConfig = SMALL, seed: int = 0) -> PolicyValueNet:
    """A model whose BN running statistics and policy bias are not at their initial values."""
    return perturbed_model(cfg, seed, policy_bias=True)


def _planes(n: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).random((n, NUM_PLANES, 9, 9), dtype=np.float32))


@pytest.fixture(scope="module")
def net() -> PolicyValueNet:
    """The network itself (conftest's `model` is a file), its statistics moved off their initial values."""
    return _trained_like()


@pytest.fixture(scope="module")
def saved(net, tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "m.pt"
    meta = ModelMetadata(generation=3, parent="gen-0002", games=120, positions=9000, name="test-net")
    save_model(net, path, meta)
    return path, meta


def test_forward_shapes_and_value_range(net):
    for n in (1, 5):
        with torch.no_grad():
            policy, value = net(_planes(n) * 5.0)
        assert policy.shape == (n, NUM_LABELS) and value.shape == (n,)
        assert policy.dtype == torch.float32
        assert torch.all(value.abs() <= 1.0)
    # value really is bounded: saturate the head
    with torch.no_grad():
        model_big = _trained_like()
        model_big.value_fc2.weight.mul_(1e4)
        _, value = model_big(_planes(8))
    assert torch.all(value.abs() <= 1.0) and value.abs().max() > 0.99


def test_policy_bias_indexes_labels_directly():
    """With zero convolution weights the logits are the per-label bias: flat index = class*81 + sq."""
    net = _trained_like()
    with torch.no_grad():
        net.policy_out.weight.zero_()
        policy, _ = net(_planes(2))
    np.testing.assert_allclose(policy[0].numpy(), net.policy_bias.detach().numpy(), rtol=0, atol=1e-6)


def _expected_parameters(cfg: ModelConfig) -> int:
    c, vc, fc = cfg.channels, cfg.value_channels, cfg.value_fc
    bn = 2  # weight and bias per channel (running statistics are buffers)
    stem = NUM_PLANES * c * 9 + bn * c
    tower = cfg.blocks * 2 * (c * c * 9 + bn * c)
    policy = (c * c + bn * c) + c * 27 + NUM_LABELS
    value = (c * vc + bn * vc) + (vc * 81 * fc + fc) + (fc + 1)
    return stem + tower + policy + value


@pytest.mark.parametrize("cfg", [SMALL, ModelConfig(), ModelConfig(blocks=1, channels=3, value_channels=1,
                                                                     value_fc=1)])
def test_parameter_count_formula(cfg):
    assert count_parameters(PolicyValueNet(cfg)) == _expected_parameters(cfg)


def test_parameter_count_default_config_by_hand():
    # b5c64: stem 57,728; tower 5 * 73,984; policy 4,224 + 1,728 + 2,187; value 264 + 83,200 + 257
    assert count_parameters(PolicyValueNet(ModelConfig())) == 519_508


def test_model_name():
    assert model_name(ModelConfig(blocks=10, channels=192)) == "b10c192"


def test_new_model_seed_is_deterministic():
    a, b, c = new_model(SMALL, seed=5), new_model(SMALL, seed=5), new_model(SMALL, seed=6)
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)
    assert not torch.equal(a.stem[0].weight, c.stem[0].weight)


# ---- checkpoint files --------------------------------------------------------------------------------


def test_checkpoint_round_trip(net, saved):
    path, meta = saved
    loaded, meta2 = load_model_file(path)
    assert not loaded.training
    assert loaded.cfg == SMALL
    assert meta2 == meta
    x = _planes(6)
    with torch.no_grad():
        p1, v1 = net(x)
        p2, v2 = loaded(x)
    assert torch.equal(p1, p2) and torch.equal(v1, v2)
    for key, tensor in net.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[key]), key


def test_checkpoint_default_metadata(tmp_path):
    path = save_model(new_model(SMALL, seed=0), tmp_path / "x.pt")
    _, meta = load_model_file(path)
    assert meta.name == "b2c16" and meta.generation == 0 and meta.created
    payload = torch.load(path, weights_only=True)
    assert payload["format"] == "dlzero-model"
    assert payload["format_version"] == FORMAT_VERSION and payload["encoder_version"] == ENCODER_VERSION
    assert not list(tmp_path.glob("*.tmp*")) and [p.name for p in tmp_path.iterdir()] == ["x.pt"]


@pytest.mark.parametrize("fraction", [0.0, 0.0001, 0.01, 0.3, 0.5, 0.9, 0.999])
def test_truncated_checkpoint(saved, tmp_path, fraction):
    data = saved[0].read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelFileError) as info:
        load_model_file(cut)
    assert str(cut) in str(info.value)
    assert "\n" not in str(info.value)


def test_last_byte_missing(saved, tmp_path):
    data = saved[0].read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[:-1])
    with pytest.raises(ModelFileError):
        load_model_file(cut)


def _write_payload(path, payload):
    torch.save(payload, path)
    return path


def test_other_architecture_is_named(net, tmp_path):
    wider_cfg = ModelConfig(blocks=2, channels=24, value_channels=2, value_fc=32)
    wider = checkpoint_payload(_trained_like(wider_cfg), ModelMetadata())
    wider["model_config"] = dict(checkpoint_payload(net, ModelMetadata())["model_config"])
    with pytest.raises(ModelFileError) as info:
        load_model_file(_write_payload(tmp_path / "wider.pt", wider))
    assert "shape mismatch" in str(info.value) and "stem.0.weight" in str(info.value)
    assert "(24, 100, 3, 3) != (16, 100, 3, 3)" in str(info.value)

    deeper_cfg = checkpoint_payload(net, ModelMetadata())
    deeper_cfg["model_config"]["blocks"] = 3
    with pytest.raises(ModelFileError) as info:
        load_model_file(_write_payload(tmp_path / "deeper.pt", deeper_cfg))
    assert "missing" in str(info.value) and "tower.2." in str(info.value)

    shallower_cfg = checkpoint_payload(net, ModelMetadata())
    shallower_cfg["model_config"]["blocks"] = 1
    with pytest.raises(ModelFileError) as info:
        load_model_file(_write_payload(tmp_path / "shallower.pt", shallower_cfg))
    assert "unexpected" in str(info.value) and "tower.1." in str(info.value)

    edited = checkpoint_payload(net, ModelMetadata())
    edited["state_dict"]["value_fc1.weight"] = torch.zeros(32, 2 * 81 + 1)
    with pytest.raises(ModelFileError, match=r"value_fc1.weight \(32, 163\) != \(32, 162\)"):
        load_model_file(_write_payload(tmp_path / "edited.pt", edited))

    no_weights = checkpoint_payload(net, ModelMetadata())
    del no_weights["state_dict"]
    with pytest.raises(ModelFileError, match="no weights"):
        load_model_file(_write_payload(tmp_path / "noweights.pt", no_weights))


def test_bad_headers(net, tmp_path):
    newer = checkpoint_payload(net, ModelMetadata())
    newer["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(ModelFileError, match="newer than this dlzero understands"):
        load_model_file(_write_payload(tmp_path / "newer.pt", newer))

    encoder = checkpoint_payload(net, ModelMetadata())
    encoder["encoder_version"] = ENCODER_VERSION + 1
    with pytest.raises(ModelFileError, match=f"input encoding v{ENCODER_VERSION + 1}"):
        load_model_file(_write_payload(tmp_path / "encoder.pt", encoder))

    bad_cfg = checkpoint_payload(net, ModelMetadata())
    bad_cfg["model_config"]["channels"] = -4
    with pytest.raises(ModelFileError, match="model.channels"):
        load_model_file(_write_payload(tmp_path / "badcfg.pt", bad_cfg))

    unknown_key = checkpoint_payload(net, ModelMetadata())
    unknown_key["model_config"]["heads"] = 2
    with pytest.raises(ModelFileError, match="model.heads"):
        load_model_file(_write_payload(tmp_path / "unknown.pt", unknown_key))


def test_training_checkpoint_header_is_checked_as_a_model_file_is(net, tmp_path):
    """The trainer's resume file goes through the same header check: a model file is not one, and a newer
    format version of its own is refused the way a model file's is."""
    with pytest.raises(ModelFileError, match="not a dlzero training checkpoint"):
        load_checkpoint(save_model(net, tmp_path / "model.pt"), SMALL)
    newer = {"format": TRAIN_FORMAT, "format_version": TRAIN_VERSION + 1}
    with pytest.raises(ModelFileError, match=f"training checkpoint format version {TRAIN_VERSION + 1} is newer "
                                             "than this dlzero understands .*; upgrade dlzero"):
        load_checkpoint(_write_payload(tmp_path / "newer.pt", newer), SMALL)


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_not_dlzero_files(tmp_path, capsys):
    cases = {
        "dict.pt": {"weights": torch.zeros(3)},
        "tensor.pt": torch.zeros(3),
        "plain.pt": {"format": "other-model", "format_version": 1},
    }
    for name, obj in cases.items():
        with pytest.raises(ModelFileError, match="not a dlzero model file"):
            load_model_file(_write_payload(tmp_path / name, obj))
    text = tmp_path / "text.pt"
    text.write_text("hello, I am not a checkpoint\n")
    with pytest.raises(ModelFileError, match="cannot be read as a checkpoint"):
        load_model_file(text)
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(ModelFileError, match="empty"):
        load_model_file(empty)
    # a pickle that would run code is refused (weights_only), and the message is one line
    evil = _write_payload(tmp_path / "evil.pt", {"format": "dlzero-model", "x": _Evil()})
    with pytest.raises(ModelFileError) as info:
        load_model_file(evil)
    assert "\n" not in str(info.value) and "weights_only=False" not in str(info.value)
    assert "this must never run" not in capsys.readouterr().out
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model_file(tmp_path / "missing.pt")
    assert issubclass(ModelFileError, DlzeroError)


# ---- ONNX export --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_file(net, saved, tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "m.onnx"
    export_onnx(net, path, saved[1])
    return path


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_onnx_matches_torch(net, onnx_file, batch):
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    x = _planes(batch, seed=batch)
    with torch.no_grad():
        p1, v1 = net(x)
    p2, v2 = session.run(["policy", "value"], {"planes": x.numpy()})
    assert p2.shape == (batch, NUM_LABELS) and v2.shape == (batch,)
    np.testing.assert_allclose(p2, p1.numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(v2, v1.numpy(), rtol=0, atol=1e-4)


def test_onnx_metadata_round_trip(net, onnx_file, saved):
    proto = onnx.load(str(onnx_file))
    props = {p.key: p.value for p in proto.metadata_props}
    header = json.loads(props[METADATA_KEY])
    assert header["format"] == "dlzero-model" and header["encoder_version"] == ENCODER_VERSION
    assert header["model_config"] == {"blocks": 2, "channels": 16, "value_channels": 2, "value_fc": 32,
                                      "global_pool_blocks": []}
    assert ModelMetadata.from_dict(header["metadata"]) == saved[1]
    assert "state_dict" not in header
    assert [i.name for i in proto.graph.input] == ["planes"]
    assert [o.name for o in proto.graph.output] == ["policy", "value"]
    # the batch axis is dynamic
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and [d.dim_value for d in dims[1:]] == [NUM_PLANES, 9, 9]
