"""The records a claims catalogue parses into (:mod:`crosslayer.claims.catalogue` reads the YAML):
a :class:`Claim` and its parts, a :class:`Published` number, one paper's :class:`Catalogue`."""

import operator
from dataclasses import dataclass

__all__ = ["KINDS", "DIRECTIONS", "OPS", "SELECTORS", "UNIT_NAMES", "Lookup", "PerModel", "Indicator", "Groups",
           "Magnitude", "Margin", "Claim", "Published", "TableSpec", "Catalogue", "Budget"]

#: The comparison kinds and the statistics each computes.
KINDS = {
    "change": ("mean_difference", "ratio_of_means"),
    "contrast": ("difference_of_means",),
    "trend": ("spearman", "pearson", "pearson_r2"),
    "threshold": ("mean",),
}
#: The paper's side of its value; ``==`` is an absence ("at chance", "flat"), tested as equivalence
#: within the claim's ``margin``.
DIRECTIONS = (">", ">=", "<", "<=", "==")
#: The one-sided directions as comparisons.
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
#: Selector words (besides literals and lookups) in ``at``, ``before`` and ``after``: the column's
#: smallest or largest value for the model, its second smallest (``second``: the first tracked
#: point after the start, e.g. the toy's first row with a cumulative gradient, wherever a run's
#: ``track`` puts it), or (for ``step``) the checkpoint that is its initialization (step 0 of a run
#: the workflow trained, an untrained twin, or one the config marks).
SELECTORS = ("first", "second", "last", "untrained")
UNIT_NAMES = ("prompts", "samples", "tokens", "boundaries", "layers", "layer pairs", "models", "checkpoints", "seeds",
              "sample folds", "control draws")


@dataclass(frozen=True)
class Lookup:
    """A value read from another table: the one value ``column`` of ``table`` holds for the model."""

    table: str
    column: str


@dataclass(frozen=True)
class PerModel:
    """A selection the paper fixes for each of its models (the steps its table compares): ``values``
    as ``(hub repo, value)`` pairs, and ``otherwise`` (a selector) for any other model, or None."""

    values: tuple
    otherwise: object = None

    def value_for(self, repo):
        """The paper's value for the model of this hub repo, or None."""
        return dict(self.values).get(repo)


@dataclass(frozen=True)
class Indicator:
    """Turns a column into 0/1: ``column <op> value`` (``value`` a number or a :class:`Lookup`)."""

    op: str
    value: object


@dataclass(frozen=True)
class Groups:
    """The two groups of a contrast: models whose ``models`` column ``by`` equals ``a`` or ``b``."""

    by: str
    a: object
    b: object
    names: tuple[str, str]


@dataclass(frozen=True)
class Magnitude:
    """The paper's size for a claim's statistic: ``value`` (a number or a :class:`Lookup`), where it
    comes from (``cite``: the section, table or words), and ``words``, the part of the quote that
    states the size ("far below"), empty where the size is the paper's number but not its words: a
    claim whose words state the size holds only at that size. ``spread``: how far the paper's own
    numbers let the size reach either side (e.g. two of its seed sds), 0 for a bare number."""

    value: object
    cite: str
    words: str = ""
    spread: float = 0.0


@dataclass(frozen=True)
class Margin:
    """How far from its value an absence claim's statistic may lie and still be "at chance": a number
    or a :class:`Lookup` (a baseline's Monte Carlo spread), and where it comes from."""

    value: object
    cite: str


@dataclass(frozen=True)
class TableSpec:
    """A table the claims read: the workflow output it comes from and the columns a reader gives."""

    source: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Claim:
    """One headline finding of a paper as a testable statement (the module docstring gives the keys).

    Attributes
    ----------
    id, paper, section, quote : str
        Which finding, where the paper states it, and its words.
    testable : bool
        False for a finding the workflow's tables cannot measure; ``why`` says why.
    kind, statistic, direction, value
        The comparison (:data:`KINDS`), its statistic, and the paper's side of ``value`` (a float or a
        :class:`Lookup`).
    table, column, x : str
        The measured table, its column, and for a trend the column it is correlated with.
    unit, unit_name : str
        The column naming the independent units the uncertainty is taken over, and what they are.
    within : tuple of str
        Columns indexing several rows of one unit (token pairs of a prompt, both orders of a layer
        pair): their values are averaged within the unit first.
    magnitude : Magnitude or None
        The paper's size, where its words or numbers give one.
    stated_for : tuple of str
        The hub repos of the models the paper states the claim for (its scope); empty: no model
        named (its own toy runs, or every model).
    margin : Margin or None
        The equivalence margin of an absence claim (``direction ==``).
    where, at, before, after, since, applies_to : tuple of (str, object)
        Row selections and the model filter as ``(column, selector)`` pairs, in the catalogue's order.
    indicator : Indicator or None
    groups : Groups or None
    scope : {"model", "group"}
    min_units, min_models : int
        What a run needs beyond the rows themselves; see also :meth:`requirements`.
    early : bool
        The claim is about early training: its selected step must come before the model's last.
    grows : bool
        A trend's change that may be present before (it "grows"), not one training "installs".
    note : str
    """

    id: str
    paper: str
    section: str
    quote: str
    testable: bool = True
    why: str = ""
    kind: str = ""
    scope: str = "model"
    table: str = ""
    column: str = ""
    x: str = ""
    statistic: str = ""
    direction: str = ""
    value: object = 0.0
    unit: str = ""
    unit_name: str = ""
    within: tuple = ()
    stated_for: tuple = ()
    magnitude: Magnitude | None = None
    margin: Margin | None = None
    where: tuple = ()
    at: tuple = ()
    before: tuple = ()
    after: tuple = ()
    since: tuple = ()
    indicator: Indicator | None = None
    groups: Groups | None = None
    applies_to: tuple = ()
    min_units: int = 3
    min_models: int = 1
    early: bool = False
    grows: bool = False
    note: str = ""
    figure: str = ""

    def lookups(self):
        """Every :class:`Lookup` the claim reads, in a stable order."""
        selectors = [s for pairs in (self.at, self.before, self.after, self.since) for _, s in pairs]
        selectors += [s.otherwise for s in selectors if isinstance(s, PerModel)]
        selectors += [self.value] + ([self.indicator.value] if self.indicator else [])
        selectors += [s.value for s in (self.magnitude, self.margin) if s]
        return tuple(s for s in selectors if isinstance(s, Lookup))

    def describe(self):
        """The test in words, e.g. ``"change of alignment/adjacent left, step 0 -> step last, per
        boundaries: mean_difference > 0"``."""
        if not self.testable:
            return f"not testable: {self.why}"

        def sel(pairs):
            return ", ".join(f"{c} {_text(v)}" for c, v in pairs)

        value = _text(self.value)
        what = f"{self.table} {self.column}" + (f" vs {self.x}" if self.x else "")
        if self.indicator:
            what += f" {self.indicator.op} {_text(self.indicator.value)} (fraction)"
        if self.within:
            what += f" (mean over {', '.join(self.within)})"
        where = f" where {sel(self.where)}" if self.where else ""
        if self.before:
            when = f", {sel(self.before)} -> {sel(self.after)}"
        else:
            when = f", at {sel(self.at)}" if self.at else ""
        when += f", since {sel(self.since)}" if self.since else ""
        groups = f", {self.groups.names[0]} minus {self.groups.names[1]}" if self.groups else ""
        side = (f"within {_text(self.margin.value)} of {value}" if self.direction == "=="
                else f"{self.direction} {value}")
        size = f" (the paper's size: {_text(self.magnitude.value)})" if self.magnitude else ""
        return f"{self.kind} of {what}{where}{when}{groups}, over {self.unit_name}: {self.statistic} {side}{size}"

    def requirements(self):
        """What a run needs for this claim to be testable, in words (for documents and reports).

        Returns
        -------
        tuple of str
            e.g. ``("alignment/adjacent: left", "step 0", "at least 2 boundaries")``.
        """
        if not self.testable:
            return (f"beyond the workflow's tables: {self.why}",)
        needs = [f"{self.table}: {', '.join(c for c in (self.column, self.x) if c)}"]
        for pairs in (self.where, self.at, self.before, self.after):
            needs += [f"{column} {s}" for column, s in pairs
                      if not isinstance(s, (Lookup, PerModel)) and not (isinstance(s, str) and s in SELECTORS)]
            needs += [f"the {column} the paper compares for its models" for column, s in pairs
                      if isinstance(s, PerModel)]
            needs += ["a checkpoint known to be untrained" for _, s in pairs if s == "untrained"]
        needs += [f"the {lookup.column} of {lookup.table}" for lookup in self.lookups()]
        if self.before:
            needs.append("two distinct conditions (before and after)")
        needs.append(f"at least {self.min_units} {self.unit_name}")
        if self.early:
            needs.append("a checkpoint before the last")
        if self.applies_to:
            needs.append("a model with " + ", ".join(f"{c} = {v}" for c, v in self.applies_to))
        if self.groups:
            a, b = self.groups.names
            needs.append(f"at least {self.min_models} model(s) each of {a} and {b} ({self.groups.by})")
        return tuple(dict.fromkeys(needs))


@dataclass(frozen=True)
class Published:
    """A number the paper's text states for one model, and where ours is: the mean of ``column`` of
    ``table`` over the model's rows that match ``where`` and ``at`` (selectors as in claims)."""

    paper: str
    model: str
    section: str
    quantity: str
    value: float
    table: str
    column: str
    where: tuple = ()
    at: tuple = ()
    note: str = ""

    @property
    def id(self):
        """How messages name it: paper, section and quantity."""
        return f"{self.paper} {self.section}: {self.quantity}"


@dataclass(frozen=True)
class Budget:
    """The training budget the paper gives a run of its own experiments (the toy grid's Adam
    steps, the ablations' steps): ``column`` of the table holds a run's own, ``value`` is the
    paper's, ``cite`` where it says so."""

    column: str
    value: float
    cite: str


@dataclass(frozen=True)
class Catalogue:
    """One paper's catalogue file, parsed and validated."""

    paper: str
    title: str
    tables: dict
    claims: tuple[Claim, ...]
    published: tuple[Published, ...] = ()
    lost: str = ""
    paper_models: dict | None = None
    budgets: dict | None = None  # table -> Budget: the paper's training budget of its own runs

    def claim(self, claim_id):
        """The claim with this id."""
        found = [c for c in self.claims if c.id == claim_id]
        if not found:
            raise KeyError(f"paper {self.paper} has no claim {claim_id!r}; it has {[c.id for c in self.claims]}")
        return found[0]


def _text(value):
    """A number, a selector or a lookup in words."""
    if isinstance(value, Lookup):
        return f"{value.column} of {value.table}"
    if isinstance(value, PerModel):
        paper = ", ".join(f"{repo.split('/')[-1]} {v}" for repo, v in value.values)
        return f"the paper's ({paper}; else {_text(value.otherwise) if value.otherwise is not None else 'none'})"
    return f"{value:g}" if isinstance(value, float) else str(value)
