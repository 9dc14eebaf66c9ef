"""Noise on the embeddings, followed through the depth (paper 002, Fig. 32).

Each token's ``x^0`` (the first block's input) gets Gaussian noise of norm ``level * ||x^0_t||`` in a
uniformly random direction; the prompt then runs through the model as it is, and each depth ``l``
compares the noisy state with the clean one by their cosine similarity. The paper draws it at the
first and last layers: a model whose blocks pull trajectories back toward the clean one keeps a
higher similarity at the last layer than at the first.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from crosslayer.config import check_max_tokens
from crosslayer.coupling.checkpoint import context_length
from crosslayer.coupling.tables import NOISE_PROMPT_COLUMNS
from crosslayer.coupling.trajectories import record_trajectories
from crosslayer.data.prompts import prompt_token_ids, read_prompts
from crosslayer.errors import CheckpointError, naming_checkpoint
from crosslayer.models.loading import load_model
from crosslayer.settings import require_int

__all__ = ["NoiseSettings", "cosines", "layer_cosines", "measure_noise", "relative_noise"]


@dataclass(frozen=True)
class NoiseSettings:
    """``levels``: noise norms relative to each token's embedding norm; ``draws``: noise draws per
    prompt and level; ``seed``: of the draws; the rest as the coupling stage's (the same prompts)."""

    levels: tuple = (0.01, 0.03, 0.1, 0.3, 1.0)
    draws: int = 4
    seed: int = 0
    final_norm: bool = False
    max_tokens: int | None = None

    def __post_init__(self):
        levels = tuple(float(v) for v in self.levels)
        if not levels or any(not np.isfinite(v) or v <= 0 for v in levels):
            raise ValueError(f"embedding_noise.levels must be positive numbers, got {list(self.levels)}")
        object.__setattr__(self, "levels", levels)
        require_int("embedding_noise.draws", self.draws, minimum=1)


def relative_noise(states, level, generator):
    """Noise for `states` (T, d): per row, norm ``level * ||row||`` in a uniformly random direction."""
    states = torch.as_tensor(states, dtype=torch.float64)
    g = torch.randn(states.shape, generator=generator, dtype=torch.float64)
    return g / g.norm(dim=-1, keepdim=True) * (level * states.norm(dim=-1, keepdim=True))


def cosines(a, b):
    """Cosine similarity of matching rows of `a` and `b` (..., d), in float64."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def layer_cosines(model, input_ids, levels, *, draws, generator, final_norm=False):
    """Cosine of every noisy state with the clean one, at every depth.

    Returns
    -------
    (len(levels), draws, L + 1, T) ndarray
        Depth 0 is the noisy embedding itself; depth ``L`` the last block's output (through the
        final norm with `final_norm`).
    """
    clean = record_trajectories(model, input_ids, final_norm=final_norm)
    out = np.empty((len(levels), draws, *clean.shape[:2]))
    for i, level in enumerate(levels):
        for draw in range(draws):
            noise = relative_noise(clean[0], level, generator).float()
            noisy = record_trajectories(model, input_ids, final_norm=final_norm, noise=noise)
            out[i, draw] = cosines(noisy, clean)
    return out


def measure_noise(manifest, settings=NoiseSettings(), *, prompts, device="cpu"):
    """The ``embedding_noise`` job: :func:`layer_cosines` on each plain prompt of a prompt file.

    Returns
    -------
    pandas.DataFrame
        :data:`crosslayer.coupling.tables.NOISE_PROMPT_COLUMNS`, one row per prompt, level and depth.

    Raises
    ------
    CheckpointError
        The checkpoint has no tokenizer or a prompt does not fit it (names model and revision).
    """
    model, tokenizer = load_model(manifest, device=device)
    with naming_checkpoint(manifest):
        if tokenizer is None:
            raise CheckpointError("no tokenizer in the checkpoint; the embedding_noise stage tokenizes its prompts")
        check_max_tokens(settings.max_tokens, context_length(model.config), model=manifest["model"])
        rows = [row for row in read_prompts(prompts) if row["variant"] == "plain"]
        generator = torch.Generator().manual_seed(settings.seed)
        frames = []
        for row, ids in zip(tqdm(rows, desc="prompts", unit="prompt"),
                            prompt_token_ids(tokenizer, rows, settings.max_tokens)):
            values = layer_cosines(model, ids, settings.levels, draws=settings.draws, generator=generator,
                                   final_norm=settings.final_norm)
            values = np.moveaxis(values, 2, 1).reshape(len(settings.levels), values.shape[2], -1)  # draws x tokens
            frames.append(pd.DataFrame({
                "prompt": row["id"],
                "level": np.repeat(settings.levels, values.shape[1]),
                "layer": np.tile(np.arange(values.shape[1]), len(settings.levels)),
                "cosine": values.mean(-1).ravel(),
                "sd": values.std(-1, ddof=1).ravel() if values.shape[-1] > 1 else np.nan,
                "n": values.shape[-1],
            }))
    return pd.concat(frames, ignore_index=True)[NOISE_PROMPT_COLUMNS]
