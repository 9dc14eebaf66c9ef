"""Recorded trajectories (crosslayer.coupling.trajectories) against the model's own hidden states,
their PCA, and the logit-lens entropy."""

import numpy as np
import pytest
import torch
from tiny_families import LAYERS, D, tiny_model

from crosslayer.coupling.trajectories import logit_entropy, record_trajectories, trajectory_pca
from crosslayer.models.adapters import adapter_for

# family -> the final norm applied after the last block
FINAL_NORM = {
    "gpt_neox": lambda m: m.gpt_neox.final_layer_norm,
    "llama": lambda m: m.model.norm,
    "olmo2": lambda m: m.model.norm,
    "bloom": lambda m: m.transformer.ln_f,
    "gpt2": lambda m: m.transformer.ln_f,
    **dict.fromkeys(["mistral", "qwen2", "qwen3", "phi3", "exaone4", "gemma", "gemma2",
                      "gemma3_text"], lambda m: m.model.norm),
    "gemma3": lambda m: m.model.language_model.norm,
    "phi": lambda m: m.model.final_layernorm,
    "gpt_neo": lambda m: m.transformer.ln_f,
    "mpt": lambda m: m.transformer.norm_f,
    "falcon": lambda m: m.transformer.ln_f,
}


@pytest.mark.parametrize("family", FINAL_NORM)
def test_hooked_trajectory_equals_hidden_states_before_the_final_norm(family):
    model, final_norm = tiny_model(family, eager=False), FINAL_NORM[family]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    ids = [5, 17, 3, 99, 42, 8]
    traj = record_trajectories(model, ids)
    assert traj.shape == (LAYERS + 1, len(ids), D) and traj.dtype == np.float32
    with torch.no_grad():
        hidden = model.base_model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
        np.testing.assert_allclose(traj[:LAYERS], torch.stack(hidden[:LAYERS])[:, 0].numpy(), rtol=1e-6, atol=1e-6)
        last = torch.from_numpy(traj[LAYERS])
        assert not torch.allclose(last, hidden[LAYERS][0], atol=1e-3)  # hidden_states[L] is after the norm
        torch.testing.assert_close(final_norm(model)(last), hidden[LAYERS][0], rtol=1e-5, atol=1e-5)
    assert adapter_for(model).final_norm(model) is final_norm(model)
    normed = record_trajectories(model, ids, final_norm=True)  # the paper's x^L: the final norm in the last block
    np.testing.assert_array_equal(normed[:LAYERS], traj[:LAYERS])
    np.testing.assert_allclose(normed[LAYERS], hidden[LAYERS][0].numpy(), rtol=1e-6, atol=1e-6)


def test_pca_agrees_with_the_covariance_eigenvectors():
    rng = np.random.default_rng(3)
    traj = rng.standard_normal((5, 7, 6)) * np.array([5, 3, 1, 0.5, 0.2, 0.1])
    coords, explained = trajectory_pca(traj, fit="all")
    X = traj.reshape(-1, 6)
    w, V = np.linalg.eigh(np.cov(X.T, bias=True))
    assert np.allclose(explained, w[::-1][:2] / w.sum())
    for c in range(2):  # same axis up to sign
        expected = (X - X.mean(0)) @ V[:, -1 - c]
        got = coords[..., c].ravel()
        assert np.allclose(np.abs(got @ expected), np.linalg.norm(got) * np.linalg.norm(expected))


def test_pca_fit_on_the_last_layer_projects_every_state_on_its_components():
    # the paper (A.2.1) fits the PCA on X^L, the last layer's T states, and projects all states
    rng = np.random.default_rng(4)
    traj = rng.standard_normal((5, 7, 6)) * np.array([5, 3, 1, 0.5, 0.2, 0.1]) + rng.standard_normal(6)
    coords, explained = trajectory_pca(traj, fit="last")
    last = traj[-1]
    w, V = np.linalg.eigh(np.cov(last.T, bias=True))  # independently: X^L's covariance
    assert np.allclose(explained, w[::-1][:2] / w.sum())
    for c in range(2):
        expected = (traj.reshape(-1, 6) - last.mean(0)) @ V[:, -1 - c]  # every state, centred by X^L's mean
        got = coords[..., c].ravel()
        assert np.allclose(np.abs(got @ expected), np.linalg.norm(got) * np.linalg.norm(expected))
    assert not np.allclose(coords, trajectory_pca(traj, fit="all")[0])
    one_token = trajectory_pca(traj[:, :1], fit="last")  # X^L of one state: no variance to explain
    assert one_token[0].shape == (5, 1, 2) and np.isnan(one_token[1]).all()
    with pytest.raises(ValueError, match="`fit` must be one of"):
        trajectory_pca(traj, fit="first")


@pytest.mark.parametrize("family", ["llama", "gpt_neox", "gpt2", "gemma2", "phi", "falcon"])
def test_the_logit_lens_entropy_of_the_last_state_is_the_models_own(family):
    model = tiny_model(family, eager=False)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    ids = [5, 17, 3, 99, 42, 8]
    entropy = logit_entropy(model, record_trajectories(model, ids))
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)  # softcap included (Gemma 2)
    np.testing.assert_allclose(entropy[-1], -(logp.exp() * logp).sum(-1).numpy(), rtol=1e-4, atol=1e-5)
    assert entropy.shape == (LAYERS + 1, len(ids)) and (entropy >= 0).all()
    assert (entropy <= np.log(model.config.get_text_config().vocab_size) + 1e-6).all()
