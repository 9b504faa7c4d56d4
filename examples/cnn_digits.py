"""A small convolutional network on the bundled 8x8 digits, with a learning-rate schedule and a checkpoint.

Beyond the MLP example: ``Conv2d`` and pooling, dropout (so ``train()`` and
``eval()`` differ), AdamW with a cosine schedule stepped every batch, a
validation split from ``random_split``, and the best weights saved to and
loaded back from a safetensors file.

    python examples/cnn_digits.py            # about 98 % test accuracy
    python examples/cnn_digits.py --tiny
"""

import argparse
import os
import tempfile

import pylucid as pl
from pylucid import nn, optim
from pylucid.utils.data import DataLoader, TensorDataset, random_split


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(),    # (N, 16, 8, 8)
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(),   # (N, 32, 8, 8)
        nn.MaxPool2d(2),                                          # (N, 32, 4, 4)
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 128), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(128, 10),
    )


def accuracy(model: nn.Module, loader: DataLoader) -> float:
    model.eval()                                  # dropout off
    correct = total = 0
    with pl.no_grad():
        for images, labels in loader:
            correct += int((model(images).argmax(dim=1) == labels).sum().item())
            total += len(labels)
    model.train()
    return correct / total


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a CNN on the bundled digits.")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "cnn_digits.safetensors"))
    parser.add_argument("--tiny", action="store_true", default=os.environ.get("PYLUCID_EXAMPLES_TINY") == "1",
                        help="a few seconds' smoke test (also: PYLUCID_EXAMPLES_TINY=1)")
    args = parser.parse_args()
    pl.manual_seed(0)

    images, labels = pl.datasets.load_digits("train")
    test_x, test_y = pl.datasets.load_digits("test")
    epochs = args.epochs
    if args.tiny:
        images, labels, epochs = images[:256], labels[:256], 2
    # hold out 10 % of the training split to choose the best epoch; the test set is only for the final figure
    train_set, val_set = random_split(TensorDataset(images, labels), [0.9, 0.1],
                                      generator=pl.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)

    model = make_model()
    opt = optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * len(train_loader))

    best = -1.0
    for epoch in range(1, epochs + 1):
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()                          # per batch: T_max counts batches
        val = accuracy(model, val_loader)
        saved = ""
        if val > best:
            best = val
            pl.save_safetensors(model.state_dict(), args.out)
            saved = "  (best so far, saved)"
        print(f"epoch {epoch:2d}  last batch loss {loss.item():.4f}  validation accuracy {val:.1%}{saved}")

    model.load_state_dict(pl.load_safetensors(args.out))  # the best epoch's weights
    test = accuracy(model, DataLoader(TensorDataset(test_x, test_y), batch_size=256))
    print(f"test accuracy of the best epoch: {test:.1%} (weights in {args.out})")


if __name__ == "__main__":
    main()
