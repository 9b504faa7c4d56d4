"""Deliberate type errors: each line marked ``# error`` must be reported by mypy and pyright, each marked
``# error (pyright)`` by pyright (mypy types an unannotated ``forward``'s result as ``Any``) (tests/test_typing.py)."""

import pylucid as pl

pl.tensor([1.0]).definitely_not_a_method()  # error: Tensor has no such attribute
count: int = pl.tensor([1.0])  # error: a Tensor is not an int
pl.sqrt(2.0)  # error: an op of one tensor argument takes a Tensor


class Net(pl.nn.Module):
    def forward(self, x: pl.Tensor) -> pl.Tensor:
        return x


wrong: str = Net()(pl.ones(2))  # error: model(x) is the Tensor forward returns
label: str = pl.nn.Linear(2, 3)(pl.ones(2))  # error (pyright): the built-in layers' model(x) is a Tensor too
