"""pylucid.amp.GradScaler against torch.amp.GradScaler("cpu"): scale, unscale_, skipping steps on
inf/NaN, the growth/backoff logic of update, state_dict, enabled=False."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

import pylucid
from pylucid import optim
from pylucid.amp.grad_scaler import GradScaler


def test_exported_from_amp_when_wired():
    # pylucid/amp/__init__.py is owned by the lead: once it exports GradScaler it must be this class
    exported = getattr(pylucid.amp, "GradScaler", GradScaler)
    assert exported is GradScaler


def _pair(init=(1.5, -2.0, 0.25)):
    pw = pylucid.tensor(np.array(init, dtype=np.float32), requires_grad=True)
    tw = torch.tensor(np.array(init, dtype=np.float32), requires_grad=True)
    return pw, tw


@pytest.mark.parametrize("growth_interval", [1, 3])
def test_sequence_with_infs_matches_torch(growth_interval):
    """Feed both scalers the same scaled gradients, some with inf/NaN: same skips, scales, parameters."""
    pw, tw = _pair()
    popt, topt = optim.SGD([pw], lr=0.1, momentum=0.9), torch.optim.SGD([tw], lr=0.1, momentum=0.9)
    kw = dict(init_scale=2.0**10, growth_factor=4.0, backoff_factor=0.25, growth_interval=growth_interval)
    ps, ts = GradScaler("cpu", **kw), torch.amp.GradScaler("cpu", **kw)
    bad = {2: math.inf, 5: math.nan, 6: -math.inf, 11: math.inf}
    for step in range(16):
        popt.zero_grad()
        topt.zero_grad()
        ploss = ps.scale((pw * pw).sum() * 0.5)
        tloss = ts.scale((tw * tw).sum() * 0.5)
        assert ploss.item() == pytest.approx(tloss.item(), rel=1e-6)
        ploss.backward()
        tloss.backward()
        if step in bad:
            with pylucid.no_grad():
                pw.grad.copy_(pylucid.tensor([bad[step], 1.0, 1.0]))
            with torch.no_grad():
                tw.grad.copy_(torch.tensor([bad[step], 1.0, 1.0]))
        pret = ps.step(popt)
        tret = ts.step(topt)
        assert pret is None and tret is None
        pinf = ps._found_inf_per_device(popt)["cpu"].item()
        tinf = sum(v.item() for v in ts._found_inf_per_device(topt).values())
        assert pinf == tinf == (1.0 if step in bad else 0.0)
        assert ps.last_step_skipped is (step in bad)
        ps.update()
        ts.update()
        assert ps.get_scale() == ts.get_scale(), f"step {step}"
        assert ps._get_growth_tracker() == ts._get_growth_tracker()
        np.testing.assert_allclose(pw.detach().numpy(), tw.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_unscale_then_step_and_errors():
    pw, tw = _pair()
    popt = optim.SGD([pw], lr=0.1)
    scaler = GradScaler("cpu", init_scale=8.0)
    with pytest.raises(RuntimeError, match="scale"):
        scaler.step(popt)
    scaler.scale((pw * 3.0).sum()).backward()
    assert pw.grad.tolist() == [24.0, 24.0, 24.0]
    scaler.unscale_(popt)
    assert pw.grad.tolist() == [3.0, 3.0, 3.0]  # e.g. for gradient clipping between unscale_ and step
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(popt)
    scaler.step(popt)  # does not unscale twice
    np.testing.assert_allclose(pw.detach().numpy(), [1.2, -2.3, -0.05], rtol=1e-6)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(popt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(popt)
    with pytest.raises(RuntimeError, match="closure"):
        scaler.step(popt, closure=lambda: 0)
    scaler.update()
    with pytest.raises(RuntimeError, match="no inf checks"):
        scaler.update()


def test_fp16_grads_are_refused_like_torch():
    w = pylucid.ones(2, dtype=pylucid.float16, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    scaler = GradScaler("cpu", init_scale=8.0)
    scaler.scale(w.sum()).backward()
    with pytest.raises(ValueError, match="FP16"):
        scaler.unscale_(opt)


def test_scale_float16_loss_stays_float16_and_nested_outputs():
    scaler = GradScaler("cpu", init_scale=4.0)
    # 0-d scale: float16 outputs with dimensions stay float16; a 0-d float16 loss promotes like PyTorch's
    out = scaler.scale(pylucid.tensor([1.5], dtype=pylucid.float16))
    assert out.dtype == pylucid.float16 and out.item() == 6.0
    t_out = torch.amp.GradScaler("cpu", init_scale=4.0).scale(torch.tensor(1.5, dtype=torch.float16))
    out0 = scaler.scale(pylucid.tensor(1.5, dtype=pylucid.float16))
    assert str(out0.dtype).split(".")[-1] == str(t_out.dtype).split(".")[-1] and out0.item() == 6.0
    a, (b, c) = scaler.scale([pylucid.tensor(1.0), (pylucid.tensor(2.0), pylucid.tensor(3.0))])
    assert (a.item(), b.item(), c.item()) == (4.0, 8.0, 12.0)
    with pytest.raises(ValueError, match="Tensor"):
        scaler.scale([1.0])


def test_growth_is_capped_at_finite_and_new_scale():
    scaler = GradScaler("cpu", init_scale=2.0**127, growth_interval=1)
    w = pylucid.ones(1, requires_grad=True)
    opt = optim.SGD([w], lr=0.0)
    scaler.scale(w.sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**127  # 2**128 overflows float32: kept as PyTorch does
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0
    scaler.update(new_scale=pylucid.tensor(5.0))
    assert scaler.get_scale() == 5.0
    with pytest.raises(ValueError, match="1-element"):
        scaler.update(new_scale=pylucid.ones(2))


def test_state_dict_matches_torch_and_round_trips():
    kw = dict(init_scale=256.0, growth_factor=3.0, backoff_factor=0.125, growth_interval=7)
    ps, ts = GradScaler("cpu", **kw), torch.amp.GradScaler("cpu", **kw)
    assert ps.state_dict() == ts.state_dict()
    w = pylucid.ones(1, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        ps.scale(w.sum()).backward()
        ps.step(opt)
        ps.update()
    sd = ps.state_dict()
    assert sd == {"scale": 256.0, "growth_factor": 3.0, "backoff_factor": 0.125, "growth_interval": 7,
                  "_growth_tracker": 3}
    other = GradScaler("cpu")
    other.load_state_dict(sd)
    assert other.state_dict() == sd
    ts.load_state_dict(sd)  # the same dict loads into PyTorch's scaler
    assert ts.state_dict() == sd
    clone = pickle.loads(pickle.dumps(ps))
    assert clone.state_dict() == sd
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})


def test_disabled_is_pass_through():
    w = pylucid.tensor([1.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    scaler = GradScaler("cpu", enabled=False)
    loss = (w * 2).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(opt)
    assert w.grad.tolist() == [2.0]
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [0.0]
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0 and scaler.state_dict() == {}


def test_cuda_default_without_gpu_disables_with_warning():
    if pylucid.cuda.is_available():
        pytest.skip("a GPU is present: the cuda scaler stays enabled")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = GradScaler()
    assert not scaler.is_enabled()


def test_bad_arguments():
    with pytest.raises(ValueError, match="growth factor"):
        GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff factor"):
        GradScaler("cpu", backoff_factor=1.0)
    with pytest.raises(ValueError, match="device"):
        GradScaler("tpu")


def test_autocast_training_step_on_cpu():
    """A float16 autocast step with the scaler: finite float32 grads, parameter moves."""
    w = pylucid.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    x = pylucid.tensor(np.ones((5, 3), dtype=np.float32))
    opt = optim.SGD([w], lr=0.01)
    scaler = GradScaler("cpu", init_scale=1024.0)
    with pylucid.amp.autocast("cpu", dtype=pylucid.float16):
        loss = (x @ w).sum()
    assert loss.dtype == pylucid.float16
    scaler.scale(loss).backward()
    assert w.grad.dtype == pylucid.float32
    before = w.detach().numpy().copy()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(w.detach().numpy(), before - 0.01 * 5.0, rtol=1e-5)
