"""Noise on the embeddings (paper 002, Fig. 32): against transformers' own forward with
``inputs_embeds`` and its hidden states, the noise's norms, the per-checkpoint table."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from crosslayer.coupling.noise import NoiseSettings, cosines, layer_cosines, measure_noise, relative_noise
from crosslayer.coupling.tables import NOISE_COLUMNS, NOISE_PROMPT_COLUMNS, noise_summary
from tiny_checkpoints import save_checkpoint, text
from tiny_families import tiny_model


def hf_cosines(model, ids, noise):
    """Cosines of noisy and clean hidden states, the noise added to transformers' ``inputs_embeds``;
    ``hidden_states[-1]`` is after the final norm in transformers 5."""
    ids = torch.tensor([ids])
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)
        clean = model(inputs_embeds=embeds, output_hidden_states=True).hidden_states
        noisy = model(inputs_embeds=embeds + noise[None], output_hidden_states=True).hidden_states
    return np.stack([cosines(n[0], c[0]) for n, c in zip(noisy, clean)])


# GPT-2 adds its position embeddings to inputs_embeds inside its forward: x^0 is wte + wpe, and the
# noise added to inputs_embeds is the noise on x^0 all the same
@pytest.mark.parametrize("family", ["llama", "gpt_neox", "gpt2"])
def test_layer_cosines_equal_transformers_own_forward_with_noisy_embeddings(family):
    model, ids = tiny_model(family), [5, 17, 3, 40, 8, 11]
    levels = (0.05, 0.5)
    ours = {final: layer_cosines(model, ids, levels, draws=2, generator=torch.Generator().manual_seed(3),
                                 final_norm=final) for final in (False, True)}
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        x0 = model.get_input_embeddings()(torch.tensor([ids]))[0]
        if family == "gpt2":
            x0 = x0 + model.transformer.wpe(torch.arange(len(ids)))
    for i, level in enumerate(levels):
        for draw in range(2):
            expected = hf_cosines(model, ids, relative_noise(x0, level, generator).float())
            # hidden states 0 .. L-1 are block inputs; the last is after the final norm
            np.testing.assert_allclose(ours[False][i, draw, :-1], expected[:-1], atol=2e-6)
            np.testing.assert_allclose(ours[True][i, draw], expected, atol=2e-6)
    assert ours[False].shape == (2, 2, model.config.num_hidden_layers + 1, len(ids))
    assert (ours[False][1, :, 0] < ours[False][0, :, 0]).all()  # more noise, less alike at the embeddings


def test_relative_noise_has_the_asked_norm_in_every_direction():
    states = torch.randn(4000, 6, generator=torch.Generator().manual_seed(0)) * torch.arange(1, 7)
    noise = relative_noise(states, 0.3, torch.Generator().manual_seed(1))
    np.testing.assert_allclose(noise.norm(dim=-1), 0.3 * states.double().norm(dim=-1), rtol=1e-12)
    directions = noise / noise.norm(dim=-1, keepdim=True)
    assert directions.mean(0).abs().max() < 0.05  # isotropic: no direction preferred
    np.testing.assert_allclose((directions**2).mean(0), 1 / 6, atol=0.02)


def test_a_state_alone_at_depth_zero_gives_the_closed_form():
    # noise orthogonal to x: cos(x + n, x) = 1 / sqrt(1 + level^2); relative_noise in high d is nearly so
    x = torch.zeros(1, 20000, dtype=torch.float64)
    x[0, 0] = 2.0
    noise = relative_noise(x, 0.5, torch.Generator().manual_seed(2))
    assert cosines(x + noise, x)[0] == pytest.approx(1 / np.sqrt(1.25), abs=0.01)


def write_prompts(path, texts, variant="plain"):
    path.write_text("".join(json.dumps({"id": f"p{i}", "text": t, "variant": variant, "source": "test"}) + "\n"
                            for i, t in enumerate(texts)))
    return path


def test_the_table_averages_each_plain_prompts_tokens_and_draws(tmp_path):
    manifest = save_checkpoint("llama", tmp_path / "ckpt")
    prompts = write_prompts(tmp_path / "p.jsonl", [text(7), text(5, start=20)])
    with open(prompts, "a") as out:  # a chain-of-thought variant is not measured
        out.write(json.dumps({"id": "c", "text": text(30), "variant": "cot", "source": "test"}) + "\n")
    settings = NoiseSettings(levels=(0.1, 1.0), draws=3, seed=4, max_tokens=6)
    table = measure_noise(manifest, settings, prompts=prompts)
    assert list(table.columns) == NOISE_PROMPT_COLUMNS
    n_layers = tiny_model("llama").config.num_hidden_layers
    assert len(table) == 2 * 2 * (n_layers + 1) and set(table["prompt"]) == {"p0", "p1"}
    assert table.groupby("prompt")["n"].first().to_dict() == {"p0": 3 * 6, "p1": 3 * 5}  # draws x tokens
    model = tiny_model("llama")
    generator = torch.Generator().manual_seed(4)  # the prompts in turn, each level's draws in turn
    for prompt, ids in (("p0", [1, 2, 3, 4, 5, 6]), ("p1", [20, 21, 22, 23, 24])):
        values = layer_cosines(model, ids, (0.1, 1.0), draws=3, generator=generator)
        values = np.moveaxis(values, 2, 1).reshape(2, n_layers + 1, -1)
        rows = table[table.prompt == prompt]
        np.testing.assert_allclose(rows["cosine"], values.mean(-1).ravel(), rtol=1e-6)
        np.testing.assert_allclose(rows["sd"], values.std(-1, ddof=1).ravel(), rtol=1e-5)
        assert rows[rows.layer == 2]["level"].tolist() == [0.1, 1.0]
    assert table.equals(measure_noise(manifest, settings, prompts=prompts))  # seeded


def test_the_summary_counts_each_prompt_once():
    def prompt_table(prompt, cosines):
        return pd.DataFrame({"prompt": prompt, "level": [0.1, 0.1], "layer": [0, 1], "cosine": cosines, "sd": 0.0,
                             "n": [10, 99]})

    tables = {0: pd.concat([prompt_table("a", [0.9, 0.5]), prompt_table("b", [0.7, 0.3])]),
              5: prompt_table("a", [0.8, 0.6])}
    summary = noise_summary(tables)
    assert list(summary.columns) == NOISE_COLUMNS
    np.testing.assert_allclose(summary.values.astype(float), [[0, 0.1, 0, 0.8, np.std([0.9, 0.7], ddof=1), 2],
                                                              [0, 0.1, 1, 0.4, np.std([0.5, 0.3], ddof=1), 2],
                                                              [5, 0.1, 0, 0.8, np.nan, 1], [5, 0.1, 1, 0.6, np.nan, 1]])


@pytest.mark.parametrize("change, message", [({"levels": ()}, "embedding_noise.levels must be positive"),
                                             ({"levels": (0.1, -1)}, "embedding_noise.levels must be positive"),
                                             ({"draws": 0}, "embedding_noise.draws must be an integer >= 1")])
def test_settings_refusals_name_the_key(change, message):
    with pytest.raises(ValueError, match=message):
        NoiseSettings(**change)
