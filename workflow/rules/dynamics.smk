# Residual-stream dynamics (paper 004): activations -> exact block Jacobians -> spectra.
DYNAMICS = config["dynamics"]


rule extract_activations:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        text=rules.prepare_corpus.output.text,
    output:
        npz="results/dynamics/{model}/step{step}.activations.npz",
    log:
        "logs/extract_activations/{model}/step{step}.log",
    benchmark:
        "benchmarks/extract_activations/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"
    threads: DYNAMICS["threads"]
    resources:
        gpu=get_gpu_request(DYNAMICS["device"]),
    params:
        n_samples=DYNAMICS["n_samples"],
        min_tokens=DYNAMICS["min_tokens"],
        max_tokens=DYNAMICS["max_tokens"],
        device=DYNAMICS["device"],
    script:
        "../scripts/extract_activations.py"


rule block_jacobians:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        activations=rules.extract_activations.output.npz,
    output:
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
        chunk_mb=DYNAMICS["chunk_mb"],
        device=DYNAMICS["device"],
    script:
        "../scripts/block_jacobians.py"


rule jacobian_spectra:
    input:
        jacobians=rules.block_jacobians.output.npz,
    output:
        table="results/dynamics/{model}/step{step}.spectra.tsv",
    log:
        "logs/jacobian_spectra/{model}/step{step}.log",
    benchmark:
        "benchmarks/jacobian_spectra/{model}/step{step}.tsv"
    conda:
        "../../envs/analysis.yaml"
    threads: DYNAMICS["threads"]
    params:
        k=DYNAMICS["k"],
        baseline_draws=DYNAMICS["baseline_draws"],
        seed=DYNAMICS["seed"],
    script:
        "../scripts/jacobian_spectra.py"


rule plot_dynamics:
    input:
        tables=get_spectra_tables,
    output:
        depth=report(
            "results/figures/dynamics/{model}.depth_profiles.png",
            caption="../report/depth_profiles.rst",
            category="Dynamics",
            subcategory="{model}",
            labels={"model": "{model}", "figure": "depth profiles"},
        ),
        depth_pdf="results/figures/dynamics/{model}.depth_profiles.pdf",
    log:
        "logs/plot_dynamics/{model}.log",
    benchmark:
        "benchmarks/plot_dynamics/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        dpi=config["plots"]["dpi"],
    script:
        "../scripts/plot_dynamics.py"
