"""The `dlzero` command line for the foundation commands, run as real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_MODEL, TINY_MODEL_FLAGS

from dlzero.cli import main
from dlzero.config import InferenceConfig, ModelConfig
from dlzero.inference import load_model
from dlzero.model import load_model_file, new_model


def dlzero(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    script = shutil.which("dlzero", path=str(Path(sys.executable).parent))
    cmd = [script] if script else [sys.executable, "-m", "dlzero.cli"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "error:" in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    proc = dlzero("init-model", "--out", "m.pt", "--seed", "3", *TINY_MODEL_FLAGS, cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root


def test_init_model(workdir):
    model, meta = load_model_file(workdir / "m.pt")
    assert model.cfg == ModelConfig(**TINY_MODEL)
    assert meta.generation == 0 and meta.name == "b1c16"
    # the seed fixes the weights
    same = new_model(model.cfg, seed=3).eval()
    for key, tensor in model.state_dict().items():
        assert (tensor == same.state_dict()[key]).all(), key


def test_export_and_bench(workdir):
    proc = dlzero("export", "m.pt", "--out", "m.onnx", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "max |torch - onnx|" in proc.stderr
    x = np.random.default_rng(0).random((5, 100, 9, 9), dtype=np.float32)
    cpu = InferenceConfig(device="cpu", optimize="none")
    p1, v1 = load_model(workdir / "m.pt", cpu).evaluate(x)
    p2, v2 = load_model(workdir / "m.onnx", cpu).evaluate(x)
    np.testing.assert_allclose(p1, p2, rtol=0, atol=1e-4)
    np.testing.assert_allclose(v1, v2, rtol=0, atol=1e-4)

    proc = dlzero("bench", "infer", "--model", "m.pt", "--batch", "1,4", "--seconds", "0.2", "--json",
                  "--threads", "1", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert rows, proc.stdout
    for row in rows:
        assert {"backend", "batch", "positions_per_s"} <= set(row)
        assert row["positions_per_s"] > 0
    network = [(r["backend"], r["batch"]) for r in rows if r["backend"] != "encoder"]
    assert sorted(network) == sorted((b, n) for b in ("torch-eager", "torch", "onnx", "onnx-int8") for n in (1, 4))
    int8 = [r for r in rows if r["backend"] == "onnx-int8"]
    assert all(r["vs_onnx_fp32"] > 0 and 0 <= r["top1_vs_fp32"] <= 1 and r["cpu_flags"] for r in int8)
    assert [r["backend"] for r in rows].count("encoder") == 1


def test_bench_search_layouts(workdir):
    """`bench search --layouts`: a row per layout, each with its own pure-inference rate, and the share
    of the best one; a malformed layout is a one-line error."""
    proc = dlzero("bench", "search", "--model", "m.pt", "--evaluators", "null,onnx", "--batch", "8",
                  "--playouts", "64", "--layouts", "1x1,1x2", "--rounds", "2", "--json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    onnx = [r for r in rows if r["evaluator"] == "onnx"]
    assert sorted((r["layout"], r["trees"]) for r in onnx) == [("1x1", 1), ("1x1", 8), ("1x2", 1), ("1x2", 8)]
    best = max(r["inference_only_per_s"] for r in onnx)
    for r in onnx:
        assert r["sims_per_s"] > 0 and abs(r["vs_best_inference"] - r["sims_per_s"] / best) < 2e-3
        # the search is divided by the network's rate timed around it, not by the row's median
        assert r["search_vs_inference"] > 0
    assert [r["layout"] for r in rows if r["evaluator"] == "null"] == ["1x1", "1x1"]  # no network, one layout
    # bytes a node: what the trees count against search.hash_mb, and the resident growth (Linux), beside the CPU
    assert all(72 < r["tree_bytes_per_node"] < 2000 and r["cpu_flags"] for r in rows)  # a node record and its moves
    assert all("rss_bytes_per_node" in r for r in rows) or not sys.platform.startswith("linux")
    line = _one_line_error(dlzero("bench", "search", "--evaluators", "null", "--layouts", "2by1", cwd=workdir))
    assert "--layouts" in line and "2by1" in line
    line = _one_line_error(dlzero("bench", "search", "--evaluators", "null", "--rounds", "0", cwd=workdir))
    assert "--rounds" in line


def test_bench_search_byoyomi_times_every_move_alone_and_side_by_side(workdir):
    """`bench search --byoyomi`: the shipped network as a GUI runs it, a row per margin and engine count with
    the playouts a move and the moves' wall times; a margin too large for the byoyomi still answers."""
    proc = dlzero("bench", "search", "--byoyomi", "300", "--margins", "100", "--positions", "2", "--side-by-side",
                  "--json", cwd=workdir, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [(r["margin"], r["engines"], r["moves"]) for r in rows] == [(100, 1, 2), (100, 2, 4)]
    for r in rows:
        assert r["playouts_per_move"] > 0 and r["cpu_flags"] and 0 < r["search_ms_max"] <= r["time_ms_max"]
        assert 0 < r["time_ms_median"] <= r["time_ms_p95"] <= r["time_ms_max"] < 5000
    line = _one_line_error(dlzero("bench", "search", "--byoyomi", "300", "--positions", "0", cwd=workdir))
    assert "--positions" in line


def test_bench_train_variants(workdir):
    """`bench train`: a row per precision/layout with its speed against the first, the CPU's flags in
    every JSON row; a malformed variant is a one-line error."""
    proc = dlzero("bench", "train", *TINY_MODEL_FLAGS, "--set", "train.batch_size=8", "--variants",
                  "off/contiguous,bf16/channels_last", "--steps", "1", "--rounds", "2", "--json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [(r["variant"], r["computes_in"]) for r in rows] == [("off/contiguous", "float32"),
                                                                ("bf16/channels_last", "bfloat16")]
    assert rows[0]["vs_first"] == 1.0 and all(r["ms_per_step"] > 0 and r["batch"] == 8 for r in rows)
    assert rows[1]["vs_first"] == pytest.approx(rows[0]["ms_per_step"] / rows[1]["ms_per_step"], rel=0.1)
    assert all(r["cpu_flags"] for r in rows)
    line = _one_line_error(dlzero("bench", "train", *TINY_MODEL_FLAGS, "--variants", "bf16-last", cwd=workdir))
    assert "--variants" in line and "bf16-last" in line


def test_bad_config_key_is_one_line(workdir):
    proc = dlzero("init-model", "--out", "bad.pt", "--set", "model.blockz=3", cwd=workdir)
    line = _one_line_error(proc)
    assert line.startswith("dlzero init-model: error:") and "model.blockz" in line
    assert not (workdir / "bad.pt").exists()


def _main_error(capsys, *argv: str) -> str:
    """Run the CLI in-process (cheaper than a subprocess) and return its one-line error."""
    assert main(list(argv)) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_more_config_errors_in_process(workdir, capsys):
    out = str(workdir / "bad2.pt")
    assert "model.blocks" in _main_error(capsys, "init-model", "--out", out, "--set", "model.blocks=-2")
    assert "no-such-config.yaml" in _main_error(capsys, "init-model", "--out", out,
                                                "--config", "no-such-config.yaml")
    assert "must look like section.key=value" in _main_error(capsys, "init-model", "--out", out,
                                                              "--set", "model.blocks")
    assert not Path(out).exists()


def test_missing_or_bad_model_file(workdir, capsys):
    proc = dlzero("export", "missing.pt", "--out", "x.onnx", cwd=workdir)
    line = _one_line_error(proc)
    assert "missing.pt" in line and "does not exist" in line
    junk = workdir / "junk.pt"
    junk.write_bytes(b"PK\x03\x04 not a real zip")
    line = _main_error(capsys, "bench", "infer", "--model", str(junk), "--batch", "1", "--seconds", "0.05")
    assert "junk.pt" in line
    line = _main_error(capsys, "export", str(junk), "--out", str(workdir / "junk.onnx"))
    assert "junk.pt" in line and not (workdir / "junk.onnx").exists()
