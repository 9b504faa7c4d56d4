"""The main job: ``pylucid train`` trains a small image classifier from the command line.

By default it trains a CNN on the 8x8 handwritten digits bundled with pylucid
(no download), holds out part of the training split for validation, evaluates
every epoch, keeps the best weights (safetensors), writes a resumable
checkpoint, appends the metrics of every epoch to ``metrics.csv`` (and to
TensorBoard event files when the ``tensorboard`` package is installed), draws
a loss/accuracy plot when matplotlib is installed, and prints the final test
accuracy.

What a run leaves in ``--out``:

- ``best.safetensors``: the weights kept (the best validation epoch; the last
  epoch with ``--val-fraction 0``), loadable with ``pylucid.load_safetensors``;
- ``checkpoint.pyl``: model, optimizer, scheduler, epoch, step and random
  states, written after every epoch and on Ctrl-C (``pylucid.load`` format);
  ``--resume`` continues from it bit for bit on the CPU;
- ``metrics.csv``: one row per epoch, appended as the run goes;
- ``history.json``, ``curves.png`` and, with tensorboard, ``tensorboard/``.

User errors (a device that is not there, missing data files, flags that
contradict each other) are reported in one line on stderr with exit status 2,
before any data is loaded. Ctrl-C finishes the current step, writes history,
plot and checkpoint, prints one line and exits with status 130.

``--nproc N`` trains data-parallel on N processes: the command starts itself
again through ``pylucid launch`` (MPI); every rank joins the process group,
reads its share of each epoch's order (``DistributedSampler``, the same seed on
every rank), and steps a ``DistributedDataParallel`` model whose gradients are
averaged over the ranks. ``--batch-size`` stays the global batch (each rank
takes batch/N images a step). Only rank 0 prints, shows progress and writes
files; the train loss it logs is summed over all ranks, and validation and
test accuracy are computed on whole splits by replicas that stay equal. A
data-parallel run cannot be resumed (``--resume`` and ``--stop-after`` are
refused with ``--nproc`` > 1, and its checkpoint is refused by ``--resume``).

``wrap_model`` builds the module the step calls (the model, or its
data-parallel wrapper).

Built only from pylucid's public API: ``nn``, ``optim``, ``utils.data``.
"""

from __future__ import annotations

import argparse
import builtins
import csv
import importlib.util
import json
import math
import os
import signal
import sys
import threading
import time
from typing import Sequence

import pylucid
from pylucid import nn
from pylucid.utils.data import DataLoader, Sampler, TensorDataset, random_split

__all__ = [
    "build_parser", "parse_args", "resolve", "check_device", "check_data", "build_model", "wrap_model", "load_data",
    "EpochOrder", "evaluate", "draw_curves", "save_plot", "MetricsLog", "Run", "train", "cli", "UsageError",
]

DATASETS = ("digits", "mnist", "fashion-mnist", "cifar10")
MODELS = ("cnn", "mlp")
CHECKPOINT = "checkpoint.pyl"
CHECKPOINT_KIND = "pylucid train checkpoint"
CHECKPOINT_VERSION = 1
#: flags that define what a run computes: ``--resume`` takes them from the checkpoint
PLAN_FLAGS = ("dataset", "model", "epochs", "batch_size", "lr", "weight_decay", "val_fraction", "seed")
METRICS = ("epoch", "train_loss", "val_loss", "val_acc", "lr", "images_per_s", "seconds")
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a job ended by Ctrl-C

DESCRIPTION = """\
Train a small image classifier (CNN or MLP) and report its test accuracy.

By default: the 8x8 handwritten digits that ship with pylucid, 10% of the
training split held out for validation, the best validation epoch kept.
Files written to --out: best.safetensors, checkpoint.pyl (for --resume),
metrics.csv, history.json, curves.png (with matplotlib) and tensorboard/
(with the tensorboard package)."""

EPILOG = """\
examples:
  pylucid train                                  digits, CNN, CPU (~10 s)
  pylucid train --epochs 5 --device cuda
  pylucid train --dataset mnist --data-dir ~/data/mnist
  pylucid train --resume runs/latest/checkpoint.pyl
  pylucid train --nproc 4                        data-parallel on 4 processes (MPI)
  pylucid train | cat                            one line per epoch, no progress bar"""


class UsageError(Exception):
    """A mistake in the command line or its surroundings: reported in one line, exit status 2."""


# ------------------------------------------------------------------ command line


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) raised as ``UsageError``."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's line breaks and shows every default that means something."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if "%(default)" in text or default is None or default is False or default == argparse.SUPPRESS \
                or not action.option_strings:
            return text
        return f"{text} (default: {default})"


def _bounded(kind, low, high=None, *, low_open=False, what):
    """An argparse ``type`` that parses ``kind`` and checks ``low <= v`` (``<`` if ``low_open``) and ``v < high``."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        if (value <= low if low_open else value < low) or (high is not None and value >= high):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pylucid", description="pylucid command line", allow_abbrev=False)
    p.train_parser = None
    p.add_argument("--version", action="version", version=f"pylucid {pylucid.__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    t = sub.add_parser("train", help="train a small image classifier", description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=_HelpFormatter, allow_abbrev=False)
    t.add_argument("--dataset", choices=DATASETS, default="digits", help="what to learn")
    t.add_argument("--data-dir", metavar="DIR", help="folder with the dataset's files (mnist, fashion-mnist, cifar10)")
    t.add_argument("--model", choices=MODELS, default="cnn", help="network")
    t.add_argument("--epochs", type=_bounded(int, 1, what="an integer >= 1"), default=15, metavar="N",
                   help="passes over the training split")
    t.add_argument("--batch-size", type=_bounded(int, 1, what="an integer >= 1"), default=32, metavar="N",
                   help="images per step")
    t.add_argument("--lr", type=_bounded(float, 0.0, low_open=True, what="a number > 0"), default=2e-3,
                   help="peak learning rate of the one-cycle schedule (AdamW)")
    t.add_argument("--weight-decay", type=_bounded(float, 0.0, what="a number >= 0"), default=1e-4,
                   metavar="W", help="AdamW's decoupled weight decay")
    t.add_argument("--val-fraction", type=_bounded(float, 0.0, 1.0, what="a number in [0, 1)"), default=0.1,
                   metavar="F", help="share of the training split held out for validation; "
                                     "0: no validation, the last epoch is kept")
    t.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    t.add_argument("--seed", type=int, default=0, metavar="N",
                   help="seed of the weights, the split, the order and dropout")
    t.add_argument("--out", default=os.path.join("runs", "latest"), metavar="DIR",
                   help="output folder (with --resume: the checkpoint's folder)")
    t.add_argument("--resume", metavar="PATH", help="continue the run saved in this checkpoint (or its folder)")
    t.add_argument("--stop-after", type=_bounded(int, 1, what="an integer >= 1"), metavar="EPOCH",
                   help="stop after this epoch with a resumable checkpoint (for jobs with a time limit)")
    t.add_argument("--compile", action="store_true",
                   help="replay each training step as a CUDA graph (pylucid.compile(mode='reduce-overhead'); "
                        "AdamW capturable); on the CPU the steps run as they are")
    t.add_argument("--nproc", type=_bounded(int, 1, what="an integer >= 1"), default=1, metavar="N",
                   help="train data-parallel on N processes (MPI); --batch-size stays the global batch")
    t.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: only when the output is a terminal)")
    t.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=None,
                   help="write TensorBoard event files to OUT/tensorboard "
                        "(default: when the tensorboard package is installed)")
    p.train_parser = t
    return p


def _given(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The destinations of the flags spelled out in ``argv`` (abbreviations are off, so the spelling is exact)."""
    given = set()
    for action in parser.train_parser._actions:
        for opt in action.option_strings:
            if any(tok == opt or tok.startswith(opt + "=") for tok in argv):
                given.add(action.dest)
    return given


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse and check the command line; raises ``UsageError`` (one line) on any user error."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    args.given = sorted(_given(parser, argv))
    return args


# ------------------------------------------------------------------ checks before any data is loaded


def check_device(spec: str) -> pylucid.device:
    """The device ``spec`` names, or ``UsageError`` when it is malformed or not on this machine."""
    try:
        dev = pylucid.device(spec)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--device {spec}: {exc}".replace("pylucid.device: ", "")) from None
    if dev.type == "cuda":
        if not pylucid.cuda.is_available():
            try:
                pylucid.zeros(1, device=dev)  # the backend's own message names the missing piece (CuPy, driver)
            except pylucid.errors.DeviceUnavailable as exc:
                reason = str(exc).split(": ", 1)[-1].replace("device='cpu'", "--device cpu")
                raise UsageError(f"--device {spec}: {reason}") from None
        count = pylucid.cuda.device_count()
        if dev.index >= count:
            raise UsageError(f"--device {spec}: this machine has {count} GPU(s), cuda:0 to cuda:{count - 1}")
    return dev


def _dataset_class(dataset: str):
    from pylucid import datasets

    return {"mnist": datasets.MNIST, "fashion-mnist": datasets.FashionMNIST, "cifar10": datasets.CIFAR10}[dataset]


def check_data(dataset: str, data_dir: str | None) -> None:
    """Every file the dataset needs is there (``UsageError`` naming the first missing one); reads nothing."""
    if dataset == "digits":
        if data_dir is not None:
            raise UsageError("--data-dir is for mnist, fashion-mnist and cifar10; the digits ship with pylucid")
        return
    if data_dir is None:
        raise UsageError(f"--dataset {dataset} needs --data-dir DIR (the folder holding its files)")
    if not os.path.isdir(os.path.expanduser(data_dir)):
        raise UsageError(f"--data-dir {data_dir}: no such folder (it should hold the {dataset} files)")
    from pylucid.datasets import _find_file

    cls = _dataset_class(dataset)
    # the same search rules as the dataset classes' loaders, without reading the files
    if dataset == "cifar10":
        wanted = [((cls._folder, ""), (name,)) for name in cls._train_files + cls._test_files]
    else:
        bases = [f"{prefix}-{kind}" for prefix in ("train", "t10k") for kind in ("images-idx3-ubyte",
                                                                                  "labels-idx1-ubyte")]
        wanted = [((f"{cls._folder}/raw", cls._folder, ""), (base + ".gz", base)) for base in bases]
    for subdirs, names in wanted:
        try:
            _find_file(cls.__name__, data_dir, subdirs, names, source=f"(the {dataset} files)")
        except FileNotFoundError:
            name = names[-1] if len(names) == 1 else f"{names[-1]} (or {names[0]})"
            where = ", ".join(f"{sub}/" if sub else "the folder itself" for sub in subdirs)
            raise UsageError(f"--data-dir {data_dir}: no {name} for --dataset {dataset}; "
                             f"{cls.__name__} looks in {where}") from None


def _optional(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def resolve(args: argparse.Namespace) -> tuple[argparse.Namespace, dict | None]:
    """Settle the run's flags (from the checkpoint with ``--resume``) and check them; ``(args, checkpoint)``."""
    state = None
    if args.resume is not None:
        path = args.resume
        if os.path.isdir(path):
            path = os.path.join(path, CHECKPOINT)
        if not os.path.isfile(path):
            raise UsageError(f"--resume {args.resume}: no such checkpoint")
        if "out" in args.given and os.path.abspath(args.out) != os.path.abspath(os.path.dirname(path)):
            raise UsageError("--resume continues in the checkpoint's folder; --out cannot change it "
                             "(copy the folder to continue elsewhere)")
        try:
            state = pylucid.load(path)
        except (pylucid.serialization.CheckpointError, OSError) as exc:
            raise UsageError(f"--resume {args.resume}: {exc}") from None
        if not isinstance(state, dict) or state.get("kind") != CHECKPOINT_KIND:
            raise UsageError(f"--resume {args.resume}: not a pylucid train checkpoint")
        if state.get("version") != CHECKPOINT_VERSION:
            raise UsageError(f"--resume {args.resume}: checkpoint version {state.get('version')}, "
                             f"this pylucid reads version {CHECKPOINT_VERSION}")
        plan = state["plan"]
        for name in PLAN_FLAGS:
            if name in args.given and getattr(args, name) != plan[name]:
                flag = "--" + name.replace("_", "-")
                raise UsageError(f"{flag} {getattr(args, name)} differs from the checkpoint's {plan[name]}; "
                                 f"--resume continues the run as it was planned")
            setattr(args, name, plan[name])
        if state.get("nproc", 1) > 1:
            raise UsageError(f"--resume {args.resume}: that run trained on {state['nproc']} processes; "
                             "a data-parallel run cannot be resumed")
        if state["epoch"] >= args.epochs:
            raise UsageError(f"--resume {args.resume}: that run is finished ({state['epoch']} of {args.epochs} "
                             "epochs)")
        args.resume = path
        args.out = os.path.dirname(path)
    if args.nproc > 1:
        for flag in ("resume", "stop_after"):
            if getattr(args, flag) is not None:
                raise UsageError(f"--{flag.replace('_', '-')} cannot be used with --nproc {args.nproc}: "
                                 "a data-parallel run cannot be resumed")
        if args.batch_size % args.nproc:
            raise UsageError(f"--batch-size {args.batch_size} is the global batch: it must be a multiple of "
                             f"--nproc {args.nproc}")
    if args.stop_after is not None:
        done = state["epoch"] if state is not None else 0
        if not done < args.stop_after < args.epochs:
            raise UsageError(f"--stop-after {args.stop_after}: expected an epoch after {done} and before the last "
                             f"(--epochs {args.epochs})")
    if args.tensorboard and not _optional("tensorboard"):
        raise UsageError("--tensorboard needs the tensorboard package: pip install tensorboard")
    if args.tensorboard is None:
        args.tensorboard = _optional("tensorboard")
    if args.progress is None:
        args.progress = sys.stdout.isatty()
    args.device = str(check_device(args.device))
    check_data(args.dataset, args.data_dir)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: {exc.strerror}") from None
    if not os.access(args.out, os.W_OK):
        raise UsageError(f"--out {args.out}: the folder is not writable")
    return args, state


# ------------------------------------------------------------------ model, data, metrics


def build_model(name: str, in_channels: int, size: int, classes: int) -> nn.Module:
    """A small CNN (two 3x3 convs, pooling, two linear layers) or an MLP for ``(C, size, size)`` images."""
    if name == "mlp":
        return nn.Sequential(
            nn.Flatten(), nn.Linear(in_channels * size * size, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
            nn.Linear(128, classes),
        )
    width = 16 if size <= 8 else 32
    if size <= 8:
        # 8x8 digits: one pooling step keeps a 4x4 map
        features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        flat = 2 * width * (size // 2) ** 2
    else:
        features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        flat = 2 * width * (size // 4) ** 2
    return nn.Sequential(features, nn.Flatten(), nn.Linear(flat, 128), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(128, classes))


def wrap_model(model: nn.Module, args: argparse.Namespace) -> nn.Module:
    """The module the training step calls: the model itself, or with ``--nproc`` > 1 its
    ``DistributedDataParallel`` wrapper (rank 0's weights broadcast at construction, gradients averaged over the
    ranks during backward). Needs the default process group."""
    if args.nproc == 1:
        return model
    from pylucid.nn.parallel import DistributedDataParallel

    device = next(model.parameters()).device
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def load_data(dataset: str, data_dir: str | None):
    """``(train_x, train_y, test_x, test_y)`` as tensors, images float32 in [0, 1] shaped (N, C, H, W)."""
    from pylucid import datasets

    if dataset == "digits":
        tx, ty = datasets.load_digits("train")
        vx, vy = datasets.load_digits("test")
        return tx, ty, vx, vy
    if data_dir is None:
        raise UsageError(f"--dataset {dataset} needs --data-dir DIR (the folder holding its files)")
    cls = _dataset_class(dataset)
    train, test = cls(data_dir, train=True), cls(data_dir, train=False)
    # stored as bytes: scale the whole set to float32 in [0, 1] once
    return train.data.float() / 255.0, train.targets, test.data.float() / 255.0, test.targets


class EpochOrder(Sampler[int]):
    """The order of the training examples in one epoch: a permutation drawn from ``generator`` at the start
    of the epoch, read from position ``start`` on (a resumed epoch skips the examples already seen).

    A data-parallel run (``--nproc``) reads its share from a ``DistributedSampler`` instead.

    >>> order = EpochOrder(5, pylucid.Generator().manual_seed(0))
    >>> order.new_epoch(); first = list(order)
    >>> sorted(first)
    [0, 1, 2, 3, 4]
    >>> order.start = 3; list(order) == first[3:]
    True
    """

    def __init__(self, n: int, generator: pylucid.Generator) -> None:
        self.n = n
        self.generator = generator
        self.indices: list[int] = list(range(n))
        self.start = 0

    def new_epoch(self) -> None:
        self.indices = pylucid.randperm(self.n, generator=self.generator).tolist()
        self.start = 0

    def __iter__(self):
        return iter(self.indices[self.start:])

    def __len__(self) -> int:
        return self.n - self.start


def evaluate(model, loader, device) -> tuple[float, float]:
    """``(mean cross-entropy, accuracy)`` of ``model`` over ``loader``, in eval mode and without a graph."""
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with pylucid.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss_sum += nn.functional.cross_entropy(logits, y, reduction="sum").item()
            correct += int((pylucid.argmax(logits, dim=1) == y).sum().item())
            total += y.shape[0]
    model.train()
    return loss_sum / max(total, 1), correct / max(total, 1)


def draw_curves(history: list, *, title: str, best_epoch: int | None, test_acc: float | None):
    """The loss and accuracy curves as a matplotlib ``Figure`` (``None`` without matplotlib).

    Left: training and validation loss; right: validation accuracy. The kept epoch is marked in both, and the
    test accuracy of the kept weights is drawn at that epoch.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    epochs = [h["epoch"] for h in history]
    validated = [h for h in history if h["val_acc"] is not None]
    fig = Figure(figsize=(9.5, 3.8))
    a1, a2 = fig.subplots(1, 2)
    a1.plot(epochs, [h["train_loss"] for h in history], label="train")
    if validated:
        a1.plot([h["epoch"] for h in validated], [h["val_loss"] for h in validated], label="validation")
        a2.plot([h["epoch"] for h in validated], [h["val_acc"] * 100 for h in validated], color="tab:green",
                label="validation")
    if best_epoch is not None:
        kept = "best epoch" if validated else "kept (last) epoch"
        a1.axvline(best_epoch, color="grey", linestyle=":", label=f"{kept} {best_epoch}")
        row = next(h for h in history if h["epoch"] == best_epoch)
        if row["val_acc"] is not None:
            a2.plot([best_epoch], [row["val_acc"] * 100], marker="*", markersize=13, color="tab:green",
                    linestyle="none", label=f"best epoch {best_epoch}: {row['val_acc'] * 100:.2f}%")
        if test_acc is not None:
            a2.plot([best_epoch], [test_acc * 100], marker="D", color="tab:red", linestyle="none",
                    label=f"test: {test_acc * 100:.2f}%")
    a1.set_xlabel("epoch")
    a1.set_ylabel("cross-entropy")
    a1.set_title("loss")
    a1.legend()
    a2.set_xlabel("epoch")
    a2.set_ylabel("accuracy (%)")
    a2.set_title("accuracy")
    a2.set_xlim(a1.get_xlim())
    if a2.get_legend_handles_labels()[0]:
        a2.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def save_plot(history: list, path: str, *, title: str, best_epoch: int | None, test_acc: float | None) -> str | None:
    fig = draw_curves(history, title=title, best_epoch=best_epoch, test_acc=test_acc)
    if fig is None:
        return None
    fig.savefig(path, dpi=110)
    return path


class MetricsLog:
    """``metrics.csv`` (one row per epoch, appended and flushed as each epoch ends) and, when enabled,
    TensorBoard scalars through the ``tensorboard`` package's own ``Writer``."""

    def __init__(self, out: str, history: list, tensorboard: bool) -> None:
        self.path = os.path.join(out, "metrics.csv")
        # rewritten from the history: a resumed run continues the file without the rows of a lost epoch
        with open(self.path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(METRICS)
            writer.writerows([_csv_row(h) for h in history])
        self.writer = None
        if tensorboard:
            from tensorboard.summary import Writer

            self.writer = Writer(os.path.join(out, "tensorboard"))

    def append(self, row: dict) -> None:
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow(_csv_row(row))
        if self.writer is not None:
            for key in METRICS[1:]:
                if row[key] is not None:
                    self.writer.add_scalar(key, row[key], step=row["epoch"])
            self.writer.flush()

    def final(self, epoch: int, test_loss: float, test_acc: float) -> None:
        if self.writer is not None:
            self.writer.add_scalar("test_loss", test_loss, step=epoch)
            self.writer.add_scalar("test_acc", test_acc, step=epoch)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _csv_row(row: dict) -> list:
    # repr keeps every bit of a float, so two runs' files compare exactly
    return ["" if row[k] is None else repr(row[k]) for k in METRICS]


# ------------------------------------------------------------------ the run


class Run:
    """One training run: its state, the training loop and the checkpoint that lets it continue."""

    def __init__(self, args: argparse.Namespace, state: dict | None) -> None:
        self.args = args
        self.rank = 0
        if args.nproc > 1:
            import pylucid.distributed as dist

            self.rank = dist.get_rank()
        self.main = self.rank == 0
        self.device = pylucid.device(args.device)
        if args.nproc > 1 and self.device.type == "cuda" and args.device == "cuda":
            self.device = pylucid.device("cuda", dist.get_node_local_rank() % pylucid.cuda.device_count())
        # rank 0 draws what a one-process run draws; the others' weights are replaced by rank 0's (DDP), and
        # their dropout masks differ from rank 0's
        pylucid.manual_seed(args.seed + self.rank)
        try:
            tx, ty, self.test_x, self.test_y = load_data(args.dataset, args.data_dir)
        except (OSError, pylucid.datasets.DatasetFormatError) as exc:  # a file that breaks on reading
            raise UsageError(f"--data-dir {args.data_dir}: {exc}") from None
        full = TensorDataset(tx, ty)
        n_val = int(round(len(full) * args.val_fraction))
        self.data_gen = pylucid.Generator().manual_seed(args.seed)  # the split, then each epoch's order
        if n_val:
            self.train_set, val_set = random_split(full, [len(full) - n_val, n_val], generator=self.data_gen)
        else:
            self.train_set, val_set = full, None
        # the loaders' own draws (worker seeds) come from a generator of their own, so they never shift the
        # dropout stream or the order, whatever the number of loaders or epochs
        loader_gen = pylucid.Generator().manual_seed(args.seed)
        self.order = EpochOrder(len(self.train_set), self.data_gen)
        self.sampler = None  # the data-parallel share of each epoch, reshuffled from (seed + epoch)
        if args.nproc > 1:
            from pylucid.utils.data import DistributedSampler

            self.sampler = DistributedSampler(self.train_set, seed=args.seed)
        local_batch = args.batch_size // args.nproc
        self.train_loader = DataLoader(self.train_set, batch_size=local_batch,
                                       sampler=self.order if self.sampler is None else self.sampler,
                                       generator=loader_gen)
        self.steps_per_epoch = math.ceil(len(self.train_loader.sampler) / local_batch)
        self.val_loader = None if val_set is None else DataLoader(val_set, batch_size=256, generator=loader_gen)
        self.n_val = 0 if val_set is None else len(val_set)
        self.test_loader = DataLoader(TensorDataset(self.test_x, self.test_y), batch_size=256, generator=loader_gen)
        classes = int(ty.max().item()) + 1
        self.model = build_model(args.model, tx.shape[1], tx.shape[-1], classes).to(self.device)
        self.step_model = wrap_model(self.model, args)
        compiled = bool(getattr(args, "compile", False))
        self.opt = pylucid.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                                       capturable=compiled and self.device.type == "cuda")
        self.sched = pylucid.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=args.lr, epochs=args.epochs,
                                                           steps_per_epoch=self.steps_per_epoch)
        self.train_step = pylucid.compile(self._train_step, mode="reduce-overhead") if compiled else self._train_step
        self.epoch = 0  # epochs finished
        self.step = 0  # steps finished in the current epoch
        self.loss_sum, self.seen, self.epoch_seconds, self.seconds = 0.0, 0, 0.0, 0.0
        self.history: list[dict] = []
        self.best_acc, self.best_epoch = -1.0, None
        self.epoch_start_state = self.data_gen.get_state()
        if state is not None:
            self._restore(state)
        self.interrupted = False

    # -- checkpoint

    def _random_states(self) -> dict:
        return {"default": pylucid.get_rng_state(), "data_at_epoch_start": self.epoch_start_state}

    def checkpoint(self) -> dict:
        return {
            "kind": CHECKPOINT_KIND, "version": CHECKPOINT_VERSION, "pylucid": pylucid.__version__,
            "plan": {name: getattr(self.args, name) for name in PLAN_FLAGS},
            "model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(), "epoch": self.epoch, "step": self.step,
            "epoch_loss_sum": self.loss_sum, "epoch_seen": self.seen, "epoch_seconds": self.epoch_seconds,
            "seconds": self.seconds, "history": self.history, "best_acc": self.best_acc,
            "best_epoch": self.best_epoch, "rng": self._random_states(), "nproc": self.args.nproc,
        }

    def save_checkpoint(self) -> str:
        path = os.path.join(self.args.out, CHECKPOINT)
        if self.main:
            pylucid.save(self.checkpoint(), path)
        return path

    def _restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        self.epoch, self.step = state["epoch"], state["step"]
        self.loss_sum, self.seen = state["epoch_loss_sum"], state["epoch_seen"]
        self.epoch_seconds, self.seconds = state["epoch_seconds"], state["seconds"]
        self.history, self.best_acc, self.best_epoch = state["history"], state["best_acc"], state["best_epoch"]
        pylucid.set_rng_state(state["rng"]["default"])
        self.epoch_start_state = state["rng"]["data_at_epoch_start"]
        # the order of the epoch in progress, drawn again from the state it was drawn from
        self.data_gen.set_state(self.epoch_start_state)
        self.order.new_epoch()
        self.order.start = min(self.step * self.args.batch_size, self.order.n)

    # -- training

    def _on_sigint(self, signum, frame) -> None:
        # The step in progress finishes; a second Ctrl-C raises KeyboardInterrupt at once.
        self.interrupted = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def _cuda_epoch_seed(self) -> None:
        # CuPy's generators cannot save their state: on a GPU each epoch's dropout stream is seeded from
        # (seed, epoch), so a run resumed at an epoch boundary draws what the uninterrupted run drew.
        if self.device.type == "cuda":
            pylucid.cuda.manual_seed(self.args.seed * 1_000_003 + self.epoch)

    def _train_step(self, x, y):
        """One optimisation step on a batch; the loss (what ``--compile`` captures and replays)."""
        loss = nn.functional.cross_entropy(self.step_model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss

    def train_epoch(self, bar_factory) -> bool:
        """Run the steps left in the current epoch; False when Ctrl-C stopped it early."""
        sched, device = self.sched, self.device
        t0 = time.perf_counter() - self.epoch_seconds
        if self.step == 0:
            self.epoch_start_state = self.data_gen.get_state()
            if self.sampler is None:
                self.order.new_epoch()
            else:
                self.sampler.set_epoch(self.epoch)
            self._cuda_epoch_seed()
        batches = bar_factory(self.train_loader, self.epoch + 1, self.step)
        try:
            for x, y in batches:
                x, y = x.to(device), y.to(device)
                loss = self.train_step(x, y)
                sched.step()
                n = y.shape[0]
                self.seen += n
                self.loss_sum += loss.item() * n
                self.step += 1
                self.epoch_seconds = time.perf_counter() - t0
                if hasattr(batches, "set_postfix"):
                    # refresh=False: the bar redraws at tqdm's own interval, not on every batch
                    batches.set_postfix(loss=f"{self.loss_sum / self.seen:.4f}",
                                        img_s=f"{self.seen / self.epoch_seconds:.0f}", refresh=False)
                if self.interrupted:
                    return False
        finally:
            if hasattr(batches, "close"):
                batches.close()
        return True

    def end_epoch(self) -> dict:
        """Validate, log, keep the best weights, and start the next epoch's counters."""
        self.epoch += 1
        if self.args.nproc > 1:  # the log's train loss and throughput are over every rank's images
            import pylucid.distributed as dist

            totals = pylucid.tensor([self.loss_sum, float(self.seen)], dtype=pylucid.float64)
            dist.all_reduce(totals)
            self.loss_sum, self.seen = totals[0].item(), int(totals[1].item())
        # every rank validates on the whole split: the replicas are equal, so each takes the same decision
        val_loss = val_acc = None
        if self.val_loader is not None:
            val_loss, val_acc = evaluate(self.model, self.val_loader, self.device)
        self.seconds += self.epoch_seconds
        row = {"epoch": self.epoch, "train_loss": self.loss_sum / self.seen, "val_loss": val_loss,
               "val_acc": val_acc, "lr": float(self.sched.get_last_lr()[0]),  # a tensor for --compile on CUDA
               "images_per_s": self.seen / max(self.epoch_seconds, 1e-9), "seconds": self.seconds}
        self.history.append(row)
        kept = val_acc is None or val_acc > self.best_acc
        if kept:
            self.best_acc = -1.0 if val_acc is None else val_acc
            self.best_epoch = self.epoch
        if kept and self.main:
            pylucid.save_safetensors(self.model.state_dict(), self.best_path,
                                     metadata={"epoch": str(self.epoch), "model": self.args.model,
                                               "dataset": self.args.dataset})
        self.step, self.loss_sum, self.seen, self.epoch_seconds = 0, 0.0, 0, 0.0
        row["kept"] = kept and val_acc is not None
        return row

    @property
    def best_path(self) -> str:
        return os.path.join(self.args.out, "best.safetensors")

    def title(self, test_acc: float | None) -> str:
        head = f"pylucid train: {self.args.model} on {self.args.dataset}"
        return head if test_acc is None else f"{head}, test accuracy {test_acc * 100:.2f}%"

    def write_results(self, test_loss=None, test_acc=None, status="finished") -> str | None:
        if not self.main:
            return None
        with open(os.path.join(self.args.out, "history.json"), "w") as f:
            json.dump({"args": {k: v for k, v in vars(self.args).items()}, "status": status,
                       "history": self.history, "best_epoch": self.best_epoch, "test_loss": test_loss,
                       "test_acc": test_acc, "seconds": self.seconds}, f, indent=1)
        if not self.history:
            return None
        return save_plot(self.history, os.path.join(self.args.out, "curves.png"), title=self.title(test_acc),
                         best_epoch=self.best_epoch, test_acc=test_acc)


class _NoLog:
    """What ranks other than 0 log: nothing."""

    def append(self, row: dict) -> None:
        pass

    def final(self, epoch: int, test_loss: float, test_acc: float) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bars(enabled: bool, epochs: int, steps: int):
    """A function wrapping an epoch's loader in a tqdm bar on a terminal, or returning it as is."""
    if not enabled:
        return lambda loader, epoch, done: loader
    from tqdm import tqdm

    def bar(loader, epoch, done):
        return tqdm(loader, desc=f"epoch {epoch}/{epochs}", leave=False, file=sys.stdout, dynamic_ncols=True,
                    total=steps, initial=done)

    return bar


def _quiet(*args, **kwargs) -> None:
    """``print`` on the ranks other than 0 of a data-parallel run."""


def train(args: argparse.Namespace, state: dict | None = None) -> int:
    """Train as ``args`` says (continuing ``state``, a checkpoint, if given); the process's exit status.

    With ``args.nproc`` > 1 this is one rank of the job: it joins the default process group and leaves it.
    """
    if args.nproc == 1:
        return _train(args, state)
    import pylucid.distributed as dist

    dist.init_process_group("mpi")
    try:
        if dist.get_world_size() != args.nproc:
            raise UsageError(f"--nproc {args.nproc}, but the launcher started {dist.get_world_size()} processes")
        return _train(args, state)
    finally:
        dist.destroy_process_group()


def _train(args: argparse.Namespace, state: dict | None) -> int:
    run = Run(args, state)
    print = builtins.print if run.main else _quiet  # noqa: A001 - only rank 0 speaks
    n_params = sum(p.numel() for p in run.model.parameters())
    verb = f"resuming at epoch {run.epoch + 1} step {run.step}" if state is not None else "training"
    print(f"pylucid {pylucid.__version__}: {verb} {args.model} ({n_params:,} parameters) on {args.dataset} "
          f"({len(run.train_set)} train / {run.n_val} validation / {len(run.test_x)} test) on {run.device}",
          flush=True)
    log = MetricsLog(args.out, run.history, args.tensorboard) if run.main else _NoLog()
    bars = _progress_bars(args.progress and run.main, args.epochs, run.steps_per_epoch)
    # only the main thread can set a handler; a data-parallel run stops at once on Ctrl-C (KeyboardInterrupt
    # on every rank), since ranks that finish different steps would wait for each other forever
    main_thread = threading.current_thread() is threading.main_thread() and args.nproc == 1
    previous = signal.signal(signal.SIGINT, run._on_sigint) if main_thread else None
    try:
        while run.epoch < args.epochs:
            if run.train_epoch(bars):
                row = run.end_epoch()
                log.append(row)
                val = "" if row["val_acc"] is None else (f"  val loss {row['val_loss']:.4f}  "
                                                         f"val acc {row['val_acc'] * 100:6.2f}%")
                print(f"epoch {row['epoch']:3d}  train loss {row['train_loss']:.4f}{val}  "
                      f"{row['images_per_s']:7.0f} img/s{'  (best, saved)' if row['kept'] else ''}", flush=True)
            path = run.save_checkpoint()  # after every epoch, and mid-epoch when interrupted
            if run.interrupted:
                run.write_results(status="interrupted")
                where = (f"after epoch {run.epoch}" if run.step == 0 else
                         f"in epoch {run.epoch + 1} at step {run.step}/{run.steps_per_epoch}")
                print(f"pylucid train: interrupted {where}; history, plot and checkpoint are in {args.out}; "
                      f"continue with: pylucid train --resume {path}", file=sys.stderr, flush=True)
                return EXIT_INTERRUPTED
            if run.epoch == args.stop_after:
                run.write_results(status="stopped")
                print(f"stopped after epoch {run.epoch} of {args.epochs} (--stop-after); "
                      f"continue with: pylucid train --resume {path}", flush=True)
                return 0
        if not run.main:
            return 0
        if run.best_epoch != run.epoch:
            run.model.load_state_dict(pylucid.load_safetensors(run.best_path, device=str(run.device)))
        test_loss, test_acc = evaluate(run.model, run.test_loader, run.device)
        log.final(run.epoch, test_loss, test_acc)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
        log.close()
    plot = run.write_results(test_loss, test_acc)
    kept = "best checkpoint" if run.val_loader is not None else "final weights (no validation)"
    print(f"{kept}: {run.best_path} (epoch {run.best_epoch})")
    print(f"plot: {plot}" if plot else "plot: skipped (matplotlib is not installed: pip install 'pylucid[plot]')")
    print(f"final test accuracy: {test_acc * 100:.2f}% (test loss {test_loss:.4f}) in {run.seconds:.1f} s")
    return 0 if math.isfinite(test_loss) else 1


def cli(argv: Sequence[str]) -> int:
    """``pylucid ARGS``: the exit status (0 done, 1 the loss diverged, 2 a user error, 130 Ctrl-C)."""
    prog = "pylucid train" if list(argv)[:1] == ["train"] else "pylucid"
    try:
        args = parse_args(argv)
        args, state = resolve(args)
        if args.nproc > 1 and "WORLD_SIZE" not in os.environ:
            from pylucid.distributed.run import main as launch

            # the ranks check the flags again; they show a bar only where this process would
            bar = "--progress" if args.progress else "--no-progress"
            return launch(["-n", str(args.nproc), "-m", "pylucid", *argv, bar], prog=prog)
        return train(args, state)
    except UsageError as exc:
        print(f"{prog}: {exc} (see {prog} --help)", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:  # before the training loop, or a second Ctrl-C
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
