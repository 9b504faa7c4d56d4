"""A multilayer perceptron on the 8x8 handwritten digits that ship with pylucid.

The smallest complete training program: data, model, loss, optimizer, the
loop, and an accuracy on images the model never saw.

    python examples/mlp_digits.py            # about 97 % test accuracy in a few seconds
    python examples/mlp_digits.py --tiny     # a smoke test: a slice of the data, two epochs
"""

import argparse
import os

import pylucid as pl
from pylucid import nn, optim
from pylucid.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser(description="Train an MLP on the bundled digits.")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--tiny", action="store_true", default=os.environ.get("PYLUCID_EXAMPLES_TINY") == "1",
                        help="a few seconds' smoke test (also: PYLUCID_EXAMPLES_TINY=1)")
    args = parser.parse_args()
    pl.manual_seed(0)  # the weights and the shuffling are reproducible

    # (N, 1, 8, 8) float32 images in [0, 1] and int64 labels 0..9
    train_x, train_y = pl.datasets.load_digits("train")
    test_x, test_y = pl.datasets.load_digits("test")
    epochs = args.epochs
    if args.tiny:
        train_x, train_y, epochs = train_x[:256], train_y[:256], 2

    model = nn.Sequential(
        nn.Flatten(),                 # (N, 1, 8, 8) -> (N, 64)
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 10),           # one logit per class; cross_entropy applies the softmax
    )
    opt = optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(train_x, train_y), batch_size=64, shuffle=True)

    for epoch in range(1, epochs + 1):
        model.train()
        total = 0.0
        for images, labels in loader:
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()           # gradients accumulate: clear last step's
            loss.backward()
            opt.step()
            total += loss.item() * len(labels)
        model.eval()
        with pl.no_grad():            # no graph for evaluation: less memory, less time
            accuracy = (model(test_x).argmax(dim=1) == test_y).float().mean().item()
        print(f"epoch {epoch:2d}  train loss {total / len(train_y):.4f}  test accuracy {accuracy:.1%}")


if __name__ == "__main__":
    main()
