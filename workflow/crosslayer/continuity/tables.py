"""Continuity tables over training and across models (pandas only: no torch in table and figure jobs).

Each checkpoint's table (:func:`crosslayer.continuity.statistics.checkpoint_summary`) has one row per
projection; ``steps`` stacks a model's checkpoints, ``table2`` lays every model and step out
as the paper's Table 2: one column per projection and space; ``ablation_table`` does the same
for the transformer ablations, with each run's switches and perplexity.
"""

import pandas as pd

__all__ = ["ABLATION_COLUMNS", "TABLE2_ORDER", "ablation_table", "steps_table", "table2"]

#: The paper's column order (readers, writers, V), then the OV composite.
TABLE2_ORDER = ("q", "k", "gate", "up", "o", "down", "v", "ov")
#: Each projection's columns: the principal pair's continuity (the paper's Table 2), then the second pair's.
PAIRS = ("v1", "u1", "v2", "u2")


def steps_table(tables, steps):
    """One model's checkpoint tables stacked, with a leading ``step`` column."""
    if len(tables) != len(steps):
        raise ValueError(f"{len(tables)} tables for {len(steps)} steps")
    return pd.concat([table.assign(step=step) for table, step in zip(tables, steps)], ignore_index=True)[
        ["step", *tables[0].columns]]


def table2(steps_tables):
    """Continuity of ``u1`` and ``v1`` per projection, one row per model and step.

    Parameters
    ----------
    steps_tables : dict of str to DataFrame
        Model -> :func:`steps_table`.

    Returns
    -------
    DataFrame
        ``model``, ``step``, then ``{projection}.v1`` and ``{projection}.u1`` in
        :data:`TABLE2_ORDER` (the paper's columns), then ``{projection}.v2`` and ``{projection}.u2``,
        the second singular pair's continuity, in the same order (a projection no model has is
        left out; one a model lacks is NaN; a steps table without ``u2``/``v2`` leaves them out).
        The random baselines, which depend on each projection's dimensions, are in the steps tables.
    """
    rows = []
    for model, table in steps_tables.items():
        present = table[table["present"].astype(bool)]
        for step, part in present.groupby("step", sort=True):
            values = part.set_index("projection")
            row = {"model": model, "step": int(step)}
            for name in TABLE2_ORDER:
                if name in values.index:
                    row |= {f"{name}.{key}": values.loc[name, key] for key in PAIRS if key in values.columns}
            rows.append(row)
    columns = ["model", "step"] + [f"{name}.{key}" for pair in (PAIRS[:2], PAIRS[2:]) for name in TABLE2_ORDER
                                   for key in pair]
    out = pd.DataFrame(rows)
    return out.reindex(columns=[c for c in columns if c in out.columns])


#: The run columns of :func:`ablation_table`, before the continuity columns.
ABLATION_COLUMNS = ("run", "activation", "residual", "norm", "steps", "diverged_step", "perplexity", "eval_loss")


def ablation_table(outcomes, tables):
    """The transformer ablations as the paper's Table 2: one row per run.

    Parameters
    ----------
    outcomes : dict of str to dict
        Run -> its switches (``activation``, ``residual``, ``norm``) and
        :func:`crosslayer.models.train.training_outcome`.
    tables : dict of str to DataFrame
        Run -> the checkpoint table of its last step (a diverged run's has no present projection).

    Returns
    -------
    DataFrame
        :data:`ABLATION_COLUMNS` (``diverged_step`` empty for a finished run, ``perplexity`` and
        ``eval_loss`` empty for a diverged one), then the columns of :func:`table2`.
    """
    runs = pd.DataFrame([{"run": run, **outcomes[run]} for run in outcomes]).reindex(columns=list(ABLATION_COLUMNS))
    runs["diverged_step"] = runs["diverged_step"].astype("Int64")
    values = table2({run: table.assign(step=0) for run, table in tables.items()})
    if values.empty:  # every run diverged
        return runs
    return runs.merge(values.drop(columns="step").rename(columns={"model": "run"}), on="run", how="left")
