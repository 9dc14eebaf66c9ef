# Paper 003, section 5: Llama-style decoders trained on the corpus with the MLP activation, the
# residual connections or the norms ablated; perplexity and each projection's continuity per run.
ABLATIONS = config["transformer_ablations"]
ABLATION_RUNS = list(ABLATIONS["runs"])


wildcard_constraints:
    ablation=one_of(ABLATION_RUNS),


rule train_ablation:
    input:
        tokens=rules.prepare_corpus.output.tokens,
        tokenizer=rules.prepare_corpus.output.tokenizer,
    output:
        run=directory("results/ablations/{ablation}"),
    log:
        "logs/train_ablation/{ablation}.log",
    benchmark:
        "benchmarks/train_ablation/{ablation}.tsv"
    conda:
        "../../envs/train.yaml"
    threads: get_ablation_threads
    resources:
        gpu=get_ablation_gpu,
    params:
        settings=get_ablation_params,
        library=library_digest("train_ablation.py"),
    script:
        "../scripts/train_ablation.py"


rule ablation_continuity:
    input:
        run=rules.train_ablation.output.run,
    output:
        npz="results/ablations/{ablation}.continuity.npz",
        table="results/ablations/{ablation}.continuity.tsv",
    log:
        "logs/ablation_continuity/{ablation}.log",
    benchmark:
        "benchmarks/ablation_continuity/{ablation}.tsv"
    conda:
        "../../envs/weights.yaml"
    threads: CONTINUITY["threads"]
    resources:
        gpu=get_gpu_request(CONTINUITY["device"]),
    params:
        save_steps=lambda wildcards: get_ablation_params(wildcards)["save_steps"],
        projections=CONTINUITY["projections"],
        erank_power=CONTINUITY["erank_power"],
        pca_components=CONTINUITY["pca_components"],
        baseline_draws=CONTINUITY["baseline_draws"],
        seed=CONTINUITY["seed"],
        library=library_digest("ablation_continuity.py"),
    script:
        "../scripts/ablation_continuity.py"


rule summarize_ablations:
    input:
        runs=expand("results/ablations/{ablation}", ablation=ABLATION_RUNS),
        tables=expand("results/ablations/{ablation}.continuity.tsv", ablation=ABLATION_RUNS),
    output:
        table=report(
            "results/continuity/ablations.tsv",
            caption="../report/ablations_table.rst",
            category="Continuity",
            subcategory="Transformer ablations",
            labels={"table": "transformer ablations (Table 2)"},
        ),
        over_training=report(
            "results/continuity/ablations_over_training.tsv",
            caption="../report/ablations_over_training_table.rst",
            category="Continuity",
            subcategory="Transformer ablations",
            labels={"table": "transformer ablations over training"},
        ),
    log:
        "logs/summarize_ablations.log",
    benchmark:
        "benchmarks/summarize_ablations.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        runs=ABLATION_RUNS,
        library=library_digest("summarize_ablations.py"),
    script:
        "../scripts/summarize_ablations.py"


rule plot_ablations:
    input:
        summary=rules.summarize_ablations.output.table,
        tables=rules.summarize_ablations.input.tables,
    output:
        **figure_outputs("transformer_ablations"),
    log:
        "logs/plot_ablations.log",
    benchmark:
        "benchmarks/plot_ablations.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        runs=ABLATION_RUNS,
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_ablations.py"),
    script:
        "../scripts/plot_ablations.py"
