"""Per-checkpoint coupling against an independent recomputation: the released method's
Jacobians (whole sequence, row by row), numpy SVDs and the trajectory statistics; the
``block_coupling`` job's contract (CouplingSettings, measure_checkpoint and the errors it names the
checkpoint in)."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch
from tiny_checkpoints import save_checkpoint, text
from tiny_families import LAYERS, VOCAB, tiny_model
from token_reference import reference

from crosslayer.coupling.checkpoint import (
    CouplingSettings,
    block_coupling,
    check_prompts,
    context_length,
    measure_checkpoint,
)
from crosslayer.coupling.measure import METRICS, miscoupling
from crosslayer.coupling.regularity import equidistance, expodistance, line_shape_score, windowed
from crosslayer.coupling.tables import windowed_regularity
from crosslayer.coupling.trajectories import logit_entropy, record_trajectories
from crosslayer.errors import CheckpointError
from crosslayer.jacobians.multi_token import released_last_token_jacobians, token_jacobians
from crosslayer.models.loading import load_model

KS = (2, 5)


def prompts(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB, 5 + i).tolist() for i in range(n)]


def expected_depthwise(model, ids, K, final_norm):
    J = {l: j.double().numpy() for l, j in released_last_token_jacobians(model, ids)}
    if final_norm:  # the paper's eq. 7: the model's own output after the last block, by autograd
        J[LAYERS - 1] = reference(model, ids, LAYERS - 1, len(ids) - 1, len(ids) - 1, final_norm=True).double().numpy()
    svd = {l: np.linalg.svd(J[l]) for l in J}
    M = np.zeros((len(METRICS), LAYERS, LAYERS))
    for l in J:
        for lp in J:
            U, _, Vh = svd[lp]
            A = U[:, :K].T @ J[l] @ Vh[:K].T
            M[:, l, lp] = [miscoupling(A, metric=m, s=svd[l][1][:K]) for m in METRICS]
    return M


@pytest.mark.parametrize("family,final_norm", [("llama", True), ("gpt_neox", True), ("llama", False)])
@pytest.mark.parametrize("hold_bytes", [0, 1 << 20])
def test_depthwise_and_trajectories_match_an_independent_recomputation(family, final_norm, hold_bytes):
    model, token_ids = tiny_model(family), prompts(3)
    result = block_coupling(model, token_ids, CouplingSettings(Ks=KS, pca_prompts=1, final_norm=final_norm),
                            hold_bytes=hold_bytes)
    windows = {width: windowed_regularity(result, width=width) for width in (3,)}  # LAYERS + 1 states
    assert result["depthwise"].shape == (3, len(METRICS), len(KS), LAYERS, LAYERS)
    for p, ids in enumerate(token_ids):
        for j, K in enumerate(KS):
            assert np.allclose(result["depthwise"][p, :, j], expected_depthwise(model, ids, K, final_norm), atol=2e-5)
        tokens = result["token_prompt"] == p
        with torch.no_grad():  # both conventions of x^L are kept whatever the Jacobian's
            hidden = torch.stack(model.base_model(input_ids=torch.tensor([ids]), output_hidden_states=True)
                                 .hidden_states)[:, 0].numpy()
        raw = record_trajectories(model, ids)
        assert np.allclose(result["lss"][tokens], line_shape_score(hidden))
        assert np.allclose(result["ed"][tokens], expodistance(hidden))
        assert np.allclose(result["norms"][:, tokens], np.linalg.norm(hidden, axis=-1), rtol=1e-5)
        assert np.allclose(result["lss_raw"][tokens], line_shape_score(raw))
        assert np.allclose(result["ed_raw"][tokens], expodistance(raw))
        assert np.allclose(result["norm_last_raw"][tokens], np.linalg.norm(raw[-1], axis=-1))
        for width, stats in windows.items():  # any width from the stored Gram matrices and norms
            for suffix, traj in (("", hidden), ("_raw", raw)):
                for name, statistic in (("lss", line_shape_score), ("ed", expodistance), ("eq", equidistance)):
                    assert np.allclose(stats[f"{name}_windowed{suffix}"][:, tokens],
                                       windowed(statistic, traj, width=width), rtol=1e-5, equal_nan=True)
        assert not np.allclose(result["ed_raw"][tokens], result["ed"][tokens])
        assert np.allclose(result["logit_entropy"][:, tokens], logit_entropy(model, raw))
    assert result["pca"].shape == (1, LAYERS + 1, 5, 2)
    assert result["abs_coupling"].shape == (LAYERS, LAYERS, 2, 2)


def test_an_earlier_depthwise_token_is_the_prompt_cut_after_it():
    model, (ids,) = tiny_model("llama"), prompts(1, seed=4)
    at_2 = block_coupling(model, [ids], CouplingSettings(Ks=KS, token=2))
    cut = block_coupling(model, [ids[:3]], CouplingSettings(Ks=KS))
    assert np.allclose(at_2["depthwise"], cut["depthwise"], atol=1e-6)
    # and J_22 of the cut prompt is the whole prompt's token-wise J_{22}
    J22 = dict(token_jacobians(model, ids, 1))[2][2].double().numpy()
    from crosslayer.jacobians.multi_token import last_token_jacobians

    assert np.allclose(dict(last_token_jacobians(model, ids[:3]))[1].double().numpy(), J22, atol=1e-5)


def test_mean_abs_coupling_is_over_the_selected_prompts_only():
    model, token_ids = tiny_model("llama"), prompts(3, seed=2)
    alone = [block_coupling(model, [ids], CouplingSettings(Ks=KS))["abs_coupling"] for ids in token_ids]
    picked = block_coupling(model, token_ids, CouplingSettings(Ks=KS), abs_prompts=[True, False, True])
    assert np.allclose(picked["abs_coupling"], (alone[0] + alone[2]) / 2, atol=1e-6)
    assert not np.allclose(picked["abs_coupling"], sum(alone) / 3, atol=1e-4)
    with pytest.raises(ValueError, match="abs_prompts selects no prompt"):
        block_coupling(model, token_ids, CouplingSettings(Ks=KS), abs_prompts=[False] * 3)


def test_token_wise_results_are_stacked_per_layer_pair_and_prompt():
    model = tiny_model("gpt2")
    result = block_coupling(model, prompts(3), CouplingSettings(Ks=KS, layer_pairs=[(0, 1), (2, 2)],
                                                                token_wise_prompts=2, token_wise_tokens=4))
    assert result["tw_self"].shape == (2, 2, len(METRICS), len(KS), 4, 4)
    assert result["tw_fixed_input"].shape == (2, 2, len(METRICS), len(KS), 4, 4, 4)
    assert result["tw_abs_self"].shape == (2, 4, 4, 2, 2)
    assert np.allclose(np.diagonal(result["tw_self"][1], axis1=-2, axis2=-1), 0, atol=1e-5)  # l = l': own basis


def test_bad_prompts_are_refused_before_compute_naming_the_prompt():
    with pytest.raises(ValueError, match="prompt 'a' has no tokens"):
        check_prompts(["a"], [[]], context=10)
    with pytest.raises(ValueError, match="prompt 'b' has 12 tokens, longer than the model's context of 10"):
        check_prompts(["a", "b"], [[1], list(range(12))], context=10)
    with pytest.raises(ValueError, match="prompt 'b' has 3 tokens, fewer than coupling.token_wise.tokens = 4"):
        check_prompts(["a", "b", "c"], [[1] * 5, [1] * 3, [1]], context=None, token_wise_prompts=2,
                      token_wise_tokens=4)
    with pytest.raises(ValueError, match="too few for coupling.depthwise.token = 5"):
        check_prompts(["a"], [[1, 2]], context=None, token=5)
    check_prompts(["a", "b"], [[1] * 5, [1]], context=5, token=-1, token_wise_prompts=1, token_wise_tokens=5)
    assert context_length(tiny_model("gpt2").config) == 64


def test_a_non_finite_jacobian_names_the_prompt_layer_and_tokens():
    model = tiny_model("llama")
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"prompt 'second': non-finite Jacobian at layer 1, tokens \(5, 5\)"):
        block_coupling(model, [[1, 2, 3, 4, 5, 6]], CouplingSettings(Ks=KS), prompt_ids=["second"])


def test_settings_the_model_is_too_small_for_are_named():
    model = tiny_model("llama")
    with pytest.raises(ValueError, match=r"coupling.Ks: \[2, 40\] must not exceed d_model = 32"):
        block_coupling(model, prompts(1), CouplingSettings(Ks=(2, 40)))
    with pytest.raises(ValueError, match=r"coupling.token_wise.layer_pairs: \[\[0, 3\]\] must be layers below 3"):
        block_coupling(model, prompts(1), CouplingSettings(Ks=KS, layer_pairs=[(0, 3)], token_wise_prompts=1))


# --------------------------------------------------------------------------- the job's contract


@pytest.mark.parametrize("field, value, key", [
    ("Ks", [], "coupling.Ks"), ("Ks", [0, 3], "coupling.Ks"), ("Ks", [2.5], "coupling.Ks"),
    ("token", 1.5, "coupling.depthwise_token"), ("layer_pairs", [[0]], "coupling.token_wise.layer_pairs"),
    ("layer_pairs", [[-1, 0]], "coupling.token_wise.layer_pairs"),
    ("token_wise_prompts", -1, "coupling.token_wise.prompts"),
    ("token_wise_tokens", 0, "coupling.token_wise.tokens"), ("pca_prompts", True, "coupling.pca_prompts"),
    ("pca_fit", "first", "coupling.pca_fit"), ("final_norm", "yes", "coupling.final_norm"),
    ("metrics", ("bogus",), "coupling metrics"), ("max_tokens", 0, "coupling.prompts.max_tokens"),
    ("example_prompt", "", "coupling.example_prompt"),
])
def test_settings_refuse_a_bad_value_naming_its_key(field, value, key):
    with pytest.raises(ValueError, match=rf"^{re.escape(key)} must"):
        CouplingSettings(**{field: value})


def test_settings_sort_the_Ks_and_keep_tuples():
    settings = CouplingSettings(Ks=[8, 3], layer_pairs=[[1, 2], [2, 2]], metrics=["paper"])
    assert settings.Ks == (3, 8) and settings.layer_pairs == ((1, 2), (2, 2)) and settings.metrics == ("paper",)
    assert CouplingSettings().metrics == METRICS
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.Ks = (4,)


def write_prompt_file(path, texts):
    path.write_text("".join(json.dumps({"id": f"p{i}", "text": t, "variant": "plain", "source": "test"}) + "\n"
                            for i, t in enumerate(texts)))
    return path


def test_measure_checkpoint_is_block_coupling_of_the_tokenized_prompts(tmp_path):
    manifest = save_checkpoint("gpt_neox", tmp_path / "ckpt")
    prompts = write_prompt_file(tmp_path / "prompts.jsonl", [text(7), text(5, start=20), text(9, start=40)])
    settings = CouplingSettings(Ks=(8, 3), layer_pairs=[(0, 1)], token_wise_prompts=1, token_wise_tokens=4,
                                max_tokens=6, example_prompt=text(4, start=60))
    result = measure_checkpoint(manifest, settings, prompts=prompts)
    model, _ = load_model(manifest)
    model.set_attn_implementation("eager")
    token_ids = [list(range(1, 7)), list(range(20, 25)), list(range(40, 46))]  # cut to max_tokens = 6
    direct = block_coupling(model, token_ids, settings)
    for key in direct:
        np.testing.assert_allclose(result[key], direct[key], rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=key)
    alone = dataclasses.replace(settings, layer_pairs=(), token_wise_prompts=0, pca_prompts=1)
    example = block_coupling(model, [list(range(60, 64))], alone)
    np.testing.assert_allclose(result["example_abs_coupling"], example["abs_coupling"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result["example_pca"], example["pca"], rtol=1e-4, atol=1e-5)  # Fig. 12's prompt
    assert result["example_pca"].shape == (1, 4, 4, 2) and result["example_pca_explained"].shape == (1, 2)
    assert list(result)[len(direct):] == ["example_abs_coupling", "example_pca", "example_pca_explained",
                                          "example_prompt", "prompt_ids", "variants", "sources", "n_tokens", "Ks",
                                          "metrics", "layer_pairs", "n_params", "n_layers", "d_model"]
    assert result["n_tokens"].tolist() == [6, 5, 6] and result["Ks"].tolist() == [3, 8]
    assert result["layer_pairs"].tolist() == [[0, 1]] and (result["n_layers"], result["d_model"]) == (3, 32)


def test_a_prompt_beyond_the_context_names_the_checkpoint_and_the_prompt(tmp_path):
    manifest = save_checkpoint("gpt2", tmp_path / "ckpt")  # a context of 64 tokens
    prompts = write_prompt_file(tmp_path / "prompts.jsonl", [text(5), " ".join([text(50)] * 2)])
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(manifest['path'])}': "
                                              r"prompt 'p1' has 100 tokens, longer than the model's context of 64"):
        measure_checkpoint(manifest, CouplingSettings(Ks=(3,)), prompts=prompts)


def test_a_checkpoint_without_tokenizer_is_refused_naming_it(tmp_path):
    manifest = save_checkpoint("gpt_neox", tmp_path / "ckpt", tokenizer=False)
    with pytest.raises(CheckpointError, match=rf"^model 'm' revision 'step7' file '{re.escape(manifest['path'])}': "
                                              r"no tokenizer in the checkpoint"):
        measure_checkpoint(manifest, prompts=tmp_path / "never_read.jsonl")
