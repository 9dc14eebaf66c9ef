"""Who a verdict is about: each model's hub repository (the paper's models are named by theirs) and
which of its checkpoints is its initialization, from the config, joined to the claims' ``models``
table.

A checkpoint is untrained only where the workflow made it so (step 0 of a run it trained, an
untrained twin built with ``init``) or the config says so (``untrained_step``: Pythia's and OLMo's
``step0`` revisions); a user's checkpoint registered at step 0 is not read as initialization.
"""

import pandas as pd

from crosslayer.config import model_steps, untrained_seed

__all__ = ["untrained_step", "hub_repo", "model_identities", "with_identities"]


def untrained_step(model_cfg):
    """The step that is the model's initialization, or None where none is known to be."""
    if model_cfg["source"] == "train":
        return 0 if 0 in model_steps(model_cfg) else None
    if untrained_seed(model_cfg) is not None:
        return 0
    return model_cfg.get("untrained_step")


def hub_repo(model_cfg):
    """The hub repository of a hub model (its ``repo``, or the repo of its last checkpoint), else None."""
    if model_cfg["source"] != "hub":
        return None
    if model_cfg.get("repo"):
        return str(model_cfg["repo"])
    checkpoints = model_cfg["checkpoints"]
    last = max(checkpoints, key=int)
    return str(checkpoints[last]).partition("@")[0].strip()


def model_identities(models):
    """``{model: {"untrained_step": int or None, "repo": str or None}}`` of the config's models."""
    return {name: {"untrained_step": untrained_step(cfg), "repo": hub_repo(cfg)} for name, cfg in models.items()}


def with_identities(data, identities):
    """`data` with its ``models`` table joined to `identities` (one row per model of either)."""
    frame = pd.DataFrame([{"model": m, **v} for m, v in identities.items()],
                         columns=["model", "untrained_step", "repo"])
    frame["untrained_step"] = frame["untrained_step"].astype("float")  # None -> NaN
    models = data.get("models")
    joined = frame if models is None else models.merge(frame, on="model", how="outer")
    return {**data, "models": joined}
