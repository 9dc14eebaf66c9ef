"""The digest of the library code a rule's script runs (crosslayer.code_digest): what re-runs a
rule when a module it imports changes (the workflow side: tests/workflow/test_workflow_reruns.py)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import crosslayer
import crosslayer.code_digest as code
from crosslayer.code_digest import library_digest, library_files

LIBRARY = Path(crosslayer.__file__).parent
SCRIPTS = Path(__file__).parents[1] / "workflow" / "scripts"


@pytest.fixture
def copy(tmp_path):
    """A copy of the library, and a script beside it that imports the claims engine."""
    shutil.copytree(LIBRARY, tmp_path / "crosslayer", ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "script.py"
    script.write_text("from crosslayer.claims.engine import evaluate\n")
    return tmp_path / "crosslayer", script


def _edited(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path}: the test needs another edit"
    path.write_text(text.replace(old, new, 1))


def test_the_files_are_those_python_loads_and_the_packages_data(copy):
    # the independent reference: the modules a fresh interpreter holds after the script's import
    library, script = copy
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys; from crosslayer.claims.engine import evaluate; "
         "print('\\n'.join(m.__file__ for n, m in list(sys.modules.items()) if n.split('.')[0] == 'crosslayer'))"],
        cwd=library.parent, env={**os.environ, "PYTHONPATH": str(library.parent)}, capture_output=True, text=True,
        check=True).stdout.split()
    files = library_files(script, library)
    assert {Path(f) for f in loaded} <= set(files)  # lazy imports inside functions count as well
    assert library / "claims" / "catalogue" / "003.yaml" in files  # what the engine judges by
    assert library / "alignment" / "measure.py" not in files  # no import reaches it
    assert library_files(SCRIPTS / "mlp_alignment.py") and LIBRARY / "alignment" / "measure.py" in \
        library_files(SCRIPTS / "mlp_alignment.py")


def test_the_digest_follows_what_the_code_does_and_nothing_else(copy):
    library, script = copy
    before = library_digest(script, library)
    assert len(before) == 64 and before == library_digest(script, library)
    engine, catalogue = library / "claims" / "engine.py", library / "claims" / "catalogue" / "003.yaml"
    os.utime(engine, (0, 0))  # a file's time alone (a checkout, a copy) changes nothing
    (library / "claims" / "__pycache__").mkdir(exist_ok=True)
    (library / "claims" / "__pycache__" / "engine.cpython-311.pyc").write_bytes(b"\0")  # nor a bytecode cache
    (library / "alignment" / "measure.py").write_text("raise SystemExit\n")  # nor a module it does not import
    assert library_digest(script, library) == before
    source = engine.read_text()
    _edited(engine, '"""', '"""A docstring\'s edit. ')  # a docstring, a comment and the layout: nothing
    engine.write_text(engine.read_text().replace("\n", "\n\n# a comment\n", 3))
    assert library_digest(script, library) == before
    engine.write_text(source)
    _edited(catalogue, "quote:", "quote: ")  # one character of one claim
    edited = library_digest(script, library)
    assert edited != before
    _edited(engine, "def ", "def _unused(): pass\n\n\ndef ")  # what the code does
    assert library_digest(script, library) not in (before, edited)


def test_each_script_has_the_digest_of_its_own_modules():
    digests = {script.name: library_digest(script) for script in SCRIPTS.glob("*.py")}
    assert len(set(digests.values())) > len(digests) / 2  # scripts import different modules
    assert library_files(SCRIPTS / "_setup.py") == []


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache file in `tmp_path`, and a function that forgets what this process read, as a new
    process would; forgotten again after the test (its entries must not reach other tests)."""
    def new_process():
        code._cache.cache_clear()
        code._module.cache_clear()

    monkeypatch.setattr(code, "CACHE", tmp_path / "cache" / "code_digest.json")
    new_process()
    yield code.CACHE, new_process
    new_process()


def test_the_cache_is_read_by_content_and_an_unreadable_one_is_parsed_anew(copy, cache):
    (library, script), (path, new_process) = copy, cache
    first = library_digest(script, library)
    cached = json.loads(path.read_text())
    engine = library / "claims" / "engine.py"
    key = hashlib.sha256(engine.read_bytes()).hexdigest()
    assert cached["version"] == code.CACHE_VERSION and key in cached["modules"]
    assert len(cached["modules"]) == sum(p.suffix == ".py" for p in library_files(script, library)) + 1  # + script

    cached["modules"][key][1] = "0" * 64  # an entry no parse gives: a new process uses what is stored
    path.write_text(json.dumps(cached))
    new_process()
    assert library_digest(script, library) != first

    _edited(engine, "def ", "def _unused(): pass\n\n\ndef ")  # an edited module is another key: parsed
    new_process()
    edited = library_digest(script, library)
    assert edited != first and hashlib.sha256(engine.read_bytes()).hexdigest() in json.loads(path.read_text())["modules"]

    path.write_text("{not json")  # a torn or foreign file: parsed anew, and written whole again
    new_process()
    assert library_digest(script, library) == edited
    assert json.loads(path.read_text())["version"] == code.CACHE_VERSION
