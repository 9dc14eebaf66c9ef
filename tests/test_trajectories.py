import numpy as np
import pytest
import torch
import transformers as T
from tiny_families import LAYERS, D, tiny_model

from crosslayer.coupling.regularity import (
    expodistance,
    line_shape_score,
    pack_symmetric,
    unit_step_gram,
    unit_steps,
    unpack_symmetric,
    windowed,
    windowed_expodistance,
    windowed_line_shape,
)
from crosslayer.coupling.trajectories import logit_entropy, record_trajectories, trajectory_pca
from crosslayer.models.adapters import adapter_for

torch.set_num_threads(1)
T.logging.set_verbosity_error()

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


def test_line_shape_score_is_one_exactly_for_collinear_trajectories():
    rng = np.random.default_rng(0)
    x0, v = rng.standard_normal(8), rng.standard_normal(8)
    collinear = x0 + np.cumsum([0, 0.5, 2.0, 0.1, 7.0])[:, None] * v  # steps of any length, one direction
    assert line_shape_score(collinear) == pytest.approx(1.0, abs=1e-12)
    back = x0 + np.array([0, 1.0, 0.0, 1.0])[:, None] * v  # collinear but reversing: 3 / 1
    assert line_shape_score(back) == pytest.approx(3.0)
    random = rng.standard_normal((12, 40, 8))  # (states, tokens, d)
    lss = line_shape_score(random)
    assert lss.shape == (40,) and (lss > 1).all()
    assert np.isnan(line_shape_score(np.stack([x0, x0, x0 + v])))  # a zero step


def test_expodistance_is_zero_exactly_for_geometric_growth():
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((5, 8))  # 5 tokens
    Q = np.linalg.qr(rng.standard_normal((8, 8)))[0]  # direction may turn: only norms matter
    geometric = np.stack([1.3**l * (x0 @ np.linalg.matrix_power(Q, l)) for l in range(7)])
    assert np.allclose(expodistance(geometric), 0.0, atol=1e-20)
    norms = np.array([1.0, 2.0, 3.0, 9.0])  # alpha = ln 2, ln 1.5, ln 3
    alpha = np.log([2.0, 1.5, 3.0])
    traj = norms[:, None] * np.eye(3)[0]
    assert expodistance(traj) == pytest.approx(alpha.var(ddof=0) / alpha.mean() ** 2)
    with pytest.raises(ValueError, match="at least 3 states"):
        expodistance(traj[:2])


def test_windows_are_centred_and_nan_where_they_do_not_fit():
    rng = np.random.default_rng(2)
    traj = rng.standard_normal((9, 4, 6))
    lss = windowed(line_shape_score, traj, width=5)
    assert lss.shape == (9, 4)
    assert np.isnan(lss[[0, 1, 7, 8]]).all()
    np.testing.assert_allclose(lss[4], line_shape_score(traj[2:7]))
    np.testing.assert_allclose(windowed(expodistance, traj, width=3)[1], expodistance(traj[:3]))
    with pytest.raises(ValueError, match="odd"):
        windowed(line_shape_score, traj, width=4)


@pytest.mark.parametrize("width", [3, 5, 9])
def test_windows_from_the_unit_step_gram_and_the_norms_are_those_of_the_states(width):
    # What a checkpoint stores (the Gram matrix of the unit steps, packed, and the norms) gives the
    # windowed statistics of any width without the states
    rng = np.random.default_rng(width)
    traj = rng.standard_normal((9, 6, 5)) * np.geomspace(1, 4, 9)[:, None, None]
    traj[4, 2] = traj[3, 2]  # a zero step: NaN in every window over it, as from the states
    gram = unit_step_gram(unit_steps(traj))
    assert gram.shape == (6, 8, 8)
    np.testing.assert_allclose(np.diagonal(gram[[0, 1, 3, 4, 5]], axis1=-2, axis2=-1), 1.0)
    np.testing.assert_array_equal(unpack_symmetric(pack_symmetric(gram)), gram)
    stored = pack_symmetric(gram).astype(np.float32)
    expected = windowed(line_shape_score, traj, width=width)
    assert np.isnan(expected[:, 2]).any()
    np.testing.assert_allclose(windowed_line_shape(unpack_symmetric(stored), width=width), expected, rtol=1e-6)
    np.testing.assert_allclose(windowed_expodistance(np.linalg.norm(traj, axis=-1), width=width),
                               windowed(expodistance, traj, width=width), rtol=1e-12)
    with pytest.raises(ValueError, match="m \\(m \\+ 1\\) / 2"):
        unpack_symmetric(np.zeros(5))


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
