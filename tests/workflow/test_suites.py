"""The paper suites in config/suites/ plan their whole DAG offline (Snakemake dry runs)."""

import re

import pytest
import yaml
from snakemake_runs import ROOT, planned_jobs, snakemake

from crosslayer.config import model_steps, resolve_checkpoints

SUITES = ROOT / "config" / "suites"


def dry_run(workdir, *configfiles, check=True):
    """Output of ``snakemake -n`` on a suite (or config files merged in order), hub switched off."""
    return snakemake(workdir, "-n", "--cores", "8", "--configfile", *map(str, configfiles),
                     env={"HF_HUB_OFFLINE": "1"}, check=check, timeout=300).output


def save_tokenizer(path):
    """A word-level tokenizer beside a checkpoint: a local one is refused for the stages that tokenize
    text without one."""
    import transformers as T
    from tokenizers import Tokenizer, models, pre_tokenizers

    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    T.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(path)


def test_dynamics_suite_checkpoints():
    """The hub revisions the paper-004 suite asks for (names unverifiable offline: see its comments)."""
    models = yaml.safe_load((SUITES / "dynamics.yaml").read_text())["models"]
    resolved = {name: resolve_checkpoints(entry) for name, entry in models.items()}
    assert resolved == {
        "olmo3-7b": {step: {"repo": "allenai/Olmo-3-1025-7B", "revision": f"stage1-step{step}"}
                     for step in (0, 471000, 1413814)},
        "llama3.1-8b": {1: {"repo": "meta-llama/Llama-3.1-8B", "revision": "main"}},
        "gemma4-e4b": {1: {"repo": "google/gemma-4-e4b-it", "revision": "main"}},
    }
    assert models["gemma4-e4b"]["analyses"] == ["alignment", "dynamics", "topology"]


@pytest.mark.workflow
def test_dynamics_suite_builds_its_dag_offline(tmp_path):
    suite = SUITES / "dynamics.yaml"
    models = yaml.safe_load(suite.read_text())["models"]
    assert set(models) == {"olmo3-7b", "llama3.1-8b", "gemma4-e4b"}
    output = dry_run(tmp_path, suite)
    jobs = planned_jobs(output)
    checkpoints = 3 + 1 + 1  # OLMo 3 steps 0, 471k, 1.41M; Llama 3.1 and Gemma 4 E4B final
    per_checkpoint = ("download_checkpoint", "block_jacobians", "jacobian_spectra", "schur_surgery")
    assert {rule: jobs.get(rule) for rule in per_checkpoint} == dict.fromkeys(per_checkpoint, checkpoints)
    assert jobs.get("plot_dynamics") == len(models)
    assert "extract_activations" not in jobs  # block_jacobians writes the activations: one load each
    assert jobs.get("prepare_samples") == 1  # one WikiText-2 sample file shared by every checkpoint
    assert "train_model" not in jobs and "prepare_corpus" not in jobs  # nothing trained, no offline corpus
    assert_coverage_planned("Paper 004", output, models, at_least=20)


@pytest.mark.workflow
def test_coupling_suite_builds_its_dag_offline(tmp_path):
    suite = SUITES / "coupling.yaml"
    models = yaml.safe_load(suite.read_text())["models"]
    output = dry_run(tmp_path, suite)
    jobs = planned_jobs(output)
    downloaded = 5 * 20 + 12  # five Pythia sizes at 20 steps (0, 1, 2, ..., 143k); twelve base models' final ones
    assert len(models) == 17 and jobs.get("download_checkpoint") == downloaded
    assert jobs.get("build_untrained") == 12  # every base model beside its untrained twin (Pythia has step 0)
    assert jobs.get("block_coupling") == downloaded + 12
    assert jobs.get("coupling_across_models") == 1 and jobs.get("prepare_prompts") == 1
    assert jobs.get("plot_coupling") == len(models)
    assert jobs.get("heldout_loss") == downloaded + 12 and jobs.get("prepare_heldout") == 1  # every checkpoint
    assert jobs.get("evaluate") == len(models) and jobs.get("summarize_scores") == len(models)  # last checkpoints
    assert jobs.get("prepare_benchmarks") == 1  # the datasets fetched where the hub is reachable
    scores = (SUITES / "coupling_scores.csv").read_text().split()[1:]
    assert [row.split(",")[0] for row in scores] == list(models)  # the score template names every model
    assert_coverage_planned("Paper 002", output, models, at_least=15)


def assert_coverage_planned(title, output, models, *, at_least):
    """Every output one paper's section of docs/coverage.md lists is planned by the suite's dry run
    (`output`), for every model of the suite that takes part in the stage (`models`) at its last step."""
    text = (ROOT / "docs" / "coverage.md").read_text()
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    planned = {path.strip() for line in re.findall(r"^\s+output: (.+)$", output, re.M) for path in line.split(",")}
    listed = set(re.findall(r"`(results/[^`]+)`", section))
    assert len(listed) >= at_least
    for path in listed:
        expected = {path.format(model=model, step=model_steps(entry)[-1]) for model, entry in models.items()}
        assert expected <= planned, (path, sorted(expected - planned)[:3])


@pytest.fixture(scope="module")
def alignment_dry_run(tmp_path_factory):
    """The alignment suite's dry run, shared by the two tests that read it (~10 s each)."""
    return dry_run(tmp_path_factory.mktemp("alignment_suite"), SUITES / "alignment.yaml")


@pytest.mark.workflow
def test_alignment_suite_builds_its_dag_offline(alignment_dry_run):
    models = yaml.safe_load((SUITES / "alignment.yaml").read_text())["models"]
    jobs = planned_jobs(alignment_dry_run)
    checkpoints = sum(len(model_steps(entry)) for entry in models.values())
    assert len(models) == 6 and jobs.get("mlp_alignment") == checkpoints
    assert jobs.get("plot_alignment") == len(models) and jobs.get("alignment_table") == 1
    assert_coverage_planned("Paper 000", alignment_dry_run, models, at_least=12)


@pytest.mark.workflow
def test_across_papers_suite_runs_all_four_papers_on_the_same_checkpoints(tmp_path):
    suite = SUITES / "across_papers.yaml"
    models = yaml.safe_load(suite.read_text())["models"]
    output = dry_run(tmp_path, suite)
    jobs = planned_jobs(output)
    checkpoints = 3 * 8  # Pythia 410M, 1B, 1.4B at paper 000's eight steps, step 0 included
    per_checkpoint = ("download_checkpoint", "mlp_alignment", "projection_continuity", "block_coupling",
                      "block_jacobians", "detect_communities")
    assert {rule: jobs.get(rule) for rule in per_checkpoint} == dict.fromkeys(per_checkpoint, checkpoints)
    assert jobs.get("across_papers") == jobs.get("plot_across_papers") == len(models) == 3
    assert jobs.get("across_papers_models") == jobs.get("plot_across_papers_models") == 1
    assert all(0 in entry["steps"] for entry in models.values())  # the random band of the emergence table
    assert "train_model" not in jobs and "train_toy" not in jobs
    for block in output.split("\nrule ")[1:]:  # every checkpoint's heavy stage on the GPU
        if block.startswith(("block_coupling:", "block_jacobians:", "projection_continuity:")):
            assert "gpu=1" in block


@pytest.mark.workflow
def test_continuity_suite_builds_its_dag_offline(tmp_path):
    suite = SUITES / "continuity.yaml"
    models = yaml.safe_load(suite.read_text())["models"]
    output = dry_run(tmp_path, suite)
    jobs = planned_jobs(output)
    checkpoints = 6 + 6  # Llama 3.1 8B and 70B, Qwen3-8B, Gemma-3-12B, EXAONE-4.0-32B, GPT-2 XL final; Pythia 1.4B at six
    assert jobs.get("download_checkpoint") == jobs.get("projection_continuity") == checkpoints
    assert jobs.get("plot_continuity") == jobs.get("summarize_continuity") == len(models) == 7
    assert jobs.get("continuity_table") == 1
    toy = yaml.safe_load(suite.read_text())["toy"]
    assert len(toy["runs"]) == 11 + 5 + 2  # Table 1, Table 3 (its baseline row included), Fig. 2
    assert jobs.get("train_toy") == len(toy["runs"]) and jobs.get("prepare_mnist") == 1
    # section 5: four activations and the two failure controls, on WikiText-103 with GPT-2's tokenizer
    assert jobs.get("train_ablation") == jobs.get("ablation_continuity") == 6 and jobs.get("prepare_corpus") == 1
    trainings = [block for block in output.split("\nrule ")[1:] if block.startswith("train_ablation:")]
    assert len(trainings) == 6 and all("gpu=1" in block for block in trainings)  # trained on the GPU
    assert not {"block_coupling", "block_jacobians", "train_model"} & set(jobs)  # the other papers' stages are off
    assert_coverage_planned("Paper 003", output, {m: e for m, e in models.items() if "continuity" in
                                                  e.get("analyses", ["continuity"])}, at_least=15)


@pytest.mark.workflow
def test_the_own_models_overlay_runs_the_default_analyses_on_those_models_only(tmp_path):
    import json

    import transformers as T

    overlay = ROOT / "config" / "overlays" / "own_models.yaml"
    config = T.LlamaConfig(hidden_size=64, num_hidden_layers=8, num_attention_heads=4, intermediate_size=128,
                           vocab_size=101)  # deep and wide enough for the default's settings
    for step in (1000, 2000):  # the overlay's relative paths, under the working directory
        T.LlamaForCausalLM(config).save_pretrained(tmp_path / f"checkpoints/my-model/step{step}")
        save_tokenizer(tmp_path / f"checkpoints/my-model/step{step}")
    jobs = planned_jobs(dry_run(tmp_path, ROOT / "config" / "config.yaml", overlay))
    assert jobs["register_checkpoint"] == 2 and jobs["mlp_alignment"] == jobs["block_jacobians"] == 2
    assert jobs["projection_continuity"] == jobs["block_coupling"] == 2
    assert not {"train_model", "train_toy", "train_ablation"} & set(jobs)  # (the corpus still gives prompts)
    import yaml

    default, own = (yaml.safe_load(path.read_text()) for path in (ROOT / "config" / "config.yaml", overlay))
    assert default["alignment"]["threshold"] == 0.5  # suits only the default's d = 128
    assert {**default["alignment"], **own["alignment"]}["threshold"] == 0.15  # paper 000's Table 1, real widths

    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps({"run_models": ["my-model", "nope"]}))
    output = dry_run(tmp_path, ROOT / "config" / "config.yaml", overlay, bad, check=False)
    assert "Invalid config: run_models: ['nope'] not in models" in output


@pytest.mark.workflow
def test_a_model_takes_part_in_the_analyses_it_names_and_an_encoder_is_refused_before_any_job(tmp_path):
    import json

    import transformers as T

    T.BertForMaskedLM(T.BertConfig(hidden_size=64, num_hidden_layers=8, num_attention_heads=4, intermediate_size=128,
                                   vocab_size=101)).save_pretrained(tmp_path / "bert")
    T.LlamaForCausalLM(T.LlamaConfig(hidden_size=64, num_hidden_layers=8, num_attention_heads=4, intermediate_size=128,
                                     vocab_size=101)).save_pretrained(tmp_path / "llama")
    save_tokenizer(tmp_path / "llama")  # the activation stages tokenize text; the encoder's weight stages do not
    models = {"bert": {"source": "local", "checkpoints": {"1": str(tmp_path / "bert")}},
              "llama": {"source": "local", "checkpoints": {"1": str(tmp_path / "llama")}}}
    overlay = tmp_path / "mixed.yaml"
    overlay.write_text(json.dumps({"run_models": ["bert", "llama"], "models": models,
                                   "toy": {"activate": False}, "transformer_ablations": {"activate": False}}))
    output = dry_run(tmp_path, ROOT / "config" / "config.yaml", overlay, check=False)
    assert "Invalid config: models.bert.analyses: bert has no causal residual stream" in output
    assert "Job stats" not in output

    models["bert"]["analyses"] = ["alignment", "continuity"]
    overlay.write_text(json.dumps({"run_models": ["bert", "llama"], "models": models,
                                   "toy": {"activate": False}, "transformer_ablations": {"activate": False}}))
    jobs = planned_jobs(dry_run(tmp_path, ROOT / "config" / "config.yaml", overlay))
    assert jobs["mlp_alignment"] == jobs["projection_continuity"] == 2  # both models
    assert jobs["block_jacobians"] == jobs["block_coupling"] == jobs["detect_communities"] == 1  # Llama only
    assert jobs["across_papers"] == 2  # the encoder's boundary table: alignment and continuity columns only


@pytest.mark.workflow
def test_paper_suite_builds_its_dag_offline(alignment_dry_run):
    jobs = planned_jobs(alignment_dry_run)
    assert jobs["download_checkpoint"] == 3 * 8 + 11 + 7 + 7
    assert jobs["mlp_alignment"] == jobs["download_checkpoint"]
    assert jobs["plot_alignment"] == 6 and "train_model" not in jobs
