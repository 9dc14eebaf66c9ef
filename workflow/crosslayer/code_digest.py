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
from pathlib import Path

__all__ = ["library_digest", "library_files"]

#: The library's top directory (the installed package, or workflow/crosslayer in a clone).
LIBRARY = Path(__file__).resolve().parent


def library_digest(script, library=LIBRARY):
    """SHA-256 of the library code `script` (a path) runs: each file of :func:`library_files`, by
    its path under the library and its content (a module: its code without docstrings)."""
    library = Path(library)
    files = {path.relative_to(library).as_posix(): _file_digest(path, library)
             for path in library_files(script, library)}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def library_files(script, library=LIBRARY):
    """The modules of the package at `library` (this library unless given) that `script` imports,
    directly or not, with their packages' ``__init__`` modules and data files; sorted."""
    library = Path(library)
    files, todo = set(), list(_read(Path(script), library)[0])
    while todo:
        path = todo.pop()
        if path not in files:
            files.add(path)
            todo.extend(_read(path, library)[0])
    for package in {path.parent for path in files}:
        files.update(_data_files(package))
    return sorted(files)


def _file_digest(path, library):
    if path.suffix != ".py":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    return _read(path, library)[1]


def _read(path, library):
    stat = path.stat()
    return _module(path, library, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _module(path, library, mtime_ns, size):
    """(the library files importing `path` loads, the digest of its code without docstrings);
    cached by the file's time and size: the Snakefile asks for every rule."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    return frozenset(_imports(tree, library)), _code_digest(tree)


def _imports(tree, library):
    """Each library module `tree` names (``import a.b``, ``from a.b import c`` with c a submodule
    or not), with every package ``__init__`` on the way."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for parts in (name.split(".") for name in names):
            if parts[0] != library.name:
                continue
            for depth in range(1, len(parts) + 1):
                module = library.joinpath(*parts[1:depth])
                for candidate in (module / "__init__.py", module.with_suffix(".py")):
                    if candidate.is_file():
                        yield candidate


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
