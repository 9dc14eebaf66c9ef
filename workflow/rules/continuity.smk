# Geometric continuity of each projection's principal singular vectors across depth (paper 003).
CONTINUITY = config["continuity"]


# The SVDs (the expensive part: minutes per layer at 8B on a CPU) depend only on the projections;
# the statistics over them are a rule of their own, so that changing one re-runs no SVD.
rule projection_continuity:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
    output:
        svd="results/continuity/{model}/step{step}.svd.npz",
    log:
        "logs/projection_continuity/{model}/step{step}.log",
    benchmark:
        "benchmarks/projection_continuity/{model}/step{step}.tsv"
    conda:
        "../../envs/weights.yaml"
    threads: CONTINUITY["threads"]
    resources:
        gpu=get_gpu_request(CONTINUITY["device"]),
    params:
        projections=CONTINUITY["projections"],
        library=library_digest("projection_continuity.py"),
    script:
        "../scripts/projection_continuity.py"


rule continuity_statistics:
    input:
        svd=rules.projection_continuity.output.svd,
    output:
        npz="results/continuity/{model}/step{step}.npz",
        table="results/continuity/{model}/step{step}.tsv",
    log:
        "logs/continuity_statistics/{model}/step{step}.log",
    benchmark:
        "benchmarks/continuity_statistics/{model}/step{step}.tsv"
    conda:
        "../../envs/weights.yaml"  # projection_continuity's (effective_rank may import torch for wide operators)
    params:
        erank_power=CONTINUITY["erank_power"],
        pca_components=CONTINUITY["pca_components"],
        baseline_draws=CONTINUITY["baseline_draws"],
        seed=CONTINUITY["seed"],
        library=library_digest("continuity_statistics.py"),
    script:
        "../scripts/continuity_statistics.py"


rule summarize_continuity:
    input:
        tables=every_step("results/continuity/{model}/step{step}.tsv"),
    output:
        steps="results/continuity/{model}/steps.tsv",
    log:
        "logs/summarize_continuity/{model}.log",
    benchmark:
        "benchmarks/summarize_continuity/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        steps=get_model_steps,
        library=library_digest("summarize_continuity.py"),
    script:
        "../scripts/summarize_continuity.py"


rule continuity_table:
    input:
        steps=expand("results/continuity/{model}/steps.tsv", model=models_for("continuity")),
    output:
        table2=report(
            "results/continuity/table2.tsv",
            caption="../report/continuity_table2.rst",
            category="Continuity",
            subcategory="Tables",
            labels={"table": "Table 2"},
        ),
    log:
        "logs/continuity_table.log",
    benchmark:
        "benchmarks/continuity_table.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        models=models_for("continuity"),
        library=library_digest("continuity_table.py"),
    script:
        "../scripts/continuity_table.py"


rule plot_continuity:
    input:
        steps=rules.summarize_continuity.output.steps,
        npz=every_step("results/continuity/{model}/step{step}.npz"),
    output:
        **figure_outputs("continuity"),
    log:
        "logs/plot_continuity/{model}.log",
    benchmark:
        "benchmarks/plot_continuity/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_continuity.py"),
    script:
        "../scripts/plot_continuity.py"
