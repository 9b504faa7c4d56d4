"""The main job end to end: ``python -m pylucid train`` on a tiny run."""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import pylucid as pl
from pylucid.train import build_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pylucid", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_train_digits_tiny_run(tmp_path):
    out = tmp_path / "run"
    r = run_cli("train", "--epochs", "2", "--batch-size", "64", "--no-progress", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "final test accuracy:" in r.stdout
    hist = json.loads((out / "history.json").read_text())
    assert len(hist["history"]) == 2 and 0.0 <= hist["test_acc"] <= 1.0
    assert hist["history"][-1]["train_loss"] < hist["history"][0]["train_loss"] * 1.5
    # the best checkpoint loads back into the same architecture
    model = build_model("cnn", 1, 8, 10)
    missing, unexpected = model.load_state_dict(pl.load_safetensors(str(out / "best.safetensors")))
    assert not missing and not unexpected
    assert ("plot: " in r.stdout)


def _write_idx(path, arr):
    dims = arr.shape
    header = struct.pack(">BBBB", 0, 0, 0x08, len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_train_mnist_files(tmp_path):
    rng = np.random.default_rng(0)
    data = tmp_path / "mnist"
    data.mkdir()
    for prefix, n in (("train", 96), ("t10k", 32)):
        labels = rng.integers(0, 10, n)
        images = np.zeros((n, 28, 28), np.uint8)
        for i, y in enumerate(labels):  # a learnable pattern: a bright bar whose row is the label
            images[i, 2 + 2 * y: 4 + 2 * y, 4:24] = 255
        _write_idx(data / f"{prefix}-images-idx3-ubyte.gz", images)
        _write_idx(data / f"{prefix}-labels-idx1-ubyte.gz", labels)
    r = run_cli("train", "--dataset", "mnist", "--data-dir", str(data), "--epochs", "1", "--no-progress",
                "--model", "mlp", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "on mnist" in r.stdout and "final test accuracy:" in r.stdout


def test_missing_data_dir_is_explained(tmp_path):
    r = run_cli("train", "--dataset", "mnist", "--no-progress", cwd=tmp_path)
    assert r.returncode != 0 and "--data-dir" in (r.stdout + r.stderr)
    r = run_cli("train", "--dataset", "fashion-mnist", "--data-dir", str(tmp_path), "--no-progress", cwd=tmp_path)
    assert r.returncode != 0 and "train-images-idx3-ubyte" in r.stderr


@pytest.mark.parametrize("bad", [["--epochs", "0"], ["--lr", "-1"], ["--dataset", "imagenet"]])
def test_bad_flags_rejected(tmp_path, bad):
    r = run_cli("train", *bad, cwd=tmp_path)
    assert r.returncode == 2 and "usage" in r.stderr
