"""Tables of the toy ablations over seeds (pandas only: no torch in table and figure jobs).

Each job's table of tracked steps (:func:`crosslayer.continuity.toy.train_toy`) is stacked with its run and
seed; ``final`` is the paper's Tables 1 and 3-5 shape: per run, mean and sd over seeds of the
first backward pass's gradient continuity (step 0) and of the last tracked step's metrics;
``datasets`` is that table per image set and run (the paper's Fig. 13).
"""

import pandas as pd

__all__ = ["FINAL_METRICS", "datasets_table", "epoch_table", "final_table", "stack_runs"]

#: Reported at the last tracked step (``G0.*``: the gradient of the first backward pass, step 0).
FINAL_METRICS = ("accuracy", *(f"{stack}.{m}" for stack in ("G0", "G", "W") for m in ("v1", "v2", "wa_v", "u1", "u2", "wa_u")),
                 "W.erank", "G.erank", "Gcum.v1", "Gcum.u1", "delta_v", "delta_u", "dW_rel")


def stack_runs(tables, statuses):
    """One long table (``run``, ``seed``, ``step``, ``epoch``, metrics...) from each job's table of
    tracked steps and status dict (``run``, ``seed``, ``diverged``, ``diverged_step``)."""
    return pd.concat([table.assign(run=status["run"], seed=status["seed"]) for table, status in zip(tables, statuses)],
                     ignore_index=True)


def epoch_table(long):
    """Mean and sd over seeds of every metric, per run and tracked step (``{metric}`` and ``{metric}_sd``)."""
    keys = [c for c in ("run", "step", "epoch") if c in long.columns]
    metrics = [c for c in long.columns if c not in ("seed", *keys)]
    grouped = long.groupby(keys, sort=False)[metrics]
    mean, sd = grouped.mean(), grouped.std(ddof=1).add_suffix("_sd")
    return pd.concat([mean, sd], axis=1).reset_index()


def final_table(long, statuses, runs):
    """Per run (in `runs` order): seeds, diverged seeds and the Adam steps where they diverged (0:
    the initial model), and mean / sd over seeds of :data:`FINAL_METRICS` (each seed at its last
    tracked step)."""
    first = long[long["epoch"] == 0].set_index(["run", "seed"])
    last = long.sort_values("epoch").groupby(["run", "seed"]).tail(1).set_index(["run", "seed"])
    for column in [c for c in first.columns if c.startswith("G.")]:
        last[column.replace("G.", "G0.", 1)] = first[column]
    metrics = [m for m in FINAL_METRICS if m in last.columns]
    grouped = last[metrics].groupby(level="run")
    table = pd.concat([grouped.mean(), grouped.std(ddof=1).add_suffix("_sd")], axis=1)
    status = pd.DataFrame(statuses).groupby("run").agg(
        seeds=("seed", "size"), diverged=("diverged", "sum"),
        diverged_steps=("diverged_step", lambda e: ",".join(str(int(x)) for x in e.dropna())))
    table = status.join(table).reindex(runs)
    order = ["seeds", "diverged", "diverged_steps"] + [c for m in metrics for c in (m, f"{m}_sd")]
    return table[order].reset_index()


def datasets_table(parts, runs):
    """The paper's Fig. 13 table: :func:`final_table` of each image set, stacked.

    Parameters
    ----------
    parts : dict of str to (list of DataFrame, list of dict)
        Image set -> each job's epoch table and status dict, as :func:`stack_runs` takes them.
    runs : list of str
        The runs trained on every set, in row order.

    Returns
    -------
    DataFrame
        ``dataset``, then :func:`final_table`'s columns (``run``, ``seeds``, ``diverged``, ...,
        ``W.v1``, ``G.erank`` and their ``_sd``), one row per set and run.
    """
    tables = [final_table(stack_runs(tables, statuses), statuses, runs).assign(dataset=name)
              for name, (tables, statuses) in parts.items()]
    table = pd.concat(tables, ignore_index=True)
    return table[["dataset", *(c for c in table.columns if c != "dataset")]]
