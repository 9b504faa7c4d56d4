"""The main job end to end: ``pylucid train`` as a user runs it (tiny runs on the bundled digits)."""

from __future__ import annotations

import csv
import fcntl
import gzip
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import numpy as np
import pytest

import pylucid as pl
from pylucid import train as train_mod
from pylucid.train import build_model, cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# small and fast, with dropout (the CNN) so the random state matters for resuming
TINY = ["--batch-size", "128", "--no-progress"]


def run_cli(*args, cwd, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pylucid", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, **kw)


def run_here(capsys, *args):
    """``pylucid ARGS`` in this process: ``(exit status, stdout, stderr)``."""
    code = cli(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def weights(path):
    """The tensors of a checkpoint (``pylucid.load``) or a safetensors file, as NumPy arrays."""
    if str(path).endswith(".safetensors"):
        return {k: v.numpy() for k, v in pl.load_safetensors(str(path)).items()}
    return {k: v.numpy() for k, v in pl.load(str(path))["model"].items()}


def _array(value):
    return value.numpy() if isinstance(value, pl.Tensor) else np.asarray(value)


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def exact_metrics(out_dir):
    """The columns of metrics.csv that must be bit-identical between equal runs (not the timings)."""
    with open(os.path.join(out_dir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    return [{k: r[k] for k in ("epoch", "train_loss", "val_loss", "val_acc", "lr")} for r in rows]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted four-epoch run: what every split or resumed run must reproduce bit for bit."""
    out = tmp_path_factory.mktemp("reference") / "run"
    assert cli(["train", "--epochs", "4", *TINY, "--out", str(out)]) == 0
    return out


def test_tiny_run_writes_everything(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, stderr = run_here(capsys, "train", "--epochs", "2", *TINY, "--out", str(out))
    assert code == 0, stderr
    assert stderr == ""
    assert "final test accuracy:" in stdout and "\r" not in stdout
    assert [ln.split()[:2] for ln in stdout.splitlines() if ln.startswith("epoch")] == [["epoch", "1"],
                                                                                        ["epoch", "2"]]
    hist = json.loads((out / "history.json").read_text())
    assert hist["status"] == "finished" and len(hist["history"]) == 2 and 0.0 <= hist["test_acc"] <= 1.0
    assert hist["history"][-1]["train_loss"] < hist["history"][0]["train_loss"]
    assert [r["epoch"] for r in exact_metrics(out)] == ["1", "2"]
    # the kept weights load back into the same architecture
    model = build_model("cnn", 1, 8, 10)
    missing, unexpected = model.load_state_dict(pl.load_safetensors(str(out / "best.safetensors")))
    assert not missing and not unexpected
    ckpt = pl.load(str(out / "checkpoint.pyl"))
    assert ckpt["epoch"] == 2 and ckpt["step"] == 0 and set(ckpt) >= {"optimizer", "scheduler", "rng", "model"}
    assert "plot: " in stdout
    assert (out / "curves.png").exists() == _has("matplotlib")


def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_piped_output_has_no_progress_bar(tmp_path):
    # `pylucid train | cat`: stdout is a pipe, so plain lines, one per epoch, and nothing on stderr
    r = run_cli("train", "--epochs", "2", "--batch-size", "256", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "\r" not in r.stdout and r.stderr == ""
    assert sum(ln.startswith("epoch ") for ln in r.stdout.splitlines()) == 2


@pytest.mark.skipif(not _has("mpi4py"), reason="needs mpi4py and an MPI (pip install 'pylucid[distributed]')")
def test_data_parallel_run(tmp_path):
    # two MPI ranks through the real entry point: one log, one set of files, the accuracy of a one-process run
    out = tmp_path / "o"
    r = run_cli("train", "--nproc", "2", "--epochs", "2", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert sum(ln.startswith("pylucid 0") for ln in lines) == 1, r.stdout
    assert [ln.split()[1] for ln in lines if ln.startswith("epoch ")] == ["1", "2"], r.stdout
    assert sum(ln.startswith("final test accuracy") for ln in lines) == 1, r.stdout
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [row["epoch"] for row in rows] == ["1", "2"]
    with open(out / "history.json") as f:
        hist = json.load(f)
    assert hist["status"] == "finished" and hist["args"]["nproc"] == 2
    # the logged loss is the mean over both ranks' images: near what the first epoch of one process gives
    assert 0.5 < hist["history"][0]["train_loss"] < 2.5 and hist["history"][1]["train_loss"] < 0.8
    assert hist["test_acc"] >= 0.90, hist["test_acc"]
    assert f"final test accuracy: {hist['test_acc'] * 100:.2f}%" in r.stdout
    assert set(os.listdir(out)) >= {"best.safetensors", "checkpoint.pyl", "metrics.csv", "history.json"}
    state = pl.load(str(out / "checkpoint.pyl"))
    assert state["nproc"] == 2 and state["epoch"] == 2
    # the saved weights give the reported accuracy on the test split (they are rank 0's replica)
    model = build_model("cnn", 1, 8, 10)
    model.load_state_dict(pl.load_safetensors(str(out / "best.safetensors")))
    model.eval()
    x, y = pl.datasets.load_digits("test")
    with pl.no_grad():
        acc = (pl.argmax(model(x), dim=1) == y).float().mean().item()
    assert abs(acc - hist["test_acc"]) < 1e-6


def test_progress_bar_on_a_terminal(tmp_path):
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))  # a 100-column terminal
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "pylucid", "train", "--epochs", "1", "--batch-size", "256",
                             "--out", str(tmp_path / "o")], cwd=tmp_path, env=env, stdout=follower,
                            stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 4096)
            except OSError:  # the terminal closed: the process has exited
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode(errors="replace")
    assert "epoch 1/1" in text and re.search("\r(?!\n)", text)  # tqdm's bar, redrawn in place
    assert "final test accuracy:" in text


# ------------------------------------------------------------------ user errors: one line, status 2, no data read


@pytest.fixture
def no_data_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("data were loaded before the command line was checked")

    monkeypatch.setattr(train_mod, "load_data", refuse)


def _mnist_dir(path, n_train=96, n_test=32, skip=()):
    rng = np.random.default_rng(0)
    path.mkdir()
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, n)
        images = np.zeros((n, 28, 28), np.uint8)
        for i, y in enumerate(labels):  # a learnable pattern: a bright bar whose row is the label
            images[i, 2 + 2 * y: 4 + 2 * y, 4:24] = 255
        for kind, arr in (("images-idx3-ubyte", images), ("labels-idx1-ubyte", labels)):
            if f"{prefix}-{kind}" not in skip:
                _write_idx(path / f"{prefix}-{kind}.gz", arr)
    return path


def _write_idx(path, arr):
    dims = arr.shape
    header = struct.pack(">BBBB", 0, 0, 0x08, len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


BAD = {
    "gpu": (["--device", "gpu"], "unknown device type 'gpu'"),
    "cuda-index": (["--device", "cuda:99"], "--device cuda:99"),
    "device-typo": (["--device", "cpu:x"], "--device cpu:x"),
    "mnist-no-dir": (["--dataset", "mnist"], "needs --data-dir"),
    "wrong-dir": (["--dataset", "mnist", "--data-dir", "WRONG"], "--data-dir WRONG: no such folder"),
    "dir-for-digits": (["--data-dir", "."], "the digits ship with pylucid"),
    "cifar-empty-dir": (["--dataset", "cifar10", "--data-dir", "."], "no data_batch_1 for --dataset cifar10"),
    "epochs": (["--epochs", "0"], "argument --epochs"),
    "lr": (["--lr", "-1"], "argument --lr"),
    "lr-nan": (["--lr", "nan"], "argument --lr"),
    "val-fraction": (["--val-fraction", "1"], "argument --val-fraction"),
    "dataset": (["--dataset", "imagenet"], "invalid choice: 'imagenet'"),
    "unknown-flag": (["--epoch", "3"], "unrecognized arguments: --epoch 3"),
    "stop-after-last": (["--epochs", "3", "--stop-after", "3"], "--stop-after 3"),
    "resume-missing": (["--resume", "nothere/checkpoint.pyl"], "no such checkpoint"),
    "nproc": (["--nproc", "0"], "argument --nproc: expected an integer >= 1, got '0'"),
    "nproc-stop-after": (["--nproc", "2", "--epochs", "3", "--stop-after", "1"],
                         "--stop-after cannot be used with --nproc 2"),
    "nproc-batch": (["--nproc", "3", "--batch-size", "32"], "must be a multiple of --nproc 3"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_user_error_is_one_line_before_loading(tmp_path, capsys, monkeypatch, no_data_loading, name):
    monkeypatch.chdir(tmp_path)
    flags, expected = BAD[name]
    code, stdout, stderr = run_here(capsys, "train", *flags, "--out", str(tmp_path / "o"))
    assert code == 2
    assert stdout == ""
    assert len(stderr.splitlines()) == 1 and stderr.startswith("pylucid train: "), stderr
    assert expected in stderr and "see pylucid train --help" in stderr


def test_cuda_without_a_gpu(tmp_path, capsys, no_data_loading):
    if pl.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, stdout, stderr = run_here(capsys, "train", "--device", "cuda", "--out", str(tmp_path / "o"))
    assert code == 2 and stdout == "" and len(stderr.splitlines()) == 1
    assert "--device cuda: CUDA is not available" in stderr and "--device cpu" in stderr


def test_missing_data_file_is_named(tmp_path, capsys, no_data_loading):
    data = _mnist_dir(tmp_path / "mnist", skip=("t10k-labels-idx1-ubyte",))
    code, stdout, stderr = run_here(capsys, "train", "--dataset", "fashion-mnist", "--data-dir", str(data),
                                    "--out", str(tmp_path / "o"))
    # fashion-mnist has MNIST's file names; this folder has all but one
    assert code == 2 and stdout == "" and len(stderr.splitlines()) == 1
    assert "t10k-labels-idx1-ubyte" in stderr and "train-images" not in stderr


def test_errors_through_the_real_entry_point(tmp_path):
    # no traceback from the console entry point either
    r = run_cli("train", "--device", "gpu", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1
    r = run_cli(cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "COMMAND" in r.stderr


def test_version_and_help(capsys):
    code, stdout, _ = run_here(capsys, "--version")
    assert code == 0 and stdout.strip() == f"pylucid {pl.__version__}"
    code, stdout, _ = run_here(capsys, "train", "--help")
    assert code == 0
    assert "``" not in stdout
    flat = " ".join(stdout.split())  # help wraps lines
    for shown in ("(default: 15)", "(default: 32)", "(default: 0.002)", "(default: 0.1)", "(default: cpu)",
                  "(default: 0)", "(default: digits)", "(default: cnn)"):
        assert shown in flat, shown


# ------------------------------------------------------------------ resume, stop, Ctrl-C


def test_two_epochs_then_resume_equals_four_epochs(reference, tmp_path, capsys):
    out = tmp_path / "split"
    code, stdout, _ = run_here(capsys, "train", "--epochs", "4", "--stop-after", "2", *TINY, "--out", str(out))
    assert code == 0 and "stopped after epoch 2 of 4" in stdout
    assert len(exact_metrics(out)) == 2  # appended per epoch
    assert json.loads((out / "history.json").read_text())["status"] == "stopped"
    code, stdout, stderr = run_here(capsys, "train", "--resume", str(out / "checkpoint.pyl"), "--no-progress")
    assert code == 0, stderr
    assert "resuming at epoch 3 step 0" in stdout
    assert_same_weights(weights(out / "checkpoint.pyl"), weights(reference / "checkpoint.pyl"))
    assert_same_weights(weights(out / "best.safetensors"), weights(reference / "best.safetensors"))
    a, b = pl.load(str(out / "checkpoint.pyl")), pl.load(str(reference / "checkpoint.pyl"))
    for i, state in b["optimizer"]["state"].items():
        for key, value in state.items():
            assert np.array_equal(_array(a["optimizer"]["state"][i][key]), _array(value)), key
    assert a["scheduler"] == b["scheduler"]
    assert exact_metrics(out) == exact_metrics(reference)
    ha, hb = (json.loads((d / "history.json").read_text()) for d in (out, reference))
    assert ha["test_acc"] == hb["test_acc"] and ha["test_loss"] == hb["test_loss"]
    assert ha["best_epoch"] == hb["best_epoch"]


def test_ctrl_c_writes_a_resumable_checkpoint(reference, tmp_path, capsys):
    out = tmp_path / "interrupted"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "pylucid", "train", "--epochs", "4", *TINY, "--out", str(out)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not any(ln.startswith("epoch   1") for ln in lines):
            line = proc.stdout.readline()
            assert line, "the run ended before its first epoch"
            lines.append(line)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert len(stderr.splitlines()) == 1 and "interrupted" in stderr and "--resume" in stderr, stderr
    assert "Traceback" not in stdout + stderr
    hist = json.loads((out / "history.json").read_text())
    assert hist["status"] == "interrupted" and hist["test_acc"] is None
    assert (out / "curves.png").exists() == _has("matplotlib")
    code, _, err = run_here(capsys, "train", "--resume", str(out), "--no-progress")
    assert code == 0, err
    assert_same_weights(weights(out / "checkpoint.pyl"), weights(reference / "checkpoint.pyl"))
    assert exact_metrics(out) == exact_metrics(reference)


def test_resume_refuses_a_different_plan(reference, tmp_path, capsys, monkeypatch, no_data_loading):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(reference, run)
    ckpt = pl.load(str(run / "checkpoint.pyl"))
    ckpt["epoch"] = 3  # as if stopped after epoch 3
    pl.save(ckpt, str(run / "checkpoint.pyl"))
    cases = [
        (["--lr", "0.1"], "--lr 0.1 differs from the checkpoint's 0.002"),
        (["--epochs", "8"], "--epochs 8 differs"),
        (["--out", str(tmp_path / "elsewhere")], "--out cannot change it"),
        (["--stop-after", "3"], "--stop-after 3"),
    ]
    for flags, expected in cases:
        code, stdout, stderr = run_here(capsys, "train", "--resume", str(run / "checkpoint.pyl"), *flags)
        assert code == 2 and stdout == "" and len(stderr.splitlines()) == 1, (flags, stderr)
        assert expected in stderr, (flags, stderr)
    code, _, stderr = run_here(capsys, "train", "--resume", str(reference))
    assert code == 2 and "finished (4 of 4 epochs)" in stderr
    code, _, stderr = run_here(capsys, "train", "--resume", str(run), "--nproc", "2")
    assert code == 2 and "--resume cannot be used with --nproc 2" in stderr
    ckpt["nproc"] = 2  # as if written by a data-parallel run
    pl.save(ckpt, str(run / "checkpoint.pyl"))
    code, _, stderr = run_here(capsys, "train", "--resume", str(run))
    assert code == 2 and len(stderr.splitlines()) == 1 and "trained on 2 processes" in stderr, stderr
    (tmp_path / "junk.pyl").write_bytes(b"not a checkpoint")
    code, _, stderr = run_here(capsys, "train", "--resume", str(tmp_path / "junk.pyl"))
    assert code == 2 and len(stderr.splitlines()) == 1
    pl.save({"w": pl.ones(2)}, str(tmp_path / "other.pyl"))
    code, _, stderr = run_here(capsys, "train", "--resume", str(tmp_path / "other.pyl"))
    assert code == 2 and "not a pylucid train checkpoint" in stderr


# ------------------------------------------------------------------ validation, metrics, plot


def test_no_validation_keeps_the_last_epoch(tmp_path, capsys, monkeypatch):
    seen = []
    original = train_mod.evaluate

    def spy(model, loader, device):
        seen.append(len(loader.dataset))
        return original(model, loader, device)

    monkeypatch.setattr(train_mod, "evaluate", spy)
    out = tmp_path / "run"
    code, stdout, _ = run_here(capsys, "train", "--epochs", "2", "--val-fraction", "0", *TINY, "--out", str(out))
    assert code == 0
    assert seen == [355]  # the test set, once, at the end: never for selecting an epoch
    assert "(1442 train / 0 validation / 355 test)" in stdout
    assert "final weights (no validation)" in stdout and "(epoch 2)" in stdout
    assert_same_weights(weights(out / "best.safetensors"), weights(out / "checkpoint.pyl"))
    rows = exact_metrics(out)
    assert [r["val_acc"] for r in rows] == ["", ""] and [r["val_loss"] for r in rows] == ["", ""]
    assert json.loads((out / "history.json").read_text())["best_epoch"] == 2


def test_metrics_rows_reach_the_file_as_each_epoch_ends(tmp_path):
    log = train_mod.MetricsLog(str(tmp_path), [], tensorboard=False)
    row = {"epoch": 1, "train_loss": 0.5, "val_loss": None, "val_acc": None, "lr": 1e-3, "images_per_s": 10.0,
           "seconds": 1.0}
    log.append(row)
    with open(tmp_path / "metrics.csv") as f:  # before the log is closed
        assert list(csv.reader(f)) == [list(train_mod.METRICS), ["1", "0.5", "", "", "0.001", "10.0", "1.0"]]
    log.close()


def test_tensorboard_events(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    out = tmp_path / "run"
    code, _, err = run_here(capsys, "train", "--epochs", "2", *TINY, "--tensorboard", "--out", str(out))
    assert code == 0, err
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = events.Tags()["tensors"] + events.Tags().get("scalars", [])
    assert {"train_loss", "val_acc", "lr", "test_acc"} <= set(tags)
    rows = exact_metrics(out)
    steps = [e.step for e in events.Tensors("train_loss")]
    values = [float(tensor_util.make_ndarray(e.tensor_proto)) for e in events.Tensors("train_loss")]
    assert steps == [1, 2]
    np.testing.assert_allclose(values, [float(r["train_loss"]) for r in rows], rtol=1e-6)  # stored as float32


def test_tensorboard_flag_without_the_package(tmp_path, capsys, monkeypatch, no_data_loading):
    monkeypatch.setattr(train_mod, "_optional", lambda module: False)
    code, stdout, stderr = run_here(capsys, "train", "--tensorboard", "--out", str(tmp_path / "o"))
    assert code == 2 and stdout == "" and "pip install tensorboard" in stderr


def test_plot_has_title_best_epoch_and_test_accuracy():
    pytest.importorskip("matplotlib")
    history = [{"epoch": e, "train_loss": 1.0 / e, "val_loss": 1.2 / e, "val_acc": a}
               for e, a in ((1, 0.5), (2, 0.9), (3, 0.95), (4, 0.93))]
    fig = train_mod.draw_curves(history, title="pylucid train: cnn on digits, test accuracy 94.00%", best_epoch=3,
                                test_acc=0.94)
    assert fig._suptitle.get_text() == "pylucid train: cnn on digits, test accuracy 94.00%"
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "best epoch 3: 95.00%" in labels and "test: 94.00%" in labels and "best epoch 3" in labels
    acc_axis = fig.axes[1]
    marked = {(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in acc_axis.get_lines()}
    assert ((3,), (95.0,)) in marked and ((3,), (94.0,)) in marked
    # without validation: the last epoch is kept and only the test point is drawn
    fig = train_mod.draw_curves([dict(h, val_acc=None, val_loss=None) for h in history], title="t", best_epoch=4,
                                test_acc=0.9)
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "kept (last) epoch 4" in labels and "test: 90.00%" in labels


def test_train_mnist_files(tmp_path, capsys):
    data = _mnist_dir(tmp_path / "mnist")
    code, stdout, err = run_here(capsys, "train", "--dataset", "mnist", "--data-dir", str(data), "--epochs", "1",
                                 "--no-progress", "--model", "mlp", "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "on mnist" in stdout and "final test accuracy:" in stdout


def test_damaged_data_file_is_one_line(tmp_path, capsys):
    data = _mnist_dir(tmp_path / "mnist")
    (data / "train-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8bnot gzip")
    code, stdout, stderr = run_here(capsys, "train", "--dataset", "mnist", "--data-dir", str(data),
                                    "--out", str(tmp_path / "out"))
    assert code == 2 and stdout == "" and len(stderr.splitlines()) == 1 and "damaged gzip" in stderr


def test_compile_flag_gives_the_same_run(reference, tmp_path):
    """``--compile`` replays CUDA graphs on a GPU; on the CPU the steps run as they are: the same run bit for bit."""
    out = tmp_path / "compiled"
    assert cli(["train", "--epochs", "4", *TINY, "--compile", "--out", str(out)]) == 0
    assert exact_metrics(out) == exact_metrics(reference)
