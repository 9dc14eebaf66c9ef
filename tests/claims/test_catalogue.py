"""The claims catalogue (crosslayer.claims.catalogue): every file loads and validates, a broken entry
fails naming the file and the claim, the tables it names are those the workflow writes, and for every
claim the engine applies the paper's stated direction: tables built with the effect on the side the
catalogue quotes give "holds", the reversal "contradicted"."""

import importlib.util
import itertools
from dataclasses import replace
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
    PerModel,
    catalogue_papers,
    load_catalogue,
    parse_catalogue,
)
from crosslayer.claims.engine import evaluate
from crosslayer.claims.kinds.units import layer_share
from crosslayer.claims.readers import reader

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
        assert 6 <= len(catalogue.claims) <= 30, paper  # the headline findings, not every sentence
    found = {c.id: (c.kind, c.direction, c.magnitude.words if c.magnitude and c.magnitude.words else None)
             if c.testable else None for c in CLAIMS}
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
        Path(kind) / f"{paper}.yaml" for paper in CATALOGUES for kind in ("catalogue", "headlines")}


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
        added = {"reference_step", "last_step"} if name == "alignment/cascade" else set()  # by its reader
        assert set(declared[name].columns) == written[name] | added, name
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
        ({**GOOD, "kind": "trend", "statistic": "spearman", "x": "x", "before": None}, "a trend of changes needs both"),
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


def planted(claim, side, *, n_units=24, seed=0, size=None, per_group=None):
    """Tables on which ``claim``'s statistic lies clearly on the paper's side of its value
    (``side=+1``), on the other side (``side=-1``) or at the value itself (``side=0``: no effect), built from the claim's own fields so that every
    catalogue entry gets its tables: its models (two groups for a contrast; each one of the paper's
    models where the claim names them, so that the paper's steps and sizes apply), the lookups it
    reads, rows at each selection it names (two rows per unit where its units average finer rows),
    and values with the effect planted. ``size``: plant the statistic at that value instead (the
    paper's size, or a tenth of it), with little noise. An absence (``==``) is planted at its value
    (side +1) or ten margins away (side -1)."""
    rng = np.random.default_rng(seed)
    up = side * (1 if claim.direction in (">", ">=", "==") else -1)  # +1: the statistic above the value
    repo = claim.stated_for[0] if claim.stated_for else None
    if claim.groups:  # group a on the `up` side of group b
        g = claim.groups
        count = per_group or max(claim.min_models, 2 if claim.unit == "model" else 1)
        models = {f"{n}{i}": (up if n == "a" else -up, {g.by: g.a if n == "a" else g.b})
                  for n in "ab" for i in range(count)}
    else:
        models = {"m": (up, {})}
    tables = {"models": pd.DataFrame([{"model": m, "repo": repo, "untrained_step": 0, **dict(claim.applies_to),
                                       **attrs} for m, (_, attrs) in models.items()])}

    def put(lookup, value):  # the lookup's table: one row per model
        tables.setdefault(lookup.table, pd.DataFrame({"model": list(models)}))[lookup.column] = value
        return value

    value = put(claim.value, 0.25) if isinstance(claim.value, Lookup) else claim.value
    margin = claim.margin and claim.margin.value
    margin = put(margin, 0.05) if isinstance(margin, Lookup) else margin
    if isinstance(claim.magnitude and claim.magnitude.value, Lookup):
        put(claim.magnitude.value, value + 0.1 * up)
    cut = claim.indicator and claim.indicator.value
    cut = put(cut, 0.5) if isinstance(cut, Lookup) else cut
    # selections as rows: literals as given, the paper's own per model, each lookup at a step of its
    # own, first / last around them, the untrained step 0
    selections = {key: dict(getattr(claim, key)) for key in ("at", "before", "after", "since")}
    steps = itertools.count(50, 10)
    for sel in selections.values():
        for column, s in sel.items():
            if isinstance(s, PerModel):
                s = s.value_for(repo) if s.value_for(repo) is not None else s.otherwise
            sel[column] = put(s, next(steps)) if isinstance(s, Lookup) else 0 if s == "untrained" else s
    named = [s for sel in selections.values() for s in sel.values()
             if isinstance(s, (int, float)) and not isinstance(s, bool)]  # numbers: a run name has no first / last
    ends = {"first": min(named, default=0) - 10, "second": min(named, default=0) - 5, "last": max(named, default=0) + 100}
    seconds = [c for sel in selections.values() for c, s in sel.items() if s == "second"]
    for sel in selections.values():
        sel.update({c: ends[s] for c, s in sel.items() if isinstance(s, str) and s in SELECTORS})
    noise = (0.05 if size is None else 0.001) if claim.direction != "==" else margin / 10

    def values(state, jitter=0):  # `state` in [0, 1]: that share of units on the indicator's true side (or the raw
        if cut is None:           # level); `jitter` more true units (models apart); which units, at random
            return state + rng.normal(scale=noise, size=n_units)
        true = rng.permutation(np.arange(n_units) < min(n_units, max(0, round(n_units * state) + jitter)))
        return cut + (1 if claim.indicator.op in (">", ">=") else -1) * np.where(true, 0.1, -0.1)

    def level(direction):  # a mean at one selection, or the after of a ratio: on its side of `value`
        if claim.direction == "==":
            return value + (0 if direction > 0 else 10 * margin)
        if size is not None:
            return size
        return value + (0.2 if claim.kind == "threshold" or claim.statistic == "ratio_of_means" else 1) * direction

    rows = []
    for index, (model, (direction, _)) in enumerate(models.items()):
        jitter = index % 3 if claim.unit == "model" else 0  # models as units: not all alike
        # a contrast at the paper's size: group a changes (or sits) by `size`, group b not at all
        size = size if not claim.groups or size is None or direction == up else 0.0
        # units: one per row, or (a unit of whole models) the rows of one model, indexed by `within`
        # (a trend across models: one model per unit, its finer rows added below)
        finer = claim.within[0] if claim.unit == "model" and claim.within and claim.kind != "trend" else claim.unit
        base = {"model": model, finer: unit_labels(claim, finer, n_units), **dict(claim.where)}
        if claim.kind == "trend":  # x from the step a trend starts at, where it names one
            x = np.arange(n_units, dtype=float) + sum(selections["since"].values())
            r = 0.99 * direction if size is None else size  # the correlation to plant
            if claim.direction == "==":  # an absent relation: none (side +1), or a strong one (side -1)
                r = 0.0 if direction > 0 else 0.99
            y = (np.sign(r) * x + rng.normal(scale=x.std() * np.sqrt(1 / r**2 - 1), size=n_units) if r
                 else rng.normal(size=n_units))
            if claim.before:  # a change of the trend: none before and a rising one after, or the reverse
                rising, flat = x + rng.normal(scale=2, size=n_units), rng.normal(size=n_units)
                first, then = ((flat, rising) if direction > 0 else (rising, flat) if direction < 0
                               else (flat, rng.normal(size=n_units)))
                rows.append(pd.DataFrame({**base, **selections["before"], claim.x: x, claim.column: first}))
                rows.append(pd.DataFrame({**base, **selections["after"], claim.x: x, claim.column: then}))
            else:
                rows.append(pd.DataFrame({**base, **selections["at"], claim.x: x, claim.column: y}))
        elif claim.before and claim.statistic == "ratio_of_means":
            start = 1.0 + rng.normal(scale=noise, size=n_units)
            rows.append(pd.DataFrame({**base, **selections["before"], claim.column: start}))
            rows.append(pd.DataFrame({**base, **selections["after"], claim.column: start * level(direction)
                                      + rng.normal(scale=noise, size=n_units)}))
        elif claim.before:  # a change: raw values by 1 (or `size`), or indicators 0.25 -> 1 (rise) / 0.75 -> 0 (fall)
            if cut is None:  # an absent change (==): none, or ten margins
                start, end = 0.0, (level(direction) if claim.direction == "==" else
                                   float(direction) if size is None else size)
            elif size is not None:
                start, end = (0.0, size) if size > 0 else (-size, 0.0)
            else:
                start, end = (0.25, 1.0) if direction > 0 else (0.75, 0.0) if direction < 0 else (0.5, 0.5)
            rows.append(pd.DataFrame({**base, **selections["before"], claim.column: values(start)}))
            rows.append(pd.DataFrame({**base, **selections["after"], claim.column: values(end, jitter)}))
        else:  # values at one selection: a threshold's mean, or a contrast's groups either side
            centre = level(direction) if claim.kind == "threshold" else (
                (size if size is not None else 1.0) * (direction > 0) if claim.unit == "model" else 0.2 * direction)
            rows.append(pd.DataFrame({**base, **selections["at"], claim.column: values(centre, jitter)}))
    table = pd.concat(rows, ignore_index=True)
    for column in seconds:  # a first row before the second, without the value (as the toy's Gcum at step 0)
        decoy = table[table[column] == ends["second"]].assign(**{column: ends["first"], claim.column: np.nan})
        table = pd.concat([decoy, table], ignore_index=True)
    for column in claim.within:  # finer rows of one unit: the same values twice, averaged back
        if column != finer:
            table = pd.concat([table.assign(**{column: 0}), table.assign(**{column: 1})], ignore_index=True)
    extra = sorted(set(table["model"]) - set(tables["models"]["model"]))  # models as units: each one known
    if extra:
        template = tables["models"].iloc[0].to_dict()
        tables["models"] = pd.concat([tables["models"], pd.DataFrame([{**template, "model": m} for m in extra])],
                                     ignore_index=True)
    if claim.early and "step" in table:  # a later checkpoint: the early one is not the last
        table = pd.concat([table, table.assign(step=table["step"].max() + 1000)], ignore_index=True)
    elif claim.early:  # a table read at one step of its own (the cascade's), before the last
        table = table.assign(reference_step=100, last_step=1000)
    tables[claim.table] = table
    return tables


def unit_labels(claim, column, n):
    """``n`` labels of units in ``column``: layer pairs or boundaries where the claim's reader says
    its units share layers (so that the engine can tell which), else ``u0, u1, ...``."""
    share = layer_share(claim) if column == claim.unit else None
    if share is None:
        return [f"u{i}" for i in range(n)]
    layers = 2
    while len(share.labels(layers)) < n:
        layers += 1
    return share.labels(layers)[:n]


def nested(claim):
    """Why the claim's column is not independent over its units (its reader says), or ""."""
    return dict(reader(claim.table).nested).get(claim.column, "") if claim.unit != "model" else ""


@pytest.mark.parametrize("claim", TESTABLE, ids=[c.id for c in TESTABLE])
def test_the_engine_applies_the_papers_direction(claim):
    if nested(claim):  # no interval over nested units: refused, whatever the data
        verdict = evaluate(claim, planted(claim, 1), n_boot=500)
        assert verdict.verdict == "not testable" and nested(claim) in verdict.reason
        return
    # an absent correlation shows inside its margin only over many units (24 leave rho +- 0.35)
    # (and an absent fraction: 24 layers, none significant, leave up to 0.14)
    units = 200 if claim.direction == "==" and (claim.kind == "trend" or claim.indicator) else 24
    # a fraction above 0 has no other side: none of its units is read against the size its words state
    bounded = claim.indicator is not None and claim.kind == "threshold" and claim.value == 0 and claim.direction != "=="
    other = "contradicted" if not bounded or (claim.magnitude and claim.magnitude.words) else "inconclusive"
    for side, expected in ((1, "holds"), (-1, other)):
        verdict = evaluate(claim, planted(claim, side, n_units=units), n_boot=500)
        assert verdict.verdict == expected, f"{claim.id} ({claim.section}: {claim.quote!r}): {verdict.reason}"


#: What the engine's reason names for each test the calibration bench lists (bench.calibration.claim_tests).
BENCH_METHODS = {
    "mean, Student's t": "(Student's t)", "change of 0/1 units, t": "(Student's t)",
    "fraction, Clopper-Pearson": "(Clopper-Pearson)", "ratio of means, Fieller": "(Fieller)",
    "mean over boundaries, chain t, shared layers": "(t along a chain of", "absence of a mean, TOST": "interval",
    "mean over layer pairs, layer jackknife, shared layers": "(jackknife over",
    "two groups, unequal-variance t (Hsu)": "(unequal-variance t", "trend, Fisher's z + permutation": "(Fisher's z)",
    "trend over boundaries, Fisher's z over every other one + permutation": "boundaries that share no layer)",
    "trend over layer pairs, layer jackknife + permutation": "(jackknife over", "absence of a trend, TOST (Fisher's z)":
    "(Fisher's z)", "trend over one run's checkpoints, permutation": "permutation", "change of a trend, jackknife + "
    "swap permutation": "(jackknife over",
}


def test_the_calibration_bench_lists_the_test_each_claims_verdict_takes():
    """bench.calibration.claim_tests() reads each claim's test off its fields apart from the engine's
    dispatch: on each claim's planted tables the engine's reason names that test."""
    from bench.calibration import claim_tests

    listed = {claim: (unit, name) for claim, unit, name in claim_tests()}
    assert set(listed) == {c.id for c in TESTABLE}
    for claim in TESTABLE:
        unit, name = listed[claim.id]
        units = 200 if claim.direction == "==" and (claim.kind == "trend" or claim.indicator) else 24
        verdict = evaluate(claim, planted(claim, 1, n_units=units), n_boot=200)
        assert unit == claim.unit_name and BENCH_METHODS[name] in verdict.reason, (claim.id, name, verdict.reason)


DIRECTED = [c for c in TESTABLE if c.direction != "==" and not nested(c)]


@pytest.mark.parametrize("claim", DIRECTED, ids=[c.id for c in DIRECTED])
def test_no_effect_never_holds(claim):
    """The statistic planted at the claim's own value (no change, no correlation, groups alike): the
    interval straddles it, so the verdict is never "holds"."""
    verdict = evaluate(claim, planted(claim, 0), n_boot=500)
    assert verdict.verdict != "holds", f"{claim.id}: {verdict.reason}"


SIZED = [c for c in TESTABLE if c.magnitude and not nested(c)]


@pytest.mark.parametrize("claim", TESTABLE, ids=[c.id for c in TESTABLE])
def test_every_claim_resamples_units_its_reader_calls_independent(claim):
    assert claim.unit in (*reader(claim.table).units, "model"), (claim.id, claim.unit, reader(claim.table).units)


def test_a_claim_over_units_finer_than_its_readers_is_refused():
    token_pairs = replace(CATALOGUES["002"].claim("002-token-self-emerges"), within=(),
                          unit="cell", unit_name="samples")
    with pytest.raises(ValueError, match=r"independent units of coupling/tokenwise_self are \['prompt'\]"):
        evaluate(token_pairs, {})


@pytest.mark.parametrize("claim", SIZED, ids=[c.id for c in SIZED])
def test_the_engine_applies_the_papers_size(claim):
    """The paper's size planted: as strong as the paper; a tenth of it: weaker, and not "holds"
    where the quote's words state the size."""
    paper = claim.magnitude.value
    paper = paper.value_for(claim.stated_for[0]) if isinstance(paper, PerModel) else paper
    paper = 0.25 + 0.1 if isinstance(paper, Lookup) else paper  # planted() puts the lookup there
    many = 12 if claim.unit == "model" else None  # a size between groups of models needs models
    at_size = evaluate(claim, planted(claim, 1, size=paper, per_group=many, n_units=400), n_boot=500)
    assert at_size.magnitude in ("as strong", "stronger") and at_size.verdict == "holds", at_size.reason
    assert at_size.paper_value == pytest.approx(paper)
    if claim.statistic == "ratio_of_means":  # a tenth of the way from no change (1) to the paper's ratio
        tenth = 1 + (paper - 1) / 10
    elif isinstance(claim.magnitude.value, (float, PerModel)) and claim.kind != "threshold":
        tenth = paper / 10
    else:  # a threshold's size: a tenth of its distance from the claim's value
        origin = 0.25 if isinstance(claim.value, Lookup) else claim.value
        tenth = origin + (paper - origin) / 10
    short = evaluate(claim, planted(claim, 1, size=tenth, per_group=many, n_units=400), n_boot=500)
    assert short.magnitude == "weaker", short.reason
    if claim.magnitude.words:
        assert short.verdict != "holds", f"{claim.id}: {claim.magnitude.words!r} is the paper's size: {short.reason}"
        assert claim.magnitude.words.lower() in claim.quote.lower()


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


def test_every_step_a_claim_names_for_a_papers_model_is_one_its_suite_runs():
    """The paper's own steps (Table 1's first step, the surge's end, step 2,000) are checkpoints of
    the suite that runs the paper's model: a claim comparing them is testable there."""
    suites = Path(__file__).parents[2] / "config" / "suites"
    steps = {}  # hub repo -> steps its suite runs
    for path in suites.glob("*.yaml"):
        for name, entry in ((yaml.safe_load(path.read_text()) or {}).get("models") or {}).items():
            runs = set(entry.get("steps") or []) | set((entry.get("checkpoints") or {}).keys())
            steps.setdefault(name, set()).update(int(s) for s in runs)
    missing = []
    for catalogue in CATALOGUES.values():
        names = {repo: name for name, repo in (catalogue.paper_models or {}).items()}
        for claim in catalogue.claims:
            for pairs in (claim.at, claim.before, claim.after):
                for column, selector in pairs:
                    if column == "step" and isinstance(selector, PerModel):
                        missing += [(claim.id, names[repo], step) for repo, step in selector.values
                                    if step not in steps.get(names[repo], set())]
    assert missing == []
