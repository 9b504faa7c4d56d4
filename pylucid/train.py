"""The main job: ``pylucid train`` trains a small CNN from the command line.

By default it trains on the 8x8 handwritten digits bundled with pylucid (no
download), holds out part of the training split for validation, evaluates
every epoch, keeps the best checkpoint (safetensors), draws a loss/accuracy
plot when matplotlib is installed, and prints the final test accuracy.

    pylucid train                                  # digits, CNN, CPU
    pylucid train --epochs 5 --device cuda
    pylucid train --dataset mnist --data-dir ~/data/mnist

Built only from pylucid's public API: ``nn``, ``optim``, ``utils.data``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import pylucid
from pylucid import nn
from pylucid.utils.data import DataLoader, TensorDataset, random_split

DATASETS = ("digits", "mnist", "fashion-mnist", "cifar10")
MODELS = ("cnn", "mlp")


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


def load_data(dataset: str, data_dir: str | None):
    """``(train_x, train_y, test_x, test_y)`` as tensors, images float32 in [0, 1] shaped (N, C, H, W)."""
    from pylucid import datasets

    if dataset == "digits":
        tx, ty = datasets.load_digits("train")
        vx, vy = datasets.load_digits("test")
        return tx, ty, vx, vy
    if data_dir is None:
        raise SystemExit(f"pylucid train: --dataset {dataset} needs --data-dir DIR (the folder holding its files)")
    cls = {"mnist": datasets.MNIST, "fashion-mnist": datasets.FashionMNIST, "cifar10": datasets.CIFAR10}[dataset]
    train, test = cls(data_dir, train=True), cls(data_dir, train=False)
    # stored as bytes: scale the whole set to float32 in [0, 1] once
    return train.data.float() / 255.0, train.targets, test.data.float() / 255.0, test.targets


def evaluate(model, loader, device) -> tuple[float, float]:
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


def save_plot(history: list, path: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    epochs = [h["epoch"] for h in history]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    a1.plot(epochs, [h["train_loss"] for h in history], label="train")
    a1.plot(epochs, [h["val_loss"] for h in history], label="validation")
    a1.set_xlabel("epoch")
    a1.set_ylabel("cross-entropy")
    a1.legend()
    a2.plot(epochs, [h["val_acc"] * 100 for h in history], color="tab:green")
    a2.set_xlabel("epoch")
    a2.set_ylabel("validation accuracy (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def parse_args(argv):
    p = argparse.ArgumentParser(prog="pylucid", description="pylucid command line")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a small image classifier", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--dataset", choices=DATASETS, default="digits")
    t.add_argument("--data-dir", default=None, help="folder with the dataset files (not needed for digits)")
    t.add_argument("--model", choices=MODELS, default="cnn")
    t.add_argument("--epochs", type=int, default=15)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--weight-decay", type=float, default=1e-4)
    t.add_argument("--val-fraction", type=float, default=0.1, help="share of the training split held out")
    t.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", default="runs/latest", help="output folder (checkpoint, plot, history)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or not (0 < args.lr) or not (0 <= args.val_fraction < 1):
        p.error("--epochs and --batch-size must be >= 1, --lr > 0 and 0 <= --val-fraction < 1")
    return args


def cli(argv) -> int:
    args = parse_args(argv)
    if args.command != "train":
        return 2
    return train(args)


def train(args) -> int:
    from tqdm import tqdm

    pylucid.manual_seed(args.seed)
    device = pylucid.device(args.device)
    tx, ty, test_x, test_y = load_data(args.dataset, args.data_dir)
    full = TensorDataset(tx, ty)
    n_val = int(round(len(full) * args.val_fraction))
    gen = pylucid.Generator().manual_seed(args.seed)
    if n_val:
        train_set, val_set = random_split(full, [len(full) - n_val, n_val], generator=gen)
    else:
        train_set, val_set = full, TensorDataset(test_x, test_y)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=gen)
    val_loader = DataLoader(val_set, batch_size=256)
    test_loader = DataLoader(TensorDataset(test_x, test_y), batch_size=256)
    classes = int(ty.max().item()) + 1
    model = build_model(args.model, tx.shape[1], tx.shape[-1], classes).to(device)
    opt = pylucid.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sched = pylucid.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                  steps_per_epoch=len(train_loader))
    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "best.safetensors")
    n_params = sum(p.numel() for p in model.parameters())
    print(f"pylucid {pylucid.__version__}: training {args.model} ({n_params:,} parameters) on {args.dataset} "
          f"({len(train_set)} train / {len(val_set)} validation / {len(test_x)} test) on {device}")
    history, best_acc, t_start = [], -1.0, time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        seen, loss_sum, t0 = 0, 0.0, time.perf_counter()
        bar = tqdm(train_loader, desc=f"epoch {epoch}/{args.epochs}", leave=False, disable=args.no_progress,
                   file=sys.stdout, dynamic_ncols=True)
        for x, y in bar:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            n = y.shape[0]
            seen += n
            loss_sum += loss.item() * n
            # refresh=False: the bar redraws at tqdm's own interval, not on every batch
            bar.set_postfix(loss=f"{loss_sum / seen:.4f}", img_s=f"{seen / (time.perf_counter() - t0):.0f}",
                            refresh=False)
        val_loss, val_acc = evaluate(model, val_loader, device)
        rate = seen / (time.perf_counter() - t0)
        history.append({"epoch": epoch, "train_loss": loss_sum / seen, "val_loss": val_loss, "val_acc": val_acc,
                        "images_per_s": rate})
        flag = ""
        if val_acc > best_acc:
            best_acc = val_acc
            pylucid.save_safetensors(model.state_dict(), ckpt, metadata={"epoch": str(epoch), "model": args.model,
                                                                         "dataset": args.dataset})
            flag = "  (best, saved)"
        print(f"epoch {epoch:3d}  train loss {loss_sum / seen:.4f}  val loss {val_loss:.4f}  "
              f"val acc {val_acc * 100:6.2f}%  {rate:7.0f} img/s{flag}")
    model.load_state_dict(pylucid.load_safetensors(ckpt, device=str(device)))
    test_loss, test_acc = evaluate(model, test_loader, device)
    elapsed = time.perf_counter() - t_start
    with open(os.path.join(args.out, "history.json"), "w") as f:
        json.dump({"args": vars(args), "history": history, "test_loss": test_loss, "test_acc": test_acc,
                   "seconds": elapsed}, f, indent=1)
    plot = save_plot(history, os.path.join(args.out, "curves.png"))
    print(f"best checkpoint: {ckpt}")
    print(f"plot: {plot}" if plot else "plot: skipped (matplotlib is not installed: pip install 'pylucid[plot]')")
    print(f"final test accuracy: {test_acc * 100:.2f}% (test loss {test_loss:.4f}) in {elapsed:.1f} s")
    return 0 if math.isfinite(test_loss) else 1
