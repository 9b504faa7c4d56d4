"""docs/add_an_op.md stays true: its code blocks define a working op and its op-database entry.

The page's first Python block (the op class and its declaration) runs in a throwaway module, the second (the
entry) beside it; the generic checks of tests/test_ops.py then run on that entry. The fixture takes the toy op
out of the registry, the declaration tables, ``pylucid`` and ``Tensor`` again, so no other test sees it.
"""

from __future__ import annotations

import doctest
import re
import types
from pathlib import Path

import pytest

import pylucid
from pylucid.ops import registry
from tests import test_ops as suite

PAGE = Path(__file__).resolve().parent.parent / "docs" / "add_an_op.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), flags=re.S)


def _traces(op_cls, fn) -> list:
    """Where the toy op could still be seen: the registry, the declarations, the namespace tables, pylucid, Tensor."""
    name = op_cls.schema.name
    found = []
    if name in pylucid.ops.list_ops():
        found.append("pylucid.ops.list_ops()")
    if any(d.fn is fn for d in registry.declarations()) or registry.declaration_of(fn) is not None:
        found.append("registry declarations")
    found += [f"namespace {ns}" for ns, table in registry._NAMESPACES.items() if any(v is fn for v in table.values())]
    found += [f"Tensor.{n}" for n in _installed_by(fn, name)]
    if hasattr(pylucid, name):
        found.append(f"pylucid.{name}")
    return found


def _installed_by(fn, name) -> list:
    """The Tensor attributes the toy op's declaration installed (each tagged with its owner)."""
    owner = f"{fn.__module__}.{name}"
    return [n for n, v in vars(pylucid.Tensor).items() if getattr(v, "_pylucid_declared", None) == owner]


def _forget(op_cls, fn) -> None:
    """Undo the toy op's registration and declaration (the registry has no public way to drop one)."""
    name = op_cls.schema.name
    registry._REGISTRY.pop(name, None)
    for key in [k for k, d in registry._DECLARED.items() if d.fn is fn]:
        del registry._DECLARED[key]
    every = getattr(registry, "_ALL", None)  # the list of every declaration, where the registry keeps one
    if every is not None:
        every[:] = [d for d in every if d.fn is not fn]
    new_tensor_attrs = _installed_by(fn, name)
    generated = {id(fn)} | {id(pylucid.Tensor.__dict__[n]) for n in new_tensor_attrs}
    for table in registry._NAMESPACES.values():
        for n in [n for n, v in table.items() if id(v) in generated]:
            del table[n]
    registry._BY_FN.pop(id(fn), None)
    for n in new_tensor_attrs:
        delattr(pylucid.Tensor, n)
    if getattr(pylucid, name, None) is fn:
        delattr(pylucid, name)


@pytest.fixture(scope="module")
def page():
    """(op class, module namespace, entry) built by the page's code blocks."""
    code, entry_code = _blocks("python")
    module = types.ModuleType("pylucid.ops._add_an_op_page")  # not in sys.modules: nothing can import it
    exec(compile(code, f"{PAGE}: the op", "exec"), module.__dict__)
    op_cls = next(v for v in vars(module).values()
                  if isinstance(v, type) and issubclass(v, pylucid.ops.Op) and "schema" in vars(v))
    name = op_cls.schema.name
    fn = getattr(module, name)
    setattr(pylucid, name, fn)  # what pylucid.ops/__init__ does for namespace "pylucid" at import time
    try:
        entry_ns: dict = {}
        exec(compile(entry_code, f"{PAGE}: the entry", "exec"), entry_ns)
        yield op_cls, module, entry_ns["ENTRY"]
    finally:
        _forget(op_cls, fn)
        leaked = _traces(op_cls, fn)
        assert not leaked, f"the toy op is still in: {leaked}"


def test_the_page_declares_one_op_with_its_variants(page):
    op_cls, module, entry = page
    name = op_cls.schema.name
    assert name not in ("softsign",), "the page's op must not shadow a real one"
    assert pylucid.ops.op_class(name) is op_cls
    d = registry.declaration_of(getattr(module, name))
    assert d is not None and d.op is op_cls and d.namespaces == ("pylucid",)
    assert d.methods == (name,) and d.inplace == (f"{name}_",)
    assert entry.name == name and entry.op is getattr(pylucid, name) and entry.declaration() is d


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_vs_torch(page, dtype, device):
    suite.check_forward(page[2], dtype, device)


def test_gradients(page, device):
    entry = page[2]
    suite.check_grad_vs_torch(entry, device)
    suite.check_fast_path_matches_graph_formula(entry, device)
    suite.check_gradcheck(entry)
    suite.check_gradgradcheck(entry)


def test_variants_and_declared_facts(page, device):
    entry = page[2]
    suite.check_variants(entry, device)
    for amp_dtype in ("float16", "bfloat16"):
        suite.check_amp_output_dtype(entry, amp_dtype)
    suite.check_error_inputs(entry)
    suite.check_saved_tensor_declaration(entry)
    suite.check_runs_its_op(entry)


def test_the_docstring_example_runs(page):
    op_cls = page[0]
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    tests = finder.find(op_cls, op_cls.__name__, globs={})
    assert tests and tests[0].examples, "the op's docstring has no example"
    for t in tests:
        runner.run(t)
    assert runner.failures == 0


def test_the_page_says_how_to_run_the_tests(page):
    name = page[0].schema.name
    (shell,) = _blocks("bash")
    assert f"tests/test_ops.py -k {name}" in shell
