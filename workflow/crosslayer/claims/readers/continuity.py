"""Paper 003's tables: what the continuity stage writes per model and checkpoint (``continuity_statistics``:
``step{step}.npz`` with each projection's adjacent ``|cos|`` per layer boundary, ``step{step}.tsv``
with its random baselines; ``summarize_continuity``: ``steps.tsv``), the toy grid's per-seed epoch
tables (``train_toy``; also with one row per stack, weights or gradient) and the transformer ablations' last-checkpoint arrays and run table
(``ablation_continuity``, ``summarize_ablations``).

The toy grid and the transformer ablations have no model: each is read as one pseudo-model named
after its stage, with no steps. Their runs are those the stage's summary lists
(``results/toy/final.tsv``, ``results/continuity/ablations.tsv``); the toy reader checks that the
per-seed files it finds are exactly those the summary averaged. Nothing is recomputed: the readers
reshape (one row per projection, space and layer boundary) and select columns.
"""

import json

import numpy as np
import pandas as pd

from crosslayer.claims.readers.base import BOUNDARIES, Reader
from crosslayer.npz import open_npz

_STEP_NPZ = "results/continuity/{model}/step{step}.npz"
_STEP_TSV = "results/continuity/{model}/step{step}.tsv"
_STEPS = "results/continuity/{model}/steps.tsv"
_TOY_FINAL = "results/toy/final.tsv"
_TOY_SEED = "results/toy/{run}/seed{seed}.epochs.tsv"
_ABLATIONS = "results/continuity/ablations.tsv"
_ABLATION_NPZ = "results/ablations/{run}.continuity.npz"
_ABLATION_TSV = "results/ablations/{run}.continuity.tsv"

#: The spaces of a projection's singular vectors: ``v`` input (right), ``u`` output (left).
SPACES = ("v", "u")
#: Columns of the per-boundary tables after their keys.
BOUNDARY_COLUMNS = ("projection", "space", "boundary", "cos", "wa", "baseline", "excess")
#: Columns of ``continuity/steps`` (steps.tsv, the present projections).
STEPS_COLUMNS = ("step", "projection", "n_out", "n_in", "u1", "v1", "u2", "v2", "baseline_u", "baseline_v", "wa_u",
                 "wa_v", "erank", "evr_u", "evr_v", "evr_baseline_u", "evr_baseline_v")
#: Columns of ``toy/epochs``: each seed's epoch table, selected.
TOY_COLUMNS = ("run", "seed", "epoch", "accuracy", "dW_rel", "W.v1", "W.u1", "W.v2", "W.u2", "W.wa_v", "W.wa_u",
               "G.v1", "G.u1", "G.wa_v", "Gcum.v1", "Gcum.u1", "Gcum.wa_v", "Gcum.align_v", "delta_v", "adam_steps")
#: Columns of ``ablations/runs``.
RUN_COLUMNS = ("run", "activation", "residual", "norm", "steps", "diverged_step", "perplexity", "eval_loss")


def boundary_rows(arrays, summary):
    """One checkpoint's per-boundary continuity in long form.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        A ``continuity_statistics`` / ``ablation_continuity`` npz: ``{p}.cos_u``, ``{p}.cos_v``
        (L - 1,) adjacent ``|cos|`` and ``{p}.wa_u``, ``{p}.wa_v`` (L - 1,) sigma²-weighted alignment.
    summary : DataFrame
        The same checkpoint's table (one row per projection: ``present``, ``baseline_u``, ``baseline_v``).

    Returns
    -------
    DataFrame
        :data:`BOUNDARY_COLUMNS`, one row per present projection, space and boundary (boundary l
        joins layers l and l + 1); no rows when no projection is present (a diverged run).
    """
    rows = []
    for _, row in summary[summary["present"].astype(bool)].iterrows():
        p = row["projection"]
        for space in SPACES:
            cos, wa = np.asarray(arrays[f"{p}.cos_{space}"]), np.asarray(arrays[f"{p}.wa_{space}"])
            rows.append(pd.DataFrame({"projection": p, "space": space, "boundary": np.arange(len(cos)), "cos": cos,
                                      "wa": wa, "baseline": row[f"baseline_{space}"],
                                      # above the random |cos| of its own space: spaces of different
                                      # widths have different baselines, compared only as excesses
                                      "excess": cos - row[f"baseline_{space}"]}))
    if not rows:
        return pd.DataFrame(columns=list(BOUNDARY_COLUMNS))
    return pd.concat(rows, ignore_index=True)[list(BOUNDARY_COLUMNS)]


def _boundaries(root, model, steps):
    """Per checkpoint, projection, space and layer boundary: ``|cos|`` of the principal pair, the
    sigma²-weighted alignment and the projection's random baseline in that space."""
    frames = []
    for step in steps:
        summary = pd.read_csv(root / _STEP_TSV.format(model=model, step=step), sep="\t")
        with open_npz(root / _STEP_NPZ.format(model=model, step=step)) as z:
            frames.append(boundary_rows(z, summary).assign(step=step))
    return pd.concat(frames, ignore_index=True)[["step", *BOUNDARY_COLUMNS]]


def _steps(root, model, steps):
    """``steps.tsv``: per checkpoint and present projection, the stage's summary statistics."""
    table = pd.read_csv(root / _STEPS.format(model=model), sep="\t")
    return table[table["present"].astype(bool)][list(STEPS_COLUMNS)].reset_index(drop=True)


def _adam_steps(epochs_file):
    """The Adam steps a toy seed took (``steps_done`` of its ``seed{n}.status.json``)."""
    status = json.loads(epochs_file.with_name(epochs_file.name.replace(".epochs.tsv", ".status.json")).read_text())
    return status["steps_done"]


def _toy(root, model, steps):
    """Every run and seed of the toy grid (the runs of ``final.tsv``), one row per epoch, with the
    Adam steps the seed trained (``adam_steps``, its budget)."""
    final = pd.read_csv(root / _TOY_FINAL, sep="\t")
    frames = []
    for _, summary in final.iterrows():
        run = summary["run"]
        paths = sorted((root / _TOY_SEED.format(run=run, seed=0)).parent.glob("seed*.epochs.tsv"))
        tables = [pd.read_csv(p, sep="\t").assign(run=run, seed=int(p.name.split(".")[0].removeprefix("seed")))
                  for p in paths]
        last = [t.sort_values("epoch").iloc[-1] for t in tables]
        # the seeds final.tsv averaged: as many, and the same last-epoch mean (a stale seed file fails here)
        if len(tables) != summary["seeds"] or not np.isclose(np.mean([r["accuracy"] for r in last]),
                                                              summary["accuracy"], rtol=1e-9, atol=1e-12):
            raise ValueError(f"toy run {run}: the seed files {[p.name for p in paths]} are not the "
                             f"{summary['seeds']} seed(s) {_TOY_FINAL} summarises")
        frames += [t.assign(adam_steps=_adam_steps(p)) for t, p in zip(tables, paths)]
    if not frames:
        return pd.DataFrame(columns=list(TOY_COLUMNS))
    long = pd.concat(frames, ignore_index=True)
    return long.reindex(columns=list(TOY_COLUMNS))


#: The stacks of ``toy/stacks``: the weights, the first mini-batch's gradient of each epoch, and the
#: cumulative gradient, each with the metrics every one of them has.
STACKS = ("W", "G", "Gcum")
STACK_METRICS = ("v1", "u1", "wa_v")


def _toy_stacks(root, model, steps):
    """``toy/epochs`` with one row per stack (``stack``: W, G or Gcum) instead of a column per
    stack and metric, so that a claim compares two stacks in one column (gradient before weights)."""
    wide = _toy(root, model, steps)
    keys = ["run", "seed", "epoch", "adam_steps"]
    frames = [wide[keys + [f"{stack}.{m}" for m in STACK_METRICS]].set_axis(keys + list(STACK_METRICS), axis=1)
              .assign(stack=stack) for stack in STACKS]
    return pd.concat(frames, ignore_index=True)[[*keys, "stack", *STACK_METRICS]]


def _ablation_runs(root, model, steps):
    """The transformer ablations' runs: switches, steps, divergence and perplexity."""
    return pd.read_csv(root / _ABLATIONS, sep="\t")[list(RUN_COLUMNS)]


def _ablation_boundaries(root, model, steps):
    """Per ablation run at its last checkpoint (the arrays ``ablation_continuity`` keeps), projection,
    space and layer boundary; a diverged run has none."""
    frames = []
    for run in pd.read_csv(root / _ABLATIONS, sep="\t")["run"]:
        table = pd.read_csv(root / _ABLATION_TSV.format(run=run), sep="\t")
        last = table[table["step"] == table["step"].max()]
        with open_npz(root / _ABLATION_NPZ.format(run=run)) as z:
            frames.append(boundary_rows(z, last).assign(run=run, steps=last["step"].iloc[0]))
    return pd.concat(frames, ignore_index=True)[["run", *BOUNDARY_COLUMNS, "steps"]]


READERS = (
    Reader("continuity/boundaries", "continuity", (_STEP_NPZ, _STEP_TSV), _boundaries, units=("boundary",),
           shares=((), BOUNDARIES)),
    Reader("continuity/steps", "continuity", (_STEPS,), _steps, units=("step",), series=True),
    Reader("toy/epochs", "toy", (_TOY_FINAL,), _toy, units=("seed",)),
    Reader("toy/stacks", "toy", (_TOY_FINAL,), _toy_stacks, units=("seed",)),
    Reader("ablations/runs", "transformer_ablations", (_ABLATIONS,), _ablation_runs),
    Reader("ablations/boundaries", "transformer_ablations", (_ABLATIONS,), _ablation_boundaries, units=("boundary",),
           shares=((), BOUNDARIES)),
)
