"""The held-out and score tables of a model, and coupling beside held-out loss (pandas only, for the
summarizing, fitting and claims jobs)."""

import pandas as pd

__all__ = ["HELDOUT_COLUMNS", "heldout_table", "coupling_and_loss", "scores_table", "model_score", "merge_scores"]

#: A checkpoint's held-out row, in order (the table adds ``step`` first); ``skipped`` says why a row
#: is not measured (an encoder: it predicts no next token) and is empty for a measured one.
HELDOUT_COLUMNS = ("loss", "perplexity", "bits_per_byte", "n_tokens", "n_bytes", "n_windows", "context", "skipped")


def heldout_table(rows):
    """``{step: row}`` -> one table sorted by step, columns ``step`` and :data:`HELDOUT_COLUMNS`."""
    table = pd.DataFrame([{"step": int(step), **row} for step, row in rows.items()], columns=["step", *HELDOUT_COLUMNS])
    table["skipped"] = table["skipped"].astype(object).fillna("")  # rows written before it: measured ones
    return table.sort_values("step", kind="stable").reset_index(drop=True)


def coupling_and_loss(steps, heldout):
    """Per checkpoint and K: the mean coupling over plain prompts (``steps`` rows of source ``all``)
    beside the checkpoint's held-out loss and bits per byte.

    Parameters
    ----------
    steps : DataFrame
        The model's ``steps`` table (:func:`crosslayer.coupling.tables.summarize_steps`).
    heldout : DataFrame
        Its held-out table (:func:`heldout_table`).

    Returns
    -------
    DataFrame
        step, K, coupling, heldout_loss, bits_per_byte; the checkpoints both tables have, by step and K.
    """
    coupling = steps.query("source == 'all' and variant == 'plain'")[["step", "K", "coupling_mean"]]
    table = coupling.rename(columns={"coupling_mean": "coupling"}).merge(
        heldout[["step", "loss", "bits_per_byte"]].rename(columns={"loss": "heldout_loss"}), on="step")
    return table.sort_values(["step", "K"], kind="stable").reset_index(drop=True)


def scores_table(paths):
    """``{step: path of a checkpoint's score table}`` -> one table with ``step`` first, sorted by step."""
    parts = [pd.read_csv(path, sep="\t").assign(step=int(step)) for step, path in paths.items()]
    table = pd.concat(parts, ignore_index=True)
    return table[["step", *(c for c in table.columns if c != "step")]].sort_values("step", kind="stable")


def model_score(table, *, model, step, tasks):
    """The average score of `model` at `step` from its :func:`scores_table`, refused by name unless
    that step was scored on exactly `tasks` (the configured task names): never a score of another
    checkpoint or a partial set of tasks.

    Raises
    ------
    ValueError
    """
    at = table[table.step == step]
    if at.empty:
        raise ValueError(f"benchmark scores of {model}: none at step {step}, its last coupling step (scored: "
                         f"{sorted(set(table.step))}); re-run the benchmarks stage")
    scored = [t for t in at.task if t != "average"]
    if sorted(scored) != sorted(tasks) or "average" not in set(at.task):
        raise ValueError(f"benchmark scores of {model} at step {step} are for tasks {scored}, not the configured "
                         f"{list(tasks)}: re-run the benchmarks stage")
    return float(at[at.task == "average"].value.iloc[0])


def merge_scores(models, *, given, benchmarks, last_steps, tasks):
    """Each model's score and its source: ``coupling.scores``' (`given`) where it has the model, else
    the benchmarks stage's average at the model's last step (:func:`model_score`).

    Parameters
    ----------
    models : sequence of str
    given : dict
        model -> score from ``coupling.scores`` (possibly some models only).
    benchmarks : dict
        model -> its :func:`scores_table` (empty without the benchmarks stage).
    last_steps : dict
        model -> the step its coupling is measured at.
    tasks : sequence of str
        The configured benchmark tasks.

    Returns
    -------
    scores, sources : dict, dict
        Empty when no model has a score.

    Raises
    ------
    ValueError
        Some models have a score and others none: the fits would mix.
    """
    scores, sources = {}, {}
    for model in models:
        if model in given:
            scores[model], sources[model] = given[model], "coupling.scores"
        elif model in benchmarks:
            scores[model] = model_score(benchmarks[model], model=model, step=last_steps[model], tasks=tasks)
            sources[model] = "lm-eval"
    if scores and len(scores) < len(models):
        raise ValueError(f"no score for {[m for m in models if m not in scores]}: add them to coupling.scores or "
                         "turn on benchmarks")
    return scores, sources
