# Cross-layer alignment of MLP products W_down @ W_up over training (paper 000).
ALIGNMENT = config["alignment"]


rule mlp_alignment:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
    output:
        npz="results/alignment/{model}/step{step}.npz",
    log:
        "logs/mlp_alignment/{model}/step{step}.log",
    benchmark:
        "benchmarks/mlp_alignment/{model}/step{step}.tsv"
    conda:
        "../../envs/weights.yaml"
    threads: ALIGNMENT["threads"]
    resources:
        gpu=get_gpu_request(ALIGNMENT["device"]),
    params:
        k=ALIGNMENT["k"],
        svd_method=ALIGNMENT["svd_method"],
        gap_tol=ALIGNMENT["gap_tol"],
        library=library_digest("mlp_alignment.py"),
    script:
        "../scripts/mlp_alignment.py"


rule summarize_alignment:
    input:
        npz=every_step("results/alignment/{model}/step{step}.npz"),
    output:
        adjacent="results/alignment/{model}/adjacent.tsv",
        table1="results/alignment/{model}/table1.tsv",
        cascade="results/alignment/{model}/cascade.tsv",
        cascade_fit="results/alignment/{model}/cascade_fit.tsv",
        baseline="results/alignment/{model}/baseline.tsv",
    log:
        "logs/summarize_alignment/{model}.log",
    benchmark:
        "benchmarks/summarize_alignment/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        steps=get_model_steps,
        reference_step=get_reference_step,
        threshold=ALIGNMENT["threshold"],
        distances=ALIGNMENT["distances"],
        baseline_draws=ALIGNMENT["baseline_draws"],
        seed=ALIGNMENT["seed"],
        peak_min_sd=ALIGNMENT["peak_min_sd"],
        library=library_digest("summarize_alignment.py"),
    script:
        "../scripts/summarize_alignment.py"


rule alignment_table:
    input:
        table1=expand("results/alignment/{model}/table1.tsv", model=models_for("alignment")),
        cascade_fit=expand("results/alignment/{model}/cascade_fit.tsv", model=models_for("alignment")),
    output:
        table1=report(
            "results/alignment/table1.tsv",
            caption="../report/table1.rst",
            category="Alignment",
            subcategory="Tables",
            labels={"table": "Table 1"},
        ),
        cascade_fit=report(
            "results/alignment/cascade_fit.tsv",
            caption="../report/cascade_fit.rst",
            category="Alignment",
            subcategory="Tables",
            labels={"table": "backward cascade"},
        ),
    log:
        "logs/alignment_table.log",
    benchmark:
        "benchmarks/alignment_table.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        models=models_for("alignment"),
        library=library_digest("alignment_table.py"),
    script:
        "../scripts/alignment_table.py"


rule plot_alignment:
    input:
        npz=every_step("results/alignment/{model}/step{step}.npz"),
        adjacent=rules.summarize_alignment.output.adjacent,
        baseline=rules.summarize_alignment.output.baseline,
    output:
        **figure_outputs("alignment"),
    log:
        "logs/plot_alignment/{model}.log",
    benchmark:
        "benchmarks/plot_alignment/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        k=ALIGNMENT["k"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_alignment.py"),
    script:
        "../scripts/plot_alignment.py"


rule plot_alignment_overview:
    input:
        adjacent=expand("results/alignment/{model}/adjacent.tsv", model=models_for("alignment")),
        baseline=expand("results/alignment/{model}/baseline.tsv", model=models_for("alignment")),
    output:
        **figure_outputs("alignment", all_models=True),
    log:
        "logs/plot_alignment_overview.log",
    benchmark:
        "benchmarks/plot_alignment_overview.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        models=models_for("alignment"),
        k=ALIGNMENT["k"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_alignment_overview.py"),
    script:
        "../scripts/plot_alignment_overview.py"


# Paper 000's next step for gated MLPs: W_down diag(mean g) W_up, g the gate activation at the MLP
# input over the dynamics stage's samples (so it needs that stage's residual stream).
rule gated_alignment:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        activations="results/dynamics/{model}/step{step}.activations.npz",
    output:
        npz="results/alignment/{model}/step{step}.gated.npz",
    log:
        "logs/gated_alignment/{model}/step{step}.log",
    benchmark:
        "benchmarks/gated_alignment/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"
    threads: ALIGNMENT["threads"]
    params:
        k=ALIGNMENT["k"],
        svd_method=ALIGNMENT["svd_method"],
        gap_tol=ALIGNMENT["gap_tol"],
        library=library_digest("gated_alignment.py"),
    script:
        "../scripts/gated_alignment.py"


rule gated_table:
    input:
        static=[f"results/alignment/{m}/step{s}.npz" for m in gated_models() for s in get_steps(m)],
        gated=[f"results/alignment/{m}/step{s}.gated.npz" for m in gated_models() for s in get_steps(m)],
    output:
        tsv=report(
            "results/alignment/gated.tsv",
            caption="../report/gated_table.rst",
            category="Alignment",
            subcategory="Tables",
            labels={"table": "gate-conditioned"},
        ),
    log:
        "logs/gated_table.log",
    benchmark:
        "benchmarks/gated_table.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        models=[m for m in gated_models() for s in get_steps(m)],
        steps=[s for m in gated_models() for s in get_steps(m)],
        library=library_digest("gated_table.py"),
    script:
        "../scripts/gated_table.py"
