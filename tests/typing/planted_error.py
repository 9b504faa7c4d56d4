"""Three deliberate type errors: mypy and pyright must report each (tests/test_typing.py)."""

import pylucid as pl

pl.tensor([1.0]).definitely_not_a_method()  # error 1: Tensor has no such attribute
count: int = pl.tensor([1.0])  # error 2: a Tensor is not an int


class Net(pl.nn.Module):
    def forward(self, x: pl.Tensor) -> pl.Tensor:
        return x


wrong: str = Net()(pl.ones(2))  # error 3: model(x) is the Tensor forward returns
