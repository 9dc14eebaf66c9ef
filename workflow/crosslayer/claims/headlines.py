"""Every sentence of each paper's abstract, contributions and conclusions, mapped to the claims that
test it or to the reason it is not a claim (``headlines/<paper>.yaml``, package data).

A map file lists each section by the lines that bound it in the paper's stored text (``start``, the
heading; ``end``, the first line after it) and its sentences verbatim, in order, each with either
``claims`` (catalogue ids, optionally a ``note`` on the part they test) or ``why`` (a method
description, a model the suites cannot load, an interpretation). :func:`section_text` cuts the same
section from a paper's text, so a test can hold the map's sentences, joined, against the paper's own
words; :func:`markdown` renders the map for docs/claims.md.
"""

import functools
import re
from dataclasses import dataclass
from importlib import resources

import yaml

from crosslayer.claims.catalogue import CatalogueError, load_catalogue

__all__ = ["SECTIONS", "Sentence", "Section", "load_headlines", "parse_headlines", "section_text", "markdown"]

#: The parts of a paper whose every sentence is mapped, in the order the docs show them.
SECTIONS = ("abstract", "contributions", "conclusions")


@dataclass(frozen=True)
class Sentence:
    """One sentence of the paper and what tests it: ``claims`` (ids), or ``why`` not."""

    text: str
    claims: tuple[str, ...] = ()
    why: str = ""
    note: str = ""


@dataclass(frozen=True)
class Section:
    """One mapped section: its name (:data:`SECTIONS`), the lines bounding it in the paper's text (the
    first line starting with `start`, a heading, and the next starting with `end`; `include_start`:
    the `start` line is the section's first paragraph, for a list without a heading), and its
    sentences in order."""

    name: str
    start: str
    end: str
    sentences: tuple[Sentence, ...]
    include_start: bool = False


def _sentence(entry, where):
    if not isinstance(entry, dict) or set(entry) - {"text", "claims", "why", "note"} or "text" not in entry:
        raise CatalogueError(f"{where}: a sentence is {{text, claims | why, note}}, got {entry!r}")
    claims, why = tuple(entry.get("claims") or ()), str(entry.get("why") or "")
    if bool(claims) == bool(why):
        raise CatalogueError(f"{where}: {entry['text'][:60]!r}... needs exactly one of claims or why")
    return Sentence(text=" ".join(str(entry["text"]).split()), claims=claims, why=why, note=str(entry.get("note", "")))


@functools.cache
def load_headlines(paper):
    """One paper's map (:func:`parse_headlines` of its file)."""
    path = resources.files("crosslayer.claims") / "headlines" / f"{paper}.yaml"
    if not path.is_file():
        raise CatalogueError(f"no headline map for paper {paper!r} (crosslayer/claims/headlines/{paper}.yaml)")
    return parse_headlines(yaml.safe_load(path.read_text(encoding="utf-8")), paper)


def parse_headlines(document, paper):
    """A map file's contents, validated: every claim it names is in the paper's catalogue.

    Returns
    -------
    tuple of Section
        In :data:`SECTIONS` order, those the paper has.
    """
    known = {c.id for c in load_catalogue(paper).claims}
    sections = []
    for part in document["sections"]:
        where = f"headlines/{paper}.yaml, {part.get('name')}"
        if part.get("name") not in SECTIONS:
            raise CatalogueError(f"{where}: a section is one of {SECTIONS}")
        sentences = tuple(_sentence(s, where) for s in part["sentences"])
        unknown = sorted({c for s in sentences for c in s.claims} - known)
        if unknown:
            raise CatalogueError(f"{where}: no claims {unknown} in paper {paper}'s catalogue")
        sections.append(Section(part["name"], part["start"], part["end"], sentences,
                                bool(part.get("include_start", False))))
    return tuple(sorted(sections, key=lambda s: SECTIONS.index(s.name)))


def section_text(text, start, end, include_start=False):
    """The paragraphs of a paper's stored text from the first line starting with `start` (left out
    unless `include_start`) to the next line starting with `end` (left out), joined by single
    spaces: blank lines and margin line numbers (lines of digits only) left out, whitespace runs
    collapsed."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next(i for i, line in enumerate(lines) if i > first and line.startswith(end))
    kept = [line for line in lines[first + (0 if include_start else 1) : last]
            if line.strip() and not re.fullmatch(r"[\d\s]+", line)]
    return " ".join(" ".join(kept).split())


def markdown(paper):
    """The map as markdown tables, one per section: the sentence (the extraction's page links as
    their text) and the claims that test it, or why it is not a claim."""
    out = []
    for section in load_headlines(paper):
        out += [f"**{section.name.capitalize()}**", "", "| sentence | tested by |", "|---|---|"]
        for s in section.sentences:
            tested = ", ".join(f"`{c}`" for c in s.claims) + (f" ({s.note})" if s.note else "") if s.claims else (
                f"not a claim: {s.why}")
            out.append(f"| {_cell(s.text)} | {_cell(tested)} |")
        out.append("")
    return "\n".join(out)


def _cell(text):
    """A table cell: the extraction's links to the paper's own pages (``[text](#page-5-0)``) as their
    text, pipes escaped."""
    return re.sub(r"\[([^\]]*)\]\(#page-[\d-]+\)", r"\1", text).replace("|", "\\|")
