"""``pylucid.hub``: load models published as a ``hubconf.py``, as ``torch.hub`` does, without a network.

A hub repository is a directory with a ``hubconf.py`` whose public callables are the entry points
(and an optional ``dependencies`` list of package names that must be importable). pylucid never
downloads anything:

- ``source="local"``: ``repo_or_dir`` is a directory on this machine; it is used as it is.
- ``source="github"`` (``"owner/name[:ref]"``): the repository is used from the hub cache,
  ``get_dir()/owner_name_ref`` (``ref`` defaults to ``main``, then ``master``, as PyTorch decides
  offline). A repository already in the cache counts as trusted, as PyTorch treats one it downloaded
  before. A repository that is not in the cache, or ``force_reload=True``, raises :class:`HubError`
  naming the directory to place the repository in.
- :func:`load_state_dict_from_url` loads the file cached under ``get_dir()/checkpoints`` (or
  ``model_dir``) for the URL's file name; a ``file://`` URL is copied there; any other URL that is not
  cached raises :class:`HubError`.

The cache lives in ``$PYLUCID_HOME/hub`` (``$PYLUCID_HOME`` defaults to ``$XDG_CACHE_HOME/pylucid``,
that to ``~/.cache``), or where :func:`set_dir` puts it.

>>> import os, tempfile, pylucid
>>> repo = tempfile.mkdtemp()
>>> with open(os.path.join(repo, "hubconf.py"), "w") as f:
...     _ = f.write("def double(k=2):\\n    '''A callable that doubles.'''\\n    return lambda x: k * x\\n")
>>> pylucid.hub.list(repo, source="local")
['double']
>>> pylucid.hub.load(repo, "double", source="local", k=3)(2)
6
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import uuid
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from .errors import LucidError

__all__ = ["HubError", "get_dir", "set_dir", "list", "help", "load", "load_state_dict_from_url",
           "download_url_to_file"]

_HUBCONF = "hubconf.py"
_HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
_hub_dir: str | None = None


class HubError(LucidError):
    """A hub repository or file that is not on this machine: pylucid does not download."""


def get_dir() -> str:
    """The hub cache directory: what :func:`set_dir` set, else ``$PYLUCID_HOME/hub``."""
    if _hub_dir is not None:
        return _hub_dir
    home = os.environ.get("PYLUCID_HOME")
    if not home:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        home = os.path.join(cache, "pylucid")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d: str | os.PathLike) -> None:
    """Use ``d`` as the hub cache directory from now on (``~`` is expanded)."""
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


# ------------------------------------------------------------------------------- repositories


def _parse_repo_info(github: str) -> tuple[str, str, str]:
    if not isinstance(github, str) or github.count("/") < 1:
        raise ValueError(f"pylucid.hub: expected a GitHub repository as 'owner/name[:ref]', got {github!r}")
    repo_info, _, ref = github.partition(":")
    owner, _, name = repo_info.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"pylucid.hub: expected a GitHub repository as 'owner/name[:ref]', got {github!r}")
    if not ref:
        # Without a network PyTorch settles the default branch from the cache: main, else master.
        for candidate in ("main", "master"):
            if os.path.isdir(os.path.join(get_dir(), f"{owner}_{name}_{candidate}")):
                return owner, name, candidate
        raise HubError(
            f"pylucid.hub: {github!r} is not in the hub cache ({get_dir()}) and pylucid does not download "
            f"repositories; put a copy of it in {os.path.join(get_dir(), f'{owner}_{name}_main')} or load a local "
            "directory with source='local'"
        )
    return owner, name, ref


def _repo_dir(github: str, force_reload: bool, verbose: bool) -> str:
    owner, name, ref = _parse_repo_info(github)
    repo_dir = os.path.join(get_dir(), "_".join([owner, name, ref.replace("/", "_")]))
    if force_reload:
        raise HubError(f"pylucid.hub: force_reload=True asks to download {github!r} again; pylucid does not "
                       "download repositories (leave force_reload=False to use the cached copy)")
    if not os.path.isdir(repo_dir):
        raise HubError(
            f"pylucid.hub: {github!r} is not in the hub cache and pylucid does not download repositories; put a "
            f"copy of it in {repo_dir} or load a local directory with source='local'"
        )
    if verbose:
        sys.stderr.write(f"Using cache found in {repo_dir}\n")
    return repo_dir


def _resolve(repo_or_dir: str, source: str, force_reload: bool, verbose: bool) -> str:
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "local":
        repo_dir = os.fspath(repo_or_dir)
        if not os.path.isdir(repo_dir):
            raise FileNotFoundError(f"pylucid.hub: local repository {repo_dir!r} is not a directory")
        return repo_dir
    return _repo_dir(repo_or_dir, force_reload, verbose)


@contextlib.contextmanager
def _on_sys_path(path: str):
    # hubconf.py may import modules that sit beside it, as under torch.hub
    sys.path.insert(0, path)
    try:
        yield
    finally:
        try:
            sys.path.remove(path)
        except ValueError:
            pass


def _import_hubconf(repo_dir: str):
    path = os.path.join(repo_dir, _HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"pylucid.hub: {repo_dir!r} has no {_HUBCONF}")
    spec = importlib.util.spec_from_file_location("hubconf", path)
    module = importlib.util.module_from_spec(spec)
    with _on_sys_path(repo_dir):
        spec.loader.exec_module(module)
    return module


def _check_dependencies(module) -> None:
    deps = getattr(module, "dependencies", None)
    if deps is None:
        return
    missing = [pkg for pkg in deps if importlib.util.find_spec(pkg) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")


def _entry(module, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    _check_dependencies(module)
    fn = getattr(module, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def list(github: str, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001 - torch.hub.list
         trust_repo: Any = "check", verbose: bool = True, *, source: str = "github") -> builtins.list[str]:
    """Names of the entry points (public callables) of a repository's ``hubconf.py``.

    ``github`` is ``"owner/name[:ref]"`` (from the cache) or, with ``source="local"``, a directory.
    ``skip_validation`` and ``trust_repo`` are accepted for PyTorch compatibility (nothing is downloaded,
    so there is nothing to validate; a cached repository is trusted).
    """
    module = _import_hubconf(_resolve(github, source, force_reload, verbose))
    return [name for name in dir(module) if callable(getattr(module, name)) and not name.startswith("_")]


def help(github: str, model: str, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo: Any = "check", *, source: str = "github") -> str | None:
    """The docstring of entry point ``model`` (``None`` if it has none)."""
    module = _import_hubconf(_resolve(github, source, force_reload, False))
    return _entry(module, model).__doc__


def load(repo_or_dir: str, model: str, *args, source: str = "github", trust_repo: Any = "check",
         force_reload: bool = False, verbose: bool = True, skip_validation: bool = False, **kwargs):
    """Call entry point ``model`` of ``repo_or_dir``'s ``hubconf.py`` with ``*args, **kwargs``.

    Args:
        repo_or_dir: ``"owner/name[:ref]"`` for ``source="github"`` (used from the hub cache) or a
            directory for ``source="local"``.
        model: the entry point's name.
        source: ``"github"`` (default) or ``"local"``.
        force_reload: ask for a fresh download: refused (:class:`HubError`), pylucid does not download.
        trust_repo, skip_validation: accepted for PyTorch compatibility.
        verbose: say which cached copy is used.

    Raises:
        HubError: a GitHub repository that is not in the cache, or ``force_reload=True``.
        ValueError: an unknown ``source``.
        RuntimeError: missing ``dependencies``, or no callable ``model`` in ``hubconf.py``.
    """
    repo_dir = _resolve(repo_or_dir, source, force_reload, verbose)
    module = _import_hubconf(repo_dir)
    fn = _entry(module, model)
    with _on_sys_path(repo_dir):
        return fn(*args, **kwargs)


# ------------------------------------------------------------------------------------ files


def _check_hash(path: str, hash_prefix: str) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if not digest.hexdigest().startswith(hash_prefix):
        raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest.hexdigest()}") for {path}')


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True) -> None:
    """Copy a ``file://`` URL to ``dst`` (atomically, checking ``hash_prefix`` of its SHA-256).

    Any other scheme raises :class:`HubError`: pylucid does not download.
    """
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise HubError(f"pylucid.hub: cannot download {url!r}: pylucid does not download files; copy the file to "
                       f"{dst!r} yourself")
    source = url2pathname(parsed.path)
    temp = f"{dst}.{uuid.uuid4().hex[:12]}.partial"
    try:
        shutil.copyfile(source, temp)
        if hash_prefix is not None:
            _check_hash(temp, hash_prefix)
        os.replace(temp, dst)
    finally:
        if os.path.exists(temp):
            os.remove(temp)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location: Any = None,
                             progress: bool = True, check_hash: bool = False, file_name: str | None = None,
                             weights_only: bool = False) -> dict[str, Any]:
    """Load the checkpoint that ``url`` names from the hub cache, with :func:`pylucid.load`.

    The file is ``model_dir/<file_name>`` (``model_dir`` defaults to ``get_dir()/checkpoints``,
    ``file_name`` to the URL's last path component). A ``file://`` URL that is not cached yet is copied
    there; another URL that is not cached raises :class:`HubError`. Both pylucid checkpoints and PyTorch
    ``.pt`` files load (see :func:`pylucid.load`).

    Args:
        check_hash: the file name must then be ``name-<sha256 prefix>.ext`` (PyTorch's convention) and
            the file's SHA-256 must start with that prefix, else ``RuntimeError``.
        weights_only: passed to :func:`pylucid.load`; ``False`` by default as in PyTorch — only use it
            for files you trust (see :func:`pylucid.load`).
        map_location, progress: as in PyTorch (``progress`` has nothing to show).
    """
    from .serialization import load as _load

    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    filename = file_name or os.path.basename(urlparse(url).path)
    if not filename:
        raise ValueError(f"pylucid.hub.load_state_dict_from_url: {url!r} names no file; pass file_name=")
    cached_file = os.path.join(model_dir, filename)
    hash_prefix = None
    if check_hash:
        match = _HASH_REGEX.search(filename)
        hash_prefix = match.group(1) if match else None
    if not os.path.exists(cached_file):
        if urlparse(url).scheme != "file":
            raise HubError(
                f"pylucid.hub.load_state_dict_from_url: {url!r} is not in the cache ({cached_file}) and pylucid "
                "does not download files; copy the file there or load it with pylucid.load"
            )
        os.makedirs(model_dir, exist_ok=True)
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    elif hash_prefix is not None:
        _check_hash(cached_file, hash_prefix)
    return _load(cached_file, map_location=map_location, weights_only=weights_only)
