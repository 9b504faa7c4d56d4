"""Programs written for PyTorch run with only their import line changed (``import pylucid as torch``).

Each program below is written as a PyTorch user writes one (after pytorch/examples and nanoGPT): it
picks its device through ``torch.accelerator``, uses ``torch.compile``, ``torch.cuda.amp``,
``Tensor.new_zeros``, ``RNN.flatten_parameters``, saves and reloads checkpoints and whole modules.
They run as scripts in a fresh interpreter (so a whole module pickles as ``__main__.Model``, as in
real use) and print their results as JSON, which the tests check. The namespaces themselves
(``accelerator``, ``cuda.amp``, ``compile``, ``hub``, ``utils.tensorboard``, ``nn.modules``) are
tested directly further down.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import pylucid
import pylucid.hub
import pylucid.nn.modules
from pylucid.errors import DeviceUnavailable

ROOT = Path(__file__).resolve().parent.parent


def run_program(source: str, tmp_path: Path) -> tuple[dict, str]:
    """Run ``source`` as a script in ``tmp_path`` (warnings always shown); its last stdout line as JSON."""
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    proc = subprocess.run([sys.executable, "-W", "always", str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def expected_device() -> str:
    return "cuda:0" if pylucid.cuda.is_available() else "cpu"


# ---------------------------------------------------------------------------------------- programs

IMAGE_CLASSIFIER = """
import json
import pylucid as torch
import pylucid.nn.functional as F
from pylucid.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, 1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = torch.nn.Dropout(0.25)
        self.fc1 = torch.nn.Linear(16 * 2 * 2, 32)
        self.fc2 = torch.nn.Linear(32, 2)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def make_data(n, generator):
    # two classes of 8x8 images: bright top half (0) or bright bottom half (1), in noise
    labels = torch.randint(0, 2, (n,), generator=generator)
    top = (labels == 0).float().view(n, 1, 1, 1)
    signal = torch.cat([top.expand(n, 1, 4, 8), (1 - top).expand(n, 1, 4, 8)], dim=2)
    return TensorDataset(signal + 0.3 * torch.randn(n, 1, 8, 8, generator=generator), labels)


def test(model, device, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / len(loader.dataset), correct / len(loader.dataset)


def main():
    use_accel = torch.accelerator.is_available()
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
    torch.manual_seed(1)
    g = torch.Generator().manual_seed(0)
    train_loader = DataLoader(make_data(256, g), batch_size=32, shuffle=True)
    test_loader = DataLoader(make_data(128, g), batch_size=64)
    model = Net().to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for epoch in range(3):
        model.train()
        for data, target in train_loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    if use_accel:
        torch.accelerator.synchronize()
    test_loss, accuracy = test(model, device, test_loader)
    torch.save(model.state_dict(), "mnist_cnn.pt")
    reloaded = Net().to(device)
    reloaded.load_state_dict(torch.load("mnist_cnn.pt", weights_only=True))
    same = test(reloaded, device, test_loader) == (test_loss, accuracy)
    print(json.dumps({"device": str(device), "count": torch.accelerator.device_count(), "first": losses[0],
                      "last": sum(losses[-4:]) / 4, "accuracy": accuracy, "reloaded_same": same,
                      "lr": optimizer.param_groups[0]["lr"]}))


if __name__ == "__main__":
    main()
"""


def test_image_classifier_picks_its_device_through_accelerator(tmp_path):
    out, _ = run_program(IMAGE_CLASSIFIER, tmp_path)
    assert out["device"] == expected_device()
    assert out["count"] == (pylucid.cuda.device_count() if pylucid.cuda.is_available() else 0)
    assert out["accuracy"] >= 0.95 and out["last"] < 0.5 * out["first"]
    assert out["reloaded_same"] and out["lr"] == pytest.approx(1.0 * 0.7**3)
    assert (tmp_path / "mnist_cnn.pt").exists()


GPT_TRAINING = """
import json, math
from contextlib import nullcontext
import pylucid as torch
import pylucid.nn as nn
from pylucid.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(n_embd), CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


@torch.compile
def lr_at(it, warmup=10, max_iters=80, lr=3e-3):
    if it < warmup:
        return lr * (it + 1) / warmup
    return lr * 0.5 * (1 + math.cos(math.pi * (it - warmup) / (max_iters - warmup)))


device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device == "cpu" else torch.amp.autocast(device_type=device, dtype=ptdtype)
torch.manual_seed(1337)
text = "hello pylucid, hello torch. " * 40
chars = sorted(set(text))
data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
block_size, batch_size = 16, 8


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix.tolist()])
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


model = GPT(len(chars), block_size, n_layer=2, n_head=2, n_embd=32).to(device)
uncompiled = model
model = torch.compile(model)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, betas=(0.9, 0.95))
losses = []
for it in range(80):
    for group in optimizer.param_groups:
        group["lr"] = lr_at(it)
    X, Y = get_batch()
    with ctx:
        logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    losses.append(loss.item())
print(json.dumps({"device": str(X.device), "compiled_is_model": model is uncompiled,
                  "scaler_enabled": scaler.is_enabled(), "first": losses[0], "last": sum(losses[-5:]) / 5,
                  "logits_dtype": str(logits.dtype)}))
"""


def test_gpt_training_script_with_compile_and_cuda_amp(tmp_path):
    out, stderr = run_program(GPT_TRAINING, tmp_path)
    assert out["device"] == expected_device() and out["compiled_is_model"]
    assert out["last"] < 0.35 * out["first"]  # it learns the repeated text
    assert stderr.count("compilation is not performed yet") == 1  # two compile calls, one warning
    assert "pylucid.cuda.amp.GradScaler(args...)` is deprecated" in stderr
    if not pylucid.cuda.is_available():
        assert not out["scaler_enabled"] and "CUDA is not available" in stderr
    else:
        assert out["logits_dtype"] in ("pylucid.bfloat16", "pylucid.float16")


LANGUAGE_MODEL = """
import json, math, pickle
import pylucid as torch
import pylucid.nn as nn
import pylucid.nn.functional as F


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source, i, bptt=8):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def evaluate(model, source, criterion):
    model.eval()
    total, hidden = 0.0, model.init_hidden(source.size(1))
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, 8):
            data, targets = get_batch(source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total += len(data) * criterion(output, targets).item()
    return total / (len(source) - 1)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(1111)
words = ("the cat sat on the mat and the dog sat on the log " * 30).split()
vocab = sorted(set(words))
ids = torch.tensor([vocab.index(w) for w in words], dtype=torch.long)
train_data, val_data = batchify(ids[:280], 4, device), batchify(ids[280:], 2, device)
model = RNNModel(len(vocab), 16, 32, 2).to(device)
model.rnn.flatten_parameters()
criterion = nn.NLLLoss()
lr, history = 2.0, []
for epoch in range(6):
    model.train()
    hidden = model.init_hidden(4)
    for i in range(0, train_data.size(0) - 1, 8):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    history.append(evaluate(model, val_data, criterion))
with open("model.pt", "wb") as f:
    torch.save(model, f)
refused = None
try:
    with open("model.pt", "rb") as f:
        torch.load(f)
except pickle.UnpicklingError as exc:
    refused = str(exc)
with open("model.pt", "rb") as f:
    model = torch.load(f, weights_only=False)
    model.rnn.flatten_parameters()
print(json.dumps({"history": history, "reloaded": evaluate(model, val_data, criterion),
                  "type": type(model).__name__, "refused": refused, "device": str(next(model.parameters()).device)}))
"""


def test_language_model_saves_and_reloads_its_whole_module(tmp_path):
    out, _ = run_program(LANGUAGE_MODEL, tmp_path)
    history = out["history"]
    assert history[-1] < 0.5 * history[0] and history[-1] < 1.0
    assert out["reloaded"] == history[-1]  # the reloaded module is the trained one, bit for bit
    assert out["type"] == "RNNModel" and out["device"] == expected_device()
    assert "__main__.RNNModel" in out["refused"] and "weights_only=False" in out["refused"]


# ------------------------------------------------------------------------------- accelerator


def test_accelerator_reports_the_machine():
    acc = pylucid.accelerator
    if pylucid.cuda.is_available():
        assert acc.is_available() and acc.current_accelerator() == pylucid.device("cuda")
        assert acc.device_count() == pylucid.cuda.device_count() >= 1
        acc.set_device_index(0)
        assert acc.current_device_index() == 0 and acc.current_device_idx() == 0
        acc.synchronize()
        acc.synchronize("cuda:0")
        with acc.device_index(0):
            assert acc.current_device_index() == 0
        assert acc.memory_allocated() >= 0
        with pytest.raises(ValueError, match="not the current accelerator"):
            acc.synchronize("cpu")
    else:
        assert acc.is_available() is False and acc.current_accelerator() is None and acc.device_count() == 0
        for call in (acc.current_device_index, acc.synchronize, lambda: acc.set_device_index(0),
                     acc.memory_allocated):
            with pytest.raises(DeviceUnavailable, match="none is available"):
                call()
        with acc.device_index(None):  # no device asked for: nothing to do, as in PyTorch
            pass


# ------------------------------------------------------------------------------- cuda.amp


def test_cuda_amp_is_the_deprecated_spelling_of_amp():
    with pytest.warns(FutureWarning, match=r"pylucid.amp.GradScaler\('cuda'"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the no-GPU notice, when there is no GPU
            scaler = pylucid.cuda.amp.GradScaler(init_scale=8.0, growth_interval=3)
    assert isinstance(scaler, pylucid.amp.GradScaler)
    assert scaler.is_enabled() == pylucid.cuda.is_available()
    with pytest.warns(FutureWarning, match=r"pylucid.amp.autocast\('cuda'"):
        ctx = pylucid.cuda.amp.autocast(dtype=pylucid.bfloat16)
    assert isinstance(ctx, pylucid.amp.autocast) and ctx.device_type == "cuda"
    with ctx:
        assert pylucid.amp.is_autocast_enabled("cuda")
        assert pylucid.amp.get_autocast_dtype("cuda") == pylucid.bfloat16
    assert not pylucid.amp.is_autocast_enabled("cuda")
    with pytest.warns(FutureWarning):
        disabled = pylucid.cuda.amp.autocast(enabled=False)
    with disabled:
        assert not pylucid.amp.is_autocast_enabled("cuda")
    # every function pylucid.cuda had is still there
    for name in ("is_available", "device_count", "current_device", "set_device", "get_device_name", "synchronize",
                 "manual_seed", "manual_seed_all", "seed", "memory_allocated", "max_memory_allocated",
                 "memory_reserved", "reset_peak_memory_stats", "empty_cache"):
        assert callable(getattr(pylucid.cuda, name)), name
    assert pylucid.cuda.is_bf16_supported() == (pylucid.cuda.is_available()
                                                and pylucid.cuda.get_device_capability()[0] >= 8)


@pytest.mark.skipif(not pylucid.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_amp_autocast_and_custom_fwd_on_the_gpu():
    a = pylucid.ones(4, 4, device="cuda")
    with pytest.warns(FutureWarning):
        ctx = pylucid.cuda.amp.autocast()
    with ctx:
        assert (a @ a).dtype == pylucid.float16
    with pytest.warns(FutureWarning):
        cast_fwd = pylucid.cuda.amp.custom_fwd(cast_inputs=pylucid.float32)

    class Square(pylucid.autograd.Function):
        @staticmethod
        @cast_fwd
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x @ x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g @ x.T + x.T @ g

    with pytest.warns(FutureWarning):
        Square.backward = staticmethod(pylucid.cuda.amp.custom_bwd(Square.backward))
    x = pylucid.ones(2, 2, device="cuda", dtype=pylucid.float16, requires_grad=True)
    with pylucid.amp.autocast("cuda"):
        y = Square.apply(x)
    assert y.dtype == pylucid.float32  # inputs cast to float32, forward run with autocast off
    y.sum().backward()
    assert x.grad is not None and x.grad.dtype == pylucid.float16


def test_cuda_amp_custom_fwd_outside_autocast_is_plain():
    with pytest.warns(FutureWarning):
        deco = pylucid.cuda.amp.custom_fwd(cast_inputs=pylucid.float16)
    seen = {}

    @deco
    def forward(ctx, x):
        seen["dtype"] = x.dtype
        return x * 2

    class Ctx:
        pass

    ctx = Ctx()
    assert forward(ctx, pylucid.ones(2)).tolist() == [2.0, 2.0]
    assert seen["dtype"] == pylucid.float32 and ctx._fwd_used_autocast is False


# ---------------------------------------------------------------------------------- compile


def test_compile_returns_functions_and_modules_unchanged():
    def f(x):
        return x + 1

    module = pylucid.nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert pylucid.compile(f) is f
        assert pylucid.compile(module, mode="max-autotune", fullgraph=True, dynamic=False) is module
        assert pylucid.compile(backend="inductor")(f) is f
        assert pylucid.compile(options={"triton.cudagraphs": True})(module) is module

        @pylucid.compile
        def g(x):
            return x * 3

        @pylucid.compile(mode="reduce-overhead")
        def h(x):
            return x * 4

    x = pylucid.tensor([1.0, 2.0])
    assert g(x).tolist() == [3.0, 6.0] and h(x).tolist() == [4.0, 8.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pylucid.compile(f, disable=True) is f  # disable asks for nothing: no warning
    with pytest.raises(RuntimeError, match="both"):
        pylucid.compile(f, mode="default", options={})
    with pytest.raises(ValueError, match="unknown mode"):
        pylucid.compile(f, mode="fastest")
    with pytest.raises(TypeError, match="options"):
        pylucid.compile(f, options=[1])
    with pytest.raises(TypeError, match="backend"):
        pylucid.compile(f, backend=3)
    with pytest.raises(RuntimeError, match="function or a Module"):
        pylucid.compile(3)


def test_compile_warns_once_per_process(tmp_path):
    out, stderr = run_program("""
        import json, warnings
        import pylucid as torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = torch.compile(lambda x: x)
            g = torch.compile(torch.nn.Linear(2, 2))
            torch.compile(mode="max-autotune")(lambda x: x)
        print(json.dumps({"messages": [str(w.message) for w in caught], "lines": [w.lineno for w in caught]}))
    """, tmp_path)
    assert len(out["messages"]) == 1 and "compilation is not performed yet" in out["messages"][0]
    assert out["lines"] == [6]  # the warning points at the caller's line


# --------------------------------------------------------------------------------------- hub


def _make_repo(directory: Path, hubconf: str, **files: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hubconf.py").write_text(textwrap.dedent(hubconf))
    for name, text in files.items():
        (directory / name).write_text(textwrap.dedent(text))
    return directory


HUBCONF = """
    dependencies = ["pylucid"]
    from HELPER import width
    import pylucid


    def tiny_mlp(pretrained=False, hidden=width):
        '''A two-layer MLP; pretrained=True loads weights.pyl from this directory.'''
        import os
        model = pylucid.nn.Sequential(pylucid.nn.Linear(3, hidden), pylucid.nn.ReLU(), pylucid.nn.Linear(hidden, 1))
        if pretrained:
            model.load_state_dict(pylucid.load(os.path.join(os.path.dirname(__file__), "weights.pyl")))
        return model


    def _private():
        pass
"""


def test_hub_loads_from_a_local_directory(tmp_path):
    # hubconf.py imports a module beside it (each test its own name: imported modules stay in sys.modules)
    repo = _make_repo(tmp_path / "repo", HUBCONF.replace("HELPER", "local_helpers"),
                      **{"local_helpers.py": "width = 5\n"})
    reference = pylucid.nn.Sequential(pylucid.nn.Linear(3, 5), pylucid.nn.ReLU(), pylucid.nn.Linear(5, 1))
    pylucid.save(reference.state_dict(), repo / "weights.pyl")
    hub = pylucid.hub
    assert hub.list(str(repo), source="local") == ["tiny_mlp"]
    assert "two-layer MLP" in hub.help(str(repo), "tiny_mlp", source="local")
    model = hub.load(str(repo), "tiny_mlp", source="local", pretrained=True)
    x = pylucid.randn(4, 3)
    np.testing.assert_array_equal(model(x).detach().numpy(), reference(x).detach().numpy())
    assert hub.load(str(repo), "tiny_mlp", source="local", hidden=7)[0].out_features == 7
    assert str(repo) not in sys.path  # the repository was on sys.path only while it was used
    with pytest.raises(RuntimeError, match="Cannot find callable nope"):
        hub.load(str(repo), "nope", source="local")
    with pytest.raises(ValueError, match='Unknown source: "gitlab"'):
        hub.load(str(repo), "tiny_mlp", source="gitlab")
    missing = _make_repo(tmp_path / "missing", "dependencies = ['no_such_package_xyz']\ndef m():\n    return 1\n")
    with pytest.raises(RuntimeError, match="Missing dependencies: no_such_package_xyz"):
        hub.load(str(missing), "m", source="local")


def test_hub_github_sources_come_from_the_cache_only(tmp_path, monkeypatch, capsys):
    hub = pylucid.hub
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setenv("PYLUCID_HOME", str(tmp_path / "home"))
    assert hub.get_dir() == str(tmp_path / "home" / "hub")
    hub.set_dir(tmp_path / "cache")
    assert hub.get_dir() == str(tmp_path / "cache")
    with pytest.raises(hub.HubError, match="not in the hub cache.*does not download"):
        hub.load("someone/models", "tiny_mlp")
    _make_repo(tmp_path / "cache" / "someone_models_main", HUBCONF.replace("HELPER", "cached_helpers"),
               **{"cached_helpers.py": "width = 2\n"})
    assert hub.list("someone/models") == ["tiny_mlp"]
    assert "Using cache found in" in capsys.readouterr().err
    assert hub.load("someone/models:main", "tiny_mlp", verbose=False)[0].out_features == 2
    with pytest.raises(hub.HubError, match="force_reload"):
        hub.load("someone/models", "tiny_mlp", force_reload=True)
    with pytest.raises(hub.HubError, match="someone_models_v2"):
        hub.load("someone/models:v2", "tiny_mlp")


def test_hub_load_state_dict_from_url(tmp_path, monkeypatch):
    hub = pylucid.hub
    monkeypatch.setattr(hub, "_hub_dir", str(tmp_path / "hub"))
    state = {"w": pylucid.tensor([1.0, 2.0])}
    source = tmp_path / "weights.pyl"
    pylucid.save(state, source)
    import hashlib

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    named = tmp_path / f"weights-{digest[:8]}.pyl"
    named.write_bytes(source.read_bytes())
    out = hub.load_state_dict_from_url(named.as_uri(), check_hash=True)
    assert out["w"].tolist() == [1.0, 2.0]
    assert (tmp_path / "hub" / "checkpoints" / named.name).exists()
    # cached now: the same name under any URL loads from the cache
    assert hub.load_state_dict_from_url(f"https://example.invalid/x/{named.name}")["w"].tolist() == [1.0, 2.0]
    with pytest.raises(hub.HubError, match="does not download"):
        hub.load_state_dict_from_url("https://example.invalid/x/other.pth")
    bad = tmp_path / "weights-00000000.pyl"
    bad.write_bytes(source.read_bytes())
    with pytest.raises(RuntimeError, match="invalid hash"):
        hub.load_state_dict_from_url(bad.as_uri(), model_dir=str(tmp_path / "elsewhere"), check_hash=True)
    assert not (tmp_path / "elsewhere" / bad.name).exists()
    with pytest.raises(hub.HubError):
        hub.download_url_to_file("https://example.invalid/file", str(tmp_path / "f"))


# ------------------------------------------------------------------------------- tensorboard


def test_summary_writer_writes_event_files_or_names_the_package(tmp_path):
    from pylucid.utils.tensorboard import SummaryWriter

    if importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(ImportError, match="pip install tensorboard"):
            SummaryWriter(str(tmp_path / "run"))
        return
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with SummaryWriter(str(tmp_path / "run")) as writer:
        for step in range(3):
            writer.add_scalar("loss/train", pylucid.tensor(1.0 / (step + 1)), step)
        writer.add_scalars("lr", {"a": 0.1, "b": 0.2}, 0)
        writer.add_histogram("weights", pylucid.randn(200), 0)
        writer.add_text("note", "hello", 0)
        if importlib.util.find_spec("PIL") is not None:
            writer.add_image("image", pylucid.rand(3, 8, 8), 0)
        writer.add_hparams({"lr": 0.1, "opt": "adam"}, {"hparam/accuracy": 0.9})
        with pytest.raises(NotImplementedError, match="add_graph"):
            writer.add_graph(pylucid.nn.Linear(2, 2))
    events = EventAccumulator(str(tmp_path / "run"))
    events.Reload()
    tags = events.Tags()
    assert [(e.step, round(e.value, 4)) for e in events.Scalars("loss/train")] == [(0, 1.0), (1, 0.5), (2, 0.3333)]
    assert "weights" in tags["histograms"] and "note/text_summary" in tags["tensors"]
    assert events.Histograms("weights")[0].histogram_value.num == 200
    sub = EventAccumulator(str(tmp_path / "run" / "lr_b"))
    sub.Reload()
    assert round(sub.Scalars("lr")[0].value, 4) == 0.2


# ---------------------------------------------------------------------- modules and RNN helpers


def test_module_paths_are_pytorchs():
    nn = pylucid.nn
    from pylucid.nn.modules.batchnorm import _BatchNorm
    from pylucid.nn.modules.conv import _ConvNd
    from pylucid.nn.modules.loss import _Loss, _WeightedLoss
    from pylucid.nn.modules.utils import _pair, _quadruple, _single, _triple

    assert pylucid.nn.modules.rnn.LSTM is nn.LSTM and pylucid.nn.modules.linear.Linear is nn.Linear
    assert pylucid.nn.modules.container.Sequential is nn.Sequential and pylucid.nn.modules.module.Module is nn.Module
    assert pylucid.nn.modules.activation.MultiheadAttention is nn.MultiheadAttention
    assert pylucid.nn.modules.Conv2d is nn.Conv2d and issubclass(nn.BatchNorm2d, _BatchNorm)
    assert issubclass(nn.Conv2d, _ConvNd) and issubclass(nn.CrossEntropyLoss, _WeightedLoss)
    assert _single(2) == (2,) and _pair(3) == (3, 3) and _triple((1, 2, 3)) == (1, 2, 3) and _quadruple(0) == (0,) * 4

    class ScaledMSE(_Loss):  # how PyTorch code defines a loss of its own
        def forward(self, input, target):
            return pylucid.nn.functional.mse_loss(input, target, reduction=self.reduction) * 2

    loss = ScaledMSE(reduction="sum")(pylucid.tensor([1.0, 2.0]), pylucid.tensor([0.0, 0.0]))
    assert loss.item() == 10.0
    torch = pytest.importorskip("torch")
    for sub in ("rnn", "linear", "conv", "loss", "activation", "batchnorm", "pooling", "container"):
        ours, theirs = getattr(pylucid.nn.modules, sub), importlib.import_module(f"torch.nn.modules.{sub}")
        public = [n for n in getattr(ours, "__all__", []) if not n.startswith("_")]
        assert public and all(hasattr(theirs, n) for n in public), sub  # every name is at PyTorch's path too
    assert torch is not None


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_flatten_parameters_leaves_the_module_as_it_is(cls):
    pylucid.manual_seed(0)
    module = getattr(pylucid.nn, cls)(3, 4, num_layers=2, bidirectional=True)
    before = {name: (p, p.detach().clone()) for name, p in module.named_parameters()}
    x = pylucid.randn(5, 2, 3)
    out_before = module(x)[0]
    assert module.flatten_parameters() is None
    after = dict(module.named_parameters())
    assert list(after) == list(before)
    for name, (param, value) in before.items():
        assert after[name] is param and after[name].tolist() == value.tolist()
    np.testing.assert_array_equal(module(x)[0].detach().numpy(), out_before.detach().numpy())


def test_pickled_checkpoints_refuse_code_by_default(tmp_path):
    path = tmp_path / "m.pt"
    pylucid.save(pylucid.nn.Linear(2, 2), path)
    with pytest.raises(pickle.UnpicklingError, match="pylucid.nn.linear.Linear"):
        pylucid.load(path)
    assert isinstance(pylucid.load(path, weights_only=False), pylucid.nn.Linear)


def test_load_state_dict_accepts_torch_tensors_and_names_other_types():
    import numpy as np
    import torch as real_torch

    import pylucid as pl

    real_torch.manual_seed(0)
    tlin = real_torch.nn.Linear(4, 3)
    lin = pl.nn.Linear(4, 3)
    lin.load_state_dict(tlin.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(lin(pl.tensor(x)).detach().numpy(), tlin(real_torch.tensor(x)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    bad = {"weight": np.zeros((3, 4), np.float32), "bias": pl.zeros(3)}
    with pytest.raises(RuntimeError, match=r'"weight".*numpy\.ndarray'):
        lin.load_state_dict(bad)
