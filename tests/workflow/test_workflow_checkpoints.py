"""The workflow on checkpoints it did not train and on bad input, run for real on the reduced
pipeline's config (tests/configs/tiny.yaml): local and hub checkpoints, untrained twins, identical
steps, broken or replaced checkpoints, and settings refused before any job, naming the key."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from hub_cache import lay_out_cache
from snakemake_runs import ROOT, TINY, overlay, planned_jobs, snakemake

from crosslayer.data.samples import read_samples
from crosslayer.models.checkpoints import read_manifest

pytestmark = pytest.mark.workflow


def test_bad_coupling_input_fails_naming_model_revision_and_prompt(tiny_run, tmp_path):
    good = read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"]
    prompts = tmp_path / "long.txt"
    prompts.write_text("A short prompt here.\n" + " ".join(["word"] * 200) + "\n")
    coupling = yaml.safe_load(TINY.read_text())["coupling"]
    coupling["prompts"] = {"file": str(prompts), "max_tokens": None}
    coupling["token_wise"]["prompts"] = 0
    config = write_config(tmp_path / "c.yaml", {"m": {"source": "local", "checkpoints": {"1": good}}},
                          coupling=coupling)
    result = snakemake(tmp_path, "results/coupling/m/step1.coupling.npz", "--cores", "1", "--configfile",
                       str(config), check=False)
    assert result.returncode != 0
    log = (tmp_path / "logs/block_coupling/m/step1.log").read_text()
    assert re.search(r"model 'm' revision 'step1' .*prompt 'long.txt:2' has \d+ tokens, longer than the model's "
                     r"context of 32", log)
    assert not list((tmp_path / "results/coupling/m").glob("*"))
    scores = tmp_path / "scores.csv"
    scores.write_text("model,score\nother,1.5\n")
    config = write_config(tmp_path / "s.yaml", {"m": {"source": "local", "checkpoints": {"1": good}}},
                          coupling={**coupling, "scores": str(scores)})
    result = snakemake(tmp_path / "s", "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0 and "coupling.scores" in result.output and "no score for model(s) ['m']" in result.output


def test_the_untrained_twin_of_a_trained_model_is_its_step_0(tiny_run, tmp_path):
    """A local model with `init` gets step 0 built from its config.json: with the training seed, the
    workflow's own step 0 (same bytes, same coupling); every stage reads it through its manifest."""
    trained = read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")
    coupling = yaml.safe_load(TINY.read_text())["coupling"]
    coupling["prompts"] = {"max_tokens": 24, "cot": False}  # the prompt file alone: the first rows of tiny_run's
    coupling["token_wise"]["prompts"] = 0
    config = write_config(tmp_path / "c.yaml", {"twin": {"source": "local", "init": {"seed": 0},
                                                         "checkpoints": {"16": trained["path"]}}}, coupling=coupling)
    first = snakemake(tmp_path, "results/coupling/twin/steps.tsv", "--cores", "2", "--configfile", str(config))
    # the same command again does nothing (Snakemake's marker in the twin's directory was taken for
    # an added file, which rebuilt the twin and redid its analyses on every run), and neither run
    # warns of register_checkpoint's candidate job for step 0 (issue 39)
    again = snakemake(tmp_path, "results/coupling/twin/steps.tsv", "--cores", "2", "--configfile", str(config))
    assert "Nothing to be done" in again.output, again.output[-3000:]
    assert not any("InputFunctionException" in run.output for run in (first, again))
    twin = read_manifest(tmp_path / "results/checkpoints/twin/step0.json")
    step0 = read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step0.json")
    assert (twin["source"], twin["revision"]) == ("init", "init-seed0")
    assert twin["files"]["model.safetensors"] == step0["files"]["model.safetensors"]
    ours = np.load(tmp_path / "results/coupling/twin/step0.coupling.npz")
    theirs = np.load(tiny_run / "results/coupling/tiny-gelu/step0.coupling.npz")
    P = len(ours["prompt_ids"])
    assert list(ours["prompt_ids"]) == list(theirs["prompt_ids"][:P])
    np.testing.assert_allclose(ours["depthwise"], theirs["depthwise"][:P], atol=1e-6)
    steps = pd.read_csv(tmp_path / "results/coupling/twin/steps.tsv", sep="\t")
    assert sorted(set(steps.step)) == [0, 16]


def write_config(path, models, **extra):
    config = yaml.safe_load(TINY.read_text())
    config["models"] = models
    config.update(extra)
    path.write_text(yaml.safe_dump(config))
    return path


def test_steps_with_identical_weights_are_warned_about_listed_and_optionally_refused(tiny_run, tmp_path):
    trained = tiny_run / "results/checkpoints/tiny-gelu"
    first, second = (Path(read_manifest(trained / f"step{s}.json")["path"]) for s in (0, 16))
    copy = tmp_path / "copy"
    shutil.copytree(second, copy)  # the same weights served again under a later step
    models = {"series": {"source": "local", "checkpoints": {"1": str(first), "2": str(second), "3": str(copy)}}}
    target = "results/checkpoints/series/duplicate_steps.tsv"
    result = snakemake(tmp_path, target, "--cores", "1", "--configfile", str(write_config(tmp_path / "w.yaml", models)))
    assert "WARNING: model 'series': step 3 (step3) has byte-identical weights to step 2 (step2)" in result.output
    rows = (tmp_path / target).read_text().splitlines()
    assert rows[0].split("\t") == ["step", "revision", "same_as_step", "same_as_revision", "sha256"]
    assert [r.split("\t")[:4] for r in rows[1:]] == [["3", "step3", "2", "step2"]]

    (tmp_path / target).unlink()
    config = write_config(tmp_path / "e.yaml", models, duplicate_steps="error")
    result = snakemake(tmp_path, target, "--cores", "1", "--configfile", str(config), check=False)
    assert result.returncode != 0 and not (tmp_path / target).exists()
    log = (tmp_path / "logs/check_duplicate_steps/series.log").read_text()
    assert "1 step(s) repeat earlier weights (duplicate_steps: error)" in log


def test_hub_source_runs_offline_from_the_cache(tiny_run, tmp_path):
    # A checkpoint the workflow trained, served through huggingface_hub's offline cache resolution.
    step_dir = Path(read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"])
    lay_out_cache(tmp_path / "hf_cache", {n: step_dir / n for n in ("config.json", "model.safetensors")})
    config = write_config(
        tmp_path / "hub.yaml",
        {"hub-tiny": {"source": "hub", "checkpoints": {"16": "EleutherAI/pythia-tiny@step128"}}},
        hub={"cache_dir": str(tmp_path / "hf_cache")},
    )
    # targets go before --configfile, which takes several files
    snakemake(tmp_path, "results/alignment/hub-tiny/step16.npz", "--cores", "2", "--configfile", str(config),
              env={"HF_HUB_OFFLINE": "1"})
    manifest = json.loads((tmp_path / "results/checkpoints/hub-tiny/step16.json").read_text())
    assert manifest["source"] == "hub" and manifest["revision"] == "step128" and len(manifest["commit"]) == 40
    hub = np.load(tmp_path / "results/alignment/hub-tiny/step16.npz")
    trained = np.load(tiny_run / "results/alignment/tiny-gelu/step16.npz")
    assert np.array_equal(hub["overlap_left"], trained["overlap_left"])


def broken_checkpoint(src, dest, *, model_type=None, nan_in=None, drop=None):
    shutil.copytree(src, dest)
    if model_type:
        config = json.loads((dest / "config.json").read_text())
        config["model_type"] = model_type
        (dest / "config.json").write_text(json.dumps(config))
    if nan_in or drop:
        from safetensors.torch import load_file, save_file

        tensors = load_file(dest / "model.safetensors")
        if nan_in:
            tensors[nan_in].view(-1)[0] = float("nan")
        if drop:
            del tensors[drop]
        save_file(tensors, dest / "model.safetensors", metadata={"format": "pt"})
    return dest


def test_a_checkpoint_missing_a_tensor_is_refused_at_registration_by_every_stage(tiny_run, tmp_path):
    # transformers would fill the tensor with fresh random values and the run would exit 0; the
    # weight-only stages read only projections, so a missing norm must be caught at registration
    missing = {"no-attn-out": ("tiny-gelu", "gpt_neox.layers.2.attention.dense.weight"),
               "no-norm": ("tiny-swiglu", "model.layers.1.input_layernorm.weight"),
               "no-final-norm": ("tiny-gelu", "gpt_neox.final_layer_norm.weight")}
    models = {}
    for name, (trained, tensor) in missing.items():
        good = Path(read_manifest(tiny_run / f"results/checkpoints/{trained}/step16.json")["path"])
        models[name] = {"source": "local", "analyses": ["alignment", "continuity"],
                        "checkpoints": {"1": str(broken_checkpoint(good, tmp_path / name, drop=tensor))}}
    config = write_config(tmp_path / "missing.yaml", models)
    targets = [f"results/{stage}/{m}/step1.{what}" for m in models
               for stage, what in (("alignment", "npz"), ("continuity", "tsv"))]
    result = snakemake(tmp_path, *targets, "--cores", "2", "--keep-going", "--configfile", str(config), check=False)
    assert result.returncode != 0
    for name, (_, tensor) in missing.items():
        log = (tmp_path / f"logs/register_checkpoint/{name}/step1.log").read_text()
        assert f"model '{name}' revision 'step1' file '{tmp_path / name / 'model.safetensors'}'" in log
        assert f"missing from the checkpoint (transformers would fill them with random values): '{tensor}'" in log
        assert not (tmp_path / f"results/checkpoints/{name}/step1.json").exists()  # no manifest, no analysis
    assert not list((tmp_path / "results").rglob("*.npz")) and not list((tmp_path / "results").rglob("*.tsv"))


def test_a_checkpoint_replaced_behind_snakemakes_back_is_registered_anew_before_planning(tiny_run, tmp_path):
    good = Path(read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"])
    other = Path(read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step8.json")["path"])
    local = tmp_path / "ckpt"
    shutil.copytree(good, local)
    config = write_config(tmp_path / "local.yaml", {"m": {"source": "local", "checkpoints": {"1": str(local)}}})
    target = "results/dynamics/m/step1.activations.npz"
    snakemake(tmp_path, target, "--cores", "1", "--configfile", str(config))
    assert not list((tmp_path / "results").rglob("*.stat"))  # the stat cache lies outside results/
    assert (tmp_path / ".crosslayer/stat/results/checkpoints/m/step1.json").is_file()
    first = np.load(tmp_path / target)["acts"]

    # replaced by other weights (newer mtime): registered anew, and everything after it redone
    weights = local / "model.safetensors"
    shutil.copyfile(other / "model.safetensors", weights)
    jobs = planned_jobs(snakemake(tmp_path, target, "-n", "--configfile", str(config)).output)
    assert jobs == {"register_checkpoint": 1, "block_jacobians": 1}  # activations and Jacobians: one load

    # replaced with its mtime set back (cp -p of an older file, a restore from backup): caught before
    # planning whatever the rerun triggers, said on the console, and redone
    os.utime(weights, (1577836800, 1577836800))  # 2020-01-01
    for triggers in (["--rerun-triggers", "mtime"], []):
        result = snakemake(tmp_path, target, "-n", *triggers, "--configfile", str(config))
        assert planned_jobs(result.output) == {"register_checkpoint": 1, "block_jacobians": 1}
    assert "Checkpoint m step 1 changed since it was registered" in result.output
    assert f"{weights} has another sha256" in result.output
    snakemake(tmp_path, target, "--cores", "1", "--configfile", str(config))
    assert not np.array_equal(np.load(tmp_path / target)["acts"], first)
    assert read_manifest(tmp_path / "results/checkpoints/m/step1.json")["files"] == \
        read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step8.json")["files"]
    assert planned_jobs(snakemake(tmp_path, target, "-n", "--configfile", str(config)).output) == {}

    # a file added with an old mtime (a tokenizer file copied with cp -p): the jobs would read it
    shutil.copy2(good / "tokenizer.json", local / "extra.json")
    os.utime(local / "extra.json", (1577836800, 1577836800))
    result = snakemake(tmp_path, target, "-n", "--configfile", str(config))
    assert f"{local / 'extra.json'} was added" in result.output
    assert planned_jobs(result.output) == {"register_checkpoint": 1, "block_jacobians": 1}


def test_a_local_checkpoint_of_an_unsupported_family_stops_the_run_before_any_job(tiny_run, tmp_path):
    good = Path(read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"])
    models = {"fine": {"source": "local", "checkpoints": {"1": str(good)}},
              "unknown-type": {"source": "local", "checkpoints": {
                  "1": str(good), "2": str(broken_checkpoint(good, tmp_path / "a", model_type="not_a_model"))}}}
    config = write_config(tmp_path / "bad.yaml", models)
    result = snakemake(tmp_path, "results/alignment/fine/step1.npz", "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    console = result.stdout + result.stderr
    assert "Invalid checkpoint: model 'unknown-type' revision 'step2' file 'config.json'" in console
    assert "unsupported model_type 'not_a_model'" in console and "gpt_neox" in console  # the supported list
    assert not (tmp_path / "logs").exists()


def test_bad_checkpoints_fail_their_jobs_with_a_clear_message_and_no_output(tiny_run, tmp_path):
    good = Path(read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"])
    models = {
        "nan-weight": {"source": "local", "checkpoints": {"1": str(broken_checkpoint(
            good, tmp_path / "b", nan_in="gpt_neox.layers.1.mlp.dense_4h_to_h.weight"))}},
        "no-such-revision": {"source": "hub", "checkpoints": {"1": "EleutherAI/pythia-tiny@step999"}},
    }
    config = write_config(tmp_path / "bad.yaml", models, hub={"cache_dir": str(tmp_path / "empty_cache")})
    targets = [f"results/alignment/{m}/step1.npz" for m in models]
    result = snakemake(tmp_path, *targets, "--cores", "2", "--keep-going", "--configfile", str(config),
                       env={"HF_HUB_OFFLINE": "1"}, check=False)
    assert result.returncode != 0
    logs = {m: "".join(p.read_text() for p in (tmp_path / "logs").rglob(f"{m}/step1.log")) for m in models}
    assert "model 'nan-weight' revision 'step1'" in logs["nan-weight"] and "layer 1" in logs["nan-weight"]
    assert "model 'no-such-revision' revision 'step999'" in logs["no-such-revision"]
    assert "EleutherAI/pythia-tiny" in logs["no-such-revision"]
    for m in models:
        assert not (tmp_path / f"results/alignment/{m}/step1.npz").exists()
    assert not (tmp_path / "results/checkpoints/no-such-revision/step1.json").exists()


def test_bad_dynamics_input_fails_naming_model_revision_layer_and_sample(tiny_run, tmp_path):
    good = Path(read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"])
    # NaN in the last block's MLP output weight: every activation is finite (they are recorded
    # before it), the last layer's Jacobian is not.
    nan = broken_checkpoint(good, tmp_path / "nan", nan_in="gpt_neox.layers.3.mlp.dense_4h_to_h.weight")
    models = {"nan-jacobian": {"source": "local", "checkpoints": {"1": str(nan)}}}
    config = write_config(tmp_path / "bad.yaml", models)
    targets = [f"results/dynamics/{m}/step1.jacobians.npz" for m in models]
    result = snakemake(tmp_path, *targets, "--cores", "2", "--keep-going", "--configfile", str(config), check=False)
    assert result.returncode != 0
    log = (tmp_path / "logs/block_jacobians/nan-jacobian/step1.log").read_text()
    assert re.search(r"model 'nan-jacobian' revision 'step1' file '.*': non-finite Jacobian .*layer 3, sample 0", log)
    assert not list((tmp_path / "results/dynamics").rglob("*.jacobians.npz"))


def test_too_few_long_texts_fail_naming_the_checkpoint_and_the_samples(tiny_run, tmp_path):
    # The dataset path of the paper suites, on a local dataset directory: too few texts pass
    # the length filter.
    data = tmp_path / "texts"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ["a b c", "", "d e f g h"]))
    good = Path(read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"])
    config = write_config(tmp_path / "short.yaml", {"m": {"source": "local", "checkpoints": {"1": str(good)}}},
                          dynamics={**yaml.safe_load(TINY.read_text())["dynamics"],
                                    "samples": {"source": "dataset", "dataset": {"path": str(data), "name": None,
                                                                                 "cache_dir": str(tmp_path / "c")}}})
    result = snakemake(tmp_path, "results/dynamics/m/step1.activations.npz", "--cores", "1", "--configfile",
                       str(config), env={"HF_DATASETS_OFFLINE": "1"}, check=False)
    assert result.returncode != 0
    _, texts = read_samples(tmp_path / "results/samples/texts.jsonl")
    assert texts == ["a b c", "d e f g h"]
    log = (tmp_path / "logs/block_jacobians/m/step1.log").read_text()
    assert "model 'm' revision 'step1'" in log and "texts.jsonl" in log and "min_tokens=8" in log
    assert not (tmp_path / "results/dynamics/m/step1.activations.npz").exists()


@pytest.mark.parametrize(
    "override, key",
    [
        ("alignment: {svd_method: randomized}", "svd_method"),
        ("alignment: {k: -1}", "'k'"),
        ("plots: {dpi: 1}", "dpi"),
        ("train: {n_heads: 3}", "models.tiny-gelu.train.n_heads"),
        ("models: {tiny-gelu: {reference_step: 5}}", "models.tiny-gelu.reference_step"),
        ("models: {tiny-gelu: {checkpoints: {'0': /x}}}", "models.tiny-gelu.checkpoints: does not apply to `source: train`"),
        ("dynamics: {activate: false}", "topology.activate"),
        ("topology: {methods: [louvain]}", "louvain"),
        ("topology: {seeds: [0, 0]}", "seeds"),
        ("alignment: {k: 32}", "alignment.k: 32 must be smaller than d_model and d_ff of models.tiny-gelu"),
        ("alignment: {distances: [1, 4]}", "alignment.distances: [4] must be below the number of layers"),
        ("dynamics: {k: 32}", "dynamics.k: 32"),
        ("coupling: {Ks: [3, 40]}", "coupling.Ks: [3, 40] must not exceed d_model"),
        ("coupling: {window: 4}", "coupling.window: 4 must be odd"),
        ("coupling: {window: 7}", "coupling.window: 7 is longer than the 5 states"),
        ("coupling: {token_wise: {layer_pairs: [[1, 4]]}}", "coupling.token_wise.layer_pairs: [[1, 4]]"),
        ("coupling: {metric: frobenius}", "frobenius"),
        ("coupling: {depthwise_token: 24}", "Invalid config: coupling.depthwise_token: 24 lies outside every prompt"),
        ("transformer_ablations: {train: {n_heads: 3}}", "transformer_ablations.train.n_heads: 3 must divide"),
        ("transformer_ablations: {runs: {relu2: {activation: relu2}}}", "relu2"),
        ("transformer_ablations: {train: {n_layers: 2}}", "below the 2 layers of the transformer ablations"),
    ],
)
def test_invalid_config_fails_before_any_job_naming_the_key(tmp_path, override, key):
    bad = overlay(tmp_path / "bad.yaml", override)
    result = snakemake(tmp_path, "-n", "--cores", "1", "--configfile", str(TINY), bad, check=False)
    assert result.returncode != 0 and key in result.output
    assert not (tmp_path / "results").exists()


def test_a_dataset_source_without_the_datasets_extra_stops_before_any_job_naming_the_key(tmp_path):
    # `make run` does not install the optional `datasets`: hide it, as a machine without it would
    hidden = ("import sys; sys.modules['datasets'] = None; from snakemake.cli import main; "
              "sys.argv[0] = 'snakemake'; main()")
    config = overlay(tmp_path / "d.yaml", "dynamics: {samples: {source: dataset}}")
    result = subprocess.run([sys.executable, "-c", hidden, "--snakefile", str(ROOT / "Snakefile"), "--directory",
                             str(tmp_path), "results/samples/texts.jsonl", "--cores", "1", "--configfile", str(TINY),
                             config], capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert ("dynamics.samples.source ask(s) for a Hugging Face dataset, which needs the optional package "
            "'datasets': pip install -e '.[datasets]'") in output
    assert not (tmp_path / "results").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_on_a_machine_without_it_stops_a_local_run_before_any_job_naming_the_key(tiny_run, tmp_path):
    good = read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"]
    config = write_config(tmp_path / "c.yaml", {"m": {"source": "local", "checkpoints": {"1": good}}},
                          dynamics={**yaml.safe_load(TINY.read_text())["dynamics"], "device": "cuda"})
    target = "results/dynamics/m/step1.jacobians.npz"
    assert planned_jobs(snakemake(tmp_path, target, "-n", "--configfile", str(config)).output)  # a dry run plans
    result = snakemake(tmp_path, target, "--cores", "1", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert "dynamics.device ask(s) for 'cuda' but torch" in result.output
    assert "block_jacobians jobs would run here" in result.output
    assert not (tmp_path / "logs").exists() and not (tmp_path / "results").exists()


def test_sizes_of_local_checkpoints_are_checked_before_any_job(tiny_run, tmp_path):
    good = read_manifest(tiny_run / "results/checkpoints/tiny-gelu/step16.json")["path"]
    config = write_config(tmp_path / "c.yaml", {"m": {"source": "local", "checkpoints": {"1": good}}},
                          topology={"k": 32})
    result = snakemake(tmp_path, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert "topology.k: 32 must be smaller than d_model of models.m (4 layers, d_model = 32, d_ff = 64)" in result.output


def test_unknown_model_key_and_missing_source_fields_are_named(tmp_path):
    config = write_config(tmp_path / "c.yaml", {"m": {"source": "hub", "steps": [0]}})
    result = snakemake(tmp_path, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0 and "'m'" in result.output and "repo" in result.output
