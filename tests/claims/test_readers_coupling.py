"""Paper 002's table readers (crosslayer.claims.readers.coupling) on files the coupling stage's own
library writes: two checkpoints of a tiny model measured by ``measure_checkpoint`` (the
``block_coupling`` job), summarized by ``summarize_steps`` (``summarize_coupling``) and tabled across
models by ``across_models`` (``coupling_across_models``), each written as the rule scripts write it.
Every reader gives the catalogue's declared columns and the source's values, reshaped only."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_checkpoints import save_checkpoint, text

from crosslayer.claims.catalogue import load_catalogue
from crosslayer.claims.engine import evaluate
from crosslayer.claims.subjects import with_identities
from crosslayer.claims.readers import read_tables, reader
from crosslayer.coupling.checkpoint import CouplingSettings, measure_checkpoint
from crosslayer.coupling.noise import NoiseSettings, measure_noise
from crosslayer.coupling.tables import across_models, load_checkpoint, summarize_steps
from crosslayer.evaluation.tables import heldout_table

CATALOGUE = load_catalogue("002")
STEPS = (0, 5)
MODEL = "m"
SETTINGS = CouplingSettings(Ks=(2, 4), layer_pairs=[(0, 1), (2, 2)], token_wise_prompts=2, token_wise_tokens=4,
                            max_tokens=6)
NOISE = NoiseSettings(levels=(0.05, 0.5), draws=2, max_tokens=6)


def _shrink(model):  # the second checkpoint: other weights, so that the two steps differ
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.5)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run directory with the coupling stage's files for model `m` at steps 0 and 5, its models.tsv
    with a score, and beside it the same run's models.tsv without one."""
    root = tmp_path_factory.mktemp("coupling_run")
    prompts = root / "results/coupling/prompts.jsonl"
    prompts.parent.mkdir(parents=True)
    rows = [("p0", text(7), "plain", "arc"), ("p1", text(6, start=20), "plain", "gsm8k"),
            ("p2", text(5, start=40), "plain", "arc"), ("p1+cot", text(5, start=20) + " w9", "cot", "gsm8k")]
    prompts.write_text("".join(json.dumps({"id": i, "text": t, "variant": v, "source": s}) + "\n"
                               for i, t, v, s in rows))
    folder = root / f"results/coupling/{MODEL}"
    folder.mkdir()
    for step, edit in zip(STEPS, (None, _shrink)):
        manifest = save_checkpoint("gpt_neox", root / f"ckpt{step}", edit=edit)
        np.savez(folder / f"step{step}.coupling.npz", **measure_checkpoint(manifest, SETTINGS, prompts=prompts))
        noise = root / f"results/embedding_noise/{MODEL}/step{step}.tsv"  # as the embedding_noise job writes it
        noise.parent.mkdir(parents=True, exist_ok=True)
        measure_noise(manifest, NOISE, prompts=prompts).to_csv(noise, sep="\t", index=False)
    checkpoints = [load_checkpoint(folder / f"step{step}.coupling.npz") for step in STEPS]
    tables = summarize_steps(checkpoints, list(STEPS), metric="paper", window=3)
    for name, table in tables.items():
        table.to_csv(folder / f"{name}.tsv", sep="\t", index=False)
    final = {MODEL: (tables["steps"], checkpoints[-1])}
    across_models(final, scores={MODEL: 42.5}, training_tokens={MODEL: 1e9}).to_csv(
        root / "results/coupling/models.tsv", sep="\t", index=False)
    heldout = root / f"results/evaluation/{MODEL}/heldout.tsv"  # as summarize_heldout writes it
    heldout.parent.mkdir(parents=True)
    heldout_table({0: {"loss": 6.5, "bits_per_byte": 3.1}, 5: {"loss": 5.5, "bits_per_byte": 2.6}}).to_csv(
        heldout, sep="\t", index=False)
    bare = tmp_path_factory.mktemp("coupling_run_no_scores")
    (bare / "results/coupling").mkdir(parents=True)
    across_models(final, training_tokens={MODEL: None}).to_csv(bare / "results/coupling/models.tsv", sep="\t",
                                                              index=False)
    return root, bare


def tsv(root, name):
    return pd.read_csv(root / f"results/coupling/{MODEL}/{name}.tsv", sep="\t")


def read(root, table):
    return reader(table).read(root, MODEL, STEPS)


@pytest.mark.parametrize("table", sorted(CATALOGUE.tables))
def test_each_table_has_its_declared_columns_and_files(run, table):
    root, _ = run
    frame = read(root, table)
    assert len(frame) and list(frame.columns) == [c for c in CATALOGUE.tables[table].columns if c != "model"]
    spec = reader(table)
    assert spec.stage == table.split("/")[0] and all(p.is_file() for p in spec.paths(root, MODEL, STEPS))
    assert spec.also == (("evaluation",) if table == "coupling/over_training" else ())


def test_prompts_are_the_per_prompt_coupling_one_row_per_K(run):
    root, _ = run
    source, frame = tsv(root, "prompts"), read(root, "coupling/prompts")
    assert len(frame) == 2 * len(source) and sorted(frame.K.unique()) == [2, 4]
    for K in (2, 4):
        mine = frame[frame.K == K].drop(columns=["K", "coupling"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, source[list(mine.columns)])
        np.testing.assert_array_equal(frame[frame.K == K].coupling, source[f"coupling_K{K}"])
    trajectories = read(root, "coupling/prompt_trajectories")
    pd.testing.assert_frame_equal(trajectories, source[list(trajectories.columns)])
    assert set(trajectories.variant) == {"plain", "cot"}


def test_the_prompt_readers_keep_only_the_pooled_prompts(run, tmp_path):
    root, _ = run  # gsm8k as an unpooled source (the coupling suite's WikiText-2 prompts)
    table = tsv(root, "prompts").assign(pooled=lambda t: t.source != "gsm8k")
    folder = tmp_path / f"results/coupling/{MODEL}"
    folder.mkdir(parents=True)
    table.to_csv(folder / "prompts.tsv", sep="\t", index=False)
    for name in ("coupling/prompts", "coupling/prompt_trajectories"):
        frame = read(tmp_path, name)
        assert set(frame.source) == {"arc"} and set(frame.prompt) == {"p0", "p2"} and "pooled" not in frame


def test_steps_are_the_steps_table(run):
    root, _ = run
    pd.testing.assert_frame_equal(read(root, "coupling/steps"), tsv(root, "steps"))


def test_depthwise_leaves_out_the_diagonal_and_names_each_pair(run):
    root, _ = run
    source, frame = tsv(root, "depthwise"), read(root, "coupling/depthwise")
    off = source[source.layer != source.other].reset_index(drop=True)
    assert len(frame) == len(off) == len(source) * 2 // 3  # 3 layers: 6 of 9 cells
    pd.testing.assert_frame_equal(frame[list(off.columns)], off)
    assert (frame.distance == (frame.layer - frame.other).abs()).all() and frame.distance.min() == 1
    assert frame.pair.tolist() == [f"{a}-{b}" for a, b in zip(frame.layer, frame.other)]


def test_tokenwise_self_is_the_npz_in_long_form(run):
    root, _ = run
    frame = read(root, "coupling/tokenwise_self")
    T = SETTINGS.token_wise_tokens
    assert len(frame) == len(STEPS) * 2 * 2 * 3 * 2 * T * (T - 1)  # steps, layer pairs, prompts, metrics, Ks, cells
    assert (frame.token != frame.token_other).all()
    assert not frame.duplicated(["step", "metric", "K", "cell"]).any()
    for step in STEPS:
        data = load_checkpoint(root / f"results/coupling/{MODEL}/step{step}.coupling.npz")
        for row in frame[frame.step == step].sample(40, random_state=0).itertuples():
            q = [tuple(p) for p in data["layer_pairs"]].index((row.layer, row.other))
            expected = data["tw_self"][q, data["prompt_ids"].index(row.prompt), data["metrics"].index(row.metric),
                                       list(data["Ks"]).index(row.K), row.token, row.token_other]
            assert row.coupling == -float(expected)
            assert row.cell == f"{row.layer}-{row.other}:{row.prompt}:{row.token}-{row.token_other}"
    # the stage's own tokenwise.tsv (summarize_steps at metric paper) is the mean over these cells
    means = frame[frame.metric == "paper"].groupby(["step", "layer", "other", "K"]).coupling.mean()
    source = tsv(root, "tokenwise").query("kind == 'self'").set_index(["step", "layer", "other", "K"]).coupling_mean
    pd.testing.assert_series_equal(means.sort_index(), source.sort_index(), check_names=False, rtol=1e-6)


def test_tokenwise_fixed_is_each_fixed_tokens_mean_over_the_other_tokens_pairs(run):
    root, _ = run
    frame = read(root, "coupling/tokenwise_fixed")
    T = SETTINGS.token_wise_tokens
    assert set(frame.context) == {"fixed_input", "fixed_output"} and not frame.coupling.isna().any()
    assert not frame.duplicated(["step", "metric", "K", "layer", "other", "prompt", "context", "fixed"]).any()
    for step in STEPS:
        data = load_checkpoint(root / f"results/coupling/{MODEL}/step{step}.coupling.npz")
        for row in frame[frame.step == step].sample(30, random_state=1).itertuples():
            q = [tuple(p) for p in data["layer_pairs"]].index((row.layer, row.other))
            block = data[f"tw_{row.context}"][q, data["prompt_ids"].index(row.prompt), data["metrics"].index(row.metric),
                                              list(data["Ks"]).index(row.K), row.fixed]  # (T, T) over the other token
            pairs = [block[a, b] for a in range(T) for b in range(T) if a != b and not np.isnan(block[a, b])]
            assert row.coupling == pytest.approx(-np.mean(np.asarray(pairs, dtype=np.float64)), rel=1e-12)
    # a fixed input token t1 pairs output tokens t2, t2' >= t1: the last input token has no pair of two
    assert set(frame[frame.context == "fixed_input"].fixed) == set(range(T - 1))
    assert set(frame[frame.context == "fixed_output"].fixed) == set(range(1, T))


def test_singular_values_are_each_blocks_top_value(run):
    root, _ = run
    frame = read(root, "coupling/singular_values")
    for step in STEPS:
        data = load_checkpoint(root / f"results/coupling/{MODEL}/step{step}.coupling.npz")
        mine = frame[frame.step == step].pivot(index="prompt", columns="layer", values="sigma_1")
        expected = pd.DataFrame(data["singular_values"][..., 0], index=data["prompt_ids"]).sort_index()
        np.testing.assert_allclose(mine.sort_index().to_numpy(), expected.to_numpy(), rtol=1e-6)
        assert (frame.n_layers == int(data["n_layers"])).all()


def test_predictors_put_coupling_and_each_size_beside_the_score(run):
    root, bare = run
    source = pd.read_csv(root / "results/coupling/models.tsv", sep="\t").iloc[0]
    frame = read(root, "coupling/predictors").set_index(["predictor", "K"])
    assert (frame.score == 42.5).all() and set(frame.index.get_level_values("K")) == {2, 4}
    assert frame.loc[("coupling", 4), "x"] == source.coupling_K4
    assert frame.loc[("log10_params", 2), "x"] == pytest.approx(np.log10(source.n_params))
    assert frame.loc[("n_layers", 4), "x"] == source.n_layers and frame.loc[("d_model", 4), "x"] == source.d_model
    # without scores the rows are there and the score is not: a claim names the missing column
    assert "score" not in read(bare, "coupling/predictors").columns


def test_noise_prompts_are_each_checkpoints_table_with_its_step(run):
    root, _ = run
    frame = read(root, "embedding_noise/prompts")
    for step in STEPS:
        source = pd.read_csv(root / f"results/embedding_noise/{MODEL}/step{step}.tsv", sep="\t")
        pd.testing.assert_frame_equal(frame[frame.step == step].drop(columns="step").reset_index(drop=True), source)
    assert set(frame.prompt) == {"p0", "p1", "p2"}  # the plain prompts


def test_across_models_is_the_models_row_one_row_per_K(run):
    root, bare = run
    source = pd.read_csv(root / "results/coupling/models.tsv", sep="\t")
    frame = read(root, "coupling/across_models")
    assert frame.K.tolist() == [2, 4] and (frame.step == STEPS[-1]).all() and (frame.score == 42.5).all()
    assert frame.coupling.tolist() == [source.coupling_K2.item(), source.coupling_K4.item()]
    assert (frame.n_params == source.n_params.item()).all() and (frame.training_tokens == 1e9).all()
    # without coupling.scores the score column is left out: a claim on it names the missing column
    assert "score" not in read(bare, "coupling/across_models").columns
    assert reader("coupling/across_models").read(root, "not-a-model", STEPS).empty


def test_over_training_puts_each_checkpoints_held_out_loss_beside_its_coupling(run):
    root, _ = run
    frame = read(root, "coupling/over_training")
    steps = tsv(root, "steps").query("source == 'all' and variant == 'plain'")
    assert frame[["step", "K"]].values.tolist() == [[0, 2], [0, 4], [5, 2], [5, 4]]
    assert frame.coupling.tolist() == steps.sort_values(["step", "K"]).coupling_mean.tolist()
    assert frame.heldout_loss.tolist() == [6.5, 6.5, 5.5, 5.5] and frame.bits_per_byte.tolist()[-1] == 2.6


def test_the_claims_are_computed_on_the_stages_files(run):
    root, bare = run
    tables = read_tables(root, {name: {MODEL: STEPS} for name in CATALOGUE.tables})
    # the run's step 0 is a model the workflow trained from initialization (the claims rule says so)
    tables = with_identities(tables, {MODEL: {"untrained_step": 0, "repo": None}})
    for claim in CATALOGUE.claims:
        verdict = evaluate(claim, tables, n_boot=200)
        needs_more = {"002-depth-rises-over-training", "002-linearity-over-training",  # two steps: no trend
                      "002-parallels-accuracy",
                      "002-depth-locality", "002-locality-grows",  # three layers: three unordered pairs, six needed
                      "002-token-self-emerges",  # two token-wise prompts, three needed
                      "002-fixed-input-emerges", "002-fixed-output-emerges",  # as token-self
                      "002-sv-scaling-untrained",  # three blocks, four needed
                      "002-coupling-performance", "002-coupling-beats-size",  # one model
                      "002-coupling-beats-depth", "002-coupling-beats-width"}
        assert (verdict.verdict == "not testable") == (not claim.testable or claim.id in needs_more), verdict
    performance = CATALOGUE.claim("002-coupling-performance")
    without = read_tables(bare, {"coupling/across_models": {MODEL: STEPS}})
    assert "has no column(s) ['score']" in evaluate(performance, without).reason
