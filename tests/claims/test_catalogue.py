"""The claims catalogue (crosslayer.claims.catalogue): every file loads and validates, a broken entry
fails naming the file and the claim, the tables it names are those the workflow writes, and for every
claim the engine applies the paper's stated direction: tables built with the effect on the side the
catalogue quotes give "holds", the reversal "contradicted"."""

import importlib.util
import itertools
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from crosslayer.alignment.tables import summarize_model
from crosslayer.claims.catalogue import (
    SELECTORS,
    CatalogueError,
    Lookup,
    catalogue_papers,
    load_catalogue,
    parse_catalogue,
)
from crosslayer.claims.engine import evaluate

CATALOGUES = {paper: load_catalogue(paper) for paper in catalogue_papers()}
CLAIMS = [claim for catalogue in CATALOGUES.values() for claim in catalogue.claims]
TESTABLE = [claim for claim in CLAIMS if claim.testable]

# Read off the paper texts by hand, apart from the catalogue, one file per paper
# (statements_<paper>.py: STATEMENTS, claim id -> (kind, direction), None for a claim beyond the
# tables), so that an edit turning a claim's direction (to make a run pass, say) fails here.
PAPER_STATEMENTS = {}
for _file in sorted(Path(__file__).parent.glob("statements_*.py")):
    _spec = importlib.util.spec_from_file_location(_file.stem, _file)
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    PAPER_STATEMENTS |= _module.STATEMENTS


def test_every_catalogue_loads_and_its_claims_are_pinned():
    assert "000" in CATALOGUES and load_catalogue(0) == CATALOGUES["000"]
    for paper, catalogue in CATALOGUES.items():
        assert 6 <= len(catalogue.claims) <= 12, paper
    found = {c.id: (c.kind, c.direction) if c.testable else None for c in CLAIMS}
    assert found == PAPER_STATEMENTS
    for claim in CLAIMS:
        assert claim.quote and claim.section and claim.id.startswith(claim.paper + "-")
        assert claim.testable or claim.why
        assert claim.requirements()


def test_an_unknown_paper_names_those_there_are():
    with pytest.raises(CatalogueError, match=r"no claims catalogue for paper '123'; there are \['000'"):
        load_catalogue("123")
    with pytest.raises(KeyError, match="has no claim"):
        CATALOGUES["000"].claim("000-nothing")


def test_the_catalogue_is_package_data():
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["crosslayer.claims"]
    folder = Path(__file__).parents[2] / "workflow/crosslayer/claims"
    assert {p.relative_to(folder) for g in globs for p in folder.glob(g)} == {
        Path("catalogue") / f"{paper}.yaml" for paper in CATALOGUES}


def test_paper_000s_tables_are_those_the_alignment_stage_writes():
    # the per-model tables of crosslayer.alignment.tables on a 6-layer model, and the two the
    # alignment_table rule concatenates with the model as first column
    rng = np.random.default_rng(0)
    steps, L = np.array([0, 10, 50]), 6
    overlaps = {f"overlap_{s}": rng.uniform(size=(3, L, L)) for s in ("left", "right", "cross")}
    tables = summarize_model({**overlaps, "steps": steps, "d_model": 16, "k": 2, "singular_values": np.ones((3, L, 3))},
                             reference_step=10, baseline_draws=20)
    written = {f"alignment/{name}": {"model", *table.columns} for name, table in tables.items()}
    declared = CATALOGUES["000"].tables
    for name in ("alignment/adjacent", "alignment/table1", "alignment/cascade", "alignment/cascade_fit",
                 "alignment/baseline"):
        assert set(declared[name].columns) == written[name], name
    # alignment/pairs: the reader's long form of each step's overlap_<space> matrices
    assert {"left", "right", "cross"} <= set(declared["alignment/pairs"].columns)


# -- validation: a broken entry names its file and claim ----------------------------------------------

GOOD = {"id": "999-x", "section": "2", "quote": "it rises", "kind": "change", "table": "t", "column": "y",
        "unit": {"column": "unit", "name": "layers"}, "before": {"step": 0}, "after": {"step": "last"},
        "statistic": "mean_difference", "direction": ">"}
TABLES = {"t": {"source": "s", "columns": ["model", "step", "unit", "y", "x"]},
          "models": {"source": "s", "columns": ["model", "gated"]}}


def parse(*entries, tables=TABLES, paper="999"):
    return parse_catalogue({"paper": paper, "title": "t", "tables": tables, "claims": list(entries)}, source="999.yaml")


def test_a_good_entry_parses():
    claim = parse(GOOD).claims[0]
    assert (claim.before, claim.after) == ((("step", 0),), (("step", "last"),))
    assert (claim.min_units, claim.scope) == (3, "model")
    assert claim.requirements() == ("t: y", "step 0", "two distinct conditions (before and after)", "at least 3 layers")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"colum": "y"}, r"unknown key\(s\) \['colum'\]"),
        ({"id": "998-x"}, "must start with the paper id"),
        ({"quote": " "}, "`quote` must be a non-empty string"),
        ({"kind": "ratio"}, "`kind` must be one of"),
        ({"statistic": "median"}, "a change claim's statistic is one of"),
        ({"direction": "!="}, "`direction` must be one of"),
        ({"direction": "=="}, "an absence \\(direction ==\\) needs `margin`"),
        ({"margin": {"value": 0.1, "cite": "x"}}, "only an absence takes one"),
        ({"magnitude": {"value": -1, "cite": "x"}}, "not on the paper.s side"),
        ({"magnitude": {"value": 1, "cite": "x", "words": "far below"}}, "are not in the quote"),
        ({"magnitude": {"value": 1}}, "`magnitude` is"),
        ({"magnitude": {"value": 1, "cite": " "}}, "cites the paper"),
        ({"unit": {"column": "unit", "name": "layers", "within": "x"}}, "`unit.within` must be a list"),
        ({"before": {"space": "untrained"}}, "only a step can be the untrained one"),
        ({"unit": {"column": "unit", "name": "heads"}}, "`unit` must be"),
        ({"table": "u"}, "table 'u' is not declared"),
        ({"column": "z"}, r"declares no column\(s\) \['z'\]"),
        ({"after": {}}, r"needs \['after'\]"),
        ({"at": {"step": 0}}, r"takes no \['at'\]"),
        ({"after": {"step": [1, 2]}}, "`after.step` must be a literal"),
        ({"where": {"step": "last"}}, "`where.step` must be a literal"),
        ({"after": {"step": {"table": "t"}}}, "a lookup in `after.step` is"),
        ({"after": {"step": {"table": "v", "column": "c"}}}, "table 'v' is not declared"),
        ({"requires": {"min_units": 1}}, "min_units must be an int >= 2"),
        ({"applies_to": {"family": "x"}}, r"table models declares no column\(s\) \['family'\]"),
        ({"indicator": {"op": "~", "value": 1}}, "`indicator` is"),
        ({"scope": "everything"}, "`scope` must be"),
        ({"testable": "no"}, "`testable` must be true or false"),
        ({"testable": False}, "needs `why`"),
        ({"why": "because"}, "only for claims with testable: false"),
    ],
)
def test_a_broken_entry_names_the_file_and_claim(change, message):
    entry = {**GOOD, **change}
    with pytest.raises(CatalogueError, match=r"claims catalogue 999\.yaml, claim 99\d-x: " + f".*{message}"):
        parse(entry)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({**GOOD, "kind": "trend", "statistic": "spearman"}, r"needs \['x'\]"),
        ({**GOOD, "kind": "trend", "statistic": "spearman", "x": "x", "before": None}, r"takes no \['after'\]"),
        ({**GOOD, "kind": "contrast", "statistic": "difference_of_means",
          "groups": {"by": "gated", "a": True, "b": True, "names": ["a", "b"]}}, "with a != b"),
        ({**GOOD, "kind": "contrast", "statistic": "difference_of_means", "scope": "model",
          "groups": {"by": "gated", "a": False, "b": True, "names": ["a", "b"]}}, "group for a contrast"),
        ({**GOOD, "kind": "threshold", "statistic": "mean", "before": None, "after": None}, r"needs \['value'\]"),
        ({**GOOD, "kind": "trend", "statistic": "pearson", "x": "x", "before": None, "after": None, "value": 1},
         r"a trend's value is a correlation in \(-1, 1\)"),
    ],
)
def test_each_kind_takes_its_own_keys(entry, message):
    entry = {k: v for k, v in entry.items() if v is not None}
    with pytest.raises(CatalogueError, match=message):
        parse(entry)


def test_file_level_errors():
    with pytest.raises(CatalogueError, match="claims catalogue 999.yaml: duplicate id|claim 999-x: duplicate id"):
        parse(GOOD, GOOD)
    with pytest.raises(CatalogueError, match="paper must be the string '999'"):
        parse(GOOD, paper=999)
    with pytest.raises(CatalogueError, match="table t: columns must be a list of names including model"):
        parse(GOOD, tables={"t": {"source": "s", "columns": ["y"]}})
    with pytest.raises(CatalogueError, match="claims must be a non-empty list"):
        parse()


# -- every claim: the engine applies the paper's direction ---------------------------------------------


def planted(claim, side, *, n_units=24, seed=0):
    """Tables on which ``claim``'s statistic lies clearly on the paper's side of its value
    (``side=+1``) or on the other side (``side=-1``), built from the claim's own fields so that every
    catalogue entry gets its tables: its models (two groups for a contrast), the lookups it reads,
    rows at each selection it names, and values with the effect planted."""
    rng = np.random.default_rng(seed)
    up = side * (1 if claim.direction in (">", ">=") else -1)  # +1: the statistic above the value
    if claim.groups:  # group a on the `up` side of group b
        g = claim.groups
        models = {f"{n}{i}": (up if n == "a" else -up, {g.by: g.a if n == "a" else g.b})
                  for n in "ab" for i in range(claim.min_models)}
    else:
        models = {"m": (up, {})}
    tables = {}
    if claim.applies_to or claim.groups:
        tables["models"] = pd.DataFrame([{"model": m, **dict(claim.applies_to), **attrs}
                                         for m, (_, attrs) in models.items()])

    def put(lookup, value):  # the lookup's table: one row per model
        tables.setdefault(lookup.table, pd.DataFrame({"model": list(models)}))[lookup.column] = value
        return value

    value = put(claim.value, 0.25) if isinstance(claim.value, Lookup) else claim.value
    cut = claim.indicator and claim.indicator.value
    cut = put(cut, 0.5) if isinstance(cut, Lookup) else cut
    # selections as rows: literals as given, each lookup at a step of its own, first / last around them
    selections = {key: dict(getattr(claim, key)) for key in ("at", "before", "after")}
    steps = itertools.count(50, 10)
    for sel in selections.values():
        for column, s in sel.items():
            if isinstance(s, Lookup):
                sel[column] = put(s, next(steps))
    named = [s for sel in selections.values() for s in sel.values()
             if isinstance(s, (int, float)) and not isinstance(s, bool)]  # numbers: a run name has no first / last
    ends = {"first": min(named, default=0) - 10, "last": max(named, default=0) + 100}
    for sel in selections.values():
        sel.update({c: ends[s] for c, s in sel.items() if isinstance(s, str) and s in SELECTORS})

    def values(state):  # `state` in [0, 1]: that share of units on the indicator's true side (or the raw level)
        if cut is None:
            return state + rng.normal(scale=0.05, size=n_units)
        true = np.arange(n_units) < round(n_units * state)
        return cut + (1 if claim.indicator.op in (">", ">=") else -1) * np.where(true, 0.1, -0.1)

    rows = []
    for model, (direction, _) in models.items():
        base = {"model": model, claim.unit: [f"u{i}" for i in range(n_units)], **dict(claim.where)}
        if claim.kind == "trend":
            x = np.arange(n_units, dtype=float)
            rows.append(pd.DataFrame({**base, **selections["at"], claim.x: x,
                                      claim.column: direction * x + rng.normal(scale=0.5, size=n_units)}))
        elif claim.before:  # a change: raw values by 1, or indicators 0.25 -> 1 (rise) / 0.75 -> 0 (fall)
            start, end = (0.0, float(direction)) if cut is None else (0.25, 1.0) if direction > 0 else (0.75, 0.0)
            rows.append(pd.DataFrame({**base, **selections["before"], claim.column: values(start)}))
            rows.append(pd.DataFrame({**base, **selections["after"], claim.column: values(end)}))
        else:  # values at one selection: a threshold's mean, or a contrast's groups, 0.2 either side
            centre = (value if claim.kind == "threshold" else 0.0) + 0.2 * direction
            rows.append(pd.DataFrame({**base, **selections["at"], claim.column: values(centre)}))
    tables[claim.table] = pd.concat(rows, ignore_index=True)
    return tables


@pytest.mark.parametrize("claim", TESTABLE, ids=[c.id for c in TESTABLE])
def test_the_engine_applies_the_papers_direction(claim):
    for side, expected in ((1, "holds"), (-1, "contradicted")):
        verdict = evaluate(claim, planted(claim, side), n_boot=500)
        assert verdict.verdict == expected, f"{claim.id} ({claim.section}: {claim.quote!r}): {verdict.reason}"


@pytest.mark.parametrize("claim", [c for c in CLAIMS if not c.testable], ids=lambda c: c.id)
def test_a_claim_beyond_the_tables_says_why(claim):
    verdict = evaluate(claim, {})
    assert verdict.verdict == "not testable" and claim.why in verdict.reason


def test_published_numbers_name_a_model_a_suite_runs_and_read_declared_columns():
    suites = Path(__file__).parents[2] / "config" / "suites"
    models = {"toy", "transformer_ablations"}  # the stages of their own runs, read as one pseudo-model each
    for path in suites.glob("*.yaml"):
        models |= set((yaml.safe_load(path.read_text()) or {}).get("models", {}))
    numbers = [n for catalogue in CATALOGUES.values() for n in catalogue.published]
    assert len(numbers) >= 60 and {n.paper for n in numbers} >= {"000", "003", "004"}
    assert sorted({n.model for n in numbers} - models) == []
    for catalogue in CATALOGUES.values():
        assert catalogue.published == () or catalogue.lost  # what the stored text lost is said


def test_docs_claims_lists_every_claim_with_its_test():
    text = (Path(__file__).parents[2] / "docs" / "claims.md").read_text()
    missing = [c.id for c in CLAIMS if f"| `{c.id}` | {c.section} | {c.describe().replace('|', chr(92) + '|')} |" not in text]
    assert missing == [], "docs/claims.md lacks these claims or their tests as the catalogue states them now"
