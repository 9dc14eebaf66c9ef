"""The map of every abstract, contributions and conclusions sentence (crosslayer.claims.headlines):
it names only catalogued claims, docs/claims.md shows it as it stands, and, where the papers' stored
texts are at hand (``../shared/papers`` beside the checkout), its sentences joined are each section's
own words, so that a sentence cannot be dropped or reworded without this failing."""

from pathlib import Path

import pytest

from crosslayer.claims.catalogue import CatalogueError, catalogue_papers, load_catalogue
from crosslayer.claims.headlines import SECTIONS, load_headlines, markdown, parse_headlines, section_text

ROOT = Path(__file__).parents[2]
PAPERS = ROOT.parent / "shared" / "papers"


@pytest.mark.parametrize("paper", catalogue_papers())
def test_every_paper_maps_its_abstract_and_conclusions(paper):
    sections = load_headlines(paper)
    names = [s.name for s in sections]
    assert {"abstract", "conclusions"} <= set(names) and names == [n for n in SECTIONS if n in names]
    for section in sections:
        assert section.sentences, section.name
        for sentence in section.sentences:
            assert bool(sentence.claims) != bool(sentence.why), sentence.text


@pytest.mark.parametrize("paper", catalogue_papers())
def test_the_map_names_testable_or_explained_claims_of_its_catalogue(paper):
    catalogue = load_catalogue(paper)
    named = {c for s in load_headlines(paper) for sentence in s.sentences for c in sentence.claims}
    assert named <= {c.id for c in catalogue.claims}
    # the abstract's findings are tested, not only listed: most of its mapped claims can be judged
    assert sum(catalogue.claim(c).testable for c in named) >= len(named) / 2


@pytest.mark.parametrize("paper", catalogue_papers())
def test_the_map_is_the_papers_own_words(paper):
    texts = sorted(PAPERS.glob(f"{paper}_*.txt"))
    if not texts:
        pytest.skip(f"the papers' stored texts are not beside this checkout ({PAPERS})")
    text = texts[0].read_text(encoding="utf-8")
    for section in load_headlines(paper):
        mapped = " ".join(s.text for s in section.sentences)
        assert mapped == section_text(text, section.start, section.end, section.include_start), (paper, section.name)


def test_section_text_cuts_between_its_lines_without_margin_numbers():
    text = "Title\nAbstract\n\n028\nOne sentence.  Two\n  sentences.\n1 Introduction\nMore."
    assert section_text(text, "Abstract", "1 Intro") == "One sentence. Two sentences."
    assert section_text(text, "One sentence.", "1 Intro", include_start=True) == "One sentence. Two sentences."


@pytest.mark.parametrize(("sentence", "message"), [
    ({"text": "x", "claims": ["000-nothing"]}, r"no claims \['000-nothing'\]"),
    ({"text": "x"}, "needs exactly one of claims or why"),
    ({"text": "x", "claims": ["000-init-chance"], "why": "both"}, "needs exactly one of claims or why"),
    ({"text": "x", "tested": True}, "a sentence is"),
])
def test_a_broken_map_is_refused_naming_the_file(sentence, message):
    document = {"sections": [{"name": "abstract", "start": "A", "end": "B", "sentences": [sentence]}]}
    with pytest.raises(CatalogueError, match=message):
        parse_headlines(document, "000")


def test_docs_claims_shows_every_map():
    text = (ROOT / "docs" / "claims.md").read_text()
    assert "](#page-" not in markdown("002")  # the extraction's page links, shown as their text
    stale = [paper for paper in catalogue_papers() if markdown(paper) not in text]
    assert stale == [], "docs/claims.md lacks these papers' headline maps as they stand (claims.headlines.markdown)"
