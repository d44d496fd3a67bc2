"""Evaluators (dlzero.inference): torch and onnxruntime backends, load_model, errors, batching."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch
from nets import perturbed_model
from randpos import board_from_moves, random_histories

from dlzero.config import InferenceConfig, ModelConfig
from dlzero.encoding import NUM_LABELS, NUM_PLANES, Encoder, new_batch_buffer
from dlzero.errors import BackendError, DlzeroError, ModelFileError
from dlzero.inference import (
    Evaluator,
    NullEvaluator,
    OnnxEvaluator,
    TorchEvaluator,
    load_model,
    resolve_device,
)
from dlzero.inference.devices import resolve_precision
from dlzero.model import ModelMetadata, PolicyValueNet, save_model
from dlzero.model.export import METADATA_KEY, export_onnx

CFG = ModelConfig(blocks=1, channels=16, value_channels=2, value_fc=32)
CPU = InferenceConfig(device="cpu", optimize="none")


def _perturbed_model():
    return perturbed_model(CFG, seed=1)


@pytest.fixture(scope="module")
def net() -> PolicyValueNet:
    """The network itself (conftest's `model` is a file), perturbed so that every backend has weights to get wrong."""
    return _perturbed_model()


@pytest.fixture(scope="module")
def files(net, tmp_path_factory):
    root = tmp_path_factory.mktemp("inference")
    meta = ModelMetadata(generation=4, parent="gen-0003", name="inf-test")
    pt = save_model(net, root / "m.pt", meta)
    onnx_path = export_onnx(net, root / "m.onnx", meta)
    return pt, onnx_path, meta


@pytest.fixture(scope="module")
def planes():
    """Real encoded positions (not random noise), 70 of them."""
    boards = [board_from_moves(m) for m in random_histories(70, seed=41, max_ply=120)]
    buf = new_batch_buffer(70)
    Encoder().encode_batch(boards, buf)
    return buf


def _reference(net, x: np.ndarray):
    with torch.no_grad():
        p, v = net(torch.from_numpy(x))
    return p.numpy(), v.numpy()


def _close(a, b, atol=1e-4):
    np.testing.assert_allclose(a, b, rtol=0, atol=atol)


@pytest.mark.parametrize("optimize", ["none", "freeze"])
def test_torch_evaluator_matches_the_module(net, planes, optimize):
    ev = TorchEvaluator(net, InferenceConfig(device="cpu", optimize=optimize))
    assert ev.backend == "torch" and ev.optimize == optimize
    assert "cpu" in ev.describe() and optimize in ev.describe()
    p_ref, v_ref = _reference(net, planes)
    for n in (1, 7, 64):
        p, v = ev.evaluate(planes[:n])
        assert p.shape == (n, NUM_LABELS) and v.shape == (n,)
        assert p.dtype == np.float32 and v.dtype == np.float32
        _close(p, p_ref[:n])
        _close(v, v_ref[:n])


def test_torch_freeze_and_none_agree(net, planes):
    frozen = TorchEvaluator(net, InferenceConfig(device="cpu", optimize="freeze"))
    eager = TorchEvaluator(net, InferenceConfig(device="cpu", optimize="none"))
    auto = TorchEvaluator(net, InferenceConfig(device="cpu"))
    assert auto.optimize == "freeze"  # auto on the CPU
    for n in (1, 13):
        p1, v1 = frozen.evaluate(planes[:n])
        p2, v2 = eager.evaluate(planes[:n])
        _close(p1, p2)
        _close(v1, v2)


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_onnx_evaluator_matches_torch(net, files, planes, batch):
    _, onnx_path, meta = files
    ev = OnnxEvaluator(onnx_path, CPU)
    assert ev.backend == "onnx" and ev.providers == ["CPUExecutionProvider"]
    assert ev.metadata == meta  # read from the file's metadata
    p_ref, v_ref = _reference(net, planes[:batch])
    p, v = ev.evaluate(planes[:batch])
    assert p.shape == (batch, NUM_LABELS) and v.shape == (batch,)
    _close(p, p_ref)
    _close(v, v_ref)


@pytest.mark.parametrize("spin", [True, False])
def test_onnx_spin_setting_reaches_the_session(net, files, planes, spin):
    """`inference.spin: false` turns off onnxruntime's spin-waiting intra-op threads (their cores go back to
    the search's tree between calls); the answers do not change."""
    _, onnx_path, _ = files
    ev = OnnxEvaluator(onnx_path, InferenceConfig(device="cpu", threads=2, spin=spin))
    options = ev.session.get_session_options()
    if spin:  # onnxruntime's default: no entry, threads spin
        with pytest.raises(RuntimeError, match="allow_spinning"):
            options.get_session_config_entry("session.intra_op.allow_spinning")
    else:
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    p_ref, v_ref = _reference(net, planes[:5])
    p, v = ev.evaluate(planes[:5])
    _close(p, p_ref)
    _close(v, v_ref)


def test_load_model_by_file_type(net, files, planes):
    pt, onnx_path, meta = files
    p_ref, v_ref = _reference(net, planes)
    cases = [
        (pt, InferenceConfig(device="cpu"), TorchEvaluator),
        (pt, InferenceConfig(device="cpu", backend="torch", optimize="none"), TorchEvaluator),
        (pt, InferenceConfig(device="cpu", backend="onnx"), OnnxEvaluator),  # exported in memory
        (onnx_path, InferenceConfig(device="cpu"), OnnxEvaluator),
        (onnx_path, InferenceConfig(device="cpu", backend="onnx"), OnnxEvaluator),
    ]
    for path, cfg, cls in cases:
        ev = load_model(path, cfg)
        assert type(ev) is cls, (path, cfg)
        assert ev.metadata == meta
        p, v = ev.evaluate(planes)
        _close(p, p_ref)
        _close(v, v_ref)
        ev.close()


def test_load_model_errors(files, tmp_path):
    pt, onnx_path, _ = files
    with pytest.raises(ModelFileError, match="runs on the onnx backend"):
        load_model(onnx_path, InferenceConfig(device="cpu", backend="torch"))
    with pytest.raises(ModelFileError, match="must end in .pt"):
        load_model(tmp_path / "model.bin")
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model(tmp_path / "missing.pt")
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model(tmp_path / "missing.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not really a protobuf" * 10)
    with pytest.raises(ModelFileError, match="onnxruntime cannot load it"):
        load_model(garbage, InferenceConfig(device="cpu"))
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(onnx_path.read_bytes()[:5000])
    with pytest.raises(ModelFileError):
        load_model(truncated, InferenceConfig(device="cpu"))


class _WrongOutputs(torch.nn.Module):
    def __init__(self, policy_size: int, in_planes: int = NUM_PLANES) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(in_planes, 1, 1)
        self.fc = torch.nn.Linear(81, policy_size)

    def forward(self, x):
        h = self.conv(x).flatten(1)
        return self.fc(h), h.mean(1)


def _export_tiny(module, path, in_planes=NUM_PLANES, names=("planes", "policy", "value")):
    torch.onnx.export(module, (torch.zeros(2, in_planes, 9, 9),), str(path), input_names=[names[0]],
                      output_names=list(names[1:]), dynamic_axes={names[0]: {0: "batch"}},
                      opset_version=17, dynamo=False)
    return path


def test_onnx_file_with_wrong_shapes(tmp_path):
    small_policy = _export_tiny(_WrongOutputs(10), tmp_path / "policy10.onnx")
    with pytest.raises(ModelFileError) as info:
        load_model(small_policy, InferenceConfig(device="cpu"))
    assert f"policy [batch, {NUM_LABELS}]" in str(info.value) and "10" in str(info.value)

    wrong_input = _export_tiny(_WrongOutputs(NUM_LABELS, in_planes=62), tmp_path / "in62.onnx", in_planes=62)
    with pytest.raises(ModelFileError, match=r"expected one input 'planes' of shape \[batch, 100, 9, 9\]"):
        load_model(wrong_input, InferenceConfig(device="cpu"))

    wrong_names = _export_tiny(_WrongOutputs(NUM_LABELS), tmp_path / "names.onnx", names=("x", "p", "v"))
    with pytest.raises(ModelFileError, match="expected one input 'planes'"):
        load_model(wrong_names, InferenceConfig(device="cpu"))

    # right shapes, no dlzero metadata: accepted, named after the file
    fits = _export_tiny(_WrongOutputs(NUM_LABELS), tmp_path / "foreign.onnx")
    ev = load_model(fits, InferenceConfig(device="cpu"))
    assert ev.metadata.name == "foreign"
    p, v = ev.evaluate(np.zeros((3, NUM_PLANES, 9, 9), dtype=np.float32))
    assert p.shape == (3, NUM_LABELS) and v.shape == (3,)


def _with_metadata(src, dst, value):
    proto = onnx.load(str(src))
    for prop in proto.metadata_props:
        if prop.key == METADATA_KEY:
            prop.value = value
    onnx.save(proto, str(dst))
    return dst


def test_onnx_metadata_is_checked(files, tmp_path):
    _, onnx_path, meta = files
    header = json.loads({p.key: p.value for p in onnx.load(str(onnx_path)).metadata_props}[METADATA_KEY])
    newer_encoder = dict(header, encoder_version=header["encoder_version"] + 1)
    path = _with_metadata(onnx_path, tmp_path / "enc.onnx", json.dumps(newer_encoder))
    with pytest.raises(ModelFileError, match="input encoding"):
        load_model(path, InferenceConfig(device="cpu"))
    newer_format = dict(header, format_version=header["format_version"] + 1)
    path = _with_metadata(onnx_path, tmp_path / "fmt.onnx", json.dumps(newer_format))
    with pytest.raises(ModelFileError, match="newer than this dlzero understands"):
        load_model(path, InferenceConfig(device="cpu"))
    path = _with_metadata(onnx_path, tmp_path / "json.onnx", "{not json")
    with pytest.raises(ModelFileError, match="not JSON"):
        load_model(path, InferenceConfig(device="cpu"))
    renamed = dict(header, metadata=dict(header["metadata"], generation=9))
    path = _with_metadata(onnx_path, tmp_path / "gen9.onnx", json.dumps(renamed))
    assert load_model(path, InferenceConfig(device="cpu")).metadata.generation == 9


def test_unavailable_providers_and_devices(files):
    _, onnx_path, _ = files
    with pytest.raises(BackendError) as info:
        OnnxEvaluator(onnx_path, InferenceConfig(providers=["CUDAExecutionProvider"]))
    message = str(info.value)
    assert "CUDAExecutionProvider" in message and "not available" in message
    assert "CPUExecutionProvider" in message and "onnxruntime-gpu" in message
    with pytest.raises(BackendError, match="NoSuchProvider"):
        OnnxEvaluator(onnx_path, InferenceConfig(providers=["NoSuchProvider"]))
    if not torch.cuda.is_available():
        with pytest.raises(BackendError, match="device 'cuda'"):
            OnnxEvaluator(onnx_path, InferenceConfig(device="cuda"))
        with pytest.raises(BackendError, match="no CUDA GPU"):
            load_model(files[0], InferenceConfig(device="cuda"))
        with pytest.raises(BackendError, match="no CUDA GPU"):
            resolve_device("cuda:0")
        assert resolve_device("auto").type == "cpu"
    with pytest.raises(BackendError, match="unknown device"):
        resolve_device("gpu0")
    with pytest.raises(BackendError, match="not supported"):
        resolve_device("meta")
    with pytest.raises(BackendError, match="on the CPU use fp32"):
        resolve_precision("fp16", torch.device("cpu"))
    with pytest.raises(BackendError, match="on the CPU use fp32"):
        TorchEvaluator(_perturbed_model(), InferenceConfig(device="cpu", precision="bf16"))
    assert resolve_precision("auto", torch.device("cpu")) == torch.float32
    assert issubclass(BackendError, DlzeroError)


def test_null_evaluator_shapes():
    ev = NullEvaluator()
    assert ev.backend == "null"
    for n in (0, 1, 300):
        p, v = ev.evaluate(np.ones((n, NUM_PLANES, 9, 9), dtype=np.float32))
        assert p.shape == (n, NUM_LABELS) and v.shape == (n,)
        assert not p.any() and not v.any()
    with pytest.raises(ValueError, match="expected planes of shape"):
        ev.evaluate(np.zeros((2, 62, 9, 9), dtype=np.float32))
    with pytest.raises(ValueError, match="expected planes of shape"):
        ev.evaluate(np.zeros((NUM_PLANES, 9, 9), dtype=np.float32))


class _Recorder(Evaluator):
    """Records chunk sizes; policy[i] = (sum of planes of i) + label index, value[i] = first plane value."""

    backend = "recorder"

    def __init__(self, max_batch: int) -> None:
        super().__init__(max_batch)
        self.chunks: list[int] = []

    def _run(self, planes):
        assert planes.flags.c_contiguous and planes.dtype == np.float32
        assert len(planes) <= self.max_batch
        self.chunks.append(len(planes))
        sums = planes.reshape(len(planes), -1).sum(1)
        policy = sums[:, None] + np.arange(NUM_LABELS, dtype=np.float32)[None, :]
        return policy.astype(np.float32), planes[:, 0, 0, 0].copy()


def test_evaluator_splits_batches_above_max_batch():
    rng = np.random.default_rng(3)
    x = rng.random((10, NUM_PLANES, 9, 9), dtype=np.float32)
    x[:, 0, 0, 0] = np.arange(10)
    ev = _Recorder(max_batch=3)
    p, v = ev.evaluate(x)
    assert ev.chunks == [3, 3, 3, 1]
    np.testing.assert_array_equal(v, np.arange(10, dtype=np.float32))
    np.testing.assert_allclose(p[:, 0], x.reshape(10, -1).sum(1), rtol=1e-6)
    np.testing.assert_allclose(p[:, 5] - p[:, 0], 5.0, rtol=1e-6)
    ev.chunks.clear()
    ev.evaluate(x[:3])
    ev.evaluate(x[:6])
    assert ev.chunks == [3, 3, 3]
    # non-contiguous and float64 inputs are converted, not rejected
    ev.chunks.clear()
    _, v = ev.evaluate(x[::2].astype(np.float64))
    np.testing.assert_array_equal(v, np.arange(0, 10, 2, dtype=np.float32))
    assert ev.chunks == [3, 2]


def test_real_backends_split_large_batches(net, planes):
    ev = TorchEvaluator(net, InferenceConfig(device="cpu", optimize="none", max_batch=16))
    p, v = ev.evaluate(planes)
    p_ref, v_ref = _reference(net, planes)
    _close(p, p_ref)
    _close(v, v_ref)


def test_gpu_providers_are_bound_to_the_requested_gpu():
    from dlzero.inference.onnx_backend import with_device

    gpu = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    assert with_device(gpu, "cuda:1") == [("TensorrtExecutionProvider", {"device_id": 1}),
                                          ("CUDAExecutionProvider", {"device_id": 1}), "CPUExecutionProvider"]
    assert with_device(gpu[1:], "cuda")[0] == ("CUDAExecutionProvider", {"device_id": 0})
    assert with_device(["CPUExecutionProvider"], "cpu") == ["CPUExecutionProvider"]
    with pytest.raises(BackendError, match="cuda:x"):
        with_device(gpu, "cuda:x")
