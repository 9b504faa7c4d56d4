"""Every program in examples/ runs, at its ``--tiny`` size, and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pylucid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
# each program and a line fragment its tiny run must print
EXPECTED = {
    "mlp_digits.py": ["epoch  2", "test accuracy"],
    "cnn_digits.py": ["test accuracy of the best epoch"],
    "custom_op.py": ["gradcheck:     True", "gradgradcheck: True", "LogCosh:             [0.1201, 29.3069, 89.3069]"],
    "mixed_precision.py": ["no CUDA GPU here"] if not pylucid.cuda.is_available() else ["test accuracy"],
    "transformer_lm.py": ["bits/char", "sampled from the prompt"],
    "neural_ode_spiral.py": ["loss on the whole spiral", "fitted the spiral"],
    "vae.py": ["test ELBO", "decoded from prior samples"],
    "data_parallel.py": ["over 2 rank(s)", "replicas equal: True"],
    "per_sample_grads.py": ["per-sample gradients of 32 samples", "test accuracy"],
}


def run_example(name, *args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYLUCID_EXAMPLES_TINY", None)
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_example_is_tested():
    programs = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))
    assert programs == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_tiny(name, tmp_path):
    args = ["--tiny"] + (["--out", str(tmp_path / "cnn.safetensors")] if name == "cnn_digits.py" else [])
    r = run_example(name, *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    for fragment in EXPECTED[name]:
        assert fragment in r.stdout, (fragment, r.stdout[-2000:])
    assert "Traceback" not in r.stderr


def test_mixed_precision_runs_on_the_cpu_in_bfloat16(tmp_path):
    r = run_example("mixed_precision.py", "--cpu", "--tiny", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "logits pylucid.bfloat16, loss pylucid.float32" in r.stdout
    assert "weights pylucid.float32, gradients pylucid.float32" in r.stdout and "loss scale off" in r.stdout


def test_tiny_also_from_the_environment(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, PYLUCID_EXAMPLES_TINY="1")
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "mlp_digits.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sum(line.startswith("epoch") for line in r.stdout.splitlines()) == 2


def test_the_text_ships_with_its_licence_note():
    text = open(os.path.join(EXAMPLES, "data", "sonnets.txt"), encoding="utf-8").read()
    assert text.startswith("I\n\nFrom fairest creatures we desire increase,")
    readme = open(os.path.join(EXAMPLES, "README.md"), encoding="utf-8").read()
    assert "sonnets.txt" in readme and "public" in readme
