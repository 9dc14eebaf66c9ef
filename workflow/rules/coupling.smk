# Transformer block coupling and token trajectories (paper 002): prompts -> per checkpoint
# depth-wise and token-wise Jacobian coupling, trajectory regularity -> tables over training and
# across models -> figures.
COUPLING = config["coupling"]
PROMPTS = COUPLING["prompts"]
# sources measured for their own tables only (the WikiText-2 prompts of Fig. 26), never in source all;
# which sources pool is a summary's setting, so prepare_prompts never sees it (no re-measurement)
UNPOOLED = unpooled_sources(PROMPTS)


# Hub datasets need the internet, so prompts are prepared where Snakemake runs, never on a node
# (localrule: in the rule, so that it holds under a module's renamed rules, e.g. crosslayer_*).
rule prepare_prompts:
    input:
        text=rules.prepare_corpus.output.text if PROMPTS["corpus_paragraphs"] else [],
        file=get_prompt_file(),
    output:
        prompts="results/coupling/prompts.jsonl",
    log:
        "logs/prepare_prompts.log",
    benchmark:
        "benchmarks/prepare_prompts.tsv"
    localrule: True
    conda:
        "../../envs/samples.yaml"
    params:
        prompts={**PROMPTS, "datasets": [{k: v for k, v in spec.items() if k != "pooled"} for spec in PROMPTS["datasets"]]},
        library=library_digest("prepare_prompts.py"),
    script:
        "../scripts/prepare_prompts.py"


rule block_coupling:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        prompts=rules.prepare_prompts.output.prompts,
    output:
        npz="results/coupling/{model}/step{step}.coupling.npz",
    log:
        "logs/block_coupling/{model}/step{step}.log",
    benchmark:
        "benchmarks/block_coupling/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"
    threads: COUPLING["threads"]
    resources:
        gpu=get_gpu_request(COUPLING["device"]),
    params:
        Ks=COUPLING["Ks"],
        token=COUPLING["depthwise_token"],
        token_wise=COUPLING["token_wise"],
        pca_prompts=COUPLING["pca_prompts"],
        pca_fit=COUPLING["pca_fit"],
        final_norm=COUPLING["final_norm"],
        example_prompt=COUPLING["example_prompt"],
        max_tokens=PROMPTS["max_tokens"],
        library=library_digest("block_coupling.py"),
    script:
        "../scripts/block_coupling.py"


rule summarize_coupling:
    input:
        npz=every_step("results/coupling/{model}/step{step}.coupling.npz"),
    output:
        **{name: f"results/coupling/{{model}}/{name}.tsv" for name in COUPLING_TABLES},
    log:
        "logs/summarize_coupling/{model}.log",
    benchmark:
        "benchmarks/summarize_coupling/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        steps=get_model_steps,
        metric=COUPLING["metric"],
        window=COUPLING["window"],
        unpooled=UNPOOLED,
        library=library_digest("summarize_coupling.py"),
    script:
        "../scripts/summarize_coupling.py"


rule coupling_across_models:
    input:
        steps=expand("results/coupling/{model}/steps.tsv", model=models_for("coupling")),
        npz=get_last_coupling_npz(),
        scores=COUPLING["scores"] or [],
        heldout=expand("results/evaluation/{model}/heldout.tsv", model=models_for("coupling"))
        if config["evaluation"]["activate"] else [],
        benchmarks=expand("results/evaluation/{model}/scores.tsv", model=models_for("coupling"))
        if config["benchmarks"]["activate"] else [],
    output:
        models=report(
            "results/coupling/models.tsv",
            caption="../report/coupling_models.rst",
            category="Coupling",
            subcategory="all models",
            labels={"table": "coupling per model"},
        ),
        fits="results/coupling/fits.tsv",
        training_fits="results/coupling/fits_over_training.tsv",
        regularity="results/coupling/regularity_models.tsv",
    log:
        "logs/coupling_across_models.log",
    benchmark:
        "benchmarks/coupling_across_models.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        models=models_for("coupling"),
        training_tokens={m: MODELS[m].get("training_tokens") for m in models_for("coupling")},
        subsets=COUPLING["fit_subsets"],
        scored_checkpoints=cfg.scored_checkpoints(config) if COUPLING["scores"] else {},
        tasks=[task["task"] for task in config["benchmarks"]["tasks"]] if config["benchmarks"]["activate"] else [],
        library=library_digest("coupling_across_models.py"),
    script:
        "../scripts/coupling_across_models.py"


rule plot_coupling:
    input:
        npz=every_step("results/coupling/{model}/step{step}.coupling.npz"),
        **{name: rules.summarize_coupling.output[name] for name in COUPLING_TABLES},
    output:
        **figure_outputs("coupling"),
    log:
        "logs/plot_coupling/{model}.log",
    benchmark:
        "benchmarks/plot_coupling/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        tables=COUPLING_TABLES,
        metric=COUPLING["metric"],
        window=COUPLING["window"],
        pca_fit=COUPLING["pca_fit"],
        final_norm=COUPLING["final_norm"],
        example_blocks=COUPLING["example_blocks"],
        unpooled=UNPOOLED,
        regularity_source=COUPLING["regularity_source"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_coupling.py"),
    script:
        "../scripts/plot_coupling.py"


rule plot_coupling_models:
    input:
        steps=expand("results/coupling/{model}/steps.tsv", model=models_for("coupling")),
        models=rules.coupling_across_models.output.models,
        fits=rules.coupling_across_models.output.fits,
        training_fits=rules.coupling_across_models.output.training_fits,
        regularity=rules.coupling_across_models.output.regularity,
        heldout=rules.coupling_across_models.input.heldout,
        benchmarks=rules.coupling_across_models.input.benchmarks,
    output:
        **figure_outputs("coupling", all_models=True),
    log:
        "logs/plot_coupling_models.log",
    benchmark:
        "benchmarks/plot_coupling_models.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        models=models_for("coupling"),
        metric=COUPLING["metric"],
        final_norm=COUPLING["final_norm"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_coupling_models.py"),
    script:
        "../scripts/plot_coupling_models.py"

