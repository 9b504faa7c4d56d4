"""The README's tour must run as written (it is what a new user tries first)."""

from __future__ import annotations

import os
import re

import numpy as np

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def test_readme_tour_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the tour writes model.safetensors
    text = open(README).read()
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)[:1]
    ns: dict = {}
    exec(compile(block, "README.md tour", "exec"), ns)
    x = np.array([[1.0, 4.0], [9.0, 16.0]])
    np.testing.assert_allclose(ns["h"].numpy(), -1.0 / (8.0 * x ** 1.5), rtol=1e-6)  # as the README comment says
    assert (tmp_path / "model.safetensors").exists()


def test_readme_commands_match_ci():
    text = open(README).read()
    ci = open(os.path.join(os.path.dirname(README), ".ci", "run")).read()
    cmd = "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]' && python -m pytest"
    assert cmd.replace(" -q", "") in text and cmd in ci
