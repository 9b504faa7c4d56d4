"""The API reference builds from the docstrings with warnings as errors (``mkdocs build --strict``)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_extensions():
    pytest.importorskip("griffe", reason="griffe (mkdocstrings[python]) is not installed: pip install -e '.[docs]'")
    spec = importlib.util.spec_from_file_location("griffe_extensions",
                                                  os.path.join(ROOT, "docs", "api", "griffe_extensions.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("docs") / "site"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1200)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-6000:]
    assert "WARNING" not in log, log[-6000:]
    return out


def _page(site, name):
    return (site / name / "index.html").read_text(encoding="utf-8") if name else (site / "index.html").read_text()


@pytest.mark.parametrize("page, anchor", [
    ("api/tensor", "pylucid.Tensor"),
    ("api/tensor", "pylucid.Tensor.sqrt"),
    ("api/tensor", "pylucid.ops.sqrt"),
    ("api/nn", "pylucid.nn.Linear"),
    ("api/functional", "pylucid.nn.functional.cross_entropy"),
    ("api/optim", "pylucid.optim.AdamW"),
    ("api/amp", "pylucid.amp.GradScaler"),
    ("api/data", "pylucid.utils.data.DataLoader"),
    ("api/ops", "pylucid.ops.schema.OpSchema"),
    ("api/autograd", "pylucid.autograd.Function"),
    ("api/linalg_fft_special", "pylucid.linalg.solve"),
    ("api/runtime", "pylucid.serialization.save"),
    ("api/train", "pylucid.train.cli"),
])
def test_reference_documents(site, page, anchor):
    assert f'id="{anchor}"' in _page(site, page)


def test_pages_list_their_own_names_only(site):
    # a module's imports are not its API: creation imports Tensor, lr_scheduler imports Optimizer
    assert 'id="pylucid.creation.Tensor"' not in _page(site, "api/creation")
    assert 'id="pylucid.optim.lr_scheduler.Optimizer"' not in _page(site, "api/optim")
    assert not re.search(r'id="pylucid[^"]*\.__\w+__"', _page(site, "api/nn"))


def test_doctests_render_as_code(site):
    for page in ("api/tensor", "api/nn", "api/data", "api/autograd"):
        text = re.sub(r"<pre.*?</pre>", "", _page(site, page), flags=re.S)
        assert "&gt;&gt;&gt;" not in text, page  # every prompt sits in a code block


def test_home_links_the_guides(site):
    home = _page(site, "")
    assert 'href="semantics/"' in home and 'href="add_an_op/"' in home and 'href="api/"' in home


def test_doctest_fences():
    fence = _load_extensions().fence_doctests
    assert fence("Sum.\n\n>>> 1 + 1\n2\n\nMore.") == "Sum.\n\n```pycon\n>>> 1 + 1\n2\n```\n\nMore."
    # the singular "Example:" is an admonition: its doctest is fenced at its indentation
    assert fence("Example:\n    >>> f()\n    3\n") == "Example:\n    ```pycon\n    >>> f()\n    3\n    ```\n"
    # "Examples:" sections and existing fences are left to the parser and to Markdown
    examples = "Examples:\n    >>> f()\n    3\n\nAfter.\n\n>>> g()"
    assert fence(examples) == "Examples:\n    >>> f()\n    3\n\nAfter.\n\n```pycon\n>>> g()\n```"
    fenced = "```python\n>>> f()\n```"
    assert fence(fenced) == fenced
