import functools
import os
import re
import sys
import yaml
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod
from snakemake.sourcecache import LocalSourceFile
from snakemake.utils import validate

# This checkout's top directory: the library and the shipped prompt files are there. Not
# workflow.basedir, which is the directory of the Snakefile Snakemake started with: another
# workflow's when this one is its module (docs/module.md). A direct run
# keeps workflow.basedir as given, so that the input paths earlier runs recorded stay the same.
# None for a module from a remote source (github(...)): its library is the installed package, and
# shipped files come through Snakemake's source cache.
if isinstance(workflow.current_basedir, LocalSourceFile):
    WORKFLOW_ROOT = Path(str(workflow.current_basedir)).parents[1]
    if Path(workflow.basedir).resolve() == WORKFLOW_ROOT.resolve():
        WORKFLOW_ROOT = Path(workflow.basedir)
    sys.path.insert(0, str(WORKFLOW_ROOT / "workflow"))  # -> import crosslayer
else:
    WORKFLOW_ROOT = None
    # Scripts import their shared start, _setup.py, from beside them. Snakemake caches a remote
    # script alone and puts its cache directory on the job's sys.path: cache _setup.py there too.
    workflow.source_path("../scripts/_setup.py")
try:
    from crosslayer import config as cfg  # standard library only
    from crosslayer.files import changed_checkpoint, check_tokenizer_files, checkpoint_files  # standard library only
    from crosslayer.prompt_checks import unpooled_sources  # standard library only
    from crosslayer.schema_types import renamed_keys, typed_config  # standard library only
    from crosslayer.stages import STAGES, stage  # standard library only
except ImportError as err:
    raise WorkflowError(
        f"Cannot import the crosslayer library ({err}): used as a module from a remote source, the "
        "workflow needs it installed at the same version, e.g. pip install "
        "'crosslayer @ git+https://github.com/OWNER/crosslayer@TAG' (docs/module.md)"
    ) from None

renamed = renamed_keys(config)  # before validation, which would only call the key unexpected
if renamed:
    raise WorkflowError("Invalid config: " + "; ".join(renamed))
validate(config, schema="../../config/schema.yaml")
# Each number of its key's type (3.0 for an integer key is 3, 1 for a number key 1.0) and keys sorted
# (but the order of models and runs, which tables and figures follow): the same settings written
# another way are the same params, and re-run nothing.
with open(workflow.source_path("../../config/schema.yaml") if WORKFLOW_ROOT is None
          else WORKFLOW_ROOT / "config" / "schema.yaml") as schema_file:
    canonical = cfg.canonical_config(typed_config(config, yaml.safe_load(schema_file)))
config.clear()
config.update(canonical)
try:
    config["models"] = cfg.selected_models(config)  # every rule and check below sees only these
    cfg.check_model_entries(config)  # before any checkpoint's config.json is read
except ValueError as err:
    raise WorkflowError(f"Invalid config: {err}") from None


def local_models():
    """``(sizes, families, gated, contexts, untokenized)`` of the `source: local` models, from their
    checkpoints' config.json files, which are on disk: n_layers, d_model, d_ff per model; its
    model_type, what its architecture can do and what it lacks in words; whether the MLP is gated;
    its context length; the steps whose directory holds no tokenizer files. A config.json the
    adapters cannot read (missing, unparsable, or a model_type neither adapted nor a transformers
    causal decoder) stops the run here, on the console."""
    sizes, families, gated, contexts, untokenized = {}, {}, {}, {}, {}
    for name, entry in config["models"].items():
        if entry["source"] != "local":
            continue
        from crosslayer.models.weights import checkpoint_adapter  # imports transformers: only when needed
        from crosslayer.models.loading import TOKENIZER_FILES
        from crosslayer.coupling.checkpoint import context_length
        from crosslayer.errors import CheckpointError

        try:  # every step's config.json and tokenizer files, so that none fails in a job instead
            adapters = []
            for step, path in cfg.local_checkpoints(entry).items():
                checkpoint_files(path)  # a folder link that loops stops here, named, not in a hung input function
                adapters.append(checkpoint_adapter(path, model=name, revision=f"step{step}"))
                if workflow.is_main_process:  # not again in each cluster job's parse: tens of MB a tokenizer.json
                    check_tokenizer_files(path, model=name, revision=f"step{step}")
        except CheckpointError as err:
            raise WorkflowError(f"Invalid checkpoint: {err}") from None
        adapter = adapters[0]
        geometry = adapter.geometry
        sizes[name] = {key: getattr(geometry, key) for key in ("n_layers", "d_model", "d_ff")}
        families[name] = (geometry.model_type, adapter.capabilities, adapter.limits)
        gated[name] = geometry.gated_mlp
        contexts[name] = context_length(adapter.config)
        untokenized[name] = {step: path for step, path in cfg.local_checkpoints(entry).items()
                             if not any((Path(path) / file).is_file() for file in TOKENIZER_FILES)}
    return sizes, families, gated, contexts, untokenized


try:
    sizes, families, GATED, contexts, untokenized = local_models()
    GATED |= {m: entry["arch"] == "llama" for m, entry in config["models"].items() if entry["source"] == "train"}
    cfg.check_config(config, sizes=sizes, families=families, contexts=contexts, untokenized=untokenized)
except ValueError as err:
    raise WorkflowError(f"Invalid config: {err}") from None

MODELS = config["models"]


def redo_changed_checkpoints():
    """Before planning: a registered checkpoint whose files are no longer those its manifest
    recorded (whatever their mtimes: a restore from backup, `cp -p`, `rsync -t`) gets a manifest
    dated 1970, older than any of its files, so that this run registers it anew and redoes every
    analysis of it; the console says which. Local and trained checkpoints (their files are
    register_checkpoint's inputs); only in the submitting process, not in a cluster job's parse."""
    if not workflow.is_main_process:
        return
    for model in models_from("local", "train"):
        for step in get_steps(model):
            manifest = Path(f"results/checkpoints/{model}/step{step}.json")
            if manifest.is_file() and (change := changed_checkpoint(manifest)):
                logger.warning(f"Checkpoint {model} step {step} changed since it was registered ({change}): "
                               "registering it anew; its analyses will be redone.")
                # 1 ns after the epoch (0 reads as "no mtime"); a missing manifest would not do: Snakemake
                # keeps results whose intermediate input is gone
                try:
                    os.utime(manifest, ns=(1, 1))
                except OSError as err:
                    raise WorkflowError(f"Checkpoint {model} step {step} changed since it was registered ({change}), "
                                        f"and its manifest cannot be marked for registration anew ({err}): make "
                                        "results/ writable, or restore the checkpoint's files") from None


def models_from(*sources):
    return [m for m, entry in MODELS.items() if entry["source"] in sources]


def one_of(names):
    """Wildcard regex matching exactly these names (or nothing at all)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


onstart:
    import importlib.util

    jobs = list(workflow.dag.needrun_jobs())
    pending = {job.rule.name for job in jobs}  # with a module's prefix, if any

    def runs(*rules):
        return any(name.endswith(rules) for name in pending)

    # A local run whose jobs ask for a GPU that torch here cannot use stops before its first job,
    # naming the settings. Not under a cluster executor: its jobs run on GPU nodes, not here.
    if workflow.executor_plugin.common_settings.local_exec and not workflow.touch:
        gpu_rules = sorted({job.rule.name for job in jobs if job.resources.get("gpu", 0)})
        if gpu_rules:
            from crosslayer.devices import no_cuda_reason

            if reason := no_cuda_reason():
                raise WorkflowError(
                    f"Invalid config: {', '.join(cfg.cuda_settings(config))} ask(s) for 'cuda' but {reason}, and "
                    f"this run's {', '.join(gpu_rules)} jobs would run here: set them to cpu, or run on a "
                    "machine with a GPU or through a cluster profile (jobs with gpu=1 go to GPU nodes)"
                )
    # The optional packages, where jobs run with this environment's (conda envs bring their own): say
    # so before the first job rather than in the job that needs one.
    host_env = DeploymentMethod.CONDA not in workflow.deployment_settings.deployment_method
    # The dataset sources need `datasets` (not installed by `make run`).
    if host_env and (keys := cfg.dataset_keys(config)) and importlib.util.find_spec("datasets") is None and runs(
            "prepare_corpus", "prepare_samples", "prepare_prompts", "prepare_heldout"):
        raise WorkflowError(f"Invalid config: {', '.join(keys)} ask(s) for a Hugging Face dataset, which needs "
                            f"the optional package 'datasets': {cfg.DATASETS_EXTRA}")
    # The benchmarks' harness (lm-eval), and the task names it knows.
    if host_env and config["benchmarks"]["activate"] and runs("evaluate", "prepare_benchmarks"):
        if importlib.util.find_spec("lm_eval") is None:
            raise WorkflowError(f"Invalid config: benchmarks.activate asks for EleutherAI's lm-evaluation-harness, "
                                f"which is not installed: {cfg.EVAL_EXTRA}")
        from crosslayer.evaluation.tasks import check_task_names  # the harness's index: about 6 s

        try:
            check_task_names([task["task"] for task in config["benchmarks"]["tasks"]],
                             include_path=config["benchmarks"]["include_path"],
                             builtin=config["benchmarks"]["builtin"])
        except ValueError as err:
            raise WorkflowError(f"Invalid config: {err}") from None
    # The image sets of toy.datasets that are not in its directory: torchvision downloads them.
    if host_env and runs("prepare_toy_dataset") and importlib.util.find_spec("torchvision") is None:
        from crosslayer.data.image_sets import missing_files

        directory = config["toy"]["datasets"]["directory"]
        missing = {name: files for name in config["toy"]["datasets"]["names"]
                   if (files := missing_files(name, directory))}
        if missing:
            name, files = next(iter(missing.items()))
            raise WorkflowError(
                f"Invalid config: toy.datasets.directory: {directory} lacks the files of {', '.join(missing)} "
                f"(for {name}: {', '.join(files)}), and torchvision, which would download them there, is not "
                "installed: put the files there in torchvision's layout, or install it (pip install -e "
                "'.[torchvision]' in the clone)")
    # torchvision's MNIST download (toy.data.source: torchvision), in prepare_mnist.
    if host_env and (keys := cfg.torchvision_keys(config)) and importlib.util.find_spec("torchvision") is None \
            and runs("prepare_mnist"):
        raise WorkflowError(f"Invalid config: {', '.join(keys)}: torchvision asks for the optional package "
                            f"'torchvision', which is not installed: {cfg.TORCHVISION_EXTRA}")


wildcard_constraints:
    model=one_of(MODELS),
    step=r"\d+",


def gated_models():
    """Models of the alignment and dynamics stages whose MLPs may be gated: trained `llama`, local
    checkpoints whose config.json says so, and hub models (their family is read in the job)."""
    both = set(models_for("alignment")) & set(models_for("dynamics"))
    return [m for m in MODELS if m in both and GATED.get(m, True)]


def models_for(stage):
    """The models that take part in `stage` (activated, and in their `analyses`)."""
    return cfg.models_for(config, stage)


def get_steps(model):
    return cfg.model_steps(MODELS[model])


def get_model_steps(wildcards):
    return get_steps(wildcards.model)


redo_changed_checkpoints()


def get_reference_step(wildcards):
    return cfg.reference_step(MODELS[wildcards.model])


def get_source(wildcards):
    return MODELS[wildcards.model]["source"]


def get_checkpoint_revision(wildcards):
    """The revision string a manifest records (and error messages name)."""
    entry, step = MODELS[wildcards.model], int(wildcards.step)
    if entry["source"] == "hub":
        return cfg.resolve_checkpoints(entry)[step]["revision"]
    return f"step{step}"


def get_hub_checkpoint(wildcards):
    return cfg.resolve_checkpoints(MODELS[wildcards.model])[int(wildcards.step)]


def get_checkpoint_dir(wildcards):
    """The directory register_checkpoint describes: a trained model's step or a local directory;
    None for the untrained twin's step 0, which build_untrained makes (ruleorder): Snakemake still
    builds register_checkpoint's candidate job for it, and an error here would be printed."""
    entry = MODELS[wildcards.model]
    if entry["source"] == "train":
        return f"results/train/{wildcards.model}/step{wildcards.step}"
    return cfg.local_checkpoints(entry).get(int(wildcards.step))


def untrained_models():
    return [m for m, entry in MODELS.items() if cfg.untrained_seed(entry) is not None]


def get_untrained_source(wildcards):
    """Where an untrained twin's config.json comes from: the hub repo and revision of the model's
    last step, or the directory of its last local checkpoint."""
    entry = MODELS[wildcards.model]
    if entry["source"] == "hub":
        return cfg.resolve_checkpoints(entry)[get_steps(wildcards.model)[-1]]
    return {"directory": cfg.local_checkpoints(entry)[get_steps(wildcards.model)[-1]]}


def get_untrained_config(wildcards):
    """A local model's config.json (a change builds the twin anew); nothing for a hub model."""
    source = get_untrained_source(wildcards)
    return [str(Path(source["directory"]) / "config.json")] if "directory" in source else []


def get_checkpoint_inputs(wildcards):
    """Input of register_checkpoint: the trained model's run directory (train_model's output), or
    every file of a local checkpoint, so that a file changed later registers it anew and redoes
    its analyses (each job also verifies the files against the manifest's sha256)."""
    if MODELS[wildcards.model]["source"] == "train":
        return f"results/train/{wildcards.model}"
    directory = get_checkpoint_dir(wildcards)
    if directory is None:  # the twin's step: not this rule's
        return []
    return [str(path) for _, path in checkpoint_files(directory)] or directory


def get_train_params(wildcards):
    settings = cfg.train_settings(config, wildcards.model)
    settings.pop("threads")
    return {
        "arch": MODELS[wildcards.model]["arch"],
        "save_steps": get_steps(wildcards.model),
        **settings,
    }


def get_train_threads(wildcards):
    return cfg.train_settings(config, wildcards.model)["threads"]


def get_train_gpu(wildcards):
    return get_gpu_request(cfg.train_settings(config, wildcards.model)["device"])


def every_step(pattern):
    """Input function: `pattern` (with {model} and {step}) for every step of the job's model."""

    def files(wildcards):
        return expand(pattern, model=wildcards.model, step=get_steps(wildcards.model))

    return files


def scored_steps(model):
    """The steps whose benchmark scores a model's summary gathers (``benchmarks.steps``)."""
    steps = get_steps(model)
    return steps if config["benchmarks"]["steps"] == "all" else [max(steps)]


def get_scored_steps(pattern):
    """Input function: `pattern` (with {model} and {step}) for every scored step of the job's model."""
    return lambda wildcards: expand(pattern, model=wildcards.model, step=scored_steps(wildcards.model))


def figure_outputs(name, *, all_models=False):
    """A plotting rule's outputs: each figure of stage `name` (crosslayer/stages.py), or with
    `all_models` each of its figures over all models, as a report PNG under the figure's name and
    its PDF beside it as ``<name>_pdf``."""
    stage_, outputs = stage(name), {}
    model = "all models" if all_models else "{model}"
    for figure in stage_.all_model_figures if all_models else stage_.figures:
        path = stage_.figure_path(figure, all_models=all_models)
        outputs[figure.name] = report(
            f"{path}.png",
            caption=f"../report/{figure.caption}.rst",
            category=stage_.category,
            subcategory=stage_.subcategory or model,
            labels={"model": model, "figure": figure.name.replace("_", " ")} if stage_.models != "none"
            else {"figure": figure.name.replace("_", " ")},
        )
        if figure.pdf:
            outputs[f"{figure.name}_pdf"] = f"{path}.pdf"
    return outputs




def topology_files(kind):
    """(model, step, path) of every checkpoint's results/topology/{model}/step{step}.{kind}.tsv."""
    return [
        (model, step, f"results/topology/{model}/step{step}.{kind}.tsv")
        for model in models_for("topology")
        for step in get_steps(model)
    ]


def get_last_coupling_npz():
    """Every model's last checkpoint's coupling results, in model order (across-model fits)."""
    return [
        f"results/coupling/{model}/step{get_steps(model)[-1]}.coupling.npz"
        for model in models_for("coupling")
    ]


def get_prompt_file():
    """The coupling stage's prompt file: relative to the working directory, else to the workflow
    (the shipped ones); [] for none."""
    path = config["coupling"]["prompts"]["file"]
    if not path or Path(path).is_absolute() or Path(path).exists():
        return path or []
    if WORKFLOW_ROOT is None:  # a module from a remote source: a local copy from the source cache
        return workflow.source_path(f"../../{path}")
    return str(WORKFLOW_ROOT / path)


COUPLING_TABLES = ["prompts", "steps", "depthwise", "profile", "regularity", "tokenwise"]  # see summarize_coupling


# The across-papers stage's settings and inputs (workflow/rules/across_papers.smk).
ACROSS = cfg.across_papers_settings(config) if config["across_papers"]["activate"] else {}


def across_analyses(model):
    """The measure families `model` has results for, in the order of across_papers.measures."""
    return [a for a in ACROSS["measures"] if model in models_for(a)]


def get_across_analyses(wildcards):
    return across_analyses(wildcards.model)


def get_across_papers_inputs(wildcards):
    """Every per-paper result the model's boundary table reads; the spectra also give the regimes."""
    model, analyses = wildcards.model, across_analyses(wildcards.model)

    def per_step(pattern):
        return expand(pattern, model=model, step=get_steps(model))

    inputs = {}
    if "alignment" in analyses:
        inputs |= {"adjacent": rules.summarize_alignment.output.adjacent.format(model=model),
                   "alignment_baseline": rules.summarize_alignment.output.baseline.format(model=model)}
    if "continuity" in analyses:
        inputs |= {"continuity_npz": per_step(rules.continuity_statistics.output.npz),
                   "continuity_tables": per_step(rules.continuity_statistics.output.table)}
    if "coupling" in analyses:
        inputs["depthwise"] = f"results/coupling/{model}/depthwise.tsv"
    if model in models_for("dynamics"):
        inputs["spectra"] = per_step(rules.jacobian_spectra.output.table)
    if "topology" in analyses:
        inputs["partitions"] = per_step(rules.detect_communities.output.partitions)
    return inputs



def get_toy_settings(wildcards):
    """One toy job's ToyConfig fields but the seed: the toy block's settings with its run's changes."""
    return cfg.toy_settings(config, wildcards.run)


def get_toy_dataset_files(suffix):
    """Every toy.datasets run's per-seed files ``seed<seed>.<suffix>`` on every image set, in set, run,
    seed order (summarize_toy_datasets reads them so): MNIST's are the toy grid's own."""
    toy = config["toy"]
    folders = {image_set: "results/toy" if image_set == "mnist" else f"results/toy/{image_set}"
               for image_set in cfg.toy_image_sets(config)}
    return [f"{folder}/{run}/seed{seed}.{suffix}"
            for folder in folders.values() for run in toy["datasets"]["runs"] for seed in toy["seeds"]]


def get_ablation_params(wildcards):
    settings = cfg.ablation_settings(config, wildcards.ablation)
    settings.pop("threads")
    return settings


def get_ablation_threads(wildcards):
    return cfg.ablation_settings(config, wildcards.ablation)["threads"]


def get_ablation_gpu(wildcards):
    return get_gpu_request(cfg.ablation_settings(config, wildcards.ablation)["device"])


def get_gpu_request(device):
    return 1 if device == "cuda" else 0


def stage_models(stage):
    """The models `stage` (crosslayer/stages.py) runs on in this run, none when it is off; for a
    stage of its own runs (toy, transformer_ablations), whether it runs."""
    if stage.models == "analysis":
        return models_for(stage.name)
    if stage.models == "all":
        return list(MODELS) if config.get(stage.name, {}).get("activate", True) else []
    if stage.models == "trained":
        return models_from("train")
    if stage.models == "gated":
        return gated_models()
    if stage.name == "toy_datasets":  # a part of the toy block
        return bool(cfg.toy_image_sets(config))
    return bool(config[stage.name]["activate"] and config[stage.name]["runs"])


def get_final_output():
    """Every stage's tables and figures over the models it runs on (a stage that no model takes
    asks for none of its outputs)."""
    return [path for stage in STAGES for path in stage.final_outputs(stage_models(stage))]


@functools.cache  # the input function and the params ask for it: once per DAG
def claims_tables():
    """The papers judged (those with a stage in this run) and, for each table their catalogues
    read, the models whose stage writes it with their steps: {table: {model: steps}}. A stage of
    its own runs (toy, transformer_ablations) is one pseudo-model named after it, without steps."""
    from crosslayer.claims.catalogue import catalogue_papers, load_catalogue
    from crosslayer.claims.readers import reader

    papers = [p for p in catalogue_papers() if any(stage_models(s) for s in STAGES if s.paper == p)]
    tables = {}
    for paper in papers:
        for name in load_catalogue(paper).tables:
            stage_ = stage(reader(name).stage)
            runs = stage_models(stage_)
            if stage_.models != "none":  # the models every stage the table joins runs on
                runs = [m for m in runs if all(m in stage_models(stage(s)) for s in reader(name).also)]
            if stage_.models == "none":
                tables[name] = {stage_.name: []} if runs else {}
            else:
                tables[name] = {model: get_steps(model) for model in runs}
    return papers, tables


def library_digest(script):
    """The digest of the library code the rule script `script` runs (crosslayer.code_digest): each
    rule's `library` parameter, as Snakemake's own code trigger sees the script but not the
    modules it imports. A remote module's script comes through the source cache."""
    from crosslayer.code_digest import library_digest as digest

    return digest(workflow.source_path(f"../scripts/{script}"))


def claims_identities():
    """Each model's hub repo and untrained step (crosslayer.claims.subjects): whom the claims are about."""
    from crosslayer.claims.subjects import model_identities

    return model_identities(MODELS)


def get_report_description():
    """The workflow's report text (workflow/report/workflow.rst) of this checkout, or from the
    source cache for a module from a remote source (as the shipped prompt files)."""
    if WORKFLOW_ROOT is None:
        return workflow.source_path("../report/workflow.rst")
    return str(WORKFLOW_ROOT / "workflow" / "report" / "workflow.rst")


def get_claims_inputs(wildcards):
    from crosslayer.claims.readers import files_of

    return files_of(claims_tables()[1])
