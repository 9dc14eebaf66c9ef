"""The claims catalogue: one YAML file per paper (``catalogue/<paper>.yaml``, package data), parsed
into frozen :class:`Claim` records and validated; every error names the file and the claim.

A file holds ``paper`` (the id, e.g. ``"000"``), ``title``, ``tables`` (each table the claims read:
``source``, the workflow output it comes from, and ``columns``, those a reader hands over, ``model``
always among them) and ``claims``, a list of mappings with these keys:

``id, section, quote``
    required; the id starts with the paper id, the quote is the paper's statement, verbatim and short.
``testable: false, why``
    a claim the workflow's tables cannot measure, and why (the other keys are then optional).
``kind``
    ``change`` (paired per-unit difference, ``after`` minus ``before``, or with statistic
    ``ratio_of_means`` their means' ratio), ``contrast`` (two groups of models, ``groups.a`` minus
    ``groups.b``, each unit's value taken ``at`` one selection or as the change ``before`` ->
    ``after``), ``trend`` (correlation of ``column`` with ``x`` across units ``at`` one selection,
    or its change ``before`` -> ``after`` over the same units) or ``threshold`` (the mean of
    ``column`` against ``value``).
``table, column, x, statistic, direction, value``
    what is measured and how the paper states it: ``statistic`` is one of :data:`KINDS` [kind];
    ``direction`` one of :data:`DIRECTIONS` against ``value`` (default 0, 1 for a ratio; a number or
    a lookup); ``==`` is an absence ("at chance", "about 98%"), which needs ``margin``.
``magnitude: {value, cite, words, spread}``
    the paper's size in the claim's statistic (a number, a lookup, or ``{paper: {name: value}}`` for
    the paper's own models), where it comes from, the words of the quote that state it (then the
    claim holds only at that size) and how far the paper's own numbers let it reach (e.g. two seed
    sds).
``margin: {value, cite}``
    how far from ``value`` an absence may lie (a number or a lookup, e.g. a baseline's sd).
``unit: {column, name, within}``
    the column naming the independent units the interval is taken over, and what they are
    (:data:`UNIT_NAMES`); ``within`` lists the columns of finer rows of one unit (token pairs of a
    prompt, both orders of a layer pair), averaged into it first.
``since``
    for a trend over the checkpoints of one run, ``{column: selector}``: its rows at or after the
    selected value only (the checkpoints after the paper's reference step).
``grows: true``
    for a trend's change: the paper says the trend grows ("becomes more pronounced"), so it may be
    there before; without it a trend already present before contradicts (training "installs" it).
``where, at, before, after``
    row selections, ``{column: selector}``: ``where`` takes literals only; the others also take
    ``first`` / ``last`` (the column's smallest / largest value for the model), ``untrained`` (for
    ``step``: the checkpoint known to be the model's initialization), a lookup ``{table, column}``
    (the one value that column holds for the model, e.g. its reference step) or ``{paper: {name:
    value}, otherwise: selector}`` (the value the paper compares for each of its models).
    Selectors apply in the order written, ``where`` first: ``{run: x, epoch: last}`` is run x's
    last epoch.
``indicator: {op, value}``
    turns ``column`` into 0/1 (``column op value``) first, so that a mean is a fraction.
``groups: {by, a, b, names}``
    contrast groups: models whose ``models`` table column ``by`` equals ``a`` / ``b``.
``applies_to``
    ``{column: value}`` of the ``models`` table: the models the claim is about.
``stated_for``
    names of the file's ``paper_models`` the paper states the claim for (default: all of them; an
    empty list: any model); a verdict on another model is reported as beyond the paper's scope.
``scope``
    ``model`` (a verdict per model; the default) or ``group`` (one over several models; contrasts).
``requires: {min_units, min_models, early}``
    at least this many units with a value (default 3) and models per group (default 1); ``early``:
    the selected step must come before the model's last checkpoint.
``note``
    how the quote was read, for the reviewer.
``figure``
    the report figure that shows it, ``<stage>/<figure>`` (``crosslayer/stages.py`` names; the
    per-model figure, else the one over all models).

Optional at the file's top level: ``paper_models``, the paper's models by hub repo (``{name:
owner/repo}``), ``published``, the numbers the paper's text states for a model and
checkpoint a suite runs, each ``{model, section, quantity, value, table, column, where, at, note}``
(ours: the mean of ``column`` over the model's rows matching ``where`` and ``at``, selectors as in
claims), ``lost``, which numbers the stored text lost and so stay out, and ``budgets``, the
training budget the paper gives a run of its own experiments (``{table: {column, value, cite}}``:
the column holding each run's own, e.g. Adam steps): a verdict on runs trained below a tenth of it
is beyond the paper's scope.
"""

import functools
from dataclasses import replace
from importlib import resources

import yaml

from crosslayer.claims.records import (DIRECTIONS, KINDS, OPS, SELECTORS, UNIT_NAMES, Budget, Catalogue, Claim, Groups,
                                      Indicator, Lookup, Magnitude, Margin, PerModel, Published, TableSpec)
from crosslayer.stages import stage

__all__ = [
    "KINDS",
    "DIRECTIONS",
    "SELECTORS",
    "UNIT_NAMES",
    "Lookup",
    "PerModel",
    "Indicator",
    "Groups",
    "Magnitude",
    "Margin",
    "Claim",
    "Published",
    "TableSpec",
    "Catalogue",
    "CatalogueError",
    "catalogue_papers",
    "load_catalogue",
    "parse_catalogue",
]

_CLAIM_KEYS = {"id", "section", "quote", "testable", "why", "kind", "scope", "table", "column", "x", "statistic",
               "direction", "value", "unit", "where", "at", "before", "after", "since", "indicator", "groups", "applies_to",
               "requires", "note", "figure", "magnitude", "margin", "stated_for", "grows"}
_FILE_KEYS = {"paper", "title", "tables", "claims"}
_OPTIONAL_FILE_KEYS = {"published", "lost", "paper_models", "budgets"}
_PUBLISHED_KEYS = {"model", "section", "quantity", "value", "table", "column", "where", "at", "note"}


class CatalogueError(ValueError):
    """A catalogue file that does not parse or validate; the message names the file and claim."""


def catalogue_papers():
    """The paper ids that have a catalogue file, sorted (``["000", ...]``)."""
    folder = resources.files("crosslayer.claims") / "catalogue"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


@functools.cache
def _catalogue_file(paper):
    """One paper's catalogue, parsed once per process (package data: the workflow reads it while
    building every DAG); libyaml's loader where installed, 5-10x faster than the pure-Python one."""
    path = resources.files("crosslayer.claims") / "catalogue" / f"{paper}.yaml"
    if not path.is_file():
        raise CatalogueError(f"no claims catalogue for paper {paper!r}; there are {catalogue_papers()}")
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise CatalogueError(f"claims catalogue {path.name}: not valid YAML: {error}") from None
    return parse_catalogue(document, source=path.name)


def load_catalogue(paper):
    """Read and validate one paper's catalogue.

    Parameters
    ----------
    paper : str or int
        The paper id, ``"000"`` (an int is zero-padded to three digits).

    Returns
    -------
    Catalogue

    Raises
    ------
    CatalogueError
        No file for the paper, or one that does not validate (the message names the file and claim).
    """
    return _catalogue_file(f"{paper:03d}" if isinstance(paper, int) else str(paper))


def parse_catalogue(document, *, source):
    """Validate a catalogue document (the YAML file as Python data) and build its claims.

    Parameters
    ----------
    document : dict
        ``paper``, ``title``, ``tables`` and ``claims`` (module docstring).
    source : str
        The file name, for messages.

    Returns
    -------
    Catalogue
    """
    if not isinstance(document, dict):
        raise CatalogueError(f"claims catalogue {source}: expected a mapping, got {type(document).__name__}")
    _no_unknown(document, _FILE_KEYS | _OPTIONAL_FILE_KEYS, f"claims catalogue {source}")
    missing = sorted(_FILE_KEYS - document.keys())
    if missing:
        raise CatalogueError(f"claims catalogue {source}: missing {missing}")
    paper = document["paper"]
    stem = source.rsplit("/", 1)[-1].removesuffix(".yaml")
    if not isinstance(paper, str) or paper != stem:
        raise CatalogueError(f"claims catalogue {source}: paper must be the string {stem!r}, got {paper!r}")
    tables = _parse_tables(document["tables"], source)
    if not isinstance(document["claims"], list) or not document["claims"]:
        raise CatalogueError(f"claims catalogue {source}: claims must be a non-empty list")
    paper_models = document.get("paper_models") or {}
    if not isinstance(paper_models, dict) or not all(isinstance(v, str) and "/" in v for v in paper_models.values()):
        raise CatalogueError(f"claims catalogue {source}: paper_models maps a name to a hub repo (owner/name), got "
                             f"{paper_models!r}")
    claims, seen = [], set()
    for i, entry in enumerate(document["claims"], start=1):
        name = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
        where = f"claims catalogue {source}, claim {name}"
        claim = _parse_claim(entry, paper, where)
        claim = replace(claim, stated_for=_stated_for(entry, paper_models, where),
                        **{key: _per_model(getattr(claim, key), paper_models, f"{where}, {key}")
                           for key in ("at", "before", "after", "since")})
        if claim.magnitude and isinstance(claim.magnitude.value, PerModel):
            (_, size), = _per_model((("magnitude", claim.magnitude.value),), paper_models, where)
            claim = replace(claim, magnitude=replace(claim.magnitude, value=size))
        if claim.id in seen:
            raise CatalogueError(f"{where}: duplicate id")
        seen.add(claim.id)
        if claim.testable:
            _check_columns(claim, tables, where)
        claims.append(claim)
    published = document.get("published") or []
    if not isinstance(published, list):
        raise CatalogueError(f"claims catalogue {source}: published must be a list")
    numbers = tuple(_parse_published(entry, paper, tables, f"claims catalogue {source}, published #{i}")
                    for i, entry in enumerate(published, start=1))
    return Catalogue(paper=paper, title=str(document["title"]), tables=tables, claims=tuple(claims),
                     published=numbers, lost=str(document.get("lost", "")).strip(), paper_models=paper_models,
                     budgets=_parse_budgets(document.get("budgets") or {}, tables, f"claims catalogue {source}"))


def _parse_budgets(budgets, tables, where):
    """``budgets``: for a table of the paper's own runs, ``{column, value, cite}``."""
    parsed = {}
    for table, entry in budgets.items() if isinstance(budgets, dict) else [(None, budgets)]:
        if table not in tables or not isinstance(entry, dict) or set(entry) != {"column", "value", "cite"} or \
                entry["column"] not in tables[table].columns or not isinstance(entry["value"], (int, float)):
            raise CatalogueError(f"{where}: budgets maps a declared table to {{column, value, cite}} with a column "
                                 f"of it and a number, got {table!r}: {entry!r}")
        parsed[table] = Budget(entry["column"], float(entry["value"]), str(entry["cite"]))
    return parsed


def _per_model(pairs, paper_models, where):
    """Selections with the paper's per-model values keyed by hub repo instead of the file's names."""
    out = []
    for column, selector in pairs:
        if isinstance(selector, PerModel):
            unknown = [name for name, _ in selector.values if name not in paper_models]
            if unknown:
                raise CatalogueError(f"{where}.{column}: {unknown} are not names of the file's paper_models "
                                     f"{sorted(paper_models)}")
            selector = replace(selector, values=tuple((paper_models[n], v) for n, v in selector.values))
        out.append((column, selector))
    return tuple(out)


def _stated_for(entry, paper_models, where):
    """The repos of the paper's models a claim is stated for: ``stated_for`` (names of the file's
    ``paper_models``), by default all of them."""
    names = entry.get("stated_for", list(paper_models))
    if not isinstance(names, list) or any(n not in paper_models for n in names):
        raise CatalogueError(f"{where}: `stated_for` lists names of the file's paper_models {sorted(paper_models)}, "
                             f"got {names!r}")
    return tuple(paper_models[n] for n in names)


def _parse_published(entry, paper, tables, where):
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where}: expected a mapping, got {entry!r}")
    _no_unknown(entry, _PUBLISHED_KEYS, where)
    missing = sorted({"model", "section", "quantity", "value", "table", "column"} - entry.keys())
    if missing:
        raise CatalogueError(f"{where}: missing {missing}")
    value = _value(entry["value"], "value", where)
    if not isinstance(value, float):
        raise CatalogueError(f"{where}: `value` must be a number, got {entry['value']!r}")
    number = Published(paper=paper, model=str(entry["model"]), section=str(entry["section"]),
                       quantity=str(entry["quantity"]), value=value, table=str(entry["table"]),
                       column=str(entry["column"]),
                       where=_selection(entry.get("where", {}), "where", where, literal_only=True),
                       at=_selection(entry.get("at", {}), "at", where), note=str(entry.get("note", "")).strip())
    columns = [number.column, *(c for c, _ in number.where + number.at)]
    if number.table not in tables:
        raise CatalogueError(f"{where}: table {number.table!r} is not declared under tables ({sorted(tables)})")
    absent = [c for c in columns if c not in tables[number.table].columns]
    if absent:
        raise CatalogueError(f"{where}: table {number.table} declares no column(s) {absent}")
    return number


def _parse_tables(tables, source):
    if not isinstance(tables, dict) or not tables:
        raise CatalogueError(f"claims catalogue {source}: tables must be a non-empty mapping")
    parsed = {}
    for name, spec in tables.items():
        where = f"claims catalogue {source}, table {name}"
        if not isinstance(spec, dict) or set(spec) != {"source", "columns"}:
            raise CatalogueError(f"{where}: expected exactly the keys source and columns, got {spec!r}")
        columns = spec["columns"]
        if not isinstance(columns, list) or "model" not in columns or not all(isinstance(c, str) for c in columns):
            raise CatalogueError(f"{where}: columns must be a list of names including model, got {columns!r}")
        parsed[name] = TableSpec(source=str(spec["source"]), columns=tuple(columns))
    return parsed


def _parse_claim(entry, paper, where):
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where}: expected a mapping, got {entry!r}")
    _no_unknown(entry, _CLAIM_KEYS, where)
    for key in ("id", "section", "quote"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise CatalogueError(f"{where}: `{key}` must be a non-empty string")
    if not entry["id"].startswith(f"{paper}-"):
        raise CatalogueError(f"{where}: the id must start with the paper id, {paper}-")
    testable = entry.get("testable", True)
    if not isinstance(testable, bool):
        raise CatalogueError(f"{where}: `testable` must be true or false, got {testable!r}")
    base = dict(id=entry["id"], paper=paper, section=entry["section"], quote=entry["quote"].strip(),
                note=str(entry.get("note", "")).strip(), figure=_figure(entry.get("figure", ""), where))
    if not testable:
        if not str(entry.get("why", "")).strip():
            raise CatalogueError(f"{where}: a claim with testable: false needs `why`")
        return Claim(**base, testable=False, why=str(entry["why"]).strip())
    if "why" in entry:
        raise CatalogueError(f"{where}: `why` is only for claims with testable: false")
    return Claim(**base, **_comparison(entry, where))


def _comparison(entry, where):
    """The keyword arguments of a testable claim's comparison, validated."""
    kind = entry.get("kind")
    if kind not in KINDS:
        raise CatalogueError(f"{where}: `kind` must be one of {list(KINDS)}, got {kind!r}")
    for key in ("table", "column", "statistic", "direction", "unit"):
        if key not in entry:
            raise CatalogueError(f"{where}: a {kind} claim needs `{key}`")
    if entry["statistic"] not in KINDS[kind]:
        raise CatalogueError(
            f"{where}: a {kind} claim's statistic is one of {list(KINDS[kind])}, got {entry['statistic']!r}")
    if entry["direction"] not in DIRECTIONS:
        raise CatalogueError(f"{where}: `direction` must be one of {list(DIRECTIONS)}, got {entry['direction']!r}")
    unit = entry["unit"]
    if (not isinstance(unit, dict) or not {"column", "name"} <= set(unit) <= {"column", "name", "within"}
            or unit["name"] not in UNIT_NAMES):
        raise CatalogueError(f"{where}: `unit` must be {{column, name}} (and optionally within: [columns]) with "
                             f"name one of {list(UNIT_NAMES)}, got {unit!r}")
    within = unit.get("within", [])
    if not isinstance(within, list) or not all(isinstance(c, str) for c in within):
        raise CatalogueError(f"{where}: `unit.within` must be a list of column names, got {within!r}")
    _allowed_keys(entry, kind, where)
    scope = entry.get("scope", "group" if kind == "contrast" else "model")
    if scope not in ("model", "group") or (kind == "contrast" and scope != "group"):
        raise CatalogueError(f"{where}: `scope` must be model or group (group for a contrast), got {scope!r}")
    requires = entry.get("requires", {})
    if not isinstance(requires, dict) or not set(requires) <= {"min_units", "min_models", "early"} or \
            not isinstance(requires.get("early", False), bool):
        raise CatalogueError(f"{where}: `requires` takes min_units, min_models and early (true/false), got "
                             f"{requires!r}")
    min_units, min_models = requires.get("min_units", 3), requires.get("min_models", 1)
    value = _value(entry.get("value", 1.0 if entry["statistic"] == "ratio_of_means" else 0.0), "value", where)
    if kind == "trend" and not (isinstance(value, float) and -2 < value < 2 and ("before" in entry or -1 < value < 1)):
        raise CatalogueError(f"{where}: a trend's value is a correlation in (-1, 1) (a change of one in (-2, 2)), "
                             f"got {value!r}")
    if not (isinstance(min_units, int) and min_units >= 2 and isinstance(min_models, int) and min_models >= 1):
        raise CatalogueError(f"{where}: requires.min_units must be an int >= 2 and min_models >= 1, got {requires!r}")
    magnitude, margin = _strength(entry, value, where)
    grows = entry.get("grows", False)
    if not isinstance(grows, bool) or (grows and not (kind == "trend" and "before" in entry)):
        raise CatalogueError(f"{where}: `grows` is true or false, and only for a trend's change (before -> after), "
                             f"got {grows!r}")
    return dict(
        kind=kind, scope=scope, table=str(entry["table"]), column=str(entry["column"]), x=str(entry.get("x", "")),
        statistic=entry["statistic"], direction=entry["direction"], value=value,
        unit=str(unit["column"]), unit_name=unit["name"], within=tuple(within), magnitude=magnitude, margin=margin,
        where=_selection(entry.get("where", {}), "where", where, literal_only=True),
        at=_selection(entry.get("at", {}), "at", where), before=_selection(entry.get("before", {}), "before", where),
        after=_selection(entry.get("after", {}), "after", where), since=_selection(entry.get("since", {}), "since", where),
        indicator=_indicator(entry.get("indicator"), where),
        groups=_groups(entry.get("groups"), where),
        applies_to=_selection(entry.get("applies_to", {}), "applies_to", where, literal_only=True),
        min_units=min_units, min_models=min_models, early=requires.get("early", False), grows=grows,
    )


def _strength(entry, value, where):
    """The claim's ``magnitude`` and ``margin``, validated: a margin for an absence (``==``) and only
    there; a size on the paper's side of its value; words of the size taken from the quote."""
    absence = entry["direction"] == "=="
    if absence != ("margin" in entry):
        raise CatalogueError(f"{where}: an absence (direction ==) needs `margin`, and only an absence takes one")
    if absence and "magnitude" in entry:
        raise CatalogueError(f"{where}: an absence states no size beyond its margin; remove `magnitude`")
    magnitude = margin = None
    if "magnitude" in entry:
        spec = entry["magnitude"]
        if not isinstance(spec, dict) or not {"value", "cite"} <= set(spec) <= {"value", "cite", "words", "spread"}:
            raise CatalogueError(f"{where}: `magnitude` is {{value, cite, words and spread (optional)}}, got {spec!r}")
        spread = spec.get("spread", 0.0)
        if isinstance(spread, bool) or not isinstance(spread, (int, float)) or spread < 0:
            raise CatalogueError(f"{where}: magnitude.spread must be a number >= 0, got {spread!r}")
        size = spec["value"]
        size = (_paper_selector(size, "magnitude", "value", where) if isinstance(size, dict) and "paper" in size
                else _value(size, "magnitude.value", where))
        magnitude = Magnitude(value=size, cite=_cited(spec, where), words=str(spec.get("words", "")).strip(),
                              spread=float(spread))
        if magnitude.words and magnitude.words.lower() not in entry["quote"].lower():
            raise CatalogueError(f"{where}: magnitude.words {magnitude.words!r} are not in the quote")
        size = magnitude.value
        if isinstance(size, float) and isinstance(value, float) and not OPS[entry["direction"]](size, value):
            raise CatalogueError(f"{where}: magnitude.value {size:g} is not on the paper's side "
                                 f"({entry['direction']} {value:g})")
    if absence:
        spec = entry["margin"]
        if not isinstance(spec, dict) or set(spec) != {"value", "cite"}:
            raise CatalogueError(f"{where}: `margin` is {{value, cite}}, got {spec!r}")
        margin = Margin(value=_value(spec["value"], "margin.value", where), cite=_cited(spec, where))
        if isinstance(margin.value, float) and margin.value <= 0:
            raise CatalogueError(f"{where}: margin.value must be positive, got {margin.value:g}")
    return magnitude, margin


def _cited(spec, where):
    cite = str(spec.get("cite", "")).strip()
    if not cite:
        raise CatalogueError(f"{where}: a size or margin cites the paper's words or numbers (`cite`)")
    return cite


def _allowed_keys(entry, kind, where):
    """Keys a kind needs or must not have."""
    need = {"change": {"before", "after"}, "contrast": {"groups"}, "trend": {"x"}, "threshold": {"value"}}[kind]
    refuse = {"change": {"at", "x", "groups", "since"}, "contrast": {"x", "since"}, "trend": {"groups", "indicator"},
              "threshold": {"before", "after", "x", "groups", "since"}}[kind]
    empty = sorted(k for k in need if entry.get(k) in (None, {}, ""))
    if empty:
        raise CatalogueError(f"{where}: a {kind} claim needs {empty}")
    if refuse & entry.keys():
        raise CatalogueError(f"{where}: a {kind} claim takes no {sorted(refuse & entry.keys())}")
    if kind in ("contrast", "trend") and ("before" in entry) != ("after" in entry):
        raise CatalogueError(f"{where}: a {kind} of changes needs both `before` and `after`")
    if kind == "trend" and "at" in entry and "before" in entry:
        raise CatalogueError(f"{where}: a trend is `at` one selection, or its change `before` -> `after`, not both")
    if kind == "contrast" and "at" in entry and "before" in entry:
        raise CatalogueError(
            f"{where}: a contrast compares values `at` one selection or changes `before` -> `after`, not both")


def _value(value, key, where):
    if isinstance(value, dict):
        if set(value) != {"table", "column"}:
            raise CatalogueError(f"{where}: a lookup in `{key}` is {{table, column}}, got {value!r}")
        return Lookup(table=str(value["table"]), column=str(value["column"]))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CatalogueError(f"{where}: `{key}` must be a number or a lookup {{table, column}}, got {value!r}")
    return float(value)


def _selection(mapping, key, where, *, literal_only=False):
    if not isinstance(mapping, dict):
        raise CatalogueError(f"{where}: `{key}` must be a mapping {{column: selector}}, got {mapping!r}")
    pairs = []
    for column, selector in mapping.items():
        if isinstance(selector, dict) and not literal_only and "paper" in selector:
            selector = _paper_selector(selector, key, column, where)
        elif isinstance(selector, dict) and not literal_only:
            selector = _value(selector, f"{key}.{column}", where)
        elif not isinstance(selector, (str, int, float, bool)) or (literal_only and selector in SELECTORS):
            kinds = "a literal" if literal_only else f"a literal, one of {list(SELECTORS)} or a lookup"
            raise CatalogueError(f"{where}: `{key}.{column}` must be {kinds}, got {selector!r}")
        if selector == "untrained" and column != "step":
            raise CatalogueError(f"{where}: `{key}.{column}`: only a step can be the untrained one")
        pairs.append((str(column), selector))
    return tuple(pairs)


def _paper_selector(spec, key, column, where):
    """``{paper: {model name: value}, otherwise: selector}``: the value the paper compares for each
    of its models (names resolved to repos by the caller), and for any other model."""
    if not set(spec) <= {"paper", "otherwise"} or not isinstance(spec["paper"], dict) or not spec["paper"]:
        raise CatalogueError(f"{where}: `{key}.{column}` per model is {{paper: {{name: value}}, otherwise: selector}}, "
                             f"got {spec!r}")
    otherwise = spec.get("otherwise")
    if otherwise is not None:
        otherwise = _selection({column: otherwise}, key, where)[0][1]  # "untrained" only for a step
    return PerModel(values=tuple(spec["paper"].items()), otherwise=otherwise)


def _indicator(spec, where):
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) != {"op", "value"} or spec["op"] not in DIRECTIONS:
        raise CatalogueError(f"{where}: `indicator` is {{op, value}} with op one of {list(DIRECTIONS)}, got {spec!r}")
    return Indicator(op=spec["op"], value=_value(spec["value"], "indicator.value", where))


def _groups(spec, where):
    if spec is None:
        return None
    names = spec.get("names") if isinstance(spec, dict) else None
    if (not isinstance(spec, dict) or set(spec) != {"by", "a", "b", "names"} or not isinstance(names, list)
            or len(names) != 2 or spec["a"] == spec["b"]):
        raise CatalogueError(
            f"{where}: `groups` is {{by, a, b, names: [name of a, name of b]}} with a != b, got {spec!r}")
    return Groups(by=str(spec["by"]), a=spec["a"], b=spec["b"], names=(str(names[0]), str(names[1])))


def _figure(name, where):
    """A claim's figure, ``<stage>/<figure>``, checked against the stage registry."""
    if not name:
        return ""
    stage_name, _, figure = str(name).partition("/")
    try:
        found = stage(stage_name)
    except ValueError as error:
        raise CatalogueError(f"{where}: `figure`: {error}") from None
    names = [f.name for f in (*found.figures, *found.all_model_figures)]
    if figure not in names:
        raise CatalogueError(f"{where}: `figure`: stage {stage_name} has no figure {figure!r} (it has {names})")
    return str(name)


def _no_unknown(mapping, known, where):
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise CatalogueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")


def _check_columns(claim, tables, where):
    """Every table and column a testable claim names is declared in the file's ``tables``."""
    wanted = {claim.table: [claim.column, claim.unit, claim.x, *claim.within,
                            *(c for p in (claim.where, claim.at, claim.before, claim.after, claim.since) for c, _ in p)]}
    for lookup in claim.lookups():
        wanted.setdefault(lookup.table, []).append(lookup.column)
    model_columns = [c for c, _ in claim.applies_to] + ([claim.groups.by] if claim.groups else [])
    if model_columns:
        wanted.setdefault("models", []).extend(model_columns)
    for table, columns in wanted.items():
        if table not in tables:
            raise CatalogueError(f"{where}: table {table!r} is not declared under tables ({sorted(tables)})")
        absent = [c for c in columns if c and c not in tables[table].columns]
        if absent:
            raise CatalogueError(
                f"{where}: table {table} declares no column(s) {absent} ({list(tables[table].columns)})")

