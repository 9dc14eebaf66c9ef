# Checkpoint sources. Every checkpoint, whatever its source, ends as one manifest
# results/checkpoints/{model}/step{step}.json (path, repo, revision, commit, sha256 of each file)
# that the analyses read.


# A dataset or a hub tokenizer is downloaded: then a localrule (compute nodes often have no internet).
rule prepare_corpus:
    output:
        text="results/corpus/wikipedia.txt",
        tokenizer=directory("results/corpus/tokenizer"),
        tokens="results/corpus/tokens.npy",
    log:
        "logs/prepare_corpus.log",
    benchmark:
        "benchmarks/prepare_corpus.tsv"
    localrule: config["corpus"]["source"] == "dataset" or config["corpus"]["tokenizer"] is not None
    conda:
        "../../envs/train.yaml"
    params:
        **cfg.corpus_params(config["corpus"]),
        library=library_digest("prepare_corpus.py"),
    script:
        "../scripts/prepare_corpus.py"


rule train_model:
    input:
        tokens=rules.prepare_corpus.output.tokens,
        tokenizer=rules.prepare_corpus.output.tokenizer,
    output:
        run=directory("results/train/{model}"),
    log:
        "logs/train_model/{model}.log",
    benchmark:
        "benchmarks/train_model/{model}.tsv"
    wildcard_constraints:
        model=one_of(models_from("train")),
    conda:
        "../../envs/train.yaml"
    threads: get_train_threads
    resources:
        gpu=get_train_gpu,
    params:
        settings=get_train_params,
        library=library_digest("train_model.py"),
    script:
        "../scripts/train_model.py"


rule register_checkpoint:
    input:
        checkpoint=get_checkpoint_inputs,
    output:
        manifest="results/checkpoints/{model}/step{step}.json",
    log:
        "logs/register_checkpoint/{model}/step{step}.log",
    benchmark:
        "benchmarks/register_checkpoint/{model}/step{step}.tsv"
    wildcard_constraints:
        model=one_of(models_from("train", "local")),
    localrule: True
    priority: 50  # first among ready jobs: a broken checkpoint (every tensor is checked) stops the run early
    conda:
        "../../envs/checkpoints.yaml"
    params:
        source=get_source,
        directory=get_checkpoint_dir,
        revision=get_checkpoint_revision,
        library=library_digest("register_checkpoint.py"),
    script:
        "../scripts/register_checkpoint.py"


# Step 0 of a hub or local model with `init`: its untrained twin, from its own config.json (for
# a hub model only config.json and the tokenizer are downloaded: a localrule).
ruleorder: build_untrained > download_checkpoint
ruleorder: build_untrained > register_checkpoint


rule build_untrained:
    input:
        config=get_untrained_config,
    output:
        manifest="results/checkpoints/{model}/step0.json",
        weights=directory("results/untrained/{model}"),
    log:
        "logs/build_untrained/{model}.log",
    benchmark:
        "benchmarks/build_untrained/{model}.tsv"
    wildcard_constraints:
        model=one_of(untrained_models()),
    localrule: True
    conda:
        "../../envs/checkpoints.yaml"
    params:
        seed=lambda wildcards: cfg.untrained_seed(MODELS[wildcards.model]),
        source=get_source,
        checkpoint=get_untrained_source,
        cache_dir=config["hub"]["cache_dir"],
        attempts=config["hub"]["attempts"],
        backoff_s=config["hub"]["backoff_s"],
        library=library_digest("build_untrained.py"),
    script:
        "../scripts/build_untrained.py"


# Runs on the submit host (localrule): cluster compute nodes often have no internet.
rule download_checkpoint:
    output:
        manifest="results/checkpoints/{model}/step{step}.json",
    log:
        "logs/download_checkpoint/{model}/step{step}.log",
    benchmark:
        "benchmarks/download_checkpoint/{model}/step{step}.tsv"
    wildcard_constraints:
        model=one_of(models_from("hub")),
    localrule: True
    conda:
        "../../envs/checkpoints.yaml"
    params:
        checkpoint=get_hub_checkpoint,
        cache_dir=config["hub"]["cache_dir"],
        attempts=config["hub"]["attempts"],
        backoff_s=config["hub"]["backoff_s"],
        library=library_digest("download_checkpoint.py"),
    script:
        "../scripts/download_checkpoint.py"


rule plot_training_loss:
    input:
        run=rules.train_model.output.run,
    output:
        **figure_outputs("train"),
    log:
        "logs/plot_training_loss/{model}.log",
    benchmark:
        "benchmarks/plot_training_loss/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_training_loss.py"),
    script:
        "../scripts/plot_training_loss.py"


# Byte-identical weights under two steps of one model (public series have served them): warned
# about loudly, listed in the TSV, or an error with `duplicate_steps: error`.
rule check_duplicate_steps:
    input:
        manifests=every_step("results/checkpoints/{model}/step{step}.json"),
    output:
        tsv="results/checkpoints/{model}/duplicate_steps.tsv",
    log:
        "logs/check_duplicate_steps/{model}.log",
    benchmark:
        "benchmarks/check_duplicate_steps/{model}.tsv"
    localrule: True
    conda:
        "../../envs/checkpoints.yaml"
    params:
        policy=config["duplicate_steps"],
        library=library_digest("check_duplicate_steps.py"),
    script:
        "../scripts/check_duplicate_steps.py"
