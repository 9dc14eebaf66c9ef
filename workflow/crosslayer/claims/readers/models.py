"""The ``models`` table: one row per model with the architecture attributes claims compare models
by, read from its first registered checkpoint's config.json through its family adapter."""

import pandas as pd

from crosslayer.claims.readers.base import Reader
from crosslayer.files import read_manifest

_MANIFEST = "results/checkpoints/{model}/step{step}.json"


def _models(root, model, steps):
    from transformers import AutoConfig

    from crosslayer.models.adapters import adapter_for

    manifest = read_manifest(root / _MANIFEST.format(model=model, step=steps[0]))
    config = AutoConfig.from_pretrained(manifest["path"], trust_remote_code=False, local_files_only=True)
    g = adapter_for(config).geometry
    return pd.DataFrame([{"gated_mlp": bool(g.gated_mlp), "parallel_attn_mlp": bool(g.parallel_attn_mlp),
                          "n_layers": int(g.n_layers), "d_model": int(g.d_model)}])


READERS = (Reader("models", "checkpoints", (_MANIFEST,), _models),)
