"""Paper 000's readers and the models table read what the alignment stage and checkpoint
registration write: real tiny checkpoints measured by the library, the per-model tables written as
the summarize_alignment job writes them, each value read back equal to its source."""

import json

import numpy as np
import pandas as pd
import pytest
from tiny_checkpoints import save_checkpoint

from crosslayer.alignment.measure import AlignmentSettings, measure_checkpoint
from crosslayer.alignment.tables import load_alignment, summarize_model
from crosslayer.claims.catalogue import load_catalogue
from crosslayer.claims.engine import evaluate
from crosslayer.claims.readers import READERS, files_of, read_tables, reader

STEPS = (0, 5, 9)
CATALOGUE = load_catalogue("000")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder with two models' alignment results, as the workflow lays them out."""
    root = tmp_path_factory.mktemp("run")
    for model, family in (("gelu", "gpt_neox"), ("swiglu", "llama")):
        out = root / "results" / "alignment" / model
        out.mkdir(parents=True)
        for step in STEPS:
            checkpoint = root / "train" / model / f"step{step}"
            manifest = save_checkpoint(family, checkpoint, tokenizer=False) | {"step": step}
            np.savez(out / f"step{step}.npz", **measure_checkpoint(manifest, AlignmentSettings(k=3, svd_method="full")))
            registered = root / "results" / "checkpoints" / model / f"step{step}.json"
            registered.parent.mkdir(parents=True, exist_ok=True)
            registered.write_text(json.dumps({"model": model, "step": step, "path": str(checkpoint)}))
        tables = summarize_model(load_alignment([out / f"step{s}.npz" for s in STEPS], list(STEPS)),
                                 reference_step=5, threshold=0.5, distances=[1, 2], baseline_draws=20, seed=0)
        for name, table in tables.items():
            table.to_csv(out / f"{name}.tsv", sep="\t", index=False)
    return root


def test_every_table_a_catalogue_declares_has_one_reader():
    from crosslayer.claims.catalogue import catalogue_papers

    declared = {name for paper in catalogue_papers() for name in load_catalogue(paper).tables}
    assert declared <= set(READERS)
    with pytest.raises(KeyError, match="no reader of table 'alignment/nothing': there are"):
        reader("alignment/nothing")


def test_the_readers_give_the_declared_columns_and_the_sources_values(run):
    models = {"gelu": STEPS, "swiglu": STEPS}
    tables = read_tables(run, {name: models for name in CATALOGUE.tables})
    for name, spec in CATALOGUE.tables.items():
        if name != "alignment/table1":  # its mean_d<distance> columns follow alignment.distances
            assert list(tables[name].columns) == list(spec.columns), name
    adjacent = pd.read_csv(run / "results/alignment/gelu/adjacent.tsv", sep="\t")
    ours = tables["alignment/adjacent"].query("model == 'gelu'").drop(columns="model").reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, adjacent)
    pairs = tables["alignment/pairs"].query("model == 'swiglu' and step == 9")
    with np.load(run / "results/alignment/swiglu/step9.npz") as z:
        left = z["overlap_left"]
    assert len(pairs) == len(left) * (len(left) - 1) // 2
    for row in pairs.itertuples():
        assert row.left == left[row.layer_a, row.layer_b] and row.distance == row.layer_b - row.layer_a
        assert row.pair == f"{row.layer_a}-{row.layer_b}"


def test_the_models_table_is_each_models_adapter_geometry(run):
    models = read_tables(run, {"models": {"gelu": STEPS, "swiglu": STEPS}})["models"].set_index("model")
    assert models.loc["gelu", "gated_mlp"] == False and models.loc["gelu", "parallel_attn_mlp"] == True  # noqa: E712
    assert models.loc["swiglu", "gated_mlp"] == True and models.loc["swiglu", "parallel_attn_mlp"] == False  # noqa: E712
    assert models.loc["swiglu", "d_model"] == 32


def test_the_rules_inputs_are_the_files_the_readers_read():
    files = files_of({"alignment/pairs": {"m": [0, 7]}, "alignment/adjacent": {"m": [0, 7]},
                      "alignment/baseline": {}, "models": {"m": [0, 7]}, "continuity/steps": {"m": [0, 7]}})
    assert files == ["results/alignment/m/step0.npz", "results/alignment/m/step7.npz", "results/alignment/m/adjacent.tsv",
                     "results/checkpoints/m/step0.json", "results/checkpoints/m/step7.json",
                     "results/continuity/m/steps.tsv"]  # a table's files once, a model without it none


def test_a_model_without_rows_leaves_its_table_out(run, tmp_path):
    (tmp_path / "results/alignment/x").mkdir(parents=True)
    (tmp_path / "results/alignment/x/adjacent.tsv").write_text("step\tboundary\tleft\tright\tcross\n")
    assert read_tables(tmp_path, {"alignment/adjacent": {"x": [0]}}) == {}


def test_the_cascade_ranks_a_boundary_that_never_peaks_last_and_says_where_it_is_read(run, tmp_path):
    out = tmp_path / "results/alignment/m"
    out.mkdir(parents=True)
    pd.DataFrame({"boundary": [0, 1, 2, 3], "distance_from_final": [3, 2, 1, 0],
                  "first_peak_step": [np.nan, 50, 50, 10], "overlap_at_reference": [0.1, 0.2, 0.3, 0.4]}).to_csv(
        out / "cascade.tsv", sep="\t", index=False)
    fit = pd.DataFrame({"reference_step": [100], "n_boundaries": [4], "pearson_r": [-0.9], "pearson_p": [0.1]})
    fit.to_csv(out / "cascade_fit.tsv", sep="\t", index=False)
    table = read_tables(tmp_path, {"alignment/cascade": {"m": [0, 10, 50, 100]}})["alignment/cascade"]
    assert table["first_peak_step"].tolist() == [101, 50, 50, 10]  # after the last checkpoint, not left out
    assert set(table["reference_step"]) == {100} and set(table["last_step"]) == {100}
    # read at the last checkpoint (a model with one, or a reference step at its end): not early training
    claim = CATALOGUE.claim("000-cascade-magnitude")
    verdict = evaluate(claim, {"alignment/cascade": table.assign(distance_from_final=[3, 2, 1, 0])})
    assert verdict.verdict == "not testable" and "not early in training" in verdict.reason
    earlier = table.assign(reference_step=50)
    assert evaluate(claim, {"alignment/cascade": earlier}).verdict != "not testable"
