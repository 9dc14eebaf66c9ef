from _setup import start

start(snakemake)

import torch

torch.set_num_threads(snakemake.threads)  # the rule's threads: oversubscribing cores is 3-8x slower

from crosslayer.devices import configured_device

device = configured_device(snakemake.config, "coupling")  # no GPU here: name the key before any work

import numpy as np
from tqdm import tqdm

from crosslayer.config import check_max_tokens
from crosslayer.coupling.checkpoint import check_prompts, checkpoint_coupling, context_length
from crosslayer.coupling.measure import METRICS
from crosslayer.data.prompts import prompt_token_ids, read_prompts
from crosslayer.errors import CheckpointError
from crosslayer.models.checkpoints import verified_manifest
from crosslayer.models.loading import load_model

params = snakemake.params
memory = snakemake.config["coupling"]  # chunk_mb, hold_mb: speed only, so not params (a change re-runs nothing)
manifest = verified_manifest(snakemake.input.manifest)  # the files are still those it registered
model, tokenizer = load_model(manifest, device=device)
if tokenizer is None:
    raise CheckpointError("no tokenizer in the checkpoint; the coupling stage tokenizes its prompts",
                          model=manifest["model"], revision=manifest.get("revision"), file=manifest["path"])
model.set_attn_implementation("eager")  # autograd batches eager attention; fused kernels fall back to a loop
prompts = read_prompts(snakemake.input.prompts)
prompt_ids = [row["id"] for row in prompts]
token_ids = prompt_token_ids(tokenizer, prompts, params.max_tokens)
token_wise = params.token_wise
context = context_length(model.config)
try:  # a hub model's context is known only here (a local or trained model's was checked before any job)
    check_max_tokens(params.max_tokens, context, model=manifest["model"])
except ValueError as err:
    raise CheckpointError(str(err), model=manifest["model"], revision=manifest.get("revision"),
                          file=manifest["path"]) from None
try:
    check_prompts(prompt_ids, token_ids, context=context,
                  token=params.token, token_wise_prompts=token_wise["prompts"],
                  token_wise_tokens=token_wise["tokens"])
    result = checkpoint_coupling(
        model, token_ids, prompt_ids=prompt_ids, Ks=params.Ks, token=params.token,
        layer_pairs=token_wise["layer_pairs"], token_wise_prompts=token_wise["prompts"],
        token_wise_tokens=token_wise["tokens"], pca_prompts=params.pca_prompts, pca_fit=params.pca_fit,
        final_norm=params.final_norm, abs_prompts=[row["variant"] == "plain" for row in prompts],
        chunk_bytes=memory["chunk_mb"] * 2**20, hold_bytes=memory["hold_mb"] * 2**20,
        progress=lambda it: tqdm(it, desc="prompts", unit="prompt"))
    # the paper's Fig. 3: |A| of every layer pair on one prompt, measured beside the prompt set
    example = tokenizer(params.example_prompt)["input_ids"][: params.max_tokens]
    example_abs = checkpoint_coupling(model, [example], prompt_ids=["coupling.example_prompt"], Ks=params.Ks,
                                      final_norm=params.final_norm, pca_prompts=0,
                                      chunk_bytes=memory["chunk_mb"] * 2**20,
                                      hold_bytes=memory["hold_mb"] * 2**20)["abs_coupling"]
except ValueError as err:  # names the prompt (and layer, tokens); add the checkpoint
    raise CheckpointError(str(err), model=manifest["model"], revision=manifest.get("revision"),
                          file=manifest["path"]) from err
result.update(
    example_abs_coupling=example_abs, example_prompt=np.array(params.example_prompt),
    prompt_ids=np.array(prompt_ids), variants=np.array([row["variant"] for row in prompts]),
    sources=np.array([row["source"] for row in prompts]),
    n_tokens=np.array([len(ids) for ids in token_ids]), Ks=np.array(sorted(params.Ks)), metrics=np.array(METRICS),
    layer_pairs=np.array(token_wise["layer_pairs"] if token_wise["prompts"] else [], dtype=int).reshape(-1, 2),
    n_params=sum(p.numel() for p in model.parameters()), n_layers=result["depthwise"].shape[-1],
    d_model=model.get_input_embeddings().embedding_dim)
np.savez(snakemake.output.npz, **result)
