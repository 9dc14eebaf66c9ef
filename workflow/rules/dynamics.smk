# Residual-stream dynamics (paper 004): texts -> activations -> exact block Jacobians -> spectra,
# cumulative rank and Schur surgery -> regime table and figures.
DYNAMICS = config["dynamics"]
SAMPLES = DYNAMICS["samples"]


# Hub datasets need the internet, so texts are prepared where Snakemake runs, never on a node
# (localrule: in the rule, so that it holds under a module's renamed rules, e.g. crosslayer_*).
rule prepare_samples:
    input:
        text=rules.prepare_corpus.output.text if SAMPLES["source"] == "corpus" else [],
    output:
        samples="results/samples/texts.jsonl",
    log:
        "logs/prepare_samples.log",
    benchmark:
        "benchmarks/prepare_samples.tsv"
    localrule: True
    conda:
        "../../envs/samples.yaml"
    params:
        samples=cfg.samples_params(SAMPLES),
        library=library_digest("prepare_samples.py"),
    script:
        "../scripts/prepare_samples.py"


# Activations and Jacobians in one job: one load of the checkpoint (minutes at 8B scale), and
# every stage that reads activations (topology, gated alignment) also needs this stage.
rule block_jacobians:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        samples=rules.prepare_samples.output.samples,
    output:
        activations="results/dynamics/{model}/step{step}.activations.npz",
        npz="results/dynamics/{model}/step{step}.jacobians.npz",
    log:
        "logs/block_jacobians/{model}/step{step}.log",
    benchmark:
        "benchmarks/block_jacobians/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"
    threads: DYNAMICS["threads"]
    resources:
        gpu=get_gpu_request(DYNAMICS["device"]),
    params:
        n_samples=DYNAMICS["n_samples"],
        min_tokens=DYNAMICS["min_tokens"],
        max_tokens=DYNAMICS["max_tokens"],
        method=DYNAMICS["jacobian_method"],
        per_sample_dtype=DYNAMICS["per_sample_dtype"],
        condition_number=DYNAMICS["condition_number"],
        folds=DYNAMICS["folds"],
        library=library_digest("block_jacobians.py"),
    script:
        "../scripts/block_jacobians.py"


rule jacobian_spectra:
    input:
        jacobians=rules.block_jacobians.output.npz,
    output:
        table="results/dynamics/{model}/step{step}.spectra.tsv",
        eigenvalues="results/dynamics/{model}/step{step}.eigenvalues.npz",
    log:
        "logs/jacobian_spectra/{model}/step{step}.log",
    benchmark:
        "benchmarks/jacobian_spectra/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"  # spectra's torch paths
    threads: DYNAMICS["threads"]
    params:
        k=DYNAMICS["k"],
        baseline_draws=DYNAMICS["baseline_draws"],
        seed=DYNAMICS["seed"],
        rank=DYNAMICS["rank"],
        regime_boundaries=DYNAMICS["regime_boundaries"],
        library=library_digest("jacobian_spectra.py"),
    script:
        "../scripts/jacobian_spectra.py"


rule schur_surgery:
    input:
        jacobians=rules.block_jacobians.output.npz,
    output:
        table="results/dynamics/{model}/step{step}.schur.tsv",
    log:
        "logs/schur_surgery/{model}/step{step}.log",
    benchmark:
        "benchmarks/schur_surgery/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"  # spectra's torch paths
    threads: DYNAMICS["threads"]
    resources:
        gpu=get_gpu_request(DYNAMICS["schur"]["device"]),
    params:  # dynamics.schur.device and .workers are read from the config: speed only, they re-run nothing
        alphas=DYNAMICS["schur"]["alphas"],
        draws=DYNAMICS["schur"]["draws"],
        modes=DYNAMICS["schur"]["modes"],
        rank=DYNAMICS["rank"],
        seed=DYNAMICS["seed"],
        library=library_digest("schur_surgery.py"),
    script:
        "../scripts/schur_surgery.py"


rule bottleneck_folds:
    input:
        jacobians=rules.block_jacobians.output.npz,
    output:
        table="results/dynamics/{model}/step{step}.folds.tsv",
    log:
        "logs/bottleneck_folds/{model}/step{step}.log",
    benchmark:
        "benchmarks/bottleneck_folds/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"  # spectra's torch paths
    threads: DYNAMICS["threads"]
    resources:
        gpu=get_gpu_request(DYNAMICS["schur"]["device"]),
    params:  # as schur_surgery's: the device and the workers are read from the config
        rank=DYNAMICS["rank"],
        seed=DYNAMICS["seed"],
        library=library_digest("bottleneck_folds.py"),
    script:
        "../scripts/bottleneck_folds.py"


rule dynamics_regimes:
    input:
        tables=every_step("results/dynamics/{model}/step{step}.spectra.tsv"),
        folds=every_step("results/dynamics/{model}/step{step}.folds.tsv"),
    output:
        table=report(
            "results/dynamics/{model}/regimes.tsv",
            caption="../report/regimes.rst",
            category="Dynamics",
            subcategory="{model}",
            labels={"model": "{model}", "table": "depth regimes"},
        ),
        # Fig. 4b: Spearman of the spectral radius with the per-layer drop of the cumulative rank
        funnel="results/dynamics/{model}/radius_vs_rank_drop.tsv",
        # the cumulative bottleneck per sample fold, trained and without the non-normal part
        bottleneck=report(
            "results/dynamics/{model}/bottleneck.tsv",
            caption="../report/dynamics_bottleneck.rst",
            category="Dynamics",
            subcategory="{model}",
            labels={"model": "{model}", "table": "bottleneck per sample fold"},
        ),
    log:
        "logs/dynamics_regimes/{model}.log",
    benchmark:
        "benchmarks/dynamics_regimes/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        steps=get_model_steps,
        library=library_digest("dynamics_regimes.py"),
    script:
        "../scripts/dynamics_regimes.py"


rule plot_dynamics:
    input:
        tables=every_step("results/dynamics/{model}/step{step}.spectra.tsv"),
        eigenvalues=every_step("results/dynamics/{model}/step{step}.eigenvalues.npz"),
        schur=every_step("results/dynamics/{model}/step{step}.schur.tsv"),
    output:
        **figure_outputs("dynamics"),
    log:
        "logs/plot_dynamics/{model}.log",
    benchmark:
        "benchmarks/plot_dynamics/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_dynamics.py"),
    script:
        "../scripts/plot_dynamics.py"


# Every (model, step) of the dynamics stage, in order: the figure over all models reads them all.
DYNAMICS_CHECKPOINTS = [[model, step] for model in models_for("dynamics") for step in get_steps(model)]


rule plot_dynamics_models:
    input:
        schur=[f"results/dynamics/{model}/step{step}.schur.tsv" for model, step in DYNAMICS_CHECKPOINTS],
    output:
        recovery=report(
            "results/dynamics/schur_recovery.tsv",
            caption="../report/dynamics_schur_recovery.rst",
            category="Dynamics",
            subcategory="all models",
            labels={"table": "Schur surgery recovery"},
        ),
        **figure_outputs("dynamics", all_models=True),
    log:
        "logs/plot_dynamics_models.log",
    benchmark:
        "benchmarks/plot_dynamics_models.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        checkpoints=DYNAMICS_CHECKPOINTS,
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_dynamics_models.py"),
    script:
        "../scripts/plot_dynamics_models.py"
