"""The workflow run for real by Snakemake on a reduced copy of the embedded default
(tests/configs/tiny.yaml): content of the outputs against independent recomputations, the figures
and the report."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch
import yaml
from snakemake_runs import TINY, overlay, snakemake
from token_reference import reference
from transformers import AutoModelForCausalLM

from crosslayer.data.prompts import prompt_token_ids
from crosslayer.dynamics.funnel import EXACT_MAX_N
from crosslayer.linalg.subspace import pairwise_overlap, random_overlap_baseline, top_singular_subspaces
from crosslayer.models.checkpoints import read_manifest, verify_manifest

pytestmark = pytest.mark.workflow


def test_tables_hold_the_expected_rows_and_values(tiny_run):
    config = yaml.safe_load(TINY.read_text())
    steps = config["models"]["tiny-gelu"]["steps"]
    L = config["train"]["n_layers"]
    table1 = pd.read_csv(tiny_run / "results/alignment/table1.tsv", sep="\t")
    assert len(table1) == 2 * len(steps) * 3  # models x steps x {left, right, cross}
    assert set(table1["space"]) == {"left", "right", "cross"}
    assert (table1["n_pairs"] == L * (L - 1) // 2).all()
    assert table1["fraction_above"].between(0, 1).all()
    assert table1[["mean_d1", "mean_d3"]].stack().between(0, 1).all()

    baseline = pd.read_csv(tiny_run / "results/alignment/tiny-gelu/baseline.tsv", sep="\t").iloc[0]
    mean, sd = random_overlap_baseline(config["train"]["d_model"], config["alignment"]["k"], draws=200, seed=0)
    assert baseline["mean"] == pytest.approx(mean) and baseline["sd"] == pytest.approx(sd)

    adjacent = pd.read_csv(tiny_run / "results/alignment/tiny-gelu/adjacent.tsv", sep="\t")
    assert sorted(adjacent["step"].unique()) == steps and sorted(adjacent["boundary"].unique()) == list(range(L - 1))
    cascade = pd.read_csv(tiny_run / "results/alignment/tiny-gelu/cascade.tsv", sep="\t")
    at_reference = adjacent[adjacent["step"] == 8].sort_values("boundary")["left"].to_numpy()
    assert np.allclose(cascade["overlap_at_reference"], at_reference)
    fit = pd.read_csv(tiny_run / "results/alignment/cascade_fit.tsv", sep="\t")
    assert list(fit["model"]) == ["tiny-gelu", "tiny-swiglu"] and list(fit["reference_step"]) == [8, 8]


@pytest.mark.parametrize("model, up_name, down_name", [
    ("tiny-gelu", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"),
    ("tiny-swiglu", "mlp.up_proj", "mlp.down_proj"),
])
def test_overlaps_match_an_independent_recomputation_from_the_saved_model(tiny_run, model, up_name, down_name):
    # Independent path: transformers builds the model, full SVD in float64, overlap via pairwise_overlap.
    manifest = read_manifest(tiny_run / f"results/checkpoints/{model}/step16.json")
    verify_manifest(manifest)
    live = AutoModelForCausalLM.from_pretrained(manifest["path"])
    blocks = live.base_model.layers
    k = 3
    lefts = []
    for block in blocks:
        up = block.get_submodule(up_name).weight.detach().double()
        down = block.get_submodule(down_name).weight.detach().double()
        lefts.append(top_singular_subspaces((down @ up).numpy(), k, method="full")[0])
    result = np.load(tiny_run / f"results/alignment/{model}/step16.npz")
    assert np.allclose(result["overlap_left"], pairwise_overlap(np.stack(lefts)), atol=1e-5)


@pytest.mark.parametrize("model", ["tiny-gelu", "tiny-swiglu"])
def test_mean_jacobians_match_autograd_of_the_saved_model(tiny_run, model):
    # Independent path: transformers builds the block, autograd differentiates it at the recorded
    # residual stream; the workflow used the closed form.
    from crosslayer.jacobians.autograd import block_jacobians_autograd, single_token_block_fn

    manifest = read_manifest(tiny_run / f"results/checkpoints/{model}/step16.json")
    live = AutoModelForCausalLM.from_pretrained(manifest["path"]).eval()
    acts = np.load(tiny_run / f"results/dynamics/{model}/step16.activations.npz")["acts"]
    assert acts.shape == (40, 2 * 4, 32)
    result = np.load(tiny_run / f"results/dynamics/{model}/step16.jacobians.npz")
    for layer in (0, 3):
        block = live.base_model.layers[layer]
        J = block_jacobians_autograd(single_token_block_fn(block, live), torch.from_numpy(acts[:, 2 * layer]))
        assert np.allclose(result["mean"][layer], J.double().mean(0).numpy(), rtol=1e-4, atol=1e-5)
    spectra = pd.read_csv(tiny_run / f"results/dynamics/{model}/step16.spectra.tsv", sep="\t", index_col="layer")
    assert list(spectra.index) == [0, 1, 2, 3]
    assert spectra["self_alignment"].between(0, 1).all() and spectra["henrici"].between(0, 1).all()
    assert list(spectra["regime"]) == ["early", "mid", "late", "late"]  # the paper's 5/32, 20/32 split of 4 layers


@pytest.mark.parametrize("model", ["tiny-gelu", "tiny-swiglu"])
def test_schur_surgery_and_regimes_agree_with_the_spectra(tiny_run, model):
    spectra = pd.read_csv(tiny_run / f"results/dynamics/{model}/step8.spectra.tsv", sep="\t", index_col="layer")
    schur = pd.read_csv(tiny_run / f"results/dynamics/{model}/step8.schur.tsv", sep="\t")
    assert set(schur["mode"]) == {"J", "J - I"} and set(schur["construction"]) == {"dose", "control_a", "control_b"}
    for mode in ("J", "J - I"):
        # alpha = 1 rebuilds the trained operator from its Schur form: the cumulative rank of the
        # plain backward composition comes back (another code path, complex arithmetic)
        dose = schur.query("mode == @mode and construction == 'dose' and alpha == 1").set_index("start_layer")
        np.testing.assert_allclose(dose["effective_rank"], spectra["cumulative_effective_rank"], rtol=1e-8)
    assert len(schur.query("construction == 'control_a'")) == 2 * 4 * 6 * 4  # modes x draws x alphas x layers
    regimes = pd.read_csv(tiny_run / f"results/dynamics/{model}/regimes.tsv", sep="\t", index_col=["step", "regime"])
    late = spectra[spectra["regime"] == "late"]
    assert regimes.loc[(8, "late"), "henrici"] == pytest.approx(late["henrici"].mean())
    assert regimes.loc[(8, "late"), "n_layers"] == 2 and len(regimes) == 4 * 3


@pytest.mark.parametrize("model", ["tiny-gelu", "tiny-swiglu"])
def test_paper004_figure_numbers_are_those_of_the_saved_arrays(tiny_run, model):
    # Fig. 4b: scipy's Spearman of the saved spectral radii and cumulative-rank drops, every step; its
    # p exact over every pairing at this depth (scipy's permutation test), as the library computes it
    funnel = pd.read_csv(tiny_run / f"results/dynamics/{model}/radius_vs_rank_drop.tsv", sep="\t", index_col="step")
    regimes = pd.read_csv(tiny_run / f"results/dynamics/{model}/regimes.tsv", sep="\t", index_col=["step", "regime"])
    for step in funnel.index:
        spectra = pd.read_csv(tiny_run / f"results/dynamics/{model}/step{step}.spectra.tsv", sep="\t",
                              index_col="layer")
        radius, ranks = spectra["spectral_radius"].to_numpy(), spectra["cumulative_effective_rank"].to_numpy()
        drops = ranks[1:] - ranks[:-1]
        expected = scipy.stats.spearmanr(radius[:-1], drops)
        assert funnel.loc[step, "rho"] == pytest.approx(expected.statistic, abs=1e-12, nan_ok=True)
        assert funnel.loc[step, "n"] == len(spectra) - 1 <= EXACT_MAX_N
        if np.isfinite(expected.statistic):
            exact = scipy.stats.permutation_test((radius[:-1],), lambda x: scipy.stats.spearmanr(x, drops).statistic,
                                                 permutation_type="pairings", n_resamples=np.inf).pvalue
            assert funnel.loc[step, "p_value"] == pytest.approx(exact, rel=1e-9)
        # Table 2's min layer: argmin of the saved self-alignment, on every regime row of the step
        rows = regimes.loc[step]
        assert (rows["min_self_alignment_layer"] == int(np.argmin(spectra["self_alignment"]))).all()
        assert (rows["min_self_alignment"] == spectra["self_alignment"].min()).all()
        # Fig. 5 amplification: at alpha = 1 the dose is the trained stack, whose log Frobenius the spectra hold
        schur = pd.read_csv(tiny_run / f"results/dynamics/{model}/step{step}.schur.tsv", sep="\t")
        dose = schur.query("mode == 'J' and construction == 'dose' and alpha == 1").set_index("start_layer")
        np.testing.assert_allclose(dose["log_frobenius"], spectra["cumulative_log_frobenius"], rtol=1e-8)
        assert schur["log_frobenius"].notna().all()
    # the bottleneck per sample fold: the default dynamics.folds (4) of the 40 samples, both doses,
    # every start layer and step; the folds' means pooled by size are the whole sample's mean
    bottleneck = pd.read_csv(tiny_run / f"results/dynamics/{model}/bottleneck.tsv", sep="\t")
    assert len(bottleneck) == len(funnel) * 4 * 2 * len(spectra) and bottleneck["effective_rank"].notna().all()
    with np.load(tiny_run / f"results/dynamics/{model}/step{step}.jacobians.npz") as npz:
        assert npz["fold_sizes"].tolist() == [10] * 4
        pooled = np.tensordot(npz["fold_sizes"], npz["fold_means"].astype(float), axes=1) / 40
        np.testing.assert_allclose(pooled, npz["mean"], rtol=1e-5, atol=1e-6)


def test_communities_match_leidenalg_run_directly_on_the_stored_graphs(tiny_run):
    # Independent path: plain igraph reads the GraphML file, leidenalg runs with the config's
    # settings, numpy recomputes the correlations from the recorded activations.
    import igraph
    import leidenalg

    config = yaml.safe_load(TINY.read_text())
    acts = np.load(tiny_run / "results/dynamics/tiny-swiglu/step16.activations.npz")["acts"]
    partitions = np.load(tiny_run / "results/topology/tiny-swiglu/step16.partitions.npz")
    assert list(partitions["methods"]) == ["signed_cpm", "modularity", "infomap"]
    for snapshot in (0, 5):
        graph = igraph.Graph.Read_GraphMLz(str(tiny_run / f"results/topology/tiny-swiglu/step16.graphs/"
                                               f"snapshot{snapshot:03d}.graphml.gz"))
        R = np.corrcoef(acts[:, snapshot].T)
        for edge in graph.es:
            assert edge["weight"] == pytest.approx(R[edge.source, edge.target], abs=1e-9)
        np.fill_diagonal(R, 0)
        strongest = np.argsort(-np.abs(R), axis=1)[:, :10]
        for unit in (0, 17, 31):  # every unit keeps its top-10 |r| neighbours
            assert set(strongest[unit]) <= set(graph.neighbors(unit))
        w = np.array(graph.es["weight"])
        layers = []
        for keep in (w > 0, w < 0):
            sub = graph.subgraph_edges(np.flatnonzero(keep), delete_vertices=False)
            layers.append(leidenalg.CPMVertexPartition(sub, weights=list(np.abs(w[keep])), resolution_parameter=0.05))
        optimiser = leidenalg.Optimiser()
        optimiser.set_rng_seed(config["topology"]["seeds"][0])
        optimiser.optimise_partition_multiplex(layers, layer_weights=[1, -1])
        ours = partitions["memberships"][0, snapshot]
        same = np.equal.outer(layers[0].membership, layers[0].membership)
        np.testing.assert_array_equal(np.equal.outer(ours, ours), same)


def test_topology_tables_hold_every_checkpoint_and_method(tiny_run):
    comparison = pd.read_csv(tiny_run / "results/topology/method_comparison.tsv", sep="\t")
    assert len(comparison) == 2 * 4 * 3  # models x steps x methods
    assert comparison["frac_significant"].between(0, 1).all()
    layers = pd.read_csv(tiny_run / "results/topology/tiny-gelu/step8.coupling.tsv", sep="\t")
    spectra = pd.read_csv(tiny_run / "results/dynamics/tiny-gelu/step8.spectra.tsv", sep="\t", index_col="layer")
    cpm = layers[layers["method"] == "signed_cpm"].set_index("layer")
    np.testing.assert_allclose(cpm["self_alignment"], spectra["self_alignment"])
    assert cpm["variance_captured"].between(0, 1).all() and cpm["disruption"].iloc[:-1].between(0, 1).all()


def test_training_moves_alignment_above_step_zero(tiny_run):
    adjacent = pd.read_csv(tiny_run / "results/alignment/tiny-gelu/adjacent.tsv", sep="\t")
    means = adjacent.groupby("step")["left"].mean()
    assert means[16] > means[0]


@pytest.mark.parametrize("model", ["tiny-gelu", "tiny-swiglu"])
def test_the_across_papers_table_holds_the_per_paper_values(tiny_run, model):
    """Every joined value is the per-paper result it comes from, read here from that stage's files."""
    results, steps = tiny_run / "results", [0, 4, 8, 16]
    table = pd.read_csv(results / f"across_papers/{model}/boundaries.tsv", sep="\t").set_index(["step", "boundary"])
    assert list(table.index) == [(s, b) for s in steps for b in range(3)]  # 4 layers: 3 boundaries
    adjacent = pd.read_csv(results / f"alignment/{model}/adjacent.tsv", sep="\t").set_index(["step", "boundary"])
    baseline = pd.read_csv(results / f"alignment/{model}/baseline.tsv", sep="\t")["mean"].iloc[0]
    np.testing.assert_array_equal(table["alignment_output"], adjacent["left"])
    np.testing.assert_array_equal(table["alignment_input"], adjacent["right"])
    np.testing.assert_allclose(table["alignment_input.ratio"], adjacent["right"] / baseline, rtol=1e-15)
    depthwise = pd.read_csv(results / f"coupling/{model}/depthwise.tsv", sep="\t")
    depthwise = depthwise[(depthwise["variant"] == "plain")].set_index(["step", "K", "layer", "other"])["coupling_mean"]
    measures = pd.read_csv(results / f"across_papers/{model}/measures.tsv", sep="\t", dtype={"paper": str})
    assert list(measures[measures["analysis"] == "coupling"]["measure"]) == [
        "coupling_K3_fwd", "coupling_K3_bwd", "coupling_K8_fwd", "coupling_K8_bwd"]
    for step in steps:
        row = table.loc[step]
        cont = np.load(results / f"continuity/{model}/step{step}.npz")
        cont_table = pd.read_csv(results / f"continuity/{model}/step{step}.tsv", sep="\t").set_index("projection")
        for p in ("q", "o", "down", "ov"):
            np.testing.assert_array_equal(row[f"continuity_{p}_u1"], cont[f"{p}.cos_u"])
            np.testing.assert_array_equal(row[f"continuity_{p}_v1"], cont[f"{p}.cos_v"])
            assert (row[f"continuity_{p}_v1.baseline"] == cont_table.loc[p, "baseline_v"]).all()
        assert row["continuity_gate_u1"].isna().all() == (model == "tiny-gelu")
        for K in (3, 8):
            np.testing.assert_array_equal(row[f"coupling_K{K}_fwd"], [depthwise[step, K, l, l + 1] for l in range(3)])
            np.testing.assert_array_equal(row[f"coupling_K{K}_bwd"], [depthwise[step, K, l + 1, l] for l in range(3)])
            np.testing.assert_allclose(row[f"coupling_K{K}_fwd.ratio"],
                                       np.sqrt(1 - 1 / K) / -row[f"coupling_K{K}_fwd"], rtol=1e-15)
        spectra = pd.read_csv(results / f"dynamics/{model}/step{step}.spectra.tsv", sep="\t")
        np.testing.assert_array_equal(row["jacobian_alignment"], spectra["forward_alignment"].iloc[:-1])
        np.testing.assert_array_equal(row["jacobian_alignment_res"], spectra["forward_alignment_res"].iloc[:-1])
        assert list(row["regime"]) == [a if a == b else f"{a}/{b}"
                                       for a, b in zip(spectra["regime"].iloc[:-1], spectra["regime"].iloc[1:])]
        layers = pd.read_csv(results / f"topology/{model}/step{step}.coupling.tsv", sep="\t")
        disruption = layers[layers["method"] == "signed_cpm"]["disruption"].iloc[:-1]
        np.testing.assert_allclose(row["community_nmi"], 1 - disruption, atol=1e-12)
        assert (row["community_nmi.baseline"] < row["community_nmi"]).sum() >= 2
    # 3 boundaries are below what a rank correlation needs: every pair is there, with no number
    correlations = pd.read_csv(results / f"across_papers/{model}/correlations.tsv", sep="\t")
    m = int(measures["present"].sum())
    assert m == (23 if model == "tiny-gelu" else 25)  # 2 + 7 or 8 projections x 2 + 2 K x 2 + 2 + 1
    assert len(correlations) == 4 * m * (m - 1) // 2
    assert (correlations["n"] == 3).all() and correlations["rho"].isna().all()
    emergence = pd.read_csv(results / f"across_papers/{model}/emergence.tsv", sep="\t")
    assert set(emergence["step"].dropna()) <= {4, 8, 16} and len(emergence) % 3 == 0
    band = table.loc[0, "alignment_output"]
    low, high = band.mean() - 3 * band.std(ddof=1), band.mean() + 3 * band.std(ddof=1)
    first = emergence[emergence["measure"] == "alignment_output"].set_index("boundary")["step"]
    for boundary in range(3):
        outside = [s for s in steps[1:] if not low <= table.loc[(s, boundary), "alignment_output"] <= high]
        assert first[boundary] == outside[0] if outside else np.isnan(first[boundary])


def test_across_models_is_each_models_last_step_depth_mean_ratio(tiny_run):
    models = pd.read_csv(tiny_run / "results/across_papers/models.tsv", sep="\t").set_index("model")
    assert list(models.index) == ["tiny-gelu", "tiny-swiglu"] and (models["step"] == 16).all()
    for model in models.index:
        last = pd.read_csv(tiny_run / f"results/across_papers/{model}/boundaries.tsv", sep="\t").query("step == 16")
        assert models.loc[model, "jacobian_alignment"] == pytest.approx(
            last["jacobian_alignment"].mean() / last["jacobian_alignment.baseline"].mean())
        assert models.loc[model, "coupling_K3_bwd"] == pytest.approx(
            last["coupling_K3_bwd.baseline"].mean() / last["coupling_K3_bwd"].mean())
    assert np.isnan(models.loc["tiny-gelu", "continuity_gate_v1"]) and models.loc["tiny-swiglu", "continuity_gate_v1"] > 0


def test_gate_conditioned_products_are_those_of_the_saved_weights_and_the_recorded_gate(tiny_run):
    """Every gated model's step has a row; each layer's stored singular values are those of
    W_down diag(mean_gate) W_up formed in numpy from the saved safetensors (mean_gate itself is
    checked against the live MLP's gate in test_alignment)."""
    from safetensors.numpy import load_file

    table = pd.read_csv(tiny_run / "results/alignment/gated.tsv", sep="\t")
    assert list(zip(table["model"], table["step"])) == [("tiny-swiglu", s) for s in (0, 4, 8, 16)]  # no GELU model
    values = table.drop(columns=["model", "step"]).to_numpy()
    assert ((values > 0) & (values <= 1)).all()
    path = Path(read_manifest(tiny_run / "results/checkpoints/tiny-swiglu/step16.json")["path"])
    weights = load_file(path / "model.safetensors")
    gated = np.load(tiny_run / "results/alignment/tiny-swiglu/step16.gated.npz")
    k = int(gated["k"])
    for layer, g in enumerate(gated["mean_gate"]):
        up = weights[f"model.layers.{layer}.mlp.up_proj.weight"].astype(np.float64)
        down = weights[f"model.layers.{layer}.mlp.down_proj.weight"].astype(np.float64)
        s = np.linalg.svd(down @ (g.astype(np.float64)[:, None] * up), compute_uv=False)
        np.testing.assert_allclose(gated["singular_values"][layer], s[: k + 1], rtol=1e-4)


def test_figures_are_real_images(tiny_run):
    figures = sorted((tiny_run / "results/figures").rglob("*.png"))
    # per model: 4 alignment, 1 loss, 6 dynamics, 5 topology, 12 coupling, 4 continuity, 3 across papers;
    # overviews: alignment, topology, 7 coupling, 1 dynamics, 4 toy ablations, 2 transformer ablations,
    # 1 across papers, the verdict matrix
    assert len(figures) == 2 * (4 + 1 + 6 + 5 + 12 + 4 + 3) + 10 + 4 + 2 + 1 + 1
    notes = {"coupling/all_models.gsm8k.png"}  # a sentence saying why it is empty: this run has no benchmarks
    for path in figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > (1000 if path.relative_to(tiny_run / "results/figures").as_posix() in notes
                                      else 5000)
    for path in (tiny_run / "results/figures").rglob("*.pdf"):
        assert path.read_bytes()[:5] == b"%PDF-"


def test_toy_ablations_are_tabulated_per_run_over_seeds(tiny_run):
    final = pd.read_csv(tiny_run / "results/toy/final.tsv", sep="\t").set_index("run")
    assert list(final.index) == ["res_relu", "nores_none"] and (final["seeds"] == 2).all()
    assert (final["diverged"] == 0).all() and final[["W.v1", "G0.v1", "accuracy"]].stack().between(0, 1).all()
    assert final.loc["res_relu", "G0.v1"] > final.loc["nores_none", "G0.v1"]  # residual: coherent first gradients
    epochs = pd.read_csv(tiny_run / "results/toy/res_relu/seed1.epochs.tsv", sep="\t")
    assert list(epochs["epoch"]) == [0, 1, 2] and list(epochs["step"]) == [0, 33, 66]  # 4,170 digits at batch 128


def test_transformer_ablations_match_an_independent_recomputation_from_the_saved_weights(tiny_run):
    from safetensors.numpy import load_file

    table = pd.read_csv(tiny_run / "results/continuity/ablations.tsv", sep="\t").set_index("run")
    assert list(table.index) == ["res_silu", "res_none", "nores_silu", "nonorm_silu"]
    assert table[["activation", "residual", "norm"]].values.tolist() == [
        ["silu", True, True], ["none", True, True], ["silu", False, True], ["silu", True, False]]
    assert table["diverged_step"].isna().all() and (table["steps"] == 6).all()
    for run in table.index:
        loss = pd.read_csv(tiny_run / f"results/ablations/{run}/loss.tsv", sep="\t").set_index("step")
        assert table.loc[run, "perplexity"] == pytest.approx(np.exp(loss.loc[6, "eval_loss"]), rel=1e-5)
        weights = load_file(tiny_run / f"results/ablations/{run}/step6/model.safetensors")
        assert any("norm" in name for name in weights) == (run != "nonorm_silu")
        for name, module, space in (("gate", "mlp.gate_proj", "v1"), ("o", "self_attn.o_proj", "u1")):
            assert table.loc[run, f"{name}.{space}"] == pytest.approx(_continuity(weights, module, space), abs=1e-5)
    # over training: every saved step (tiny.yaml: 0, 3 and the last), recomputed from its weights
    over = pd.read_csv(tiny_run / "results/continuity/ablations_over_training.tsv", sep="\t").set_index(["run", "step"])
    assert list(over.index) == [(run, step) for run in table.index for step in (0, 3, 6)]
    for run in table.index:
        for step in (0, 3, 6):
            weights = load_file(tiny_run / f"results/ablations/{run}/step{step}/model.safetensors")
            for name, module, space in (("gate", "mlp.gate_proj", "v1"), ("down", "mlp.down_proj", "u2")):
                expected = _continuity(weights, module, space)
                assert over.loc[(run, step), f"{name}.{space}"] == pytest.approx(expected, abs=1e-5)
    assert (over.xs(6, level="step")[["gate.v1", "o.u1"]] == table[["gate.v1", "o.u1"]]).all().all()


def _continuity(weights, module, space, layers=4):
    """Mean |cos| of adjacent layers' singular vectors (`space`: u1, v1, u2 or v2), by numpy."""
    i = int(space[1]) - 1
    svd = [np.linalg.svd(weights[f"model.layers.{layer}.{module}.weight"].astype(np.float64)) for layer in range(layers)]
    vectors = [u[:, i] for u, _, _ in svd] if space[0] == "u" else [vt[i] for _, _, vt in svd]
    return np.mean([abs(a @ b) for a, b in zip(vectors, vectors[1:])])


def test_a_diverging_ablation_is_reported_with_its_step(tmp_path):
    change = overlay(tmp_path / "diverge.yaml", "transformer_ablations: {train: {lr: 1.0e+30}}")
    snakemake(tmp_path, "results/figures/continuity/ablations.png", "--cores", "2", "--configfile", str(TINY), change)
    table = pd.read_csv(tmp_path / "results/continuity/ablations.tsv", sep="\t")
    assert table["diverged_step"].between(1, 6).all() and table["perplexity"].isna().all()
    assert not any(col.endswith((".u1", ".v1")) for col in table.columns)  # no run left continuity to report
    over = pd.read_csv(tmp_path / "results/continuity/ablations_over_training.tsv", sep="\t")
    assert (over.groupby("run")["step"].min() == 0).all() and over.loc[over["step"] == 0, "gate.v1"].notna().all()
    assert (tmp_path / "results/figures/continuity/ablations_over_training.png").is_file()
    assert (tmp_path / "results/figures/continuity/ablations.pdf").is_file()


def test_a_dataset_corpus_with_an_existing_tokenizer_trains_the_ablations(tiny_run, tmp_path):
    # The paper-scale path (WikiText-103, GPT-2's tokenizer) on a local dataset and the tiny run's tokenizer.
    from transformers import AutoTokenizer

    rows = ["", " = A heading = ", *[f"Paragraph {i} of a small local dataset , about the river and the town ." * 3
                                     for i in range(300)]]
    (tmp_path / "data").mkdir()
    (tmp_path / "data/train.jsonl").write_text("".join(json.dumps({"text": row}) + "\n" for row in rows))
    change = overlay(tmp_path / "dataset.yaml", yaml.safe_dump({
        "corpus": {"source": "dataset", "dataset": {"path": str(tmp_path / "data"), "name": None},
                   "tokenizer": str(tiny_run / "results/corpus/tokenizer")}}))
    work = tmp_path / "work"
    snakemake(work, "results/ablations/res_silu.continuity.tsv", "--cores", "2", "--configfile", str(TINY), change,
              env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    tokenizer = AutoTokenizer.from_pretrained(work / "results/corpus/tokenizer")
    ids = np.load(work / "results/corpus/tokens.npy")
    first = ids[: int(np.argmax(ids == tokenizer.eos_token_id))]
    assert tokenizer.decode(first.tolist()) == "= A heading =" and len(tokenizer) == 512
    assert (ids == tokenizer.eos_token_id).sum() == len(rows) - 2  # one EOS between the 301 non-empty rows
    outcome = json.loads((work / "results/ablations/res_silu/outcome.json").read_text())
    assert outcome["diverged_step"] is None and np.isfinite(outcome["perplexity"])
    table = pd.read_csv(work / "results/ablations/res_silu.continuity.tsv", sep="\t")
    assert table.groupby("step")["present"].sum().to_dict() == {0: 8, 3: 8, 6: 8}  # tiny.yaml saves steps 0 and 3 too


@pytest.mark.parametrize("model, names", [
    ("tiny-gelu", {"o": "attention.dense", "down": "mlp.dense_4h_to_h", "up": "mlp.dense_h_to_4h"}),
    ("tiny-swiglu", {"o": "self_attn.o_proj", "down": "mlp.down_proj", "gate": "mlp.gate_proj",
                     "q": "self_attn.q_proj"}),
])
def test_continuity_matches_an_independent_recomputation_from_the_saved_model(tiny_run, model, names):
    # Independent path: transformers builds the model, numpy's float64 SVD of each module's weight.
    from crosslayer.continuity.statistics import expected_abs_cosine

    manifest = read_manifest(tiny_run / f"results/checkpoints/{model}/step16.json")
    live = AutoModelForCausalLM.from_pretrained(manifest["path"])
    table = pd.read_csv(tiny_run / f"results/continuity/{model}/step16.tsv", sep="\t", index_col="projection")
    for name, module in names.items():
        svd = [np.linalg.svd(block.get_submodule(module).weight.detach().double().numpy()) for block in
               live.base_model.layers]
        cu = np.mean([abs(a[0][:, 0] @ b[0][:, 0]) for a, b in zip(svd, svd[1:])])
        cv = np.mean([abs(a[2][0] @ b[2][0]) for a, b in zip(svd, svd[1:])])
        assert table.loc[name, "u1"] == pytest.approx(cu, abs=1e-5) and table.loc[name, "v1"] == pytest.approx(cv, abs=1e-5)
        assert table.loc[name, "baseline_u"] == pytest.approx(expected_abs_cosine(svd[0][0].shape[0]))
    assert table.loc["gate", "present"] == (model == "tiny-swiglu")  # GELU MLP: reported absent, not zero
    table2 = pd.read_csv(tiny_run / "results/continuity/table2.tsv", sep="\t")
    assert table2[["model", "step"]].values.tolist() == [[m, s] for m in ("tiny-gelu", "tiny-swiglu") for s in (0, 4, 8, 16)]
    row = table2[(table2["model"] == model) & (table2["step"] == 16)].iloc[0]
    assert row["o.u1"] == pytest.approx(table.loc["o", "u1"]) and np.isnan(row["gate.v1"]) == (model == "tiny-gelu")


@pytest.mark.parametrize("model", ["tiny-gelu", "tiny-swiglu"])
def test_coupling_matches_an_independent_recomputation_from_the_saved_model(tiny_run, model):
    # Independent path: the released method's Jacobians (block on the whole prompt, one backward
    # pass per row), numpy SVDs, and output_hidden_states for the trajectories' norms.
    from transformers import AutoTokenizer

    from crosslayer.coupling.measure import miscoupling
    from crosslayer.data.prompts import read_prompts
    from crosslayer.jacobians.multi_token import released_last_token_jacobians

    manifest = read_manifest(tiny_run / f"results/checkpoints/{model}/step16.json")
    live = AutoModelForCausalLM.from_pretrained(manifest["path"], attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(manifest["path"])
    result = np.load(tiny_run / f"results/coupling/{model}/step16.coupling.npz")
    prompts = read_prompts(tiny_run / "results/coupling/prompts.jsonl")
    assert list(result["prompt_ids"]) == [row["id"] for row in prompts] and len(prompts) == 40
    assert [row["id"] for row in prompts if row["variant"] == "cot"] == ["corpus:0+cot", "corpus:1+cot"]
    for p in (0, len(prompts) - 1):  # a file prompt and a CoT corpus paragraph (cut to max_tokens = 24)
        ids = prompt_token_ids(tokenizer, [prompts[p]], 24)[0]  # a long CoT prompt keeps its suffix
        assert result["n_tokens"][p] == len(ids)
        J = {l: j.double().numpy() for l, j in released_last_token_jacobians(live, ids)}
        last = len(J) - 1  # coupling.final_norm: the final norm closes the last block (eq. 7), by autograd
        J[last] = reference(live, ids, last, len(ids) - 1, len(ids) - 1, final_norm=True).double().numpy()
        svd = {l: np.linalg.svd(j) for l, j in J.items()}
        for l, lp in [(0, 1), (3, 0), (2, 2)]:
            U, _, Vh = svd[lp]
            A = U[:, :3].T @ J[l] @ Vh[:3].T
            assert result["depthwise"][p, 0, 0, l, lp] == pytest.approx(miscoupling(A), abs=1e-4)
        with torch.no_grad():
            hidden = live(torch.tensor([ids]), output_hidden_states=True).hidden_states
        norms = result["norms"][:, result["token_prompt"] == p]
        for depth in range(5):  # x^L after the final norm: hidden_states[L]
            assert np.allclose(norms[depth], hidden[depth][0].norm(dim=-1).numpy(), rtol=1e-5)
    # the paper's Fig. 3: |A| of every layer pair on coupling.example_prompt alone
    ids = tokenizer(str(result["example_prompt"]))["input_ids"][:24]
    J = {l: j.double().numpy() for l, j in released_last_token_jacobians(live, ids)}
    J[3] = reference(live, ids, 3, len(ids) - 1, len(ids) - 1, final_norm=True).double().numpy()
    U, _, Vh = np.linalg.svd(J[0])
    assert np.allclose(result["example_abs_coupling"][2, 0], np.abs(U[:, :3].T @ J[2] @ Vh[:3].T), atol=1e-4)
    steps = pd.read_csv(tiny_run / f"results/coupling/{model}/steps.tsv", sep="\t")
    plain = steps.query("source == 'all' and variant == 'plain' and K == 8").set_index("step")
    assert list(plain.index) == [0, 4, 8, 16] and (plain.n_prompts == 38).all()
    assert set(steps.query("variant == 'cot'").source) == {"all", "corpus"}  # CoT only where asked, never pooled
    assert plain.coupling_mean[16] > plain.coupling_mean[0]  # training couples the blocks
    assert plain.lss_median[16] < plain.lss_median[0]  # and straightens the trajectories


@pytest.mark.parametrize("model", ["tiny-gelu", "tiny-swiglu"])
def test_held_out_loss_is_a_hand_written_loop_over_the_same_windows(tiny_run, model):
    # Independent path: the text set as the run wrote it, the checkpoint's own tokenizer, and the
    # mean of -log softmax at the next token, one window at a time in float64
    from transformers import AutoTokenizer

    from crosslayer.data.samples import read_samples

    table = pd.read_csv(tiny_run / f"results/evaluation/{model}/heldout.tsv", sep="\t")
    assert table.step.tolist() == [0, 4, 8, 16]
    _, texts = read_samples(tiny_run / "results/evaluation/heldout.jsonl")
    for step in (0, 16):
        manifest = read_manifest(tiny_run / f"results/checkpoints/{model}/step{step}.json")
        live = AutoModelForCausalLM.from_pretrained(manifest["path"]).eval()
        tokenizer = AutoTokenizer.from_pretrained(manifest["path"])
        row = table[table.step == step].iloc[0]
        ids = tokenizer("\n\n".join(texts), add_special_tokens=False)["input_ids"]
        width = int(row.context) + 1
        assert row.context == live.config.max_position_embeddings  # the tiny config's 32 < evaluation's 1024
        windows = [ids[i * width:(i + 1) * width] for i in range(len(ids) // width)]
        total, count = 0.0, 0
        with torch.no_grad():
            for window in windows:
                logp = torch.log_softmax(live(input_ids=torch.tensor([window[:-1]])).logits[0].double(), -1)
                total -= float(logp[torch.arange(width - 1), torch.tensor(window[1:])].sum())
                count += width - 1
        assert (row.n_windows, row.n_tokens) == (len(windows), count)
        assert row.loss == pytest.approx(total / count, rel=1e-5) and row.perplexity == pytest.approx(np.exp(row.loss), rel=1e-5)
    assert table.loss.iloc[-1] < table.loss.iloc[0]  # training lowers the held-out loss


def test_report_is_self_contained_with_every_figure(tiny_run):
    result = snakemake(tiny_run, "--configfile", str(TINY), "--report", "results/report.html")
    assert "(ERROR/" not in result.output  # docutils: a caption that is not valid reStructuredText
    html = (tiny_run / "results/report.html").read_text()
    for name in ("tiny-gelu.pairwise.png", "adjacent_mean_all_models.png", "table1.tsv", "cascade_fit.tsv",
                 "tiny-swiglu.eigenvalues.png", "regimes.tsv", "tiny-gelu.boundary_coupling.png",
                 "all_models.alignment_vs_boundary.png", "method_comparison.tsv", "tiny-swiglu.tokenwise.png",
                 "all_models.vs_score.png", "models.tsv", "tiny-gelu.cot.png", "tiny-swiglu.profiles.png",
                 "all_models.baseline_ratios.png", "emergence_order.tsv"):
        assert name in html
    assert "mean cosine of their" in html  # the methods paragraph
    assert html.index("Do the papers") < html.index("mean cosine of their")  # the verdicts open it
    assert "000-early-surge" in html and "verdicts.png" in html


def test_claims_give_every_claim_a_verdict_from_the_runs_own_tables(tiny_run):
    from crosslayer.claims.catalogue import catalogue_papers, load_catalogue
    from crosslayer.claims.engine import VERDICTS

    table = pd.read_csv(tiny_run / "results/claims/claims.tsv", sep="\t")
    catalogues = [load_catalogue(paper) for paper in catalogue_papers()]
    assert list(dict.fromkeys(table["claim"])) == [c.id for catalogue in catalogues for c in catalogue.claims]
    assert set(table["verdict"]) <= set(VERDICTS) and {"holds", "not testable"} <= set(table["verdict"])
    per_model = table[table["scope"] == "model"]
    assert set(per_model.loc[per_model["paper"] == 0, "subject"]) == {"tiny-gelu", "tiny-swiglu"}
    assert set(per_model.loc[per_model["claim"].str.startswith("003-toy"), "subject"]) == {"toy"}
    # one verdict recomputed by hand: the fraction of complex eigenvalues at the last step, over layers
    spectra = pd.read_csv(tiny_run / "results/dynamics/tiny-gelu/step16.spectra.tsv", sep="\t")
    row = table[(table["claim"] == "004-complex-pairs") & (table["subject"] == "tiny-gelu")].iloc[0]
    assert row.statistic == pytest.approx(spectra["frac_complex"].mean()) and row.n == len(spectra) == 4
    assert row.low <= row.statistic <= row.high and row.verdict in ("holds", "contradicted", "inconclusive")
    # and one the tiny models cannot test, with the reason: 4 layers give 3 boundaries
    row = table[(table["claim"] == "000-early-surge") & (table["subject"] == "tiny-gelu")].iloc[0]
    assert row.verdict == "not testable" and "boundaries with a value: 3" in row.reason
    published = pd.read_csv(tiny_run / "results/claims/published.tsv", sep="\t")
    assert list(published.columns) == ["paper", "section", "model", "quantity", "published", "ours", "difference",
                                       "rows", "missing"]
    assert set(published["model"]) <= {"toy", "transformer_ablations"}  # the tiny models are in no paper


def test_schur_forms_in_worker_processes_give_the_same_table_in_a_real_job(tiny_run, tmp_path):
    # dynamics.schur.workers spawns processes, which import the job's script again: the script's guard
    # keeps them from running the job (or reopening its log). Forced in a copy of the finished run.
    import shutil

    table = "results/dynamics/tiny-gelu/step8.schur.tsv"
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, symlinks=True)
    config = overlay(tmp_path / "workers.yaml", "dynamics: {schur: {workers: 2}}\n")
    snakemake(run, "--force", table, "--cores", "2", "--configfile", str(TINY), config)
    assert (run / table).read_bytes() == (tiny_run / table).read_bytes()
    log = (run / "logs/schur_surgery/tiny-gelu/step8.log").read_text()
    assert log.count("rule schur_surgery") == 1 and "layers (last first): 100%" in log
