# Noise on the embeddings followed through the depth (paper 002, Fig. 32): per checkpoint, the cosine of
# noisy and clean states at every depth on the coupling stage's plain prompts -> per model -> figure.
NOISE = config["embedding_noise"]


rule embedding_noise:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        prompts=rules.prepare_prompts.output.prompts,
    output:
        table="results/embedding_noise/{model}/step{step}.tsv",
    log:
        "logs/embedding_noise/{model}/step{step}.log",
    benchmark:
        "benchmarks/embedding_noise/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"
    threads: NOISE["threads"]
    resources:
        gpu=get_gpu_request(NOISE["device"]),
    params:
        levels=NOISE["levels"],
        draws=NOISE["draws"],
        seed=NOISE["seed"],
        final_norm=COUPLING["final_norm"],
        max_tokens=PROMPTS["max_tokens"],
        library=library_digest("embedding_noise.py"),
    script:
        "../scripts/embedding_noise.py"


rule summarize_embedding_noise:
    input:
        tables=every_step("results/embedding_noise/{model}/step{step}.tsv"),
    output:
        table=report(
            "results/embedding_noise/{model}/noise.tsv",
            caption="../report/embedding_noise_table.rst",
            category="Coupling",
            subcategory="{model}",
            labels={"model": "{model}", "table": "noise on the embeddings"},
        ),
    log:
        "logs/summarize_embedding_noise/{model}.log",
    benchmark:
        "benchmarks/summarize_embedding_noise/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        steps=get_model_steps,
        library=library_digest("summarize_embedding_noise.py"),
    script:
        "../scripts/summarize_embedding_noise.py"


rule plot_embedding_noise:
    input:
        table=rules.summarize_embedding_noise.output.table,
    output:
        **figure_outputs("embedding_noise"),
    log:
        "logs/plot_embedding_noise/{model}.log",
    benchmark:
        "benchmarks/plot_embedding_noise/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_embedding_noise.py"),
    script:
        "../scripts/plot_embedding_noise.py"
