"""Mixed precision on an NVIDIA GPU: ``autocast`` for the forward pass, ``GradScaler`` for the gradients.

Under ``pylucid.amp.autocast("cuda", dtype=pylucid.float16)`` each op runs in
the precision its AMP policy declares: matrix products and convolutions
(``Promote``) in float16 on the tensor cores, numerically delicate ops such as
``exp``, ``softmax`` and ``cross_entropy`` (``ForceFP32``) in float32. The
parameters, their gradients and the optimizer stay in float32. Small float16
gradients would round to zero, so ``GradScaler`` multiplies the loss by a large
factor before ``backward`` and divides the gradients back before the step; a
step whose gradients overflowed is skipped and the factor shrinks.
``pylucid.ops.schema("linear").amp_policy`` tells the policy of any op.

Without a GPU the example says so and stops (exit status 0). ``--cpu`` runs
the same loop on the CPU in bfloat16, which keeps float32's exponent range and
so needs no loss scaling; NumPy has no half-precision matrix kernels, so there
it checks the code, it does not speed anything up.

    python examples/mixed_precision.py            # on a machine with an NVIDIA GPU and CuPy
    python examples/mixed_precision.py --cpu --tiny
"""

import argparse
import os
import sys
import time

import pylucid as pl
from pylucid import nn, optim
from pylucid.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser(description="Mixed-precision training with autocast and GradScaler.")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--cpu", action="store_true", help="run on the CPU in bfloat16 instead")
    parser.add_argument("--tiny", action="store_true", default=os.environ.get("PYLUCID_EXAMPLES_TINY") == "1",
                        help="a few seconds' smoke test (also: PYLUCID_EXAMPLES_TINY=1)")
    args = parser.parse_args()
    if args.cpu:
        device, half = "cpu", pl.bfloat16
    elif pl.cuda.is_available():
        device, half = "cuda", pl.float16
    else:
        print("mixed_precision.py: skipped, no CUDA GPU here (install CuPy on a machine with an NVIDIA GPU: "
              "pip install 'pylucid[cuda]'); --cpu runs the bfloat16 variant on the CPU")
        sys.exit(0)
    pl.manual_seed(0)

    train_x, train_y = pl.datasets.load_digits("train")
    test_x, test_y = pl.datasets.load_digits("test")
    epochs = args.epochs
    if args.tiny:
        train_x, train_y, epochs = train_x[:256], train_y[:256], 2
    loader = DataLoader(TensorDataset(train_x, train_y), batch_size=64, shuffle=True)

    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                          nn.Linear(512, 10)).to(device)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    # float16 needs loss scaling; bfloat16 does not (enabled=False makes every scaler call a pass-through)
    scaler = pl.amp.GradScaler(device, enabled=half == pl.float16)

    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            with pl.amp.autocast(device, dtype=half):
                logits = model(x)                          # Linear: Promote, so computed in `half`
                loss = nn.functional.cross_entropy(logits, y)  # ForceFP32: computed in float32
            opt.zero_grad()
            scaler.scale(loss).backward()                  # backward outside autocast, as in PyTorch
            scaler.step(opt)                               # unscales; skips the step on inf/NaN gradients
            scaler.update()
        seconds = time.perf_counter() - start
        scale = f"{scaler.get_scale():g}" if scaler.is_enabled() else "off"
        print(f"epoch {epoch:2d}  loss {loss.item():.4f}  loss scale {scale}  {seconds:.2f} s")

    weight = model[1].weight
    print(f"inside autocast: logits {logits.dtype}, loss {loss.dtype}; "
          f"outside: weights {weight.dtype}, gradients {weight.grad.dtype}")
    model.eval()
    with pl.no_grad(), pl.amp.autocast(device, dtype=half):
        predictions = model(test_x.to(device)).argmax(dim=1)
    accuracy = (predictions == test_y.to(device)).float().mean().item()
    print(f"test accuracy {accuracy:.1%} on {device} with {half}")


if __name__ == "__main__":
    main()
