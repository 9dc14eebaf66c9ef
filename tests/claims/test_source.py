"""The claims package's source digest (crosslayer.claims.source_digest): what re-runs the claims
rule when a catalogue, a sentence map or the engine changes (the workflow side:
tests/workflow/test_workflow_reruns.py)."""

import os
import shutil
from pathlib import Path

import crosslayer.claims
from crosslayer.claims import source_digest

PACKAGE = Path(crosslayer.claims.__file__).parent


def test_the_digest_follows_every_files_content_and_nothing_else(tmp_path):
    copy = tmp_path / "claims"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert source_digest(copy) == source_digest() and len(source_digest()) == 64
    catalogue = copy / "catalogue" / "003.yaml"
    os.utime(catalogue, (0, 0))  # a file's time alone (a checkout, a copy) changes nothing
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "stale.pyc").write_bytes(b"\0")  # nor does a bytecode cache
    assert source_digest(copy) == source_digest()
    text = catalogue.read_text()
    catalogue.write_text(text.replace("quote:", "quote: ", 1))  # one character of one claim
    edited = source_digest(copy)
    assert edited != source_digest()
    catalogue.write_text(text)
    (copy / "readers" / "extra.py").write_text("")  # a new module is part of what judges
    assert source_digest(copy) not in (source_digest(), edited)
