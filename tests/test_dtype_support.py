"""Which dtypes the sort-like ops and reductions accept, against PyTorch: both accept (same result dtype) or both
refuse (pylucid with a typed DtypeMismatch)."""

import pytest
import torch

import pylucid as pl
from pylucid.errors import DtypeMismatch

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
OPS = {
    "median": lambda L, t: L.median(t),
    "median_dim": lambda L, t: L.median(t, 1).values,
    "nanmedian": lambda L, t: L.nanmedian(t),
    "nanmedian_dim": lambda L, t: L.nanmedian(t, 1).values,
    "quantile": lambda L, t: L.quantile(t, 0.5),
    "nanquantile": lambda L, t: L.nanquantile(t, 0.5),
    "kthvalue": lambda L, t: L.kthvalue(t, 2, 1).values,
    "topk": lambda L, t: L.topk(t, 2, 1).values,
    "mode": lambda L, t: L.mode(t, 1).values,
    "sort": lambda L, t: L.sort(t, 1).values,
    "msort": lambda L, t: L.msort(t),
    "cummax": lambda L, t: L.cummax(t, 1).values,
    "amax": lambda L, t: L.amax(t),
    "unique": lambda L, t: L.unique(t),
    "histc": lambda L, t: L.histc(t, 4, 0, 3),
    "histogram": lambda L, t: L.histogram(t, 4).hist,
    "searchsorted": lambda L, t: L.searchsorted(L.sort(t.flatten()).values, t),
    "logcumsumexp": lambda L, t: L.logcumsumexp(t, 1),
}


def _make(L, dt):
    t = L.tensor([[1, 0, 3, 2], [2, 2, 0, 1], [0, 1, 1, 3]])
    return (t > 1) if dt == "bool" else t.to(getattr(L, dt))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", list(OPS))
def test_accepts_as_torch(name, dt):
    try:
        want = str(OPS[name](torch, _make(torch, dt)).dtype).split(".")[-1]
    except (RuntimeError, TypeError):
        with pytest.raises(DtypeMismatch, match=name.split("_dim")[0]):
            OPS[name](pl, _make(pl, dt))
        return
    assert OPS[name](pl, _make(pl, dt)).dtype.name == want
