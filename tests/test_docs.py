"""The documents stay true to the code: docs/library.md's examples run, in order, in one namespace
(as a notebook would), and every library path the documents name (README, config/README.md, docs/,
the env files' comments, the report's captions) imports."""

import importlib
import re
from pathlib import Path

import pytest
import yaml

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


#: The top-level keys of the Citation File Format 1.2.0 (https://citation-file-format.github.io).
CFF_KEYS = {"abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers",
            "keywords", "license", "license-url", "message", "preferred-citation", "references", "repository",
            "repository-artifact", "repository-code", "title", "type", "url", "version"}


def test_the_citation_file_names_this_version_its_licence_and_the_four_papers():
    # Checked once against the CFF 1.2.0 schema with cffconvert 2.0.0 (--validate), a tool too heavy to
    # add here; these are its required keys and what this repository states elsewhere.
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert set(cff) <= CFF_KEYS and {"cff-version", "message", "title", "authors"} <= set(cff)
    assert cff["cff-version"] == "1.2.0" and cff["authors"]
    assert cff["version"] == re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert cff["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert len(cff["references"]) == 4
    for reference in cff["references"]:
        assert {"type", "title", "authors"} <= set(reference) and reference["authors"]
        assert " ".join(reference["title"].split()) in readme  # the papers the README names


def test_the_workflow_catalog_file_has_the_keys_the_catalog_reads():
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert usage["mandatory-flags"]["desc"] and usage["mandatory-flags"]["flags"]
    deployment = usage["software-stack-deployment"]
    assert set(deployment) == {"conda", "apptainer", "apptainer+conda"}
    assert all(isinstance(value, bool) for value in deployment.values())
    assert usage["report"] is True
