"""Tests for pylucid.serialization: checkpoints, safetensors, atomic writes.

The safetensors files are checked against the reference implementation
(the ``safetensors`` package, NumPy and PyTorch front ends) in both directions.
"""

from __future__ import annotations

import collections
import io
import json
import math
import os
import pickle
import struct
import subprocess
import sys
import zlib

import ml_dtypes
import numpy as np
import pytest

import pylucid
import pylucid.serialization as ser
from pylucid.errors import LucidError
from pylucid.serialization import (
    CheckpointError,
    load,
    load_safetensors,
    load_safetensors_metadata,
    save,
    save_safetensors,
)

DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}


def make(dtype_name: str, shape=(2, 3), seed: int = 0) -> pylucid.Tensor:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 10
    array = (values > 0) if dtype_name == "bool" else values.astype(DTYPES[dtype_name])
    return pylucid.from_numpy(np.ascontiguousarray(array))


def same(a: pylucid.Tensor, b: pylucid.Tensor) -> bool:
    return (
        a.dtype.name == b.dtype.name and tuple(a.shape) == tuple(b.shape) and a.numpy().tobytes() == b.numpy().tobytes()
    )


def cuda_available() -> bool:
    cuda = getattr(pylucid, "cuda", None)
    return bool(cuda is not None and cuda.is_available())


# -------------------------------------------------------------- checkpoints


def test_round_trip_everything(tmp_path):
    shared = make("float32", (3,), seed=1)
    grad = pylucid.tensor([1.0, 2.0], requires_grad=True)
    obj = {
        "tensors": {name: make(name, seed=i) for i, name in enumerate(DTYPES)},
        "scalar": pylucid.from_numpy(np.array(3.5, dtype=np.float32)),
        "empty": pylucid.from_numpy(np.zeros((0, 4), np.float32)),
        "shared": [shared, shared],
        "grad": grad,
        "tuple": (1, 2.5, "x", None, True, False),
        "list": [[], {}, ()],
        "int_keys": {0: "a", 1: {"step": 10}, -3: (None,)},
        "odd_keys": {(1, "a"): 1, 2.5: 2, None: 3, True: 4, b"k": 5},
        "ordered": collections.OrderedDict([("b", 1), ("a", 2)]),
        "floats": [float("nan"), float("inf"), -float("inf"), 0.1, -0.0, 1e300],
        "big": 2**100,
        "text": "ünïcødé \u2603",
        "bytes": b"\x00\xffraw",
    }
    path = tmp_path / "ckpt.pyl"
    save(obj, path)
    out = load(path)
    for name in DTYPES:
        assert same(out["tensors"][name], obj["tensors"][name]), name
    assert out["tensors"]["bfloat16"].numpy().dtype == ml_dtypes.bfloat16
    assert same(out["scalar"], obj["scalar"]) and out["scalar"].shape == ()
    assert out["empty"].shape == (0, 4)
    assert out["shared"][0] is out["shared"][1]
    assert out["grad"].requires_grad and not out["tensors"]["float32"].requires_grad
    assert out["tuple"] == obj["tuple"] and type(out["tuple"]) is tuple
    assert out["list"] == [[], {}, ()]
    assert out["int_keys"] == obj["int_keys"] and out["odd_keys"] == obj["odd_keys"]
    assert type(out["ordered"]) is collections.OrderedDict and list(out["ordered"]) == ["b", "a"]
    nan, *rest = out["floats"]
    assert math.isnan(nan) and rest == obj["floats"][1:] and math.copysign(1, rest[3]) == -1
    assert out["big"] == 2**100 and out["text"] == obj["text"] and out["bytes"] == obj["bytes"]
    # Loaded tensors own writable memory.
    out["tensors"]["float32"].numpy()[0, 0] = 42.0


def test_file_objects_and_pathlike(tmp_path):
    buf = io.BytesIO()
    save([make("float32")], buf)
    buf.seek(0)
    assert same(load(buf)[0], make("float32"))
    save(1, str(tmp_path / "a"))
    assert load(str(tmp_path / "a")) == 1


@pytest.mark.parametrize(
    "obj,refused",
    [
        (np.zeros(3), "numpy"),
        ({"a": {"b": [1, {1, 2}]}}, None),  # a set is allowed by default, as in PyTorch
        ({"lr": np.float32(0.1)}, "numpy"),
        ((object(),), "builtins.object"),
        (collections.defaultdict(int), "collections.defaultdict"),
    ],
)
def test_non_plain_objects_are_pickled_and_need_opt_in(tmp_path, obj, refused):
    path = tmp_path / "x.pyl"
    save(obj, path)
    assert path.read_bytes()[8:12] == struct.pack("<I", 2)  # the pickled format
    if refused is None:
        assert load(path) == obj
    else:
        with pytest.raises(pickle.UnpicklingError, match=f"global {refused}") as info:
            load(path)
        assert isinstance(info.value, ser.WeightsOnlyUnpicklingError) and "weights_only=False" in str(info.value)
        assert any(name.startswith(refused) for name in ser.get_unsafe_globals_in_checkpoint(path))
    back = load(path, weights_only=False)
    if isinstance(obj, np.ndarray):
        np.testing.assert_array_equal(back, obj)
    elif isinstance(obj, tuple):
        assert type(back[0]) is object
    else:
        assert back == obj and type(back) is type(obj)


def test_plain_data_is_written_without_pickle(tmp_path):
    path = tmp_path / "sd.pyl"
    model = pylucid.nn.Linear(3, 2)
    save({"model": model.state_dict(), "step": 3, "opt": {"lr": 0.1, "betas": (0.9, 0.99)}}, path)
    raw = path.read_bytes()
    assert raw[8:12] == struct.pack("<I", 1)
    header_offset, header_len = struct.unpack("<QQ", raw[-32:-16])
    header = json.loads(raw[header_offset : header_offset + header_len])
    assert "pickle" not in header and header["root"] is not None
    assert ser.get_unsafe_globals_in_checkpoint(path) == []
    out = load(path)
    assert same(out["model"]["weight"], model.weight.detach()) and out["opt"]["betas"] == (0.9, 0.99)


@pytest.mark.parametrize("obj", [lambda x: x, {"f": (lambda: 0)}])
def test_unpicklable_objects_raise_type_error_and_write_nothing(tmp_path, obj):
    path = tmp_path / "x.pyl"
    with pytest.raises(TypeError, match="pylucid.save: cannot save .* cannot be pickled"):
        save(obj, path)
    assert list(tmp_path.iterdir()) == []


def test_circular_reference_round_trips():
    loop: list = [pylucid.tensor([1.0])]
    loop.append(loop)
    buf = io.BytesIO()
    save(loop, buf)
    buf.seek(0)
    back = load(buf)  # no global needed: loads under weights_only=True
    assert back[1] is back and back[0].tolist() == [1.0]


class _Net(pylucid.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = pylucid.nn.Sequential(pylucid.nn.Linear(4, 8), pylucid.nn.ReLU(), pylucid.nn.Linear(8, 2))
        self.register_buffer("scale", pylucid.tensor([2.0]))

    def forward(self, x):
        return self.body(x) * self.scale


def test_whole_module_saves_and_loads_with_opt_in(tmp_path):
    path = tmp_path / "net.pt"
    net = _Net()
    save(net, path)
    with pytest.raises(ser.WeightsOnlyUnpicklingError, match="_Net"):
        load(path)
    back = load(path, weights_only=False)
    assert type(back) is _Net and back is not net
    x = pylucid.randn(3, 4)
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())
    params = dict(back.named_parameters())
    assert all(type(p).__name__ == "Parameter" and p.requires_grad for p in params.values())
    assert params["body.0.weight"].tolist() == net.body[0].weight.tolist()
    assert back.scale.tolist() == [2.0]
    unsafe = ser.get_unsafe_globals_in_checkpoint(path)
    assert f"{__name__}._Net" in unsafe and "pylucid.nn.linear.Linear" in unsafe
    classes = [_Net, pylucid.nn.Sequential, pylucid.nn.Linear, pylucid.nn.ReLU]
    with ser.safe_globals(classes):
        assert ser.get_unsafe_globals_in_checkpoint(path) == []
        assert type(load(path)) is _Net
    with pytest.raises(ser.WeightsOnlyUnpicklingError):
        load(path)
    # tied parameters stay one object
    tied = pylucid.nn.Sequential(pylucid.nn.Linear(2, 2, bias=False), pylucid.nn.Linear(2, 2, bias=False))
    tied[1].weight = tied[0].weight
    buf = io.BytesIO()
    save(tied, buf)
    buf.seek(0)
    back = load(buf, weights_only=False)
    assert back[1].weight is back[0].weight


def test_safe_globals_registry():
    ser.clear_safe_globals()
    try:
        ser.add_safe_globals([collections.defaultdict, (int, "builtins.int")])
        assert ser.get_safe_globals() == [collections.defaultdict, (int, "builtins.int")]
        buf = io.BytesIO()
        save(collections.defaultdict(int, a=1), buf)
        buf.seek(0)
        assert load(buf) == {"a": 1}
        with ser.safe_globals([set]):
            assert len(ser.get_safe_globals()) == 3
        assert len(ser.get_safe_globals()) == 2
        with pytest.raises(TypeError, match="module.name"):
            ser.add_safe_globals([(int, 3)])
    finally:
        ser.clear_safe_globals()
    assert ser.get_safe_globals() == []


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').close()",))


def test_weights_only_never_runs_code_from_the_file(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pyl"
    save({"w": pylucid.zeros(2), "payload": _Evil(str(marker))}, path)
    with pytest.raises(ser.WeightsOnlyUnpicklingError, match="builtins.exec"):
        load(path)
    assert not marker.exists()
    torch = pytest.importorskip("torch")
    torch_path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(2), "payload": _Evil(str(marker))}, torch_path)
    with pytest.raises(ser.WeightsOnlyUnpicklingError, match="builtins.exec"):
        load(torch_path)
    assert not marker.exists()
    assert ser.get_unsafe_globals_in_checkpoint(torch_path) == ["builtins.exec"]


def test_load_arguments():
    buf = io.BytesIO()
    save(pylucid.nn.Linear(2, 2), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="pickle_module"):
        load(buf, pickle_module=pickle, weights_only=True)
    buf.seek(0)
    assert isinstance(load(buf, pickle_module=pickle), pylucid.nn.Linear)  # an explicit module opts out
    buf.seek(0)
    with pytest.raises(NotImplementedError, match="mmap"):
        load(buf, mmap=True)


def test_errors_are_typed():
    assert issubclass(CheckpointError, LucidError) and issubclass(CheckpointError, ValueError)
    assert issubclass(ser.WeightsOnlyUnpicklingError, pickle.UnpicklingError)
    assert issubclass(ser.WeightsOnlyUnpicklingError, LucidError)


def _checkpoint_bytes() -> bytes:
    buf = io.BytesIO()
    save({"w": make("float32", (8, 8)), "b": make("bfloat16", (8,)), "step": 3}, buf)
    return buf.getvalue()


def test_truncated_files_raise_checkpoint_error_naming_path(tmp_path):
    raw = _checkpoint_bytes()
    path = tmp_path / "trunc.pyl"
    for cut in (0, 5, 16, 64, 100, len(raw) // 2, len(raw) - 40, len(raw) - 1):
        path.write_bytes(raw[:cut])
        with pytest.raises(CheckpointError) as info:
            load(path)
        assert str(path) in str(info.value)


def test_corruption_is_detected(tmp_path):
    raw = bytearray(_checkpoint_bytes())
    path = tmp_path / "bad.pyl"
    data = bytearray(raw)
    data[70] ^= 0xFF  # inside the first tensor's bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum mismatch in tensor"):
        load(path)
    header_offset = struct.unpack("<Q", bytes(raw[-32:-24]))[0]
    data = bytearray(raw)
    data[header_offset + 3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="header checksum"):
        load(path)
    path.write_bytes(b"not a checkpoint at all, just text" * 4)
    with pytest.raises(CheckpointError, match="not a pylucid checkpoint"):
        load(path)


def _rewrite_header(raw: bytes, edit) -> bytes:
    header_offset, header_len = struct.unpack("<QQ", raw[-32:-16])
    header = json.loads(raw[header_offset : header_offset + header_len])
    edit(header)
    new = json.dumps(header).encode()
    return raw[:header_offset] + new + struct.pack("<QQII8s", header_offset, len(new), zlib.crc32(new), 0, b"LUCIDEND")


def test_hostile_headers_are_rejected(tmp_path):
    raw = _checkpoint_bytes()
    path = tmp_path / "h.pyl"
    edits = {
        "unsupported dtype": lambda h: h["tensors"][0].update(dtype="object"),
        "bad offset": lambda h: h["tensors"][0].update(offset=10**12),
        "do not match shape": lambda h: h["tensors"][0].update(shape=[1000]),
        "unknown tag": lambda h: h.update(root={"$pickle": "x"}),
        "out of range": lambda h: h.update(root={"$tensor": 99}),
        "format version": lambda h: None,
    }
    for message, edit in edits.items():
        data = _rewrite_header(raw, edit)
        if message == "format version":
            data = data[:8] + struct.pack("<I", 99) + data[12:]
        path.write_bytes(data)
        with pytest.raises(CheckpointError, match=message):
            load(path)


# ------------------------------------------------------------ PyTorch files


def _torch_values(torch):
    return {
        "f32": torch.randn(3, 4),
        "f64": torch.randn(2, dtype=torch.float64),
        "f16": torch.randn(5).half(),
        "bf16": torch.randn(4, 3, dtype=torch.bfloat16),
        "i64": torch.arange(6).reshape(2, 3),
        "i32": torch.tensor([-7, 8], dtype=torch.int32),
        "i16": torch.tensor([-300, 2], dtype=torch.int16),
        "i8": torch.tensor([-3, 4], dtype=torch.int8),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "b": torch.tensor([True, False, True]),
        "c64": torch.tensor([1 + 2j, -3j], dtype=torch.complex64),
        "scalar": torch.tensor(1.5, dtype=torch.float64),
        "empty": torch.zeros(0, 2, dtype=torch.int32),
        "view": torch.arange(10.0)[2:8:2],
        "transposed": torch.arange(6.0).reshape(2, 3).t(),
        "expanded": torch.tensor([1.0, 2.0]).expand(3, 2),
    }


def _as_numpy(t):
    torch = sys.modules["torch"]
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    return t.numpy()


def test_torch_checkpoint_values_load(tmp_path):
    torch = pytest.importorskip("torch")
    values = _torch_values(torch)
    extra = {
        "param": torch.nn.Parameter(torch.ones(2)),
        "leaf": torch.ones(2, requires_grad=True),
        "size": torch.Size([2, 3]),
        "dtype": torch.bfloat16,
        "device": torch.device("cpu"),
        "nested": {"list": [1, 2.5, "s", None], "tuple": (True, b"by"), "set": {1, 2}, "complex": 1j},
    }
    path = tmp_path / "values.pt"
    torch.save({**values, **extra}, path)
    out = load(path)
    for name, ref in values.items():
        got = out[name]
        assert isinstance(got, pylucid.Tensor) and got.dtype.name == str(ref.dtype).removeprefix("torch."), name
        assert tuple(got.shape) == tuple(ref.shape), name
        got_np = got.float().numpy() if got.dtype == pylucid.bfloat16 else got.numpy()
        np.testing.assert_array_equal(got_np, _as_numpy(ref), err_msg=name)
        assert got.is_contiguous()
    got = out["view"]
    got[0] = 100.0  # a loaded tensor owns its memory
    assert out["view"].tolist() == [100.0, 4.0, 6.0]
    assert type(out["param"]).__name__ == "Parameter" and out["param"].requires_grad
    assert out["leaf"].requires_grad and type(out["leaf"]) is pylucid.Tensor
    assert out["size"] == (2, 3) and out["dtype"] is pylucid.bfloat16 and out["device"] == pylucid.device("cpu")
    assert out["nested"] == extra["nested"]


def test_torch_state_dict_loads_into_pylucid_model(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 5 * 5, 3),
    )
    ref.train()
    ref(torch.randn(8, 3, 5, 5))  # non-trivial running statistics
    ref.eval()
    path = tmp_path / "model.pt"
    torch.save({"model": ref.state_dict(), "epoch": 7}, path)
    nn = pylucid.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 5 * 5, 3))
    ckpt = load(path)
    assert ckpt["epoch"] == 7
    result = model.load_state_dict(ckpt["model"])
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    model.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(model(pylucid.from_numpy(x)).detach().numpy(),
                               ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_torch_objects_beyond_tensors_are_refused_by_name(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "whole.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    for weights_only in (True, False):
        with pytest.raises(CheckpointError, match="PyTorch object torch.nn.modules.linear.Linear.*state_dict"):
            load(path, weights_only=weights_only)
    q = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 0, torch.quint8)
    torch.save({"q": q}, path)
    with pytest.raises(CheckpointError, match="quantized"):
        load(path)


def test_torch_checkpoint_with_user_objects_needs_opt_in(tmp_path):
    torch = pytest.importorskip("torch")
    import argparse

    path = tmp_path / "ckpt.pt"
    torch.save({"args": argparse.Namespace(lr=0.1), "w": torch.ones(2)}, path)
    with pytest.raises(ser.WeightsOnlyUnpicklingError, match="argparse.Namespace"):
        load(path)
    assert ser.get_unsafe_globals_in_checkpoint(path) == ["argparse.Namespace"]
    out = load(path, weights_only=False)
    assert out["args"].lr == 0.1 and out["w"].tolist() == [1.0, 1.0]
    with ser.safe_globals([argparse.Namespace]):
        assert load(path)["args"].lr == 0.1


def test_torch_checkpoint_map_location_and_file_objects(tmp_path):
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buf)
    buf.seek(0)
    seen = []
    out = load(buf, map_location=lambda t, saved: seen.append(saved) or t)
    assert seen == ["cpu"] and out["w"].tolist() == [0.0, 1.0, 2.0]


def test_other_torch_formats_are_named(tmp_path):
    torch = pytest.importorskip("torch")
    legacy = tmp_path / "legacy.pt"
    torch.save({"w": torch.zeros(2)}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="legacy"):
        load(legacy)
    scripted = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(scripted))
    with pytest.raises(CheckpointError, match="TorchScript"):
        load(scripted)
    import zipfile

    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hi")
    with pytest.raises(CheckpointError, match="data.pkl"):
        load(other)


def test_corrupt_torch_zip_is_detected(tmp_path):
    torch = pytest.importorskip("torch")
    import zipfile

    path = tmp_path / "m.pt"
    torch.save({"w": torch.arange(4.0)}, path)
    src = zipfile.ZipFile(path)
    bad = tmp_path / "bad.pt"
    with zipfile.ZipFile(bad, "w") as z:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("data/0"):
                data = data[:8]  # the storage is shorter than the tensor needs
            z.writestr(name, data)
    with pytest.raises(CheckpointError, match="overruns|elements"):
        load(bad)


def test_as_pylucid_tensor_reads_torch_tensors():
    torch = pytest.importorskip("torch")
    for ref in _torch_values(torch).values():
        got = ser.as_pylucid_tensor(ref)
        assert isinstance(got, pylucid.Tensor) and tuple(got.shape) == tuple(ref.shape)
        got_np = got.float().numpy() if got.dtype == pylucid.bfloat16 else got.numpy()
        np.testing.assert_array_equal(got_np, _as_numpy(ref))
    conj = torch.tensor([1 + 2j]).conj()
    assert ser.as_pylucid_tensor(conj).tolist() == [1 - 2j]
    t = pylucid.tensor([1.0])
    assert ser.as_pylucid_tensor(t) is t
    with pytest.raises(TypeError, match="numpy.ndarray"):
        ser.as_pylucid_tensor(np.zeros(2), "state_dict['w']")


def test_map_location(tmp_path):
    path = tmp_path / "m.pyl"
    save({"w": make("float32")}, path)
    assert str(load(path, map_location="cpu")["w"].device) == "cpu"
    assert str(load(path, map_location={"cuda:0": "cpu"})["w"].device) == "cpu"
    seen = []
    out = load(path, map_location=lambda t, saved: seen.append(saved) or t)
    assert seen == ["cpu"] and same(out["w"], make("float32"))
    with pytest.raises(TypeError, match="map_location"):
        load(path, map_location=3)
    # A checkpoint saved on a GPU: the device is restored, or an error says what to do.
    gpu_path = tmp_path / "gpu.pyl"

    def to_cuda(h):
        for e in h["tensors"]:
            e["device"] = "cuda:0"

    gpu_path.write_bytes(_rewrite_header(path.read_bytes(), to_cuda))
    assert same(load(gpu_path, map_location="cpu")["w"], make("float32"))
    assert str(load(gpu_path, map_location={"cuda:0": "cpu"})["w"].device) == "cpu"
    if cuda_available():
        assert str(load(gpu_path)["w"].device) == "cuda:0"
    else:
        with pytest.raises(CheckpointError, match="map_location='cpu'"):
            load(gpu_path)


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_cuda_tensors_saved_from_device(tmp_path):
    t = pylucid.tensor([[1.0, 2.0]], device="cuda")
    save({"t": t}, tmp_path / "c.pyl")
    out = load(tmp_path / "c.pyl")
    assert str(out["t"].device) == str(t.device)
    assert load(tmp_path / "c.pyl", map_location="cpu")["t"].numpy().tolist() == [[1.0, 2.0]]
    save_safetensors({"t": t}, tmp_path / "c.safetensors")
    assert str(load_safetensors(tmp_path / "c.safetensors", device="cuda")["t"].device).startswith("cuda")


# ------------------------------------------------------------------ atomicity


def _fail_midway(monkeypatch, exc_type=OSError):
    calls = {"n": 0}
    real = ser._write_blob

    def flaky(f, data):
        calls["n"] += 1
        if calls["n"] == 2:  # after one tensor made it to disk
            f.write(b"partial garbage")
            raise exc_type("disk on fire")
        real(f, data)

    monkeypatch.setattr(ser, "_write_blob", flaky)


@pytest.mark.parametrize("exc_type", [OSError, KeyboardInterrupt])
def test_failed_save_keeps_previous_file(tmp_path, monkeypatch, exc_type):
    path = tmp_path / "ckpt.pyl"
    save({"version": 1}, path)
    before = path.read_bytes()
    _fail_midway(monkeypatch, exc_type)
    with pytest.raises(exc_type, match="disk on fire"):
        save({"a": make("float32"), "b": make("int64"), "version": 2}, path)
    assert path.read_bytes() == before and load(path) == {"version": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pyl"]


def test_failed_safetensors_save_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    save_safetensors({"w": make("float32")}, path)
    before = path.read_bytes()
    _fail_midway(monkeypatch)
    with pytest.raises(OSError):
        save_safetensors({"a": make("float32"), "b": make("int64")}, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


def test_save_uses_fsync_and_replace(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: calls.append("replace") or real_replace(a, b))
    save({"x": 1}, tmp_path / "f.pyl")
    assert calls[:2] == ["fsync", "replace"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save({"x": 1}, tmp_path / "missing_dir" / "f.pyl")


def _temporaries(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_stale_temporary_of_a_killed_save_is_removed(tmp_path):
    path = tmp_path / "ckpt.pyl"
    script = (
        "import os, sys, pylucid, pylucid.serialization as ser\n"
        "def die(f, data):\n"
        "    f.write(b'half a tensor'); f.flush(); os._exit(3)\n"
        "ser._write_blob = die\n"
        "pylucid.save({'w': pylucid.zeros(100)}, sys.argv[1])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", script, str(path)], env=env, timeout=120)
    assert proc.returncode == 3
    leftovers = _temporaries(tmp_path)
    assert len(leftovers) == 1 and not path.exists()  # the killed save left its temporary file
    save({"w": pylucid.ones(2)}, path)
    assert _temporaries(tmp_path) == [] and load(path)["w"].tolist() == [1.0, 1.0]


def test_temporaries_of_live_saves_are_kept(tmp_path):
    path = tmp_path / "ckpt.pyl"
    host = ser._HOST_TAG
    live = tmp_path / f".ckpt.pyl.{os.getppid()}.{host}.{'a' * 12}.tmp"  # our parent is running
    elsewhere = tmp_path / f".ckpt.pyl.1.{'0' * 8 if host != '0' * 8 else '1' * 8}.{'b' * 12}.tmp"
    other_target = tmp_path / f".other.pyl.999999999.{host}.{'c' * 12}.tmp"
    for p in (live, elsewhere, other_target):
        p.write_bytes(b"x")
    save({"x": 1}, path)
    assert _temporaries(tmp_path) == sorted(p.name for p in (live, elsewhere, other_target))


# ---------------------------------------------------------------- safetensors


def test_safetensors_ours_to_reference(tmp_path):
    st_numpy = pytest.importorskip("safetensors.numpy")
    st_torch = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    tensors = {name: make(name, (3, 5), seed=i) for i, name in enumerate(DTYPES)}
    tensors["scalar"] = pylucid.from_numpy(np.array(2.0, np.float32))
    tensors["empty"] = pylucid.from_numpy(np.zeros((0, 3), np.int64))
    path = tmp_path / "ours.safetensors"
    save_safetensors(tensors, path, metadata={"format": "pt", "note": "ünï"})
    with_torch = st_torch.load_file(str(path))
    assert with_torch["bfloat16"].dtype == torch.bfloat16
    for name, t in tensors.items():
        ref = with_torch[name]
        if name == "bfloat16":
            expected = t.numpy().astype(np.float32)
            np.testing.assert_array_equal(ref.to(torch.float32).numpy(), expected)
        else:
            np.testing.assert_array_equal(ref.numpy(), t.numpy())
            assert tuple(ref.shape) == t.shape
    without_bf16 = {k: v for k, v in tensors.items() if k != "bfloat16"}
    save_safetensors(without_bf16, path)
    with_numpy = st_numpy.load_file(str(path))
    for name, t in without_bf16.items():
        assert with_numpy[name].dtype == t.numpy().dtype
        np.testing.assert_array_equal(with_numpy[name], t.numpy())
    from safetensors import safe_open

    save_safetensors(tensors, path, metadata={"format": "pt", "note": "ünï"})
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"format": "pt", "note": "ünï"}


def test_safetensors_reference_to_ours(tmp_path):
    st_numpy = pytest.importorskip("safetensors.numpy")
    st_torch = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    ref = {
        "bf16": torch.randn(4, 3, dtype=torch.bfloat16),
        "f32": torch.randn(2, 2),
        "f16": torch.randn(5).half(),
        "i64": torch.arange(6).reshape(2, 3),
        "i8": torch.tensor([-3, 4], dtype=torch.int8),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "b": torch.tensor([True, False, True]),
        "scalar": torch.tensor(1.5, dtype=torch.float64),
        "empty": torch.zeros(0, 2, dtype=torch.int32),
    }
    path = tmp_path / "ref.safetensors"
    st_torch.save_file(ref, str(path), metadata={"k": "v"})
    out = load_safetensors(path)
    assert set(out) == set(ref) and load_safetensors_metadata(path) == {"k": "v"}
    assert out["bf16"].dtype.name == "bfloat16"
    np.testing.assert_array_equal(out["bf16"].numpy().astype(np.float32), ref["bf16"].float().numpy())
    for name in ref:
        if name != "bf16":
            np.testing.assert_array_equal(out[name].numpy(), ref[name].numpy())
            assert out[name].shape == tuple(ref[name].shape)
    assert out["i8"].dtype.name == "int8" and out["b"].dtype.name == "bool"
    arrays = {"a": np.arange(12, dtype=np.int16).reshape(3, 4), "z": np.ones(3, np.float64)}
    st_numpy.save_file(arrays, str(path))
    out = load_safetensors(path)
    assert out["a"].dtype.name == "int16" and load_safetensors_metadata(path) is None
    np.testing.assert_array_equal(out["a"].numpy(), arrays["a"])
    np.testing.assert_array_equal(out["z"].numpy(), arrays["z"])


def test_safetensors_argument_errors(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="tensor names must be str"):
        save_safetensors({1: make("float32")}, path)
    with pytest.raises(TypeError, match="must be a pylucid.Tensor"):
        save_safetensors({"a": np.zeros(2)}, path)
    with pytest.raises(ValueError, match="reserved"):
        save_safetensors({"__metadata__": make("float32")}, path)
    with pytest.raises(TypeError, match="metadata"):
        save_safetensors({"a": make("float32")}, path, metadata={"a": 1})
    with pytest.raises(TypeError, match="tensors must be a dict"):
        save_safetensors([make("float32")], path)
    assert not path.exists()


def test_safetensors_corrupt_files(tmp_path):
    path = tmp_path / "c.safetensors"
    save_safetensors({"a": make("float32", (4, 4)), "b": make("int64", (3,))}, path)
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])

    def with_header(h: dict, tail: bytes | None = None) -> bytes:
        encoded = json.dumps(h).encode()
        return struct.pack("<Q", len(encoded)) + encoded + (raw[8 + header_len :] if tail is None else tail)

    gap = dict(
        header,
        a=dict(header["a"], data_offsets=[header["a"]["data_offsets"][0] + 8, header["a"]["data_offsets"][1] + 8]),
    )
    cases = {
        "truncated": raw[: len(raw) - 5],
        "only 3 bytes": raw[:3],
        "does not fit": struct.pack("<Q", 10**12) + raw[8:],
        "not JSON": struct.pack("<Q", 4) + b"{{{{" + raw[8 + header_len :],
        "unsupported dtype": with_header(dict(header, a=dict(header["a"], dtype="F8_E4M3"))),
        "do not match shape": with_header(dict(header, a=dict(header["a"], shape=[5, 5]))),
        "gap or overlap": with_header(gap),
        "trailing bytes": raw + b"\x00" * 4,
    }
    for message, data in cases.items():
        path.write_bytes(data)
        with pytest.raises(CheckpointError, match=message) as info:
            load_safetensors(path)
        assert str(path) in str(info.value)


def test_safetensors_file_is_deterministic_and_aligned(tmp_path):
    tensors = {"z": make("int8", (3,)), "a": make("float64", (3,)), "m": make("float16", (3,))}
    save_safetensors(tensors, tmp_path / "1.safetensors")
    save_safetensors(dict(reversed(list(tensors.items()))), tmp_path / "2.safetensors")
    assert (tmp_path / "1.safetensors").read_bytes() == (tmp_path / "2.safetensors").read_bytes()
    raw = (tmp_path / "1.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    header = json.loads(raw[8 : 8 + n])
    for e in header.values():
        assert e["data_offsets"][0] % np.dtype({"F64": "f8", "F16": "f2", "I8": "i1"}[e["dtype"]]).itemsize == 0


def test_as_pylucid_tensor_shares_torch_cuda_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    if not (cuda_available() and torch.cuda.is_available()):
        pytest.skip("needs CUDA in both pylucid and torch")
    ref = torch.arange(6.0, device="cuda").reshape(2, 3)
    got = ser.as_pylucid_tensor(ref)
    assert got.device.type == "cuda" and got.cpu().tolist() == ref.cpu().tolist()
    model = pylucid.nn.Linear(3, 2).to("cuda")
    path_state = {"weight": torch.ones(2, 3, device="cuda"), "bias": torch.zeros(2, device="cuda")}
    buf = io.BytesIO()
    torch.save(path_state, buf)
    buf.seek(0)
    model.load_state_dict(load(buf))  # saved on cuda:0, restored there
    assert model.weight.device.type == "cuda" and model.weight.cpu().tolist() == [[1.0] * 3] * 2
