"""Common uses of the public API: mypy and pyright must accept this file with zero errors (tests/test_typing.py).

It is type-checked, never run; ``reveal``-style checks are assignments to annotated variables, so a wrong type
is an error.
"""

from __future__ import annotations

import pylucid as pl
import pylucid.nn.functional as F
from pylucid import Tensor, nn
from pylucid.utils.data import DataLoader, TensorDataset


def creation() -> list[Tensor]:
    return [pl.tensor([1.0, 2.0]), pl.zeros(2, 3), pl.ones(3), pl.randn(2, 3), pl.rand(4), pl.randint(0, 5, (3,)),
            pl.arange(5), pl.linspace(0.0, 1.0, 5), pl.eye(3), pl.full((2,), 7.0), pl.zeros_like(pl.ones(2)),
            pl.empty(2, dtype=pl.float64), pl.cat([pl.ones(2), pl.zeros(2)]), pl.stack([pl.ones(2), pl.ones(2)])]


def arithmetic(x: Tensor, y: Tensor) -> Tensor:
    z: Tensor = x + y * 2 - 1.0 / (y + 3)
    z = z @ y.T if z.ndim == 2 else z
    z = -z ** 2 + abs(z) + (x > y).float() + (x == y).long().float()
    z += 1
    return z


def methods(x: Tensor) -> float:
    s: Tensor = x.sum() + x.mean(dim=0).sum() + x.exp().log1p().sqrt().max()
    y: Tensor = x.reshape(-1).view(2, -1).transpose(0, 1).contiguous().unsqueeze(0).squeeze(0)
    y = y.to(pl.float64).detach().clone().requires_grad_()
    n: int = x.numel() + x.dim()
    shape = x.shape
    values: list = x.tolist()
    print(shape, values, n, y.abs_(), x.grad, x.dtype, x.device)
    return s.item() + float(x.std())


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def training() -> float:
    pl.manual_seed(0)
    model = Net()
    seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to("cpu")
    layer = nn.Linear(4, 3)
    opt = pl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    adam = pl.optim.Adam(seq.parameters(), lr=1e-3)
    data = TensorDataset(pl.randn(32, 4), pl.randint(0, 3, (32,)))
    loss = pl.tensor(0.0)
    for xb, yb in DataLoader(data, batch_size=8, shuffle=True):
        out: Tensor = model(xb)
        direct: Tensor = layer(xb)
        loss = F.cross_entropy(out, yb) + nn.functional.mse_loss(direct, pl.zeros_like(direct)) + seq(xb).mean()
        opt.zero_grad()
        adam.zero_grad()
        loss.backward()
        opt.step()
        adam.step()
    model.eval()
    with pl.no_grad():
        pred: Tensor = model(pl.randn(2, 4)).argmax(dim=1)
    print(pred, seq[0], model.state_dict().keys())
    return loss.item()


def functional_and_linalg(a: Tensor) -> Tensor:
    h: Tensor = F.softmax(a, dim=-1) + F.gelu(a) + F.dropout(a, p=0.5, training=False)
    m = a @ a.mT + pl.eye(a.shape[-1])
    inv: Tensor = pl.linalg.inv(m)
    sol: Tensor = pl.linalg.solve(m, a)
    nrm: Tensor = pl.linalg.norm(a) + pl.linalg.det(m)
    spec: Tensor = pl.fft.rfft(a).abs() if a.ndim == 1 else pl.special.erf(a)
    return h + inv @ sol + nrm + spec.sum()
