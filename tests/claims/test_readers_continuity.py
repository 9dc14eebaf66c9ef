"""Paper 003's table readers (crosslayer.claims.readers.continuity) on files the workflow's own library
code writes, as its rule scripts call it: each reader gives the catalogue's declared columns and the
source's values, reshaped but not recomputed."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_checkpoints import save_checkpoint

from crosslayer.claims.catalogue import load_catalogue
from crosslayer.claims.readers import files_of, read_tables, reader
from crosslayer.continuity.measure import PROJECTIONS, ContinuitySettings, measure_run, projection_continuity
from crosslayer.continuity.statistics import checkpoint_summary
from crosslayer.continuity.tables import ablation_table, steps_table
from crosslayer.continuity.toy import ToyConfig, train_toy
from crosslayer.continuity.toy_tables import final_table, stack_runs

DECLARED = load_catalogue("003").tables
SUMMARY = {"projections": PROJECTIONS, "n_components": 2, "draws": 5}


def declared(table):
    return [c for c in DECLARED[table].columns if c != "model"]


# -- the continuity stage: per checkpoint npz and tsv, steps.tsv -----------------------------------


def _continuity_run(root, model, steps, L=5):
    """``continuity_statistics`` (checkpoint_summary of projection_continuity, npz + tsv) per step and
    ``summarize_continuity`` (steps_table) for a model with q, v, gate and down (o, k, up absent)."""
    folder = root / "results/continuity" / model
    folder.mkdir(parents=True)
    written = {}
    for step in steps:
        g = torch.Generator().manual_seed(step)
        shapes = {"q": (8, 8), "v": (4, 8), "gate": (16, 8), "down": (8, 16)}
        mats = [{p: torch.randn(*s, generator=g) for p, s in shapes.items()} for _ in range(L)]
        result = projection_continuity(lambda layer: mats[layer], L, ContinuitySettings(("q", "v", "gate", "down")))
        table, arrays = checkpoint_summary(result, **SUMMARY)
        np.savez(folder / f"step{step}.npz", **result, **arrays)
        table.to_csv(folder / f"step{step}.tsv", sep="\t", index=False)
        written[step] = table, {**result, **arrays}
    tables = [pd.read_csv(folder / f"step{step}.tsv", sep="\t") for step in steps]
    steps_table(tables, steps).to_csv(folder / "steps.tsv", sep="\t", index=False)
    return written


def test_continuity_boundaries_are_each_checkpoints_adjacent_cosines(tmp_path):
    written = _continuity_run(tmp_path, "m", [0, 5])
    frame = reader("continuity/boundaries").read(tmp_path, "m", (0, 5))
    assert list(frame.columns) == declared("continuity/boundaries")
    assert set(frame.projection) == {"q", "v", "gate", "down"} and set(frame.space) == {"u", "v"}
    for step, (table, arrays) in written.items():
        for _, row in table[table.present].iterrows():
            for space in ("u", "v"):
                part = frame[(frame.step == step) & (frame.projection == row.projection) & (frame.space == space)]
                assert part.boundary.tolist() == [0, 1, 2, 3]
                np.testing.assert_array_equal(part.cos, arrays[f"{row.projection}.cos_{space}"])
                np.testing.assert_array_equal(part.wa, arrays[f"{row.projection}.wa_{space}"])
                assert (part.baseline == row[f"baseline_{space}"]).all()
                # the stage's continuity is the mean over the boundaries
                assert part.cos.mean() == pytest.approx(row[f"{space}1"], rel=1e-12)


def test_continuity_steps_is_steps_tsv_of_the_present_projections(tmp_path):
    _continuity_run(tmp_path, "m", [0, 5])
    frame = reader("continuity/steps").read(tmp_path, "m", (0, 5))
    assert list(frame.columns) == declared("continuity/steps")
    source = pd.read_csv(tmp_path / "results/continuity/m/steps.tsv", sep="\t")
    present = source[source.present].reset_index(drop=True)
    pd.testing.assert_frame_equal(frame, present[declared("continuity/steps")])
    assert len(frame) == 2 * 4


# -- the toy grid: per-seed epoch tables, final.tsv ---------------------------------------------


def _data(n=512, n_in=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_in, generator=g)
    y = (x @ torch.randn(n_in, 10, generator=g)).argmax(-1)
    return x[: n // 2], y[: n // 2], x[n // 2:], y[n // 2:]


def _toy_run(root, runs, seeds, steps=12):
    """``train_toy`` per run and seed (the epochs tsv and status json train_toy.py writes), then
    ``summarize_toy`` (final.tsv)."""
    epochs_paths, statuses = [], []
    for run, settings in runs.items():
        for seed in seeds:
            settings_seed = {**settings, "width": 8, "depth": 3, "steps": steps, "track": 2, "batch_size": 64, "seed": seed}
            records, status, _ = train_toy(ToyConfig(**settings_seed), _data())
            folder = root / "results/toy" / run
            folder.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(records).to_csv(folder / f"seed{seed}.epochs.tsv", sep="\t", index=False)
            statuses.append({"run": run, **settings_seed, **status})
            (folder / f"seed{seed}.status.json").write_text(json.dumps(statuses[-1]))
            epochs_paths.append(folder / f"seed{seed}.epochs.tsv")
    long = stack_runs([pd.read_csv(p, sep="\t") for p in epochs_paths], statuses)
    final_table(long, statuses, list(runs)).to_csv(root / "results/toy/final.tsv", sep="\t", index=False)
    np.savez(root / "results/toy/mnist.npz", y_train=_data()[1].numpy())  # the digits the runs trained on


RUNS = {"res_relu": {"activation": "relu"}, "nores_none": {"activation": "none", "residual": False}}


def test_toy_epochs_are_every_seeds_epoch_table(tmp_path):
    _toy_run(tmp_path, RUNS, seeds=[0, 1])
    frame = reader("toy/epochs").read(tmp_path, "toy", ())
    assert list(frame.columns) == declared("toy/epochs")
    assert len(frame) == 2 * 2 * 3  # runs x seeds x tracked steps 0, 6, 12
    assert set(frame["adam_steps"]) == {12}  # the budget: the Adam steps each seed took (its status)
    for run in RUNS:
        for seed in (0, 1):
            source = pd.read_csv(tmp_path / f"results/toy/{run}/seed{seed}.epochs.tsv", sep="\t")
            part = frame[(frame.run == run) & (frame.seed == seed)].reset_index(drop=True)
            columns = [c for c in declared("toy/epochs") if c not in ("run", "seed", "adam_steps")]
            pd.testing.assert_frame_equal(part[columns], source[columns])
    # final.tsv is the mean of each seed's last epoch: the reader's rows give it back
    final = pd.read_csv(tmp_path / "results/toy/final.tsv", sep="\t").set_index("run")
    last = frame[frame.epoch == frame.epoch.max()].groupby("run")["W.v1"].mean()
    assert last.to_dict() == pytest.approx(final["W.v1"].to_dict(), rel=1e-12)


def test_toy_refuses_seed_files_final_tsv_did_not_summarise(tmp_path):
    _toy_run(tmp_path, {"res_relu": RUNS["res_relu"]}, seeds=[0])
    stale = tmp_path / "results/toy/res_relu/seed1.epochs.tsv"  # left over from a run with more seeds
    stale.write_text((tmp_path / "results/toy/res_relu/seed0.epochs.tsv").read_text())
    with pytest.raises(ValueError, match=r"toy run res_relu: the seed files .*seed1.* are not the 1 seed"):
        reader("toy/epochs").read(tmp_path, "toy", ())


# -- the transformer ablations: each run's last-checkpoint npz and table, ablations.tsv -------------


def _ablation(root, run, steps, outcome, switches):
    """A training run's directory (a tiny llama checkpoint per saved step, outcome.json), then
    ``ablation_continuity`` (measure_run: npz + tsv)."""
    folder = root / "results/ablations" / run
    folder.mkdir(parents=True)
    for step in steps:
        save_checkpoint("llama", folder / f"step{step}", tokenizer=False)
    (folder / "outcome.json").write_text(json.dumps({**switches, **outcome}))
    arrays, table = measure_run(folder, ContinuitySettings(("q", "gate", "down")), model=run, save_steps=[0, 3],
                                summary=SUMMARY)
    np.savez(root / f"results/ablations/{run}.continuity.npz", **arrays)
    table.to_csv(root / f"results/ablations/{run}.continuity.tsv", sep="\t", index=False)
    return arrays


def _ablations(root):
    """Two runs, one diverged, and ``summarize_ablations`` (ablation_table: ablations.tsv)."""
    arrays = {
        "res_silu": _ablation(root, "res_silu", [0, 3], {"steps": 3, "diverged_step": None, "perplexity": 40.0,
                                                         "eval_loss": 3.7},
                              {"activation": "silu", "residual": True, "norm": True}),
        "nonorm_silu": _ablation(root, "nonorm_silu", [0], {"steps": 3, "diverged_step": 2, "perplexity": None,
                                                            "eval_loss": None},
                                 {"activation": "silu", "residual": True, "norm": False}),
    }
    outcomes = {run: json.loads((root / f"results/ablations/{run}/outcome.json").read_text()) for run in arrays}
    steps = {run: pd.read_csv(root / f"results/ablations/{run}.continuity.tsv", sep="\t") for run in arrays}
    last = {run: t[t["step"] == outcomes[run]["steps"]].drop(columns="step") for run, t in steps.items()}
    (root / "results/continuity").mkdir(parents=True, exist_ok=True)
    ablation_table(outcomes, last).to_csv(root / "results/continuity/ablations.tsv", sep="\t", index=False,
                                          float_format="%.6g")
    return arrays, steps


def test_ablation_tables_are_the_runs_last_checkpoint(tmp_path):
    arrays, steps = _ablations(tmp_path)
    runs = reader("ablations/runs").read(tmp_path, "transformer_ablations", ())
    assert list(runs.columns) == declared("ablations/runs")
    assert runs.run.tolist() == ["res_silu", "nonorm_silu"]
    assert runs.perplexity.iloc[0] == 40.0 and np.isnan(runs.perplexity.iloc[1])
    assert runs.diverged_step.iloc[1] == 2

    frame = reader("ablations/boundaries").read(tmp_path, "transformer_ablations", ())
    assert list(frame.columns) == declared("ablations/boundaries")
    assert set(frame.run) == {"res_silu"}  # the diverged run has no last checkpoint
    table = steps["res_silu"][steps["res_silu"].step == 3].set_index("projection")
    for p in ("q", "gate", "down"):
        for space in ("u", "v"):
            part = frame[(frame.projection == p) & (frame.space == space)]
            np.testing.assert_array_equal(part.cos, arrays["res_silu"][f"{p}.cos_{space}"])
            np.testing.assert_array_equal(part.wa, arrays["res_silu"][f"{p}.wa_{space}"])
            assert (part.baseline == table.loc[p, f"baseline_{space}"]).all()
            assert part.cos.mean() == pytest.approx(table.loc[p, f"{space}1"], rel=1e-12)


def test_every_table_of_paper_003_has_a_reader_of_its_declared_columns(tmp_path):
    _continuity_run(tmp_path, "m", [0, 5])
    _toy_run(tmp_path, {"res_relu": RUNS["res_relu"]}, seeds=[0], steps=6)
    _ablations(tmp_path)
    models = {"continuity/boundaries": {"m": [0, 5]}, "continuity/steps": {"m": [0, 5]}, "toy/epochs": {"toy": []},
              "toy/stacks": {"toy": []}, "ablations/runs": {"transformer_ablations": []},
              "ablations/boundaries": {"transformer_ablations": []}}
    assert set(models) == set(DECLARED) - {"models"}
    assert all((tmp_path / f).exists() for f in files_of(models))
    tables = read_tables(tmp_path, models)
    for name, frame in tables.items():
        assert list(frame.columns) == list(DECLARED[name].columns), name
    assert set(tables["toy/epochs"].model) == {"toy"}
    # the stacks are the epochs' W., G. and Gcum. columns, one row per stack
    epochs, stacks = tables["toy/epochs"], tables["toy/stacks"].set_index(["run", "seed", "epoch", "stack"])
    assert len(stacks) == 3 * len(epochs)
    for stack in ("W", "G", "Gcum"):
        for metric in ("v1", "u1", "wa_v"):
            mine = stacks.xs(stack, level="stack")[metric].to_numpy()
            np.testing.assert_array_equal(mine, epochs[f"{stack}.{metric}"].to_numpy())
