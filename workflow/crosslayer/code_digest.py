"""The digest of the library code a rule's script runs; standard library only (the Snakefile
computes it for every rule while it parses).

Snakemake re-runs a job when its script changes, not when a ``crosslayer`` module the script
imports does: a fix pulled into the library would leave a finished run's numbers as they were, and
Snakemake would report nothing to do. Each rule therefore has the digest of its script's library
code as a parameter (``library``), and a change of it re-runs the rule's jobs.

What counts: every ``crosslayer`` module the script imports, directly or through other modules,
wherever the import stands (a function's lazy import runs too), read from the source and not
executed; and the data files of their packages (the claims catalogues). A module counts by its
syntax tree without docstrings, so editing a comment, a docstring or the layout re-runs nothing,
while any other change to a module re-runs every rule whose script imports it.
"""

import ast
import functools
import hashlib
import json
import os
from pathlib import Path

from crosslayer.files import sha256, write_json_atomically

__all__ = ["library_digest", "library_files"]

#: The library's top directory (the installed package, or workflow/crosslayer in a clone).
LIBRARY = Path(__file__).resolve().parent

#: Each module's imports and code digest by the SHA-256 of its bytes, kept between processes:
#: parsing the library takes about 0.6 s, which every start of Snakemake (a cluster job's too)
#: would pay. Keyed by content, it cannot go stale; past CACHE_ENTRIES, the least recently used go.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crosslayer" / "code_digest.json"
CACHE_VERSION, CACHE_ENTRIES = 1, 4000


def library_digest(script, library=LIBRARY):
    """SHA-256 of the library code `script` (a path) runs: each file of :func:`library_files`, by
    its path under the library and its content (a module: its code without docstrings)."""
    library = Path(library)
    files = {path.relative_to(library).as_posix(): _file_digest(path)
             for path in library_files(script, library)}
    _save()
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def library_files(script, library=LIBRARY):
    """The modules of the package at `library` (this library unless given) that `script` imports,
    directly or not, with their packages' ``__init__`` modules and data files; sorted."""
    library = Path(library)
    files, todo = set(), list(_imported(Path(script), library))
    while todo:
        path = todo.pop()
        if path not in files:
            files.add(path)
            todo.extend(_imported(path, library))
    for package in {path.parent for path in files}:
        files.update(_data_files(package))
    return sorted(files)


def _file_digest(path):
    return _read(path)[1] if path.suffix == ".py" else sha256(path)


def _imported(path, library):
    """The library files that importing `path` loads: each module it names that is a file of the
    library, with every package ``__init__`` on the way."""
    return {file for name in _read(path)[0] for file in _resolved(name, library)}


@functools.lru_cache(maxsize=None)
def _resolved(name, library):
    parts = name.split(".")
    if parts[0] != library.name:
        return ()
    modules = (library.joinpath(*parts[1:depth]) for depth in range(1, len(parts) + 1))
    return tuple(c for m in modules for c in (m / "__init__.py", m.with_suffix(".py")) if c.is_file())


def _read(path):
    stat = path.stat()
    return _module(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _module(path, mtime_ns, size):
    """(the module names `path` imports, the digest of its code without docstrings): from the
    cache by the SHA-256 of its bytes, else parsed; in this process, by the file's time and size."""
    source = path.read_bytes()
    key = hashlib.sha256(source).hexdigest()
    known = _cache()["modules"]
    if key not in known:
        tree = ast.parse(source, filename=str(path))
        known[key] = [sorted(set(_imports(tree))), _code_digest(tree)]
        _cache()["new"] = True
    known[key] = known.pop(key)  # the most recently used last: what a full cache drops is the oldest
    names, digest = known[key]
    return tuple(names), digest


def _imports(tree):
    """Each dotted name `tree` imports (``import a.b``; ``from a.b import c``: a.b, and a.b.c in
    case c is a submodule)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@functools.cache
def _cache():
    """The cache file's modules, read once per process; "new": whether this process added any."""
    try:
        with open(CACHE) as f:
            cached = json.load(f)
        if cached["version"] == CACHE_VERSION and isinstance(cached["modules"], dict):
            return {"modules": cached["modules"], "new": False}
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or unreadable: parsed anew
    return {"modules": {}, "new": False}


def _save():
    cache = _cache()
    if not cache["new"]:
        return
    modules = dict(list(cache["modules"].items())[-CACHE_ENTRIES:])
    try:  # a process reading meanwhile sees the old file or this one, whole
        write_json_atomically(CACHE, {"version": CACHE_VERSION, "modules": modules})
        cache["new"] = False
    except OSError:
        pass  # a cache only: the next process parses again


def _code_digest(tree):
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]  # the tree is this function's own: parsed for it
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()


def _data_files(package):
    """A package's files other than modules, in it and in its folders that are not packages."""
    for path in sorted(package.iterdir()):
        if path.is_dir() and path.name != "__pycache__" and not (path / "__init__.py").exists():
            yield from (p for p in path.rglob("*") if p.is_file())
        elif path.is_file() and path.suffix not in (".py", ".pyc"):
            yield path
