"""Issues 39 and 49 on the real workflow: settings that were refused in a job after others ran (or ran to
an empty result) stop Snakemake before its first job, with "Invalid config: <key>: ..." on the
console; a hub model's context, known only in its coupling job, is named there by the key that
needs changing. Dry runs on tests/configs/tiny.yaml and tiny checkpoints saved here (no tiny run)."""

import json
import sys

import pytest
import transformers as T
import yaml
from hub_cache import lay_out_cache
from plans import refusal
from snakemake_runs import ROOT, TINY, snakemake

pytestmark = pytest.mark.workflow

DEFAULT = ROOT / "config" / "config.yaml"
WORDS = ["[UNK]", "the", "model", "reads", "a", "long", "prompt", "of", "many", "words", "Let's", "think", "step",
         "by", "."]


def checkpoint(path, *, tokenizer=True, context=64):
    """A GPT-NeoX of the tiny config's sizes (4 layers, d = 32, d_ff = 64), with a word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    config = T.GPTNeoXConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                             vocab_size=101, max_position_embeddings=context)
    T.GPTNeoXForCausalLM(config).save_pretrained(path)
    if tokenizer:
        backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
        T.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(path)
    return path


def tiny_config(path, models, **blocks):
    """tests/configs/tiny.yaml with these models and blocks changed (a block's keys merged in)."""
    config = yaml.safe_load(TINY.read_text())
    config["models"] = models
    for block, changes in blocks.items():
        config[block] = {**config.get(block, {}), **changes}
    path.write_text(yaml.safe_dump(config))
    return str(path)


def assert_refused_before_any_job(result, workdir, message):
    assert result.returncode != 0
    assert f"Invalid config: {message}" in result.output, result.output[-3000:]
    assert not (workdir / "results").exists() and not (workdir / "logs").exists()


def test_a_local_checkpoint_without_a_tokenizer_is_refused_only_where_a_stage_tokenizes(tmp_path):
    bare = checkpoint(tmp_path / "bare", tokenizer=False)
    models = {"m": {"source": "local", "checkpoints": {"1": str(bare)}}}
    result = snakemake(tmp_path, "-n", "--configfile", tiny_config(tmp_path / "c.yaml", models), check=False)
    assert_refused_before_any_job(result, tmp_path, f"models.m.checkpoints: step 1 ({bare}) holds no tokenizer "
                                                    "files, and the coupling, dynamics, topology, evaluation "
                                                    "stage(s) tokenize")
    assert "set models.m.analyses: ['alignment', 'continuity'] and evaluation.activate: false" in result.output
    # issue 49: that fix alone once passed, and heldout_loss failed 20 jobs later
    models["m"]["analyses"] = ["alignment", "continuity"]
    result = snakemake(tmp_path, "-n", "--configfile", tiny_config(tmp_path / "a.yaml", models), check=False)
    assert_refused_before_any_job(result, tmp_path, f"models.m.checkpoints: step 1 ({bare}) holds no tokenizer "
                                                    "files, and the evaluation stage(s) tokenize")
    # weights only, no held-out loss: no tokenizer needed
    config = tiny_config(tmp_path / "w.yaml", models, evaluation={"activate": False})
    result = snakemake(tmp_path, "-n", "--configfile", config, check=False)
    assert result.returncode == 0 and "mlp_alignment" in result.output, result.output[-3000:]


@pytest.mark.parametrize("overlay, configfiles, message", [
    # 2. the across-papers coupling columns of a variant no prompt has
    ({"across_papers": {"coupling_variant": "cot"}, "coupling": {"prompts": {"cot": False}}}, [TINY],
     "across_papers.coupling_variant: cot, but coupling.prompts.cot is empty"),
    # 4. a CoT source that is not in the prompt set: on the embedded default (cot: [corpus]) too
    ({"coupling": {"prompts": {"corpus_paragraphs": 0}}}, [DEFAULT],
     "coupling.prompts.cot: names corpus (as the embedded default does), but coupling.prompts.corpus_paragraphs is 0"),
    ({"coupling": {"prompts": {"cot": ["gsm8k"]}}}, [TINY],
     "coupling.prompts.cot: 'gsm8k' is not a source of the prompt set ['file', 'corpus']: no "
     "coupling.prompts.datasets entry is labelled 'gsm8k'"),
    ({"coupling": {"prompts": {"file": None, "cot": ["file"]}}}, [TINY],
     "coupling.prompts.cot: names file, but coupling.prompts.file is null"),
    # 5. prompts cut to more tokens than a trained model's context
    ({"train": {"context": 16}}, [TINY],
     "coupling.prompts.max_tokens: 24 is more than the context of models.tiny-gelu, 16 tokens (models.tiny-gelu."
     "train.context or train.context)"),
])
def test_settings_refused_late_stop_before_any_job_naming_the_keys(tmp_path, overlay, configfiles, message):
    # the workflow's own parse in this process (the console path: the tests above and below)
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(overlay))
    assert f"Invalid config: {message}" in (refusal(tmp_path, *configfiles, bad) or "planned")
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


def test_max_tokens_beyond_a_local_checkpoints_context_is_refused_before_any_job(tmp_path):
    short = checkpoint(tmp_path / "short", context=16)
    models = {"m": {"source": "local", "checkpoints": {"1": str(short)}}}
    result = snakemake(tmp_path, "-n", "--configfile", tiny_config(tmp_path / "c.yaml", models), check=False)
    assert_refused_before_any_job(result, tmp_path, "coupling.prompts.max_tokens: 24 is more than the context of "
                                                    "models.m, 16 tokens (its config.json)")


def test_a_seed_beyond_torchs_range_is_refused_by_the_schema(tmp_path):
    ckpt = checkpoint(tmp_path / "ckpt")
    models = {"m": {"source": "local", "checkpoints": {"1": str(ckpt)}, "init": {"seed": 2**64}}}
    result = snakemake(tmp_path, "-n", "--configfile", tiny_config(tmp_path / "c.yaml", models), check=False)
    assert result.returncode != 0 and "18446744073709551616 is greater than the maximum of 18446744073709551615" \
        in result.output, result.output[-3000:]
    assert "['init']['seed']" in result.output and not (tmp_path / "results").exists()
    models["m"]["init"]["seed"] = 2**64 - 1  # the largest torch takes: planned
    result = snakemake(tmp_path, "-n", "--configfile", tiny_config(tmp_path / "ok.yaml", models), check=False)
    assert result.returncode == 0 and "build_untrained" in result.output, result.output[-3000:]


def test_a_hub_models_context_is_named_by_max_tokens_in_its_coupling_job(tmp_path):
    # A hub model's config.json is read only in its jobs: there the message names the key to lower,
    # not "set coupling.prompts.max_tokens", which is set.
    source = checkpoint(tmp_path / "source", context=16)
    lay_out_cache(tmp_path / "hf_cache", {n: source / n for n in ("config.json", "model.safetensors", "tokenizer.json",
                                                                  "tokenizer_config.json")})
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the model reads a long prompt of many words " * 3 + "\n")  # 27 words: cut to 24 > 16
    models = {"hub-tiny": {"source": "hub", "checkpoints": {"1": "EleutherAI/pythia-tiny@step128"}}}
    config = tiny_config(tmp_path / "hub.yaml", models, hub={"cache_dir": str(tmp_path / "hf_cache")},
                         coupling={**yaml.safe_load(TINY.read_text())["coupling"],
                                   "prompts": {"file": str(prompts), "corpus_paragraphs": 0, "cot": False,
                                               "max_tokens": 24}})
    target = "results/coupling/hub-tiny/step1.coupling.npz"
    # unknown before the job
    assert snakemake(tmp_path, target, "-n", "--configfile", config, check=False).returncode == 0
    result = snakemake(tmp_path, target, "--cores", "1", "--configfile", config, env={"HF_HUB_OFFLINE": "1"},
                       check=False)
    assert result.returncode != 0
    log = (tmp_path / "logs/block_coupling/hub-tiny/step1.log").read_text()
    assert ("model 'hub-tiny' revision 'step128' file '" in log and "coupling.prompts.max_tokens: 24 is more than "
            "the context of models.hub-tiny, 16 tokens (its config.json), so a prompt cut to it can still be too "
            "long for the model; lower it to 16 or less") in log, log[-3000:]
    assert "set coupling.prompts.max_tokens" not in log and not (tmp_path / target).exists()


def test_torchvision_without_the_package_stops_before_any_job_naming_the_key(tmp_path):
    # torchvision is an optional extra (`make run` does not install it): hide it, as a machine without it would
    hidden = ("import sys; sys.modules['torchvision'] = None; from snakemake.cli import main; "
              "sys.argv[0] = 'snakemake'; main()")
    config = tiny_config(tmp_path / "t.yaml", yaml.safe_load(TINY.read_text())["models"],
                         toy={**yaml.safe_load(TINY.read_text())["toy"],
                              "data": {"source": "torchvision", "directory": str(tmp_path / "mnist")}})
    result = snakemake(tmp_path, "results/toy/mnist.npz", "--cores", "1", "--configfile", config,
                       command=[sys.executable, "-c", hidden, "--snakefile", str(ROOT / "Snakefile")], check=False)
    assert_refused_before_any_job(result, tmp_path, "toy.data.source: torchvision asks for the optional package "
                                                    "'torchvision', which is not installed: pip install -e "
                                                    "'.[torchvision]'")


# -- issue 49: scores, tokenizer files, benchmark tasks, toy image sets --------------------------------


@pytest.mark.parametrize("text, message", [
    ("model,score\ntiny-gelu,0.4\ntiny-swiglu,0.5\ntiny-gelu,0.9\n", "lines 2 and 4 both give model 'tiny-gelu': "
                                                                     "keep one row per model"),
    ("model,score,step\ntiny-gelu,0.4,8\ntiny-swiglu,0.5,16\n", "line 2: model 'tiny-gelu' was scored at step 8, "
                                                                "but its coupling is measured at its last checkpoint, "
                                                                "step 16"),
    ("model,score,task\ntiny-gelu,0.4,mmlu\ntiny-swiglu,0.5,mmlu\n", "column(s) ['task'] are not model, score, step "
                                                                     "or revision"),
])
def test_a_scores_file_that_would_mix_rows_stops_the_run_before_any_job(tmp_path, text, message):
    (tmp_path / "scores.csv").write_text(text)
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps({"coupling": {"scores": str(tmp_path / "scores.csv")}}))
    assert f"Invalid config: coupling.scores: {tmp_path / 'scores.csv'}" in (refusal(tmp_path, TINY, bad) or "planned")
    assert message in refusal(tmp_path, TINY, bad)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("name, text", [("tokenizer.json", '{"model": {"vocab": {"a": 1,'),
                                        ("tokenizer_config.json", "{'model_max_length': 64}")])
def test_a_malformed_tokenizer_file_is_named_before_any_job(tmp_path, name, text):
    # the probe: it passed registration and failed 7-11 jobs later, naming the folder
    ckpt = checkpoint(tmp_path / "ckpt")
    (ckpt / name).write_text(text)
    models = {"m": {"source": "local", "checkpoints": {"1": str(ckpt)}}}
    result = snakemake(tmp_path, "-n", "--configfile", tiny_config(tmp_path / "c.yaml", models), check=False)
    assert result.returncode != 0 and not (tmp_path / "results").exists()
    assert f"Invalid checkpoint: model 'm' revision 'step1' file '{name}': {ckpt / name} is not valid JSON" \
        in result.output, result.output[-3000:]


def test_benchmark_tasks_twice_are_refused_at_parse_and_unknown_ones_before_the_first_job(tmp_path):
    pytest.importorskip("lm_eval", reason="the [eval] extra (make test installs it)")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "toy_numbers.yaml").write_text('task: toy_numbers\ndoc_to_text: "{{question}}\n  label: 3\n')
    benchmarks = {"activate": True, "include_path": str(tasks), "builtin": False,
                  "tasks": [{"task": "toy_numbers", "shots": 0, "metric": "acc,none"}] * 2}
    twice = tiny_config(tmp_path / "twice.yaml", yaml.safe_load(TINY.read_text())["models"], benchmarks=benchmarks)
    assert "Invalid config: benchmarks.tasks: ['toy_numbers'] named more than once" in (refusal(tmp_path, twice) or "")
    benchmarks["tasks"] = benchmarks["tasks"][:1]
    config = tiny_config(tmp_path / "c.yaml", yaml.safe_load(TINY.read_text())["models"], benchmarks=benchmarks)
    result = snakemake(tmp_path, "results/evaluation/benchmark_tasks.json", "--cores", "1", "--configfile", config,
                       check=False)  # the dry run plans it: the harness's index is read in onstart
    assert_refused_before_any_job(result, tmp_path, f"benchmarks.tasks: ['toy_numbers'] are not tasks of "
                                                    f"benchmarks.include_path ({tasks})")
    assert f"these task files do not parse, so their tasks are missing:\n  {tasks / 'toy_numbers.yaml'}: " \
        in result.output


def test_toy_image_sets_missing_from_their_folder_stop_the_run_before_any_job(tmp_path):
    hidden = ("import sys; sys.modules['torchvision'] = None; from snakemake.cli import main; "
              "sys.argv[0] = 'snakemake'; main()")
    (tmp_path / "sets").mkdir()
    config = tiny_config(tmp_path / "t.yaml", yaml.safe_load(TINY.read_text())["models"],
                         toy={**yaml.safe_load(TINY.read_text())["toy"],
                              "datasets": {"names": ["fashion_mnist"], "runs": ["res_relu"],
                                           "directory": str(tmp_path / "sets")}})
    result = snakemake(tmp_path, "results/toy/fashion_mnist.npz", "--cores", "1", "--configfile", config,
                       command=[sys.executable, "-c", hidden, "--snakefile", str(ROOT / "Snakefile")], check=False)
    assert_refused_before_any_job(result, tmp_path, f"toy.datasets.directory: {tmp_path / 'sets'} lacks the files of "
                                                    "fashion_mnist (for fashion_mnist: FashionMNIST/raw/train-images-"
                                                    "idx3-ubyte")


def test_a_truncated_npz_input_is_named_and_remade_as_its_message_says(tmp_path):
    # Snakemake sees a truncated file as up to date: every re-run failed on a bare BadZipFile
    models = {"m": {"source": "local", "checkpoints": {"1": str(checkpoint(tmp_path / "ckpt"))},
                    "analyses": ["alignment"]}}
    config = tiny_config(tmp_path / "c.yaml", models)
    target, npz = "results/alignment/m/adjacent.tsv", "results/alignment/m/step1.npz"
    assert snakemake(tmp_path, target, "--cores", "1", "--configfile", config, check=False).returncode == 0
    whole = (tmp_path / npz).read_bytes()
    (tmp_path / npz).write_bytes(whole[: len(whole) // 2])  # a copy cut short
    (tmp_path / target).unlink()
    for _ in range(2):  # the same on every re-run, since the npz still looks up to date
        assert snakemake(tmp_path, target, "--cores", "1", "--configfile", config, check=False).returncode != 0
        log = (tmp_path / "logs/summarize_alignment/m.log").read_text()
        assert f"{npz} is truncated or corrupt (BadZipFile" in log, log[-3000:]
        assert f"run snakemake --force {npz} (with this run's other options: --cores, --configfile, --profile), " \
               "which remakes it with the job that wrote it" in log
    assert snakemake(tmp_path, "--force", npz, "--cores", "1", "--configfile", config, check=False).returncode == 0
    assert (tmp_path / npz).read_bytes() == whole
    assert snakemake(tmp_path, target, "--cores", "1", "--configfile", config, check=False).returncode == 0


def test_a_checkpoint_folder_link_that_loops_stops_the_parse_naming_it(tmp_path):
    # two links to "." once kept the parse walking for minutes, gigabytes deep, without a word
    loop = checkpoint(tmp_path / "ckpt")
    (loop / "a").symlink_to(".")
    (loop / "b").symlink_to(".")
    models = {"m": {"source": "local", "checkpoints": {"1": str(loop)}}}
    result = snakemake(tmp_path, "-n", "--configfile", tiny_config(tmp_path / "c.yaml", models), check=False,
                       timeout=300)
    assert result.returncode != 0 and "Invalid checkpoint: " in result.output, result.output[-3000:]
    assert "links to ., a folder the checkpoint" in result.output and not (tmp_path / "results").exists()
