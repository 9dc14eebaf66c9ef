"""The documents stay true to the code: docs/library.md's examples run, in order, in one namespace
(as a notebook would), every library path the documents name (README, config/README.md, docs/,
the env files' comments, the report's captions) imports, and the README's promises hold. The README
stays a page: every link and anchor of the pages resolves, and the figures it quotes are dated ones
of docs/benchmarks.md."""

import importlib
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
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


# -- the README's promise of identical bytes ------------------------------------------------------------


def test_the_readme_excepts_the_report_from_the_same_bytes_promise():
    readme = (ROOT / "README.md").read_text()
    bullet = next(b for b in readme.split("\n* ") if b.startswith("Reproducible:"))
    bullet = " ".join(bullet.split())
    assert "same bytes in every file under `results/` that the workflow's jobs write" in bullet
    assert "not in `results/report.html`, which `snakemake --report`" in bullet and "run time" in bullet
    makefile = (ROOT / "Makefile").read_text()
    assert "--report results/report.html" in makefile  # the file the exception names is the one make run writes


# -- the README is a page; what it links to and quotes is where it says ----------------------------------

#: Markdown pages whose links are checked: the README, the changelog, the config reference, docs/.
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose(path):
    """A page's text without its fenced code blocks (no links or headings are read from those)."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)


def anchor(heading):
    """The fragment GitHub gives a heading: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_a_page_that_states_the_test_command():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200, "README.md is a page: the details go to docs/"
    # .ci/run runs "the test command from README.md"
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test +# ", readme, re.M)


def test_every_relative_link_anchor_and_test_path_the_pages_name_exists():
    broken = []
    for page in PAGES:
        text = prose(page)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path) if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and fragment not in {anchor(h) for h in re.findall(r"^#+ (.+)$", prose(linked), re.M)}:
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
        broken += [f"{page.relative_to(ROOT)}: {path} (no such test file)"
                   for path in re.findall(r"tests/[\w/]+\.py", page.read_text()) if not (ROOT / path).exists()]
    assert not broken, "\n".join(broken)


def test_the_changelog_is_dated_newest_first():
    dates = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert dates and all(re.fullmatch(r"\d{4}-\d\d-\d\d", date) for date in dates)
    assert dates == sorted(set(dates), reverse=True)


def test_the_readme_quotes_only_dated_figures_of_the_benchmarks_page():
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text()
    quoted = 0
    for paragraph in (ROOT / "README.md").read_text().split("\n\n"):
        paragraph = " ".join(paragraph.split())
        figures = re.findall(r"\b(\d+(?: min \d+)?) s\b|\b(\d+) passed\b", paragraph)
        if not figures:
            continue
        dates = re.findall(r"\b\d{4}-\d\d-\d\d\b", paragraph)
        assert dates and all(date in benchmarks for date in dates), paragraph
        for seconds, passed in figures:
            assert (seconds or f"{passed} passed") in benchmarks, f"{seconds or passed} is not in docs/benchmarks.md"
            quoted += 1
    assert quoted >= 3


def test_what_the_code_says_to_read_exists():
    # error messages and comments name a docs page, or a README section by its heading
    sources = [ROOT / "Snakefile", ROOT / "Makefile", ROOT / ".snakemake-workflow-catalog.yml", ROOT / "CITATION.cff",
               *(ROOT / "workflow").rglob("*.py"), *(ROOT / "workflow" / "rules").glob("*.smk"),
               *(ROOT / "config").rglob("*.yaml"), *(ROOT / "tests").rglob("*.py")]
    headings = set(re.findall(r"^## (.+)$", prose(ROOT / "README.md"), re.M))
    stale = []
    for source in sources:
        text = source.read_text()
        stale += [f"{source.relative_to(ROOT)}: {page}" for page in re.findall(r"\bdocs/\w+\.md", text)
                  if not (ROOT / page).exists()]
        stale += [f"{source.relative_to(ROOT)}: README, {section!r}"
                  for section in re.findall(r'README,? \\?"([^"\\]+)\\?"', text) if section not in headings]
    assert not stale, "\n".join(stale)
