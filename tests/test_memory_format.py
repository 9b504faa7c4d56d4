"""Memory formats (``pylucid.channels_last`` and friends) against PyTorch: strides, flags, copies and errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import pylucid

SHAPES = [(2, 3, 4, 5), (3, 8, 1, 7), (1, 2, 3, 3)]


def _pair(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return pylucid.tensor(x), torch.tensor(x)


@pytest.mark.parametrize("shape", SHAPES)
def test_to_channels_last_strides_flags_and_values_match_torch(shape):
    p, t = _pair(shape)
    pc, tc = p.to(memory_format=pylucid.channels_last), t.to(memory_format=torch.channels_last)
    assert pc.stride() == tc.stride() and pc.shape == tuple(tc.shape)
    assert pc.is_contiguous() == tc.is_contiguous()
    assert pc.is_contiguous(memory_format=pylucid.channels_last)
    np.testing.assert_array_equal(pc.numpy(), tc.numpy())
    # back to row-major, clone (preserve_format) and the *_like functions
    assert pc.contiguous().stride() == tc.contiguous().stride()
    assert pc.clone().stride() == tc.clone().stride()
    assert pylucid.clone(pc, memory_format=pylucid.contiguous_format).stride() == \
        torch.clone(tc, memory_format=torch.contiguous_format).stride()
    for name in ("zeros_like", "ones_like", "empty_like"):
        assert getattr(pylucid, name)(pc).stride() == getattr(torch, name)(tc).stride(), name
    assert pylucid.full_like(pc, 2.0).stride() == torch.full_like(tc, 2.0).stride()
    assert pylucid.zeros_like(pc, memory_format=pylucid.contiguous_format).is_contiguous()
    # element-wise results keep the layout on the CPU (NumPy's ufuncs follow their operands' order)
    assert (pc + pc).stride() == (tc + tc).stride()
    assert pylucid.relu(pc).stride() == torch.relu(tc).stride()


def test_channels_last_3d_and_empty():
    p = pylucid.zeros(2, 3, 4, 5, 6).to(memory_format=pylucid.channels_last_3d)
    t = torch.zeros(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)
    assert p.stride() == t.stride() and p.is_contiguous(memory_format=pylucid.channels_last_3d)
    assert not p.is_contiguous(memory_format=pylucid.channels_last)  # another rank
    assert pylucid.empty(2, 3, 4, 5, memory_format=pylucid.channels_last).stride() == \
        torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()


def test_contiguous_returns_self_when_already_in_the_format_and_copies_otherwise():
    p = pylucid.zeros(2, 3, 4, 5)
    c = p.contiguous(memory_format=pylucid.channels_last)
    assert c is not p and c.contiguous(memory_format=pylucid.channels_last) is c
    assert p.contiguous() is p
    q = pylucid.clone(c)  # preserve_format: channels-last, and a copy
    q[0, 0, 0, 0] = 1.0
    assert c[0, 0, 0, 0].item() == 0.0


def test_memory_format_is_differentiable_and_module_to_converts_4d_weights():
    w = pylucid.randn(2, 3, 4, 5, requires_grad=True)
    y = w.to(memory_format=pylucid.channels_last)
    (y * y).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy(), rtol=1e-6)
    m = pylucid.nn.Sequential(pylucid.nn.Conv2d(3, 4, 3), pylucid.nn.BatchNorm2d(4), pylucid.nn.Linear(2, 2))
    weight = m[0].weight
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Linear(2, 2))
    m.to(memory_format=pylucid.channels_last)
    tm.to(memory_format=torch.channels_last)
    assert m[0].weight is weight  # moved in place, the same Parameter
    assert m[0].weight.stride() == tm[0].weight.stride()
    assert m[2].weight.stride() == tm[2].weight.stride()  # 2-d: untouched


def test_memory_format_errors_and_identity():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        pylucid.zeros(2, 3, 4).to(memory_format=pylucid.channels_last)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        pylucid.zeros(2, 3, 4, 5).contiguous(memory_format=pylucid.preserve_format)
    with pytest.raises(TypeError, match="memory_format must be a pylucid.memory_format"):
        pylucid.zeros(2, 3, 4, 5).contiguous(memory_format="channels_last")
    assert pickle.loads(pickle.dumps(pylucid.channels_last)) is pylucid.channels_last
    assert repr(pylucid.channels_last) == "pylucid.channels_last"
    assert isinstance(pylucid.channels_last, pylucid.memory_format)
