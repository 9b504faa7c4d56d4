"""The typed public surface: mypy and pyright accept the examples and common uses, catch real errors, and the
committed stubs are what ``tools/gen_stubs.py`` generates from the op registry.

The checkers run once each over all the files (a few seconds warm; mypy's cache lives in a temporary directory).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TYPING = ROOT / "tests" / "typing"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
CLEAN = [*EXAMPLES, TYPING / "check_public_api.py"]
PLANTED = TYPING / "planted_error.py"


def _planted_lines(checker: str) -> set[int]:
    """Lines marked ``# error`` (both checkers) or ``# error (pyright)`` (that checker only)."""
    out = set()
    for i, line in enumerate(PLANTED.read_text().splitlines(), 1):
        m = re.search(r"  # error( \((\w+)\))?:", line)
        if m and m.group(2) in (None, checker):
            out.add(i)
    return out


def _by_file(errors: list[tuple[str, int]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for path, line in errors:
        out.setdefault(str(Path(path).resolve()), set()).add(line)
    return out


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory) -> list[str]:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    cache = tmp_path_factory.mktemp("mypy_cache")
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    # silent: pylucid's own sources are followed for their types but not reported on; its stubs are checked
    cmd = [sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir", str(cache), "--no-error-summary",
           "--show-absolute-path", "--python-version", "3.10", *map(str, CLEAN), str(PLANTED)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode in (0, 1), f"mypy crashed:\n{r.stdout}\n{r.stderr}"
    return [ln for ln in r.stdout.splitlines() if re.match(r".+:\d+: error:", ln)]


def _pyright() -> list[str] | None:
    exe = shutil.which("pyright", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return [exe] if exe else None


@pytest.fixture(scope="module")
def pyright_errors(tmp_path_factory) -> list[dict]:
    exe = _pyright()
    if exe is None:
        pytest.skip("pyright is not installed (pip install -e '.[test]')")
    cfg = tmp_path_factory.mktemp("pyright") / "pyrightconfig.json"
    # the examples' loops leave ``loss`` "possibly unbound" after them (pyright's own style rule, not the API's)
    cfg.write_text(json.dumps({"extraPaths": [str(ROOT)], "pythonVersion": "3.10",
                               "reportPossiblyUnboundVariable": "none"}))
    cmd = [*exe, "--outputjson", "-p", str(cfg), "--pythonpath", sys.executable, *map(str, CLEAN), str(PLANTED)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"pyright gave no report (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def _mypy_by_file(lines: list[str]) -> dict[str, set[int]]:
    return _by_file([(m.group(1), int(m.group(2))) for m in (re.match(r"(.+?):(\d+): error:", ln) for ln in lines)])


def test_mypy_accepts_the_examples_and_common_api(mypy_errors):
    clean = {str(p.resolve()) for p in CLEAN}
    bad = [ln for ln in mypy_errors if str(Path(ln.split(":", 1)[0]).resolve()) != str(PLANTED.resolve())]
    assert not bad, "mypy reports errors outside the planted file:\n" + "\n".join(bad)
    assert clean  # the examples were found


def test_mypy_reports_the_planted_errors(mypy_errors):
    got = _mypy_by_file(mypy_errors).get(str(PLANTED.resolve()), set())
    want = _planted_lines("mypy")
    assert got == want, f"mypy: errors on lines {sorted(got)}, planted on {sorted(want)}"


def test_pyright_accepts_the_examples_and_common_api(pyright_errors):
    bad = [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}" for d in pyright_errors
           if Path(d["file"]).resolve() != PLANTED.resolve()]
    assert not bad, "pyright reports errors outside the planted file:\n" + "\n".join(bad)


def test_pyright_reports_the_planted_errors(pyright_errors):
    got = {d["range"]["start"]["line"] + 1 for d in pyright_errors if Path(d["file"]).resolve() == PLANTED.resolve()}
    want = _planted_lines("pyright")
    assert got == want, f"pyright: errors on lines {sorted(got)}, planted on {sorted(want)}"


def test_stubs_are_current():
    # a fresh interpreter: ops a test declares on the fly must not end up in the comparison
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_stubs.py"), "--check"], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0, ("the committed .pyi stubs differ from the op registry; run `python tools/gen_stubs.py` "
                               f"and commit the result:\n{r.stdout}{r.stderr}")
