"""Griffe extensions for the API reference (mkdocs.yml loads this file; it is not part of the package).

- ``DoctestFences``: pylucid's docstrings put their doctests straight after the
  text, as the standard library does. Markdown would read ``>>>`` as nested
  quotes and ``[0, 1]`` as a link, so every doctest outside a Google-style
  ``Examples:`` section (which mkdocstrings already renders as code) is wrapped
  in a ``pycon`` fence. (Griffe's Google parser reads ``Examples:`` sections;
  the singular ``Example:`` is an admonition whose text is plain Markdown.)
- ``PublicNames``: which names a module's page lists (see its docstring).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SECTION = re.compile(r"^(\s*)Examples:\s*$")  # griffe parses these itself; "Example:" is a plain admonition
_PROMPT = re.compile(r"^(\s*)>>>( |$)")


def fence_doctests(text: str) -> str:
    """``text`` with each doctest (a ``>>>`` line and what follows it up to a blank line) in a fence."""
    lines = text.split("\n")
    out: list[str] = []
    section_indent: int | None = None  # inside a Google-style Example(s): section
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if section_indent is not None and stripped and indent <= section_indent:
            section_indent = None
        if stripped.startswith("```"):
            fenced = not fenced
        elif not fenced and section_indent is None and _SECTION.match(line):
            section_indent = indent
        elif not fenced and section_indent is None and _PROMPT.match(line):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            pad = " " * indent
            out += [f"{pad}```pycon", *block, f"{pad}```"]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)


class PublicNames(griffe.Extension):
    """Keep a module's own names and its exports, drop the names it merely imports.

    Griffe's rule "an imported name is private" needs the import statements, which inspection
    (``force_inspection``) does not see, so every name a module imports would be listed as its own. Here a
    module's ``__all__`` decides where there is one; otherwise its imported names are dropped, except in the
    namespace modules given, whose re-exported pylucid objects are their public surface.
    """

    def __init__(self, namespaces: list[str]) -> None:
        self.namespaces = set(namespaces)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._module(pkg, pkg.name + ".")

    def _module(self, module: griffe.Module, prefix: str) -> None:
        exports = set(module.exports or ())
        for name, member in list(module.members.items()):
            if member.is_alias:  # no resolution here: some targets are closures griffe cannot reach
                if exports:
                    keep = name in exports
                else:
                    keep = module.path in self.namespaces and member.target_path.startswith(prefix)
                if not keep:
                    module.del_member(name)
            elif member.is_module:
                self._module(member, prefix)
