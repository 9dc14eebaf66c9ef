"""Untrained twins: a model's random initialisation, built from its own config.json with its
family's transformers initialisation, saved as a checkpoint that every stage reads like any other
(paper 002 compares every model at initialisation with its trained weights)."""

import os
import shutil
from pathlib import Path

import torch

from crosslayer.errors import CheckpointError
from crosslayer.models.checkpoints import TOKENIZER_PATTERNS

__all__ = ["build_untrained"]


def build_untrained(source_dir, out_dir, *, seed, model=None):
    """Save the random initialisation of the model described in ``source_dir``.

    ``torch.manual_seed(seed)`` right before ``AutoModelForCausalLM.from_config`` on the CPU, in
    float32, as :func:`crosslayer.models.train.build_model` builds a trained model's step 0: the
    same seed gives the same bytes, and the twin of a workflow-trained model with its training
    seed is its step 0. The tokenizer files are copied beside the weights.

    Parameters
    ----------
    source_dir : str or Path
        Holds ``config.json`` and, for the prompt stages, the tokenizer files
        (:data:`crosslayer.models.checkpoints.TOKENIZER_PATTERNS`).
    out_dir : str or Path
        Written whole (through a temporary directory beside it) or not at all.
    seed : int
    model : str, optional
        The model's name, for error messages.

    Returns
    -------
    Path
        `out_dir`.

    Raises
    ------
    CheckpointError
        No config.json in `source_dir`, or the twin cannot be saved (a full disk); nothing of it is
        left behind.
    """
    import transformers

    source_dir, out_dir = Path(source_dir), Path(out_dir)
    if not (source_dir / "config.json").is_file():
        raise CheckpointError(f"no config.json in {source_dir}: cannot build the untrained twin", model=model,
                              revision="init", file=str(source_dir / "config.json"))
    config = transformers.AutoConfig.from_pretrained(source_dir, trust_remote_code=False, local_files_only=True)
    torch.manual_seed(seed)
    built = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32, trust_remote_code=False)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:  # a failed save (a full disk) leaves neither a partial twin nor the temporary directory behind
        built.save_pretrained(tmp)
        for pattern in TOKENIZER_PATTERNS:
            for path in source_dir.glob(pattern):
                shutil.copyfile(path, tmp / path.name)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp, out_dir)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise CheckpointError(f"cannot save the untrained twin: {err}", model=model, revision="init",
                                  file=str(out_dir)) from err
        raise
    return out_dir
