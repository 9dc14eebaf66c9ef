"""A run's verdicts: every claim of every catalogue whose stages ran, per model (or once per group
of models), and the published numbers beside ours; the tables the ``claims`` rule writes.

:func:`verdict_table` is ``results/claims/claims.tsv`` (long form, one row per claim and subject),
:func:`published_table` is ``results/claims/published.tsv``, :func:`readings` the one line per
paper that opens the report.
"""

import pandas as pd

from crosslayer.claims.engine import VERDICTS, beside_ours, evaluate
from crosslayer.claims.rows import repo_of

__all__ = ["ALL_MODELS", "verdict_table", "published_table", "readings"]

#: The subject of a claim no model of the run can test, or that the catalogue marks beyond the tables.
ALL_MODELS = "all models"
#: A paper's line: a claim judged only on models the paper does not state it for, where the run has
#: the paper's own models for others.
BEYOND = "only on other models"
#: A paper's line: a claim about the paper's own experiment (the toy grid, the ablations) judged on
#: runs trained below a tenth of the paper's budget.
BELOW = "below the paper's budget"

COLUMNS = ["paper", "claim", "section", "subject", "scope", "in_paper_scope", "out_of_scope", "statistic", "low",
           "high", "n", "unit", "verdict", "direction", "magnitude", "paper_value", "reason"]


def verdict_table(catalogues, data, table_models, *, confidence=0.95, n_boot=2000, seed=0):
    """Every claim's verdicts on a run.

    Parameters
    ----------
    catalogues : sequence of Catalogue
        The papers to judge (those whose stages ran).
    data : dict of str to pandas.DataFrame
        The run's tables (:func:`crosslayer.claims.readers.read_tables`).
    table_models : dict of str to sequence of str
        For each table, the models of the run whose stage writes it (whether or not rows came back):
        a per-model claim gets a verdict for each, "not testable" where its rows are missing.
    confidence, n_boot, seed
        As :func:`crosslayer.claims.engine.evaluate`; every verdict uses the same seed.

    Returns
    -------
    pandas.DataFrame
        :data:`COLUMNS`, claims in catalogue order, subjects in the run's order.
    """
    rows, per_model = [], {}  # each model's rows of every table, cut once for all its claims
    for catalogue in catalogues:
        for claim in catalogue.claims:
            for subject, subset in _subjects(claim, data, table_models, per_model):
                verdict = vars(evaluate(claim, subset, confidence=confidence, n_boot=n_boot, seed=seed,
                                        subject=subject))
                other = _beyond_scope(claim, subset)
                short = "" if other else _beyond_budget(claim, subset, catalogue.budgets)
                if other or short:
                    verdict["reason"] = f"beyond the paper's scope ({other or short}): {verdict['reason']}"
                rows.append({"section": claim.section, "scope": claim.scope if claim.testable else "",
                             "in_paper_scope": not (other or short),
                             "out_of_scope": "model" if other else "budget" if short else "", **verdict})
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype({"n": int, "in_paper_scope": bool, "out_of_scope": str})


def _beyond_scope(claim, data):
    """Why a verdict's models are not those the paper states the claim for ("" when they are, or
    when the claim names none): the models of its table, by hub repo; a stage's own runs (the toy
    grid, the ablations) are the paper's experiments."""
    if not claim.stated_for or claim.table not in data or "repo" not in data.get("models", {}):
        return ""
    known = set(data["models"]["model"])
    models = [m for m in pd.unique(data[claim.table]["model"]) if m in known]
    others = [m for m in models if repo_of(data, m) not in claim.stated_for]
    if not others:
        return ""
    named = ", ".join(r.split("/")[-1] for r in claim.stated_for)
    return f"{', '.join(others)} {'is' if len(others) == 1 else 'are'} not among the models it is stated for: {named}"


def _beyond_budget(claim, data, budgets):
    """Why the paper's own experiment (the toy grid, the ablations) ran far short of the paper's
    training budget ("" when it did not): a run trained below a tenth of the paper's steps is not the
    paper's experiment."""
    budget = (budgets or {}).get(claim.table)
    table = data.get(claim.table)
    if budget is None or table is None or budget.column not in table or not claim.testable:
        return ""
    trained = table[budget.column].dropna()
    if trained.empty or trained.min() >= budget.value / 10:
        return ""
    least = int(trained.min())
    return (f"trained {least:,} {budget.column.replace('_', ' ')} per run, {least / budget.value:.1%} of the paper's "
            f"{budget.value:,.0f} ({budget.cite}): below a tenth of its budget")


def _subjects(claim, data, table_models, per_model):
    """``(subject, tables)`` for each verdict the claim gets on this run (a model's tables from
    `per_model`, cut there on first use)."""
    if not claim.testable:
        return [(ALL_MODELS, {})]
    models = list(table_models.get(claim.table, ()))
    if claim.scope == "group":  # a contrast is named by its groups; a claim across models by its models
        return [(None if claim.groups else "+".join(models) or ALL_MODELS, data)]
    if not models:
        return [(ALL_MODELS, {})]  # the engine names the missing table
    info = data.get("models")
    kept = []
    for model in models:
        row = info[info["model"] == model] if info is not None else pd.DataFrame()
        # a claim about other architectures (a SwiGLU claim on a GELU model) does not apply
        if claim.applies_to and len(row) and any(row.iloc[0].get(c) != v for c, v in claim.applies_to):
            continue
        if model not in per_model:
            per_model[model] = {name: t[t["model"] == model] for name, t in data.items()}
        kept.append((model, per_model[model]))
    return kept


def published_table(catalogues, data):
    """Each catalogue's published numbers for the models of this run, ours beside them (ours NaN and
    ``missing`` saying why where the run lacks them). Numbers for models the run does not have are
    left out."""
    models = {m for t in data.values() for m in t["model"].unique()}
    rows = [beside_ours(number, data) for catalogue in catalogues for number in catalogue.published
            if number.model in models]
    return pd.DataFrame(rows, columns=["paper", "section", "model", "quantity", "published", "ours", "difference",
                                       "rows", "missing"])


def readings(verdicts, catalogues):
    """One line per paper: how many of its claims hold, are contradicted, inconclusive or not
    testable on this run, and which.

    Returns
    -------
    dict of str to str
        Paper id -> the line.
    """
    lines = {}
    for catalogue in catalogues:
        rows = verdicts[verdicts["paper"] == catalogue.paper]
        tested = rows[rows["verdict"] != "not testable"]
        # the paper's own experiment trained far short of its budget: never the paper's verdict
        short = tested.index[tested["out_of_scope"] == "budget"] if "out_of_scope" in tested else tested.index[:0]
        rows = rows.assign(verdict=rows["verdict"].where(~rows.index.isin(short), BELOW))
        tested = tested.drop(short)
        # the paper's own models where the run has them: a claim judged on them is the paper's verdict
        own = tested["in_paper_scope"].astype(bool) if "in_paper_scope" in rows else pd.Series(True, tested.index)
        named = tested["claim"].map({c.id: bool(c.stated_for) for c in catalogue.claims}).astype(bool)
        on = ""
        if (named & own).any() and not own.all():  # other models' verdicts stay in the table, out of the line
            on = " (on the paper's own models)"
            rows = rows.assign(verdict=rows["verdict"].where(~rows.index.isin(tested.index[~own]), BEYOND))
        elif not own.all():
            on = " (on this run's models: none is one the paper states its claims for)"
        counts = rows.groupby("claim", sort=False)["verdict"].agg(_claim_outcome)
        parts = []
        for outcome in (*VERDICTS[:-1], BEYOND, BELOW, VERDICTS[-1]):
            ids = [c for c in counts.index if counts[c] == outcome]
            if ids:
                parts.append(f"{outcome} {len(ids)} ({', '.join(_short(c) for c in ids)})")
        lines[catalogue.paper] = f"{len(counts)} claims{on}: " + "; ".join(parts)
    return lines


def _claim_outcome(verdicts):
    """A claim's outcome over its subjects: contradicted on any beats weaker on any, then holds, then
    inconclusive, then judged only on other models or below the paper's budget; not testable only
    where no subject could test it."""
    for outcome in ("contradicted", "weaker", "holds", "inconclusive", BEYOND, BELOW):
        if (verdicts == outcome).any():
            return outcome
    return "not testable"


def _short(claim_id):
    return claim_id.split("-", 1)[1]

