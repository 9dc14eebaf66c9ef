"""The documents stay true to the code: docs/library.md's examples run, in order, in one namespace
(as a notebook would), and every library path the documents name (README, config/README.md, docs/,
the env files' comments, the report's captions) imports."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "envs").glob("*.yaml")), *sorted((ROOT / "workflow" / "report").glob("*.rst"))]


def python_blocks(path):
    return re.findall(r"^```python\n(.*?)^```$", path.read_text(), re.S | re.M)


def test_the_library_examples_run_in_order(tmp_path, monkeypatch):
    blocks = python_blocks(ROOT / "docs" / "library.md")
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "library_md"}
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"docs/library.md, block {number}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"docs/library.md block {number} fails: {error!r}\n{block}")


def resolve(dotted):
    """Import the longest module prefix of `dotted` and get the rest as attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            target = getattr(target, name)
        return target
    raise ModuleNotFoundError(dotted)


def test_every_library_path_the_documents_name_exists():
    named = {(m[0], path.name) for path in DOCUMENTS
             for m in re.finditer(r"(?<![\w/])crosslayer(?:\.\w+)+", path.read_text())}
    assert len(named) > 20
    missing = []
    for dotted, document in sorted(named):
        try:
            resolve(dotted)
        except (ModuleNotFoundError, AttributeError) as error:
            missing.append(f"{document}: {dotted} ({error})")
    assert not missing, "\n".join(missing)
